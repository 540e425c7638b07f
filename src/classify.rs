//! Query intent classification: text normalization and one keyword automaton.
//!
//! A query is normalized exactly like the policy's keywords ([`normalize`]) and split into
//! Unicode words (UAX #29 word boundaries, as `unicode-segmentation` computes them; a fast path
//! gives the same boundaries for ASCII and common Arabic-script text). One automaton over every
//! keyword and negator of every intent (an Aho-Corasick contiguous NFA, walked anchored: a trie)
//! is walked from each word start whose first bytes begin some keyword, so an occurrence always
//! starts on a word boundary; `"word"` (and a phrase) must also end on one, `"stem*"` may end
//! inside a word. ZWNJ matches a space or nothing: a walk that reaches a space standing for ZWNJ
//! is repeated with every such space read as nothing (each walk reads them all one way). A
//! keyword hit with a negator within the negation window (in words, before or after) and in the
//! same clause (no `.` `!` `?` `;` `,` `:`, parenthesis or dash between) is dropped and reported in [`Intent::dropped`].
//! A negator declared `clause` reaches its whole clause on its side; a `before` negator that ends
//! its clause reaches over an aside (clauses without a keyword) into the next clause of its
//! sentence; a keyword that is also a negator occurrence that dropped another hit is dropped too.
//! A hit inside an occurrence of an `except` entry is dropped. Under `quoted data` a hit inside
//! quoted content (paired quotation marks, the text after an `embedded` phrase, identifiers)
//! counts only when no other hit counts; under `quoted ignore` never. Under `combine priority` the highest-priority intent
//! with a surviving hit wins; under `combine union` every intent with a hit counts. A query
//! without hits gets the `fallback` intent. Time is linear in the query length: at most two
//! walks per word, each bounded by the longest keyword ([`limits::MAX_KEYWORD_BYTES`]), at
//! most [`limits::MAX_QUERY_OCCURRENCES`] occurrences recorded, one pass over the clauses for
//! the negators that reach past their window, one over the text for quoted content, and a
//! binary search per hit for the `except` entries and the negators that dropped a hit. A call allocates only its result (the
//! working buffers are kept per thread).
//!
//! Rules from seed 001 (query mutation classes, priority Destructive > Execute > Export > Write >
//! Read, an empty or unclear query offers read only).

use aho_corasick::automaton::{Automaton, StateID};
use aho_corasick::nfa::contiguous::NFA;
use aho_corasick::{Anchored, MatchKind};
use arcstr::ArcStr;
use rustc_hash::{FxHashMap, FxHashSet};
use serde::Serialize;
use std::cell::RefCell;
use unicode_normalization::char::{canonical_combining_class, decompose_compatible};
use unicode_segmentation::UnicodeSegmentation;

use crate::check::{Model, NegationRule};
use crate::limits;
use crate::syntax::ast::{Combine, Direction, Quoted};

/// One keyword found in a query.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Hit {
    /// The keyword as written in the policy (`"edit*"`, `"do not"`).
    pub keyword: ArcStr,
    /// The intent the keyword signals.
    pub intent: ArcStr,
    /// The keyword's language tag.
    pub lang: ArcStr,
    /// Byte range of the match in the original query text (for a `"stem*"` keyword, the whole
    /// word it starts).
    pub span: (usize, usize),
    /// For a dropped hit, the negator that cancelled it, or the `except` word or phrase it
    /// stands in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub negated_by: Option<ArcStr>,
    /// Whether the hit stands in quoted content: between quotation marks, after an `embedded`
    /// phrase, or inside an identifier (`delete_me.txt`). Always false under `quoted count`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub quoted: bool,
}

/// The classification of one query: the intent to gate tools with, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Intent {
    /// The deciding intent: the highest-priority one hit, or the fallback.
    pub name: ArcStr,
    /// Every intent that counts: `[name]` under `combine priority`; every intent hit, highest
    /// priority first, under `combine union`.
    pub intents: Vec<ArcStr>,
    /// Keyword hits that counted, in query order.
    pub hits: Vec<Hit>,
    /// Keyword hits dropped by a negator, in query order.
    pub dropped: Vec<Hit>,
    /// Whether no keyword hit counted and the fallback intent was used.
    pub fallback: bool,
    /// Whether only the start of the query was read: it was longer than
    /// [`limits::MAX_QUERY_BYTES`] (it is read up to the last white space before the cap, so no
    /// word is read cut in two), or it held more than [`limits::MAX_QUERY_OCCURRENCES`] keyword
    /// and negator occurrences (it is read up to the word where the cap was reached).
    pub truncated: bool,
}

impl Intent {
    /// An intent given by name (e.g. from `--intent`), without a query.
    pub fn named(name: impl Into<ArcStr>) -> Intent {
        let name = name.into();
        Intent {
            intents: vec![name.clone()],
            name,
            hits: Vec::new(),
            dropped: Vec::new(),
            fallback: false,
            truncated: false,
        }
    }

    /// Several intents at once, as `combine union` yields them (highest priority first).
    ///
    /// An empty list gives an intent named `""` that no policy declares.
    pub fn union<I, S>(names: I) -> Intent
    where
        I: IntoIterator<Item = S>,
        S: Into<ArcStr>,
    {
        let intents: Vec<ArcStr> = names.into_iter().map(Into::into).collect();
        Intent {
            name: intents.first().cloned().unwrap_or_default(),
            intents,
            hits: Vec::new(),
            dropped: Vec::new(),
            fallback: false,
            truncated: false,
        }
    }
}

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
    zwnj_spaces: Vec<usize>,
}

impl Normalized {
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
fn normalize_into(text: &str, fold_accents: bool, out: &mut Normalized) {
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
fn two_byte(lead: u8, next: u8) -> usize {
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
    fn push(&mut self, ch: char, offset: u32) {
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
    fn space(&mut self, last_space: &mut bool, offset: u32) {
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
    fn zwnj(&mut self, last_space: &mut bool, offset: u32) {
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PatternKind {
    Word,
    Stem,
}

#[derive(Clone, Copy, Debug)]
enum Target {
    /// Keyword rule index.
    Keyword(usize),
    /// Negation rule index.
    Negator(usize),
    /// `embedded` phrase index.
    Embedded(usize),
    /// `except` entry index.
    Except(usize),
}

/// One keyword or negator spelling that a needle stands for.
#[derive(Clone, Copy, Debug)]
struct PatternInfo {
    target: Target,
    kind: PatternKind,
}

/// One distinct normalized text of the automaton: its length and the spellings it stands for
/// (several keywords, or a keyword and a negator, may normalize to the same text).
#[derive(Clone, Copy, Debug)]
struct Needle {
    /// Length in bytes.
    len: u32,
    /// Its entries in `Classifier::patterns`: `first..first + count`.
    first: u32,
    count: u32,
}

#[derive(Clone, Debug)]
struct KeywordEntry {
    intent: u8,
    lang: ArcStr,
    text: ArcStr,
}

/// A compiled keyword automaton for one policy.
#[derive(Clone, Debug)]
pub(crate) struct Classifier {
    /// One Aho-Corasick automaton (contiguous NFA, walked anchored: a trie) over every
    /// normalized keyword and negator; it is run from each word start, so every occurrence it
    /// finds starts on a word boundary.
    automaton: Option<NFA>,
    /// The automaton's patterns, by pattern id: each distinct normalized needle once.
    needles: Vec<Needle>,
    /// The spellings of every needle, grouped by needle.
    patterns: Vec<PatternInfo>,
    /// Where walks begin, three bytes in where it can.
    starts: WalkStarts,
    /// The automaton states a needle with a `"stem*"` spelling ends in, as a bit set by state
    /// id: only there does a needle that ends inside a word make a hit.
    stem_states: Vec<u64>,
    keywords: Vec<KeywordEntry>,
    negations: Vec<NegationRule>,
    /// The text of each negation rule, as hits report it.
    negator_texts: Vec<ArcStr>,
    /// Widest negation window, in words.
    max_window: u32,
    /// The text of each `except` entry, as dropped hits report it.
    except_texts: Vec<ArcStr>,
    /// Whether the automaton holds `embedded` or `except` entries.
    has_marks: bool,
    quoted: Quoted,
    intents: Vec<ArcStr>,
    fallback: Option<u8>,
    combine: Combine,
    fold_accents: bool,
}

/// A keyword or negator occurrence on word boundaries in normalized text.
#[derive(Clone, Copy, Debug)]
struct Found {
    start: usize,
    end: usize,
    /// Index of the first and last word the occurrence covers.
    first_word: u32,
    last_word: u32,
    target: Target,
}

/// Where walks of the automaton begin. A walk from a word start reads its first three bytes in
/// one lookup: the anchored state they lead to is computed once, when the classifier is built,
/// for the first three bytes of every needle (a memo of the automaton's own transitions, so a
/// walk that no needle begins ends at once). A start that one- or two-byte needles begin, or
/// whose first bytes hold a space that stands for ZWNJ, steps from the start state instead.
#[derive(Clone, Debug)]
struct WalkStarts {
    /// Needles one byte long, by byte.
    one: [u64; 4],
    /// Needles two bytes long, by their two bytes (bit `256 * b0 + b1`).
    two: Box<[u64; 1024]>,
    /// The anchored state after the first three bytes of each needle of three bytes or more,
    /// by those bytes (`b0 << 16 | b1 << 8 | b2`).
    three: FxHashMap<u32, StateID>,
    /// The keys of `three`, as a bit set by a 16-bit hash: most word starts begin no needle,
    /// and one bit says so before the map is probed.
    three_bits: Box<[u64; 1024]>,
}

/// How a walk from a word start begins (see [`WalkStarts`]).
enum Start {
    /// No needle begins here.
    None,
    /// Step from the start state.
    Step,
    /// Go on from this state, three bytes in.
    Three(StateID),
}

impl WalkStarts {
    /// The starts of `needles` (the automaton's patterns, in `ac`).
    fn new(ac: Option<&NFA>, needles: &[String]) -> WalkStarts {
        let mut starts = WalkStarts {
            one: [0; 4],
            two: Box::new([0; 1024]),
            three: FxHashMap::default(),
            three_bits: Box::new([0; 1024]),
        };
        let start = ac.and_then(|ac| Some((ac, ac.start_state(Anchored::Yes).ok()?)));
        for n in needles {
            match *n.as_bytes() {
                [] => {}
                [b0] => set_bit(&mut starts.one, usize::from(b0)),
                [b0, b1] => set_bit(&mut starts.two[..], pair(b0, b1)),
                [b0, b1, b2, ..] => {
                    let Some((ac, sid)) = start else { continue };
                    let sid = [b0, b1, b2]
                        .iter()
                        .fold(sid, |sid, &b| ac.next_state(Anchored::Yes, sid, b));
                    if !ac.is_dead(sid) {
                        starts.three.insert(triple(b0, b1, b2), sid);
                        set_bit(&mut starts.three_bits[..], hash16(triple(b0, b1, b2)));
                    }
                }
            }
        }
        starts
    }

    /// How the walk from word start `s` of `bytes` begins.
    #[inline]
    fn start(&self, bytes: &[u8], s: usize, zwnj_spaces: &[usize]) -> Start {
        let zwnj_at =
            |i: usize| bytes.get(i) == Some(&b' ') && zwnj_spaces.binary_search(&i).is_ok();
        let Some(&b0) = bytes.get(s) else {
            return Start::None;
        };
        if bit(&self.one, usize::from(b0)) {
            return Start::Step;
        }
        let Some(&b1) = bytes.get(s + 1) else {
            return Start::None;
        };
        if bit(&self.two[..], pair(b0, b1)) || zwnj_at(s + 1) {
            return Start::Step;
        }
        let Some(&b2) = bytes.get(s + 2) else {
            return Start::None;
        };
        if zwnj_at(s + 2) {
            return Start::Step;
        }
        let key = triple(b0, b1, b2);
        if !bit(&self.three_bits[..], hash16(key)) {
            return Start::None;
        }
        match self.three.get(&key) {
            Some(&sid) => Start::Three(sid),
            None => Start::None,
        }
    }
}

/// The states of `ac` that the anchored walk of each of `needles` ends in, as a bit set by
/// state id (a state id is an offset into the automaton, below its memory usage in bytes).
fn state_set<'a>(ac: &NFA, needles: impl Iterator<Item = &'a str>) -> Vec<u64> {
    let mut set = vec![0u64; ac.memory_usage() / 4 / 64 + 1];
    let Ok(start) = ac.start_state(Anchored::Yes) else {
        return set;
    };
    for n in needles {
        let sid = n
            .bytes()
            .fold(start, |sid, b| ac.next_state(Anchored::Yes, sid, b));
        if let Some(word) = set.get_mut(sid.as_usize() / 64) {
            *word |= 1 << (sid.as_usize() % 64);
        }
    }
    set
}

fn pair(b0: u8, b1: u8) -> usize {
    usize::from(b0) << 8 | usize::from(b1)
}

fn triple(b0: u8, b1: u8, b2: u8) -> u32 {
    u32::from(b0) << 16 | u32::from(b1) << 8 | u32::from(b2)
}

/// A 16-bit hash of a three-byte key.
fn hash16(key: u32) -> usize {
    (key.wrapping_mul(0x9E37_79B1) >> 16) as usize
}

fn set_bit(set: &mut [u64], i: usize) {
    set[i >> 6] |= 1 << (i & 63);
}

#[inline]
fn bit(set: &[u64], i: usize) -> bool {
    set[i >> 6] & (1 << (i & 63)) != 0
}

/// Buffers one classification needs, kept per thread so that a call allocates only its result.
struct Scratch {
    norm: Normalized,
    words: Vec<(usize, usize)>,
    /// For each word, how many clause ends come before it (see [`clause_starts`]).
    clauses: Vec<u32>,
    keywords: Vec<Found>,
    negators: Vec<Found>,
    /// Occurrences of `embedded` phrases and `except` entries.
    marks: Vec<Found>,
    /// For each word, how many sentence ends come before it (see [`clause_starts`]).
    sentences: Vec<u32>,
    /// Where negators that reach their whole clause reach.
    reach: Reaches,
    /// Quoted content, as sorted disjoint byte ranges of the normalized text.
    quoted: Vec<(usize, usize)>,
    /// Exception occurrences by start: `(start, farthest end so far, entry)`.
    excepts: Vec<(usize, usize, usize)>,
    /// What cancels each keyword occurrence.
    decided: Vec<Cause>,
    /// Negator occurrences that cancelled a keyword hit: `(start, rule, (start, end))`, the
    /// end made the farthest so far once sorted.
    used: Vec<(usize, usize, (usize, usize))>,
}

/// What cancels a keyword occurrence.
#[derive(Clone, Copy, Debug)]
enum Cause {
    None,
    /// A negator of this negation rule.
    Negator(usize),
    /// This `except` entry.
    Except(usize),
}

/// A negator occurrence that reaches past its window: where it stands (its end for `before`,
/// its start for `after`), its rule, its span, and the last word it reaches (`u32::MAX`: the
/// end of the clause).
type Reacher = (usize, usize, (usize, usize), u32);

/// Where negators reach beyond their window, computed once per query (keyword hits then look
/// their clause up): those that reach their whole clause (`negation before|after clause`), and
/// those that end their clause before a keyword-free aside ("do not, under any circumstances,
/// delete").
#[derive(Default)]
struct Reaches {
    /// For each clause, the first `before clause` negator in it.
    before: Vec<Option<Reacher>>,
    /// For each clause, the last `after clause` negator in it.
    after: Vec<Option<Reacher>>,
    /// For each clause, the first negator that reaches it over an aside: the negator ends an
    /// earlier clause of the sentence, and the clauses between hold no keyword.
    aside: Vec<Option<Reacher>>,
    /// For each clause, the first clause from it on in its sentence that holds a keyword
    /// (`u32::MAX`: none); and each clause's first word and sentence.
    next_keyword: Vec<u32>,
    first_word: Vec<u32>,
    sentence: Vec<u32>,
}

impl Reaches {
    /// The rule and span of a negator that reaches keyword occurrence `f` beyond its window.
    fn negator(&self, f: &Found, clauses: &[u32]) -> Option<(usize, (usize, usize))> {
        let at = |v: &[Option<Reacher>], w: u32| {
            clauses
                .get(w as usize)
                .and_then(|&c| v.get(c as usize).copied().flatten())
        };
        if let Some((end, n, span, _)) = at(&self.before, f.first_word) {
            if end <= f.start {
                return Some((n, span));
            }
        }
        if let Some((end, n, span, last)) = at(&self.aside, f.first_word) {
            if end <= f.start && f.first_word <= last {
                return Some((n, span));
            }
        }
        match at(&self.after, f.last_word) {
            Some((start, n, span, _)) if start >= f.end => Some((n, span)),
            _ => None,
        }
    }
}

impl Scratch {
    const fn new() -> Scratch {
        Scratch {
            norm: Normalized {
                text: String::new(),
                origin: Vec::new(),
                zwnj_spaces: Vec::new(),
                end: 0,
            },
            words: Vec::new(),
            clauses: Vec::new(),
            keywords: Vec::new(),
            negators: Vec::new(),
            marks: Vec::new(),
            sentences: Vec::new(),
            reach: Reaches {
                before: Vec::new(),
                after: Vec::new(),
                aside: Vec::new(),
                next_keyword: Vec::new(),
                first_word: Vec::new(),
                sentence: Vec::new(),
            },
            quoted: Vec::new(),
            excepts: Vec::new(),
            decided: Vec::new(),
            used: Vec::new(),
        }
    }

    /// Drops buffers a long query grew past `RETAINED_BYTES`, so an idle thread does not keep
    /// megabytes.
    fn trim(&mut self) {
        const RETAINED_BYTES: usize = 16 * 1024;
        if self.norm.text.capacity() > RETAINED_BYTES
            || self.words.capacity() * std::mem::size_of::<(usize, usize)>() > RETAINED_BYTES
        {
            *self = Scratch::new();
        }
    }
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = const { RefCell::new(Scratch::new()) };
}

/// The names a classification result carries (keyword texts, language tags, intent names and
/// negators), interned as static strings for the life of the process up to
/// [`INTERNED_NAME_BYTES`]: building a hit then copies three of them without touching a
/// reference count. (With counted strings, the atomic increments and decrements of one 200-byte
/// query's hits took about a tenth of its time.) Names past the budget are ordinary counted
/// strings, freed with their policy, so a process that loads ever new names (generated
/// lexicons, a watcher over a file being edited) holds at most the budget; reloading a policy
/// keeps nothing (tests/alloc.rs checks both).
struct Names {
    interned: std::sync::MutexGuard<'static, Interned>,
    /// Names of this build past the budget, shared within it.
    counted: FxHashSet<ArcStr>,
}

/// The process's interned names and the bytes they are reckoned to take.
#[derive(Default)]
struct Interned {
    names: FxHashSet<ArcStr>,
    bytes: usize,
}

/// Heap the interned names may take, reckoned as each name's length plus 48 bytes (its
/// allocation header and its slot in the set). The shipped lexicon's names take about 45 KiB.
const INTERNED_NAME_BYTES: usize = 256 * 1024;

impl Names {
    /// The interned names, locked until the value is dropped.
    fn lock() -> Names {
        static INTERNED: std::sync::LazyLock<std::sync::Mutex<Interned>> =
            std::sync::LazyLock::new(Default::default);
        // A panic while the set was held leaves it valid: every entry is whole.
        let interned = INTERNED
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Names {
            interned,
            counted: FxHashSet::default(),
        }
    }

    /// `s` as a shared string: static while the budget lasts, counted after.
    fn get(&mut self, s: &str) -> ArcStr {
        if let Some(a) = self.interned.names.get(s).or_else(|| self.counted.get(s)) {
            return a.clone();
        }
        let a = ArcStr::from(s);
        let cost = s.len() + 48;
        if self.interned.bytes + cost <= INTERNED_NAME_BYTES {
            a.leak();
            self.interned.bytes += cost;
            self.interned.names.insert(a.clone());
        } else {
            self.counted.insert(a.clone());
        }
        a
    }
}

impl Classifier {
    /// Builds the automaton from the checked model's keywords and negators.
    pub(crate) fn build(model: &Model) -> Classifier {
        // Every spelling as (normalized text, pattern), grouped below by text.
        let mut entries: Vec<(String, PatternInfo)> = Vec::new();
        // The checker normalized every keyword and negator (`spellings`).
        let add = |text: &str,
                   spellings: &[String],
                   target: Target,
                   all: &mut Vec<(String, PatternInfo)>| {
            let kind = if text.ends_with('*') {
                PatternKind::Stem
            } else {
                PatternKind::Word
            };
            for spelling in spellings {
                all.push((spelling.clone(), PatternInfo { target, kind }));
            }
        };
        let mut names = Names::lock();
        let keywords: Vec<KeywordEntry> = model
            .keywords
            .iter()
            .map(|k| KeywordEntry {
                intent: u8::try_from(k.intent).unwrap_or(u8::MAX),
                lang: names.get(&k.lang),
                text: names.get(&k.text),
            })
            .collect();
        let negator_texts = model.negations.iter().map(|n| names.get(&n.text)).collect();
        let except_texts = model
            .exceptions
            .iter()
            .map(|e| names.get(&e.text))
            .collect();
        let intents = model.intents.iter().map(|s| names.get(&s.name)).collect();
        drop(names);
        for (i, k) in model.keywords.iter().enumerate() {
            add(&k.text, &k.spellings, Target::Keyword(i), &mut entries);
        }
        for (i, n) in model.negations.iter().enumerate() {
            add(&n.text, &n.spellings, Target::Negator(i), &mut entries);
        }
        // Embedded phrases only matter when quoted content is read as data.
        if model.quoted != Quoted::Count {
            for (i, e) in model.embedded.iter().enumerate() {
                add(&e.text, &e.spellings, Target::Embedded(i), &mut entries);
            }
        }
        for (i, e) in model.exceptions.iter().enumerate() {
            add(&e.text, &e.spellings, Target::Except(i), &mut entries);
        }
        // Stable: the spellings of one text keep their declaration order.
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let mut texts: Vec<String> = Vec::new();
        let mut needles: Vec<Needle> = Vec::new();
        let mut patterns = Vec::with_capacity(entries.len());
        // What a spelling contributes to a classification: two spellings of one needle with the
        // same role make the same hits (but for the keyword text a hit reports), so only the
        // first declared is kept. A needle then has at most two patterns per intent and one per
        // negation window and direction, whatever the policy repeats.
        let role = |info: &PatternInfo| match info.target {
            Target::Keyword(k) => (0, model.keywords[k].intent, info.kind as usize),
            Target::Negator(n) => {
                let rule = &model.negations[n];
                (1, rule.direction as usize, rule.window as usize)
            }
            Target::Embedded(_) => (2, 0, 0),
            Target::Except(_) => (3, 0, info.kind as usize),
        };
        for (text, info) in entries {
            if texts.last() != Some(&text) {
                needles.push(Needle {
                    len: u32::try_from(text.len()).unwrap_or(u32::MAX),
                    first: u32::try_from(patterns.len()).unwrap_or(u32::MAX),
                    count: 0,
                });
                texts.push(text);
            }
            let Some(n) = needles.last_mut() else {
                continue;
            };
            let first = n.first as usize;
            if patterns[first..].iter().any(|p| role(p) == role(&info)) {
                continue;
            }
            n.count += 1;
            patterns.push(info);
        }
        let automaton = if texts.is_empty() {
            None
        } else {
            // A contiguous NFA: a few hundred KiB for the shipped lexicon where a DFA takes
            // megabytes, at a small cost per byte walked. It is only walked anchored, as a trie;
            // leftmost-longest semantics keep the trie whole and leave a needle's state
            // reporting that needle alone, where standard semantics would add every shorter
            // needle that ends there.
            aho_corasick::nfa::contiguous::Builder::new()
                .match_kind(MatchKind::LeftmostLongest)
                // Walks start at word starts, not at a prefilter's candidates.
                .prefilter(false)
                .build(&texts)
                .ok()
        };
        Classifier {
            starts: WalkStarts::new(automaton.as_ref(), &texts),
            stem_states: automaton
                .as_ref()
                .map(|ac| {
                    let stems = texts.iter().zip(&needles).filter(|(_, n)| {
                        let (from, count) = (n.first as usize, n.count as usize);
                        patterns[from..from + count]
                            .iter()
                            .any(|p| p.kind == PatternKind::Stem)
                    });
                    state_set(ac, stems.map(|(t, _)| t.as_str()))
                })
                .unwrap_or_default(),
            automaton,
            needles,
            patterns,
            keywords,
            negator_texts,
            max_window: model.negations.iter().map(|r| r.window).max().unwrap_or(0),
            except_texts,
            has_marks: !model.exceptions.is_empty()
                || (model.quoted != Quoted::Count && !model.embedded.is_empty()),
            quoted: model.quoted,
            negations: model.negations.clone(),
            intents,
            fallback: model
                .fallback
                .map(|(i, _)| u8::try_from(i).unwrap_or(u8::MAX)),
            combine: model.combine,
            fold_accents: model.fold_accents,
        }
    }

    /// Whether a needle with a `"stem*"` spelling ends in automaton state `sid`.
    #[inline(always)]
    fn ends_stem(&self, sid: StateID) -> bool {
        let i = sid.as_usize();
        self.stem_states
            .get(i / 64)
            .is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    /// Every keyword entry as `(intent, lang, text)`, in declaration order (for analysis).
    pub(crate) fn keyword_entries(&self) -> impl Iterator<Item = (&str, &str, &str)> {
        self.keywords.iter().map(|k| {
            (
                self.intents
                    .get(k.intent as usize)
                    .map_or("", ArcStr::as_str),
                k.lang.as_str(),
                k.text.as_str(),
            )
        })
    }

    /// Every negator as `(direction, window, text)`, in declaration order (for analysis).
    pub(crate) fn negator_entries(&self) -> impl Iterator<Item = (&'static str, String, &str)> {
        self.negations.iter().map(|n| {
            let dir = match n.direction {
                Direction::Before => "before",
                Direction::After => "after",
            };
            let reach = if n.clause {
                "clause".to_string()
            } else {
                n.window.to_string()
            };
            (dir, reach, n.text.as_str())
        })
    }

    /// `"priority"` or `"union"`.
    pub(crate) fn combine_name(&self) -> &'static str {
        match self.combine {
            Combine::Priority => "priority",
            Combine::Union => "union",
        }
    }

    /// Number of keyword entries (not counting ZWNJ variants or negators).
    pub(crate) fn keyword_count(&self) -> usize {
        self.keywords.len()
    }

    /// Classifies `query`; see the module docs.
    pub(crate) fn classify(&self, query: &str) -> Intent {
        SCRATCH.with(|cell| match cell.try_borrow_mut() {
            Ok(mut scratch) => {
                let intent = self.classify_with(query, &mut scratch);
                scratch.trim();
                intent
            }
            // Only reachable if classification re-entered itself on this thread.
            Err(_) => self.classify_with(query, &mut Scratch::new()),
        })
    }

    fn classify_with(&self, query: &str, scratch: &mut Scratch) -> Intent {
        let mut cut = query.len().min(limits::MAX_QUERY_BYTES);
        while !query.is_char_boundary(cut) {
            cut -= 1;
        }
        let mut truncated = cut < query.len();
        if truncated {
            // A word the cap cuts in two is not read: "addx" cut after "add" is not "add".
            cut = word_safe_cut(&query[..cut]);
        }
        let query = &query[..cut];
        let Scanned {
            hits,
            dropped,
            mask,
            cut_short,
        } = self.scan(query, scratch);
        truncated |= cut_short;
        if mask == 0 {
            let fallback_name = self
                .fallback
                .and_then(|i| self.intents.get(i as usize).cloned())
                .unwrap_or_default();
            return Intent {
                // A policy without intents has no fallback: the intent set is empty.
                intents: if fallback_name.is_empty() {
                    Vec::new()
                } else {
                    vec![fallback_name.clone()]
                },
                name: fallback_name,
                hits,
                dropped,
                fallback: true,
                truncated,
            };
        }
        let mut ordered = (0..self.intents.len())
            .filter(|i| mask & (1u64 << (*i as u32).min(63)) != 0)
            .map(|i| self.intents[i].clone());
        let name = ordered.next().unwrap_or_default();
        let intents = match self.combine {
            Combine::Priority => vec![name.clone()],
            Combine::Union => std::iter::once(name.clone()).chain(ordered).collect(),
        };
        Intent {
            name,
            intents,
            hits,
            dropped,
            fallback: false,
            truncated,
        }
    }

    /// Finds the keyword hits in `query`, each list in query order. Reading stops at the word
    /// start where the occurrences found would pass [`limits::MAX_QUERY_OCCURRENCES`].
    fn scan(&self, query: &str, scratch: &mut Scratch) -> Scanned {
        let mut out = Scanned::default();
        let Some(ac) = &self.automaton else {
            return out;
        };
        let Ok(start_state) = ac.start_state(Anchored::Yes) else {
            return out;
        };
        let Scratch {
            norm,
            words,
            clauses,
            keywords,
            negators,
            marks,
            sentences,
            reach,
            quoted,
            excepts,
            decided,
            used,
        } = scratch;
        normalize_into(query, self.fold_accents, norm);
        let text = norm.text.as_str();
        word_ranges_into(text, words);
        keywords.clear();
        negators.clear();
        let bytes = text.as_bytes();
        let zwnj_spaces = &norm.zwnj_spaces[..];
        for (first, &(s, _)) in words.iter().enumerate() {
            let (sid, read) = match self.starts.start(bytes, s, zwnj_spaces) {
                Start::None => continue,
                Start::Step => (start_state, 0),
                Start::Three(sid) => (sid, 3),
            };
            // Walk the automaton from the word start, reading every space that stands for ZWNJ
            // as a space; if the walk reached one, walk again from the start reading each as
            // nothing.
            let walk = Walk {
                ac,
                bytes,
                zwnj_spaces,
                start: s,
                first,
                words,
            };
            let found_before = (keywords.len(), negators.len());
            if walk.run(self, sid, read, false, keywords, negators) {
                walk.run(self, start_state, 0, true, keywords, negators);
            }
            if keywords.len() + negators.len() > limits::MAX_QUERY_OCCURRENCES {
                // Nothing from this word start on is read.
                keywords.truncate(found_before.0);
                negators.truncate(found_before.1);
                out.cut_short = true;
                break;
            }
        }
        keywords.sort_unstable_by_key(|f| (f.start, f.end, target_index(f.target)));
        keywords.dedup_by_key(|f| (f.start, f.end, target_index(f.target)));
        negators.sort_unstable_by_key(|f| (f.start, f.end, target_key(f.target)));
        negators.dedup_by_key(|f| (f.start, f.end, target_key(f.target)));
        marks.clear();
        if self.has_marks {
            // Embedded phrases and exceptions were recorded with the negators; split them off.
            marks.extend(
                negators
                    .iter()
                    .filter(|g| !matches!(g.target, Target::Negator(_))),
            );
            negators.retain(|g| matches!(g.target, Target::Negator(_)));
        }
        // Most words one negator occurrence covers (read across ZWNJ, more than its spelling).
        let negator_words = negators
            .iter()
            .map(|g| g.last_word - g.first_word + 1)
            .max()
            .unwrap_or(1);
        if negators.is_empty() {
            out.hits.reserve_exact(keywords.len());
        } else {
            clause_starts(bytes, words, clauses, sentences);
        }
        let reaches = !negators.is_empty()
            && self.reaches(negators, keywords, words.len(), clauses, sentences, reach);
        quoted.clear();
        if self.quoted != Quoted::Count && !keywords.is_empty() {
            quoted_ranges(bytes, words, marks, quoted);
        }
        // Exceptions by start, each with the farthest end of any starting at or before it.
        excepts.clear();
        for g in marks.iter() {
            if let Target::Except(e) = g.target {
                let (end, e) = match excepts.last() {
                    Some(&(_, far, j)) if far >= g.end => (far, j),
                    _ => (g.end, e),
                };
                excepts.push((g.start, end, e));
            }
        }
        // First pass: what cancels each keyword occurrence, and which negator occurrences
        // cancelled one (a word that is both keyword and negator reads as the negator then).
        decided.clear();
        used.clear();
        for f in keywords.iter() {
            let mut cause = Cause::None;
            if !negators.is_empty() {
                if let Some((n, at)) = self
                    .negator_of(f, negators, negator_words, clauses)
                    .or_else(|| reaches.then(|| reach.negator(f, clauses)).flatten())
                {
                    cause = Cause::Negator(n);
                    used.push((at.0, n, at));
                }
            }
            if matches!(cause, Cause::None) && !excepts.is_empty() {
                let i = excepts.partition_point(|e| e.0 <= f.start);
                if let Some(&(_, far, e)) = i.checked_sub(1).and_then(|i| excepts.get(i)) {
                    if far >= f.end {
                        cause = Cause::Except(e);
                    }
                }
            }
            decided.push(cause);
        }
        if !used.is_empty() {
            // Each used negator occurrence with the farthest end of any starting at or before
            // it, so a containing one is found by one binary search.
            used.sort_unstable();
            let mut far = 0;
            for u in used.iter_mut() {
                far = far.max(u.2 .1);
                u.2 .1 = far;
            }
            for (f, cause) in keywords.iter().zip(decided.iter_mut()) {
                if !matches!(cause, Cause::None) {
                    continue;
                }
                let i = used.partition_point(|u| u.0 <= f.start);
                if let Some(&(_, n, (_, far))) = i.checked_sub(1).and_then(|i| used.get(i)) {
                    if far >= f.end {
                        *cause = Cause::Negator(n);
                    }
                }
            }
        }
        let mut quoted_hits = false;
        for (f, cause) in keywords.iter().zip(decided.iter()) {
            let Target::Keyword(k) = f.target else {
                continue;
            };
            let entry = &self.keywords[k];
            let inside = self.quoted != Quoted::Count
                && ((!quoted.is_empty() && in_ranges(quoted, f.start, f.end))
                    || in_identifier(bytes, f.start, f.end));
            let hit = Hit {
                keyword: entry.text.clone(),
                intent: self
                    .intents
                    .get(entry.intent as usize)
                    .cloned()
                    .unwrap_or_default(),
                lang: entry.lang.clone(),
                span: (norm.origin(f.start), norm.origin_end(f.end)),
                negated_by: match *cause {
                    Cause::None => None,
                    Cause::Negator(n) => Some(self.negator_texts[n].clone()),
                    Cause::Except(e) => Some(self.except_texts[e].clone()),
                },
                quoted: inside,
            };
            if !matches!(cause, Cause::None) || (inside && self.quoted == Quoted::Ignore) {
                out.dropped.push(hit);
            } else if inside {
                // `quoted data`: counts only if nothing outside quoted content does.
                quoted_hits = true;
                out.hits.push(hit);
            } else {
                out.mask |= 1u64 << u32::from(entry.intent).min(63);
                out.hits.push(hit);
            }
        }
        if quoted_hits {
            if out.mask == 0 {
                for h in &out.hits {
                    if let Some(i) = self.intents.iter().position(|n| *n == h.intent) {
                        out.mask |= 1u64 << (i as u32).min(63);
                    }
                }
            } else {
                let (inside, outside): (Vec<Hit>, Vec<Hit>) = std::mem::take(&mut out.hits)
                    .into_iter()
                    .partition(|h| h.quoted);
                out.hits = outside;
                out.dropped.extend(inside);
                out.dropped.sort_by_key(|h| h.span);
            }
        }
        out
    }

    /// The first negation rule (in query order of the negators) that cancels keyword hit `f`:
    /// a negator within the rule's window, in the same clause (see [`clause_starts`]).
    /// `negators` is sorted by start; `negator_words` is the most words one of them covers;
    /// `clauses` numbers each word's clause ([`clause_starts`]).
    fn negator_of(
        &self,
        f: &Found,
        negators: &[Found],
        negator_words: u32,
        clauses: &[u32],
    ) -> Option<(usize, (usize, usize))> {
        let clause = |w: u32| clauses.get(w as usize).copied();
        if negators.is_empty() {
            return None;
        }
        let lo_word = f
            .first_word
            .saturating_sub(self.max_window.saturating_add(negator_words));
        let hi_word = f.last_word.saturating_add(self.max_window);
        let from = negators.partition_point(|g| g.first_word < lo_word);
        negators[from..]
            .iter()
            .take_while(|g| g.first_word <= hi_word)
            .find_map(|g| {
                let Target::Negator(n) = g.target else {
                    return None;
                };
                let rule = &self.negations[n];
                if rule.clause {
                    return None;
                }
                let ok = match rule.direction {
                    Direction::Before => {
                        g.end <= f.start
                            && f.first_word.saturating_sub(g.last_word) <= rule.window
                            && clause(g.last_word) == clause(f.first_word)
                    }
                    Direction::After => {
                        g.start >= f.end
                            && g.first_word.saturating_sub(f.last_word) <= rule.window
                            && clause(f.last_word) == clause(g.first_word)
                    }
                };
                ok.then_some((n, (g.start, g.end)))
            })
    }

    /// Fills `reach` from `negators` (sorted by start) and the keyword occurrences of a query
    /// of `nwords` words whose clauses and sentences are numbered in `clauses` and `sentences`
    /// ([`clause_starts`]); returns whether any negator reaches beyond its window. A few passes
    /// over the clauses, keywords and negators: linear.
    fn reaches(
        &self,
        negators: &[Found],
        keywords: &[Found],
        nwords: usize,
        clauses: &[u32],
        sentences: &[u32],
        reach: &mut Reaches,
    ) -> bool {
        // A negator "dangles" when it ends its clause with more of its sentence after it.
        let dangles = |g: &Found| {
            let last = g.last_word as usize;
            last + 1 < nwords
                && clauses.get(last + 1) != clauses.get(last)
                && sentences.get(last + 1) == sentences.get(last)
        };
        let any = negators.iter().any(|g| match g.target {
            Target::Negator(n) => self.negations[n].clause || dangles(g),
            _ => false,
        });
        if !any {
            return false;
        }
        let n_clauses = clauses.last().map_or(0, |&c| c as usize + 1);
        for v in [&mut reach.before, &mut reach.after, &mut reach.aside] {
            v.clear();
            v.resize(n_clauses, None);
        }
        reach.first_word.clear();
        reach.first_word.resize(n_clauses, u32::MAX);
        reach.sentence.clear();
        reach.sentence.resize(n_clauses, 0);
        for (w, (&c, &s)) in clauses.iter().zip(sentences).enumerate() {
            let c = c as usize;
            if reach.first_word[c] == u32::MAX {
                reach.first_word[c] = u32::try_from(w).unwrap_or(u32::MAX);
                reach.sentence[c] = s;
            }
        }
        reach.next_keyword.clear();
        reach.next_keyword.resize(n_clauses, u32::MAX);
        for f in keywords {
            if let Some(&c) = clauses.get(f.first_word as usize) {
                reach.next_keyword[c as usize] = c;
            }
        }
        for c in (0..n_clauses.saturating_sub(1)).rev() {
            if reach.next_keyword[c] == u32::MAX && reach.sentence[c + 1] == reach.sentence[c] {
                reach.next_keyword[c] = reach.next_keyword[c + 1];
            }
        }
        for g in negators {
            let Target::Negator(n) = g.target else {
                continue;
            };
            let rule = &self.negations[n];
            let (first, last) = (g.first_word as usize, g.last_word as usize);
            let (Some(&c), Some(&c_last)) = (clauses.get(first), clauses.get(last)) else {
                continue;
            };
            let span = (g.start, g.end);
            if rule.direction == Direction::After {
                if rule.clause {
                    reach.after[c as usize] = Some((g.start, n, span, u32::MAX));
                }
                continue;
            }
            if rule.clause && reach.before[c_last as usize].is_none() {
                reach.before[c_last as usize] = Some((g.end, n, span, u32::MAX));
            }
            if !dangles(g) {
                continue;
            }
            // The clause after the aside: the next one holding a keyword, not the very next.
            let next = c_last as usize + 1;
            let Some(&d) = reach.next_keyword.get(next) else {
                continue;
            };
            if d == u32::MAX || d as usize == next {
                continue;
            }
            let d = d as usize;
            let limit = if rule.clause {
                u32::MAX
            } else {
                reach.first_word[d]
                    .saturating_add(rule.window)
                    .saturating_sub(1)
            };
            if reach.aside[d].is_none() {
                reach.aside[d] = Some((g.end, n, span, limit));
            }
        }
        true
    }
}

/// Numbers the clauses of normalized `text` (`words` its word ranges): `clauses[w]` is how many
/// clause ends come before word `w`, so two words are in one clause when their numbers agree. A
/// clause ends in a gap between words that holds `.` `!` `?` `;` `,` `:` `(` `)` (fullwidth
/// forms and `…` read as these once normalized), a dash (`–`, `—`, or `-` beside a space), the
/// Arabic-script `؟` `؛` `۔` `،`, or the ideographic `。` `、`. A negator does not reach across a clause end, as in NegEx-style negation scopes: in
/// "don't worry. cancel it" and "no problem, delete it" nothing negates the verb. One pass over
/// the gaps, so a negation check is a comparison.
fn clause_starts(
    text: &[u8],
    words: &[(usize, usize)],
    clauses: &mut Vec<u32>,
    sentences: &mut Vec<u32>,
) {
    clauses.clear();
    sentences.clear();
    let (mut n, mut s) = (0u32, 0u32);
    let mut prev_end = None;
    for &(start, end) in words {
        if let Some(from) = prev_end {
            let gap = text.get(from..start).unwrap_or_default();
            if gap_ends_clause(gap) {
                n += 1;
                if gap_ends_sentence(gap) {
                    s += 1;
                }
            }
        }
        clauses.push(n);
        sentences.push(s);
        prev_end = Some(end);
    }
}

/// Whether the text between two words ends a sentence: it holds `.` `!` `?` `;`, the
/// Arabic-script `؟` `؛` `۔` or the ideographic `。` (a clause end of [`gap_ends_clause`] that
/// is not a comma, colon, parenthesis or dash).
fn gap_ends_sentence(gap: &[u8]) -> bool {
    gap.iter().any(|b| matches!(b, b'.' | b'!' | b'?' | b';'))
        || gap
            .windows(2)
            .any(|w| matches!(w, [0xD8, 0x9F] | [0xD8, 0x9B] | [0xDB, 0x94]))
        || gap.windows(3).any(|w| w == [0xE3, 0x80, 0x82])
}

/// Fills `out` with the quoted content of normalized `text` but for identifiers (see
/// [`in_identifier`]), as sorted disjoint byte ranges: the text after the first `embedded`
/// phrase in `marks` (to the end), and text between paired quotation marks. One pass over the
/// text, skipped when it holds no quotation mark.
fn quoted_ranges(
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
fn in_identifier(text: &[u8], start: usize, end: usize) -> bool {
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
fn in_ranges(ranges: &[(usize, usize)], start: usize, end: usize) -> bool {
    let i = ranges.partition_point(|r| r.0 <= start);
    i > 0 && ranges[i - 1].1 >= end
}

/// Whether the text between two words ends a clause (see [`clause_starts`]).
fn gap_ends_clause(gap: &[u8]) -> bool {
    gap.iter()
        .any(|b| matches!(b, b'.' | b'!' | b'?' | b';' | b',' | b':' | b'(' | b')'))
        // A hyphen with a space beside it is a dash ("no worries - delete it"); alone it
        // joins a compound ("co-op").
        || (gap.contains(&b'-') && gap.contains(&b' '))
        // En and em dashes.
        || gap
            .windows(3)
            .any(|w| w == [0xE2, 0x80, 0x93] || w == [0xE2, 0x80, 0x94])
        || gap
            .windows(2)
            .any(|w| matches!(w, [0xD8, 0x9F] | [0xD8, 0x9B] | [0xDB, 0x94] | [0xD8, 0x8C]))
        || gap
            .windows(3)
            .any(|w| w == [0xE3, 0x80, 0x82] || w == [0xE3, 0x80, 0x81])
}

/// What [`Classifier::scan`] found in a query.
#[derive(Default)]
struct Scanned {
    /// Keyword hits that counted, in query order.
    hits: Vec<Hit>,
    /// Keyword hits a negator dropped, in query order.
    dropped: Vec<Hit>,
    /// The intents of `hits`, as a bit set by intent index.
    mask: u64,
    /// Whether reading stopped early at [`limits::MAX_QUERY_OCCURRENCES`].
    cut_short: bool,
}

/// The end of the longest start of `text` that does not end inside a word: before its last
/// white space, else before its last ASCII character that no word holds (not a letter, digit,
/// `_`, `'`, `"`, `.`, `:`, `,` or `;`: `"` joins Hebrew letters, as in צה"ל), else 0. ZWNJ
/// is no break here: it joins the parts of a Persian word.
fn word_safe_cut(text: &str) -> usize {
    if let Some((at, _)) = text.char_indices().rev().find(|&(_, c)| c.is_whitespace()) {
        return at;
    }
    text.bytes()
        .rposition(|b| b.is_ascii() && !b.is_ascii_alphanumeric() && !b"_'\".:,;".contains(&b))
        .unwrap_or(0)
}

/// One walk of the keyword automaton from a word start of the normalized text.
struct Walk<'a> {
    ac: &'a NFA,
    bytes: &'a [u8],
    /// Spaces that stand for ZWNJ alone (ascending offsets).
    zwnj_spaces: &'a [usize],
    /// Where the walk starts: a word start, and that word's index in `words`.
    start: usize,
    first: usize,
    words: &'a [(usize, usize)],
}

impl Walk<'_> {
    /// Walks from state `sid`, `read` bytes past `self.start` (the start state and 0, or a
    /// state [`WalkStarts`] memoized and 3), until no needle continues, recording every
    /// occurrence in `keywords` or `negators`. With `joined`, every space that stands for ZWNJ
    /// is read as nothing; without, as a space. Returns whether the walk reached such a space
    /// (so the other reading may find more). At most as many steps as the longest needle, plus
    /// the spaces skipped.
    #[inline(always)]
    fn run(
        &self,
        classifier: &Classifier,
        mut sid: StateID,
        mut read: usize,
        joined: bool,
        keywords: &mut Vec<Found>,
        negators: &mut Vec<Found>,
    ) -> bool {
        let (ac, zwnj) = (self.ac, self.zwnj_spaces);
        let (mut at, mut reached) = (self.start + read, false);
        if read > 0 && self.may_record(classifier, sid, at) {
            self.record(classifier, sid, at, read, keywords, negators);
        }
        // The first space standing for ZWNJ at or after `at`: the walk only moves forward, so
        // each step checks one entry.
        let mut z = if zwnj.is_empty() {
            0
        } else {
            zwnj.partition_point(|&p| p < at)
        };
        while let Some(&b) = self.bytes.get(at) {
            if b == b' ' && zwnj.get(z) == Some(&at) {
                z += 1;
                reached = true;
                if joined {
                    at += 1;
                    continue;
                }
            }
            sid = ac.next_state(Anchored::Yes, sid, b);
            if ac.is_dead(sid) {
                break;
            }
            at += 1;
            read += 1;
            if self.may_record(classifier, sid, at) {
                self.record(classifier, sid, at, read, keywords, negators);
            }
        }
        reached
    }

    /// Whether state `sid`, reached at offset `end`, may make a hit: it reports a needle, and
    /// either that needle may be a stem or `end` may be a word end. Inside a run of ASCII
    /// letters and digits, or of Arabic-script letters, there is no word boundary (UAX #29
    /// WB5, WB8–WB10), so a `"word"` needle ending there is skipped before it is looked up.
    #[inline(always)]
    fn may_record(&self, classifier: &Classifier, sid: StateID, end: usize) -> bool {
        if !self.ac.is_match(sid) {
            return false;
        }
        let b = self.bytes;
        let inside = match (b.get(end.wrapping_sub(1)), b.get(end)) {
            (Some(&x), Some(&y)) if x < 0x80 => {
                x.is_ascii_alphanumeric() && y.is_ascii_alphanumeric()
            }
            (Some(_), Some(&y)) => {
                let letter = |i: usize| match (b.get(i), b.get(i + 1)) {
                    (Some(&lead @ 0xC2..=0xDF), Some(&next)) => {
                        SHORT_CLASS[two_byte(lead, next)] == WordClass::Letter
                    }
                    _ => false,
                };
                y >= 0x80 && letter(end.wrapping_sub(2)) && letter(end)
            }
            _ => false,
        };
        !inside || classifier.ends_stem(sid)
    }

    /// Records the spellings of the needle that ends in automaton state `sid` when the walk has
    /// read `read` bytes and reached offset `end`: the needle as long as the walk (a state may
    /// also report shorter needles that start later; they are found from their own word start),
    /// for spellings that end on a word boundary (`"word"`) or anywhere (`"stem*"`, whose hit
    /// then spans the rest of its word).
    fn record(
        &self,
        classifier: &Classifier,
        sid: StateID,
        end: usize,
        read: usize,
        keywords: &mut Vec<Found>,
        negators: &mut Vec<Found>,
    ) {
        let (ac, words, first) = (self.ac, self.words, self.first);
        // Needles are distinct, so at most one is as long as the walk.
        let Some(needle) = (0..ac.match_len(sid))
            .map(|m| ac.match_pattern(sid, m).as_usize())
            .find_map(|p| classifier.needles.get(p).filter(|n| n.len as usize == read))
        else {
            return;
        };
        let (from, count) = (needle.first as usize, needle.count as usize);
        for info in &classifier.patterns[from..from + count] {
            let last = match info.kind {
                PatternKind::Word => match words[first..].binary_search_by_key(&end, |w| w.1) {
                    Ok(j) => first + j,
                    Err(_) => continue,
                },
                PatternKind::Stem => words.partition_point(|w| w.0 < end).saturating_sub(1),
            };
            let f = Found {
                start: self.start,
                // A stem hit spans the whole word it ends in.
                end: match info.kind {
                    PatternKind::Word => end,
                    PatternKind::Stem => words.get(last).map_or(end, |w| w.1.max(end)),
                },
                first_word: u32::try_from(first).unwrap_or(u32::MAX),
                last_word: u32::try_from(last).unwrap_or(u32::MAX),
                target: info.target,
            };
            match info.target {
                Target::Keyword(_) => keywords.push(f),
                // Embedded phrases and exceptions are split off the negators after the walks.
                _ => negators.push(f),
            }
        }
    }
}

/// The Unicode (UAX #29) words of `text`, as `(start, end)` byte ranges in order, into `words`:
/// the segments between word boundaries that hold a letter or digit.
fn word_ranges_into(text: &str, words: &mut Vec<(usize, usize)>) {
    words.clear();
    if !simple_word_ranges(text, words) {
        words.clear();
        words.extend(text.unicode_word_indices().map(|(i, w)| (i, i + w.len())));
    }
}

/// UAX #29 word class of the characters [`simple_word_ranges`] handles.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum WordClass {
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
    fn joins(self, prev: WordClass, next: WordClass) -> bool {
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
const SHORT_CLASS: [WordClass; 0x800] = {
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
    let mut flags = next.1;
    // The last bit of the previous block's letter-digit mask and word mask.
    let (mut core_top, mut word_top) = (0u64, 0u64);
    // Words are pushed with their start; the first `ended` of them have their end.
    let mut ended = words.len();
    for k in 0..blocks {
        let core = next.0;
        next = if k + 1 < blocks {
            core_block(b, k + 1)
        } else {
            Default::default()
        };
        flags.controls |= next.1.controls;
        flags.underscores |= next.1.underscores;
        // A single byte between two letters or digits may join them (WB6/7, WB11/12).
        let mut word = core;
        let mut gaps = !core & (core << 1 | core_top) & (core >> 1 | next.0 << 63);
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
    if flags.controls
        && b.iter()
            .any(|&x| ASCII_CLASS[usize::from(x & 0x7F)] == WordClass::Unknown)
    {
        return false;
    }
    // A run of only `_` is not a word.
    if flags.underscores {
        words.retain(|&(start, end)| b[start..end].iter().any(|&x| x != b'_'));
    }
    true
}

/// What [`core_block`] saw besides letters and digits.
#[derive(Clone, Copy, Default)]
struct BlockFlags {
    /// A byte below U+0020, or U+007F.
    controls: bool,
    /// A `_`.
    underscores: bool,
}

/// Bit `j` set where byte `j` of block `k` (bytes `64 * k..`) of ASCII text `b` is a letter,
/// digit or `_` (0 past the end), with the block's [`BlockFlags`].
fn core_block(b: &[u8], k: usize) -> (u64, BlockFlags) {
    let from = (64 * k).min(b.len());
    let block = &b[from..(from + 64).min(b.len())];
    let mut chunks = block.chunks_exact(16);
    let (mut bits, mut controls, mut underscores) = (0u64, 0u64, 0u64);
    let mut add = |j: usize, x: [u8; 16]| {
        let m = core_bits(x);
        bits |= m.core << (16 * j);
        controls |= m.controls;
        underscores |= m.underscores;
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
        underscores: underscores != 0,
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
        let mask = |m: __m128i| u64::from(_mm_movemask_epi8(m) as u16);
        CoreBits {
            core: mask(core),
            controls: mask(controls),
            underscores: mask(underscore),
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
    };
    for (j, &c) in x.iter().enumerate() {
        m.core |= u64::from(c.is_ascii_alphanumeric() || c == b'_') << j;
        m.controls |= u64::from(c < 0x20 || c == 0x7F) << j;
        m.underscores |= u64::from(c == b'_') << j;
    }
    m
}

/// A key that tells the targets of one kind apart from those of another.
fn target_key(t: Target) -> (u8, usize) {
    match t {
        Target::Keyword(i) => (0, i),
        Target::Negator(i) => (1, i),
        Target::Embedded(i) => (2, i),
        Target::Except(i) => (3, i),
    }
}

fn target_index(t: Target) -> usize {
    match t {
        Target::Keyword(i) | Target::Negator(i) | Target::Embedded(i) | Target::Except(i) => i,
    }
}

/// A keyword written with ZWNJ (U+200C) matches both the spaced and the joined spelling.
fn zwnj_variants(text: &str) -> Vec<String> {
    if text.contains('\u{200C}') {
        vec![text.replace('\u{200C}', " "), text.replace('\u{200C}', "")]
    } else {
        vec![text.to_string()]
    }
}

/// The texts the automaton holds for a keyword or negator `body` (without a stem's `*`): its
/// [`normalize`]d form, or two for text written with ZWNJ (spaced, then joined); a spelling
/// that normalizes to nothing is left out, so the list is empty for a body made only of
/// characters normalization removes.
pub(crate) fn spellings(body: &str, fold_accents: bool) -> Vec<String> {
    let mut norm = Normalized::default();
    zwnj_variants(body)
        .into_iter()
        .filter_map(|variant| {
            normalize_into(&variant, fold_accents, &mut norm);
            (!norm.text.is_empty()).then(|| norm.text.clone())
        })
        .collect()
}

/// Why a normalized spelling can never be found in a query.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unmatchable {
    /// Its first character cannot start a word (walks begin at word starts only).
    Start(char),
    /// Its last character cannot end a word, and the spelling is a `"word"` or negator (which
    /// must end on a word end).
    End(char),
}

/// Whether `spelling` (a text of [`spellings`]) can be found in some query, as a `"stem*"`
/// (`stem`: it may end inside a word) or as a word or phrase: a walk starts only where a UAX
/// #29 word starts, and a word or phrase is recorded only where one ends. Words are the
/// segments that hold a letter or digit, so a spelling whose first (last) word starts after
/// its first character (ends before its last) is never found, in any context: the character
/// there is outside every word or belongs to a longer one.
///
/// A stem whose first segment (between UAX #29 word boundaries) runs to its end may begin a
/// longer word in a query (`"_*"` begins `_foo`), so only a stem whose first segment ends
/// inside it, outside every word, is reported for its start.
pub(crate) fn unmatchable(spelling: &str, stem: bool) -> Option<Unmatchable> {
    let mut words = Vec::new();
    word_ranges_into(spelling, &mut words);
    let first_char = spelling.chars().next()?;
    if stem {
        let first_segment = spelling.split_word_bounds().next().map_or(0, str::len);
        if first_segment == spelling.len() {
            return None;
        }
    }
    let Some(&(first, _)) = words.first() else {
        return Some(Unmatchable::Start(first_char));
    };
    if first != 0 {
        return Some(Unmatchable::Start(first_char));
    }
    let last = words.last().map_or(0, |w| w.1);
    match spelling.chars().next_back() {
        Some(c) if !stem && last != spelling.len() => Some(Unmatchable::End(c)),
        _ => None,
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
