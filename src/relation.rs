//! A declared relation over `n` items (role inclusion, permission implication) as adjacency
//! lists, with its strongly connected components in linear time: the checker finds cycles with
//! them, the compiler closes the relation in their order (one union per edge).
//!
//! Everything here is iterative: a chain of a million roles needs no deep call stack.

/// Adjacency lists of a directed relation over `0..n`, each item's successors in the order
/// their edges were declared.
#[derive(Clone, Debug)]
pub(crate) struct Relation {
    /// `targets[offsets[i]..offsets[i + 1]]` are the successors of `i`.
    offsets: Vec<usize>,
    targets: Vec<usize>,
}

impl Relation {
    /// The relation over `0..n` with the given edges (`(from, to)`; an edge naming an item
    /// `>= n` is ignored).
    pub(crate) fn new(n: usize, edges: impl IntoIterator<Item = (usize, usize)> + Clone) -> Self {
        let mut offsets = vec![0usize; n + 1];
        for (a, b) in edges.clone() {
            if a < n && b < n {
                offsets[a + 1] += 1;
            }
        }
        for i in 0..n {
            offsets[i + 1] += offsets[i];
        }
        let mut fill = offsets.clone();
        let mut targets = vec![0usize; offsets[n]];
        for (a, b) in edges {
            if a < n && b < n {
                targets[fill[a]] = b;
                fill[a] += 1;
            }
        }
        Relation { offsets, targets }
    }

    /// How many items the relation is over.
    pub(crate) fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// The successors of `i`, in declaration order.
    pub(crate) fn successors(&self, i: usize) -> &[usize] {
        &self.targets[self.offsets[i]..self.offsets[i + 1]]
    }

    /// The strongly connected components (Tarjan's algorithm, iterative), each listed once, in
    /// an order where a component comes after every component it reaches; with, for each
    /// item, the index of its component in that list.
    pub(crate) fn components(&self) -> (Vec<Vec<usize>>, Vec<usize>) {
        const UNSEEN: usize = usize::MAX;
        let n = self.len();
        let mut index = vec![UNSEEN; n];
        let mut low = vec![0usize; n];
        let mut on_stack = vec![false; n];
        let mut stack: Vec<usize> = Vec::new();
        let mut calls: Vec<(usize, usize)> = Vec::new();
        let mut component_of = vec![UNSEEN; n];
        let mut components: Vec<Vec<usize>> = Vec::new();
        let mut next = 0usize;
        for root in 0..n {
            if index[root] != UNSEEN {
                continue;
            }
            index[root] = next;
            low[root] = next;
            next += 1;
            stack.push(root);
            on_stack[root] = true;
            calls.push((root, 0));
            while let Some(&mut (v, ref mut pos)) = calls.last_mut() {
                if let Some(&w) = self.successors(v).get(*pos) {
                    *pos += 1;
                    if index[w] == UNSEEN {
                        index[w] = next;
                        low[w] = next;
                        next += 1;
                        stack.push(w);
                        on_stack[w] = true;
                        calls.push((w, 0));
                    } else if on_stack[w] {
                        low[v] = low[v].min(index[w]);
                    }
                    continue;
                }
                calls.pop();
                if let Some(&(u, _)) = calls.last() {
                    low[u] = low[u].min(low[v]);
                }
                if low[v] == index[v] {
                    let id = components.len();
                    let mut members = Vec::new();
                    while let Some(w) = stack.pop() {
                        on_stack[w] = false;
                        component_of[w] = id;
                        members.push(w);
                        if w == v {
                            break;
                        }
                    }
                    components.push(members);
                }
            }
        }
        (components, component_of)
    }

    /// One walk around each cycle: for every component of two or more items, the path that
    /// starts at its smallest item and follows, from each item, its first declared edge that
    /// stays in the component and leads back to the start or to an item not yet on the path.
    /// Linear in the size of the relation.
    pub(crate) fn cycles(&self) -> Vec<Vec<usize>> {
        let (components, component_of) = self.components();
        let mut on_path = vec![false; self.len()];
        let mut out = Vec::new();
        for (id, members) in components.iter().enumerate() {
            if members.len() < 2 {
                continue;
            }
            let start = members.iter().copied().min().unwrap_or(0);
            let mut path = vec![start];
            on_path[start] = true;
            let mut current = start;
            loop {
                let next = self
                    .successors(current)
                    .iter()
                    .copied()
                    .filter(|&b| component_of[b] == id)
                    .find(|&b| b == start || !on_path[b]);
                match next {
                    Some(b) if b == start => break,
                    Some(b) => {
                        on_path[b] = true;
                        path.push(b);
                        current = b;
                    }
                    None => break,
                }
            }
            for &i in &path {
                on_path[i] = false;
            }
            out.push(path);
        }
        // Components come sinks first; report cycles in the order of their smallest items, as
        // a scan of the items in declaration order meets them.
        out.sort_by_key(|path| path[0]);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::Relation;

    #[test]
    fn components_come_after_what_they_reach() {
        // 0 -> 1 -> 2 -> 1, 3 -> 0
        let r = Relation::new(4, [(0, 1), (1, 2), (2, 1), (3, 0)]);
        let (components, component_of) = r.components();
        let mut sorted: Vec<Vec<usize>> = components
            .iter()
            .map(|c| {
                let mut c = c.clone();
                c.sort_unstable();
                c
            })
            .collect();
        sorted.sort();
        assert_eq!(sorted, [vec![0], vec![1, 2], vec![3]]);
        assert!(component_of[1] < component_of[0]);
        assert!(component_of[0] < component_of[3]);
        assert_eq!(component_of[1], component_of[2]);
    }

    #[test]
    fn a_million_item_chain_needs_no_deep_stack() {
        let n = 1_000_000;
        let r = Relation::new(n, (0..n - 1).map(|i| (i, i + 1)));
        let (components, _) = r.components();
        assert_eq!(components.len(), n);
        assert_eq!(components[0], [n - 1]);
        assert!(r.cycles().is_empty());
        let ring = Relation::new(n, (0..n).map(|i| (i, (i + 1) % n)));
        let cycles = ring.cycles();
        assert_eq!(cycles.len(), 1);
        assert_eq!(cycles[0].len(), n);
        assert_eq!(cycles[0][..3], [0, 1, 2]);
    }

    #[test]
    fn the_walk_follows_declared_order_inside_the_component() {
        // 0 -> 2, 0 -> 1, 1 -> 0, 2 -> 1, 4 -> 3, 3 -> 4
        let r = Relation::new(5, [(0, 2), (0, 1), (1, 0), (2, 1), (4, 3), (3, 4)]);
        assert_eq!(r.cycles(), [vec![0, 2, 1], vec![3, 4]]);
    }
}
