//! Where a JSON value ends in a stream, without parsing it: rows of a JSON array, and a file
//! of one conversation, are cut out by these and parsed later on the workers.

use std::io::BufRead;

/// Skips a UTF-8 byte order mark at the start of a file (editors on Windows write one).
pub(super) fn skip_bom(r: &mut dyn BufRead) -> std::io::Result<()> {
    if r.fill_buf()?.starts_with("\u{feff}".as_bytes()) {
        r.consume(3);
    }
    Ok(())
}

/// Whether the JSON object starting `buf` goes on past its first line (a conversation written
/// over several lines, not a JSON Lines row, which holds no line break).
pub(super) fn spans_lines(buf: &[u8]) -> bool {
    let (used, _) = Scan::default().feed(buf);
    memchr::memchr(b'\n', &buf[..used]).is_some()
}

/// Skips whitespace without consuming the next byte, and returns it (`None` at the end),
/// counting the newlines passed into `line`.
pub(super) fn skip_space(r: &mut dyn BufRead, line: &mut u64) -> std::io::Result<Option<u8>> {
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
pub(super) struct Scan {
    depth: u32,
    in_string: bool,
    escaped: bool,
}

impl Scan {
    /// Bytes of `buf` that belong to the value, and whether the value ended within them.
    pub(super) fn feed(&mut self, buf: &[u8]) -> (usize, bool) {
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
