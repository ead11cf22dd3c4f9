//! The token ids of short words, one aligned 32-byte slot per word.
//!
//! Most pieces of natural text are at most 15 bytes and a few tokens. In the general word
//! cache a lookup follows three pointers (the hash slot, the boxed key, the boxed merges),
//! and on a corpus most words the cache holds are cold, so each is a miss to memory. Here the
//! key, its length and its ids sit in one slot: a lookup is one integer compare in one cache
//! line.

/// A word of 1 to 15 bytes, zero-padded, its length in the last byte: equal keys are equal
/// words (the length tells `"a"` from `"a\0"`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Key(u128);

impl Key {
    pub const MAX_LEN: usize = 15;

    pub fn new(word: &str) -> Option<Key> {
        let b = word.as_bytes();
        if b.is_empty() || b.len() > Self::MAX_LEN {
            return None;
        }
        let mut buf = [0u8; 16];
        buf[..b.len()].copy_from_slice(b);
        buf[15] = b.len() as u8;
        Some(Key(u128::from_le_bytes(buf)))
    }

    fn slot(self, mask: usize) -> usize {
        let (lo, hi) = (self.0 as u64, (self.0 >> 64) as u64);
        let h = (lo ^ hi.wrapping_mul(0x9E37_79B9_7F4A_7C15)).wrapping_mul(0xD6E8_FEB8_6659_FD93);
        (h >> 32) as usize & mask
    }
}

/// Ids a slot holds; longer results stay in the general cache.
pub const MAX_IDS: usize = 4;
/// Marks the unused id places; token ids are bounded far below it (`MAX_TOKEN_ID`).
const NO_ID: u32 = u32::MAX;
/// A key no word has (its length byte is 0): a free slot.
const FREE: u128 = 0;
/// Slots at first, and at most: 8 MiB per thread and model. Past three quarters full the
/// table doubles, or at the largest size starts over, so hostile text of distinct words
/// cannot grow it. (A fuller table is a smaller one: more of it stays in the cache, and the
/// probes of linear probing read neighbouring slots.)
const MIN_SLOTS: usize = 1 << 12;
const MAX_SLOTS: usize = 1 << 18;

fn full(used: usize, slots: usize) -> bool {
    used * 4 > slots * 3
}

#[derive(Clone, Copy)]
#[repr(C, align(32))]
struct Slot {
    key: u128,
    ids: [u32; MAX_IDS],
}

const EMPTY: Slot = Slot {
    key: FREE,
    ids: [NO_ID; MAX_IDS],
};

#[derive(Default)]
pub struct ShortWords {
    slots: Vec<Slot>,
    used: usize,
}

impl ShortWords {
    /// The ids stored for `key`, if any.
    pub fn get(&self, key: Key) -> Option<impl Iterator<Item = u32> + '_> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut at = key.slot(mask);
        loop {
            let slot = &self.slots[at];
            if slot.key == key.0 {
                return Some(slot.ids.iter().copied().take_while(|&id| id != NO_ID));
            }
            if slot.key == FREE {
                return None;
            }
            at = (at + 1) & mask;
        }
    }

    /// Keep `ids` for `key` when they fit in a slot (1 to [`MAX_IDS`] ids); `key` must not
    /// be stored yet.
    pub fn insert(&mut self, key: Key, ids: &[u32]) {
        if ids.is_empty() || ids.len() > MAX_IDS || ids.contains(&NO_ID) {
            return;
        }
        if full(self.used + 1, self.slots.len()) {
            self.grow();
        }
        let mut slot = EMPTY;
        slot.key = key.0;
        slot.ids[..ids.len()].copy_from_slice(ids);
        self.place(slot);
        self.used += 1;
    }

    fn place(&mut self, slot: Slot) {
        let mask = self.slots.len() - 1;
        let mut at = Key(slot.key).slot(mask);
        while self.slots[at].key != FREE {
            at = (at + 1) & mask;
        }
        self.slots[at] = slot;
    }

    fn grow(&mut self) {
        let size = (self.slots.len() * 2).clamp(MIN_SLOTS, MAX_SLOTS);
        let old = std::mem::replace(&mut self.slots, vec![EMPTY; size]);
        self.used = 0;
        if old.len() == MAX_SLOTS {
            return;
        }
        for slot in old.into_iter().filter(|s| s.key != FREE) {
            self.place(slot);
            self.used += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(t: &ShortWords, w: &str) -> Option<Vec<u32>> {
        t.get(Key::new(w)?).map(Iterator::collect)
    }

    #[test]
    fn keys_are_words_of_one_to_fifteen_bytes() {
        assert!(Key::new("").is_none());
        assert!(Key::new("0123456789abcdef").is_none());
        assert!(Key::new("0123456789abcde").is_some());
        assert!(Key::new("a") != Key::new("a\0"));
        assert!(Key::new("ab") != Key::new("ba"));
    }

    #[test]
    fn stored_ids_come_back_and_others_do_not() {
        let mut t = ShortWords::default();
        assert_eq!(get(&t, "hello"), None);
        t.insert(Key::new("hello").unwrap(), &[7]);
        t.insert(Key::new(" world").unwrap(), &[1, 2, 3, 4]);
        t.insert(Key::new("five").unwrap(), &[1, 2, 3, 4, 5]);
        t.insert(Key::new("none").unwrap(), &[]);
        assert_eq!(get(&t, "hello"), Some(vec![7]));
        assert_eq!(get(&t, " world"), Some(vec![1, 2, 3, 4]));
        assert_eq!(get(&t, "five"), None);
        assert_eq!(get(&t, "none"), None);
        assert_eq!(get(&t, "hell"), None);
    }

    #[test]
    fn growing_keeps_every_word_and_the_largest_table_starts_over() {
        let mut t = ShortWords::default();
        let word = |i: usize| format!("w{i}");
        let n = MAX_SLOTS * 3 / 4;
        for i in 0..n {
            t.insert(Key::new(&word(i)).unwrap(), &[i as u32, 1]);
        }
        assert_eq!(t.slots.len(), MAX_SLOTS);
        assert!((0..n).all(|i| get(&t, &word(i)) == Some(vec![i as u32, 1])));
        t.insert(Key::new("over").unwrap(), &[9]);
        assert_eq!(t.used, 1);
        assert_eq!(get(&t, "over"), Some(vec![9]));
        assert_eq!(get(&t, &word(0)), None);
    }
}
