//! Compressed input files, recognised by their first bytes and read through a decoder.

use std::io::{BufRead, BufReader};

use super::READ_BUFFER;
use crate::corpus::zstd_frames::ZstdFrames;

/// How a file is compressed, from its first bytes (the extension can lie or be missing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
}

impl Compression {
    /// The compression a file's first bytes announce.
    pub(super) fn of(magic: &[u8]) -> Compression {
        if magic.starts_with(&[0x1f, 0x8b]) {
            Compression::Gzip
        } else if magic.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Compression::Zstd
        } else {
            Compression::None
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
        }
    }
}

/// A decoder of `compression` over `buffered`, or the error met reading the start of a zstd
/// stream (no frame in it).
pub(super) fn decoder(
    compression: Compression,
    buffered: impl BufRead + Send + 'static,
) -> std::io::Result<Box<dyn BufRead + Send>> {
    Ok(match compression {
        Compression::None => Box::new(buffered),
        // MultiGzDecoder: `cat a.gz b.gz` is a valid gzip file of both.
        Compression::Gzip => Box::new(BufReader::with_capacity(
            READ_BUFFER,
            flate2::bufread::MultiGzDecoder::new(buffered),
        )),
        // Every frame, as `zstd -dc` reads them (`cat a.zst b.zst`).
        Compression::Zstd => Box::new(BufReader::with_capacity(
            READ_BUFFER,
            ZstdFrames::new(buffered)?,
        )),
    })
}
