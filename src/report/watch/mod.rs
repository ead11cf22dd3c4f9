//! `kvaudit watch`'s report: the monitor's totals, what reading its inputs counted, and the
//! one-line answer.

mod human;
mod prometheus;

use serde::Serialize;

use super::json::Json;
use super::{Exporter, Format, Report, View};
use crate::watch::log::InputCounts;
use crate::watch::{CauseTotals, Totals};

/// The run's result with what names it.
pub struct WatchOutput<'a> {
    /// The model as the flag named it.
    pub model: &'a str,
    pub server: &'a str,
    pub block_size: usize,
    /// Where the requests came from.
    pub requests: &'a str,
    pub totals: &'a Totals,
    pub counts: &'a InputCounts,
}

#[derive(Serialize)]
pub struct WatchView<'a> {
    pub model: &'a str,
    pub server: &'a str,
    pub block_size: usize,
    pub requests_from: &'a str,
    pub totals: &'a Totals,
    pub input: &'a InputCounts,
    /// The one-line answer of the human view.
    pub answer: String,
}

impl View for WatchOutput<'_> {
    type View<'a>
        = WatchView<'a>
    where
        Self: 'a;

    fn view(&self) -> WatchView<'_> {
        WatchView {
            model: self.model,
            server: self.server,
            block_size: self.block_size,
            requests_from: self.requests,
            totals: self.totals,
            input: self.counts,
            answer: answer(self.totals),
        }
    }
}

impl Report for WatchOutput<'_> {
    const NAME: &'static str = "watch";

    fn exporter(&self, format: Format) -> Option<&dyn Exporter<Self>> {
        match format {
            Format::Human => Some(&human::Human),
            Format::Json => Some(&Json),
            Format::Prometheus => Some(&prometheus::Prometheus),
            _ => None,
        }
    }
}

/// A summary interval in words: "5 min", "90 s".
pub fn span(d: std::time::Duration) -> String {
    let s = d.as_secs();
    match s {
        0 => format!("{} ms", d.as_millis()),
        _ if s.is_multiple_of(3600) => format!("{} h", s / 3600),
        _ if s.is_multiple_of(60) => format!("{} min", s / 60),
        _ => format!("{s} s"),
    }
}

/// `part` of `whole` as a percentage with one decimal.
fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "0%".into();
    }
    format!("{:.1}%", part as f64 * 100.0 / whole as f64)
}

/// The causes of tokens an earlier request had left that the engine computed again, largest
/// first, each with its words for the answer.
fn lost(c: &CauseTotals, t: &Totals) -> Vec<(u64, String)> {
    let rewrite = match t.rewrite_classes.iter().max_by_key(|(_, n)| **n) {
        Some((class, _)) => format!("template rewrite ({class})"),
        None => "template rewrite".into(),
    };
    let mut parts = vec![
        (c.rewritten, rewrite),
        (c.misrouted, misrouted_words(t)),
        (c.evicted, "evicted".into()),
        (c.block_tail, "block tails".into()),
    ];
    parts.retain(|(n, _)| *n > 0);
    parts.sort_by_key(|p| std::cmp::Reverse(p.0));
    parts
}

/// "misrouted", with why the first router that explains any of it sent those turns away.
fn misrouted_words(t: &Totals) -> String {
    match t
        .routers
        .iter()
        .find_map(|r| r.main_reason().map(|why| (r, why)))
    {
        Some((r, why)) => format!("misrouted ({}: {why})", r.router),
        None => "misrouted".into(),
    }
}

/// "of N turns, X% of prompt tokens were recomputed: ..."; recomputed counts what an earlier
/// request had left (a new message is computed whatever the fleet does).
pub fn answer(t: &Totals) -> String {
    let c = &t.causes;
    let whole = c.total();
    let parts = lost(c, t);
    let recomputed: u64 = parts.iter().map(|(n, _)| n).sum();
    let turns = super::thousands(t.requests as u128);
    if parts.is_empty() {
        return format!(
            "of {turns} turns, no prompt token an earlier turn left was recomputed ({} reused, {} new)",
            percent(c.reused, whole),
            percent(c.new, whole)
        );
    }
    let list: Vec<String> = parts
        .iter()
        .map(|(n, what)| format!("{} {what}", percent(*n, whole)))
        .collect();
    format!(
        "of {turns} turns, {} of prompt tokens were recomputed: {}",
        percent(recomputed, whole),
        list.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watch::monitor::CauseTotals;

    #[test]
    fn an_interval_is_said_in_its_largest_whole_unit() {
        let s = std::time::Duration::from_secs;
        assert_eq!(span(s(300)), "5 min");
        assert_eq!(span(s(90)), "90 s");
        assert_eq!(span(s(7200)), "2 h");
        assert_eq!(span(std::time::Duration::from_millis(250)), "250 ms");
    }

    #[test]
    fn the_answer_of_an_interval_counts_only_what_came_in_it() {
        let earlier = Totals {
            requests: 10,
            causes: CauseTotals {
                reused: 800,
                new: 200,
                ..CauseTotals::default()
            },
            rewrite_classes: [("reasoning_dropped", 50)].into(),
            ..Totals::default()
        };
        let mut now = earlier.clone();
        now.requests = 14;
        now.causes.reused += 100;
        now.causes.rewritten += 300;
        now.causes.new += 100;
        *now.rewrite_classes.get_mut("reasoning_dropped").unwrap() += 300;
        let window = now.since(&earlier);
        assert_eq!(window.requests, 4);
        assert_eq!(window.rewrite_classes["reasoning_dropped"], 300);
        assert_eq!(
            answer(&window),
            "of 4 turns, 60.0% of prompt tokens were recomputed: 60.0% template rewrite (reasoning_dropped)"
        );
    }
}
