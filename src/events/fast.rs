//! The decoder's fast path: events laid out the way vLLM's encoder writes them (fields in
//! struct order, hashes as 64-bit ints, vLLM's constant strings, nil for absent options),
//! read straight-line from the buffer without the general reader's per-value dispatch.
//!
//! It either decodes a whole event exactly as the general path would, or declines (`None`)
//! and leaves the reader where it was, so the general path decodes the event, reports any
//! error, and handles every layout the fast path does not. tests/events.rs checks the two
//! paths agree on every fixture and on mutated captures.

use std::borrow::Cow;

use super::WireHash;
use super::memo::RemovedTail;
use super::msgpack::{IntWidth, Reader, marker};
use super::schema::{Field, Key, Tag, field_order};
use super::schema::{WIRE_FULL_ATTENTION, WIRE_GPU, WIRE_REMOVED, WIRE_STORED, WIRE_TYPE};
use super::{BlockRemoved, BlockStored, Engine, Event, EventKind, EventWire, Owned, Pool};

/// A cursor over the payload that answers `None` at the first byte it does not expect.
struct Cur<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Cur<'_> {
    #[inline(always)]
    fn byte(&mut self) -> Option<u8> {
        let b = *self.buf.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    #[inline(always)]
    fn eat(&mut self, wire: &[u8]) -> bool {
        match self.buf.get(self.pos..self.pos + wire.len()) {
            Some(s) if super::msgpack::short_eq(s, wire) => {
                self.pos += wire.len();
                true
            }
            _ => false,
        }
    }

    #[inline(always)]
    fn nil(&mut self) -> bool {
        self.eat(&[marker::NIL])
    }

    #[inline(always)]
    fn be<const N: usize>(&mut self) -> Option<[u8; N]> {
        let b = self.buf.get(self.pos..self.pos + N)?;
        self.pos += N;
        b.try_into().ok()
    }

    /// A container header: the fix form (`fix` in the high nibble, the count in the low one)
    /// or the 16-bit form `wide`.
    #[inline(always)]
    fn header(&mut self, fix: u8, wide: u8) -> Option<usize> {
        match self.byte()? {
            b if b & 0xf0 == fix => Some((b & 0x0f) as usize),
            b if b == wide => Some(u16::from_be_bytes(self.be()?) as usize),
            _ => None,
        }
    }

    #[inline(always)]
    fn array(&mut self) -> Option<usize> {
        self.header(marker::FIXARRAY, marker::ARRAY16)
    }

    #[inline(always)]
    fn map(&mut self) -> Option<usize> {
        self.header(marker::FIXMAP, marker::MAP16)
    }

    /// An unsigned integer of up to 32 bits.
    #[inline(always)]
    fn small_uint(&mut self) -> Option<u32> {
        match self.byte()? {
            b @ 0x00..=marker::POSITIVE_FIXINT_MAX => Some(b as u32),
            marker::UINT8 => Some(self.byte()? as u32),
            marker::UINT16 => Some(u16::from_be_bytes(self.be()?) as u32),
            marker::UINT32 => Some(u32::from_be_bytes(self.be()?)),
            _ => None,
        }
    }

    /// nil, or an unsigned integer of up to 32 bits.
    #[inline(always)]
    fn opt_uint(&mut self) -> Option<Option<i64>> {
        if self.nil() {
            return Some(None);
        }
        self.small_uint().map(|v| Some(v as i64))
    }

    /// A 64-bit block hash (a uint64, as vLLM packs int hashes ≥ 2^32).
    #[inline(always)]
    fn hash(&mut self) -> Option<WireHash> {
        if self.byte()? != marker::UINT64 {
            return None;
        }
        Some(WireHash::Uint(
            u64::from_be_bytes(self.be()?),
            IntWidth::U64,
        ))
    }

    // Lists are read with the cursor in a local: through `&mut self` it went back to memory
    // on every element.
    fn hashes(&mut self, out: &mut Vec<WireHash>) -> Option<()> {
        let n = self.array()?;
        out.reserve(n);
        let buf = self.buf;
        let mut pos = self.pos;
        for _ in 0..n {
            match buf.get(pos..pos + 9) {
                Some(&[marker::UINT64, a, b, c, d, e, f, g, h]) => {
                    out.push(WireHash::Uint(
                        u64::from_be_bytes([a, b, c, d, e, f, g, h]),
                        IntWidth::U64,
                    ));
                    pos += 9;
                }
                _ => return None,
            }
        }
        self.pos = pos;
        Some(())
    }

    /// Token ids go through a stack chunk appended whole, so the vector's length is not
    /// written back per element either.
    fn tokens(&mut self, out: &mut Vec<u32>) -> Option<()> {
        const CHUNK: usize = 64;
        let mut left = self.array()?;
        out.reserve(left);
        let buf = self.buf;
        let mut pos = self.pos;
        let mut chunk = [0u32; CHUNK];
        while left > 0 {
            let take = left.min(CHUNK);
            for slot in &mut chunk[..take] {
                // Token ids of a large vocabulary mix all four widths, so a branch per width
                // mispredicts often: read the marker's size from a table and the value from
                // the next four bytes, choosing without a branch. Near the end of the buffer
                // (fewer than five bytes left) the plain form reads it.
                *slot = match buf.get(pos..pos + 5) {
                    Some(&[m, a, b, c, d]) => {
                        let size = TOKEN_SIZE[m as usize];
                        if size == 0 {
                            return None;
                        }
                        let word = u32::from_be_bytes([a, b, c, d]) as u64;
                        pos += size as usize;
                        if size == 1 {
                            m as u32
                        } else {
                            (word >> ((5 - size as u64) * 8)) as u32
                        }
                    }
                    _ => {
                        let (v, size) = token_tail(&buf[pos.min(buf.len())..])?;
                        pos += size;
                        v
                    }
                };
            }
            out.extend_from_slice(&chunk[..take]);
            left -= take;
        }
        self.pos = pos;
        Some(())
    }

    /// nil, or one of vLLM's constant strings.
    #[inline(always)]
    fn opt_const(&mut self, value: &'static str, wire: &[u8]) -> Option<Option<Cow<'static, str>>> {
        if self.nil() {
            return Some(None);
        }
        self.eat(wire).then_some(Some(Cow::Borrowed(value)))
    }
}

/// Bytes taken by a token id with this marker (0: not an unsigned int of ≤ 32 bits).
const TOKEN_SIZE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut m = 0;
    while m <= marker::POSITIVE_FIXINT_MAX as usize {
        t[m] = 1;
        m += 1;
    }
    t[marker::UINT8 as usize] = 2;
    t[marker::UINT16 as usize] = 3;
    t[marker::UINT32 as usize] = 5;
    t
};

/// A token id from the last few bytes of a buffer: (value, bytes taken).
fn token_tail(b: &[u8]) -> Option<(u32, usize)> {
    match *b {
        [m, ..] if m <= marker::POSITIVE_FIXINT_MAX => Some((m as u32, 1)),
        [marker::UINT8, v, ..] => Some((v as u32, 2)),
        [marker::UINT16, a, c, ..] => Some((u16::from_be_bytes([a, c]) as u32, 3)),
        _ => None, // a uint32 id needs five bytes, which the main loop had
    }
}

/// A token-id list at the reader's position in the common widths, appended to `out`; `false`
/// (reader unmoved, `out` as it was) for anything else, which the general reader then reads
/// and reports.
pub(super) fn tokens(r: &mut Reader, out: &mut Vec<u32>) -> bool {
    let mut c = Cur {
        buf: r.buffer(),
        pos: r.position(),
    };
    let len = out.len();
    if c.tokens(out).is_some() {
        r.seek(c.pos);
        return true;
    }
    out.truncate(len);
    false
}

/// Decode the event at the reader's position if it has the common layout; `None` (reader
/// unmoved) otherwise.
pub(super) fn event(r: &mut Reader, engine: Engine, pool: &mut Pool) -> Option<Event> {
    let mut c = Cur {
        buf: r.buffer(),
        pos: r.position(),
    };
    let (n, keyed) = match *c.buf.get(c.pos)? {
        marker::FIXMAP..=marker::FIXMAP_MAX | marker::MAP16 => (c.map()?, true),
        marker::FIXARRAY..=marker::FIXARRAY_MAX | marker::ARRAY16 => (c.array()?, false),
        _ => return None,
    };
    if n == 0 || keyed && !c.eat(WIRE_TYPE) {
        return None;
    }
    let tag = if c.eat(WIRE_STORED) {
        Tag::Stored
    } else if c.eat(WIRE_REMOVED) {
        Tag::Removed
    } else {
        return None;
    };
    let order = field_order(tag, engine);
    let fields = order.get(..n - 1)?;
    let kind = match tag {
        Tag::Stored => {
            let mut s = pool.stored.pop().unwrap_or_default();
            match stored(&mut c, fields, keyed, &mut s, pool) {
                Some(()) => EventKind::Stored(s),
                None => {
                    pool.give_back_stored(s);
                    return None;
                }
            }
        }
        _ => {
            let mut rm = pool.removed.pop().unwrap_or_default();
            match removed(&mut c, fields, keyed, &mut rm, &mut pool.removed_tail) {
                Some(()) => EventKind::Removed(rm),
                None => {
                    pool.give_back_removed(rm);
                    return None;
                }
            }
        }
    };
    r.seek(c.pos);
    Some(Event {
        kind,
        wire: if keyed {
            EventWire::Map
        } else {
            EventWire::Array(n)
        },
    })
}

/// The BlockStored fields in `fields` (a prefix of the wire order, at least the three the
/// event needs) into a clean pooled body.
fn stored(
    c: &mut Cur,
    fields: &[Key],
    keyed: bool,
    s: &mut BlockStored,
    pool: &mut Pool,
) -> Option<()> {
    if fields.len() < 4 {
        return None; // the general path reports the missing field
    }
    let (head, tail) = fields.split_at(3);
    for key in head {
        if keyed && !c.eat(key.wire()) {
            return None;
        }
        match key.field {
            Field::BlockHashes => c.hashes(&mut s.block_hashes)?,
            Field::ParentBlockHash => {
                if !c.nil() {
                    s.parent_block_hash = Some(c.hash()?);
                }
            }
            _ => c.tokens(&mut s.token_ids)?,
        }
    }
    let shape = (fields.len(), keyed);
    let memo = &pool.stored_tail;
    if memo.end.for_shape(shape).is_some_and(|end| c.eat(end)) {
        s.block_size = memo.block_size;
        s.lora_id = memo.lora_id;
        s.medium = memo.medium.map(Cow::Borrowed);
        s.group_idx = memo.group_idx;
        s.kv_cache_spec_kind = memo.kind.map(Cow::Borrowed);
        s.kv_cache_spec_sliding_window = memo.sliding_window;
        if let Some(n) = memo.extra_nils {
            let mut items = pool.extra.pop().unwrap_or_default();
            for _ in 0..n {
                items.push(Owned::Nil);
            }
            s.extra_keys = Some(items);
        }
        return Some(());
    }
    let start = c.pos;
    for key in tail {
        if keyed && !c.eat(key.wire()) {
            return None;
        }
        match key.field {
            Field::BlockSize => s.block_size = c.small_uint()? as i64,
            Field::LoraId => s.lora_id = c.opt_uint()?,
            Field::Medium => s.medium = c.opt_const("GPU", WIRE_GPU)?,
            Field::ExtraKeys => {
                if !c.nil() {
                    let n = c.array()?;
                    let mut items = pool.extra.pop().unwrap_or_default();
                    for _ in 0..n {
                        if !c.nil() {
                            items.clear();
                            pool.extra.push(items);
                            return None;
                        }
                        items.push(Owned::Nil);
                    }
                    s.extra_keys = Some(items);
                }
            }
            Field::GroupIdx => s.group_idx = c.opt_uint()?,
            Field::KvCacheSpecKind => {
                s.kv_cache_spec_kind = c.opt_const("full_attention", WIRE_FULL_ATTENTION)?
            }
            Field::KvCacheSpecSlidingWindow => s.kv_cache_spec_sliding_window = c.opt_uint()?,
            // Names, salts and lookahead lists: only their absence is on the fast path.
            _ => {
                if !c.nil() {
                    return None;
                }
            }
        }
    }
    let memo = &mut pool.stored_tail;
    memo.end.remember(shape, &c.buf[start..c.pos]);
    memo.block_size = s.block_size;
    memo.lora_id = s.lora_id;
    memo.medium = s.medium.is_some().then_some("GPU");
    memo.extra_nils = s.extra_keys.as_ref().map(Vec::len);
    memo.group_idx = s.group_idx;
    memo.kind = s.kv_cache_spec_kind.is_some().then_some("full_attention");
    memo.sliding_window = s.kv_cache_spec_sliding_window;
    Some(())
}

fn removed(
    c: &mut Cur,
    fields: &[Key],
    keyed: bool,
    rm: &mut BlockRemoved,
    memo: &mut RemovedTail,
) -> Option<()> {
    let (first, tail) = fields.split_first()?;
    if keyed && !c.eat(first.wire()) {
        return None;
    }
    c.hashes(&mut rm.block_hashes)?;
    let shape = (fields.len(), keyed);
    if memo.end.for_shape(shape).is_some_and(|end| c.eat(end)) {
        rm.medium = memo.medium.map(Cow::Borrowed);
        rm.group_idx = memo.group_idx;
        return Some(());
    }
    let start = c.pos;
    for key in tail {
        if keyed && !c.eat(key.wire()) {
            return None;
        }
        match key.field {
            Field::Medium => rm.medium = c.opt_const("GPU", WIRE_GPU)?,
            Field::GroupIdx => rm.group_idx = c.opt_uint()?,
            _ => {
                if !c.nil() {
                    return None;
                }
            }
        }
    }
    memo.end.remember(shape, &c.buf[start..c.pos]);
    memo.medium = rm.medium.is_some().then_some("GPU");
    memo.group_idx = rm.group_idx;
    Some(())
}
