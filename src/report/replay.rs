//! replay output: JSON (stable field names), Prometheus text, and the human summary.

use std::fmt::Write;

use serde_json::{Value as Json, json};

use crate::index::{DropReason, Reason};
use crate::replay::ReplayReport;

pub const SCHEMA_VERSION: u32 = 1;

/// Where the input came from and how far it was read.
pub struct InputInfo<'a> {
    pub path: &'a str,
    pub format: &'a str,
    /// Set when reading stopped on an undecodable message.
    pub error: Option<(u64, String)>,
}

pub fn to_json(r: &ReplayReport, input: &InputInfo) -> Json {
    let views: Vec<Json> = r
        .views
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let sequences: Vec<Json> = r
                .sequences
                .iter()
                .map(|s| json!({"pod": s.pod, "model": s.model, "engine_tokens": s.engine_tokens, "index_tokens": s.index_tokens[i]}))
                .collect();
            let lookups: Vec<Json> = r
                .lookups
                .iter()
                .map(|l| json!({"pod": l.pod, "model": l.model, "tokens": l.tokens, "index_tokens": l.index_tokens[i]}))
                .collect();
            let mut view = json!({
                "index_block_size": v.config.block_size,
                "profile": v.config.profile.name(),
                "hash": v.config.algo.name(),
                "messages_dropped": v.stats.messages_dropped,
                "stores_accepted": v.stats.stores_accepted,
                "stores_skipped": v.stats.stores_skipped,
                "stores_with_dropped_tail": v.stats.stores_with_dropped_tail,
                "tier_updates": v.stats.tier_updates,
                "tokens_stored": v.stats.tokens_stored,
                "tokens_indexed": v.stats.tokens_indexed,
                "removed_hashes_forwarded": v.stats.removed_hashes_forwarded,
                "removed_hashes_suppressed": v.stats.removed_hashes_suppressed,
                "sequences": sequences,
            });
            if !r.lookups.is_empty() {
                view["lookups"] = Json::Array(lookups);
            }
            view
        })
        .collect();
    let mut input_json = json!({"path": input.path, "format": input.format, "bytes_read": r.bytes});
    if let Some((offset, reason)) = &input.error {
        input_json["error"] = json!({"offset": offset, "reason": reason});
    }
    json!({
        "schema_version": SCHEMA_VERSION,
        "input": input_json,
        "messages": r.messages,
        "malformed": r.malformed.total(),
        "malformed_kinds": malformed_json(r),
        "events": {
            "block_stored": r.events.block_stored,
            "block_removed": r.events.block_removed,
            "all_blocks_cleared": r.events.all_blocks_cleared,
            "token_ids_out_of_range": r.events.token_ids_out_of_range,
        },
        "engine_skipped": r.engine_skipped,
        "incomplete_sequences": r.incomplete_sequences,
        "views": views,
    })
}

/// `{kind: {count, examples: [{offset, reason}]}}`, bounded whatever the input.
fn malformed_json(r: &ReplayReport) -> Json {
    let mut out = serde_json::Map::new();
    for k in r.malformed.kinds() {
        let examples: Vec<Json> = k
            .examples
            .iter()
            .map(|e| json!({"offset": e.offset, "reason": e.reason}))
            .collect();
        out.insert(
            k.kind.as_str().to_string(),
            json!({"count": k.count, "examples": examples}),
        );
    }
    Json::Object(out)
}

fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The counters llm-d would export for this stream, plus kvaudit's own per-reason counter.
/// Each series carries the view's `index_block_size` so a sweep stays one scrape.
pub fn to_prometheus(r: &ReplayReport) -> String {
    let mut out = String::new();
    out.push_str("# HELP llm_d_epp_kv_cache_events_stores_skipped_total BlockStored events llm-d skips, by the reasons it counts.\n");
    out.push_str("# TYPE llm_d_epp_kv_cache_events_stores_skipped_total counter\n");
    for v in &r.views {
        for (kind, reason, n) in v.stats.stores_skipped_by_kind.iter() {
            let _ = writeln!(
                out,
                "llm_d_epp_kv_cache_events_stores_skipped_total{{cache_kind=\"{}\",reason=\"{}\",index_block_size=\"{}\",profile=\"{}\"}} {n}",
                label(kind),
                reason,
                v.config.block_size,
                v.config.profile.name()
            );
        }
    }
    out.push_str("# HELP llm_d_epp_kv_cache_events_removals_skipped_total BlockRemoved events llm-d skips.\n");
    out.push_str("# TYPE llm_d_epp_kv_cache_events_removals_skipped_total counter\n");
    for v in &r.views {
        for ((kind, reason), n) in &v.stats.removals_skipped {
            let _ = writeln!(
                out,
                "llm_d_epp_kv_cache_events_removals_skipped_total{{cache_kind=\"{}\",reason=\"{}\",index_block_size=\"{}\"}} {n}",
                label(kind),
                reason,
                v.config.block_size
            );
        }
    }
    out.push_str("# HELP kvaudit_events_skipped_total Events or messages llm-d would not index, by every reason (llm-d counts only some).\n");
    out.push_str("# TYPE kvaudit_events_skipped_total counter\n");
    for v in &r.views {
        let series = v
            .stats
            .stores_skipped
            .iter()
            .chain(v.stats.messages_dropped.iter());
        for (reason, n) in series {
            let _ = writeln!(
                out,
                "kvaudit_events_skipped_total{{reason=\"{reason}\",index_block_size=\"{}\",profile=\"{}\"}} {n}",
                v.config.block_size,
                v.config.profile.name()
            );
        }
    }
    out.push_str(
        "# HELP kvaudit_tokens_total Tokens in BlockStored events, and tokens the index covers.\n",
    );
    out.push_str("# TYPE kvaudit_tokens_total counter\n");
    for v in &r.views {
        let _ = writeln!(
            out,
            "kvaudit_tokens_total{{kind=\"stored\",index_block_size=\"{}\"}} {}",
            v.config.block_size, v.stats.tokens_stored
        );
        let _ = writeln!(
            out,
            "kvaudit_tokens_total{{kind=\"indexed\",index_block_size=\"{}\"}} {}",
            v.config.block_size, v.stats.tokens_indexed
        );
    }
    out
}

pub fn to_human(r: &ReplayReport, input: &InputInfo) -> String {
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
            format!(", {} malformed", r.malformed.total())
        },
    );
    for k in r.malformed.kinds() {
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
