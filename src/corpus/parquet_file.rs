//! Parquet corpus files (Hugging Face datasets: `messages`, WildChat/LMSYS `conversation`,
//! ShareGPT `conversations` columns), read a row at a time through the parquet crate's record
//! reader (no Arrow): a row group's pages are read and decompressed as its rows are taken, so
//! memory follows the pages of one row group, not the file. Each row becomes the JSON object
//! of its columns, which the corpus reads as it reads a JSONL row.
//!
//! A Parquet file is untrusted like any input. Before the crate reads it, its footer length
//! is checked against the file, and every page header of every column chunk is read here (a
//! small reader of Thrift's compact protocol) and checked: sizes within the chunk and below
//! the limits, so no page makes the crate allocate past them, and a gzip page does not
//! inflate past the size its header states (the crate inflates gzip to the end). Whatever the
//! crate still meets (a bad encoding deep in a page) is an error of the file, panics included.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};

use parquet::basic::Compression as Codec;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::reader::RowIter;

/// The first and last four bytes of every Parquet file.
pub const MAGIC: &[u8; 4] = b"PAR1";
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

/// How much one Parquet file may make kvaudit do, each checked from the footer and the page
/// headers before any row is read (`corpus --parquet-limit KEY=SIZE` raises one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// All the file's pages decompressed plus the rows made of them, counting each dictionary
    /// reference at its longest entry: the work the file asks for.
    pub file_bytes: u64,
    /// The same for one row group, which bounds one row (a row never spans row groups), and
    /// its pages decompressed: what reading it may hold at once.
    pub row_group_bytes: u64,
    /// Fields its schema declares (the crate builds a column reader per leaf).
    pub columns: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            file_bytes: 4 << 30,
            row_group_bytes: 256 << 20,
            columns: 4096,
        }
    }
}

impl Limits {
    /// The keys `--parquet-limit` takes, with what each bounds.
    pub const KEYS: [(&'static str, &'static str); 3] = [
        (
            "file_bytes",
            "pages decompressed plus rows made, in one file",
        ),
        (
            "row_group_bytes",
            "the same in one row group (bounds one row)",
        ),
        ("columns", "fields the schema declares"),
    ];

    /// Sets one limit from `KEY=VALUE` (a size like 8GiB, or a count).
    pub fn set(&mut self, text: &str) -> Result<(), String> {
        let (key, value) = text
            .split_once('=')
            .ok_or_else(|| format!("{text:?}: expected KEY=VALUE, e.g. file_bytes=8GiB"))?;
        let n = crate::input::parse_size(value.trim())
            .ok_or_else(|| format!("{key}={value}: expected a size like 8GiB or a count"))?;
        let slot = match key.trim() {
            "file_bytes" => &mut self.file_bytes,
            "row_group_bytes" => &mut self.row_group_bytes,
            "columns" => &mut self.columns,
            other => {
                let keys: Vec<&str> = Limits::KEYS.iter().map(|(k, _)| *k).collect();
                return Err(format!(
                    "no Parquet limit {other:?} (known: {})",
                    keys.join(", ")
                ));
            }
        };
        if n == 0 {
            return Err(format!("{key}={value}: a limit of 0 reads nothing"));
        }
        *slot = n;
        Ok(())
    }
}
/// Nesting of the schema (the crate builds it recursively); real schemas nest a few levels.
const MAX_SCHEMA_DEPTH: usize = 64;
/// A page header: its statistics may carry a value, so give it room, but not without end.
const MAX_PAGE_HEADER_BYTES: u64 = 16 << 20;
/// Nesting of Thrift structs and lists in a page header (the real ones nest three deep).
const MAX_THRIFT_DEPTH: u32 = 32;

fn invalid(message: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, message)
}

/// The rows of one Parquet file.
pub struct ParquetRows {
    rows: RowIter<'static>,
    /// The codecs of its column chunks, e.g. `snappy` or `zstd+gzip`.
    pub codecs: &'static str,
    /// Rows the footer says the file has, and its size (progress is counted per row).
    pub total_rows: u64,
    pub file_bytes: u64,
}

impl ParquetRows {
    /// Checks `file`'s footer and page headers, then opens it for reading row by row.
    pub fn open(file: File, limits: &Limits) -> std::io::Result<ParquetRows> {
        let file_bytes = file.metadata()?.len();
        check_footer(&file, file_bytes, limits)?;
        // The page headers are read through a handle of their own (the reader owns the file).
        let headers = file.try_clone()?;
        let reader = crate::panics::quietly_catching(|| SerializedFileReader::new(file))
            .map_err(|p| invalid(format!("the parquet reader failed on this file: {p}")))?
            .map_err(|e| invalid(format!("not a readable Parquet file: {e}")))?;
        let meta = reader.metadata();
        let codecs = check_pages(&headers, file_bytes, &reader, limits)?;
        let total_rows = meta
            .row_groups()
            .iter()
            .map(|g| u64::try_from(g.num_rows()).unwrap_or(0))
            .sum();
        let rows = RowIter::from_file_into(Box::new(reader));
        Ok(ParquetRows {
            rows,
            codecs,
            total_rows,
            file_bytes,
        })
    }

    /// The next row as JSON text (`None` inside when that text would be over `max_bytes`: the
    /// row is then never written out), an error that ends the file, or `None` at its end.
    pub fn next_json(&mut self, max_bytes: u64) -> Option<Result<Option<String>, String>> {
        let row = match crate::panics::quietly_catching(|| self.rows.next()) {
            Ok(row) => row?,
            Err(panic) => return Some(Err(format!("the parquet reader failed: {panic}"))),
        };
        Some(match row {
            // The text is at least the row's strings and names: a row past the limit on those
            // alone is not copied twice more (as a JSON value, then as text) to find out.
            Ok(row) if text_at_least(&row) > max_bytes => Ok(None),
            Ok(row) => crate::panics::quietly_catching(|| row.to_json_value().to_string())
                .map(Some)
                .map_err(|p| format!("a value of this row cannot be written as JSON: {p}")),
            Err(e) => Err(format!("cannot read the next row: {e}")),
        })
    }
}

/// Bytes the row's JSON text has at least: its names, strings and binary values (written as
/// base64, longer than the bytes).
fn text_at_least(row: &parquet::record::Row) -> u64 {
    use parquet::record::Field;
    fn field(f: &Field) -> u64 {
        match f {
            Field::Str(s) => s.len() as u64,
            Field::Bytes(b) => b.len() as u64,
            Field::Group(r) => text_at_least(r),
            Field::ListInternal(l) => l.elements().iter().map(field).sum(),
            Field::MapInternal(m) => m.entries().iter().map(|(k, v)| field(k) + field(v)).sum(),
            _ => 1,
        }
    }
    row.get_column_iter()
        .map(|(name, f)| name.len() as u64 + field(f))
        .sum()
}

/// The footer's length is within the file and within bounds (the crate reads it whole).
fn check_footer(mut file: &File, len: u64, limits: &Limits) -> std::io::Result<()> {
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
fn check_pages(
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum PageKind {
    Dictionary,
    /// A data page, and how its values are encoded.
    Data(Encoded),
    /// An index page (or a kind this reader does not know): it makes no values.
    #[default]
    Other,
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

/// What kvaudit reads of a page header.
#[derive(Default)]
struct PageHeader {
    uncompressed_size: i64,
    compressed_size: i64,
    /// Values the page holds (levels included): each becomes a value of a row.
    values: i64,
    /// A v2 data page's level bytes, which precede the compressed values uncompressed.
    levels_bytes: u64,
    /// Whether the values are compressed (a v2 page can say they are not).
    values_compressed: bool,
    kind: PageKind,
}

/// How a data page's values are encoded, as far as what they make when rows are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoded {
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
struct Compact<'r> {
    r: &'r mut dyn BufRead,
    used: u64,
}

impl Compact<'_> {
    fn byte(&mut self) -> std::io::Result<u8> {
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

    fn varint(&mut self) -> std::io::Result<u64> {
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
    fn skip(&mut self, ty: u8, depth: u32) -> std::io::Result<()> {
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
    fn each_field(
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

    fn i32_field(&mut self, ty: u8) -> std::io::Result<i64> {
        if ty != 5 {
            return Err(invalid(format!("a size field of Thrift type {ty}")));
        }
        let v = self.zigzag()?;
        i32::try_from(v)
            .map(i64::from)
            .map_err(|_| invalid("a size field out of range".into()))
    }

    fn page_header(&mut self) -> std::io::Result<PageHeader> {
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
