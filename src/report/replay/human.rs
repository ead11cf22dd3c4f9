//! The replay human summary.

use std::fmt::Write;

use owo_colors::{OwoColorize, Stream};

use super::{InputInfo, ReplayOutput};
use crate::replay::ReplayReport;
use crate::report::layout::{Column, Table, wrap_long_lines};
use crate::report::{Exporter, Style};
use crate::routers::llm_d::{CountedReason, DropReason};

pub struct Human;

impl Exporter<ReplayOutput<'_>> for Human {
    fn export(&self, out: &ReplayOutput<'_>, style: &Style) -> anyhow::Result<String> {
        Ok(wrap_long_lines(
            &to_human(out.report, &out.input, style.width),
            style.width,
        ))
    }
}

fn to_human(r: &ReplayReport, input: &InputInfo, w: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} ({}): {} messages, {} events ({} stored, {} removed, {} cleared){}",
        input.path.if_supports_color(Stream::Stdout, |t| t.bold()),
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
        let line = format!(
            "  {:>8} malformed: {} (first at byte {first}: {why})",
            k.count,
            k.kind.as_str()
        );
        let _ = writeln!(
            out,
            "{}",
            line.if_supports_color(Stream::Stdout, |t| t.red())
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
    out.push('\n');
    let engine: usize = r.sequences.iter().map(|s| s.engine_tokens).sum();
    let table = Table {
        columns: vec![
            Column::right("block"),
            Column::left("profile").droppable(3),
            Column::right("msgs lost"),
            Column::right("stores ok").droppable(1),
            Column::right("skipped"),
            Column::right("tok stored").droppable(2),
            Column::right("tok indexed"),
            Column::right("seq engine/index"),
        ],
        rows: r
            .views
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let index: usize = r.sequences.iter().map(|s| s.index_tokens[i]).sum();
                vec![
                    v.config.block_size.to_string(),
                    v.config.profile.name().to_string(),
                    v.stats.messages_dropped.total().to_string(),
                    v.stats.stores_accepted.to_string(),
                    v.stats.stores_skipped.total().to_string(),
                    v.stats.tokens_stored.to_string(),
                    v.stats.tokens_indexed.to_string(),
                    format!("{engine}/{index}"),
                ]
            })
            .collect(),
        indent: 0,
    };
    out.push_str(&table.render(w));
    for v in &r.views {
        if v.stats.messages_dropped.is_empty() && v.stats.stores_skipped.is_empty() {
            continue;
        }
        let heading = format!("block {}: why llm-d loses events", v.config.block_size);
        let _ = writeln!(
            out,
            "\n{}",
            heading.if_supports_color(Stream::Stdout, |t| t.bold())
        );
        for (reason, n) in v.stats.messages_dropped.reasons() {
            let what = match reason {
                DropReason::BatchDecodeError => "whole messages llm-d cannot decode",
                DropReason::BatchIsMap => "messages whose batch is a map (zero events)",
                DropReason::EventDecodeError => {
                    "messages with an event llm-d's engine adapter cannot decode"
                }
                DropReason::PodNotEndpoint => {
                    "messages of one socket for every pod whose topic names no address:port: indexed where no scored endpoint is"
                }
                DropReason::TopicFilter => {
                    "messages llm-d never receives: their topic does not start with its topicFilter"
                }
            };
            let line = format!("  {n:>8}  {} ({what})", reason.as_str());
            let _ = writeln!(
                out,
                "{}",
                line.if_supports_color(Stream::Stdout, |t| t.red())
            );
        }
        for (reason, n) in v.stats.stores_skipped.reasons() {
            let reason_name = reason.as_str();
            let counted = if reason.counted_by_llm_d(v.config.profile) {
                "counted by llm-d"
            } else {
                "not counted by llm-d"
            };
            let line = format!("  {n:>8}  {reason_name} ({counted})");
            let _ = writeln!(
                out,
                "{}",
                line.if_supports_color(Stream::Stdout, |t| t.red())
            );
        }
    }
    for d in &r.dynamo {
        let skipped: Vec<String> = d
            .stats
            .stores_skipped
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect();
        let line = format!(
            "dynamo 1.6.1 at block {}: {} stores applied ({} blocks), {} blocks not published for their block size, {} batches rejected{}",
            d.block_size
                .map_or("unknown (no stored event)".to_string(), |b| b.to_string()),
            d.stats.stores_applied,
            d.stats.blocks_indexed,
            d.stats.blocks_wrong_size,
            d.stats.batches_rejected,
            if skipped.is_empty() {
                String::new()
            } else {
                format!("; skipped {}", skipped.join(", "))
            }
        );
        out.push_str(&crate::report::layout::wrap(&line, w, "", "  "));
    }
    let names: Vec<String> = r
        .views
        .iter()
        .map(|v| format!("index@{}", v.config.block_size))
        .chain(r.dynamo.iter().map(|d| match d.block_size {
            Some(b) => format!("dynamo@{b}"),
            None => "dynamo".to_string(),
        }))
        .collect();
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
        let mut columns = vec![
            Column::left("pod"),
            Column::left("model").droppable(1),
            Column::right("engine"),
        ];
        columns.extend(names.iter().map(|n| Column::right(n)));
        let rows = worst
            .iter()
            .take(10)
            .map(|s| {
                // Pod and model come from the capture's topics: a newline would break the row.
                let mut row = vec![
                    crate::report::visible(&s.pod),
                    crate::report::visible(&s.model),
                    s.engine_tokens.to_string(),
                ];
                row.extend(s.index_tokens.iter().map(|t| t.to_string()));
                row
            })
            .collect();
        let table = Table {
            columns,
            rows,
            indent: 2,
        };
        out.push_str(&table.render(w));
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
                .map(|v| format!("block {}", v.config.block_size))
                .chain(r.dynamo.iter().map(|d| match d.block_size {
                    Some(b) => format!("dynamo block {b}"),
                    None => "dynamo".to_string(),
                }))
                .zip(&l.index_tokens)
                .map(|(n, t)| format!("{t} at {n}"))
                .collect();
            let _ = writeln!(
                out,
                "  {} {}: {} tokens, index finds {}",
                crate::report::visible(&l.pod),
                crate::report::visible(&l.model),
                l.tokens,
                found.join(", ")
            );
        }
    }
    // The reason is the error line on stderr; saying it here too printed it twice.
    if let Some((offset, _)) = &input.error {
        let _ = writeln!(
            out,
            "\nstopped early at byte {offset} (the counts above cover the messages before it)"
        );
    }
    out
}
