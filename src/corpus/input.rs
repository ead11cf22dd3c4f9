//! Corpus input: rows of conversations from JSONL, ShareGPT JSON/JSONL and WildChat/LMSYS
//! JSONL files, plain, gzip or zstd, and Parquet files of the same layouts, streamed.
//!
//! The reader only splits the input into rows and numbers them; turning a row's text into a
//! [`Conversation`] happens on the worker that audits it ([`Raw::conversation`]), so JSON
//! parsing runs in parallel and the reader holds one row at a time. A row that cannot be used
//! is a skip with a reason, never an error: only a file that cannot be opened stops the run.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Map, Value as Json};

use crate::render::Conversation;
use crate::render::conversation::{
    ConversationError, FIELDS, MAX_CONVERSATION_BYTES, MAX_MESSAGES, entry, field,
};

/// How rows are laid out (`--format-in`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowFormat {
    /// Decided per file by its first row.
    Auto,
    /// kvaudit's conversation format (`{"messages": [...], "tools": ...}`) or a bare list of
    /// messages; fields other than the conversation's (`id`, `meta`, ...) are ignored.
    Openai,
    /// `{"conversations": [{"from": "human"|"gpt"|..., "value": ...}]}`.
    Sharegpt,
    /// `{"conversation": [{"role": ..., "content": ...}, ...]}` (WildChat, LMSYS-Chat-1M).
    Wildchat,
}

impl RowFormat {
    pub fn name(self) -> &'static str {
        match self {
            RowFormat::Auto => "auto",
            RowFormat::Openai => "openai",
            RowFormat::Sharegpt => "sharegpt",
            RowFormat::Wildchat => "wildchat",
        }
    }

    /// The format a row's JSON has, from its keys.
    fn of(value: &Json) -> Option<RowFormat> {
        match value {
            Json::Array(_) => Some(RowFormat::Openai),
            Json::Object(o) if o.contains_key("messages") => Some(RowFormat::Openai),
            Json::Object(o) if o.contains_key("conversations") => Some(RowFormat::Sharegpt),
            Json::Object(o) if o.contains_key("conversation") => Some(RowFormat::Wildchat),
            _ => None,
        }
    }
}

/// How a file is compressed, from its first bytes (the extension can lie or be missing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
}

impl Compression {
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
        }
    }
}

/// A row as read: its text, where it is, and the format of its file.
#[derive(Debug, Clone)]
pub struct Raw {
    /// `FILE:LINE`, the line the row starts on.
    pub source: String,
    pub text: String,
    pub format: RowFormat,
}

pub enum Item {
    Raw(Raw),
    Skipped {
        source: String,
        reason: &'static str,
        error: Option<String>,
    },
}

/// One input file as the report shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FileSummary {
    pub path: String,
    #[serde(deserialize_with = "crate::names::de_name")]
    pub format: crate::names::Name,
    #[serde(deserialize_with = "crate::names::de_name")]
    pub compression: crate::names::Name,
    /// Rows read from it (used or skipped), before `--limit` and `--sample` stop or drop any.
    pub rows: u64,
    /// XXH3-128 of its rows as read, in hex (each row's text without the white space around
    /// it, or a skipped row's reason, length-prefixed): the same rows give the same digest
    /// whatever the file's compression or line endings, so a merge never counts them twice.
    pub digest: String,
}

#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct InputSummary {
    pub files: Vec<FileSummary>,
    /// `--sample N --seed S`: rows kept out of those read.
    pub sampled: Option<(u64, u64)>,
    /// `--limit N` stopped the reading.
    pub limited: bool,
}

/// Why reading the input stopped with an error: only opening a file does.
#[derive(Debug, thiserror::Error)]
#[error("cannot read {path}")]
pub struct OpenError {
    pub path: String,
    pub source: std::io::Error,
}

/// Where a row of a file starts; JSON arrays are split by element.
enum Layout {
    /// One row per non-empty line.
    Lines,
    /// The file is one JSON array of rows (a ShareGPT `.json` file); `at` is whether its
    /// closing bracket has been seen.
    Array { closed: bool },
    /// The file is one conversation written over several lines (what `diff-turns -c`
    /// reads): a corpus of one row; `read` is whether it has been.
    Single { read: bool },
    /// A Parquet file: a row per table row, numbered from 1.
    Parquet(Box<super::parquet_file::ParquetRows>),
}

struct OpenFile {
    shown: String,
    reader: Box<dyn BufRead + Send>,
    layout: Layout,
    format: RowFormat,
    compression: Compression,
    line: u64,
    rows: u64,
    /// A scan error that ends the file (an array whose element never closes).
    broken: bool,
    /// A read or decompression error met while opening, reported as the first row so that a
    /// corrupt stream is an `unreadable` row wherever in the file the damage is.
    failed: Option<std::io::Error>,
    /// Progress counted per row of a Parquet file: its bytes over its rows.
    bytes_per_row: u64,
    bytes_read: Arc<AtomicU64>,
    digest: Digest,
}

/// What `--limit` and `--sample` ask for, and what a Parquet file may make the reading do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Selection {
    pub limit: Option<u64>,
    pub sample: Option<(u64, u64)>,
    pub parquet: super::parquet_file::Limits,
}

/// The rows of every file in turn.
pub struct Rows {
    paths: Vec<PathBuf>,
    next_path: usize,
    current: Option<OpenFile>,
    forced: RowFormat,
    parquet: super::parquet_file::Limits,
    done_files: Vec<FileSummary>,
    limit: Option<u64>,
    taken: u64,
    limited: bool,
    /// Sampled rows, once the whole input was read, in input order.
    sampled: Option<std::vec::IntoIter<Item>>,
    sample_counts: Option<(u64, u64)>,
    /// Bytes read from the files (compressed bytes for compressed files), for progress.
    pub bytes_read: Arc<AtomicU64>,
    /// The first file that could not be opened (the run reports it and stops).
    pub open_error: Option<OpenError>,
}

/// The largest row: the same bound as a conversation file.
pub const MAX_ROW_BYTES: u64 = MAX_CONVERSATION_BYTES;

impl Rows {
    pub fn new(paths: Vec<PathBuf>, forced: RowFormat, selection: Selection) -> Rows {
        let mut rows = Rows {
            paths,
            next_path: 0,
            current: None,
            forced,
            parquet: selection.parquet,
            done_files: Vec::new(),
            limit: selection.limit,
            taken: 0,
            limited: false,
            sampled: None,
            sample_counts: None,
            bytes_read: Arc::new(AtomicU64::new(0)),
            open_error: None,
        };
        if let Some((n, seed)) = selection.sample {
            rows.sample(n, seed);
        }
        rows
    }

    /// Total size of the input files, when they are regular files (for a progress bar).
    pub fn total_bytes(paths: &[PathBuf]) -> Option<u64> {
        paths
            .iter()
            .map(|p| {
                if p.as_os_str() == "-" {
                    None
                } else {
                    std::fs::metadata(p).ok().map(|m| m.len())
                }
            })
            .sum()
    }

    pub fn summary(&self) -> InputSummary {
        let mut files = self.done_files.clone();
        if let Some(f) = &self.current {
            files.push(f.summary());
        }
        InputSummary {
            files,
            sampled: self.sample_counts,
            limited: self.limited,
        }
    }

    /// Reservoir sampling (Vitter's algorithm R) with a seeded generator: the same rows for the
    /// same input and seed. Memory grows with N (the rows kept), not with the input.
    fn sample(&mut self, n: u64, seed: u64) {
        let mut rng = SplitMix64(seed);
        let mut kept: Vec<(u64, Item)> = Vec::new();
        let mut seen = 0u64;
        while let Some(item) = self.next_row() {
            if (seen as usize) < n as usize {
                kept.push((seen, item));
            } else {
                let j = rng.below(seen + 1);
                if j < n {
                    kept[j as usize] = (seen, item);
                }
            }
            seen += 1;
        }
        kept.sort_by_key(|(order, _)| *order);
        self.sample_counts = Some((kept.len() as u64, seen));
        self.sampled = Some(
            kept.into_iter()
                .map(|(_, item)| item)
                .collect::<Vec<_>>()
                .into_iter(),
        );
    }

    fn open_next(&mut self) -> bool {
        let Some(path) = self.paths.get(self.next_path).cloned() else {
            return false;
        };
        self.next_path += 1;
        match open(&path, self.forced, &self.parquet, self.bytes_read.clone()) {
            Ok(f) => {
                self.current = Some(f);
                true
            }
            Err(e) => {
                self.open_error = Some(e);
                false
            }
        }
    }

    /// The next row of the input, ignoring `--limit` and `--sample`.
    fn next_row(&mut self) -> Option<Item> {
        if self.open_error.is_some() {
            return None;
        }
        loop {
            if self.current.is_none() && !self.open_next() {
                return None;
            }
            let file = self.current.as_mut()?;
            if let Some(item) = file.next_item() {
                return Some(item);
            }
            let done = self.current.take()?;
            self.done_files.push(done.summary());
        }
    }
}

impl Iterator for Rows {
    type Item = Item;

    fn next(&mut self) -> Option<Item> {
        if let Some(sampled) = self.sampled.as_mut() {
            return sampled.next();
        }
        if let Some(limit) = self.limit
            && self.taken >= limit
        {
            self.limited = true;
            return None;
        }
        let item = self.next_row()?;
        self.taken += 1;
        Some(item)
    }
}

/// A small seeded generator for sampling (splitmix64: full period, good enough to pick rows,
/// and reproducible everywhere without a dependency).
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..bound` (Lemire's multiply-shift with rejection, so no modulo bias).
    fn below(&mut self, bound: u64) -> u64 {
        loop {
            let m = u128::from(self.next()) * u128::from(bound);
            let low = m as u64;
            if low >= bound.wrapping_neg() % bound {
                return (m >> 64) as u64;
            }
        }
    }
}

/// Counts the bytes that pass, for the progress bar.
struct Counting<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// The running XXH3-128 of a file's rows.
#[derive(Default)]
struct Digest(xxhash_rust::xxh3::Xxh3);

impl Digest {
    fn row(&mut self, bytes: &[u8]) {
        self.0.update(&(bytes.len() as u64).to_le_bytes());
        self.0.update(bytes);
    }

    fn hex(&self) -> String {
        format!("{:032x}", self.0.digest128())
    }
}

const READ_BUFFER: usize = 256 << 10;

fn open(
    path: &Path,
    forced: RowFormat,
    parquet: &super::parquet_file::Limits,
    count: Arc<AtomicU64>,
) -> Result<OpenFile, OpenError> {
    let shown = path.display().to_string();
    let err = |source: std::io::Error| OpenError {
        path: shown.clone(),
        source,
    };
    let raw: Box<dyn Read + Send> = if path.as_os_str() == "-" {
        Box::new(std::io::stdin())
    } else {
        Box::new(crate::input::open_regular(path).map_err(err)?)
    };
    let mut buffered = BufReader::with_capacity(
        READ_BUFFER,
        Counting {
            inner: raw,
            count: count.clone(),
        },
    );
    let magic = buffered.fill_buf().map_err(err)?;
    if magic.starts_with(super::parquet_file::MAGIC) {
        return open_parquet(path, shown.clone(), forced, parquet, count).map_err(err);
    }
    let compression = if magic.starts_with(&[0x1f, 0x8b]) {
        Compression::Gzip
    } else if magic.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Compression::Zstd
    } else {
        Compression::None
    };
    let mut failed = None;
    let mut reader: Box<dyn BufRead + Send> = match compression {
        Compression::None => Box::new(buffered),
        // MultiGzDecoder: `cat a.gz b.gz` is a valid gzip file of both.
        Compression::Gzip => Box::new(BufReader::with_capacity(
            READ_BUFFER,
            flate2::bufread::MultiGzDecoder::new(buffered),
        )),
        // Every frame, as `zstd -dc` reads them (`cat a.zst b.zst`).
        Compression::Zstd => match super::zstd_frames::ZstdFrames::new(buffered) {
            Ok(frames) => Box::new(BufReader::with_capacity(READ_BUFFER, frames)),
            Err(e) => {
                failed = Some(e);
                Box::new(std::io::empty())
            }
        },
    };
    // A JSON array of rows (ShareGPT's .json files) is split by element; anything else,
    // including a line that is a bare list of messages, by line.
    // Blank lines before the first row still count, so rows keep their line numbers.
    let mut line = 1;
    let mut layout = Layout::Lines;
    if failed.is_none() {
        let probe = (|| {
            skip_bom(&mut reader)?;
            let first = skip_space(&mut reader, &mut line)?;
            if first == Some(b'[') && array_of_rows(&mut reader)? {
                reader.consume(1);
                layout = Layout::Array { closed: false };
            } else if first == Some(b'{') && spans_lines(reader.fill_buf()?) {
                layout = Layout::Single { read: false };
            }
            Ok(())
        })();
        match probe {
            Ok(()) => {}
            // Damage inside a compressed stream counts as it does further on; a plain
            // file that cannot be read at all is an error of the run.
            Err(e) if compression != Compression::None => failed = Some(e),
            Err(e) => return Err(err(e)),
        }
    }
    Ok(OpenFile {
        shown,
        reader,
        layout,
        format: forced,
        compression,
        line,
        rows: 0,
        broken: false,
        failed,
        bytes_per_row: 0,
        bytes_read: count,
        digest: Digest::default(),
    })
}

/// A Parquet file (random access: its index is at its end, so not from standard input). A
/// file whose footer or page headers fail the checks is one `unreadable` row, as a damaged
/// compressed stream is.
fn open_parquet(
    path: &Path,
    shown: String,
    forced: RowFormat,
    limits: &super::parquet_file::Limits,
    count: Arc<AtomicU64>,
) -> std::io::Result<OpenFile> {
    if path.as_os_str() == "-" {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "Parquet cannot be read from standard input (its index is at the end): give the file",
        ));
    }
    let file = crate::input::open_regular(path)?;
    let mut opened = OpenFile {
        shown,
        reader: Box::new(std::io::empty()),
        layout: Layout::Lines,
        format: forced,
        compression: Compression::None,
        line: 1,
        rows: 0,
        broken: false,
        failed: None,
        bytes_per_row: 0,
        bytes_read: count,
        digest: Digest::default(),
    };
    match super::parquet_file::ParquetRows::open(file, limits) {
        Ok(rows) => {
            opened.bytes_per_row = rows.file_bytes / rows.total_rows.max(1);
            opened.layout = Layout::Parquet(Box::new(rows));
        }
        Err(e) => opened.failed = Some(e),
    }
    Ok(opened)
}

/// Skips a UTF-8 byte order mark at the start of a file (editors on Windows write one).
fn skip_bom(r: &mut dyn BufRead) -> std::io::Result<()> {
    if r.fill_buf()?.starts_with("\u{feff}".as_bytes()) {
        r.consume(3);
    }
    Ok(())
}

/// Whether the `[` at the reader's position opens an array of rows rather than a list of
/// messages: the first element is an object whose keys are a row's (`conversations`,
/// `conversation` or `messages`). Decided from the bytes buffered (the first element's
/// opening keys are within the first buffer of any real file).
fn array_of_rows(r: &mut dyn BufRead) -> std::io::Result<bool> {
    let buf = r.fill_buf()?;
    let text = String::from_utf8_lossy(&buf[..buf.len().min(READ_BUFFER)]);
    let after = text[1..].trim_start();
    if !after.starts_with('{') {
        return Ok(false);
    }
    // The first key of the first element, and whether a row key comes before a message key.
    let first_key = |key: &str| after.find(&format!("\"{key}\""));
    let row = ["conversations", "conversation", "messages"]
        .iter()
        .filter_map(|k| first_key(k))
        .min();
    let message = ["role", "from"].iter().filter_map(|k| first_key(k)).min();
    Ok(match (row, message) {
        (Some(r), Some(m)) => r < m,
        (Some(_), None) => true,
        _ => false,
    })
}

impl OpenFile {
    fn summary(&self) -> FileSummary {
        FileSummary {
            path: self.shown.clone(),
            format: self.format.name(),
            compression: match &self.layout {
                Layout::Parquet(p) => p.codecs,
                _ => self.compression.name(),
            },
            rows: self.rows,
            digest: self.digest.hex(),
        }
    }

    /// The next row of a Parquet file, numbered from 1.
    fn next_parquet(&mut self) -> Option<(u64, Result<String, Skip>)> {
        let Layout::Parquet(rows) = &mut self.layout else {
            return None;
        };
        let read = rows.next_json(MAX_ROW_BYTES)?;
        let number = self.line;
        self.line += 1;
        self.bytes_read
            .fetch_add(self.bytes_per_row, Ordering::Relaxed);
        Some((
            number,
            match read {
                Ok(Some(text)) if text.len() as u64 <= MAX_ROW_BYTES => Ok(text),
                Ok(_) => Err(Skip::too_large()),
                Err(message) => {
                    // The reader cannot go on past a page it could not read.
                    self.broken = true;
                    Err(Skip {
                        reason: "unreadable",
                        message,
                    })
                }
            },
        ))
    }

    fn next_item(&mut self) -> Option<Item> {
        let (start_line, read) = if let Some(e) = self.failed.take() {
            self.read_failed(self.line, e)?
        } else {
            if self.broken {
                return None;
            }
            match self.layout {
                Layout::Lines => self.next_line()?,
                Layout::Array { closed: true } => return None,
                Layout::Array { .. } => self.next_element()?,
                Layout::Single { read: true } => self.after_single()?,
                Layout::Single { read: false } => {
                    self.layout = Layout::Single { read: true };
                    self.next_value()?
                }
                Layout::Parquet(_) => self.next_parquet()?,
            }
        };
        self.rows += 1;
        match &read {
            Ok(text) => self.digest.row(text.trim().as_bytes()),
            Err(skip) => self.digest.row(skip.reason.as_bytes()),
        }
        let source = format!("{}:{}", self.shown, start_line);
        let text = match read {
            Ok(text) => text,
            Err(skip) => {
                return Some(Item::Skipped {
                    source,
                    reason: skip.reason,
                    error: Some(skip.message),
                });
            }
        };
        if self.format == RowFormat::Auto {
            // The first row that is JSON decides the file's format.
            let parsed = match serde_json::from_str::<Json>(&text) {
                Ok(v) => v,
                Err(e) => {
                    return Some(Item::Skipped {
                        source,
                        reason: "not_json",
                        error: Some(e.to_string()),
                    });
                }
            };
            match RowFormat::of(&parsed) {
                Some(f) => self.format = f,
                None => {
                    return Some(Item::Skipped {
                        source,
                        reason: "not_a_conversation",
                        error: Some(
                            "cannot tell the format from this row (no `messages`, \
                             `conversations` or `conversation`)"
                                .into(),
                        ),
                    });
                }
            }
        }
        Some(Item::Raw(Raw {
            source,
            text,
            format: self.format,
        }))
    }

    /// The next non-empty line (its number and text), a line over the row limit read past
    /// and skipped without keeping it.
    fn next_line(&mut self) -> Option<(u64, Result<String, Skip>)> {
        loop {
            let start = self.line;
            let mut bytes = Vec::new();
            let mut over = false;
            let mut ended = false;
            loop {
                let buf = match self.reader.fill_buf() {
                    Ok(b) => b,
                    Err(e) => return self.read_failed(start, e),
                };
                if buf.is_empty() {
                    ended = true;
                    break;
                }
                let (part, found) = match memchr::memchr(b'\n', buf) {
                    Some(i) => (&buf[..i], Some(i + 1)),
                    None => (buf, None),
                };
                if !over {
                    if (bytes.len() + part.len()) as u64 > MAX_ROW_BYTES {
                        over = true;
                        bytes = Vec::new();
                    } else {
                        bytes.extend_from_slice(part);
                    }
                }
                let n = found.unwrap_or(buf.len());
                self.reader.consume(n);
                if found.is_some() {
                    break;
                }
            }
            self.line += 1;
            if over {
                return Some((start, Err(Skip::too_large())));
            }
            if bytes.iter().all(u8::is_ascii_whitespace) {
                if ended {
                    return None;
                }
                continue;
            }
            return Some((start, text_of(bytes)));
        }
    }

    /// The next element of the top-level array, scanned for its end (strings and escapes
    /// respected, nesting counted), or `None` after the closing bracket.
    fn next_element(&mut self) -> Option<(u64, Result<String, Skip>)> {
        // Before an element: whitespace and one comma.
        loop {
            match skip_space(&mut self.reader, &mut self.line) {
                Ok(Some(b',')) => self.reader.consume(1),
                Ok(Some(b']')) => {
                    self.reader.consume(1);
                    self.layout = Layout::Array { closed: true };
                    return None;
                }
                Ok(Some(_)) => break,
                Ok(None) => {
                    // The array never closed: a truncated file.
                    self.broken = true;
                    return Some((
                        self.line,
                        Err(Skip {
                            reason: "not_json",
                            message: "the file ends inside its top-level array (truncated?)".into(),
                        }),
                    ));
                }
                Err(e) => return self.read_failed(self.line, e),
            }
        }
        self.next_value()
    }

    /// What follows a file's one conversation: nothing but whitespace, else one skipped row
    /// saying so.
    fn after_single(&mut self) -> Option<(u64, Result<String, Skip>)> {
        match skip_space(&mut self.reader, &mut self.line) {
            Ok(None) => None,
            Ok(Some(_)) => {
                self.broken = true;
                Some((
                    self.line,
                    Err(Skip {
                        reason: "not_json",
                        message: "more text after the file's one conversation (one \
                                  conversation per line, JSON Lines, makes a corpus)"
                            .into(),
                    }),
                ))
            }
            Err(e) => self.read_failed(self.line, e),
        }
    }

    /// The JSON value at the reader's position, scanned for its end (strings and escapes
    /// respected, nesting counted).
    fn next_value(&mut self) -> Option<(u64, Result<String, Skip>)> {
        let start = self.line;
        let mut scan = Scan::default();
        let mut bytes = Vec::new();
        let mut over = false;
        loop {
            let buf = match self.reader.fill_buf() {
                Ok(b) => b,
                Err(e) => return self.read_failed(start, e),
            };
            if buf.is_empty() {
                self.broken = true;
                return Some((
                    start,
                    Err(Skip {
                        reason: "not_json",
                        message: "the file ends inside this element (truncated?)".into(),
                    }),
                ));
            }
            let (used, finished) = scan.feed(buf);
            self.line += buf[..used].iter().filter(|&&b| b == b'\n').count() as u64;
            if !over {
                if (bytes.len() + used) as u64 > MAX_ROW_BYTES {
                    over = true;
                    bytes = Vec::new();
                } else {
                    bytes.extend_from_slice(&buf[..used]);
                }
            }
            self.reader.consume(used);
            if finished {
                break;
            }
        }
        if over {
            return Some((start, Err(Skip::too_large())));
        }
        Some((start, text_of(bytes)))
    }

    fn read_failed(&mut self, line: u64, e: std::io::Error) -> Option<(u64, Result<String, Skip>)> {
        // A decompression or read error ends this file; what was read so far stands.
        self.broken = true;
        Some((line, Err(Skip::unreadable(&e))))
    }
}

/// Whether the JSON object starting `buf` goes on past its first line (a conversation written
/// over several lines, not a JSON Lines row, which holds no line break).
fn spans_lines(buf: &[u8]) -> bool {
    let (used, _) = Scan::default().feed(buf);
    memchr::memchr(b'\n', &buf[..used]).is_some()
}

/// Skips whitespace without consuming the next byte, and returns it (`None` at the end),
/// counting the newlines passed into `line`.
fn skip_space(r: &mut dyn BufRead, line: &mut u64) -> std::io::Result<Option<u8>> {
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            return Ok(None);
        }
        match buf.iter().position(|b| !b.is_ascii_whitespace()) {
            Some(i) => {
                *line += buf[..i].iter().filter(|&&b| b == b'\n').count() as u64;
                let b = buf[i];
                r.consume(i);
                return Ok(Some(b));
            }
            None => {
                *line += buf.iter().filter(|&&b| b == b'\n').count() as u64;
                let n = buf.len();
                r.consume(n);
            }
        }
    }
}

/// Where a JSON value ends: depth of brackets outside strings.
#[derive(Default)]
struct Scan {
    depth: u32,
    in_string: bool,
    escaped: bool,
}

impl Scan {
    /// Bytes of `buf` that belong to the value, and whether the value ended within them.
    fn feed(&mut self, buf: &[u8]) -> (usize, bool) {
        for (i, &b) in buf.iter().enumerate() {
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_string = false;
                    if self.depth == 0 {
                        return (i + 1, true);
                    }
                }
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' if self.depth > 0 => {
                    self.depth -= 1;
                    if self.depth == 0 {
                        return (i + 1, true);
                    }
                }
                // A scalar element ends at a comma or the closing bracket, which are not
                // part of it.
                b',' | b']' | b'}' if self.depth == 0 => return (i, true),
                _ => {}
            }
        }
        (buf.len(), false)
    }
}

struct Skip {
    reason: &'static str,
    message: String,
}

impl Skip {
    fn too_large() -> Skip {
        Skip {
            reason: "too_large",
            message: format!("the row is larger than {} MiB", MAX_ROW_BYTES >> 20),
        }
    }

    /// A read or decompression error: it ends the file, and what was read before it stands.
    fn unreadable(e: &std::io::Error) -> Skip {
        Skip {
            reason: "unreadable",
            message: format!("the file cannot be read past here: {e}"),
        }
    }
}

fn text_of(bytes: Vec<u8>) -> Result<String, Skip> {
    String::from_utf8(bytes).map_err(|e| Skip {
        reason: "not_json",
        message: format!(
            "not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ),
    })
}

/// Why a row that was read is not a usable conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Unusable {
    pub reason: &'static str,
    pub message: String,
}

fn unusable(reason: &'static str, message: impl Into<String>) -> Unusable {
    Unusable {
        reason,
        message: message.into(),
    }
}

impl Raw {
    /// The row as a conversation, checked the way the audit needs: at least one user turn,
    /// known roles in a usable order.
    pub fn conversation(&self) -> Result<Conversation, Unusable> {
        let text = self.text.strip_prefix('\u{feff}').unwrap_or(&self.text);
        let value: Json =
            serde_json::from_str(text).map_err(|e| unusable("not_json", e.to_string()))?;
        let value = match self.format {
            RowFormat::Openai | RowFormat::Auto => openai_row(value)?,
            RowFormat::Sharegpt => sharegpt_row(value)?,
            RowFormat::Wildchat => wildchat_row(value)?,
        };
        check_roles(&value)?;
        Conversation::from_value(value, &self.source).map_err(|e| match e {
            ConversationError::Invalid { message, .. }
            | ConversationError::Shape { message, .. } => unusable("not_a_conversation", message),
            other => unusable("not_a_conversation", other.to_string()),
        })
    }
}

/// A row in kvaudit's conversation format, with the fields it does not know left out (logs
/// carry ids, sources and metadata beside the messages).
fn openai_row(value: Json) -> Result<Json, Unusable> {
    match value {
        Json::Array(_) => Ok(value),
        Json::Object(mut o) => {
            o.retain(|k, _| FIELDS.contains(&k.as_str()));
            Ok(Json::Object(o))
        }
        _ => Err(unusable(
            "not_a_conversation",
            "the row is neither an object with `messages` nor a list of messages",
        )),
    }
}

/// ShareGPT roles: `human`/`gpt` as in the original dumps, plus the `system`,
/// `function_call` and `observation` turns of LLaMA-Factory's ShareGPT layout.
fn sharegpt_row(value: Json) -> Result<Json, Unusable> {
    let (mut o, turns) = row_list(value, "conversations", "ShareGPT")?;
    let mut messages = Vec::with_capacity(turns.len() + 1);
    if let Some(Json::String(system)) = o.remove("system")
        && !system.is_empty()
    {
        messages.push(message("system", Json::String(system)));
    }
    for (i, turn) in turns.into_iter().enumerate() {
        let from = field(&turn, "from")
            .and_then(Json::as_str)
            .unwrap_or_default();
        let value = match field(&turn, "value") {
            Some(Json::String(s)) => Json::String(s.clone()),
            Some(Json::Null) | None => Json::String(String::new()),
            Some(_) => {
                return Err(unusable(
                    "not_a_conversation",
                    format!("turn {i}: `value` is not a string"),
                ));
            }
        };
        messages.push(match from {
            "human" | "user" => message("user", value),
            "gpt" | "assistant" | "chatgpt" | "bing" | "bard" | "model" => {
                message("assistant", value)
            }
            "system" => message("system", value),
            "function_call" => tool_call_message(i, &value)?,
            "observation" | "tool" | "function" => message("tool", value),
            other => {
                return Err(unusable(
                    "unknown_role",
                    format!("turn {i}: unknown ShareGPT role {other:?}"),
                ));
            }
        });
    }
    let mut out = Map::new();
    out.insert("messages".into(), Json::Array(messages));
    // LLaMA-Factory keeps the tool list as JSON text.
    match o.remove("tools") {
        Some(Json::String(s)) if !s.trim().is_empty() => {
            let tools: Json = serde_json::from_str(&s)
                .map_err(|e| unusable("not_a_conversation", format!("`tools`: {e}")))?;
            out.insert("tools".into(), wrap_tools(tools));
        }
        Some(tools @ Json::Array(_)) => {
            out.insert("tools".into(), wrap_tools(tools));
        }
        _ => {}
    }
    Ok(Json::Object(out))
}

/// A row object and its list of turns under `field`, taken out of it.
fn row_list(
    value: Json,
    field: &str,
    layout: &str,
) -> Result<(Map<String, Json>, Vec<Json>), Unusable> {
    let Json::Object(mut o) = value else {
        return Err(unusable(
            "not_a_conversation",
            format!("a {layout} row is an object"),
        ));
    };
    match o.remove(field) {
        Some(Json::Array(turns)) => Ok((o, turns)),
        _ => Err(unusable(
            "not_a_conversation",
            format!("no `{field}` list ({layout})"),
        )),
    }
}

fn message(role: &str, content: Json) -> Json {
    let mut m = Map::new();
    m.insert("role".into(), Json::String(role.into()));
    m.insert("content".into(), content);
    Json::Object(m)
}

/// A `function_call` turn: its value is `{"name": ..., "arguments": ...}` as JSON text (or a
/// list of them for parallel calls); it becomes an assistant message with OpenAI tool calls.
fn tool_call_message(turn: usize, value: &Json) -> Result<Json, Unusable> {
    let text = value.as_str().unwrap_or_default();
    let parsed: Json = serde_json::from_str(text).map_err(|e| {
        unusable(
            "not_a_conversation",
            format!("turn {turn}: a function_call value is not JSON: {e}"),
        )
    })?;
    let calls = match parsed {
        Json::Array(list) => list,
        one => vec![one],
    };
    let mut tool_calls = Vec::with_capacity(calls.len());
    for call in calls {
        let Some(name) = call.get("name").and_then(Json::as_str) else {
            return Err(unusable(
                "not_a_conversation",
                format!("turn {turn}: a function_call without a `name`"),
            ));
        };
        let mut function = Map::new();
        function.insert("name".into(), Json::String(name.into()));
        function.insert(
            "arguments".into(),
            call.get("arguments")
                .cloned()
                .unwrap_or(Json::Object(Map::new())),
        );
        let mut c = Map::new();
        c.insert("type".into(), Json::String("function".into()));
        c.insert("function".into(), Json::Object(function));
        tool_calls.push(Json::Object(c));
    }
    let mut m = Map::new();
    m.insert("role".into(), Json::String("assistant".into()));
    m.insert("content".into(), Json::Null);
    m.insert("tool_calls".into(), Json::Array(tool_calls));
    Ok(Json::Object(m))
}

/// Tool lists as OpenAI requests carry them (`{"type": "function", "function": {...}}`); bare
/// function schemas are wrapped.
fn wrap_tools(tools: Json) -> Json {
    match tools {
        Json::Array(list) => Json::Array(
            list.into_iter()
                .map(|t| {
                    if t.get("type").is_some() && t.get("function").is_some() {
                        t
                    } else {
                        let mut w = Map::new();
                        w.insert("type".into(), Json::String("function".into()));
                        w.insert("function".into(), t);
                        Json::Object(w)
                    }
                })
                .collect(),
        ),
        other => other,
    }
}

/// The message fields a chat request carries; WildChat and LMSYS rows add per-message
/// metadata (timestamps, language, moderation flags) that no template reads.
const MESSAGE_FIELDS: [&str; 6] = [
    "role",
    "content",
    "tool_calls",
    "tool_call_id",
    "name",
    "reasoning_content",
];

fn wildchat_row(value: Json) -> Result<Json, Unusable> {
    let (mut o, turns) = row_list(value, "conversation", "WildChat/LMSYS")?;
    let messages = turns
        .into_iter()
        .map(|t| match t {
            Json::Object(mut m) => {
                m.retain(|k, _| MESSAGE_FIELDS.contains(&k.as_str()));
                Json::Object(m)
            }
            other => other,
        })
        .collect();
    let mut out = Map::new();
    out.insert("messages".into(), Json::Array(messages));
    if let Some(tools @ Json::Array(_)) = o.remove("tools") {
        out.insert("tools".into(), tools);
    }
    Ok(Json::Object(out))
}

/// The order the audit needs: known roles, system messages only before the first user
/// message, and no assistant or tool message before it (a turn k -> k+1 starts at a user
/// message); a tool result follows an assistant or another tool result.
fn check_roles(value: &Json) -> Result<(), Unusable> {
    let messages = match value {
        Json::Array(m) => m,
        Json::Object(o) => match entry(o, "messages") {
            Some(Json::Array(m)) => m,
            _ => return Err(unusable("not_a_conversation", "no `messages` list")),
        },
        _ => return Err(unusable("not_a_conversation", "not a conversation")),
    };
    if messages.len() > MAX_MESSAGES {
        return Err(unusable(
            "too_large",
            format!(
                "{} messages, more than the {MAX_MESSAGES} kvaudit audits in one conversation",
                messages.len()
            ),
        ));
    }
    let mut seen_user = false;
    let mut previous = "";
    // A transition needs a request after a reply: a user or tool message after an assistant.
    let mut replied = false;
    let mut followed = false;
    for (i, m) in messages.iter().enumerate() {
        let Some(role) = field(m, "role").and_then(Json::as_str) else {
            return Err(unusable(
                "not_a_conversation",
                format!("message {i} has no string `role`"),
            ));
        };
        match role {
            "system" | "developer" if !seen_user => {}
            "user" => seen_user = true,
            "assistant" if seen_user => {}
            "tool" | "ipython" | "function"
                if matches!(previous, "assistant" | "tool" | "ipython" | "function") => {}
            "system" | "developer" | "assistant" | "tool" | "ipython" | "function" => {
                return Err(unusable(
                    "roles_out_of_order",
                    format!(
                        "message {i} ({role}) after {}",
                        if previous.is_empty() {
                            "the start"
                        } else {
                            previous
                        }
                    ),
                ));
            }
            other => {
                return Err(unusable(
                    "unknown_role",
                    format!("message {i}: unknown role {other:?}"),
                ));
            }
        }
        replied |= role == "assistant";
        followed |= replied && role != "assistant" && role != "system";
        previous = role;
    }
    if !seen_user {
        return Err(unusable("no_user_turn", "no user message"));
    }
    if !followed {
        return Err(unusable(
            "no_transition",
            "a single request: no message follows an assistant reply",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows_of(text: &[u8], format: RowFormat) -> Vec<Item> {
        let dir = tempdir();
        let path = dir.join("in");
        std::fs::write(&path, text).unwrap();
        Rows::new(vec![path], format, Selection::default()).collect()
    }

    fn tempdir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "kvaudit-input-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
    static NEXT: AtomicU64 = AtomicU64::new(0);

    fn summary(items: &[Item]) -> Vec<String> {
        items
            .iter()
            .map(|i| match i {
                Item::Raw(r) => match r.conversation() {
                    Ok(c) => format!(
                        "{} ok {} {}",
                        r.source_line(),
                        r.format.name(),
                        c.messages.len()
                    ),
                    Err(u) => format!("{} skip {}", r.source_line(), u.reason),
                },
                Item::Skipped { source, reason, .. } => {
                    format!("{} skip {reason}", source.rsplit(':').next().unwrap())
                }
            })
            .collect()
    }

    impl Raw {
        fn source_line(&self) -> &str {
            self.source.rsplit(':').next().unwrap()
        }
    }

    const GOOD: &str = r#"{"id": "a", "meta": {}, "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}, {"role": "user", "content": "bye"}]}"#;

    #[test]
    fn jsonl_rows_with_bad_lines_between() {
        let text = format!(
            "{GOOD}\n\nnot json\n[{{\"role\": \"user\", \"content\": \"x\"}}]\n{{\"messages\": [{{\"role\": \"assistant\", \"content\": \"x\"}}]}}\n{{\"messages\": [{{\"role\": \"system\", \"content\": \"s\"}}]}}\n{{\"messages\": [{{\"role\": \"wizard\", \"content\": \"x\"}}]}}\n{GOOD}"
        );
        let items = rows_of(text.as_bytes(), RowFormat::Auto);
        assert_eq!(
            summary(&items),
            [
                "1 ok openai 3",
                "3 skip not_json",
                "4 skip no_transition",
                "5 skip roles_out_of_order",
                "6 skip no_user_turn",
                "7 skip unknown_role",
                "8 ok openai 3"
            ]
        );
    }

    #[test]
    fn leading_blank_lines_keep_line_numbers() {
        let text = format!("\u{feff}\n\n{GOOD}\n");
        assert_eq!(
            summary(&rows_of(text.as_bytes(), RowFormat::Auto)),
            ["3 ok openai 3"]
        );
    }

    #[test]
    fn sharegpt_json_array_pretty_printed() {
        let text = r#"[
  {"id": "x", "conversations": [
     {"from": "human", "value": "a [tricky] \"value\" }"},
     {"from": "gpt", "value": "b"},
     {"from": "human", "value": "c"}]},
  {"conversations": [{"from": "function_call", "value": "{}"}]},
  {"system": "be brief", "tools": "[{\"name\": \"f\", \"parameters\": {}}]",
   "conversations": [{"from": "human", "value": "q"},
     {"from": "function_call", "value": "{\"name\": \"f\", \"arguments\": {\"a\": 1}}"},
     {"from": "observation", "value": "42"}, {"from": "gpt", "value": "done"},
     {"from": "human", "value": "thanks"}]}
]"#;
        let items = rows_of(text.as_bytes(), RowFormat::Auto);
        assert_eq!(
            summary(&items),
            // The first element starts on line 2, after the opening bracket's line.
            [
                "2 ok sharegpt 3",
                "6 skip not_a_conversation",
                "7 ok sharegpt 6"
            ]
        );
        let Item::Raw(r) = &items[2] else { panic!() };
        let c = r.conversation().unwrap();
        assert_eq!(c.messages[0]["role"], "system");
        assert_eq!(
            c.messages[2]["tool_calls"][0]["function"]["arguments"]["a"],
            1
        );
        assert_eq!(c.messages[2]["content"], Json::Null);
        assert_eq!(c.messages[3]["role"], "tool");
        assert_eq!(c.tools.as_ref().unwrap()[0]["type"], "function");
        assert_eq!(c.tools.as_ref().unwrap()[0]["function"]["name"], "f");
    }

    #[test]
    fn wildchat_rows_drop_message_metadata() {
        let text = r#"{"conversation_hash": "h", "conversation": [{"role": "user", "content": "hi", "language": "English", "timestamp": null}, {"role": "assistant", "content": "yo", "toxic": false}, {"role": "user", "content": "ok"}], "model": "gpt-4"}"#;
        let items = rows_of(text.as_bytes(), RowFormat::Auto);
        let Item::Raw(r) = &items[0] else { panic!() };
        assert_eq!(r.format, RowFormat::Wildchat);
        let c = r.conversation().unwrap();
        assert_eq!(
            c.messages[0],
            serde_json::json!({"role": "user", "content": "hi"})
        );
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(bytes).unwrap();
        gz.finish().unwrap()
    }

    fn zstd(bytes: &[u8]) -> Vec<u8> {
        ruzstd::encoding::compress_to_vec(bytes, ruzstd::encoding::CompressionLevel::Fastest)
    }

    #[test]
    fn gzip_and_zstd_are_read_by_their_magic() {
        let text = format!("{GOOD}\n{GOOD}\n");
        for bytes in [gzip(text.as_bytes()), zstd(text.as_bytes())] {
            let items = rows_of(&bytes, RowFormat::Auto);
            assert_eq!(summary(&items), ["1 ok openai 3", "2 ok openai 3"]);
        }
        // Two frames back to back (`cat a.zst b.zst`) are one stream of both.
        let mut two = zstd(format!("{GOOD}\n").as_bytes());
        two.extend(zstd(format!("{GOOD}\n").as_bytes()));
        let items = rows_of(&two, RowFormat::Auto);
        assert_eq!(summary(&items), ["1 ok openai 3", "2 ok openai 3"]);
    }

    /// A damaged compressed file: the rows before the damage are read and the damage is one
    /// `unreadable` row, whether it is met while opening (a small file decoded in the first
    /// buffer) or further on; a bad checksum in the trailer counts too.
    #[test]
    fn a_damaged_compressed_file_is_one_unreadable_row_wherever_the_damage_is() {
        for rows in [2usize, 20_000] {
            let text = format!("{GOOD}\n").repeat(rows);
            let (gz, zst) = (gzip(text.as_bytes()), zstd(text.as_bytes()));
            let mut bad_crc = gz.clone();
            let n = bad_crc.len();
            bad_crc[n - 8..].fill(0);
            let cases = [
                ("gzip cut", gz[..gz.len() / 2].to_vec()),
                ("gzip trailer cut", gz[..gz.len() - 3].to_vec()),
                ("gzip bad crc", bad_crc),
                ("zstd cut", zst[..zst.len() / 2].to_vec()),
                ("zstd checksum cut", zst[..zst.len() - 2].to_vec()),
                ("gzip header only", gz[..10].to_vec()),
            ];
            for (name, bytes) in cases {
                let items = rows_of(&bytes, RowFormat::Auto);
                let summary = summary(&items);
                let (last, before) = summary.split_last().unwrap();
                assert!(
                    last.ends_with("skip unreadable"),
                    "{rows} {name}: {summary:?}"
                );
                assert!(before.len() <= rows, "{rows} {name}: {}", before.len());
                assert!(
                    before.iter().all(|s| s.ends_with("ok openai 3")),
                    "{rows} {name}: {before:?}"
                );
            }
        }
    }

    /// One conversation written over several lines (a `diff-turns -c` file) is a corpus of
    /// one; text after it is one skipped row.
    #[test]
    fn a_file_of_one_pretty_printed_conversation_is_one_row() {
        let value: Json = serde_json::from_str(GOOD).unwrap();
        let pretty = serde_json::to_string_pretty(&value).unwrap();
        assert!(pretty.lines().count() > 3);
        let items = rows_of(pretty.as_bytes(), RowFormat::Auto);
        assert_eq!(summary(&items), ["1 ok openai 3"]);
        let items = rows_of(format!("{pretty}\n{pretty}").as_bytes(), RowFormat::Auto);
        let got = summary(&items);
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0], "1 ok openai 3");
        assert!(got[1].ends_with("skip not_json"), "{got:?}");
        // A JSON Lines file is still one row per line.
        let items = rows_of(format!("{GOOD}\n{GOOD}\n").as_bytes(), RowFormat::Auto);
        assert_eq!(summary(&items), ["1 ok openai 3", "2 ok openai 3"]);
    }

    #[test]
    fn a_line_over_the_limit_is_skipped_without_being_kept() {
        let mut text = Vec::new();
        text.extend_from_slice(b"{\"messages\": \"");
        text.resize(MAX_ROW_BYTES as usize + 10, b'x');
        text.extend_from_slice(b"\"}\n");
        text.extend_from_slice(GOOD.as_bytes());
        let items = rows_of(&text, RowFormat::Openai);
        assert_eq!(summary(&items), ["1 skip too_large", "2 ok openai 3"]);
    }

    #[test]
    fn a_truncated_array_ends_its_file_with_one_skip() {
        let text = r#"[{"conversations": [{"from": "human", "value": "a"}, {"from": "gpt", "value": "b"}, {"from": "human", "value": "c"}]}, {"conversations": [{"from": "hu"#;
        let items = rows_of(text.as_bytes(), RowFormat::Auto);
        assert_eq!(summary(&items), ["1 ok sharegpt 3", "1 skip not_json"]);
    }

    #[test]
    fn limit_and_sample_are_deterministic() {
        let dir = tempdir();
        let path = dir.join("many.jsonl");
        let lines: Vec<String> = (0..100)
            .map(|i| {
                format!(
                    r#"{{"messages": [{{"role": "user", "content": "{i}"}}, {{"role": "assistant", "content": "a"}}, {{"role": "user", "content": "b"}}]}}"#
                )
            })
            .collect();
        std::fs::write(&path, lines.join("\n")).unwrap();
        let contents = |sel: Selection| -> Vec<String> {
            Rows::new(vec![path.clone()], RowFormat::Auto, sel)
                .map(|i| match i {
                    Item::Raw(r) => r.conversation().unwrap().messages[0]["content"]
                        .as_str()
                        .unwrap()
                        .to_string(),
                    Item::Skipped { .. } => panic!(),
                })
                .collect()
        };
        let limited = contents(Selection {
            limit: Some(3),
            ..Selection::default()
        });
        assert_eq!(limited, ["0", "1", "2"]);
        let sample = |seed| {
            contents(Selection {
                sample: Some((10, seed)),
                ..Selection::default()
            })
        };
        let a = sample(7);
        assert_eq!(a.len(), 10);
        assert_eq!(a, sample(7));
        assert_ne!(a, sample(8));
        // In input order.
        let n: Vec<u32> = a.iter().map(|s| s.parse().unwrap()).collect();
        assert!(n.windows(2).all(|w| w[0] < w[1]));
        let mut rows = Rows::new(
            vec![path.clone()],
            RowFormat::Auto,
            Selection {
                sample: Some((10, 7)),
                ..Selection::default()
            },
        );
        assert_eq!(rows.summary().sampled, Some((10, 100)));
        assert_eq!(rows.by_ref().count(), 10);
    }

    #[test]
    fn a_missing_file_is_an_open_error() {
        let mut rows = Rows::new(
            vec![PathBuf::from("/nonexistent/x.jsonl")],
            RowFormat::Auto,
            Selection::default(),
        );
        assert!(rows.next().is_none());
        assert!(rows.open_error.is_some());
    }
}
