//! The totals of a run. Each worker keeps a [`Tally`] of its own and they are merged at the
//! end, as the shards of a partial are by `merge`: every total here is one that merges exactly.

use std::collections::BTreeMap;

use super::CorpusSettings;
use super::alternatives::{self, Costs, TransitionTokens};
use super::sessions::{self, SessionKeys};
use super::stats::Distribution;
use crate::align::{TokenView, Transition};
use crate::audit::{Auditor, ConversationAudit};
use crate::render::Conversation;

/// Row numbers kept per skip reason.
pub const EXAMPLE_ROWS: usize = 5;

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

impl Tally {
    pub(super) fn new(settings: &CorpusSettings) -> Tally {
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
    pub(super) fn price(audit: &ConversationAudit, settings: &CorpusSettings) -> Vec<Vec<Costs>> {
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

    pub(super) fn add(
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
