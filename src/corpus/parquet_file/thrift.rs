//! A reader of Thrift's compact protocol, the encoding of a Parquet file's footer and page
//! headers, read here so that their sizes and nesting are checked before the crate trusts them.

use std::io::{BufRead, Read};

use super::invalid;

/// A page header: its statistics may carry a value, so give it room, but not without end.
pub(super) const MAX_PAGE_HEADER_BYTES: u64 = 16 << 20;
/// Nesting of Thrift structs and lists in a page header (the real ones nest three deep).
const MAX_THRIFT_DEPTH: u32 = 32;

/// What kvaudit reads of a page header.
#[derive(Default)]
pub(super) struct PageHeader {
    pub(super) uncompressed_size: i64,
    pub(super) compressed_size: i64,
    /// Values the page holds (levels included): each becomes a value of a row.
    pub(super) values: i64,
    /// A v2 data page's level bytes, which precede the compressed values uncompressed.
    pub(super) levels_bytes: u64,
    /// Whether the values are compressed (a v2 page can say they are not).
    pub(super) values_compressed: bool,
    pub(super) kind: PageKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum PageKind {
    Dictionary,
    /// A data page, and how its values are encoded.
    Data(Encoded),
    /// An index page (or a kind this reader does not know): it makes no values.
    #[default]
    Other,
}

/// How a data page's values are encoded, as far as what they make when rows are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Encoded {
    /// Each value is its own bytes in the page (PLAIN, DELTA_LENGTH_BYTE_ARRAY, …).
    Itself,
    /// PLAIN_DICTIONARY, RLE_DICTIONARY: references into the chunk's dictionary.
    Dictionary,
    /// DELTA_BYTE_ARRAY: each value may repeat the one before as its prefix, so a value is
    /// at most the page's bytes long.
    Prefixed,
}

impl Encoded {
    fn of(encoding: i64) -> Encoded {
        match encoding {
            2 | 8 => Encoded::Dictionary,
            7 => Encoded::Prefixed,
            _ => Encoded::Itself,
        }
    }
}

/// A reader of Thrift's compact protocol, as much of it as a page header needs, counting the
/// bytes it reads.
pub(super) struct Compact<'r> {
    pub(super) r: &'r mut dyn BufRead,
    pub(super) used: u64,
}

impl Compact<'_> {
    pub(super) fn byte(&mut self) -> std::io::Result<u8> {
        let mut b = [0u8; 1];
        self.r.read_exact(&mut b).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => invalid(format!(
                "Thrift data cut short (a page header is at most {MAX_PAGE_HEADER_BYTES} bytes, \
                 within its chunk)"
            )),
            _ => e,
        })?;
        self.used += 1;
        Ok(b[0])
    }

    pub(super) fn varint(&mut self) -> std::io::Result<u64> {
        let mut out = 0u64;
        for shift in (0..70).step_by(7) {
            let b = self.byte()?;
            out |= u64::from(b & 0x7f) << shift.min(63);
            if b & 0x80 == 0 {
                return Ok(out);
            }
        }
        Err(invalid("a varint over ten bytes".into()))
    }

    fn zigzag(&mut self) -> std::io::Result<i64> {
        let v = self.varint()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    fn skip_bytes(&mut self, n: u64) -> std::io::Result<()> {
        let copied = std::io::copy(&mut (&mut self.r).take(n), &mut std::io::sink())?;
        self.used += copied;
        if copied < n {
            return Err(invalid("a page header cut short".into()));
        }
        Ok(())
    }

    /// Skips one value of compact type `ty`.
    pub(super) fn skip(&mut self, ty: u8, depth: u32) -> std::io::Result<()> {
        if depth > MAX_THRIFT_DEPTH {
            return Err(invalid("a page header nested too deep".into()));
        }
        match ty {
            1 | 2 => Ok(()),
            3 => self.byte().map(drop),
            4..=6 => self.varint().map(drop),
            7 => self.skip_bytes(8),
            8 => {
                let n = self.varint()?;
                self.skip_bytes(n)
            }
            9 | 10 => {
                let head = self.byte()?;
                let n = match head >> 4 {
                    15 => self.varint()?,
                    n => u64::from(n),
                };
                let elem = head & 0x0f;
                for _ in 0..n {
                    self.element(elem, depth + 1)?;
                }
                Ok(())
            }
            11 => {
                let n = self.varint()?;
                if n > 0 {
                    let kinds = self.byte()?;
                    for _ in 0..n {
                        self.element(kinds >> 4, depth + 1)?;
                        self.element(kinds & 0x0f, depth + 1)?;
                    }
                }
                Ok(())
            }
            12 => self.each_field(depth + 1, &mut |t, _, ty, d| t.skip(ty, d)),
            other => Err(invalid(format!("a page header with Thrift type {other}"))),
        }
    }

    /// Skips one element of a list, set or map: a bool is a byte of its own there (in a
    /// struct its value is in the field's type), so every element takes at least a byte and a
    /// count cannot make the loop outlast the header's bytes.
    fn element(&mut self, ty: u8, depth: u32) -> std::io::Result<()> {
        if ty == 1 || ty == 2 {
            return self.byte().map(drop);
        }
        self.skip(ty, depth)
    }

    /// Calls `f(self, field id, type, depth)` for each field of the struct at the reader.
    pub(super) fn each_field(
        &mut self,
        depth: u32,
        f: &mut dyn FnMut(&mut Self, i16, u8, u32) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        if depth > MAX_THRIFT_DEPTH {
            return Err(invalid("a page header nested too deep".into()));
        }
        let mut last: i16 = 0;
        loop {
            let head = self.byte()?;
            if head == 0 {
                return Ok(());
            }
            let ty = head & 0x0f;
            let id = match head >> 4 {
                0 => i16::try_from(self.zigzag()?)
                    .map_err(|_| invalid("a field id out of range".into()))?,
                delta => last.wrapping_add(i16::from(delta)),
            };
            last = id;
            f(self, id, ty, depth)?;
        }
    }

    pub(super) fn i32_field(&mut self, ty: u8) -> std::io::Result<i64> {
        if ty != 5 {
            return Err(invalid(format!("a size field of Thrift type {ty}")));
        }
        let v = self.zigzag()?;
        i32::try_from(v)
            .map(i64::from)
            .map_err(|_| invalid("a size field out of range".into()))
    }

    pub(super) fn page_header(&mut self) -> std::io::Result<PageHeader> {
        let mut h = PageHeader {
            values_compressed: true,
            ..PageHeader::default()
        };
        let (mut seen_u, mut seen_c) = (false, false);
        self.each_field(0, &mut |t, id, ty, depth| match id {
            2 => {
                h.uncompressed_size = t.i32_field(ty)?;
                seen_u = true;
                Ok(())
            }
            3 => {
                h.compressed_size = t.i32_field(ty)?;
                seen_c = true;
                Ok(())
            }
            // DataPageHeader, DictionaryPageHeader: num_values first, then the encoding.
            5 | 7 if ty == 12 => {
                let mut encoding = 0i64;
                t.each_field(depth + 1, &mut |t, id, ty, d| match id {
                    1 => {
                        h.values = t.i32_field(ty)?;
                        Ok(())
                    }
                    2 => {
                        encoding = t.i32_field(ty)?;
                        Ok(())
                    }
                    _ => t.skip(ty, d),
                })?;
                h.kind = if id == 7 {
                    PageKind::Dictionary
                } else {
                    PageKind::Data(Encoded::of(encoding))
                };
                Ok(())
            }
            // DataPageHeaderV2: num_values, level lengths, is_compressed.
            8 if ty == 12 => {
                let (mut def, mut rep, mut encoding) = (0i64, 0i64, 0i64);
                t.each_field(depth + 1, &mut |t, id, ty, d| match id {
                    1 => {
                        h.values = t.i32_field(ty)?;
                        Ok(())
                    }
                    4 => {
                        encoding = t.i32_field(ty)?;
                        Ok(())
                    }
                    5 => {
                        def = t.i32_field(ty)?;
                        Ok(())
                    }
                    6 => {
                        rep = t.i32_field(ty)?;
                        Ok(())
                    }
                    7 if ty == 1 || ty == 2 => {
                        h.values_compressed = ty == 1;
                        Ok(())
                    }
                    _ => t.skip(ty, d),
                })?;
                h.levels_bytes = u64::try_from(def.max(0) + rep.max(0)).unwrap_or(0);
                h.kind = PageKind::Data(Encoded::of(encoding));
                Ok(())
            }
            _ => t.skip(ty, depth),
        })?;
        if !(seen_u && seen_c) {
            return Err(invalid("a page header without its sizes".into()));
        }
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(bytes: &[u8]) -> std::io::Result<(PageHeader, u64)> {
        let mut r: &[u8] = bytes;
        let mut c = Compact { r: &mut r, used: 0 };
        let h = c.page_header()?;
        Ok((h, c.used))
    }

    #[test]
    fn compact_page_headers() {
        // type=0 (i32 field 1: 0x15 0x00), uncompressed=100 (field 2: 0x15, zigzag 200 =
        // 0xc8 0x01), compressed=60 (field 3: 0x15, 120 = 0x78), stop.
        let (h, used) = header(&[0x15, 0x00, 0x15, 0xc8, 0x01, 0x15, 0x78, 0x00]).unwrap();
        assert_eq!((h.uncompressed_size, h.compressed_size, used), (100, 60, 8));
        assert!(h.values_compressed);
        // The same with a DataPageHeaderV2 (field 8, delta 5 from 3: 0x5c) whose levels take
        // 3 + 4 bytes and whose values are not compressed (field 7 false: 0x12).
        let v2 = [
            0x15, 0x00, 0x15, 0xc8, 0x01, 0x15, 0x78, // sizes
            0x5c, // field 8, struct
            0x55, 0x06, // field 5: 3
            0x15, 0x08, // field 6: 4
            0x12, // field 7: false
            0x00, 0x00,
        ];
        let (h, used) = header(&v2).unwrap();
        assert_eq!((h.levels_bytes, h.values_compressed, used), (7, false, 15));
        // Other fields are skipped whatever their type: a binary (field 4 as type 8, 3 bytes)
        // and a list of two i32 (field 5, type 9: 0x25 list head).
        let skipped = [
            0x15, 0x00, 0x15, 0xc8, 0x01, 0x15, 0x78, 0x18, 0x03, b'a', b'b', b'c', 0x19, 0x25,
            0x02, 0x04, 0x00,
        ];
        assert_eq!(header(&skipped).unwrap().1, 17);
        // Cut short, sizes missing (field 1 a binary), a size of the wrong type (an i64),
        // nesting without end.
        assert!(header(&[0x15, 0x00, 0x15]).is_err());
        assert!(header(&[0x15, 0x00, 0x00]).is_err());
        assert!(header(&[0x18, 0x00, 0x00]).is_err());
        assert!(header(&[0x26, 0x02, 0x00]).is_err());
        assert!(header(&[0x1c; 200]).is_err());
        // A field id given in full (0x05 = i32 with id to follow, zigzag 4 = id 2).
        let (h, _) = header(&[0x05, 0x04, 0x0a, 0x15, 0x02, 0x00]).unwrap();
        assert_eq!((h.uncompressed_size, h.compressed_size), (5, 1));
    }

    #[test]
    fn counts_in_a_header_cannot_outlast_its_bytes() {
        // A map of bools claiming 2^63 entries (its bools a byte each): cut short at once.
        let mut map = vec![0x1b];
        map.extend([0xff; 9]);
        map.extend([0x01, 0x11]);
        assert!(header(&map).is_err());
        // A list of 2^32 empty structs, the same.
        let mut list = vec![0x19, 0xfc, 0xff, 0xff, 0xff, 0x0f];
        list.push(0x00);
        assert!(header(&list).is_err());
        // A data page header's num_values (field 5, struct, field 1) is read.
        let data = [
            0x15, 0x00, 0x15, 0x02, 0x15, 0x02, 0x2c, 0x15, 0x80, 0x80, 0x01, 0x00, 0x00,
        ];
        let (h, _) = header(&data).unwrap();
        assert_eq!(h.values, 8192);
    }
}
