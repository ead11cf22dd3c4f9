//! Where a msgpack value ends, found without decoding it, in a buffer that may still be
//! growing (a frame read from a socket or a file a piece at a time).

use super::{DecodeError, DecodeErrorInfo, DecodeErrorKind, MAX_DEPTH, marker};

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
