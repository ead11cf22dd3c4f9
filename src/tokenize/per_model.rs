//! A thread's cache of something per tokenizer (the merges of the words it has seen, the ids
//! of short runs), for the last few tokenizers it used, the one used last first: a thread works
//! with one tokenizer at a time, so a lookup is one compare rather than a hash map's probe, and
//! a thread that loads one model after another (`check`) keeps the caches of the last few only.

use std::sync::atomic::{AtomicU64, Ordering};

/// Tokenizers a thread keeps a cache for.
const MAX_MODELS: usize = 4;

static NEXT_KEY: AtomicU64 = AtomicU64::new(1);

/// A key of its own for each tokenizer: a later one may be built at a freed one's address.
pub fn new_key() -> u64 {
    NEXT_KEY.fetch_add(1, Ordering::Relaxed)
}

pub struct PerModel<T>(Vec<(u64, T)>);

impl<T: Default> PerModel<T> {
    pub const fn new() -> Self {
        PerModel(Vec::new())
    }

    /// The cache of the tokenizer `key`, moved to the front (made empty the first time; the
    /// least recently used one is dropped past [`MAX_MODELS`]).
    pub fn entry(&mut self, key: u64) -> &mut T {
        match self.0.iter().position(|(k, _)| *k == key) {
            Some(at) => self.0[..=at].rotate_right(1),
            None => {
                self.0.insert(0, (key, T::default()));
                self.0.truncate(MAX_MODELS);
            }
        }
        &mut self.0[0].1
    }

    /// The keys kept, the one used last first.
    #[cfg(test)]
    pub fn keys(&self) -> Vec<u64> {
        self.0.iter().map(|(k, _)| *k).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_few_models_are_kept_in_order_of_use() {
        let keys: Vec<u64> = (0..=MAX_MODELS).map(|_| new_key()).collect();
        let mut caches: PerModel<Vec<u64>> = PerModel::new();
        for &k in &keys {
            caches.entry(k).push(k);
        }
        let newest: Vec<u64> = keys.iter().rev().take(MAX_MODELS).copied().collect();
        assert_eq!(caches.keys(), newest);
        // A kept one comes back with what it held, to the front; the rest keep their order.
        let second = newest[1];
        assert_eq!(caches.entry(second), &vec![second]);
        let mut expected = newest.clone();
        expected.remove(1);
        expected.insert(0, second);
        assert_eq!(caches.keys(), expected);
        // A dropped one starts empty.
        assert!(caches.entry(keys[0]).is_empty());
    }
}
