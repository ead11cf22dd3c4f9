//! A run that loads its model itself: the tokenizer takes longer to load than hundreds of
//! rows take to render, so by default it loads on a thread of its own while one worker
//! renders the first rows (see [`AuditorAt::Loading`]).

use std::sync::OnceLock;

use anyhow::Result;

use super::input::{InputSummary, Item};
use super::workers::{AuditorAt, Hooks, run};
use super::{CorpusReport, CorpusSettings};
use crate::audit::{AuditSettings, Auditor, PlanAhead};
use crate::model::ModelFiles;

/// The model a run audits with, and when it loads.
pub struct ModelLoad<'m> {
    pub files: &'m ModelFiles,
    pub settings: &'m AuditSettings,
    /// Load it while the workers render the first rows; otherwise before any row is taken.
    pub ahead: bool,
}

/// Audits `rows` as [`run`] does, with the auditor made from `model`. `Err` when the model
/// could not be loaded (its own error, whole) or the run failed.
pub fn run_loading<I>(
    model: ModelLoad<'_>,
    rows: I,
    input: impl FnOnce(&I) -> InputSummary,
    settings: &CorpusSettings,
    hooks: Hooks,
) -> Result<CorpusReport>
where
    I: Iterator<Item = Item> + Send,
{
    let ModelLoad {
        files,
        settings: audit,
        ahead,
    } = model;
    let ahead = ahead.then(|| PlanAhead::new(files, audit));
    // The auditor borrows the tokenizer, so both live in this frame.
    let tok_slot = OnceLock::new();
    let auditor_slot: OnceLock<Result<Auditor>> = OnceLock::new();
    let make_auditor = || {
        let tok = crate::model::tokenizer_for(files, audit.plan.server)?;
        let tok = tok_slot.get_or_init(|| tok);
        // Built here rather than by the first row to need them, while the workers render.
        tok.prepare_encoders();
        Auditor::adopting(files, tok, audit, ahead.as_ref())
    };
    let report = match &ahead {
        None => {
            let auditor = make_auditor()?;
            run(AuditorAt::Ready(&auditor), rows, input, settings, hooks)
        }
        Some(ahead) => std::thread::scope(|s| {
            let loader = std::thread::Builder::new().spawn_scoped(s, || {
                // Set even if making it panics, or the workers would wait for it forever.
                let guard = SetOnDrop(&auditor_slot);
                let _ = auditor_slot.set(make_auditor());
                drop(guard);
            });
            if let Err(e) = loader {
                let _ = auditor_slot
                    .set(Err(anyhow::Error::new(e)
                        .context("cannot start the thread that loads the model")));
            }
            let at = AuditorAt::Loading {
                ahead,
                auditor: &auditor_slot,
            };
            run(at, rows, input, settings, hooks)
        }),
    };
    // The model's own error comes first: the run's is only that the auditor never came.
    if let Some(Err(_)) = auditor_slot.get() {
        return Err(match auditor_slot.into_inner() {
            Some(Err(e)) => e,
            _ => anyhow::anyhow!("the model could not be loaded"),
        });
    }
    report
}

/// Fills an empty slot with an error when dropped.
pub(crate) struct SetOnDrop<'s, 'a>(pub(crate) &'s OnceLock<Result<Auditor<'a>>>);

impl Drop for SetOnDrop<'_, '_> {
    fn drop(&mut self) {
        let _ = self.0.set(Err(anyhow::anyhow!(
            "loading the tokenizer failed unexpectedly"
        )));
    }
}
