//! JUnit XML: a test suite per model, a test case per scenario (and one for the model itself
//! when a template error stopped it); deny findings are failures, the rest system-out.

use std::fmt::Write;

use anyhow::Result;

use super::level_word;
use crate::gate::{CheckReport, GateFinding};
use crate::report::{Exporter, Style};

pub struct Junit;

/// Text for an XML attribute or element; characters XML 1.0 cannot carry are dropped.
fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\t' | '\r' => out.push(' '),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
    out
}

fn line(f: &GateFinding) -> String {
    format!(
        "{}[{}] {}: {} help: {}",
        level_word(f.level),
        f.code.id(),
        f.transition.as_deref().unwrap_or("-"),
        f.message,
        f.help
    )
}

impl Exporter<CheckReport> for Junit {
    fn export(&self, report: &CheckReport, _style: &Style) -> Result<String> {
        let mut suites = String::new();
        let (mut tests, mut failures) = (0usize, 0usize);
        for m in &report.models {
            let mine: Vec<&GateFinding> = report
                .findings
                .iter()
                .filter(|f| f.model == m.source && f.active())
                .collect();
            let mut cases: Vec<(String, Vec<&GateFinding>)> = Vec::new();
            let model_level: Vec<&GateFinding> = mine
                .iter()
                .copied()
                .filter(|f| f.scenario.is_none())
                .collect();
            if !model_level.is_empty() {
                cases.push(("(model)".into(), model_level));
            }
            for s in &m.scenarios {
                let of: Vec<&GateFinding> = mine
                    .iter()
                    .copied()
                    .filter(|f| f.scenario.as_deref() == Some(s))
                    .collect();
                cases.push((s.clone(), of));
            }
            let suite_failures = cases
                .iter()
                .filter(|(_, fs)| fs.iter().any(|f| f.fails()))
                .count();
            tests += cases.len();
            failures += suite_failures;
            let _ = writeln!(
                suites,
                "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\">",
                xml(&m.source),
                cases.len(),
                suite_failures
            );
            for (name, fs) in &cases {
                let _ = write!(
                    suites,
                    "    <testcase classname=\"{}\" name=\"{}\"",
                    xml(&m.source),
                    xml(name)
                );
                if fs.is_empty() {
                    suites.push_str("/>\n");
                    continue;
                }
                suites.push_str(">\n");
                let denied: Vec<&&GateFinding> = fs.iter().filter(|f| f.fails()).collect();
                if let Some(first) = denied.first() {
                    let body: Vec<String> = denied.iter().map(|f| line(f)).collect();
                    let _ = writeln!(
                        suites,
                        "      <failure type=\"{}\" message=\"{}\">{}</failure>",
                        first.code.id(),
                        xml(&format!("{} {}", first.code.id(), first.name)),
                        xml(&body.join("\n"))
                    );
                }
                let rest: Vec<String> = fs.iter().filter(|f| !f.fails()).map(|f| line(f)).collect();
                if !rest.is_empty() {
                    let _ = writeln!(
                        suites,
                        "      <system-out>{}</system-out>",
                        xml(&rest.join("\n"))
                    );
                }
                suites.push_str("    </testcase>\n");
            }
            suites.push_str("  </testsuite>\n");
        }
        Ok(format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"kvaudit check\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\">\n{suites}</testsuites>\n"
        ))
    }
}
