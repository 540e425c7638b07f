//! Quoted content: the parts of a query that are not the user's own request (text between
//! paired quotation marks, the text after an `embedded` phrase, identifiers such as
//! `delete_me.txt`), as byte ranges of the normalized text ([`quoted_ranges`],
//! [`in_identifier`]).

use super::automaton::{Found, Target};

/// Fills `out` with the quoted content of normalized `text` but for identifiers (see
/// [`in_identifier`]), as sorted disjoint byte ranges: the text after the first `embedded`
/// phrase in `marks` (to the end), and text between paired quotation marks. One pass over the
/// text, skipped when it holds no quotation mark.
pub(super) fn quoted_ranges(
    text: &[u8],
    words: &[(usize, usize)],
    marks: &[Found],
    out: &mut Vec<(usize, usize)>,
) {
    out.clear();
    if let Some(g) = marks
        .iter()
        .find(|g| matches!(g.target, Target::Embedded(_)))
    {
        out.push((g.end, text.len()));
    }
    // A fold without early exit, which the compiler vectorizes: most queries hold no mark.
    let marked = text.iter().fold(false, |any, &b| {
        any | matches!(b, b'"' | b'`' | b'\'' | 0xC2 | 0xE2 | 0xE3)
    });
    if !marked {
        return;
    }
    quotation_ranges(text, words, out);
    out.sort_unstable();
    // Merge overlapping ranges.
    let mut w = 0;
    for r in 0..out.len() {
        if w > 0 && out[r].0 <= out[w - 1].1 {
            out[w - 1].1 = out[w - 1].1.max(out[r].1);
        } else {
            out[w] = out[r];
            w += 1;
        }
    }
    out.truncate(w);
}

/// The closing mark that pairs with the opening quotation mark at the start of `b`, and the
/// opener's length: `"` and `` ` `` close themselves, `“` closes with `”` (or `“`), `„` with
/// `“` or `”`, `«` with `»`, `‹` with `›`, `「` with `」`, `『` with `』`, and `'` with `'`.
fn quote_opener(b: &[u8]) -> Option<(&'static [&'static [u8]], usize, usize)> {
    const DOUBLE: &[&[u8]] = &[b"\"", "\u{201D}".as_bytes(), "\u{201C}".as_bytes()];
    const CURLY: &[&[u8]] = &["\u{201D}".as_bytes(), "\u{201C}".as_bytes()];
    const GUILLEMET: &[&[u8]] = &["\u{BB}".as_bytes()];
    const SINGLE_GUILLEMET: &[&[u8]] = &["\u{203A}".as_bytes()];
    const CORNER: &[&[u8]] = &["\u{300D}".as_bytes()];
    const WHITE_CORNER: &[&[u8]] = &["\u{300F}".as_bytes()];
    const BACKTICK: &[&[u8]] = &[b"`"];
    const APOSTROPHE: &[&[u8]] = &[b"'"];
    let table: [(&[u8], &'static [&'static [u8]]); 9] = [
        (b"\"", DOUBLE),
        ("\u{201C}".as_bytes(), CURLY),
        ("\u{201E}".as_bytes(), CURLY),
        ("\u{AB}".as_bytes(), GUILLEMET),
        ("\u{2039}".as_bytes(), SINGLE_GUILLEMET),
        ("\u{300C}".as_bytes(), CORNER),
        ("\u{300E}".as_bytes(), WHITE_CORNER),
        (b"`", BACKTICK),
        (b"'", APOSTROPHE),
    ];
    table
        .iter()
        .enumerate()
        .find(|(_, (open, _))| b.starts_with(open))
        .map(|(kind, &(open, close))| (close, open.len(), kind))
}

/// Whether byte `i` of `text` is a letter or digit (any non-ASCII byte counts as a letter).
fn wordy(text: &[u8], i: usize) -> bool {
    text.get(i)
        .is_some_and(|&b| b.is_ascii_alphanumeric() || b >= 0x80)
}

/// Adds to `out` the text between paired quotation marks of `text` (the marks included), whose
/// words are `words`. A mark opens where no letter or digit stands before it (`don't` holds no
/// quotation) and closes at the first matching mark after it, which for `'` must have no letter
/// or digit after it; quotation marks inside a quotation are read as text. An unclosed mark
/// quotes nothing. Only the bytes between words are read (a quotation mark is never inside a
/// word), in one pass, begun again after an unclosed mark at most once per kind of mark.
fn quotation_ranges(text: &[u8], words: &[(usize, usize)], out: &mut Vec<(usize, usize)>) {
    let mut unclosed = [false; 9];
    let mut resume = 0;
    'pass: loop {
        // The open quotation: its kind, where it starts, its closing marks.
        let mut open: Option<(usize, usize, &'static [&'static [u8]])> = None;
        let gaps = std::iter::once(0)
            .chain(words.iter().map(|w| w.1))
            .zip(words.iter().map(|w| w.0).chain([text.len()]));
        for (from, to) in gaps {
            for j in from.max(resume)..to {
                let b = text[j];
                if !matches!(b, b'"' | b'`' | b'\'' | 0xC2 | 0xE2 | 0xE3) {
                    continue;
                }
                match open {
                    Some((_, start, closers)) => {
                        if let Some(c) = closers.iter().find(|c| text[j..].starts_with(c)) {
                            let apostrophe = text[start] == b'\'';
                            if !apostrophe || !wordy(text, j + c.len()) {
                                out.push((start, j + c.len()));
                                open = None;
                            }
                        }
                    }
                    None => {
                        if j > 0 && wordy(text, j - 1) {
                            continue;
                        }
                        let Some((closers, len, kind)) = quote_opener(&text[j..]) else {
                            continue;
                        };
                        if unclosed[kind] || (b == b'\'' && !wordy(text, j + len)) {
                            continue;
                        }
                        open = Some((kind, j, closers));
                    }
                }
            }
        }
        match open {
            // No closing mark after it, so none after a later opener of its kind either: read
            // again from just after it.
            Some((kind, start, _)) => {
                unclosed[kind] = true;
                resume = start + 1;
                continue 'pass;
            }
            None => break,
        }
    }
}

/// The most bytes [`in_identifier`] reads on each side of a hit.
const IDENTIFIER_REACH: usize = 64;

/// Whether the hit at `start..end` of normalized `text` stands in an identifier: a run of
/// characters other than space that holds `_`, `/`, `\\`, `@`, or a `.` between two letters or
/// digits (`delete_invoice`, `remove_old.sh`, `delete-me.txt`, `/tmp/x`), or that runs on for
/// more than [`IDENTIFIER_REACH`] bytes on one side of the hit (no word of a language is that
/// long). Reads at most that many bytes on each side, so a query's hits cost linear time.
pub(super) fn in_identifier(text: &[u8], start: usize, end: usize) -> bool {
    let lo = start.saturating_sub(IDENTIFIER_REACH);
    let hi = (end + IDENTIFIER_REACH).min(text.len());
    let from = match text[lo..start].iter().rposition(|&b| b == b' ') {
        Some(p) => lo + p + 1,
        None if lo > 0 => return true,
        None => 0,
    };
    let to = match text[end..hi].iter().position(|&b| b == b' ') {
        Some(p) => end + p,
        None if hi < text.len() => return true,
        None => text.len(),
    };
    let token = &text[from..to];
    token.iter().enumerate().any(|(k, &b)| match b {
        b'_' | b'/' | b'\\' | b'@' => true,
        b'.' => wordy(token, k.wrapping_sub(1)) && wordy(token, k + 1),
        _ => false,
    })
}

/// Whether the byte range `start..end` lies inside one of `ranges` (sorted, disjoint).
pub(super) fn in_ranges(ranges: &[(usize, usize)], start: usize, end: usize) -> bool {
    let i = ranges.partition_point(|r| r.0 <= start);
    i > 0 && ranges[i - 1].1 >= end
}
