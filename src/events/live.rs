//! Live capture from vLLM/SGLang ZMQ publishers: SUB sockets, frame validation, sequence
//! tracking per publisher (gaps, duplicates, restarts), and gap recovery through the
//! publisher's ROUTER replay socket (reference/vllm-events.md §2).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::mpsc;
use zeromq::{DealerSocket, Socket, SocketRecv, SocketSend, SubSocket, ZmqMessage};

use super::capture::write_frame;
use super::msgpack::value_len;
use super::{Engine, Pool, decode_batch_with};
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

/// Why a multipart message is not a KV-event message.
pub fn validate(frames: &[Bytes]) -> Result<u64, String> {
    if frames.len() != 3 {
        return Err(format!(
            "{} frames (expected topic, sequence, payload)",
            frames.len()
        ));
    }
    let seq = &frames[1];
    if seq.len() != 8 {
        return Err(format!("{}-byte sequence frame (expected 8)", seq.len()));
    }
    let payload = &frames[2];
    match value_len(payload) {
        Ok(Some(n)) if n == payload.len() => {}
        _ => return Err("payload is not one msgpack value".into()),
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
pub struct MalformedMessage {
    pub endpoint: String,
    pub reason: String,
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
    pub malformed: Vec<MalformedMessage>,
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
            malformed: Vec::new(),
            stopped_by: "publishers closed",
            elapsed: Duration::ZERO,
            active: Duration::ZERO,
            bytes: 0,
            replay: None,
        }
    }

    pub fn unrecovered_gaps(&self) -> bool {
        self.gaps.iter().any(|g| g.recovered < g.missing)
    }
}

/// Shown once a second while capturing.
pub struct Progress {
    pub messages: u64,
    pub events: u64,
    pub gaps: usize,
    pub malformed: usize,
    pub skipped: BTreeMap<&'static str, u64>,
    pub elapsed: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum CaptureFailure {
    #[error("cannot connect to {endpoint}: {reason}")]
    Connect { endpoint: String, reason: String },
    #[error("cannot bind {endpoint}: {reason}")]
    Bind { endpoint: String, reason: String },
    #[error("cannot write {path}: {source}")]
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

/// Capture until a stop condition; every frame is written whole before the next is read.
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
    let mut dealers: BTreeMap<usize, DealerSocket> = BTreeMap::new();
    let mut s = CaptureSummary::new(opts.out.clone());
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    tokio::pin!(stop);
    let mut first_at: Option<Instant> = None;
    loop {
        if opts.max_messages.is_some_and(|m| s.messages >= m) {
            s.stopped_by = "max messages";
            break;
        }
        let incoming = tokio::select! {
            m = rx.recv() => match m {
                Some(m) => m,
                None => break,
            },
            why = &mut stop => {
                s.stopped_by = why;
                break;
            }
            _ = async { match deadline { Some(d) => tokio::time::sleep_until(d).await, None => std::future::pending().await } } => {
                s.stopped_by = "duration";
                break;
            }
            _ = tick.tick() => {
                let skipped = out.live.as_ref().map(|r| r.skipped_so_far()).unwrap_or_default();
                on_tick(&Progress {
                    messages: s.messages,
                    events: s.events,
                    gaps: s.gaps.len(),
                    malformed: s.malformed.len(),
                    skipped,
                    elapsed: started.elapsed(),
                });
                continue;
            }
        };
        let (src, msg) = match incoming {
            Incoming::Message(src, msg) => (src, msg),
            Incoming::Closed(src, reason) => {
                s.malformed.push(MalformedMessage {
                    endpoint: sources[src].clone(),
                    reason: format!("socket closed: {reason}"),
                });
                continue;
            }
        };
        let now = Instant::now();
        let first = *first_at.get_or_insert(now);
        s.active = now - first;
        let frames = msg.into_vec();
        let endpoint = &sources[src];
        let seq = match validate(&frames) {
            Ok(seq) => seq,
            Err(reason) => {
                s.malformed.push(MalformedMessage {
                    endpoint: endpoint.clone(),
                    reason,
                });
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
                let replay_ep = src
                    .checked_sub(offset)
                    .and_then(|i| opts.replay_endpoints.get(i));
                let mut recovered = 0;
                if let Some(rep) = replay_ep {
                    let got = recover(
                        &mut dealers,
                        src,
                        rep,
                        &frames[0],
                        after + 1,
                        seq - 1,
                        opts.replay_timeout,
                    )
                    .await;
                    for (rseq, payload) in got {
                        out.record(&mut s, &frames[0], rseq, &payload)?;
                        recovered += 1;
                    }
                }
                s.gaps.push(Gap {
                    endpoint: endpoint.clone(),
                    topic: topic.clone(),
                    after_seq: after,
                    missing,
                    recovered,
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

/// Ask the publisher's replay socket for `from..=to` of `topic`. Both reply layouts are read:
/// `[topic, seq, payload]` (vLLM ≥ 0.26) and `[seq, payload]` (before), after the DEALER's empty
/// delimiter; an empty payload or sequence -1 ends the replay.
async fn recover(
    dealers: &mut BTreeMap<usize, DealerSocket>,
    src: usize,
    endpoint: &str,
    topic: &[u8],
    from: u64,
    to: u64,
    timeout: Duration,
) -> Vec<(u64, Bytes)> {
    let mut got: BTreeMap<u64, Bytes> = BTreeMap::new();
    if let std::collections::btree_map::Entry::Vacant(slot) = dealers.entry(src) {
        let mut d = DealerSocket::new();
        match tokio::time::timeout(timeout, d.connect(endpoint)).await {
            Ok(Ok(())) => {
                slot.insert(d);
            }
            _ => return Vec::new(),
        }
    }
    let Some(dealer) = dealers.get_mut(&src) else {
        return Vec::new();
    };
    let request = ZmqMessage::try_from(vec![
        Bytes::new(),
        Bytes::copy_from_slice(&from.to_be_bytes()),
    ]);
    let Ok(request) = request else {
        return Vec::new();
    };
    if dealer.send(request).await.is_err() {
        return Vec::new();
    }
    let until = tokio::time::Instant::now() + timeout;
    loop {
        let reply = match tokio::time::timeout_at(until, dealer.recv()).await {
            Ok(Ok(m)) => m.into_vec(),
            _ => break,
        };
        let mut frames: &[Bytes] = &reply;
        if frames.first().is_some_and(|f| f.is_empty()) && frames.len() >= 3 {
            frames = &frames[1..];
        }
        let (rtopic, seq, payload) = match frames {
            [t, s, p] => (Some(t), s, p),
            [s, p] => (None, s, p),
            _ => continue,
        };
        if payload.is_empty() || seq.as_ref() == END_SEQ {
            break;
        }
        if seq.len() != 8 || rtopic.is_some_and(|t| t.as_ref() != topic) {
            continue;
        }
        let n = u64::from_be_bytes([
            seq[0], seq[1], seq[2], seq[3], seq[4], seq[5], seq[6], seq[7],
        ]);
        if (from..=to).contains(&n)
            && validate(&[Bytes::new(), seq.clone(), payload.clone()]).is_ok()
        {
            got.insert(n, payload.clone());
        }
        if got.len() as u64 == to - from + 1 {
            break;
        }
    }
    got.into_iter().collect()
}

/// The longest duration a flag takes: tokio's timers reach about two years, and no capture
/// or timeout needs more than one.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// `90s`, `2m`, `1h`, `500ms`, or plain seconds; more than zero and at most a year.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (num, unit) = t.split_at(
        t.find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(t.len()),
    );
    let syntax = || "expected a duration like 90s, 5m or 500ms".to_string();
    let v: f64 = num.parse().map_err(|_| syntax())?;
    let secs = match unit {
        "" | "s" => v,
        "ms" => v / 1000.0,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        _ => return Err(syntax()),
    };
    // Compared as f64 before converting: Duration::from_secs_f64 panics past u64 seconds.
    if !secs.is_finite() || secs > MAX_DURATION.as_secs_f64() {
        return Err("longer than a year (365 days is the most)".into());
    }
    match Duration::try_from_secs_f64(secs) {
        Ok(d) if !d.is_zero() => Ok(d),
        _ => Err("must be more than zero".into()),
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
        assert_eq!(validate(&ok), Ok(7));
        assert!(validate(&ok[..2]).unwrap_err().contains("2 frames"));
        let short = [
            ok[0].clone(),
            Bytes::from_static(&[0, 0, 0, 1]),
            ok[2].clone(),
        ];
        assert!(validate(&short).unwrap_err().contains("4-byte sequence"));
        let bad = [ok[0].clone(), seq, Bytes::from_static(b"\xc1junk")];
        assert!(validate(&bad).unwrap_err().contains("msgpack"));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert_eq!(parse_duration("8760h"), Ok(MAX_DURATION));
        assert!(
            parse_duration("soon")
                .unwrap_err()
                .contains("expected a duration")
        );
        assert!(parse_duration("0s").unwrap_err().contains("more than zero"));
        assert!(
            parse_duration("0.0000000001s")
                .unwrap_err()
                .contains("more than zero")
        );
        // Each of these panicked in Duration::from_secs_f64.
        for big in ["99999999999999999999s", "8761h", "1e400", &"9".repeat(400)] {
            let err = parse_duration(big).unwrap_err();
            assert!(
                err.contains("longer than a year") || err.contains("expected a duration"),
                "{big}: {err}"
            );
        }
        assert!(
            parse_duration("99999999999999999999s")
                .unwrap_err()
                .contains("year")
        );
    }
}
