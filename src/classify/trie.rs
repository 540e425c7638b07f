//! The keyword automaton: a trie of the needles, walked anchored from word starts, laid out as a
//! double array ([`Trie`]). A step is one lookup of the byte's class, one of the state's base and
//! one comparison of the slot it leads to, where an Aho-Corasick NFA looks up the state's kind and
//! searches its transitions; a walk never needs failure transitions, so the trie has none.

/// A state of a [`Trie`]: the index of its slot.
type State = u32;

/// The state before any byte.
const ROOT: State = 0;

/// `check` of a slot no state holds.
const FREE: u32 = u32::MAX;
/// `check` of the root's slot, which no transition leads to.
const NO_PARENT: u32 = u32::MAX - 1;
/// In `info`, the bit of a state where a needle with a `"stem*"` spelling ends.
const STEM: u32 = 1 << 31;
/// How many slots the search for a state's children looks at past the first free one before it
/// puts them after every slot taken: building stays linear in the needles whatever their shape.
const SEARCH: usize = 256;

#[derive(Clone, Copy, Debug)]
struct Slot {
    /// The children of the state in this slot are at `base + class`.
    base: u32,
    /// The state whose child this slot is ([`FREE`] if none).
    check: u32,
    /// 0, or 1 + the index of the needle that ends in this state, with [`STEM`].
    info: u32,
}

/// A state of a [`Trie`] with what a walk reads of its slot: the next step needs no other load
/// of it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Cursor {
    state: State,
    base: u32,
    info: u32,
}

impl Cursor {
    /// Whether a needle ends here.
    #[inline(always)]
    pub(super) fn is_match(self) -> bool {
        self.info != 0
    }

    /// Whether a needle with a `"stem*"` spelling ends here.
    #[inline(always)]
    pub(super) fn ends_stem(self) -> bool {
        self.info & STEM != 0
    }

    /// The index of the needle that ends here, if one does.
    #[inline(always)]
    pub(super) fn needle(self) -> Option<usize> {
        ((self.info & !STEM) as usize).checked_sub(1)
    }
}

/// A trie of byte strings as a double array over byte classes.
#[derive(Clone, Debug)]
pub(super) struct Trie {
    /// The class of each byte: 1.. for the bytes the needles hold, 0 for the others (no state
    /// has a child of class 0).
    classes: [u8; 256],
    slots: Vec<Slot>,
}

impl Trie {
    /// The trie of `needles` (sorted, distinct); `stem(i)` says whether needle `i` has a
    /// `"stem*"` spelling.
    pub(super) fn new(needles: &[String], stem: impl Fn(usize) -> bool) -> Trie {
        let mut classes = [0u8; 256];
        for n in needles {
            for &b in n.as_bytes() {
                classes[usize::from(b)] = 1;
            }
        }
        // Needles are UTF-8, which never holds 0xC0, 0xC1 or 0xF5..=0xFF: at most 243 classes.
        let mut next = 0u8;
        for c in classes.iter_mut().filter(|c| **c != 0) {
            next = next.saturating_add(1);
            *c = next;
        }
        let mut trie = Trie {
            classes,
            slots: vec![Slot {
                base: 0,
                check: NO_PARENT,
                info: 0,
            }],
        };
        // Depth-first: (state, needles under it as a range, depth).
        let mut stack = vec![(ROOT, 0..needles.len(), 0usize)];
        let mut children: Vec<(u8, std::ops::Range<usize>)> = Vec::new();
        let mut first_free = 1usize;
        while let Some((state, mut range, depth)) = stack.pop() {
            // Sorted: the needle that ends here comes first.
            if needles.get(range.start).is_some_and(|n| n.len() == depth) {
                let stem = if stem(range.start) { STEM } else { 0 };
                let index = u32::try_from(range.start + 1).unwrap_or(STEM - 1);
                trie.slots[state as usize].info = index | stem;
                range.start += 1;
            }
            children.clear();
            for i in range {
                let c = trie.classes[usize::from(needles[i].as_bytes()[depth])];
                match children.last_mut() {
                    Some((last, r)) if *last == c => r.end = i + 1,
                    _ => children.push((c, i..i + 1)),
                }
            }
            if children.is_empty() {
                continue;
            }
            let base = trie.place(&children, first_free);
            trie.slots[state as usize].base = base;
            for (c, r) in children.drain(..).rev() {
                let child = base + u32::from(c);
                trie.slots[child as usize].check = state;
                stack.push((child, r, depth + 1));
            }
            while trie.slots.get(first_free).is_some_and(|s| s.check != FREE) {
                first_free += 1;
            }
        }
        while trie.slots.last().is_some_and(|s| s.check == FREE) {
            trie.slots.pop();
        }
        trie.slots.shrink_to_fit();
        trie
    }

    /// A base where every class of `children` (ascending) falls on a free slot, growing the
    /// slots as needed.
    fn place(&mut self, children: &[(u8, std::ops::Range<usize>)], first_free: usize) -> u32 {
        let c0 = usize::from(children[0].0);
        let last = usize::from(children[children.len() - 1].0);
        let free = |slots: &[Slot], base: usize| {
            children.iter().all(|&(c, _)| {
                slots
                    .get(base + usize::from(c))
                    .is_none_or(|s| s.check == FREE)
            })
        };
        let from = first_free.max(c0);
        let to = (from + SEARCH).min(self.slots.len());
        let base = (from..to)
            .find(|&pos| self.slots[pos].check == FREE && free(&self.slots, pos - c0))
            .map_or_else(|| self.slots.len().max(c0) - c0, |pos| pos - c0);
        if self.slots.len() <= base + last {
            self.slots.resize(
                base + last + 1,
                Slot {
                    base: 0,
                    check: FREE,
                    info: 0,
                },
            );
        }
        u32::try_from(base).unwrap_or(u32::MAX)
    }

    /// Where every walk begins: the root.
    #[inline(always)]
    pub(super) fn root(&self) -> Cursor {
        let root = self.slots.first().map_or(0, |s| s.base);
        Cursor {
            state: ROOT,
            base: root,
            info: 0,
        }
    }

    /// Where reading `b` at `at` leads, if a needle goes on that way.
    #[inline(always)]
    pub(super) fn next(&self, at: Cursor, b: u8) -> Option<Cursor> {
        let to = at
            .base
            .wrapping_add(u32::from(self.classes[usize::from(b)]));
        let slot = self.slots.get(to as usize)?;
        (slot.check == at.state).then_some(Cursor {
            state: to,
            base: slot.base,
            info: slot.info,
        })
    }

    /// Number of states.
    #[cfg(test)]
    pub(super) fn states(&self) -> usize {
        self.slots.iter().filter(|s| s.check != FREE).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small generator, so the test needs no dependency and repeats exactly.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }

        fn string(&mut self, alphabet: &[&str], max: usize) -> String {
            let len = self.below(max + 1);
            (0..len)
                .map(|_| alphabet[self.below(alphabet.len())])
                .collect()
        }
    }

    /// Walks `q` in `trie` and checks every prefix against the needles themselves: a state
    /// exists while a needle begins with what was read, a needle ends where one equals it.
    fn check(trie: &Trie, needles: &[String], stems: &[bool], q: &str) {
        let mut at = Some(trie.root());
        for k in 1..=q.len() {
            let read = &q.as_bytes()[..k];
            at = at.and_then(|c| trie.next(c, read[k - 1]));
            let continues = needles.iter().any(|n| n.as_bytes().starts_with(read));
            assert_eq!(at.is_some(), continues, "{q:?} read to {k}");
            let Some(c) = at else { break };
            let found = needles.iter().position(|n| n.as_bytes() == read);
            assert_eq!(c.needle(), found, "{q:?} read to {k}");
            assert_eq!(c.is_match(), found.is_some());
            assert_eq!(c.ends_stem(), found.is_some_and(|i| stems[i]));
        }
    }

    #[test]
    fn walks_find_exactly_the_needles_and_their_prefixes() {
        let alphabet = ["a", "b", "c", " ", "é", "ک", "ی", "z", "-"];
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for round in 0..200 {
            let mut needles: Vec<String> = (0..1 + rng.below(60))
                .map(|_| rng.string(&alphabet, 8))
                .filter(|n| !n.is_empty())
                .collect();
            needles.sort();
            needles.dedup();
            let stems: Vec<bool> = needles.iter().map(|_| rng.below(3) == 0).collect();
            let trie = Trie::new(&needles, |i| stems[i]);
            for n in &needles {
                check(&trie, &needles, &stems, n);
            }
            for _ in 0..50 {
                let q = rng.string(&alphabet, 12);
                check(&trie, &needles, &stems, &q);
            }
            assert!(round > 0 || trie.states() > 1 || needles.is_empty());
        }
    }

    #[test]
    fn no_needles_make_a_trie_where_every_walk_ends_at_once() {
        let trie = Trie::new(&[], |_| false);
        assert!((0..=255u8).all(|b| trie.next(trie.root(), b).is_none()));
    }

    #[test]
    fn wide_branching_stays_compact_and_correct() {
        // Every pair of 200 distinct characters: each state below the root branches 200 ways.
        let chars: Vec<char> = ('\u{0400}'..).take(200).collect();
        let mut needles: Vec<String> = chars
            .iter()
            .flat_map(|&a| chars.iter().map(move |&b| format!("{a}{b}")))
            .collect();
        needles.sort();
        let trie = Trie::new(&needles, |i| i % 2 == 0);
        let stems: Vec<bool> = (0..needles.len()).map(|i| i % 2 == 0).collect();
        for n in needles.iter().step_by(97) {
            check(&trie, &needles, &stems, n);
        }
        // Each needle adds at most its own bytes' states, and the slots stay within a small
        // factor of the states.
        assert!(
            trie.slots.len() <= 4 * trie.states(),
            "{} slots",
            trie.slots.len()
        );
    }
}
