//! What each pod holds now, at its engine's block size, kept current by the pod's KV events.
//!
//! A block is known by its content: the key of block `i` of a sequence hashes the block's own
//! tokens seeded with the key of block `i - 1`, so a prompt's blocks are looked up without the
//! engine's hash function (which varies by version, seed and engine). The engine's own hashes
//! only link a stored block to its parent and name the blocks an eviction removes. The view is
//! exact for what the events say; where they cannot say (a parent never seen, a pod past its
//! stated capacity), the pod is marked stale with the reason rather than guessed.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

use crate::events::{Batch, BlockRemoved, BlockStored, EventKind, WireHash};

/// The key of the (empty) sequence before a first block.
const ROOT: u64 = 0x6b76_6175_6469_7421;

/// Why an event could not be applied as it came: counted per pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Unapplied {
    /// A store whose block size is not the engine's (the flag and the pod disagree).
    BlockSize,
    /// A store whose tokens are not whole blocks, one per hash.
    Shape,
    /// A store whose parent the pod was never seen to hold (events were lost, or the stream
    /// began mid-sequence): the pod is stale until it is cleared.
    UnknownParent,
    /// A removal of a block the pod was never seen to store.
    UnknownBlock,
    /// A store past the pod's stated capacity: the pod is stale until it is cleared.
    OverCapacity,
    /// Held in a tier other than the GPU's (CPU offload): not what a prompt reuses directly.
    OtherMedium,
    /// Messages the publisher sent never arrived (a sequence gap): the pod is stale until it
    /// is cleared.
    Gap,
}

impl Unapplied {
    pub fn as_str(self) -> &'static str {
        match self {
            Unapplied::BlockSize => "block_size",
            Unapplied::Shape => "shape",
            Unapplied::UnknownParent => "unknown_parent",
            Unapplied::UnknownBlock => "unknown_block",
            Unapplied::OverCapacity => "over_capacity",
            Unapplied::OtherMedium => "other_medium",
            Unapplied::Gap => "gap",
        }
    }

    /// Whether the pod's view can no longer be trusted to hold all the pod holds.
    fn makes_stale(self) -> bool {
        matches!(
            self,
            Unapplied::UnknownParent | Unapplied::OverCapacity | Unapplied::Gap
        )
    }
}

#[derive(Debug, Default)]
struct Pod {
    /// The engine's hash of each block held → the block's content key and its parent's.
    by_engine: FxHashMap<u64, (u64, u64)>,
    /// Content key → how many held blocks have it.
    held: FxHashMap<u64, u32>,
    /// Content key → how many held blocks follow it: a sequence continued past a prompt.
    children: FxHashMap<u64, u32>,
    unapplied: BTreeMap<Unapplied, u64>,
    /// Set by the first event that left the view incomplete; cleared by AllBlocksCleared.
    stale: Option<Unapplied>,
    /// A gap is being recovered: the pod's batches wait until it is, so the view lags.
    recovering: bool,
}

impl Pod {
    /// Empty and known again; what was counted stays.
    fn clear(&mut self) {
        *self = Pod {
            unapplied: std::mem::take(&mut self.unapplied),
            recovering: self.recovering,
            ..Pod::default()
        };
    }
}

/// Every pod's holdings.
#[derive(Debug)]
pub struct Holdings {
    block_size: usize,
    /// The most blocks one pod is taken to hold (a flag's bound), unless its own is known.
    capacity: usize,
    /// Pods whose own block count is known (their `/metrics`).
    own_capacity: BTreeMap<String, usize>,
    pods: BTreeMap<String, Pod>,
}

impl Holdings {
    pub fn new(block_size: usize, capacity: usize) -> Holdings {
        Holdings {
            block_size: block_size.max(1),
            capacity,
            own_capacity: BTreeMap::new(),
            pods: BTreeMap::new(),
        }
    }

    /// `pod` holds at most `blocks` (its engine said so).
    pub fn set_capacity(&mut self, pod: &str, blocks: usize) {
        self.own_capacity.insert(pod.to_string(), blocks);
    }

    /// The most blocks `pod` is taken to hold.
    pub fn capacity(&self, pod: &str) -> usize {
        self.own_capacity.get(pod).copied().unwrap_or(self.capacity)
    }

    /// Applies one published batch of `pod`'s events, in order.
    pub fn apply(&mut self, pod: &str, batch: &Batch) {
        let capacity = self.capacity(pod);
        let p = match self.pods.get_mut(pod) {
            Some(p) => p,
            None => self.pods.entry(pod.to_string()).or_default(),
        };
        // While a gap is recovered, none of the pod's batches come: one that does ends it.
        p.recovering = false;
        for event in &batch.events {
            let result = match &event.kind {
                EventKind::Stored(s) => store(p, s, self.block_size, capacity),
                EventKind::Removed(r) => remove(p, r),
                EventKind::AllCleared => {
                    p.clear();
                    Ok(())
                }
            };
            if let Err(why) = result {
                *p.unapplied.entry(why).or_default() += 1;
                if why.makes_stale() && p.stale.is_none() {
                    p.stale = Some(why);
                }
            }
        }
    }

    /// `missing` of `pod`'s messages were lost in transit: what they said is not known.
    pub fn lost(&mut self, pod: &str, missing: u64) {
        let p = self.pods.entry(pod.to_string()).or_default();
        *p.unapplied.entry(Unapplied::Gap).or_default() += missing;
        p.stale.get_or_insert(Unapplied::Gap);
    }

    /// A gap of `pod`'s is being recovered: its batches wait, and its view lags, until the
    /// next of them is applied.
    pub fn recovering(&mut self, pod: &str) {
        self.pods.entry(pod.to_string()).or_default().recovering = true;
    }

    /// A recovery of `pod`'s ended (with or without batches to apply).
    pub fn caught_up(&mut self, pod: &str) {
        if let Some(p) = self.pods.get_mut(pod) {
            p.recovering = false;
        }
    }

    /// Whether what `pod`'s view says now may be short of what the pod holds: it is stale, or
    /// its batches wait for a gap's recovery.
    pub fn lags(&self, pod: &str) -> bool {
        self.pods
            .get(pod)
            .is_some_and(|p| p.stale.is_some() || p.recovering)
    }

    /// `pod`'s publisher started again (its sequence fell back): a restarted engine holds
    /// nothing, so its view starts again empty and known.
    pub fn restarted(&mut self, pod: &str) {
        if let Some(p) = self.pods.get_mut(pod) {
            p.clear();
        }
    }

    /// The content keys of `tokens`' whole blocks, in order.
    pub fn keys(&self, tokens: &[u32]) -> Vec<u64> {
        let mut parent = ROOT;
        tokens
            .chunks_exact(self.block_size)
            .map(|block| {
                parent = chain(parent, block);
                parent
            })
            .collect()
    }

    /// The prompt tokens `pod` holds: whole blocks from the start, while each is held.
    pub fn held(&self, pod: &str, keys: &[u64]) -> usize {
        self.pods.get(pod).map_or(0, |p| {
            keys.iter().take_while(|k| p.held.contains_key(k)).count() * self.block_size
        })
    }

    /// Whether `pod` holds a block that follows the last of `keys` (a prompt's whole blocks):
    /// the pod went on past the prompt. Never for a prompt without a whole block.
    pub fn holds_after(&self, pod: &str, keys: &[u64]) -> bool {
        match (self.pods.get(pod), keys.last()) {
            (Some(p), Some(last)) => p.children.contains_key(last),
            _ => false,
        }
    }

    /// Why `pod`'s view is incomplete, if it is.
    pub fn stale(&self, pod: &str) -> Option<Unapplied> {
        self.pods.get(pod).and_then(|p| p.stale)
    }

    /// Events of `pod` not applied, by reason.
    pub fn unapplied(&self, pod: &str) -> impl Iterator<Item = (Unapplied, u64)> + '_ {
        self.pods
            .get(pod)
            .into_iter()
            .flat_map(|p| p.unapplied.iter().map(|(k, v)| (*k, *v)))
    }

    /// Blocks `pod` holds now.
    pub fn blocks(&self, pod: &str) -> usize {
        self.pods.get(pod).map_or(0, |p| p.by_engine.len())
    }
}

/// A block's key: its tokens hashed with its parent's key as the seed, so equal keys mean
/// equal sequences up to and including the block.
fn chain(parent: u64, block: &[u32]) -> u64 {
    crate::routers::dynamo::index::tokens_hash(block, parent)
}

/// The engine's hash as one number: ints as they are, bytes hashed whole (vLLM's are
/// 32-byte digests; taking 8 of them would do, hashing all of them costs little).
fn engine_key(h: &WireHash) -> u64 {
    match h {
        WireHash::Uint(v, _) => *v,
        WireHash::Int(v, _) => *v as u64,
        WireHash::Bytes(b) => xxhash_rust::xxh3::xxh3_64(b),
    }
}

fn on_gpu(medium: Option<&str>) -> bool {
    medium.is_none_or(|m| m.is_empty() || m.eq_ignore_ascii_case("gpu"))
}

fn store(
    p: &mut Pod,
    s: &BlockStored,
    block_size: usize,
    capacity: usize,
) -> Result<(), Unapplied> {
    if !on_gpu(s.medium.as_deref()) {
        return Err(Unapplied::OtherMedium);
    }
    if usize::try_from(s.block_size).ok() != Some(block_size) {
        return Err(Unapplied::BlockSize);
    }
    if s.token_ids.len() != s.block_hashes.len() * block_size || s.token_ids_out_of_range {
        return Err(Unapplied::Shape);
    }
    let mut parent = match &s.parent_block_hash {
        None => ROOT,
        Some(h) => {
            p.by_engine
                .get(&engine_key(h))
                .ok_or(Unapplied::UnknownParent)?
                .0
        }
    };
    if p.by_engine.len() + s.block_hashes.len() > capacity {
        return Err(Unapplied::OverCapacity);
    }
    for (hash, block) in s
        .block_hashes
        .iter()
        .zip(s.token_ids.chunks_exact(block_size))
    {
        let key = chain(parent, block);
        // A hash stored again (the engine re-published it) replaces, not duplicates.
        if let Some(old) = p.by_engine.insert(engine_key(hash), (key, parent)) {
            release(p, old);
        }
        *p.held.entry(key).or_default() += 1;
        *p.children.entry(parent).or_default() += 1;
        parent = key;
    }
    Ok(())
}

fn remove(p: &mut Pod, r: &BlockRemoved) -> Result<(), Unapplied> {
    if !on_gpu(r.medium.as_deref()) {
        return Err(Unapplied::OtherMedium);
    }
    let mut unknown = false;
    for hash in &r.block_hashes {
        match p.by_engine.remove(&engine_key(hash)) {
            Some(key) => release(p, key),
            None => unknown = true,
        }
    }
    if unknown {
        return Err(Unapplied::UnknownBlock);
    }
    Ok(())
}

fn release(p: &mut Pod, (key, parent): (u64, u64)) {
    decrement(&mut p.held, key);
    decrement(&mut p.children, parent);
}

fn decrement(counts: &mut FxHashMap<u64, u32>, key: u64) {
    if let Some(n) = counts.get_mut(&key) {
        *n -= 1;
        if *n == 0 {
            counts.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::msgpack::IntWidth;
    use crate::events::{BatchWire, Event, EventWire};

    fn hash(n: u64) -> WireHash {
        WireHash::Uint(n, IntWidth::U64)
    }

    fn batch(events: Vec<EventKind>) -> Batch {
        Batch {
            ts: 0.0,
            events: events
                .into_iter()
                .map(|kind| Event {
                    kind,
                    wire: EventWire::Array(0),
                })
                .collect(),
            data_parallel_rank: None,
            wire: BatchWire::Array(3),
        }
    }

    fn stored(hashes: &[u64], parent: Option<u64>, tokens: &[u32], block_size: i64) -> EventKind {
        EventKind::Stored(Box::new(BlockStored {
            block_hashes: hashes.iter().map(|&h| hash(h)).collect(),
            parent_block_hash: parent.map(hash),
            token_ids: tokens.to_vec(),
            block_size,
            ..BlockStored::default()
        }))
    }

    fn removed(hashes: &[u64]) -> EventKind {
        EventKind::Removed(Box::new(BlockRemoved {
            block_hashes: hashes.iter().map(|&h| hash(h)).collect(),
            ..BlockRemoved::default()
        }))
    }

    #[test]
    fn a_prompt_is_held_block_by_block_as_the_events_say() {
        let mut h = Holdings::new(4, 100);
        let prompt: Vec<u32> = (0..14).collect();
        // The prompt's first two blocks, then the third as a decode-time store of its own.
        h.apply("d0", &batch(vec![stored(&[11, 12], None, &prompt[..8], 4)]));
        h.apply(
            "d0",
            &batch(vec![stored(&[13], Some(12), &prompt[8..12], 4)]),
        );
        let keys = h.keys(&prompt);
        assert_eq!(keys.len(), 3);
        assert_eq!(h.held("d0", &keys), 12);
        assert_eq!(h.held("d1", &keys), 0);
        // d1 is not a pod the events named: it holds nothing, as a pod never heard from.
        assert_eq!(h.blocks("d1"), 0);
        // The first two blocks as a prompt: d0 went on past it, d1 did not.
        assert!(h.holds_after("d0", &keys[..2]));
        assert!(!h.holds_after("d0", &keys));
        assert!(!h.holds_after("d1", &keys[..2]));
        assert!(!h.holds_after("d0", &[]));
        // Evicting the middle block ends the match there, whatever follows it.
        h.apply("d0", &batch(vec![removed(&[12])]));
        assert_eq!(h.held("d0", &keys), 4);
        // The same tokens after another prefix are another block.
        let other: Vec<u32> = [99, 99, 99, 99]
            .iter()
            .chain(&prompt[4..8])
            .copied()
            .collect();
        h.apply("d0", &batch(vec![stored(&[21, 22], None, &other, 4)]));
        assert_eq!(h.held("d0", &keys), 4);
        assert_eq!(h.blocks("d0"), 4);
        assert_eq!(h.unapplied("d0").count(), 0);
        h.apply("d0", &batch(vec![EventKind::AllCleared]));
        assert_eq!((h.held("d0", &keys), h.blocks("d0")), (0, 0));
    }

    #[test]
    fn what_the_events_cannot_say_is_counted_and_marks_the_pod_stale() {
        let mut h = Holdings::new(4, 3);
        let tokens: Vec<u32> = (0..16).collect();
        h.apply(
            "d0",
            &batch(vec![
                stored(&[1], None, &tokens[..4], 16),
                stored(&[1], None, &tokens[..3], 4),
                removed(&[7]),
            ]),
        );
        assert_eq!(h.stale("d0"), None);
        h.apply("d0", &batch(vec![stored(&[2], Some(9), &tokens[4..8], 4)]));
        assert_eq!(h.stale("d0"), Some(Unapplied::UnknownParent));
        let counts: Vec<(&str, u64)> = h.unapplied("d0").map(|(k, v)| (k.as_str(), v)).collect();
        assert_eq!(
            counts,
            [
                ("block_size", 1),
                ("shape", 1),
                ("unknown_parent", 1),
                ("unknown_block", 1)
            ]
        );
        // A cleared pod is known again: empty.
        h.apply("d0", &batch(vec![EventKind::AllCleared]));
        assert_eq!(h.stale("d0"), None);
        // Past its capacity (3 blocks) the pod's view stops and says so.
        h.apply("d0", &batch(vec![stored(&[1, 2, 3, 4], None, &tokens, 4)]));
        assert_eq!(h.stale("d0"), Some(Unapplied::OverCapacity));
        assert_eq!(h.blocks("d0"), 0);
    }
}
