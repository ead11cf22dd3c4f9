//! Capture files: raw concatenated msgpack payloads (`.msgpack`) and framed captures
//! (`.frames`: repeated `u32 BE topic_len, topic, u64 BE seq, u32 BE payload_len, payload`).
//! Read as a stream: memory is bounded by the largest message, not the file.

use std::io::{self, Read};

use super::msgpack::ValueScan;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaptureFormat {
    Frames,
    Msgpack,
}

impl CaptureFormat {
    pub fn name(self) -> &'static str {
        match self {
            CaptureFormat::Frames => "frames",
            CaptureFormat::Msgpack => "msgpack",
        }
    }

    /// A framed capture starts with a big-endian topic length (first byte 0 for any topic
    /// shorter than 16 MiB); a msgpack event batch never starts with 0x00.
    pub fn detect(first: &[u8]) -> CaptureFormat {
        match first.first() {
            Some(0x00) => CaptureFormat::Frames,
            _ => CaptureFormat::Msgpack,
        }
    }
}

/// A capture that cannot be read on; `offset` is where the problem starts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason} (at byte {offset})")]
pub struct CaptureError {
    pub offset: u64,
    pub reason: String,
}

/// One message of a capture.
#[derive(Debug, Clone, Default)]
pub struct Message {
    /// `None` for raw msgpack captures (no topic on record).
    pub topic: Option<String>,
    pub seq: Option<u64>,
    pub payload: Vec<u8>,
    /// Offset of the message (frame header or payload) in the file.
    pub offset: u64,
    /// Offset of the payload in the file.
    pub payload_offset: u64,
}

/// A message borrowed from the reader's buffer (valid until the next read).
#[derive(Debug, Clone, Copy)]
pub struct MessageRef<'a> {
    pub topic: Option<&'a str>,
    pub seq: Option<u64>,
    pub payload: &'a [u8],
    pub offset: u64,
    pub payload_offset: u64,
}

impl Message {
    pub fn as_ref(&self) -> MessageRef<'_> {
        MessageRef {
            topic: self.topic.as_deref(),
            seq: self.seq,
            payload: &self.payload,
            offset: self.offset,
            payload_offset: self.payload_offset,
        }
    }
}

/// The longest topic a `.frames` file may hold: `capture` refuses longer ones so that every
/// frame it writes, `replay` reads back.
pub const MAX_TOPIC: usize = 1 << 16;
/// The largest payload a `.frames` file (or one `.msgpack` value) may hold; `capture` refuses
/// larger ones for the same reason.
pub const MAX_PAYLOAD: usize = 1 << 30;
const CHUNK: usize = 1 << 18;

pub struct CaptureReader<R: Read> {
    inner: R,
    format: CaptureFormat,
    /// Bytes read from `inner` but not consumed yet.
    buf: Vec<u8>,
    start: usize,
    /// End of the bytes read into `buf` (the rest is spare room, never zeroed again).
    end: usize,
    /// File offset of `buf[start]`.
    offset: u64,
    eof: bool,
    failed: bool,
    /// Total input size, when known (a file): a length claiming bytes past it fails at once.
    size: Option<u64>,
    /// The last topic read: a capture repeats a few topics, so one that equals the previous
    /// is neither validated nor copied again.
    topic: String,
    /// Where the last message lies in `buf` (returned by [`next_ref`](Self::next_ref)).
    last: Last,
}

#[derive(Default, Clone, Copy)]
struct Last {
    has_topic: bool,
    seq: Option<u64>,
    payload_start: usize,
    payload_len: usize,
    offset: u64,
    payload_offset: u64,
}

impl<R: Read> CaptureReader<R> {
    /// Detect the format from the first bytes.
    pub fn new(mut inner: R) -> io::Result<Self> {
        let mut buf = vec![0u8; CHUNK];
        let n = read_some(&mut inner, &mut buf)?;
        let format = CaptureFormat::detect(&buf);
        Ok(CaptureReader {
            inner,
            format,
            buf,
            start: 0,
            end: n,
            offset: 0,
            eof: n == 0,
            failed: false,
            size: None,
            topic: String::new(),
            last: Last::default(),
        })
    }

    /// Tell the reader how long the input is (a file's size), so a frame or value that
    /// claims more bytes than are left is refused before any of them is read.
    pub fn with_size(mut self, size: Option<u64>) -> Self {
        self.size = size;
        self
    }

    /// Whether the input starts like JSON text (`{` or `[` after ASCII whitespace), which no
    /// capture does: a frame starts with a zero byte and a msgpack event batch with an array
    /// or map header, never with a byte that is printable ASCII.
    pub fn looks_like_json(&self) -> bool {
        self.buf[self.start..self.end]
            .iter()
            .find(|b| !b.is_ascii_whitespace())
            .is_some_and(|b| matches!(b, b'{' | b'['))
    }

    pub fn format(&self) -> CaptureFormat {
        self.format
    }

    /// Bytes consumed so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    fn available(&self) -> usize {
        self.end - self.start
    }

    /// Make at least `n` unconsumed bytes available; false at end of input.
    fn fill(&mut self, n: usize) -> io::Result<bool> {
        while self.available() < n && !self.eof {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            // Lengths come from the input and are only claims: grow towards `n` no faster
            // than the bytes that actually arrive (at most doubling what is held), so a
            // short file claiming a huge frame never makes a huge buffer.
            let room = (n - self.end).clamp(CHUNK, self.end.max(CHUNK));
            let want = self.end + room;
            if self.buf.len() < want {
                self.buf.resize(want, 0);
            }
            let got = read_some(&mut self.inner, &mut self.buf[self.end..])?;
            self.end += got;
            if got == 0 {
                self.eof = true;
            }
        }
        Ok(self.available() >= n)
    }

    fn consume(&mut self, n: usize) -> &[u8] {
        let s = &self.buf[self.start..self.start + n];
        self.start += n;
        self.offset += n as u64;
        s
    }

    fn fail(&mut self, offset: u64, reason: String) -> Option<Result<(), CaptureError>> {
        self.failed = true;
        Some(Err(CaptureError { offset, reason }))
    }

    /// The next message, owned; `None` at the clean end of the capture. After an error the
    /// reader is done (the stream cannot be re-synchronised).
    pub fn next_message(&mut self) -> Option<Result<Message, CaptureError>> {
        Some(self.next_ref()?.map(|m| Message {
            topic: m.topic.map(str::to_string),
            seq: m.seq,
            payload: m.payload.to_vec(),
            offset: m.offset,
            payload_offset: m.payload_offset,
        }))
    }

    /// The next message, borrowed from the reader's buffer (no copy of the payload); the
    /// same end and error behaviour as [`next_message`](Self::next_message).
    pub fn next_ref(&mut self) -> Option<Result<MessageRef<'_>, CaptureError>> {
        if self.failed {
            return None;
        }
        let read = match self.format {
            CaptureFormat::Frames => self.next_frame(),
            CaptureFormat::Msgpack => self.next_payload(),
        };
        match read? {
            Err(e) => Some(Err(e)),
            Ok(()) => {
                let l = self.last;
                Some(Ok(MessageRef {
                    topic: l.has_topic.then_some(self.topic.as_str()),
                    seq: l.seq,
                    payload: &self.buf[l.payload_start..l.payload_start + l.payload_len],
                    offset: l.offset,
                    payload_offset: l.payload_offset,
                }))
            }
        }
    }

    /// A frame that lies whole in the buffer, with a topic equal to the last one (the common
    /// case): taken without the step-by-step checks. `false`: nothing consumed.
    fn whole_frame(&mut self) -> bool {
        let b = &self.buf[self.start..self.end];
        let t = self.topic.len();
        let Some(head) = b.get(..4 + t + 12) else {
            return false;
        };
        if head[..4] != (t as u32).to_be_bytes() || &head[4..4 + t] != self.topic.as_bytes() {
            return false;
        }
        let seq = u64::from_be_bytes(head[4 + t..12 + t].try_into().unwrap_or_default());
        let len = u32::from_be_bytes(head[12 + t..16 + t].try_into().unwrap_or_default()) as usize;
        let header = 16 + t;
        if len > MAX_PAYLOAD || b.len() - header < len {
            return false;
        }
        self.last = Last {
            has_topic: true,
            seq: Some(seq),
            payload_start: self.start + header,
            payload_len: len,
            offset: self.offset,
            payload_offset: self.offset + header as u64,
        };
        self.consume(header + len);
        true
    }

    fn next_frame(&mut self) -> Option<Result<(), CaptureError>> {
        if self.whole_frame() {
            return Some(Ok(()));
        }
        let at = self.offset;
        match self.fill(1) {
            Ok(false) => return None,
            Ok(true) => {}
            Err(e) => return self.fail(at, format!("read error: {e}")),
        }
        macro_rules! need {
            ($n:expr, $what:expr) => {
                match self.fill($n) {
                    Ok(true) => {}
                    Ok(false) => {
                        let have = self.available();
                        return self.fail(
                            self.offset,
                            format!(
                                "truncated frame: {} needs {} bytes, {} left",
                                $what, $n, have
                            ),
                        );
                    }
                    Err(e) => return self.fail(self.offset, format!("read error: {e}")),
                }
            };
        }
        need!(4, "topic length");
        let topic_len = u32::from_be_bytes(self.consume(4).try_into().unwrap_or_default()) as usize;
        if topic_len > MAX_TOPIC {
            return self.fail(
                at,
                format!("implausible topic length {topic_len} (not a frames capture, or corrupt)"),
            );
        }
        need!(topic_len, "topic");
        let topic_at = self.offset;
        let bytes = &self.buf[self.start..self.start + topic_len];
        if bytes != self.topic.as_bytes() {
            match std::str::from_utf8(bytes) {
                Ok(t) => {
                    self.topic.clear();
                    self.topic.push_str(t);
                }
                Err(_) => return self.fail(topic_at, "topic is not valid UTF-8".into()),
            }
        }
        self.consume(topic_len);
        need!(8, "sequence number");
        let seq = u64::from_be_bytes(self.consume(8).try_into().unwrap_or_default());
        need!(4, "payload length");
        let len_at = self.offset;
        let payload_len =
            u32::from_be_bytes(self.consume(4).try_into().unwrap_or_default()) as usize;
        if payload_len > MAX_PAYLOAD {
            return self.fail(len_at, format!("implausible payload length {payload_len}"));
        }
        let payload_at = self.offset;
        let file_end = match self.size {
            Some(size) if payload_at + payload_len as u64 > size => Some(size),
            Some(_) => None,
            None => match self.fill(payload_len) {
                Ok(true) => None,
                Ok(false) => Some(payload_at + self.available() as u64),
                Err(e) => return self.fail(payload_at, format!("read error: {e}")),
            },
        };
        if let Some(end) = file_end {
            return self.fail(
                payload_at,
                format!(
                    "truncated frame: the frame at byte {at} claims {payload_len} payload bytes \
                     but the file ends at byte {end}"
                ),
            );
        }
        need!(payload_len, "payload");
        self.last = Last {
            has_topic: true,
            seq: Some(seq),
            payload_start: self.start,
            payload_len,
            offset: at,
            payload_offset: self.offset,
        };
        self.consume(payload_len);
        Some(Ok(()))
    }

    fn next_payload(&mut self) -> Option<Result<(), CaptureError>> {
        let at = self.offset;
        match self.fill(1) {
            Ok(false) => return None,
            Ok(true) => {}
            Err(e) => return self.fail(at, format!("read error: {e}")),
        }
        let mut scan = ValueScan::with_limit(MAX_PAYLOAD as u64);
        loop {
            match scan.advance(&self.buf[self.start..self.end]) {
                Ok(Some(n)) => {
                    self.last = Last {
                        has_topic: false,
                        seq: None,
                        payload_start: self.start,
                        payload_len: n,
                        offset: at,
                        payload_offset: at,
                    };
                    self.consume(n);
                    return Some(Ok(()));
                }
                Ok(None) => {
                    let min = scan.min_len();
                    if let Some(size) = self.size
                        && at + min > size
                    {
                        return self.fail(
                            at,
                            format!(
                                "truncated msgpack message: its headers claim more bytes than \
                                 the file holds (it ends at byte {size})"
                            ),
                        );
                    }
                    let have = self.available();
                    match self.fill(have + 1) {
                        Ok(true) => {}
                        Ok(false) => {
                            return self.fail(
                                at,
                                format!("truncated msgpack message: {have} bytes left at the end"),
                            );
                        }
                        Err(e) => return self.fail(at, format!("read error: {e}")),
                    }
                }
                Err(e) => {
                    return self.fail(at + e.offset as u64, format!("not msgpack: {}", e.reason));
                }
            }
        }
    }
}

fn read_some(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match r.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// Append one frame in the `.frames` layout.
pub fn write_frame(out: &mut Vec<u8>, topic: &[u8], seq: u64, payload: &[u8]) {
    out.extend_from_slice(&(topic.len() as u32).to_be_bytes());
    out.extend_from_slice(topic);
    out.extend_from_slice(&seq.to_be_bytes());
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(msgs: &[(&str, u64, &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        for (t, s, p) in msgs {
            write_frame(&mut out, t.as_bytes(), *s, p);
        }
        out
    }

    #[test]
    fn frames_stream_and_truncation() {
        let data = frames(&[
            ("kv@a@m", 0, &[0x93, 0x00, 0x90, 0x00]),
            ("kv@a@m", 1, &[0x93, 0x01, 0x90, 0x00]),
        ]);
        let mut r = CaptureReader::new(&data[..]).unwrap();
        assert_eq!(r.format(), CaptureFormat::Frames);
        let m = r.next_message().unwrap().unwrap();
        assert_eq!(
            (m.topic.as_deref(), m.seq, m.payload.len()),
            (Some("kv@a@m"), Some(0), 4)
        );
        assert_eq!(r.next_message().unwrap().unwrap().seq, Some(1));
        assert!(r.next_message().is_none());

        let cut = &data[..data.len() - 2];
        let mut r = CaptureReader::new(cut).unwrap();
        r.next_message().unwrap().unwrap();
        let e = r.next_message().unwrap().unwrap_err();
        assert!(
            e.reason.contains(&format!(
                "truncated frame: the frame at byte {} claims 4 payload bytes but the file ends at byte {}",
                data.len() / 2,
                cut.len()
            )),
            "{e}"
        );
        assert_eq!(e.offset, (data.len() / 2 + 4 + 6 + 8 + 4) as u64);
        assert!(r.next_message().is_none());
    }

    /// `capture` refuses payloads over MAX_PAYLOAD; one of exactly that length is one
    /// `replay` must still take (here it is cut short, so it is truncated, not implausible).
    #[test]
    fn payload_limit_is_inclusive() {
        for (len, want) in [
            (MAX_PAYLOAD, "truncated frame"),
            (MAX_PAYLOAD + 1, "implausible payload length"),
        ] {
            let mut data = frames(&[("kv@a@m", 0, &[0x93, 0x00, 0x90, 0x00])]);
            let at = data.len() - 8;
            data[at..at + 4].copy_from_slice(&(len as u32).to_be_bytes());
            let mut r = CaptureReader::new(&data[..]).unwrap();
            let e = r.next_message().unwrap().unwrap_err();
            assert!(e.reason.contains(want), "{len}: {e}");
        }
    }

    #[test]
    fn raw_msgpack_is_split_by_value() {
        let data = [0x93, 0x00, 0x90, 0x00, 0x92, 0x01, 0x90];
        let mut r = CaptureReader::new(&data[..]).unwrap();
        assert_eq!(r.format(), CaptureFormat::Msgpack);
        assert_eq!(
            r.next_message().unwrap().unwrap().payload,
            vec![0x93, 0x00, 0x90, 0x00]
        );
        assert_eq!(r.next_message().unwrap().unwrap().payload_offset, 4);
        assert!(r.next_message().is_none());
        let mut r = CaptureReader::new(&data[..6]).unwrap();
        r.next_message().unwrap().unwrap();
        assert!(
            r.next_message()
                .unwrap()
                .unwrap_err()
                .reason
                .contains("truncated")
        );
    }

    /// A short input claiming a huge frame fails at its end without a buffer the claimed
    /// size; with the input's size known it fails before reading on.
    #[test]
    fn claimed_payload_lengths_allocate_nothing_up_front() {
        let mut data = frames(&[("kv@a@m", 0, &[0x93, 0x00, 0x90, 0x00])]);
        let second = data.len();
        data.extend_from_slice(&frames(&[("kv@a@m", 1, &[])])[..18]);
        data.extend_from_slice(&(MAX_PAYLOAD as u32).to_be_bytes());
        data.extend_from_slice(&[0x93; 100]);
        for size in [None, Some(data.len() as u64)] {
            let mut r = CaptureReader::new(&data[..]).unwrap().with_size(size);
            r.next_message().unwrap().unwrap();
            let e = r.next_message().unwrap().unwrap_err();
            assert_eq!(
                e.reason,
                format!(
                    "truncated frame: the frame at byte {second} claims {MAX_PAYLOAD} payload \
                     bytes but the file ends at byte {}",
                    data.len()
                )
            );
            assert_eq!(e.offset, second as u64 + 22);
            assert!(r.buf.len() <= 2 * CHUNK, "buffer {} bytes", r.buf.len());
        }
    }

    /// A raw msgpack header claiming more elements than the size limit (or the file) can
    /// hold is refused at once; one that could fit is scanned once, not once per read.
    #[test]
    fn raw_msgpack_claims_are_checked_against_limits() {
        let mut data = vec![0xdd, 0xff, 0xff, 0xff, 0xff];
        data.extend_from_slice(&[0u8; 1000]);
        let e = CaptureReader::new(&data[..])
            .unwrap()
            .next_message()
            .unwrap()
            .unwrap_err();
        assert!(e.reason.contains("more than the 1 GiB limit"), "{e}");
        let mut data = vec![0xdd, 0x00, 0x10, 0x00, 0x00];
        data.extend_from_slice(&[0u8; 1000]);
        let e = CaptureReader::new(&data[..])
            .unwrap()
            .with_size(Some(data.len() as u64))
            .next_message()
            .unwrap()
            .unwrap_err();
        assert!(
            e.reason.contains(
                "its headers claim more bytes than the file holds (it ends at byte 1005)"
            ),
            "{e}"
        );
        // Complete once all elements are there, however many reads it took.
        let mut data = vec![0xdd, 0x00, 0x10, 0x00, 0x00];
        data.extend_from_slice(&vec![0u8; 1 << 20]);
        data.extend_from_slice(&[0x93, 0x00, 0x90, 0x00]);
        let mut r = CaptureReader::new(Trickle(&data[..])).unwrap();
        assert_eq!(
            r.next_message().unwrap().unwrap().payload.len(),
            5 + (1 << 20)
        );
        assert_eq!(
            r.next_message().unwrap().unwrap().payload_offset,
            5 + (1 << 20)
        );
        assert!(r.next_message().is_none());
    }

    /// Hands out at most 1000 bytes per read, as a pipe may.
    struct Trickle<'a>(&'a [u8]);

    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let n = out.len().min(self.0.len()).min(1000);
            out[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn bad_topic_is_reported_where_it_starts() {
        let data = frames(&[("ok", 0, &[0x93, 0x00, 0x90, 0x00])]);
        let mut bad = data.clone();
        bad[4] = 0xff;
        let e = CaptureReader::new(&bad[..])
            .unwrap()
            .next_message()
            .unwrap()
            .unwrap_err();
        assert_eq!(
            (e.offset, e.reason.as_str()),
            (4, "topic is not valid UTF-8")
        );
    }
}
