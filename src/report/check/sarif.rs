//! SARIF 2.1.0 for code-scanning UIs: one rule per code of the table (with its help), one
//! result per finding, located at the template line its text came from. Allowed findings and
//! findings known from the baseline are kept with a suppression, as SARIF viewers expect.

use anyhow::Result;
use serde_json::{Value as Json, json};

use super::{FindingView, level_word};
use crate::gate::codes::CODES;
use crate::gate::{CheckReport, GateFinding};
use crate::report::{Exporter, Style};

pub struct Sarif;

/// A relative path as a URI reference with `/` separators; an absolute one as a file: URI.
fn uri(path: &str) -> String {
    let p = path.replace('\\', "/");
    let encoded: String = p
        .chars()
        .map(|c| match c {
            ' ' => "%20".to_string(),
            '#' => "%23".to_string(),
            '?' => "%3F".to_string(),
            '%' => "%25".to_string(),
            c => c.to_string(),
        })
        .collect();
    if encoded.starts_with('/') {
        format!("file://{encoded}")
    } else {
        encoded.trim_start_matches("./").to_string()
    }
}

fn result(f: &GateFinding) -> Json {
    let rule_index = CODES.iter().position(|c| c.code == f.code).unwrap_or(0);
    let mut r = json!({
        "ruleId": f.code.id(),
        "ruleIndex": rule_index,
        "level": level_word(f.level),
        "message": { "text": format!("{}: {}\nhelp: {}", super::finding_subject(f), f.message, f.help) },
        "properties": {
            "model": f.model,
            "scenario": f.scenario,
            "transition": f.transition,
            "kvauditLevel": f.level.name(),
        },
    });
    // A remedy changes a request setting or kwarg, not the template's text, so it is no
    // SARIF `fix` (those are artifact edits): the measured list rides in the property bag.
    if let Some(remedies) = FindingView::new(f).remedies {
        r["properties"]["remedies"] = serde_json::to_value(remedies).unwrap_or(Json::Null);
    }
    if let Some(file) = &f.template_file {
        r["locations"] = json!([{
            "physicalLocation": {
                "artifactLocation": { "uri": uri(file) },
                "region": { "startLine": f.template_line.max(1) },
            }
        }]);
    }
    let mut suppressions = Vec::new();
    if let Some(reason) = &f.allowed {
        suppressions.push(json!({"kind": "external", "justification": reason}));
    }
    if f.baselined {
        suppressions.push(json!({"kind": "external", "justification": "known from the baseline"}));
    }
    if !suppressions.is_empty() {
        r["suppressions"] = Json::Array(suppressions);
    }
    // Stable across runs (no line numbers): code scanning tracks an alert by it.
    r["partialFingerprints"] = json!({
        "kvaudit/v1": format!(
            "{}:{}:{}:{}",
            f.code.id(),
            f.model,
            f.scenario.as_deref().unwrap_or(""),
            f.transition.as_deref().unwrap_or("")
        )
    });
    r
}

impl Exporter<CheckReport> for Sarif {
    fn export(&self, report: &CheckReport, _style: &Style) -> Result<String> {
        let rules: Vec<Json> = CODES
            .iter()
            .map(|c| {
                json!({
                    "id": c.id,
                    "name": c.name,
                    "shortDescription": { "text": c.name.replace('_', " ") },
                    "fullDescription": { "text": c.meaning },
                    "help": { "text": c.help },
                    "defaultConfiguration": { "level": level_word(c.default_level) },
                })
            })
            .collect();
        let sarif = json!({
            "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
            "version": "2.1.0",
            "runs": [{
                "tool": { "driver": {
                    "name": "kvaudit",
                    "version": env!("CARGO_PKG_VERSION"),
                    "informationUri": "https://github.com/kvaudit/kvaudit",
                    "rules": rules,
                }},
                "results": report.findings.iter().map(result).collect::<Vec<_>>(),
                "columnKind": "unicodeCodePoints",
            }],
        });
        let mut s = serde_json::to_string_pretty(&sarif)?;
        s.push('\n');
        Ok(s)
    }
}
