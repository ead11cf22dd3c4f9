//! The monitor: pods' events and the fleet's requests in the order they happened, each request
//! attributed as it comes and added to the totals the exports read.
//!
//! A request's holdings are read when it arrives, before any event that follows it is applied,
//! so a pod's stores for this very request never count as held for it. When nothing names the
//! pod that served a request, the request waits for the first pod whose next stores carry its
//! prompt (a block of the prompt stored, or the block after the prompt's last whole block); the
//! wait is bounded in requests and in events, and a request it ends is counted unattributed,
//! never guessed.

use std::collections::{BTreeMap, VecDeque};

use serde::Serialize;

use crate::audit::Auditor;
use crate::events::Batch;
use crate::render::Conversation;

use super::attribute::{Causes, Request, attribute};
use super::holdings::Holdings;

/// Requests waiting for their pod, at most.
pub const MAX_PENDING: usize = 1024;
/// Event batches a request waits for its pod, at most.
const PENDING_BATCHES: u64 = 4096;

/// One request as it was observed.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// The request's messages, tools and template kwargs.
    pub conversation: Conversation,
    /// The pod that served it, when something named it (a response header, the log).
    pub pod: Option<String>,
    /// The engine's `usage.prompt_tokens_details.cached_tokens`.
    pub engine_cached: Option<usize>,
    /// The engine's `usage.prompt_tokens`: checked against the render.
    pub engine_prompt_tokens: Option<usize>,
}

/// Why a request was not attributed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unattributed {
    /// kvaudit could not render or tokenize it as the server does.
    Render,
    /// No pod was named and none was seen storing its prompt in time.
    NoPod,
    /// The wait for its pod was full.
    PendingFull,
}

impl Unattributed {
    pub fn as_str(self) -> &'static str {
        match self {
            Unattributed::Render => "render",
            Unattributed::NoPod => "no_pod",
            Unattributed::PendingFull => "pending_full",
        }
    }
}

/// One request's attribution.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Attributed {
    pub pod: String,
    pub prompt_tokens: usize,
    pub causes: Causes,
    /// The rewrite class when the template rewrote what the previous turn left.
    pub rewrite: Option<&'static str>,
    /// The serving pod's view was incomplete (events lost): its holdings may be short.
    pub stale: bool,
    /// The engine counted the prompt's tokens otherwise than kvaudit's render.
    pub prompt_mismatch: bool,
}

/// The run's totals, by pod and by rewrite class.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Totals {
    pub requests: u64,
    pub prompt_tokens: u64,
    pub causes: CauseTotals,
    pub pods: BTreeMap<String, PodTotals>,
    /// Rewritten tokens by rewrite class.
    pub rewrite_classes: BTreeMap<&'static str, u64>,
    pub unattributed: BTreeMap<Unattributed, u64>,
    /// Requests whose engine-reported prompt length was not kvaudit's.
    pub prompt_mismatches: u64,
    /// Requests served by a pod whose view was stale.
    pub stale_requests: u64,
}

/// Token counts by cause, summed over requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CauseTotals {
    pub reused: u64,
    pub misrouted: u64,
    pub evicted: u64,
    pub block_tail: u64,
    pub rewritten: u64,
    pub new: u64,
    pub disagreement: u64,
}

impl CauseTotals {
    fn add(&mut self, c: &Causes) {
        self.reused += c.reused as u64;
        self.misrouted += c.misrouted as u64;
        self.evicted += c.evicted as u64;
        self.block_tail += c.block_tail as u64;
        self.rewritten += c.rewritten as u64;
        self.new += c.new as u64;
        self.disagreement += c.disagreement as u64;
    }

    /// Every cause with its name, in the attribution's order (disagreement apart).
    pub fn named(&self) -> [(&'static str, u64); 6] {
        [
            ("reused", self.reused),
            ("misrouted", self.misrouted),
            ("evicted", self.evicted),
            ("block_tail", self.block_tail),
            ("rewritten", self.rewritten),
            ("new", self.new),
        ]
    }

    pub fn total(&self) -> u64 {
        self.named().iter().map(|(_, n)| n).sum()
    }
}

/// One pod's figures.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PodTotals {
    pub requests: u64,
    pub causes: CauseTotals,
    pub batches: u64,
    /// Events not applied, by reason.
    pub unapplied: BTreeMap<&'static str, u64>,
    pub blocks: usize,
    pub stale: Option<&'static str>,
}

/// A request waiting to learn its pod: everything but the pod, read when it arrived.
#[derive(Debug)]
struct Pending {
    keys: Vec<u64>,
    /// What each pod held of the prompt at arrival.
    held: Vec<(String, usize)>,
    partial: Partial,
    since: u64,
}

/// A request's facts that do not depend on its pod.
#[derive(Debug, Clone, Copy)]
struct Partial {
    prompt_tokens: usize,
    previous_shared: usize,
    previous_left: usize,
    engine_cached: Option<usize>,
    rewrite: Option<&'static str>,
    prompt_mismatch: bool,
}

/// Every pod's holdings, the requests in flight, the totals.
pub struct Monitor<'a> {
    auditor: Auditor<'a>,
    holdings: Holdings,
    block_size: usize,
    pending: VecDeque<Pending>,
    batches: u64,
    totals: Totals,
}

impl<'a> Monitor<'a> {
    /// `pods` are the names the flags gave (each has figures even before its first event).
    pub fn new(
        auditor: Auditor<'a>,
        block_size: usize,
        capacity: usize,
        pods: &[String],
    ) -> Monitor<'a> {
        let mut totals = Totals::default();
        for p in pods {
            totals.pods.entry(p.clone()).or_default();
        }
        Monitor {
            auditor,
            holdings: Holdings::new(block_size, capacity),
            block_size,
            pending: VecDeque::new(),
            batches: 0,
            totals,
        }
    }

    /// One batch of `pod`'s events; returns the requests it settled the pod of.
    pub fn events(&mut self, pod: &str, batch: &Batch) -> Vec<Attributed> {
        self.batches += 1;
        let before = self.pending_held(pod);
        self.holdings.apply(pod, batch);
        self.totals.pods.entry(pod.to_string()).or_default().batches += 1;
        let mut done = Vec::new();
        let mut left = VecDeque::with_capacity(self.pending.len());
        for (p, held_before) in std::mem::take(&mut self.pending).into_iter().zip(before) {
            // The pod served it if it now holds more of the prompt, or the block after it.
            let now = (
                self.holdings.held(pod, &p.keys),
                self.holdings.holds_after(pod, &p.keys),
            );
            if now.0 > held_before.0 || (now.1 && !held_before.1) {
                done.push(self.settle(&p, pod));
            } else if self.batches - p.since > PENDING_BATCHES {
                self.count_unattributed(Unattributed::NoPod);
            } else {
                left.push_back(p);
            }
        }
        self.pending = left;
        done
    }

    /// What `pod` holds of each waiting request's prompt, and whether it holds past it.
    fn pending_held(&self, pod: &str) -> Vec<(usize, bool)> {
        self.pending
            .iter()
            .map(|p| {
                (
                    self.holdings.held(pod, &p.keys),
                    self.holdings.holds_after(pod, &p.keys),
                )
            })
            .collect()
    }

    /// One request, when it arrived; `Ok(None)` while its pod is not known yet.
    pub fn request(&mut self, ex: &Exchange) -> Result<Option<Attributed>, Unattributed> {
        let next = match self.auditor.next_request(&ex.conversation) {
            Ok(n) => n,
            Err(_) => {
                self.count_unattributed(Unattributed::Render);
                return Err(Unattributed::Render);
            }
        };
        let (previous_shared, previous_left, rewrite) = match next.transitions.last() {
            Some(t) => (
                t.common_prefix_tokens,
                t.held_tokens,
                t.rewrite.as_ref().map(|r| r.class.name()),
            ),
            None => (0, 0, None),
        };
        let prompt_tokens = next.prompt_ids.len();
        let partial = Partial {
            prompt_tokens,
            previous_shared,
            previous_left,
            engine_cached: ex.engine_cached,
            rewrite,
            prompt_mismatch: ex.engine_prompt_tokens.is_some_and(|n| n != prompt_tokens),
        };
        let keys = self.holdings.keys(&next.prompt_ids);
        let held = self
            .totals
            .pods
            .keys()
            .map(|pod| (pod.clone(), self.holdings.held(pod, &keys)))
            .collect();
        let pending = Pending {
            keys,
            held,
            partial,
            since: self.batches,
        };
        match &ex.pod {
            Some(pod) => {
                self.totals.pods.entry(pod.clone()).or_default();
                Ok(Some(self.settle(&pending, pod)))
            }
            None if self.pending.len() >= MAX_PENDING => {
                self.count_unattributed(Unattributed::PendingFull);
                Err(Unattributed::PendingFull)
            }
            None => {
                self.pending.push_back(pending);
                Ok(None)
            }
        }
    }

    fn settle(&mut self, p: &Pending, pod: &str) -> Attributed {
        let held_by = |name: &str| {
            p.held
                .iter()
                .find(|(n, _)| n == name)
                .map_or(0, |(_, h)| *h)
        };
        let others = p
            .held
            .iter()
            .filter(|(n, _)| n != pod)
            .map(|(_, h)| *h)
            .max()
            .unwrap_or(0);
        let causes = attribute(&Request {
            prompt_tokens: p.partial.prompt_tokens,
            block_size: self.block_size,
            serving_held: held_by(pod),
            others_held: others,
            previous_shared: p.partial.previous_shared,
            previous_left: p.partial.previous_left,
            engine_cached: p.partial.engine_cached,
        });
        let stale = self.holdings.stale(pod).is_some();
        let a = Attributed {
            pod: pod.to_string(),
            prompt_tokens: p.partial.prompt_tokens,
            causes,
            rewrite: p.partial.rewrite.filter(|_| causes.rewritten > 0),
            stale,
            prompt_mismatch: p.partial.prompt_mismatch,
        };
        let t = &mut self.totals;
        t.requests += 1;
        t.prompt_tokens += a.prompt_tokens as u64;
        t.causes.add(&causes);
        let pt = t.pods.entry(a.pod.clone()).or_default();
        pt.requests += 1;
        pt.causes.add(&causes);
        if let Some(class) = a.rewrite {
            *t.rewrite_classes.entry(class).or_default() += causes.rewritten as u64;
        }
        t.prompt_mismatches += u64::from(a.prompt_mismatch);
        t.stale_requests += u64::from(stale);
        a
    }

    fn count_unattributed(&mut self, why: Unattributed) {
        *self.totals.unattributed.entry(why).or_default() += 1;
    }

    /// Requests still waiting for their pod, counted unattributed (the run ends).
    pub fn finish(&mut self) {
        for _ in std::mem::take(&mut self.pending) {
            self.count_unattributed(Unattributed::NoPod);
        }
    }

    /// The totals, each pod's view figures read now.
    pub fn totals(&self) -> Totals {
        let mut t = self.totals.clone();
        for (name, pod) in t.pods.iter_mut() {
            pod.blocks = self.holdings.blocks(name);
            pod.stale = self.holdings.stale(name).map(|u| u.as_str());
            pod.unapplied = self
                .holdings
                .unapplied(name)
                .map(|(k, v)| (k.as_str(), v))
                .collect();
        }
        t
    }

    pub fn pending(&self) -> usize {
        self.pending.len()
    }
}
