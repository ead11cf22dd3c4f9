//! The decoder's fast path: events laid out the way vLLM's encoder writes them (fields in
//! struct order, hashes as 64-bit ints, vLLM's constant strings, nil for absent options),
//! read straight-line from the buffer without the general reader's per-value dispatch.
//!
//! It either decodes a whole event exactly as the general path would, or declines (`None`)
//! and leaves the reader where it was, so the general path decodes the event, reports any
//! error, and handles every layout the fast path does not. tests/events.rs checks the two
//! paths agree on every fixture and on mutated captures.

use std::borrow::Cow;

use super::Engine;
use super::msgpack::{IntWidth, Reader};
use super::{BlockRemoved, BlockStored, Event, EventKind, EventWire, Field, Key, Owned, Pool, Tag};
use super::{WireHash, field_order};

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
        self.eat(&[0xc0])
    }

    #[inline(always)]
    fn be<const N: usize>(&mut self) -> Option<[u8; N]> {
        let b = self.buf.get(self.pos..self.pos + N)?;
        self.pos += N;
        b.try_into().ok()
    }

    /// A fixarray or array16 header.
    #[inline(always)]
    fn array(&mut self) -> Option<usize> {
        match self.byte()? {
            b @ 0x90..=0x9f => Some((b & 0x0f) as usize),
            0xdc => Some(u16::from_be_bytes(self.be()?) as usize),
            _ => None,
        }
    }

    /// A map header (fixmap or map16).
    #[inline(always)]
    fn map(&mut self) -> Option<usize> {
        match self.byte()? {
            b @ 0x80..=0x8f => Some((b & 0x0f) as usize),
            0xde => Some(u16::from_be_bytes(self.be()?) as usize),
            _ => None,
        }
    }

    /// An unsigned integer of up to 32 bits.
    #[inline(always)]
    fn small_uint(&mut self) -> Option<u32> {
        match self.byte()? {
            b @ 0x00..=0x7f => Some(b as u32),
            0xcc => Some(self.byte()? as u32),
            0xcd => Some(u16::from_be_bytes(self.be()?) as u32),
            0xce => Some(u32::from_be_bytes(self.be()?)),
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

    /// A 64-bit block hash (`0xcf`, as vLLM packs int hashes ≥ 2^32).
    #[inline(always)]
    fn hash(&mut self) -> Option<WireHash> {
        if self.byte()? != 0xcf {
            return None;
        }
        Some(WireHash::Uint(
            u64::from_be_bytes(self.be()?),
            IntWidth::U64,
        ))
    }

    // Lists are decoded into a stack chunk with the cursor in a local, then appended a chunk
    // at a time: pushing element by element through `&mut` kept the vector's length and the
    // position in memory on every element.
    fn hashes(&mut self, out: &mut Vec<WireHash>) -> Option<()> {
        let n = self.array()?;
        out.reserve(n);
        let buf = self.buf;
        let mut pos = self.pos;
        for _ in 0..n {
            match buf.get(pos..pos + 9) {
                Some(&[0xcf, a, b, c, d, e, f, g, h]) => {
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
                *slot = match *buf.get(pos)? {
                    b @ 0x00..=0x7f => {
                        pos += 1;
                        b as u32
                    }
                    0xcd => {
                        let v = buf.get(pos + 1..pos + 3)?;
                        pos += 3;
                        u16::from_be_bytes([v[0], v[1]]) as u32
                    }
                    0xce => {
                        let v = buf.get(pos + 1..pos + 5)?;
                        pos += 5;
                        u32::from_be_bytes([v[0], v[1], v[2], v[3]])
                    }
                    0xcc => {
                        let v = *buf.get(pos + 1)?;
                        pos += 2;
                        v as u32
                    }
                    _ => return None,
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

const GPU: &[u8] = b"\xa3GPU";
const FULL_ATTENTION: &[u8] = b"\xaefull_attention";

/// Decode the event at the reader's position if it has the common layout; `None` (reader
/// unmoved) otherwise.
pub(super) fn event(r: &mut Reader, engine: Engine, pool: &mut Pool) -> Option<Event> {
    let mut c = Cur {
        buf: r.buffer(),
        pos: r.position(),
    };
    let (n, keyed) = match *c.buf.get(c.pos)? {
        0x80..=0x8f | 0xde => (c.map()?, true),
        0x90..=0x9f | 0xdc => (c.array()?, false),
        _ => return None,
    };
    if n == 0 || keyed && !c.eat(b"\xa4type") {
        return None;
    }
    let tag = if c.eat(b"\xabBlockStored") {
        Tag::Stored
    } else if c.eat(b"\xacBlockRemoved") {
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
            match removed(&mut c, fields, keyed, &mut rm) {
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
    for key in fields {
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
            Field::TokenIds => c.tokens(&mut s.token_ids)?,
            Field::BlockSize => s.block_size = c.small_uint()? as i64,
            Field::LoraId => s.lora_id = c.opt_uint()?,
            Field::Medium => s.medium = c.opt_const("GPU", GPU)?,
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
                s.kv_cache_spec_kind = c.opt_const("full_attention", FULL_ATTENTION)?
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
    Some(())
}

fn removed(c: &mut Cur, fields: &[Key], keyed: bool, rm: &mut BlockRemoved) -> Option<()> {
    if fields.is_empty() {
        return None;
    }
    for key in fields {
        if keyed && !c.eat(key.wire()) {
            return None;
        }
        match key.field {
            Field::BlockHashes => c.hashes(&mut rm.block_hashes)?,
            Field::Medium => rm.medium = c.opt_const("GPU", GPU)?,
            Field::GroupIdx => rm.group_idx = c.opt_uint()?,
            _ => {
                if !c.nil() {
                    return None;
                }
            }
        }
    }
    Some(())
}
