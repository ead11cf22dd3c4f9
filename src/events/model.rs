//! The KV event model: what a published message holds once decoded, and how it was laid out
//! on the wire (llm-d treats some layouts differently).

use std::borrow::Cow;

use super::msgpack::{IntWidth, Val};

/// A string field: the values vLLM repeats on every event are shared, not allocated.
pub type Text = Cow<'static, str>;

/// Which engine's schema to decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Engine {
    #[default]
    Vllm,
    Sglang,
}

/// A block hash as it was on the wire (llm-d treats widths and kinds differently).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireHash {
    Uint(u64, IntWidth),
    Int(i64, IntWidth),
    Bytes(Vec<u8>),
}

impl WireHash {
    /// The 64-bit value llm-d derives (`getHashAsUint64`): ints as two's complement, bytes as
    /// the big-endian value of their last 8 bytes.
    pub fn as_u64(&self) -> u64 {
        match self {
            WireHash::Uint(v, _) => *v,
            WireHash::Int(v, _) => *v as u64,
            WireHash::Bytes(b) => {
                let tail = &b[b.len().saturating_sub(8)..];
                tail.iter().fold(0u64, |acc, &x| acc << 8 | x as u64)
            }
        }
    }
}

/// Any msgpack value, owned (for `extra_keys` entries, whose shape varies by version).
#[derive(Debug, Clone, PartialEq)]
pub enum Owned {
    Nil,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Bytes(Vec<u8>),
    List(Vec<Owned>),
    Map(Vec<(Owned, Owned)>),
}

impl From<&Val<'_>> for Owned {
    fn from(v: &Val<'_>) -> Owned {
        match v {
            Val::Nil => Owned::Nil,
            Val::Bool(b) => Owned::Bool(*b),
            Val::Uint(u, _) => Owned::Int(*u as i128),
            Val::Int(i, _) => Owned::Int(*i as i128),
            Val::Float(f) => Owned::Float(*f),
            Val::Str(s) => Owned::Str(s.to_string()),
            Val::Bin(b) | Val::Ext(_, b) => Owned::Bytes(b.to_vec()),
            Val::Array(a) => Owned::List(a.iter().map(Owned::from).collect()),
            Val::Map(m) => Owned::Map(
                m.iter()
                    .map(|(k, v)| (Owned::from(k), Owned::from(v)))
                    .collect(),
            ),
        }
    }
}

/// How an event was laid out on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventWire {
    /// A tagged positional array of this many elements (tag included).
    Array(usize),
    /// A map with a `"type"` key.
    Map,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct BlockStored {
    pub block_hashes: Vec<WireHash>,
    pub parent_block_hash: Option<WireHash>,
    pub token_ids: Vec<u32>,
    /// Some token id on the wire was negative or above u32::MAX; `token_ids` holds it cast
    /// to u32 (negatives wrap), as llm-d's decoder casts it.
    pub token_ids_out_of_range: bool,
    pub block_size: i64,
    pub lora_id: Option<i64>,
    pub medium: Option<Text>,
    pub lora_name: Option<Text>,
    pub extra_keys: Option<Vec<Owned>>,
    pub group_idx: Option<i64>,
    pub kv_cache_spec_kind: Option<Text>,
    pub kv_cache_spec_sliding_window: Option<i64>,
    pub locality: Option<Text>,
    pub ownership: Option<Text>,
    pub session_id: Option<Text>,
    pub lookahead_token_ids: Option<Vec<Vec<i64>>>,
    /// SGLang only.
    pub cache_salt: Option<Text>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct BlockRemoved {
    pub block_hashes: Vec<WireHash>,
    pub medium: Option<Text>,
    pub group_idx: Option<i64>,
    pub locality: Option<Text>,
    pub ownership: Option<Text>,
}

/// Boxed so events move as pointers; a decoder's [`Pool`](super::Pool) recycles the boxes, so a long
/// replay allocates none per event.
#[derive(Debug, Clone, PartialEq)]
pub enum EventKind {
    Stored(Box<BlockStored>),
    Removed(Box<BlockRemoved>),
    AllCleared,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub kind: EventKind,
    pub wire: EventWire,
}

/// How the batch itself was laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchWire {
    Array(usize),
    Map,
}

/// One published message's payload.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    pub ts: f64,
    pub events: Vec<Event>,
    pub data_parallel_rank: Option<i64>,
    pub wire: BatchWire,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_hashes_use_their_last_eight_bytes() {
        let mut b = vec![0xaa; 24];
        b.extend_from_slice(&[0, 0, 0, 0, 0, 0, 1, 2]);
        assert_eq!(WireHash::Bytes(b).as_u64(), 0x0102);
        assert_eq!(WireHash::Bytes(vec![1, 2]).as_u64(), 0x0102);
        assert_eq!(WireHash::Int(-2, IntWidth::I64).as_u64(), u64::MAX - 1);
    }
}
