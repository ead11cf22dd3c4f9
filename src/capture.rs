//! Live capture from vLLM/SGLang ZMQ publishers: SUB sockets, frame validation, sequence
//! tracking per publisher (gaps, duplicates, restarts), and gap recovery through the
//! publisher's ROUTER replay socket (reference/vllm-events.md §2).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::mpsc;
use zeromq::{DealerSocket, Socket, SocketRecv, SocketSend, SubSocket, ZmqMessage};

use crate::events::frames::{MAX_TOPIC, write_frame};
use crate::events::msgpack::value_len;
use crate::events::{Engine, Pool, decode_batch_with};
use crate::replay::{ReplayOptions, ReplayReport, Replayer};

/// What one message's sequence number says about its publisher's stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeqVerdict {
    First,
    Next,
    /// `missing` numbers after `after` never arrived.
    Gap {
        after: u64,
        missing: u64,
    },
    Duplicate,
    /// The number dropped back: the publisher restarted (vLLM counts from 0 per process).
    Restart {
        from: u64,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublisherState {
    pub endpoint: String,
    pub topic: String,
    pub first_seq: u64,
    pub last_seq: u64,
    pub messages: u64,
}

/// Sequence bookkeeping, keyed by (endpoint, topic): each vLLM process (and DP rank) counts
/// from 0 on its own.
#[derive(Debug, Default)]
pub struct SeqTracker {
    pubs: BTreeMap<(String, String), PublisherState>,
}

impl SeqTracker {
    pub fn observe(&mut self, endpoint: &str, topic: &str, seq: u64) -> SeqVerdict {
        let key = (endpoint.to_string(), topic.to_string());
        match self.pubs.get_mut(&key) {
            None => {
                self.pubs.insert(
                    key,
                    PublisherState {
                        endpoint: endpoint.into(),
                        topic: topic.into(),
                        first_seq: seq,
                        last_seq: seq,
                        messages: 1,
                    },
                );
                SeqVerdict::First
            }
            Some(p) => {
                let last = p.last_seq;
                // Checked, not `last + 1`: a publisher at u64::MAX that sends a small number
                // has restarted, and the sum must not overflow.
                let verdict = if last.checked_add(1) == Some(seq) {
                    SeqVerdict::Next
                } else if seq > last {
                    SeqVerdict::Gap {
                        after: last,
                        missing: seq - last - 1,
                    }
                } else if seq == last {
                    return SeqVerdict::Duplicate;
                } else {
                    SeqVerdict::Restart { from: last }
                };
                p.last_seq = seq;
                p.messages += 1;
                verdict
            }
        }
    }

    pub fn publishers(&self) -> Vec<PublisherState> {
        self.pubs.values().cloned().collect()
    }
}

/// Why a multipart message was not captured. Counted per kind, not listed: a publisher that
/// sends nothing but bad messages must not grow the summary with them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum MalformedKind {
    FrameCount,
    SequenceFrame,
    OversizedTopic,
    OversizedPayload,
    NotMsgpack,
    SocketClosed,
}

impl MalformedKind {
    /// The JSON key.
    pub fn name(self) -> &'static str {
        match self {
            MalformedKind::FrameCount => "frame_count",
            MalformedKind::SequenceFrame => "sequence_frame",
            MalformedKind::OversizedTopic => "oversized_topic",
            MalformedKind::OversizedPayload => "oversized_payload",
            MalformedKind::NotMsgpack => "not_msgpack",
            MalformedKind::SocketClosed => "socket_closed",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            MalformedKind::FrameCount => "wrong frame count",
            MalformedKind::SequenceFrame => "bad sequence frame",
            MalformedKind::OversizedTopic => "topic too long",
            MalformedKind::OversizedPayload => "payload too large",
            MalformedKind::NotMsgpack => "payload not msgpack",
            MalformedKind::SocketClosed => "socket closed",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed {
    pub kind: MalformedKind,
    pub detail: String,
}

impl Malformed {
    fn new(kind: MalformedKind, detail: String) -> Malformed {
        Malformed { kind, detail }
    }
}

/// Why a multipart message is not a KV-event message; `max_payload` is the largest payload
/// accepted (MAX_PAYLOAD on the command line, so that `replay` reads every frame written).
pub fn validate(frames: &[Bytes], max_payload: usize) -> Result<u64, Malformed> {
    if frames.len() != 3 {
        return Err(Malformed::new(
            MalformedKind::FrameCount,
            format!(
                "{} frames (expected topic, sequence, payload)",
                frames.len()
            ),
        ));
    }
    let seq = &frames[1];
    if seq.len() != 8 {
        return Err(Malformed::new(
            MalformedKind::SequenceFrame,
            format!("{}-byte sequence frame (expected 8)", seq.len()),
        ));
    }
    if frames[0].len() > MAX_TOPIC {
        return Err(Malformed::new(
            MalformedKind::OversizedTopic,
            format!("{}-byte topic (at most {MAX_TOPIC})", frames[0].len()),
        ));
    }
    let payload = &frames[2];
    // Before the msgpack check, which would walk the whole oversized payload.
    if payload.len() > max_payload {
        return Err(Malformed::new(
            MalformedKind::OversizedPayload,
            format!("{}-byte payload (at most {max_payload})", payload.len()),
        ));
    }
    match value_len(payload) {
        Ok(Some(n)) if n == payload.len() => {}
        _ => {
            return Err(Malformed::new(
                MalformedKind::NotMsgpack,
                "payload is not one msgpack value".into(),
            ));
        }
    }
    Ok(u64::from_be_bytes([
        seq[0], seq[1], seq[2], seq[3], seq[4], seq[5], seq[6], seq[7],
    ]))
}

#[derive(Debug, Clone)]
pub struct LiveOptions {
    /// Publishers to connect to; each gets its own SUB socket so messages keep their source.
    pub endpoints: Vec<String>,
    /// One per endpoint, same order (empty: no recovery).
    pub replay_endpoints: Vec<String>,
    /// Bind here instead, for publishers that connect out.
    pub bind: Option<String>,
    pub topic: String,
    pub out: PathBuf,
    pub max_messages: Option<u64>,
    pub duration: Option<Duration>,
    pub connect_timeout: Duration,
    pub replay_timeout: Duration,
    /// Larger payloads are counted as malformed, not written. The command line uses
    /// `events::frames::MAX_PAYLOAD` (what `replay` reads); tests use a small one.
    pub max_payload: usize,
    /// Run the llm-d emulation on the stream as it arrives.
    pub live_replay: Option<ReplayOptions>,
    pub engine: Engine,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gap {
    pub endpoint: String,
    pub topic: String,
    pub after_seq: u64,
    pub missing: u64,
    pub recovered: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restart {
    pub endpoint: String,
    pub topic: String,
    pub from_seq: u64,
    pub to_seq: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MalformedExample {
    pub endpoint: String,
    pub detail: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MalformedCount {
    pub count: u64,
    /// The first few, to show what they looked like.
    pub examples: Vec<MalformedExample>,
}

/// How many examples of each malformed kind the summary keeps.
pub const MALFORMED_EXAMPLES: usize = 3;

/// Malformed messages by kind: memory and summary size do not grow with their number.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MalformedCounts {
    by_kind: BTreeMap<MalformedKind, MalformedCount>,
}

impl MalformedCounts {
    pub fn add(&mut self, endpoint: &str, m: Malformed) {
        let c = self.by_kind.entry(m.kind).or_default();
        c.count += 1;
        if c.examples.len() < MALFORMED_EXAMPLES {
            c.examples.push(MalformedExample {
                endpoint: endpoint.to_string(),
                detail: m.detail,
            });
        }
    }

    pub fn total(&self) -> u64 {
        self.by_kind.values().map(|c| c.count).sum()
    }

    pub fn kinds(&self) -> impl Iterator<Item = (MalformedKind, &MalformedCount)> {
        self.by_kind.iter().map(|(k, c)| (*k, c))
    }
}

/// How gap recovery went through one publisher's replay (ROUTER) socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayEndpointSummary {
    pub endpoint: String,
    /// The live endpoint whose gaps it serves.
    pub publisher: String,
    /// Replay requests sent (one can serve several gaps).
    pub requests: u64,
    /// Requests that failed: no connection, no reply in time, a flood, a socket error.
    pub failures: u64,
    pub recovered: u64,
    /// Gaps never asked for because the recovery queue was full.
    pub dropped_gaps: u64,
    /// Down when the capture stopped (the last request failed; retried with backoff).
    pub down: bool,
    pub last_error: Option<String>,
}

pub struct CaptureSummary {
    pub out: PathBuf,
    pub messages: u64,
    pub events: u64,
    /// Well-formed msgpack that is not a known event batch (written, not counted as events).
    pub undecodable: u64,
    pub publishers: Vec<PublisherState>,
    pub gaps: Vec<Gap>,
    pub restarts: Vec<Restart>,
    pub duplicates: u64,
    pub malformed: MalformedCounts,
    pub replay_endpoints: Vec<ReplayEndpointSummary>,
    pub stopped_by: &'static str,
    pub elapsed: Duration,
    /// From the first message received to the last one written (throughput's denominator).
    pub active: Duration,
    pub bytes: u64,
    pub replay: Option<ReplayReport>,
}

impl CaptureSummary {
    fn new(out: PathBuf) -> CaptureSummary {
        CaptureSummary {
            out,
            messages: 0,
            events: 0,
            undecodable: 0,
            publishers: Vec::new(),
            gaps: Vec::new(),
            restarts: Vec::new(),
            duplicates: 0,
            malformed: MalformedCounts::default(),
            replay_endpoints: Vec::new(),
            stopped_by: "publishers closed",
            elapsed: Duration::ZERO,
            active: Duration::ZERO,
            bytes: 0,
            replay: None,
        }
    }

    pub fn unrecovered_gaps(&self) -> bool {
        self.unrecovered_gap_count() > 0
    }

    /// Gaps with at least one message still missing.
    pub fn unrecovered_gap_count(&self) -> usize {
        self.gaps.iter().filter(|g| g.recovered < g.missing).count()
    }
}

/// Shown once a second while capturing.
pub struct Progress {
    pub messages: u64,
    pub events: u64,
    pub gaps: usize,
    pub malformed: u64,
    pub skipped: BTreeMap<&'static str, u64>,
    pub elapsed: Duration,
}

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
    #[error("{0}")]
    Usage(String),
}

enum Incoming {
    Message(usize, ZmqMessage),
    Closed(usize, String),
}

/// The live loop's side of one replay worker.
struct ReplayHandle {
    requests: mpsc::Sender<GapRequest>,
    /// Gap requests handed to the worker.
    sent: u64,
    status: WorkerStatus,
    summary: ReplayEndpointSummary,
}

impl ReplayHandle {
    /// Still working on gaps it was given, and not down (a down endpoint is not waited for).
    fn busy(&self) -> bool {
        !self.status.down && self.status.settled < self.sent
    }
}

/// Capture until a stop condition. Every frame is written whole; gaps are recovered beside
/// the live stream, so recovered frames land in the file when they arrive.
pub async fn capture(
    opts: LiveOptions,
    mut on_tick: impl FnMut(&Progress),
    stop: impl std::future::Future<Output = &'static str>,
) -> Result<CaptureSummary, CaptureFailure> {
    if !opts.replay_endpoints.is_empty() && opts.replay_endpoints.len() != opts.endpoints.len() {
        return Err(CaptureFailure::Usage(format!(
            "{} --replay-endpoint for {} --endpoint: give one per endpoint, in the same order",
            opts.replay_endpoints.len(),
            opts.endpoints.len()
        )));
    }
    let path = opts.out.display().to_string();
    let file = std::fs::File::create(&opts.out).map_err(|source| CaptureFailure::Write {
        path: path.clone(),
        source,
    })?;
    let (tx, mut rx) = mpsc::channel::<Incoming>(4096);
    let mut sources: Vec<String> = Vec::new();
    if let Some(addr) = &opts.bind {
        let mut sub = SubSocket::new();
        sub.bind(addr).await.map_err(|e| CaptureFailure::Bind {
            endpoint: addr.clone(),
            reason: e.to_string(),
        })?;
        subscribe(&mut sub, &opts.topic, addr).await?;
        sources.push(addr.clone());
        tokio::spawn(pump(sub, 0, tx.clone()));
    }
    // Source index of endpoint i: after the bound socket, when there is one.
    let offset = usize::from(opts.bind.is_some());
    for ep in &opts.endpoints {
        let mut sub = SubSocket::new();
        match tokio::time::timeout(opts.connect_timeout, sub.connect(ep)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                return Err(CaptureFailure::Connect {
                    endpoint: ep.clone(),
                    reason: e.to_string(),
                });
            }
            Err(_) => {
                return Err(CaptureFailure::Connect {
                    endpoint: ep.clone(),
                    reason: format!("no publisher answered within {:?}", opts.connect_timeout),
                });
            }
        }
        subscribe(&mut sub, &opts.topic, ep).await?;
        sources.push(ep.clone());
        tokio::spawn(pump(sub, sources.len() - 1, tx.clone()));
    }
    drop(tx);

    // Bounded: a worker waits (and stops reading its ROUTER) while the live loop catches up.
    let (rec_tx, mut rec_rx) = mpsc::channel::<Recovery>(RECOVERED_QUEUE);
    let mut workers: BTreeMap<usize, ReplayHandle> = BTreeMap::new();
    for (i, rep) in opts.replay_endpoints.iter().enumerate() {
        let src = offset + i;
        let (req_tx, req_rx) = mpsc::channel(GAP_QUEUE);
        let worker = ReplayWorker {
            src,
            endpoint: rep.clone(),
            timeout: opts.replay_timeout,
            max_payload: opts.max_payload,
            requests: req_rx,
            out: rec_tx.clone(),
            pending: Pending::default(),
            status: WorkerStatus::default(),
            received: 0,
        };
        tokio::spawn(worker.run());
        workers.insert(
            src,
            ReplayHandle {
                requests: req_tx,
                sent: 0,
                status: WorkerStatus::default(),
                summary: ReplayEndpointSummary {
                    endpoint: rep.clone(),
                    publisher: sources[src].clone(),
                    requests: 0,
                    failures: 0,
                    recovered: 0,
                    dropped_gaps: 0,
                    down: false,
                    last_error: None,
                },
            },
        );
    }
    // Each worker holds a sender, so `rec_rx` stays open while any runs; this one keeps it
    // open (pending, not closed) when there are none.
    let _keep_open = rec_tx;

    let started = Instant::now();
    let deadline = opts.duration.map(|d| tokio::time::Instant::now() + d);
    let mut tracker = SeqTracker::default();
    let mut out = Recorder {
        file,
        path,
        frame: Vec::with_capacity(1 << 16),
        engine: opts.engine,
        live: opts.live_replay.clone().map(Replayer::new),
        pool: Pool::default(),
    };
    // First missing seq of each gap sent for recovery → its index in `s.gaps`.
    let mut gap_at: BTreeMap<(usize, Bytes, u64), usize> = BTreeMap::new();
    let mut s = CaptureSummary::new(opts.out.clone());
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    tokio::pin!(stop);
    let mut first_at: Option<Instant> = None;
    let mut live_open = true;
    // Set when the live stream is over but recoveries are in flight: they get one replay
    // timeout more to finish.
    let mut draining: Option<tokio::time::Instant> = None;
    loop {
        if opts.max_messages.is_some_and(|m| s.messages >= m) {
            s.stopped_by = "max messages";
            break;
        }
        if draining.is_some() && !workers.values().any(ReplayHandle::busy) {
            break;
        }
        let incoming = tokio::select! {
            m = rx.recv(), if live_open && draining.is_none() => match m {
                Some(m) => m,
                None => {
                    live_open = false;
                    s.stopped_by = "publishers closed";
                    draining = Some(tokio::time::Instant::now() + opts.replay_timeout);
                    continue;
                }
            },
            r = rec_rx.recv() => {
                let Some(r) = r else { continue };
                match r {
                    Recovery::Frame { src, topic, seq, payload } => {
                        let now = Instant::now();
                        s.active = now - *first_at.get_or_insert(now);
                        let gap = gap_at
                            .range((src, topic.clone(), 0)..=(src, topic.clone(), seq))
                            .next_back()
                            .map(|(_, &i)| i);
                        if let Some(g) = gap.and_then(|i| s.gaps.get_mut(i))
                            && seq > g.after_seq
                            && seq - g.after_seq <= g.missing
                            && g.recovered < g.missing
                        {
                            g.recovered += 1;
                        }
                        if let Some(w) = workers.get_mut(&src) {
                            w.summary.recovered += 1;
                        }
                        out.record(&mut s, &topic, seq, &payload)?;
                    }
                    Recovery::Status { src, status } => {
                        if let Some(w) = workers.get_mut(&src) {
                            w.status = status;
                        }
                    }
                }
                continue;
            }
            // Also while draining: a signal ends the wait for recoveries too.
            why = &mut stop => {
                if draining.is_none() {
                    s.stopped_by = why;
                }
                break;
            }
            _ = async { match deadline { Some(d) => tokio::time::sleep_until(d).await, None => std::future::pending().await } }, if draining.is_none() => {
                s.stopped_by = "duration";
                draining = Some(tokio::time::Instant::now() + opts.replay_timeout);
                continue;
            }
            _ = async { match draining { Some(d) => tokio::time::sleep_until(d).await, None => std::future::pending().await } } => {
                break;
            }
            _ = tick.tick() => {
                let skipped = out.live.as_ref().map(|r| r.skipped_so_far()).unwrap_or_default();
                on_tick(&Progress {
                    messages: s.messages,
                    events: s.events,
                    gaps: s.gaps.len(),
                    malformed: s.malformed.total(),
                    skipped,
                    elapsed: started.elapsed(),
                });
                continue;
            }
        };
        let (src, msg) = match incoming {
            Incoming::Message(src, msg) => (src, msg),
            Incoming::Closed(src, reason) => {
                s.malformed.add(
                    &sources[src],
                    Malformed::new(MalformedKind::SocketClosed, reason),
                );
                continue;
            }
        };
        let now = Instant::now();
        let first = *first_at.get_or_insert(now);
        s.active = now - first;
        let frames = msg.into_vec();
        let endpoint = &sources[src];
        let seq = match validate(&frames, opts.max_payload) {
            Ok(seq) => seq,
            Err(m) => {
                s.malformed.add(endpoint, m);
                continue;
            }
        };
        let topic = String::from_utf8_lossy(&frames[0]).into_owned();
        match tracker.observe(endpoint, &topic, seq) {
            SeqVerdict::Duplicate => {
                s.duplicates += 1;
                continue;
            }
            SeqVerdict::Restart { from } => s.restarts.push(Restart {
                endpoint: endpoint.clone(),
                topic: topic.clone(),
                from_seq: from,
                to_seq: seq,
            }),
            SeqVerdict::Gap { after, missing } => {
                if let Some(w) = workers.get_mut(&src) {
                    // No overflow: a gap means after < seq - 1.
                    let request = GapRequest {
                        topic: frames[0].clone(),
                        from: after + 1,
                        to: seq - 1,
                    };
                    // Never waits: the live stream comes first. The worker empties this queue
                    // whenever it runs, so it fills only if the worker is starved.
                    match w.requests.try_send(request) {
                        Ok(()) => {
                            w.sent += 1;
                            gap_at.insert((src, frames[0].clone(), after + 1), s.gaps.len());
                        }
                        Err(_) => w.summary.dropped_gaps += 1,
                    }
                }
                s.gaps.push(Gap {
                    endpoint: endpoint.clone(),
                    topic: topic.clone(),
                    after_seq: after,
                    missing,
                    recovered: 0,
                });
            }
            SeqVerdict::First | SeqVerdict::Next => {}
        }
        out.record(&mut s, &frames[0], seq, &frames[2])?;
    }
    use std::io::Write;
    out.file.flush().map_err(|source| CaptureFailure::Write {
        path: out.path.clone(),
        source,
    })?;
    s.publishers = tracker.publishers();
    s.replay_endpoints = workers
        .into_values()
        .map(|w| ReplayEndpointSummary {
            requests: w.status.requests,
            failures: w.status.failures,
            dropped_gaps: w.summary.dropped_gaps + w.status.dropped,
            down: w.status.down,
            last_error: w.status.last_error,
            ..w.summary
        })
        .collect();
    s.elapsed = started.elapsed();
    s.replay = out.live.map(|r| r.finish(&[]));
    Ok(s)
}

/// Where captured messages go: the file, the counts, and the live emulation if any.
struct Recorder {
    file: std::fs::File,
    path: String,
    /// One frame's bytes, reused.
    frame: Vec<u8>,
    engine: Engine,
    live: Option<Replayer>,
    /// Decoding state for the counts when there is no live emulation (which has its own).
    pool: Pool,
}

impl Recorder {
    /// Write one message and count it: decoded once, for the summary and the live emulation.
    fn record(
        &mut self,
        s: &mut CaptureSummary,
        topic: &[u8],
        seq: u64,
        payload: &[u8],
    ) -> Result<(), CaptureFailure> {
        use std::io::Write;
        // One frame in one write: a stop at any moment leaves only whole frames in the file.
        self.frame.clear();
        write_frame(&mut self.frame, topic, seq, payload);
        self.file
            .write_all(&self.frame)
            .map_err(|source| CaptureFailure::Write {
                path: self.path.clone(),
                source,
            })?;
        s.bytes += self.frame.len() as u64;
        s.messages += 1;
        // Decoded with the pool the batch goes back to: the emulation recycles what it is fed.
        let decoded = match &mut self.live {
            Some(r) => r.decode(payload, 0),
            None => decode_batch_with(payload, 0, self.engine, &mut self.pool),
        };
        match &decoded {
            Ok(b) => s.events += b.events.len() as u64,
            Err(_) => s.undecodable += 1,
        }
        match &mut self.live {
            // Undecodable payloads are counted above; the emulation counts them as dropped.
            Some(r) => {
                let _ = r.feed_decoded(Some(&String::from_utf8_lossy(topic)), decoded);
            }
            None => {
                if let Ok(b) = decoded {
                    self.pool.recycle(b);
                }
            }
        }
        Ok(())
    }
}

async fn subscribe(sub: &mut SubSocket, topic: &str, ep: &str) -> Result<(), CaptureFailure> {
    sub.subscribe(topic)
        .await
        .map_err(|e| CaptureFailure::Connect {
            endpoint: ep.to_string(),
            reason: format!("subscribe: {e}"),
        })
}

async fn pump(mut sub: SubSocket, src: usize, tx: mpsc::Sender<Incoming>) {
    loop {
        match sub.recv().await {
            Ok(m) => {
                if tx.send(Incoming::Message(src, m)).await.is_err() {
                    return;
                }
            }
            Err(e) => {
                let _ = tx.send(Incoming::Closed(src, e.to_string())).await;
                return;
            }
        }
    }
}

const END_SEQ: [u8; 8] = [0xff; 8];

/// Recovered frames and status waiting for the live loop: few, since each frame may hold a
/// payload of up to `max_payload`.
const RECOVERED_QUEUE: usize = 16;
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

/// Missing `from..=to` of `topic`, from the live loop to its publisher's replay worker.
struct GapRequest {
    topic: Bytes,
    from: u64,
    to: u64,
}

#[derive(Debug, Clone, Default)]
struct WorkerStatus {
    requests: u64,
    failures: u64,
    down: bool,
    last_error: Option<String>,
    /// Gap requests received that are now recovered or known unrecoverable.
    settled: u64,
    /// Gap requests not kept because PENDING_MAX ranges were already waiting.
    dropped: u64,
}

enum Recovery {
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

type Ranges = BTreeMap<u64, (u64, u64)>;

/// The seqs a worker still wants, per topic: disjoint ranges `start → (end, generation)`,
/// where generation is the first request that could serve the range.
#[derive(Default)]
struct Pending {
    topics: BTreeMap<Bytes, Ranges>,
    ranges: usize,
}

fn holds(m: &Ranges, seq: u64) -> bool {
    m.range(..=seq)
        .next_back()
        .is_some_and(|(_, &(end, _))| seq <= end)
}

impl Pending {
    fn add(&mut self, r: GapRequest, generation: u64) -> bool {
        if self.ranges >= PENDING_MAX {
            return false;
        }
        let m = self.topics.entry(r.topic).or_default();
        if m.insert(r.from, (r.to, generation)).is_none() {
            self.ranges += 1;
        }
        true
    }

    fn is_empty(&self) -> bool {
        self.ranges == 0
    }

    /// Where the next request starts: vLLM replays everything from there on, so one request
    /// serves every gap waiting.
    fn first(&self) -> Option<u64> {
        self.topics
            .values()
            .filter_map(|m| m.keys().next().copied())
            .min()
    }

    /// The topic whose missing set holds `seq`. vLLM before 0.26 leaves the topic out of
    /// replies: then the seq alone picks it.
    fn topic_of(&self, topic: Option<&[u8]>, seq: u64) -> Option<Bytes> {
        match topic {
            Some(t) => {
                let (k, m) = self.topics.get_key_value(t)?;
                holds(m, seq).then(|| k.clone())
            }
            None => self
                .topics
                .iter()
                .find(|(_, m)| holds(m, seq))
                .map(|(k, _)| k.clone()),
        }
    }

    /// Takes `seq` out of `topic`'s missing set, so that a reply repeating it is not taken twice.
    fn take(&mut self, topic: &Bytes, seq: u64) {
        let Some(m) = self.topics.get_mut(topic) else {
            return;
        };
        let Some((&start, &(end, generation))) = m.range(..=seq).next_back() else {
            return;
        };
        if seq > end {
            return;
        }
        m.remove(&start);
        self.ranges -= 1;
        if start < seq {
            m.insert(start, (seq - 1, generation));
            self.ranges += 1;
        }
        if seq < end {
            m.insert(seq + 1, (end, generation));
            self.ranges += 1;
        }
        if m.is_empty() {
            self.topics.remove(topic);
        }
    }

    /// After a complete reply to request `generation`: what it could have served and did not
    /// is not in the publisher's buffer (any more), and asking again would not bring it.
    fn settle(&mut self, generation: u64) {
        for m in self.topics.values_mut() {
            m.retain(|_, (_, g)| *g > generation);
        }
        self.topics.retain(|_, m| !m.is_empty());
        self.ranges = self.topics.values().map(BTreeMap::len).sum();
    }
}

/// Recovers one publisher's gaps through its replay (ROUTER) socket, beside the live loop:
/// gap requests come in on `requests`, recovered frames go out on `out`.
struct ReplayWorker {
    src: usize,
    endpoint: String,
    timeout: Duration,
    max_payload: usize,
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
    async fn run(mut self) {
        let mut dealer: Option<DealerSocket> = None;
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
    async fn request(
        &mut self,
        slot: &mut Option<DealerSocket>,
        generation: u64,
    ) -> Result<(), Failed> {
        let Some(from) = self.pending.first() else {
            return Ok(());
        };
        let timeout = self.timeout;
        let fail = |why: String| Err(Failed::Endpoint(why));
        let mut dealer = match slot.take() {
            Some(d) => d,
            None => {
                let mut d = DealerSocket::new();
                match tokio::time::timeout(timeout, d.connect(&self.endpoint)).await {
                    Ok(Ok(())) => d,
                    Ok(Err(e)) => return fail(format!("cannot connect: {e}")),
                    Err(_) => return fail(format!("cannot connect within {timeout:?}")),
                }
            }
        };
        let request = ZmqMessage::try_from(vec![
            Bytes::new(),
            Bytes::copy_from_slice(&from.to_be_bytes()),
        ])
        .map_err(|e| Failed::Endpoint(e.to_string()))?;
        match tokio::time::timeout(timeout, dealer.send(request)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return fail(format!("cannot send the request: {e}")),
            Err(_) => return fail(format!("request not taken within {timeout:?}")),
        }
        self.status.requests += 1;
        let mut unwanted = 0u64;
        let mut replies = 0u64;
        let mut until = tokio::time::Instant::now() + timeout;
        loop {
            let reply = tokio::select! {
                m = dealer.recv() => match m {
                    Ok(m) => m,
                    Err(e) => return fail(format!("replay socket: {e}")),
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
            let frames = reply.into_vec();
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

    /// The live emulation is fed batches decoded with its own pool: a long capture keeps a
    /// batch's worth of recycled bodies, not one per message (decoding with another pool
    /// made the emulation's pool grow by every event captured).
    #[test]
    fn live_replay_memory_does_not_grow_with_messages() {
        use crate::events::{Batch, BatchWire, encode::encode_batch};
        use crate::index::IndexConfig;
        use crate::index::router::generation_events;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.frames");
        let mut out = Recorder {
            file: std::fs::File::create(&path).unwrap(),
            path: path.display().to_string(),
            frame: Vec::new(),
            engine: Engine::Vllm,
            live: Some(Replayer::new(ReplayOptions {
                views: vec![IndexConfig::new(16)],
                engine: Engine::Vllm,
                keep_going: true,
                default_pod: "p".into(),
            })),
            pool: Pool::default(),
        };
        let mut s = CaptureSummary::new(path.clone());
        for i in 0..3000u32 {
            let tokens: Vec<u32> = (0..32).map(|t| i * 32 + t).collect();
            let payload = encode_batch(&Batch {
                ts: 0.0,
                events: generation_events(16, &tokens, 16),
                data_parallel_rank: Some(0),
                wire: BatchWire::Array(3),
            });
            out.record(&mut s, b"kv@p@m", i as u64, &payload).unwrap();
        }
        assert_eq!((s.messages, s.events, s.undecodable), (3000, 6000, 0));
        let held = out.live.as_ref().unwrap().pooled();
        assert!(held <= 8, "{held} bodies held after 3000 messages");
    }

    #[test]
    fn sequences_per_publisher() {
        let mut t = SeqTracker::default();
        assert_eq!(t.observe("e", "a", 5), SeqVerdict::First);
        assert_eq!(t.observe("e", "b", 0), SeqVerdict::First);
        assert_eq!(t.observe("e", "a", 6), SeqVerdict::Next);
        assert_eq!(
            t.observe("e", "a", 9),
            SeqVerdict::Gap {
                after: 6,
                missing: 2
            }
        );
        assert_eq!(t.observe("e", "a", 9), SeqVerdict::Duplicate);
        assert_eq!(t.observe("e", "a", 0), SeqVerdict::Restart { from: 9 });
        assert_eq!(t.observe("e", "b", 1), SeqVerdict::Next);
        let p = t.publishers();
        assert_eq!((p[0].first_seq, p[0].last_seq, p[0].messages), (5, 0, 4));
    }

    /// Wire sequence numbers are any u64: the top of the range is neither a gap nor an overflow.
    #[test]
    fn sequences_at_the_top_of_the_range() {
        let mut t = SeqTracker::default();
        assert_eq!(t.observe("e", "a", u64::MAX - 2), SeqVerdict::First);
        assert_eq!(
            t.observe("e", "a", u64::MAX),
            SeqVerdict::Gap {
                after: u64::MAX - 2,
                missing: 1
            }
        );
        assert_eq!(t.observe("e", "a", u64::MAX), SeqVerdict::Duplicate);
        assert_eq!(
            t.observe("e", "a", 5),
            SeqVerdict::Restart { from: u64::MAX }
        );
        assert_eq!(t.observe("e", "a", 6), SeqVerdict::Next);
        assert_eq!(t.observe("e", "b", u64::MAX), SeqVerdict::First);
        assert_eq!(
            t.observe("e", "b", 0),
            SeqVerdict::Restart { from: u64::MAX }
        );
        assert_eq!(
            t.observe("e", "b", u64::MAX),
            SeqVerdict::Gap {
                after: 0,
                missing: u64::MAX - 1
            }
        );
        assert_eq!(t.observe("e", "c", u64::MAX - 1), SeqVerdict::First);
        assert_eq!(t.observe("e", "c", u64::MAX), SeqVerdict::Next);
    }

    #[test]
    fn frame_validation() {
        let seq = Bytes::copy_from_slice(&7u64.to_be_bytes());
        let ok = [
            Bytes::from_static(b"kv@p@m"),
            seq.clone(),
            Bytes::from_static(&[0x93, 0x00, 0x90, 0x00]),
        ];
        let kind = |frames: &[Bytes], max: usize| validate(frames, max).unwrap_err().kind;
        assert_eq!(validate(&ok, 4), Ok(7));
        assert!(
            validate(&ok[..2], 4)
                .unwrap_err()
                .detail
                .contains("2 frames")
        );
        assert_eq!(kind(&ok[..2], 4), MalformedKind::FrameCount);
        let short = [
            ok[0].clone(),
            Bytes::from_static(&[0, 0, 0, 1]),
            ok[2].clone(),
        ];
        let e = validate(&short, 4).unwrap_err();
        assert_eq!(e.kind, MalformedKind::SequenceFrame);
        assert!(e.detail.contains("4-byte sequence"));
        let bad = [ok[0].clone(), seq.clone(), Bytes::from_static(b"\xc1junk")];
        assert_eq!(kind(&bad, 1 << 20), MalformedKind::NotMsgpack);
        // The limit is inclusive, and checked before the payload is read as msgpack.
        assert_eq!(kind(&ok, 3), MalformedKind::OversizedPayload);
        assert_eq!(kind(&bad, 3), MalformedKind::OversizedPayload);
        let long = [
            Bytes::from(vec![b't'; MAX_TOPIC + 1]),
            seq.clone(),
            ok[2].clone(),
        ];
        assert_eq!(kind(&long, 4), MalformedKind::OversizedTopic);
        let longest = [Bytes::from(vec![b't'; MAX_TOPIC]), seq, ok[2].clone()];
        assert_eq!(validate(&longest, 4), Ok(7));
    }

    /// Thousands of malformed messages leave a count per kind and three examples each.
    #[test]
    fn malformed_counts_stay_small() {
        let mut m = MalformedCounts::default();
        for i in 0..10_000 {
            m.add(
                "e",
                Malformed::new(MalformedKind::FrameCount, format!("{i}")),
            );
        }
        m.add("f", Malformed::new(MalformedKind::NotMsgpack, "x".into()));
        assert_eq!(m.total(), 10_001);
        let kinds: Vec<_> = m
            .kinds()
            .map(|(k, c)| (k, c.count, c.examples.len()))
            .collect();
        assert_eq!(
            kinds,
            [
                (MalformedKind::FrameCount, 10_000, MALFORMED_EXAMPLES),
                (MalformedKind::NotMsgpack, 1, 1)
            ]
        );
        let (_, c) = m.kinds().next().unwrap();
        assert_eq!(c.examples[2].detail, "2");
    }

    /// A request's reply serves every waiting gap it covers, each seq once; after a complete
    /// reply what it could have brought and did not is dropped, later gaps stay.
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
        assert_eq!(p.ranges, 3);
        p.take(&t, 3);
        assert_eq!(p.first(), Some(5));
        // A gap seen while request 1 was out waits for request 2.
        assert!(p.add(gap(20, 21), 2));
        p.settle(1);
        assert_eq!((p.first(), p.ranges), (Some(20), 1));
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
