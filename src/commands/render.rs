use anyhow::Result;

use super::Outcome;
use super::settings::RenderSettings;
use crate::audit;
use crate::cli::RenderArgs;
use crate::report;

/// Render has no findings: it succeeds or fails on its input.
pub fn run(args: &RenderArgs, out: &mut dyn std::io::Write) -> Result<Outcome> {
    let run = RenderSettings::from_args(args, &mut super::terminal::stderr_line)?;
    let tok = crate::model::tokenizer_for(&run.files, run.audit.plan.server)?;
    let rendered = audit::render_conversations(
        &run.files,
        &tok,
        &run.conversations,
        &run.audit,
        run.selection,
        args.tokens,
    )?;
    let text = report::export(&rendered, run.format, &run.style)?;
    out.write_all(text.as_bytes())?;
    // The server serves the prompts shown; the request after them is refused.
    if let Some(c) = rendered.conversations.iter().find(|c| c.refused.is_some())
        && let Some(r) = &c.refused
    {
        anyhow::bail!("{}: {r}: {}", c.source, r.source);
    }
    super::settings::note_built_in_follow_ups(&args.conversation);
    Ok(Outcome::Clean)
}
