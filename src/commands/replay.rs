use std::io::Read;

use anyhow::{Context, Result};

use super::Outcome;
use super::settings::{ReplaySettings, style};
use crate::cli::ReplayArgs;
use crate::events::frames::CaptureReader;
use crate::replay::ReplayRun;
use crate::report::replay::{InputInfo, ReplayOutput};
use crate::report::{Format, export};

/// Stopped on bad input after printing what was counted: exit 2 with this message.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StoppedOnBadInput(pub String);

pub fn run(args: &ReplayArgs, out: &mut dyn std::io::Write) -> Result<Outcome> {
    let settings = ReplaySettings::from_args(args)?;
    let shown = args.file.display().to_string();
    let (source, size): (Box<dyn Read>, Option<u64>) = if shown == "-" {
        (Box::new(std::io::stdin().lock()), None)
    } else {
        let f = std::fs::File::open(&args.file)
            .with_context(|| format!("cannot open capture {shown}"))?;
        // Only a regular file's length is its content's (a pipe or device reports 0).
        let size = f.metadata().ok().filter(|m| m.is_file()).map(|m| m.len());
        (Box::new(f), size)
    };
    let reader = CaptureReader::new(source)
        .with_context(|| format!("cannot read capture {shown}"))?
        .with_size(size);
    let json = reader.looks_like_json();
    let progress = super::progress::byte_bar(size);
    let ReplayRun {
        report,
        format,
        stopped: error,
    } = crate::replay::run(reader, settings.options, &settings.lookups, |offset| {
        if let Some(p) = &progress {
            p.set_position(offset);
        }
    });
    if let Some(p) = progress {
        p.finish_and_clear();
    }
    if let Some((0, reason)) = &error
        && report.messages == 0
        && report.malformed.is_empty()
        && settings.format == Format::Human
    {
        // Nothing decoded at all: most likely another kind of file (a JSON truth file, a
        // log). A human report of zeros would only hide that; JSON and Prometheus keep their
        // document, with the error in it, for the programs that read them.
        let what = if json {
            format!("{shown} is JSON text, not a capture")
        } else {
            format!("{shown}: byte 0: {reason}: nothing in it decodes as KV events")
        };
        return Err(StoppedOnBadInput(format!(
            "{what} (replay reads `.frames` captures, as `kvaudit capture` writes them, and \
             raw msgpack event batches)"
        ))
        .into());
    }
    let input = InputInfo {
        path: &shown,
        format,
        error: error.clone(),
    };
    let text = export(
        &ReplayOutput {
            report: &report,
            input,
        },
        settings.format,
        &style(false),
    )?;
    out.write_all(text.as_bytes())?;
    if let Some((offset, reason)) = error {
        let hint = if args.keep_going {
            ""
        } else {
            "; --keep-going counts such messages and goes on where the framing allows"
        };
        return Err(StoppedOnBadInput(format!("{shown}: byte {offset}: {reason}{hint}")).into());
    }
    if report.messages == 0 && report.malformed.is_empty() {
        super::terminal::stderr_line(&format!(
            "warning: {shown} holds no messages: nothing was checked (exit code 1)"
        ));
        return Ok(Outcome::Findings);
    }
    Ok(if report.has_findings() {
        Outcome::Findings
    } else {
        Outcome::Clean
    })
}
