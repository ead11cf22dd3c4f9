//! Corpus input: rows of conversations from JSONL, ShareGPT JSON/JSONL and WildChat/LMSYS
//! JSONL files, plain, gzip or zstd, and Parquet files of the same layouts, streamed.
//!
//! The reader only splits the input into rows and numbers them; turning a row's text into a
//! [`Conversation`](crate::render::Conversation) happens on the worker that audits it
//! ([`Raw::conversation`]), so JSON parsing runs in parallel and the reader holds one row at a
//! time. A row that cannot be used is a skip with a reason, never an error: only a file that
//! cannot be opened stops the run.

mod compression;
mod file;
mod formats;
mod sample;
mod scan;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use super::parquet_file;
use crate::render::conversation::MAX_CONVERSATION_BYTES;
use file::OpenFile;

pub use compression::Compression;
pub use formats::{RowFormat, Unusable};

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

/// What `--limit` and `--sample` ask for, and what a Parquet file may make the reading do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Selection {
    pub limit: Option<u64>,
    pub sample: Option<(u64, u64)>,
    pub parquet: parquet_file::Limits,
}

/// The rows of every file in turn.
pub struct Rows {
    paths: Vec<PathBuf>,
    next_path: usize,
    current: Option<OpenFile>,
    forced: RowFormat,
    parquet: parquet_file::Limits,
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

/// Rows are read through buffers of this size, and a file's layout is decided from its first.
const READ_BUFFER: usize = 256 << 10;

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

    /// Reads the whole input and keeps `n` rows of it (see [`sample::reservoir`]).
    fn sample(&mut self, n: u64, seed: u64) {
        let (kept, seen) = sample::reservoir(std::iter::from_fn(|| self.next_row()), n, seed);
        self.sample_counts = Some((kept.len() as u64, seen));
        self.sampled = Some(kept.into_iter());
    }

    fn open_next(&mut self) -> bool {
        let Some(path) = self.paths.get(self.next_path).cloned() else {
            return false;
        };
        self.next_path += 1;
        match file::open(&path, self.forced, &self.parquet, self.bytes_read.clone()) {
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
