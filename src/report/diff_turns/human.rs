//! The diff-turns human view: per transition the verdict and the two sides at the divergence,
//! the uncached table, then a summary across everything audited. Fits `Style::width`.

use std::collections::BTreeMap;
use std::fmt::Write;

use owo_colors::{OwoColorize, Stream};

use crate::align::{TokenView, Transition};
use crate::audit::{ConversationAudit, DiffTurnsReport};
use crate::report::layout::{Column, Table, fit, wrap};
use crate::report::{Exporter, Style, visible};

pub struct Human;

impl Exporter<DiffTurnsReport> for Human {
    fn export(&self, report: &DiffTurnsReport, style: &Style) -> anyhow::Result<String> {
        Ok(to_human(report, style))
    }
}

/// A token as `text·id`, with control characters made visible.
fn token(t: &TokenView) -> String {
    format!("{}·{}", visible(&t.text), t.id)
}

fn tokens(list: &[TokenView]) -> String {
    list.iter().map(token).collect::<Vec<_>>().join(" ")
}

fn red(s: &str) -> String {
    format!("{}", s.if_supports_color(Stream::Stdout, |t| t.red()))
}

fn green(s: &str) -> String {
    format!("{}", s.if_supports_color(Stream::Stdout, |t| t.green()))
}

fn bold(s: &str) -> String {
    format!("{}", s.if_supports_color(Stream::Stdout, |t| t.bold()))
}

fn to_human(report: &DiffTurnsReport, style: &Style) -> String {
    let w = style.width;
    let mut out = String::new();
    let m = &report.model;
    // The server profile is named when it is not the default (raw apply_chat_template).
    let server = match m.server {
        crate::render::ServerProfile::Transformers => String::new(),
        other => format!("  server {}", other.label()),
    };
    let header = format!(
        "model {}{server}  template {} ({})  tokenizer {}",
        m.source,
        m.template_origin,
        &m.template_sha256[..12],
        &m.tokenizer_sha256[..12],
    );
    // Only the first word is bold: colour codes must not be counted or cut by the wrap.
    let header = wrap(&header, w, "", "  ");
    out.push_str(&header.replacen("model", &bold("model"), 1));
    for c in &report.conversations {
        let shown: Vec<usize> = (0..c.transitions.len())
            .filter(|&i| !style.only_findings || c.transitions[i].rewrite.is_some())
            .collect();
        if style.only_findings && shown.is_empty() {
            continue;
        }
        out.push('\n');
        let title = if c.template == m.template_origin {
            c.source.clone()
        } else {
            format!("{}  (template {})", c.source, c.template)
        };
        out.push_str(&bold(&fit(&title, w)));
        out.push('\n');
        for &i in &shown {
            transition(&mut out, c, i, w);
        }
        let rows: Vec<&Transition> = shown.iter().map(|&i| &c.transitions[i]).collect();
        out.push_str(&uncached_table(&rows, w));
    }
    if !report.errors.is_empty() {
        out.push('\n');
        for e in &report.errors {
            let line = format!("{}: {}", e.source, e.message);
            out.push_str(&red(wrap(&line, w, "error: ", "  ").trim_end()));
            out.push('\n');
        }
    }
    out.push('\n');
    out.push_str(&summary(report, w));
    out
}

fn transition(out: &mut String, c: &ConversationAudit, i: usize, w: usize) {
    let t = &c.transitions[i];
    let (verdict, colour): (String, fn(&str) -> String) = match &t.rewrite {
        None => ("extends".into(), green),
        Some(r) => (
            format!("rewrite at {} ({})", r.position, r.class.name()),
            red,
        ),
    };
    let line = format!(
        "turn {} -> {}: held {}, next {}, common prefix {}: {verdict}",
        t.from_prompt, t.to_prompt, t.held_tokens, t.next_prompt_tokens, t.common_prefix_tokens,
    );
    // Wrap the plain text, then colour the verdict where it stayed on one line.
    let wrapped = wrap(&line, w, "  ", "    ");
    out.push_str(&wrapped.replacen(&verdict, &colour(&verdict), 1));
    if t.rewrite.is_some() {
        // Cut the plain text first: cutting a coloured line would drop its reset code.
        let _ = writeln!(
            out,
            "{}",
            fit(&format!("    before  {}", tokens(&t.before)), w)
        );
        let [held, next] = &t.sides;
        let _ = writeln!(
            out,
            "{}",
            red(&fit(&format!("  - held    {}", tokens(held)), w))
        );
        let _ = writeln!(
            out,
            "{}",
            green(&fit(&format!("  + next    {}", tokens(next)), w))
        );
    }
    if let Some(d) = &t.retokenization_drift {
        let line = format!(
            "    retokenization drift at {}: sampled {} vs encoded {}",
            d.position,
            tokens(&d.sampled),
            tokens(&d.encoded)
        );
        let _ = writeln!(out, "{}", fit(&line, w));
    }
    if let Some(r) = c.routers.get(i) {
        let skipped: Vec<String> = r
            .events_skipped
            .iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect();
        let line = format!(
            "router: pod reuses {} tokens, llm-d index (block {}) sees {}; {} of {} events skipped{}; decider: {} ({} uncached, {})",
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
        out.push_str(&wrap(&line, w, "    ", "      "));
    }
    // With routers asked for by name, one line each (llm-d's alone is the line above).
    let answers = c.answers.get(i).map(Vec::as_slice).unwrap_or_default();
    if !(answers.len() == 1 && answers[0].router == "llm-d") {
        for a in answers {
            let units = a
                .units
                .map(|u| format!(" ({} of {} {})", u.matched, u.input, u.unit))
                .unwrap_or_default();
            let line = format!(
                "{}: credits {} tokens{units}, {}: {}",
                a.label,
                a.visible_tokens,
                match a.decision {
                    crate::routers::Decision::Decode => "stays on the decode pod",
                    crate::routers::Decision::Other => "goes elsewhere",
                },
                a.rule
            );
            out.push_str(&wrap(&line, w, "    ", "      "));
        }
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
        let line = format!(
            "across midnight: common prefix {}, {what}",
            shift.common_prefix_tokens
        );
        out.push_str(&wrap(&line, w, "    ", "      "));
        if let Some(list) = &shift.remedies {
            let no_switch = c.remedies.as_ref().is_some_and(|r| r.switches.is_empty());
            remedy_list(
                out,
                "remedies across midnight",
                list,
                &shift.uncached,
                no_switch,
                w,
            );
        }
    }
    if let Some(r) = &c.remedies {
        remedies(out, r, t, w);
    }
}

/// One line per remedy, best first, then what is missing said plainly.
fn remedies(out: &mut String, r: &crate::audit::ConversationRemedies, t: &Transition, w: usize) {
    let Some(list) = r
        .transitions
        .iter()
        .find(|x| x.from_prompt == t.from_prompt)
    else {
        return;
    };
    remedy_list(
        out,
        "remedies",
        &list.remedies,
        &t.uncached,
        r.switches.is_empty(),
        w,
    );
}

/// `heading (uncached at B=..: .. now):`, a line per remedy, then what no remedy does.
fn remedy_list(
    out: &mut String,
    heading: &str,
    list: &[crate::audit::Remedy],
    now: &[crate::align::Uncached],
    no_switch: bool,
    w: usize,
) {
    let counts = |u: &[crate::align::Uncached]| {
        u.iter()
            .map(|u| u.tokens.to_string())
            .collect::<Vec<_>>()
            .join("/")
    };
    let blocks = now
        .iter()
        .map(|u| u.block_size.to_string())
        .collect::<Vec<_>>()
        .join("/");
    let _ = writeln!(
        out,
        "{}",
        fit(
            &format!(
                "    {heading} (uncached at B={blocks}: {} now):",
                counts(now)
            ),
            w
        )
    );
    for m in list {
        use crate::audit::RemedyKind;
        use serde_json::Value;
        let what = match (m.kind, &m.value) {
            (RemedyKind::Kwarg, Some(v)) => match m.with_resend {
                Some(mode) => format!("{}={v} with resend {mode}", m.name),
                None => format!("{}={v}", m.name),
            },
            (RemedyKind::Resend, Some(Value::String(field))) => format!("{} (as {field})", m.name),
            (RemedyKind::PinDate, Some(Value::String(at))) => format!("{} at {at}", m.name),
            (RemedyKind::KeepRequest, Some(Value::Object(kept))) if !kept.is_empty() => {
                format!("{} ({})", m.name, m.kept_kwargs().join(", "))
            }
            (_, Some(Value::Object(_)) | None) => m.name.clone(),
            (_, Some(v)) => format!("{} {v}", m.name),
        };
        let outcome = match m.rewrite {
            None => "removes the rewrite".to_string(),
            Some((p, class)) => format!("rewrite at {p} ({})", class.name()),
        };
        let line = format!(
            "{} {what}: {outcome}, uncached {}",
            m.kind.name(),
            counts(&m.uncached)
        );
        let line = wrap(&line, w, "      ", "        ");
        if m.removes_rewrite {
            out.push_str(&green(line.trim_end()));
            out.push('\n');
        } else {
            out.push_str(&line);
        }
    }
    if no_switch {
        out.push_str(&wrap(
            "no kwarg remedy: the template reads no history switch",
            w,
            "      ",
            "        ",
        ));
    }
    if !list.iter().any(|m| m.removes_rewrite) {
        out.push_str(&wrap(
            "no remedy removes the rewrite: only a change to the template can",
            w,
            "      ",
            "        ",
        ));
    }
}

fn uncached_table(transitions: &[&Transition], w: usize) -> String {
    let Some(first) = transitions.first() else {
        return String::new();
    };
    let mut columns = vec![Column::left("uncached tokens")];
    columns.extend(
        first
            .uncached
            .iter()
            .map(|u| Column::right(&format!("B={}", u.block_size))),
    );
    let rows = transitions
        .iter()
        .map(|t| {
            let mut row = vec![format!("turn {} -> {}", t.from_prompt, t.to_prompt)];
            row.extend(t.uncached.iter().map(|u| u.tokens.to_string()));
            row
        })
        .collect();
    Table {
        columns,
        rows,
        indent: 2,
    }
    .render(w)
}

/// Totals over every conversation and transition, whatever `--only-rewrites` hid, and the exit
/// verdict in words.
fn summary(report: &DiffTurnsReport, w: usize) -> String {
    let transitions: Vec<(&ConversationAudit, &Transition)> = report
        .conversations
        .iter()
        .flat_map(|c| c.transitions.iter().map(move |t| (c, t)))
        .collect();
    let mut classes: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, t) in &transitions {
        if let Some(r) = &t.rewrite {
            *classes.entry(r.class.name()).or_default() += 1;
        }
    }
    let rewrites: usize = classes.values().sum();
    let partial = report.errors.iter().filter(|e| e.partial).count();
    // A conversation stopped at a refused request is audited up to it.
    let audited = report.conversations.len();
    let total = audited + report.errors.len() - partial;
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    let mut text = if total == audited {
        format!("summary: {}, ", plural(audited, "conversation"))
    } else {
        format!(
            "summary: {audited} of {} audited, ",
            plural(total, "conversation")
        )
    };
    text.push_str(&plural(transitions.len(), "transition"));
    if transitions.is_empty() {
        text.push_str(" (no assistant reply followed by another user turn)");
    } else if rewrites == 0 {
        text.push_str(": every one extends what the decode pod holds");
    } else {
        let by_class: Vec<String> = classes.iter().map(|(k, n)| format!("{n} {k}")).collect();
        let extend = match transitions.len() - rewrites {
            0 => "none extends".to_string(),
            1 => "1 extends".to_string(),
            n => format!("{n} extend"),
        };
        let _ = write!(
            text,
            ": {} ({}), {extend}",
            plural(rewrites, "rewrite point"),
            by_class.join(", "),
        );
    }
    let shifts: Vec<_> = report
        .conversations
        .iter()
        .flat_map(|c| c.rollover.iter().flatten())
        .collect();
    if report.conversations.iter().any(|c| c.rollover.is_some()) {
        let _ = write!(
            text,
            "; across midnight {} diverge, {} of them earlier than on one day",
            shifts
                .iter()
                .filter(|r| r.rewrite_position.is_some())
                .count(),
            shifts.iter().filter(|r| r.moved).count()
        );
    }
    let evaluated: Vec<&crate::audit::TransitionRemedies> = report
        .conversations
        .iter()
        .flat_map(|c| c.remedies.iter().flat_map(|r| &r.transitions))
        .collect();
    if !evaluated.is_empty() {
        let fixed = evaluated
            .iter()
            .filter(|t| t.remedies.iter().any(|r| r.removes_rewrite))
            .count();
        let _ = write!(
            text,
            "; a remedy removes {fixed} of {} rewrite point{}{}",
            evaluated.len(),
            if evaluated.len() == 1 { "" } else { "s" },
            if fixed < evaluated.len() {
                " (the others need a template change)"
            } else {
                ""
            }
        );
    }
    let mut out = wrap(&text, w, "", "  ");
    if let Some((_, first)) = transitions.first() {
        // Per block size the transition with the most uncached tokens; neighbouring block
        // sizes with the same worst transition share its name.
        let mut groups: Vec<(String, Vec<String>)> = Vec::new();
        for b in 0..first.uncached.len() {
            let Some((c, t)) = transitions
                .iter()
                .max_by_key(|(_, t)| t.uncached.get(b).map_or(0, |u| u.tokens))
            else {
                continue;
            };
            let Some(u) = t.uncached.get(b) else { continue };
            let at = format!("{} turn {} -> {}", c.source, t.from_prompt, t.to_prompt);
            let entry = format!("{} at B={}", u.tokens, u.block_size);
            match groups.last_mut() {
                Some((last, entries)) if *last == at => entries.push(entry),
                _ => groups.push((at, vec![entry])),
            }
        }
        let worst: Vec<String> = groups
            .iter()
            .map(|(at, entries)| format!("{} ({at})", entries.join(", ")))
            .collect();
        out.push_str(&wrap(
            &format!("worst uncached: {}", worst.join("; ")),
            w,
            "  ",
            "    ",
        ));
    }
    let verdict = if !report.errors.is_empty() {
        let n = report.errors.len();
        let s = if n == 1 { "" } else { "s" };
        if partial == n {
            format!(
                "verdict: {n} conversation{s} stopped at a request the server refuses; the requests before it are audited (exit 2)"
            )
        } else {
            format!("verdict: {n} conversation{s} could not be audited (exit 2)")
        }
    } else if report.has_findings() {
        "verdict: turns rewrite what the decode pod holds, so its KV cannot be reused in full (exit 1)"
            .to_string()
    } else {
        "verdict: every turn extends what the decode pod holds (exit 0)".to_string()
    };
    let mut totals: Vec<crate::routers::Totals> = Vec::new();
    for c in &report.conversations {
        for (t, answers) in c.transitions.iter().zip(&c.answers) {
            totals.resize(answers.len().max(totals.len()), Default::default());
            for (total, a) in totals.iter_mut().zip(answers) {
                total.add(a, t.next_prompt_tokens);
            }
        }
    }
    out.push_str(&wrap(&verdict, w, "", "  "));
    let entries: Vec<_> = totals
        .iter()
        .map(crate::routers::Totals::line_entry)
        .collect();
    if let Some(line) = crate::routers::answer_line(&entries) {
        out.push_str(&wrap(&line, w, "", "  "));
    }
    out
}
