//! A fixed-width bit set over role, permission or server indexes.

/// A set of small indexes. The first 64 members live inline (no heap, no pointer to follow on
/// the hot path); wider sets keep the remaining words in `rest`. Width is fixed at creation.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub(crate) struct BitSet {
    first: u64,
    /// Words for indexes 64.. (empty, hence unallocated, for sets of at most 64 members).
    rest: Box<[u64]>,
}

impl BitSet {
    /// An empty set able to hold indexes `0..n`. Allocates nothing when `n <= 64`.
    pub(crate) fn new(n: usize) -> BitSet {
        let words = n.div_ceil(64).saturating_sub(1);
        BitSet {
            first: 0,
            rest: if words == 0 {
                Box::default()
            } else {
                vec![0u64; words].into_boxed_slice()
            },
        }
    }

    /// Adds `i` (ignored when beyond the set's last word).
    pub(crate) fn insert(&mut self, i: usize) {
        if i < 64 {
            self.first |= 1u64 << i;
        } else if let Some(w) = self.rest.get_mut(i / 64 - 1) {
            *w |= 1u64 << (i % 64);
        }
    }

    /// Adds every member of `other`.
    #[inline]
    pub(crate) fn union_with(&mut self, other: &BitSet) {
        self.first |= other.first;
        for (a, b) in self.rest.iter_mut().zip(other.rest.iter()) {
            *a |= *b;
        }
    }

    /// Whether every member of `self` is in `other`.
    #[inline]
    pub(crate) fn is_subset(&self, other: &BitSet) -> bool {
        self.first & !other.first == 0
            && (self.rest.is_empty()
                || self.rest.iter().enumerate().all(|(i, w)| {
                    let o = other.rest.get(i).copied().unwrap_or(0);
                    w & !o == 0
                }))
    }

    /// Whether the two sets share a member.
    #[inline]
    pub(crate) fn intersects(&self, other: &BitSet) -> bool {
        self.first & other.first != 0
            || self
                .rest
                .iter()
                .zip(other.rest.iter())
                .any(|(a, b)| a & b != 0)
    }

    /// Whether `i` is a member.
    #[inline]
    pub(crate) fn contains(&self, i: usize) -> bool {
        if i < 64 {
            self.first & (1u64 << i) != 0
        } else {
            self.rest
                .get(i / 64 - 1)
                .is_some_and(|w| w & (1u64 << (i % 64)) != 0)
        }
    }

    /// Whether the set has no member.
    pub(crate) fn is_empty(&self) -> bool {
        self.first == 0 && self.rest.iter().all(|w| *w == 0)
    }

    /// The members in increasing order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        std::iter::once(self.first)
            .chain(self.rest.iter().copied())
            .enumerate()
            .flat_map(|(wi, w)| {
                (0..64)
                    .filter(move |b| w & (1u64 << b) != 0)
                    .map(move |b| wi * 64 + b)
            })
    }

    /// Bytes held on the heap.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.rest.len() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subset_and_intersection() {
        let mut a = BitSet::new(130);
        let mut b = BitSet::new(130);
        a.insert(3);
        a.insert(129);
        b.insert(3);
        assert!(!a.is_subset(&b));
        b.insert(129);
        b.insert(64);
        assert!(a.is_subset(&b));
        assert!(a.intersects(&b));
        assert!(b.contains(64) && b.contains(129) && !b.contains(65) && !b.contains(500));
        assert_eq!(b.iter().collect::<Vec<_>>(), vec![3, 64, 129]);
        assert!(BitSet::new(0).is_subset(&a));
        let mut c = BitSet::new(130);
        c.insert(64);
        assert!(!c.is_subset(&a));
        assert!(!c.intersects(&a));
        assert!(c.intersects(&b));
    }

    #[test]
    fn narrow_sets_live_inline() {
        let mut s = BitSet::new(64);
        s.insert(63);
        s.insert(64);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![63]);
        assert_eq!(s.heap_bytes(), 0);
        assert_eq!(BitSet::new(65).heap_bytes(), 8);
    }
}
