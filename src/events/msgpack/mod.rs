//! A small zero-copy msgpack reader that keeps what generic decoders lose: the wire width of
//! every integer (llm-d rejects hashes packed narrower than 64 bits) and the byte offset of
//! every error.

mod reader;
mod scan;
mod writer;

use std::fmt;

pub use reader::{MAX_TREE_ENTRIES, Reader};
pub use scan::{ValueScan, value_len};
pub use writer::Writer;

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

/// The deepest nesting read: the scan refuses what the reader would, at the same byte.
const MAX_DEPTH: usize = 64;

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
