//! A zstd stream of any number of frames, as `zstd -dc` reads it: `cat a.zst b.zst` and
//! `zstd --rsyncable`/multi-threaded output are several frames back to back, and skippable
//! frames (metadata some writers add) are passed over. ruzstd's own streaming reader stops at
//! the end of the first frame.

use std::io::{BufRead, Read};

use ruzstd::decoding::errors::{FrameDecoderError, ReadFrameHeaderError};
use ruzstd::decoding::{BlockDecodingStrategy, FrameDecoder};

pub struct ZstdFrames<R: BufRead> {
    source: R,
    decoder: FrameDecoder,
    in_frame: bool,
}

fn invalid(why: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, why)
}

impl<R: BufRead> ZstdFrames<R> {
    /// Fails when `source` does not start with a zstd frame (or skippable frames and one).
    pub fn new(source: R) -> std::io::Result<Self> {
        let mut frames = ZstdFrames {
            source,
            decoder: FrameDecoder::new(),
            in_frame: false,
        };
        if !frames.next_frame()? {
            return Err(invalid("not a zstd stream: no frame in it".into()));
        }
        Ok(frames)
    }

    /// Starts the next frame, passing skippable ones; `false` at the end of the input.
    fn next_frame(&mut self) -> std::io::Result<bool> {
        loop {
            if self.source.fill_buf()?.is_empty() {
                return Ok(false);
            }
            match self.decoder.reset(&mut self.source) {
                Ok(()) => {
                    self.in_frame = true;
                    return Ok(true);
                }
                Err(FrameDecoderError::ReadFrameHeaderError(ReadFrameHeaderError::SkipFrame {
                    length,
                    ..
                })) => {
                    let skipped = std::io::copy(
                        &mut (&mut self.source).take(u64::from(length)),
                        &mut std::io::sink(),
                    )?;
                    if skipped < u64::from(length) {
                        return Err(invalid(format!(
                            "a skippable zstd frame of {length} bytes is cut short"
                        )));
                    }
                }
                Err(e) => return Err(invalid(format!("not a zstd stream: {e}"))),
            }
        }
    }
}

impl<R: BufRead> Read for ZstdFrames<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            if self.in_frame {
                let d = &mut self.decoder;
                while d.can_collect() == 0 && !d.is_finished() {
                    d.decode_blocks(&mut self.source, BlockDecodingStrategy::UptoBlocks(1))
                        .map_err(|e| invalid(format!("corrupt zstd data: {e}")))?;
                }
                let n = d.read(buf)?;
                if n > 0 {
                    return Ok(n);
                }
                self.in_frame = false;
            }
            if !self.next_frame()? {
                return Ok(0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ruzstd::encoding::{CompressionLevel, compress_to_vec};

    fn read_all(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::new();
        ZstdFrames::new(std::io::BufReader::with_capacity(7, bytes))?.read_to_end(&mut out)?;
        Ok(out)
    }

    #[test]
    fn every_frame_is_read_and_skippable_frames_are_passed() {
        let mut bytes = Vec::new();
        // A skippable frame first (magic 0x184D2A53, 5 bytes of metadata).
        bytes.extend_from_slice(&0x184D_2A53u32.to_le_bytes());
        bytes.extend_from_slice(&5u32.to_le_bytes());
        bytes.extend_from_slice(b"meta!");
        bytes.extend(compress_to_vec(&b"first\n"[..], CompressionLevel::Fastest));
        bytes.extend(compress_to_vec(&b""[..], CompressionLevel::Fastest));
        bytes.extend(compress_to_vec(
            "second\n".repeat(10_000).as_bytes(),
            CompressionLevel::Fastest,
        ));
        let mut want = b"first\n".to_vec();
        want.extend("second\n".repeat(10_000).as_bytes());
        assert_eq!(read_all(&bytes).unwrap(), want);
    }

    #[test]
    fn a_cut_or_foreign_stream_is_an_error() {
        let one = compress_to_vec(&b"first\n"[..], CompressionLevel::Fastest);
        assert!(read_all(b"plain text").is_err());
        assert!(read_all(&one[..one.len() - 2]).is_err());
        let mut trailing = one.clone();
        trailing.extend_from_slice(b"garbage");
        assert!(read_all(&trailing).is_err());
        let mut short_skip = 0x184D_2A50u32.to_le_bytes().to_vec();
        short_skip.extend_from_slice(&100u32.to_le_bytes());
        short_skip.extend_from_slice(b"abc");
        assert!(read_all(&short_skip).is_err());
    }
}
