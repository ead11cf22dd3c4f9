//! NVIDIA Dynamo 1.6.1's KV index (its radix tree) fed by vLLM's events (reference/routers.md §1): per
//! worker, a tree of blocks keyed by a position-independent hash of each block's tokens,
//! parents resolved through the engine's own block hashes. A block whose event's block
//! size is not the router's ends the store (`create_stored_blocks`), and a store whose
//! parent the worker does not hold is skipped whole (`ParentBlockNotFound`): at a block
//! size other than the engine's, the worker is invisible.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

use crate::events::{Batch, BatchWire, BlockStored, EventKind, WireHash};

/// `compute_salt_hash` with no cache namespace and no LoRA: the seed of every block hash.
pub const SEED: u64 = 1337;

/// A block's hash as Dynamo computes it: XXH3-64 of its tokens as little-endian u32s.
pub fn local_hash(tokens: &[u32]) -> u64 {
    tokens_hash(tokens, SEED)
}

/// XXH3-64 with `seed` of `tokens` as little-endian u32s (on the stack up to a 64-token block).
pub fn tokens_hash(tokens: &[u32], seed: u64) -> u64 {
    let mut bytes = [0u8; 4 * 64];
    if tokens.len() <= 64 {
        for (b, t) in bytes.chunks_exact_mut(4).zip(tokens) {
            b.copy_from_slice(&t.to_le_bytes());
        }
        return xxhash_rust::xxh3::xxh3_64_with_seed(&bytes[..4 * tokens.len()], seed);
    }
    let v: Vec<u8> = tokens.iter().flat_map(|t| t.to_le_bytes()).collect();
    xxhash_rust::xxh3::xxh3_64_with_seed(&v, seed)
}

#[derive(Debug, Default)]
struct Node {
    children: FxHashMap<u64, usize>,
    /// (parent node or none for a root, own local hash): to detach it on removal.
    parent: Option<usize>,
    local: u64,
}

#[derive(Debug, Default)]
struct Worker {
    nodes: Vec<Node>,
    roots: FxHashMap<u64, usize>,
    /// Engine block hash → node.
    by_engine: FxHashMap<u64, usize>,
}

impl Worker {
    fn child(&mut self, parent: Option<usize>, local: u64) -> usize {
        let found = match parent {
            Some(p) => self.nodes[p].children.get(&local).copied(),
            None => self.roots.get(&local).copied(),
        };
        if let Some(n) = found {
            return n;
        }
        let n = self.nodes.len();
        self.nodes.push(Node {
            children: FxHashMap::default(),
            parent,
            local,
        });
        match parent {
            Some(p) => self.nodes[p].children.insert(local, n),
            None => self.roots.insert(local, n),
        };
        n
    }

    fn detach(&mut self, n: usize) {
        let (parent, local) = (self.nodes[n].parent, self.nodes[n].local);
        let owner = match parent {
            Some(p) => &mut self.nodes[p].children,
            None => &mut self.roots,
        };
        if owner.get(&local) == Some(&n) {
            owner.remove(&local);
        }
    }
}

/// What happened to the events, as Dynamo's normalizer and tree count them.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct TreeStats {
    pub stores_applied: u64,
    pub stores_skipped: BTreeMap<&'static str, u64>,
    pub blocks_indexed: u64,
    /// Blocks not published because their event's block size is not the router's.
    pub blocks_wrong_size: u64,
    pub removals: u64,
    /// Batches Dynamo's decoder rejects whole: vLLM before 0.10's two-field batches.
    pub batches_rejected: u64,
}

/// One Dynamo indexer at one block size.
#[derive(Debug)]
pub struct RadixTree {
    /// Its block size; none until the first stored event gives the engine's, when it was
    /// not set (Dynamo's publisher takes the engine's).
    pub block_size: Option<usize>,
    workers: FxHashMap<String, Worker>,
    pub stats: TreeStats,
}

fn skip(stats: &mut TreeStats, reason: &'static str) {
    *stats.stores_skipped.entry(reason).or_default() += 1;
}

impl RadixTree {
    pub fn new(block_size: Option<usize>) -> RadixTree {
        RadixTree {
            block_size,
            workers: FxHashMap::default(),
            stats: TreeStats::default(),
        }
    }

    pub fn apply(&mut self, worker: &str, batch: &Batch) {
        // Its decoder reads a batch as a 3-tuple (timestamp, events, data-parallel rank).
        if batch.wire == BatchWire::Array(2) {
            self.stats.batches_rejected += 1;
            return;
        }
        if self.block_size.is_none() {
            self.block_size = batch.events.iter().find_map(|ev| match &ev.kind {
                EventKind::Stored(s) => usize::try_from(s.block_size).ok().filter(|&b| b > 0),
                _ => None,
            });
        }
        let Some(block_size) = self.block_size else {
            return;
        };
        if !self.workers.contains_key(worker) {
            self.workers.insert(worker.to_string(), Worker::default());
        }
        let Some(w) = self.workers.get_mut(worker) else {
            return;
        };
        for ev in &batch.events {
            match &ev.kind {
                EventKind::Stored(s) => store(w, &mut self.stats, block_size, s),
                EventKind::Removed(r) => {
                    if !device(r.medium.as_deref()) {
                        continue;
                    }
                    for h in &r.block_hashes {
                        let Some(n) = engine_hash(h).and_then(|h| w.by_engine.remove(&h)) else {
                            continue;
                        };
                        w.detach(n);
                        self.stats.removals += 1;
                    }
                }
                EventKind::AllCleared => *w = Worker::default(),
            }
        }
    }

    /// Tokens of `tokens`' leading full blocks the worker's path holds.
    pub fn lookup_tokens(&self, worker: &str, tokens: &[u32]) -> usize {
        let (Some(w), Some(block_size)) = (self.workers.get(worker), self.block_size) else {
            return 0;
        };
        let mut at: Option<usize> = None;
        let mut n = 0;
        for block in tokens.chunks_exact(block_size) {
            let local = local_hash(block);
            let next = match at {
                Some(p) => w.nodes[p].children.get(&local),
                None => w.roots.get(&local),
            };
            match next {
                Some(&c) => {
                    at = Some(c);
                    n += 1;
                }
                None => break,
            }
        }
        n * block_size
    }
}

/// Dynamo reads block hashes as unsigned 64-bit integers; vLLM's 32-byte hashes
/// (`sha256` with bytes output) are not decoded.
fn engine_hash(h: &WireHash) -> Option<u64> {
    match h {
        WireHash::Uint(v, _) => Some(*v),
        WireHash::Int(v, _) => Some(*v as u64),
        WireHash::Bytes(_) => None,
    }
}

fn device(medium: Option<&str>) -> bool {
    medium.is_none_or(|m| m.is_empty() || m.eq_ignore_ascii_case("gpu"))
}

fn store(w: &mut Worker, stats: &mut TreeStats, block_size: usize, s: &BlockStored) {
    if let Some(kind) = s.kv_cache_spec_kind.as_deref()
        && !matches!(
            kind,
            "full_attention" | "mla_attention" | "sink_full_attention"
        )
    {
        return skip(stats, "not_main_attention");
    }
    if s.kv_cache_spec_kind.is_none() && s.group_idx.is_some_and(|g| g != 0) {
        return skip(stats, "unlearned_group_idx");
    }
    if s.locality
        .as_deref()
        .is_some_and(|l| !l.eq_ignore_ascii_case("local"))
    {
        return skip(stats, "remote_locality");
    }
    if !device(s.medium.as_deref()) {
        return skip(stats, "lower_tier");
    }
    let Some(hashes) = s
        .block_hashes
        .iter()
        .map(engine_hash)
        .collect::<Option<Vec<u64>>>()
    else {
        return skip(stats, "undecodable_hash");
    };
    let parent = match &s.parent_block_hash {
        None => None,
        Some(p) => match engine_hash(p).and_then(|p| w.by_engine.get(&p).copied()) {
            Some(n) => Some(n),
            None => return skip(stats, "parent_block_not_found"),
        },
    };
    let mut at = parent;
    let mut stored = 0;
    for (i, &h) in hashes.iter().enumerate() {
        let fits = usize::try_from(s.block_size).is_ok_and(|b| b == block_size);
        let Some(tokens) = s
            .token_ids
            .get(i * block_size..(i + 1) * block_size)
            .filter(|_| fits)
        else {
            stats.blocks_wrong_size += (hashes.len() - i) as u64;
            break;
        };
        let n = w.child(at, local_hash(tokens));
        w.by_engine.insert(h, n);
        at = Some(n);
        stored += 1;
    }
    stats.stores_applied += 1;
    stats.blocks_indexed += stored;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{Event, EventWire};
    use crate::routers::llm_d::view::generation_events;

    #[test]
    fn local_hash_test_vector() {
        // Tokens 1..=16, block 16 (routers.md §1.3, run against ai-dynamo-runtime 1.6.1).
        let tokens: Vec<u32> = (1..=16).collect();
        assert_eq!(local_hash(&tokens), 16_863_443_419_780_771_464);
    }

    fn fed(block: usize, prompt: usize, held: &[u32], engine: usize) -> RadixTree {
        let mut index = RadixTree::new(Some(block));
        for ev in generation_events(prompt, held, engine) {
            let batch = Batch {
                ts: 0.0,
                events: vec![Event {
                    kind: ev.kind,
                    wire: EventWire::Map,
                }],
                data_parallel_rank: Some(0),
                wire: BatchWire::Array(3),
            };
            index.apply("w", &batch);
        }
        index
    }

    #[test]
    fn equal_block_sizes_see_prompt_and_reply_other_sizes_see_nothing() {
        // s1's shape: prompt 64, reply 64 (the last sampled token never gets KV).
        let held: Vec<u32> = (1..=127).collect();
        let at16 = fed(16, 64, &held, 16);
        assert_eq!(at16.lookup_tokens("w", &held), 112);
        assert_eq!(at16.stats.stores_applied, 4);
        for other in [8, 32, 64] {
            let blind = fed(other, 64, &held, 16);
            assert_eq!(blind.lookup_tokens("w", &held), 0, "router block {other}");
            assert_eq!(
                blind.stats.stores_skipped.get("parent_block_not_found"),
                Some(&3)
            );
        }
    }

    #[test]
    fn the_event_index_agrees_with_the_transition_formula() {
        let mut next = crate::tokenize::xorshift(0x9E37_79B9_7F4A_7C15);
        for _ in 0..300 {
            let prompt = 1 + (next() % 90) as usize;
            let reply = (next() % 90) as usize;
            let held: Vec<u32> = (0..prompt + reply).map(|_| (next() % 7) as u32).collect();
            let keep = (next() as usize) % (held.len() + 1);
            let mut after = held[..keep].to_vec();
            after.extend((0..next() % 40).map(|_| (next() % 7) as u32));
            let index = fed(16, prompt, &held, 16);
            let t = crate::routers::TransitionView {
                prompt_tokens: prompt,
                held: &held,
                next: &after,
                request: &[],
                next_request: &[],
                engine_block_size: 16,
                model: "m",
                index_view: None,
            };
            assert_eq!(
                index.lookup_tokens("w", &after),
                crate::routers::event_visible(&t)
            );
        }
    }
}
