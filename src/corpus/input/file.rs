//! One input file split into rows: opened, its compression and layout told from its first
//! bytes, then read a row at a time.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value as Json;

use super::compression::{self, Compression};
use super::scan::{Scan, skip_bom, skip_space, spans_lines};
use super::{FileSummary, Item, MAX_ROW_BYTES, OpenError, READ_BUFFER, Raw, RowFormat};
use crate::corpus::parquet_file;

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
    Parquet(Box<parquet_file::ParquetRows>),
}

pub(super) struct OpenFile {
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

pub(super) fn open(
    path: &Path,
    forced: RowFormat,
    parquet: &parquet_file::Limits,
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
    if magic.starts_with(parquet_file::MAGIC) {
        return open_parquet(path, shown.clone(), forced, parquet, count).map_err(err);
    }
    let compression = Compression::of(magic);
    let (mut reader, mut failed) = match compression::decoder(compression, buffered) {
        Ok(reader) => (reader, None),
        Err(e) => (
            Box::new(std::io::empty()) as Box<dyn BufRead + Send>,
            Some(e),
        ),
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
    limits: &parquet_file::Limits,
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
    match parquet_file::ParquetRows::open(file, limits) {
        Ok(rows) => {
            opened.bytes_per_row = rows.file_bytes / rows.total_rows.max(1);
            opened.layout = Layout::Parquet(Box::new(rows));
        }
        Err(e) => opened.failed = Some(e),
    }
    Ok(opened)
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
    pub(super) fn summary(&self) -> FileSummary {
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
                Err(e) => {
                    // The reader cannot go on past a page it could not read.
                    self.broken = true;
                    Err(Skip {
                        reason: "unreadable",
                        message: e.to_string(),
                    })
                }
            },
        ))
    }

    pub(super) fn next_item(&mut self) -> Option<Item> {
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
