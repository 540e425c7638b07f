//! Quoted content: the parts of a query that are not the user's own request (text between
//! paired quotation marks, the text after an `embedded` phrase, identifiers such as
//! `delete_me.txt`), as byte ranges of the normalized text ([`quoted_ranges`],
//! [`in_identifier`]).

use super::automaton::{Found, Target};

/// Fills `out` with the quoted content of normalized `text` but for identifiers (see
/// [`in_identifier`]), as sorted disjoint byte ranges: the text after the first `embedded`
/// phrase in `marks` (to the end), and text between paired quotation marks. A query without a
/// quotation mark costs one pass; in one that holds some, a vectorized search (`memchr`) finds
/// them.
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
    // A fold without early exit, which the compiler vectorizes: most queries hold no mark, and
    // this is cheaper than setting up the searches.
    let marked = text.iter().fold(false, |any, &b| {
        any | matches!(b, b'"' | b'`' | b'\'' | 0xC2 | 0xE2 | 0xE3)
    });
    if !marked {
        return;
    }
    let embedded = out.len();
    quotation_ranges(text, words, out);
    if out.len() == embedded {
        return;
    }
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

/// The opening quotation marks in the order their kinds are numbered, each with the marks that
/// close it (see [`quote_opener`]).
static OPENERS: [(&[u8], &[&[u8]]); 9] = {
    const DOUBLE: &[&[u8]] = &[b"\"", "\u{201D}".as_bytes(), "\u{201C}".as_bytes()];
    const CURLY: &[&[u8]] = &["\u{201D}".as_bytes(), "\u{201C}".as_bytes()];
    const GUILLEMET: &[&[u8]] = &["\u{BB}".as_bytes()];
    const SINGLE_GUILLEMET: &[&[u8]] = &["\u{203A}".as_bytes()];
    const CORNER: &[&[u8]] = &["\u{300D}".as_bytes()];
    const WHITE_CORNER: &[&[u8]] = &["\u{300F}".as_bytes()];
    const BACKTICK: &[&[u8]] = &[b"`"];
    const APOSTROPHE: &[&[u8]] = &[b"'"];
    [
        (b"\"", DOUBLE),
        ("\u{201C}".as_bytes(), CURLY),
        ("\u{201E}".as_bytes(), CURLY),
        ("\u{AB}".as_bytes(), GUILLEMET),
        ("\u{2039}".as_bytes(), SINGLE_GUILLEMET),
        ("\u{300C}".as_bytes(), CORNER),
        ("\u{300E}".as_bytes(), WHITE_CORNER),
        (b"`", BACKTICK),
        (b"'", APOSTROPHE),
    ]
};

/// The closing marks that pair with the opening quotation mark at the start of `b`, the
/// opener's length and its kind (its index in [`OPENERS`]): `"` and `` ` `` close themselves,
/// `“` closes with `”` (or `“`), `„` with `“` or `”`, `«` with `»`, `‹` with `›`, `「` with
/// `」`, `『` with `』`, and `'` with `'`.
fn quote_opener(b: &[u8]) -> Option<(&'static [&'static [u8]], usize, usize)> {
    OPENERS
        .iter()
        .enumerate()
        .find(|(_, (open, _))| b.starts_with(open))
        .map(|(kind, &(open, close))| (close, open.len(), kind))
}

/// The offsets of `text` from `from` on, ascending, that may start a quotation mark: `"` `` ` ``
/// `'` and the lead bytes 0xC2, 0xE2, 0xE3 of the others (two searches, merged).
struct MarkCandidates<'a> {
    ascii: memchr::Memchr3<'a>,
    leads: memchr::Memchr3<'a>,
    /// The next offset of each search not yet returned (relative to `from`).
    next: (Option<usize>, Option<usize>),
    from: usize,
}

impl<'a> MarkCandidates<'a> {
    fn new(text: &'a [u8], from: usize) -> MarkCandidates<'a> {
        let rest = text.get(from..).unwrap_or_default();
        let mut ascii = memchr::memchr3_iter(b'"', b'`', b'\'', rest);
        let mut leads = memchr::memchr3_iter(0xC2, 0xE2, 0xE3, rest);
        let next = (ascii.next(), leads.next());
        MarkCandidates {
            ascii,
            leads,
            next,
            from,
        }
    }
}

impl Iterator for MarkCandidates<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        let at = match self.next {
            (Some(a), Some(l)) if l < a => {
                self.next.1 = self.leads.next();
                l
            }
            (Some(a), _) => {
                self.next.0 = self.ascii.next();
                a
            }
            (None, Some(l)) => {
                self.next.1 = self.leads.next();
                l
            }
            (None, None) => return None,
        };
        Some(self.from + at)
    }
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
/// quotes nothing. Only the marks between words are read (an apostrophe inside a word, as in
/// "don't", is none), in one pass, begun again after an unclosed mark at most once per kind
/// of mark.
fn quotation_ranges(text: &[u8], words: &[(usize, usize)], out: &mut Vec<(usize, usize)>) {
    let mut unclosed = [false; 9];
    let mut resume = 0;
    'pass: loop {
        // The open quotation: its kind, where it starts, its closing marks.
        let mut open: Option<(usize, usize, &'static [&'static [u8]])> = None;
        // The first word that does not end at or before the candidate: the candidates ascend.
        let mut w = 0;
        for j in MarkCandidates::new(text, resume) {
            while words.get(w).is_some_and(|r| r.1 <= j) {
                w += 1;
            }
            if words.get(w).is_some_and(|r| r.0 <= j) {
                // Inside a word (an apostrophe in "don't", `"` in צה"ל).
                continue;
            }
            let b = text[j];
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

#[cfg(test)]
mod tests {
    use super::super::words::word_ranges_into;
    use super::*;

    /// The quoted ranges of `text` (taken as normalized), without `embedded` phrases.
    fn ranges(text: &str) -> Vec<(usize, usize)> {
        let mut words = Vec::new();
        word_ranges_into(text, &mut words);
        let mut out = Vec::new();
        quoted_ranges(text.as_bytes(), &words, &[], &mut out);
        out
    }

    /// The byte range of `text` from the first `open` to the end of the first `close` after
    /// it (`open` itself not read as `close`).
    fn span(text: &str, open: &str, close: &str) -> (usize, usize) {
        let start = text.find(open).unwrap_or(0);
        let after = start + open.len();
        let end = text[after..].find(close).unwrap_or(0) + after + close.len();
        (start, end)
    }

    #[test]
    fn quotation_marks_make_byte_ranges_with_the_marks() {
        assert_eq!(ranges("say \"delete it\" now"), vec![(4, 15)]);
        assert_eq!(ranges("no quotation here"), vec![]);
        // `«` and `»` are two bytes each: offsets count bytes, not characters.
        assert_eq!(ranges("«a» «b»"), vec![(0, 5), (6, 11)]);
        assert_eq!(ranges("é «delete» x"), vec![(3, 13)]);
        let text = "ü — „remove“ and 「消す」 or ‹x› and “y” and 『z』 `rm` 'drop'";
        let want = vec![
            span(text, "„", "“"),
            span(text, "「", "」"),
            span(text, "‹", "›"),
            span(text, "“y", "”"),
            span(text, "『", "』"),
            span(text, "`", "`"),
            span(text, "'", "'"),
        ];
        assert_eq!(want[0], (7, 19));
        assert_eq!(ranges(text), want);
    }

    #[test]
    fn apostrophes_inside_words_open_nothing() {
        assert_eq!(ranges("don't 'x' it's"), vec![(6, 9)]);
        assert_eq!(ranges("month's 'delete'"), vec![(8, 16)]);
        // A `'` after a letter (and so inside or at the end of a word) opens nothing.
        assert_eq!(ranges("the users' 'files'"), vec![(11, 18)]);
    }

    #[test]
    fn an_unclosed_mark_quotes_nothing_and_later_marks_pair() {
        assert_eq!(ranges("\"a 'b' c"), vec![(3, 6)]);
        assert_eq!(ranges("«a “b” c"), vec![(4, 11)]);
        assert_eq!(ranges("\"a"), vec![]);
    }

    /// The quotation pass as first written: every byte between words, in turn.
    fn byte_by_byte(text: &[u8], words: &[(usize, usize)], out: &mut Vec<(usize, usize)>) {
        let mut unclosed = [false; 9];
        let mut resume = 0;
        'pass: loop {
            let mut open: Option<(usize, usize, &'static [&'static [u8]])> = None;
            let gaps = std::iter::once(0)
                .chain(words.iter().map(|w| w.1))
                .zip(words.iter().map(|w| w.0).chain([text.len()]));
            for (from, to) in gaps {
                for j in from.max(resume)..to {
                    let b = text[j];
                    match open {
                        Some((_, start, closers)) => {
                            if let Some(c) = closers.iter().find(|c| text[j..].starts_with(c)) {
                                if text[start] != b'\'' || !wordy(text, j + c.len()) {
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
                Some((kind, start, _)) => {
                    unclosed[kind] = true;
                    resume = start + 1;
                    continue 'pass;
                }
                None => break,
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]
        #[test]
        fn the_mark_search_agrees_with_reading_every_byte(
            parts in proptest::collection::vec(proptest::sample::select(vec![
                "a", "delete", "é", "ü", "صورت", " ", " ", ",", ".", "-", "—", "\"", "'", "`",
                "“", "”", "„", "«", "»", "‹", "›", "「", "」", "『", "』", "’", "…", "消",
            ]), 0..40)
        ) {
            let text: String = parts.concat();
            let mut words = Vec::new();
            word_ranges_into(&text, &mut words);
            let mut want = Vec::new();
            byte_by_byte(text.as_bytes(), &words, &mut want);
            let mut got = Vec::new();
            quotation_ranges(text.as_bytes(), &words, &mut got);
            proptest::prop_assert_eq!(got, want, "{:?}", text);
        }
    }
}
