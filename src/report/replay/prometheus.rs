//! The replay counters as Prometheus text exposition.

use std::fmt::Write;

use super::ReplayOutput;
use crate::replay::ReplayReport;
use crate::report::{Exporter, Style, prometheus_label as label};

pub struct Prometheus;

impl Exporter<ReplayOutput<'_>> for Prometheus {
    fn export(&self, out: &ReplayOutput<'_>, _style: &Style) -> anyhow::Result<String> {
        Ok(to_prometheus(out.report))
    }
}

/// The counters llm-d would export for this stream, plus kvaudit's own per-reason counter.
/// Each series carries the view's `index_block_size` so a sweep stays one scrape.
fn to_prometheus(r: &ReplayReport) -> String {
    let mut out = String::new();
    out.push_str("# HELP llm_d_epp_kv_cache_events_stores_skipped_total BlockStored events llm-d skips, by the reasons it counts.\n");
    out.push_str("# TYPE llm_d_epp_kv_cache_events_stores_skipped_total counter\n");
    for v in &r.views {
        for (kind, reason, n) in v.stats.stores_skipped_by_kind.iter() {
            let _ = writeln!(
                out,
                "llm_d_epp_kv_cache_events_stores_skipped_total{{cache_kind=\"{}\",reason=\"{}\",index_block_size=\"{}\",profile=\"{}\"}} {n}",
                label(kind),
                reason,
                v.config.block_size,
                v.config.profile.name()
            );
        }
    }
    out.push_str("# HELP llm_d_epp_kv_cache_events_removals_skipped_total BlockRemoved events llm-d skips.\n");
    out.push_str("# TYPE llm_d_epp_kv_cache_events_removals_skipped_total counter\n");
    for v in &r.views {
        for ((kind, reason), n) in &v.stats.removals_skipped {
            let _ = writeln!(
                out,
                "llm_d_epp_kv_cache_events_removals_skipped_total{{cache_kind=\"{}\",reason=\"{}\",index_block_size=\"{}\"}} {n}",
                label(kind),
                reason,
                v.config.block_size
            );
        }
    }
    out.push_str("# HELP kvaudit_events_skipped_total Events or messages llm-d would not index, by every reason (llm-d counts only some).\n");
    out.push_str("# TYPE kvaudit_events_skipped_total counter\n");
    for v in &r.views {
        let series = v
            .stats
            .stores_skipped
            .iter()
            .chain(v.stats.messages_dropped.iter());
        for (reason, n) in series {
            let _ = writeln!(
                out,
                "kvaudit_events_skipped_total{{reason=\"{reason}\",index_block_size=\"{}\",profile=\"{}\"}} {n}",
                v.config.block_size,
                v.config.profile.name()
            );
        }
    }
    out.push_str(
        "# HELP kvaudit_tokens_total Tokens in BlockStored events, and tokens the index covers.\n",
    );
    out.push_str("# TYPE kvaudit_tokens_total counter\n");
    for v in &r.views {
        let _ = writeln!(
            out,
            "kvaudit_tokens_total{{kind=\"stored\",index_block_size=\"{}\"}} {}",
            v.config.block_size, v.stats.tokens_stored
        );
        let _ = writeln!(
            out,
            "kvaudit_tokens_total{{kind=\"indexed\",index_block_size=\"{}\"}} {}",
            v.config.block_size, v.stats.tokens_indexed
        );
    }
    out
}
