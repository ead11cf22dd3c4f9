//! The check report (the CI gate): its view (the JSON shape and what templates/check.md sees)
//! and its exporters: human, JSON, Markdown, SARIF 2.1.0 and JUnit XML.

mod human;
mod junit;
mod sarif;

use serde::Serialize;

use super::diff_turns::RemedyView;
use super::json::Json;
use super::markdown::Markdown;
use super::{Exporter, Format, Report, View};
use crate::gate::{BaselineSummary, CheckReport, GateFinding, Level, ModelSummary};

/// The JSON shape of the check report.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Serialize)]
pub struct CheckView<'a> {
    pub schema_version: u32,
    pub kvaudit_version: &'static str,
    /// `pass` or `fail` (fail: a deny finding that is not allowed nor in the baseline).
    pub verdict: &'static str,
    pub summary: SummaryView,
    pub baseline: Option<&'a BaselineSummary>,
    pub models: &'a [ModelSummary],
    pub findings: Vec<FindingView<'a>>,
}

/// A finding as the JSON and Markdown show it: its fields, and the remedies measured for a
/// rewrite point in the shape `diff-turns --remedies` gives a transition's.
#[derive(Serialize)]
pub struct FindingView<'a> {
    #[serde(flatten)]
    pub finding: &'a GateFinding,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remedies: Option<Vec<RemedyView<'a>>>,
}

impl<'a> FindingView<'a> {
    pub fn new(f: &'a GateFinding) -> Self {
        FindingView {
            finding: f,
            remedies: f
                .remedies
                .as_ref()
                .map(|r| r.iter().map(RemedyView::new).collect()),
        }
    }
}

#[derive(Serialize)]
pub struct SummaryView {
    pub deny: usize,
    pub warn: usize,
    pub note: usize,
    pub allowed: usize,
    pub baselined: usize,
}

impl View for CheckReport {
    type View<'a> = CheckView<'a>;

    fn view(&self) -> CheckView<'_> {
        CheckView {
            schema_version: SCHEMA_VERSION,
            kvaudit_version: env!("CARGO_PKG_VERSION"),
            verdict: if self.failed() { "fail" } else { "pass" },
            summary: SummaryView {
                deny: self.count(Level::Deny),
                warn: self.count(Level::Warn),
                note: self.count(Level::Note),
                allowed: self.findings.iter().filter(|f| f.allowed.is_some()).count(),
                baselined: self
                    .findings
                    .iter()
                    .filter(|f| f.baselined && f.allowed.is_none())
                    .count(),
            },
            baseline: self.baseline.as_ref(),
            models: &self.models,
            findings: self.findings.iter().map(FindingView::new).collect(),
        }
    }
}

impl Report for CheckReport {
    const NAME: &'static str = "check";

    fn exporter(&self, format: Format) -> Option<&dyn Exporter<Self>> {
        match format {
            Format::Human => Some(&human::Human),
            Format::Json => Some(&Json),
            Format::Markdown => Some(&Markdown),
            Format::Sarif => Some(&sarif::Sarif),
            Format::Junit => Some(&junit::Junit),
            Format::Prometheus | Format::Html => None,
        }
    }
}

/// `error`, `warning`, `note`: the words compilers, SARIF and JUnit readers know.
pub fn level_word(level: Level) -> &'static str {
    match level {
        Level::Deny => "error",
        Level::Warn => "warning",
        Level::Note | Level::Allow => "note",
    }
}

/// `model › scenario › 1 -> 2`, as far as the finding has them.
pub fn finding_subject(f: &GateFinding) -> String {
    let mut s = f.model.clone();
    if let Some(sc) = &f.scenario {
        s.push_str(" › ");
        s.push_str(sc);
    }
    if let Some(t) = &f.transition {
        s.push_str(" › ");
        s.push_str(t);
    }
    s
}
