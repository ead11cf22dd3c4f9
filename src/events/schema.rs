//! The event schemas as encoders put them on the wire: field names and orders of vLLM's and
//! SGLang's BlockStored and BlockRemoved, the event tags, and the fixstr encodings of the
//! strings matched directly (one compare instead of a decode).

use super::Engine;
use super::msgpack::marker;

/// The fields of BlockStored and BlockRemoved, by name on maps and by position on arrays.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Field {
    BlockHashes,
    ParentBlockHash,
    TokenIds,
    BlockSize,
    LoraId,
    Medium,
    LoraName,
    ExtraKeys,
    GroupIdx,
    KvCacheSpecKind,
    KvCacheSpecSlidingWindow,
    Locality,
    Ownership,
    SessionId,
    LookaheadTokenIds,
    CacheSalt,
    /// A field of a later release: skipped, as vLLM's own decoder would.
    Other,
}

impl Field {
    const NAMED: [Field; 16] = [
        Field::BlockHashes,
        Field::ParentBlockHash,
        Field::TokenIds,
        Field::BlockSize,
        Field::LoraId,
        Field::Medium,
        Field::LoraName,
        Field::ExtraKeys,
        Field::GroupIdx,
        Field::KvCacheSpecKind,
        Field::KvCacheSpecSlidingWindow,
        Field::Locality,
        Field::Ownership,
        Field::SessionId,
        Field::LookaheadTokenIds,
        Field::CacheSalt,
    ];

    pub(super) const fn name(self) -> &'static str {
        match self {
            Field::BlockHashes => "block_hashes",
            Field::ParentBlockHash => "parent_block_hash",
            Field::TokenIds => "token_ids",
            Field::BlockSize => "block_size",
            Field::LoraId => "lora_id",
            Field::Medium => "medium",
            Field::LoraName => "lora_name",
            Field::ExtraKeys => "extra_keys",
            Field::GroupIdx => "group_idx",
            Field::KvCacheSpecKind => "kv_cache_spec_kind",
            Field::KvCacheSpecSlidingWindow => "kv_cache_spec_sliding_window",
            Field::Locality => "locality",
            Field::Ownership => "ownership",
            Field::SessionId => "session_id",
            Field::LookaheadTokenIds => "lookahead_token_ids",
            Field::CacheSalt => "cache_salt",
            Field::Other => "",
        }
    }

    pub(super) fn of(key: &[u8]) -> Field {
        Field::NAMED
            .into_iter()
            .find(|f| f.name().as_bytes() == key)
            .unwrap_or(Field::Other)
    }
}

/// A field with its name as the fixstr bytes encoders put on the wire (marker included), so
/// the expected next key is matched with one compare.
pub(super) struct Key {
    pub(super) field: Field,
    wire: [u8; 32],
    len: usize,
}

const fn key(field: Field) -> Key {
    let name = field.name().as_bytes();
    let mut wire = [0u8; 32];
    wire[0] = marker::FIXSTR | name.len() as u8;
    let mut i = 0;
    while i < name.len() {
        wire[i + 1] = name[i];
        i += 1;
    }
    Key {
        field,
        wire,
        len: name.len() + 1,
    }
}

impl Key {
    pub(super) fn wire(&self) -> &[u8] {
        &self.wire[..self.len]
    }
}

/// vLLM's BlockStored fields in wire order: array positions after the tag, and the key order
/// of its map events.
const STORED_ORDER_VLLM: [Key; 15] = [
    key(Field::BlockHashes),
    key(Field::ParentBlockHash),
    key(Field::TokenIds),
    key(Field::BlockSize),
    key(Field::LoraId),
    key(Field::Medium),
    key(Field::LoraName),
    key(Field::ExtraKeys),
    key(Field::GroupIdx),
    key(Field::KvCacheSpecKind),
    key(Field::KvCacheSpecSlidingWindow),
    key(Field::Locality),
    key(Field::Ownership),
    key(Field::SessionId),
    key(Field::LookaheadTokenIds),
];
/// llm-d's SGLang adapter reads the first eight of the same positions.
const STORED_ORDER_SGLANG: &[Key] = STORED_ORDER_VLLM.split_at(8).0;
const REMOVED_ORDER: [Key; 5] = [
    key(Field::BlockHashes),
    key(Field::Medium),
    key(Field::GroupIdx),
    key(Field::Locality),
    key(Field::Ownership),
];

pub(super) fn field_order(tag: Tag, engine: Engine) -> &'static [Key] {
    match (tag, engine) {
        (Tag::Stored, Engine::Vllm) => &STORED_ORDER_VLLM,
        (Tag::Stored, Engine::Sglang) => STORED_ORDER_SGLANG,
        (Tag::Removed, _) => &REMOVED_ORDER,
        (Tag::Cleared, _) => &[],
    }
}

/// Strings as encoders put them on the wire (fixstr marker included), matched in one compare:
/// the map key and tags of every event, and vLLM's two constant values.
pub(super) const WIRE_TYPE: &[u8] = b"\xa4type";
pub(super) const WIRE_STORED: &[u8] = b"\xabBlockStored";
pub(super) const WIRE_REMOVED: &[u8] = b"\xacBlockRemoved";
pub(super) const WIRE_GPU: &[u8] = b"\xa3GPU";
pub(super) const WIRE_FULL_ATTENTION: &[u8] = b"\xaefull_attention";

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Tag {
    Stored,
    Removed,
    Cleared,
}

pub(super) fn tag_of(tag: &str) -> Option<Tag> {
    match tag {
        "BlockStored" => Some(Tag::Stored),
        "BlockRemoved" => Some(Tag::Removed),
        "AllBlocksCleared" => Some(Tag::Cleared),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::msgpack::Writer;
    use super::*;

    #[test]
    fn wire_constants_are_the_fixstr_encodings() {
        for (wire, text) in [
            (WIRE_TYPE, "type"),
            (WIRE_STORED, "BlockStored"),
            (WIRE_REMOVED, "BlockRemoved"),
            (WIRE_GPU, "GPU"),
            (WIRE_FULL_ATTENTION, "full_attention"),
        ] {
            let mut w = Writer::default();
            w.str(text);
            assert_eq!(wire, &w.buf[..], "{text}");
        }
        for k in STORED_ORDER_VLLM.iter().chain(&REMOVED_ORDER) {
            let mut w = Writer::default();
            w.str(k.field.name());
            assert_eq!(k.wire(), &w.buf[..], "{:?}", k.field);
        }
    }
}
