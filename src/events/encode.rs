//! Writing event batches the way vLLM ≥ 0.24 publishes them (msgspec: map events with the
//! tag first, fields in declaration order, `None` defaults left out, map16 headers for
//! BlockStored, smallest integer encodings, hashes at their original width). Tests, benchmarks,
//! fuzz seeds and the committed `.frames` fixtures are built with it; re-encoding the 0.33
//! captures in ../shared reproduces their bytes.

use super::msgpack::{IntWidth, Writer, marker};
use super::{Batch, BatchWire, BlockRemoved, BlockStored, EventKind, Owned, WireHash};

fn hash(w: &mut Writer, h: &WireHash) {
    match h {
        WireHash::Uint(v, width) => {
            match width {
                IntWidth::U64 => w.u64_wide(*v),
                _ => w.uint(*v),
            };
        }
        WireHash::Int(v, width) => {
            match width {
                IntWidth::I64 => {
                    w.buf.push(marker::INT64);
                    w.buf.extend_from_slice(&v.to_be_bytes());
                    w
                }
                _ => w.int(*v),
            };
        }
        WireHash::Bytes(b) => {
            w.bin(b);
        }
    }
}

fn owned(w: &mut Writer, v: &Owned) {
    match v {
        Owned::Nil => {
            w.nil();
        }
        Owned::Bool(b) => {
            w.bool(*b);
        }
        Owned::Int(i) => {
            if *i >= 0 {
                w.uint(*i as u64);
            } else {
                w.int(*i as i64);
            }
        }
        Owned::Float(f) => {
            w.f64(*f);
        }
        Owned::Str(s) => {
            w.str(s);
        }
        Owned::Bytes(b) => {
            w.bin(b);
        }
        Owned::List(items) => {
            w.array(items.len());
            items.iter().for_each(|i| owned(w, i));
        }
        Owned::Map(entries) => {
            w.map(entries.len());
            for (k, v) in entries {
                owned(w, k);
                owned(w, v);
            }
        }
    }
}

fn opt_str(w: &mut Writer, v: Option<&str>) {
    match v {
        Some(s) => w.str(s),
        None => w.nil(),
    };
}

fn opt_int(w: &mut Writer, v: Option<i64>) {
    match v {
        Some(i) => w.int(i),
        None => w.nil(),
    };
}

fn stored(w: &mut Writer, s: &BlockStored) {
    let optional = [
        s.extra_keys.is_some(),
        s.group_idx.is_some(),
        s.kv_cache_spec_kind.is_some(),
        s.kv_cache_spec_sliding_window.is_some(),
        s.locality.is_some(),
        s.ownership.is_some(),
        s.session_id.is_some(),
        s.lookahead_token_ids.is_some(),
    ];
    // msgspec sizes the header by the struct's 16 fields: always map16.
    let entries = 8 + optional.iter().filter(|x| **x).count();
    w.buf.push(marker::MAP16);
    w.buf.extend_from_slice(&(entries as u16).to_be_bytes());
    w.str("type")
        .str("BlockStored")
        .str("block_hashes")
        .array(s.block_hashes.len());
    s.block_hashes.iter().for_each(|h| hash(w, h));
    w.str("parent_block_hash");
    match &s.parent_block_hash {
        Some(h) => hash(w, h),
        None => {
            w.nil();
        }
    }
    w.str("token_ids").array(s.token_ids.len());
    s.token_ids.iter().for_each(|t| {
        w.uint(*t as u64);
    });
    w.str("block_size").int(s.block_size).str("lora_id");
    opt_int(w, s.lora_id);
    w.str("medium");
    opt_str(w, s.medium.as_deref());
    w.str("lora_name");
    opt_str(w, s.lora_name.as_deref());
    if let Some(e) = &s.extra_keys {
        w.str("extra_keys").array(e.len());
        e.iter().for_each(|x| owned(w, x));
    }
    if let Some(g) = s.group_idx {
        w.str("group_idx").int(g);
    }
    if let Some(k) = &s.kv_cache_spec_kind {
        w.str("kv_cache_spec_kind").str(k);
    }
    if let Some(win) = s.kv_cache_spec_sliding_window {
        w.str("kv_cache_spec_sliding_window").int(win);
    }
    if let Some(l) = &s.locality {
        w.str("locality").str(l);
    }
    if let Some(o) = &s.ownership {
        w.str("ownership").str(o);
    }
    if let Some(id) = &s.session_id {
        w.str("session_id").str(id);
    }
    if let Some(lists) = &s.lookahead_token_ids {
        w.str("lookahead_token_ids").array(lists.len());
        for l in lists {
            w.array(l.len());
            l.iter().for_each(|t| {
                w.int(*t);
            });
        }
    }
}

fn removed(w: &mut Writer, r: &BlockRemoved) {
    let entries = 3 + [
        r.group_idx.is_some(),
        r.locality.is_some(),
        r.ownership.is_some(),
    ]
    .iter()
    .filter(|x| **x)
    .count();
    w.map(entries)
        .str("type")
        .str("BlockRemoved")
        .str("block_hashes")
        .array(r.block_hashes.len());
    r.block_hashes.iter().for_each(|h| hash(w, h));
    w.str("medium");
    opt_str(w, r.medium.as_deref());
    if let Some(g) = r.group_idx {
        w.str("group_idx").int(g);
    }
    if let Some(l) = &r.locality {
        w.str("locality").str(l);
    }
    if let Some(o) = &r.ownership {
        w.str("ownership").str(o);
    }
}

/// `[ts, events, data_parallel_rank]` with map events.
pub fn encode_batch(batch: &Batch) -> Vec<u8> {
    let mut w = Writer::default();
    let len = match batch.wire {
        BatchWire::Array(2) => 2,
        _ => 3,
    };
    w.array(len).f64(batch.ts).array(batch.events.len());
    for e in &batch.events {
        match &e.kind {
            EventKind::Stored(s) => stored(&mut w, s),
            EventKind::Removed(r) => removed(&mut w, r),
            EventKind::AllCleared => {
                w.map(1).str("type").str("AllBlocksCleared");
            }
        }
    }
    if len == 3 {
        opt_int(&mut w, batch.data_parallel_rank);
    }
    w.buf
}
