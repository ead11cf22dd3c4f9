//! capture summary: JSON (stable field names) and the human view.

use std::fmt::Write;

use serde_json::{Value as Json, json};

use crate::capture::CaptureSummary;

pub const SCHEMA_VERSION: u32 = 1;

/// The live replay's input: the file being captured.
fn captured(path: &str) -> crate::report::replay::InputInfo<'_> {
    crate::report::replay::InputInfo {
        path,
        format: "frames",
        error: None,
    }
}

pub fn to_json(s: &CaptureSummary) -> Json {
    let mut v = json!({
        "schema_version": SCHEMA_VERSION,
        "out": s.out.display().to_string(),
        "bound": s.bound,
        "messages": s.messages,
        "events": s.events,
        "bytes": s.bytes,
        "publishers": s.publishers.iter().map(|p| json!({
            "endpoint": p.endpoint, "topic": p.topic, "first_seq": p.first_seq, "last_seq": p.last_seq, "messages": p.messages,
        })).collect::<Vec<_>>(),
        "gaps": s.gaps.iter().map(|g| json!({
            "endpoint": g.endpoint, "topic": g.topic, "after_seq": g.after_seq, "missing": g.missing, "recovered": g.recovered,
        })).collect::<Vec<_>>(),
        "restarts": s.restarts.iter().map(|r| json!({
            "endpoint": r.endpoint, "topic": r.topic, "from_seq": r.from_seq, "to_seq": r.to_seq,
        })).collect::<Vec<_>>(),
        "gaps_unrecovered": s.unrecovered_gap_count(),
        "replay_endpoints": s.replay_endpoints.iter().map(|r| json!({
            "endpoint": r.endpoint, "publisher": r.publisher, "requests": r.requests, "failures": r.failures,
            "recovered": r.recovered, "dropped_gaps": r.dropped_gaps, "down": r.down, "last_error": r.last_error,
        })).collect::<Vec<_>>(),
        "duplicates": s.duplicates,
        "malformed": s.malformed.total(),
        "malformed_kinds": s.malformed.kinds().map(|c| (c.kind.name().to_string(), json!({
            "count": c.count,
            "examples": c.examples.iter().map(|e| json!({"endpoint": e.endpoint, "detail": e.detail})).collect::<Vec<_>>(),
        }))).collect::<serde_json::Map<_, _>>(),
        "undecodable": s.undecodable,
        "stopped_by": s.stopped_by,
        "elapsed_seconds": s.elapsed.as_secs_f64(),
        "active_seconds": s.active.as_secs_f64(),
    });
    if let Some(r) = &s.replay {
        let path = s.out.display().to_string();
        v["replay"] = crate::report::replay::to_json(r, &captured(&path));
    }
    v
}

pub fn to_human(s: &CaptureSummary) -> String {
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
    if s.malformed.total() > 0 {
        let _ = writeln!(
            out,
            "  {} malformed messages (not written):",
            s.malformed.total()
        );
    }
    for c in s.malformed.kinds() {
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
    if let Some(r) = &s.replay {
        let path = s.out.display().to_string();
        let input = captured(&path);
        let _ = writeln!(out);
        out.push_str(&crate::report::replay::to_human(r, &input));
    }
    out
}
