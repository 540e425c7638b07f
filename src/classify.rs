//! Query intent classification: text normalization and one keyword automaton.
//!
//! A query is normalized exactly like the policy's keywords ([`normalize`]), then one
//! Aho-Corasick automaton over every keyword and negator of every intent finds all occurrences;
//! an occurrence counts only when it sits on word boundaries (`"word"`: a whole word; `"stem*"`:
//! the start of a word; a phrase: whole words in sequence). A keyword hit with a negator within
//! the negation window is dropped (and reported as dropped). Under `combine priority` the
//! highest-priority intent with a surviving hit wins; under `combine union` every intent with a
//! hit counts. A query without hits gets the `fallback` intent.
//!
//! Rules from seed 001 (query mutation classes, priority Destructive > Execute > Export > Write >
//! Read, an empty or unclear query offers read only).

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use serde::Serialize;
use unicode_normalization::char::decompose_compatible;

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
    /// Byte range of the match in the original query text.
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
    /// one extra entry holds the original length.
    pub origin: Vec<u32>,
}

/// Normalizes text for keyword matching; keywords and queries go through the same steps:
///
/// 1. Unicode compatibility decomposition (NFKD: the decomposition half of NFKC, so fullwidth
///    `ｄｅｌｅｔｅ` reads `delete` and composed and decomposed accents agree);
/// 2. lower-case (full Unicode case mapping);
/// 3. zero-width characters removed: U+200B, U+2060, U+FEFF and the soft hyphen U+00AD;
/// 4. ZWNJ (U+200C) and every run of white space become one space (keywords written with a ZWNJ
///    are compiled twice, joined and spaced, so a ZWNJ matches "a space or nothing");
/// 5. Arabic-script unification: Arabic yeh `ي` and alef maksura `ى` -> Persian `ی`, Arabic kaf
///    `ك` -> Persian `ک`; tatweel U+0640 and harakat (U+064B–U+0652, U+0670) removed;
/// 6. Persian (U+06F0–U+06F9) and Arabic-Indic (U+0660–U+0669) digits -> ASCII digits;
/// 7. when `fold_accents` (the default, `accents fold`), Latin combining accents (U+0300–U+036F)
///    are removed, so `devolução` reads `devolucao`.
pub fn normalize(text: &str, fold_accents: bool) -> Normalized {
    let mut out = Normalized {
        text: String::with_capacity(text.len() + 8),
        origin: Vec::with_capacity(text.len() + 9),
    };
    let mut last_space = true; // trims leading space
    for (offset, c) in text.char_indices() {
        let offset = u32::try_from(offset).unwrap_or(u32::MAX);
        let push = |out: &mut Normalized, ch: char| {
            let mut buf = [0u8; 4];
            let s = ch.encode_utf8(&mut buf);
            out.text.push_str(s);
            for _ in 0..s.len() {
                out.origin.push(offset);
            }
        };
        if c.is_whitespace() || c == '\u{200C}' {
            if !last_space {
                push(&mut out, ' ');
                last_space = true;
            }
            continue;
        }
        if c.is_ascii() {
            push(&mut out, c.to_ascii_lowercase());
            last_space = false;
            continue;
        }
        let emit = |d: char, out: &mut Normalized, last_space: &mut bool| {
            for l in d.to_lowercase() {
                if let Some(mapped) = map_char(l, fold_accents) {
                    push(out, mapped);
                    *last_space = false;
                }
            }
        };
        decompose_compatible(c, |d| emit(d, &mut out, &mut last_space));
    }
    if out.text.ends_with(' ') {
        out.text.pop();
        out.origin.pop();
    }
    out.origin
        .push(u32::try_from(text.len()).unwrap_or(u32::MAX));
    out
}

/// Steps 3, 5, 6 and 7 of [`normalize`] for one (decomposed, lower-cased) character; `None`
/// drops it.
fn map_char(c: char, fold_accents: bool) -> Option<char> {
    match c {
        '\u{200B}' | '\u{2060}' | '\u{FEFF}' | '\u{00AD}' | '\u{200D}' => None,
        '\u{0640}' | '\u{064B}'..='\u{0652}' | '\u{0670}' => None,
        '\u{064A}' | '\u{0649}' => Some('\u{06CC}'),
        '\u{0643}' => Some('\u{06A9}'),
        '\u{06F0}'..='\u{06F9}' => char::from_digit(c as u32 - 0x06F0, 10),
        '\u{0660}'..='\u{0669}' => char::from_digit(c as u32 - 0x0660, 10),
        '\u{0300}'..='\u{036F}' if fold_accents => None,
        _ => Some(c),
    }
}

/// Whether a character is part of a word: letters, digits, combining marks, and the
/// apostrophes that join contractions ("don't").
fn is_word_char(c: char) -> bool {
    c.is_alphanumeric()
        || c == '_'
        || c == '\''
        || c == '\u{2019}'
        || ('\u{0300}'..='\u{036F}').contains(&c)
        || ('\u{0610}'..='\u{061A}').contains(&c)
        || ('\u{064B}'..='\u{065F}').contains(&c)
}

/// The widest negation window the checker accepts, in words.
const MAX_NEGATION_WINDOW: u32 = 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PatternKind {
    Word,
    Stem,
}

#[derive(Clone, Debug)]
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
    automaton: Option<AhoCorasick>,
    patterns: Vec<PatternInfo>,
    keywords: Vec<KeywordEntry>,
    negations: Vec<NegationRule>,
    intents: Vec<String>,
    fallback: Option<u8>,
    combine: Combine,
    fold_accents: bool,
}

impl Classifier {
    /// Builds the automaton from the checked model's keywords and negators.
    pub(crate) fn build(model: &Model) -> Classifier {
        let mut needles: Vec<String> = Vec::new();
        let mut patterns = Vec::new();
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
                needles.push(n);
                patterns.push(PatternInfo {
                    target: target.clone(),
                    kind,
                });
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
            AhoCorasickBuilder::new()
                .match_kind(MatchKind::Standard)
                .build(&needles)
                .ok()
        };
        Classifier {
            automaton,
            patterns,
            keywords,
            negations: model.negations.clone(),
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
        let norm = normalize(&query[..cut], self.fold_accents);
        let text = norm.text.as_str();
        let bytes = text.as_bytes();

        // Word index at each byte (number of word starts at or before it).
        let mut word_no = vec![0u32; bytes.len() + 1];
        let mut is_start = vec![false; bytes.len() + 1];
        let mut is_end = vec![false; bytes.len() + 1];
        let mut prev_word = false;
        let mut count = 0u32;
        for (i, c) in text.char_indices() {
            let w = is_word_char(c);
            if w && !prev_word {
                is_start[i] = true;
                count += 1;
            }
            if !w && prev_word {
                is_end[i] = true;
            }
            word_no[i..i + c.len_utf8()].fill(count);
            prev_word = w;
        }
        if prev_word {
            is_end[bytes.len()] = true;
        }
        word_no[bytes.len()] = count;

        struct Found {
            start: usize,
            end: usize,
            target: Target,
        }
        let mut found: Vec<Found> = Vec::new();
        if let Some(ac) = &self.automaton {
            for m in ac.find_overlapping_iter(text) {
                let info = &self.patterns[m.pattern().as_usize()];
                let (s, e) = (m.start(), m.end());
                if !is_start[s] {
                    continue;
                }
                if info.kind == PatternKind::Word && !is_end[e] {
                    continue;
                }
                found.push(Found {
                    start: s,
                    end: e,
                    target: info.target.clone(),
                });
            }
        }
        found.sort_by_key(|f| (f.start, f.end));

        let orig = |b: usize| norm.origin.get(b).copied().unwrap_or(0) as usize;
        let orig_end = |b: usize| {
            // End of the original character that produced byte b-1.
            if b == 0 {
                return 0;
            }
            let start = orig(b - 1);
            let next = norm.origin[b..]
                .iter()
                .copied()
                .find(|&o| o as usize > start)
                .map_or(cut, |o| o as usize);
            next
        };

        let mut hits: Vec<Hit> = Vec::new();
        let mut dropped: Vec<Hit> = Vec::new();
        // Negator occurrences, sorted by start (as `found` is): each keyword hit looks only at
        // the negators within the widest window around it, so classification stays linear.
        let negators: Vec<(usize, usize, usize)> = found
            .iter()
            .filter_map(|g| match g.target {
                Target::Negator(n) => Some((g.start, g.end, n)),
                Target::Keyword(_) => None,
            })
            .collect();
        let mut seen: std::collections::HashSet<(usize, usize, usize)> =
            std::collections::HashSet::new();
        for f in &found {
            let Target::Keyword(k) = f.target else {
                continue;
            };
            if !seen.insert((f.start, f.end, k)) {
                continue;
            }
            let entry = &self.keywords[k];
            let first_word = word_no[f.start];
            let last_word = word_no[f.end.saturating_sub(1).max(f.start)];
            let before = negators.partition_point(|g| g.0 < f.start);
            let preceding = negators[..before]
                .iter()
                .rev()
                .take_while(|g| first_word - word_no[g.0] <= MAX_NEGATION_WINDOW)
                .find(|&&(gs, ge, n)| {
                    let rule = &self.negations[n];
                    let neg_last = word_no[ge.saturating_sub(1).max(gs)];
                    rule.direction == Direction::Before
                        && ge <= f.start
                        && first_word - neg_last <= rule.window
                });
            let after = negators.partition_point(|g| g.0 < f.end);
            let following = negators[after..]
                .iter()
                .take_while(|g| word_no[g.0] - last_word <= MAX_NEGATION_WINDOW)
                .find(|&&(gs, _, n)| {
                    let rule = &self.negations[n];
                    rule.direction == Direction::After && word_no[gs] - last_word <= rule.window
                });
            let negator = preceding
                .or(following)
                .map(|&(_, _, n)| self.negations[n].text.clone());
            let hit = Hit {
                keyword: entry.text.clone(),
                intent: self
                    .intents
                    .get(entry.intent as usize)
                    .cloned()
                    .unwrap_or_default(),
                lang: entry.lang.clone(),
                span: (orig(f.start), orig_end(f.end)),
                negated_by: negator.clone(),
            };
            if negator.is_some() {
                dropped.push(hit);
            } else {
                hits.push(hit);
            }
        }

        let mut mask = 0u64;
        for h in &hits {
            if let Some(i) = self.intents.iter().position(|n| *n == h.intent) {
                mask |= 1u64 << (i as u32).min(63);
            }
        }
        let fallback_name = self
            .fallback
            .and_then(|i| self.intents.get(i as usize).cloned())
            .unwrap_or_default();
        if mask == 0 {
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
        let ordered: Vec<String> = (0..self.intents.len())
            .filter(|i| mask & (1u64 << (*i as u32).min(63)) != 0)
            .map(|i| self.intents[i].clone())
            .collect();
        let name = ordered.first().cloned().unwrap_or_default();
        let intents = match self.combine {
            Combine::Priority => vec![name.clone()],
            Combine::Union => ordered,
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
    }

    #[test]
    fn origin_maps_back_to_original_bytes() {
        let n = normalize("Ação X", true);
        assert_eq!(n.text, "acao x");
        // 'x' is at normalized byte 5 and at original byte 7 ("Ação " is 7 bytes).
        assert_eq!(n.origin[5], 7);
        assert_eq!(*n.origin.last().unwrap_or(&0), 8);
    }
}
