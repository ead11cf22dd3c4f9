//! The router's view of one chat turn: the KV events vLLM emits on the decode pod for
//! generation k (reference/vllm-events.md §3.2), what llm-d's index keeps of them, what a
//! lookup of prompt k+1 finds, and what the P/D decider does with that.

use std::collections::BTreeMap;

use super::decider::{DeciderConfig, Decision, decide};
use super::{Index, IndexConfig};
use crate::events::msgpack::IntWidth;
use crate::events::{
    Batch, BatchWire, BlockStored, Engine, Event, EventKind, EventWire, Owned, WireHash,
};

#[derive(Debug, Clone)]
pub struct RouterSettings {
    pub engine_block_size: usize,
    pub index: IndexConfig,
    pub decider: DeciderConfig,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RouterView {
    pub engine_block_size: usize,
    pub index_block_size: usize,
    /// What the decode pod's own prefix cache reuses for the next prompt.
    pub engine_cached_tokens: usize,
    /// What a lookup of the next prompt finds in llm-d's index for that pod.
    pub index_visible_tokens: usize,
    pub events_emitted: usize,
    pub events_skipped: BTreeMap<&'static str, u64>,
    pub decision: Decision,
}

const POD: &str = "decode-0";

/// A stand-in for vLLM's chained block hash (only identity and chaining matter to llm-d).
fn engine_hash(parent: u64, tokens: &[u32]) -> u64 {
    // Blocks of up to 64 tokens are laid out on the stack: an allocation per block was most
    // of this function's cost.
    const ON_STACK: usize = 64;
    let mut stack = [0u8; 8 + 4 * ON_STACK];
    let mut heap = Vec::new();
    let len = 8 + 4 * tokens.len();
    let bytes: &mut [u8] = if tokens.len() <= ON_STACK {
        &mut stack[..len]
    } else {
        heap.resize(len, 0);
        &mut heap
    };
    bytes[..8].copy_from_slice(&parent.to_le_bytes());
    for (b, t) in bytes[8..].chunks_exact_mut(4).zip(tokens) {
        b.copy_from_slice(&t.to_le_bytes());
    }
    xxhash_rust::xxh3::xxh3_64(bytes) | 1 << 63
}

fn stored(blocks: &[&[u32]], parent: Option<u64>, bs: usize) -> (Event, u64) {
    let mut hashes = Vec::with_capacity(blocks.len());
    let mut prev = parent.unwrap_or(0);
    let mut tokens = Vec::with_capacity(blocks.len() * bs);
    for b in blocks {
        prev = engine_hash(prev, b);
        hashes.push(WireHash::Uint(prev, IntWidth::U64));
        tokens.extend_from_slice(b);
    }
    let ev = BlockStored {
        block_hashes: hashes,
        parent_block_hash: parent.map(|p| WireHash::Uint(p, IntWidth::U64)),
        token_ids: tokens,
        block_size: bs as i64,
        medium: Some("GPU".into()),
        extra_keys: Some(vec![Owned::Nil; blocks.len()]),
        group_idx: Some(0),
        kv_cache_spec_kind: Some("full_attention".into()),
        ..BlockStored::default()
    };
    (
        Event {
            kind: EventKind::Stored(Box::new(ev)),
            wire: EventWire::Map,
        },
        prev,
    )
}

/// The events of generation k: one BlockStored for the prompt's full blocks, then one per
/// block that fills during decode. `held` excludes the final stop token, whose KV is never
/// computed, so every full block of `held` is stored.
pub fn generation_events(prompt_tokens: usize, held: &[u32], bs: usize) -> Vec<Event> {
    let blocks: Vec<&[u32]> = held.chunks_exact(bs).collect();
    let prefill = (prompt_tokens / bs).min(blocks.len());
    let mut events = Vec::new();
    let mut parent = None;
    if prefill > 0 {
        let (ev, last) = stored(&blocks[..prefill], None, bs);
        events.push(ev);
        parent = Some(last);
    }
    for b in &blocks[prefill..] {
        let (ev, last) = stored(std::slice::from_ref(b), parent, bs);
        events.push(ev);
        parent = Some(last);
    }
    events
}

pub fn simulate(
    settings: &RouterSettings,
    prompt_tokens: usize,
    held: &[u32],
    next: &[u32],
) -> RouterView {
    let ebs = settings.engine_block_size;
    let mut index = Index::new(settings.index.clone());
    let model = settings.index.model_name.clone().unwrap_or_default();
    let events = generation_events(prompt_tokens, held, ebs);
    let emitted = events.len();
    // One engine step per event, as vLLM publishes them.
    let mut batch = Batch {
        ts: 0.0,
        events: Vec::with_capacity(1),
        data_parallel_rank: Some(0),
        wire: BatchWire::Array(3),
    };
    for ev in events {
        batch.events.clear();
        batch.events.push(ev);
        index.apply(POD, &model, &batch, Engine::Vllm);
    }
    let lcp = held.iter().zip(next).take_while(|(a, b)| a == b).count();
    // vLLM reuses whole matching blocks, and always recomputes the last prompt token.
    let engine_cached =
        (lcp.min(held.len()) / ebs * ebs).min(next.len().saturating_sub(1) / ebs * ebs);
    let blocks = index.cached_blocks(POD, &model, next);
    let decision = decide(
        &settings.decider,
        next.len(),
        blocks,
        settings.index.block_size,
    );
    RouterView {
        engine_block_size: ebs,
        index_block_size: settings.index.block_size,
        engine_cached_tokens: engine_cached,
        index_visible_tokens: blocks * settings.index.block_size,
        events_emitted: emitted,
        events_skipped: index.stats.stores_skipped.to_map(),
        decision,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_hash_is_the_xxh3_of_the_parent_and_token_bytes() {
        for n in [0usize, 1, 16, 63, 64, 65, 200] {
            let tokens: Vec<u32> = (0..n as u32)
                .map(|i| i.wrapping_mul(2_654_435_761))
                .collect();
            let mut bytes = 7u64.to_le_bytes().to_vec();
            for t in &tokens {
                bytes.extend_from_slice(&t.to_le_bytes());
            }
            let whole = xxhash_rust::xxh3::xxh3_64(&bytes) | 1 << 63;
            assert_eq!(engine_hash(7, &tokens), whole, "{n} tokens");
        }
    }

    fn settings(index_bs: usize) -> RouterSettings {
        let mut index = IndexConfig::new(index_bs);
        index.model_name = Some("m".into());
        RouterSettings {
            engine_block_size: 16,
            index,
            decider: DeciderConfig {
                non_cached_tokens: 16,
                prompt_tokens: 0,
            },
        }
    }

    #[test]
    fn reply_blocks_are_invisible_at_block_64() {
        // Prompt 64 + reply 64 held; the next prompt is exactly the holdings.
        let held: Vec<u32> = (1..=128).collect();
        let events = generation_events(64, &held, 16);
        assert_eq!(events.len(), 5, "one prefill event, four decode blocks");
        let v16 = simulate(&settings(16), 64, &held, &held);
        assert_eq!(
            (v16.index_visible_tokens, v16.engine_cached_tokens),
            (128, 112)
        );
        assert_eq!(v16.decision.verdict.name(), "decode-only");
        let v64 = simulate(&settings(64), 64, &held, &held);
        assert_eq!(v64.index_visible_tokens, 64);
        assert_eq!(
            v64.events_skipped.get("incomplete_canonical_block"),
            Some(&4)
        );
        assert_eq!(v64.decision.verdict.name(), "prefill-decode");
        assert_eq!(v64.decision.non_cached, 64);
    }
}
