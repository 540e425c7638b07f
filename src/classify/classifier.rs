//! The [`Classifier`]: built once per policy from its [`Lexicon`] ([`Classifier::build`]), it
//! classifies a query ([`Classifier::classify`]): normalize, split into words, walk the keyword
//! automaton from each word start, drop the hits a negator, an `except` entry or quoted content
//! cancels, and combine the intents of the hits that count.

use arcstr::ArcStr;
use std::cell::RefCell;

use super::automaton::{
    target_index, target_key, Found, Needle, PatternInfo, PatternKind, Target, Walk,
};
use super::intent::{Hit, Intent};
use super::lexicon::{Combine, Direction, Lexicon, Negator, Quoted};
use super::names::Names;
use super::negation::{clause_starts, Reaches};
use super::normalize::{normalize_into, Normalized};
use super::quoted::{in_identifier, in_ranges, quoted_ranges};
use super::trie::Trie;
use super::words::word_ranges_into;
use crate::limits;

#[derive(Clone, Debug)]
struct KeywordEntry {
    intent: u8,
    lang: ArcStr,
    text: ArcStr,
}

/// A compiled keyword automaton for one policy.
#[derive(Clone, Debug)]
pub(crate) struct Classifier {
    /// One trie over every normalized keyword, negator, `embedded` phrase and `except` entry;
    /// it is walked from each word start, so every occurrence it finds starts on a word
    /// boundary.
    automaton: Trie,
    /// The automaton's patterns, by pattern id: each distinct normalized needle once.
    pub(super) needles: Vec<Needle>,
    /// The spellings of every needle, grouped by needle.
    pub(super) patterns: Vec<PatternInfo>,
    keywords: Vec<KeywordEntry>,
    pub(super) negations: Vec<Negator>,
    /// The text of each negation rule, as hits report it.
    negator_texts: Vec<ArcStr>,
    /// Widest negation window, in words.
    pub(super) max_window: u32,
    /// The text of each `except` entry, as dropped hits report it.
    except_texts: Vec<ArcStr>,
    /// For each `except` entry, whether it drops a hit only as its whole clause
    /// (`except clause`).
    except_clause: Vec<bool>,
    /// The text of each `embedded` phrase (for analysis).
    embedded_texts: Vec<ArcStr>,
    /// Whether the automaton holds `embedded` or `except` entries.
    has_marks: bool,
    quoted: Quoted,
    intents: Vec<ArcStr>,
    fallback: Option<u8>,
    combine: Combine,
    fold_accents: bool,
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

impl Scratch {
    pub(super) const fn new() -> Scratch {
        Scratch {
            norm: Normalized::new(),
            words: Vec::new(),
            clauses: Vec::new(),
            keywords: Vec::new(),
            negators: Vec::new(),
            marks: Vec::new(),
            sentences: Vec::new(),
            reach: Reaches::new(),
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

impl Classifier {
    /// Builds the automaton from the lexicon's keywords, negators, `embedded` phrases and
    /// `except` entries.
    pub(crate) fn build(lexicon: &Lexicon) -> Classifier {
        // Every spelling as (normalized text, pattern), grouped below by text.
        let mut entries: Vec<(String, PatternInfo)> = Vec::new();
        // Every entry comes with its normalized spellings.
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
        let keywords: Vec<KeywordEntry> = lexicon
            .keywords
            .iter()
            .map(|k| KeywordEntry {
                intent: u8::try_from(k.intent).unwrap_or(u8::MAX),
                lang: names.get(&k.lang),
                text: names.get(&k.text),
            })
            .collect();
        let negator_texts = lexicon
            .negators
            .iter()
            .map(|n| names.get(&n.text))
            .collect();
        let except_texts = lexicon
            .exceptions
            .iter()
            .map(|e| names.get(&e.text))
            .collect();
        let except_clause = lexicon.exceptions.iter().map(|e| e.clause).collect();
        let embedded_texts = lexicon
            .embedded
            .iter()
            .map(|e| names.get(&e.text))
            .collect();
        let intents = lexicon.intents.iter().map(|s| names.get(s)).collect();
        drop(names);
        for (i, k) in lexicon.keywords.iter().enumerate() {
            add(&k.text, &k.spellings, Target::Keyword(i), &mut entries);
        }
        for (i, n) in lexicon.negators.iter().enumerate() {
            add(&n.text, &n.spellings, Target::Negator(i), &mut entries);
        }
        // Embedded phrases only matter when quoted content is read as data.
        if lexicon.quoted != Quoted::Count {
            for (i, e) in lexicon.embedded.iter().enumerate() {
                add(&e.text, &e.spellings, Target::Embedded(i), &mut entries);
            }
        }
        for (i, e) in lexicon.exceptions.iter().enumerate() {
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
            Target::Keyword(k) => (0, lexicon.keywords[k].intent, info.kind as usize),
            Target::Negator(n) => {
                let rule = &lexicon.negators[n];
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
        // A trie, walked anchored from word starts: a needle's state stands for that needle
        // alone. Only there does a needle with a `"stem*"` spelling make a hit that ends inside
        // a word.
        let automaton = Trie::new(&texts, |i| {
            let n = &needles[i];
            let (from, count) = (n.first as usize, n.count as usize);
            patterns[from..from + count]
                .iter()
                .any(|p| p.kind == PatternKind::Stem)
        });
        Classifier {
            automaton,
            needles,
            patterns,
            keywords,
            negator_texts,
            max_window: lexicon.negators.iter().map(|r| r.window).max().unwrap_or(0),
            except_texts,
            except_clause,
            embedded_texts,
            has_marks: !lexicon.exceptions.is_empty()
                || (lexicon.quoted != Quoted::Count && !lexicon.embedded.is_empty()),
            quoted: lexicon.quoted,
            negations: lexicon.negators.clone(),
            intents,
            fallback: lexicon.fallback.map(|i| u8::try_from(i).unwrap_or(u8::MAX)),
            combine: lexicon.combine,
            fold_accents: lexicon.fold_accents,
        }
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

    /// `"count"`, `"data"` or `"ignore"`: how hits inside quoted content count.
    pub(crate) fn quoted_name(&self) -> &'static str {
        match self.quoted {
            Quoted::Count => "count",
            Quoted::Data => "data",
            Quoted::Ignore => "ignore",
        }
    }

    /// Every `embedded` phrase and `except` entry as policy text would declare it, one entry
    /// each (`embedded "translate this"`, `except "what change"`, `except clause "stop"`), in
    /// declaration order (for analysis).
    pub(crate) fn phrase_entries(&self) -> impl Iterator<Item = String> + '_ {
        let embedded = self
            .embedded_texts
            .iter()
            .map(|t| format!("embedded \"{t}\""));
        let except = self
            .except_texts
            .iter()
            .zip(&self.except_clause)
            .map(|(t, &clause)| {
                let head = if clause { "except clause" } else { "except" };
                format!("{head} \"{t}\"")
            });
        embedded.chain(except)
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
                query: None,
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
            query: None,
        }
    }

    /// Finds the keyword hits in `query`, each list in query order. Reading stops at the word
    /// start where the occurrences found would pass [`limits::MAX_QUERY_OCCURRENCES`].
    fn scan(&self, query: &str, scratch: &mut Scratch) -> Scanned {
        let mut out = Scanned::default();
        let trie = &self.automaton;
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
            // A word can begin at a space that stands for ZWNJ (one followed by a mark that
            // Unicode counts as a letter): no needle begins there, as none begins with a space.
            if bytes.get(s) == Some(&b' ') && zwnj_spaces.binary_search(&s).is_ok() {
                continue;
            }
            // Walk the automaton from the word start, reading every space that stands for ZWNJ
            // as a space; if the walk reached one, walk again from the start reading each as
            // nothing.
            let walk = Walk {
                trie,
                bytes,
                zwnj_spaces,
                start: s,
                first,
                words,
            };
            let found_before = (keywords.len(), negators.len());
            if walk.run(self, false, keywords, negators) {
                walk.run(self, true, keywords, negators);
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
        // Clauses matter to negators and to `except clause` entries.
        let clause_marks = marks
            .iter()
            .any(|g| matches!(g.target, Target::Except(e) if self.except_clause[e]));
        out.hits.reserve_exact(keywords.len());
        if !negators.is_empty() || clause_marks {
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
        // An `except clause` entry counts only where its words are the whole clause.
        let whole_clause = |g: &Found| {
            let (first, last) = (g.first_word as usize, g.last_word as usize);
            (first == 0 || clauses.get(first - 1) != clauses.get(first))
                && clauses.get(last + 1) != clauses.get(last)
        };
        for g in marks.iter() {
            if let Target::Except(e) = g.target {
                if self.except_clause[e] && !whole_clause(g) {
                    continue;
                }
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
                out.dropped.extend(out.hits.extract_if(.., |h| h.quoted));
                out.dropped.sort_by_key(|h| h.span);
            }
        }
        out
    }
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
