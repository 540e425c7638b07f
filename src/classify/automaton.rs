//! The keyword automaton's parts: the needles (each distinct normalized text of a keyword,
//! negator, `embedded` phrase or `except` entry, once) and the spellings each stands for, and one
//! anchored walk of their trie from a word start ([`Walk`]) that records the occurrences
//! ([`Found`]) it reads.

use super::classifier::Classifier;
use super::normalize::two_byte;
use super::trie::{Cursor, Trie};
use super::words::{WordClass, SHORT_CLASS};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum PatternKind {
    Word,
    Stem,
}

#[derive(Clone, Copy, Debug)]
pub(super) enum Target {
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
pub(super) struct PatternInfo {
    pub(super) target: Target,
    pub(super) kind: PatternKind,
}

/// One distinct normalized text of the automaton: its length and the spellings it stands for
/// (several keywords, or a keyword and a negator, may normalize to the same text).
#[derive(Clone, Copy, Debug)]
pub(super) struct Needle {
    /// Length in bytes.
    pub(super) len: u32,
    /// Its entries in `Classifier::patterns`: `first..first + count`.
    pub(super) first: u32,
    pub(super) count: u32,
}

/// A keyword or negator occurrence on word boundaries in normalized text.
#[derive(Clone, Copy, Debug)]
pub(super) struct Found {
    pub(super) start: usize,
    pub(super) end: usize,
    /// Index of the first and last word the occurrence covers.
    pub(super) first_word: u32,
    pub(super) last_word: u32,
    pub(super) target: Target,
}

/// One walk of the keyword automaton from a word start of the normalized text.
pub(super) struct Walk<'a> {
    pub(super) trie: &'a Trie,
    pub(super) bytes: &'a [u8],
    /// Spaces that stand for ZWNJ alone (ascending offsets).
    pub(super) zwnj_spaces: &'a [usize],
    /// Where the walk starts: a word start, and that word's index in `words`.
    pub(super) start: usize,
    pub(super) first: usize,
    pub(super) words: &'a [(usize, usize)],
}

impl Walk<'_> {
    /// Walks from the root at `self.start` until no needle continues, recording every
    /// occurrence in `keywords` or `negators`. With `joined`, every space that stands for ZWNJ
    /// is read as nothing; without, as a space. Returns whether the walk reached such a space
    /// (so the other reading may find more). At most as many steps as the longest needle, plus
    /// the spaces skipped.
    #[inline(always)]
    pub(super) fn run(
        &self,
        classifier: &Classifier,
        joined: bool,
        keywords: &mut Vec<Found>,
        negators: &mut Vec<Found>,
    ) -> bool {
        let (trie, zwnj, bytes) = (self.trie, self.zwnj_spaces, self.bytes);
        let (mut at, mut skipped, mut reached) = (self.start, 0, false);
        let mut sid = trie.root();
        // The word the walk has reached: it only moves forward, so over the whole walk the
        // records step over the words it reads once.
        let mut word = self.first;
        // The first space standing for ZWNJ at or after `at`: the walk only moves forward, so
        // each such space is looked at once.
        let mut z = if zwnj.is_empty() {
            0
        } else {
            zwnj.partition_point(|&p| p < at)
        };
        loop {
            // Up to the next space standing for ZWNJ, a step is one transition (and a check
            // whether a needle ends there).
            let stop = zwnj.get(z).copied().unwrap_or(usize::MAX);
            while at < stop {
                let Some(&b) = bytes.get(at) else {
                    return reached;
                };
                let Some(next) = trie.next(sid, b) else {
                    return reached;
                };
                sid = next;
                at += 1;
                if sid.is_match() && self.may_record(sid, at) {
                    let read = at - self.start - skipped;
                    self.record(classifier, sid, at, read, &mut word, keywords, negators);
                }
            }
            match bytes.get(at) {
                None => return reached,
                Some(b' ') => {
                    z += 1;
                    reached = true;
                    // Read as nothing; read as a space, the next pass of the loop steps it.
                    if joined {
                        at += 1;
                        skipped += 1;
                    }
                }
                // Not a space: no later offset is read as ZWNJ either (as each step compared
                // the next entry with its own offset).
                Some(_) => z = zwnj.len(),
            }
        }
    }

    /// Whether state `sid`, where a needle ends, reached at offset `end`, may make a hit:
    /// either that needle may be a stem or `end` may be a word end. Inside a run of ASCII
    /// letters and digits, or of Arabic-script letters, there is no word boundary (UAX #29
    /// WB5, WB8–WB10), so a `"word"` needle ending there is skipped before it is looked up.
    #[inline(always)]
    fn may_record(&self, sid: Cursor, end: usize) -> bool {
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
        !inside || sid.ends_stem()
    }

    /// Records the spellings of the needle that ends in trie state `sid` when the walk has read
    /// `read` bytes and reached offset `end` (a trie state is reached by one string, so the
    /// needle is as long as the walk), for spellings that end on a word boundary (`"word"`) or
    /// anywhere (`"stem*"`, whose hit then spans the rest of its word). Inlined: a call per
    /// record cost more than the walk's step.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn record(
        &self,
        classifier: &Classifier,
        sid: Cursor,
        end: usize,
        read: usize,
        word: &mut usize,
        keywords: &mut Vec<Found>,
        negators: &mut Vec<Found>,
    ) {
        let (words, first) = (self.words, self.first);
        let Some(needle) = sid
            .needle()
            .and_then(|p| classifier.needles.get(p))
            .filter(|n| n.len as usize == read)
        else {
            return;
        };
        let (from, count) = (needle.first as usize, needle.count as usize);
        // The word `end` falls in or ends: from the word an earlier record of this walk
        // reached (`end` only grows), a step per word the walk passed finds it.
        let mut last_word = (*word).max(first);
        while words.get(last_word + 1).is_some_and(|w| w.0 < end) {
            last_word += 1;
        }
        *word = last_word;
        let ends_word = words.get(last_word).is_some_and(|w| w.1 == end);
        for info in &classifier.patterns[from..from + count] {
            let last = match info.kind {
                PatternKind::Word if ends_word => last_word,
                PatternKind::Word => continue,
                PatternKind::Stem => last_word,
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

/// A key that tells the targets of one kind apart from those of another.
pub(super) fn target_key(t: Target) -> (u8, usize) {
    match t {
        Target::Keyword(i) => (0, i),
        Target::Negator(i) => (1, i),
        Target::Embedded(i) => (2, i),
        Target::Except(i) => (3, i),
    }
}

pub(super) fn target_index(t: Target) -> usize {
    match t {
        Target::Keyword(i) | Target::Negator(i) | Target::Embedded(i) | Target::Except(i) => i,
    }
}
