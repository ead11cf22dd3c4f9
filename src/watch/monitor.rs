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
use super::routing::{RouterTotals, Routers, ServedBy, Went};

/// Requests waiting for their pod, at most.
const MAX_PENDING: usize = 1024;
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
    /// The upstream answered with an error status: nothing was served.
    Refused,
    /// No complete response came (the client or the upstream went away), or too many
    /// requests were in flight to wait for it.
    NoAnswer,
}

impl Unattributed {
    pub fn as_str(self) -> &'static str {
        match self {
            Unattributed::Render => "render",
            Unattributed::NoPod => "no_pod",
            Unattributed::NoAnswer => "no_answer",
            Unattributed::Refused => "refused",
        }
    }
}

/// One request's attribution.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Attributed {
    /// The request's number (the proxy's, in the order requests arrived; the log's line order).
    pub id: RequestId,
    pub pod: String,
    pub prompt_tokens: usize,
    /// What the engine said it reused, when it said.
    pub engine_cached: Option<usize>,
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
    /// Requests whose serving pod's view may have been short when they came (stale, or a gap
    /// being recovered or found while they waited).
    pub stale_requests: u64,
    /// Each `--router`'s answers for the turns that continue a conversation.
    pub routers: Vec<RouterTotals>,
}

impl Totals {
    /// What was counted after `earlier`, a reading of the same run: requests, prompt tokens,
    /// causes, rewrite classes, unattributed requests and each router's figures (the pods'
    /// views are states, not counts, and are left out).
    pub fn since(&self, earlier: &Totals) -> Totals {
        fn minus<K: Ord + Copy>(
            now: &BTreeMap<K, u64>,
            then: &BTreeMap<K, u64>,
        ) -> BTreeMap<K, u64> {
            now.iter()
                .map(|(k, v)| (*k, v.saturating_sub(then.get(k).copied().unwrap_or(0))))
                .filter(|(_, v)| *v > 0)
                .collect()
        }
        let routers = self
            .routers
            .iter()
            .enumerate()
            .map(|(i, r)| match earlier.routers.get(i) {
                Some(e) => r.since(e),
                None => r.clone(),
            })
            .collect();
        Totals {
            requests: self.requests.saturating_sub(earlier.requests),
            prompt_tokens: self.prompt_tokens.saturating_sub(earlier.prompt_tokens),
            causes: self.causes.since(&earlier.causes),
            pods: BTreeMap::new(),
            rewrite_classes: minus(&self.rewrite_classes, &earlier.rewrite_classes),
            unattributed: minus(&self.unattributed, &earlier.unattributed),
            prompt_mismatches: self
                .prompt_mismatches
                .saturating_sub(earlier.prompt_mismatches),
            stale_requests: self.stale_requests.saturating_sub(earlier.stale_requests),
            routers,
        }
    }
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

    fn since(&self, e: &CauseTotals) -> CauseTotals {
        CauseTotals {
            reused: self.reused.saturating_sub(e.reused),
            misrouted: self.misrouted.saturating_sub(e.misrouted),
            evicted: self.evicted.saturating_sub(e.evicted),
            block_tail: self.block_tail.saturating_sub(e.block_tail),
            rewritten: self.rewritten.saturating_sub(e.rewritten),
            new: self.new.saturating_sub(e.new),
            disagreement: self.disagreement.saturating_sub(e.disagreement),
        }
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
    /// The most blocks its view holds (its engine's count, or `--capacity`).
    pub capacity: usize,
    pub stale: Option<&'static str>,
}

/// A request in flight: what was read when it arrived, then its pod and its answer as they
/// become known. It is attributed once both are.
#[derive(Debug)]
struct Pending {
    id: RequestId,
    keys: Vec<u64>,
    /// What each pod held of the prompt at arrival.
    held: Vec<Reading>,
    partial: Partial,
    /// Event batches seen when it arrived.
    since: u64,
    pod: Option<String>,
    answer: Option<Answer>,
    /// Each router's answer, when the request continues a turn.
    routes: Vec<crate::routers::Answer>,
    /// With routers to ask: this request's key and the previous request's.
    keys_of: Option<(u64, u64)>,
}

/// What one pod held of a request's prompt when the request came.
#[derive(Debug)]
struct Reading {
    pod: String,
    tokens: usize,
    /// The pod's view may have been short then: stale, a gap being recovered, or a gap found
    /// since (its lost messages may have been sent before the request came).
    short: bool,
}

/// A request's facts that do not depend on its pod.
#[derive(Debug, Clone, Copy)]
struct Partial {
    prompt_tokens: usize,
    previous_shared: usize,
    previous_left: usize,
    rewrite: Option<&'static str>,
}

/// A request as the proxy or the log numbers it.
pub type RequestId = u64;

/// What the response said.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Answer {
    /// The pod a response header named.
    pub pod: Option<String>,
    /// `usage.prompt_tokens_details.cached_tokens`.
    pub engine_cached: Option<usize>,
    /// `usage.prompt_tokens`.
    pub engine_prompt_tokens: Option<usize>,
}

/// Every pod's holdings, the requests in flight, the totals.
pub struct Monitor<'a> {
    auditor: Auditor<'a>,
    holdings: Holdings,
    routers: Routers,
    served_by: ServedBy,
    /// Each flag pod's name, shared by the entries of `served_by`.
    pod_names: Vec<std::sync::Arc<str>>,
    block_size: usize,
    pending: VecDeque<Pending>,
    batches: u64,
    /// The last id [`request`](Monitor::request) gave.
    next_id: RequestId,
    totals: Totals,
}

impl<'a> Monitor<'a> {
    /// `pods` are the names the flags gave (each has figures even before its first event).
    /// `pods` are the only pods there are: a name from elsewhere (a log, a header) that is not
    /// one of them is ignored.
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
            routers: Routers::new(Vec::new(), String::new(), block_size),
            served_by: ServedBy::new(1),
            pod_names: pods.iter().map(|p| p.as_str().into()).collect(),
            block_size,
            pending: VecDeque::new(),
            batches: 0,
            next_id: 0,
            totals,
        }
    }

    /// `pod` holds at most `blocks`, as its engine says.
    pub fn set_capacity(&mut self, pod: &str, blocks: usize) {
        self.holdings.set_capacity(pod, blocks);
    }

    /// Asks `routers` about every request that continues a turn, remembering the pods of the
    /// last `conversations` requests to see where a turn went.
    pub fn with_routers(mut self, routers: Routers, conversations: usize) -> Monitor<'a> {
        self.totals.routers = routers.totals();
        self.routers = routers;
        self.served_by = ServedBy::new(conversations);
        self
    }

    /// One batch of `pod`'s events; returns the requests it settled.
    pub fn events(&mut self, pod: &str, batch: &Batch) -> Vec<Attributed> {
        self.batches += 1;
        let before = self.pending_held(pod);
        self.holdings.apply(pod, batch);
        self.totals.pods.entry(pod.to_string()).or_default().batches += 1;
        let mut done = Vec::new();
        let mut left = VecDeque::with_capacity(self.pending.len());
        for (mut p, held_before) in std::mem::take(&mut self.pending).into_iter().zip(before) {
            if p.pod.is_none() {
                // The pod served it if this batch completed the prompt's whole blocks there,
                // or stored the block after them. A store of only a shared prefix (a system
                // prompt) could be another request's, and names no one.
                let whole = p.keys.len() * self.block_size;
                let now = (
                    self.holdings.held(pod, &p.keys),
                    self.holdings.holds_after(pod, &p.keys),
                );
                if (now.0 > held_before.0 && now.0 == whole) || (now.1 && !held_before.1) {
                    p.pod = Some(pod.to_string());
                }
            }
            if p.pod.is_some() && p.answer.is_some() {
                done.push(self.settle(p));
            } else if p.pod.is_none()
                && p.answer.is_some()
                && self.batches - p.since > PENDING_BATCHES
            {
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
            .map(|p| match p.pod {
                Some(_) => (0, false),
                None => (
                    self.holdings.held(pod, &p.keys),
                    self.holdings.holds_after(pod, &p.keys),
                ),
            })
            .collect()
    }

    /// A request as it arrives: rendered, and what every pod holds of it read now, before
    /// any later event. `pod` when the caller knows it already.
    pub fn arrived(
        &mut self,
        id: RequestId,
        conversation: &Conversation,
        pod: Option<String>,
    ) -> Result<(), Unattributed> {
        let next = match self.auditor.next_request(conversation) {
            Ok(n) => n,
            Err(_) => {
                self.count_unattributed(Unattributed::Render);
                return Err(Unattributed::Render);
            }
        };
        let (previous_shared, previous_left, rewrite, routes) = match next.transitions.last() {
            Some(t) => (
                t.common_prefix_tokens,
                t.held_tokens,
                t.rewrite.as_ref().map(|r| r.class.name()),
                self.routers.answers(t, &next.messages),
            ),
            None => (0, 0, None, Vec::new()),
        };
        let keys_of = (!self.routers.is_empty()).then(|| {
            let m = &conversation.messages;
            let last_reply = crate::render::last_reply(m).unwrap_or(0);
            (
                super::conversations::key(m),
                super::conversations::key(&m[..last_reply]),
            )
        });
        let keys = self.holdings.keys(&next.prompt_ids);
        let held = self
            .totals
            .pods
            .keys()
            .map(|pod| Reading {
                pod: pod.clone(),
                tokens: self.holdings.held(pod, &keys),
                short: self.holdings.lags(pod),
            })
            .collect();
        if self.pending.len() >= MAX_PENDING
            && let Some(oldest) = self.pending.pop_front()
        {
            self.count_unattributed(if oldest.answer.is_some() {
                Unattributed::NoPod
            } else {
                Unattributed::NoAnswer
            });
        }
        self.pending.push_back(Pending {
            id,
            keys,
            held,
            partial: Partial {
                prompt_tokens: next.prompt_ids.len(),
                previous_shared,
                previous_left,
                rewrite,
            },
            since: self.batches,
            pod,
            answer: None,
            routes,
            keys_of,
        });
        Ok(())
    }

    /// The response to request `id` is complete: attributed now if its pod is known.
    pub fn answered(&mut self, id: RequestId, answer: Answer) -> Option<Attributed> {
        let at = self.pending.iter().position(|p| p.id == id)?;
        let p = &mut self.pending[at];
        // Only the pods the flags named: a name from a log or a header is not a label.
        if let Some(pod) = &answer.pod
            && self.totals.pods.contains_key(pod)
        {
            p.pod = Some(pod.clone());
        }
        // The engine reused `cached` tokens, so its pod held them when the request came: when
        // exactly one pod did, that is the pod (a prompt reused whole stores nothing new).
        // Only from readings that were whole: a short one could hide a second holder.
        if p.pod.is_none()
            && !p.held.iter().any(|r| r.short)
            && let Some(cached) = answer.engine_cached.filter(|&c| c > 0)
        {
            let mut holders = p.held.iter().filter(|r| r.tokens >= cached);
            if let (Some(only), None) = (holders.next(), holders.next()) {
                p.pod = Some(only.pod.clone());
            }
        }
        p.answer = Some(answer);
        if p.pod.is_some() {
            let p = self.pending.remove(at)?;
            return Some(self.settle(p));
        }
        None
    }

    /// Request `id` is not attributed, for `why` (no complete response, an error status).
    pub fn abandoned(&mut self, id: RequestId, why: Unattributed) {
        if let Some(at) = self.pending.iter().position(|p| p.id == id) {
            self.pending.remove(at);
            self.count_unattributed(why);
        }
    }

    /// `missing` of `pod`'s event messages never arrived.
    pub fn events_lost(&mut self, pod: &str, missing: u64) {
        self.holdings.lost(pod, missing);
        self.read_short(pod);
    }

    /// A gap of `pod`'s was found and is being recovered: its batches come later, in order.
    pub fn recovering(&mut self, pod: &str) {
        self.holdings.recovering(pod);
        self.read_short(pod);
    }

    /// A recovery of `pod`'s ended: its view is current again (what never came was counted).
    pub fn caught_up(&mut self, pod: &str) {
        self.holdings.caught_up(pod);
    }

    /// What the waiting requests read of `pod` may have been short: the messages a gap lost
    /// were sent before the one that showed it, perhaps before these requests came.
    fn read_short(&mut self, pod: &str) {
        for p in &mut self.pending {
            for r in p.held.iter_mut().filter(|r| r.pod == pod) {
                r.short = true;
            }
        }
    }

    /// `pod`'s publisher started again.
    pub fn restarted(&mut self, pod: &str) {
        self.holdings.restarted(pod);
    }

    /// A request of the log: arrived and answered at once; `Ok(None)` while its pod is not
    /// known yet.
    pub fn request(&mut self, ex: &Exchange) -> Result<Option<Attributed>, Unattributed> {
        self.next_id += 1;
        let id = self.next_id;
        self.arrived(id, &ex.conversation, None)?;
        Ok(self.answered(
            id,
            Answer {
                pod: ex.pod.clone(),
                engine_cached: ex.engine_cached,
                engine_prompt_tokens: ex.engine_prompt_tokens,
            },
        ))
    }

    fn settle(&mut self, p: Pending) -> Attributed {
        let pod = p.pod.unwrap_or_default();
        let answer = p.answer.unwrap_or_default();
        let serving = p.held.iter().find(|r| r.pod == pod);
        let others = p
            .held
            .iter()
            .filter(|r| r.pod != pod)
            .map(|r| r.tokens)
            .max()
            .unwrap_or(0);
        let causes = attribute(&Request {
            prompt_tokens: p.partial.prompt_tokens,
            block_size: self.block_size,
            serving_held: serving.map_or(0, |r| r.tokens),
            others_held: others,
            previous_shared: p.partial.previous_shared,
            previous_left: p.partial.previous_left,
            engine_cached: answer.engine_cached,
        });
        // As read at arrival: the view of the serving pod then.
        let stale = serving.is_some_and(|r| r.short);
        let a = Attributed {
            id: p.id,
            engine_cached: answer.engine_cached,
            prompt_tokens: p.partial.prompt_tokens,
            causes,
            rewrite: p.partial.rewrite.filter(|_| causes.rewritten > 0),
            stale,
            prompt_mismatch: answer
                .engine_prompt_tokens
                .is_some_and(|n| n != p.partial.prompt_tokens),
            pod,
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
        if let Some((own, previous)) = p.keys_of {
            // A first request has no routes: it is only remembered.
            let went = Went::of(&a.pod, self.served_by.get(previous));
            for (rt, route) in self.totals.routers.iter_mut().zip(&p.routes) {
                rt.add(route, went, causes.misrouted);
            }
            // Attributed pods are flag pods (a name from elsewhere is ignored).
            let name = self.pod_names.iter().find(|p| ***p == *a.pod).cloned();
            self.served_by.insert(
                own,
                Some(previous),
                name.unwrap_or_else(|| a.pod.as_str().into()),
            );
        }
        a
    }

    fn count_unattributed(&mut self, why: Unattributed) {
        *self.totals.unattributed.entry(why).or_default() += 1;
    }

    /// Requests answered whose pod is not known yet: their pod's events are still to come.
    pub fn awaiting_pod(&self) -> usize {
        self.pending
            .iter()
            .filter(|p| p.pod.is_none() && p.answer.is_some())
            .count()
    }

    /// Requests still in flight, counted unattributed (the run ends).
    pub fn finish(&mut self) {
        for p in std::mem::take(&mut self.pending) {
            self.count_unattributed(if p.answer.is_some() {
                Unattributed::NoPod
            } else {
                Unattributed::NoAnswer
            });
        }
    }

    /// The totals, each pod's view figures read now.
    pub fn totals(&self) -> Totals {
        let mut t = self.totals.clone();
        for (name, pod) in t.pods.iter_mut() {
            pod.blocks = self.holdings.blocks(name);
            pod.capacity = self.holdings.capacity(name);
            pod.stale = self.holdings.stale(name).map(|u| u.as_str());
            pod.unapplied = self
                .holdings
                .unapplied(name)
                .map(|(k, v)| (k.as_str(), v))
                .collect();
        }
        t
    }
}
