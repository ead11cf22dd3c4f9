//! The watch summary for a reader.

use std::fmt::Write;

use super::{WatchOutput, answer, percent};
use crate::report::layout::wrap_long_lines;
use crate::report::{Exporter, Style, thousands};

pub struct Human;

impl Exporter<WatchOutput<'_>> for Human {
    fn export(&self, out: &WatchOutput<'_>, style: &Style) -> anyhow::Result<String> {
        Ok(wrap_long_lines(&to_human(out), style.width))
    }
}

fn n(v: u64) -> String {
    thousands(v as u128)
}

/// `v` and its noun, one or many.
fn count(v: u64, one: &str, many: &str) -> String {
    format!("{} {}", n(v), if v == 1 { one } else { many })
}

/// "name count, name count": a tally for one line.
fn listed<K: std::fmt::Display>(items: impl IntoIterator<Item = (K, u64)>) -> String {
    let parts: Vec<String> = items
        .into_iter()
        .map(|(k, v)| format!("{k} {}", n(v)))
        .collect();
    parts.join(", ")
}

fn to_human(o: &WatchOutput) -> String {
    let t = o.totals;
    let c = &t.causes;
    let whole = c.total();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}: {} requests, {} prompt tokens ({}, {}, block size {})",
        o.requests,
        n(t.requests),
        n(t.prompt_tokens),
        o.model,
        o.server,
        o.block_size
    );
    out.push('\n');
    let _ = writeln!(out, "  {:<12} {:>12} {:>7}", "cause", "tokens", "share");
    for (name, v) in c.named() {
        let mut line = format!("  {name:<12} {:>12} {:>7}", n(v), percent(v, whole));
        if name == "rewritten" && !t.rewrite_classes.is_empty() {
            let classes = listed(t.rewrite_classes.iter().map(|(k, v)| (k, *v)));
            let _ = write!(line, "  ({classes})");
        }
        let _ = writeln!(out, "{line}");
    }
    out.push('\n');
    for (name, p) in &t.pods {
        let _ = write!(
            out,
            "  pod {name}: {} requests, {} reused, {} of {} blocks held, {} event batches",
            n(p.requests),
            percent(p.causes.reused, p.causes.total()),
            n(p.blocks as u64),
            n(p.capacity as u64),
            n(p.batches)
        );
        if let Some(why) = p.stale {
            let _ = write!(out, ", view stale ({why})");
        }
        if !p.unapplied.is_empty() {
            let unapplied = listed(p.unapplied.iter().map(|(k, v)| (k, *v)));
            let _ = write!(out, ", events not applied: {unapplied}");
        }
        if let Some(m) = o.counts.malformed.get(name) {
            let _ = write!(out, ", {} messages malformed", n(*m));
        }
        if let Some(m) = o.counts.recovered_messages.get(name) {
            let _ = write!(out, ", {} messages recovered through replay", n(*m));
        }
        if let Some(m) = o.counts.gap_messages.get(name) {
            let _ = write!(out, ", {} messages lost in gaps", n(*m));
        }
        if let Some(m) = o.counts.replay_failures.get(name) {
            let _ = write!(
                out,
                ", {}",
                count(*m, "replay endpoint failure", "replay endpoint failures")
            );
        }
        if let Some(m) = o.counts.restarts.get(name) {
            let _ = write!(
                out,
                ", {}",
                count(*m, "publisher restart", "publisher restarts")
            );
        }
        if let Some(lost) = o.counts.peers_lost.get(name) {
            let lost = listed(lost.iter().map(|(k, v)| (k, *v)));
            let _ = write!(out, ", connections lost: {lost}");
        }
        out.push('\n');
    }
    for r in &t.routers {
        let _ = write!(
            out,
            "  router {} ({}): {}, its rule sends {} back to the previous turn's pod",
            r.router,
            r.version,
            count(r.turns, "turn", "turns"),
            n(r.rule_back)
        );
        if r.observed > 0 {
            let _ = write!(
                out,
                "; {} of {} went where its rule says",
                n(r.as_rule),
                n(r.observed)
            );
        }
        let misrouted: Vec<String> = r
            .misrouted
            .iter()
            .map(|(why, v)| format!("{} ({why})", n(*v)))
            .collect();
        if !misrouted.is_empty() {
            let _ = write!(out, "; misrouted tokens: {}", misrouted.join(", "));
        }
        out.push('\n');
    }
    if !o.counts.links.is_empty() {
        let links = listed(o.counts.links.iter().map(|(k, v)| (k.as_str(), *v)));
        let _ = writeln!(out, "  turns: {links}");
    }
    if c.disagreement > 0 {
        let _ = writeln!(
            out,
            "  the engines' cached_tokens differ from what their events say they held by {} tokens",
            n(c.disagreement)
        );
    }
    if t.prompt_mismatches > 0 {
        let _ = writeln!(
            out,
            "  {} requests the engine counted otherwise than kvaudit rendered them (check --server and the template)",
            n(t.prompt_mismatches)
        );
    }
    for (why, v) in &t.unattributed {
        let _ = writeln!(
            out,
            "  {} not attributed: {}",
            count(*v, "request", "requests"),
            why.as_str()
        );
    }
    if !o.counts.unfollowed.is_empty() {
        let what = listed(o.counts.unfollowed.iter().map(|(k, v)| (k, *v)));
        let _ = writeln!(out, "  not followed (bytes passed unchanged): {what}");
    }
    if o.counts.dropped > 0 {
        let _ = writeln!(
            out,
            "  {} dropped: the monitor's queue was full",
            count(o.counts.dropped, "observation", "observations")
        );
    }
    for (why, v) in &o.counts.bad_lines {
        let _ = writeln!(out, "  {} not a request: {why}", count(*v, "line", "lines"));
    }
    if let Some((line, why)) = &o.counts.first_bad {
        let _ = writeln!(out, "    first at line {line}: {why}");
    }
    out.push('\n');
    let _ = writeln!(out, "{}", answer(t));
    out
}
