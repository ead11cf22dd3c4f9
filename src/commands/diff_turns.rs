use anyhow::{Result, bail};

use super::Outcome;
use super::settings::{
    audit_settings, conversations, ignored_input_warnings, router_settings, style,
};
use crate::audit;
use crate::cli::DiffTurnsArgs;
use crate::report;

pub fn run(args: &DiffTurnsArgs, out: &mut dyn std::io::Write) -> Result<Outcome> {
    let mut settings = audit_settings(
        &args.conversation.rendering,
        args.model.template_name.clone(),
    )?;
    settings.date_rollover = args.date_rollover;
    settings.remedies = args.remedies;
    crate::align::check_block_sizes("--block-sizes", &args.block_sizes)
        .map_err(anyhow::Error::msg)?;
    settings.align.block_sizes = args.block_sizes.clone();
    let llm_d = router_settings(&args.router, &args.model.model)?;
    settings.routers = super::settings::router_specs(&args.router, &llm_d)?;
    settings.router = Some(llm_d);
    let conversations = conversations(&args.conversation)?;
    let files = audit::resolve_model(&super::settings::model_spec(&args.model))?;
    super::note_cached_model(&files, args.model.offline);
    for warning in ignored_input_warnings(
        &args.conversation,
        &files,
        args.model.template_name.as_deref(),
        &conversations,
    ) {
        super::terminal::stderr_line(&format!("warning: {warning}"));
    }
    let tok = audit::tokenizer_for(&files, settings.plan.server)?;
    let spinner = super::progress::Spinner::start("rendering");
    let n = conversations.len();
    let report =
        audit::diff_turns_with_progress(&files, &tok, &conversations, &settings, |i, s| {
            spinner.set_message(format!("conversation {}/{n}: {s}", i + 1))
        })?;
    drop(spinner);
    if report.conversations.is_empty()
        && let [only] = report.errors.as_slice()
    {
        // Nothing audited, one cause: the error alone says it all.
        bail!("{}: {}", only.source, only.message);
    }
    let unaudited = report.errors.iter().filter(|e| !e.partial).count();
    let failed = |e: &audit::ConversationError| {
        if report.errors.len() == 1 && e.partial {
            // The report above has the requests before the refused one.
            return anyhow::anyhow!("{}: {}", e.source, e.message);
        }
        anyhow::anyhow!(
            "{} of {} conversations could not be audited; the first, {}: {}",
            report.errors.len(),
            unaudited + report.conversations.len(),
            e.source,
            e.message
        )
    };
    if report.conversations.is_empty()
        && let Some(first) = report.errors.first()
    {
        return Err(failed(first));
    }
    let text = report::export(&report, args.format.into(), &style(args.only_rewrites))?;
    out.write_all(text.as_bytes())?;
    if let Some(first) = report.errors.first() {
        return Err(failed(first));
    }
    super::settings::note_built_in_follow_ups(&args.conversation);
    Ok(if report.has_findings() {
        Outcome::Findings
    } else {
        Outcome::Clean
    })
}
