//! The corpus report as one self-contained HTML page: the JSON view plus the geometry of its
//! charts, computed here so the template only places shapes (inline SVG, no script, no
//! external asset, so it opens offline and prints).

use serde::Serialize;

use crate::report::thousands;

use super::{CorpusView, CostView};
use crate::corpus::CorpusReport;
use crate::report::{Exporter, Style, View};

pub struct Html;

impl Exporter<CorpusReport> for Html {
    fn export(&self, report: &CorpusReport, _style: &Style) -> anyhow::Result<String> {
        let view = report.view();
        let page = Page {
            charts: charts(&view),
            alternatives: alternatives(&view),
            derived_note: super::derived_note(&view),
            report: view,
        };
        crate::report::markdown::render_named("corpus.html", &page)
    }
}

#[derive(Serialize)]
struct Page<'a> {
    report: CorpusView<'a>,
    derived_note: Option<String>,
    charts: Vec<Chart>,
    alternatives: Vec<AlternativeChart>,
}

/// A horizontal bar chart: one row per bar, label left, value right.
#[derive(Serialize, Debug, PartialEq)]
pub struct Chart {
    pub id: String,
    pub title: String,
    pub caption: String,
    pub width: u32,
    pub height: u32,
    pub bars: Vec<Bar>,
}

#[derive(Serialize, Debug, PartialEq)]
pub struct Bar {
    pub label: String,
    pub value: String,
    pub y: u32,
    /// Bar length in px (at least 1 for a non-zero value, so it shows).
    pub length: u32,
    /// A stacked second segment after it, in px (0 for a plain bar).
    pub second: u32,
}

const WIDTH: u32 = 640;
const LABEL: u32 = 150;
const VALUE: u32 = 90;
const ROW: u32 = 22;
const BAR: u32 = WIDTH - LABEL - VALUE;

/// Length of `n` of `max` on a bar of `full` px, at least 1 for a non-zero value.
fn scaled(n: u64, max: u64, full: u32) -> u32 {
    if max == 0 || n == 0 {
        0
    } else {
        ((u128::from(n) * u128::from(full)) / u128::from(max)).max(1) as u32
    }
}

fn chart(id: &str, title: &str, caption: &str, bars: Vec<Bar>) -> Chart {
    Chart {
        id: id.into(),
        title: title.into(),
        caption: caption.into(),
        width: WIDTH,
        height: bars.len() as u32 * ROW + 4,
        bars,
    }
}

/// Two segments per bar, scaled together: where a total splits (prefill pod, decode pod).
pub fn stacked_chart(
    id: &str,
    title: &str,
    caption: &str,
    rows: Vec<(String, u64, u64, String)>,
) -> Chart {
    let max = rows.iter().map(|r| r.1 + r.2).max().unwrap_or(0);
    let bars: Vec<Bar> = rows
        .into_iter()
        .enumerate()
        .map(|(i, (label, a, b, value))| {
            // Shorter than a plain bar: its value ("P … + D …") needs the room.
            let full = BAR * 3 / 4;
            let length = scaled(a, max, full);
            Bar {
                label,
                value,
                y: i as u32 * ROW,
                length,
                second: scaled(a + b, max, full).saturating_sub(length),
            }
        })
        .collect();
    chart(id, title, caption, bars)
}

pub fn bar_chart(id: &str, title: &str, caption: &str, rows: Vec<(String, u64, String)>) -> Chart {
    let max = rows.iter().map(|r| r.1).max().unwrap_or(0);
    let bars: Vec<Bar> = rows
        .into_iter()
        .enumerate()
        .map(|(i, (label, n, value))| Bar {
            label,
            value,
            y: i as u32 * ROW,
            length: scaled(n, max, BAR),
            second: 0,
        })
        .collect();
    chart(id, title, caption, bars)
}

fn charts(v: &CorpusView) -> Vec<Chart> {
    let mut out = Vec::new();
    for b in &v.block_sizes {
        out.push(bar_chart(
            &format!("uncached-{}", b.block_size),
            &format!("Uncached tokens per transition, B={}", b.block_size),
            &format!(
                "{} transitions; p50 {}, p90 {}, p99 {}, max {}; the decode pod holds {:.1}% of the next prompts' tokens",
                thousands(b.uncached.count.into()),
                thousands(b.uncached.p50.into()),
                thousands(b.uncached.p90.into()),
                thousands(b.uncached.p99.into()),
                thousands(b.uncached.max.into()),
                b.held_share * 100.0
            ),
            b.histogram
                .iter()
                .map(|h| {
                    let label = if h.low == h.high {
                        h.low.to_string()
                    } else {
                        format!("{}–{}", h.low, h.high)
                    };
                    (label, h.count, thousands(h.count.into()))
                })
                .collect(),
        ));
    }
    let mut classes: Vec<(String, u64, String)> = v
        .rewrites
        .iter()
        .map(|(c, n)| (c.to_string(), *n, thousands((*n).into())))
        .collect();
    let clean = v.transitions - v.transitions_with_rewrite;
    classes.push((
        "extends (no rewrite)".into(),
        clean,
        thousands(clean.into()),
    ));
    out.push(bar_chart(
        "rewrites",
        "Transitions by rewrite class",
        &format!(
            "{} of {} transitions ({:.1}%) have a rewrite point",
            thousands(v.transitions_with_rewrite.into()),
            thousands(v.transitions.into()),
            v.rewrite_share * 100.0
        ),
        classes,
    ));
    if let Some(r) = &v.router {
        out.push(bar_chart(
            "verdicts",
            "Decider verdicts",
            &format!(
                "llm-d prefix-based P/D decider; the index (block {}) sees {} of the {} tokens the engine (block {}) holds ({:.1}%)",
                r.index_block_size,
                thousands(r.index_visible_tokens.into()),
                thousands(r.engine_cached_tokens.into()),
                r.engine_block_size,
                r.visible_share * 100.0
            ),
            r.decider_verdicts
                .iter()
                .map(|(k, n)| (k.to_string(), *n, thousands((*n).into())))
                .collect(),
        ));
    }
    if !v.routers.is_empty() {
        out.push(bar_chart(
            "routers",
            "Turns kept on the decode pod, per router",
            &format!(
                "of {} transitions: where each router sends the next turn (back to the pod that served the turn before)",
                thousands(v.transitions.into())
            ),
            v.routers
                .iter()
                .map(|r| {
                    (
                        r.spec.to_string(),
                        r.stays_on_decode,
                        format!(
                            "{} of {}",
                            thousands(r.stays_on_decode.into()),
                            thousands(r.transitions.into())
                        ),
                    )
                })
                .collect(),
        ));
    }
    if let Some(nc) = &v.non_cached_tokens {
        out.push(bar_chart(
            "non-cached-tokens",
            "nonCachedTokens: turns that stay on the decode pod",
            &format!(
                "a router that sees what the decode pod holds; recommended {} ({})",
                nc.recommended, nc.goal
            ),
            nc.candidates
                .iter()
                .map(|c| {
                    (
                        c.non_cached_tokens.to_string(),
                        c.stay_on_decode,
                        format!("{:.1}%", c.share * 100.0),
                    )
                })
                .collect(),
        ));
    }
    out
}

/// The four serving paths side by side at one block size: tokens computed and moved.
#[derive(Serialize, Debug)]
struct AlternativeChart {
    block_size: usize,
    computed: Chart,
    moved: Chart,
}

fn alternatives(v: &CorpusView) -> Vec<AlternativeChart> {
    v.alternatives
        .block_sizes
        .iter()
        .map(|a| {
            let paths: [(&str, &CostView); 4] = [
                ("pd", &a.pd),
                ("vllm_bidirectional", &a.vllm_bidirectional),
                ("sglang_decode_radix", &a.sglang_decode_radix),
                ("decode_local", &a.decode_local),
            ];
            let computed = paths
                .iter()
                .map(|(name, c)| {
                    let value = format!(
                        "P {} + D {}",
                        thousands(c.prefill_computed.into()),
                        thousands(c.decode_computed.into())
                    );
                    (name.to_string(), c.prefill_computed, c.decode_computed, value)
                })
                .collect();
            let moved = paths
                .iter()
                .map(|(name, c)| {
                    let n = c.moved_p_to_d + c.moved_d_to_p;
                    (name.to_string(), n, thousands(n.into()))
                })
                .collect();
            AlternativeChart {
                block_size: a.block_size,
                computed: stacked_chart(
                    &format!("computed-{}", a.block_size),
                    &format!("Tokens computed, where: P then D, B={}", a.block_size),
                    "blue: prefill on the prefill pod; orange: prefill on the decode pod (append or whole), summed over every transition",
                    computed,
                ),
                moved: bar_chart(
                    &format!("moved-{}", a.block_size),
                    &format!("KV tokens moved (P→D + D→P), B={}", a.block_size),
                    "tokens whose KV crosses between pods",
                    moved,
                ),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_groups_digits_by_three() {
        let cases = [
            (0, "0"),
            (999, "999"),
            (1000, "1,000"),
            (1_234_567, "1,234,567"),
        ];
        for (n, text) in cases {
            assert_eq!(thousands(n), text);
        }
        assert_eq!(thousands(u128::MAX).matches(',').count(), 12);
    }

    #[test]
    fn stacked_bars_split_one_scale_between_their_segments() {
        let c = stacked_chart(
            "x",
            "t",
            "c",
            vec![
                ("a".into(), 300, 100, "v".into()),
                ("b".into(), 0, 400, "v".into()),
                ("c".into(), 0, 0, "v".into()),
            ],
        );
        let full = BAR * 3 / 4;
        let segments: Vec<(u32, u32)> = c.bars.iter().map(|b| (b.length, b.second)).collect();
        assert_eq!(segments, [(full * 3 / 4, full / 4), (0, full), (0, 0)]);
    }

    #[test]
    fn bars_scale_to_the_largest_and_small_values_stay_visible() {
        let c = bar_chart(
            "x",
            "t",
            "c",
            vec![
                ("a".into(), 1000, "1000".into()),
                ("b".into(), 1, "1".into()),
                ("c".into(), 0, "0".into()),
                ("d".into(), 500, "500".into()),
            ],
        );
        let lengths: Vec<u32> = c.bars.iter().map(|b| b.length).collect();
        assert_eq!(lengths, [BAR, 1, 0, BAR / 2]);
        assert_eq!(c.bars[3].y, 3 * ROW);
        assert_eq!(c.height, 4 * ROW + 4);
        assert!(bar_chart("e", "t", "c", vec![]).bars.is_empty());
    }
}
