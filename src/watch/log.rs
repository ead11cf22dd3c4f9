//! Request-log mode: a day of requests (JSONL) and each pod's capture of its KV events, merged
//! in time order (the events' `ts` and the lines' `ts`, both on the engines' clock) through
//! the same monitor the live modes feed.

use std::collections::BTreeMap;
use std::io::{BufRead, Read};

use serde::Serialize;

use super::conversations::{Conversations, Link};
use super::exchange::{LineError, MAX_LINE, parse_line};
use super::monitor::{Attributed, Monitor};
use crate::events::frames::CaptureReader;
use crate::events::{Batch, Engine, decode_batch};

/// Where a run's per-request results go as they are made.
pub trait Outputs {
    /// Conversations forgotten (the LRU was full), as corpus rows, when recording.
    fn forgotten(&mut self, rows: Vec<serde_json::Value>);
    /// Each request as it is attributed.
    fn attributed(&mut self, a: &Attributed);
}

/// One pod's capture.
pub struct PodCapture {
    pub name: String,
    pub reader: CaptureReader<Box<dyn Read>>,
}

/// What reading the inputs counted, beside the monitor's totals: the log's lines and the
/// captures' messages, or the live streams and the proxy.
#[derive(Debug, Clone, Default, Serialize)]
pub struct InputCounts {
    /// Request-log lines read.
    pub lines: u64,
    /// Requests by how they linked to the one before them.
    pub links: BTreeMap<Link, u64>,
    /// Lines that are not requests, by reason.
    pub bad_lines: BTreeMap<&'static str, u64>,
    /// The first of them: its line number and why.
    pub first_bad: Option<(u64, String)>,
    /// Event messages that do not decode, by pod.
    pub malformed: BTreeMap<String, u64>,
    /// Live: messages lost in sequence gaps and not recovered, by pod.
    pub gap_messages: BTreeMap<String, u64>,
    /// Live: messages recovered through the pod's replay endpoint (of gaps, and of the history
    /// before a late join), by pod.
    pub recovered_messages: BTreeMap<String, u64>,
    /// Live: replay endpoint failures (no connection, no answer, a broken reply), by pod.
    pub replay_failures: BTreeMap<String, u64>,
    /// Live: publisher restarts (the pod's view starts again empty), by pod.
    pub restarts: BTreeMap<String, u64>,
    /// Live: connections to a pod's publisher given up on or lost, by pod and reason.
    pub peers_lost: BTreeMap<String, BTreeMap<&'static str, u64>>,
    /// Proxy: exchanges or connections it could not follow (their bytes went through), by
    /// reason.
    pub unfollowed: BTreeMap<&'static str, u64>,
    /// Observations dropped because the monitor's queue was full.
    pub dropped: u64,
}

fn reason(e: &LineError) -> &'static str {
    match e {
        LineError::Json(_) => "json",
        LineError::NoRequest => "no_request",
        LineError::Time => "ts",
        LineError::Pod => "pod",
        LineError::Body(_) => "body",
    }
}

/// A pod's next batch, read ahead so the earliest of all sources goes first.
struct Ahead {
    name: String,
    reader: CaptureReader<Box<dyn Read>>,
    next: Option<Batch>,
}

impl Ahead {
    fn advance(&mut self, engine: Engine, counts: &mut InputCounts) {
        self.next = None;
        while let Some(m) = self.reader.next_message() {
            let decoded = m
                .ok()
                .and_then(|m| decode_batch(&m.payload, 0, engine).ok());
            match decoded {
                Some(mut b) => {
                    // A time that is not a number orders before everything: applied as soon
                    // as it is read, not never.
                    if b.ts.is_nan() {
                        b.ts = f64::NEG_INFINITY;
                    }
                    self.next = Some(b);
                    return;
                }
                None => *counts.malformed.entry(self.name.clone()).or_default() += 1,
            }
        }
    }
}

/// Runs the log through `monitor`, every pod's events applied up to each request's time.
pub fn run(
    requests: &mut dyn BufRead,
    source: &str,
    pods: Vec<PodCapture>,
    engine: Engine,
    monitor: &mut Monitor,
    conversations: &mut Conversations,
    outputs: &mut dyn Outputs,
) -> std::io::Result<InputCounts> {
    let mut counts = InputCounts::default();
    let mut pods: Vec<Ahead> = pods
        .into_iter()
        .map(|p| Ahead {
            name: p.name,
            reader: p.reader,
            next: None,
        })
        .collect();
    for p in &mut pods {
        p.advance(engine, &mut counts);
    }
    let mut buf = Vec::new();
    let bad = |counts: &mut InputCounts, line: u64, why: &'static str, text: String| {
        *counts.bad_lines.entry(why).or_default() += 1;
        counts.first_bad.get_or_insert((line, text));
    };
    while let Some(whole) = crate::input::read_line_bounded(requests, MAX_LINE, &mut buf)? {
        counts.lines += 1;
        let line_no = counts.lines;
        if !whole {
            bad(
                &mut counts,
                line_no,
                "too_long",
                format!("longer than {MAX_LINE} bytes"),
            );
            continue;
        }
        let text = String::from_utf8_lossy(&buf);
        if text.trim().is_empty() {
            continue;
        }
        let line = match parse_line(&text, &format!("{source}:{line_no}")) {
            Ok(l) => l,
            Err(e) => {
                bad(&mut counts, line_no, reason(&e), e.to_string());
                continue;
            }
        };
        // Every event published before the request arrived.
        apply_until(&mut pods, line.ts, engine, monitor, &mut counts, outputs);
        let link = conversations.observe(&line.exchange.conversation);
        *counts.links.entry(link).or_default() += 1;
        let forgotten_rows = conversations.take_forgotten();
        if !forgotten_rows.is_empty() {
            outputs.forgotten(forgotten_rows);
        }
        if let Ok(Some(a)) = monitor.request(&line.exchange) {
            outputs.attributed(&a);
        }
    }
    // The events after the last request can still name the pods of requests waiting.
    apply_until(
        &mut pods,
        f64::INFINITY,
        engine,
        monitor,
        &mut counts,
        outputs,
    );
    monitor.finish();
    Ok(counts)
}

/// Applies every pod's batches published at or before `until`, earliest first (a request at
/// the same instant as an event comes after it).
fn apply_until(
    pods: &mut [Ahead],
    until: f64,
    engine: Engine,
    monitor: &mut Monitor,
    counts: &mut InputCounts,
    outputs: &mut dyn Outputs,
) {
    loop {
        let earliest = pods
            .iter_mut()
            .filter_map(|p| match &p.next {
                Some(b) if b.ts <= until => Some((b.ts, p)),
                _ => None,
            })
            .min_by(|a, b| a.0.total_cmp(&b.0));
        let Some((_, p)) = earliest else { return };
        if let Some(batch) = p.next.take() {
            for a in monitor.events(&p.name, &batch) {
                outputs.attributed(&a);
            }
        }
        p.advance(engine, counts);
    }
}
