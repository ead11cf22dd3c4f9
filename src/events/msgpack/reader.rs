//! Values read in place from a buffer, with every integer's wire width and every error's
//! offset kept.

use super::{
    DecodeError, DecodeErrorInfo, DecodeErrorKind, Head, IntWidth, MAX_DEPTH, Val, head_kind,
    marker, short_eq,
};

pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Added to reported offsets (position of `buf` in the file).
    base: usize,
    depth: usize,
    /// Entries the generic value trees of this buffer may still hold. Each entry costs a
    /// 32-byte `Val` for as little as one input byte (a nil), so without a budget a message
    /// of 16 MiB of nils would take half a gigabyte.
    tree_entries_left: usize,
}

/// Entries of generic value trees (extra keys, lookahead token ids, unknown containers that
/// are decoded rather than skipped) built per message: far beyond what any engine sends.
pub const MAX_TREE_ENTRIES: usize = 1 << 20;

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8], base: usize) -> Self {
        Reader {
            buf,
            pos: 0,
            base,
            depth: 0,
            tree_entries_left: MAX_TREE_ENTRIES,
        }
    }

    pub fn position(&self) -> usize {
        self.pos
    }

    /// The whole buffer being read.
    pub fn buffer(&self) -> &'a [u8] {
        self.buf
    }

    /// A reader over the same buffer starting at `pos` (to revisit a map value).
    pub fn sub_reader(&self, pos: usize) -> Reader<'a> {
        Reader {
            buf: self.buf,
            pos,
            base: self.base,
            depth: self.depth,
            // A share of what is left, not a fresh budget: sub-readers are made per field.
            tree_entries_left: self.tree_entries_left,
        }
    }

    pub fn seek(&mut self, pos: usize) {
        self.pos = pos;
    }

    pub fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }

    pub fn error(
        &self,
        at: usize,
        kind: DecodeErrorKind,
        reason: impl Into<String>,
    ) -> DecodeError {
        DecodeError(Box::new(DecodeErrorInfo {
            offset: self.base + at,
            kind,
            reason: reason.into(),
        }))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        match self.pos.checked_add(n).filter(|&end| end <= self.buf.len()) {
            Some(end) => {
                let s = &self.buf[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            None => Err(self.error(
                self.buf.len(),
                DecodeErrorKind::Truncated,
                format!("truncated msgpack: {n} more bytes expected"),
            )),
        }
    }

    #[inline]
    fn be(&mut self, n: usize) -> Result<u64, DecodeError> {
        let b = self.take(n)?;
        Ok(match n {
            1 => b[0] as u64,
            2 => u16::from_be_bytes([b[0], b[1]]) as u64,
            4 => u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as u64,
            _ => b.iter().fold(0u64, |acc, &x| acc << 8 | x as u64),
        })
    }

    /// `n` bytes big-endian, when they are all there (the fast path of the hot loops).
    #[inline]
    fn be_at(&self, at: usize, n: usize) -> Option<u64> {
        let b = self.buf.get(at..at + n)?;
        Some(b.iter().fold(0u64, |acc, &x| acc << 8 | x as u64))
    }

    /// Read the next value's header (for containers, the element count).
    #[inline]
    pub fn head(&mut self) -> Result<Head, DecodeError> {
        // The one-byte headers (small containers, short strings, small ints) inline; the
        // rest through the full table.
        if let Some(&b) = self.buf.get(self.pos) {
            let h = match b {
                0x00..=marker::POSITIVE_FIXINT_MAX => Head::Uint(b as u64, IntWidth::Fix),
                marker::FIXMAP..=marker::FIXMAP_MAX => Head::Map((b & 0x0f) as usize),
                marker::FIXARRAY..=marker::FIXARRAY_MAX => Head::Array((b & 0x0f) as usize),
                marker::FIXSTR..=marker::FIXSTR_MAX => Head::Str((b & 0x1f) as usize),
                marker::NIL => Head::Nil,
                _ => return self.head_full(),
            };
            self.pos += 1;
            return Ok(h);
        }
        self.head_full()
    }

    #[inline(never)]
    fn head_full(&mut self) -> Result<Head, DecodeError> {
        let at = self.pos;
        let b = self.take(1)?[0];
        Ok(match b {
            0x00..=marker::POSITIVE_FIXINT_MAX => Head::Uint(b as u64, IntWidth::Fix),
            marker::FIXMAP..=marker::FIXMAP_MAX => Head::Map((b & 0x0f) as usize),
            marker::FIXARRAY..=marker::FIXARRAY_MAX => Head::Array((b & 0x0f) as usize),
            marker::FIXSTR..=marker::FIXSTR_MAX => Head::Str((b & 0x1f) as usize),
            marker::NIL => Head::Nil,
            marker::FALSE => Head::Bool(false),
            marker::TRUE => Head::Bool(true),
            marker::BIN8 => Head::Bin(self.be(1)? as usize),
            marker::BIN16 => Head::Bin(self.be(2)? as usize),
            marker::BIN32 => Head::Bin(self.be(4)? as usize),
            marker::EXT8 => Head::Ext(self.be(1)? as usize),
            marker::EXT16 => Head::Ext(self.be(2)? as usize),
            marker::EXT32 => Head::Ext(self.be(4)? as usize),
            marker::FLOAT32 => Head::Float,
            marker::FLOAT64 => Head::Float,
            marker::UINT8 => Head::Uint(self.be(1)?, IntWidth::U8),
            marker::UINT16 => Head::Uint(self.be(2)?, IntWidth::U16),
            marker::UINT32 => Head::Uint(self.be(4)?, IntWidth::U32),
            marker::UINT64 => Head::Uint(self.be(8)?, IntWidth::U64),
            marker::INT8 => Head::Int(self.be(1)? as u8 as i8 as i64, IntWidth::I8),
            marker::INT16 => Head::Int(self.be(2)? as u16 as i16 as i64, IntWidth::I16),
            marker::INT32 => Head::Int(self.be(4)? as u32 as i32 as i64, IntWidth::I32),
            marker::INT64 => Head::Int(self.be(8)? as i64, IntWidth::I64),
            marker::FIXEXT1 => Head::Ext(1),
            marker::FIXEXT2 => Head::Ext(2),
            marker::FIXEXT4 => Head::Ext(4),
            marker::FIXEXT8 => Head::Ext(8),
            marker::FIXEXT16 => Head::Ext(16),
            marker::STR8 => Head::Str(self.be(1)? as usize),
            marker::STR16 => Head::Str(self.be(2)? as usize),
            marker::STR32 => Head::Str(self.be(4)? as usize),
            marker::ARRAY16 => Head::Array(self.be(2)? as usize),
            marker::ARRAY32 => Head::Array(self.be(4)? as usize),
            marker::MAP16 => Head::Map(self.be(2)? as usize),
            marker::MAP32 => Head::Map(self.be(4)? as usize),
            marker::NEGATIVE_FIXINT..=0xff => Head::Int(b as i8 as i64, IntWidth::Fix),
            marker::NEVER_USED => {
                return Err(self.error(
                    at,
                    DecodeErrorKind::InvalidMsgpack,
                    "invalid msgpack marker 0xc1",
                ));
            }
        })
        .inspect(|&h| {
            // Floats keep their marker so the payload can be read next.
            if h == Head::Float {
                self.pos = at;
            }
        })
    }

    /// Read a whole value.
    pub fn value(&mut self) -> Result<Val<'a>, DecodeError> {
        let at = self.pos;
        let head = self.head()?;
        self.value_from(head, at)
    }

    fn value_from(&mut self, head: Head, at: usize) -> Result<Val<'a>, DecodeError> {
        Ok(match head {
            Head::Nil => Val::Nil,
            Head::Bool(b) => Val::Bool(b),
            Head::Uint(v, w) => Val::Uint(v, w),
            Head::Int(v, w) => Val::Int(v, w),
            Head::Float => Val::Float(self.float()?),
            Head::Str(n) => Val::Str(self.str_body(n, at)?),
            Head::Bin(n) => Val::Bin(self.take(n)?),
            Head::Ext(n) => {
                let t = self.take(1)?[0] as i8;
                Val::Ext(t, self.take(n)?)
            }
            Head::Array(n) => {
                self.spend_tree_entries(n, at)?;
                self.enter(at)?;
                let mut v = Vec::with_capacity(n.min(4096));
                for _ in 0..n {
                    v.push(self.value()?);
                }
                self.depth -= 1;
                Val::Array(v)
            }
            Head::Map(n) => {
                self.spend_tree_entries(n, at)?;
                self.enter(at)?;
                let mut v = Vec::with_capacity(n.min(4096));
                for _ in 0..n {
                    let k = self.value()?;
                    v.push((k, self.value()?));
                }
                self.depth -= 1;
                Val::Map(v)
            }
        })
    }

    fn spend_tree_entries(&mut self, n: usize, at: usize) -> Result<(), DecodeError> {
        match self.tree_entries_left.checked_sub(n) {
            Some(left) => {
                self.tree_entries_left = left;
                Ok(())
            }
            None => Err(self.error(
                at,
                DecodeErrorKind::TooLarge,
                format!(
                    "a container of {n} entries takes the message past the \
                     {MAX_TREE_ENTRIES} entries kvaudit decodes in nested fields"
                ),
            )),
        }
    }

    /// Fails unless the array or list of `n` entries read for `what` is within `max`: the
    /// decoded form of an entry is larger than its bytes on the wire.
    pub fn check_len(
        &self,
        what: &str,
        n: usize,
        max: usize,
        at: usize,
    ) -> Result<(), DecodeError> {
        if n > max {
            return Err(self.error(
                at,
                DecodeErrorKind::TooLarge,
                format!("{what}: {n} entries in one event, more than the {max} kvaudit reads"),
            ));
        }
        Ok(())
    }

    fn enter(&mut self, at: usize) -> Result<(), DecodeError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.error(at, DecodeErrorKind::TooDeep, "msgpack nested too deeply"));
        }
        Ok(())
    }

    fn float(&mut self) -> Result<f64, DecodeError> {
        let at = self.pos;
        match self.take(1)?[0] {
            marker::FLOAT32 => Ok(f32::from_bits(self.be(4)? as u32) as f64),
            marker::FLOAT64 => Ok(f64::from_bits(self.be(8)?)),
            _ => Err(self.error(at, DecodeErrorKind::TypeMismatch, "expected a float")),
        }
    }

    fn str_body(&mut self, n: usize, at: usize) -> Result<&'a str, DecodeError> {
        let bytes = self.take(n)?;
        std::str::from_utf8(bytes).map_err(|_| {
            self.error(
                at,
                DecodeErrorKind::InvalidMsgpack,
                "string is not valid UTF-8",
            )
        })
    }

    /// The batch timestamp's fast path: a float64 (what msgspec writes).
    #[inline]
    pub fn f64_fast(&mut self) -> Option<f64> {
        if self.buf.get(self.pos) == Some(&marker::FLOAT64) {
            let v = self.be_at(self.pos + 1, 8)?;
            self.pos += 9;
            return Some(f64::from_bits(v));
        }
        None
    }

    /// Skip one value without building it.
    pub fn skip(&mut self) -> Result<(), DecodeError> {
        let at = self.pos;
        match self.head()? {
            Head::Float => {
                self.float()?;
            }
            Head::Str(n) | Head::Bin(n) => {
                self.take(n)?;
            }
            Head::Ext(n) => {
                self.take(n + 1)?;
            }
            Head::Array(n) => {
                self.enter(at)?;
                for _ in 0..n {
                    self.skip()?;
                }
                self.depth -= 1;
            }
            Head::Map(n) => {
                self.enter(at)?;
                for _ in 0..n * 2 {
                    self.skip()?;
                }
                self.depth -= 1;
            }
            _ => {}
        }
        Ok(())
    }

    /// A block hash's fast path: a full-width unsigned int (what vLLM sends for hashes ≥ 2^32).
    #[inline]
    pub fn u64_wide(&mut self) -> Option<u64> {
        if self.buf.get(self.pos) == Some(&marker::UINT64) {
            let v = self.be_at(self.pos + 1, 8)?;
            self.pos += 9;
            return Some(v);
        }
        None
    }

    /// A string, or an error naming `what`.
    pub fn str(&mut self, what: &str) -> Result<&'a str, DecodeError> {
        let at = self.pos;
        match self.head()? {
            Head::Str(n) => self.str_body(n, at),
            other => Err(self.error(
                at,
                DecodeErrorKind::TypeMismatch,
                format!("{what}: expected a string, found {}", head_kind(other)),
            )),
        }
    }

    /// A map key's raw bytes (field names are ASCII: no UTF-8 validation on the hot path;
    /// a key that is not valid UTF-8 simply matches no field).
    pub fn key(&mut self, what: &str) -> Result<&'a [u8], DecodeError> {
        let at = self.pos;
        if let Some(&b) = self.buf.get(at)
            && (marker::FIXSTR..=marker::FIXSTR_MAX).contains(&b)
        {
            self.pos += 1;
            return self.take((b & 0x1f) as usize);
        }
        match self.head()? {
            Head::Str(n) => self.take(n),
            other => Err(self.error(
                at,
                DecodeErrorKind::TypeMismatch,
                format!("{what}: expected a string, found {}", head_kind(other)),
            )),
        }
    }

    /// A string or nil.
    pub fn opt_str(&mut self, what: &str) -> Result<Option<&'a str>, DecodeError> {
        let at = self.pos;
        match self.buf.get(at) {
            Some(&marker::NIL) => {
                self.pos += 1;
                return Ok(None);
            }
            Some(&b) if (marker::FIXSTR..=marker::FIXSTR_MAX).contains(&b) => {
                self.pos += 1;
                return self.str_body((b & 0x1f) as usize, at).map(Some);
            }
            _ => {}
        }
        match self.head()? {
            Head::Nil => Ok(None),
            Head::Str(n) => self.str_body(n, at).map(Some),
            other => Err(self.error(
                at,
                DecodeErrorKind::TypeMismatch,
                format!(
                    "{what}: expected a string or nil, found {}",
                    head_kind(other)
                ),
            )),
        }
    }

    /// An integer (any width) or nil.
    pub fn opt_int(&mut self, what: &str) -> Result<Option<i64>, DecodeError> {
        let at = self.pos;
        match self.buf.get(at) {
            Some(&marker::NIL) => {
                self.pos += 1;
                return Ok(None);
            }
            Some(&b) if b <= marker::POSITIVE_FIXINT_MAX => {
                self.pos += 1;
                return Ok(Some(b as i64));
            }
            _ => {}
        }
        match self.head()? {
            Head::Nil => Ok(None),
            Head::Uint(v, _) => i64::try_from(v).map(Some).map_err(|_| {
                self.error(
                    at,
                    DecodeErrorKind::OutOfRange,
                    format!("{what}: integer {v} out of range"),
                )
            }),
            Head::Int(v, _) => Ok(Some(v)),
            other => Err(self.error(
                at,
                DecodeErrorKind::TypeMismatch,
                format!(
                    "{what}: expected an integer or nil, found {}",
                    head_kind(other)
                ),
            )),
        }
    }

    /// An array header, or an error naming `what`.
    pub fn array(&mut self, what: &str) -> Result<usize, DecodeError> {
        let at = self.pos;
        match self.head()? {
            Head::Array(n) => Ok(n),
            other => Err(self.error(
                at,
                DecodeErrorKind::TypeMismatch,
                format!("{what}: expected an array, found {}", head_kind(other)),
            )),
        }
    }

    /// An array of integers as u32, appended to `out` (token ids: any width; negatives wrap,
    /// as llm-d casts them). `true` when a value did not fit, so the caller can say so.
    pub fn u32_list_into(
        &mut self,
        what: &str,
        max: usize,
        out: &mut Vec<u32>,
    ) -> Result<bool, DecodeError> {
        let at = self.pos;
        let n = self.array(what)?;
        self.check_len(what, n, max, at)?;
        out.reserve(n.min(1 << 20));
        let mut out_of_range = false;
        for _ in 0..n {
            let at = self.pos;
            let v = match self.head()? {
                Head::Uint(v, _) => v,
                Head::Int(v, _) => v as u64,
                other => {
                    return Err(self.error(
                        at,
                        DecodeErrorKind::TypeMismatch,
                        format!("{what}: expected an integer, found {}", head_kind(other)),
                    ));
                }
            };
            out_of_range |= v > u32::MAX as u64;
            out.push(v as u32);
        }
        Ok(out_of_range)
    }

    /// Consume `wire` if these exact bytes are next.
    #[inline]
    pub fn eat_raw(&mut self, wire: &[u8]) -> bool {
        match self.buf.get(self.pos..self.pos + wire.len()) {
            Some(s) if short_eq(s, wire) => {
                self.pos += wire.len();
                true
            }
            _ => false,
        }
    }

    /// Consume a nil if it is next.
    #[inline]
    pub fn eat_nil(&mut self) -> bool {
        if self.buf.get(self.pos) == Some(&marker::NIL) {
            self.pos += 1;
            return true;
        }
        false
    }
}
