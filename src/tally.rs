//! Counts by kind with the first few examples of each: a bounded summary of what unbounded
//! input produced (a capture of garbage yields millions of malformed messages; a list of them
//! grew with the file). Used for replay's undecodable messages and capture's malformed ones.

/// Examples kept per kind.
pub const EXAMPLES: usize = 3;

/// The order kinds are listed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Order {
    /// As they first appeared in the input.
    #[default]
    FirstSeen,
    /// By the kind's own order (`Ord`).
    ByKind,
}

/// One kind: how many, and the first [`EXAMPLES`] of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindCount<K, E> {
    pub kind: K,
    pub count: u64,
    pub examples: Vec<E>,
}

/// Counts by kind; memory grows with the number of kinds, never with the number counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindCounts<K, E> {
    total: u64,
    kinds: Vec<KindCount<K, E>>,
    order: Order,
}

impl<K, E> Default for KindCounts<K, E> {
    fn default() -> Self {
        KindCounts::new(Order::default())
    }
}

impl<K, E> KindCounts<K, E> {
    pub fn new(order: Order) -> Self {
        KindCounts {
            total: 0,
            kinds: Vec::new(),
            order,
        }
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// Each kind seen, in the collection's [`Order`].
    pub fn kinds(&self) -> impl ExactSizeIterator<Item = &KindCount<K, E>> {
        self.kinds.iter()
    }
}

impl<K: Copy + Ord, E> KindCounts<K, E> {
    /// Count one of `kind`; `example` is called only while the kind has fewer than
    /// [`EXAMPLES`] (so an example costs nothing once enough are kept).
    pub fn add(&mut self, kind: K, example: impl FnOnce() -> E) {
        self.total += 1;
        // Kinds are few (an enum's variants): a scan beats a map.
        let at = match self.kinds.iter().position(|k| k.kind == kind) {
            Some(i) => i,
            None => {
                let i = match self.order {
                    Order::FirstSeen => self.kinds.len(),
                    Order::ByKind => self.kinds.partition_point(|k| k.kind < kind),
                };
                self.kinds.insert(
                    i,
                    KindCount {
                        kind,
                        count: 0,
                        examples: Vec::new(),
                    },
                );
                i
            }
        };
        let k = &mut self.kinds[at];
        k.count += 1;
        if k.examples.len() < EXAMPLES {
            k.examples.push(example());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_stay_bounded_and_keep_the_first_examples() {
        let mut c = KindCounts::default();
        for i in 0..10_000u32 {
            c.add('b', || i);
        }
        c.add('a', || 7);
        assert_eq!(c.total(), 10_001);
        let kinds: Vec<_> = c
            .kinds()
            .map(|k| (k.kind, k.count, k.examples.clone()))
            .collect();
        assert_eq!(kinds, [('b', 10_000, vec![0, 1, 2]), ('a', 1, vec![7])]);
    }

    #[test]
    fn order_by_kind_sorts_and_first_seen_does_not() {
        let mut sorted = KindCounts::new(Order::ByKind);
        let mut seen = KindCounts::new(Order::FirstSeen);
        for k in [3, 1, 2, 1, 3] {
            sorted.add(k, || ());
            seen.add(k, || ());
        }
        let kinds =
            |c: &KindCounts<i32, ()>| c.kinds().map(|k| (k.kind, k.count)).collect::<Vec<_>>();
        assert_eq!(kinds(&sorted), [(1, 2), (2, 1), (3, 2)]);
        assert_eq!(kinds(&seen), [(3, 2), (1, 2), (2, 1)]);
        assert!(KindCounts::<i32, ()>::default().is_empty());
    }

    #[test]
    fn examples_are_not_built_once_enough_are_kept() {
        let mut c = KindCounts::default();
        let mut built = 0;
        for _ in 0..100 {
            c.add((), || built += 1);
        }
        assert_eq!(built, EXAMPLES);
    }
}
