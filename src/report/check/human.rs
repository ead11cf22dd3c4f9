//! The check report as a compiler-style listing: one block per finding (code, subject, what,
//! where in the template, help), then the verdict.

use std::fmt::Write;

use anyhow::Result;
use owo_colors::{OwoColorize, Stream};

use super::{finding_subject, level_word};
use crate::gate::{CheckReport, GateFinding, Level};
use crate::report::layout::wrap;
use crate::report::{Exporter, Style, View};

pub struct Human;

fn paint(level: Level, text: &str) -> String {
    match level {
        Level::Deny => format!("{}", text.if_supports_color(Stream::Stdout, |t| t.red())),
        Level::Warn => format!("{}", text.if_supports_color(Stream::Stdout, |t| t.yellow())),
        _ => format!("{}", text.if_supports_color(Stream::Stdout, |t| t.cyan())),
    }
}

/// Findings that share one cause: the same code at the same place of the same template (one
/// template edit shows in every transition it reaches). Findings without a place stand alone.
fn causes<'a>(findings: impl Iterator<Item = &'a GateFinding>) -> Vec<Vec<&'a GateFinding>> {
    let mut out: Vec<Vec<&GateFinding>> = Vec::new();
    for f in findings {
        let same = |g: &&GateFinding| {
            g.code == f.code
                && f.template_file.is_some()
                && g.template_file == f.template_file
                && g.template_line == f.template_line
        };
        match out.iter_mut().find(|group| same(&group[0])) {
            Some(group) => group.push(f),
            None => out.push(vec![f]),
        }
    }
    out
}

fn finding(out: &mut String, group: &[&GateFinding], width: usize) {
    let f = group[0];
    let head = format!("{}[{}]", level_word(f.level), f.code.id());
    let _ = writeln!(
        out,
        "{} {}: {}",
        paint(f.level, &head),
        f.name,
        finding_subject(f)
    );
    out.push_str(&wrap(&f.message, width, "  ", "  "));
    if group.len() > 1 {
        // One place a line, like the `-->` line: a place is never split.
        let _ = writeln!(out, "  also at ({} more, one cause):", group.len() - 1);
        for g in &group[1..] {
            let _ = writeln!(out, "    {}", finding_subject(g));
        }
    }
    if let Some(file) = &f.template_file {
        let _ = writeln!(out, "  --> {}:{}", file, f.template_line);
    }
    out.push_str(&wrap(&format!("help: {}", f.help), width, "  ", "        "));
    out.push('\n');
}

impl Exporter<CheckReport> for Human {
    fn export(&self, report: &CheckReport, style: &Style) -> Result<String> {
        let mut out = String::new();
        let transitions: usize = report.models.iter().map(|m| m.transitions).sum();
        let _ = write!(
            out,
            "kvaudit check: {} model{}, {} transition{}",
            report.models.len(),
            if report.models.len() == 1 { "" } else { "s" },
            transitions,
            if transitions == 1 { "" } else { "s" }
        );
        match &report.baseline {
            Some(b) => {
                let _ = writeln!(out, ", baseline {} ({} transitions)\n", b.source, b.entries);
            }
            None => out.push_str(", no baseline\n\n"),
        }
        let groups = causes(report.findings.iter().filter(|f| f.active()));
        for group in &groups {
            finding(&mut out, group, style.width);
        }
        let denied_causes = groups.iter().filter(|g| g[0].level == Level::Deny).count();
        let v = report.view();
        let s = &v.summary;
        let verdict = if report.failed() {
            paint(Level::Deny, "FAILED")
        } else {
            format!(
                "{}",
                "passed".if_supports_color(Stream::Stdout, |t| t.green())
            )
        };
        let _ = writeln!(
            out,
            "result: {verdict}: {} denied{}, {} warning{}, {} note{} ({} allowed, {} known from the baseline)",
            s.deny,
            if denied_causes < s.deny {
                format!(
                    " from {denied_causes} cause{}",
                    if denied_causes == 1 { "" } else { "s" }
                )
            } else {
                String::new()
            },
            s.warn,
            if s.warn == 1 { "" } else { "s" },
            s.note,
            if s.note == 1 { "" } else { "s" },
            s.allowed,
            s.baselined
        );
        Ok(out)
    }
}
