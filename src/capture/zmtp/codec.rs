//! ZMTP 3.x framing (RFC 23/37) as a pure, synchronous, incremental state machine: bytes in,
//! the greeting, commands and whole messages out. Every length a peer announces is checked
//! against [`Limits`] when its header arrives, before anything is allocated for it, and a
//! frame's buffer grows only with the bytes that really arrived: what a peer makes this hold
//! is bounded by the limits and by what it actually sent, never by what it claims.

use bytes::Bytes;

use super::{ErrorKind, ZmtpError};

/// The greeting is fixed-size in ZMTP 3.
pub const GREETING_LEN: usize = 64;

const MORE: u8 = 0x01;
const LONG: u8 = 0x02;
const COMMAND: u8 = 0x04;

/// The bounds a peer must keep to (libzmq's ZMQ_MAXMSGSIZE, but over a whole message rather
/// than per frame, plus a frame count and a command size).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of one message: the sum of its frames.
    pub max_message: usize,
    /// Frames of one message.
    pub max_frames: usize,
    /// Bytes of one command frame (READY, PING, ...).
    pub max_command: usize,
}

impl Limits {
    /// The message bound `capture` uses unless told otherwise. vLLM publishes one batch per
    /// engine step: at most ~7.5 bytes per token (a uint32 token id, a share of a 32-byte
    /// block hash and of `extra_keys`), so a step that computes 1M tokens is about 8 MB, and
    /// even `kv_cache_report_mode=full` re-announcing 32M cached tokens fits. 256 MiB is
    /// more than 30x the largest batch a real step produces while keeping what one peer can
    /// make capture hold a fraction of a machine.
    pub const DEFAULT_MAX_MESSAGE: usize = 256 << 20;
    /// vLLM sends 3 frames (topic, seq, payload) and its replay socket 4 to a DEALER (an
    /// empty delimiter first); anything past a few frames is malformed anyway, and 64 leaves
    /// room for layouts to come while keeping per-frame overhead negligible.
    pub const MAX_FRAMES: usize = 64;
    /// READY carries Socket-Type, an identity of at most 255 bytes and a few application
    /// properties; libzmq's own are far below this.
    pub const MAX_COMMAND: usize = 64 << 10;

    pub fn new(max_message: usize) -> Limits {
        Limits {
            max_message,
            max_frames: Limits::MAX_FRAMES,
            max_command: Limits::MAX_COMMAND,
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits::new(Limits::DEFAULT_MAX_MESSAGE)
    }
}

/// What the peer's greeting said (only a NULL-mechanism ZMTP 3.x greeting gets this far).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Greeting {
    pub major: u8,
    pub minor: u8,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Greeting(Greeting),
    /// A command frame's body: name size, name, data.
    Command(Bytes),
    /// A whole multipart message.
    Message(Vec<Bytes>),
}

#[derive(Debug)]
enum State {
    Greeting {
        buf: [u8; GREETING_LEN],
        have: usize,
    },
    Flags,
    Size {
        flags: u8,
        buf: [u8; 8],
        have: usize,
        need: usize,
    },
    Body {
        flags: u8,
        len: usize,
        body: Vec<u8>,
    },
}

/// The receiving half of one ZMTP connection.
#[derive(Debug)]
pub struct Decoder {
    limits: Limits,
    state: State,
    /// Frames of the message in progress.
    frames: Vec<Bytes>,
    /// Their bytes.
    bytes: usize,
}

impl Decoder {
    /// A decoder expecting the peer's greeting first.
    pub fn new(limits: Limits) -> Decoder {
        Decoder {
            limits,
            state: State::Greeting {
                buf: [0; GREETING_LEN],
                have: 0,
            },
            frames: Vec::new(),
            bytes: 0,
        }
    }

    /// Between frames, with no message in progress: a connection that ends here ends cleanly.
    pub fn at_boundary(&self) -> bool {
        matches!(self.state, State::Flags) && self.frames.is_empty()
    }

    /// Bytes held for the frame and message in progress (allocated, not claimed): never more
    /// than `max_message` (or `max_command` inside a command).
    pub fn held(&self) -> usize {
        let body = match &self.state {
            State::Body { body, .. } => body.capacity(),
            _ => 0,
        };
        self.bytes + body
    }

    /// Consume bytes from the front of `input` up to the end of the next event (or all of
    /// it): how many were consumed, and the event if one is complete. Call again with the
    /// rest. After an error the connection is beyond repair: drop it.
    pub fn decode(&mut self, input: &[u8]) -> Result<(usize, Option<Event>), ZmtpError> {
        let mut at = 0;
        loop {
            let rest = &input[at..];
            match &mut self.state {
                State::Greeting { buf, have } => {
                    if rest.is_empty() {
                        return Ok((at, None));
                    }
                    let n = (GREETING_LEN - *have).min(rest.len());
                    buf[*have..*have + n].copy_from_slice(&rest[..n]);
                    *have += n;
                    at += n;
                    // Checked as it arrives: a peer that is not ZMTP 3 is refused at once,
                    // not after it has sent (or stalled before) 64 bytes.
                    check_greeting(&buf[..*have])?;
                    if *have == GREETING_LEN {
                        let g = Greeting {
                            major: buf[10],
                            minor: buf[11],
                        };
                        self.state = State::Flags;
                        return Ok((at, Some(Event::Greeting(g))));
                    }
                }
                State::Flags => {
                    let Some(&flags) = rest.first() else {
                        return Ok((at, None));
                    };
                    at += 1;
                    if flags & COMMAND != 0 {
                        // A message's frames follow one another (RFC 23: traffic is
                        // commands and whole messages).
                        if !self.frames.is_empty() {
                            return Err(protocol("a command frame inside a multipart message"));
                        }
                        if flags & MORE != 0 {
                            return Err(protocol("a command frame with the MORE flag"));
                        }
                    }
                    // Reserved bits are ignored, as libzmq does.
                    self.state = State::Size {
                        flags,
                        buf: [0; 8],
                        have: 0,
                        need: if flags & LONG != 0 { 8 } else { 1 },
                    };
                }
                State::Size {
                    flags,
                    buf,
                    have,
                    need,
                } => {
                    let n = (*need - *have).min(rest.len());
                    buf[*have..*have + n].copy_from_slice(&rest[..n]);
                    *have += n;
                    at += n;
                    if *have < *need {
                        return Ok((at, None));
                    }
                    let len = if *need == 8 {
                        u64::from_be_bytes(*buf)
                    } else {
                        u64::from(buf[0])
                    };
                    let flags = *flags;
                    let len = self.admit(flags, len)?;
                    self.state = State::Body {
                        flags,
                        len,
                        body: Vec::new(),
                    };
                    if len == 0
                        && let Some(e) = self.finish_frame()
                    {
                        return Ok((at, Some(e)));
                    }
                }
                State::Body { len, body, .. } => {
                    let n = (*len - body.len()).min(rest.len());
                    grow(body, n, *len);
                    body.extend_from_slice(&rest[..n]);
                    at += n;
                    if body.len() < *len {
                        return Ok((at, None));
                    }
                    if let Some(e) = self.finish_frame() {
                        return Ok((at, Some(e)));
                    }
                }
            }
        }
    }

    /// The frame announced with `flags` and `len`, checked against the limits before any of
    /// it is read.
    fn admit(&self, flags: u8, len: u64) -> Result<usize, ZmtpError> {
        let l = &self.limits;
        if flags & COMMAND != 0 {
            if len > l.max_command as u64 {
                return Err(ZmtpError::new(
                    ErrorKind::OversizedCommand,
                    format!(
                        "a command frame of {len} bytes (at most {} allowed)",
                        l.max_command
                    ),
                ));
            }
            return Ok(len as usize);
        }
        if self.frames.len() >= l.max_frames {
            return Err(ZmtpError::new(
                ErrorKind::TooManyFrames,
                format!("a message of more than {} frames", l.max_frames),
            ));
        }
        // No overflow: `bytes` never exceeds `max_message`.
        let room = (l.max_message - self.bytes) as u64;
        if len > room {
            return Err(ZmtpError::new(
                ErrorKind::OversizedMessage,
                format!(
                    "a frame of {len} bytes after {} bytes of its message, over the {}-byte \
                     message limit",
                    self.bytes, l.max_message
                ),
            ));
        }
        Ok(len as usize)
    }

    /// The body is complete: a command, the next frame of a message, or a message's last.
    fn finish_frame(&mut self) -> Option<Event> {
        let State::Body { flags, body, .. } = std::mem::replace(&mut self.state, State::Flags)
        else {
            return None;
        };
        let frame = Bytes::from(body);
        if flags & COMMAND != 0 {
            return Some(Event::Command(frame));
        }
        self.bytes += frame.len();
        self.frames.push(frame);
        if flags & MORE != 0 {
            return None;
        }
        self.bytes = 0;
        Some(Event::Message(std::mem::take(&mut self.frames)))
    }
}

/// Room for `n` more bytes of a body that will hold `len`: doubling, so a large frame costs
/// few copies, but never past `len`, so what is held stays below what was announced and
/// within twice what arrived.
fn grow(body: &mut Vec<u8>, n: usize, len: usize) {
    if body.capacity() - body.len() >= n {
        return;
    }
    let want = (body.len() + n).max(len.min(body.capacity().saturating_mul(2)));
    body.reserve_exact(want - body.len());
}

fn protocol(what: &str) -> ZmtpError {
    ZmtpError::new(ErrorKind::Protocol, what.to_string())
}

fn greeting_error(detail: String) -> ZmtpError {
    ZmtpError::new(ErrorKind::Greeting, detail)
}

/// The greeting bytes that have arrived so far: signature, version, mechanism.
fn check_greeting(g: &[u8]) -> Result<(), ZmtpError> {
    if g[0] != 0xff {
        return Err(greeting_error(format!(
            "not a ZMTP peer: its first byte is 0x{:02x}, not 0xff",
            g[0]
        )));
    }
    // The signature's last bit tells a versioned peer from a ZMTP 1.0 one (libzmq checks
    // just that bit too).
    if let Some(&b) = g.get(9)
        && b & 1 == 0
    {
        return Err(greeting_error(
            "a ZMTP 1.0 peer (unversioned greeting); ZMTP 3 is needed".into(),
        ));
    }
    if let Some(&major) = g.get(10)
        && major < 3
    {
        return Err(greeting_error(format!(
            "a ZMTP {major}.x peer; ZMTP 3 is needed"
        )));
    }
    if g.len() >= 32 {
        let mechanism = &g[12..32];
        let name = mechanism.split(|&b| b == 0).next().unwrap_or_default();
        let padded = mechanism[name.len()..].iter().all(|&b| b == 0);
        if name != b"NULL" || !padded {
            return Err(greeting_error(format!(
                "security mechanism {} (only NULL is supported)",
                super::shown(mechanism)
            )));
        }
    }
    Ok(())
}

/// Our greeting: ZMTP 3.0, NULL. 3.0 rather than 3.1 because then subscriptions are
/// messages (`0x01` + prefix) by the version's own rules: what a 3.0 publisher (the zeromq
/// crate, older libzmq) understands, and what libzmq 4.3 (pyzmq 27, vLLM) accepts from any
/// peer, where 3.1's SUBSCRIBE command is unknown to 3.0 peers.
pub fn greeting() -> [u8; GREETING_LEN] {
    let mut g = [0u8; GREETING_LEN];
    g[0] = 0xff;
    g[9] = 0x7f;
    g[10] = 3;
    g[11] = 0;
    g[12..16].copy_from_slice(b"NULL");
    // as-server (byte 32) is 0: NULL has no client and server roles.
    g
}

fn put_header(out: &mut Vec<u8>, flags: u8, len: usize) {
    if len > 255 {
        out.push(flags | LONG);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    } else {
        out.push(flags);
        out.push(len as u8);
    }
}

/// One command frame: `name` and its data.
pub fn command(name: &[u8], data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(10 + 1 + name.len() + data.len());
    put_header(&mut out, COMMAND, 1 + name.len() + data.len());
    out.push(name.len() as u8);
    out.extend_from_slice(name);
    out.extend_from_slice(data);
    out
}

/// READY with the given properties (name, value).
pub fn ready(properties: &[(&str, &[u8])]) -> Vec<u8> {
    let mut data = Vec::new();
    for (name, value) in properties {
        data.push(name.len() as u8);
        data.extend_from_slice(name.as_bytes());
        data.extend_from_slice(&(value.len() as u32).to_be_bytes());
        data.extend_from_slice(value);
    }
    command(b"READY", &data)
}

/// A multipart message, frames in order.
pub fn message(frames: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(frames.iter().map(|f| f.len() + 9).sum());
    for (i, f) in frames.iter().enumerate() {
        let more = if i + 1 < frames.len() { MORE } else { 0 };
        put_header(&mut out, more, f.len());
        out.extend_from_slice(f);
    }
    out
}

/// A command's name and data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Command<'a> {
    pub name: &'a [u8],
    pub data: &'a [u8],
}

impl<'a> Command<'a> {
    pub fn parse(body: &'a [u8]) -> Result<Command<'a>, ZmtpError> {
        let Some((&n, rest)) = body.split_first() else {
            return Err(protocol("an empty command frame"));
        };
        let n = usize::from(n);
        if n == 0 || rest.len() < n {
            return Err(protocol("a command frame whose name does not fit in it"));
        }
        Ok(Command {
            name: &rest[..n],
            data: &rest[n..],
        })
    }
}

/// The peer's first command after the greeting (NULL mechanism: READY or ERROR), against
/// the socket types this side may talk to.
pub fn peer_ready(body: &[u8], peer_types: &[&[u8]]) -> Result<(), ZmtpError> {
    let handshake = |detail: String| ZmtpError::new(ErrorKind::Handshake, detail);
    let cmd = Command::parse(body).map_err(|e| handshake(e.detail))?;
    match cmd.name {
        b"READY" => {
            let props = properties(cmd.data)?;
            let peer = props
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(b"Socket-Type"))
                .map(|(_, v)| *v)
                .ok_or_else(|| handshake("READY without Socket-Type".into()))?;
            if peer_types.contains(&peer) {
                Ok(())
            } else {
                Err(handshake(format!(
                    "a {} peer, where {} is needed",
                    super::shown(peer),
                    peer_types
                        .iter()
                        .map(|t| String::from_utf8_lossy(t))
                        .collect::<Vec<_>>()
                        .join(" or ")
                )))
            }
        }
        b"ERROR" => {
            // A 1-byte reason size, then the reason; either may be missing or short.
            let (size, reason) = cmd.data.split_first().unwrap_or((&0, &[]));
            let reason = &reason[..reason.len().min(usize::from(*size))];
            Err(handshake(format!(
                "the peer refused the connection: {}",
                super::shown(reason)
            )))
        }
        other => Err(handshake(format!(
            "command {} before READY",
            super::shown(other)
        ))),
    }
}

/// The most of a PING's context a PONG echoes (ZMTP 3.1).
const PING_CONTEXT: usize = 16;

/// The answer a command after the handshake needs: a PONG for a PING (with up to 16 bytes
/// of its context, after its 2-byte TTL); other commands need none.
pub fn pong_for(body: &[u8]) -> Result<Option<Vec<u8>>, ZmtpError> {
    let cmd = Command::parse(body)?;
    if cmd.name != b"PING" {
        return Ok(None);
    }
    let context = cmd.data.get(2..).unwrap_or_default();
    Ok(Some(command(
        b"PONG",
        &context[..context.len().min(PING_CONTEXT)],
    )))
}

/// One metadata property: name, value.
pub type Property<'a> = (&'a [u8], &'a [u8]);

/// The properties of a READY command's data, in order (RFC 23 metadata: a 1-byte name size,
/// the name, a 4-byte value size, the value). Borrowed from the command, which is bounded.
pub fn properties(mut data: &[u8]) -> Result<Vec<Property<'_>>, ZmtpError> {
    let bad = || {
        ZmtpError::new(
            ErrorKind::Handshake,
            "READY metadata that does not fit in its command".into(),
        )
    };
    let mut out = Vec::new();
    while let Some((&n, rest)) = data.split_first() {
        let n = usize::from(n);
        if n == 0 || rest.len() < n + 4 {
            return Err(bad());
        }
        let (name, rest) = rest.split_at(n);
        let (size, rest) = rest.split_at(4);
        let size = u32::from_be_bytes([size[0], size[1], size[2], size[3]]) as usize;
        if rest.len() < size {
            return Err(bad());
        }
        let (value, rest) = rest.split_at(size);
        out.push((name, value));
        data = rest;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_message: usize, max_frames: usize, max_command: usize) -> Limits {
        Limits {
            max_message,
            max_frames,
            max_command,
        }
    }

    fn peer_greeting() -> Vec<u8> {
        let mut g = greeting().to_vec();
        // libzmq 4.3 says 3.1, with a non-zero padding.
        g[11] = 1;
        g[8] = 1;
        g
    }

    /// Everything `input` decodes to, fed in pieces of `step` bytes; the error ends it.
    fn decode_all(d: &mut Decoder, input: &[u8], step: usize) -> (Vec<Event>, Option<ZmtpError>) {
        let mut events = Vec::new();
        for chunk in input.chunks(step.max(1)) {
            let mut rest = chunk;
            loop {
                match d.decode(rest) {
                    Ok((n, e)) => {
                        assert!(n <= rest.len());
                        rest = &rest[n..];
                        match e {
                            Some(e) => events.push(e),
                            None => {
                                assert!(rest.is_empty(), "stopped with input left");
                                break;
                            }
                        }
                    }
                    Err(e) => return (events, Some(e)),
                }
                if rest.is_empty() {
                    break;
                }
            }
        }
        (events, None)
    }

    fn b(v: &[u8]) -> Bytes {
        Bytes::copy_from_slice(v)
    }

    /// A stream of every kind of unit: greeting, READY, a 3-frame message with a long
    /// payload, an empty-frame message, PING, a long-form header on a short frame.
    fn stream() -> (Vec<u8>, Vec<Event>) {
        let mut s = peer_greeting();
        let ready_cmd = ready(&[("Socket-Type", b"PUB")]);
        s.extend_from_slice(&ready_cmd);
        let payload = vec![0xabu8; 300];
        s.extend_from_slice(&message(&[b"kv@p@m", &7u64.to_be_bytes(), &payload]));
        s.extend_from_slice(&message(&[b"", b""]));
        s.extend_from_slice(&command(b"PING", &[0, 10]));
        // A 2-byte frame in the long form: allowed, if wasteful.
        s.extend_from_slice(&[LONG, 0, 0, 0, 0, 0, 0, 0, 2, b'h', b'i']);
        let events = vec![
            Event::Greeting(Greeting { major: 3, minor: 1 }),
            Event::Command(b(&ready_cmd[2..])),
            Event::Message(vec![b(b"kv@p@m"), b(&7u64.to_be_bytes()), b(&payload)]),
            Event::Message(vec![b(b""), b(b"")]),
            Event::Command(b(b"\x04PING\x00\x0a")),
            Event::Message(vec![b(b"hi")]),
        ];
        (s, events)
    }

    #[test]
    fn decodes_split_at_every_byte_boundary() {
        let (s, want) = stream();
        for step in [1, 2, 3, 7, 63, 64, 65, 300, s.len()] {
            let mut d = Decoder::new(Limits::default());
            let (got, err) = decode_all(&mut d, &s, step);
            assert_eq!(err, None, "step {step}");
            assert_eq!(got, want, "step {step}");
            assert!(d.at_boundary());
        }
        // Every single split point, with the two halves in separate calls.
        for cut in 0..=s.len() {
            let mut d = Decoder::new(Limits::default());
            let mut got = Vec::new();
            for part in [&s[..cut], &s[cut..]] {
                let (e, err) = decode_all(&mut d, part, part.len());
                assert_eq!(err, None, "cut {cut}");
                got.extend(e);
            }
            assert_eq!(got, want, "cut {cut}");
        }
    }

    #[test]
    fn commands_and_messages_are_told_apart() {
        let mut s = peer_greeting();
        s.extend_from_slice(&command(b"READY", b""));
        s.extend_from_slice(&message(&[b"\x05READY"]));
        let mut d = Decoder::new(Limits::default());
        let (got, err) = decode_all(&mut d, &s, s.len());
        assert_eq!(err, None);
        assert_eq!(got[1], Event::Command(b(b"\x05READY")));
        assert_eq!(got[2], Event::Message(vec![b(b"\x05READY")]));
        let c = Command::parse(b"\x05READY\x0bSocket-Type\x00\x00\x00\x03PUB").unwrap();
        assert_eq!(c.name, b"READY");
        assert_eq!(
            properties(c.data).unwrap(),
            vec![(&b"Socket-Type"[..], &b"PUB"[..])]
        );
        for bad in [
            &b"\x05READY\x0bSocket-Type\x00\x00\x00\x04PUB"[..],
            b"\x05READY\x0bSocket-Type\x00\x00",
            b"\x05READY\x00",
        ] {
            let c = Command::parse(bad).unwrap();
            assert_eq!(
                properties(c.data).unwrap_err().kind,
                ErrorKind::Handshake,
                "{bad:?}"
            );
        }
        assert!(Command::parse(b"").is_err());
        assert!(Command::parse(b"\x09READY").is_err());
        assert!(Command::parse(b"\x00").is_err());
    }

    fn err_of(l: Limits, input: &[u8]) -> ZmtpError {
        let mut s = peer_greeting();
        s.extend_from_slice(input);
        for step in [1, s.len()] {
            let mut d = Decoder::new(l);
            let (_, err) = decode_all(&mut d, &s, step);
            let err = err.unwrap_or_else(|| panic!("no error for {input:?}"));
            if step == s.len() {
                return err;
            }
        }
        unreachable!()
    }

    fn long_header(flags: u8, len: u64) -> Vec<u8> {
        let mut h = vec![flags | LONG];
        h.extend_from_slice(&len.to_be_bytes());
        h
    }

    #[test]
    fn a_claimed_length_is_refused_before_anything_is_allocated() {
        let l = limits(1000, 4, 100);
        // 2^40 bytes claimed, nothing sent: refused at the header.
        let e = err_of(l, &long_header(0, 1 << 40));
        assert_eq!(e.kind, ErrorKind::OversizedMessage);
        assert!(e.detail.contains("1099511627776"), "{}", e.detail);
        let e = err_of(l, &long_header(MORE, u64::MAX));
        assert_eq!(e.kind, ErrorKind::OversizedMessage);
        let e = err_of(l, &long_header(COMMAND, 1 << 40));
        assert_eq!(e.kind, ErrorKind::OversizedCommand);
        // The header alone: the decoder has taken nothing for the body.
        let mut d = Decoder::new(l);
        let mut s = peer_greeting();
        s.extend_from_slice(&long_header(0, 1000));
        let (_, err) = decode_all(&mut d, &s, s.len());
        assert_eq!(err, None);
        assert_eq!(d.held(), 0);
    }

    #[test]
    fn the_message_bound_is_over_all_its_frames_and_inclusive() {
        let l = limits(10, 64, 100);
        let ok = message(&[b"12345", b"", b"67890"]);
        let mut s = peer_greeting();
        s.extend_from_slice(&ok);
        let mut d = Decoder::new(l);
        let (got, err) = decode_all(&mut d, &s, 1);
        assert_eq!(err, None);
        assert_eq!(got.len(), 2, "exactly the limit is accepted");
        let e = err_of(l, &message(&[b"12345", b"", b"678901"]));
        assert_eq!(e.kind, ErrorKind::OversizedMessage);
        assert!(e.detail.contains("after 5 bytes"), "{}", e.detail);
        // The next message starts from zero.
        let mut s = ok.clone();
        s.extend_from_slice(&ok);
        let mut g = peer_greeting();
        g.extend_from_slice(&s);
        let (got, err) = decode_all(&mut Decoder::new(l), &g, 3);
        assert_eq!((got.len(), err), (3, None));
    }

    #[test]
    fn frames_per_message_are_bounded() {
        let l = limits(1 << 20, 4, 100);
        let four: Vec<&[u8]> = vec![b""; 4];
        let mut s = peer_greeting();
        s.extend_from_slice(&message(&four));
        let (got, err) = decode_all(&mut Decoder::new(l), &s, 1);
        assert_eq!((got.len(), err), (2, None));
        // Endless empty MORE frames: refused at the fifth.
        let e = err_of(l, &[MORE, 0].repeat(1000));
        assert_eq!(e.kind, ErrorKind::TooManyFrames);
        let five: Vec<&[u8]> = vec![b""; 5];
        assert_eq!(err_of(l, &message(&five)).kind, ErrorKind::TooManyFrames);
    }

    #[test]
    fn commands_are_bounded_and_never_inside_a_message() {
        let l = limits(1000, 4, 10);
        let mut ok = peer_greeting();
        ok.extend_from_slice(&command(b"PING", b"12345"));
        assert_eq!(decode_all(&mut Decoder::new(l), &ok, 1).1, None);
        let e = err_of(l, &command(b"PING", b"123456"));
        assert_eq!(e.kind, ErrorKind::OversizedCommand);
        let mut inside = vec![MORE, 1, b'x'];
        inside.extend_from_slice(&command(b"PING", b""));
        assert_eq!(err_of(l, &inside).kind, ErrorKind::Protocol);
        assert_eq!(err_of(l, &[COMMAND | MORE, 0]).kind, ErrorKind::Protocol);
    }

    #[test]
    fn greetings_are_checked_as_they_arrive() {
        let check = |g: &[u8]| {
            let mut d = Decoder::new(Limits::default());
            d.decode(g).map(|(n, e)| (n, e.is_some()))
        };
        assert_eq!(check(&greeting()).unwrap(), (64, true));
        // The first byte is enough to refuse HTTP.
        let e = check(b"G").unwrap_err();
        assert_eq!(e.kind, ErrorKind::Greeting);
        assert!(e.detail.contains("0x47"), "{}", e.detail);
        let mut v1 = greeting();
        v1[9] = 0x7e;
        assert!(check(&v1[..10]).is_err());
        let mut v2 = greeting();
        v2[10] = 2;
        assert!(check(&v2[..11]).unwrap_err().detail.contains("ZMTP 2.x"));
        let mut curve = greeting();
        curve[12..17].copy_from_slice(b"CURVE");
        let e = check(&curve[..32]).unwrap_err();
        assert!(e.detail.contains("CURVE"), "{}", e.detail);
        let mut junk = greeting();
        junk[20] = 1;
        assert!(check(&junk).is_err(), "NULL followed by junk");
        // Part of a good greeting: nothing yet.
        assert_eq!(check(&greeting()[..40]).unwrap(), (40, false));
    }

    #[test]
    fn a_body_grows_with_what_arrives_not_with_what_is_claimed() {
        let l = limits(1 << 30, 4, 100);
        let mut d = Decoder::new(l);
        let mut s = peer_greeting();
        s.extend_from_slice(&long_header(0, 1 << 29));
        s.extend_from_slice(&[7u8; 1000]);
        let (_, err) = decode_all(&mut d, &s, 100);
        assert_eq!(err, None);
        assert!(
            d.held() <= 2000,
            "{} bytes held for 1000 received",
            d.held()
        );
        // Capacity never passes the announced length.
        let mut d = Decoder::new(l);
        let mut s = peer_greeting();
        s.extend_from_slice(&long_header(0, 1500));
        s.extend_from_slice(&[7u8; 1499]);
        decode_all(&mut d, &s, 100);
        assert!(d.held() <= 1500, "{}", d.held());
    }

    #[test]
    fn ready_error_and_ping() {
        let pubs: &[&[u8]] = &[b"PUB", b"XPUB"];
        let body = |c: Vec<u8>| c[2..].to_vec();
        assert_eq!(
            peer_ready(&body(ready(&[("Socket-Type", b"XPUB")])), pubs),
            Ok(())
        );
        // Property names are case-insensitive (RFC 23), values are not.
        assert_eq!(
            peer_ready(&body(ready(&[("socket-type", b"PUB")])), pubs),
            Ok(())
        );
        for (cmd, says) in [
            (
                ready(&[("Socket-Type", b"pub")]),
                "\"pub\" peer, where PUB or XPUB",
            ),
            (ready(&[("Identity", b"")]), "without Socket-Type"),
            (
                command(b"ERROR", b"\x04nope"),
                "refused the connection: \"nope\"",
            ),
            (command(b"ERROR", b""), "refused the connection: \"\""),
            (command(b"ERROR", b"\xffab"), "\"ab\""),
            (
                command(b"PING", b"\x00\x01"),
                "command \"PING\" before READY",
            ),
        ] {
            let e = peer_ready(&body(cmd), pubs).unwrap_err();
            assert_eq!(e.kind, ErrorKind::Handshake);
            assert!(e.detail.contains(says), "{}", e.detail);
        }
        assert_eq!(
            peer_ready(b"", pubs).unwrap_err().kind,
            ErrorKind::Handshake
        );
        let pong = pong_for(&body(command(b"PING", b"\x00\x0a0123456789abcdefXYZ"))).unwrap();
        assert_eq!(
            pong,
            Some(command(b"PONG", b"0123456789abcdef")),
            "16 bytes of context"
        );
        assert_eq!(
            pong_for(&body(command(b"PING", b""))).unwrap(),
            Some(command(b"PONG", b""))
        );
        assert_eq!(pong_for(&body(command(b"SUBSCRIBE", b"kv"))).unwrap(), None);
        assert!(pong_for(b"").is_err());
    }

    #[test]
    fn encoders_round_trip() {
        let big = vec![1u8; 256];
        let mut s = peer_greeting();
        s.extend_from_slice(&message(&[&big, b"", &[2u8; 255]]));
        let (got, err) = decode_all(&mut Decoder::new(Limits::default()), &s, 5);
        assert_eq!(err, None);
        assert_eq!(
            got[1],
            Event::Message(vec![b(&big), b(b""), b(&[2u8; 255])])
        );
        // 256 bytes take the long form, 255 the short one.
        assert_eq!(message(&[&big])[0], LONG);
        assert_eq!(message(&[&[0u8; 255]])[..2], [0, 255]);
    }
}
