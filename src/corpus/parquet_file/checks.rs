//! The checks a Parquet file passes before the crate reads a row of it: its footer, its
//! schema and every page header, against [`Limits`].

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};

use parquet::basic::Compression as Codec;
use parquet::file::reader::{FileReader, SerializedFileReader};

use super::thrift::{Compact, Encoded, MAX_PAGE_HEADER_BYTES, PageKind};
use super::{Limits, MAGIC, invalid};

/// The footer (the file's metadata, Thrift-encoded) is read whole before anything else, and
/// the crate builds a structure per column chunk from it: real footers are kilobytes to a few
/// megabytes.
const MAX_FOOTER_BYTES: u64 = 16 << 20;
/// One page decompressed; a page holds many rows, and a row is at most 8 MiB.
const MAX_PAGE_BYTES: i64 = 128 << 20;
/// Values of a row group, all columns (a value becomes a field of a row when rows are read).
const MAX_ROW_GROUP_VALUES: u64 = 1 << 22;
/// What one value costs when a row is made of it, besides its bytes (the crate's field, its
/// name, the list or struct holding it).
const VALUE_OVERHEAD: u64 = 64;
/// What one row costs besides its values (its assembly, its JSON text, its audit or skip),
/// counted as bytes of work: a file of tiny rows reaches its budget by rows.
const ROW_OVERHEAD: u64 = 512;
/// Nesting of the schema (the crate builds it recursively); real schemas nest a few levels.
const MAX_SCHEMA_DEPTH: usize = 64;

/// The footer's length is within the file and within bounds (the crate reads it whole).
pub(super) fn check_footer(mut file: &File, len: u64, limits: &Limits) -> std::io::Result<()> {
    if len < 12 {
        return Err(invalid(format!(
            "{len} bytes: too short for a Parquet file"
        )));
    }
    let mut tail = [0u8; 8];
    file.seek(SeekFrom::Start(len - 8))?;
    file.read_exact(&mut tail)?;
    if &tail[4..] != MAGIC {
        return Err(invalid(
            "starts like a Parquet file but does not end like one (truncated?)".into(),
        ));
    }
    let footer = u64::from(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]));
    if footer > len - 12 {
        return Err(invalid(format!(
            "its footer claims {footer} bytes, more than the file holds"
        )));
    }
    if footer > MAX_FOOTER_BYTES {
        return Err(invalid(format!(
            "its footer is {footer} bytes, over kvaudit's limit of {MAX_FOOTER_BYTES}"
        )));
    }
    // Read here first: the crate parses the footer and builds the schema recursively, so its
    // nesting is bounded before the crate sees it.
    let mut bytes = vec![0u8; footer as usize];
    file.seek(SeekFrom::Start(len - 8 - footer))?;
    file.read_exact(&mut bytes)?;
    check_schema(&bytes, limits)
}

/// Walks the footer (FileMetaData) with the compact reader, whose nesting is bounded, and the
/// schema's tree (field 2: its elements in depth-first order, each with its `num_children`,
/// field 5), whose depth must stay under [`MAX_SCHEMA_DEPTH`] and whose fields are counted
/// before one is read.
fn check_schema(footer: &[u8], limits: &Limits) -> std::io::Result<()> {
    let mut r: &[u8] = footer;
    let mut c = Compact { r: &mut r, used: 0 };
    let mut open: Vec<i64> = Vec::new();
    let mut deepest = 0usize;
    c.each_field(0, &mut |c, id, ty, depth| match (id, ty) {
        (2, 9) => {
            let head = c.byte()?;
            let n = match head >> 4 {
                15 => c.varint()?,
                n => u64::from(n),
            };
            if head & 0x0f != 12 {
                return Err(invalid("a schema that is not a list of elements".into()));
            }
            if n > limits.columns {
                return Err(invalid(format!(
                    "its schema declares {n} fields, over kvaudit's limit of {} \
                     (--parquet-limit columns=N raises it)",
                    limits.columns
                )));
            }
            for _ in 0..n {
                let mut children = 0i64;
                c.each_field(depth + 2, &mut |c, id, ty, d| match id {
                    5 => {
                        children = c.i32_field(ty)?;
                        Ok(())
                    }
                    _ => c.skip(ty, d),
                })?;
                if children < 0 {
                    return Err(invalid(
                        "a schema element with a negative count of children".into(),
                    ));
                }
                if let Some(left) = open.last_mut() {
                    *left -= 1;
                }
                if children > 0 {
                    open.push(children);
                    deepest = deepest.max(open.len());
                    if deepest > MAX_SCHEMA_DEPTH {
                        return Err(invalid(format!(
                            "its schema nests deeper than kvaudit's limit of {MAX_SCHEMA_DEPTH}"
                        )));
                    }
                }
                while open.last() == Some(&0) {
                    open.pop();
                }
            }
            Ok(())
        }
        _ => c.skip(ty, depth),
    })
    .map_err(|e| invalid(format!("its footer cannot be read: {e}")))
}

/// Every page header of every column chunk, read and checked against `limits` before any
/// row is read; the codecs used. No two column chunks may share bytes (a footer that points
/// many row groups at one page would have it decompressed once for each), so the work follows
/// the bytes the file carries.
pub(super) fn check_pages(
    file: &File,
    file_bytes: u64,
    reader: &SerializedFileReader<File>,
    limits: &Limits,
) -> std::io::Result<&'static str> {
    let meta = reader.metadata();
    check_chunks_apart(meta, file_bytes)?;
    let mut codecs: Vec<&'static str> = Vec::new();
    let mut file_work = 0u64;
    for (g, group) in meta.row_groups().iter().enumerate() {
        let mut group_bytes = 0u64;
        let mut group_values = 0u64;
        // Each row costs its assembly, its JSON text and its audit or skip, whatever it holds.
        let mut group_made =
            u64::try_from(group.num_rows()).map_or(u64::MAX, |n| n.saturating_mul(ROW_OVERHEAD));
        for (c, column) in group.columns().iter().enumerate() {
            let codec = column.compression();
            let name = codec_name(codec);
            if !codecs.contains(&name) {
                codecs.push(name);
            }
            let start = column
                .dictionary_page_offset()
                .unwrap_or_else(|| column.data_page_offset());
            let (Ok(start), Ok(len)) = (
                u64::try_from(start),
                u64::try_from(column.compressed_size()),
            ) else {
                return Err(invalid(format!(
                    "row group {g}: a column chunk at a negative offset or size"
                )));
            };
            let end = start
                .checked_add(len)
                .filter(|&e| e <= file_bytes)
                .ok_or_else(|| {
                    invalid(format!(
                        "row group {g}: a column chunk ends past the end of the file"
                    ))
                })?;
            // The longest entry of the chunk's dictionary, once its first page is one: each
            // reference to it makes a copy of an entry when rows are made.
            let mut longest_entry: Option<u64> = None;
            let mut at = start;
            while at < end {
                let page = read_page(file, at, end, codec)
                    .map_err(|e| invalid(format!("row group {g}, page at byte {at}: {e}")))?;
                group_bytes = group_bytes.saturating_add(page.bytes);
                group_values = group_values.saturating_add(page.values);
                // Saturating: a footer's row count and a page's value count are the file's
                // word, and a sum past u64 is past every limit.
                group_made = group_made.saturating_add(match page.kind {
                    PageKind::Dictionary => {
                        if at == start {
                            longest_entry = Some(longest_dictionary_entry(reader, g, c)?);
                        }
                        0
                    }
                    PageKind::Data(Encoded::Dictionary) => {
                        let entry = longest_entry.ok_or_else(|| {
                            invalid(format!(
                                "row group {g}: a page refers to a dictionary its column \
                                 chunk does not start with"
                            ))
                        })?;
                        page.values.saturating_mul(entry + VALUE_OVERHEAD)
                    }
                    PageKind::Data(Encoded::Prefixed) => page
                        .values
                        .saturating_mul(page.bytes.saturating_add(VALUE_OVERHEAD)),
                    PageKind::Data(Encoded::Itself) => page
                        .bytes
                        .saturating_add(page.values.saturating_mul(VALUE_OVERHEAD)),
                    PageKind::Other => 0,
                });
                // Each value becomes a field of a row as the rows are assembled: a few bytes
                // of a page can claim billions of them.
                if group_values > MAX_ROW_GROUP_VALUES {
                    return Err(invalid(format!(
                        "row group {g} holds over {MAX_ROW_GROUP_VALUES} values, over kvaudit's \
                         limit for one row group"
                    )));
                }
                let most = group_bytes.max(group_made);
                if most > limits.row_group_bytes {
                    return Err(invalid(format!(
                        "row group {g} would make over {} bytes of pages or rows, kvaudit's \
                         limit for one row group (--parquet-limit row_group_bytes=SIZE \
                         raises it)",
                        limits.row_group_bytes
                    )));
                }
                at = page.next;
            }
        }
        file_work = file_work
            .saturating_add(group_bytes)
            .saturating_add(group_made);
        if file_work > limits.file_bytes {
            return Err(invalid(format!(
                "its pages decompressed and the rows made of them come to over {} bytes, \
                 kvaudit's limit for one file (--parquet-limit file_bytes=SIZE raises it)",
                limits.file_bytes
            )));
        }
    }
    Ok(crate::names::intern(&codecs.join("+")))
}

/// Column chunks whose bytes overlap are refused before any page is read (a footer listing
/// one row group many times would otherwise have its pages read, and inflated, once a copy).
fn check_chunks_apart(
    meta: &parquet::file::metadata::ParquetMetaData,
    file_bytes: u64,
) -> std::io::Result<()> {
    let mut chunks: Vec<(u64, u64)> = Vec::new();
    for group in meta.row_groups() {
        for column in group.columns() {
            let start = column
                .dictionary_page_offset()
                .unwrap_or_else(|| column.data_page_offset());
            if let (Ok(start), Ok(len)) = (
                u64::try_from(start),
                u64::try_from(column.compressed_size()),
            ) {
                // Out-of-range chunks are the page check's to name.
                chunks.push((
                    start.min(file_bytes),
                    start.saturating_add(len).min(file_bytes),
                ));
            }
        }
    }
    chunks.sort_unstable();
    if chunks.windows(2).any(|w| w[1].0 < w[0].1) {
        return Err(invalid(
            "two of its column chunks share bytes (each chunk is its own bytes in a Parquet \
             file)"
                .into(),
        ));
    }
    Ok(())
}

/// The longest entry of the dictionary page that starts column `c` of row group `g`, read
/// through the crate (decompressed; the page's size was checked before). Entries of a
/// byte-array dictionary are PLAIN: a 4-byte length, then the bytes; other types' entries are
/// all one width.
fn longest_dictionary_entry(
    reader: &SerializedFileReader<File>,
    g: usize,
    c: usize,
) -> std::io::Result<u64> {
    use parquet::column::page::Page as CratePage;
    let page = crate::panics::quietly_catching(|| {
        reader
            .get_row_group(g)
            .and_then(|r| r.get_column_page_reader(c))
            .and_then(|mut pages| pages.get_next_page())
    })
    .map_err(|p| invalid(format!("the parquet reader failed on a dictionary: {p}")))?
    .map_err(|e| invalid(format!("row group {g}: cannot read a dictionary: {e}")))?;
    let Some(CratePage::DictionaryPage {
        buf, num_values, ..
    }) = page
    else {
        return Err(invalid(format!(
            "row group {g}: a column chunk's first page is not the dictionary its header says"
        )));
    };
    let physical = reader.metadata().row_group(g).column(c).column_type();
    if physical != parquet::basic::Type::BYTE_ARRAY {
        return Ok(buf.len() as u64 / u64::from(num_values.max(1)));
    }
    let (mut rest, mut longest) = (&buf[..], 0u64);
    while rest.len() >= 4 {
        let n = u64::from(u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]));
        longest = longest.max(n);
        let step = usize::try_from(n).map_or(rest.len(), |n| n.saturating_add(4));
        rest = rest.get(step..).unwrap_or(&[]);
    }
    Ok(longest)
}

fn codec_name(codec: Codec) -> &'static str {
    match codec {
        Codec::UNCOMPRESSED => "none",
        Codec::SNAPPY => "snappy",
        Codec::GZIP(_) => "gzip",
        Codec::ZSTD(_) => "zstd",
        Codec::LZ4 => "lz4",
        Codec::LZ4_RAW => "lz4_raw",
        Codec::BROTLI(_) => "brotli",
        Codec::LZO => "lzo",
    }
}

/// One page: what reading it holds (its stored or decompressed bytes, whichever is more), the
/// values it gives, and where the next page starts.
#[derive(Debug)]
struct Page {
    bytes: u64,
    values: u64,
    next: u64,
    kind: PageKind,
}

/// The page header at `at` (its chunk ends at `end`), checked.
fn read_page(mut file: &File, at: u64, end: u64, codec: Codec) -> std::io::Result<Page> {
    file.seek(SeekFrom::Start(at))?;
    let room = (end - at).min(MAX_PAGE_HEADER_BYTES);
    let mut reader = BufReader::with_capacity(8 << 10, file.take(room));
    let mut thrift = Compact {
        r: &mut reader,
        used: 0,
    };
    let h = thrift.page_header()?;
    let used = thrift.used;
    let (Ok(uncompressed), Ok(compressed)) = (
        u64::try_from(h.uncompressed_size),
        u64::try_from(h.compressed_size),
    ) else {
        return Err(invalid("a negative page size".into()));
    };
    // The crate holds a page's stored bytes and its decompressed bytes.
    if h.uncompressed_size.max(h.compressed_size) > MAX_PAGE_BYTES {
        return Err(invalid(format!(
            "a page of {} bytes, over kvaudit's limit of {MAX_PAGE_BYTES}",
            uncompressed.max(compressed)
        )));
    }
    let Ok(values) = u64::try_from(h.values) else {
        return Err(invalid("a negative count of values".into()));
    };
    let next = at
        .checked_add(used)
        .and_then(|p| p.checked_add(compressed))
        .filter(|&n| n <= end)
        .ok_or_else(|| invalid("a page runs past the end of its column chunk".into()))?;
    // The crate inflates a gzip page to its end, whatever its header says: no more than it
    // says, then. (Other codecs decompress into the stated size.)
    if matches!(codec, Codec::GZIP(_)) && h.values_compressed {
        file.seek(SeekFrom::Start(at + used + h.levels_bytes.min(compressed)))?;
        let payload = file.take(compressed - h.levels_bytes.min(compressed));
        let limit = uncompressed.saturating_sub(h.levels_bytes);
        let mut inflated = flate2::read::MultiGzDecoder::new(payload).take(limit + 1);
        // A payload that is not gzip is the crate's error to report; only the size is ours.
        let n = std::io::copy(&mut inflated, &mut std::io::sink()).unwrap_or(0);
        if n > limit {
            return Err(invalid(format!(
                "a gzip page inflates past the {uncompressed} bytes its header states"
            )));
        }
    }
    Ok(Page {
        bytes: uncompressed.max(compressed),
        values,
        next,
        kind: h.kind,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zigzag(v: i64) -> Vec<u8> {
        let mut v = ((v << 1) ^ (v >> 63)) as u64;
        let mut out = Vec::new();
        while v >= 0x80 {
            out.push(v as u8 | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
        out
    }

    /// A file of one page: its header (sizes as given) and `payload`.
    fn one_page(uncompressed: i64, payload: &[u8]) -> (tempfile::NamedTempFile, u64) {
        use std::io::Write;
        let mut bytes = vec![0x15, 0x00, 0x15];
        bytes.extend(zigzag(uncompressed));
        bytes.push(0x15);
        bytes.extend(zigzag(payload.len() as i64));
        bytes.push(0x00);
        bytes.extend(payload);
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(&bytes).unwrap();
        (f, bytes.len() as u64)
    }

    /// A footer (FileMetaData) whose schema (field 2) is `depth` nested single-child groups.
    fn footer_nesting(depth: usize) -> Vec<u8> {
        let mut f = vec![0x15, 0x02]; // field 1 (version): i32 1
        f.push(0x19); // field 2: list
        f.push(0xfc); // of structs, size in a varint
        let mut n = depth + 1;
        while n >= 0x80 {
            f.push((n as u8) | 0x80);
            n >>= 7;
        }
        f.push(n as u8);
        for i in 0..=depth {
            let children = if i < depth { 1 } else { 0 };
            f.extend([0x55, children * 2, 0x00]); // field 5 (num_children): i32, stop
        }
        f.push(0x00);
        f
    }

    #[test]
    fn schema_depth_is_bounded_before_the_crate_builds_it() {
        assert!(check_schema(&footer_nesting(10), &Limits::default()).is_ok());
        assert!(check_schema(&footer_nesting(MAX_SCHEMA_DEPTH), &Limits::default()).is_ok());
        let wide = Limits {
            columns: 1 << 20,
            ..Limits::default()
        };
        let err = check_schema(&footer_nesting(10_000), &wide)
            .unwrap_err()
            .to_string();
        assert!(err.contains("nests deeper"), "{err}");
        // The fields are counted first, before one of them is read.
        let err = check_schema(&footer_nesting(10_000), &Limits::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("declares 10001 fields, over kvaudit's limit of 4096"),
            "{err}"
        );
        assert!(check_schema(&[0x19, 0x1c], &Limits::default()).is_err());
    }

    #[test]
    fn a_page_is_bounded_by_its_stored_size_too() {
        // 10 bytes decompressed from 300 MiB stored: the stored bytes are held all the same.
        let mut bytes = vec![0x15, 0x00, 0x15, 0x14, 0x15];
        let mut v = (300u64 << 20) << 1;
        while v >= 0x80 {
            bytes.push(v as u8 | 0x80);
            v >>= 7;
        }
        bytes.push(v as u8);
        bytes.push(0x00);
        let f = {
            use std::io::Write;
            let mut f = tempfile::NamedTempFile::new().unwrap();
            f.write_all(&bytes).unwrap();
            f
        };
        let err = read_page(f.as_file(), 0, u64::MAX / 2, Codec::UNCOMPRESSED)
            .unwrap_err()
            .to_string();
        assert!(err.contains("over kvaudit's limit"), "{err}");
    }

    #[test]
    fn a_gzip_page_may_not_inflate_past_its_stated_size() {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(&vec![0u8; 1 << 20]).unwrap();
        let payload = gz.finish().unwrap();
        let gzip = Codec::GZIP(Default::default());
        // Stated as what it is: read.
        let (f, end) = one_page(1 << 20, &payload);
        let page = read_page(f.as_file(), 0, end, gzip).unwrap();
        assert_eq!((page.bytes, page.next), (1 << 20, end));
        // Stated as ten bytes: the megabyte it inflates to is refused.
        let (f, end) = one_page(10, &payload);
        let err = read_page(f.as_file(), 0, end, gzip)
            .unwrap_err()
            .to_string();
        assert!(err.contains("inflates past the 10 bytes"), "{err}");
        // Another codec is decompressed into the stated size by the crate: not inflated here.
        assert!(read_page(f.as_file(), 0, end, Codec::SNAPPY).is_ok());
        // A page running past its chunk.
        let err = read_page(f.as_file(), 0, end - 1, gzip)
            .unwrap_err()
            .to_string();
        assert!(err.contains("past the end of its column chunk"), "{err}");
    }
}
