//! What a capture reports: counts, publishers, gaps and their recovery, restarts, malformed
//! messages by kind.

use std::path::PathBuf;
use std::time::Duration;

use super::sequence::PublisherState;
use super::validate::{Malformed, MalformedKind};
use crate::replay::ReplayReport;
use crate::tally::{KindCounts, Order};

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

/// Malformed messages by kind, listed in the kind's order, with the first few of each:
/// memory and summary size do not grow with their number.
pub type MalformedCounts = KindCounts<MalformedKind, MalformedExample>;

/// Count one malformed message from `endpoint`.
pub(super) fn add_malformed(counts: &mut MalformedCounts, endpoint: &str, m: Malformed) {
    counts.add(m.kind, || MalformedExample {
        endpoint: endpoint.to_string(),
        detail: m.detail,
    });
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
    /// Where `--bind` listened (with the port the system chose for port 0).
    pub bound: Option<String>,
    pub messages: u64,
    pub events: u64,
    /// Well-formed msgpack that is not a known event batch (written, not counted as events).
    pub undecodable: u64,
    pub publishers: Vec<PublisherState>,
    pub gaps: Vec<Gap>,
    pub restarts: Vec<Restart>,
    pub duplicates: u64,
    /// Malformed messages, and publisher connections that failed or were dropped, by kind.
    pub malformed: MalformedCounts,
    /// Publisher connections closed by capture for breaking a bound or the protocol (their
    /// kinds in `malformed`, where `MalformedKind::drops_peer`).
    pub peers_dropped: u64,
    pub replay_endpoints: Vec<ReplayEndpointSummary>,
    pub stopped_by: &'static str,
    pub elapsed: Duration,
    /// From the first message received to the last one written (throughput's denominator).
    pub active: Duration,
    pub bytes: u64,
    pub replay: Option<ReplayReport>,
}

impl CaptureSummary {
    pub(super) fn new(out: PathBuf) -> CaptureSummary {
        CaptureSummary {
            out,
            bound: None,
            messages: 0,
            events: 0,
            undecodable: 0,
            publishers: Vec::new(),
            gaps: Vec::new(),
            restarts: Vec::new(),
            duplicates: 0,
            malformed: MalformedCounts::new(Order::ByKind),
            peers_dropped: 0,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Thousands of malformed messages leave a count per kind and three examples each.
    #[test]
    fn malformed_counts_stay_small() {
        let mut m = MalformedCounts::new(Order::ByKind);
        for i in 0..10_000 {
            add_malformed(
                &mut m,
                "e",
                Malformed::new(MalformedKind::NotMsgpack, format!("{i}")),
            );
        }
        add_malformed(
            &mut m,
            "f",
            Malformed::new(MalformedKind::FrameCount, "x".into()),
        );
        assert_eq!(m.total(), 10_001);
        let kinds: Vec<_> = m
            .kinds()
            .map(|c| (c.kind, c.count, c.examples.len()))
            .collect();
        // By kind, not as first seen: the summary lists them in a fixed order.
        assert_eq!(
            kinds,
            [
                (MalformedKind::FrameCount, 1, 1),
                (MalformedKind::NotMsgpack, 10_000, crate::tally::EXAMPLES)
            ]
        );
        let c = m.kinds().nth(1).unwrap();
        assert_eq!(
            (
                c.examples[2].endpoint.as_str(),
                c.examples[2].detail.as_str()
            ),
            ("e", "2")
        );
    }
}
