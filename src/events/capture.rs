//! Capture files: raw concatenated msgpack payloads (`.msgpack`) and framed captures
//! (`.frames`: repeated `u32 BE topic_len, topic, u64 BE seq, u32 BE payload_len, payload`).
//! Read as a stream: memory is bounded by the largest message, not the file.

use std::io::{self, Read};

use super::msgpack::value_len;

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
            topic: String::new(),
            last: Last::default(),
        })
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
            // Grow only when full, and toward `n` by doubling, not at once: a corrupt length
            // (up to MAX_PAYLOAD) must not allocate and zero that much before the input turns
            // out to be shorter, however few bytes each read returns.
            if self.end == self.buf.len() {
                let want = n
                    .min(self.buf.len().saturating_mul(2))
                    .max(self.end + CHUNK);
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
        loop {
            match value_len(&self.buf[self.start..self.end]) {
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
                    if self.available() > MAX_PAYLOAD {
                        return self.fail(at, "message larger than 1 GiB".into());
                    }
                    let want = self.available() + CHUNK;
                    match self.fill(want) {
                        Ok(_) if self.eof && self.available() < want => {
                            // One more try with everything there is: a whole message or a
                            // bad byte is reported as such (the loop decodes it again), only
                            // a message that still needs more is truncated. Reads that split
                            // the message (a pipe, a file over CHUNK) must not turn an invalid
                            // marker into "truncated" at the message start.
                            if !matches!(value_len(&self.buf[self.start..self.end]), Ok(None)) {
                                continue;
                            }
                            let have = self.available();
                            return self.fail(
                                at,
                                format!("truncated msgpack message: {have} bytes left at the end"),
                            );
                        }
                        Ok(_) => {}
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
        assert!(e.reason.contains("truncated frame: payload"), "{e}");
        assert_eq!(e.offset, (data.len() / 2 + 4 + 6 + 8 + 4) as u64);
        assert!(r.next_message().is_none());
    }

    /// `capture` refuses payloads over MAX_PAYLOAD; one of exactly that length is one
    /// `replay` must still take (here it is cut short, so it is truncated, not implausible).
    #[test]
    fn payload_limit_is_inclusive() {
        for (len, want) in [
            (MAX_PAYLOAD, "truncated frame: payload"),
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

    /// A reader that returns one byte per read.
    struct OneByte<'a>(&'a [u8]);
    impl Read for OneByte<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.0.len().min(buf.len()).min(1);
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    /// Found by fuzzing (fuzz/regressions/frames_reader/): a 300-byte capture whose last
    /// frame claims a 739 MiB payload made the reader allocate and zero all of it first.
    #[test]
    fn claimed_payload_length_is_not_allocated_up_front() {
        let mut data = frames(&[("kv@a@m", 0, &[0x93, 0x00, 0x90, 0x00])]);
        data.extend_from_slice(&6u32.to_be_bytes());
        data.extend_from_slice(b"kv@a@m");
        data.extend_from_slice(&1u64.to_be_bytes());
        data.extend_from_slice(&((MAX_PAYLOAD - 1) as u32).to_be_bytes());
        data.extend_from_slice(&[0x93; 100]);
        let mut r = CaptureReader::new(&data[..]).unwrap();
        r.next_message().unwrap().unwrap();
        let e = r.next_message().unwrap().unwrap_err();
        assert!(
            e.reason.starts_with("truncated frame: payload"),
            "{}",
            e.reason
        );
        assert!(r.buf.len() <= 2 * CHUNK, "buffer grew to {}", r.buf.len());
        // The same read a byte at a time (a slow pipe).
        let mut r = CaptureReader::new(OneByte(&data)).unwrap();
        r.next_message().unwrap().unwrap();
        assert_eq!(r.next_message().unwrap().unwrap_err(), e);
        assert!(r.buf.len() <= 2 * CHUNK, "buffer grew to {}", r.buf.len());
    }

    /// Found by fuzzing (fuzz/regressions/frames_reader/): a raw msgpack message with an
    /// invalid marker, read in pieces that split it, was reported as truncated at its start.
    #[test]
    fn invalid_marker_after_a_short_read_is_not_truncation() {
        let data = [0x9a, 0xc1];
        let whole = CaptureReader::new(&data[..])
            .unwrap()
            .next_message()
            .unwrap()
            .unwrap_err();
        let split = CaptureReader::new(OneByte(&data))
            .unwrap()
            .next_message()
            .unwrap()
            .unwrap_err();
        assert_eq!(whole, split);
        assert_eq!(split.offset, 1);
        assert!(split.reason.starts_with("not msgpack"), "{}", split.reason);
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
