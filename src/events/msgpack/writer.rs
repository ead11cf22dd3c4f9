//! Encoding, the reader's other side: what it writes, the reader must read back the same.

use super::marker;

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
