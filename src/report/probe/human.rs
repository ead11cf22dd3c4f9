//! The probe human view: a header naming the server and the rule, one table row per turn (the
//! server's numbers beside kvaudit's), then what each turn that does not agree shows, the
//! replies' retokenization drift, and a verdict line.

use std::fmt::Write;

use owo_colors::{OwoColorize, Stream};

use super::{resend_name, rule, summary, tokens_line};
use crate::probe::{MoreReuse, ProbeReport, Verdict};
use crate::report::layout::{Column, Table, fit, plural, wrap};
use crate::report::{Exporter, Style};

pub struct Human;

impl Exporter<ProbeReport> for Human {
    fn export(&self, report: &ProbeReport, style: &Style) -> anyhow::Result<String> {
        Ok(to_human(report, style.width))
    }
}

fn dash(v: Option<usize>) -> String {
    v.map_or("-".into(), |n| n.to_string())
}

fn to_human(r: &ProbeReport, w: usize) -> String {
    let mut out = String::new();
    let head = format!(
        "probe {} ({}, served model {:?}) with {} (template {}, rendered as {}), resend {}",
        r.server,
        match &r.server_version {
            Some(v) => format!("{} {v}", r.engine.name()),
            None => r.engine.name().to_string(),
        },
        r.served_model,
        r.model.source,
        r.model.template_origin,
        r.model.server.label(),
        resend_name(r),
    );
    out.push_str(&wrap(&head, w, "", "    "));
    out.push_str(&wrap(
        &format!(
            "predicted cached tokens: {}; {}",
            rule(r.engine, r.block_size),
            match r.block_size_from {
                "/metrics" => "block size from the server's /metrics",
                "/server_info" => "page size from the server's /server_info",
                "--block-size" => "block size from --block-size",
                _ => "the engine's default block size (give --block-size if the server runs another)",
            }
        ),
        w,
        "",
        "    ",
    ));
    out.push('\n');
    let table = Table {
        columns: vec![
            Column::right("turn"),
            Column::right("prompt server"),
            Column::right("kvaudit"),
            Column::right("cached server"),
            Column::right("predicted"),
            Column::right("LCP").droppable(2),
            Column::right("held").droppable(1),
            Column::right("drift").droppable(3),
            Column::left("verdict"),
        ],
        rows: r
            .turns
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let transition = t.transition.as_ref();
                vec![
                    t.turn.to_string(),
                    t.server_prompt_tokens.to_string(),
                    t.kvaudit_prompt_tokens.to_string(),
                    t.server_cached_tokens.to_string(),
                    dash(t.predicted_cached_tokens),
                    dash(transition.map(|x| x.common_prefix_tokens)),
                    dash(transition.map(|x| x.held_tokens)),
                    dash(t.drift(r.turns.get(i + 1)).map(|d| d.position)),
                    t.verdict.short().to_string(),
                ]
            })
            .collect(),
        indent: 0,
    };
    out.push_str(&table.render(w));
    let mut notes = Vec::new();
    for (i, t) in r.turns.iter().enumerate() {
        if let Some(d) = &t.prompt_divergence {
            let text = |v: &[crate::align::TokenView]| {
                v.iter().map(|x| x.text.as_str()).collect::<String>()
            };
            let same_text = if text(&d.server) == text(&d.kvaudit) {
                " (the same text in other ids: the server tokenizes it otherwise, e.g. \
                 without the tokenizer's normalizer)"
            } else {
                ""
            };
            notes.push(format!(
                "turn {}: the server's prompt ids ({}) and kvaudit's diverge at token {}{same_text}:\n  server  {}\n  kvaudit {}",
                t.turn,
                t.server_prompt_ids_from.unwrap_or("server"),
                d.position,
                fit(&tokens_line(&d.server), w.saturating_sub(10)),
                fit(&tokens_line(&d.kvaudit), w.saturating_sub(10)),
            ));
        } else if t.verdict == Verdict::ServerRendersDifferently {
            notes.push(format!(
                "turn {}: the server counts {} prompt tokens, kvaudit {} (the server gave no \
                 prompt ids to show where they part)",
                t.turn, t.server_prompt_tokens, t.kvaudit_prompt_tokens
            ));
        }
        if let Some(d) = t.drift(r.turns.get(i + 1)) {
            notes.push(format!(
                "reply {}: re-encoded text parts from the sampled ids at held token {}:\n  sampled {}\n  encoded {}",
                t.turn,
                d.position,
                fit(&tokens_line(&d.sampled), w.saturating_sub(10)),
                fit(&tokens_line(&d.encoded), w.saturating_sub(10)),
            ));
        }
        if t.turn == 1 && t.server_cached_tokens > 0 {
            notes.push(format!(
                "turn 1: the server had {} tokens of the first prompt cached from before the \
                 probe (not predicted)",
                t.server_cached_tokens
            ));
        }
        if let Some(more) = &t.more_reuse {
            let cached = t.server_cached_tokens;
            let predicted = t.predicted_cached_tokens.unwrap_or(0);
            notes.push(match more {
                MoreReuse::EarlierRequest { turn, tokens } => format!(
                    "turn {}: {cached} cached where {predicted} were predicted: turn {turn}'s \
                     request shares {tokens} reusable tokens with this prompt, and they were \
                     still cached",
                    t.turn
                ),
                MoreReuse::BeforeTheProbe {
                    turn_1_cached_tokens,
                } => format!(
                    "turn {}: {cached} cached where {predicted} were predicted, more than any \
                     request of this probe left: the cache held this conversation before the \
                     probe began (turn 1 found {turn_1_cached_tokens} cached), from an earlier \
                     run or another client",
                    t.turn
                ),
                MoreReuse::Unexplained => format!(
                    "turn {}: {cached} cached where {predicted} were predicted, more than any \
                     request of this probe left: another client, or a pod that held the prefix",
                    t.turn
                ),
            });
        }
        if let Some(pod) = &t.pod {
            notes.push(format!("turn {}: answered by {pod}", t.turn));
        }
        if !t.sampled_ids && t.turn == 1 {
            notes.push(
                "the server returned no sampled ids: replies are re-encoded from their text, \
                 so drift cannot be seen"
                    .to_string(),
            );
        }
    }
    if !notes.is_empty() {
        out.push('\n');
        for n in notes {
            for (j, line) in n.lines().enumerate() {
                if j == 0 {
                    out.push_str(&wrap(line, w, "", "    "));
                } else {
                    let _ = writeln!(out, "{line}");
                }
            }
        }
    }
    let s = summary(r);
    let verdict = if r.all_agree() {
        format!("all {} agree with the server", plural(s.turns, "turn"))
    } else {
        let mut parts = Vec::new();
        for (n, what) in [
            (s.server_renders_differently, "server renders differently"),
            (s.reused_less, "server reused less than predicted"),
            (s.reused_more, "server reused more than predicted"),
        ] {
            if n > 0 {
                parts.push(format!("{n} {what}"));
            }
        }
        format!(
            "{} of {} agree; {}",
            s.agree,
            plural(s.turns, "turn"),
            parts.join(", ")
        )
    };
    out.push('\n');
    let _ = writeln!(
        out,
        "{}",
        verdict.if_supports_color(Stream::Stdout, |t| t.bold())
    );
    out
}
