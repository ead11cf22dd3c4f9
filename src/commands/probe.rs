use anyhow::Result;

use super::Outcome;
use super::settings::{model_spec, probe_conversation, probe_settings, style};
use crate::cli::ProbeArgs;
use crate::{output, probe, report};

pub fn run(args: &ProbeArgs, out: &mut dyn std::io::Write) -> Result<Outcome> {
    let (settings, http) = probe_settings(args, |k| std::env::var(k).ok())?;
    let conv = probe_conversation(args)?;
    let client = probe::Client::new(&args.url, http)?;
    let files = crate::model::resolve_model(&model_spec(&args.model))?;
    super::note_cached_model(&files, args.model.offline);
    let inputs = super::settings::model_inputs(&args.model, &files)
        .into_iter()
        .chain(args.conversation.iter().cloned());
    output::check_outputs(inputs, args.save_conversation.iter())?;
    // The engine (so how it tokenizes) may be known only once the server answers.
    let tokenizer =
        |server| crate::model::tokenizer_for(&files, server).map_err(anyhow::Error::from);
    let spinner = super::progress::Spinner::start("probing");
    let report = probe::run(&client, &files, &tokenizer, &conv, &settings);
    drop(spinner);
    let report = report?;
    if let Some(note) = probe::release_mismatch(&report) {
        super::terminal::stderr_line(&format!("warning: {note}"));
    }
    if let Some(path) = &args.save_conversation {
        let text = serde_json::to_string_pretty(&report.recorded)? + "\n";
        output::write(path, text.as_bytes())?;
    }
    let text = report::export(&report, args.format.into(), &style(false))?;
    out.write_all(text.as_bytes())?;
    Ok(if report.all_agree() {
        Outcome::Clean
    } else {
        Outcome::Findings
    })
}
