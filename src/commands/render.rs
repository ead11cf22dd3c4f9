use anyhow::Result;

use super::Outcome;
use super::settings::{audit_settings, conversations, render_selection};
use crate::audit;
use crate::cli::RenderArgs;
use crate::report;

/// Render has no findings: it succeeds or fails on its input.
pub fn run(args: &RenderArgs, out: &mut dyn std::io::Write) -> Result<Outcome> {
    let settings = audit_settings(
        &args.conversation.rendering,
        args.model.template_name.clone(),
    )?;
    let selection = render_selection(args.prompt, args.held)?;
    let conversations = conversations(&args.conversation)?;
    let files = crate::model::resolve_model(&super::settings::model_spec(&args.model))?;
    super::note_cached_model(&files, args.model.offline);
    let tok = crate::model::tokenizer_for(&files, settings.plan.server)?;
    let rendered = audit::render_conversations(
        &files,
        &tok,
        &conversations,
        &settings,
        selection,
        args.tokens,
    )?;
    let text = report::export(
        &rendered,
        args.format.into(),
        &super::settings::style(false),
    )?;
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
