//! Text normalization for keyword matching ([`normalize`]): keywords and queries go through the
//! same steps, in one pass over the text, with a map from the normalized text back to the
//! original byte offsets ([`Normalized::origin`]).

use unicode_normalization::char::{canonical_combining_class, decompose_compatible};

/// Text normalized for matching, with a map back to the original byte offsets.
#[derive(Clone, Debug, Default)]
pub struct Normalized {
    /// The normalized text.
    pub text: String,
    /// For each byte of `text`, a byte offset in the original: of the byte it was copied from
    /// (in a run copied unchanged), or else of the character it came from; at every character
    /// boundary of `text` that is the offset of the original character. One extra entry holds
    /// `end`. Empty when the map is the identity (every byte in place, as in lower-cased ASCII
    /// or Persian text with single spaces).
    origin: Vec<u32>,
    /// The original text's length without its trailing white space (and ZWNJ).
    end: u32,
    /// Byte offsets in `text`, ascending, of the spaces that stand for ZWNJ alone (a run of
    /// white space made only of ZWNJ): a keyword may read each as a space or as nothing.
    pub(super) zwnj_spaces: Vec<usize>,
}

impl Normalized {
    /// Empty text, with no buffer allocated (a `const` [`Default`]).
    pub(super) const fn new() -> Normalized {
        Normalized {
            text: String::new(),
            origin: Vec::new(),
            end: 0,
            zwnj_spaces: Vec::new(),
        }
    }

    /// The byte offset in the original text of the character that produced byte `byte` of
    /// [`Normalized::text`] (`byte` on a character boundary); `text.len()` and past it map to
    /// the end of the original text's last character that is not white space.
    pub fn origin(&self, byte: usize) -> usize {
        if self.origin.is_empty() {
            return if byte >= self.text.len() {
                self.end as usize
            } else {
                byte
            };
        }
        let last = self.origin.len() - 1;
        self.origin[byte.min(last)] as usize
    }

    /// The end, in the original text, of the match ending at normalized byte `end`: the offset
    /// of the next original character that produced output (so characters the normalization
    /// removed right after the match, such as combining accents, are included).
    pub fn origin_end(&self, end: usize) -> usize {
        if self.origin.is_empty() {
            return self.origin(end);
        }
        if end == 0 {
            return 0;
        }
        let last = self.origin.len() - 1;
        let start = self.origin[(end - 1).min(last)];
        self.origin[end.min(last)..]
            .iter()
            .copied()
            .find(|&o| o > start)
            .unwrap_or(self.origin[last]) as usize
    }
}

/// Normalizes text for keyword matching; keywords and queries go through the same steps:
///
/// 1. Unicode compatibility normalization: each character is given its full compatibility
///    decomposition (NFKD) and runs of combining marks are put in canonical order. NFKD and NFKC
///    define the same equivalence (two strings have equal NFKC forms exactly when they have equal
///    NFKD forms), so matching on NFKD text is matching under NFKC, without the recomposition
///    pass: fullwidth `ｄｅｌｅｔｅ` reads `delete`, ligatures `ﬁ` read `fi`, and precomposed
///    `é` and `e` + U+0301 agree.
/// 2. Case folding: full Unicode lower-case mapping, plus the folds lower-casing misses: `ß` and
///    `ẞ` -> `ss`, final sigma `ς` -> `σ`.
/// 3. Zero-width characters removed: U+200B (zero-width space), U+2060 (word joiner), U+FEFF
///    (BOM / zero-width no-break space), U+00AD (soft hyphen) and U+200D (zero-width joiner);
///    so are the other invisible format characters that could split a keyword unseen:
///    direction marks and embeddings (U+200E/F, U+061C, U+202A–U+202E, U+2066–U+206F),
///    invisible operators (U+2061–U+2064), U+180E, U+034F, variation selectors (U+FE00–U+FE0F,
///    U+E0100–U+E01EF), tags (U+E0000–U+E007F) and the Hangul fillers.
/// 4. White space: every run of white space (Unicode `White_Space`) becomes one space, and
///    leading and trailing space is dropped. ZWNJ (U+200C) counts as white space here; because it
///    is a joiner that must match "a space or nothing", a space that stands for ZWNJ alone is
///    recorded, the classifier's keyword walk reads it both ways, and keywords written with ZWNJ
///    are compiled in both spellings, joined and spaced.
/// 5. Arabic-script unification: Arabic yeh `ي` and alef maksura `ى` -> Persian yeh `ی`, Arabic
///    kaf `ك` -> Persian kaf `ک`; tatweel U+0640 and harakat (U+064B–U+0652, superscript alef
///    U+0670) removed.
/// 6. Digits: Persian (U+06F0–U+06F9) and Arabic-Indic (U+0660–U+0669) digits -> ASCII `0`–`9`.
/// 7. Apostrophes and hyphens: the typographic `‘` `’`, the modifier letters `ʼ` `ʹ` `ʻ`, the
///    prime `′` and the acute accent `´` typed for one -> ASCII `'`, so a phone keyboard's
///    "don’t" is the negator "don't"; the hyphens U+2010 and U+2011 (non-breaking) -> `-`; the
///    Arabic decimal and thousands separators `٫` `٬` -> `.` `,` (so "۳٫۵" reads "3.5").
/// 8. Accent folding, when `fold_accents` is true (the default; `accents keep` in a policy turns
///    it off): the combining diacritics U+0300–U+036F that step 1 split off Latin letters are
///    removed, so `devolução` reads `devolucao` and `bórralo` reads `borralo`.
pub fn normalize(text: &str, fold_accents: bool) -> Normalized {
    let mut out = Normalized::default();
    normalize_into(text, fold_accents, &mut out);
    out
}

/// [`normalize`] into `out` (its buffers are cleared and reused).
///
/// The byte-offset map is kept only once it stops being the identity: while every character so
/// far produced exactly as many bytes as it had (lower-cased ASCII, Persian letters, single
/// spaces), `out.origin` stays empty.
pub(super) fn normalize_into(text: &str, fold_accents: bool, out: &mut Normalized) {
    out.text.clear();
    out.origin.clear();
    out.zwnj_spaces.clear();
    let trimmed = text.trim_end_matches(|c: char| c.is_whitespace() || c == '\u{200C}');
    out.end = u32::try_from(trimmed.len()).unwrap_or(u32::MAX);
    let bytes = text.as_bytes();
    if text.is_ascii() && !needs_space_fix(bytes) {
        // Lower-casing ASCII keeps every byte in place: the map stays the identity.
        out.text.push_str(text);
        out.text.make_ascii_lowercase();
        return;
    }
    out.text.reserve(text.len());
    let table = char_table(fold_accents);
    let mut sink = Sink {
        out,
        identity: true,
        marks: Vec::new(),
    };
    let mut last_space = true; // trims leading space
    let mut offset = 0;
    while offset < bytes.len() {
        let run = copy_run(text, offset, table);
        if run > offset {
            sink.flush_marks();
            sink.copy(text, offset, run);
            last_space = bytes[run - 1] == b' ';
            offset = run;
            continue;
        }
        let before = sink.out.text.len();
        let at = u32::try_from(offset).unwrap_or(u32::MAX);
        let b = bytes[offset];
        if b < 0x80 {
            offset += 1;
            if is_ascii_space(b) {
                sink.space(&mut last_space, at);
            } else {
                sink.flush_marks();
                sink.push(char::from(b.to_ascii_lowercase()), at);
                last_space = false;
            }
            sink.settle(before, at, offset, true);
            continue;
        }
        let Some(c) = char_at(text, offset) else {
            break;
        };
        offset += c.len_utf8();
        let fast = table.get(c as usize - 0x80).copied().unwrap_or(Fast::Full);
        // Only a character that becomes one character keeps offsets in place.
        let single = !matches!(fast, Fast::Full | Fast::Drop);
        match fast {
            Fast::Keep => {
                sink.flush_marks();
                sink.push(c, at);
                last_space = false;
            }
            Fast::Char(m) => {
                sink.flush_marks();
                sink.push(m, at);
                last_space = false;
            }
            Fast::Drop => {}
            Fast::Space => sink.space(&mut last_space, at),
            Fast::Full if c.is_whitespace() => sink.space(&mut last_space, at),
            Fast::Full if c == '\u{200C}' => sink.zwnj(&mut last_space, at),
            Fast::Full => each_normalized(c, fold_accents, |m| {
                // A compatibility decomposition may hold a space (`´` is a space and an accent).
                if m.is_whitespace() {
                    sink.space(&mut last_space, at);
                    return;
                }
                let ccc = canonical_combining_class(m);
                if ccc == 0 {
                    sink.flush_marks();
                    sink.push(m, at);
                } else {
                    sink.marks.push((ccc, m, at));
                }
                last_space = false;
            }),
        }
        sink.settle(before, at, offset, single);
    }
    sink.flush_marks();
    let Sink { out, identity, .. } = sink;
    if out.text.ends_with(' ') {
        out.text.pop();
        if !identity {
            out.origin.pop();
        }
        if out.zwnj_spaces.last() == Some(&out.text.len()) {
            out.zwnj_spaces.pop();
        }
    }
    if !identity {
        out.origin.push(out.end);
    }
}

/// The end of the run of `text` from byte `start` that [`normalize`] copies unchanged but for
/// ASCII case: ASCII characters other than white space, single spaces after them, and
/// characters whose [`Fast`] entry is `Keep`. Returns `start` when the run is empty.
fn copy_run(text: &str, start: usize, table: &[Fast]) -> usize {
    let bytes = text.as_bytes();
    let mut i = start;
    let mut prev_space = true;
    while let Some(&b) = bytes.get(i) {
        if b < 0x80 && i > start && bytes[i - 1] < 0x80 {
            // Inside ASCII text, eight bytes at a time while they are printable with no two
            // spaces in a row.
            let from = i;
            while let Some(chunk) = bytes.get(i..i + 8) {
                let x = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
                let spaces = ascii_spaces(x);
                if !is_printable_ascii(x)
                    || spaces & (spaces << 8) != 0
                    || (prev_space && spaces & 0x80 != 0)
                {
                    break;
                }
                prev_space = spaces >> 63 != 0;
                i += 8;
            }
            if i > from {
                continue;
            }
        }
        if b < 0x80 {
            // ASCII other than white space, and single spaces.
            if b > b' ' {
                prev_space = false;
            } else if b == b' ' && !prev_space {
                prev_space = true;
            } else if b < b' ' && !is_ascii_space(b) {
                prev_space = false;
            } else {
                break;
            }
            i += 1;
            continue;
        }
        if let (0xC2..=0xDF, Some(&next)) = (b, bytes.get(i + 1)) {
            // A two-byte character, looked up without decoding it to a `char` first.
            if !matches!(table.get(two_byte(b, next) - 0x80), Some(Fast::Keep)) {
                break;
            }
            prev_space = false;
            i += 2;
            continue;
        }
        let Some(c) = char_at(text, i) else {
            break;
        };
        if !matches!(table.get(c as usize - 0x80), Some(Fast::Keep)) {
            break;
        }
        prev_space = false;
        i += c.len_utf8();
    }
    i
}

/// High bit of each byte: the SWAR masks of [`copy_run`].
const HIGH_BITS: u64 = 0x8080_8080_8080_8080;

/// Whether all eight bytes of `x` are ASCII at or above U+0020.
#[inline]
fn is_printable_ascii(x: u64) -> bool {
    // With no high bit set, adding 0x60 to a byte carries into its high bit exactly when the
    // byte is at least 0x20, and never into the next byte.
    x & HIGH_BITS == 0 && x.wrapping_add(0x6060_6060_6060_6060) & HIGH_BITS == HIGH_BITS
}

/// The high bit of each byte of `x` (all ASCII) that is a space.
#[inline]
fn ascii_spaces(x: u64) -> u64 {
    let y = x ^ 0x2020_2020_2020_2020;
    // A byte of `y` is zero exactly where `x` has a space: adding 0x7F to its low seven bits
    // sets the high bit of every other byte.
    !((y & !HIGH_BITS).wrapping_add(!HIGH_BITS) | y) & HIGH_BITS
}

/// The code point (below U+0800) of the two-byte UTF-8 sequence `lead`, `next`.
#[inline(always)]
pub(super) fn two_byte(lead: u8, next: u8) -> usize {
    usize::from(lead & 0x1F) << 6 | usize::from(next & 0x3F)
}

/// The character of `text` that starts at byte `at`, if one does (a fast path for the
/// two-byte characters of Latin, Greek, Cyrillic, Hebrew and Arabic text).
#[inline]
fn char_at(text: &str, at: usize) -> Option<char> {
    let bytes = text.as_bytes();
    match *bytes.get(at)? {
        b @ 0xC2..=0xDF => {
            let next = *bytes.get(at + 1)?;
            char::from_u32(two_byte(b, next) as u32)
        }
        _ => text.get(at..)?.chars().next(),
    }
}

/// Steps 1, 2, 3, 5, 6, 7 and 8 of [`normalize`] for one character that is not white space or
/// ZWNJ: calls `emit` with each character it becomes, in order, before canonical ordering of
/// combining marks.
fn each_normalized(c: char, fold_accents: bool, mut emit: impl FnMut(char)) {
    // The acute accent typed as an apostrophe ("don´t"): its compatibility decomposition is a
    // space and a combining accent, which would split the word.
    if c == '\u{00B4}' {
        emit('\'');
        return;
    }
    decompose_compatible(c, |d| {
        for l in d.to_lowercase() {
            match l {
                'ß' => {
                    emit('s');
                    emit('s');
                }
                'ς' => emit('σ'),
                _ => {
                    if let Some(m) = map_char(l, fold_accents) {
                        emit(m);
                    }
                }
            }
        }
    });
}

/// How [`normalize_into`] treats one character of U+0080–U+07FF (the two-byte UTF-8
/// characters: Latin-1, Latin Extended, Greek, Cyrillic, Hebrew, Arabic), computed once from
/// [`each_normalized`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fast {
    /// Becomes itself.
    Keep,
    /// Becomes this one character, a starter (combining class 0).
    Char(char),
    /// Removed.
    Drop,
    /// White space.
    Space,
    /// Becomes several characters or combining marks: take the full path.
    Full,
}

/// The [`Fast`] entry of each character from U+0080 up to U+07FF, for text normalized with or
/// without accent folding.
fn char_table(fold_accents: bool) -> &'static [Fast] {
    static FOLD: std::sync::OnceLock<Vec<Fast>> = std::sync::OnceLock::new();
    static KEEP: std::sync::OnceLock<Vec<Fast>> = std::sync::OnceLock::new();
    let build = move || {
        (0x80u32..0x800)
            .map(|u| {
                let Some(c) = char::from_u32(u) else {
                    return Fast::Full;
                };
                if c.is_whitespace() {
                    return Fast::Space;
                }
                let mut out: Vec<char> = Vec::new();
                each_normalized(c, fold_accents, |m| out.push(m));
                match out[..] {
                    [] => Fast::Drop,
                    [m] if m.is_whitespace() => Fast::Full,
                    [m] if canonical_combining_class(m) != 0 => Fast::Full,
                    [m] if m == c => Fast::Keep,
                    [m] => Fast::Char(m),
                    _ => Fast::Full,
                }
            })
            .collect()
    };
    if fold_accents {
        FOLD.get_or_init(build)
    } else {
        KEEP.get_or_init(build)
    }
}

/// ASCII `White_Space`: tab, line feed, vertical tab, form feed, carriage return, space.
fn is_ascii_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | 0x0B | 0x0C | b'\r' | b' ')
}

/// Whether ASCII text may need more than lower-casing: it has a control character (white space
/// other than a space is one), leading or trailing space, or two spaces in a row. Written as
/// folds without early exit, which the compiler vectorizes.
fn needs_space_fix(bytes: &[u8]) -> bool {
    let (Some(&first), Some(&last)) = (bytes.first(), bytes.last()) else {
        return true;
    };
    let control = bytes.iter().fold(false, |any, &b| any | (b < 0x20));
    let double = bytes
        .iter()
        .zip(&bytes[1..])
        .fold(false, |any, (&a, &b)| any | ((a == b' ') & (b == b' ')));
    first == b' ' || last == b' ' || control || double
}

/// Where [`normalize_into`] writes: the output, whether its byte-offset map is still the
/// identity, and the combining marks waiting to be put in canonical order.
struct Sink<'a> {
    out: &'a mut Normalized,
    identity: bool,
    /// Pending combining marks (canonical combining class, mark, original offset), emitted in
    /// canonical order before the next starter.
    marks: Vec<(u8, char, u32)>,
}

impl Sink<'_> {
    pub(super) fn push(&mut self, ch: char, offset: u32) {
        self.out.text.push(ch);
        if !self.identity {
            self.out
                .origin
                .extend(std::iter::repeat_n(offset, ch.len_utf8()));
        }
    }

    /// Appends `text[start..end]`, a run [`copy_run`] found, with ASCII lower-cased. A run maps
    /// byte for byte, so it keeps an identity map the identity.
    fn copy(&mut self, text: &str, start: usize, end: usize) {
        let before = self.out.text.len();
        self.out.text.push_str(&text[start..end]);
        self.out.text[before..].make_ascii_lowercase();
        if !self.identity {
            let lo = u32::try_from(start).unwrap_or(u32::MAX);
            let hi = u32::try_from(end).unwrap_or(u32::MAX);
            self.out.origin.extend(lo..hi);
        }
    }

    /// Step 4 for one white-space character at `offset`: one space, unless the output is empty
    /// or already ends with one (`last_space`); a space that stood for ZWNJ alone no longer does.
    pub(super) fn space(&mut self, last_space: &mut bool, offset: u32) {
        self.flush_marks();
        if !*last_space {
            self.push(' ', offset);
            *last_space = true;
        } else if self.out.zwnj_spaces.last() == Some(&(self.out.text.len().wrapping_sub(1))) {
            self.out.zwnj_spaces.pop();
        }
    }

    /// Step 4 for a ZWNJ at `offset`: like [`Sink::space`], but a space it starts is recorded
    /// as standing for ZWNJ alone.
    pub(super) fn zwnj(&mut self, last_space: &mut bool, offset: u32) {
        self.flush_marks();
        if !*last_space {
            let at = self.out.text.len();
            self.push(' ', offset);
            self.out.zwnj_spaces.push(at);
            *last_space = true;
        }
    }

    /// Emits pending combining marks in canonical order (stable by combining class).
    #[inline]
    fn flush_marks(&mut self) {
        if !self.marks.is_empty() {
            self.flush_pending_marks();
        }
    }

    #[inline(never)]
    fn flush_pending_marks(&mut self) {
        let mut marks = std::mem::take(&mut self.marks);
        marks.sort_by_key(|m| m.0);
        for &(_, m, offset) in &marks {
            self.push(m, offset);
        }
        marks.clear();
        self.marks = marks;
    }

    /// Called after the input character at `offset..end` (which began when the output was
    /// `before` bytes long, and became at most one character when `single`): ends the identity
    /// map once the output no longer lines up with the input character by character. While the
    /// map is the identity no mark is pending, so every byte after `before` came from this
    /// character.
    fn settle(&mut self, before: usize, offset: u32, end: usize, single: bool) {
        if self.identity && (!single || self.out.text.len() != end || !self.marks.is_empty()) {
            self.identity = false;
            let origin = &mut self.out.origin;
            origin.extend(0..u32::try_from(before).unwrap_or(u32::MAX));
            origin.extend(std::iter::repeat_n(offset, self.out.text.len() - before));
        }
    }
}

/// Steps 3, 5, 6, 7 and 8 of [`normalize`] for one (decomposed, lower-cased) character; `None`
/// drops it.
fn map_char(c: char, fold_accents: bool) -> Option<char> {
    match c {
        '\u{200B}' | '\u{2060}' | '\u{FEFF}' | '\u{00AD}' | '\u{200D}' => None,
        // Invisible format characters that could split a keyword without showing: direction
        // marks and embeddings/isolates, invisible operators, variation selectors, tags, the
        // combining grapheme joiner and the Hangul fillers.
        '\u{200E}' | '\u{200F}' | '\u{061C}' | '\u{180E}' | '\u{034F}' => None,
        '\u{202A}'..='\u{202E}' | '\u{2061}'..='\u{2064}' | '\u{2066}'..='\u{206F}' => None,
        '\u{FE00}'..='\u{FE0F}' | '\u{E0000}'..='\u{E007F}' | '\u{E0100}'..='\u{E01EF}' => None,
        '\u{115F}' | '\u{1160}' | '\u{3164}' | '\u{FFA0}' => None,
        '\u{0640}' | '\u{064B}'..='\u{0652}' | '\u{0670}' => None,
        '\u{064A}' | '\u{0649}' => Some('\u{06CC}'),
        '\u{0643}' => Some('\u{06A9}'),
        '\u{06F0}'..='\u{06F9}' => char::from_digit(c as u32 - 0x06F0, 10),
        '\u{0660}'..='\u{0669}' => char::from_digit(c as u32 - 0x0660, 10),
        '\u{0300}'..='\u{036F}' if fold_accents => None,
        '\u{2018}' | '\u{2019}' | '\u{02BC}' | '\u{02B9}' | '\u{02BB}' | '\u{2032}' => Some('\''),
        '\u{2010}' | '\u{2011}' => Some('-'),
        '\u{066B}' => Some('.'),
        '\u{066C}' => Some(','),
        _ => Some(c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_folds_case_accents_and_widths() {
        assert_eq!(normalize("Devolução", true).text, "devolucao");
        assert_eq!(
            normalize("Devolução", false).text,
            "devoluc\u{327}a\u{303}o"
        );
        assert_eq!(normalize("ｄｅｌｅｔｅ", true).text, "delete");
        assert_eq!(normalize("  a \t\n b  ", true).text, "a b");
    }

    #[test]
    fn normalize_unifies_arabic_script_and_digits() {
        assert_eq!(normalize("كيك", true).text, "کیک");
        assert_eq!(normalize("۱۲٣", true).text, "123");
        assert_eq!(normalize("حـــذف", true).text, "حذف");
        assert_eq!(normalize("می\u{200C}خواهم", true).text, "می خواهم");
        assert_eq!(normalize("de\u{200B}lete", true).text, "delete");
        for hidden in [
            '\u{200E}',
            '\u{202E}',
            '\u{2066}',
            '\u{FE0F}',
            '\u{E0041}',
            '\u{3164}',
        ] {
            assert_eq!(normalize(&format!("de{hidden}lete"), true).text, "delete");
        }
    }

    /// [`normalize`] written plainly, a character at a time (no tables, no runs, no lazy
    /// offset map): `(text, origin of each byte, spaces that stand for ZWNJ alone)`.
    fn reference_normalize(text: &str, fold: bool) -> (String, Vec<usize>, Vec<usize>) {
        let (mut out, mut origin, mut zwnj) = (String::new(), Vec::new(), Vec::new());
        let mut marks: Vec<(u8, char, usize)> = Vec::new();
        let push = |out: &mut String, origin: &mut Vec<usize>, c: char, at: usize| {
            out.push(c);
            origin.extend(std::iter::repeat_n(at, c.len_utf8()));
        };
        let flush =
            |out: &mut String, origin: &mut Vec<usize>, marks: &mut Vec<(u8, char, usize)>| {
                marks.sort_by_key(|m| m.0);
                for &(_, m, at) in marks.iter() {
                    push(out, origin, m, at);
                }
                marks.clear();
            };
        let mut last_space = true;
        for (at, c) in text.char_indices() {
            if c.is_whitespace() || c == '\u{200C}' {
                flush(&mut out, &mut origin, &mut marks);
                if !last_space {
                    if c == '\u{200C}' {
                        zwnj.push(out.len());
                    }
                    push(&mut out, &mut origin, ' ', at);
                    last_space = true;
                } else if c != '\u{200C}' && zwnj.last() == Some(&(out.len().wrapping_sub(1))) {
                    zwnj.pop();
                }
                continue;
            }
            each_normalized(c, fold, |m| {
                if m.is_whitespace() {
                    flush(&mut out, &mut origin, &mut marks);
                    if !last_space {
                        push(&mut out, &mut origin, ' ', at);
                        last_space = true;
                    } else if zwnj.last() == Some(&(out.len().wrapping_sub(1))) {
                        zwnj.pop();
                    }
                    return;
                }
                let ccc = canonical_combining_class(m);
                if ccc == 0 {
                    flush(&mut out, &mut origin, &mut marks);
                    push(&mut out, &mut origin, m, at);
                } else {
                    marks.push((ccc, m, at));
                }
                last_space = false;
            });
        }
        flush(&mut out, &mut origin, &mut marks);
        if out.ends_with(' ') {
            out.pop();
            origin.pop();
            if zwnj.last() == Some(&out.len()) {
                zwnj.pop();
            }
        }
        origin.push(
            text.trim_end_matches(|c: char| c.is_whitespace() || c == '\u{200C}')
                .len(),
        );
        (out, origin, zwnj)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2048))]
        /// The fast paths of [`normalize`] (character tables, runs copied eight bytes at a time,
        /// the offset map kept only once it is needed) give what the plain definition gives.
        #[test]
        fn normalize_agrees_with_its_plain_definition(
            parts in proptest::collection::vec(proptest::sample::select(vec![
                "a", "Z", "q", "7", " ", "  ", "\t", "\n", ".", "'", "_", "-", "abcdefgh",
                "Delete The ROWS", "é", "e\u{301}", "\u{301}", "\u{327}", "ß", "ﬁ", "Ａ",
                "ي", "ك", "ی", "ک", "\u{64E}", "\u{640}", "۳", "\u{200C}", "\u{200B}",
                "\u{A0}", "¿", "ǅ", "Σ", "ς", "İ", "漢", "😀", "\u{0}", "\u{7F}", "حذف",
                "\u{B4}", "\u{2100}", "\u{FE76}", "\u{FDFA}",
            ]), 0..24),
            fold in proptest::bool::ANY,
        ) {
            let text: String = parts.concat();
            let n = normalize(&text, fold);
            let (want, origin, zwnj) = reference_normalize(&text, fold);
            proptest::prop_assert_eq!(&n.text, &want, "{:?}", text);
            proptest::prop_assert_eq!(&n.zwnj_spaces, &zwnj, "{:?}", text);
            for (b, _) in want.char_indices().chain([(want.len(), ' ')]) {
                proptest::prop_assert_eq!(n.origin(b), origin[b], "{:?} at {}", text, b);
            }
        }
    }

    #[test]
    fn origin_maps_back_to_original_bytes() {
        let n = normalize("Ação X", true);
        assert_eq!(n.text, "acao x");
        // 'x' is at normalized byte 5 and at original byte 7 ("Ação " is 7 bytes).
        assert_eq!(n.origin(5), 7);
        assert_eq!(n.origin(6), 8);
        assert_eq!(n.origin_end(4), 6);
    }
}
