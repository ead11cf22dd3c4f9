//! One ZMTP connection on tokio: the handshake under a timeout, then messages in (through
//! the bounded [`Decoder`]) and out. Each connection is one peer; sockets with several peers
//! (a bound SUB) run one of these per peer.

use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::codec::{Decoder, Event, Limits, greeting, message, peer_ready, pong_for, ready};
use super::{ErrorKind, ZmtpError};

/// Bytes read from the socket at a time, per connection: small, since a bound socket may
/// have hundreds of peers, and large frames are copied out of it as they arrive anyway.
const READ_CHUNK: usize = 16 << 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SocketType {
    Sub,
    Dealer,
}

impl SocketType {
    fn name(self) -> &'static str {
        match self {
            SocketType::Sub => "SUB",
            SocketType::Dealer => "DEALER",
        }
    }

    /// Peer types RFC 23/28 allow to talk to this one.
    fn peers(self) -> &'static [&'static [u8]] {
        match self {
            SocketType::Sub => &[b"PUB", b"XPUB"],
            SocketType::Dealer => &[b"ROUTER", b"DEALER", b"REP"],
        }
    }
}

pub(crate) struct Connection<S> {
    stream: S,
    decoder: Decoder,
    buf: Box<[u8]>,
    /// `buf[start..end]` is read and not yet decoded.
    start: usize,
    end: usize,
    /// Bytes to send before reading on (PONGs), and how many of them are sent.
    out: Vec<u8>,
    out_at: usize,
}

fn closed(e: std::io::Error) -> ZmtpError {
    ZmtpError::new(ErrorKind::Closed, e.to_string())
}

fn handshake_error(detail: String) -> ZmtpError {
    ZmtpError::new(ErrorKind::Handshake, detail)
}

impl<S: AsyncRead + AsyncWrite + Unpin> Connection<S> {
    /// Greeting and READY both ways, all within `timeout`: a peer that stalls, or trickles
    /// its greeting a byte at a time, is given up on then.
    pub(crate) async fn handshake(
        stream: S,
        ty: SocketType,
        limits: Limits,
        timeout: Duration,
    ) -> Result<Connection<S>, ZmtpError> {
        let mut c = Connection {
            stream,
            decoder: Decoder::new(limits),
            buf: vec![0; READ_CHUNK].into_boxed_slice(),
            start: 0,
            end: 0,
            out: Vec::new(),
            out_at: 0,
        };
        match tokio::time::timeout(timeout, c.exchange(ty)).await {
            Ok(Ok(())) => Ok(c),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(ZmtpError::new(
                ErrorKind::HandshakeTimeout,
                format!("no ZMTP greeting and READY within {timeout:?}"),
            )),
        }
    }

    async fn exchange(&mut self, ty: SocketType) -> Result<(), ZmtpError> {
        // Sent whole at once: libzmq sends its greeting in parts and waits for ours between
        // them, so waiting for the peer's first would deadlock.
        self.write(&greeting()).await?;
        match self.next_event().await? {
            Some(Event::Greeting(_)) => {}
            Some(_) => unreachable!("the decoder yields the greeting first"),
            None => return Err(eof_in_handshake()),
        }
        let mut props: Vec<(&str, &[u8])> = vec![("Socket-Type", ty.name().as_bytes())];
        if ty == SocketType::Dealer {
            // As libzmq's DEALER does: an empty identity, the ROUTER picks one.
            props.push(("Identity", b""));
        }
        self.write(&ready(&props)).await?;
        // NULL: READY (or ERROR) is the first command after the greeting.
        let body = match self.next_event().await? {
            Some(Event::Command(body)) => body,
            Some(_) => return Err(handshake_error("a message before READY".into())),
            None => return Err(eof_in_handshake()),
        };
        peer_ready(&body, ty.peers())
    }

    async fn write(&mut self, bytes: &[u8]) -> Result<(), ZmtpError> {
        self.stream.write_all(bytes).await.map_err(closed)
    }

    /// Send one multipart message (after any PONG owed). Not cancel-safe: a connection
    /// whose send was cancelled is dropped, not used again.
    pub(crate) async fn send(&mut self, frames: &[&[u8]]) -> Result<(), ZmtpError> {
        self.flush_out().await?;
        self.write(&message(frames)).await
    }

    /// The next message. PINGs are answered and other commands ignored; `None` when the peer
    /// closed the connection between messages.
    ///
    /// Cancel-safe (the replay worker selects on it): every await is a single read or write
    /// whose effect is recorded as soon as it completes, so a cancelled call loses nothing
    /// and the next one goes on where it stopped.
    pub(crate) async fn recv(&mut self) -> Result<Option<Vec<Bytes>>, ZmtpError> {
        loop {
            self.flush_out().await?;
            match self.next_event().await? {
                None => return Ok(None),
                Some(Event::Message(m)) => return Ok(Some(m)),
                Some(Event::Command(body)) => {
                    // A publisher with heartbeats on drops a peer that does not answer.
                    if let Some(pong) = pong_for(&body)? {
                        self.out.extend_from_slice(&pong);
                    }
                }
                Some(Event::Greeting(_)) => unreachable!("one greeting per connection"),
            }
        }
    }

    async fn flush_out(&mut self) -> Result<(), ZmtpError> {
        while self.out_at < self.out.len() {
            let n = self
                .stream
                .write(&self.out[self.out_at..])
                .await
                .map_err(closed)?;
            if n == 0 {
                return Err(closed(std::io::ErrorKind::WriteZero.into()));
            }
            self.out_at += n;
        }
        self.out.clear();
        self.out_at = 0;
        Ok(())
    }

    async fn next_event(&mut self) -> Result<Option<Event>, ZmtpError> {
        loop {
            if self.start < self.end {
                let (n, event) = self.decoder.decode(&self.buf[self.start..self.end])?;
                self.start += n;
                if event.is_some() {
                    return Ok(event);
                }
            }
            // Both before the await: a read cancelled there must not leave decoded bytes
            // to be decoded again.
            self.start = 0;
            self.end = 0;
            self.end = self.stream.read(&mut self.buf).await.map_err(closed)?;
            if self.end == 0 {
                if self.decoder.at_boundary() {
                    return Ok(None);
                }
                return Err(ZmtpError::new(
                    ErrorKind::Closed,
                    "the connection ended in the middle of a frame or message".into(),
                ));
            }
        }
    }
}

fn eof_in_handshake() -> ZmtpError {
    ZmtpError::new(
        ErrorKind::Closed,
        "the connection ended during the ZMTP handshake".into(),
    )
}

#[cfg(test)]
mod tests {
    use super::super::{Command, properties};
    use super::*;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// The publisher's side of a handshake, written out by hand.
    fn publisher_hello(socket_type: &[u8]) -> Vec<u8> {
        let mut g = greeting().to_vec();
        g[11] = 1;
        let st = std::str::from_utf8(socket_type).unwrap();
        g.extend_from_slice(&ready(&[("Socket-Type", st.as_bytes())]));
        g
    }

    #[test]
    fn handshake_subscribe_receive_and_pong() {
        rt().block_on(async {
            let (ours, mut theirs) = tokio::io::duplex(1 << 16);
            let peer = async move {
                let mut hello = publisher_hello(b"PUB");
                hello.extend_from_slice(&super::super::command(b"PING", b"\x00\x0actx"));
                hello.extend_from_slice(&message(&[b"t", b"s", b"p"]));
                theirs.write_all(&hello).await.unwrap();
                // Our greeting, READY, the subscription, the PONG.
                let mut d = Decoder::new(Limits::default());
                let mut events = Vec::new();
                let mut buf = [0u8; 256];
                while events.len() < 4 {
                    let n = theirs.read(&mut buf).await.unwrap();
                    assert!(n > 0);
                    let mut rest = &buf[..n];
                    while !rest.is_empty() {
                        let (k, e) = d.decode(rest).unwrap();
                        rest = &rest[k..];
                        events.extend(e);
                    }
                }
                events
            };
            let ours = async move {
                let mut c = Connection::handshake(
                    ours,
                    SocketType::Sub,
                    Limits::default(),
                    Duration::from_secs(5),
                )
                .await
                .unwrap();
                c.send(&[b"\x01kv"]).await.unwrap();
                let m = c.recv().await.unwrap().unwrap();
                assert_eq!(m, vec![&b"t"[..], b"s", b"p"]);
            };
            let (events, ()) = tokio::join!(peer, ours);
            assert_eq!(
                events[0],
                Event::Greeting(super::super::Greeting { major: 3, minor: 0 })
            );
            let cmd = |e: &Event| match e {
                Event::Command(b) => b.clone(),
                e => panic!("{e:?}"),
            };
            let ready_body = cmd(&events[1]);
            let c = Command::parse(&ready_body).unwrap();
            assert_eq!(c.name, b"READY");
            assert_eq!(
                properties(c.data).unwrap(),
                vec![(&b"Socket-Type"[..], &b"SUB"[..])]
            );
            assert_eq!(
                events[2],
                Event::Message(vec![Bytes::from_static(b"\x01kv")])
            );
            assert_eq!(cmd(&events[3]), Bytes::from_static(b"\x04PONGctx"));
        });
    }

    /// A receive cancelled while it waits for more bytes (the replay worker's select) loses
    /// nothing and decodes nothing twice. Before, the bytes already decoded were decoded
    /// again after a cancelled read, and a flooding replay endpoint's payload was read as
    /// frame headers.
    #[test]
    fn a_cancelled_receive_resumes_where_it_stopped() {
        rt().block_on(async {
            let (ours, mut theirs) = tokio::io::duplex(1 << 16);
            let a = message(&[b"a", &[0xab; 300]]);
            let b = message(&[b"b", &[0xcd; 300]]);
            let mut first = publisher_hello(b"PUB");
            first.extend_from_slice(&a);
            first.extend_from_slice(&b[..100]);
            theirs.write_all(&first).await.unwrap();
            let mut c = Connection::handshake(
                ours,
                SocketType::Sub,
                Limits::default(),
                Duration::from_secs(5),
            )
            .await
            .unwrap();
            let got = c.recv().await.unwrap().unwrap();
            assert_eq!(got[0], &b"a"[..]);
            for _ in 0..3 {
                let r = tokio::time::timeout(Duration::from_millis(20), c.recv()).await;
                assert!(r.is_err(), "nothing complete yet");
            }
            theirs.write_all(&b[100..]).await.unwrap();
            let got = c.recv().await.unwrap().unwrap();
            assert_eq!(got, vec![&b"b"[..], &[0xcd; 300][..]]);
        });
    }

    async fn handshake_with(peer_bytes: Vec<u8>, timeout: Duration) -> ZmtpError {
        let (ours, mut theirs) = tokio::io::duplex(1 << 16);
        tokio::spawn(async move {
            let _ = theirs.write_all(&peer_bytes).await;
            // Keep the connection open (and read what we send) until the test ends.
            let mut sink = vec![0u8; 1024];
            while let Ok(n) = theirs.read(&mut sink).await {
                if n == 0 {
                    break;
                }
            }
        });
        match Connection::handshake(ours, SocketType::Sub, Limits::default(), timeout).await {
            Ok(_) => panic!("handshake succeeded"),
            Err(e) => e,
        }
    }

    #[test]
    fn handshake_failures_have_their_kind() {
        rt().block_on(async {
            let t = Duration::from_secs(5);
            let e = handshake_with(publisher_hello(b"ROUTER"), t).await;
            assert_eq!(e.kind, ErrorKind::Handshake);
            assert!(e.detail.contains("\"ROUTER\""), "{}", e.detail);
            let mut g = greeting().to_vec();
            g.extend_from_slice(&message(&[b"early"]));
            assert_eq!(handshake_with(g, t).await.kind, ErrorKind::Handshake);
            let mut g = greeting().to_vec();
            g.extend_from_slice(&super::super::command(b"ERROR", b"\x05nope!"));
            let e = handshake_with(g, t).await;
            assert!(e.detail.contains("nope!"), "{}", e.detail);
            // ERROR with no reason at all (its size byte missing): no panic.
            let mut g = greeting().to_vec();
            g.extend_from_slice(&super::super::command(b"ERROR", b""));
            assert_eq!(handshake_with(g, t).await.kind, ErrorKind::Handshake);
            let mut g = greeting().to_vec();
            g.extend_from_slice(&super::super::command(b"ERROR", b"\xffshort"));
            assert!(handshake_with(g, t).await.detail.contains("short"));
            let mut g = greeting().to_vec();
            g.extend_from_slice(&[0x06, 0, 0, 1, 0, 0, 0, 0, 0]);
            assert_eq!(handshake_with(g, t).await.kind, ErrorKind::OversizedCommand);
            // Half a greeting, then nothing: the timeout.
            let e = handshake_with(greeting()[..20].to_vec(), Duration::from_millis(100)).await;
            assert_eq!(e.kind, ErrorKind::HandshakeTimeout);
            let e = handshake_with(b"HTTP/1.1 400".to_vec(), t).await;
            assert_eq!(e.kind, ErrorKind::Greeting);
        });
    }
}
