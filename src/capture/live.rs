//! The receive loop: SUB sockets (connected or bound), every valid frame written whole to
//! the file, sequence tracking, gap requests to the recovery workers, the live emulation.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::mpsc;

use super::recovery::{GapRequest, RECOVERED_QUEUE, Recovery, ReplayWorker, WorkerStatus};
use super::sequence::{SeqTracker, SeqVerdict};
use super::subscribe::{CaptureFailure, Incoming, Source, Subscribed, subscribe};
use super::summary::{CaptureSummary, Gap, ReplayEndpointSummary, Restart, add_malformed};
use super::validate::validate;
use super::zmtp::Limits;
use crate::events::frames::write_frame;
use crate::events::{Engine, Pool, decode_batch_with};
use crate::output::AtomicFile;
use crate::replay::{ReplayOptions, Replayer};

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
    /// The most bytes one message (all its frames) may announce: a publisher or replay
    /// endpoint that sends more is dropped before any of it is allocated
    /// (`--max-message-size`, default `zmtp::Limits::DEFAULT_MAX_MESSAGE`).
    pub max_message: usize,
    /// Run the llm-d emulation on the stream as it arrives.
    pub live_replay: Option<ReplayOptions>,
    pub engine: Engine,
}

/// What capture tells its caller while it runs.
pub enum Status<'a> {
    /// The `--bind` socket is listening here (the port chosen when the address gave port 0).
    Bound(&'a str),
    /// Once a second.
    Progress(&'a Progress),
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
    mut on_status: impl FnMut(Status<'_>),
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
    // Before connecting, so that an output that cannot be written is said first; the
    // destination itself is untouched until the capture is complete.
    let file = AtomicFile::create(&opts.out)?;
    let limits = Limits::new(opts.max_message);
    let mut wanted: Vec<Source> = Vec::new();
    if let Some(addr) = &opts.bind {
        wanted.push(Source::Bind(addr.clone()));
    }
    wanted.extend(opts.endpoints.iter().cloned().map(Source::Connect));
    let Subscribed {
        mut rx,
        sources,
        bound,
    } = subscribe(&wanted, &opts.topic, limits, opts.connect_timeout, |b| {
        on_status(Status::Bound(b))
    })
    .await?;
    let bound_at = bound.into_iter().next();
    // Source index of endpoint i: after the bound socket, when there is one.
    let offset = usize::from(opts.bind.is_some());

    // Bounded: a worker waits (and stops reading its ROUTER) while the live loop catches up.
    let (rec_tx, mut rec_rx) = mpsc::channel::<Recovery>(RECOVERED_QUEUE);
    let mut workers: BTreeMap<usize, ReplayHandle> = BTreeMap::new();
    for (i, rep) in opts.replay_endpoints.iter().enumerate() {
        let src = offset + i;
        let req_tx = ReplayWorker::spawn(
            src,
            rep.clone(),
            opts.replay_timeout,
            opts.max_payload,
            limits,
            rec_tx.clone(),
        );
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
    // Messages missing in gaps and not recovered (yet).
    let mut lost = 0u64;
    // When the last live message arrived.
    let mut quiet_since = tokio::time::Instant::now();
    s.bound = bound_at;
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
        // The publishers have sent the messages asked for (by their sequence numbers), but
        // some were lost in gaps: if the live stream has gone quiet, waiting for more could
        // last forever.
        let sent_enough = opts
            .max_messages
            .is_some_and(|m| s.messages.saturating_add(lost) >= m);
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
                            lost = lost.saturating_sub(1);
                        }
                        // The publisher's own count includes it, as the total does.
                        tracker.recovered(&sources[src], &String::from_utf8_lossy(&topic));
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
            // Quiet for a replay timeout after the publishers sent enough: recovery gets one
            // more (draining), then capture stops and says why.
            _ = tokio::time::sleep_until(quiet_since + opts.replay_timeout), if sent_enough && draining.is_none() => {
                s.stopped_by = "max messages with gaps";
                draining = Some(tokio::time::Instant::now() + opts.replay_timeout);
                continue;
            }
            _ = tick.tick() => {
                let skipped = out.live.as_ref().map(|r| r.skipped_so_far()).unwrap_or_default();
                on_status(Status::Progress(&Progress {
                    messages: s.messages,
                    events: s.events,
                    gaps: s.gaps.len(),
                    malformed: s.malformed.total(),
                    skipped,
                    elapsed: started.elapsed(),
                }));
                continue;
            }
        };
        // The permit goes back to the queue's budget when this message is done with.
        let (src, frames, _permit) = match incoming {
            Incoming::Message(src, frames, permit) => (src, frames, permit),
            Incoming::Lost(peer, why) => {
                if why.kind.drops_peer() {
                    s.peers_dropped += 1;
                }
                add_malformed(&mut s.malformed, &peer, why);
                continue;
            }
        };
        quiet_since = tokio::time::Instant::now();
        let now = Instant::now();
        let first = *first_at.get_or_insert(now);
        s.active = now - first;
        let endpoint = &sources[src];
        let seq = match validate(&frames, opts.max_payload) {
            Ok(seq) => seq,
            Err(m) => {
                add_malformed(&mut s.malformed, endpoint, m);
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
                lost = lost.saturating_add(missing);
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
    out.file.commit().map_err(|e| CaptureFailure::Write {
        path: out.path.clone(),
        source: e.into_io(),
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
    file: AtomicFile,
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
        // One frame in one write: the file never holds part of a frame before it.
        self.frame.clear();
        write_frame(&mut self.frame, topic, seq, payload);
        self.file
            .write_all(&self.frame)
            .map_err(|e| CaptureFailure::Write {
                path: self.path.clone(),
                source: crate::output::os_error(e),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The live emulation is fed batches decoded with its own pool: a long capture keeps a
    /// batch's worth of recycled bodies, not one per message (decoding with another pool
    /// made the emulation's pool grow by every event captured).
    #[test]
    fn live_replay_memory_does_not_grow_with_messages() {
        use crate::events::{Batch, BatchWire, encode::encode_batch};
        use crate::routers::llm_d::IndexConfig;
        use crate::routers::llm_d::view::generation_events;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.frames");
        let mut out = Recorder {
            file: AtomicFile::create(&path).unwrap(),
            path: path.display().to_string(),
            frame: Vec::new(),
            engine: Engine::Vllm,
            live: Some(Replayer::new(ReplayOptions {
                views: vec![IndexConfig::new(16)],
                dynamo: Vec::new(),
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
}
