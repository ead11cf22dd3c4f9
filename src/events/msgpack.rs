//! A small zero-copy msgpack reader that keeps what generic decoders lose: the wire width of
//! every integer (llm-d rejects hashes packed narrower than 64 bits) and the byte offset of
//! every error.

use std::fmt;

/// The marker byte that starts every msgpack value, named as in the msgpack spec. The fix
/// forms carry a small value or length in the marker's low bits; the others are followed by
/// a big-endian length or value of the width their name gives.
pub mod marker {
    /// Positive fixint (0x00 up to this): the byte is the value.
    pub const POSITIVE_FIXINT_MAX: u8 = 0x7f;
    /// Fixmap: up to 15 entries, counted in the low nibble.
    pub const FIXMAP: u8 = 0x80;
    pub const FIXMAP_MAX: u8 = 0x8f;
    /// Fixarray: up to 15 elements, counted in the low nibble.
    pub const FIXARRAY: u8 = 0x90;
    pub const FIXARRAY_MAX: u8 = 0x9f;
    /// Fixstr: up to 31 bytes, counted in the low five bits.
    pub const FIXSTR: u8 = 0xa0;
    pub const FIXSTR_MAX: u8 = 0xbf;
    pub const NIL: u8 = 0xc0;
    /// Reserved by the spec: invalid wherever it appears.
    pub const NEVER_USED: u8 = 0xc1;
    pub const FALSE: u8 = 0xc2;
    pub const TRUE: u8 = 0xc3;
    pub const BIN8: u8 = 0xc4;
    pub const BIN16: u8 = 0xc5;
    pub const BIN32: u8 = 0xc6;
    pub const EXT8: u8 = 0xc7;
    pub const EXT16: u8 = 0xc8;
    pub const EXT32: u8 = 0xc9;
    pub const FLOAT32: u8 = 0xca;
    pub const FLOAT64: u8 = 0xcb;
    pub const UINT8: u8 = 0xcc;
    pub const UINT16: u8 = 0xcd;
    pub const UINT32: u8 = 0xce;
    pub const UINT64: u8 = 0xcf;
    pub const INT8: u8 = 0xd0;
    pub const INT16: u8 = 0xd1;
    pub const INT32: u8 = 0xd2;
    pub const INT64: u8 = 0xd3;
    pub const FIXEXT1: u8 = 0xd4;
    pub const FIXEXT2: u8 = 0xd5;
    pub const FIXEXT4: u8 = 0xd6;
    pub const FIXEXT8: u8 = 0xd7;
    pub const FIXEXT16: u8 = 0xd8;
    pub const STR8: u8 = 0xd9;
    pub const STR16: u8 = 0xda;
    pub const STR32: u8 = 0xdb;
    pub const ARRAY16: u8 = 0xdc;
    pub const ARRAY32: u8 = 0xdd;
    pub const MAP16: u8 = 0xde;
    pub const MAP32: u8 = 0xdf;
    /// Negative fixint (from here to 0xff): the byte is the value as an i8.
    pub const NEGATIVE_FIXINT: u8 = 0xe0;
}

/// How an integer was encoded on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntWidth {
    /// positive or negative fixint (one byte)
    Fix,
    U8,
    U16,
    U32,
    U64,
    I8,
    I16,
    I32,
    I64,
}

/// What kind of decoding failure: callers count and branch on this, never on the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DecodeErrorKind {
    /// The bytes end inside a value.
    Truncated,
    /// Not msgpack: an invalid marker or a string that is not UTF-8.
    InvalidMsgpack,
    /// Containers nested deeper than the reader allows.
    TooDeep,
    /// Headers that claim more bytes than the payload limit.
    TooLarge,
    /// Valid msgpack of another type than the field needs.
    TypeMismatch,
    /// An integer outside the field's range.
    OutOfRange,
    /// Valid msgpack that is not a KV-event batch: missing fields, unknown tags, extra bytes.
    Schema,
}

impl DecodeErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DecodeErrorKind::Truncated => "truncated",
            DecodeErrorKind::InvalidMsgpack => "invalid_msgpack",
            DecodeErrorKind::TooDeep => "too_deep",
            DecodeErrorKind::TooLarge => "too_large",
            DecodeErrorKind::TypeMismatch => "type_mismatch",
            DecodeErrorKind::OutOfRange => "out_of_range",
            DecodeErrorKind::Schema => "schema",
        }
    }
}

/// Why bytes could not be decoded, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeErrorInfo {
    /// Offset of the offending byte: in the file for a [`Reader`] given the buffer's place
    /// in it (`base`), in the buffer itself for [`value_len`] and [`ValueScan`].
    pub offset: usize,
    pub kind: DecodeErrorKind,
    pub reason: String,
}

/// A [`DecodeErrorInfo`], boxed: errors are rare, and a one-word error keeps every `Result`
/// the decoder returns on its hot path small enough to travel in registers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(Box<DecodeErrorInfo>);

impl DecodeError {
    pub fn into_info(self) -> DecodeErrorInfo {
        *self.0
    }
}

impl std::ops::Deref for DecodeError {
    type Target = DecodeErrorInfo;
    fn deref(&self) -> &DecodeErrorInfo {
        &self.0
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (at byte {})", self.reason, self.offset)
    }
}

impl std::error::Error for DecodeError {}

/// A decoded value; containers are decoded on demand through [`Reader`].
#[derive(Debug, Clone, PartialEq)]
pub enum Val<'a> {
    Nil,
    Bool(bool),
    Uint(u64, IntWidth),
    Int(i64, IntWidth),
    Float(f64),
    Str(&'a str),
    Bin(&'a [u8]),
    Array(Vec<Val<'a>>),
    Map(Vec<(Val<'a>, Val<'a>)>),
    Ext(i8, &'a [u8]),
}

impl Val<'_> {
    pub fn kind(&self) -> &'static str {
        match self {
            Val::Nil => "nil",
            Val::Bool(_) => "bool",
            Val::Uint(..) | Val::Int(..) => "int",
            Val::Float(_) => "float",
            Val::Str(_) => "str",
            Val::Bin(_) => "bin",
            Val::Array(_) => "array",
            Val::Map(_) => "map",
            Val::Ext(..) => "ext",
        }
    }

    /// The value as a signed integer if it is an integer that fits.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Val::Uint(v, _) => i64::try_from(v).ok(),
            Val::Int(v, _) => Some(v),
            _ => None,
        }
    }
}

/// What the next value on the wire is, without consuming it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Head {
    Nil,
    Bool(bool),
    Uint(u64, IntWidth),
    Int(i64, IntWidth),
    Float,
    Str(usize),
    Bin(usize),
    Array(usize),
    Map(usize),
    Ext(usize),
}

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

const MAX_DEPTH: usize = 64;

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

/// Equality of two short slices of the same length without a call into libc's memcmp (which
/// dominated the key matching): overlapping 8-byte words, then the rest bytewise.
#[inline]
pub(crate) fn short_eq(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n >= 8 {
        let word =
            |s: &[u8], at: usize| u64::from_ne_bytes(s[at..at + 8].try_into().unwrap_or([0; 8]));
        let mut at = 0;
        while at + 8 < n {
            if word(a, at) != word(b, at) {
                return false;
            }
            at += 8;
        }
        return word(a, n - 8) == word(b, n - 8);
    }
    a.iter().zip(b).all(|(x, y)| x == y)
}

/// At most `max` bytes of `s`, cut at a character boundary (for input quoted in errors).
pub(crate) fn clip(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

pub(crate) fn head_kind(h: Head) -> &'static str {
    match h {
        Head::Nil => "nil",
        Head::Bool(_) => "bool",
        Head::Uint(..) | Head::Int(..) => "int",
        Head::Float => "float",
        Head::Str(_) => "str",
        Head::Bin(_) => "bin",
        Head::Array(_) => "array",
        Head::Map(_) => "map",
        Head::Ext(_) => "ext",
    }
}

/// Length of the msgpack value at the start of `buf`: `Ok(None)` if `buf` ends inside it.
pub fn value_len(buf: &[u8]) -> Result<Option<usize>, DecodeError> {
    ValueScan::new().advance(buf)
}

/// Finds where one msgpack value ends in a buffer that may still be growing. It resumes where
/// the last call stopped, so a value that arrives in many reads is scanned once in all (a
/// rescan from its start per read made a huge value cost time quadratic in its size).
///
/// Only the count of elements still owed at each open level is kept, so the state stays a
/// few words however many elements a header claims.
#[derive(Debug, Clone)]
pub struct ValueScan {
    /// Where the next header starts, relative to the value's start; past the buffer's end
    /// while a string, bin or ext body has not fully arrived.
    pos: usize,
    /// Elements (map: keys and values) still owed per open level; the bottom level is the
    /// value itself. At most `MAX_DEPTH + 1` levels, as the reader allows.
    owed: Vec<u64>,
    /// The most bytes the value may claim; checked at each header, so the header that goes
    /// past it is the error's position however the bytes arrived.
    limit: u64,
}

impl Default for ValueScan {
    fn default() -> Self {
        ValueScan::new()
    }
}

impl ValueScan {
    pub fn new() -> ValueScan {
        ValueScan::with_limit(u64::MAX)
    }

    /// A scan that fails at the first header whose claims (with what came before) need more
    /// than `limit` bytes.
    pub fn with_limit(limit: u64) -> ValueScan {
        ValueScan {
            pos: 0,
            owed: vec![1],
            limit,
        }
    }

    /// Bytes the value needs at the least, from what has been seen: every element still
    /// owed takes one byte or more. Lets a reader refuse a header whose claim cannot fit.
    pub fn min_len(&self) -> u64 {
        self.owed
            .iter()
            .fold(self.pos as u64, |acc, &n| acc.saturating_add(n))
    }

    /// Continue over `buf` (the same bytes as before, possibly with more appended):
    /// `Ok(Some(len))` once the value is complete, `Ok(None)` while it needs more bytes.
    pub fn advance(&mut self, buf: &[u8]) -> Result<Option<usize>, DecodeError> {
        loop {
            if self.pos > buf.len() {
                return Ok(None);
            }
            let Some(top) = self.owed.last_mut() else {
                return Ok(Some(self.pos));
            };
            if *top == 0 {
                self.owed.pop();
                continue;
            }
            let at = self.pos;
            let Some(&b) = buf.get(at) else {
                return Ok(None);
            };
            let len_at = |n: usize| -> Option<u64> {
                let bytes = buf.get(at + 1..at + 1 + n)?;
                Some(bytes.iter().fold(0u64, |acc, &x| acc << 8 | x as u64))
            };
            // (header bytes, body bytes, elements the header opens)
            let (head, body, open): (usize, u64, Option<u64>) = match b {
                0x00..=marker::POSITIVE_FIXINT_MAX
                | marker::NIL
                | marker::FALSE
                | marker::TRUE
                | marker::NEGATIVE_FIXINT..=0xff => (1, 0, None),
                marker::FIXMAP..=marker::FIXMAP_MAX => (1, 0, Some(2 * (b & 0x0f) as u64)),
                marker::FIXARRAY..=marker::FIXARRAY_MAX => (1, 0, Some((b & 0x0f) as u64)),
                marker::FIXSTR..=marker::FIXSTR_MAX => (1, (b & 0x1f) as u64, None),
                marker::NEVER_USED => {
                    return Err(DecodeError(Box::new(DecodeErrorInfo {
                        offset: at,
                        kind: DecodeErrorKind::InvalidMsgpack,
                        reason: "invalid msgpack marker 0xc1".into(),
                    })));
                }
                marker::FLOAT32 => (5, 0, None),
                marker::FLOAT64 => (9, 0, None),
                marker::UINT8 | marker::INT8 => (2, 0, None),
                marker::UINT16 | marker::INT16 => (3, 0, None),
                marker::UINT32 | marker::INT32 => (5, 0, None),
                marker::UINT64 | marker::INT64 => (9, 0, None),
                marker::FIXEXT1 => (3, 0, None),
                marker::FIXEXT2 => (4, 0, None),
                marker::FIXEXT4 => (6, 0, None),
                marker::FIXEXT8 => (10, 0, None),
                marker::FIXEXT16 => (18, 0, None),
                _ => {
                    let (width, ext, container) = match b {
                        marker::BIN8 | marker::STR8 => (1, 0, None),
                        marker::BIN16 | marker::STR16 => (2, 0, None),
                        marker::BIN32 | marker::STR32 => (4, 0, None),
                        marker::EXT8 => (1, 1, None),
                        marker::EXT16 => (2, 1, None),
                        marker::EXT32 => (4, 1, None),
                        marker::ARRAY16 => (2, 0, Some(1)),
                        marker::ARRAY32 => (4, 0, Some(1)),
                        marker::MAP16 => (2, 0, Some(2)),
                        _ => (4, 0, Some(2)), // marker::MAP32
                    };
                    let Some(n) = len_at(width) else {
                        return Ok(None);
                    };
                    match container {
                        Some(per) => (1 + width, 0, Some(per * n)),
                        None => (1 + width, n + ext, None),
                    }
                }
            };
            *top -= 1;
            if open.is_some() && self.owed.len() > MAX_DEPTH {
                return Err(DecodeError(Box::new(DecodeErrorInfo {
                    offset: at,
                    kind: DecodeErrorKind::TooDeep,
                    reason: "msgpack nested too deeply".into(),
                })));
            }
            self.pos = (at + head).saturating_add(usize::try_from(body).unwrap_or(usize::MAX));
            if let Some(n) = open.filter(|&n| n > 0) {
                self.owed.push(n);
            }
            if (body > 0 || open.is_some()) && self.min_len() > self.limit {
                return Err(DecodeError(Box::new(DecodeErrorInfo {
                    offset: at,
                    kind: DecodeErrorKind::TooLarge,
                    reason: if self.limit.is_multiple_of(1 << 30) {
                        format!(
                            "msgpack message claims more than the {} GiB limit by its headers",
                            self.limit >> 30
                        )
                    } else {
                        format!(
                            "msgpack message claims more than the {}-byte limit by its headers",
                            self.limit
                        )
                    },
                })));
            }
        }
    }
}

/// A minimal msgpack writer (smallest encodings, like msgspec), behind `encode::encode_batch`:
/// tests, benchmarks and fuzz seeds build captures with it.
#[derive(Default)]
pub struct Writer {
    pub buf: Vec<u8>,
}

impl Writer {
    pub fn nil(&mut self) -> &mut Self {
        self.buf.push(marker::NIL);
        self
    }
    pub fn bool(&mut self, b: bool) -> &mut Self {
        self.buf.push(if b { marker::TRUE } else { marker::FALSE });
        self
    }
    pub fn uint(&mut self, v: u64) -> &mut Self {
        match v {
            0..=0x7f => self.buf.push(v as u8),
            0x80..=0xff => self.buf.extend_from_slice(&[marker::UINT8, v as u8]),
            0x100..=0xffff => {
                self.buf.push(marker::UINT16);
                self.buf.extend_from_slice(&(v as u16).to_be_bytes());
            }
            0x1_0000..=0xffff_ffff => {
                self.buf.push(marker::UINT32);
                self.buf.extend_from_slice(&(v as u32).to_be_bytes());
            }
            _ => {
                self.buf.push(marker::UINT64);
                self.buf.extend_from_slice(&v.to_be_bytes());
            }
        }
        self
    }
    pub fn int(&mut self, v: i64) -> &mut Self {
        if v >= 0 {
            return self.uint(v as u64);
        }
        match v {
            -32..=-1 => self.buf.push(v as i8 as u8),
            -128..=-33 => self.buf.extend_from_slice(&[marker::INT8, v as i8 as u8]),
            -32768..=-129 => {
                self.buf.push(marker::INT16);
                self.buf.extend_from_slice(&(v as i16).to_be_bytes());
            }
            -2147483648..=-32769 => {
                self.buf.push(marker::INT32);
                self.buf.extend_from_slice(&(v as i32).to_be_bytes());
            }
            _ => {
                self.buf.push(marker::INT64);
                self.buf.extend_from_slice(&v.to_be_bytes());
            }
        }
        self
    }
    /// A u64 always written as uint64 (as vLLM's int hashes are when ≥ 2^32).
    pub fn u64_wide(&mut self, v: u64) -> &mut Self {
        self.buf.push(marker::UINT64);
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn f64(&mut self, v: f64) -> &mut Self {
        self.buf.push(marker::FLOAT64);
        self.buf.extend_from_slice(&v.to_bits().to_be_bytes());
        self
    }
    /// A length header in its smallest form: the fix form (`marker | n`) up to its limit,
    /// then the 8-bit form where the type has one, then 16 and 32 bits.
    fn len_head(&mut self, fix: Option<(u8, usize)>, m8: Option<u8>, m16: u8, m32: u8, n: usize) {
        match (fix, m8) {
            (Some((marker, max)), _) if n <= max => self.buf.push(marker | n as u8),
            (_, Some(m)) if n <= 0xff => self.buf.extend_from_slice(&[m, n as u8]),
            _ if n <= 0xffff => {
                self.buf.push(m16);
                self.buf.extend_from_slice(&(n as u16).to_be_bytes());
            }
            _ => {
                self.buf.push(m32);
                self.buf.extend_from_slice(&(n as u32).to_be_bytes());
            }
        }
    }
    pub fn str(&mut self, s: &str) -> &mut Self {
        self.len_head(
            Some((marker::FIXSTR, 31)),
            Some(marker::STR8),
            marker::STR16,
            marker::STR32,
            s.len(),
        );
        self.buf.extend_from_slice(s.as_bytes());
        self
    }
    pub fn bin(&mut self, b: &[u8]) -> &mut Self {
        self.len_head(
            None,
            Some(marker::BIN8),
            marker::BIN16,
            marker::BIN32,
            b.len(),
        );
        self.buf.extend_from_slice(b);
        self
    }
    pub fn array(&mut self, n: usize) -> &mut Self {
        self.len_head(
            Some((marker::FIXARRAY, 15)),
            None,
            marker::ARRAY16,
            marker::ARRAY32,
            n,
        );
        self
    }
    pub fn map(&mut self, n: usize) -> &mut Self {
        self.len_head(
            Some((marker::FIXMAP, 15)),
            None,
            marker::MAP16,
            marker::MAP32,
            n,
        );
        self
    }
    pub fn raw(&mut self, bytes: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(bytes);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_widths_round_trip() {
        for v in [
            0i64,
            1,
            127,
            128,
            255,
            256,
            65535,
            65536,
            4294967295,
            4294967296,
            -1,
            -32,
            -33,
            -129,
            -32769,
            -2147483649,
            i64::MIN,
            i64::MAX,
        ] {
            let mut w = Writer::default();
            w.int(v);
            let got = Reader::new(&w.buf, 0).value().unwrap();
            assert_eq!(got.as_i64(), Some(v), "{v}");
        }
        let mut w = Writer::default();
        w.uint(u64::MAX);
        assert_eq!(
            Reader::new(&w.buf, 0).value().unwrap(),
            Val::Uint(u64::MAX, IntWidth::U64)
        );
    }

    /// Every length form of every sized type, at its boundaries: the smallest header, read
    /// back to the same value.
    #[test]
    fn length_headers_take_the_smallest_form_and_round_trip() {
        for (n, str_head, bin_head, array_head) in [
            (0usize, 1usize, 2usize, 1usize),
            (15, 1, 2, 1),
            (16, 1, 2, 3),
            (31, 1, 2, 3),
            (32, 2, 2, 3),
            (255, 2, 2, 3),
            (256, 3, 3, 3),
            (65535, 3, 3, 3),
            (65536, 5, 5, 5),
        ] {
            let text = "x".repeat(n);
            let mut w = Writer::default();
            w.str(&text);
            assert_eq!(w.buf.len(), str_head + n, "str {n}");
            assert_eq!(Reader::new(&w.buf, 0).value().unwrap(), Val::Str(&text));
            let mut w = Writer::default();
            w.bin(text.as_bytes());
            assert_eq!(w.buf.len(), bin_head + n, "bin {n}");
            assert_eq!(
                Reader::new(&w.buf, 0).value().unwrap(),
                Val::Bin(text.as_bytes())
            );
            for map in [false, true] {
                let mut w = Writer::default();
                if map {
                    w.map(n);
                } else {
                    w.array(n);
                }
                assert_eq!(w.buf.len(), array_head, "container {n}");
                let mut r = Reader::new(&w.buf, 0);
                let want = if map { Head::Map(n) } else { Head::Array(n) };
                assert_eq!(r.head().unwrap(), want);
            }
        }
    }

    #[test]
    fn short_eq_compares_every_byte() {
        let a: Vec<u8> = (0..40).collect();
        for n in 0..40 {
            assert!(short_eq(&a[..n], &a[..n]));
            for i in 0..n {
                let mut b = a[..n].to_vec();
                b[i] ^= 0x20;
                assert!(!short_eq(&a[..n], &b), "len {n}, byte {i}");
            }
        }
        assert!(!short_eq(b"abc", b"ab"));
    }

    /// A value scanned in pieces, resuming after each, ends where a scan of it whole does,
    /// whatever the cut points: inside headers, inside string bodies, between elements.
    #[test]
    fn value_scan_resumes_where_it_stopped() {
        let mut w = Writer::default();
        w.array(5)
            .map(2)
            .str("k")
            .bin(&[1; 40])
            .uint(u64::MAX)
            .int(-5);
        w.array(2).f64(1.5).str(&"y".repeat(300));
        w.raw(&[0xd6, 1, 0, 0, 0, 0, 0xc7, 2, 9, 7, 7]); // fixext 4, ext 8 of 2 bytes
        w.array(0);
        w.uint(7); // the next value
        let whole = w.buf.len() - 1;
        assert_eq!(value_len(&w.buf).unwrap(), Some(whole));
        for step in [1, 2, 3, 7, 64] {
            let mut scan = ValueScan::new();
            let mut have = 0;
            let found = loop {
                have = (have + step).min(w.buf.len());
                if let Some(n) = scan.advance(&w.buf[..have]).unwrap() {
                    break n;
                }
                assert!(have < whole, "step {step}: not found at {have}");
                assert!(scan.min_len() as usize <= whole, "step {step}");
            };
            assert_eq!(found, whole, "step {step}");
        }
        // What is owed is known before the elements arrive.
        let mut scan = ValueScan::new();
        assert_eq!(scan.advance(&[0xdd, 0, 1, 0, 0, 0x90]).unwrap(), None);
        assert_eq!(scan.min_len(), 6 + 65535);
        let mut scan = ValueScan::new();
        assert_eq!(scan.advance(&[0x91, 0xdb, 0, 0, 1, 0]).unwrap(), None);
        assert_eq!(scan.min_len(), 6 + 256);
    }

    #[test]
    fn value_scan_errors_match_the_reader() {
        let e = value_len(&[0x92, 0x01, 0xc1]).unwrap_err();
        assert_eq!(
            (e.offset, e.reason.as_str()),
            (2, "invalid msgpack marker 0xc1")
        );
        let nested = |depth: usize| {
            let mut b = vec![0x91; depth - 1];
            b.push(0x90);
            b
        };
        assert_eq!(value_len(&nested(MAX_DEPTH)).unwrap(), Some(MAX_DEPTH));
        let e = value_len(&nested(MAX_DEPTH + 1)).unwrap_err();
        assert_eq!(e.reason, "msgpack nested too deeply");
        let deep = nested(MAX_DEPTH + 1);
        let mut r = Reader::new(&deep, 0);
        assert_eq!(r.skip().unwrap_err().offset, e.offset);
    }

    #[test]
    fn truncation_and_bad_markers_report_offsets() {
        let mut w = Writer::default();
        w.array(2).str("abc").uint(300);
        let full = w.buf.clone();
        assert_eq!(value_len(&full).unwrap(), Some(full.len()));
        assert_eq!(value_len(&full[..full.len() - 1]).unwrap(), None);
        let e = Reader::new(&[0x92, 0xc1], 100).value().unwrap_err();
        assert_eq!(e.offset, 101);
        let e = Reader::new(&[0xa2, 0xff, 0xfe], 0).value().unwrap_err();
        assert!(e.reason.contains("UTF-8"));
    }
}
