//! The fast path's memo: the last event end decoded, kept with its values so that an
//! identical end is one comparison. It lives in the [`Pool`](super::Pool), which carries it
//! from batch to batch.

/// The end of a BlockStored (every field after `token_ids`) as last decoded. vLLM repeats
/// the same bytes there on event after event (block size, medium, the nil extra keys, group,
/// cache kind), so when the next event's end is byte for byte the same, its values are the
/// same too and one comparison replaces reading seven fields.
#[derive(Default)]
pub(super) struct StoredTail {
    pub(super) end: End,
    pub(super) block_size: i64,
    pub(super) lora_id: Option<i64>,
    /// The fast path's strings are vLLM's constants (or absent).
    pub(super) medium: Option<&'static str>,
    /// Length of an all-nil `extra_keys`, if it was present.
    pub(super) extra_nils: Option<usize>,
    pub(super) group_idx: Option<i64>,
    pub(super) kind: Option<&'static str>,
    pub(super) sliding_window: Option<i64>,
}

/// The end of a BlockRemoved (every field after `block_hashes`) as last decoded; see
/// [`StoredTail`].
#[derive(Default)]
pub(super) struct RemovedTail {
    pub(super) end: End,
    pub(super) medium: Option<&'static str>,
    pub(super) group_idx: Option<i64>,
}

/// An event's end as bytes, with the field count and form of the event they came from: they
/// decode alike only in an event of the same shape.
#[derive(Default)]
pub(super) struct End {
    bytes: Vec<u8>,
    shape: Option<(usize, bool)>,
}

impl End {
    /// The bytes an event of `shape` may end with to have the remembered values.
    pub(super) fn for_shape(&self, shape: (usize, bool)) -> Option<&[u8]> {
        (self.shape == Some(shape)).then_some(&self.bytes)
    }

    pub(super) fn remember(&mut self, shape: (usize, bool), bytes: &[u8]) {
        self.bytes.clear();
        self.bytes.extend_from_slice(bytes);
        self.shape = Some(shape);
    }
}
