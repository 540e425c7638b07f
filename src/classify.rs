//! Query intent classification: text normalization and one keyword automaton.
//!
//! A query is normalized exactly like the policy's keywords ([`normalize`]) and split into
//! Unicode words (UAX #29 word boundaries, as `unicode-segmentation` computes them; a fast path
//! gives the same boundaries for ASCII and common Arabic-script text). One automaton over every
//! keyword and negator of every intent (an Aho-Corasick automaton walked anchored, i.e. a trie) is walked from
//! each word start, so an occurrence always starts on a word boundary; `"word"` (and a phrase)
//! must also end on one, `"stem*"` may end inside a word. A keyword hit with a negator within the
//! negation window (in words, before or after) is dropped and reported in [`Intent::dropped`].
//! Under `combine priority` the highest-priority intent with a surviving hit wins; under
//! `combine union` every intent with a hit counts. A query without hits gets the `fallback`
//! intent. Time is linear in the query length (each walk is bounded by the longest keyword).
//!
//! Rules from seed 001 (query mutation classes, priority Destructive > Execute > Export > Write >
//! Read, an empty or unclear query offers read only).

use aho_corasick::automaton::Automaton;
use aho_corasick::nfa::contiguous::NFA;
use aho_corasick::{Anchored, MatchKind};
use serde::Serialize;
use unicode_normalization::char::{canonical_combining_class, decompose_compatible};
use unicode_segmentation::UnicodeSegmentation;

use crate::check::{Model, NegationRule};
use crate::limits;
use crate::syntax::ast::{Combine, Direction};

/// One keyword found in a query.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Hit {
    /// The keyword as written in the policy (`"edit*"`, `"do not"`).
    pub keyword: String,
    /// The intent the keyword signals.
    pub intent: String,
    /// The keyword's language tag.
    pub lang: String,
    /// Byte range of the match in the original query text (for a `"stem*"` keyword, the whole
    /// word it starts).
    pub span: (usize, usize),
    /// For a dropped hit, the negator that cancelled it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub negated_by: Option<String>,
}

/// The classification of one query: the intent to gate tools with, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Intent {
    /// The deciding intent: the highest-priority one hit, or the fallback.
    pub name: String,
    /// Every intent that counts: `[name]` under `combine priority`; every intent hit, highest
    /// priority first, under `combine union`.
    pub intents: Vec<String>,
    /// Keyword hits that counted, in query order.
    pub hits: Vec<Hit>,
    /// Keyword hits dropped by a negator, in query order.
    pub dropped: Vec<Hit>,
    /// Whether no keyword hit counted and the fallback intent was used.
    pub fallback: bool,
    /// Whether the query was longer than [`limits::MAX_QUERY_BYTES`] and only its start was read.
    pub truncated: bool,
}

impl Intent {
    /// An intent given by name (e.g. from `--intent`), without a query.
    pub fn named(name: impl Into<String>) -> Intent {
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
        S: Into<String>,
    {
        let intents: Vec<String> = names.into_iter().map(Into::into).collect();
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
    /// For each byte of `text`, the byte offset in the original of the character it came from;
    /// one extra entry holds the original length. Empty when the map is the identity (ASCII text
    /// that needed no white-space change).
    origin: Vec<u32>,
    /// Byte offsets in `text` where a ZWNJ was removed (when ZWNJ is read as nothing).
    joins: Vec<usize>,
}

impl Normalized {
    /// The byte offset in the original text of the character that produced byte `byte` of
    /// [`Normalized::text`]; `text.len()` maps to the original length. Offsets past the end are
    /// clamped to it.
    pub fn origin(&self, byte: usize) -> usize {
        if self.origin.is_empty() {
            return byte.min(self.text.len());
        }
        let last = self.origin.len() - 1;
        self.origin[byte.min(last)] as usize
    }

    /// The end, in the original text, of the match ending at normalized byte `end`: the offset
    /// of the next original character that produced output (so characters the normalization
    /// removed right after the match, such as combining accents, are included).
    pub fn origin_end(&self, end: usize) -> usize {
        if self.origin.is_empty() {
            return end.min(self.text.len());
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
///    is a joiner that must match "a space or nothing", the classifier also reads a query that
///    contains ZWNJ a second time with the ZWNJ removed, and keywords written with ZWNJ are
///    compiled in both spellings, joined and spaced.
/// 5. Arabic-script unification: Arabic yeh `ي` and alef maksura `ى` -> Persian yeh `ی`, Arabic
///    kaf `ك` -> Persian kaf `ک`; tatweel U+0640 and harakat (U+064B–U+0652, superscript alef
///    U+0670) removed.
/// 6. Digits: Persian (U+06F0–U+06F9) and Arabic-Indic (U+0660–U+0669) digits -> ASCII `0`–`9`.
/// 7. Apostrophes: the typographic `‘` `’` and the modifier letter `ʼ` -> ASCII `'`, so a
///    phone keyboard's "don’t" is the negator "don't".
/// 8. Accent folding, when `fold_accents` is true (the default; `accents keep` in a policy turns
///    it off): the combining diacritics U+0300–U+036F that step 1 split off Latin letters are
///    removed, so `devolução` reads `devolucao` and `bórralo` reads `borralo`.
pub fn normalize(text: &str, fold_accents: bool) -> Normalized {
    normalize_with(text, fold_accents, true)
}

/// [`normalize`], with ZWNJ read as a space (`zwnj_as_space`) or removed.
fn normalize_with(text: &str, fold_accents: bool, zwnj_as_space: bool) -> Normalized {
    if text.is_ascii() {
        return normalize_ascii(text);
    }
    let mut out = Normalized {
        text: String::with_capacity(text.len() + 8),
        origin: Vec::with_capacity(text.len() + 9),
        joins: Vec::new(),
    };
    // Pending combining marks (canonical combining class, mark, original offset), emitted in
    // canonical order before the next starter.
    let mut marks: Vec<(u8, char, u32)> = Vec::new();
    let mut last_space = true; // trims leading space
    for (offset, c) in text.char_indices() {
        let offset = u32::try_from(offset).unwrap_or(u32::MAX);
        if c.is_ascii() && !c.is_ascii_whitespace() && c != '\u{0B}' {
            flush_marks(&mut out, &mut marks);
            push_char(&mut out, c.to_ascii_lowercase(), offset);
            last_space = false;
            continue;
        }
        let is_space = c.is_whitespace() || (c == '\u{200C}' && zwnj_as_space);
        if is_space {
            flush_marks(&mut out, &mut marks);
            if !last_space {
                push_char(&mut out, ' ', offset);
                last_space = true;
            }
            continue;
        }
        if c == '\u{200C}' {
            flush_marks(&mut out, &mut marks);
            out.joins.push(out.text.len());
            continue;
        }
        if is_plain_arabic_letter(c) {
            // No decomposition, no case, combining class 0: only step 5/6 apply.
            flush_marks(&mut out, &mut marks);
            if let Some(m) = map_char(c, fold_accents) {
                push_char(&mut out, m, offset);
                last_space = false;
            }
            continue;
        }
        decompose_compatible(c, |d| {
            for l in d.to_lowercase() {
                let folded: [Option<char>; 2] = match l {
                    'ß' => [Some('s'), Some('s')],
                    'ς' => [Some('σ'), None],
                    _ => [map_char(l, fold_accents), None],
                };
                for m in folded.into_iter().flatten() {
                    let ccc = canonical_combining_class(m);
                    if ccc == 0 {
                        flush_marks(&mut out, &mut marks);
                        push_char(&mut out, m, offset);
                    } else {
                        marks.push((ccc, m, offset));
                    }
                    last_space = false;
                }
            }
        });
    }
    flush_marks(&mut out, &mut marks);
    if out.text.ends_with(' ') {
        out.text.pop();
        out.origin.pop();
    }
    out.origin
        .push(u32::try_from(text.len()).unwrap_or(u32::MAX));
    out
}

/// [`normalize`] of ASCII text: lower-case, white space runs to one space, trimmed.
fn normalize_ascii(text: &str) -> Normalized {
    let b = text.as_bytes();
    let plain = b.first() != Some(&b' ')
        && b.last() != Some(&b' ')
        && !b.windows(2).any(|w| w == b"  ")
        && !b
            .iter()
            .any(|c| matches!(c, b'\t' | b'\n' | 0x0B | 0x0C | b'\r'));
    if plain {
        return Normalized {
            text: text.to_ascii_lowercase(),
            origin: Vec::new(),
            joins: Vec::new(),
        };
    }
    let mut bytes: Vec<u8> = Vec::with_capacity(text.len());
    let mut origin: Vec<u32> = Vec::with_capacity(text.len() + 1);
    let mut last_space = true;
    for (i, &b) in text.as_bytes().iter().enumerate() {
        let i = u32::try_from(i).unwrap_or(u32::MAX);
        // ASCII White_Space: tab, line feed, vertical tab, form feed, carriage return, space.
        if matches!(b, b'\t' | b'\n' | 0x0B | 0x0C | b'\r' | b' ') {
            if !last_space {
                bytes.push(b' ');
                origin.push(i);
                last_space = true;
            }
        } else {
            bytes.push(b.to_ascii_lowercase());
            origin.push(i);
            last_space = false;
        }
    }
    if bytes.last() == Some(&b' ') {
        bytes.pop();
        origin.pop();
    }
    origin.push(u32::try_from(text.len()).unwrap_or(u32::MAX));
    // Every byte is ASCII, so this never fails; the fallback keeps the function total.
    let text = String::from_utf8(bytes).unwrap_or_default();
    Normalized {
        text,
        origin,
        joins: Vec::new(),
    }
}

/// Arabic-script characters common in Persian and Arabic text that have no decomposition, no
/// case and combining class 0 (so [`normalize`] only applies [`map_char`] to them). Harakat are
/// included: [`map_char`] removes them.
fn is_plain_arabic_letter(c: char) -> bool {
    matches!(c,
        '\u{0621}' | '\u{0627}'..='\u{063A}' | '\u{0640}'..='\u{0652}' | '\u{0660}'..='\u{0669}'
        | '\u{067E}' | '\u{0686}' | '\u{0698}' | '\u{06A9}' | '\u{06AF}' | '\u{06CC}'
        | '\u{06F0}'..='\u{06F9}' | '\u{060C}' | '\u{061B}' | '\u{061F}')
}

fn push_char(out: &mut Normalized, ch: char, offset: u32) {
    let mut buf = [0u8; 4];
    let s = ch.encode_utf8(&mut buf);
    out.text.push_str(s);
    for _ in 0..s.len() {
        out.origin.push(offset);
    }
}

/// Emits pending combining marks in canonical order (stable by combining class).
fn flush_marks(out: &mut Normalized, marks: &mut Vec<(u8, char, u32)>) {
    if marks.is_empty() {
        return;
    }
    marks.sort_by_key(|m| m.0);
    for &(_, m, offset) in marks.iter() {
        push_char(out, m, offset);
    }
    marks.clear();
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
        '\u{2018}' | '\u{2019}' | '\u{02BC}' => Some('\''),
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
}

#[derive(Clone, Debug)]
struct PatternInfo {
    target: Target,
    kind: PatternKind,
    /// Length of the normalized needle, in bytes.
    len: usize,
}

#[derive(Clone, Debug)]
struct KeywordEntry {
    intent: u8,
    lang: String,
    text: String,
}

/// A compiled keyword automaton for one policy.
#[derive(Clone, Debug)]
pub(crate) struct Classifier {
    /// One Aho-Corasick automaton (contiguous NFA, walked anchored: a trie) over every normalized keyword and negator; it is
    /// run from each word start, so every occurrence it finds starts on a word boundary.
    automaton: Option<NFA>,
    patterns: Vec<PatternInfo>,
    keywords: Vec<KeywordEntry>,
    negations: Vec<NegationRule>,
    /// Most words in one normalized negator (bounds the negator search window).
    max_negator_words: u32,
    /// Most words in one normalized keyword or negator.
    max_needle_words: u32,
    intents: Vec<String>,
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

impl Classifier {
    /// Builds the automaton from the checked model's keywords and negators.
    pub(crate) fn build(model: &Model) -> Classifier {
        let mut needles: Vec<String> = Vec::new();
        let mut patterns = Vec::new();
        let mut max_negator_words = 1u32;
        let mut max_needle_words = 1u32;
        let mut add = |text: &str, target: Target, needles: &mut Vec<String>| {
            let (body, kind) = match text.strip_suffix('*') {
                Some(stem) => (stem, PatternKind::Stem),
                None => (text, PatternKind::Word),
            };
            for variant in zwnj_variants(body) {
                let n = normalize(&variant, model.fold_accents).text;
                if n.is_empty() {
                    continue;
                }
                let words = u32::try_from(n.unicode_words().count()).unwrap_or(u32::MAX);
                max_needle_words = max_needle_words.max(words);
                if let Target::Negator(_) = target {
                    max_negator_words = max_negator_words.max(words);
                }
                patterns.push(PatternInfo {
                    target,
                    kind,
                    len: n.len(),
                });
                needles.push(n);
            }
        };
        let keywords: Vec<KeywordEntry> = model
            .keywords
            .iter()
            .map(|k| KeywordEntry {
                intent: u8::try_from(k.intent).unwrap_or(u8::MAX),
                lang: k.lang.clone(),
                text: k.text.clone(),
            })
            .collect();
        for (i, k) in model.keywords.iter().enumerate() {
            add(&k.text, Target::Keyword(i), &mut needles);
        }
        for (i, n) in model.negations.iter().enumerate() {
            add(&n.text, Target::Negator(i), &mut needles);
        }
        let automaton = if needles.is_empty() {
            None
        } else {
            // A contiguous NFA: a few hundred KiB for the shipped lexicon where a DFA takes
            // megabytes, at a small cost per byte walked.
            aho_corasick::nfa::contiguous::Builder::new()
                .match_kind(MatchKind::Standard)
                .build(&needles)
                .ok()
        };
        Classifier {
            automaton,
            patterns,
            keywords,
            negations: model.negations.clone(),
            max_negator_words,
            max_needle_words,
            intents: model.intents.iter().map(|s| s.name.clone()).collect(),
            fallback: model
                .fallback
                .map(|(i, _)| u8::try_from(i).unwrap_or(u8::MAX)),
            combine: model.combine,
            fold_accents: model.fold_accents,
        }
    }

    /// Every keyword entry as `(intent, lang, text)`, in declaration order (for analysis).
    pub(crate) fn keyword_entries(&self) -> impl Iterator<Item = (&str, &str, &str)> {
        self.keywords.iter().map(|k| {
            (
                self.intents
                    .get(k.intent as usize)
                    .map_or("", String::as_str),
                k.lang.as_str(),
                k.text.as_str(),
            )
        })
    }

    /// Every negator as `(direction, window, text)`, in declaration order (for analysis).
    pub(crate) fn negator_entries(&self) -> impl Iterator<Item = (&'static str, u32, &str)> {
        self.negations.iter().map(|n| {
            let dir = match n.direction {
                Direction::Before => "before",
                Direction::After => "after",
            };
            (dir, n.window, n.text.as_str())
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
        let mut cut = query.len().min(limits::MAX_QUERY_BYTES);
        while !query.is_char_boundary(cut) {
            cut -= 1;
        }
        let truncated = cut < query.len();
        let query = &query[..cut];
        let mut found = Scan::default();
        self.scan(query, true, &mut found);
        if query.contains('\u{200C}') {
            // ZWNJ also matches "nothing": read the query again with ZWNJ removed.
            self.scan(query, false, &mut found);
            found.hits.sort_by_key(|h| (h.1.span, h.0));
            found.dropped.sort_by_key(|h| (h.1.span, h.0));
        }
        let mut mask = 0u64;
        for (k, _) in &found.hits {
            let i = self.keywords[*k].intent;
            mask |= 1u64 << u32::from(i).min(63);
        }
        let hits: Vec<Hit> = found.hits.into_iter().map(|h| h.1).collect();
        let dropped: Vec<Hit> = found.dropped.into_iter().map(|h| h.1).collect();
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

    /// Finds keyword hits in one reading of `query` (ZWNJ as a space, or removed) and adds those
    /// not found yet (same keyword, same original span) to `acc`.
    fn scan(&self, query: &str, zwnj_as_space: bool, acc: &mut Scan) {
        let Some(ac) = &self.automaton else {
            return;
        };
        let norm = normalize_with(query, self.fold_accents, zwnj_as_space);
        let text = norm.text.as_str();
        let words = word_ranges(text);
        let mut keywords: Vec<Found> = Vec::new();
        let mut negators: Vec<Found> = Vec::new();
        let Ok(start_state) = ac.start_state(Anchored::Yes) else {
            return;
        };
        let bytes = text.as_bytes();
        // In the reading with ZWNJ removed, only occurrences across a removed ZWNJ are new (the
        // rest were found in the first reading): walk only from the word starts near the words
        // that hold one, close enough to reach them or to negate a hit that does.
        let joins: Vec<usize> = norm
            .joins
            .iter()
            .copied()
            .filter(|&p| {
                let w = words.partition_point(|w| w.0 < p);
                w > 0 && words[w - 1].1 > p
            })
            .collect();
        let reach = self
            .negations
            .iter()
            .map(|r| r.window)
            .max()
            .unwrap_or(0)
            .saturating_add(self.max_needle_words)
            .saturating_add(self.max_negator_words) as usize;
        // near[w]: word w starts within `reach` words of a word holding a removed ZWNJ.
        let mut near = vec![false; if zwnj_as_space { 0 } else { words.len() }];
        if !zwnj_as_space {
            let mut marks = vec![0i32; words.len() + 1];
            for &p in &joins {
                let w = words.partition_point(|w| w.0 < p).saturating_sub(1);
                marks[w.saturating_sub(reach)] += 1;
                marks[(w + reach + 1).min(words.len())] -= 1;
            }
            let mut open = 0;
            for (w, n) in near.iter_mut().enumerate() {
                open += marks[w];
                *n = open > 0;
            }
        }
        let near_join = |first: usize| near.get(first).copied().unwrap_or(false);
        // Whether a removed ZWNJ lies strictly inside s..e (`joins` is sorted).
        let crosses_join = |s: usize, e: usize| {
            let i = joins.partition_point(|&p| p <= s);
            joins.get(i).is_some_and(|&p| p < e)
        };
        for (first, &(s, _)) in words.iter().enumerate() {
            if !zwnj_as_space && !near_join(first) {
                continue;
            }
            let mut sid = start_state;
            for (i, &b) in bytes[s..].iter().enumerate() {
                sid = ac.next_state(Anchored::Yes, sid, b);
                if ac.is_dead(sid) {
                    break;
                }
                if !ac.is_match(sid) {
                    continue;
                }
                let e = s + i + 1;
                for m in 0..ac.match_len(sid) {
                    let info = &self.patterns[ac.match_pattern(sid, m).as_usize()];
                    // Matches of shorter needles that end here but start after `s` are
                    // reported from their own word start (or not at all).
                    if info.len != e - s {
                        continue;
                    }
                    let last = match info.kind {
                        PatternKind::Word => {
                            match words[first..].binary_search_by_key(&e, |w| w.1) {
                                Ok(j) => first + j,
                                Err(_) => continue,
                            }
                        }
                        PatternKind::Stem => words.partition_point(|w| w.0 < e).saturating_sub(1),
                    };
                    // A stem hit spans the whole word it starts.
                    let end = match info.kind {
                        PatternKind::Word => e,
                        PatternKind::Stem => words.get(last).map_or(e, |w| w.1.max(e)),
                    };
                    let f = Found {
                        start: s,
                        end,
                        first_word: u32::try_from(first).unwrap_or(u32::MAX),
                        last_word: u32::try_from(last).unwrap_or(u32::MAX),
                        target: info.target,
                    };
                    match info.target {
                        Target::Keyword(_) if zwnj_as_space || crosses_join(s, e) => {
                            keywords.push(f)
                        }
                        Target::Keyword(_) => {}
                        Target::Negator(_) => negators.push(f),
                    }
                }
            }
        }
        keywords.sort_by_key(|f| (f.start, f.end, target_index(f.target)));
        keywords.dedup_by_key(|f| (f.start, f.end, target_index(f.target)));
        negators.sort_by_key(|f| (f.start, f.end));
        // Hits of an earlier reading (same keyword, same original span) are not added again.
        let seen: std::collections::HashSet<((usize, usize), usize)> = acc
            .hits
            .iter()
            .chain(&acc.dropped)
            .map(|(k, h)| (h.span, *k))
            .collect();

        for f in &keywords {
            let Target::Keyword(k) = f.target else {
                continue;
            };
            let span = (norm.origin(f.start), norm.origin_end(f.end));
            if !seen.is_empty() && seen.contains(&(span, k)) {
                continue;
            }
            let negator = self.negator_of(f, &negators);
            let entry = &self.keywords[k];
            let hit = Hit {
                keyword: entry.text.clone(),
                intent: self
                    .intents
                    .get(entry.intent as usize)
                    .cloned()
                    .unwrap_or_default(),
                lang: entry.lang.clone(),
                span,
                negated_by: negator.map(|n| self.negations[n].text.clone()),
            };
            if negator.is_some() {
                acc.dropped.push((k, hit));
            } else {
                acc.hits.push((k, hit));
            }
        }
    }

    /// The first negation rule (in query order of the negators) that cancels keyword hit `f`.
    fn negator_of(&self, f: &Found, negators: &[Found]) -> Option<usize> {
        if negators.is_empty() {
            return None;
        }
        let max_window = self.negations.iter().map(|r| r.window).max().unwrap_or(0);
        let lo_word = f
            .first_word
            .saturating_sub(max_window.saturating_add(self.max_negator_words));
        let hi_word = f.last_word.saturating_add(max_window);
        let from = negators.partition_point(|g| g.first_word < lo_word);
        negators[from..]
            .iter()
            .take_while(|g| g.first_word <= hi_word)
            .find_map(|g| {
                let Target::Negator(n) = g.target else {
                    return None;
                };
                let rule = &self.negations[n];
                let ok = match rule.direction {
                    Direction::Before => {
                        g.end <= f.start && f.first_word.saturating_sub(g.last_word) <= rule.window
                    }
                    Direction::After => {
                        g.start >= f.end && g.first_word.saturating_sub(f.last_word) <= rule.window
                    }
                };
                ok.then_some(n)
            })
    }
}

/// The Unicode (UAX #29) words of `text`, as `(start, end)` byte ranges in order: the segments
/// between word boundaries that hold a letter or digit.
fn word_ranges(text: &str) -> Vec<(usize, usize)> {
    match simple_word_ranges(text) {
        Some(w) => w,
        None => text
            .unicode_word_indices()
            .map(|(i, w)| (i, i + w.len()))
            .collect(),
    }
}

/// UAX #29 word class of the characters [`simple_word_ranges`] handles.
#[derive(Clone, Copy, PartialEq, Eq)]
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
    /// Everything else in the handled set (spaces, other ASCII punctuation, `؛` `؟`).
    Other,
}

fn word_class(c: char) -> Option<WordClass> {
    Some(match c {
        'a'..='z' | 'A'..='Z' => WordClass::Letter,
        '0'..='9' => WordClass::Digit,
        '_' => WordClass::Joiner,
        ':' => WordClass::MidLetter,
        '.' | '\'' => WordClass::MidNumLet,
        ',' | ';' | '\u{060C}' => WordClass::MidNum,
        '\u{0621}'..='\u{063A}'
        | '\u{0641}'..='\u{064A}'
        | '\u{067E}'
        | '\u{0686}'
        | '\u{0698}'
        | '\u{06A9}'
        | '\u{06AF}'
        | '\u{06CC}' => WordClass::Letter,
        '\u{061B}' | '\u{061F}' => WordClass::Other,
        // ASCII controls other than tab/LF/VT/FF/CR/space do not occur in many queries and have
        // their own rules (WB3): leave them to the full algorithm.
        ' ' | '\t' | '\n' | '\u{0B}' | '\u{0C}' => WordClass::Other,
        c if c.is_ascii_punctuation() => WordClass::Other,
        _ => return None,
    })
}

/// UAX #29 words for text made only of ASCII and common Arabic-script letters, where the rules
/// reduce to: a word is a run of letters, digits and `_`, also joined across one `.` `'` `:`
/// between letters (WB6/7) and one `.` `'` `,` `;` `،` between digits (WB11/12). `None` for
/// other text (the caller uses the full algorithm). The unit tests check it against
/// `unicode-segmentation`.
fn simple_word_ranges(text: &str) -> Option<Vec<(usize, usize)>> {
    let mut chars: Vec<(usize, WordClass)> = Vec::with_capacity(text.len());
    for (i, c) in text.char_indices() {
        chars.push((i, word_class(c)?));
    }
    let is_core =
        |k: WordClass| matches!(k, WordClass::Letter | WordClass::Digit | WordClass::Joiner);
    let mut words = Vec::new();
    let n = chars.len();
    let mut i = 0;
    while i < n {
        if !is_core(chars[i].1) {
            i += 1;
            continue;
        }
        let start = chars[i].0;
        let mut j = i + 1;
        while j < n {
            let k = chars[j].1;
            let infix = j + 1 < n && {
                let (prev, next) = (chars[j - 1].1, chars[j + 1].1);
                match k {
                    WordClass::MidNumLet => {
                        (prev == WordClass::Letter && next == WordClass::Letter)
                            || (prev == WordClass::Digit && next == WordClass::Digit)
                    }
                    WordClass::MidLetter => prev == WordClass::Letter && next == WordClass::Letter,
                    WordClass::MidNum => prev == WordClass::Digit && next == WordClass::Digit,
                    _ => false,
                }
            };
            if is_core(k) || infix {
                j += 1;
            } else {
                break;
            }
        }
        let end = chars.get(j).map_or(text.len(), |c| c.0);
        // A segment of only `_` is not a word.
        if chars[i..j].iter().any(|c| c.1 != WordClass::Joiner) {
            words.push((start, end));
        }
        i = j;
    }
    Some(words)
}

/// Keyword hits collected over the readings of one query.
#[derive(Default)]
struct Scan {
    /// `(keyword index, hit)`.
    hits: Vec<(usize, Hit)>,
    dropped: Vec<(usize, Hit)>,
}

fn target_index(t: Target) -> usize {
    match t {
        Target::Keyword(i) | Target::Negator(i) => i,
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

    proptest::proptest! {
        #[test]
        fn simple_word_ranges_agree_with_uax29(
            chars in proptest::collection::vec(proptest::sample::select(vec![
                'a', 'b', 'Z', '1', '2', '_', '.', ',', ';', '\'', ':', ' ', '-', '"', '\n', '\t',
                'ب', 'ی', 'ک', 'ء', '،', '؛', '؟',
            ]), 0..24)
        ) {
            let text: String = chars.into_iter().collect();
            let full: Vec<(usize, usize)> = text
                .unicode_word_indices()
                .map(|(i, w)| (i, i + w.len()))
                .collect();
            proptest::prop_assert_eq!(simple_word_ranges(&text), Some(full), "{:?}", text);
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
