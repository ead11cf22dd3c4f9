//! The run: rows audited on worker threads, each into its own tally, with the per-transition
//! lines put back in input order on the way out.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};

use anyhow::Result;

use super::alternatives::Costs;
use super::{CorpusReport, CorpusSettings, Tally, input};
use crate::audit::{Auditor, ConversationAudit, PlanAhead, Planned};
use crate::render::Conversation;

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
