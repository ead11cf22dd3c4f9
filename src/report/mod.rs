//! Reports: a serializable view of each domain result, and one exporter per output format.
//!
//! JSON and Markdown are generic over a report's view (`#[derive(Serialize)]` structs, so each
//! shape is defined once); the human view and Prometheus text are written per report family,
//! one file per format. Only the command layer prints what an exporter returns.

pub mod capture;
pub mod check;
pub mod corpus;
pub mod diff_turns;
pub mod json;
pub mod keys;
pub mod layout;
pub mod markdown;
pub mod probe;
pub mod render;
pub mod replay;
pub mod watch;

use anyhow::{Result, bail};
use serde::Serialize;

/// An output format a report can be exported in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Human,
    Json,
    Markdown,
    Prometheus,
    Sarif,
    Junit,
    /// A self-contained page (corpus `--html`).
    Html,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::Human => "human",
            Format::Json => "json",
            Format::Markdown => "markdown",
            Format::Prometheus => "prometheus",
            Format::Sarif => "sarif",
            Format::Junit => "junit",
            Format::Html => "html",
        }
    }
}

/// One output format of one report family.
pub trait Exporter<R: ?Sized> {
    fn export(&self, report: &R, style: &Style) -> Result<String>;
}

/// How the human view is laid out (JSON and the other machine formats ignore it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Style {
    /// Columns available: prose wraps, token rows are cut and tables keep within it.
    pub width: usize,
    /// Show only what is a finding (diff-turns: transitions with a rewrite point); the summary
    /// still counts everything.
    pub only_findings: bool,
}

impl Default for Style {
    fn default() -> Self {
        Style {
            width: 80,
            only_findings: false,
        }
    }
}

/// The serializable shape of a report: what JSON prints and what report templates see.
pub trait View {
    type View<'a>: Serialize
    where
        Self: 'a;
    fn view(&self) -> Self::View<'_>;
}

/// A report family: its name and the exporter for each format it supports.
pub trait Report: View + Sized {
    /// Used in messages and as the stem of its files under `templates/`.
    const NAME: &'static str;
    fn exporter(&self, format: Format) -> Option<&dyn Exporter<Self>>;
}

/// The exporter of a report that has a human view and JSON, and nothing else.
pub fn human_or_json<'e, R: View + 'e>(
    format: Format,
    human: &'e dyn Exporter<R>,
) -> Option<&'e dyn Exporter<R>> {
    match format {
        Format::Human => Some(human),
        Format::Json => Some(&json::Json),
        _ => None,
    }
}

/// The report in `format`, or an error naming the formats that report has.
pub fn export<R: Report>(report: &R, format: Format, style: &Style) -> Result<String> {
    match report.exporter(format) {
        Some(e) => e.export(report, style),
        None => {
            let have: Vec<&str> = [
                Format::Human,
                Format::Json,
                Format::Markdown,
                Format::Prometheus,
                Format::Sarif,
                Format::Junit,
                Format::Html,
            ]
            .into_iter()
            .filter(|f| report.exporter(*f).is_some())
            .map(Format::name)
            .collect();
            bail!(
                "{} has no {} output (it has: {})",
                R::NAME,
                format.name(),
                have.join(", ")
            )
        }
    }
}

/// A Prometheus label value escaped for the text exposition format.
pub fn prometheus_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// `n` with a comma between each group of three digits, as a reader scans large counts.
pub fn thousands(n: u128) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Bytes in binary units (KiB, MiB, ...) with one decimal, exact below 1 KiB.
pub fn binary_bytes(n: u128) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// Control characters spelled out (`\n`, `\t`, `\r`), as reports show token text.
pub fn visible(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::keys::KeysReport;
    use crate::routers::llm_d::IndexConfig;

    #[test]
    fn a_format_a_report_lacks_names_the_ones_it_has() {
        let cfg = IndexConfig::new(16);
        let report = KeysReport::new(&cfg, "m", "--model-name", vec![("t".into(), vec![1, 2, 3])]);
        let style = Style::default();
        let err = export(&report, Format::Markdown, &style)
            .unwrap_err()
            .to_string();
        assert_eq!(err, "keys has no markdown output (it has: human, json)");
        assert!(
            export(&report, Format::Json, &style)
                .unwrap()
                .ends_with("}\n")
        );
    }
}
