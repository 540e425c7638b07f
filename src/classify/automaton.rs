//! The keyword automaton's parts: the needles (each distinct normalized text of a keyword,
//! negator, `embedded` phrase or `except` entry, once) and the spellings each stands for, where
//! walks begin ([`WalkStarts`], memoized when the classifier is built), and one anchored walk
//! from a word start ([`Walk`]) that records the occurrences ([`Found`]) it reads.

use aho_corasick::automaton::{Automaton, StateID};
use aho_corasick::nfa::contiguous::NFA;
use aho_corasick::Anchored;
use rustc_hash::FxHashMap;

use super::classifier::Classifier;
use super::normalize::two_byte;
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

/// Where walks of the automaton begin. A walk from a word start reads its first three bytes in
/// one lookup: the anchored state they lead to is computed once, when the classifier is built,
/// for the first three bytes of every needle (a memo of the automaton's own transitions, so a
/// walk that no needle begins ends at once). A start that one- or two-byte needles begin, or
/// whose first bytes hold a space that stands for ZWNJ, steps from the start state instead.
#[derive(Clone, Debug)]
pub(super) struct WalkStarts {
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
pub(super) enum Start {
    /// No needle begins here.
    None,
    /// Step from the start state.
    Step,
    /// Go on from this state, three bytes in.
    Three(StateID),
}

impl WalkStarts {
    /// The starts of `needles` (the automaton's patterns, in `ac`).
    pub(super) fn new(ac: Option<&NFA>, needles: &[String]) -> WalkStarts {
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
    pub(super) fn start(&self, bytes: &[u8], s: usize, zwnj_spaces: &[usize]) -> Start {
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
pub(super) fn state_set<'a>(ac: &NFA, needles: impl Iterator<Item = &'a str>) -> Vec<u64> {
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
pub(super) fn bit(set: &[u64], i: usize) -> bool {
    set[i >> 6] & (1 << (i & 63)) != 0
}

/// One walk of the keyword automaton from a word start of the normalized text.
pub(super) struct Walk<'a> {
    pub(super) ac: &'a NFA,
    pub(super) bytes: &'a [u8],
    /// Spaces that stand for ZWNJ alone (ascending offsets).
    pub(super) zwnj_spaces: &'a [usize],
    /// Where the walk starts: a word start, and that word's index in `words`.
    pub(super) start: usize,
    pub(super) first: usize,
    pub(super) words: &'a [(usize, usize)],
}

impl Walk<'_> {
    /// Walks from state `sid`, `read` bytes past `self.start` (the start state and 0, or a
    /// state [`WalkStarts`] memoized and 3), until no needle continues, recording every
    /// occurrence in `keywords` or `negators`. With `joined`, every space that stands for ZWNJ
    /// is read as nothing; without, as a space. Returns whether the walk reached such a space
    /// (so the other reading may find more). At most as many steps as the longest needle, plus
    /// the spaces skipped.
    #[inline(always)]
    pub(super) fn run(
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
        // The word the walk has reached: it only moves forward, so over the whole walk the
        // records step over the words it reads once.
        let mut word = self.first;
        if read > 0 && self.may_record(classifier, sid, at) {
            self.record(classifier, sid, at, read, &mut word, keywords, negators);
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
                self.record(classifier, sid, at, read, &mut word, keywords, negators);
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
    #[allow(clippy::too_many_arguments)]
    fn record(
        &self,
        classifier: &Classifier,
        sid: StateID,
        end: usize,
        read: usize,
        word: &mut usize,
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
