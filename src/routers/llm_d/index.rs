//! llm-d's precise prefix index, emulated: how KV events become index entries, what is
//! skipped and why, and what a lookup finds (reference/llm-d.md §1–§5).

use rustc_hash::FxHashMap;

use super::hash::{HashAlgo, KeyHasher, KeyMemo};
use super::profile::Profile;
use super::reasons::{DropReason, SkipReason};
use super::stats;
use super::stats::Stats;
use crate::events::msgpack::{IntWidth, short_eq};
use crate::events::{
    Batch, BatchWire, BlockRemoved, BlockStored, Engine, EventKind, EventWire, Owned, WireHash,
};

/// llm-d's `kvEventsConfig.topicFilter` when the config leaves it out (llm-d-router ebab687).
pub const DEFAULT_TOPIC_FILTER: &str = "kv@";

#[derive(Debug, Clone, PartialEq)]
pub struct IndexConfig {
    pub block_size: usize,
    pub algo: HashAlgo,
    pub seed: String,
    /// Overrides the model name of every topic.
    pub model_name: Option<String>,
    pub profile: Profile,
    /// Entries per request key (llm-d's per-key LRU).
    pub pod_cache_size: usize,
    /// `kvEventsConfig.topicFilter`: llm-d's subscriber receives only topics starting with it.
    pub topic_filter: String,
    /// `kvEventsConfig.zmqEndpoint` is set: one bound socket for every pod, each message's pod
    /// taken from its topic, and scored only when that names an endpoint (`address:port`).
    pub global_socket: bool,
}

impl IndexConfig {
    pub fn new(block_size: usize) -> IndexConfig {
        IndexConfig {
            block_size,
            algo: HashAlgo::CborFnv,
            seed: String::new(),
            model_name: None,
            profile: Profile::DigestFirst,
            pod_cache_size: 10,
            topic_filter: DEFAULT_TOPIC_FILTER.to_string(),
            global_socket: false,
        }
    }
}

/// `kv@<pod>@<model>` → (pod, model); any other topic is the pod, with no model.
pub fn parse_topic(topic: &str) -> (&str, &str) {
    // One pass over the bytes for the two separators (called once per message).
    let mut at = [0usize; 2];
    let mut found = 0;
    for (i, &b) in topic.as_bytes().iter().enumerate() {
        if b == b'@' {
            if found == 2 {
                return (topic, "");
            }
            at[found] = i;
            found += 1;
        }
    }
    match found {
        2 => (&topic[at[0] + 1..at[1]], &topic[at[1] + 1..]),
        _ => (topic, ""),
    }
}

/// One pod's entry on a request key. llm-d's entry also has a `speculative` flag, which
/// events never set (always false here, so not stored). The group is -1 when absent: a
/// negative group makes llm-d drop the whole message, so it never reaches an entry. 16 bytes,
/// so the request-key map's slots stay small (its lookups are the index's cache misses).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct PodEntry {
    pod: u32,
    tier: u32,
    group: i64,
}

impl PodEntry {
    fn new(pod: u32, tier: u32, group: Option<i64>) -> PodEntry {
        PodEntry {
            pod,
            tier,
            group: group.unwrap_or(-1),
        }
    }
}

#[derive(Debug, Clone)]
struct GroupInfo {
    kind: crate::events::Text,
    /// `indexable(kind)`, worked out when the kind is recorded rather than per event.
    indexable: bool,
}

impl GroupInfo {
    fn new(kind: &crate::events::Text) -> GroupInfo {
        GroupInfo {
            kind: kind.clone(),
            indexable: indexable(kind),
        }
    }
}

/// What the index keeps per pod, found by the pod's id rather than hashed per event.
#[derive(Default)]
struct PodState {
    /// Group index → cache kind as the pod's events named it (a pod has a few groups: a scan).
    groups: Vec<(i64, GroupInfo)>,
    /// Stores per (tier, group, engine hash): a removal is forwarded once the last is gone.
    dedup: FxHashMap<(u32, i64, u64), u32>,
}

impl PodState {
    fn group(&self, g: i64) -> Option<&GroupInfo> {
        self.groups.iter().find(|(id, _)| *id == g).map(|(_, i)| i)
    }
}

/// The entries of one request key (llm-d's per-key LRU, most recent last).
type PodCache = smallvec::SmallVec<[PodEntry; 2]>;
/// The request keys one engine hash maps to.
type RequestKeys = smallvec::SmallVec<[u64; 2]>;

/// The state of one llm-d index at one block size.
pub struct Index {
    cfg: IndexConfig,
    hasher: KeyHasher,
    roots: FxHashMap<String, u64>,
    data: FxHashMap<u64, PodCache>,
    engine_to_request: FxHashMap<u64, RequestKeys>,
    /// Indexed by pod id.
    pod_state: Vec<PodState>,
    pods: Interner,
    /// The pod of the previous message (captures come in runs of one pod).
    last_pod: Option<u32>,
    tiers: Interner,
    /// Request and engine keys of the store being applied (reused).
    scratch: (Vec<u64>, Vec<u64>),
    /// Request keys hashed before, when asked for (see [`Index::remember_keys`]).
    memo: Option<KeyMemo>,
    pub stats: Stats,
}

#[derive(Default)]
struct Interner {
    names: Vec<String>,
    ids: FxHashMap<String, u32>,
}

impl Interner {
    fn id(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(name.to_string());
        self.ids.insert(name.to_string(), id);
        id
    }

    fn get(&self, name: &str) -> Option<u32> {
        self.ids.get(name).copied()
    }
}

/// The interner's first entry (see `Index::new`).
const GPU_TIER: u32 = 0;

fn indexable(kind: &str) -> bool {
    matches!(
        kind,
        "full_attention" | "mla_attention" | "sink_full_attention"
    )
}

/// llm-d's `getHashAsUint64`: only 64-bit integers and non-empty bytes are accepted.
fn llm_d_hash(h: &WireHash) -> Option<u64> {
    match h {
        WireHash::Uint(_, IntWidth::U64) | WireHash::Int(_, IntWidth::I64) | WireHash::Bytes(_) => {
            Some(h.as_u64())
        }
        _ => None,
    }
}

/// Whether llm-d's subscriber receives a message under `topic` (one read without its topic,
/// from a bare msgpack file, is taken as received).
pub fn receives(topic_filter: &str, topic: Option<&str>) -> bool {
    topic.is_none_or(|t| t.starts_with(topic_filter))
}

/// Whether `pod` reads as an endpoint's `address:port`, as llm-d names the endpoints it
/// scores: an IP address (or an environment substitution such as `$(POD_IP)` standing for
/// one) and a port (or a substitution).
pub fn names_endpoint(pod: &str) -> bool {
    let Some((host, port)) = pod.rsplit_once(':') else {
        return false;
    };
    let substituted = |t: &str| t.starts_with("$(") || t.starts_with("${");
    let host = host.trim_start_matches('[').trim_end_matches(']');
    (host.parse::<std::net::IpAddr>().is_ok() || substituted(host))
        && (port.parse::<u16>().is_ok_and(|p| p > 0) || substituted(port))
}

/// Why llm-d's adapter would refuse this batch, if it would.
pub fn message_drop_reason(batch: &Batch, engine: Engine) -> Option<(DropReason, String)> {
    match batch.wire {
        BatchWire::Map => {
            return Some((
                DropReason::BatchIsMap,
                "the batch is a map: llm-d decodes zero events".into(),
            ));
        }
        BatchWire::Array(3) => {}
        BatchWire::Array(n) => {
            return Some((
                DropReason::BatchDecodeError,
                format!("batch has {n} elements; llm-d's struct decoder needs exactly 3"),
            ));
        }
    }
    for ev in &batch.events {
        match (engine, ev.wire, &ev.kind) {
            (Engine::Sglang, EventWire::Map, _) => {
                return Some((
                    DropReason::EventDecodeError,
                    "llm-d's SGLang adapter only decodes array events".into(),
                ));
            }
            (Engine::Sglang, EventWire::Array(n), EventKind::Stored(_)) if n > 9 => {
                return Some((
                    DropReason::EventDecodeError,
                    format!("SGLang BlockStored with {n} elements (llm-d takes at most 9)"),
                ));
            }
            (Engine::Sglang, EventWire::Array(n), EventKind::Removed(_)) if n > 3 => {
                return Some((
                    DropReason::EventDecodeError,
                    format!("SGLang BlockRemoved with {n} elements (llm-d takes at most 3)"),
                ));
            }
            (Engine::Vllm, EventWire::Array(n), EventKind::Stored(_)) if n < 5 => {
                return Some((
                    DropReason::EventDecodeError,
                    format!("BlockStored with {n} elements (llm-d needs 5)"),
                ));
            }
            _ => {}
        }
        let (hashes, parent, group) = match &ev.kind {
            EventKind::Stored(s) => (&s.block_hashes, s.parent_block_hash.as_ref(), s.group_idx),
            EventKind::Removed(r) => (&r.block_hashes, None, r.group_idx),
            EventKind::AllCleared => continue,
        };
        if !hashes.iter().all(|h| llm_d_hash(h).is_some())
            || parent.is_some_and(|h| llm_d_hash(h).is_none())
        {
            return Some((
                DropReason::BatchDecodeError,
                "a block hash is packed narrower than 64 bits (unsupported hash type)".into(),
            ));
        }
        if group.is_some_and(|g| g < 0) {
            return Some((DropReason::BatchDecodeError, "negative group_idx".into()));
        }
    }
    None
}

/// `ParseRawExtraKeys`: per engine block, the strings (or first strings of arrays) it names.
fn parse_extra_keys(raw: &[Owned]) -> Vec<Option<Vec<String>>> {
    raw.iter()
        .map(|block| match block {
            Owned::List(items) => {
                let strings: Vec<String> = items
                    .iter()
                    .filter_map(|i| match i {
                        Owned::Str(s) => Some(s.clone()),
                        Owned::List(inner) => match inner.first() {
                            Some(Owned::Str(s)) => Some(s.clone()),
                            _ => None,
                        },
                        _ => None,
                    })
                    .collect();
                (!strings.is_empty()).then_some(strings)
            }
            _ => None,
        })
        .collect()
}

/// `realignExtraFeatures`: engine-block features onto `c` canonical blocks.
fn realign(features: Vec<Option<Vec<String>>>, c: usize) -> Option<Vec<Option<Vec<String>>>> {
    let f = features.len();
    if c == 0 {
        return None;
    }
    if f == 0 || f == c {
        return Some(features);
    }
    if f < c {
        return Some((0..c).map(|i| features[i * f / c].clone()).collect());
    }
    let mut out: Vec<Option<Vec<String>>> = vec![None; c];
    for (j, feat) in features.into_iter().enumerate() {
        if let Some(list) = feat {
            out[j * c / f].get_or_insert_with(Vec::new).extend(list);
        }
    }
    Some(out)
}

impl Index {
    pub fn new(cfg: IndexConfig) -> Index {
        let hasher = KeyHasher::new(cfg.algo, &cfg.seed);
        Index {
            cfg,
            hasher,
            roots: FxHashMap::default(),
            data: FxHashMap::default(),
            engine_to_request: FxHashMap::default(),
            pod_state: Vec::new(),
            pods: Interner::default(),
            last_pod: None,
            tiers: {
                let mut t = Interner::default();
                t.id("gpu");
                t
            },
            scratch: Default::default(),
            memo: None,
            stats: Stats::default(),
        }
    }

    /// Keep the request keys of the blocks hashed, and take them from there when a block
    /// comes again after the same parent: for a router view that stores and looks up the
    /// prompts of one conversation, each repeating the one before. A capture or a fleet
    /// rarely repeats a block, so this is not the default.
    pub fn remember_keys(&mut self) {
        self.memo.get_or_insert_with(KeyMemo::default);
    }

    /// Back to the state of [`Index::new`] with the same configuration, keeping the maps'
    /// room and the remembered keys (both depend only on the configuration).
    pub fn reset(&mut self) {
        // Every field named, so a new one cannot be forgotten here.
        let Index {
            cfg: _,
            hasher: _,
            roots: _,
            data,
            engine_to_request,
            pod_state,
            pods,
            last_pod,
            tiers,
            scratch: _,
            memo: _,
            stats,
        } = self;
        data.clear();
        engine_to_request.clear();
        pod_state.clear();
        pods.names.clear();
        pods.ids.clear();
        *last_pod = None;
        tiers.names.truncate(1);
        tiers.ids.retain(|_, id| *id == GPU_TIER);
        *stats = Stats::default();
    }

    pub fn config(&self) -> &IndexConfig {
        &self.cfg
    }

    pub fn hasher(&self) -> &KeyHasher {
        &self.hasher
    }

    fn root(&mut self, model: &str) -> u64 {
        if let Some(&r) = self.roots.get(model) {
            return r;
        }
        let r = self.hasher.root(model);
        self.roots.insert(model.to_string(), r);
        r
    }

    fn skip(&mut self, reason: SkipReason, kind: &crate::events::Text) {
        self.stats.stores_skipped.add(reason);
        if reason.counted_by_llm_d(self.cfg.profile) {
            const UNKNOWN: crate::events::Text = crate::events::Text::Borrowed("unknown");
            let kind = if kind.is_empty() { &UNKNOWN } else { kind };
            self.stats.stores_skipped_by_kind.add(kind, reason);
        }
    }

    /// Apply one decoded message from `pod` (topic model `model`).
    pub fn apply(&mut self, pod: &str, model: &str, batch: &Batch, engine: Engine) {
        let dropped = message_drop_reason(batch, engine).map(|(reason, _)| reason);
        self.apply_checked(pod, model, batch, dropped);
    }

    /// [`apply`](Self::apply) with the message's drop reason already worked out (it does not
    /// depend on the view, so a sweep checks each message once).
    pub fn apply_checked(
        &mut self,
        pod: &str,
        model: &str,
        batch: &Batch,
        dropped: Option<DropReason>,
    ) {
        if let Some(reason) = dropped {
            self.stats.messages_dropped.add(reason);
            return;
        }
        // Borrowed out of the config for the loop, so no name is copied per message.
        let model_override = self.cfg.model_name.take();
        let model = model_override.as_deref().unwrap_or(model);
        let pod_id = match self.last_pod {
            Some(id) if short_eq(self.pods.names[id as usize].as_bytes(), pod.as_bytes()) => id,
            _ => {
                let id = self.pods.id(pod);
                if self.pod_state.len() <= id as usize {
                    self.pod_state
                        .resize_with(id as usize + 1, PodState::default);
                }
                self.last_pod = Some(id);
                id
            }
        };
        for ev in &batch.events {
            match &ev.kind {
                EventKind::Stored(s) => self.stored(pod_id, model, s),
                EventKind::Removed(r) => self.removed(pod_id, r),
                EventKind::AllCleared => self.clear(pod_id),
            }
        }
        self.cfg.model_name = model_override;
    }

    fn tier_id(&mut self, medium: Option<&str>) -> u32 {
        match medium.filter(|m| !m.is_empty() && !m.eq_ignore_ascii_case("gpu")) {
            Some(m) => self.tiers.id(&m.to_lowercase()),
            None => GPU_TIER,
        }
    }

    fn stored(&mut self, pod: u32, model: &str, s: &BlockStored) {
        let bs = self.cfg.block_size;
        let tier = self.tier_id(s.medium.as_deref());
        let hash_model = s
            .lora_name
            .as_deref()
            .filter(|n| !n.is_empty())
            .unwrap_or(model);
        let mut kind = s.kv_cache_spec_kind.clone().unwrap_or_default();
        let entry = PodEntry::new(pod, tier, s.group_idx);
        if let Some(g) = s.group_idx {
            let groups = &mut self.pod_state[pod as usize].groups;
            let at = groups.iter().position(|(id, _)| *id == g);
            let ok = if kind.is_empty() {
                match at {
                    Some(i) => {
                        kind = groups[i].1.kind.clone();
                        groups[i].1.indexable
                    }
                    None => false,
                }
            } else {
                // Every event names its group's kind again: record only what changes.
                match at {
                    Some(i) if stats::same(&groups[i].1.kind, &kind) => groups[i].1.indexable,
                    Some(i) => {
                        groups[i].1 = GroupInfo::new(&kind);
                        groups[i].1.indexable
                    }
                    None => {
                        groups.push((g, GroupInfo::new(&kind)));
                        indexable(&kind)
                    }
                }
            };
            // Digestibility (S1–S3): only for events that carry a group.
            if !ok {
                return self.skip(SkipReason::UnsupportedCacheKind, &kind);
            }
            if !s.token_ids.is_empty() {
                if s.block_size <= 0 {
                    return self.skip(SkipReason::InvalidBlockSize, &kind);
                }
                // A block size past usize cannot be dense (`as` would truncate it to one that is).
                let Ok(ebs) = usize::try_from(s.block_size) else {
                    return self.skip(SkipReason::NonDenseBlockSpan, &kind);
                };
                if !s.token_ids.len().is_multiple_of(ebs)
                    || s.token_ids.len() / ebs != s.block_hashes.len()
                {
                    return self.skip(SkipReason::NonDenseBlockSpan, &kind);
                }
            }
        }
        let tokens = s.token_ids.len();
        self.stats.tokens_stored += tokens as u64;
        if self.cfg.profile == Profile::DigestFirst && tokens > 0 && tokens < bs {
            return self.skip(SkipReason::IncompleteCanonicalBlock, &kind);
        }
        let parent = s.parent_block_hash.as_ref().map_or(0, WireHash::as_u64);
        let parent_key = if parent != 0 {
            match self.engine_to_request.get(&parent).and_then(|v| v.last()) {
                Some(&k) => k,
                None => return self.skip(SkipReason::ParentUnresolved, &kind),
            }
        } else {
            self.root(hash_model)
        };
        let chunks = tokens / bs;
        // vLLM sends a nil per block when nothing extra applies: features that are all absent
        // hash like none at all (and realign to any positive count), so skip building them.
        let features = s
            .extra_keys
            .as_deref()
            .filter(|raw| raw.is_empty() || raw.iter().any(|e| *e != Owned::Nil))
            .map(parse_extra_keys)
            .and_then(|f| realign(f, chunks));
        if let Some(f) = &features
            && f.len() != chunks
        {
            return self.skip(SkipReason::ExtraFeaturesMismatch, &kind);
        }
        // Scratch vectors kept between events: no allocation per accepted store.
        let (mut request_keys, mut engine_keys) = std::mem::take(&mut self.scratch);
        request_keys.clear();
        engine_keys.clear();
        match &features {
            None => request_keys.extend(self.hasher.chain_memo(
                self.memo.as_mut(),
                parent_key,
                &s.token_ids,
                bs,
            )),
            Some(f) => self.hasher.keys_into(
                parent_key,
                &s.token_ids,
                bs,
                Some(f.as_slice()),
                &mut request_keys,
            ),
        }
        engine_keys.extend(s.block_hashes.iter().map(WireHash::as_u64));
        if request_keys.is_empty() {
            if tokens == 0 && !engine_keys.is_empty() {
                self.tier_update(pod, tier, entry, &engine_keys, &kind);
            } else {
                self.skip(SkipReason::IncompleteCanonicalBlock, &kind);
            }
        } else {
            if !tokens.is_multiple_of(bs) {
                self.stats.stores_with_dropped_tail += 1;
            }
            self.stats.stores_accepted += 1;
            self.stats.tokens_indexed += (request_keys.len() * bs) as u64;
            self.add(&engine_keys, &request_keys, entry);
            self.track_store(pod, tier, entry.group, &engine_keys);
        }
        self.scratch = (request_keys, engine_keys);
    }

    fn tier_update(
        &mut self,
        pod: u32,
        tier: u32,
        entry: PodEntry,
        engine_keys: &[u64],
        kind: &crate::events::Text,
    ) {
        let mut resolved: Vec<u64> = Vec::new();
        for e in engine_keys {
            if let Some(&k) = self.engine_to_request.get(e).and_then(|v| v.last())
                && !resolved.contains(&k)
            {
                resolved.push(k);
            }
        }
        if resolved.is_empty() {
            return self.skip(SkipReason::TierUpdateUnresolved, kind);
        }
        self.stats.stores_accepted += 1;
        self.stats.tier_updates += 1;
        for k in resolved {
            self.add_entry(k, entry);
        }
        self.track_store(pod, tier, entry.group, engine_keys);
    }

    /// `Add`: proportional engine→request mapping (the list replaced per engine key), then the
    /// entry on every request key.
    fn add(&mut self, engine: &[u64], request: &[u64], entry: PodEntry) {
        let (ne, nr) = (engine.len(), request.len());
        let n = ne.max(nr);
        if ne > 0 && nr > 0 {
            // Engine indices rise with i, so each engine key's run is contiguous.
            let mut i = 0;
            while i < n {
                let e = engine[i * ne / n];
                let mut keys = RequestKeys::new();
                while i < n && engine[i * ne / n] == e {
                    keys.push(request[i * nr / n]);
                    i += 1;
                }
                self.engine_to_request.insert(e, keys);
            }
        }
        for &r in request {
            self.add_entry(r, entry);
        }
    }

    fn add_entry(&mut self, key: u64, entry: PodEntry) {
        let cap = self.cfg.pod_cache_size;
        let cache = self.data.entry(key).or_default();
        if let Some(i) = cache.iter().position(|e| *e == entry) {
            cache.remove(i);
        }
        cache.push(entry);
        if cache.len() > cap {
            cache.remove(0);
        }
    }

    /// `entry`'s group: -1 when absent, as in [`PodEntry`].
    fn track_store(&mut self, pod: u32, tier: u32, group: i64, hashes: &[u64]) {
        let scope = &mut self.pod_state[pod as usize].dedup;
        for &h in hashes {
            *scope.entry((tier, group, h)).or_default() += 1;
        }
    }

    fn removed(&mut self, pod: u32, r: &BlockRemoved) {
        let tier = self.tier_id(r.medium.as_deref());
        if let Some(g) = r.group_idx {
            match self.pod_state[pod as usize].group(g) {
                None => {
                    *self
                        .stats
                        .removals_skipped
                        .entry(("unknown".into(), SkipReason::UnknownGroup))
                        .or_default() += 1;
                    return;
                }
                Some(info) if !info.indexable => {
                    let kind = info.kind.to_string();
                    *self
                        .stats
                        .removals_skipped
                        .entry((kind, SkipReason::UnsupportedCacheKind))
                        .or_default() += 1;
                    return;
                }
                Some(_) => {}
            }
        }
        let entry = PodEntry::new(pod, tier, r.group_idx);
        for h in &r.block_hashes {
            let hash = h.as_u64();
            let scope = &mut self.pod_state[pod as usize].dedup;
            let key = (tier, r.group_idx.unwrap_or(-1), hash);
            let forward = match scope.get_mut(&key) {
                None => true,
                Some(c) if *c == 0 => true,
                Some(c) => {
                    *c -= 1;
                    if *c == 0 {
                        scope.remove(&key);
                        true
                    } else {
                        false
                    }
                }
            };
            if forward {
                self.stats.removed_hashes_forwarded += 1;
                self.evict(hash, entry);
            } else {
                self.stats.removed_hashes_suppressed += 1;
            }
        }
    }

    fn evict(&mut self, engine_key: u64, entry: PodEntry) {
        let Some(keys) = self.engine_to_request.remove(&engine_key) else {
            return;
        };
        // The mapping goes only once every key it names is gone (noted on the way, rather
        // than looking every key up again).
        let mut any_left = false;
        for k in &keys {
            if let Some(cache) = self.data.get_mut(k) {
                cache.retain(|e| *e != entry);
                if cache.is_empty() {
                    self.data.remove(k);
                } else {
                    any_left = true;
                }
            }
        }
        if any_left {
            self.engine_to_request.insert(engine_key, keys);
        }
    }

    fn clear(&mut self, pod: u32) {
        self.data.retain(|_, cache| {
            cache.retain(|e| e.pod != pod);
            !cache.is_empty()
        });
        self.pod_state[pod as usize].dedup.clear();
    }

    /// Request keys of a token sequence from the model's root.
    pub fn request_keys(&mut self, model: &str, tokens: &[u32]) -> Vec<u64> {
        let root = self.request_root(model);
        self.hasher.keys(root, tokens, self.cfg.block_size, None)
    }

    /// The parent of a request's first key: the configured model name wins over the caller's.
    fn request_root(&mut self, model: &str) -> u64 {
        let model = self
            .cfg
            .model_name
            .clone()
            .unwrap_or_else(|| model.to_string());
        self.root(&model)
    }

    /// `CachedBlockCount`: consecutive keys from the first where `pod` has any entry.
    pub fn cached_blocks(&mut self, pod: &str, model: &str, tokens: &[u32]) -> usize {
        let Some(pod_id) = self.pods.get(pod) else {
            return 0;
        };
        // The keys of `request_keys`, hashed only up to the first miss: a prompt past its
        // cached prefix would otherwise be hashed whole for nothing.
        let root = self.request_root(model);
        let data = &self.data;
        self.hasher
            .chain_memo(self.memo.as_mut(), root, tokens, self.cfg.block_size)
            .take_while(|k| {
                data.get(k)
                    .is_some_and(|c| c.iter().any(|e| e.pod == pod_id))
            })
            .count()
    }

    /// Tokens a lookup of `tokens` finds for `pod`.
    pub fn lookup_tokens(&mut self, pod: &str, model: &str, tokens: &[u32]) -> usize {
        self.cached_blocks(pod, model, tokens) * self.cfg.block_size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics() {
        assert_eq!(
            parse_topic("kv@pod-123@llama-2-7b"),
            ("pod-123", "llama-2-7b")
        );
        assert_eq!(
            parse_topic("pod-123@llama-2-7b"),
            ("pod-123@llama-2-7b", "")
        );
        assert_eq!(parse_topic("fallback"), ("fallback", ""));
        assert_eq!(parse_topic("a@b@c@d"), ("a@b@c@d", ""));
        assert_eq!(parse_topic("@@"), ("", ""));
        assert_eq!(parse_topic(""), ("", ""));
        assert_eq!(
            parse_topic("kv@10.0.0.1:8000@Qwen/Qwen3-32B"),
            ("10.0.0.1:8000", "Qwen/Qwen3-32B")
        );
    }

    #[test]
    fn proportional_mapping() {
        let mut idx = Index::new(IndexConfig::new(64));
        let e = PodEntry::new(0, 0, None);
        idx.add(&[10, 11, 12], &[1, 2], e);
        assert_eq!(idx.engine_to_request[&10].as_slice(), [1]);
        assert_eq!(idx.engine_to_request[&11].as_slice(), [1]);
        assert_eq!(idx.engine_to_request[&12].as_slice(), [2]);
        idx.add(&[20, 21], &[3, 4, 5], e);
        assert_eq!(idx.engine_to_request[&20].as_slice(), [3, 4]);
        assert_eq!(idx.engine_to_request[&21].as_slice(), [5]);
        idx.add(&[30, 31], &[6, 7, 8, 9], e);
        assert_eq!(idx.engine_to_request[&30].as_slice(), [6, 7]);
    }

    #[test]
    fn extra_features_realign() {
        let a = |s: &str| Some(vec![s.to_string()]);
        let merged = realign(vec![a("a"), a("b"), None, a("c")], 2).unwrap();
        assert_eq!(
            merged,
            vec![Some(vec!["a".to_string(), "b".to_string()]), a("c")]
        );
        assert_eq!(
            realign(vec![a("x")], 3).unwrap(),
            vec![a("x"), a("x"), a("x")]
        );
        assert_eq!(realign(vec![a("x")], 0), None);
        let raw = vec![
            Owned::List(vec![
                Owned::Str("lora".into()),
                Owned::List(vec![Owned::Str("mm".into()), Owned::Int(5)]),
                Owned::Int(3),
            ]),
            Owned::Nil,
            Owned::List(vec![Owned::Int(1)]),
        ];
        assert_eq!(
            parse_extra_keys(&raw),
            vec![Some(vec!["lora".to_string(), "mm".to_string()]), None, None]
        );
    }

    #[test]
    fn per_key_lru_keeps_ten_entries() {
        let mut idx = Index::new(IndexConfig::new(16));
        for pod in 0..12u32 {
            idx.add_entry(7, PodEntry::new(pod, 0, None));
        }
        let pods: Vec<u32> = idx.data[&7].iter().map(|e| e.pod).collect();
        assert_eq!(pods, (2..12).collect::<Vec<_>>());
    }
}
