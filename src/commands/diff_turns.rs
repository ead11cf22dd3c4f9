use anyhow::{Result, bail};

use super::Outcome;
use super::settings::{DiffTurnsSettings, note_built_in_follow_ups};
use crate::audit;
use crate::cli::DiffTurnsArgs;
use crate::report;

pub fn run(args: &DiffTurnsArgs, out: &mut dyn std::io::Write) -> Result<Outcome> {
    let s = DiffTurnsSettings::from_args(args, &mut super::terminal::stderr_line)?;
    let tok = crate::model::tokenizer_for(&s.files, s.audit.plan.server)?;
    let spinner = super::progress::Spinner::start("rendering");
    let n = s.conversations.len();
    let report =
        audit::diff_turns_with_progress(&s.files, &tok, &s.conversations, &s.audit, |i, m| {
            spinner.set_message(format!("conversation {}/{n}: {m}", i + 1))
        })?;
    drop(spinner);
    if report.conversations.is_empty()
        && let [only] = report.errors.as_slice()
    {
        // Nothing audited, one cause: the error alone says it all.
        bail!("{}: {}", only.source, only.message);
    }
    let failed = report.first_error();
    if report.conversations.is_empty()
        && let Some(e) = failed
    {
        return Err(e);
    }
    let text = report::export(&report, s.format, &s.style)?;
    out.write_all(text.as_bytes())?;
    if let Some(e) = failed {
        return Err(e);
    }
    note_built_in_follow_ups(&args.conversation);
    Ok(if report.has_findings() {
        Outcome::Findings
    } else {
        Outcome::Clean
    })
}
