//! The replay human summary.

use std::fmt::Write;

use super::{InputInfo, ReplayOutput};
use crate::index::{DropReason, Reason};
use crate::replay::ReplayReport;
use crate::report::Exporter;

pub struct Human;

impl Exporter<ReplayOutput<'_>> for Human {
    fn export(&self, out: &ReplayOutput<'_>) -> anyhow::Result<String> {
        Ok(to_human(out.report, &out.input))
    }
}

fn to_human(r: &ReplayReport, input: &InputInfo) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} ({}): {} messages, {} events ({} stored, {} removed, {} cleared){}",
        input.path,
        input.format,
        r.messages,
        r.events.block_stored + r.events.block_removed + r.events.all_blocks_cleared,
        r.events.block_stored,
        r.events.block_removed,
        r.events.all_blocks_cleared,
        if r.malformed.is_empty() {
            String::new()
        } else {
            format!(", {} malformed", r.malformed.len())
        },
    );
    for k in &r.malformed.kinds {
        let (first, why) = k
            .examples
            .first()
            .map(|e| (e.offset, e.reason.as_str()))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  {:>8} malformed: {} (first at byte {first}: {why})",
            k.count,
            k.kind.as_str()
        );
    }
    if r.events.token_ids_out_of_range > 0 {
        let _ = writeln!(
            out,
            "  {:>8} BlockStored events with a token id outside 0..2^32 (cast to u32 as llm-d does)",
            r.events.token_ids_out_of_range
        );
    }
    for (reason, n) in r.engine_skipped.iter() {
        let _ = writeln!(
            out,
            "  {n:>8} BlockStored events the engine view cannot split into blocks: {reason}"
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:>6}  {:<15} {:>9} {:>9} {:>9} {:>11} {:>11}  {:>16}",
        "block",
        "profile",
        "msgs lost",
        "stores ok",
        "skipped",
        "tok stored",
        "tok indexed",
        "seq engine/index"
    );
    let engine: usize = r.sequences.iter().map(|s| s.engine_tokens).sum();
    for (i, v) in r.views.iter().enumerate() {
        let index: usize = r.sequences.iter().map(|s| s.index_tokens[i]).sum();
        let _ = writeln!(
            out,
            "{:>6}  {:<15} {:>9} {:>9} {:>9} {:>11} {:>11}  {:>16}",
            v.config.block_size,
            v.config.profile.name(),
            v.stats.messages_dropped.total(),
            v.stats.stores_accepted,
            v.stats.stores_skipped.total(),
            v.stats.tokens_stored,
            v.stats.tokens_indexed,
            format!("{engine}/{index}"),
        );
    }
    for v in &r.views {
        if v.stats.messages_dropped.is_empty() && v.stats.stores_skipped.is_empty() {
            continue;
        }
        let _ = writeln!(
            out,
            "\nblock {}: why llm-d loses events",
            v.config.block_size
        );
        for (reason, n) in v.stats.messages_dropped.reasons() {
            let what = match reason {
                DropReason::BatchDecodeError => "whole messages llm-d cannot decode",
                DropReason::BatchIsMap => "messages whose batch is a map (zero events)",
            };
            let _ = writeln!(out, "  {n:>8}  {} ({what})", reason.as_str());
        }
        for (reason, n) in v.stats.stores_skipped.reasons() {
            let reason_name = reason.as_str();
            let counted = if reason.counted_by_llm_d(v.config.profile) {
                "counted by llm-d"
            } else {
                "not counted by llm-d"
            };
            let _ = writeln!(out, "  {n:>8}  {reason_name} ({counted})");
        }
    }
    if !r.sequences.is_empty() {
        let last = r.views.len().saturating_sub(1);
        let mut worst: Vec<_> = r.sequences.iter().collect();
        worst.sort_by_key(|s| {
            std::cmp::Reverse(
                s.engine_tokens
                    .saturating_sub(s.index_tokens.get(last).copied().unwrap_or(0)),
            )
        });
        let _ = writeln!(
            out,
            "\nsequences the engine holds ({}), worst first:",
            r.sequences.len()
        );
        let header: Vec<String> = r
            .views
            .iter()
            .map(|v| format!("index@{}", v.config.block_size))
            .collect();
        let _ = writeln!(
            out,
            "  {:<20} {:<24} {:>8}  {}",
            "pod",
            "model",
            "engine",
            header.join("  ")
        );
        for s in worst.iter().take(10) {
            let cols: Vec<String> = s
                .index_tokens
                .iter()
                .zip(&header)
                .map(|(t, h)| format!("{t:>w$}", w = h.len()))
                .collect();
            let _ = writeln!(
                out,
                "  {:<20} {:<24} {:>8}  {}",
                s.pod,
                s.model,
                s.engine_tokens,
                cols.join("  ")
            );
        }
        if r.incomplete_sequences > 0 {
            let _ = writeln!(
                out,
                "  ({} more whose root block the engine no longer holds)",
                r.incomplete_sequences
            );
        }
    }
    if !r.lookups.is_empty() {
        let _ = writeln!(out, "\nlookups:");
        for l in &r.lookups {
            let found: Vec<String> = r
                .views
                .iter()
                .zip(&l.index_tokens)
                .map(|(v, t)| format!("{t} at block {}", v.config.block_size))
                .collect();
            let _ = writeln!(
                out,
                "  {} {}: {} tokens, index finds {}",
                l.pod,
                l.model,
                l.tokens,
                found.join(", ")
            );
        }
    }
    if let Some((offset, reason)) = &input.error {
        let _ = writeln!(
            out,
            "\nstopped at byte {offset}: {reason} (counts above cover the messages before it)"
        );
    }
    out
}
