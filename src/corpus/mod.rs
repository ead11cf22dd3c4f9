//! `corpus`: many conversations audited on worker threads, exactly as `diff-turns` audits one,
//! and totalled: distributions of uncached tokens per block size, rewrite classes, the router's
//! view, the PPD session key, and what each serving alternative computes and moves.
//!
//! Every total is a sum, an exact count per value, or a top-k with a deterministic tie-break,
//! so workers keep their own tallies and merge them at the end: the report is the same for any
//! `--jobs`. Only the per-transition file needs input order; it goes through a reorder buffer
//! whose size is bounded by holding workers back.

pub mod alternatives;
pub mod input;
pub mod kv_bytes;
pub mod parquet_file;
pub mod partial;
pub mod sessions;
pub mod stats;
mod zstd_frames;

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};

use anyhow::Result;

use crate::align::{TokenView, Transition};
use crate::audit::{Auditor, ConversationAudit, ModelInfo, PlanAhead, Planned};
use crate::render::Conversation;
use alternatives::{Assumptions, Costs, TransitionTokens};
use kv_bytes::KvBytes;
use sessions::{Collisions, SessionKeys};
use stats::Distribution;

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct CorpusSettings {
    pub block_sizes: Vec<usize>,
    pub jobs: usize,
    /// `--seed`, reported with a sample.
    pub seed: u64,
    pub assumptions: Assumptions,
    pub kv_bytes: Option<KvBytes>,
    /// How many of the worst conversations the report keeps.
    pub worst: usize,
    /// How many shared session keys the report lists.
    pub shared_keys: usize,
    /// What a Parquet file may make the reading do (`--parquet-limit`): it changes which
    /// files are read, never a figure, so partials neither carry nor compare it.
    #[serde(skip)]
    pub parquet_limits: parquet_file::Limits,
}

/// Row numbers kept per skip reason.
pub const EXAMPLE_ROWS: usize = 5;
/// The most worst conversations a report lists (`--worst`): each merge inserts into the list.
pub const MAX_WORST: usize = 10_000;

/// Rows of one reason that could not be used.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Skipped {
    pub count: u64,
    /// The first rows (by input order) as `FILE:ROW`.
    pub rows: Vec<(u64, String)>,
    /// The error of the first of them, when there was one.
    pub first_error: Option<(u64, String)>,
}

/// Skipped rows by reason: order-independent (the first rows are the smallest input orders).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Skips(
    #[serde(deserialize_with = "crate::names::de_name_map")] pub BTreeMap<&'static str, Skipped>,
);

impl Skips {
    pub fn add(&mut self, reason: &'static str, order: u64, row: String, error: Option<String>) {
        let s = self.0.entry(reason).or_default();
        s.count += 1;
        s.rows.push((order, row));
        s.rows.sort_by_key(|r| r.0);
        s.rows.truncate(EXAMPLE_ROWS);
        if let Some(e) = error
            && s.first_error.as_ref().is_none_or(|(o, _)| order < *o)
        {
            s.first_error = Some((order, e));
        }
    }

    pub fn merge(&mut self, other: Skips) {
        for (reason, o) in other.0 {
            let s = self.0.entry(reason).or_default();
            s.count += o.count;
            s.rows.extend(o.rows);
            s.rows.sort_by_key(|r| r.0);
            s.rows.truncate(EXAMPLE_ROWS);
            if let Some((order, e)) = o.first_error
                && s.first_error.as_ref().is_none_or(|(f, _)| order < *f)
            {
                s.first_error = Some((order, e));
            }
        }
    }

    pub fn total(&self) -> u64 {
        self.0.values().map(|s| s.count).sum()
    }

    /// Row numbers moved by `by` (see [`Tally::shifted`]).
    fn shifted(mut self, by: u64) -> Option<Skips> {
        for s in self.0.values_mut() {
            for (order, _) in &mut s.rows {
                *order = order.checked_add(by)?;
            }
            if let Some((order, _)) = &mut s.first_error {
                *order = order.checked_add(by)?;
            }
        }
        Some(self)
    }
}

/// Totals at one block size.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct BlockTotals {
    pub block_size: usize,
    /// Uncached tokens of every transition.
    pub uncached: Distribution,
    /// Held tokens in full blocks that a rewrite point makes useless,
    /// `floor(held/B)*B - floor(min(LCP, held)/B)*B`, over transitions with a rewrite point.
    pub lost: Distribution,
    pub next_tokens: u64,
    /// Next-prompt tokens the decode pod already holds (in full blocks).
    pub reusable: u64,
    pub costs: Costs,
}

/// The router's view, totalled (when `--engine-block-size` etc. ask for it).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct RouterTotals {
    pub engine_block_size: usize,
    pub index_block_size: usize,
    pub next_tokens: u64,
    pub engine_cached: u64,
    pub index_visible: u64,
    /// Transitions where the index sees less than the engine holds.
    pub index_short: u64,
    pub events_emitted: u64,
    #[serde(deserialize_with = "crate::names::de_name_map")]
    pub events_skipped: BTreeMap<&'static str, u64>,
    #[serde(deserialize_with = "crate::names::de_name_map")]
    pub verdicts: BTreeMap<&'static str, u64>,
}

/// One remedy (as [`crate::audit::Remedy::group`] names it) over every rewrite point it was
/// measured on (`--remedies`).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RemedyTotals {
    #[serde(deserialize_with = "crate::names::de_name")]
    pub kind: crate::names::Name,
    /// Rewrite points it applies to.
    pub transitions: u64,
    pub removes_rewrite: u64,
    /// Uncached tokens of those transitions without and with it, per block size.
    pub before: Vec<u64>,
    pub after: Vec<u64>,
}

impl RemedyTotals {
    fn add(&mut self, other: &RemedyTotals) {
        // An empty total (a worker or shard with no rewrite point) names no remedy.
        if other.transitions > 0 {
            self.kind = other.kind;
        }
        self.transitions += other.transitions;
        self.removes_rewrite += other.removes_rewrite;
        add_each(&mut self.before, &other.before);
        add_each(&mut self.after, &other.after);
    }
}

fn add_each(into: &mut Vec<u64>, from: &[u64]) {
    if into.len() < from.len() {
        into.resize(from.len(), 0);
    }
    for (a, b) in into.iter_mut().zip(from) {
        *a += b;
    }
}

/// Every remedy's totals, and the best remedy of each rewrite point taken together.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RemedyTally {
    pub by_remedy: BTreeMap<String, RemedyTotals>,
    /// Per rewrite point, the remedy with the fewest uncached tokens at the first block size
    /// (none applied when none reduces them).
    pub best: RemedyTotals,
    /// Conversations whose template reads no history switch.
    pub conversations_without_switch: u64,
}

/// Where one of the worst conversations first diverges, as text.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Divergence {
    pub from_prompt: usize,
    pub position: usize,
    #[serde(deserialize_with = "crate::names::de_name")]
    pub class: crate::names::Name,
    pub before: String,
    pub held: String,
    pub next: String,
}

/// A conversation ranked by its uncached tokens at the first block size.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Worst {
    pub order: u64,
    pub source: String,
    pub transitions: usize,
    pub rewrites: usize,
    pub next_tokens: u64,
    /// Per block size, in `block_sizes` order.
    pub uncached: Vec<u64>,
    pub divergence: Option<Divergence>,
}

/// One worker's totals (and, merged, the run's, and a shard's in a partial).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tally {
    pub conversations: u64,
    pub transitions: u64,
    pub transitions_with_rewrite: u64,
    pub transitions_with_drift: u64,
    /// Replies, and those whose generated text was derived from the model's reasoning format.
    pub replies: u64,
    pub derived_replies: u64,
    #[serde(deserialize_with = "crate::names::de_name_map")]
    pub classes: BTreeMap<&'static str, u64>,
    pub blocks: Vec<BlockTotals>,
    pub router: Option<RouterTotals>,
    /// Each `--router`'s answers, in the order given.
    pub answers: Vec<crate::routers::Totals>,
    /// Per transition, the tokens of the next prompt the decode pod would compute itself
    /// with a router that sees what it holds (the engine's full blocks): what the P/D
    /// decider's nonCachedTokens is compared with.
    pub decode_uncached: Distribution,
    pub sessions: SessionKeys,
    pub worst: Vec<Worst>,
    pub skipped: Skips,
    /// Conversations audited up to the first request the server refuses (their transitions
    /// before it are counted), by reason.
    pub partial: Skips,
    /// Rows handed to the audit or skipped by the reader.
    pub rows: u64,
    /// With `--remedies`.
    pub remedies: Option<RemedyTally>,
}

/// The run's result.
#[derive(Debug, Clone)]
pub struct CorpusReport {
    pub model: ModelInfo,
    pub settings: CorpusSettings,
    pub tally: Tally,
    pub collisions: Collisions,
    pub input: input::InputSummary,
}

impl CorpusReport {
    /// A rewrite point anywhere is a finding, as in diff-turns.
    pub fn has_findings(&self) -> bool {
        self.tally.transitions_with_rewrite > 0
    }
}

/// What the caller sees while the run goes.
pub struct Hooks<'h> {
    /// Called after each row with the number of rows done.
    pub progress: Option<&'h (dyn Fn(u64) + Sync)>,
    /// One conversation's per-transition lines (already serialized, each ending in `\n`) and
    /// where to write them, in input order.
    pub per_transition: Option<PerTransition<'h>>,
}

/// Serializes one conversation's per-transition lines from its audit and prices.
pub type TransitionLines = dyn Fn(&ConversationAudit, &[Vec<Costs>]) -> Result<String> + Sync;

pub struct PerTransition<'h> {
    pub lines: &'h TransitionLines,
    pub out: &'h mut (dyn Write + Send),
}

impl Tally {
    fn new(settings: &CorpusSettings) -> Tally {
        Tally {
            blocks: settings
                .block_sizes
                .iter()
                .map(|&b| BlockTotals {
                    block_size: b,
                    ..BlockTotals::default()
                })
                .collect(),
            ..Tally::default()
        }
    }

    /// The prices of each transition at each block size, in `block_sizes` order.
    fn price(audit: &ConversationAudit, settings: &CorpusSettings) -> Vec<Vec<Costs>> {
        audit
            .transitions
            .iter()
            .map(|t| {
                settings
                    .block_sizes
                    .iter()
                    .map(|&b| alternatives::price(&tokens(t, b), &settings.assumptions))
                    .collect()
            })
            .collect()
    }

    fn add(
        &mut self,
        order: u64,
        conv: &Conversation,
        audit: &ConversationAudit,
        costs: &[Vec<Costs>],
        settings: &CorpusSettings,
        auditor: &Auditor,
    ) {
        self.conversations += 1;
        self.replies += audit.replies as u64;
        self.derived_replies += audit.derived_replies as u64;
        let mut worst = Worst {
            order,
            source: audit.source.clone(),
            transitions: audit.transitions.len(),
            rewrites: 0,
            next_tokens: 0,
            uncached: vec![0; settings.block_sizes.len()],
            divergence: None,
        };
        let mut first_rewrite = None;
        for (i, t) in audit.transitions.iter().enumerate() {
            self.transitions += 1;
            worst.next_tokens += t.next_prompt_tokens as u64;
            if t.retokenization_drift.is_some() {
                self.transitions_with_drift += 1;
            }
            if let Some(r) = &t.rewrite {
                self.transitions_with_rewrite += 1;
                *self.classes.entry(r.class.name()).or_default() += 1;
                worst.rewrites += 1;
                first_rewrite.get_or_insert(t);
            }
            for (j, block) in self.blocks.iter_mut().enumerate() {
                let b = block.block_size;
                let uncached = t
                    .uncached
                    .iter()
                    .find(|u| u.block_size == b)
                    .map_or(0, |u| u.tokens) as u64;
                let next = t.next_prompt_tokens as u64;
                block.uncached.add(uncached);
                block.next_tokens += next;
                block.reusable += next - uncached;
                worst.uncached[j] += uncached;
                if t.rewrite.is_some() {
                    let whole = |n: usize| (n / b * b) as u64;
                    let held = whole(t.held_tokens);
                    let reused = whole(t.common_prefix_tokens.min(t.held_tokens));
                    block.lost.add(held - reused);
                }
                block.costs.add(&costs[i][j]);
            }
            if let Some(answers) = audit.answers.get(i) {
                if self.answers.len() < answers.len() {
                    self.answers
                        .resize(answers.len(), crate::routers::Totals::default());
                }
                for (total, a) in self.answers.iter_mut().zip(answers) {
                    total.add(a, t.next_prompt_tokens);
                }
            }
            if let Some(view) = audit.routers.get(i) {
                self.decode_uncached.add(
                    t.next_prompt_tokens
                        .saturating_sub(view.engine_cached_tokens) as u64,
                );
                let r = self.router.get_or_insert_with(|| RouterTotals {
                    engine_block_size: view.engine_block_size,
                    index_block_size: view.index_block_size,
                    ..RouterTotals::default()
                });
                r.next_tokens += t.next_prompt_tokens as u64;
                r.engine_cached += view.engine_cached_tokens as u64;
                r.index_visible += view.index_visible_tokens as u64;
                if view.index_visible_tokens < view.engine_cached_tokens {
                    r.index_short += 1;
                }
                r.events_emitted += view.events_emitted as u64;
                for (k, v) in &view.events_skipped {
                    *r.events_skipped.entry(k).or_default() += v;
                }
                *r.verdicts.entry(view.decision.verdict.name()).or_default() += 1;
            }
        }
        if let Some(found) = &audit.remedies {
            self.add_remedies(audit, found);
        }
        if let Some(text) = sessions::first_user_text(&conv.messages) {
            self.sessions
                .add(&text, order, audit.transitions.len() as u64);
        }
        // Its texts are decoded only when the conversation is among the worst so far.
        if let Some(t) = first_rewrite
            && self.keeps(&worst, settings.worst)
        {
            worst.divergence = Some(divergence(t, auditor.divergence_views(t)));
        }
        self.keep_worst(worst, settings.worst);
    }

    fn add_remedies(
        &mut self,
        audit: &ConversationAudit,
        found: &crate::audit::ConversationRemedies,
    ) {
        let tally = self.remedies.get_or_insert_with(RemedyTally::default);
        if found.switches.is_empty() {
            tally.conversations_without_switch += 1;
        }
        let tokens =
            |u: &[crate::align::Uncached]| u.iter().map(|u| u.tokens as u64).collect::<Vec<_>>();
        for tr in &found.transitions {
            let Some(t) = audit
                .transitions
                .iter()
                .find(|t| t.from_prompt == tr.from_prompt)
            else {
                continue;
            };
            let before = tokens(&t.uncached);
            let mut best: Option<&crate::audit::Remedy> = None;
            for r in &tr.remedies {
                let after = tokens(&r.uncached);
                tally
                    .by_remedy
                    .entry(r.group())
                    .or_default()
                    .add(&RemedyTotals {
                        kind: r.kind.name(),
                        transitions: 1,
                        removes_rewrite: u64::from(r.removes_rewrite),
                        before: before.clone(),
                        after: after.clone(),
                    });
                let first = |r: &crate::audit::Remedy| r.uncached.first().map_or(0, |u| u.tokens);
                if best.is_none_or(|b| first(r) < first(b)) {
                    best = Some(r);
                }
            }
            // A remedy that leaves more uncached than now is not one to apply.
            let best = best.filter(|b| {
                b.uncached.first().map(|u| u.tokens as u64) < before.first().copied()
                    || b.removes_rewrite
            });
            tally.best.add(&RemedyTotals {
                kind: "best",
                transitions: 1,
                removes_rewrite: u64::from(best.is_some_and(|b| b.removes_rewrite)),
                after: best.map_or_else(|| before.clone(), |b| tokens(&b.uncached)),
                before,
            });
        }
    }

    /// Where `w` goes among the worst kept: before every conversation it ranks above.
    fn worst_place(&self, w: &Worst) -> usize {
        let rank = |w: &Worst| (std::cmp::Reverse(w.uncached.first().copied()), w.order);
        self.worst.partition_point(|x| rank(x) < rank(w))
    }

    /// Whether [`keep_worst`](Self::keep_worst) keeps `w`.
    fn keeps(&self, w: &Worst, k: usize) -> bool {
        self.worst_place(w) < k
    }

    fn keep_worst(&mut self, w: Worst, k: usize) {
        let at = self.worst_place(&w);
        if at < k {
            self.worst.insert(at, w);
            self.worst.truncate(k);
        }
    }

    /// The tally of a shard whose rows follow `by` rows of the shards before it: every place
    /// in the input (the worst conversations' ties, the example rows, the first conversation
    /// of a session key) moved, so that merging the shards in order is one run over them.
    /// `None` when a place would pass the largest row number.
    pub fn shifted(mut self, by: u64) -> Option<Tally> {
        for w in &mut self.worst {
            w.order = w.order.checked_add(by)?;
        }
        self.skipped = self.skipped.shifted(by)?;
        self.partial = self.partial.shifted(by)?;
        self.sessions = self.sessions.shifted(by)?;
        Some(self)
    }

    pub fn merge(&mut self, other: Tally, k: usize) {
        self.conversations += other.conversations;
        self.transitions += other.transitions;
        self.transitions_with_rewrite += other.transitions_with_rewrite;
        self.transitions_with_drift += other.transitions_with_drift;
        self.replies += other.replies;
        self.derived_replies += other.derived_replies;
        self.rows += other.rows;
        for (c, n) in other.classes {
            *self.classes.entry(c).or_default() += n;
        }
        for (a, b) in self.blocks.iter_mut().zip(other.blocks) {
            a.uncached.merge(b.uncached);
            a.lost.merge(b.lost);
            a.next_tokens += b.next_tokens;
            a.reusable += b.reusable;
            a.costs.add(&b.costs);
        }
        self.decode_uncached.merge(other.decode_uncached);
        if self.answers.len() < other.answers.len() {
            self.answers
                .resize(other.answers.len(), crate::routers::Totals::default());
        }
        for (a, o) in self.answers.iter_mut().zip(&other.answers) {
            a.merge(o);
        }
        if let Some(o) = other.router {
            let r = self.router.get_or_insert_with(|| RouterTotals {
                engine_block_size: o.engine_block_size,
                index_block_size: o.index_block_size,
                ..RouterTotals::default()
            });
            r.next_tokens += o.next_tokens;
            r.engine_cached += o.engine_cached;
            r.index_visible += o.index_visible;
            r.index_short += o.index_short;
            r.events_emitted += o.events_emitted;
            for (k, v) in o.events_skipped {
                *r.events_skipped.entry(k).or_default() += v;
            }
            for (k, v) in o.verdicts {
                *r.verdicts.entry(k).or_default() += v;
            }
        }
        if let Some(o) = other.remedies {
            let r = self.remedies.get_or_insert_with(RemedyTally::default);
            for (k, v) in o.by_remedy {
                r.by_remedy.entry(k).or_default().add(&v);
            }
            r.best.add(&o.best);
            r.conversations_without_switch += o.conversations_without_switch;
        }
        self.sessions.merge(other.sessions);
        for w in other.worst {
            self.keep_worst(w, k);
        }
        self.skipped.merge(other.skipped);
        self.partial.merge(other.partial);
    }
}

fn tokens(t: &Transition, block_size: usize) -> TransitionTokens {
    TransitionTokens {
        next_prompt: t.next_prompt_tokens,
        held: t.held_tokens,
        prompt: t.prompt_tokens,
        common_prefix: t.common_prefix_tokens,
        block_size,
    }
}

fn divergence(
    t: &Transition,
    (before, [held, next]): (Vec<TokenView>, [Vec<TokenView>; 2]),
) -> Divergence {
    let text = |v: &[TokenView]| v.iter().map(|x| x.text.as_str()).collect();
    let r = t.rewrite.as_ref().expect("called on a rewrite");
    Divergence {
        from_prompt: t.from_prompt,
        position: r.position,
        class: r.class.name(),
        before: text(&before),
        held: text(&held),
        next: text(&next),
    }
}

/// Per-transition lines in input order: finished conversations wait here for the ones before
/// them. Workers do not start a row more than `window` rows past the oldest unfinished one,
/// which bounds what waits.
struct Ordered<'h> {
    state: Mutex<OrderedState<'h>>,
    advanced: Condvar,
    window: u64,
}

struct OrderedState<'h> {
    next: u64,
    pending: BTreeMap<u64, String>,
    out: Option<&'h mut (dyn Write + Send)>,
    error: Option<std::io::Error>,
}

impl<'h> Ordered<'h> {
    /// Whether row `order` may start now (see [`wait_for_room`](Self::wait_for_room)).
    fn has_room(&self, order: u64) -> bool {
        self.state
            .lock()
            .is_ok_and(|s| s.out.is_none() || order < s.next + self.window || s.error.is_some())
    }

    fn wait_for_room(&self, order: u64) {
        let Ok(mut s) = self.state.lock() else { return };
        while s.out.is_some() && order >= s.next + self.window && s.error.is_none() {
            s = match self.advanced.wait(s) {
                Ok(s) => s,
                Err(_) => return,
            };
        }
    }

    fn done(&self, order: u64, lines: String) {
        let Ok(mut s) = self.state.lock() else { return };
        if s.out.is_none() {
            return;
        }
        s.pending.insert(order, lines);
        let state = &mut *s;
        while let Some(lines) = state.pending.remove(&state.next) {
            state.next += 1;
            if state.error.is_none()
                && let Some(out) = state.out.as_mut()
                && let Err(e) = out.write_all(lines.as_bytes())
            {
                state.error = Some(e);
            }
        }
        self.advanced.notify_all();
    }
}

/// The shared input: rows numbered in input order as workers take them.
struct Feed<I> {
    rows: I,
    taken: u64,
}

/// Where the workers find the auditor.
pub enum AuditorAt<'r, 'a> {
    Ready(&'r Auditor<'a>),
    /// Set by a thread that is loading the tokenizer (an error when it could not); until then
    /// one worker takes rows and renders them with `ahead`.
    Loading {
        ahead: &'r PlanAhead<'a>,
        auditor: &'r OnceLock<Result<Auditor<'a>>>,
    },
}

/// Rows taken ahead while the tokenizer loads, at most: a one-row run's start-up (tokenizer,
/// direct encoder) is worth a few hundred rows of rendering.
const AHEAD_ROWS: usize = 1024;
/// No row is taken ahead once those taken hold this many bytes of row text and rendered
/// prompts (the last one taken may pass it; each row is bounded on its own).
const AHEAD_BYTES: usize = 16 << 20;

/// A row taken and rendered before the auditor was there.
struct Ahead {
    order: u64,
    source: String,
    conv: Conversation,
    planned: Option<Planned>,
}

/// Audits every row of `rows` on `settings.jobs` threads. With an auditor still loading, one
/// worker renders rows until it is there (the others leave the loading thread a core), then
/// every worker finishes those rows, oldest first, before taking more; the report is the same
/// either way. `Err` when the auditor could not be made (its own error is
/// in the cell).
pub fn run<I>(
    at: AuditorAt<'_, '_>,
    rows: I,
    input: impl FnOnce(&I) -> input::InputSummary,
    settings: &CorpusSettings,
    hooks: Hooks,
) -> Result<CorpusReport>
where
    I: Iterator<Item = input::Item> + Send,
{
    let jobs = settings.jobs.max(1);
    let feed = Mutex::new(Feed { rows, taken: 0 });
    let done = AtomicU64::new(0);
    let failed = AtomicBool::new(false);
    let (lines, out) = match hooks.per_transition {
        Some(p) => (Some(p.lines), Some(p.out)),
        None => (None, None),
    };
    let ordered = Ordered {
        state: Mutex::new(OrderedState {
            next: 0,
            pending: BTreeMap::new(),
            out,
            error: None,
        }),
        advanced: Condvar::new(),
        window: 64 * jobs as u64,
    };
    // The next row and its number. With `wait`, a worker waits for room before taking a row:
    // rows are still taken in input order, and at most `jobs` rows past the window are ever in
    // flight. Without it, no room is no row.
    // Set when a worker thread could not be started: the others stop taking rows.
    let halted = AtomicBool::new(false);
    let take = |wait: bool| -> Option<(u64, input::Item)> {
        if halted.load(Ordering::Relaxed) {
            return None;
        }
        let f = feed.lock().ok()?;
        let next = f.taken;
        if !wait && !ordered.has_room(next) {
            return None;
        }
        drop(f);
        if wait {
            ordered.wait_for_room(next);
        }
        let mut f = feed.lock().ok()?;
        let item = f.rows.next()?;
        let order = f.taken;
        f.taken += 1;
        Some((order, item))
    };
    let finish = |tally: &mut Tally, order: u64, lines_out: String| {
        tally.rows += 1;
        ordered.done(order, lines_out);
        let n = done.fetch_add(1, Ordering::Relaxed) + 1;
        if let Some(p) = hooks.progress {
            p(n);
        }
    };
    let audit = |tally: &mut Tally,
                 auditor: &Auditor,
                 order: u64,
                 source: String,
                 conv: &Conversation,
                 planned: Option<Planned>| {
        let mut out_lines = String::new();
        let audited = match planned {
            Some(p) => auditor.audit_planned(conv, p),
            None => auditor.audit(conv),
        };
        match audited {
            // A conversation the server refuses before any transition is skipped with the
            // reason; one it stops part-way is audited up to the refused request and counted
            // as partial with the reason.
            Ok(audit) if audit.refused.is_some() && audit.transitions.is_empty() => {
                let error = audit.refused.as_ref().map(|r| format!("{r}: {}", r.source));
                tally.skipped.add("server_refused", order, source, error)
            }
            Ok(audit) if audit.transitions.is_empty() => {
                tally.skipped.add("no_transition", order, source, None)
            }
            Ok(audit) => {
                let costs = Tally::price(&audit, settings);
                if let Some(f) = lines {
                    match f(&audit, &costs) {
                        Ok(l) => out_lines = l,
                        Err(_) => failed.store(true, Ordering::Relaxed),
                    }
                }
                tally.add(order, conv, &audit, &costs, settings, auditor);
                if let Some(r) = &audit.refused {
                    let error = format!("{r}: {}", r.source);
                    tally
                        .partial
                        .add("server_refused", order, source, Some(error));
                }
            }
            Err(e) => tally
                .skipped
                .add(e.kind().as_str(), order, source, Some(e.message())),
        }
        finish(tally, order, out_lines);
    };
    // A row's conversation, its source and size; a row that has none is counted as skipped.
    let usable = |tally: &mut Tally, order: u64, item: input::Item| match item {
        input::Item::Skipped {
            source,
            reason,
            error,
        } => {
            tally.skipped.add(reason, order, source, error);
            finish(tally, order, String::new());
            None
        }
        input::Item::Raw(raw) => match raw.conversation() {
            Err(u) => {
                tally
                    .skipped
                    .add(u.reason, order, raw.source, Some(u.message));
                finish(tally, order, String::new());
                None
            }
            Ok(conv) => Some((raw.source, conv, raw.text.len())),
        },
    };
    // Rows taken ahead, oldest first: any worker finishes them.
    let taken_ahead: Mutex<std::collections::VecDeque<Ahead>> = Mutex::default();
    let worker = |index: usize| -> Tally {
        let mut tally = Tally::new(settings);
        let auditor = match at {
            AuditorAt::Ready(a) => a,
            AuditorAt::Loading { ahead, auditor } => {
                let (mut rows, mut bytes) = (0usize, 0usize);
                while index == 0
                    && auditor.get().is_none()
                    && rows < AHEAD_ROWS
                    && bytes < AHEAD_BYTES
                {
                    let Some((order, item)) = take(false) else {
                        break;
                    };
                    if let Some((source, conv, row_bytes)) = usable(&mut tally, order, item) {
                        let planned = ahead.plan(&conv);
                        rows += 1;
                        bytes += row_bytes + planned.as_ref().map_or(0, Planned::text_bytes);
                        let row = Ahead {
                            order,
                            source,
                            conv,
                            planned,
                        };
                        if let Ok(mut q) = taken_ahead.lock() {
                            q.push_back(row);
                        }
                    }
                }
                match auditor.wait() {
                    Ok(a) => a,
                    // The command reports the error; the rows taken are not counted.
                    Err(_) => return tally,
                }
            }
        };
        while let Some(a) = taken_ahead.lock().ok().and_then(|mut q| q.pop_front()) {
            audit(&mut tally, auditor, a.order, a.source, &a.conv, a.planned);
        }
        while let Some((order, item)) = take(true) {
            if let Some((source, conv, _)) = usable(&mut tally, order, item) {
                audit(&mut tally, auditor, order, source, &conv, None);
            }
        }
        tally
    };
    let (tallies, not_started) = std::thread::scope(|s| {
        let mut handles = Vec::new();
        let mut not_started = None;
        for i in 0..jobs {
            match std::thread::Builder::new().spawn_scoped(s, move || worker(i)) {
                Ok(h) => handles.push(h),
                Err(e) => {
                    halted.store(true, Ordering::Relaxed);
                    not_started = Some(anyhow::Error::new(e).context(format!(
                        "cannot start worker thread {} of {jobs} (try a smaller --jobs)",
                        i + 1
                    )));
                    break;
                }
            }
        }
        let tallies = handles
            .into_iter()
            .map(|h| h.join())
            .collect::<std::thread::Result<Vec<_>>>();
        (tallies, not_started)
    });
    if let Some(e) = not_started {
        return Err(e);
    }
    let tallies: Vec<Tally> =
        tallies.map_err(|_| anyhow::anyhow!("a corpus worker thread panicked"))?;
    let auditor = match at {
        AuditorAt::Ready(a) => a,
        AuditorAt::Loading { auditor, .. } => match auditor.get() {
            Some(Ok(a)) => a,
            _ => anyhow::bail!("the auditor could not be made"),
        },
    };
    let mut tally = Tally::new(settings);
    for t in tallies {
        tally.merge(t, settings.worst);
    }
    let state = ordered
        .state
        .into_inner()
        .map_err(|_| anyhow::anyhow!("a corpus worker thread panicked"))?;
    if let Some(e) = state.error {
        return Err(anyhow::Error::new(e).context("writing the per-transition file"));
    }
    if failed.load(Ordering::Relaxed) {
        anyhow::bail!("could not serialize a per-transition line");
    }
    let feed = feed
        .into_inner()
        .map_err(|_| anyhow::anyhow!("a corpus worker thread panicked"))?;
    Ok(CorpusReport {
        model: auditor.model().clone(),
        settings: settings.clone(),
        collisions: tally.sessions.collisions(settings.shared_keys),
        tally,
        input: input(&feed.rows),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_remedy_total_keeps_the_name() {
        let mut best = RemedyTotals::default();
        let named = RemedyTotals {
            kind: "best",
            transitions: 2,
            removes_rewrite: 1,
            before: vec![10],
            after: vec![4],
        };
        best.add(&named);
        // A worker or shard without a rewrite point adds nothing and names nothing.
        best.add(&RemedyTotals::default());
        assert_eq!(best, named);
    }
}
