//! diff-turns output: JSON (stable field names, `schema_version`) and the human view.

use std::fmt::Write;

use owo_colors::{OwoColorize, Stream};
use serde_json::{Value as Json, json};

use crate::align::{DiffStep, TokenView, Transition};
use crate::audit::DiffTurnsReport;
use crate::index::router::RouterView;

pub const SCHEMA_VERSION: u32 = 1;

pub fn to_json(report: &DiffTurnsReport) -> Json {
    let conversations: Vec<Json> = report
        .conversations
        .iter()
        .map(|c| {
            let transitions: Vec<Json> = c
                .transitions
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let mut v = transition_json(t);
                    if let Some(r) = c.routers.get(i) {
                        v["router"] = router_json(r);
                    }
                    if let Some(shift) = c.rollover.as_ref().and_then(|r| r.get(i)) {
                        v["date_rollover"] = json!({
                            "common_prefix_tokens": shift.common_prefix_tokens,
                            "rewrite_position": shift.rewrite_position,
                            "class": shift.class.map(|c| c.name()),
                            "moved": shift.moved,
                        });
                    }
                    v
                })
                .collect();
            json!({"source": c.source, "transitions": transitions})
        })
        .collect();
    json!({
        "schema_version": SCHEMA_VERSION,
        "model": {
            "source": report.model.source,
            "server": report.model.server.name(),
            "template": report.model.template_origin,
            "template_sha256": report.model.template_sha256,
            "tokenizer_sha256": report.model.tokenizer_sha256,
        },
        "conversations": conversations,
    })
}

fn transition_json(t: &Transition) -> Json {
    json!({
        "from_prompt": t.from_prompt,
        "to_prompt": t.to_prompt,
        "held_tokens": t.held_tokens,
        "next_prompt_tokens": t.next_prompt_tokens,
        "common_prefix_tokens": t.common_prefix_tokens,
        "rewrite": t.rewrite,
        "retokenization_drift": t.retokenization_drift,
        "uncached": t.uncached,
    })
}

/// The decider as llm-d-router wires it reads the approximate producer (§5.2 of the llm-d notes).
pub const DECIDER_WIRING_NOTE: &str = "as wired in llm-d-router (2026-08) the prefix-based-pd-decider reads the approx-prefix-cache-producer's match info, not the precise index, unless the precise producer is named approx-prefix-cache-producer";

fn router_json(r: &RouterView) -> Json {
    json!({
        "engine_block_size": r.engine_block_size,
        "index_block_size": r.index_block_size,
        "engine_cached_tokens": r.engine_cached_tokens,
        "index_visible_tokens": r.index_visible_tokens,
        "events_emitted": r.events_emitted,
        "events_skipped": r.events_skipped,
        "decider": {
            "verdict": r.decision.verdict.name(),
            "input_tokens": r.decision.input_tokens,
            "cached_tokens": r.decision.cached_tokens,
            "non_cached_tokens": r.decision.non_cached,
            "rule": r.decision.rule.to_string(),
            "note": DECIDER_WIRING_NOTE,
        },
    })
}

/// A token as `text·id`, with control characters made visible.
fn token(t: &TokenView) -> String {
    let mut text = String::new();
    for c in t.text.chars() {
        match c {
            '\n' => text.push_str("\\n"),
            '\t' => text.push_str("\\t"),
            '\r' => text.push_str("\\r"),
            c => text.push(c),
        }
    }
    format!("{text}·{}", t.id)
}

fn tokens(list: &[TokenView]) -> String {
    list.iter().map(token).collect::<Vec<_>>().join(" ")
}

pub fn to_human(report: &DiffTurnsReport) -> String {
    let mut out = String::new();
    let m = &report.model;
    let _ = writeln!(
        out,
        "{} {}  template {} ({})  tokenizer {}",
        "model".if_supports_color(Stream::Stdout, |t| t.bold()),
        m.source,
        m.template_origin,
        &m.template_sha256[..12],
        &m.tokenizer_sha256[..12],
    );
    for c in &report.conversations {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "{}",
            c.source.if_supports_color(Stream::Stdout, |t| t.bold())
        );
        for (i, t) in c.transitions.iter().enumerate() {
            let verdict = match &t.rewrite {
                None => format!(
                    "{}",
                    "extends".if_supports_color(Stream::Stdout, |t| t.green())
                ),
                Some(r) => format!(
                    "{}",
                    format!("rewrite at {} ({})", r.position, r.class.name())
                        .if_supports_color(Stream::Stdout, |t| t.red())
                ),
            };
            let _ = writeln!(
                out,
                "  turn {} -> {}: held {}, next {}, common prefix {}: {}",
                t.from_prompt,
                t.to_prompt,
                t.held_tokens,
                t.next_prompt_tokens,
                t.common_prefix_tokens,
                verdict
            );
            if t.rewrite.is_some() {
                let _ = writeln!(out, "    before  {}", tokens(&t.before));
                for step in &t.diff {
                    // Cut the plain text first: cutting a coloured line would drop its reset code.
                    let line = match step {
                        DiffStep::Same(v) => truncate(&format!("    same    {}", tokens(v)), 160),
                        DiffStep::Held(v) => {
                            let plain = truncate(&format!("  - held    {}", tokens(v)), 160);
                            format!("{}", plain.if_supports_color(Stream::Stdout, |t| t.red()))
                        }
                        DiffStep::Next(v) => {
                            let plain = truncate(&format!("  + next    {}", tokens(v)), 160);
                            format!("{}", plain.if_supports_color(Stream::Stdout, |t| t.green()))
                        }
                    };
                    let _ = writeln!(out, "{line}");
                }
            }
            if let Some(d) = &t.retokenization_drift {
                let _ = writeln!(
                    out,
                    "    retokenization drift at {}: sampled {} vs encoded {}",
                    d.position,
                    tokens(&d.sampled),
                    tokens(&d.encoded)
                );
            }
            if let Some(r) = c.routers.get(i) {
                let skipped: Vec<String> = r
                    .events_skipped
                    .iter()
                    .map(|(k, v)| format!("{v} {k}"))
                    .collect();
                let _ = writeln!(
                    out,
                    "    router: pod reuses {} tokens, llm-d index (block {}) sees {}; {} of {} events skipped{}; decider: {} ({} uncached, {})",
                    r.engine_cached_tokens,
                    r.index_block_size,
                    r.index_visible_tokens,
                    r.events_skipped.values().sum::<u64>(),
                    r.events_emitted,
                    if skipped.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", skipped.join(", "))
                    },
                    r.decision.verdict.name(),
                    r.decision.non_cached,
                    r.decision.rule,
                );
            }
            if let Some(shift) = c.rollover.as_ref().and_then(|r| r.get(i)) {
                let what = match (shift.rewrite_position, shift.moved) {
                    (None, _) => "no divergence".to_string(),
                    (Some(p), true) => format!(
                        "divergence moves to {p} ({})",
                        shift.class.map(|c| c.name()).unwrap_or("other")
                    ),
                    (Some(p), false) => format!("divergence stays at {p}"),
                };
                let _ = writeln!(
                    out,
                    "    across midnight: common prefix {}, {what}",
                    shift.common_prefix_tokens
                );
            }
        }
        out.push_str(&uncached_table(&c.transitions));
    }
    if report.conversations.iter().any(|c| !c.routers.is_empty()) {
        let _ = writeln!(out, "\nnote: {DECIDER_WIRING_NOTE}.");
    }
    out
}

fn uncached_table(transitions: &[Transition]) -> String {
    let Some(first) = transitions.first() else {
        return String::new();
    };
    let mut out = String::from("  uncached tokens    ");
    for u in &first.uncached {
        let _ = write!(out, "{:>8}", format!("B={}", u.block_size));
    }
    out.push('\n');
    for t in transitions {
        let _ = write!(out, "  turn {} -> {}        ", t.from_prompt, t.to_prompt);
        for u in &t.uncached {
            let _ = write!(out, "{:>8}", u.tokens);
        }
        out.push('\n');
    }
    out
}

fn truncate(line: &str, max_chars: usize) -> String {
    if line.chars().count() <= max_chars {
        line.to_string()
    } else {
        let cut: String = line.chars().take(max_chars).collect();
        format!("{cut}…")
    }
}
