//! Entries by 64-bit key, bounded: past the capacity, the least recently written goes first.
//! The conversations seen and the pods that served their requests are both kept so.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

pub struct Lru<V> {
    capacity: usize,
    /// Key → when it was written and its value.
    entries: FxHashMap<u64, (u64, V)>,
    /// When written → key, oldest first.
    by_stamp: BTreeMap<u64, u64>,
    stamp: u64,
}

impl<V> Lru<V> {
    pub fn new(capacity: usize) -> Lru<V> {
        Lru {
            capacity: capacity.max(1),
            entries: FxHashMap::default(),
            by_stamp: BTreeMap::new(),
            stamp: 0,
        }
    }

    pub fn get(&self, key: u64) -> Option<&V> {
        self.entries.get(&key).map(|(_, v)| v)
    }

    pub fn remove(&mut self, key: u64) -> Option<V> {
        let (stamp, v) = self.entries.remove(&key)?;
        self.by_stamp.remove(&stamp);
        Some(v)
    }

    /// `key` written now (in place of what it held); each entry forgotten to stay within the
    /// capacity goes to `forgotten`, oldest first.
    pub fn insert(&mut self, key: u64, value: V, mut forgotten: impl FnMut(V)) {
        self.remove(key);
        self.stamp += 1;
        self.entries.insert(key, (self.stamp, value));
        self.by_stamp.insert(self.stamp, key);
        while self.entries.len() > self.capacity {
            let Some((_, oldest)) = self.by_stamp.pop_first() else {
                break;
            };
            if let Some((_, v)) = self.entries.remove(&oldest) {
                forgotten(v);
            }
        }
    }

    /// Every entry, least recently written first; the map is left empty.
    pub fn drain(&mut self) -> Vec<V> {
        let keys = std::mem::take(&mut self.by_stamp);
        keys.into_values()
            .filter_map(|k| self.entries.remove(&k).map(|(_, v)| v))
            .collect()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}
