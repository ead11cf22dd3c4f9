//! The token ids of short words, one aligned 32-byte slot per word.
//!
//! Most pieces of natural text are at most 15 bytes and a few tokens. In the general word
//! cache a lookup follows three pointers (the hash slot, the boxed key, the boxed merges),
//! and on a corpus most words the cache holds are cold, so each is a miss to memory. Here the
//! key, its length and its ids sit in one slot: a lookup is one integer compare in one cache
//! line.

use super::prepared::table_slot;

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

    /// Both halves folded so that every byte reaches the top bits [`table_slot`] takes.
    fn slot(self, mask: usize) -> usize {
        let (lo, hi) = (self.0 as u64, (self.0 >> 64) as u64);
        table_slot(lo ^ hi.wrapping_mul(0xD6E8_FEB8_6659_FD93), mask)
    }
}

/// Ids a slot holds; longer results stay in the general cache.
pub const MAX_IDS: usize = 4;
/// Marks the unused id places; token ids are bounded far below it (`MAX_TOKEN_ID`).
const NO_ID: u32 = u32::MAX;
/// A key no word has (its length byte is 0): a free slot.
const FREE: u128 = 0;
/// Slots at first, and at most: 8 MiB per thread and model (12 MiB while the last doubling
/// copies the 4 MiB table before it). Past three quarters full the
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

    /// Keep `ids` for `key` when they fit in a slot (1 to [`MAX_IDS`] ids, none of them
    /// `NO_ID`); a key stored already gets the new ids.
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
        if self.place(slot) {
            self.used += 1;
        }
    }

    /// Put `slot` where its key is, or else in the first free slot from its own: whether the
    /// key is new.
    fn place(&mut self, slot: Slot) -> bool {
        let mask = self.slots.len() - 1;
        let mut at = Key(slot.key).slot(mask);
        loop {
            let here = self.slots[at].key;
            if here == FREE || here == slot.key {
                self.slots[at] = slot;
                return here == FREE;
            }
            at = (at + 1) & mask;
        }
    }

    fn grow(&mut self) {
        self.used = 0;
        // At the largest size the table starts over in place, without a second 8 MiB.
        if self.slots.len() == MAX_SLOTS {
            self.slots.fill(EMPTY);
            return;
        }
        let size = (self.slots.len() * 2).max(MIN_SLOTS);
        let old = std::mem::replace(&mut self.slots, vec![EMPTY; size]);
        for slot in old.into_iter().filter(|s| s.key != FREE) {
            if self.place(slot) {
                self.used += 1;
            }
        }
    }

    /// How far each stored key sits from its own slot, the largest.
    #[cfg(test)]
    fn longest_displacement(&self) -> usize {
        let mask = self.slots.len() - 1;
        (0..self.slots.len())
            .filter(|&at| self.slots[at].key != FREE)
            .map(|at| at.wrapping_sub(Key(self.slots[at].key).slot(mask)) & mask)
            .max()
            .unwrap_or(0)
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
        // An id that would read as an unused place is not stored.
        t.insert(Key::new("max").unwrap(), &[1, NO_ID]);
        assert_eq!(get(&t, "max"), None);
        // A key stored again takes the new ids and one slot.
        t.insert(Key::new("hello").unwrap(), &[8, 9]);
        assert_eq!(get(&t, "hello"), Some(vec![8, 9]));
        assert_eq!(t.used, 2);
    }

    #[test]
    fn words_that_differ_late_or_in_length_spread_over_the_table() {
        // Byte-level words as the tokenizer sees them ("Ġ" is a space): same leading bytes,
        // differing only in the 7th and 8th bytes or in length. A slot taken from the
        // product's middle bits put the 676 of the first kind in 4 slots.
        let mut t = ShortWords::default();
        let mut n = 0;
        for a in b'a'..=b'z' {
            for b in b'a'..=b'z' {
                let w = format!("\u{120}play{}{}", a as char, b as char);
                t.insert(Key::new(&w).unwrap(), &[n]);
                t.insert(Key::new(&w[..w.len() - 1]).unwrap(), &[n]);
                n += 1;
            }
        }
        assert_eq!(t.slots.len(), MIN_SLOTS);
        assert!(
            t.longest_displacement() <= 8,
            "{}",
            t.longest_displacement()
        );
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
        assert_eq!(t.slots.len(), MAX_SLOTS);
        assert_eq!(get(&t, "over"), Some(vec![9]));
        assert_eq!(get(&t, &word(0)), None);
    }
}
