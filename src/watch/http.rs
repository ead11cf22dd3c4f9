//! Follows one direction of an HTTP/1.1 connection from a copy of its bytes, as they pass:
//! where each message ends (Content-Length, chunked, or the connection's end) and, for the
//! messages watch reads, the part of the body it needs. The bytes themselves are forwarded
//! by the proxy untouched; this only reads them, within fixed bounds, and when it cannot
//! follow a connection (a malformed or oversized head, a protocol switch) it stops following
//! that connection and says so, and the bytes keep flowing.

/// The longest message head followed.
pub const MAX_HEAD: usize = 64 << 10;
/// The longest chunk-size line or SSE line scanned.
const MAX_LINE: usize = 64 << 10;

/// Which direction: a request's body is kept for chat completions; a response's is read
/// for its usage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Request,
    Response,
}

/// One message seen whole.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Message {
    /// Requests: the method and the path.
    pub method: String,
    pub path: String,
    /// Responses: the status.
    pub status: u16,
    /// The headers watch reads (lower-cased names), values as sent.
    pub headers: Vec<(String, String)>,
    /// Requests: the body of a chat completion (None: not one, or past the bound).
    /// Responses: the JSON body, or an event stream's last `data:` line carrying `usage`.
    pub body: Option<Vec<u8>>,
    /// The body was longer than the bound and was not kept.
    pub over: bool,
}

impl Message {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Why a connection stopped being followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lost {
    Head,
    HeadTooLong,
    Chunk,
    /// A protocol switch (CONNECT, Upgrade): no longer HTTP.
    Switched,
}

impl Lost {
    pub fn as_str(self) -> &'static str {
        match self {
            Lost::Head => "malformed_head",
            Lost::HeadTooLong => "head_too_long",
            Lost::Chunk => "malformed_chunk",
            Lost::Switched => "protocol_switch",
        }
    }
}

#[derive(Debug)]
enum Framing {
    Length(u64),
    Chunked(Chunk),
    UntilClose,
}

#[derive(Debug)]
enum Chunk {
    /// The size line, so far.
    Size(Vec<u8>),
    Data(u64),
    /// The CRLF after a chunk's data: bytes of it still to come.
    DataEnd(u8),
    /// Trailer lines after the last chunk; the current one so far.
    Trailer(Vec<u8>),
}

/// What is kept of a body.
#[derive(Debug)]
enum Keep {
    Nothing,
    Whole(Vec<u8>),
    /// An event stream: the current line, and the last `data:` line that carried `usage`.
    Sse {
        line: Vec<u8>,
        usage: Option<Vec<u8>>,
    },
}

#[derive(Debug)]
enum State {
    Head(Vec<u8>),
    Body {
        framing: Framing,
        message: Message,
        keep: Keep,
    },
    Lost(Lost),
}

/// One direction of a connection.
#[derive(Debug)]
pub struct Follower {
    side: Side,
    state: State,
    /// The most body bytes kept.
    max_body: usize,
    /// Responses: whether each request sent was a HEAD (no body follows), oldest first.
    heads: std::collections::VecDeque<bool>,
}

/// Request paths whose body watch reads.
fn is_chat(method: &str, path: &str) -> bool {
    let path = path.split('?').next().unwrap_or(path);
    method == "POST" && path.ends_with("/chat/completions")
}

const READ: [&str; 4] = [
    "content-type",
    "content-encoding",
    "transfer-encoding",
    "content-length",
];

impl Follower {
    pub fn new(side: Side, max_body: usize) -> Follower {
        Follower {
            side,
            state: State::Head(Vec::new()),
            max_body,
            heads: Default::default(),
        }
    }

    /// Responses: the next request on the connection was a HEAD.
    pub fn request_sent(&mut self, head: bool) {
        self.heads.push_back(head);
    }

    pub fn lost(&self) -> Option<Lost> {
        match self.state {
            State::Lost(l) => Some(l),
            _ => None,
        }
    }

    /// Follows `bytes`; every message they complete is pushed to `done`. `extra` names a
    /// header to keep besides those read for framing (the pod header).
    pub fn feed(&mut self, mut bytes: &[u8], extra: Option<&str>, done: &mut Vec<Message>) {
        while !bytes.is_empty() {
            match &mut self.state {
                State::Lost(_) => return,
                State::Head(buf) => {
                    // Only up to the end of the head: what follows is body.
                    let before = buf.len();
                    let take = bytes.len().min(MAX_HEAD + 4 - before.min(MAX_HEAD + 4));
                    buf.extend_from_slice(&bytes[..take]);
                    let end = find_head_end(buf, before);
                    match end {
                        Some(end) => {
                            let used = end - before;
                            let head = std::mem::take(buf);
                            bytes = &bytes[used..];
                            self.head(&head[..end], extra, done);
                        }
                        None if buf.len() > MAX_HEAD => {
                            self.state = State::Lost(Lost::HeadTooLong);
                            return;
                        }
                        None => return,
                    }
                }
                State::Body { .. } => {
                    let used = self.body(bytes, done);
                    bytes = &bytes[used..];
                }
            }
        }
    }

    /// The connection ended: a body that lasts until the close is complete.
    pub fn end(&mut self, done: &mut Vec<Message>) {
        if let State::Body {
            framing: Framing::UntilClose,
            ..
        } = &self.state
        {
            self.finish(done);
        }
    }

    fn head(&mut self, head: &[u8], extra: Option<&str>, done: &mut Vec<Message>) {
        let mut headers = [httparse::EMPTY_HEADER; 128];
        let mut message = Message::default();
        let parsed_headers: &[httparse::Header];
        match self.side {
            Side::Request => {
                let mut r = httparse::Request::new(&mut headers);
                match r.parse(head) {
                    Ok(httparse::Status::Complete(_)) => {}
                    _ => {
                        self.state = State::Lost(Lost::Head);
                        return;
                    }
                }
                message.method = r.method.unwrap_or_default().to_string();
                message.path = r.path.unwrap_or_default().to_string();
                parsed_headers = r.headers;
            }
            Side::Response => {
                let mut r = httparse::Response::new(&mut headers);
                match r.parse(head) {
                    Ok(httparse::Status::Complete(_)) => {}
                    _ => {
                        self.state = State::Lost(Lost::Head);
                        return;
                    }
                }
                message.status = r.code.unwrap_or_default();
                parsed_headers = r.headers;
            }
        }
        // Transfer-Encoding seen, and whether its last coding is chunked (RFC 9112 §6.3).
        let mut coded = false;
        let mut chunked = false;
        let mut length = None;
        for h in parsed_headers {
            let name = h.name.to_ascii_lowercase();
            let value = String::from_utf8_lossy(h.value).trim().to_string();
            match name.as_str() {
                "transfer-encoding" => {
                    if let Some(last) = value.rsplit(',').map(str::trim).find(|v| !v.is_empty()) {
                        coded = true;
                        chunked = last.eq_ignore_ascii_case("chunked");
                    }
                }
                "content-length" => match value.parse::<u64>() {
                    Ok(n) if length.is_none_or(|l| l == n) => length = Some(n),
                    _ => {
                        self.state = State::Lost(Lost::Head);
                        return;
                    }
                },
                _ => {}
            }
            if READ.contains(&name.as_str()) || extra.is_some_and(|e| e.eq_ignore_ascii_case(&name))
            {
                message.headers.push((name, value));
            }
        }
        // Another protocol follows a tunnel request, and an agreed upgrade; a request that only
        // offers one (`Upgrade: h2c`) is still HTTP/1.1 until the server answers 101.
        let switched = match self.side {
            Side::Request => message.method == "CONNECT",
            Side::Response => message.status == 101,
        };
        // A request coded otherwise than chunked cannot be framed (the server answers 400).
        if self.side == Side::Request && coded && !chunked {
            self.state = State::Lost(Lost::Head);
            return;
        }
        if switched {
            self.state = State::Lost(Lost::Switched);
            return;
        }
        let interim = self.side == Side::Response && (100..200).contains(&message.status);
        if interim {
            // 100 Continue and friends: the real response follows.
            self.state = State::Head(Vec::new());
            return;
        }
        let no_body = match self.side {
            Side::Request => false,
            Side::Response => {
                let head_request = self.heads.pop_front().unwrap_or(false);
                head_request || message.status == 204 || message.status == 304
            }
        };
        let framing = if no_body {
            Framing::Length(0)
        } else if chunked {
            Framing::Chunked(Chunk::Size(Vec::new()))
        } else if coded {
            // A response coded otherwise lasts until the connection closes, whatever its
            // Content-Length says.
            Framing::UntilClose
        } else if let Some(n) = length {
            Framing::Length(n)
        } else if self.side == Side::Request {
            Framing::Length(0)
        } else {
            Framing::UntilClose
        };
        let keep = match self.side {
            Side::Request if is_chat(&message.method, &message.path) => Keep::Whole(Vec::new()),
            Side::Request => Keep::Nothing,
            Side::Response if message.header("content-encoding").is_some() => Keep::Nothing,
            Side::Response
                if message
                    .header("content-type")
                    .is_some_and(|t| t.starts_with("text/event-stream")) =>
            {
                Keep::Sse {
                    line: Vec::new(),
                    usage: None,
                }
            }
            Side::Response => Keep::Whole(Vec::new()),
        };
        self.state = State::Body {
            framing,
            message,
            keep,
        };
        if let State::Body {
            framing: Framing::Length(0),
            ..
        } = self.state
        {
            self.finish(done);
        }
    }

    /// Reads body bytes; returns how many were the body's.
    fn body(&mut self, bytes: &[u8], done: &mut Vec<Message>) -> usize {
        let max_body = self.max_body;
        let State::Body {
            framing,
            message,
            keep,
        } = &mut self.state
        else {
            return bytes.len();
        };
        match framing {
            Framing::UntilClose => {
                take(keep, message, bytes, max_body);
                bytes.len()
            }
            Framing::Length(left) => {
                let n = (*left).min(bytes.len() as u64) as usize;
                take(keep, message, &bytes[..n], max_body);
                *left -= n as u64;
                if *left == 0 {
                    self.finish(done);
                }
                n
            }
            Framing::Chunked(chunk) => {
                let mut used = 0;
                while used < bytes.len() {
                    let rest = &bytes[used..];
                    match chunk {
                        Chunk::Size(line) => {
                            let Some((n, found)) = line_part(line, rest) else {
                                self.state = State::Lost(Lost::Chunk);
                                return bytes.len();
                            };
                            used += n;
                            if !found {
                                continue;
                            }
                            let text = String::from_utf8_lossy(line);
                            let size = text.split(';').next().unwrap_or("").trim();
                            match u64::from_str_radix(size, 16) {
                                Ok(0) => *chunk = Chunk::Trailer(Vec::new()),
                                Ok(n) => *chunk = Chunk::Data(n),
                                Err(_) => {
                                    self.state = State::Lost(Lost::Chunk);
                                    return bytes.len();
                                }
                            }
                        }
                        Chunk::Data(left) => {
                            let n = (*left).min(rest.len() as u64) as usize;
                            take(keep, message, &rest[..n], max_body);
                            used += n;
                            *left -= n as u64;
                            if *left == 0 {
                                *chunk = Chunk::DataEnd(2);
                            }
                        }
                        Chunk::DataEnd(left) => {
                            // CRLF, or a bare LF some servers send.
                            let b = rest[0];
                            used += 1;
                            if b == b'\n' {
                                *chunk = Chunk::Size(Vec::new());
                            } else if b == b'\r' && *left == 2 {
                                *left = 1;
                            } else {
                                self.state = State::Lost(Lost::Chunk);
                                return bytes.len();
                            }
                        }
                        Chunk::Trailer(line) => {
                            let Some((n, found)) = line_part(line, rest) else {
                                self.state = State::Lost(Lost::Chunk);
                                return bytes.len();
                            };
                            used += n;
                            if found {
                                if line.iter().all(|b| *b == b'\r' || *b == b'\n') {
                                    self.finish(done);
                                    return used;
                                }
                                line.clear();
                            }
                        }
                    }
                }
                used
            }
        }
    }

    fn finish(&mut self, done: &mut Vec<Message>) {
        let state = std::mem::replace(&mut self.state, State::Head(Vec::new()));
        if let State::Body {
            mut message, keep, ..
        } = state
        {
            message.body = match keep {
                Keep::Nothing => None,
                Keep::Whole(b) => (!message.over).then_some(b),
                Keep::Sse { line, usage } => {
                    // A last line without its newline still counts.
                    let last = sse_usage(&line);
                    last.map(<[u8]>::to_vec).or(usage)
                }
            };
            done.push(message);
        }
    }
}

/// Adds to `line` the start of `rest` up to and including a newline: the bytes taken and
/// whether the line ended; `None` past [`MAX_LINE`].
fn line_part(line: &mut Vec<u8>, rest: &[u8]) -> Option<(usize, bool)> {
    let (part, found) = match memchr::memchr(b'\n', rest) {
        Some(i) => (&rest[..=i], true),
        None => (rest, false),
    };
    line.extend_from_slice(part);
    (line.len() <= MAX_LINE).then_some((part.len(), found))
}

/// The end of a head (just past its blank line) in `buf`, searching from a little before
/// `from` (the terminator may straddle two reads).
fn find_head_end(buf: &[u8], from: usize) -> Option<usize> {
    let start = from.saturating_sub(3);
    let mut i = start;
    while let Some(at) = memchr::memchr(b'\n', &buf[i..]) {
        let nl = i + at;
        // "\n\n" or "\n\r\n"
        if buf.get(nl + 1) == Some(&b'\n') {
            return Some(nl + 2);
        }
        if buf.get(nl + 1) == Some(&b'\r') && buf.get(nl + 2) == Some(&b'\n') {
            return Some(nl + 3);
        }
        i = nl + 1;
    }
    None
}

/// A `data:` line of an event stream carrying a usage object: its JSON.
fn sse_usage(line: &[u8]) -> Option<&[u8]> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let data = line.strip_prefix(b"data:")?;
    let data = data.strip_prefix(b" ").unwrap_or(data);
    memchr::memmem::find(data, b"\"usage\"")?;
    Some(data)
}

fn take(keep: &mut Keep, message: &mut Message, bytes: &[u8], max_body: usize) {
    match keep {
        Keep::Nothing => {}
        Keep::Whole(buf) => {
            if message.over {
                return;
            }
            if buf.len() + bytes.len() > max_body {
                message.over = true;
                *buf = Vec::new();
            } else {
                buf.extend_from_slice(bytes);
            }
        }
        Keep::Sse { line, usage } => {
            let mut rest = bytes;
            while !rest.is_empty() {
                let (part, found) = match memchr::memchr(b'\n', rest) {
                    Some(i) => (&rest[..=i], true),
                    None => (rest, false),
                };
                rest = &rest[part.len()..];
                if line.len() + part.len() <= MAX_LINE {
                    line.extend_from_slice(part);
                } else {
                    // A line too long to scan: not a usage line anyone sends; skip it.
                    line.clear();
                    line.extend_from_slice(b"-");
                }
                if found {
                    if let Some(u) = sse_usage(line) {
                        *usage = Some(u.to_vec());
                    }
                    line.clear();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `bytes` in pieces of every size from 1 up: the result must not depend on where
    /// reads split the stream.
    fn follow(side: Side, bytes: &[u8], heads: &[bool], max_body: usize) -> Vec<Vec<Message>> {
        (1..=bytes.len().min(40))
            .map(|piece| {
                let mut f = Follower::new(side, max_body);
                for h in heads {
                    f.request_sent(*h);
                }
                let mut done = Vec::new();
                for part in bytes.chunks(piece) {
                    f.feed(part, Some("x-pod"), &mut done);
                }
                f.end(&mut done);
                done
            })
            .collect()
    }

    #[test]
    fn requests_in_a_row_each_end_where_their_length_says() {
        let body = br#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
        let mut wire = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        wire.extend_from_slice(body);
        wire.extend_from_slice(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        wire.extend_from_slice(b"POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":\r\n2;ext=1\r\n1}\r\n0\r\nX-T: 1\r\n\r\n");
        for done in follow(Side::Request, &wire, &[], 1 << 20) {
            assert_eq!(done.len(), 3);
            assert_eq!(done[0].body.as_deref(), Some(&body[..]));
            assert_eq!(
                (done[1].method.as_str(), done[1].body.as_ref()),
                ("GET", None)
            );
            assert_eq!(done[2].body.as_deref(), Some(&b"{\"a\":1}"[..]));
        }
    }

    #[test]
    fn a_stream_gives_its_last_usage_line_and_a_head_request_no_body() {
        let chunked: String = [
            "data: {\"choices\":[],\"a\":1}\n\n",
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9}}\n\ndata: [DONE]",
            "\n\n",
        ]
        .iter()
        .map(|part| format!("{:x}\r\n{part}\r\n", part.len()))
        .collect();
        let wire = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nx-pod: d1\r\n\
             transfer-encoding: chunked\r\n\r\n{chunked}0\r\n\r\n\
             HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n\
             HTTP/1.1 204 No Content\r\n\r\n\
             HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n{{\"usage\":{{}}}}"
        );
        let wire = wire.as_bytes();
        for done in follow(Side::Response, wire, &[false, true, false, false], 1 << 20) {
            assert_eq!(done.len(), 4, "{done:?}");
            assert_eq!(done[0].header("x-pod"), Some("d1"));
            assert_eq!(
                done[0].body.as_deref(),
                Some(&br#"{"choices":[],"usage":{"prompt_tokens":9}}"#[..])
            );
            assert_eq!(done[1].body.as_deref(), Some(&b""[..]));
            assert_eq!(done[2].status, 204);
            // Until the connection closed.
            assert_eq!(done[3].body.as_deref(), Some(&br#"{"usage":{}}"#[..]));
        }
    }

    #[test]
    fn what_cannot_be_followed_stops_the_following_not_the_bytes() {
        let mut f = Follower::new(Side::Request, 1 << 20);
        let mut done = Vec::new();
        f.feed(b"NOT HTTP AT ALL\r\n\r\n", None, &mut done);
        assert_eq!(f.lost(), Some(Lost::Head));
        let mut f = Follower::new(Side::Request, 1 << 20);
        f.feed(&vec![b'a'; MAX_HEAD + 10], None, &mut done);
        assert_eq!(f.lost(), Some(Lost::HeadTooLong));
        let mut f = Follower::new(Side::Request, 1 << 20);
        f.feed(
            b"POST /v1/chat/completions HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
            None,
            &mut done,
        );
        assert_eq!(f.lost(), Some(Lost::Chunk));
        // Past the body bound: the message still ends in the right place, its body not kept.
        let mut f = Follower::new(Side::Request, 4);
        f.feed(
            b"POST /v1/chat/completions HTTP/1.1\r\ncontent-length: 6\r\n\r\n123456GET / HTTP/1.1\r\n\r\n",
            None,
            &mut done,
        );
        assert_eq!(done.len(), 2);
        assert!(done[0].over && done[0].body.is_none());
        assert_eq!(done[1].method, "GET");
        // A request coded otherwise than chunked cannot be framed; one that only offers an
        // upgrade is still followed.
        let mut f = Follower::new(Side::Request, 1 << 20);
        f.feed(
            b"GET / HTTP/1.1\r\nupgrade: h2c\r\n\r\nPOST / HTTP/1.1\r\ntransfer-encoding: gzip\r\n\r\n",
            None,
            &mut done,
        );
        assert_eq!((done.len(), f.lost()), (3, Some(Lost::Head)));
        // A response coded otherwise lasts until the close, whatever its length says.
        let mut f = Follower::new(Side::Response, 1 << 20);
        let mut done = Vec::new();
        f.feed(
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\ncontent-length: 2\r\n\r\nabcdef",
            None,
            &mut done,
        );
        assert!(done.is_empty());
        f.end(&mut done);
        assert_eq!(done.len(), 1);
    }
}
