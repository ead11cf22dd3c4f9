//! The prepared file: written from tokenizer.json once its ids are checked, read back
//! straight into the model's tables.

use rustc_hash::FxHashMap;
use serde_json::Value as Json;

use super::bpe::CHAR_TABLE;
use super::pipeline::Parts;
use super::spot_check::{Spans, find_spans, spot_check};
use super::{
    EMPTY32, EMPTY64, FastBpe, FastTokenizer, PreparedError, check_ids, merge_key, table_slot,
};
use crate::tokenize::TokenizerFileError;

// v04: the body checksum is seeded with the source key, and the offsets of the vocabulary and
// merges in tokenizer.json are kept for the spot check. v05: merge slots come from
// [`table_slot`] (a v04 table, probed with it, would miss its merges). v06: each merge slot's
// key and value are stored together, as the table in memory holds them. v07: the merge table
// has 1.5x the merges' slots rounded up to a power of two, not 2x (at most two thirds full;
// the loader accepts up to three quarters); half the size for Qwen3-8B and Llama 3.1.
const MAGIC: &[u8; 8] = b"KVTOKv08";

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
pub fn prepare(
    source: &Json,
    text: &[u8],
    key: u128,
    sha256: &str,
) -> Result<Vec<u8>, TokenizerFileError> {
    let malformed = |why: &str| TokenizerFileError::Malformed(why.to_string());
    let model = source.get("model").ok_or_else(|| malformed("no model"))?;
    if let Some(why) = unsupported(model) {
        return Err(TokenizerFileError::Unsupported(why));
    }
    let vocab = model
        .get("vocab")
        .and_then(Json::as_object)
        .ok_or_else(|| malformed("BPE without vocab"))?;
    check_ids(source)?;
    let spans = find_spans(text).ok_or_else(|| malformed("vocabulary not found in the text"))?;
    let max_id = vocab.values().filter_map(Json::as_u64).max().unwrap_or(0) as usize;
    let mut tok_start = vec![0u32; max_id + 1];
    let mut tok_len = vec![EMPTY32; max_id + 1];
    let mut blob = Vec::new();
    let mut ids: FxHashMap<&str, u32> =
        FxHashMap::with_capacity_and_hasher(vocab.len(), Default::default());
    for (token, id) in vocab {
        let id = id
            .as_u64()
            .ok_or_else(|| malformed("vocab id is not a number"))? as u32;
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
                    _ => return Err(malformed(&format!("merge {s:?} is not two tokens"))),
                }
            }
            Json::Array(p) if p.len() == 2 => (
                p[0].as_str().ok_or_else(|| malformed("merge part"))?,
                p[1].as_str().ok_or_else(|| malformed("merge part"))?,
            ),
            _ => return Err(malformed("unreadable merge")),
        };
        let a_id = *ids
            .get(a)
            .ok_or_else(|| malformed(&format!("merge token {a:?} not in vocab")))?;
        let b_id = *ids
            .get(b)
            .ok_or_else(|| malformed(&format!("merge token {b:?} not in vocab")))?;
        merged.clear();
        merged.push_str(a);
        merged.push_str(b);
        let new_id = *ids
            .get(merged.as_str())
            .ok_or_else(|| malformed(&format!("merged token {merged:?} not in vocab")))?;
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
            .map_err(|e| malformed(&e.to_string()))?
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
) -> Result<(FastTokenizer, String), PreparedError> {
    let bad = || PreparedError::Corrupt;
    let mut header = [0u8; CHECKSUM_AT + 8];
    src.read_exact(&mut header).map_err(|_| bad())?;
    if &header[..8] != MAGIC.as_slice() {
        return Err(PreparedError::OtherVersion);
    }
    let word = |at: usize, n: usize| header.get(at..at + n).ok_or_else(bad);
    let stored = u128::from_le_bytes(word(8, 16)?.try_into().map_err(|_| bad())?);
    if stored != key {
        return Err(PreparedError::OtherSource);
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
            let rest: Json = serde_json::from_slice(&rest)
                .map_err(|e| PreparedError::Pipeline(e.to_string()))?;
            let parts = Parts::of(&rest)?;
            Ok::<_, PreparedError>((rest, parts))
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
        cache_key: crate::tokenize::per_model::new_key(),
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
    spot_check(&bpe, source, &spans).ok_or(PreparedError::Differs)?;
    Ok((parts.assemble(bpe)?, sha256))
}
