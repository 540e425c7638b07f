//! Unicode (UAX #29) words of normalized text ([`word_ranges_into`]): a fast path gives the
//! boundaries `unicode-segmentation` computes for ASCII and common Arabic-script text, which
//! handles everything else.

use unicode_segmentation::UnicodeSegmentation;

use super::normalize::two_byte;

/// The Unicode (UAX #29) words of `text`, as `(start, end)` byte ranges in order, into `words`:
/// the segments between word boundaries that hold a letter or digit.
pub(super) fn word_ranges_into(text: &str, words: &mut Vec<(usize, usize)>) {
    words.clear();
    if !simple_word_ranges(text, words) {
        words.clear();
        words.extend(text.unicode_word_indices().map(|(i, w)| (i, i + w.len())));
    }
}

/// UAX #29 word class of the characters [`simple_word_ranges`] handles.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum WordClass {
    /// ALetter: ASCII letters and the common Arabic-script letters.
    Letter,
    /// Numeric: ASCII digits.
    Digit,
    /// ExtendNumLet: `_`.
    Joiner,
    /// MidLetter `:`.
    MidLetter,
    /// MidNumLet and Single_Quote: `.` `'`.
    MidNumLet,
    /// MidNum: `,` `;` and the Arabic comma U+060C.
    MidNum,
    /// Extend: combining marks, which join the character before them (WB4).
    Extend,
    /// Everything else in the handled set (spaces, other ASCII punctuation, `؛` `؟` `¡` `¿`).
    Other,
    /// Not handled: the caller uses the full algorithm.
    Unknown,
}

impl WordClass {
    /// Whether a character of this class between characters of classes `prev` and `next`
    /// stays inside the word: `.` `'` `:` between letters (WB6/7), `.` `'` `,` `;` `،` between
    /// digits (WB11/12).
    #[inline]
    pub(super) fn joins(self, prev: WordClass, next: WordClass) -> bool {
        let letters = prev == WordClass::Letter && next == WordClass::Letter;
        let digits = prev == WordClass::Digit && next == WordClass::Digit;
        match self {
            WordClass::MidNumLet => letters || digits,
            WordClass::MidLetter => letters,
            WordClass::MidNum => digits,
            _ => false,
        }
    }

    /// The classes [`WordClass::joins`] may keep inside a word.
    #[inline]
    fn is_infix(self) -> bool {
        matches!(
            self,
            WordClass::MidNumLet | WordClass::MidLetter | WordClass::MidNum
        )
    }

    /// Letters, digits and `_`: the characters a word is a run of.
    fn is_core(self) -> bool {
        matches!(
            self,
            WordClass::Letter | WordClass::Digit | WordClass::Joiner
        )
    }
}

/// [`WordClass`] of each ASCII byte.
const ASCII_CLASS: [WordClass; 128] = {
    let mut t = [WordClass::Unknown; 128];
    let mut b = 0;
    while b < 128 {
        let c = b as u8;
        t[b] = match c {
            b'a'..=b'z' | b'A'..=b'Z' => WordClass::Letter,
            b'0'..=b'9' => WordClass::Digit,
            b'_' => WordClass::Joiner,
            b':' => WordClass::MidLetter,
            b'.' | b'\'' => WordClass::MidNumLet,
            b',' | b';' => WordClass::MidNum,
            // ASCII controls other than tab/LF/VT/FF/CR/space do not occur in many queries and
            // have their own rules (WB3): leave them to the full algorithm.
            b' ' | b'\t' | b'\n' | 0x0B | 0x0C => WordClass::Other,
            c if c.is_ascii_punctuation() => WordClass::Other,
            _ => WordClass::Unknown,
        };
        b += 1;
    }
    t
};

/// [`WordClass`] of each code point below U+0800 (the one- and two-byte UTF-8 characters).
pub(super) const SHORT_CLASS: [WordClass; 0x800] = {
    let mut t = [WordClass::Unknown; 0x800];
    let mut u = 0;
    while u < 0x800 {
        if let Some(c) = char::from_u32(u as u32) {
            t[u] = word_class(c);
        }
        u += 1;
    }
    t
};

const fn word_class(c: char) -> WordClass {
    if c.is_ascii() {
        return ASCII_CLASS[c as usize];
    }
    match c {
        '\u{060C}' => WordClass::MidNum,
        '\u{0621}'..='\u{063A}'
        | '\u{0641}'..='\u{064A}'
        | '\u{067E}'
        | '\u{0686}'
        | '\u{0698}'
        | '\u{06A9}'
        | '\u{06AF}'
        | '\u{06CC}' => WordClass::Letter,
        '\u{0300}'..='\u{036F}' | '\u{0653}'..='\u{0655}' => WordClass::Extend,
        '\u{061B}' | '\u{061F}' | '\u{00A1}' | '\u{00BF}' | '\u{00AB}' | '\u{00BB}' => {
            WordClass::Other
        }
        _ => WordClass::Unknown,
    }
}

/// The [`WordClass`] and UTF-8 length of the character of `text` starting at byte `at`
/// (`Other` past the end).
#[inline(always)]
fn class_at(text: &str, at: usize) -> (WordClass, usize) {
    let bytes = text.as_bytes();
    match bytes.get(at) {
        None => (WordClass::Other, 0),
        Some(&b) if b < 0x80 => (ASCII_CLASS[usize::from(b)], 1),
        Some(&b) if b < 0xE0 => {
            let next = bytes.get(at + 1).copied().unwrap_or(0);
            let class = SHORT_CLASS.get(two_byte(b, next)).copied();
            (class.unwrap_or(WordClass::Unknown), 2)
        }
        Some(_) => text
            .get(at..)
            .and_then(|t| t.chars().next())
            .map_or((WordClass::Unknown, 1), |c| (word_class(c), c.len_utf8())),
    }
}

/// UAX #29 words for text made only of ASCII, common Arabic-script letters and combining marks
/// after letters or digits, where the rules reduce to: a word is a run of letters, digits and
/// `_`, also joined across one `.` `'` `:` between letters (WB6/7) and one `.` `'` `,` `;` `،`
/// between digits (WB11/12); a combining mark belongs to the letter or digit before it (WB4).
/// Returns false, with `words` in an unspecified state, for other text (the caller uses the full
/// algorithm). The unit tests check it against `unicode-segmentation`.
fn simple_word_ranges(text: &str, words: &mut Vec<(usize, usize)>) -> bool {
    if text.is_ascii() {
        return ascii_word_ranges(text.as_bytes(), words);
    }
    let n = text.len();
    let mut i = 0;
    while i < n {
        let (class, len) = class_at(text, i);
        match class {
            WordClass::Unknown | WordClass::Extend => return false,
            c if !c.is_core() => {
                i += len;
                continue;
            }
            _ => {}
        }
        let start = i;
        // The class of the last character that is not a mark.
        let mut prev = class;
        let mut j = i + len;
        let bytes = text.as_bytes();
        while j < n {
            // Runs of two-byte letters (Arabic script) first, without the general dispatch.
            while let (Some(&lead @ 0xC2..=0xDF), Some(&next)) = (bytes.get(j), bytes.get(j + 1)) {
                if !matches!(
                    SHORT_CLASS.get(two_byte(lead, next)),
                    Some(WordClass::Letter)
                ) {
                    break;
                }
                prev = WordClass::Letter;
                j += 2;
            }
            if j >= n {
                break;
            }
            let (k, len) = class_at(text, j);
            if k.is_core() {
                prev = k;
                j += len;
                continue;
            }
            if k == WordClass::Extend {
                if !matches!(prev, WordClass::Letter | WordClass::Digit) {
                    return false;
                }
                j += len;
                continue;
            }
            let (next, _) = class_at(text, j + len);
            if !k.joins(prev, next) {
                break;
            }
            prev = k;
            j += len;
        }
        // A segment of only `_` is not a word.
        if class != WordClass::Joiner || text.as_bytes()[start..j].iter().any(|&x| x != b'_') {
            words.push((start, j));
        }
        i = j;
    }
    true
}

/// [`simple_word_ranges`] for ASCII text, 64 bytes at a time: letters, digits and `_` are
/// found sixteen bytes at a time, and words are the runs of them (joined across an infix) read
/// off bit masks, so that no branch turns on each byte. Returns false for an ASCII control
/// character other than tab, line feed, vertical tab and form feed (the full algorithm has
/// rules for them).
fn ascii_word_ranges(b: &[u8], words: &mut Vec<(usize, usize)>) -> bool {
    let blocks = b.len().div_ceil(64);
    let mut next = core_block(b, 0);
    let mut controls = next.1.controls;
    // Whether a word starts with `_` (only such a word may be made of `_` alone).
    let mut underscore_start = false;
    // The last bit of the previous block's letter-digit mask and word mask.
    let (mut core_top, mut word_top) = (0u64, 0u64);
    // Words are pushed with their start; the first `ended` of them have their end.
    let mut ended = words.len();
    for k in 0..blocks {
        let (core, infix, underscores) = (next.0, next.1.infix, next.1.underscores);
        next = if k + 1 < blocks {
            core_block(b, k + 1)
        } else {
            Default::default()
        };
        controls |= next.1.controls;
        // A single infix byte between two letters or digits may join them (WB6/7, WB11/12);
        // a space there never does, so only infix bytes are looked at.
        let mut word = core;
        let mut gaps = infix & (core << 1 | core_top) & (core >> 1 | next.0 << 63);
        while gaps != 0 {
            let bit = gaps.trailing_zeros();
            gaps &= gaps - 1;
            let p = 64 * k + bit as usize;
            let class = |i: usize| ASCII_CLASS[usize::from(b[i] & 0x7F)];
            let mid = class(p);
            if mid.is_infix() && mid.joins(class(p - 1), class(p + 1)) {
                word |= 1 << bit;
            }
        }
        let before = word << 1 | word_top;
        (core_top, word_top) = (core >> 63, word >> 63);
        let mut starts = word & !before;
        underscore_start |= starts & underscores != 0;
        while starts != 0 {
            words.push((64 * k + starts.trailing_zeros() as usize, b.len()));
            starts &= starts - 1;
        }
        // Runs start and end in turn, so each end closes the oldest open word.
        let mut ends = !word & before;
        while ends != 0 {
            if let Some(w) = words.get_mut(ended) {
                w.1 = 64 * k + ends.trailing_zeros() as usize;
            }
            ended += 1;
            ends &= ends - 1;
        }
    }
    if controls
        && b.iter()
            .any(|&x| ASCII_CLASS[usize::from(x & 0x7F)] == WordClass::Unknown)
    {
        return false;
    }
    // A run of only `_` is not a word (and starts with `_`).
    if underscore_start {
        words.retain(|&(start, end)| b[start] != b'_' || b[start..end].iter().any(|&x| x != b'_'));
    }
    true
}

/// What [`core_block`] saw besides letters and digits.
#[derive(Clone, Copy, Default)]
struct BlockFlags {
    /// A byte below U+0020, or U+007F.
    controls: bool,
    /// Bit `j` set where byte `j` of the block is `_`.
    underscores: u64,
    /// Bit `j` set where byte `j` of the block is `.` `'` `:` `,` or `;` (an infix that may
    /// join two letters or digits).
    infix: u64,
}

/// Bit `j` set where byte `j` of block `k` (bytes `64 * k..`) of ASCII text `b` is a letter,
/// digit or `_` (0 past the end), with the block's [`BlockFlags`].
fn core_block(b: &[u8], k: usize) -> (u64, BlockFlags) {
    let from = (64 * k).min(b.len());
    let block = &b[from..(from + 64).min(b.len())];
    let mut chunks = block.chunks_exact(16);
    let (mut bits, mut controls, mut underscores, mut infix) = (0u64, 0u64, 0u64, 0u64);
    let mut add = |j: usize, x: [u8; 16]| {
        let m = core_bits(x);
        bits |= m.core << (16 * j);
        infix |= m.infix << (16 * j);
        controls |= m.controls;
        underscores |= m.underscores << (16 * j);
    };
    for (j, chunk) in (&mut chunks).enumerate() {
        add(j, chunk.try_into().unwrap_or([b' '; 16]));
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut buf = [b' '; 16];
        buf[..rest.len()].copy_from_slice(rest);
        add(block.len() / 16, buf);
    }
    let flags = BlockFlags {
        controls: controls != 0,
        underscores,
        infix,
    };
    (bits, flags)
}

/// Bit masks of sixteen ASCII bytes (bit `j` for byte `j`).
struct CoreBits {
    /// Letters, digits and `_`.
    core: u64,
    /// Bytes below U+0020, and U+007F.
    controls: u64,
    /// `_`.
    underscores: u64,
    /// `.` `'` `:` `,` `;`.
    infix: u64,
}

/// [`CoreBits`] of `x`, with SSE2 (part of the x86-64 baseline).
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline(always)]
fn core_bits(x: [u8; 16]) -> CoreBits {
    use std::arch::x86_64::{
        __m128i, _mm_and_si128, _mm_cmpeq_epi8, _mm_cmpgt_epi8, _mm_cmplt_epi8, _mm_movemask_epi8,
        _mm_or_si128, _mm_set1_epi8, _mm_set_epi64x,
    };
    let [lo, hi] = [&x[..8], &x[8..]].map(|h| i64::from_le_bytes(h.try_into().unwrap_or([0; 8])));
    // SAFETY: the target has SSE2 (the `cfg` above), so these instructions exist; they only
    // read and write registers.
    unsafe {
        // ASCII bytes are below 0x80, so the signed byte comparisons order them as unsigned.
        let v: __m128i = _mm_set_epi64x(hi, lo);
        let within = |v: __m128i, first: u8, last: u8| {
            _mm_and_si128(
                _mm_cmpgt_epi8(v, _mm_set1_epi8((first - 1) as i8)),
                _mm_cmplt_epi8(v, _mm_set1_epi8((last + 1) as i8)),
            )
        };
        let lower = _mm_or_si128(v, _mm_set1_epi8(0x20));
        let underscore = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'_' as i8));
        let core = _mm_or_si128(
            _mm_or_si128(within(lower, b'a', b'z'), within(v, b'0', b'9')),
            underscore,
        );
        let controls = _mm_or_si128(
            _mm_cmplt_epi8(v, _mm_set1_epi8(0x20)),
            _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7F)),
        );
        let is = |c: u8| _mm_cmpeq_epi8(v, _mm_set1_epi8(c as i8));
        let infix = _mm_or_si128(
            _mm_or_si128(
                _mm_or_si128(is(b'.'), is(b'\'')),
                _mm_or_si128(is(b':'), is(b',')),
            ),
            is(b';'),
        );
        let mask = |m: __m128i| u64::from(_mm_movemask_epi8(m) as u16);
        CoreBits {
            core: mask(core),
            controls: mask(controls),
            underscores: mask(underscore),
            infix: mask(infix),
        }
    }
}

/// [`CoreBits`] of `x`, a byte at a time (where SSE2 is not at hand).
#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
#[inline(always)]
fn core_bits(x: [u8; 16]) -> CoreBits {
    let mut m = CoreBits {
        core: 0,
        controls: 0,
        underscores: 0,
        infix: 0,
    };
    for (j, &c) in x.iter().enumerate() {
        m.core |= u64::from(c.is_ascii_alphanumeric() || c == b'_') << j;
        m.controls |= u64::from(c < 0x20 || c == 0x7F) << j;
        m.underscores |= u64::from(c == b'_') << j;
        m.infix |= u64::from(matches!(c, b'.' | b'\'' | b':' | b',' | b';')) << j;
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words of `text` as `unicode-segmentation` finds them (the reference).
    fn uax29_words(text: &str) -> Vec<(usize, usize)> {
        text.unicode_word_indices()
            .map(|(i, w)| (i, i + w.len()))
            .collect()
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]
        #[test]
        fn simple_word_ranges_agree_with_uax29(
            chars in proptest::collection::vec(proptest::sample::select(vec![
                'a', 'b', 'Z', '1', '2', '_', '.', ',', ';', '\'', ':', ' ', '-', '"', '\n', '\t',
                'ب', 'ی', 'ک', 'ء', '،', '؛', '؟', '¡', '¿', '«', '»', '\u{301}', '\u{327}',
                '\u{653}', '\u{654}',
            ]), 0..24)
        ) {
            let text: String = chars.into_iter().collect();
            let full = uax29_words(&text);
            let mut words = Vec::new();
            // Text it does not handle (a mark that does not follow a letter or digit) goes to
            // the full algorithm; whatever it handles must agree with it.
            let mut base = None;
            let mut marks_follow_letters = true;
            for c in text.chars() {
                match word_class(c) {
                    WordClass::Extend => {
                        marks_follow_letters &=
                            matches!(base, Some(WordClass::Letter | WordClass::Digit));
                    }
                    k => base = Some(k),
                }
            }
            let handled = simple_word_ranges(&text, &mut words);
            proptest::prop_assert_eq!(handled, marks_follow_letters, "{:?}", text);
            if handled {
                proptest::prop_assert_eq!(words, full, "{:?}", text);
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2048))]
        #[test]
        fn ascii_word_ranges_agree_with_uax29(
            chars in proptest::collection::vec(proptest::sample::select(vec![
                'a', 'q', 'Z', 'z', 'A', '0', '9', '_', '.', ',', ';', '\'', ':', ' ', ' ', ' ',
                '-', '"', '@', '[', '`', '{', '/', '\n', '\t', '\u{b}', '\u{c}', '~',
            ]), 0..300)
        ) {
            let text: String = chars.into_iter().collect();
            let full = uax29_words(&text);
            let mut words = Vec::new();
            proptest::prop_assert!(ascii_word_ranges(text.as_bytes(), &mut words));
            proptest::prop_assert_eq!(words, full, "{:?}", text);
        }
    }

    #[test]
    fn ascii_word_ranges_leave_control_characters_to_the_full_algorithm() {
        assert!(!ascii_word_ranges(b"delete\rinvoice", &mut Vec::new()));
        assert!(!ascii_word_ranges(b"delete\x7finvoice", &mut Vec::new()));
        let mut words = Vec::new();
        assert!(ascii_word_ranges(b"delete\tinvoice 3_a __ x", &mut words));
        assert_eq!(words, vec![(0, 6), (7, 14), (15, 18), (22, 23)]);
    }
}
