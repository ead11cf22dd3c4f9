//! Recycled event bodies and the fast path's memo, carried from batch to batch so that decoding
//! a long stream allocates nothing per event.

use super::memo;
use super::{Batch, BlockRemoved, BlockStored, Event, EventKind, Owned};

/// Most bodies (and vectors) of each kind a [`Pool`] keeps: more than a batch holds in practice.
pub(super) const POOL_CAP: usize = 1024;

/// Cleared event bodies kept from earlier batches, so decoding a long stream reuses their
/// vectors instead of allocating new ones per event.
// The boxes themselves are what is recycled (their allocations), hence Vec<Box<_>>.
#[allow(clippy::vec_box)]
#[derive(Default)]
pub struct Pool {
    pub(super) stored: Vec<Box<BlockStored>>,
    pub(super) removed: Vec<Box<BlockRemoved>>,
    pub(super) extra: Vec<Vec<Owned>>,
    pub(super) events: Vec<Vec<Event>>,
    pub(super) stored_tail: memo::StoredTail,
    pub(super) removed_tail: memo::RemovedTail,
    /// Test switches (the `test-hooks` feature): compiled out of the tool itself.
    #[cfg(any(test, feature = "test-hooks"))]
    pub(super) hooks: Hooks,
}

/// What tests and fuzz targets need to check the fast path against the general one.
#[cfg(any(test, feature = "test-hooks"))]
#[derive(Default)]
pub(super) struct Hooks {
    pub(super) general_only: bool,
    pub(super) fast_decoded: u64,
}

#[cfg(any(test, feature = "test-hooks"))]
impl Pool {
    /// A pool whose decoder never takes the fast path (to check the two paths agree).
    pub fn general_only() -> Pool {
        let mut pool = Pool::default();
        pool.hooks.general_only = true;
        pool
    }

    /// Events decoded by the fast path so far.
    pub fn fast_decoded(&self) -> u64 {
        self.hooks.fast_decoded
    }
}

impl Pool {
    /// Take a decoded batch back for reuse. What the pool keeps is capped: batches from
    /// elsewhere (another pool, batches built by hand) must not make it grow without end.
    pub fn recycle(&mut self, batch: Batch) {
        let mut events = batch.events;
        for ev in events.drain(..) {
            match ev.kind {
                EventKind::Stored(s) => self.give_back_stored(s),
                EventKind::Removed(r) => self.give_back_removed(r),
                EventKind::AllCleared => {}
            }
        }
        if self.events.len() < POOL_CAP {
            self.events.push(events);
        }
    }

    /// Event bodies and vectors kept for reuse.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.stored.len() + self.removed.len() + self.extra.len() + self.events.len()
    }

    /// Reset a body to its defaults (keeping its vectors' allocations) and keep it. Field by
    /// field, each left alone when already empty (cheaper than writing a whole default body
    /// per event); the pattern names every field, so a new one cannot be forgotten here.
    pub(super) fn give_back_stored(&mut self, mut s: Box<BlockStored>) {
        if self.stored.len() >= POOL_CAP {
            return;
        }
        let BlockStored {
            block_hashes,
            parent_block_hash,
            token_ids,
            token_ids_out_of_range,
            block_size,
            lora_id,
            medium,
            lora_name,
            extra_keys,
            group_idx,
            kv_cache_spec_kind,
            kv_cache_spec_sliding_window,
            locality,
            ownership,
            session_id,
            lookahead_token_ids,
            cache_salt,
        } = &mut *s;
        block_hashes.clear();
        token_ids.clear();
        if let Some(mut e) = extra_keys.take() {
            e.clear();
            if self.extra.len() < POOL_CAP {
                self.extra.push(e);
            }
        }
        *parent_block_hash = None;
        *token_ids_out_of_range = false;
        *block_size = 0;
        *lora_id = None;
        *group_idx = None;
        *kv_cache_spec_sliding_window = None;
        for text in [
            medium,
            lora_name,
            kv_cache_spec_kind,
            locality,
            ownership,
            session_id,
            cache_salt,
        ] {
            if text.is_some() {
                *text = None;
            }
        }
        if lookahead_token_ids.is_some() {
            *lookahead_token_ids = None;
        }
        self.stored.push(s);
    }

    pub(super) fn give_back_removed(&mut self, mut r: Box<BlockRemoved>) {
        if self.removed.len() >= POOL_CAP {
            return;
        }
        let BlockRemoved {
            block_hashes,
            medium,
            group_idx,
            locality,
            ownership,
        } = &mut *r;
        block_hashes.clear();
        *group_idx = None;
        for text in [medium, locality, ownership] {
            if text.is_some() {
                *text = None;
            }
        }
        self.removed.push(r);
    }
}
