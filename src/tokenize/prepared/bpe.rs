//! The BPE model of a prepared tokenizer: its merge loop, and the caches that spare it.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::path::{Path, PathBuf};

use tokenizers::models::bpe::BpeTrainer;
use tokenizers::{Model, Token};

use super::short_words::{self, Key, ShortWords};
use super::{EMPTY32, EMPTY64, merge_key, table_slot};
use crate::tokenize::TokenizeError;
use crate::tokenize::per_model::PerModel;
use crate::tokenize::word_ids::{PieceIds, WordIds, byte_level};

/// The BPE model of a prepared tokenizer.
pub struct FastBpe {
    pub(super) blob: Vec<u8>,
    /// Start of token `id` in `blob`; `tok_len[id] == EMPTY32` when the id is unused.
    pub(super) tok_start: Vec<u32>,
    pub(super) tok_len: Vec<u32>,
    pub(super) vocab_size: usize,
    /// Open addressing: slot -> id, EMPTY32 when free; keyed by xxh3 of the token text.
    pub(super) vocab_table: Vec<u32>,
    /// Open addressing: slot -> (left id << 32 | right id, rank << 32 | merged id), the key
    /// EMPTY64 when free. Key and value share a slot (the file keeps them in two tables):
    /// merging a word's first sight is a chain of lookups that each miss the cache, and a
    /// hit then costs one miss, not two.
    pub(super) merges: Vec<(u64, u64)>,
    pub(super) unk_token: Option<String>,
    pub(super) fuse_unk: bool,
    pub(super) byte_fallback: bool,
    pub(super) ignore_merges: bool,
    /// Id of the one-character token of each character below [`CHAR_TABLE`] (EMPTY32: none).
    pub(super) char_ids: Box<[u32]>,
    /// Distinguishes this model's entries in the per-thread word cache (an address could be
    /// reused by a later model).
    pub(super) cache_key: u64,
    /// The ids of this model's short words, for every thread; made at the first word.
    pub(super) short: std::sync::OnceLock<ShortWords>,
}

/// The BPE of a word depends only on the model and the word, and natural text repeats its
/// words, so each thread keeps the merges of the words it has seen (as HF's BPE model does
/// with its own cache). Pieces of up to 256 bytes are kept because a conversation tokenizes
/// each reply twice (alone, and inside the next prompt) and a CJK sentence is one piece of 6
/// bytes per character. Bounded by what the entries hold (cleared past 24 MiB per thread),
/// so hostile text of long distinct words cannot grow it. [`FastBpe::word_ids`] keeps the
/// words named by up to 15 bytes (the raw piece, not its byte-level form: a space is one
/// byte, not two) and of up to 4 ids in a table of its own ([`ShortWords`], 4 MiB per model,
/// shared by the threads).
const WORD_CACHE_BYTES: usize = 24 << 20;
const WORD_CACHE_MAX_LEN: usize = 256;
/// Words of up to this many symbols are merged by [`FastBpe::merge_small`].
const SMALL_WORD: usize = 64;
/// Characters below this have their single-character token looked up in a table: the
/// byte-level alphabet lies below U+0144.
pub(super) const CHAR_TABLE: u32 = 0x200;
/// Map overhead per entry, roughly: two boxed slices and a hash slot.
const WORD_CACHE_ENTRY_OVERHEAD: usize = 48;

type Merged = Box<[Sym]>;
/// A merged symbol: its id and the byte range of the word it covers.
type Sym = (u32, u32, u32);

/// One thread's cache of one model's words (the short ones are in the model's
/// [`ShortWords`]).
#[derive(Default)]
pub struct ModelWords {
    words: rustc_hash::FxHashMap<Box<str>, Merged>,
    bytes: usize,
}

thread_local! {
    static WORD_CACHE: std::cell::RefCell<PerModel<ModelWords>> =
        const { std::cell::RefCell::new(PerModel::new()) };
}

impl FastBpe {
    pub(super) fn token(&self, id: u32) -> Option<&str> {
        let i = id as usize;
        let len = *self.tok_len.get(i)?;
        if len == EMPTY32 {
            return None;
        }
        let start = self.tok_start[i] as usize;
        std::str::from_utf8(&self.blob[start..start + len as usize]).ok()
    }

    pub(super) fn lookup(&self, text: &str) -> Option<u32> {
        let mask = self.vocab_table.len() - 1;
        let mut slot = xxhash_rust::xxh3::xxh3_64(text.as_bytes()) as usize & mask;
        loop {
            let id = self.vocab_table[slot];
            if id == EMPTY32 {
                return None;
            }
            if self.token(id) == Some(text) {
                return Some(id);
            }
            slot = (slot + 1) & mask;
        }
    }

    /// Prefetches the slot where the merge of `left` and `right` would be.
    fn prefetch_merge(&self, left: u32, right: u32) {
        let key = merge_key(left, right);
        crate::tokenize::prefetch(&self.merges[table_slot(key, self.merges.len() - 1)]);
    }

    pub(super) fn merge(&self, left: u32, right: u32) -> Option<(u32, u32)> {
        let key = merge_key(left, right);
        let mask = self.merges.len() - 1;
        let mut slot = table_slot(key, mask);
        loop {
            let (k, v) = self.merges[slot];
            if k == EMPTY64 {
                return None;
            }
            if k == key {
                return Some(((v >> 32) as u32, v as u32));
            }
            slot = (slot + 1) & mask;
        }
    }

    /// The same symbol construction and merge order as the crate's `BPE::merge_word` and
    /// `Word::merge_all`: lowest rank first, then leftmost; stale queue entries are skipped.
    ///
    /// Symbols, links and queue entries are 32-bit (a long word costs about 36 bytes a
    /// symbol), so a word is at most 4 GiB; kvaudit's input limits keep words far below.
    fn merge_word(&self, w: &str) -> tokenizers::Result<Vec<Sym>> {
        let Ok(len) = u32::try_from(w.len()) else {
            return Err(format!("a word of {} bytes is too long to merge", w.len()).into());
        };
        // (id, byte start, byte end) per symbol.
        let mut syms: Vec<Sym> = Vec::with_capacity(w.len());
        let mut unk: Option<Sym> = None;
        let mut chars = w.char_indices().map(|(i, c)| (i as u32, c)).peekable();
        let mut buf = [0u8; 4];
        while let Some((i, c)) = chars.next() {
            let end = chars.peek().map_or(len, |(e, _)| *e);
            let s: &str = c.encode_utf8(&mut buf);
            let id = match self.char_ids.get(c as usize) {
                Some(&id) => (id != EMPTY32).then_some(id),
                None => self.lookup(s),
            };
            if let Some(id) = id {
                if let Some(u) = unk.take() {
                    syms.push(u);
                }
                syms.push((id, i, end));
                continue;
            }
            if self.byte_fallback {
                let ids: Option<Vec<u32>> = s
                    .bytes()
                    .map(|b| self.lookup(&format!("<{b:#04X}>")))
                    .collect();
                if let Some(ids) = ids {
                    for (k, id) in ids.into_iter().enumerate() {
                        syms.push((id, i + k as u32, i + k as u32 + 1));
                    }
                    continue;
                }
            }
            if let Some(unk_token) = &self.unk_token {
                let unk_id = || {
                    self.lookup(unk_token).ok_or_else(|| -> tokenizers::Error {
                        format!("unk token {unk_token:?} is not in the vocabulary").into()
                    })
                };
                unk = match unk {
                    Some((uid, s0, _)) if self.fuse_unk => Some((uid, s0, end)),
                    Some(prev) => {
                        syms.push(prev);
                        Some((unk_id()?, i, end))
                    }
                    None => Some((unk_id()?, i, end)),
                };
            }
        }
        if let Some(u) = unk {
            syms.push(u);
        }
        let n = syms.len();
        if n <= SMALL_WORD {
            return Ok(self.merge_small(syms));
        }
        // Links by index; NONE ends the list. Symbol counts fit in u32 as byte offsets do.
        const NONE: u32 = u32::MAX;
        let last = n as u32 - 1;
        let mut prev: Vec<u32> = (0..n as u32)
            .map(|i| i.checked_sub(1).unwrap_or(NONE))
            .collect();
        let mut next: Vec<u32> = (0..n as u32)
            .map(|i| if i < last { i + 1 } else { NONE })
            .collect();
        let mut alive = vec![true; n];
        // (rank, position, new id): lowest rank first, then leftmost, as the crate's queue.
        let mut queue: BinaryHeap<Reverse<(u32, u32, u32)>> = BinaryHeap::with_capacity(n);
        for i in 0..n - 1 {
            if let Some((rank, new_id)) = self.merge(syms[i].0, syms[i + 1].0) {
                queue.push(Reverse((rank, i as u32, new_id)));
            }
        }
        while let Some(Reverse((_, at, new_id))) = queue.pop() {
            let pos = at as usize;
            if !alive[pos] || next[pos] == NONE {
                continue;
            }
            let right = next[pos] as usize;
            match self.merge(syms[pos].0, syms[right].0) {
                Some((_, id)) if id == new_id => {}
                _ => continue,
            }
            syms[pos] = (new_id, syms[pos].1, syms[right].2);
            alive[right] = false;
            next[pos] = next[right];
            if next[right] != NONE {
                prev[next[right] as usize] = at;
            }
            if prev[pos] != NONE {
                let p = prev[pos];
                if let Some((rank, id)) = self.merge(syms[p as usize].0, syms[pos].0) {
                    queue.push(Reverse((rank, p, id)));
                }
            }
            if next[pos] != NONE {
                let nx = next[pos] as usize;
                if let Some((rank, id)) = self.merge(syms[pos].0, syms[nx].0) {
                    queue.push(Reverse((rank, at, id)));
                }
            }
        }
        drop((prev, next, queue));
        Ok(syms
            .into_iter()
            .zip(alive)
            .filter(|(_, a)| *a)
            .map(|(s, _)| s)
            .collect())
    }
}

impl FastBpe {
    /// [`merge_word`](Self::merge_word) for a word of few symbols: the same order (lowest
    /// rank first, then leftmost, which is what the queue pops, since a stale entry can never
    /// pass its check), found by scanning a rank per adjacent pair on the stack instead of
    /// allocating a queue and link arrays for every word.
    fn merge_small(&self, mut syms: Vec<Sym>) -> Vec<Sym> {
        let mut ranks = [(u32::MAX, 0u32); SMALL_WORD];
        let pair = |syms: &[Sym], i: usize| {
            self.merge(syms[i].0, syms[i + 1].0)
                .unwrap_or((u32::MAX, 0))
        };
        // Each merge needs the ranks of the pairs it forms before the next can be chosen, so
        // a word's lookups are a chain of cache misses. The pairs a merge would form are
        // known as soon as the merge is: they are prefetched then, and are mostly in the
        // cache by the time that merge is made.
        let ahead = |syms: &[Sym], i: usize, (rank, id): (u32, u32)| {
            if rank == u32::MAX {
                return;
            }
            if i > 0 {
                self.prefetch_merge(syms[i - 1].0, id);
            }
            if let Some(right) = syms.get(i + 2) {
                self.prefetch_merge(id, right.0);
            }
        };
        let pairs = syms.len().saturating_sub(1);
        for w in syms.windows(2) {
            self.prefetch_merge(w[0].0, w[1].0);
        }
        for (i, rank) in ranks.iter_mut().enumerate().take(pairs) {
            *rank = pair(&syms, i);
            ahead(&syms, i, *rank);
        }
        loop {
            let len = syms.len();
            let mut at = 0;
            let mut best = u32::MAX;
            for (i, &(rank, _)) in ranks[..len.saturating_sub(1)].iter().enumerate() {
                if rank < best {
                    best = rank;
                    at = i;
                }
            }
            if best == u32::MAX {
                return syms;
            }
            syms[at] = (ranks[at].1, syms[at].1, syms[at + 1].2);
            syms.remove(at + 1);
            // Pair i of the shorter word is pair i + 1 of the longer one, past the merge.
            if at + 2 < len - 1 {
                ranks.copy_within(at + 2..len - 1, at + 1);
            }
            if at + 1 < len - 1 {
                ranks[at] = pair(&syms, at);
            }
            if at > 0 {
                ranks[at - 1] = pair(&syms, at - 1);
            }
            if at + 1 < len - 1 {
                ahead(&syms, at, ranks[at]);
            }
            if at > 0 {
                ahead(&syms, at - 1, ranks[at - 1]);
            }
        }
    }

    /// The ids [`Model::tokenize`] gives for the word `word()` makes, appended to `out`,
    /// without building a token string per id; the same word cache. `name` identifies the
    /// word (one name, one word: the caller's raw text before a one-to-one mapping), so a
    /// short word is looked up by its name and the word is made only when it is not found.
    pub fn word_ids<'w>(
        &self,
        name: &str,
        word: impl FnOnce() -> &'w str,
        out: &mut Vec<u32>,
    ) -> tokenizers::Result<()> {
        if name.is_empty() {
            return Ok(());
        }
        self.with_words(|words| self.short_or_merged(words, Key::new(name), word, out))
    }

    /// `f` with this thread's cache of this model's words, borrowed once for all the words
    /// `f` looks up (a lookup per word through the thread-local was a fifth of its cost).
    /// `f` must not tokenize with this model any other way meanwhile: the borrow is
    /// exclusive, and a second one would panic.
    pub fn with_words<T>(&self, f: impl FnOnce(&mut ModelWords) -> T) -> T {
        WORD_CACHE.with(|c| f(c.borrow_mut().entry(self.cache_key)))
    }

    /// [`word_ids`](Self::word_ids) with the cache at hand, of a word named by `short` when
    /// it is short. A word's ids do not depend on the path that found them, so a short word
    /// is looked up first, even before the vocabulary of an `ignore_merges` model (whose probe
    /// reads three tables).
    fn short_or_merged<'w>(
        &self,
        words: &mut ModelWords,
        short: Option<Key>,
        word: impl FnOnce() -> &'w str,
        out: &mut Vec<u32>,
    ) -> tokenizers::Result<()> {
        if let Some(ids) = short.and_then(|key| self.short_words().get(key)) {
            out.extend(ids.iter());
            return Ok(());
        }
        self.unstored_word_ids(words, short, word(), out)
    }

    fn short_words(&self) -> &ShortWords {
        self.short.get_or_init(ShortWords::default)
    }

    /// The ids of a word the short-word table does not have (`short`: its key there, when it
    /// is short), merged or found in the thread's cache, and kept.
    fn unstored_word_ids(
        &self,
        words: &mut ModelWords,
        short: Option<Key>,
        word: &str,
        out: &mut Vec<u32>,
    ) -> tokenizers::Result<()> {
        let table = self.short_words();
        if self.ignore_merges
            && let Some(id) = self.lookup(word)
        {
            out.push(id);
            if let Some(key) = short {
                table.insert(key, &[id]);
            }
            return Ok(());
        }
        if word.len() > WORD_CACHE_MAX_LEN {
            out.extend(self.merge_word(word)?.into_iter().map(|(id, _, _)| id));
            return Ok(());
        }
        if let Some(m) = words.words.get(word) {
            out.extend(m.iter().map(|&(id, _, _)| id));
            return Ok(());
        }
        let symbols = self.merge_word(word)?;
        let start = out.len();
        out.extend(symbols.iter().map(|&(id, _, _)| id));
        // A short word the shared table has no room for is kept by the thread (and only then
        // are its merges copied into a cache entry).
        let stored = short.is_some_and(|key| {
            symbols.len() <= short_words::MAX_IDS && table.insert(key, &out[start..])
        });
        if !stored {
            words.remember(word, symbols.into_boxed_slice());
        }
        Ok(())
    }

    /// [`word_ids`](Self::word_ids) of every piece `f` hands over, all appended to `out`
    /// in order when this returns Ok (on an error, `out` holds the ids of the pieces before
    /// the failing one). A short word's slot is prefetched when it arrives and read
    /// [`IN_FLIGHT`] words later, so that the cache misses of a run of words overlap instead
    /// of coming one after another.
    pub fn pieces_in_order(
        &self,
        out: &mut Vec<u32>,
        f: &mut dyn FnMut(&mut PieceIds) -> Result<(), TokenizeError>,
    ) -> Result<(), TokenizeError> {
        let table = self.short_words();
        self.with_words(|words| {
            let mut scratch = String::new();
            let mut waiting = InFlight::default();
            // A queued word is named by its key, which holds its bytes.
            let settle =
                |key: Key, words: &mut ModelWords, scratch: &mut String, out: &mut Vec<u32>| {
                    let word = move || {
                        // Moved out of the closure, so that the word may borrow it.
                        let scratch = scratch;
                        let (raw, len) = key.bytes();
                        byte_level(&raw[..len], scratch)
                    };
                    self.short_or_merged(words, Some(key), word, out)
                        .map_err(TokenizeError::encode)
                };
            f(&mut |piece| {
                if piece.is_empty() {
                    return Ok(());
                }
                match Key::new(piece) {
                    Some(key) => {
                        table.prefetch(key);
                        if let Some(first) = waiting.push(key) {
                            settle(first, words, &mut scratch, out)?;
                        }
                    }
                    None => {
                        while let Some(first) = waiting.pop() {
                            settle(first, words, &mut scratch, out)?;
                        }
                        let word = byte_level(piece.as_bytes(), &mut scratch);
                        self.unstored_word_ids(words, None, word, out)
                            .map_err(TokenizeError::encode)?;
                    }
                }
                Ok(())
            })?;
            while let Some(first) = waiting.pop() {
                settle(first, words, &mut scratch, out)?;
            }
            Ok(())
        })
    }
}

impl WordIds for FastBpe {
    fn piece_ids(
        &self,
        piece: &str,
        scratch: &mut String,
        out: &mut Vec<u32>,
    ) -> Result<(), TokenizeError> {
        // The mapping is one to one, so the raw piece names the word: a word the model has
        // seen is found without mapping it.
        FastBpe::word_ids(
            self,
            piece,
            move || byte_level(piece.as_bytes(), scratch),
            out,
        )
        .map_err(TokenizeError::encode)
    }

    fn with_pieces(
        &self,
        out: &mut Vec<u32>,
        f: &mut dyn FnMut(&mut PieceIds) -> Result<(), TokenizeError>,
    ) -> Result<(), TokenizeError> {
        self.pieces_in_order(out, f)
    }
}

/// Short words whose slots are being fetched, oldest first.
const IN_FLIGHT: usize = 8;

#[derive(Default)]
struct InFlight {
    keys: [Option<Key>; IN_FLIGHT],
    head: usize,
    len: usize,
}

impl InFlight {
    /// Queues `key`; the oldest key when the queue was full.
    fn push(&mut self, key: Key) -> Option<Key> {
        let first = (self.len == IN_FLIGHT).then(|| self.pop()).flatten();
        self.keys[(self.head + self.len) % IN_FLIGHT] = Some(key);
        self.len += 1;
        first
    }

    fn pop(&mut self) -> Option<Key> {
        let key = self.keys[self.head].take()?;
        self.head = (self.head + 1) % IN_FLIGHT;
        self.len -= 1;
        Some(key)
    }
}

impl ModelWords {
    fn remember(&mut self, word: &str, merged: Merged) {
        let size = word.len() + std::mem::size_of_val(&*merged) + WORD_CACHE_ENTRY_OVERHEAD;
        if self.bytes + size > WORD_CACHE_BYTES {
            self.words.clear();
            self.bytes = 0;
        }
        self.bytes += size;
        self.words.insert(Box::from(word), merged);
    }
}

impl Model for FastBpe {
    type Trainer = BpeTrainer;

    fn tokenize(&self, sequence: &str) -> tokenizers::Result<Vec<Token>> {
        if sequence.is_empty() {
            return Ok(Vec::new());
        }
        if self.ignore_merges
            && let Some(id) = self.lookup(sequence)
        {
            return Ok(vec![Token::new(
                id,
                sequence.to_string(),
                (0, sequence.len()),
            )]);
        }
        let token = |&(id, s, e): &(u32, u32, u32)| {
            Token::new(
                id,
                self.token(id).unwrap_or_default().to_string(),
                (s as usize, e as usize),
            )
        };
        if sequence.len() > WORD_CACHE_MAX_LEN {
            return Ok(self.merge_word(sequence)?.iter().map(token).collect());
        }
        let cached = self.with_words(|w| {
            w.words
                .get(sequence)
                .map(|m| m.iter().map(token).collect::<Vec<_>>())
        });
        if let Some(tokens) = cached {
            return Ok(tokens);
        }
        let merged: Merged = self.merge_word(sequence)?.into_boxed_slice();
        let tokens = merged.iter().map(token).collect();
        self.with_words(|w| w.remember(sequence, merged));
        Ok(tokens)
    }

    fn token_to_id(&self, token: &str) -> Option<u32> {
        self.lookup(token)
    }

    fn id_to_token(&self, id: u32) -> Option<String> {
        self.token(id).map(str::to_string)
    }

    fn get_vocab(&self) -> HashMap<String, u32> {
        (0..self.tok_len.len() as u32)
            .filter_map(|id| self.token(id).map(|t| (t.to_string(), id)))
            .collect()
    }

    fn get_vocab_size(&self) -> usize {
        self.vocab_size
    }

    fn save(&self, _folder: &Path, _prefix: Option<&str>) -> tokenizers::Result<Vec<PathBuf>> {
        Err("a prepared tokenizer cannot be saved".into())
    }

    fn get_trainer(&self) -> BpeTrainer {
        BpeTrainer::default()
    }
}
