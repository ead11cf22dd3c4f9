//! Live mode: every pod's KV-event publisher subscribed to, the proxy in the request path,
//! the metrics endpoint; the monitor on the caller's thread, fed through one bounded queue in
//! the order things arrived (so a request's holdings are read before any event after it).
//!
//! The network side runs on a Tokio runtime of its own thread and never waits for the
//! monitor: what does not fit the queue is dropped and counted (an event batch dropped makes
//! its pod stale, as a gap does).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::catchup::Catchup;
use super::conversations::Conversations;
use super::exchange::{conversation_of, usage_counts};
use super::log::{InputCounts, Outputs};
use super::monitor::{Answer, Monitor, Totals, Unattributed};
use super::proxy::{ProxySettings, Seen, Sink};
use crate::capture::subscribe::{Incoming, Source, Subscribed, subscribe};
use crate::capture::zmtp::Limits;
use crate::capture::{
    GapRequest, RECOVERED_QUEUE, Recovery, ReplayWorker, SeqTracker, SeqVerdict, WorkerStatus,
    validate,
};
use crate::events::{Batch, Engine, decode_batch};

/// Observations waiting for the monitor, at most.
const QUEUE: usize = 16_384;
/// How often the metrics text is made again.
const METRICS_EVERY: Duration = Duration::from_millis(250);
/// After the front has drained, events are read this long at most (within `--drain`) for the
/// requests answered before their pod's events came: an engine publishes a request's stores
/// on a socket of its own, which may deliver them after the response.
const EVENTS_SETTLE: Duration = Duration::from_secs(2);
/// `Signals::awaiting` before the monitor has applied everything the front saw.
const AWAITING_UNKNOWN: usize = usize::MAX;
/// The longest request head the metrics endpoint reads.
const METRICS_HEAD: usize = 8 << 10;

/// Everything live mode needs.
pub struct LiveOptions {
    /// Each pod and where its events come from.
    pub pods: Vec<(String, Source)>,
    /// Each pod's replay (ROUTER) endpoint, when it has one, in `pods` order: gaps are
    /// recovered through it.
    pub replays: Vec<Option<String>>,
    /// How long a replay endpoint gets to answer (to connect, and between reply messages).
    pub replay_timeout: Duration,
    pub topic: String,
    pub limits: Limits,
    pub connect_timeout: Duration,
    pub engine: Engine,
    /// The proxy: where it listens and what it forwards to.
    pub proxy: Option<(SocketAddr, ProxySettings)>,
    pub metrics: Option<SocketAddr>,
    /// How often `on_summary` is called.
    pub interval: Duration,
    /// Stop after this long (else on SIGTERM or SIGINT).
    pub duration: Option<Duration>,
    /// How long in-flight exchanges get to finish after the stop.
    pub drain: Duration,
}

/// What live mode tells its caller while it runs, beside each request's results.
pub trait LiveHooks: Outputs {
    /// A socket listens (the address as bound: port 0 picks one).
    fn listening(&mut self, what: &str, addr: &str);
    /// The metrics text for these figures.
    fn metrics(&mut self, totals: &Totals, counts: &InputCounts) -> String;
    /// Every interval.
    fn summary(&mut self, totals: &Totals, counts: &InputCounts);
}

/// Why live mode could not start.
#[derive(Debug, thiserror::Error)]
pub enum LiveFailure {
    #[error("cannot start the network runtime: {0}")]
    Runtime(std::io::Error),
    #[error("cannot listen on {addr} ({what}): {source}")]
    Listen {
        what: &'static str,
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Subscribe(#[from] crate::capture::CaptureFailure),
}

enum Observation {
    Batch(usize, Batch),
    /// A gap of the pod's is being recovered: its batches wait.
    Recovering(usize),
    /// A recovery ended: the pod's batches since the gap, in order, then how many numbers
    /// never came (applied after the batches, so a clear among them cannot hide the loss) and
    /// how many were recovered.
    Released {
        pod: usize,
        batches: Vec<Batch>,
        lost: u64,
        recovered: u64,
    },
    /// The pod's publisher started again, after everything it sent before (a catch-up's
    /// batches included) was applied.
    Restarted(usize),
    PeerLost(usize, &'static str),
    Malformed(usize),
    Seen(Seen),
    /// The network side is up (every socket listening).
    Listening(&'static str, String),
    /// The front has drained: every request and response it saw is before this.
    Drained,
}

/// The most request-body bytes waiting in the queue at once.
const QUEUE_BYTES: usize = 256 << 20;

/// What the network side tells the monitor outside the queue, so that a full queue cannot lose
/// it: per pod, messages lost and whether its publisher restarted; the observations dropped;
/// the body bytes waiting.
#[derive(Default)]
struct Signals {
    lost: Vec<AtomicU64>,
    /// Per pod, the replay endpoint's failures.
    replay_failures: Vec<AtomicU64>,
    restarted: Vec<std::sync::atomic::AtomicBool>,
    dropped: AtomicU64,
    bytes: std::sync::atomic::AtomicUsize,
    /// Once the monitor has applied `Drained`: the answered requests still waiting for their
    /// pod's events (else `AWAITING_UNKNOWN`).
    awaiting: std::sync::atomic::AtomicUsize,
}

/// The network side's end of the monitor's queue. Only the network side holds it, so the
/// monitor's end closes when the network side is done.
struct Queue {
    tx: SyncSender<Observation>,
    signals: Arc<Signals>,
}

impl Queue {
    fn offer(&self, o: Observation) -> bool {
        match self.tx.try_send(o) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.signals.dropped.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }

    fn lost(&self, pod: usize, missing: u64) {
        if let Some(n) = self.signals.lost.get(pod) {
            n.fetch_add(missing, Ordering::Relaxed);
        }
    }
}

impl Sink for Queue {
    fn offer(&self, seen: Seen) {
        if let Seen::Request(_, body) = &seen {
            // Bodies wait within a byte budget: past it the request is not observed.
            let size = body.len();
            let before = self.signals.bytes.fetch_add(size, Ordering::Relaxed);
            if before + size > QUEUE_BYTES {
                self.signals.bytes.fetch_sub(size, Ordering::Relaxed);
                self.signals.dropped.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
        Queue::offer(self, Observation::Seen(seen));
    }
}

/// Runs until the stop, then drains; returns what the inputs counted.
pub fn run(
    opts: LiveOptions,
    monitor: &mut Monitor,
    conversations: &mut Conversations,
    pod_header: Option<&str>,
    hooks: &mut dyn LiveHooks,
) -> Result<InputCounts, LiveFailure> {
    let (tx, rx) = std::sync::mpsc::sync_channel(QUEUE);
    let signals = Arc::new(Signals {
        lost: opts.pods.iter().map(|_| AtomicU64::new(0)).collect(),
        replay_failures: opts.pods.iter().map(|_| AtomicU64::new(0)).collect(),
        restarted: opts.pods.iter().map(|_| Default::default()).collect(),
        awaiting: AWAITING_UNKNOWN.into(),
        ..Signals::default()
    });
    let queue = Arc::new(Queue {
        tx,
        signals: signals.clone(),
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(LiveFailure::Runtime)?;
    let metrics_text = Arc::new(Mutex::new(String::new()));
    let (started_tx, started_rx) = std::sync::mpsc::channel::<Result<(), LiveFailure>>();
    let names: Vec<String> = opts.pods.iter().map(|(n, _)| n.clone()).collect();
    let interval = opts.interval;
    let network = {
        let metrics_text = metrics_text.clone();
        std::thread::Builder::new()
            .name("watch-network".into())
            .spawn(move || {
                runtime.block_on(network(opts, queue, metrics_text, started_tx));
            })
            .map_err(LiveFailure::Runtime)?
    };
    // Started, or why not, before any figure is made.
    match started_rx.recv() {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            let _ = network.join();
            return Err(e);
        }
        Err(_) => {
            let _ = network.join();
            return Err(LiveFailure::Runtime(std::io::Error::other(
                "the network thread ended before it started",
            )));
        }
    }
    let mut counts = InputCounts::default();
    let mut last_metrics = Instant::now() - METRICS_EVERY;
    let mut last_summary = Instant::now();
    let mut seen = Seer {
        names: &names,
        monitor,
        conversations,
        pod_header,
        drained: false,
    };
    // Until the network side is done: every sender is then gone.
    loop {
        let next = rx.recv_timeout(METRICS_EVERY);
        // What the network side signalled comes before what it queued after it.
        seen.signalled(&signals, &mut counts);
        match next {
            Ok(o) => {
                if let Observation::Seen(Seen::Request(_, body)) = &o {
                    signals.bytes.fetch_sub(body.len(), Ordering::Relaxed);
                }
                seen.observe(o, hooks, &mut counts);
                if seen.drained {
                    let n = seen.monitor.awaiting_pod();
                    signals.awaiting.store(n, Ordering::Relaxed);
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        counts.dropped = signals.dropped.load(Ordering::Relaxed);
        if last_metrics.elapsed() >= METRICS_EVERY {
            last_metrics = Instant::now();
            let text = hooks.metrics(&seen.monitor.totals(), &counts);
            if let Ok(mut m) = metrics_text.lock() {
                *m = text;
            }
        }
        if last_summary.elapsed() >= interval {
            last_summary = Instant::now();
            hooks.summary(&seen.monitor.totals(), &counts);
        }
    }
    let _ = network.join();
    seen.monitor.finish();
    Ok(counts)
}

/// The monitor's side: each observation applied.
struct Seer<'s, 'a> {
    names: &'s [String],
    monitor: &'s mut Monitor<'a>,
    conversations: &'s mut Conversations,
    pod_header: Option<&'s str>,
    /// `Drained` applied: what the front saw is all here.
    drained: bool,
}

impl Seer<'_, '_> {
    /// Gaps and restarts signalled since the last look, applied to their pods.
    fn signalled(&mut self, signals: &Signals, counts: &mut InputCounts) {
        for (pod, name) in self.names.iter().enumerate() {
            if signals.restarted[pod].swap(false, Ordering::Relaxed) {
                restarted(self.monitor, counts, name);
            }
            lost(
                self.monitor,
                counts,
                name,
                signals.lost[pod].swap(0, Ordering::Relaxed),
            );
            let failures = signals.replay_failures[pod].swap(0, Ordering::Relaxed);
            if failures > 0 {
                *counts.replay_failures.entry(name.clone()).or_default() += failures;
            }
        }
    }

    fn observe(&mut self, o: Observation, hooks: &mut dyn LiveHooks, counts: &mut InputCounts) {
        let (names, monitor, conversations, pod_header) = (
            self.names,
            &mut *self.monitor,
            &mut *self.conversations,
            self.pod_header,
        );
        let name = |i: usize| names.get(i).map_or("unknown", String::as_str);
        match o {
            Observation::Batch(pod, batch) => {
                for a in monitor.events(name(pod), &batch) {
                    hooks.attributed(&a);
                }
            }
            Observation::Recovering(pod) => monitor.recovering(name(pod)),
            Observation::Released {
                pod,
                batches,
                lost,
                recovered,
            } => {
                for batch in &batches {
                    for a in monitor.events(name(pod), batch) {
                        hooks.attributed(&a);
                    }
                }
                monitor.caught_up(name(pod));
                self::lost(monitor, counts, name(pod), lost);
                if recovered > 0 {
                    *counts
                        .recovered_messages
                        .entry(name(pod).to_string())
                        .or_default() += recovered;
                }
            }
            Observation::Restarted(pod) => restarted(monitor, counts, name(pod)),
            Observation::PeerLost(pod, why) => {
                *counts
                    .peers_lost
                    .entry(name(pod).to_string())
                    .or_default()
                    .entry(why)
                    .or_default() += 1;
            }
            Observation::Malformed(pod) => {
                *counts.malformed.entry(name(pod).to_string()).or_default() += 1;
            }
            Observation::Seen(Seen::Unfollowed(why)) => {
                *counts.unfollowed.entry(why).or_default() += 1;
            }
            Observation::Listening(what, addr) => hooks.listening(what, &addr),
            Observation::Drained => self.drained = true,
            Observation::Seen(Seen::Request(id, body)) => {
                let conv = serde_json::from_slice(&body)
                    .map_err(|e| e.to_string())
                    .and_then(|v| conversation_of(&v, "request").map_err(|e| e.to_string()));
                match conv {
                    Ok(conv) => {
                        let link = conversations.observe(&conv);
                        *counts.links.entry(link).or_default() += 1;
                        let _ = monitor.arrived(id, &conv, None);
                    }
                    Err(_) => *counts.unfollowed.entry("not_a_chat_request").or_default() += 1,
                }
            }
            Observation::Seen(Seen::Response(id, message)) => {
                if !(200..300).contains(&message.status) {
                    monitor.abandoned(id, Unattributed::Refused);
                    return;
                }
                let body: Option<serde_json::Value> = message
                    .body
                    .as_deref()
                    .and_then(|b| serde_json::from_slice(b).ok());
                let (engine_prompt_tokens, engine_cached) =
                    usage_counts(body.as_ref().and_then(|b| b.get("usage")));
                let pod = pod_header
                    .and_then(|h| message.header(h))
                    .filter(|p| names.iter().any(|n| n == p))
                    .map(str::to_string);
                let answer = Answer {
                    pod,
                    engine_cached,
                    engine_prompt_tokens,
                };
                if let Some(a) = monitor.answered(id, answer) {
                    hooks.attributed(&a);
                }
            }
            Observation::Seen(Seen::Abandoned(id)) => monitor.abandoned(id, Unattributed::NoAnswer),
        }
    }
}

/// `missing` of `pod`'s messages never reached the monitor: counted, and its view marked.
fn lost(monitor: &mut Monitor, counts: &mut InputCounts, pod: &str, missing: u64) {
    if missing > 0 {
        *counts.gap_messages.entry(pod.to_string()).or_default() += missing;
        monitor.events_lost(pod, missing);
    }
}

/// `pod`'s publisher started again: counted, and its view emptied.
fn restarted(monitor: &mut Monitor, counts: &mut InputCounts, pod: &str) {
    *counts.restarts.entry(pod.to_string()).or_default() += 1;
    monitor.restarted(pod);
}

/// The network side: subscriptions, the proxy, the metrics endpoint, until the stop.
async fn network(
    opts: LiveOptions,
    queue: Arc<Queue>,
    metrics_text: Arc<Mutex<String>>,
    started: std::sync::mpsc::Sender<Result<(), LiveFailure>>,
) {
    let listen = |what: &'static str, addr: SocketAddr| async move {
        TcpListener::bind(addr)
            .await
            .map_err(|source| LiveFailure::Listen { what, addr, source })
    };
    let proxy = match &opts.proxy {
        Some((addr, settings)) => match listen(front_name(settings), *addr).await {
            Ok(l) => Some((l, settings.clone())),
            Err(e) => {
                let _ = started.send(Err(e));
                return;
            }
        },
        None => None,
    };
    let metrics = match opts.metrics {
        Some(addr) => match listen("metrics", addr).await {
            Ok(l) => Some(l),
            Err(e) => {
                let _ = started.send(Err(e));
                return;
            }
        },
        None => None,
    };
    let wanted: Vec<Source> = opts.pods.iter().map(|(_, s)| s.clone()).collect();
    let bound_queue = queue.clone();
    let mut bound_at = Vec::new();
    let subscribed = subscribe(
        &wanted,
        &opts.topic,
        opts.limits,
        opts.connect_timeout,
        |b| bound_at.push(b.to_string()),
    )
    .await;
    let Subscribed { rx, sources, .. } = match subscribed {
        Ok(s) => s,
        Err(e) => {
            let _ = started.send(Err(e.into()));
            return;
        }
    };
    for b in bound_at {
        bound_queue.offer(Observation::Listening("events", b));
    }
    if let Some((l, settings)) = &proxy
        && let Ok(a) = l.local_addr()
    {
        queue.offer(Observation::Listening(front_name(settings), a.to_string()));
    }
    if let Some(l) = &metrics
        && let Ok(a) = l.local_addr()
    {
        queue.offer(Observation::Listening("metrics", a.to_string()));
    }
    let _ = started.send(Ok(()));

    // SIGTERM or Ctrl-C; once more skips the drain.
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    let mut signalled = async move || match term.as_mut() {
        Some(t) => tokio::select! {
            _ = t.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        },
        None => {
            let _ = tokio::signal::ctrl_c().await;
        }
    };
    let deadline = async {
        match opts.duration {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    // Events go on until the proxy has drained: the requests still in flight need them.
    let (events_stop, events_stopped) = tokio::sync::oneshot::channel::<()>();
    let events = tokio::spawn(pump_events(
        rx,
        sources,
        Replays {
            endpoints: opts.replays.clone(),
            timeout: opts.replay_timeout,
            limits: opts.limits,
        },
        opts.engine,
        queue.clone(),
        events_stopped,
    ));
    // The metrics endpoint answers while the proxy drains; it stops last.
    let (metrics_stop, metrics_stopped) = tokio::sync::oneshot::channel::<()>();
    let metrics_task =
        metrics.map(|l| tokio::spawn(serve_metrics(l, metrics_text.clone(), metrics_stopped)));
    let (proxy_stop, proxy_stopped) = tokio::sync::oneshot::channel::<()>();
    let proxy_task = proxy.map(|(l, settings)| {
        let sink: Arc<dyn Sink> = queue.clone();
        tokio::spawn(super::proxy::serve(
            l,
            Arc::new(settings),
            sink,
            async move {
                let _ = proxy_stopped.await;
            },
            opts.drain,
        ))
    });
    tokio::select! {
        _ = deadline => {}
        _ = signalled() => {}
    }
    let stopped = tokio::time::Instant::now();
    let _ = proxy_stop.send(());
    if let Some(p) = proxy_task {
        tokio::select! {
            _ = p => {
                let settle = opts.drain.saturating_sub(stopped.elapsed()).min(EVENTS_SETTLE);
                tokio::select! {
                    _ = settled(&queue, settle) => {}
                    _ = signalled() => {}
                }
            }
            _ = signalled() => {}
        }
    }
    let _ = events_stop.send(());
    let _ = events.await;
    let _ = metrics_stop.send(());
    if let Some(m) = metrics_task {
        let _ = m.await;
    }
}

/// Until every request the front answered has its pod (the monitor has applied all the front
/// saw, then the events that name them), or `settle` has passed.
async fn settled(queue: &Queue, settle: Duration) {
    if !queue.offer(Observation::Drained) {
        return;
    }
    let until = tokio::time::Instant::now() + settle;
    let mut poll = tokio::time::interval(Duration::from_millis(10));
    while tokio::time::Instant::now() < until {
        if queue.signals.awaiting.load(Ordering::Relaxed) == 0 {
            return;
        }
        poll.tick().await;
    }
}

fn front_name(settings: &ProxySettings) -> &'static str {
    match settings.upstream {
        Some(_) => "proxy",
        None => "mirror",
    }
}

/// The pods' replay endpoints, as the event pump uses them.
struct Replays {
    /// Each pod's endpoint, if it has one.
    endpoints: Vec<Option<String>>,
    timeout: Duration,
    limits: Limits,
}

/// What a pod's replay worker is started with (again, when its publisher restarts).
struct WorkerSpec {
    endpoint: String,
    timeout: Duration,
    limits: Limits,
    out: tokio::sync::mpsc::Sender<Recovery>,
    /// The pods watched: a pod's workers are numbered its index, then that plus this, and
    /// so on, so that every worker's id is its own and names its pod.
    pods: usize,
}

/// One pod's gap recovery: its replay worker and the catch-up under way.
struct PodReplay {
    spec: WorkerSpec,
    /// The worker's id, which its recoveries carry: a restart starts another worker, and
    /// what the old one still sends (the old process's frames) is not taken.
    worker: usize,
    requests: tokio::sync::mpsc::Sender<GapRequest>,
    /// Gap requests handed to the worker.
    sent: u64,
    /// The number (from 1) of the catch-up's first gap request: a `down` status made before
    /// the worker took it is about an earlier catch-up.
    first: u64,
    /// The worker's failures as last counted.
    failures: u64,
    catchup: Option<Catchup<Bytes, Batch>>,
    /// When the catch-up last moved (began, or a missing batch came).
    moved: tokio::time::Instant,
}

impl PodReplay {
    fn start(spec: WorkerSpec, worker: usize) -> PodReplay {
        let requests = ReplayWorker::spawn(
            worker,
            spec.endpoint.clone(),
            spec.timeout,
            crate::events::frames::MAX_PAYLOAD,
            spec.limits,
            spec.out.clone(),
        );
        PodReplay::new(spec, worker, requests)
    }

    /// Worker `worker`, which takes gap requests on `requests`, with no catch-up under way.
    fn new(
        spec: WorkerSpec,
        worker: usize,
        requests: tokio::sync::mpsc::Sender<GapRequest>,
    ) -> PodReplay {
        PodReplay {
            spec,
            worker,
            requests,
            sent: 0,
            first: 0,
            failures: 0,
            catchup: None,
            moved: tokio::time::Instant::now(),
        }
    }

    /// The publisher restarted: what is held goes on, and a new worker takes over; the old
    /// one ends once it sees its requests closed.
    fn restart(&mut self, pod: usize, queue: &Queue) {
        self.release(pod, queue);
        let spec = WorkerSpec {
            endpoint: self.spec.endpoint.clone(),
            out: self.spec.out.clone(),
            ..self.spec
        };
        *self = PodReplay::start(spec, self.worker + self.spec.pods);
    }

    /// Asks for `from..=to`, holding the pod's batches until they come. False when they cannot
    /// be asked for (the worker's queue is full, or too many ranges wait): they are lost.
    fn ask(&mut self, pod: usize, topic: Bytes, from: u64, to: u64, queue: &Queue) -> bool {
        if self
            .requests
            .try_send(GapRequest {
                topic: topic.clone(),
                from,
                to,
            })
            .is_err()
        {
            return false;
        }
        self.sent += 1;
        let catchup = match &mut self.catchup {
            Some(c) => c,
            None => {
                // Before any later request reads the pod's view: it lags from here.
                queue.offer(Observation::Recovering(pod));
                self.moved = tokio::time::Instant::now();
                self.first = self.sent;
                self.catchup.insert(Catchup::default())
            }
        };
        if catchup.gap(&topic, from, to) {
            return true;
        }
        self.release(pod, queue);
        false
    }

    /// The stream was joined at `first`: its earlier batches are asked for (not lost if they
    /// do not come: they were sent before kvaudit listened).
    fn join(&mut self, pod: usize, topic: Bytes, first: u64, queue: &Queue) {
        if first > 0
            && self.ask(pod, topic.clone(), 0, first - 1, queue)
            && let Some(c) = &mut self.catchup
        {
            c.joined(&topic, first);
        }
    }

    /// The catch-up ends: what it held goes to the monitor in order, what never came is lost.
    fn release(&mut self, pod: usize, queue: &Queue) {
        let Some(c) = self.catchup.take() else {
            return;
        };
        let r = c.release();
        let n = r.batches.len() as u64;
        // Sent even with no batch: it ends the pod's lag in the monitor.
        let released = Observation::Released {
            pod,
            batches: r.batches,
            lost: r.lost,
            recovered: r.recovered,
        };
        if !queue.offer(released) {
            // The monitor fell behind: everything held is lost to it (nothing recovered).
            queue.lost(pod, r.lost.saturating_add(n));
        }
    }

    /// The worker's news: a catch-up its answers cannot finish any more (the endpoint failed,
    /// or every request was answered and something is still missing) ends.
    fn status(&mut self, pod: usize, status: &WorkerStatus, queue: &Queue) {
        if let Some(n) = queue.signals.replay_failures.get(pod) {
            n.fetch_add(
                status.failures.saturating_sub(self.failures),
                Ordering::Relaxed,
            );
        }
        self.failures = status.failures;
        let down = status.down && status.received >= self.first;
        if self.catchup.is_some() && (down || status.settled >= self.sent) {
            self.release(pod, queue);
        }
    }
}

/// The pod whose current replay worker is `worker`: none for a restarted pod's old worker.
fn pod_of(pods: &[Option<PodReplay>], worker: usize) -> Option<usize> {
    let pod = worker.checked_rem(pods.len())?;
    pods[pod]
        .as_ref()
        .is_some_and(|r| r.worker == worker)
        .then_some(pod)
}

/// Each pod's messages checked, numbered and decoded, onto the monitor's queue; a gap with a
/// replay endpoint is recovered before the pod's later batches go on.
async fn pump_events(
    mut rx: tokio::sync::mpsc::Receiver<Incoming>,
    sources: Vec<String>,
    replays: Replays,
    engine: Engine,
    queue: Arc<Queue>,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    let (recovered_tx, mut recovered) = tokio::sync::mpsc::channel(RECOVERED_QUEUE);
    let mut pods: Vec<Option<PodReplay>> = sources.iter().map(|_| None).collect();
    for (pod, endpoint) in replays.endpoints.into_iter().enumerate() {
        if let (Some(endpoint), Some(slot)) = (endpoint, pods.get_mut(pod)) {
            let spec = WorkerSpec {
                endpoint,
                timeout: replays.timeout,
                limits: replays.limits,
                out: recovered_tx.clone(),
                pods: sources.len(),
            };
            *slot = Some(PodReplay::start(spec, pod));
        }
    }
    drop(recovered_tx);
    let mut recovering = pods.iter().any(Option::is_some);
    // A catch-up that has not moved for this long is given up: the worker's own timeouts
    // end a silent endpoint well before.
    let patience = replays.timeout * 4;
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut tracker = SeqTracker::default();
    loop {
        tokio::select! {
            m = rx.recv() => match m {
                Some(Incoming::Message(src, frames, _permit)) => {
                    // The permit goes back to the budget once the batch is decoded.
                    let replay = pods.get_mut(src).and_then(Option::as_mut);
                    apply_message(src, &frames, engine, &mut tracker, &queue, replay);
                }
                Some(Incoming::Lost(peer, why)) => {
                    // A connected peer is named by its endpoint, a bound one "ADDR (via BOUND)".
                    let pod = sources
                        .iter()
                        .position(|s| peer == *s || peer.ends_with(&format!("(via {s})")));
                    queue.offer(Observation::PeerLost(
                        pod.unwrap_or(usize::MAX),
                        why.kind.name(),
                    ));
                }
                None => break,
            },
            r = recovered.recv(), if recovering => match r {
                Some(Recovery::Frame { src: worker, topic, seq, payload }) => {
                    let Some(src) = pod_of(&pods, worker) else { continue };
                    let Some(r) = pods.get_mut(src).and_then(Option::as_mut) else { continue };
                    let Some(c) = r.catchup.as_mut() else { continue };
                    match decode_batch(&payload, 0, engine) {
                        Ok(batch) => {
                            if c.recovered(&topic, seq, batch) {
                                r.moved = tokio::time::Instant::now();
                            }
                            // Complete, or held as long as it may be.
                            if c.complete() || c.is_full() {
                                r.release(src, &queue);
                            }
                        }
                        Err(_) => {
                            queue.offer(Observation::Malformed(src));
                        }
                    }
                }
                Some(Recovery::Status { src: worker, status }) => {
                    if let Some(src) = pod_of(&pods, worker)
                        && let Some(r) = pods.get_mut(src).and_then(Option::as_mut)
                    {
                        r.status(src, &status, &queue);
                    }
                }
                // Every worker is gone (only a panic ends one): no more to wait for.
                None => recovering = false,
            },
            _ = tick.tick(), if recovering => {
                for (pod, r) in pods.iter_mut().enumerate() {
                    if let Some(r) = r
                        && r.catchup.is_some()
                        && r.moved.elapsed() > patience
                    {
                        r.release(pod, &queue);
                    }
                }
            }
            _ = &mut stop => break,
        }
    }
    // What is held still goes to the monitor; what never came is lost.
    for (pod, r) in pods.iter_mut().enumerate() {
        if let Some(r) = r {
            r.release(pod, &queue);
        }
    }
}

/// One live message of `pod`'s onto the queue, or held by its catch-up.
fn apply_message(
    pod: usize,
    frames: &[Bytes],
    engine: Engine,
    tracker: &mut SeqTracker,
    queue: &Queue,
    mut replay: Option<&mut PodReplay>,
) {
    let Ok(seq) = validate(frames, crate::events::frames::MAX_PAYLOAD) else {
        queue.offer(Observation::Malformed(pod));
        return;
    };
    let topic = String::from_utf8_lossy(&frames[0]);
    match tracker.observe(&pod.to_string(), &topic, seq) {
        SeqVerdict::Duplicate => return,
        SeqVerdict::Restart { .. } => {
            // The old process's missing batches will not come; what it held goes first, and
            // the restart after it, in the queue's order (the flag only when the queue is
            // full). Its replay worker is the old process's too: a new one takes over.
            if let Some(r) = replay.as_deref_mut() {
                r.restart(pod, queue);
            }
            if !queue.offer(Observation::Restarted(pod))
                && let Some(r) = queue.signals.restarted.get(pod)
            {
                r.store(true, Ordering::Relaxed);
            }
        }
        SeqVerdict::Gap { after, missing } => {
            // No overflow: a gap means after < seq - 1.
            let asked = replay
                .as_deref_mut()
                .is_some_and(|r| r.ask(pod, frames[0].clone(), after + 1, seq - 1, queue));
            if !asked {
                queue.lost(pod, missing);
            }
        }
        SeqVerdict::First => {
            if let Some(r) = replay.as_deref_mut() {
                r.join(pod, frames[0].clone(), seq, queue);
            }
        }
        SeqVerdict::Next => {}
    }
    let batch = match decode_batch(&frames[2], 0, engine) {
        Ok(batch) => batch,
        Err(_) => {
            queue.offer(Observation::Malformed(pod));
            return;
        }
    };
    if let Some(r) = replay
        && let Some(c) = r.catchup.as_mut()
    {
        if !c.is_full() {
            c.hold(batch);
            return;
        }
        // Held as long as it may be: what came goes on, what did not is lost.
        r.release(pod, queue);
    }
    if !queue.offer(Observation::Batch(pod, batch)) {
        // The monitor fell behind: what this batch said is lost to it.
        queue.lost(pod, 1);
    }
}

/// `GET /metrics` answered with the latest text, until the stop; anything else 404.
async fn serve_metrics(
    listener: TcpListener,
    text: Arc<Mutex<String>>,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    loop {
        let (mut conn, _) = tokio::select! {
            a = listener.accept() => match a {
                Ok(a) => a,
                Err(_) => {
                    // Out of file descriptors, most likely: let some close.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut stop => return,
        };
        let text = text.clone();
        tokio::spawn(async move {
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            let read = tokio::time::timeout(Duration::from_secs(5), async {
                while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < METRICS_HEAD {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return false,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                true
            })
            .await;
            if !matches!(read, Ok(true)) {
                return;
            }
            let ok = head.starts_with(b"GET /metrics ") || head.starts_with(b"GET /metrics?");
            let (status, body) = if ok {
                ("200 OK", text.lock().map(|t| t.clone()).unwrap_or_default())
            } else {
                ("404 Not Found", "try /metrics\n".to_string())
            };
            let response = format!(
                "HTTP/1.1 {status}\r\ncontent-type: text/plain; version=0.0.4; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = conn.write_all(response.as_bytes()).await;
            let _ = conn.shutdown().await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pod's replay state whose worker is the returned receiver (nothing runs it).
    fn replay() -> (PodReplay, tokio::sync::mpsc::Receiver<GapRequest>) {
        let (requests, asked) = tokio::sync::mpsc::channel(8);
        let (out, _) = tokio::sync::mpsc::channel(1);
        let spec = WorkerSpec {
            endpoint: String::new(),
            timeout: Duration::from_secs(1),
            limits: Limits::new(Limits::DEFAULT_MAX_MESSAGE),
            out,
            pods: 1,
        };
        (PodReplay::new(spec, 0, requests), asked)
    }

    fn queue() -> (Queue, std::sync::mpsc::Receiver<Observation>) {
        let (tx, rx) = std::sync::mpsc::sync_channel(64);
        let signals = Arc::new(Signals {
            lost: vec![AtomicU64::new(0)],
            replay_failures: vec![AtomicU64::new(0)],
            restarted: vec![Default::default()],
            ..Signals::default()
        });
        (Queue { tx, signals }, rx)
    }

    fn down(failures: u64, received: u64) -> WorkerStatus {
        WorkerStatus {
            down: true,
            failures,
            received,
            ..WorkerStatus::default()
        }
    }

    #[tokio::test]
    async fn a_restarted_pods_old_worker_is_no_pods_worker() {
        let (q, seen) = queue();
        let (out, _) = tokio::sync::mpsc::channel(1);
        let spec = |endpoint: &str| WorkerSpec {
            endpoint: endpoint.into(),
            timeout: Duration::from_secs(1),
            limits: Limits::new(Limits::DEFAULT_MAX_MESSAGE),
            out: out.clone(),
            pods: 3,
        };
        let mut pods = vec![
            Some(PodReplay::start(spec("tcp://127.0.0.1:1"), 0)),
            None,
            Some(PodReplay::start(spec("tcp://127.0.0.1:2"), 2)),
        ];
        assert_eq!(
            (pod_of(&pods, 0), pod_of(&pods, 1), pod_of(&pods, 2)),
            (Some(0), None, Some(2))
        );
        pods[2].as_mut().unwrap().restart(2, &q);
        pods[2].as_mut().unwrap().restart(2, &q);
        // Pod 2's workers were 2, then 5, now 8: only the last names it, and no id two pods.
        assert_eq!(pods[2].as_ref().unwrap().worker, 8);
        assert_eq!(
            (pod_of(&pods, 2), pod_of(&pods, 5), pod_of(&pods, 8)),
            (None, None, Some(2))
        );
        assert_eq!(pod_of(&pods, 0), Some(0));
        assert_eq!(pod_of(&[], 0), None);
        // Nothing was held: a restart releases nothing.
        assert!(seen.try_recv().is_err());
    }

    #[test]
    fn a_failure_reported_before_the_worker_took_a_catch_ups_request_does_not_end_it() {
        let (mut r, _asked) = replay();
        let (q, _seen) = queue();
        let topic = Bytes::from_static(b"kv@d0@m");
        // A first gap; the endpoint fails on its request: the catch-up ends, the gap is lost.
        assert!(r.ask(0, topic.clone(), 5, 5, &q));
        r.status(0, &down(1, 1), &q);
        assert!(r.catchup.is_none());
        // A second gap, then the worker's report of a retry of the first that failed again,
        // made before it took the second request: the second catch-up waits on.
        assert!(r.ask(0, topic.clone(), 9, 9, &q));
        r.status(0, &down(2, 1), &q);
        assert!(r.catchup.is_some());
        // A failure once it has taken it ends it.
        r.status(0, &down(3, 2), &q);
        assert!(r.catchup.is_none());
        assert_eq!(q.signals.replay_failures[0].load(Ordering::Relaxed), 3);
    }
}
