//! `kvaudit watch`: each request's prompt tokens attributed to why they were, or were not,
//! served from the KV cache, with each pod's view kept by its KV events.

use std::io::{BufRead, Read, Write};

use anyhow::{Context, Result};

use super::Outcome;
use super::settings::{WatchSettings, style};
use crate::cli::WatchArgs;
use crate::events::frames::CaptureReader;
use crate::output::{self, AtomicFile};
use crate::report::watch::WatchOutput;
use crate::watch::conversations::Conversations;
use crate::watch::log::PodCapture;
use crate::watch::monitor::Monitor;

pub fn run(args: &WatchArgs, out: &mut dyn Write) -> Result<Outcome> {
    let s = WatchSettings::from_args(args, &mut super::terminal::stderr_line)?;
    let inputs = s
        .pods
        .iter()
        .map(|(_, p)| p.clone())
        .chain(std::iter::once(s.requests.clone()));
    output::check_outputs(inputs, s.record.iter())?;
    let mut pods = Vec::with_capacity(s.pods.len());
    for (name, path) in &s.pods {
        let shown = path.display();
        let f = crate::input::open_regular(path)
            .with_context(|| format!("--pod {name}: cannot open capture {shown}"))?;
        let reader = CaptureReader::new(Box::new(std::io::BufReader::new(f)) as Box<dyn Read>)
            .with_context(|| format!("--pod {name}: cannot read capture {shown}"))?;
        pods.push(PodCapture {
            name: name.clone(),
            reader,
        });
    }
    let shown = s.requests.display().to_string();
    let mut requests: Box<dyn BufRead> = if shown == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        let f = crate::input::open_regular(&s.requests)
            .with_context(|| format!("cannot open requests {shown}"))?;
        Box::new(std::io::BufReader::new(f))
    };
    let mut record = s.record.as_deref().map(AtomicFile::create).transpose()?;
    let tok = crate::model::tokenizer_for(&s.files, s.audit.plan.server)?;
    let auditor = crate::audit::Auditor::new(&s.files, &tok, &s.audit)?;
    let names: Vec<String> = s.pods.iter().map(|(n, _)| n.clone()).collect();
    let mut monitor = Monitor::new(auditor, s.block_size, s.capacity, &names);
    let mut conversations = Conversations::new(s.conversations, record.is_some());
    let mut write_error = None;
    let counts = crate::watch::log::run(
        &mut requests,
        &shown,
        pods,
        s.engine,
        &mut monitor,
        &mut conversations,
        |rows| write_rows(record.as_mut(), rows, &mut write_error),
    )
    .with_context(|| format!("cannot read requests {shown}"))?;
    write_rows(
        record.as_mut(),
        conversations.drain_rows(),
        &mut write_error,
    );
    if let Some(e) = write_error {
        return Err(e.into());
    }
    if let Some(mut file) = record {
        file.sync()?;
        file.commit()?;
    }
    let totals = monitor.totals();
    if totals.requests == 0
        && let Some((line, why)) = &counts.first_bad
    {
        anyhow::bail!("{shown}: no line is a request (line {line}: {why})");
    }
    let report = WatchOutput {
        model: &s.model_label,
        server: s.audit.plan.server.name(),
        block_size: s.block_size,
        requests: &shown,
        totals: &totals,
        counts: &counts,
    };
    let text = crate::report::export(&report, s.format, &style(false))?;
    out.write_all(text.as_bytes())?;
    Ok(Outcome::Clean)
}

/// Conversation rows onto the record, one JSON line each; the first write error kept.
fn write_rows(
    record: Option<&mut AtomicFile>,
    rows: Vec<serde_json::Value>,
    error: &mut Option<std::io::Error>,
) {
    let Some(file) = record else { return };
    for row in rows {
        if let Err(e) = writeln!(file, "{row}") {
            error.get_or_insert(e);
        }
    }
}
