//! The corpus human summary: counts, one table per question, a text histogram.

use std::fmt::Write;

use owo_colors::{OwoColorize, Stream};

use super::{CorpusView, DistributionView};
use crate::corpus::CorpusReport;
use crate::report::layout::{Column, Table, fit, plural, wrap, wrap_long_lines};
use crate::report::{Exporter, Style, View, binary_bytes as bytes, visible};

pub struct Human;

impl Exporter<CorpusReport> for Human {
    fn export(&self, report: &CorpusReport, style: &Style) -> anyhow::Result<String> {
        Ok(wrap_long_lines(
            &to_human(&report.view(), style.width),
            style.width,
        ))
    }
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

fn heading(out: &mut String, text: &str) {
    let _ = writeln!(
        out,
        "\n{}",
        text.if_supports_color(Stream::Stdout, |t| t.bold())
    );
}

fn distribution_row(label: String, d: &DistributionView) -> Vec<String> {
    vec![
        label,
        d.count.to_string(),
        format!("{:.1}", d.mean),
        d.p50.to_string(),
        d.p90.to_string(),
        d.p99.to_string(),
        d.max.to_string(),
        d.sum.to_string(),
    ]
}

fn distribution_columns(first: &str) -> Vec<Column> {
    vec![
        Column::right(first),
        Column::right("count").droppable(2),
        Column::right("mean"),
        Column::right("p50"),
        Column::right("p90"),
        Column::right("p99"),
        Column::right("max"),
        Column::right("sum").droppable(1),
    ]
}

/// One row per remedy: the rewrite points it applies to, how many it removes, and the
/// uncached tokens of those points without -> with it at each block size.
fn remedies(out: &mut String, r: &super::RemediesView, w: usize) {
    heading(
        out,
        &format!(
            "remedies, measured on the {} rewrite points",
            r.transitions_with_rewrite
        ),
    );
    let blocks: Vec<usize> = r
        .best_per_transition
        .uncached
        .iter()
        .map(|u| u.block_size)
        .collect();
    let mut columns = vec![
        Column::left("remedy"),
        Column::right("applies"),
        Column::right("removes"),
    ];
    for b in &blocks {
        columns.push(Column::right(&format!("uncached B={b}")));
    }
    let row = |v: &super::RemedyView| {
        let mut cells = vec![
            v.remedy.to_string(),
            v.transitions.to_string(),
            v.removes_rewrite.to_string(),
        ];
        for u in &v.uncached {
            cells.push(format!("{} -> {}", u.before, u.after));
        }
        cells
    };
    let mut rows: Vec<Vec<String>> = r.by_remedy.iter().map(row).collect();
    rows.push(row(&r.best_per_transition));
    out.push_str(
        &Table {
            columns,
            rows,
            indent: 2,
        }
        .render(w),
    );
    if r.by_remedy.is_empty() {
        out.push_str(&wrap(
            "no remedy applies: only a template change can remove these rewrites",
            w,
            "  ",
            "    ",
        ));
    }
    if r.conversations_without_switch > 0 {
        out.push_str(&wrap(
            &format!(
                "{} conversations rendered with a template that reads no history switch",
                r.conversations_without_switch
            ),
            w,
            "  ",
            "    ",
        ));
    }
}

/// Rows counted by reason under `title`: each reason's count, first rows and first error.
fn reasons(
    out: &mut String,
    title: &str,
    counts: &std::collections::BTreeMap<&'static str, u64>,
    examples: &std::collections::BTreeMap<&'static str, super::SkippedView>,
) {
    if examples.is_empty() {
        return;
    }
    heading(out, title);
    for (reason, s) in examples {
        let n = counts.get(reason).copied().unwrap_or(0);
        let _ = writeln!(out, "  {n:>8} {reason}: {}", s.rows.join(", "));
        if let Some(e) = s.first_error {
            let _ = writeln!(out, "           first: {e}");
        }
    }
}

fn to_human(v: &CorpusView, w: usize) -> String {
    let mut out = String::new();
    let skipped: u64 = v.skipped_rows.values().sum();
    let _ = writeln!(
        out,
        "{}: {} conversations, {} transitions ({} rows read, {} skipped)",
        v.model
            .source
            .if_supports_color(Stream::Stdout, |t| t.bold()),
        v.conversations,
        v.transitions,
        v.rows,
        skipped
    );
    let _ = writeln!(
        out,
        "  template {} · server {}{} · {} worker{}",
        v.model.template,
        v.model.server,
        v.model
            .server_release
            .map(|r| format!("@{r}"))
            .unwrap_or_default(),
        v.input.jobs,
        if v.input.jobs == 1 { "" } else { "s" }
    );
    for f in &v.input.files {
        let _ = writeln!(out, "  input {} ({}, {} rows)", f.path, f.format, f.rows);
    }
    reasons(
        &mut out,
        "skipped rows",
        &v.skipped_rows,
        &v.skipped_examples,
    );
    reasons(
        &mut out,
        "conversations audited up to the request the server refuses",
        &v.partial_conversations,
        &v.partial_examples,
    );

    heading(
        &mut out,
        &format!(
            "rewrite points: {} of {} transitions ({})",
            v.transitions_with_rewrite,
            v.transitions,
            pct(v.rewrite_share)
        ),
    );
    for (class, n) in v.rewrites {
        let _ = writeln!(out, "  {n:>8} {class}");
    }
    if let Some(note) = super::derived_note(v) {
        out.push_str(&wrap(&format!("note: {note}"), w, "  ", "    "));
    }
    if v.transitions_with_drift > 0 {
        let _ = writeln!(
            out,
            "  {:>8} transitions whose sampled ids differ from the reply's encoding (drift)",
            v.transitions_with_drift
        );
    }

    heading(
        &mut out,
        "uncached tokens of the next prompt, per transition",
    );
    let table = Table {
        columns: distribution_columns("block"),
        rows: v
            .block_sizes
            .iter()
            .map(|b| distribution_row(b.block_size.to_string(), &b.uncached))
            .collect(),
        indent: 2,
    };
    out.push_str(&table.render(w));
    for b in &v.block_sizes {
        let _ = writeln!(
            out,
            "  B={}: the decode pod already holds {} of {} next-prompt tokens ({})",
            b.block_size,
            b.held_tokens_reused,
            b.next_prompt_tokens,
            pct(b.held_share)
        );
    }
    if v.transitions_with_rewrite > 0 {
        heading(
            &mut out,
            "held tokens lost at rewrite points (full blocks the pod holds but cannot reuse)",
        );
        let table = Table {
            columns: distribution_columns("block"),
            rows: v
                .block_sizes
                .iter()
                .map(|b| distribution_row(b.block_size.to_string(), &b.lost_at_rewrite))
                .collect(),
            indent: 2,
        };
        out.push_str(&table.render(w));
    }
    if let Some(b) = v.block_sizes.first() {
        histogram(&mut out, b, w);
    }

    if let Some(r) = &v.router {
        heading(
            &mut out,
            &format!(
                "router view (engine block {}, index block {})",
                r.engine_block_size, r.index_block_size
            ),
        );
        let _ = writeln!(
            out,
            "  the index sees {} of the {} tokens the engine holds for the next prompt ({}); short on {} transitions",
            r.index_visible_tokens,
            r.engine_cached_tokens,
            pct(r.visible_share),
            r.transitions_index_short
        );
        let verdicts: Vec<String> = r
            .decider_verdicts
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        let _ = writeln!(out, "  decider: {}", verdicts.join(", "));
        if !r.events_skipped.is_empty() {
            let skipped: Vec<String> = r
                .events_skipped
                .iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect();
            let _ = writeln!(
                out,
                "  index skipped {} of {} events: {}",
                r.events_skipped.values().sum::<u64>(),
                r.events_emitted,
                skipped.join(", ")
            );
        }
    }

    if !v.routers.is_empty() {
        heading(
            &mut out,
            "routers: what each credits to the decode pod, and where the next turn goes",
        );
        for r in &v.routers {
            let units = match (r.unit, r.matched_units, r.input_units) {
                (Some(u), Some(m), Some(i)) => format!(", matched {m} of {i} {u}"),
                _ => String::new(),
            };
            let line = format!(
                "{} ({}): stays on the decode pod in {} of {} transitions; credits {} of {} next-prompt tokens{units}{}",
                r.spec,
                r.version,
                r.stays_on_decode,
                r.transitions,
                r.visible_tokens,
                r.next_prompt_tokens,
                r.main_reason
                    .map(|w| format!("; mostly: {w}"))
                    .unwrap_or_default()
            );
            out.push_str(&wrap(&line, w, "  ", "    "));
        }
    }

    if let Some(nc) = &v.non_cached_tokens {
        heading(
            &mut out,
            "nonCachedTokens for the P/D decider, measured on this corpus",
        );
        let rows = nc
            .candidates
            .iter()
            .map(|c| {
                vec![
                    c.non_cached_tokens.to_string(),
                    format!("{} of {}", c.stay_on_decode, nc.transitions),
                    pct(c.share),
                    c.decode_prefill_tokens.to_string(),
                ]
            })
            .collect();
        let table = Table {
            columns: vec![
                Column::right("nonCachedTokens"),
                Column::right("stay on decode"),
                Column::right("share"),
                Column::right("decode prefills").droppable(1),
            ],
            rows,
            indent: 2,
        };
        out.push_str(&table.render(w));
        out.push_str(&wrap(
            &format!(
                "recommended: nonCachedTokens {} ({}: the 90th percentile of uncached tokens, plus one)",
                nc.recommended, nc.goal
            ),
            w,
            "  ",
            "    ",
        ));
    }

    let a = &v.alternatives;
    heading(
        &mut out,
        &format!(
            "serving alternatives, totals over {} transitions (prefill affinity {}, recompute below {} tokens)",
            v.transitions, a.prefill_affinity, a.kv_recompute_threshold
        ),
    );
    match (&a.kv_bytes_per_token, &a.kv_bytes_source) {
        (Some(b), Some(src)) => {
            let _ = writeln!(out, "  KV per token: {} ({src})", bytes(u128::from(*b)));
        }
        _ => {
            let _ = writeln!(
                out,
                "  KV per token unknown (no config.json; pass --kv-bytes-per-token for bytes)"
            );
        }
    }
    for at in &a.block_sizes {
        let rows = [
            ("pd", &at.pd),
            ("vllm_bidirectional", &at.vllm_bidirectional),
            ("sglang_decode_radix", &at.sglang_decode_radix),
            ("decode_local", &at.decode_local),
        ]
        .into_iter()
        .map(|(name, c)| {
            vec![
                name.to_string(),
                c.prefill_computed.to_string(),
                c.decode_computed.to_string(),
                c.moved_p_to_d.to_string(),
                c.moved_d_to_p.to_string(),
                c.bytes_moved.map_or("-".into(), bytes),
            ]
        })
        .collect();
        let table = Table {
            columns: vec![
                Column::left(&format!("B={}", at.block_size)),
                Column::right("P computes"),
                Column::right("D computes"),
                Column::right("P->D"),
                Column::right("D->P"),
                Column::right("moved").droppable(1),
            ],
            rows,
            indent: 2,
        };
        out.push_str(&table.render(w));
    }
    out.push_str("  assumptions:\n");
    for (i, text) in a.assumptions.iter().enumerate() {
        out.push_str(&wrap(text, w, &format!("  {:>2}. ", i + 1), "      "));
    }

    let c = &v.session_key_collisions;
    heading(
        &mut out,
        "session keys (MD5 of the first user message, as the PPD proxy)",
    );
    let _ = writeln!(
        out,
        "  {} distinct keys; {} shared by {} conversations with {} turn-2+ requests, of which {} would reach another conversation's pod if they overlap in time",
        c.distinct_keys,
        c.shared_keys,
        c.conversations_sharing,
        c.turn2plus_requests_sharing,
        c.turn2plus_requests_misrouted
    );
    for k in &c.largest {
        let line = format!(
            "  {:>6} × {:?}",
            k.conversations,
            visible(k.first_user_message)
        );
        let _ = writeln!(out, "{}", fit(&line, w));
    }

    if let Some(r) = &v.remedies {
        remedies(&mut out, r, w);
    }

    if !v.worst_conversations.is_empty() {
        let first = v.block_sizes.first().map_or(0, |b| b.block_size);
        heading(
            &mut out,
            &format!("worst conversations (uncached tokens at B={first})"),
        );
        for x in &v.worst_conversations {
            let uncached = x.uncached.first().map_or(0, |u| u.tokens);
            let _ = writeln!(
                out,
                "  {:>8}  {} ({}, {}, {} next-prompt tokens)",
                uncached,
                x.source,
                plural(x.transitions, "transition"),
                plural(x.rewrites, "rewrite"),
                x.next_prompt_tokens
            );
            if let Some(d) = x.divergence {
                let line = format!(
                    "            {} -> {} at {} ({}): …{} | held {:?} | next {:?}",
                    d.from_prompt,
                    d.from_prompt + 1,
                    d.position,
                    d.class,
                    visible(&d.before),
                    visible(&d.held),
                    visible(&d.next)
                );
                let _ = writeln!(out, "{}", fit(&line, w));
            }
        }
    }
    let _ = writeln!(out, "\npercentiles: {}", v.percentile_definition);
    let entries: Vec<crate::routers::LineEntry> = v
        .routers
        .iter()
        .map(|r| crate::routers::LineEntry {
            router: r.spec,
            decode: r.stays_on_decode,
            transitions: r.transitions,
            why: r.main_reason,
        })
        .collect();
    if let Some(line) = crate::routers::answer_line(&entries) {
        out.push_str(&wrap(&line, w, "", "  "));
    }
    out
}

/// Uncached tokens per transition as bars, one per doubling bucket.
fn histogram(out: &mut String, b: &super::BlockView, w: usize) {
    if b.histogram.is_empty() {
        return;
    }
    heading(
        out,
        &format!("uncached tokens per transition at B={}", b.block_size),
    );
    let labels: Vec<String> = b
        .histogram
        .iter()
        .map(|h| {
            if h.low == h.high {
                h.low.to_string()
            } else {
                format!("{}-{}", h.low, h.high)
            }
        })
        .collect();
    let label_w = labels.iter().map(|l| l.len()).max().unwrap_or(1);
    let most = b
        .histogram
        .iter()
        .map(|h| h.count)
        .max()
        .unwrap_or(1)
        .max(1);
    let count_w = most.to_string().len();
    let bar_w = w.saturating_sub(label_w + count_w + 6).clamp(10, 50) as u64;
    for (h, label) in b.histogram.iter().zip(labels) {
        // A non-empty bucket always shows at least one cell.
        let cells = if h.count == 0 {
            0
        } else {
            (h.count * bar_w).div_ceil(most)
        };
        let _ = writeln!(
            out,
            "  {label:>label_w$} {:>count_w$} {}",
            h.count,
            "█".repeat(cells as usize)
        );
    }
}
