//! The router's view of one chat turn: the KV events vLLM emits on the decode pod for
//! generation k (reference/vllm-events.md §3.2), what llm-d's index keeps of them, what a
//! lookup of prompt k+1 finds, and what the P/D decider does with that.

use std::collections::BTreeMap;

use super::decider::{DeciderConfig, Outcome, decide};
use super::{Index, IndexConfig};
use crate::events::msgpack::IntWidth;
use crate::events::{
    Batch, BatchWire, BlockStored, Engine, Event, EventKind, EventWire, Owned, WireHash,
};

#[derive(Debug, Clone, PartialEq)]
pub struct RouterSettings {
    pub engine_block_size: usize,
    pub index: IndexConfig,
    pub decider: DeciderConfig,
}

impl Default for RouterSettings {
    /// vLLM's default block size, llm-d's precise sample's index block, the decider README's
    /// thresholds: the router view's flags' defaults.
    fn default() -> Self {
        RouterSettings {
            engine_block_size: 16,
            index: IndexConfig::new(64),
            decider: DeciderConfig::default(),
        }
    }
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
    pub decision: Outcome,
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

/// A store as vLLM sends it from the decode pod, its blocks not filled in yet.
fn empty_store(bs: usize) -> BlockStored {
    BlockStored {
        block_size: bs as i64,
        medium: Some("GPU".into()),
        extra_keys: Some(Vec::new()),
        group_idx: Some(0),
        kv_cache_spec_kind: Some("full_attention".into()),
        ..BlockStored::default()
    }
}

/// Makes `s` the store of `tokens` (whole blocks) after `parent`: the last block's hash.
fn fill_store(s: &mut BlockStored, tokens: &[u32], parent: Option<u64>, bs: usize) -> u64 {
    let mut prev = parent.unwrap_or(0);
    s.block_hashes.clear();
    for b in tokens.chunks_exact(bs) {
        prev = engine_hash(prev, b);
        s.block_hashes.push(WireHash::Uint(prev, IntWidth::U64));
    }
    s.parent_block_hash = parent.map(|p| WireHash::Uint(p, IntWidth::U64));
    s.token_ids.clear();
    s.token_ids.extend_from_slice(tokens);
    let extra = s.extra_keys.get_or_insert_with(Vec::new);
    extra.clear();
    extra.resize(tokens.len() / bs, Owned::Nil);
    prev
}

/// The token ranges of generation k's stores: one for the prompt's full blocks, then one per
/// block that fills during decode.
fn store_spans(
    prompt_tokens: usize,
    held: usize,
    bs: usize,
) -> impl Iterator<Item = std::ops::Range<usize>> {
    let blocks = held / bs;
    let prefill = (prompt_tokens / bs).min(blocks);
    (prefill > 0)
        .then_some(0..prefill * bs)
        .into_iter()
        .chain((prefill..blocks).map(move |b| b * bs..(b + 1) * bs))
}

/// The events of generation k: one BlockStored for the prompt's full blocks, then one per
/// block that fills during decode. `held` excludes the final stop token, whose KV is never
/// computed, so every full block of `held` is stored.
pub fn generation_events(prompt_tokens: usize, held: &[u32], bs: usize) -> Vec<Event> {
    let mut parent = None;
    store_spans(prompt_tokens, held.len(), bs)
        .map(|span| {
            let mut s = empty_store(bs);
            parent = Some(fill_store(&mut s, &held[span], parent, bs));
            Event {
                kind: EventKind::Stored(Box::new(s)),
                wire: EventWire::Map,
            }
        })
        .collect()
}

/// The router views of one conversation's transitions, one after another. Each starts from
/// an empty index, as on its own, but the index's maps are kept, and so are the request keys
/// it hashed: prompt k+1 repeats the blocks of prompt k, so each block is hashed once per
/// conversation rather than once per transition that stores or looks it up.
pub struct Simulator<'s> {
    settings: &'s RouterSettings,
    index: Index,
    model: String,
    /// The one event of each engine step, refilled for each store.
    batch: Batch,
}

impl<'s> Simulator<'s> {
    pub fn new(settings: &'s RouterSettings) -> Simulator<'s> {
        let mut index = Index::new(settings.index.clone());
        index.remember_keys();
        Simulator {
            settings,
            index,
            model: settings.index.model_name.clone().unwrap_or_default(),
            batch: Batch {
                ts: 0.0,
                events: vec![Event {
                    kind: EventKind::Stored(Box::new(empty_store(settings.engine_block_size))),
                    wire: EventWire::Map,
                }],
                data_parallel_rank: Some(0),
                wire: BatchWire::Array(3),
            },
        }
    }

    pub fn run(&mut self, prompt_tokens: usize, held: &[u32], next: &[u32]) -> RouterView {
        let settings = self.settings;
        let ebs = settings.engine_block_size;
        let index = &mut self.index;
        index.reset();
        let model = &self.model;
        // The events of `generation_events`, one engine step each, as vLLM publishes them.
        let mut emitted = 0;
        let mut parent = None;
        for span in store_spans(prompt_tokens, held.len(), ebs) {
            if let Some(Event {
                kind: EventKind::Stored(s),
                ..
            }) = self.batch.events.first_mut()
            {
                parent = Some(fill_store(s, &held[span], parent, ebs));
            }
            index.apply(POD, model, &self.batch, Engine::Vllm);
            emitted += 1;
        }
        let lcp = held.iter().zip(next).take_while(|(a, b)| a == b).count();
        // vLLM reuses whole matching blocks, and always recomputes the last prompt token.
        let engine_cached =
            (lcp.min(held.len()) / ebs * ebs).min(next.len().saturating_sub(1) / ebs * ebs);
        let blocks = index.cached_blocks(POD, model, next);
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routers::llm_d::Profile;

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
        let v16 = Simulator::new(&settings(16)).run(64, &held, &held);
        assert_eq!(
            (v16.index_visible_tokens, v16.engine_cached_tokens),
            (128, 112)
        );
        assert_eq!(v16.decision.verdict.name(), "decode-only");
        let v64 = Simulator::new(&settings(64)).run(64, &held, &held);
        assert_eq!(v64.index_visible_tokens, 64);
        assert_eq!(
            v64.events_skipped.get("incomplete_canonical_block"),
            Some(&4)
        );
        assert_eq!(v64.decision.verdict.name(), "prefill-decode");
        assert_eq!(v64.decision.non_cached, 64);
    }

    /// The view from [`generation_events`] applied to a new index, each in its own batch.
    fn from_events(s: &RouterSettings, prompt: usize, held: &[u32], next: &[u32]) -> RouterView {
        let mut index = Index::new(s.index.clone());
        let events = generation_events(prompt, held, s.engine_block_size);
        let emitted = events.len();
        for ev in events {
            let batch = Batch {
                ts: 0.0,
                events: vec![ev],
                data_parallel_rank: Some(0),
                wire: BatchWire::Array(3),
            };
            index.apply(POD, "m", &batch, Engine::Vllm);
        }
        let lcp = held.iter().zip(next).take_while(|(a, b)| a == b).count();
        let ebs = s.engine_block_size;
        let blocks = index.cached_blocks(POD, "m", next);
        RouterView {
            engine_block_size: ebs,
            index_block_size: s.index.block_size,
            engine_cached_tokens: (lcp / ebs * ebs).min(next.len().saturating_sub(1) / ebs * ebs),
            index_visible_tokens: blocks * s.index.block_size,
            events_emitted: emitted,
            events_skipped: index.stats.stores_skipped.to_map(),
            decision: decide(&s.decider, next.len(), blocks, s.index.block_size),
        }
    }

    #[test]
    fn a_conversation_simulated_in_turn_gives_each_transition_view_on_its_own() {
        // Prompts that extend the holdings, fork from them, or start over, at block sizes
        // that divide the engine's and that do not, under both profiles.
        let mut next = crate::tokenize::xorshift(0x2545_F491_4F6C_DD1D);
        for (index_bs, profile) in [
            (16, Profile::DigestFirst),
            (64, Profile::DigestFirst),
            (4, Profile::Router202608),
            (64, Profile::Router202608),
            (24, Profile::DigestFirst),
        ] {
            let mut s = settings(index_bs);
            s.index.profile = profile;
            let mut sim = Simulator::new(&s);
            let mut prompt: Vec<u32> = (0..40).collect();
            let mut earlier: Vec<Vec<u32>> = Vec::new();
            for _ in 0..40 {
                let reply = (next() % 90) as usize;
                let mut held = prompt.clone();
                held.extend((0..reply).map(|_| (next() % 50) as u32));
                // A prompt that repeats an earlier transition's holdings finds nothing of
                // them here: each transition starts from an empty index.
                let mut after = match next() % 5 {
                    0 => held[..held.len() / 2].to_vec(),
                    1 => Vec::new(),
                    2 if !earlier.is_empty() => {
                        earlier[(next() % earlier.len() as u64) as usize].clone()
                    }
                    _ => held.clone(),
                };
                earlier.push(held.clone());
                after.extend((0..(next() % 70)).map(|_| (next() % 50) as u32));
                let alone = from_events(&s, prompt.len(), &held, &after);
                assert_eq!(Simulator::new(&s).run(prompt.len(), &held, &after), alone);
                assert_eq!(sim.run(prompt.len(), &held, &after), alone);
                prompt = after;
            }
        }
    }
}
