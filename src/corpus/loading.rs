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
use crate::tokenize::Tokenizer;

/// The model a run audits with: loaded already, or to be loaded while the run starts.
pub struct ModelLoad<'a> {
    files: &'a ModelFiles,
    settings: &'a AuditSettings,
    tokenizer: &'a OnceLock<Tokenizer>,
    state: State<'a>,
}

enum State<'a> {
    Ready(Auditor<'a>),
    Ahead(PlanAhead<'a>),
}

impl<'a> ModelLoad<'a> {
    /// With `ahead`, nothing is loaded until the run starts; without, the model is loaded now
    /// (its error comes before anything else is opened). The tokenizer is kept in `tokenizer`,
    /// which the caller owns because the auditor borrows it.
    pub fn start(
        files: &'a ModelFiles,
        settings: &'a AuditSettings,
        tokenizer: &'a OnceLock<Tokenizer>,
        ahead: bool,
    ) -> Result<ModelLoad<'a>> {
        let state = if ahead {
            State::Ahead(PlanAhead::new(files, settings))
        } else {
            State::Ready(auditor(files, settings, tokenizer, None)?)
        };
        Ok(ModelLoad {
            files,
            settings,
            tokenizer,
            state,
        })
    }
}

fn auditor<'a>(
    files: &'a ModelFiles,
    settings: &'a AuditSettings,
    slot: &'a OnceLock<Tokenizer>,
    ahead: Option<&PlanAhead<'a>>,
) -> Result<Auditor<'a>> {
    let tok = crate::model::tokenizer_for(files, settings.plan.server)?;
    let tok = slot.get_or_init(|| tok);
    // Built here rather than by the first row to need them, while the workers render.
    tok.prepare_encoders();
    Auditor::adopting(files, tok, settings, ahead)
}

/// Audits `rows` as [`run`] does, with the auditor of `model`. `Err` when the model could not
/// be loaded (its own error, whole) or the run failed.
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
    let ahead = match model.state {
        State::Ready(auditor) => {
            return run(AuditorAt::Ready(&auditor), rows, input, settings, hooks);
        }
        State::Ahead(ahead) => ahead,
    };
    let slot: OnceLock<Result<Auditor>> = OnceLock::new();
    let report = std::thread::scope(|s| {
        let loader = std::thread::Builder::new().spawn_scoped(s, || {
            // Set even if making it panics, or the workers would wait for it forever.
            let guard = SetOnDrop(&slot);
            let _ = slot.set(auditor(
                model.files,
                model.settings,
                model.tokenizer,
                Some(&ahead),
            ));
            drop(guard);
        });
        if let Err(e) = loader {
            let _ = slot.set(Err(
                anyhow::Error::new(e).context("cannot start the thread that loads the model")
            ));
        }
        let at = AuditorAt::Loading {
            ahead: &ahead,
            auditor: &slot,
        };
        run(at, rows, input, settings, hooks)
    });
    // The model's own error comes first: the run's is only that the auditor never came.
    match slot.into_inner() {
        Some(Err(e)) => Err(e),
        _ => report,
    }
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
