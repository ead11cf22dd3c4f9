//! Replay of a KV-event capture through llm-d index emulations at one or more block sizes,
//! with the engine's own view (the sequences it holds) reconstructed from parent chains.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

use crate::events::frames::{CaptureReader, MessageRef};
use crate::events::msgpack::{DecodeError, DecodeErrorKind, clip, short_eq};
use crate::events::{Batch, BlockStored, Engine, EventKind, decode_batch_with};
use crate::finding::{Finding, FindingKind};
use crate::routers::llm_d::{
    Counts, DropReason, Index, IndexConfig, SkipReason, message_drop_reason, names_endpoint,
    parse_topic, receives,
};
use crate::tally::KindCounts;

#[derive(Debug, Clone)]
pub struct ReplayOptions {
    pub views: Vec<IndexConfig>,
    /// Dynamo indexers to replay beside llm-d's views: each at a block size, or at the
    /// engine's, learned from the first stored event (as Dynamo's publisher takes it).
    pub dynamo: Vec<Option<usize>>,
    pub engine: Engine,
    pub keep_going: bool,
    /// Pod name for messages without a topic (raw msgpack captures).
    pub default_pod: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct EventCounts {
    pub block_stored: u64,
    pub block_removed: u64,
    pub all_blocks_cleared: u64,
    /// BlockStored events with a token id that is negative or above u32::MAX. vLLM never
    /// sends one; llm-d casts them to uint32 (negatives wrap), and so does kvaudit, which
    /// counts them rather than wrap them unseen.
    pub token_ids_out_of_range: u64,
}

/// A message kvaudit itself could not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed {
    pub offset: u64,
    pub reason: String,
}

/// Messages kvaudit could not decode, counted by the error's kind (a handful exist, so the
/// summary stays short whatever the input) in order of first appearance, with the first few
/// of each kept as examples.
pub type MalformedCounts = KindCounts<DecodeErrorKind, Malformed>;

/// Longest reason kept in an example (a reason may quote a string from the input).
const REASON_MAX: usize = 200;

/// Why a view of `config` does not index a message under `topic` (pod `pod`) that its
/// adapter drops for `adapter` (if it does), in llm-d's order: the subscriber's topic filter,
/// the adapter, then (one socket for every pod) a pod no scored endpoint is named as.
fn view_drop(
    config: &IndexConfig,
    topic: Option<&str>,
    pod: &str,
    adapter: Option<DropReason>,
) -> Option<DropReason> {
    if !receives(&config.topic_filter, topic) {
        return Some(DropReason::TopicFilter);
    }
    if adapter.is_some() {
        return adapter;
    }
    (config.global_socket && topic.is_some() && !names_endpoint(pod))
        .then_some(DropReason::PodNotEndpoint)
}

fn malformed_example(offset: u64, reason: &str) -> Malformed {
    Malformed {
        offset,
        reason: clip(reason, REASON_MAX).to_string(),
    }
}

/// One block the engine holds (for sequence reconstruction); its tokens live in the pod's
/// arena, so storing a block costs no allocation of its own. Which blocks are leaves is
/// worked out once at the end, so storing and evicting a block touch only its own entry
/// (evictions hit old, cache-cold blocks; a parent's child count cost a second miss each).
struct Node {
    parent: Option<u64>,
    start: usize,
    len: u32,
    order: u64,
}

#[derive(Default)]
struct PodTree {
    nodes: FxHashMap<u64, Node>,
    arena: Vec<u32>,
    live_tokens: usize,
}

impl PodTree {
    fn tokens(&self, node: &Node) -> &[u32] {
        &self.arena[node.start..node.start + node.len as usize]
    }

    fn remove(&mut self, hash: u64) {
        if let Some(node) = self.nodes.remove(&hash) {
            self.live_tokens -= node.len as usize;
        }
        // Evicted blocks leave holes; compact once they outweigh the live tokens, so memory
        // follows what the engine holds, not the length of the capture.
        if self.arena.len() > 2 * self.live_tokens + (1 << 16) {
            let mut arena = Vec::with_capacity(self.live_tokens * 2);
            for node in self.nodes.values_mut() {
                let start = arena.len();
                arena.extend_from_slice(&self.arena[node.start..node.start + node.len as usize]);
                node.start = start;
            }
            self.arena = arena;
        }
    }

    /// Blocks no held block names as its parent, oldest first.
    fn leaves(&self) -> Vec<u64> {
        let parents: rustc_hash::FxHashSet<u64> =
            self.nodes.values().filter_map(|n| n.parent).collect();
        let mut leaves: Vec<(u64, u64)> = self
            .nodes
            .iter()
            .filter(|(h, _)| !parents.contains(h))
            .map(|(h, n)| (n.order, *h))
            .collect();
        leaves.sort_unstable();
        leaves.into_iter().map(|(_, h)| h).collect()
    }

    fn clear(&mut self) {
        self.nodes.clear();
        self.arena.clear();
        self.live_tokens = 0;
    }
}

/// A chain of blocks the engine holds, root to leaf, and what each view's lookup finds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sequence {
    pub pod: String,
    pub model: String,
    pub engine_tokens: usize,
    /// One per view, in view order.
    pub index_tokens: Vec<usize>,
}

/// An explicit lookup (`--lookup`), answered per view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LookupRequest {
    pub tokens: Vec<u32>,
    pub pod: Option<String>,
    pub model: Option<String>,
}

/// Why a lookup file was refused (entries counted from 0).
#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    #[error("expected a JSON list")]
    NotAList,
    #[error("entry {0} needs a list of token ids")]
    NoTokenIds(usize),
    #[error("entry {0} must be a list or an object")]
    NotAnEntry(usize),
}

impl LookupRequest {
    /// `[[1,2,3], {"tokens": [..], "pod": "..", "model": ".."}]`: a list of token lists or
    /// of objects naming the pod and model to look up in.
    pub fn parse_list(v: &serde_json::Value) -> Result<Vec<LookupRequest>, LookupError> {
        use serde_json::Value as Json;
        let items = v.as_array().ok_or(LookupError::NotAList)?;
        let ids = |v: &Json, i: usize| -> Result<Vec<u32>, LookupError> {
            v.as_array()
                .and_then(|a| {
                    a.iter()
                        .map(|x| x.as_u64().and_then(|t| u32::try_from(t).ok()))
                        .collect::<Option<Vec<_>>>()
                })
                .ok_or(LookupError::NoTokenIds(i))
        };
        items
            .iter()
            .enumerate()
            .map(|(i, item)| match item {
                Json::Array(_) => Ok(LookupRequest {
                    tokens: ids(item, i)?,
                    pod: None,
                    model: None,
                }),
                Json::Object(o) => Ok(LookupRequest {
                    tokens: ids(o.get("tokens").unwrap_or(&Json::Null), i)?,
                    pod: o.get("pod").and_then(Json::as_str).map(str::to_string),
                    model: o.get("model").and_then(Json::as_str).map(str::to_string),
                }),
                _ => Err(LookupError::NotAnEntry(i)),
            })
            .collect()
    }
}

/// A whole capture replayed: the report, the input's format, and where bad input stopped it
/// (byte offset and reason) when it did.
pub struct ReplayRun {
    pub report: ReplayReport,
    pub format: &'static str,
    pub stopped: Option<(u64, String)>,
}

/// Replay every message of `reader` through the emulation in one streaming pass, then look
/// up `lookups`. `on_progress` is told the byte offset now and then (every 4096 messages).
pub fn run<R: std::io::Read>(
    mut reader: CaptureReader<R>,
    options: ReplayOptions,
    lookups: &[LookupRequest],
    mut on_progress: impl FnMut(u64),
) -> ReplayRun {
    let mut replayer = Replayer::new(options);
    let mut stopped: Option<(u64, String)> = None;
    let mut n: u64 = 0;
    while let Some(read) = reader.next_ref() {
        let msg = match read {
            Ok(m) => m,
            Err(e) => {
                stopped = Some((e.offset, e.reason));
                break;
            }
        };
        if let Err(e) = replayer.feed(msg) {
            stopped = Some((e.offset as u64, e.into_info().reason));
            break;
        }
        n += 1;
        if n.is_multiple_of(4096) {
            on_progress(reader.offset());
        }
    }
    ReplayRun {
        report: replayer.finish(lookups),
        format: reader.format().name(),
        stopped,
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LookupResult {
    pub pod: String,
    pub model: String,
    pub tokens: usize,
    pub index_tokens: Vec<usize>,
}

pub struct ViewReport {
    pub config: IndexConfig,
    pub stats: crate::routers::llm_d::Stats,
}

/// A Dynamo indexer's replay: its block size (none when no stored event taught it one) and
/// what it did with the events. Its lookups follow llm-d's views in `index_tokens`.
pub struct DynamoReport {
    pub block_size: Option<usize>,
    pub stats: crate::routers::dynamo::TreeStats,
}

pub struct ReplayReport {
    pub messages: u64,
    pub events: EventCounts,
    pub malformed: MalformedCounts,
    /// BlockStored events kvaudit's engine view could not split into blocks (by reason: a
    /// block size that is not positive, or tokens that are not hashes × block size). llm-d
    /// checks this only for events with a group (`stores_skipped` of each view).
    pub engine_skipped: Counts<SkipReason>,
    pub views: Vec<ViewReport>,
    pub dynamo: Vec<DynamoReport>,
    pub sequences: Vec<Sequence>,
    /// Leaf chains whose root the engine no longer holds (not looked up).
    pub incomplete_sequences: u64,
    pub lookups: Vec<LookupResult>,
    /// Bytes read.
    pub bytes: u64,
}

impl ReplayReport {
    /// What the replay found: undecodable messages, events the engine view or the index
    /// skipped or dropped, out-of-range token ids, and sequences the index sees less of than
    /// the engine holds.
    pub fn findings(&self) -> Vec<Finding> {
        let mut out = Vec::new();
        if !self.malformed.is_empty() {
            out.push(Finding::new(
                FindingKind::MalformedMessages,
                "capture",
                format!("{} messages could not be decoded", self.malformed.total()),
            ));
        }
        if !self.engine_skipped.is_empty() {
            out.push(Finding::new(
                FindingKind::EngineSkipped,
                "engine view",
                format!(
                    "{} BlockStored events cannot be split into blocks",
                    self.engine_skipped.total()
                ),
            ));
        }
        if self.events.token_ids_out_of_range > 0 {
            out.push(Finding::new(
                FindingKind::TokenIdsOutOfRange,
                "capture",
                format!(
                    "{} events carry token ids outside u32",
                    self.events.token_ids_out_of_range
                ),
            ));
        }
        for v in &self.views {
            let subject = format!("index block {}", v.config.block_size);
            if !v.stats.messages_dropped.is_empty() {
                out.push(Finding::new(
                    FindingKind::MessagesDropped,
                    subject.clone(),
                    format!("{} messages dropped", v.stats.messages_dropped.total()),
                ));
            }
            if !v.stats.stores_skipped.is_empty() {
                out.push(Finding::new(
                    FindingKind::StoresSkipped,
                    subject.clone(),
                    format!(
                        "{} BlockStored events skipped",
                        v.stats.stores_skipped.total()
                    ),
                ));
            }
        }
        // One finding per view, not per sequence: a capture can hold millions of sequences.
        for (i, v) in self.views.iter().enumerate() {
            let behind: Vec<&Sequence> = self
                .sequences
                .iter()
                .filter(|s| s.index_tokens.get(i).is_some_and(|&t| t < s.engine_tokens))
                .collect();
            if !behind.is_empty() {
                let held: usize = behind.iter().map(|s| s.engine_tokens).sum();
                let seen: usize = behind.iter().map(|s| s.index_tokens[i]).sum();
                out.push(Finding::new(
                    FindingKind::IndexBehindEngine,
                    format!("index block {}", v.config.block_size),
                    format!(
                        "{} of {} sequences: the engine holds {held} tokens, the index finds {seen}",
                        behind.len(),
                        self.sequences.len()
                    ),
                ));
            }
        }
        out
    }

    pub fn has_findings(&self) -> bool {
        !self.findings().is_empty()
    }
}

pub struct Replayer {
    opts: ReplayOptions,
    views: Vec<Index>,
    dynamo: Vec<crate::routers::dynamo::RadixTree>,
    /// Every pod seen: name, topic model, the blocks its engine holds.
    pods: Vec<(String, String, PodTree)>,
    /// Pod name → its place in `pods` (a scan per new topic made many pods quadratic).
    pod_ids: FxHashMap<String, usize>,
    /// Index of the pod of the previous message (captures come in runs of one pod).
    last_pod: usize,
    messages: u64,
    events: EventCounts,
    malformed: MalformedCounts,
    engine_skipped: Counts<SkipReason>,
    order: u64,
    bytes: u64,
    pool: crate::events::Pool,
}

impl Replayer {
    pub fn new(opts: ReplayOptions) -> Replayer {
        let views = opts.views.iter().cloned().map(Index::new).collect();
        let dynamo = opts
            .dynamo
            .iter()
            .map(|&b| crate::routers::dynamo::RadixTree::new(b))
            .collect();
        Replayer {
            opts,
            views,
            dynamo,
            pods: Vec::new(),
            pod_ids: FxHashMap::default(),
            last_pod: 0,
            messages: 0,
            events: EventCounts::default(),
            malformed: MalformedCounts::default(),
            engine_skipped: Counts::default(),
            order: 0,
            bytes: 0,
            pool: crate::events::Pool::default(),
        }
    }

    /// Decode and apply one message. A payload kvaudit cannot decode is an error, unless
    /// `keep_going`, in which case it is counted as malformed (llm-d drops it too).
    pub fn feed(&mut self, msg: MessageRef) -> Result<(), DecodeError> {
        self.bytes = msg.payload_offset + msg.payload.len() as u64;
        let decoded = self.decode(msg.payload, msg.payload_offset as usize);
        self.feed_decoded(msg.topic, decoded)
    }

    /// Decode a payload with the replayer's own pool, which [`feed_decoded`] gives the batch
    /// back to (`base`: the payload's offset in its file, for error positions).
    ///
    /// [`feed_decoded`]: Self::feed_decoded
    pub fn decode(&mut self, payload: &[u8], base: usize) -> Result<Batch, DecodeError> {
        decode_batch_with(payload, base, self.opts.engine, &mut self.pool)
    }

    /// A message from [`decode`](Self::decode), for a caller that looks at the batch itself
    /// first (live capture counts its events).
    pub fn feed_decoded(
        &mut self,
        topic: Option<&str>,
        decoded: Result<Batch, DecodeError>,
    ) -> Result<(), DecodeError> {
        let batch = match decoded {
            Ok(b) => b,
            Err(e) if !self.opts.keep_going => return Err(e),
            Err(e) => {
                self.messages += 1;
                self.malformed
                    .add(e.kind, || malformed_example(e.offset as u64, &e.reason));
                let undecoded = Some(DropReason::BatchDecodeError);
                for v in &mut self.views {
                    // A message llm-d never receives is never decoded either.
                    let why = view_drop(v.config(), topic, "", undecoded);
                    v.stats
                        .messages_dropped
                        .add(why.unwrap_or(DropReason::BatchDecodeError));
                }
                return Ok(());
            }
        };
        self.messages += 1;
        let default_pod = std::mem::take(&mut self.opts.default_pod);
        let (pod, model) = match topic {
            Some(t) => parse_topic(t),
            None => (default_pod.as_str(), ""),
        };
        self.apply_under(topic, pod, model, &batch);
        self.opts.default_pod = default_pod;
        self.pool.recycle(batch);
        Ok(())
    }

    /// Apply an already decoded batch: the step every message takes after decoding (tests
    /// give it batches built by hand).
    pub fn apply(&mut self, pod: &str, model: &str, batch: &Batch) {
        self.apply_under(None, pod, model, batch);
    }

    /// [`apply`](Self::apply) for a message published under `topic`: a view whose topic
    /// filter it does not pass never receives it.
    fn apply_under(&mut self, topic: Option<&str>, pod: &str, model: &str, batch: &Batch) {
        let at = self.pod_slot(pod, model);
        let dropped = message_drop_reason(batch, self.opts.engine).map(|(reason, _)| reason);
        for v in &mut self.views {
            let dropped = view_drop(v.config(), topic, pod, dropped);
            v.apply_checked(pod, model, batch, dropped);
        }
        for d in &mut self.dynamo {
            d.apply(pod, batch);
        }
        self.track_engine(at, batch);
    }

    fn pod_slot(&mut self, pod: &str, model: &str) -> usize {
        if self
            .pods
            .get(self.last_pod)
            .is_some_and(|p| short_eq(p.0.as_bytes(), pod.as_bytes()))
        {
            return self.last_pod;
        }
        let at = match self.pod_ids.get(pod) {
            Some(&i) => i,
            None => {
                self.pods
                    .push((pod.to_string(), model.to_string(), PodTree::default()));
                self.pod_ids.insert(pod.to_string(), self.pods.len() - 1);
                self.pods.len() - 1
            }
        };
        self.last_pod = at;
        at
    }

    /// Count the events and apply them to the pod's engine tree (one pass).
    fn track_engine(&mut self, at: usize, batch: &Batch) {
        let tree = &mut self.pods[at].2;
        for ev in &batch.events {
            match &ev.kind {
                EventKind::Stored(s) => {
                    self.events.block_stored += 1;
                    if s.token_ids_out_of_range {
                        self.events.token_ids_out_of_range += 1;
                    }
                    if on_gpu(s.medium.as_deref()) {
                        self.order += 1;
                        if let Err(reason) = insert_blocks(tree, s, self.order) {
                            self.engine_skipped.add(reason);
                        }
                    }
                }
                EventKind::Removed(r) => {
                    self.events.block_removed += 1;
                    if on_gpu(r.medium.as_deref()) {
                        for h in &r.block_hashes {
                            tree.remove(h.as_u64());
                        }
                    }
                }
                EventKind::AllCleared => {
                    self.events.all_blocks_cleared += 1;
                    tree.clear();
                }
            }
        }
    }

    /// Event bodies and vectors the decoding pool keeps for reuse (a memory test's probe).
    #[cfg(test)]
    pub(crate) fn pooled(&self) -> usize {
        self.pool.held()
    }

    /// Skip reasons so far, summed over views (for live status lines).
    pub fn skipped_so_far(&self) -> BTreeMap<&'static str, u64> {
        let mut out = BTreeMap::new();
        for v in &self.views {
            for (k, n) in v
                .stats
                .stores_skipped
                .iter()
                .chain(v.stats.messages_dropped.iter())
            {
                *out.entry(k).or_default() += n;
            }
        }
        out
    }

    pub fn finish(mut self, lookups: &[LookupRequest]) -> ReplayReport {
        let mut sequences = Vec::new();
        let mut incomplete = 0;
        self.pods.sort_by(|a, b| a.0.cmp(&b.0));
        self.pod_ids.clear();
        for (pod, model, tree) in &self.pods {
            for hash in tree.leaves() {
                let Some(tokens) = chain_tokens(tree, hash) else {
                    incomplete += 1;
                    continue;
                };
                let index_tokens = self
                    .views
                    .iter_mut()
                    .map(|v| v.lookup_tokens(pod, model, &tokens))
                    .chain(self.dynamo.iter().map(|d| d.lookup_tokens(pod, &tokens)))
                    .collect();
                sequences.push(Sequence {
                    pod: pod.clone(),
                    model: model.clone(),
                    engine_tokens: tokens.len(),
                    index_tokens,
                });
            }
        }
        let mut results = Vec::new();
        for l in lookups {
            let pods: Vec<String> = match &l.pod {
                Some(p) => vec![p.clone()],
                None => self.pods.iter().map(|p| p.0.clone()).collect(),
            };
            for pod in pods {
                let model = l
                    .model
                    .clone()
                    .or_else(|| {
                        let at = self
                            .pods
                            .binary_search_by(|p| p.0.as_str().cmp(&pod))
                            .ok()?;
                        Some(self.pods[at].1.clone())
                    })
                    .unwrap_or_default();
                let index_tokens = self
                    .views
                    .iter_mut()
                    .map(|v| v.lookup_tokens(&pod, &model, &l.tokens))
                    .chain(self.dynamo.iter().map(|d| d.lookup_tokens(&pod, &l.tokens)))
                    .collect();
                results.push(LookupResult {
                    pod,
                    model,
                    tokens: l.tokens.len(),
                    index_tokens,
                });
            }
        }
        ReplayReport {
            messages: self.messages,
            events: self.events,
            malformed: self.malformed,
            engine_skipped: self.engine_skipped,
            views: self
                .views
                .into_iter()
                .map(|v| ViewReport {
                    config: v.config().clone(),
                    stats: v.stats,
                })
                .collect(),
            dynamo: self
                .dynamo
                .into_iter()
                .map(|d| DynamoReport {
                    block_size: d.block_size,
                    stats: d.stats,
                })
                .collect(),
            sequences,
            incomplete_sequences: incomplete,
            lookups: results,
            bytes: self.bytes,
        }
    }
}

fn on_gpu(medium: Option<&str>) -> bool {
    medium.is_none_or(|m| m.is_empty() || m.eq_ignore_ascii_case("gpu"))
}

/// Add a stored event's blocks to the engine tree; an event that cannot be split into its
/// blocks is left out, and why is returned. Every number here comes off the wire, so the
/// arithmetic is checked: a block size near 2^62 wrapped `n * block_size` onto the token
/// count and the slicing then ran out of range.
fn insert_blocks(tree: &mut PodTree, s: &BlockStored, order: u64) -> Result<(), SkipReason> {
    let n = s.block_hashes.len();
    if s.token_ids.is_empty() {
        return Ok(()); // a tier update (or nothing): no tokens to place
    }
    if s.block_size <= 0 {
        return Err(SkipReason::InvalidBlockSize);
    }
    let bs = usize::try_from(s.block_size).map_err(|_| SkipReason::NonDenseBlockSpan)?;
    if n.checked_mul(bs) != Some(s.token_ids.len()) {
        return Err(SkipReason::NonDenseBlockSpan);
    }
    // Dense, so bs ≤ the token count, which the payload size limit keeps far below 2^32.
    let len = u32::try_from(bs).map_err(|_| SkipReason::NonDenseBlockSpan)?;
    let mut parent = s.parent_block_hash.as_ref().map(|h| h.as_u64());
    for (i, h) in s.block_hashes.iter().enumerate() {
        let h = h.as_u64();
        if let std::collections::hash_map::Entry::Vacant(slot) = tree.nodes.entry(h) {
            let start = tree.arena.len();
            tree.arena
                .extend_from_slice(&s.token_ids[i * bs..(i + 1) * bs]);
            tree.live_tokens += bs;
            slot.insert(Node {
                parent,
                start,
                len,
                order,
            });
        }
        parent = Some(h);
    }
    Ok(())
}

/// Tokens from the root to `leaf`, or `None` when an ancestor is no longer held.
fn chain_tokens(tree: &PodTree, leaf: u64) -> Option<Vec<u32>> {
    let mut blocks: Vec<&Node> = Vec::new();
    let mut at = Some(leaf);
    while let Some(h) = at {
        let node = tree.nodes.get(&h)?;
        blocks.push(node);
        at = node.parent;
        if blocks.len() > tree.nodes.len() {
            return None; // a cycle: corrupt capture
        }
    }
    Some(
        blocks
            .iter()
            .rev()
            .flat_map(|n| tree.tokens(n).iter().copied())
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{BatchWire, BlockRemoved, Event, EventWire, WireHash};
    use crate::routers::llm_d::view::generation_events;

    fn batch(events: Vec<Event>) -> Batch {
        Batch {
            ts: 0.0,
            events,
            data_parallel_rank: Some(0),
            wire: BatchWire::Array(3),
        }
    }

    fn replayer() -> Replayer {
        Replayer::new(ReplayOptions {
            views: vec![IndexConfig::new(16)],
            dynamo: Vec::new(),
            engine: Engine::Vllm,
            keep_going: false,
            default_pod: "p".into(),
        })
    }

    #[test]
    fn malformed_messages_are_counted_by_kind_with_bounded_examples() {
        let mut m = MalformedCounts::default();
        let mut add = |offset: u64, kind, reason: &str| {
            m.add(kind, || malformed_example(offset, reason));
        };
        for i in 0..10u64 {
            add(
                i,
                DecodeErrorKind::Truncated,
                &format!("truncated msgpack: {i} more bytes expected"),
            );
        }
        add(
            99,
            DecodeErrorKind::Schema,
            &format!("unknown event tag \"{}\"", "x".repeat(1000)),
        );
        for i in 0..100u64 {
            add(i, DecodeErrorKind::TypeMismatch, &format!("kind {i}"));
        }
        assert_eq!(m.total(), 111);
        let kinds: Vec<_> = m.kinds().collect();
        assert_eq!(kinds[0].kind, DecodeErrorKind::Truncated);
        assert_eq!(kinds[0].count, 10);
        let offsets: Vec<u64> = kinds[0].examples.iter().map(|e| e.offset).collect();
        assert_eq!(offsets, [0, 1, 2]);
        assert_eq!(kinds[1].kind, DecodeErrorKind::Schema);
        assert_eq!(kinds[1].examples[0].reason.len(), REASON_MAX);
        assert_eq!(kinds.len(), 3);
        assert_eq!((kinds[2].count, kinds[2].examples.len()), (100, 3));
    }

    /// A leaf is a block no held block extends, whatever order the events came in: a child
    /// stored before its parent leaves one sequence, not two.
    #[test]
    fn leaves_do_not_depend_on_event_order() {
        let mut r = replayer();
        let tokens: Vec<u32> = (1..=48).collect();
        let mut events = generation_events(16, &tokens, 16);
        events.reverse();
        r.apply("p", "m", &batch(events));
        let report = r.finish(&[]);
        assert_eq!(report.sequences.len(), 1);
        assert_eq!(report.sequences[0].engine_tokens, 48);
        assert_eq!(report.incomplete_sequences, 0);
    }

    #[test]
    fn evicted_blocks_are_compacted_away_and_sequences_stay_exact() {
        let mut r = replayer();
        let kept: Vec<u32> = (1..=128).collect();
        r.apply("p", "m", &batch(generation_events(64, &kept, 16)));
        // Many short-lived chains: stored, then evicted, far more tokens than are held.
        for i in 0..6000u32 {
            let tokens: Vec<u32> = (0..16).map(|t| 1_000_000 + i * 16 + t).collect();
            let events = generation_events(16, &tokens, 16);
            let hashes: Vec<WireHash> = events
                .iter()
                .flat_map(|e| match &e.kind {
                    EventKind::Stored(s) => s.block_hashes.clone(),
                    _ => Vec::new(),
                })
                .collect();
            r.apply("p", "m", &batch(events));
            let removed = BlockRemoved {
                block_hashes: hashes,
                medium: Some("GPU".into()),
                ..BlockRemoved::default()
            };
            r.apply(
                "p",
                "m",
                &batch(vec![Event {
                    kind: EventKind::Removed(Box::new(removed)),
                    wire: EventWire::Map,
                }]),
            );
        }
        let tree = &r.pods[0].2;
        assert!(
            tree.arena.len() < 3 * tree.live_tokens + (1 << 16) + 16,
            "arena {} for {} live",
            tree.arena.len(),
            tree.live_tokens
        );
        assert_eq!(tree.live_tokens, 128);
        let report = r.finish(&[]);
        assert_eq!(report.sequences.len(), 1);
        assert_eq!(report.sequences[0].engine_tokens, 128);
        assert_eq!(report.sequences[0].index_tokens, vec![128]);
    }
}
