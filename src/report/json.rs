//! JSON: the view pretty-printed, one trailing newline. Field order is the view's declaration
//! order (and message keys keep theirs: serde_json's `preserve_order`).

use anyhow::Result;

use super::{Exporter, Style, View};

pub struct Json;

impl<R: View> Exporter<R> for Json {
    fn export(&self, report: &R, _style: &Style) -> Result<String> {
        let mut s = serde_json::to_string_pretty(&report.view())?;
        s.push('\n');
        Ok(s)
    }
}
