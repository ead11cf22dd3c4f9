//! The keys human view: one key a line.

use super::KeysReport;
use crate::report::{Exporter, Style};

pub struct Human;

impl Exporter<KeysReport> for Human {
    /// One key a line; with several sequences, a `# source: N tokens, K keys` line before each.
    fn export(&self, report: &KeysReport, _style: &Style) -> anyhow::Result<String> {
        let mut s = String::new();
        let many = report.sequences.len() > 1;
        for seq in &report.sequences {
            if many {
                s.push_str(&format!(
                    "# {}: {} tokens, {} keys\n",
                    seq.source,
                    seq.tokens,
                    seq.keys.len()
                ));
            }
            for k in &seq.keys {
                s.push_str(&format!("{k}\n"));
            }
        }
        Ok(s)
    }
}
