//! Gap recovery: one worker per publisher asks its replay (ROUTER) socket for the missing
//! sequence numbers, beside the live loop, and hands back what arrives.

use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;

use super::ranges::Missing;
use super::validate::validate;
use super::zmtp::Limits;
use super::zmtp::conn::{Connection, SocketType};
use super::zmtp::endpoint::{Endpoint, Stream};

type Dealer = Connection<Stream>;

const END_SEQ: [u8; 8] = [0xff; 8];

/// Recovered frames and status waiting for the live loop: few, since each frame may hold a
/// payload of up to `max_payload`.
pub(crate) const RECOVERED_QUEUE: usize = 16;
/// Gap requests waiting for their worker (it takes them whenever it runs).
const GAP_QUEUE: usize = 1024;
/// Missing ranges one worker keeps; gaps beyond that stay unrecovered (and are counted).
const PENDING_MAX: usize = 1 << 16;
/// The first wait before asking a failed replay endpoint again, doubled per failure.
const RETRY_FIRST: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(60);
/// What one reply may bring that was not asked for before the endpoint counts as flooding.
/// Generous: vLLM replays every buffered batch from the first missing seq on (10000 by
/// default), most of them already captured live.
const REPLY_MAX_UNWANTED_BYTES: u64 = 256 << 20;
const REPLY_MAX_MESSAGES: u64 = 1 << 20;

/// Why the replay endpoint was given up on, for `last_error`.
fn dropped(e: &super::zmtp::ZmtpError) -> String {
    use super::zmtp::ErrorKind as K;
    let why = match e.kind {
        K::Greeting | K::Handshake => "handshake failed",
        K::HandshakeTimeout => "handshake timeout",
        K::OversizedCommand => "oversized command",
        K::OversizedMessage => "oversized message",
        K::TooManyFrames => "too many frames",
        K::Protocol => "protocol error",
        K::Closed => return format!("replay socket: {e}"),
    };
    format!("replay socket dropped ({why}): {e}")
}

/// Missing `from..=to` of `topic`, from the live loop to its publisher's replay worker.
pub(crate) struct GapRequest {
    pub(crate) topic: Bytes,
    pub(crate) from: u64,
    pub(crate) to: u64,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct WorkerStatus {
    pub(crate) requests: u64,
    pub(crate) failures: u64,
    pub(crate) down: bool,
    pub(crate) last_error: Option<String>,
    /// Gap requests received that are now recovered or known unrecoverable.
    pub(crate) settled: u64,
    /// Gap requests not kept because PENDING_MAX ranges were already waiting.
    pub(crate) dropped: u64,
    /// Gap requests taken when this status was made: a `down` covers those only (a failed
    /// attempt asked for everything taken before it).
    pub(crate) received: u64,
}

pub(crate) enum Recovery {
    Frame {
        src: usize,
        topic: Bytes,
        seq: u64,
        payload: Bytes,
    },
    Status {
        src: usize,
        status: WorkerStatus,
    },
}

/// The seqs a worker still wants, per topic, each range with its generation: the first
/// request that could serve it.
#[derive(Default)]
struct Pending(Missing<Bytes, u64>);

impl Pending {
    fn add(&mut self, r: GapRequest, generation: u64) -> bool {
        if self.0.len() >= PENDING_MAX {
            return false;
        }
        self.0.insert(r.topic, r.from, r.to, generation);
        true
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Where the next request starts: vLLM replays everything from there on, so one request
    /// serves every gap waiting.
    fn first(&self) -> Option<u64> {
        self.0.first()
    }

    /// The topic whose missing set holds `seq`. vLLM before 0.26 leaves the topic out of
    /// replies: then the seq alone picks it.
    fn topic_of(&self, topic: Option<&[u8]>, seq: u64) -> Option<Bytes> {
        self.0.holder(topic, seq).cloned()
    }

    /// Takes `seq` out of `topic`'s missing set, so that a reply repeating it is not taken twice.
    fn take(&mut self, topic: &Bytes, seq: u64) {
        self.0.take(topic, seq);
    }

    /// After a complete reply to request `generation`: what it could have served and did not
    /// is not in the publisher's buffer (any more), and asking again would not bring it.
    fn settle(&mut self, generation: u64) {
        self.0.retain(|g| g > generation);
    }
}

/// Recovers one publisher's gaps through its replay (ROUTER) socket, beside the live loop:
/// gap requests come in on `requests`, recovered frames go out on `out`.
pub(crate) struct ReplayWorker {
    src: usize,
    endpoint: String,
    timeout: Duration,
    max_payload: usize,
    /// What one reply message may announce: an endpoint that sends more is dropped.
    limits: Limits,
    requests: mpsc::Receiver<GapRequest>,
    out: mpsc::Sender<Recovery>,
    pending: Pending,
    status: WorkerStatus,
    /// Gap requests taken from `requests`.
    received: u64,
}

enum Failed {
    Endpoint(String),
    /// The live loop is gone.
    Stopped,
}

impl ReplayWorker {
    /// Start the worker for the publisher with source index `src`; it takes gap requests on
    /// the sender returned and sends recovered frames and its status to `out`.
    pub(crate) fn spawn(
        src: usize,
        endpoint: String,
        timeout: Duration,
        max_payload: usize,
        limits: Limits,
        out: mpsc::Sender<Recovery>,
    ) -> mpsc::Sender<GapRequest> {
        let (requests, rx) = mpsc::channel(GAP_QUEUE);
        let worker = ReplayWorker {
            src,
            endpoint,
            timeout,
            max_payload,
            limits,
            requests: rx,
            out,
            pending: Pending::default(),
            status: WorkerStatus::default(),
            received: 0,
        };
        tokio::spawn(worker.run());
        requests
    }

    async fn run(mut self) {
        let mut dealer: Option<Dealer> = None;
        let mut generation = 0u64;
        let mut retry_at: Option<tokio::time::Instant> = None;
        let mut delay = RETRY_FIRST;
        loop {
            while let Ok(r) = self.requests.try_recv() {
                self.queue(r, generation + 1);
            }
            if self.pending.is_empty() {
                if self.status.settled != self.received {
                    self.status.settled = self.received;
                    if !self.report().await {
                        return;
                    }
                }
                match self.requests.recv().await {
                    Some(r) => self.queue(r, generation + 1),
                    None => return,
                }
                continue;
            }
            // A failed endpoint is asked again after a backoff, not once per gap: the gaps
            // that arrive meanwhile wait, and one request serves them all.
            if let Some(at) = retry_at
                && at > tokio::time::Instant::now()
            {
                tokio::select! {
                    r = self.requests.recv() => match r {
                        Some(r) => self.queue(r, generation + 1),
                        None => return,
                    },
                    _ = tokio::time::sleep_until(at) => {}
                }
                continue;
            }
            generation += 1;
            match self.request(&mut dealer, generation).await {
                Ok(()) => {
                    self.pending.settle(generation);
                    retry_at = None;
                    delay = RETRY_FIRST;
                    self.status.down = false;
                }
                Err(Failed::Stopped) => return,
                Err(Failed::Endpoint(why)) => {
                    // Dropped, not reused: what it still holds is the rest of the failed
                    // reply, which the next request would take for its own.
                    dealer = None;
                    self.status.failures += 1;
                    self.status.down = true;
                    self.status.last_error = Some(why);
                    retry_at = Some(tokio::time::Instant::now() + delay);
                    delay = (delay * 2).min(RETRY_MAX);
                }
            }
            if !self.report().await {
                return;
            }
        }
    }

    fn queue(&mut self, r: GapRequest, generation: u64) {
        self.received += 1;
        if !self.pending.add(r, generation) {
            self.status.dropped += 1;
        }
    }

    async fn report(&mut self) -> bool {
        self.status.received = self.received;
        let status = Recovery::Status {
            src: self.src,
            status: self.status.clone(),
        };
        self.out.send(status).await.is_ok()
    }

    /// One replay request, read to its end marker (or failed, and the socket dropped), so no
    /// rest of one reply is read as part of the next. Both reply layouts are read:
    /// `[topic, seq, payload]` (vLLM ≥ 0.26) and `[seq, payload]` (before), after the
    /// DEALER's empty delimiter; an empty payload or sequence -1 ends the reply.
    async fn request(&mut self, slot: &mut Option<Dealer>, generation: u64) -> Result<(), Failed> {
        let Some(from) = self.pending.first() else {
            return Ok(());
        };
        let timeout = self.timeout;
        let fail = |why: String| Err(Failed::Endpoint(why));
        let mut dealer = match slot.take() {
            Some(d) => d,
            None => {
                let endpoint = Endpoint::parse(&self.endpoint)
                    .map_err(|e| Failed::Endpoint(format!("cannot connect: {e}")))?;
                let stream = match tokio::time::timeout(timeout, Stream::connect(&endpoint)).await {
                    Ok(Ok(s)) => s,
                    Ok(Err(e)) => return fail(format!("cannot connect: {e}")),
                    Err(_) => return fail(format!("cannot connect within {timeout:?}")),
                };
                Connection::handshake(stream, SocketType::Dealer, self.limits, timeout)
                    .await
                    .map_err(|e| Failed::Endpoint(dropped(&e)))?
            }
        };
        let request: [&[u8]; 2] = [b"", &from.to_be_bytes()];
        match tokio::time::timeout(timeout, dealer.send(&request)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return fail(format!("cannot send the request: {e}")),
            Err(_) => return fail(format!("request not taken within {timeout:?}")),
        }
        self.status.requests += 1;
        let mut unwanted = 0u64;
        let mut replies = 0u64;
        let mut until = tokio::time::Instant::now() + timeout;
        loop {
            let frames = tokio::select! {
                m = dealer.recv() => match m {
                    Ok(Some(m)) => m,
                    Ok(None) => return fail("the replay socket closed the connection".into()),
                    Err(e) => return fail(dropped(&e)),
                },
                // Gaps keep arriving during a long reply; it may serve them too.
                r = self.requests.recv() => {
                    match r {
                        Some(r) => self.queue(r, generation + 1),
                        None => return Err(Failed::Stopped),
                    }
                    continue;
                }
                _ = tokio::time::sleep_until(until) => {
                    return fail(if replies == 0 {
                        format!("no reply within {timeout:?}")
                    } else {
                        format!("reply stopped after {replies} messages without its end marker")
                    });
                }
            };
            until = tokio::time::Instant::now() + timeout;
            replies += 1;
            let mut f: &[Bytes] = &frames;
            // The DEALER's delimiter; `len() >= 3` because vLLM's default topic is empty too.
            if f.first().is_some_and(|x| x.is_empty()) && f.len() >= 3 {
                f = &f[1..];
            }
            let (topic, seq, payload) = match f {
                [t, s, p] => (Some(t), Some(s), Some(p)),
                [s, p] => (None, Some(s), Some(p)),
                _ => (None, None, None),
            };
            if let (Some(seq), Some(payload)) = (seq, payload)
                && (payload.is_empty() || seq.as_ref() == END_SEQ)
            {
                *slot = Some(dealer);
                return Ok(());
            }
            let wanted = match (seq, payload) {
                (Some(seq), Some(payload)) => self.wanted(topic, seq, payload),
                _ => None,
            };
            if let Some((topic, seq)) = wanted {
                self.pending.take(&topic, seq);
                let frame = Recovery::Frame {
                    src: self.src,
                    topic,
                    seq,
                    payload: frames[frames.len() - 1].clone(),
                };
                if self.out.send(frame).await.is_err() {
                    return Err(Failed::Stopped);
                }
            } else {
                unwanted += frames.iter().map(|f| f.len() as u64).sum::<u64>();
            }
            // Every message counts: even wanted ones, a gap can be 2^63 seqs wide.
            if unwanted > REPLY_MAX_UNWANTED_BYTES || replies > REPLY_MAX_MESSAGES {
                return fail(format!(
                    "flood: {replies} messages, {unwanted} bytes not asked for, and no end marker"
                ));
            }
        }
    }

    /// A reply message for a seq still missing, valid as a live frame would have to be.
    fn wanted(&self, topic: Option<&Bytes>, seq: &Bytes, payload: &Bytes) -> Option<(Bytes, u64)> {
        let n = u64::from_be_bytes(seq.as_ref().try_into().ok()?);
        let topic = self.pending.topic_of(topic.map(|t| t.as_ref()), n)?;
        let frame = [topic.clone(), seq.clone(), payload.clone()];
        validate(&frame, self.max_payload).ok()?;
        Some((topic, n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_ranges() {
        let t = Bytes::from_static(b"kv");
        let gap = |from, to| GapRequest {
            topic: t.clone(),
            from,
            to,
        };
        let mut p = Pending::default();
        assert!(p.add(gap(3, 5), 1));
        assert!(p.add(gap(10, 10), 1));
        assert_eq!(p.first(), Some(3));
        assert_eq!(p.topic_of(Some(b"kv"), 4), Some(t.clone()));
        assert_eq!(p.topic_of(None, 10), Some(t.clone()));
        assert_eq!(p.topic_of(Some(b"other"), 4), None);
        assert_eq!(p.topic_of(Some(b"kv"), 6), None);
        p.take(&t, 4);
        assert_eq!(p.topic_of(Some(b"kv"), 4), None, "taken once");
        assert_eq!(p.0.len(), 3);
        p.take(&t, 3);
        assert_eq!(p.first(), Some(5));
        // A gap seen while request 1 was out waits for request 2.
        assert!(p.add(gap(20, 21), 2));
        p.settle(1);
        assert_eq!((p.first(), p.0.len()), (Some(20), 1));
        p.take(&t, 20);
        p.take(&t, 21);
        assert!(p.is_empty());
        let mut full = Pending::default();
        for i in 0..PENDING_MAX as u64 {
            assert!(full.add(gap(2 * i, 2 * i), 1));
        }
        assert!(!full.add(gap(u64::MAX, u64::MAX), 1), "bounded");
    }
}
