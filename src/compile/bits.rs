//! A fixed-width bit set over role or permission indexes.

/// A set of small indexes, stored as 64-bit words. Width is fixed at creation.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub(crate) struct BitSet {
    words: Box<[u64]>,
}

impl BitSet {
    /// An empty set able to hold indexes `0..n`.
    pub(crate) fn new(n: usize) -> BitSet {
        BitSet {
            words: vec![0u64; n.div_ceil(64)].into_boxed_slice(),
        }
    }

    /// Adds `i` (ignored when out of range).
    pub(crate) fn insert(&mut self, i: usize) {
        if let Some(w) = self.words.get_mut(i / 64) {
            *w |= 1u64 << (i % 64);
        }
    }

    /// Adds every member of `other`.
    pub(crate) fn union_with(&mut self, other: &BitSet) {
        for (a, b) in self.words.iter_mut().zip(other.words.iter()) {
            *a |= *b;
        }
    }

    /// Whether every member of `self` is in `other`.
    pub(crate) fn is_subset(&self, other: &BitSet) -> bool {
        self.words.iter().enumerate().all(|(i, w)| {
            let o = other.words.get(i).copied().unwrap_or(0);
            w & !o == 0
        })
    }

    /// Whether the two sets share a member.
    pub(crate) fn intersects(&self, other: &BitSet) -> bool {
        self.words
            .iter()
            .zip(other.words.iter())
            .any(|(a, b)| a & b != 0)
    }

    /// Whether the set has no member.
    pub(crate) fn is_empty(&self) -> bool {
        self.words.iter().all(|w| *w == 0)
    }

    /// The members in increasing order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(wi, &w)| {
            (0..64)
                .filter(move |b| w & (1u64 << b) != 0)
                .map(move |b| wi * 64 + b)
        })
    }

    /// Bytes held on the heap.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.words.len() * 8
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
        assert_eq!(b.iter().collect::<Vec<_>>(), vec![3, 64, 129]);
        assert!(BitSet::new(0).is_subset(&a));
    }
}
