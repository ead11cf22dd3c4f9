use anyhow::Result;

use super::Outcome;
use super::settings::{ProbeRun, style};
use crate::cli::ProbeArgs;
use crate::{output, probe, report};

pub fn run(args: &ProbeArgs, out: &mut dyn std::io::Write) -> Result<Outcome> {
    let run = ProbeRun::from_args(
        args,
        |k| std::env::var(k).ok(),
        &mut super::terminal::stderr_line,
    )?;
    let files = &run.files;
    // The engine (so how it tokenizes) may be known only once the server answers.
    let tokenizer =
        |server| crate::model::tokenizer_for(files, server).map_err(anyhow::Error::from);
    let spinner = super::progress::Spinner::start("probing");
    let report = probe::run(
        &run.client,
        files,
        &tokenizer,
        &run.conversation,
        &run.probe,
    );
    drop(spinner);
    let report = report?;
    if let Some(note) = probe::release_mismatch(&report) {
        super::terminal::stderr_line(&format!("warning: {note}"));
    }
    if let Some(path) = &args.save_conversation {
        let text = serde_json::to_string_pretty(&report.recorded)? + "\n";
        output::write(path, text.as_bytes())?;
    }
    let text = report::export(&report, run.format, &style(false))?;
    out.write_all(text.as_bytes())?;
    Ok(if report.all_agree() {
        Outcome::Clean
    } else {
        Outcome::Findings
    })
}
