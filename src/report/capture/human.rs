//! The capture summary's human view.

use std::fmt::Write;

use super::CaptureOutput;
use crate::capture::CaptureSummary;
use crate::report::layout::wrap_long_lines;
use crate::report::replay::ReplayOutput;
use crate::report::{Exporter, Format, Style, export};

pub struct Human;

impl Exporter<CaptureOutput<'_>> for Human {
    fn export(&self, c: &CaptureOutput<'_>, style: &Style) -> anyhow::Result<String> {
        let mut out = wrap_long_lines(&to_human(c.summary), style.width);
        if let Some(r) = &c.summary.replay {
            let replay = ReplayOutput {
                report: r,
                input: c.replay_input(),
            };
            out.push('\n');
            out.push_str(&export(&replay, Format::Human, style)?);
        }
        Ok(out)
    }
}

fn to_human(s: &CaptureSummary) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "captured {} messages ({} events, {} bytes) to {} in {:.1}s; stopped by {}",
        s.messages,
        s.events,
        s.bytes,
        s.out.display(),
        s.elapsed.as_secs_f64(),
        s.stopped_by
    );
    for p in &s.publishers {
        let _ = writeln!(
            out,
            "  {} {:?}: seq {}..{} ({} messages)",
            p.endpoint, p.topic, p.first_seq, p.last_seq, p.messages
        );
    }
    for g in &s.gaps {
        let _ = writeln!(
            out,
            "  gap on {} {:?} after seq {}: {} missing, {} recovered",
            g.endpoint, g.topic, g.after_seq, g.missing, g.recovered
        );
    }
    for r in &s.restarts {
        let _ = writeln!(
            out,
            "  restart on {} {:?}: seq {} -> {}",
            r.endpoint, r.topic, r.from_seq, r.to_seq
        );
    }
    for r in &s.replay_endpoints {
        let _ = write!(
            out,
            "  replay {} (for {}): {} requests, {} recovered",
            r.endpoint, r.publisher, r.requests, r.recovered
        );
        if r.failures > 0 {
            let _ = write!(out, ", {} failed", r.failures);
        }
        if r.dropped_gaps > 0 {
            let _ = write!(out, ", {} gaps not asked for (queue full)", r.dropped_gaps);
        }
        if r.down {
            let _ = write!(out, "; down at the end");
        }
        match &r.last_error {
            Some(e) if r.failures > 0 => {
                let _ = writeln!(out, " (last error: {e})");
            }
            _ => out.push('\n'),
        }
    }
    let unrecovered = s.unrecovered_gap_count();
    if unrecovered > 0 {
        let _ = writeln!(
            out,
            "  {unrecovered} of {} gaps not (fully) recovered",
            s.gaps.len()
        );
    }
    if s.duplicates > 0 {
        let _ = writeln!(out, "  {} duplicate messages dropped", s.duplicates);
    }
    if s.peers_dropped > 0 {
        let _ = writeln!(
            out,
            "  {} publisher connections dropped (a bound or the protocol broken):",
            s.peers_dropped
        );
    }
    for c in s.malformed.kinds().filter(|c| c.kind.drops_peer()) {
        let _ = writeln!(out, "    {}: {}", c.kind.describe(), c.count);
        for e in &c.examples {
            let _ = writeln!(out, "      from {}: {}", e.endpoint, e.detail);
        }
    }
    let malformed = s.malformed.total().saturating_sub(s.peers_dropped);
    if malformed > 0 {
        let _ = writeln!(out, "  {malformed} malformed messages (not written):");
    }
    for c in s.malformed.kinds().filter(|c| !c.kind.drops_peer()) {
        let _ = writeln!(out, "    {}: {}", c.kind.describe(), c.count);
        for e in &c.examples {
            let _ = writeln!(out, "      from {}: {}", e.endpoint, e.detail);
        }
    }
    if s.undecodable > 0 {
        let _ = writeln!(
            out,
            "  {} messages are msgpack but not event batches kvaudit knows (kept in the file)",
            s.undecodable
        );
    }
    out
}
