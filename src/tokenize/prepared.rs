//! A prepared form of byte-level BPE tokenizers that loads in milliseconds.
//!
//! Building the `tokenizers` crate's BPE from tokenizer.json (JSON parse, ~150k vocabulary
//! strings, ~150k merges into hash maps) takes 0.3–1 s, which dominates a kvaudit run. The
//! prepared file holds the vocabulary as one string blob and both lookup tables as ready-made
//! open-addressing arrays; everything else (normalizer, pre-tokenizer, added tokens, decoder)
//! is still built by the `tokenizers` crate from the original JSON, so only the merge loop is
//! ours. A prepared file is written only after it encodes a probe corpus to exactly the ids of
//! the crate's own tokenizer, and it is keyed by the xxh3-128 of its source.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::path::{Path, PathBuf};

use rustc_hash::FxHashMap;
use serde_json::Value as Json;
use tokenizers::decoders::DecoderWrapper;
use tokenizers::models::bpe::BpeTrainer;
use tokenizers::normalizers::NormalizerWrapper;
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::processors::PostProcessorWrapper;
use tokenizers::{AddedToken, Model, Token, TokenizerImpl};

use super::per_model::PerModel;
use super::scan;
use super::short_words::{self, Key, ShortWords};

// v04: the body checksum is seeded with the source key, and the offsets of the vocabulary and
// merges in tokenizer.json are kept for the spot check. v05: merge slots come from
// [`table_slot`] (a v04 table, probed with it, would miss its merges). v06: each merge slot's
// key and value are stored together, as the table in memory holds them. v07: the merge table
// has 1.5x the merges' slots rounded up to a power of two, not 2x (at most two thirds full;
// the loader accepts up to three quarters); half the size for Qwen3-8B and Llama 3.1.
const MAGIC: &[u8; 8] = b"KVTOKv08";
const EMPTY32: u32 = u32::MAX;
const EMPTY64: u64 = u64::MAX;

pub type FastTokenizer = TokenizerImpl<
    FastBpe,
    NormalizerWrapper,
    PreTokenizerWrapper,
    PostProcessorWrapper,
    DecoderWrapper,
>;

/// The BPE model of a prepared tokenizer.
pub struct FastBpe {
    blob: Vec<u8>,
    /// Start of token `id` in `blob`; `tok_len[id] == EMPTY32` when the id is unused.
    tok_start: Vec<u32>,
    tok_len: Vec<u32>,
    vocab_size: usize,
    /// Open addressing: slot -> id, EMPTY32 when free; keyed by xxh3 of the token text.
    vocab_table: Vec<u32>,
    /// Open addressing: slot -> (left id << 32 | right id, rank << 32 | merged id), the key
    /// EMPTY64 when free. Key and value share a slot (the file keeps them in two tables):
    /// merging a word's first sight is a chain of lookups that each miss the cache, and a
    /// hit then costs one miss, not two.
    merges: Vec<(u64, u64)>,
    unk_token: Option<String>,
    fuse_unk: bool,
    byte_fallback: bool,
    ignore_merges: bool,
    /// Id of the one-character token of each character below [`CHAR_TABLE`] (EMPTY32: none).
    char_ids: Box<[u32]>,
    /// Distinguishes this model's entries in the per-thread word cache (an address could be
    /// reused by a later model).
    cache_key: u64,
    /// The ids of this model's short words, for every thread; made at the first word.
    short: std::sync::OnceLock<ShortWords>,
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
const CHAR_TABLE: u32 = 0x200;
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

/// The merge table's key of a pair of ids.
fn merge_key(left: u32, right: u32) -> u64 {
    u64::from(left) << 32 | u64::from(right)
}

/// The slot of `x` in an open-addressed table of `mask + 1` (a power of two) slots: the top
/// bits of `x` times 2^64 / φ. A product's low bits depend only on the low bits of `x`; taking
/// bits 17 and up, as v04 did, let the merge slot see the right id and 4 bits of the left one,
/// and a hit on Qwen3's merges took 6.7 probes on average (1.2 now).
pub(super) fn table_slot(x: u64, mask: usize) -> usize {
    // The mask is 2^bits - 1: its trailing ones are a bit scan, where `count_ones` is a
    // dozen instructions on a CPU without popcnt (the x86-64 baseline this is built for).
    let bits = mask.trailing_ones();
    if bits == 0 {
        return 0;
    }
    (x.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - bits)) as usize & mask
}

impl FastBpe {
    fn token(&self, id: u32) -> Option<&str> {
        let i = id as usize;
        let len = *self.tok_len.get(i)?;
        if len == EMPTY32 {
            return None;
        }
        let start = self.tok_start[i] as usize;
        std::str::from_utf8(&self.blob[start..start + len as usize]).ok()
    }

    fn lookup(&self, text: &str) -> Option<u32> {
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
        super::prefetch(&self.merges[table_slot(key, self.merges.len() - 1)]);
    }

    fn merge(&self, left: u32, right: u32) -> Option<(u32, u32)> {
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
        f: &mut dyn FnMut(&mut super::direct::PieceIds) -> Result<(), String>,
    ) -> Result<(), String> {
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
                        super::direct::byte_level(&raw[..len], scratch)
                    };
                    self.short_or_merged(words, Some(key), word, out)
                        .map_err(|e| e.to_string())
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
                        let word = super::direct::byte_level(piece.as_bytes(), &mut scratch);
                        self.unstored_word_ids(words, None, word, out)
                            .map_err(|e| e.to_string())?;
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

/// Why a tokenizer.json cannot take the fast path (it is then loaded the ordinary way).
fn unsupported(model: &Json) -> Option<String> {
    if model.get("type").and_then(Json::as_str) != Some("BPE") {
        return Some("not a BPE model".into());
    }
    if model
        .get("dropout")
        .and_then(Json::as_f64)
        .is_some_and(|d| d != 0.0)
    {
        return Some("BPE dropout".into());
    }
    for k in ["continuing_subword_prefix", "end_of_word_suffix"] {
        // An empty prefix or suffix changes nothing (the crate formats it in as "").
        if model
            .get(k)
            .is_some_and(|v| !v.is_null() && v.as_str() != Some(""))
        {
            return Some(format!("BPE {k}"));
        }
    }
    None
}

/// Token ids must be below 2^24. The largest real vocabularies have ~262k entries (Gemma 3:
/// 262,144), so this leaves 64x headroom, while an id-indexed table stays under 64 MiB per u32
/// column: a hostile id like 4294967295 would otherwise size a 16 GiB table before any other
/// check could refuse the file.
pub const MAX_TOKEN_ID: u64 = 1 << 24;

/// Refuse vocabulary ids no real tokenizer has, before anything is sized by an id. The
/// `id` of added tokens is not checked: the crate ignores it (an added token gets its
/// vocabulary id, or the next free one), and so does `assemble`.
pub fn check_ids(source: &Json) -> Result<(), String> {
    let vocab = source.pointer("/model/vocab").and_then(Json::as_object);
    for id in vocab.into_iter().flat_map(|v| v.values()) {
        if let Json::Number(n) = id {
            // A negative or fractional id is not a u64; the crate refuses those itself.
            check_id(n.as_u64().unwrap_or(u64::MAX))?;
        }
    }
    Ok(())
}

pub fn check_id(id: u64) -> Result<(), String> {
    if id < MAX_TOKEN_ID {
        return Ok(());
    }
    Err(format!(
        "token id {id} is out of range (ids must be below {MAX_TOKEN_ID})"
    ))
}

struct Writer(Vec<u8>);

impl Writer {
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.0.extend_from_slice(b);
    }
}

/// The prepared file read in order straight into its tables, each chunk hashed for the body
/// checksum on the way: a 12 MB file (Llama 3.1) is neither held whole nor copied a second
/// time (fresh memory costs the kernel's zeroing of every page, a third of a run's start-up).
struct Reader<R> {
    src: R,
    sum: xxhash_rust::xxh3::Xxh3,
    /// Bytes the file has left by its size: no count read from it allocates past that.
    left: u64,
    chunk: Vec<u8>,
}

/// Bytes read and converted at a time: small enough to stay in the cache.
const CHUNK: usize = 64 << 10;

/// A table as read, with what its checks need, counted while each chunk is in the cache
/// rather than in passes of their own over the 4-8 MiB merge table afterwards.
struct Checked<T> {
    items: Vec<T>,
    used: usize,
    max_id: u32,
}

impl<T> Checked<T> {
    fn ids_below(&self, n: usize) -> bool {
        self.used == 0 || (self.max_id as usize) < n
    }
}

impl<R: std::io::Read> Reader<R> {
    fn fill(&mut self, n: usize) -> Option<&[u8]> {
        self.left = self.left.checked_sub(n as u64)?;
        self.chunk.resize(n, 0);
        self.src.read_exact(&mut self.chunk).ok()?;
        self.sum.update(&self.chunk);
        Some(&self.chunk)
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.fill(8)?.try_into().ok()?))
    }
    fn bytes(&mut self) -> Option<Vec<u8>> {
        let n = usize::try_from(self.u64()?).ok()?;
        let mut out = Vec::with_capacity(self.room(n, 1)?);
        while out.len() < n {
            let step = (n - out.len()).min(CHUNK);
            out.extend_from_slice(self.fill(step)?);
        }
        Some(out)
    }
    /// Room for `n` items of `size` bytes, if the file still holds them.
    fn room(&self, n: usize, size: usize) -> Option<usize> {
        (n.checked_mul(size)? as u64 <= self.left).then_some(n)
    }
    /// `n` little-endian items of `N` bytes each.
    fn items<const N: usize, T>(
        &mut self,
        n: usize,
        mut item: impl FnMut([u8; N]) -> T,
    ) -> Option<Vec<T>> {
        let mut out = Vec::with_capacity(self.room(n, N)?);
        while out.len() < n {
            let step = (n - out.len()).min(CHUNK / N);
            let raw = self.fill(step * N)?;
            out.extend(
                raw.chunks_exact(N)
                    .map(|c| item(c.try_into().unwrap_or([0; N]))),
            );
        }
        Some(out)
    }
    fn u32s(&mut self, n: usize) -> Option<Vec<u32>> {
        self.items(n, u32::from_le_bytes)
    }
    /// A table of `n` slots, with its count of used slots and the largest id in them
    /// (`id` gives a used slot's id, None for a free slot).
    fn table<const N: usize, T: Copy>(
        &mut self,
        n: usize,
        item: impl Fn([u8; N]) -> T,
        id: impl Fn(T) -> Option<u32>,
    ) -> Option<Checked<T>> {
        let (mut used, mut max_id) = (0, 0);
        let items = self.items(n, |b| {
            let x = item(b);
            if let Some(i) = id(x) {
                used += 1;
                max_id = max_id.max(i);
            }
            x
        })?;
        Some(Checked {
            items,
            used,
            max_id,
        })
    }
    /// The vocabulary table: ids, EMPTY32 when free.
    fn id_table(&mut self, n: usize) -> Option<Checked<u32>> {
        self.table(n, u32::from_le_bytes, |id| (id != EMPTY32).then_some(id))
    }
    /// The merge table: (key, value) slots of u64, the key EMPTY64 when free; the id is the
    /// merged token's, the value's low word.
    fn merge_table(&mut self, n: usize) -> Option<Checked<(u64, u64)>> {
        let pair = |b: [u8; 16]| {
            let (k, v) = b.split_at(8);
            let word = |w: &[u8]| u64::from_le_bytes(w.try_into().unwrap_or([0; 8]));
            (word(k), word(v))
        };
        self.table(n, pair, |(k, v)| (k != EMPTY64).then_some(v as u32))
    }
    /// The body checksum of all that was read and of anything the file has after it (the
    /// source is bounded by the caller).
    fn finish(mut self) -> Option<u64> {
        self.chunk.resize(CHUNK, 0);
        loop {
            match self.src.read(&mut self.chunk) {
                Ok(0) => return Some(self.sum.digest()),
                Ok(n) => self.sum.update(&self.chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
        }
    }
}

/// Serialise tokenizer.json (already parsed) into the prepared format.
pub fn prepare(source: &Json, text: &[u8], key: u128, sha256: &str) -> Result<Vec<u8>, String> {
    let model = source.get("model").ok_or("no model")?;
    if let Some(why) = unsupported(model) {
        return Err(why);
    }
    let vocab = model
        .get("vocab")
        .and_then(Json::as_object)
        .ok_or("BPE without vocab")?;
    check_ids(source)?;
    let spans = find_spans(text).ok_or("vocabulary not found in the text")?;
    let max_id = vocab.values().filter_map(Json::as_u64).max().unwrap_or(0) as usize;
    let mut tok_start = vec![0u32; max_id + 1];
    let mut tok_len = vec![EMPTY32; max_id + 1];
    let mut blob = Vec::new();
    let mut ids: FxHashMap<&str, u32> =
        FxHashMap::with_capacity_and_hasher(vocab.len(), Default::default());
    for (token, id) in vocab {
        let id = id.as_u64().ok_or("vocab id is not a number")? as u32;
        tok_start[id as usize] = blob.len() as u32;
        tok_len[id as usize] = token.len() as u32;
        blob.extend_from_slice(token.as_bytes());
        ids.insert(token.as_str(), id);
    }
    let table_len = (vocab.len() * 2).next_power_of_two().max(16);
    let mut vocab_table = vec![EMPTY32; table_len];
    for (token, &id) in &ids {
        let mut slot = xxhash_rust::xxh3::xxh3_64(token.as_bytes()) as usize & (table_len - 1);
        while vocab_table[slot] != EMPTY32 {
            slot = (slot + 1) & (table_len - 1);
        }
        vocab_table[slot] = id;
    }
    // Borrowed, not cloned, and no String per merge: this loop runs ~150k times on a cold
    // run, where every allocation shows.
    let merges: &[Json] = model
        .get("merges")
        .and_then(Json::as_array)
        .map_or(&[], Vec::as_slice);
    // The crate collects merges into a map, so a repeated pair keeps its last rank.
    let mut merge_map: FxHashMap<u64, u64> =
        FxHashMap::with_capacity_and_hasher(merges.len(), Default::default());
    let mut merged = String::new();
    for (rank, m) in merges.iter().enumerate() {
        let (a, b) = match m {
            Json::String(s) => {
                let mut parts = s.split(' ');
                match (parts.next(), parts.next(), parts.next()) {
                    (Some(a), Some(b), None) => (a, b),
                    _ => return Err(format!("merge {s:?} is not two tokens")),
                }
            }
            Json::Array(p) if p.len() == 2 => (
                p[0].as_str().ok_or("merge part")?,
                p[1].as_str().ok_or("merge part")?,
            ),
            _ => return Err("unreadable merge".into()),
        };
        let a_id = *ids
            .get(a)
            .ok_or_else(|| format!("merge token {a:?} not in vocab"))?;
        let b_id = *ids
            .get(b)
            .ok_or_else(|| format!("merge token {b:?} not in vocab"))?;
        merged.clear();
        merged.push_str(a);
        merged.push_str(b);
        let new_id = *ids
            .get(merged.as_str())
            .ok_or_else(|| format!("merged token {merged:?} not in vocab"))?;
        merge_map.insert(merge_key(a_id, b_id), (rank as u64) << 32 | new_id as u64);
    }
    // 1.5x the merges, not 2x (at most two thirds full): linear probing with four slots to a
    // cache line still finds most merges in the line it starts in, and every load reads the
    // table whole (Llama 3.1's 280k merges: 16 MiB at 2x, 8 MiB now).
    let mtable_len = (merge_map.len() * 3 / 2).next_power_of_two().max(16);
    let mut merge_keys = vec![EMPTY64; mtable_len];
    let mut merge_vals = vec![0u64; mtable_len];
    for (&k, &v) in &merge_map {
        let mut slot = table_slot(k, mtable_len - 1);
        while merge_keys[slot] != EMPTY64 {
            slot = (slot + 1) & (mtable_len - 1);
        }
        merge_keys[slot] = k;
        merge_vals[slot] = v;
    }
    // Everything but the vocabulary and merges, for the crate to build the rest; copied
    // part by part, as a clone of the whole tree would copy both first.
    let rest: Json = match source.as_object() {
        Some(top) => top
            .iter()
            .map(|(k, v)| {
                let v = match (k.as_str(), v.as_object()) {
                    ("model", Some(m)) => Json::Object(
                        m.iter()
                            .filter(|(k, _)| *k != "vocab" && *k != "merges")
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect(),
                    ),
                    _ => v.clone(),
                };
                (k.clone(), v)
            })
            .collect::<serde_json::Map<_, _>>()
            .into(),
        None => source.clone(),
    };
    let mut w = Writer(Vec::with_capacity(
        blob.len() + mtable_len * 16 + table_len * 4 + 4096,
    ));
    w.bytes(sha256.as_bytes());
    w.u64(spans.vocab_at as u64);
    w.u64(spans.merges_at.map_or(u64::MAX, |at| at as u64));
    w.bytes(
        serde_json::to_string(&rest)
            .map_err(|e| e.to_string())?
            .as_bytes(),
    );
    w.u64(vocab.len() as u64);
    w.u64(tok_start.len() as u64);
    w.bytes(&blob);
    for v in &tok_start {
        w.u32(*v);
    }
    for v in &tok_len {
        w.u32(*v);
    }
    w.u64(table_len as u64);
    for v in &vocab_table {
        w.u32(*v);
    }
    w.u64(mtable_len as u64);
    for (k, v) in merge_keys.iter().zip(&merge_vals) {
        w.u64(*k);
        w.u64(*v);
    }
    Ok(with_header(&w.0, key))
}

/// The file of `body`: the magic, the source's key, and the checksum of the body, without
/// which a damaged cache could be trusted.
fn with_header(body: &[u8], key: u128) -> Vec<u8> {
    let mut file = Vec::with_capacity(CHECKSUM_AT + 8 + body.len());
    file.extend_from_slice(MAGIC);
    file.extend_from_slice(&key.to_le_bytes());
    file.extend_from_slice(&body_sum(body, key).to_le_bytes());
    file.extend_from_slice(body);
    file
}

/// A prepared file of `body` (all that follows the header) for the tokenizer.json text
/// `source`, with the header `load` checks: the fuzz harness's inputs are bodies, so that it
/// explores the tables rather than the checksum.
pub fn prepared_file(body: &[u8], source: &[u8]) -> Vec<u8> {
    with_header(body, xxhash_rust::xxh3::xxh3_128(source))
}

/// The body checksum, seeded with the source's key: a body moved under another key (a file
/// copied to another tokenizer's name with its header rewritten) no longer matches.
pub fn body_sum(body: &[u8], key: u128) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(body, sum_seed(key))
}

fn sum_seed(key: u128) -> u64 {
    key as u64 ^ (key >> 64) as u64
}

/// Offset of the body checksum: after the magic and the source key.
const CHECKSUM_AT: usize = 8 + 16;

/// Leading vocabulary entries and merges compared with tokenizer.json on every load: the
/// byte alphabet and the merges applied first, which shape almost every token (~1 µs each).
const SPOT_CHECK: usize = 1024;

/// A tokenizer read back from its prepared form, with the SHA-256 of its source.
///
/// Threat model. The cache directory is long-lived state that other processes (an older
/// kvaudit, a sync tool, a shared CI cache, another user with write access) can leave files
/// in, so a prepared file may be stale, truncated, relabelled (copied under another
/// tokenizer's key, header rewritten or not) or planted. Accidents and relabelling are
/// caught for free: the stored key must be the source's, and the checksum is seeded with it.
/// A deliberate forger who can write the cache can also run this code, so no checksum stops
/// them; only comparing the tables with tokenizer.json does. In full that costs ~150–200 ms
/// for Qwen3's 11 MB (walking the JSON alone 20–30 ms, a serde_json tree 50–170 ms) against
/// ~10 ms for the whole load, so only a spot check is done: the first SPOT_CHECK vocabulary
/// entries and merges of `source` must be in the tables with the same ids and ranks (~1 ms).
/// Not caught: a forged entry past those, a forged pipeline (normalizer, pre-tokenizer, added
/// tokens), or a forged SHA-256, all of which the file carries under its checksum only.
pub fn load(
    mut src: impl std::io::Read,
    len: u64,
    key: u128,
    source: &[u8],
) -> Result<(FastTokenizer, String), String> {
    let bad = || "corrupt prepared tokenizer".to_string();
    let mut header = [0u8; CHECKSUM_AT + 8];
    src.read_exact(&mut header).map_err(|_| bad())?;
    if &header[..8] != MAGIC.as_slice() {
        return Err("not a prepared tokenizer of this version".into());
    }
    let word = |at: usize, n: usize| header.get(at..at + n).ok_or_else(bad);
    let stored = u128::from_le_bytes(word(8, 16)?.try_into().map_err(|_| bad())?);
    if stored != key {
        return Err("prepared for another tokenizer.json".into());
    }
    let sum = u64::from_le_bytes(word(CHECKSUM_AT, 8)?.try_into().map_err(|_| bad())?);
    let mut r = Reader {
        src,
        sum: xxhash_rust::xxh3::Xxh3::with_seed(sum_seed(key)),
        left: len.saturating_sub(header.len() as u64),
        chunk: Vec::with_capacity(CHUNK),
    };
    let sha256 = String::from_utf8(r.bytes().ok_or_else(bad)?).map_err(|_| bad())?;
    let vocab_at = r.u64().ok_or_else(bad)?;
    let merges_at = r.u64().ok_or_else(bad)?;
    let spans = Spans {
        vocab_at: usize::try_from(vocab_at).map_err(|_| bad())?,
        merges_at: (merges_at != u64::MAX)
            .then(|| usize::try_from(merges_at))
            .transpose()
            .map_err(|_| bad())?,
    };
    let rest = r.bytes().ok_or_else(bad)?;
    // The pipeline around the model (its pre-tokenizer compiles a regex) is built on a second
    // thread while this one reads the tables. Nothing read is used
    // before the whole body is known to be what was written: a body that fails its checksum
    // drops what the thread built.
    let (tables, pipeline) = std::thread::scope(|s| {
        let build = || {
            let rest: Json = serde_json::from_slice(&rest).map_err(|e| e.to_string())?;
            let parts = Parts::of(&rest)?;
            Ok::<_, String>((rest, parts))
        };
        // A thread that cannot be started (an address-space limit) only costs the overlap. The
        // main thread's stack size: deserializing nested parts and compiling their regexes
        // recurse, and they ran on the main thread before.
        let pipeline = std::thread::Builder::new()
            .stack_size(8 << 20)
            .spawn_scoped(s, build);
        let tables = (|| {
            let vocab_size = r.u64()? as usize;
            let n_ids = usize::try_from(r.u64()?).ok()?;
            let blob = r.bytes()?;
            let tok_start = r.u32s(n_ids)?;
            let tok_len = r.u32s(n_ids)?;
            let table_len = usize::try_from(r.u64()?).ok()?;
            let vocab_table = r.id_table(table_len)?;
            let mtable_len = usize::try_from(r.u64()?).ok()?;
            let merges = r.merge_table(mtable_len)?;
            (r.finish()? == sum).then_some((
                vocab_size,
                n_ids,
                blob,
                tok_start,
                tok_len,
                vocab_table,
                merges,
            ))
        })();
        let pipeline = match pipeline {
            Ok(thread) => thread.join().unwrap_or_else(|_| Err(bad())),
            Err(_) => build(),
        };
        (tables, pipeline)
    });
    let (vocab_size, n_ids, blob, tok_start, tok_len, vocab_table, merges) =
        tables.ok_or_else(bad)?;
    let (rest, parts) = pipeline?;
    let (table_len, mtable_len) = (vocab_table.items.len(), merges.items.len());
    if !table_len.is_power_of_two() || !mtable_len.is_power_of_two() {
        return Err(bad());
    }
    // A damaged file must fail here, not panic on a later lookup.
    let in_blob = tok_start.iter().zip(&tok_len).all(|(&s, &l)| {
        l == EMPTY32
            || (s as usize)
                .checked_add(l as usize)
                .is_some_and(|e| e <= blob.len())
    });
    let ids_ok = vocab_table.ids_below(n_ids) && merges.ids_below(n_ids);
    // Probing stops only at a free slot: a full table would make a miss loop forever.
    let sparse = vocab_table.used * 2 <= table_len && merges.used * 4 <= mtable_len * 3;
    if !in_blob || !ids_ok || !sparse {
        return Err(bad());
    }
    let model = &rest["model"];
    let mut bpe = FastBpe {
        char_ids: Box::default(),
        cache_key: super::per_model::new_key(),
        short: Default::default(),
        blob,
        tok_start,
        tok_len,
        vocab_size,
        vocab_table: vocab_table.items,
        merges: merges.items,
        unk_token: model
            .get("unk_token")
            .and_then(Json::as_str)
            .map(str::to_string),
        fuse_unk: model
            .get("fuse_unk")
            .and_then(Json::as_bool)
            .unwrap_or(false),
        byte_fallback: model
            .get("byte_fallback")
            .and_then(Json::as_bool)
            .unwrap_or(false),
        ignore_merges: model
            .get("ignore_merges")
            .and_then(Json::as_bool)
            .unwrap_or(false),
    };
    bpe.char_ids = (0..CHAR_TABLE)
        .map(|c| {
            char::from_u32(c)
                .and_then(|c| bpe.lookup(c.encode_utf8(&mut [0u8; 4])))
                .unwrap_or(EMPTY32)
        })
        .collect();
    spot_check(&bpe, source, &spans).ok_or("prepared tables differ from tokenizer.json")?;
    Ok((parts.assemble(bpe)?, sha256))
}

/// Where the values of `model.vocab` and `model.merges` start in tokenizer.json's text. Found
/// once when preparing (a search through megabytes) and kept in the file; a load only checks
/// that the key is in front of each, so a wrong offset fails the spot check.
struct Spans {
    vocab_at: usize,
    merges_at: Option<usize>,
}

/// A quoted key cannot occur unescaped inside a JSON string, so a match followed by `:` and
/// the right bracket is a key. The vocabulary comes before the merges in every tokenizer.json
/// the crate writes; the merges are searched from the end, past the vocabulary.
fn find_spans(text: &[u8]) -> Option<Spans> {
    let value_at = |i: usize, key: &[u8], open: u8| {
        let mut s = scan::Scan::new(text, i + key.len());
        (s.eat(b':').is_some() && s.peek() == Some(open)).then(|| s.at())
    };
    let vocab_at = memchr::memmem::find_iter(text, b"\"vocab\"")
        .find_map(|i| value_at(i, b"\"vocab\"", b'{'))?;
    let merges_at = memchr::memmem::rfind_iter(&text[vocab_at..], b"\"merges\"")
        .find_map(|i| value_at(vocab_at + i, b"\"merges\"", b'['));
    Some(Spans {
        vocab_at,
        merges_at,
    })
}

/// Whether `at` is just past `key` (quoted), a colon and whitespace.
fn key_before(text: &[u8], at: usize, key: &[u8]) -> bool {
    let Some(head) = text.get(..at) else {
        return false;
    };
    let head = head.trim_ascii_end();
    let Some(head) = head.strip_suffix(b":") else {
        return false;
    };
    head.trim_ascii_end().ends_with(key)
}

fn spot_check(bpe: &FastBpe, source: &[u8], spans: &Spans) -> Option<()> {
    let vocab_at = spans.vocab_at;
    if !key_before(source, vocab_at, b"\"vocab\"")
        || spans
            .merges_at
            .is_some_and(|at| !key_before(source, at, b"\"merges\""))
    {
        return None;
    }
    let mut s = scan::Scan::new(source, vocab_at);
    let mut more = s.open(b'{', b'}')?;
    for _ in 0..SPOT_CHECK {
        if !more {
            break;
        }
        let token = s.string()?;
        s.eat(b':')?;
        let id = u32::try_from(s.uint()?).ok()?;
        if bpe.token(id) != Some(token.as_ref()) || bpe.lookup(&token) != Some(id) {
            return None;
        }
        more = s.more(b'}')?;
    }
    let Some(merges_at) = spans.merges_at else {
        return bpe.merges.iter().all(|&(k, _)| k == EMPTY64).then_some(());
    };
    let mut s = scan::Scan::new(source, merges_at);
    let mut more = s.open(b'[', b']')?;
    let mut joined = String::new();
    for rank in 0..SPOT_CHECK {
        if !more {
            break;
        }
        if s.peek()? == b'"' {
            let pair = s.string()?;
            let (a, b) = pair.split_once(' ')?;
            if b.contains(' ') {
                return None;
            }
            merge_matches(bpe, a, b, rank, &mut joined)?;
        } else {
            s.eat(b'[')?;
            let a = s.string()?;
            s.eat(b',')?;
            let b = s.string()?;
            s.eat(b']')?;
            merge_matches(bpe, &a, &b, rank, &mut joined)?;
        }
        more = s.more(b']')?;
    }
    Some(())
}

/// Whether the tables merge `a` and `b` into their concatenation at `rank`, or later: the
/// crate keeps a repeated pair's last rank, and a check of a prefix cannot see the repeat.
fn merge_matches(bpe: &FastBpe, a: &str, b: &str, rank: usize, joined: &mut String) -> Option<()> {
    let (a_id, b_id) = (bpe.lookup(a)?, bpe.lookup(b)?);
    joined.clear();
    joined.push_str(a);
    joined.push_str(b);
    let (stored_rank, id) = bpe.merge(a_id, b_id)?;
    (Some(id) == bpe.lookup(joined) && stored_rank as usize >= rank).then_some(())
}

/// The pipeline around the model, built the way the crate's deserializer builds it.
/// The parts of the crate's pipeline around the model, as tokenizer.json describes them.
struct Parts {
    normalizer: Option<NormalizerWrapper>,
    pre_tokenizer: Option<PreTokenizerWrapper>,
    post_processor: Option<PostProcessorWrapper>,
    decoder: Option<DecoderWrapper>,
    truncation: Option<tokenizers::TruncationParams>,
    padding: Option<tokenizers::PaddingParams>,
    added: Vec<AddedToken>,
}

impl Parts {
    fn of(rest: &Json) -> Result<Parts, String> {
        fn part<T: serde::de::DeserializeOwned>(
            rest: &Json,
            key: &str,
        ) -> Result<Option<T>, String> {
            match rest.get(key) {
                None | Some(Json::Null) => Ok(None),
                Some(v) => serde_json::from_value(v.clone())
                    .map(Some)
                    .map_err(|e| format!("{key}: {e}")),
            }
        }
        Ok(Parts {
            normalizer: part(rest, "normalizer")?,
            pre_tokenizer: part(rest, "pre_tokenizer")?,
            post_processor: part(rest, "post_processor")?,
            decoder: part(rest, "decoder")?,
            truncation: part(rest, "truncation")?,
            padding: part(rest, "padding")?,
            added: part(rest, "added_tokens")?.unwrap_or_default(),
        })
    }

    fn assemble(self, bpe: FastBpe) -> Result<FastTokenizer, String> {
        let mut tok = TokenizerImpl::new(bpe);
        tok.with_normalizer(self.normalizer)
            .map_err(|e| e.to_string())?;
        tok.with_pre_tokenizer(self.pre_tokenizer);
        tok.with_post_processor(self.post_processor);
        tok.with_decoder(self.decoder);
        // Off, as transformers encodes prompts (and as the crate's tokenizer is loaded).
        let _ = (self.truncation, self.padding);
        tok.with_truncation(None).map_err(|e| e.to_string())?;
        tok.with_padding(None);
        tok.add_tokens(self.added).map_err(|e| e.to_string())?;
        Ok(tok)
    }
}

/// Texts every prepared tokenizer must encode exactly like the crate before it is kept:
/// prose, code, numbers, whitespace runs, several scripts, emoji, and every added token.
pub fn probe_texts(source: &Json) -> Vec<String> {
    let mut texts = fixed_probe_texts();
    if let Some(added) = source.get("added_tokens").and_then(Json::as_array) {
        let specials: Vec<&str> = added
            .iter()
            .filter_map(|t| t.get("content").and_then(Json::as_str))
            .collect();
        texts.push(specials.join(" x"));
        texts.push(specials.concat());
    }
    if let Some(vocab) = source.pointer("/model/vocab").and_then(Json::as_object) {
        // Every 97th vocabulary entry, as text: exercises merges across the whole rank range.
        let sample: Vec<&str> = vocab.keys().step_by(97).map(String::as_str).collect();
        texts.push(sample.concat());
    }
    texts
}

/// Prose, code, numbers, whitespace runs, several scripts, emoji, and text that NFC changes
/// (a combining accent, a decomposed Hangul syllable, an angstrom sign).
pub fn fixed_probe_texts() -> Vec<String> {
    vec![
        "What is the difference between a process and a thread? A process is an independent program.".to_string(),
        "fn main() {\n    let x = vec![1, 2, 3];\n\tprintln!(\"{x:?}\");\n}\n\n\n   trailing   spaces  ".to_string(),
        "1234567890 3.14159 1e-05 -42 0x1F 2026-01-15T10:00:00 $1,000,000 50%".to_string(),
        "Größe naïve café — 東京の天気は晴れです。 Привет, мир! مرحبا بالعالم 안녕하세요 😀🚀👍🏽 \u{200b}".to_string(),
        "I'm you're he'll we'd they've it's ISN'T  \r\n\r\n  \u{a0}nbsp".to_string(),
        "{\"city\": \"Paris\", \"temperature_c\": 18, \"condition\": \"cloudy\"}".to_string(),
        "e\u{301}te\u{301} A\u{30a}ngstro\u{308}m \u{212b} \u{1100}\u{1161}\u{11a8} \u{1e9b}\u{323}".to_string(),
    ]
}

/// Where prepared tokenizers live: KVAUDIT_TOKENIZER_CACHE (a directory, or `off`), else
/// `$XDG_CACHE_HOME/kvaudit/tokenizers`, else `~/.cache/kvaudit/tokenizers`.
pub fn cache_dir() -> Option<PathBuf> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    match var("KVAUDIT_TOKENIZER_CACHE").as_deref() {
        Some("off") | Some("0") => None,
        Some(dir) => Some(PathBuf::from(dir)),
        None => var("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .map(|d| d.join("kvaudit").join("tokenizers")),
    }
}
