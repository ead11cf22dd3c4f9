//! The schema decoder: one payload (an event batch, any vLLM version or SGLang) into the
//! event model. Events in vLLM's own layout go through the fast path (`fast.rs`); everything
//! else, and every error, through the general reader here.

use std::borrow::Cow;

use super::msgpack::{self, DecodeError, DecodeErrorKind, Head, IntWidth, Reader, Val};
use super::schema::{Field, Tag, WIRE_FULL_ATTENTION, WIRE_GPU, WIRE_REMOVED, WIRE_STORED};
use super::schema::{WIRE_TYPE, field_order, tag_of};
use super::{Batch, BatchWire, Engine, Event, EventKind, EventWire, Owned, Pool, Text, WireHash};
use super::{BlockRemoved, BlockStored, fast};

/// Block hashes (and extra-key entries) one event may carry. A real event holds the blocks one
/// request filled in one scheduler step: at most a whole prompt, a million blocks even at page
/// size 1. Each costs the index emulation a few hundred bytes for nine on the wire, so an
/// event past this is refused (counted as `too_large`) rather than followed into gigabytes.
pub const MAX_EVENT_BLOCKS: usize = 1 << 20;
/// Token ids one event may carry: a million blocks of 16.
pub const MAX_EVENT_TOKENS: usize = 1 << 24;

/// String values engines send on many events (media, cache kinds, locality): shared, not
/// allocated per event.
const COMMON: [&str; 14] = [
    "GPU",
    "CPU",
    "STORAGE",
    "CPU_PINNED",
    "DISK",
    "LOCAL",
    "REMOTE",
    "full_attention",
    "mla_attention",
    "sliding_window",
    "sliding_window_mla",
    "mamba",
    "sink_full_attention",
    "unknown",
];

fn text(s: &str) -> Text {
    // vLLM's two constant values first: they are on every event.
    match s {
        "GPU" => return Cow::Borrowed("GPU"),
        "full_attention" => return Cow::Borrowed("full_attention"),
        _ => {}
    }
    match COMMON.iter().find(|c| **c == s) {
        Some(c) => Cow::Borrowed(c),
        None => Cow::Owned(s.to_string()),
    }
}

/// Decode one payload (a whole msgpack value; trailing bytes are an error).
/// `base` is the payload's offset in its file, for error positions.
pub fn decode_batch(payload: &[u8], base: usize, engine: Engine) -> Result<Batch, DecodeError> {
    decode_batch_with(payload, base, engine, &mut Pool::default())
}

/// [`decode_batch`], taking vectors from `pool` (give batches back with [`Pool::recycle`]).
pub fn decode_batch_with(
    payload: &[u8],
    base: usize,
    engine: Engine,
    pool: &mut Pool,
) -> Result<Batch, DecodeError> {
    let mut r = Reader::new(payload, base);
    let at = r.position();
    let batch = match r.head()? {
        Head::Array(n) => {
            if n < 2 {
                return Err(r.error(
                    at,
                    DecodeErrorKind::Schema,
                    format!("event batch has {n} elements, expected [ts, events, rank]"),
                ));
            }
            let ts = read_ts(&mut r)?;
            let events = read_events(&mut r, engine, pool)?;
            let rank = if n >= 3 {
                r.opt_int("data_parallel_rank")?
            } else {
                None
            };
            for _ in 3..n {
                r.skip()?;
            }
            Batch {
                ts,
                events,
                data_parallel_rank: rank,
                wire: BatchWire::Array(n),
            }
        }
        Head::Map(n) => {
            let (mut ts, mut events, mut rank) = (None, None, None);
            for _ in 0..n {
                match r.key("batch key")? {
                    b"ts" => ts = Some(read_ts(&mut r)?),
                    b"events" => events = Some(read_events(&mut r, engine, pool)?),
                    b"data_parallel_rank" | b"attn_dp_rank" => {
                        rank = r.opt_int("data_parallel_rank")?
                    }
                    _ => r.skip()?,
                }
            }
            Batch {
                ts: ts.ok_or_else(|| {
                    r.error(at, DecodeErrorKind::Schema, "event batch map has no `ts`")
                })?,
                events: events.ok_or_else(|| {
                    r.error(
                        at,
                        DecodeErrorKind::Schema,
                        "event batch map has no `events`",
                    )
                })?,
                data_parallel_rank: rank,
                wire: BatchWire::Map,
            }
        }
        other => {
            return Err(r.error(
                at,
                DecodeErrorKind::TypeMismatch,
                format!(
                    "event batch must be an array or a map, found {}",
                    msgpack::head_kind(other)
                ),
            ));
        }
    };
    if !r.at_end() {
        let at = r.position();
        return Err(r.error(
            at,
            DecodeErrorKind::Schema,
            "trailing bytes after the event batch",
        ));
    }
    Ok(batch)
}

fn read_ts(r: &mut Reader) -> Result<f64, DecodeError> {
    if let Some(f) = r.f64_fast() {
        return Ok(f);
    }
    let at = r.position();
    match r.value()? {
        Val::Float(f) => Ok(f),
        Val::Uint(v, _) => Ok(v as f64),
        Val::Int(v, _) => Ok(v as f64),
        other => Err(r.error(
            at,
            DecodeErrorKind::TypeMismatch,
            format!("ts: expected a number, found {}", other.kind()),
        )),
    }
}

fn read_events(r: &mut Reader, engine: Engine, pool: &mut Pool) -> Result<Vec<Event>, DecodeError> {
    let n = r.array("events")?;
    let mut out = pool.events.pop().unwrap_or_default();
    out.reserve(n.min(1 << 16));
    for _ in 0..n {
        out.push(read_event(r, engine, pool)?);
    }
    Ok(out)
}

/// The event tag, read as a string (its fixstr encodings matched directly).
fn read_tag(r: &mut Reader, what: &str) -> Result<Tag, DecodeError> {
    if r.eat_raw(WIRE_STORED) {
        return Ok(Tag::Stored);
    }
    if r.eat_raw(WIRE_REMOVED) {
        return Ok(Tag::Removed);
    }
    let at = r.position();
    let name = r.str(what)?;
    // A tag quoted back in full could be the whole payload.
    tag_of(name).ok_or_else(|| {
        let shown = msgpack::clip(name, 64);
        r.error(
            at,
            DecodeErrorKind::Schema,
            format!("unknown event tag {shown:?}"),
        )
    })
}

fn read_event(r: &mut Reader, engine: Engine, pool: &mut Pool) -> Result<Event, DecodeError> {
    #[cfg(any(test, feature = "test-hooks"))]
    let fast_path = !pool.hooks.general_only;
    #[cfg(not(any(test, feature = "test-hooks")))]
    let fast_path = true;
    if fast_path && let Some(ev) = fast::event(r, engine, pool) {
        #[cfg(any(test, feature = "test-hooks"))]
        {
            pool.hooks.fast_decoded += 1;
        }
        return Ok(ev);
    }
    let at = r.position();
    match r.head()? {
        Head::Array(n) => {
            if n == 0 {
                return Err(r.error(
                    at,
                    DecodeErrorKind::Schema,
                    "event is an empty array (no tag)",
                ));
            }
            let tag = read_tag(r, "event tag")?;
            let order = field_order(tag, engine);
            let mut fields = Fields::new(tag, pool);
            for i in 1..n {
                match order.get(i - 1) {
                    Some(k) => fields.read(r, k.field)?,
                    None => r.skip()?,
                }
            }
            fields.finish(r, at, EventWire::Array(n), pool)
        }
        Head::Map(n) => {
            // vLLM writes the tag first and the fields in its struct order: one pass, each key
            // checked against the one expected next. Otherwise find the tag, then the fields.
            if n > 0 && r.eat_raw(WIRE_TYPE) {
                let tag = read_tag(r, "event type")?;
                let order = field_order(tag, engine);
                let mut fields = Fields::new(tag, pool);
                for i in 1..n {
                    let field = match order.get(i - 1) {
                        Some(k) if r.eat_raw(k.wire()) => k.field,
                        _ => Field::of(r.key("event key")?),
                    };
                    fields.read(r, field)?;
                }
                return fields.finish(r, at, EventWire::Map, pool);
            }
            let mut tag = None;
            let mut pending: Vec<(Field, usize)> = Vec::new();
            for _ in 0..n {
                let key = r.key("event key")?;
                if key == b"type" {
                    tag = Some(read_tag(r, "event type")?);
                } else {
                    // Unknown keys are skipped now and never revisited: a map of millions of
                    // them must not cost an entry each.
                    // A known key given again replaces the earlier one (the last wins, as
                    // reading both in order did), so this list holds one entry per field.
                    let field = Field::of(key);
                    if field != Field::Other {
                        let pos = r.position();
                        match pending.iter_mut().find(|(f, _)| *f == field) {
                            Some(p) => p.1 = pos,
                            None => pending.push((field, pos)),
                        }
                    }
                    r.skip()?;
                }
            }
            let end = r.position();
            let tag = tag
                .ok_or_else(|| r.error(at, DecodeErrorKind::Schema, "event map has no \"type\""))?;
            let mut fields = Fields::new(tag, pool);
            for (field, pos) in pending {
                let mut sub = r.sub_reader(pos);
                fields.read(&mut sub, field)?;
            }
            r.seek(end);
            fields.finish(r, at, EventWire::Map, pool)
        }
        other => Err(r.error(
            at,
            DecodeErrorKind::TypeMismatch,
            format!(
                "event must be an array or a map, found {}",
                msgpack::head_kind(other)
            ),
        )),
    }
}

/// Fields of one event as they are read, in any order.
struct Fields<'a> {
    tag: Tag,
    _src: std::marker::PhantomData<&'a ()>,
    stored: Box<BlockStored>,
    removed: Box<BlockRemoved>,
    has_hashes: bool,
    has_tokens: bool,
    has_block_size: bool,
    spare_extra: Option<Vec<Owned>>,
}

impl<'a> Fields<'a> {
    fn new(tag: Tag, pool: &mut Pool) -> Self {
        Fields {
            tag,
            _src: std::marker::PhantomData,
            // Both bodies come from the pool; `finish` hands back the one the tag leaves unused.
            stored: pool.stored.pop().unwrap_or_default(),
            removed: pool.removed.pop().unwrap_or_default(),
            has_hashes: false,
            has_tokens: false,
            has_block_size: false,
            spare_extra: if tag == Tag::Stored {
                pool.extra.pop()
            } else {
                None
            },
        }
    }

    fn read(&mut self, r: &mut Reader<'a>, field: Field) -> Result<(), DecodeError> {
        let stored = self.tag == Tag::Stored;
        let removed = self.tag == Tag::Removed;
        match field {
            Field::BlockHashes if stored || removed => {
                self.has_hashes = true;
                let into = if stored {
                    &mut self.stored.block_hashes
                } else {
                    &mut self.removed.block_hashes
                };
                into.clear();
                read_hashes(r, into)?;
            }
            Field::ParentBlockHash if stored => {
                if let Some(v) = r.u64_wide() {
                    self.stored.parent_block_hash = Some(WireHash::Uint(v, IntWidth::U64));
                    return Ok(());
                }
                if r.eat_nil() {
                    self.stored.parent_block_hash = None;
                    return Ok(());
                }
                let at = r.position();
                self.stored.parent_block_hash = match r.value()? {
                    Val::Nil => None,
                    v => Some(hash_of(r, at, v)?),
                };
            }
            Field::TokenIds if stored => {
                self.stored.token_ids.clear();
                self.stored.token_ids_out_of_range = false;
                if !fast::tokens(r, &mut self.stored.token_ids) {
                    self.stored.token_ids_out_of_range =
                        r.u32_list_into("token_ids", MAX_EVENT_TOKENS, &mut self.stored.token_ids)?;
                }
                self.has_tokens = true;
            }
            Field::BlockSize if stored => {
                let at = r.position();
                self.stored.block_size = r
                    .opt_int("block_size")?
                    .ok_or_else(|| r.error(at, DecodeErrorKind::Schema, "block_size is nil"))?;
                self.has_block_size = true;
            }
            Field::LoraId if stored => self.stored.lora_id = r.opt_int("lora_id")?,
            Field::Medium => {
                let m = opt_text(r, "medium")?;
                if stored {
                    self.stored.medium = m;
                } else {
                    self.removed.medium = m;
                }
            }
            Field::LoraName if stored => self.stored.lora_name = opt_text(r, "lora_name")?,
            Field::CacheSalt if stored => self.stored.cache_salt = opt_text(r, "cache_salt")?,
            Field::ExtraKeys if stored => {
                let at = r.position();
                self.stored.extra_keys = match r.head()? {
                    Head::Nil => None,
                    Head::Array(n) => {
                        r.check_len("extra_keys", n, MAX_EVENT_BLOCKS, at)?;
                        let mut items = self.spare_extra.take().unwrap_or_default();
                        items.reserve(n.min(1 << 16));
                        for _ in 0..n {
                            // vLLM sends one nil per plain block: skip the value tree for those.
                            if r.eat_nil() {
                                items.push(Owned::Nil);
                                continue;
                            }
                            let item_at = r.position();
                            match r.value()? {
                                v @ Val::Array(_) => items.push(Owned::from(&v)),
                                other => {
                                    return Err(r.error(
                                        item_at,
                                        DecodeErrorKind::TypeMismatch,
                                        format!(
                                            "extra_keys: entry is {}, expected an array or nil",
                                            other.kind()
                                        ),
                                    ));
                                }
                            }
                        }
                        Some(items)
                    }
                    other => {
                        return Err(r.error(
                            at,
                            DecodeErrorKind::TypeMismatch,
                            format!(
                                "extra_keys: expected an array or nil, found {}",
                                msgpack::head_kind(other)
                            ),
                        ));
                    }
                };
            }
            Field::GroupIdx => {
                let g = r.opt_int("group_idx")?;
                if stored {
                    self.stored.group_idx = g;
                } else {
                    self.removed.group_idx = g;
                }
            }
            Field::KvCacheSpecKind if stored => {
                self.stored.kv_cache_spec_kind = opt_text(r, "kv_cache_spec_kind")?
            }
            Field::KvCacheSpecSlidingWindow if stored => {
                self.stored.kv_cache_spec_sliding_window =
                    r.opt_int("kv_cache_spec_sliding_window")?
            }
            Field::Locality | Field::Ownership => {
                let locality = field == Field::Locality;
                let v = opt_text(r, field.name())?;
                match (locality, stored) {
                    (true, true) => self.stored.locality = v,
                    (true, false) => self.removed.locality = v,
                    (_, true) => self.stored.ownership = v,
                    (_, false) => self.removed.ownership = v,
                }
            }
            Field::SessionId if stored => self.stored.session_id = opt_text(r, "session_id")?,
            Field::LookaheadTokenIds if stored => {
                let at = r.position();
                self.stored.lookahead_token_ids = match r.value()? {
                    Val::Nil => None,
                    Val::Array(lists) => {
                        let mut out = Vec::with_capacity(lists.len());
                        for l in lists {
                            let Val::Array(ids) = l else {
                                return Err(r.error(
                                    at,
                                    DecodeErrorKind::TypeMismatch,
                                    "lookahead_token_ids: expected lists of token ids",
                                ));
                            };
                            out.push(
                                ids.iter()
                                    .map(|v| {
                                        v.as_i64().ok_or_else(|| {
                                            r.error(
                                                at,
                                                DecodeErrorKind::TypeMismatch,
                                                "lookahead_token_ids: expected integers",
                                            )
                                        })
                                    })
                                    .collect::<Result<Vec<_>, _>>()?,
                            );
                        }
                        Some(out)
                    }
                    other => {
                        return Err(r.error(
                            at,
                            DecodeErrorKind::TypeMismatch,
                            format!(
                                "lookahead_token_ids: expected an array, found {}",
                                other.kind()
                            ),
                        ));
                    }
                };
            }
            // Fields of later releases: ignored, as vLLM's own decoder would.
            _ => r.skip()?,
        }
        Ok(())
    }

    fn finish(
        self,
        r: &Reader,
        at: usize,
        wire: EventWire,
        pool: &mut Pool,
    ) -> Result<Event, DecodeError> {
        let Fields {
            tag,
            stored,
            removed,
            has_hashes,
            has_tokens,
            has_block_size,
            spare_extra,
            ..
        } = self;
        if let Some(v) = spare_extra {
            pool.extra.push(v);
        }
        let kind = match tag {
            Tag::Stored => {
                pool.removed.push(removed);
                if !has_hashes || !has_tokens || !has_block_size {
                    return Err(r.error(
                        at,
                        DecodeErrorKind::Schema,
                        "BlockStored lacks block_hashes, token_ids or block_size",
                    ));
                }
                EventKind::Stored(stored)
            }
            Tag::Removed => {
                pool.stored.push(stored);
                if !has_hashes {
                    return Err(r.error(
                        at,
                        DecodeErrorKind::Schema,
                        "BlockRemoved lacks block_hashes",
                    ));
                }
                EventKind::Removed(removed)
            }
            Tag::Cleared => {
                pool.stored.push(stored);
                pool.removed.push(removed);
                EventKind::AllCleared
            }
        };
        Ok(Event { kind, wire })
    }
}

fn hash_of(r: &Reader, at: usize, v: Val) -> Result<WireHash, DecodeError> {
    match v {
        Val::Uint(u, w) => Ok(WireHash::Uint(u, w)),
        Val::Int(i, w) => Ok(WireHash::Int(i, w)),
        Val::Bin(b) if !b.is_empty() => Ok(WireHash::Bytes(b.to_vec())),
        Val::Bin(_) => Err(r.error(
            at,
            DecodeErrorKind::TypeMismatch,
            "block hash is empty bytes",
        )),
        other => Err(r.error(
            at,
            DecodeErrorKind::TypeMismatch,
            format!(
                "block hash must be an integer or bytes, found {}",
                other.kind()
            ),
        )),
    }
}

/// A string field or nil; vLLM's constant values matched on the wire, without validation or
/// a lookup.
fn opt_text(r: &mut Reader, what: &str) -> Result<Option<Text>, DecodeError> {
    if r.eat_raw(WIRE_GPU) {
        return Ok(Some(Cow::Borrowed("GPU")));
    }
    if r.eat_raw(WIRE_FULL_ATTENTION) {
        return Ok(Some(Cow::Borrowed("full_attention")));
    }
    Ok(r.opt_str(what)?.map(text))
}

fn read_hashes(r: &mut Reader, out: &mut Vec<WireHash>) -> Result<(), DecodeError> {
    let at = r.position();
    let n = r.array("block_hashes")?;
    r.check_len("block_hashes", n, MAX_EVENT_BLOCKS, at)?;
    out.reserve(n.min(1 << 16));
    for _ in 0..n {
        if let Some(v) = r.u64_wide() {
            out.push(WireHash::Uint(v, IntWidth::U64));
            continue;
        }
        let at = r.position();
        let v = r.value()?;
        out.push(hash_of(r, at, v)?);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::msgpack::Writer;
    use super::super::pool::POOL_CAP;
    use super::*;

    fn stored_map(w: &mut Writer, hashes: &[u64], parent: Option<u64>, tokens: &[u32]) {
        w.map(11).str("type").str("BlockStored");
        w.str("block_hashes").array(hashes.len());
        for h in hashes {
            w.u64_wide(*h);
        }
        w.str("parent_block_hash");
        match parent {
            Some(p) => w.u64_wide(p),
            None => w.nil(),
        };
        w.str("token_ids").array(tokens.len());
        for t in tokens {
            w.uint(*t as u64);
        }
        w.str("block_size")
            .uint(16)
            .str("lora_id")
            .nil()
            .str("medium")
            .str("GPU")
            .str("lora_name")
            .nil();
        w.str("extra_keys").array(hashes.len());
        for _ in hashes {
            w.nil();
        }
        w.str("group_idx")
            .uint(0)
            .str("kv_cache_spec_kind")
            .str("full_attention");
    }

    #[test]
    fn map_and_array_events_decode_alike() {
        let tokens: Vec<u32> = (1..=16).collect();
        let mut w = Writer::default();
        w.array(3).f64(1.5).array(1);
        stored_map(&mut w, &[1 << 40], Some(1 << 41), &tokens);
        w.uint(0);
        let a = decode_batch(&w.buf, 0, Engine::Vllm).unwrap();
        let mut w = Writer::default();
        w.array(3)
            .f64(1.5)
            .array(1)
            .array(12)
            .str("BlockStored")
            .array(1)
            .u64_wide(1 << 40)
            .u64_wide(1 << 41);
        w.array(16);
        for t in &tokens {
            w.uint(*t as u64);
        }
        w.uint(16)
            .nil()
            .str("GPU")
            .nil()
            .array(1)
            .nil()
            .uint(0)
            .str("full_attention")
            .nil();
        w.uint(0);
        let b = decode_batch(&w.buf, 0, Engine::Vllm).unwrap();
        let (EventKind::Stored(x), EventKind::Stored(y)) = (&a.events[0].kind, &b.events[0].kind)
        else {
            panic!()
        };
        assert_eq!(x, y);
        assert_eq!(x.block_hashes[0].as_u64(), 1 << 40);
        assert_eq!(
            (a.events[0].wire, b.events[0].wire),
            (EventWire::Map, EventWire::Array(12))
        );
    }

    #[test]
    fn schema_errors_name_the_field_and_offset() {
        let mut w = Writer::default();
        w.array(3)
            .f64(0.0)
            .array(1)
            .array(2)
            .str("BlockMoved")
            .array(0)
            .uint(0);
        let e = decode_batch(&w.buf, 1000, Engine::Vllm).unwrap_err();
        assert!(e.reason.contains("unknown event tag \"BlockMoved\""), "{e}");
        assert_eq!(e.offset, 1000 + 12);
        let mut w = Writer::default();
        w.array(3)
            .f64(0.0)
            .array(1)
            .map(3)
            .str("type")
            .str("BlockRemoved")
            .str("block_hashes")
            .array(1)
            .f64(1.0)
            .str("medium")
            .nil()
            .uint(0);
        let e = decode_batch(&w.buf, 0, Engine::Vllm).unwrap_err();
        assert!(
            e.reason
                .contains("block hash must be an integer or bytes, found float"),
            "{e}"
        );
        assert!(
            decode_batch(&[0x93, 0xcb, 0, 0], 0, Engine::Vllm)
                .unwrap_err()
                .reason
                .contains("truncated")
        );
    }

    /// Batches decoded elsewhere and recycled into one pool do not make it grow past its cap.
    #[test]
    fn pools_keep_a_bounded_number_of_bodies() {
        let tokens: Vec<u32> = (1..=16).collect();
        let mut w = Writer::default();
        w.array(3).f64(1.5).array(2);
        stored_map(&mut w, &[1 << 40], Some(1 << 41), &tokens);
        w.map(2)
            .str("type")
            .str("BlockRemoved")
            .str("block_hashes")
            .array(1)
            .u64_wide(1 << 40);
        w.uint(0);
        let mut kept = Pool::default();
        for _ in 0..3 * POOL_CAP {
            let batch = decode_batch(&w.buf, 0, Engine::Vllm).unwrap();
            assert_eq!(batch.events.len(), 2);
            kept.recycle(batch);
        }
        assert_eq!(kept.held(), 4 * POOL_CAP);
    }
}

#[cfg(test)]
mod sglang_tests {
    use super::super::msgpack::Writer;
    use super::*;
    use crate::routers::llm_d::{DropReason, Index, IndexConfig};

    /// SGLang 0.5 publishes tagged maps with its own fields (cache_salt, no group_idx) and
    /// signed 64-bit hashes; llm-d's SGLang adapter only takes arrays.
    #[test]
    fn sglang_map_events_decode_but_llm_d_drops_them() {
        let mut w = Writer::default();
        w.array(3)
            .f64(2.0)
            .array(1)
            .map(7)
            .str("type")
            .str("BlockStored");
        w.str("block_hashes").array(1).int(i64::MIN + 5);
        w.str("parent_block_hash")
            .nil()
            .str("token_ids")
            .array(1)
            .uint(42);
        w.str("block_size")
            .uint(1)
            .str("lora_id")
            .nil()
            .str("cache_salt")
            .str("tenant");
        w.uint(0);
        let batch = decode_batch(&w.buf, 0, Engine::Sglang).unwrap();
        let EventKind::Stored(s) = &batch.events[0].kind else {
            panic!()
        };
        assert_eq!(s.cache_salt.as_deref(), Some("tenant"));
        assert_eq!(s.block_hashes[0].as_u64(), (i64::MIN + 5) as u64);
        let mut idx = Index::new(IndexConfig::new(1));
        idx.apply("p", "m", &batch, Engine::Sglang);
        // Each event is a map: the adapter's decode of the event fails, and the message goes.
        assert_eq!(
            idx.stats.messages_dropped.get(DropReason::EventDecodeError),
            Some(1)
        );

        // The same event as an array (what llm-d's adapter expects) is indexed.
        let mut w = Writer::default();
        w.array(3)
            .f64(2.0)
            .array(1)
            .array(5)
            .str("BlockStored")
            .array(1);
        w.buf.push(msgpack::marker::INT64);
        w.buf.extend_from_slice(&(i64::MIN + 5).to_be_bytes());
        w.nil().array(1).uint(42).uint(1).uint(0);
        let batch = decode_batch(&w.buf, 0, Engine::Sglang).unwrap();
        let mut idx = Index::new(IndexConfig::new(1));
        idx.apply("p", "m", &batch, Engine::Sglang);
        assert_eq!(idx.stats.stores_accepted, 1);
        assert_eq!(idx.lookup_tokens("p", "m", &[42]), 1);
    }
}
