//! The corpus report: its view (the JSON shape, defined once; the HTML report reads the same
//! view) and its exporters.

mod html;
mod human;

use std::collections::BTreeMap;

use serde::Serialize;

use super::diff_turns::{ModelView, TransitionView};
use super::json::Json;
use super::{Exporter, Format, Report, View};
use crate::audit::ConversationAudit;
use crate::corpus::alternatives::{ASSUMPTIONS, Cost, Costs};
use crate::corpus::stats::Bucket;
use crate::corpus::{BlockTotals, CorpusReport, Divergence, RouterTotals, Worst};

/// The JSON shape of the corpus report (and of each per-transition line).
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Serialize)]
pub struct CorpusView<'a> {
    pub schema_version: u32,
    pub model: ModelView<'a>,
    pub input: InputView<'a>,
    /// Conversations audited (rows skipped are not among them).
    pub conversations: u64,
    pub transitions: u64,
    pub rows: u64,
    pub skipped_rows: BTreeMap<&'static str, u64>,
    pub skipped_examples: BTreeMap<&'static str, SkippedView<'a>>,
    /// Conversations audited up to the first request the server refuses (counted among
    /// `conversations`, their transitions before it among `transitions`), by reason.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub partial_conversations: BTreeMap<&'static str, u64>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub partial_examples: BTreeMap<&'static str, SkippedView<'a>>,
    pub transitions_with_rewrite: u64,
    pub rewrite_share: f64,
    pub rewrites: &'a BTreeMap<&'static str, u64>,
    pub transitions_with_drift: u64,
    /// Replies, and those that gave neither their generated text nor their reasoning on a
    /// model whose format has a reasoning block: kvaudit derived what was generated from the
    /// format (an empty reasoning block before the content).
    pub replies: u64,
    pub derived_replies: u64,
    pub percentile_definition: &'static str,
    pub block_sizes: Vec<BlockView<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub router: Option<RouterView<'a>>,
    /// Each `--router`'s answers, totalled (llm-d's alone when none was given).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub routers: Vec<AnswerTotalsView<'a>>,
    /// Candidate nonCachedTokens for the P/D decider, measured on this corpus (with the
    /// router view).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub non_cached_tokens: Option<NonCachedView>,
    pub alternatives: AlternativesView,
    pub session_key_collisions: CollisionsView<'a>,
    /// With `--remedies`: each remedy over the rewrite points it applies to, best first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remedies: Option<RemediesView<'a>>,
    pub worst_conversations: Vec<WorstView<'a>>,
}

#[derive(Serialize)]
pub struct RemediesView<'a> {
    pub transitions_with_rewrite: u64,
    pub conversations_without_switch: u64,
    /// Sorted by uncached tokens under the remedy at the first block size, then by name.
    pub by_remedy: Vec<RemedyView<'a>>,
    /// Each rewrite point under its own best remedy (or none, when none reduces it).
    pub best_per_transition: RemedyView<'a>,
}

#[derive(Serialize)]
pub struct RemedyView<'a> {
    pub remedy: &'a str,
    pub kind: &'a str,
    pub transitions: u64,
    pub removes_rewrite: u64,
    pub uncached: Vec<BeforeAfter>,
}

#[derive(Serialize)]
pub struct BeforeAfter {
    pub block_size: usize,
    pub before: u64,
    pub after: u64,
}

fn remedy_view<'a>(
    name: &'a str,
    t: &'a crate::corpus::RemedyTotals,
    block_sizes: &[usize],
) -> RemedyView<'a> {
    RemedyView {
        remedy: name,
        kind: t.kind,
        transitions: t.transitions,
        removes_rewrite: t.removes_rewrite,
        uncached: block_sizes
            .iter()
            .enumerate()
            .map(|(i, &block_size)| BeforeAfter {
                block_size,
                before: t.before.get(i).copied().unwrap_or(0),
                after: t.after.get(i).copied().unwrap_or(0),
            })
            .collect(),
    }
}

fn remedies_view<'a>(
    r: &'a crate::corpus::RemedyTally,
    rewrites: u64,
    block_sizes: &[usize],
) -> RemediesView<'a> {
    let mut by_remedy: Vec<RemedyView> = r
        .by_remedy
        .iter()
        .map(|(name, t)| remedy_view(name, t, block_sizes))
        .collect();
    let first_after = |v: &RemedyView| v.uncached.first().map_or(0, |u| u.after);
    by_remedy.sort_by(|a, b| {
        first_after(a)
            .cmp(&first_after(b))
            .then(b.removes_rewrite.cmp(&a.removes_rewrite))
            .then(a.remedy.cmp(b.remedy))
    });
    RemediesView {
        transitions_with_rewrite: rewrites,
        conversations_without_switch: r.conversations_without_switch,
        by_remedy,
        best_per_transition: remedy_view("best remedy per rewrite point", &r.best, block_sizes),
    }
}

#[derive(Serialize)]
pub struct InputView<'a> {
    pub files: Vec<FileView<'a>>,
    /// `--sample N --seed S`: the rows kept of those read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampled: Option<SampledView>,
    /// Reading stopped at `--limit`.
    pub limited: bool,
    pub jobs: usize,
}

#[derive(Serialize)]
pub struct SampledView {
    pub kept: u64,
    pub of: u64,
    pub seed: u64,
}

#[derive(Serialize)]
pub struct FileView<'a> {
    pub path: &'a str,
    pub format: &'a str,
    pub compression: &'a str,
    pub rows: u64,
}

#[derive(Serialize)]
pub struct SkippedView<'a> {
    pub rows: Vec<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_error: Option<&'a str>,
}

/// A distribution as reported: count, sum, mean, nearest-rank p50/p90/p99, max.
pub type DistributionView = crate::corpus::stats::Summary;

#[derive(Serialize)]
pub struct BucketView {
    pub low: u64,
    pub high: u64,
    pub count: u64,
}

#[derive(Serialize)]
pub struct BlockView<'a> {
    pub block_size: usize,
    pub uncached: DistributionView,
    /// Held tokens (in full blocks) made useless by a rewrite point, over transitions with one.
    pub lost_at_rewrite: DistributionView,
    pub rewrites: &'a BTreeMap<&'static str, u64>,
    pub next_prompt_tokens: u64,
    /// Next-prompt tokens the decode pod already holds, in full blocks.
    pub held_tokens_reused: u64,
    pub held_share: f64,
    pub histogram: Vec<BucketView>,
}

#[derive(Serialize)]
pub struct RouterView<'a> {
    pub engine_block_size: usize,
    pub index_block_size: usize,
    pub next_prompt_tokens: u64,
    pub engine_cached_tokens: u64,
    pub index_visible_tokens: u64,
    pub visible_share: f64,
    pub transitions_index_short: u64,
    pub events_emitted: u64,
    pub events_skipped: &'a BTreeMap<&'static str, u64>,
    pub decider_verdicts: &'a BTreeMap<&'static str, u64>,
}

/// What a reader must know when replies were derived from the model's reasoning format.
pub fn derived_note(v: &CorpusView) -> Option<String> {
    (v.derived_replies > 0).then(|| {
        format!(
            "{} of {} replies carried no reasoning and no generated text: kvaudit derived what the model generated from its reasoning format (an empty reasoning block before the content), so rewrites such as reasoning_dropped assume the model wrote that block",
            crate::report::thousands(v.derived_replies.into()),
            crate::report::thousands(v.replies.into())
        )
    })
}

/// The candidates the nonCachedTokens table shows.
pub const NON_CACHED_CANDIDATES: [u64; 10] = [16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192];

/// The share of transitions the table's recommendation keeps on the decode pod.
pub const NON_CACHED_GOAL: f64 = 0.9;

#[derive(Serialize)]
pub struct NonCachedView {
    pub definition: &'static str,
    pub transitions: u64,
    pub candidates: Vec<NonCachedRow>,
    pub goal: &'static str,
    /// The smallest threshold that meets the goal: one more than the goal's percentile of
    /// the uncached tokens.
    pub recommended: u64,
}

#[derive(Serialize)]
pub struct NonCachedRow {
    pub non_cached_tokens: u64,
    pub stay_on_decode: u64,
    pub share: f64,
    /// Tokens the decode pods compute themselves for the transitions that stay.
    pub decode_prefill_tokens: u128,
}

fn non_cached_view(d: &crate::corpus::stats::Distribution) -> Option<NonCachedView> {
    let n = d.count();
    if n == 0 {
        return None;
    }
    let candidates = NON_CACHED_CANDIDATES
        .iter()
        .map(|&c| {
            let (stay, sum) = d.below(c);
            NonCachedRow {
                non_cached_tokens: c,
                stay_on_decode: stay,
                share: share(stay, n),
                decode_prefill_tokens: sum,
            }
        })
        .collect();
    Some(NonCachedView {
        definition: "a transition stays on the decode pod when the next prompt's tokens outside the engine's full cached blocks are fewer than nonCachedTokens (llm-d's prefix-based-pd-decider reading a precise index at the engine's block size; promptTokens off)",
        transitions: n,
        candidates,
        goal: "keep 90% of transitions on the decode pod",
        recommended: d.percentile(90) + 1,
    })
}

#[derive(Serialize)]
pub struct AnswerTotalsView<'a> {
    pub router: &'static str,
    /// The `--router` value as given.
    pub spec: &'a str,
    pub version: &'static str,
    pub transitions: u64,
    /// Transitions whose next turn goes back to the decode pod of the turn before.
    pub stays_on_decode: u64,
    pub visible_tokens: u64,
    pub next_prompt_tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unit: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched_units: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_units: Option<u64>,
    /// Transitions by why the router decided as it did.
    pub reasons: BTreeMap<&'static str, u64>,
    #[serde(skip)]
    pub main_reason: Option<&'static str>,
}

impl<'a> AnswerTotalsView<'a> {
    fn new(a: &'a crate::routers::Totals) -> Self {
        AnswerTotalsView {
            router: a.router,
            spec: &a.label,
            version: a.version,
            transitions: a.transitions,
            stays_on_decode: a.decode,
            visible_tokens: a.visible_tokens,
            next_prompt_tokens: a.next_tokens,
            unit: a.unit,
            matched_units: a.unit.map(|_| a.matched_units),
            input_units: a.unit.map(|_| a.input_units),
            reasons: a.reasons.clone(),
            main_reason: a.main_reason(),
        }
    }
}

#[derive(Serialize, Clone, Copy)]
pub struct CostView {
    pub prefill_computed: u64,
    pub decode_computed: u64,
    pub moved_p_to_d: u64,
    pub moved_d_to_p: u64,
    /// Bytes moved both ways, when KV bytes per token are known.
    pub bytes_moved: Option<u128>,
}

impl CostView {
    fn new(c: &Cost, per_token: Option<u64>) -> Self {
        CostView {
            prefill_computed: c.prefill_computed,
            decode_computed: c.decode_computed,
            moved_p_to_d: c.moved_p_to_d,
            moved_d_to_p: c.moved_d_to_p,
            bytes_moved: per_token.map(|b| u128::from(c.moved()) * u128::from(b)),
        }
    }
}

#[derive(Serialize)]
pub struct AlternativesAtBlock {
    pub block_size: usize,
    pub pd: CostView,
    pub vllm_bidirectional: CostView,
    pub sglang_decode_radix: CostView,
    pub decode_local: CostView,
}

impl AlternativesAtBlock {
    pub fn new(block_size: usize, c: &Costs, per_token: Option<u64>) -> Self {
        let v = |i: usize| CostView::new(&c.0[i], per_token);
        AlternativesAtBlock {
            block_size,
            pd: v(0),
            vllm_bidirectional: v(1),
            sglang_decode_radix: v(2),
            decode_local: v(3),
        }
    }
}

#[derive(Serialize)]
pub struct AlternativesView {
    pub prefill_affinity: &'static str,
    pub kv_recompute_threshold: usize,
    pub kv_bytes_per_token: Option<u64>,
    pub kv_bytes_source: Option<String>,
    pub assumptions: &'static [&'static str],
    pub block_sizes: Vec<AlternativesAtBlock>,
}

#[derive(Serialize)]
pub struct CollisionsView<'a> {
    pub definition: &'static str,
    pub distinct_keys: u64,
    pub shared_keys: u64,
    pub conversations_sharing: u64,
    pub turn2plus_requests_sharing: u64,
    pub turn2plus_requests_misrouted: u64,
    pub largest: Vec<SharedKeyView<'a>>,
}

#[derive(Serialize)]
pub struct SharedKeyView<'a> {
    pub key: &'a str,
    pub conversations: u64,
    pub turn2plus_requests: u64,
    pub first_user_message: &'a str,
}

#[derive(Serialize)]
pub struct WorstView<'a> {
    pub source: &'a str,
    pub transitions: usize,
    pub rewrites: usize,
    pub next_prompt_tokens: u64,
    pub uncached: Vec<BlockCount>,
    pub divergence: Option<&'a Divergence>,
}

#[derive(Serialize)]
pub struct BlockCount {
    pub block_size: usize,
    pub tokens: u64,
}

pub const PERCENTILES: &str = "nearest rank: the p-th percentile is the smallest observed value v such that at least p% of the values are <= v";

pub const SESSION_KEY: &str = "MD5 of the first user message's content (the PPD paper's proxy); misrouted counts, for each shared key, the turn-2+ requests of every conversation but the one with the most, which all reach one pod when the conversations overlap in time";

fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

fn block_view<'a>(b: &'a BlockTotals, classes: &'a BTreeMap<&'static str, u64>) -> BlockView<'a> {
    BlockView {
        block_size: b.block_size,
        uncached: b.uncached.summary(),
        lost_at_rewrite: b.lost.summary(),
        rewrites: classes,
        next_prompt_tokens: b.next_tokens,
        held_tokens_reused: b.reusable,
        held_share: share(b.reusable, b.next_tokens),
        histogram: b
            .uncached
            .histogram()
            .into_iter()
            .map(|Bucket { low, high, count }| BucketView { low, high, count })
            .collect(),
    }
}

fn router_view(r: &RouterTotals) -> RouterView<'_> {
    RouterView {
        engine_block_size: r.engine_block_size,
        index_block_size: r.index_block_size,
        next_prompt_tokens: r.next_tokens,
        engine_cached_tokens: r.engine_cached,
        index_visible_tokens: r.index_visible,
        visible_share: share(r.index_visible, r.engine_cached),
        transitions_index_short: r.index_short,
        events_emitted: r.events_emitted,
        events_skipped: &r.events_skipped,
        decider_verdicts: &r.verdicts,
    }
}

fn worst_view<'a>(w: &'a Worst, block_sizes: &[usize]) -> WorstView<'a> {
    WorstView {
        source: &w.source,
        transitions: w.transitions,
        rewrites: w.rewrites,
        next_prompt_tokens: w.next_tokens,
        uncached: block_sizes
            .iter()
            .zip(&w.uncached)
            .map(|(&block_size, &tokens)| BlockCount { block_size, tokens })
            .collect(),
        divergence: w.divergence.as_ref(),
    }
}

/// Rows by reason.
fn counts(s: &crate::corpus::Skips) -> BTreeMap<&'static str, u64> {
    s.0.iter().map(|(k, s)| (*k, s.count)).collect()
}

/// The first rows of each reason, and its first error.
fn examples(s: &crate::corpus::Skips) -> BTreeMap<&'static str, SkippedView<'_>> {
    s.0.iter()
        .map(|(k, s)| {
            (
                *k,
                SkippedView {
                    rows: s.rows.iter().map(|r| r.1.as_str()).collect(),
                    first_error: s.first_error.as_ref().map(|e| e.1.as_str()),
                },
            )
        })
        .collect()
}

impl View for CorpusReport {
    type View<'a> = CorpusView<'a>;

    fn view(&self) -> CorpusView<'_> {
        let t = &self.tally;
        let per_token = self.settings.kv_bytes.as_ref().map(|k| k.bytes_per_token);
        CorpusView {
            schema_version: SCHEMA_VERSION,
            model: ModelView::new(&self.model),
            input: InputView {
                files: self
                    .input
                    .files
                    .iter()
                    .map(|f| FileView {
                        path: &f.path,
                        format: f.format,
                        compression: f.compression,
                        rows: f.rows,
                    })
                    .collect(),
                sampled: self.input.sampled.map(|(kept, of)| SampledView {
                    kept,
                    of,
                    seed: self.settings.seed,
                }),
                limited: self.input.limited,
                jobs: self.settings.jobs,
            },
            conversations: t.conversations,
            transitions: t.transitions,
            rows: t.rows,
            skipped_rows: counts(&t.skipped),
            skipped_examples: examples(&t.skipped),
            partial_conversations: counts(&t.partial),
            partial_examples: examples(&t.partial),
            transitions_with_rewrite: t.transitions_with_rewrite,
            rewrite_share: share(t.transitions_with_rewrite, t.transitions),
            rewrites: &t.classes,
            transitions_with_drift: t.transitions_with_drift,
            replies: t.replies,
            derived_replies: t.derived_replies,
            percentile_definition: PERCENTILES,
            block_sizes: t.blocks.iter().map(|b| block_view(b, &t.classes)).collect(),
            router: t.router.as_ref().map(router_view),
            routers: t.answers.iter().map(AnswerTotalsView::new).collect(),
            non_cached_tokens: non_cached_view(&t.decode_uncached),
            alternatives: AlternativesView {
                prefill_affinity: self.settings.assumptions.prefill_affinity.name(),
                kv_recompute_threshold: self.settings.assumptions.kv_recompute_threshold,
                kv_bytes_per_token: per_token,
                kv_bytes_source: self
                    .settings
                    .kv_bytes
                    .as_ref()
                    .map(|k| k.derivation.clone()),
                assumptions: &ASSUMPTIONS,
                block_sizes: t
                    .blocks
                    .iter()
                    .map(|b| AlternativesAtBlock::new(b.block_size, &b.costs, per_token))
                    .collect(),
            },
            session_key_collisions: CollisionsView {
                definition: SESSION_KEY,
                distinct_keys: self.collisions.distinct_keys,
                shared_keys: self.collisions.shared_keys,
                conversations_sharing: self.collisions.conversations_sharing,
                turn2plus_requests_sharing: self.collisions.requests_sharing,
                turn2plus_requests_misrouted: self.collisions.requests_misrouted,
                largest: self
                    .collisions
                    .largest
                    .iter()
                    .map(|k| SharedKeyView {
                        key: &k.key,
                        conversations: k.conversations,
                        turn2plus_requests: k.requests,
                        first_user_message: &k.excerpt,
                    })
                    .collect(),
            },
            remedies: t
                .remedies
                .as_ref()
                .map(|r| remedies_view(r, t.transitions_with_rewrite, &self.settings.block_sizes)),
            worst_conversations: t
                .worst
                .iter()
                .map(|w| worst_view(w, &self.settings.block_sizes))
                .collect(),
        }
    }
}

impl Report for CorpusReport {
    const NAME: &'static str = "corpus";

    fn exporter(&self, format: Format) -> Option<&dyn Exporter<Self>> {
        match format {
            Format::Human => Some(&human::Human),
            Format::Json => Some(&Json),
            Format::Html => Some(&html::Html),
            Format::Markdown => Some(&crate::report::markdown::Markdown),
            Format::Prometheus | Format::Sarif | Format::Junit => None,
        }
    }
}

/// One line of `--per-transition`: the transition exactly as `diff-turns --format json`
/// reports it, with the conversation it belongs to and each alternative's cost.
#[derive(Serialize)]
pub struct TransitionLine<'a> {
    pub schema_version: u32,
    pub conversation: &'a str,
    #[serde(flatten)]
    pub transition: TransitionView<'a>,
    pub alternatives: Vec<AlternativesAtBlock>,
}

/// The per-transition lines of one conversation, each ending in a newline.
pub fn transition_lines(
    audit: &ConversationAudit,
    costs: &[Vec<Costs>],
    block_sizes: &[usize],
    per_token: Option<u64>,
) -> anyhow::Result<String> {
    let mut out = String::new();
    for (i, (transition, costs)) in audit.transitions.iter().zip(costs).enumerate() {
        let line = TransitionLine {
            schema_version: SCHEMA_VERSION,
            conversation: &audit.source,
            transition: {
                let mut view = TransitionView::new(transition, audit.routers.get(i), None);
                view.routers = audit
                    .answers
                    .get(i)
                    .map(|a| a.iter().map(super::diff_turns::AnswerView::new).collect())
                    .unwrap_or_default();
                view
            },
            alternatives: block_sizes
                .iter()
                .zip(costs)
                .map(|(&b, c)| AlternativesAtBlock::new(b, c, per_token))
                .collect(),
        };
        out.push_str(&serde_json::to_string(&line)?);
        out.push('\n');
    }
    Ok(out)
}
