//! The capture summary: its view (the JSON shape, defined once) and its exporters.

mod human;

use serde::Serialize;
use serde::ser::SerializeMap;

use super::replay::{InputInfo, ReplayView};
use super::{Exporter, Format, Report, View};
use crate::capture::{CaptureSummary, MalformedCounts};

/// The JSON shape of the capture summary (the live replay inside it keeps the replay schema).
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Serialize)]
pub struct CaptureView<'a> {
    pub schema_version: u32,
    pub out: String,
    /// The address `--bind` listened on (its port when 0 was asked for).
    pub bound: Option<&'a str>,
    pub messages: u64,
    pub events: u64,
    pub bytes: u64,
    pub publishers: Vec<PublisherView<'a>>,
    pub gaps: Vec<GapView<'a>>,
    pub restarts: Vec<RestartView<'a>>,
    pub gaps_unrecovered: usize,
    pub replay_endpoints: Vec<ReplayEndpointView<'a>>,
    pub duplicates: u64,
    /// Everything in `malformed_kinds`: messages not captured, and publisher connections
    /// that failed or were dropped.
    pub malformed: u64,
    pub malformed_kinds: MalformedKindsView<'a>,
    /// Publisher connections closed for breaking a bound or the protocol (part of
    /// `malformed`; a finding).
    pub peers_dropped: u64,
    pub undecodable: u64,
    pub stopped_by: &'static str,
    pub elapsed_seconds: f64,
    pub active_seconds: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replay: Option<ReplayView<'a>>,
}

#[derive(Serialize)]
pub struct PublisherView<'a> {
    pub endpoint: &'a str,
    pub topic: &'a str,
    pub first_seq: u64,
    pub last_seq: u64,
    pub messages: u64,
}

#[derive(Serialize)]
pub struct GapView<'a> {
    pub endpoint: &'a str,
    pub topic: &'a str,
    pub after_seq: u64,
    pub missing: u64,
    pub recovered: u64,
}

#[derive(Serialize)]
pub struct RestartView<'a> {
    pub endpoint: &'a str,
    pub topic: &'a str,
    pub from_seq: u64,
    pub to_seq: u64,
}

#[derive(Serialize)]
pub struct ReplayEndpointView<'a> {
    pub endpoint: &'a str,
    pub publisher: &'a str,
    pub requests: u64,
    pub failures: u64,
    pub recovered: u64,
    pub dropped_gaps: u64,
    pub down: bool,
    pub last_error: Option<&'a str>,
}

/// `{kind: {count, examples: [{endpoint, detail}]}}`.
pub struct MalformedKindsView<'a>(&'a MalformedCounts);

#[derive(Serialize)]
struct MalformedKindView<'a> {
    count: u64,
    examples: Vec<ExampleView<'a>>,
}

#[derive(Serialize)]
struct ExampleView<'a> {
    endpoint: &'a str,
    detail: &'a str,
}

impl Serialize for MalformedKindsView<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        for c in self.0.kinds() {
            let examples = c
                .examples
                .iter()
                .map(|e| ExampleView {
                    endpoint: &e.endpoint,
                    detail: &e.detail,
                })
                .collect();
            map.serialize_entry(
                c.kind.name(),
                &MalformedKindView {
                    count: c.count,
                    examples,
                },
            )?;
        }
        map.end()
    }
}

/// A capture summary with the replay input it names (the file being captured).
pub struct CaptureOutput<'a> {
    pub summary: &'a CaptureSummary,
    out_path: &'a str,
}

impl<'a> CaptureOutput<'a> {
    pub fn new(summary: &'a CaptureSummary, out_path: &'a str) -> Self {
        CaptureOutput { summary, out_path }
    }

    /// The live replay's input: the file being captured.
    pub fn replay_input(&self) -> InputInfo<'a> {
        InputInfo {
            path: self.out_path,
            format: "frames",
            error: None,
        }
    }
}

impl View for CaptureOutput<'_> {
    type View<'a>
        = CaptureView<'a>
    where
        Self: 'a;

    fn view(&self) -> CaptureView<'_> {
        let s = self.summary;
        CaptureView {
            schema_version: SCHEMA_VERSION,
            out: s.out.display().to_string(),
            bound: s.bound.as_deref(),
            messages: s.messages,
            events: s.events,
            bytes: s.bytes,
            publishers: s
                .publishers
                .iter()
                .map(|p| PublisherView {
                    endpoint: &p.endpoint,
                    topic: &p.topic,
                    first_seq: p.first_seq,
                    last_seq: p.last_seq,
                    messages: p.messages,
                })
                .collect(),
            gaps: s
                .gaps
                .iter()
                .map(|g| GapView {
                    endpoint: &g.endpoint,
                    topic: &g.topic,
                    after_seq: g.after_seq,
                    missing: g.missing,
                    recovered: g.recovered,
                })
                .collect(),
            restarts: s
                .restarts
                .iter()
                .map(|r| RestartView {
                    endpoint: &r.endpoint,
                    topic: &r.topic,
                    from_seq: r.from_seq,
                    to_seq: r.to_seq,
                })
                .collect(),
            gaps_unrecovered: s.unrecovered_gap_count(),
            replay_endpoints: s
                .replay_endpoints
                .iter()
                .map(|r| ReplayEndpointView {
                    endpoint: &r.endpoint,
                    publisher: &r.publisher,
                    requests: r.requests,
                    failures: r.failures,
                    recovered: r.recovered,
                    dropped_gaps: r.dropped_gaps,
                    down: r.down,
                    last_error: r.last_error.as_deref(),
                })
                .collect(),
            duplicates: s.duplicates,
            malformed: s.malformed.total(),
            malformed_kinds: MalformedKindsView(&s.malformed),
            peers_dropped: s.peers_dropped,
            undecodable: s.undecodable,
            stopped_by: s.stopped_by,
            elapsed_seconds: s.elapsed.as_secs_f64(),
            active_seconds: s.active.as_secs_f64(),
            replay: s
                .replay
                .as_ref()
                .map(|r| ReplayView::new(r, &self.replay_input())),
        }
    }
}

impl Report for CaptureOutput<'_> {
    const NAME: &'static str = "capture";

    fn exporter(&self, format: Format) -> Option<&dyn Exporter<Self>> {
        super::human_or_json(format, &human::Human)
    }
}
