//! The keys human view: the settings the keys depend on, then per sequence a heading and one
//! key a line with the block and the token range it covers.

use owo_colors::{OwoColorize, Stream};

use super::KeysReport;
use crate::report::{Exporter, Style};

pub struct Human;

impl Exporter<KeysReport> for Human {
    fn export(&self, report: &KeysReport, _style: &Style) -> anyhow::Result<String> {
        let bold = |t: &str| format!("{}", t.if_supports_color(Stream::Stdout, |t| t.bold()));
        let b = report.index_block_size;
        let mut s = format!(
            "model name {:?} (from {})\nhash {}, seed {:?}, index block size {b}\n",
            report.model_name, report.model_name_from, report.hash, report.hash_seed
        );
        for seq in &report.sequences {
            let keys = match seq.keys.len() {
                1 => "1 key".to_string(),
                n => format!("{n} keys"),
            };
            let mut heading = format!("{}: {} tokens, {keys}", seq.source, seq.tokens);
            if seq.keys.is_empty() {
                heading.push_str(&format!(" (shorter than one {b}-token block)"));
            } else if seq.tokens_without_key > 0 {
                heading.push_str(&match seq.tokens_without_key {
                    1 => "; the last token is not in a whole block and gets no key".to_string(),
                    n => format!("; the last {n} tokens are not in a whole block and get no key"),
                });
            }
            s.push('\n');
            s.push_str(&bold(&heading));
            s.push('\n');
            for (i, k) in seq.keys.iter().enumerate() {
                let tokens = format!("{}..{}", i * b, (i + 1) * b);
                s.push_str(&format!("  block {i:<4} tokens {tokens:<12} {k}\n"));
            }
        }
        Ok(s)
    }
}
