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

fn finding(out: &mut String, f: &GateFinding, width: usize) {
    let head = format!("{}[{}]", level_word(f.level), f.code.id());
    let _ = writeln!(
        out,
        "{} {}: {}",
        paint(f.level, &head),
        f.name,
        finding_subject(f)
    );
    out.push_str(&wrap(&f.message, width, "  ", "  "));
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
        for f in report.findings.iter().filter(|f| f.active()) {
            finding(&mut out, f, style.width);
        }
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
            "result: {verdict}: {} denied, {} warning{}, {} note{} ({} allowed, {} known from the baseline)",
            s.deny,
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
