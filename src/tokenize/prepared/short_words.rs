//! The token ids of short words, one aligned 32-byte slot per word, shared by the threads
//! that tokenize with one model.
//!
//! Most pieces of natural text are at most 15 bytes and a few tokens. In the general word
//! cache a lookup follows three pointers (the hash slot, the boxed key, the boxed merges),
//! and on a corpus most words the cache holds are cold, so each is a miss to memory. Here the
//! key, its length and its ids sit in one slot: a lookup is two integer compares in one cache
//! line.
//!
//! One table serves every thread: a word's ids depend only on the model and the word, and
//! with a table per thread each `corpus` worker merged the same words again (on the 10k bench
//! corpus, a perf profile by hand of Llama 3.1 at `--jobs 2` had 41% more samples in
//! `merge_word` than at `--jobs 1`).
//! A slot is written once and never changed: a writer claims a free slot by swapping its
//! upper key word from 0 to [`BUSY`], writes the lower key word and the ids, and publishes
//! the upper word last with release ordering, so a reader that sees a key with acquire
//! ordering sees its ids. A reader meeting a claimed slot treats the word as not stored.
//! Past three quarters full nothing more is stored (bounded memory whatever the text; the
//! words of such text go to the thread's general cache).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use super::table_slot;

/// A word of 1 to 15 bytes, zero-padded, its length in the last byte: equal keys are equal
/// words (the length tells `"a"` from `"a\0"`), and the upper half of a key is never 0 nor
/// [`BUSY`] (its top byte is 1 to 15).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Key(u128);

impl Key {
    pub const MAX_LEN: usize = 15;

    pub fn new(word: &str) -> Option<Key> {
        let b = word.as_bytes();
        let n = b.len();
        if n == 0 || n > Self::MAX_LEN {
            return None;
        }
        // Whole-word loads, not a copy into a buffer read back as two words: the copy's
        // bytes reach the loads only after a store-forwarding stall, on every word.
        let (lo, rest) = match b.split_first_chunk::<8>() {
            Some((first, rest)) => (u64::from_le_bytes(*first), little_endian(rest)),
            None => (little_endian(b), 0),
        };
        Some(Key(
            u128::from(lo) | u128::from(rest | (n as u64) << 56) << 64
        ))
    }

    /// The word's bytes, zero-padded, and its length.
    pub fn bytes(self) -> ([u8; 16], usize) {
        let all = self.0.to_le_bytes();
        (all, usize::from(all[15]).min(Self::MAX_LEN))
    }

    fn lo(self) -> u64 {
        self.0 as u64
    }

    fn hi(self) -> u64 {
        (self.0 >> 64) as u64
    }

    /// Both halves folded so that every byte reaches the top bits [`table_slot`] takes.
    fn slot(self, mask: usize) -> usize {
        table_slot(
            self.lo() ^ self.hi().wrapping_mul(0xD6E8_FEB8_6659_FD93),
            mask,
        )
    }
}

/// Up to 8 bytes as a little-endian integer (the missing high bytes 0), from at most two
/// overlapping loads: both carry the same bytes where they overlap.
fn little_endian(b: &[u8]) -> u64 {
    let n = b.len();
    debug_assert!(n <= 8, "{n} bytes");
    let word = |at: usize, len: usize| -> u64 {
        match len {
            4 => u64::from(u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])),
            2 => u64::from(u16::from_le_bytes([b[at], b[at + 1]])),
            _ => u64::from(b[at]),
        }
    };
    match n {
        0 => 0,
        8.. => u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        4..=7 => word(0, 4) | word(n - 4, 4) << (8 * (n - 4)),
        2..=3 => word(0, 2) | word(n - 2, 2) << (8 * (n - 2)),
        _ => word(0, 1),
    }
}

/// Ids a slot holds; longer results stay in the general cache.
pub const MAX_IDS: usize = 4;
/// Marks the unused id places; token ids are bounded far below it (`MAX_TOKEN_ID`).
const NO_ID: u32 = u32::MAX;
/// The upper key word of a free slot (no key has it: its length byte is 0).
const FREE: u64 = 0;
/// The upper key word of a slot a writer has claimed and not yet published (no key has it:
/// its length byte is 255).
const BUSY: u64 = u64::MAX;
/// Slots: 4 MiB per model, room for 98,304 words (the 10k bench corpus has about 60,000
/// distinct short words; 8 MiB was no faster in a comparison by hand). Allocated whole when
/// the model first stores a word: a table that grows would have to be copied while other
/// threads read it.
const SLOTS: usize = 1 << 17;

fn full(used: usize, slots: usize) -> bool {
    used * 4 > slots * 3
}

#[derive(Default)]
#[repr(C, align(32))]
struct Slot {
    hi: AtomicU64,
    lo: AtomicU64,
    /// Ids 0 and 1, then 2 and 3, each pair low id first.
    ids: [AtomicU64; 2],
}

/// The ids of one stored word.
pub struct Ids([u32; MAX_IDS]);

impl Ids {
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().copied().take_while(|&id| id != NO_ID)
    }
}

pub struct ShortWords {
    slots: Box<[Slot]>,
    used: AtomicUsize,
}

impl Default for ShortWords {
    fn default() -> Self {
        ShortWords::with_slots(SLOTS)
    }
}

impl ShortWords {
    /// A table of `slots` (a power of two) free slots.
    fn with_slots(slots: usize) -> ShortWords {
        ShortWords {
            slots: (0..slots).map(|_| Slot::default()).collect(),
            used: AtomicUsize::new(0),
        }
    }

    /// Asks the CPU to bring `key`'s first slot into the cache, so that a lookup a few words
    /// later does not wait for it: on a corpus most lookups of a word the table has are a
    /// cache miss, and a word's ids are needed only once earlier words are done.
    pub fn prefetch(&self, key: Key) {
        crate::tokenize::prefetch(&self.slots[key.slot(self.slots.len() - 1)]);
    }

    /// The ids stored for `key`, if any.
    pub fn get(&self, key: Key) -> Option<Ids> {
        let mask = self.slots.len() - 1;
        let mut at = key.slot(mask);
        loop {
            let slot = &self.slots[at];
            let hi = slot.hi.load(Ordering::Acquire);
            if hi == key.hi() && slot.lo.load(Ordering::Relaxed) == key.lo() {
                let pair = |i: usize| slot.ids[i].load(Ordering::Relaxed);
                let (a, b) = (pair(0), pair(1));
                return Some(Ids([
                    a as u32,
                    (a >> 32) as u32,
                    b as u32,
                    (b >> 32) as u32,
                ]));
            }
            if hi == FREE || hi == BUSY {
                return None;
            }
            at = (at + 1) & mask;
        }
    }

    /// Keep `ids` for `key` when they fit in a slot (1 to [`MAX_IDS`] ids, none of them
    /// `NO_ID`) and the table has room: whether the table has them now. A key stored already
    /// keeps its ids: they depend only on the word. Of two threads storing the same new word,
    /// the second meets the first's claimed or published slot on its way, so a word is stored
    /// once.
    pub fn insert(&self, key: Key, ids: &[u32]) -> bool {
        if ids.is_empty() || ids.len() > MAX_IDS || ids.contains(&NO_ID) {
            return false;
        }
        if full(self.used.load(Ordering::Relaxed) + 1, self.slots.len()) {
            return false;
        }
        let mut all = [NO_ID; MAX_IDS];
        all[..ids.len()].copy_from_slice(ids);
        let pair = |i: usize| u64::from(all[2 * i]) | u64::from(all[2 * i + 1]) << 32;
        let mask = self.slots.len() - 1;
        let mut at = key.slot(mask);
        loop {
            let slot = &self.slots[at];
            match slot
                .hi
                .compare_exchange(FREE, BUSY, Ordering::Acquire, Ordering::Acquire)
            {
                Ok(_) => {
                    slot.lo.store(key.lo(), Ordering::Relaxed);
                    slot.ids[0].store(pair(0), Ordering::Relaxed);
                    slot.ids[1].store(pair(1), Ordering::Relaxed);
                    slot.hi.store(key.hi(), Ordering::Release);
                    self.used.fetch_add(1, Ordering::Relaxed);
                    return true;
                }
                // Being written: whether it is this word is not known yet. Nothing is stored
                // past a claimed slot, so that a reader can stop at one.
                Err(BUSY) => return false,
                Err(hi) if hi == key.hi() && slot.lo.load(Ordering::Relaxed) == key.lo() => {
                    return true;
                }
                Err(_) => at = (at + 1) & mask,
            }
        }
    }

    /// How far each stored key sits from its own slot, the largest.
    #[cfg(test)]
    fn longest_displacement(&self) -> usize {
        let mask = self.slots.len() - 1;
        (0..self.slots.len())
            .filter_map(|at| {
                let s = &self.slots[at];
                let hi = s.hi.load(Ordering::Relaxed);
                (hi != FREE).then(|| {
                    let key = Key(u128::from(s.lo.load(Ordering::Relaxed)) | u128::from(hi) << 64);
                    at.wrapping_sub(key.slot(mask)) & mask
                })
            })
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(t: &ShortWords, w: &str) -> Option<Vec<u32>> {
        t.get(Key::new(w)?).map(|ids| ids.iter().collect())
    }

    #[test]
    fn keys_are_words_of_one_to_fifteen_bytes() {
        assert!(Key::new("").is_none());
        assert!(Key::new("0123456789abcdef").is_none());
        assert!(Key::new("0123456789abcde").is_some());
        assert!(Key::new("a") != Key::new("a\0"));
        assert!(Key::new("ab") != Key::new("ba"));
        // The upper word of a key is never a free or a claimed slot's.
        let top = Key::new("0123456789abcde").unwrap().hi();
        assert!(
            ![FREE, BUSY].contains(&top) && ![FREE, BUSY].contains(&Key::new("a").unwrap().hi())
        );
    }

    #[test]
    fn a_key_is_the_word_zero_padded_with_its_length_last() {
        let text = "0123456789abcdé";
        for n in 1..=Key::MAX_LEN {
            for start in 0..=text.len() - n {
                let Some(word) = text.get(start..start + n) else {
                    continue;
                };
                let mut buf = [0u8; 16];
                buf[..n].copy_from_slice(word.as_bytes());
                buf[15] = n as u8;
                let key = Key::new(word);
                assert_eq!(key.map(|k| k.0), Some(u128::from_le_bytes(buf)), "{word:?}");
                let (bytes, len) = key.unwrap().bytes();
                assert_eq!(&bytes[..len], word.as_bytes());
            }
        }
    }

    #[test]
    fn stored_ids_come_back_and_others_do_not() {
        let t = ShortWords::with_slots(1 << 12);
        assert_eq!(get(&t, "hello"), None);
        assert!(t.insert(Key::new("hello").unwrap(), &[7]));
        assert!(t.insert(Key::new(" world").unwrap(), &[1, 2, 3, 4]));
        assert!(!t.insert(Key::new("five").unwrap(), &[1, 2, 3, 4, 5]));
        assert!(!t.insert(Key::new("none").unwrap(), &[]));
        assert_eq!(get(&t, "hello"), Some(vec![7]));
        assert_eq!(get(&t, " world"), Some(vec![1, 2, 3, 4]));
        assert_eq!(get(&t, "five"), None);
        assert_eq!(get(&t, "none"), None);
        assert_eq!(get(&t, "hell"), None);
        // An id that would read as an unused place is not stored.
        assert!(!t.insert(Key::new("max").unwrap(), &[1, NO_ID]));
        assert_eq!(get(&t, "max"), None);
        // A key stored again keeps its slot and its ids.
        assert!(t.insert(Key::new("hello").unwrap(), &[7]));
        assert_eq!(get(&t, "hello"), Some(vec![7]));
        assert_eq!(t.used.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn a_claimed_slot_reads_as_not_stored_and_is_not_passed_by_writers() {
        let t = ShortWords::with_slots(1 << 12);
        let key = Key::new("claimed").unwrap();
        let mask = t.slots.len() - 1;
        t.slots[key.slot(mask)].hi.store(BUSY, Ordering::Relaxed);
        assert!(!t.insert(key, &[5]));
        assert_eq!(get(&t, "claimed"), None);
        assert_eq!(t.used.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn words_that_differ_late_or_in_length_spread_over_the_table() {
        // Byte-level words as the tokenizer sees them ("Ġ" is a space): same leading bytes,
        // differing only in the 7th and 8th bytes or in length. A slot taken from the
        // product's middle bits put the 676 of the first kind in 4 slots.
        let t = ShortWords::with_slots(1 << 12);
        let mut n = 0;
        for a in b'a'..=b'z' {
            for b in b'a'..=b'z' {
                let w = format!("\u{120}play{}{}", a as char, b as char);
                t.insert(Key::new(&w).unwrap(), &[n]);
                t.insert(Key::new(&w[..w.len() - 1]).unwrap(), &[n]);
                n += 1;
            }
        }
        assert!(
            t.longest_displacement() <= 8,
            "{}",
            t.longest_displacement()
        );
    }

    #[test]
    fn a_table_three_quarters_full_stores_nothing_more() {
        let t = ShortWords::with_slots(1 << 12);
        let word = |i: usize| format!("w{i}");
        let n = (1 << 12) * 3 / 4;
        for i in 0..n {
            assert!(t.insert(Key::new(&word(i)).unwrap(), &[i as u32, 1]));
        }
        assert!((0..n).all(|i| get(&t, &word(i)) == Some(vec![i as u32, 1])));
        assert!(!t.insert(Key::new("over").unwrap(), &[9]));
        assert_eq!(get(&t, "over"), None);
        assert_eq!(t.used.load(Ordering::Relaxed), n);
    }

    #[test]
    fn threads_storing_the_same_words_read_back_only_what_was_stored() {
        let t = ShortWords::with_slots(1 << 14);
        let ids = |i: u32| [i, i + 1, i + 2, i + 3];
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for i in 0..6000u32 {
                        let key = Key::new(&format!("w{i}")).unwrap();
                        if let Some(found) = t.get(key) {
                            assert_eq!(found.iter().collect::<Vec<_>>(), ids(i));
                        } else {
                            t.insert(key, &ids(i));
                        }
                    }
                });
            }
        });
        // Every word was stored (a writer that met a claimed slot left the word to the
        // thread that claimed it), with its own ids, and once.
        for i in 0..6000u32 {
            let got = get(&t, &format!("w{i}"));
            assert!(got == Some(ids(i).to_vec()), "w{i}: {got:?}");
        }
        assert_eq!(t.used.load(Ordering::Relaxed), 6000);
    }
}
