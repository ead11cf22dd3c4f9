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

mod checks;
mod thrift;

use std::fs::File;

use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::reader::RowIter;

use crate::panics::Panicked;
use checks::{check_footer, check_pages};

/// The first and last four bytes of every Parquet file.
pub const MAGIC: &[u8; 4] = b"PAR1";

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

/// A `--parquet-limit` value kvaudit does not take.
#[derive(Debug, thiserror::Error)]
pub enum LimitError {
    #[error("{0:?}: expected KEY=VALUE, e.g. file_bytes=8GiB")]
    NotKeyValue(String),
    #[error("{key}={value}: expected a size like 8GiB or a count")]
    NotASize { key: String, value: String },
    #[error("no Parquet limit {0:?} (known: {known})", known = known_limits())]
    UnknownKey(String),
    #[error("{key}={value}: a limit of 0 reads nothing")]
    Zero { key: String, value: String },
}

fn known_limits() -> String {
    let keys: Vec<&str> = Limits::KEYS.iter().map(|(k, _)| *k).collect();
    keys.join(", ")
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
    pub fn set(&mut self, text: &str) -> Result<(), LimitError> {
        let (key, value) = text
            .split_once('=')
            .ok_or_else(|| LimitError::NotKeyValue(text.to_string()))?;
        let n = crate::input::parse_size(value.trim()).ok_or_else(|| LimitError::NotASize {
            key: key.to_string(),
            value: value.to_string(),
        })?;
        let slot = match key.trim() {
            "file_bytes" => &mut self.file_bytes,
            "row_group_bytes" => &mut self.row_group_bytes,
            "columns" => &mut self.columns,
            other => return Err(LimitError::UnknownKey(other.to_string())),
        };
        if n == 0 {
            return Err(LimitError::Zero {
                key: key.to_string(),
                value: value.to_string(),
            });
        }
        *slot = n;
        Ok(())
    }
}

/// Why a row of a Parquet file could not be read; the file cannot be read past it.
#[derive(Debug, thiserror::Error)]
pub enum RowError {
    #[error("the parquet reader failed: {0}")]
    ReaderPanicked(Panicked),
    #[error("cannot read the next row: {0}")]
    Read(parquet::errors::ParquetError),
    #[error("a value of this row cannot be written as JSON: {0}")]
    NotJson(Panicked),
}

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
    pub fn next_json(&mut self, max_bytes: u64) -> Option<Result<Option<String>, RowError>> {
        let row = match crate::panics::quietly_catching(|| self.rows.next()) {
            Ok(row) => row?,
            Err(panic) => return Some(Err(RowError::ReaderPanicked(panic))),
        };
        Some(match row {
            // The text is at least the row's strings and names: a row past the limit on those
            // alone is not copied twice more (as a JSON value, then as text) to find out.
            Ok(row) if text_at_least(&row) > max_bytes => Ok(None),
            Ok(row) => crate::panics::quietly_catching(|| row.to_json_value().to_string())
                .map(Some)
                .map_err(RowError::NotJson),
            Err(e) => Err(RowError::Read(e)),
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
