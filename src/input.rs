//! Reading files kvaudit is handed: regular files only, and never more than a stated size.
//!
//! Everything read is untrusted. A FIFO or a device in place of a file would block or stream
//! forever, and a huge file would be read whole before any check; both are refused here with
//! an error that says which limit applied.

use std::io::Read;
use std::path::Path;

/// The bytes of a regular file of at most `limit` bytes. The file is opened non-blocking (a
/// FIFO would otherwise block the open itself) and checked through the opened handle, so a
/// file swapped after the check is not read.
pub fn read_bounded(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    let file = open_regular(path)?;
    let meta = file.metadata()?;
    if meta.len() > limit {
        return Err(too_big(meta.len(), limit));
    }
    let mut out = Vec::with_capacity(meta.len() as usize);
    // A file that grows while being read stops at the limit too.
    file.take(limit + 1).read_to_end(&mut out)?;
    if out.len() as u64 > limit {
        return Err(too_big(out.len() as u64, limit));
    }
    Ok(out)
}

/// A regular file opened for reading, non-blocking so that a FIFO cannot block the open, and
/// checked through the opened handle. For inputs that are streamed rather than read whole
/// (corpora), whose size is not bounded.
pub fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    let file = options.open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(file)
}

/// [`read_bounded`] as UTF-8 text.
pub fn read_text(path: &Path, limit: u64) -> std::io::Result<String> {
    utf8(read_bounded(path, limit)?)
}

/// Everything `reader` gives (standard input for `-`), refused past `limit` bytes without
/// reading more than one byte beyond it: a pipe has no length to check first.
pub fn read_stream_text(reader: impl Read, limit: u64) -> std::io::Result<String> {
    let mut out = Vec::new();
    reader.take(limit + 1).read_to_end(&mut out)?;
    if out.len() as u64 > limit {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("more than the {} limit", shown_limit(limit)),
        ));
    }
    utf8(out)
}

fn utf8(bytes: Vec<u8>) -> std::io::Result<String> {
    String::from_utf8(bytes).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "not UTF-8 text (invalid byte at offset {})",
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

fn shown_limit(limit: u64) -> String {
    if limit.is_multiple_of(1 << 20) {
        format!("{} MiB", limit >> 20)
    } else {
        format!("{limit} bytes")
    }
}

fn too_big(len: u64, limit: u64) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!("{len} bytes, larger than the {} limit", shown_limit(limit)),
    )
}

/// A size or count as a user writes one: `268435456`, `256MiB`, `256M`, `64KiB`, `8GiB`
/// (powers of 1024); `None` for anything else, or past u64.
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let shift = match unit.trim() {
        "" | "B" => 0,
        "K" | "k" | "KiB" | "KB" | "kB" => 10,
        "M" | "MiB" | "MB" => 20,
        "G" | "GiB" | "GB" => 30,
        "T" | "TiB" | "TB" => 40,
        _ => return None,
    };
    let n: u64 = num.parse().ok()?;
    n.checked_shl(shift).filter(|b| b >> shift == n)
}

/// Reads one line (without its `\n`) into `buf`, keeping at most `limit` bytes of it:
/// `Ok(None)` at the end of the input, `Ok(Some(false))` for a longer line, read to its end
/// without holding it (`buf` then empty).
pub fn read_line_bounded(
    reader: &mut dyn std::io::BufRead,
    limit: usize,
    buf: &mut Vec<u8>,
) -> std::io::Result<Option<bool>> {
    buf.clear();
    let (mut any, mut over) = (false, false);
    loop {
        let chunk = reader.fill_buf()?;
        if chunk.is_empty() {
            return Ok(any.then_some(!over));
        }
        any = true;
        let (part, found) = match memchr::memchr(b'\n', chunk) {
            Some(i) => (&chunk[..i], Some(i + 1)),
            None => (chunk, None),
        };
        if !over {
            if buf.len() + part.len() > limit {
                over = true;
                *buf = Vec::new();
            } else {
                buf.extend_from_slice(part);
            }
        }
        let n = found.unwrap_or(chunk.len());
        reader.consume(n);
        if found.is_some() {
            return Ok(Some(!over));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_small_regular_files_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a");
        std::fs::write(&f, b"hello").unwrap();
        assert_eq!(read_bounded(&f, 5).unwrap(), b"hello");
        assert!(
            read_bounded(&f, 4)
                .unwrap_err()
                .to_string()
                .contains("larger than the 4 bytes limit")
        );
        // A FIFO would block the open itself without O_NONBLOCK.
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            let err = read_bounded(&fifo, 100).unwrap_err().to_string();
            assert!(err.contains("not a regular file"), "{err}");
        }
        assert!(read_bounded(dir.path(), 100).is_err());
        assert!(
            read_bounded(Path::new("/dev/zero"), 100)
                .unwrap_err()
                .to_string()
                .contains("not a regular file")
        );
        std::fs::write(&f, b"\xff").unwrap();
        assert!(read_text(&f, 5).unwrap_err().to_string().contains("UTF-8"));
    }

    #[test]
    fn streams_stop_one_byte_past_the_limit() {
        assert_eq!(read_stream_text(&b"hello"[..], 5).unwrap(), "hello");
        let err = read_stream_text(std::io::repeat(b'a'), 4).unwrap_err();
        assert_eq!(err.to_string(), "more than the 4 bytes limit");
        assert!(read_stream_text(&b"\xff"[..], 5).is_err());
    }

    #[test]
    fn sizes_as_users_write_them() {
        assert_eq!(super::parse_size("268435456"), Some(268_435_456));
        assert_eq!(super::parse_size("256MiB"), Some(256 << 20));
        assert_eq!(super::parse_size(" 8GiB "), Some(8 << 30));
        assert_eq!(super::parse_size("64K"), Some(64 << 10));
        assert_eq!(super::parse_size("2T"), Some(2 << 40));
        assert_eq!(super::parse_size("20000000T"), None);
        assert_eq!(super::parse_size("lots"), None);
        assert_eq!(super::parse_size("-1"), None);
        assert_eq!(super::parse_size(""), None);
    }

    #[test]
    fn a_line_past_the_limit_is_read_to_its_end_and_not_kept() {
        let mut input = std::io::BufReader::with_capacity(4, &b"abc\n0123456789\nxy"[..]);
        let mut buf = Vec::new();
        let mut got = Vec::new();
        while let Some(whole) = read_line_bounded(&mut input, 5, &mut buf).unwrap() {
            got.push((whole, String::from_utf8(buf.clone()).unwrap()));
        }
        assert_eq!(
            got,
            [
                (true, "abc".to_string()),
                (false, String::new()),
                (true, "xy".to_string())
            ]
        );
    }
}
