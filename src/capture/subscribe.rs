//! SUB sockets to KV-event publishers, connected or bound, each message delivered with its
//! source and a share of a bounded byte budget: what `capture` records and `watch` applies.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

use super::validate::{Malformed, MalformedKind};
use super::zmtp::conn::{Connection, SocketType};
use super::zmtp::endpoint::{Endpoint, Listener, Stream};
use super::zmtp::{Limits, ZmtpError};

/// Why a capture or a subscription could not start, or a capture could not be written.
#[derive(Debug, thiserror::Error)]
pub enum CaptureFailure {
    #[error("cannot connect to {endpoint}: {reason}")]
    Connect { endpoint: String, reason: String },
    #[error("cannot bind {endpoint}: {reason}")]
    Bind { endpoint: String, reason: String },
    #[error("cannot write {path}")]
    Write {
        path: String,
        source: std::io::Error,
    },
    /// The destination refused before anything was connected (it says its own path).
    #[error(transparent)]
    Output(#[from] crate::output::OutputError),
    #[error("{0}")]
    Usage(String),
}

/// Where one source's messages come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A publisher that binds (vLLM with `tcp://*:PORT`): connected to, and again after it
    /// goes away.
    Connect(String),
    /// An address to bind for publishers that connect out (vLLM with a host in its endpoint).
    Bind(String),
    /// As `Connect`, but a publisher not reachable yet is tried again until it is (counted
    /// once as lost), rather than an error: a monitor outlives a pod's restart.
    Retry(String),
}

/// The subscriptions made: their messages, and each source's name in order.
pub struct Subscribed {
    pub rx: mpsc::Receiver<Incoming>,
    /// Each source's name (a bound source by the address as bound), index = `src`.
    pub sources: Vec<String>,
    /// The addresses bound, in order.
    pub bound: Vec<String>,
}

/// Subscribes to every source (`src` = its index) for topics starting with `topic`.
/// `on_bound` hears each bound address as soon as it listens (port 0 picks one).
pub async fn subscribe(
    wanted: &[Source],
    topic: &str,
    limits: Limits,
    connect_timeout: Duration,
    mut on_bound: impl FnMut(&str),
) -> Result<Subscribed, CaptureFailure> {
    let (tx, rx) = mpsc::channel::<Incoming>(4096);
    let mut subscription = vec![1u8];
    subscription.extend_from_slice(topic.as_bytes());
    let peer = PeerConfig {
        limits,
        handshake_timeout: connect_timeout,
        subscription,
        topic: topic.as_bytes().to_vec(),
        budget: Arc::new(Semaphore::new(QUEUE_BYTES)),
        tx,
    };
    let mut sources: Vec<String> = Vec::new();
    let mut bound_at = Vec::new();
    for source in wanted {
        match source {
            Source::Bind(addr) => {
                let bind_error = |reason: String| CaptureFailure::Bind {
                    endpoint: addr.clone(),
                    reason,
                };
                let endpoint = Endpoint::parse(addr).map_err(|e| bind_error(e.to_string()))?;
                let (listener, bound) = Listener::bind(&endpoint)
                    .await
                    .map_err(|e| bind_error(e.to_string()))?;
                // The address as bound: with port 0 the system chose one, and publishers
                // need it.
                on_bound(&bound);
                bound_at.push(bound.clone());
                sources.push(bound.clone());
                tokio::spawn(serve_bound(
                    listener,
                    bound,
                    sources.len() - 1,
                    peer.clone(),
                ));
            }
            Source::Connect(ep) | Source::Retry(ep) => {
                let connect_error = |reason: String| CaptureFailure::Connect {
                    endpoint: ep.clone(),
                    reason,
                };
                let endpoint = Endpoint::parse(ep).map_err(|e| connect_error(e.to_string()))?;
                // Only the first connection is checked here (a wrong address is a usage
                // error); the handshake and everything after it is the peer's to fail, and
                // counted.
                let first =
                    match tokio::time::timeout(connect_timeout, Stream::connect(&endpoint)).await {
                        Ok(Ok(s)) => Ok(s),
                        Ok(Err(e)) => Err(e.to_string()),
                        Err(_) => Err(format!("no publisher answered within {connect_timeout:?}")),
                    };
                let stream = match (first, source) {
                    (Ok(s), _) => Some(s),
                    (Err(why), Source::Retry(_)) => {
                        let lost = Malformed::new(
                            MalformedKind::SocketClosed,
                            format!("not reachable yet ({why}); trying again"),
                        );
                        let _ = peer.tx.send(Incoming::Lost(ep.clone(), lost)).await;
                        None
                    }
                    (Err(why), _) => return Err(connect_error(why)),
                };
                sources.push(ep.clone());
                tokio::spawn(subscribe_to(
                    endpoint,
                    ep.clone(),
                    sources.len() - 1,
                    stream,
                    peer.clone(),
                ));
            }
        }
    }
    Ok(Subscribed {
        rx,
        sources,
        bound: bound_at,
    })
}

/// Messages waiting for the receive loop hold at most this many bytes between them (one
/// larger message may wait alone): a fast publisher and a slow disk or emulation make the
/// publishers wait, not memory grow.
const QUEUE_BYTES: usize = 64 << 20;
/// Peers a `--bind` socket serves at once; more are refused (and counted). Each holds a read
/// buffer and up to one message in progress.
const MAX_BOUND_PEERS: usize = 1024;
/// Reconnection to a connected publisher after its connection ended (libzmq's 100 ms
/// reconnect interval), doubling while it keeps failing.
const RECONNECT_FIRST: Duration = Duration::from_millis(100);
const RECONNECT_MAX: Duration = Duration::from_secs(10);

pub enum Incoming {
    /// A message from source `src`, with its share of the queue's byte budget.
    Message(usize, Vec<Bytes>, OwnedSemaphorePermit),
    /// A peer given up on (or lost), by name: counted with the reason.
    Lost(String, Malformed),
}

/// What every peer session needs.
#[derive(Clone)]
struct PeerConfig {
    limits: Limits,
    handshake_timeout: Duration,
    /// The subscription message: 0x01 + the topic prefix.
    subscription: Vec<u8>,
    topic: Vec<u8>,
    budget: Arc<Semaphore>,
    tx: mpsc::Sender<Incoming>,
}

/// The ZMTP kinds of failure as the summary counts them.
pub(super) fn malformed(e: ZmtpError) -> Malformed {
    use super::zmtp::ErrorKind as K;
    let kind = match e.kind {
        K::Greeting | K::Handshake => MalformedKind::HandshakeFailed,
        K::HandshakeTimeout => MalformedKind::HandshakeTimeout,
        K::OversizedCommand => MalformedKind::OversizedCommand,
        K::OversizedMessage => MalformedKind::OversizedMessage,
        K::TooManyFrames => MalformedKind::TooManyFrames,
        K::Protocol => MalformedKind::ProtocolError,
        K::Closed => MalformedKind::SocketClosed,
    };
    Malformed::new(kind, e.detail)
}

/// One connected publisher, for the whole capture: its connection, then reconnections after
/// it ends or is dropped (as libzmq's SUB reconnects), backing off while they keep failing.
async fn subscribe_to(
    endpoint: Endpoint,
    name: String,
    src: usize,
    first: Option<Stream>,
    peer: PeerConfig,
) {
    let mut stream = first;
    let mut delay = RECONNECT_FIRST;
    loop {
        let s = match stream.take() {
            Some(s) => s,
            None => {
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(RECONNECT_MAX);
                match tokio::time::timeout(peer.handshake_timeout, Stream::connect(&endpoint)).await
                {
                    Ok(Ok(s)) => s,
                    _ => continue,
                }
            }
        };
        match session(s, src, &name, &peer).await {
            None => return,
            Some(true) => delay = RECONNECT_FIRST,
            Some(false) => {}
        }
    }
}

/// The `--bind` socket: every publisher that connects gets a session, up to
/// MAX_BOUND_PEERS at once.
async fn serve_bound(listener: Listener, bound: String, src: usize, peer: PeerConfig) {
    let slots = Arc::new(Semaphore::new(MAX_BOUND_PEERS));
    loop {
        let (stream, from) = match listener.accept().await {
            Ok(x) => x,
            Err(_) => {
                // Out of file descriptors, most likely: wait for some to close.
                tokio::time::sleep(RECONNECT_FIRST).await;
                continue;
            }
        };
        let name = format!("{from} (via {bound})");
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            drop(stream);
            let why = Malformed::new(
                MalformedKind::TooManyPeers,
                format!("{MAX_BOUND_PEERS} publishers connected already"),
            );
            if peer.tx.send(Incoming::Lost(name, why)).await.is_err() {
                return;
            }
            continue;
        };
        let peer = peer.clone();
        tokio::spawn(async move {
            let _slot = slot;
            session(stream, src, &name, &peer).await;
        });
    }
}

/// One connection to a publisher: handshake, subscription, then its messages to the receive
/// loop until it ends. `Some(delivered any)` when the connection is over, `None` when the
/// receive loop is.
async fn session(stream: Stream, src: usize, name: &str, peer: &PeerConfig) -> Option<bool> {
    let lost = |e: ZmtpError| async move {
        peer.tx
            .send(Incoming::Lost(name.to_string(), malformed(e)))
            .await
            .is_ok()
    };
    let mut c =
        match Connection::handshake(stream, SocketType::Sub, peer.limits, peer.handshake_timeout)
            .await
        {
            Ok(c) => c,
            Err(e) => return lost(e).await.then_some(false),
        };
    if let Err(e) = c.send(&[&peer.subscription]).await {
        return lost(e).await.then_some(false);
    }
    let mut delivered = false;
    loop {
        let frames = match c.recv().await {
            Ok(Some(frames)) => frames,
            Ok(None) => return Some(delivered),
            Err(e) => return lost(e).await.then_some(delivered),
        };
        // A SUB filters too (as libzmq's does): a publisher may send what was not asked for.
        if !frames.first().is_some_and(|t| t.starts_with(&peer.topic)) {
            continue;
        }
        let size: usize = frames.iter().map(Bytes::len).sum();
        let permits = size.clamp(1, QUEUE_BYTES) as u32;
        let permit = peer.budget.clone().acquire_many_owned(permits).await.ok()?;
        peer.tx
            .send(Incoming::Message(src, frames, permit))
            .await
            .ok()?;
        delivered = true;
    }
}
