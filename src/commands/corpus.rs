use anyhow::{Context, Result, bail};

use super::Outcome;
use super::settings::{audit_settings, corpus_settings, router_settings, row_format, style};
use crate::audit::{self, Auditor};
use crate::cli::CorpusArgs;
use crate::corpus::input::{Rows, Selection};
use crate::corpus::{self, Hooks, PerTransition};
use crate::report;
use crate::tokenize::Tokenizer;

pub fn run(args: &CorpusArgs, out: &mut dyn std::io::Write) -> Result<Outcome> {
    let mut settings = audit_settings(&args.rendering, args.model.template_name.clone())?;
    let files = audit::resolve_model(&super::settings::model_spec(&args.model))?;
    super::note_cached_model(&files, args.model.offline);
    let corpus_settings = corpus_settings(args, &files)?;
    settings.align.block_sizes = corpus_settings.block_sizes.clone();
    settings.align.sides = crate::align::Sides::Skip;
    settings.remedies = args.remedies;
    if !args.no_router {
        settings.router = Some(router_settings(&args.router, &args.model.model)?);
    }
    let tok = Tokenizer::from_file(&files.tokenizer_path)?;
    let auditor = Auditor::new(&files, &tok, &settings)?;
    let rows = Rows::new(
        args.files.clone(),
        row_format(args.format_in),
        Selection {
            limit: args.limit,
            sample: args.sample.map(|n| (n, args.seed)),
        },
    );
    if let Some(e) = rows.open_error.as_ref() {
        bail!("{e}: {}", e.source);
    }
    let mut per_transition = match &args.per_transition {
        Some(path) => Some(std::io::BufWriter::new(
            std::fs::File::create(path)
                .with_context(|| format!("cannot write {}", path.display()))?,
        )),
        None => None,
    };
    let per_token = corpus_settings.kv_bytes.as_ref().map(|k| k.bytes_per_token);
    let block_sizes = corpus_settings.block_sizes.clone();
    let lines = move |a: &audit::ConversationAudit, c: &[Vec<corpus::alternatives::Costs>]| {
        report::corpus::transition_lines(a, c, &block_sizes, per_token)
    };
    let bar =
        super::progress::RowBar::start(Rows::total_bytes(&args.files), rows.bytes_read.clone());
    let progress = |n: u64| bar.rows(n);
    let hooks = Hooks {
        progress: Some(&progress),
        per_transition: per_transition.as_mut().map(|w| PerTransition {
            lines: &lines,
            out: w as &mut (dyn std::io::Write + Send),
        }),
    };
    let mut open_error = None;
    let report = corpus::run(
        &auditor,
        rows,
        |r: &Rows| {
            open_error = r.open_error.as_ref().map(|e| format!("{e}: {}", e.source));
            r.summary()
        },
        &corpus_settings,
        hooks,
    )?;
    drop(bar);
    if let Some(mut w) = per_transition {
        use std::io::Write;
        w.flush().context("writing the per-transition file")?;
    }
    if let Some(e) = open_error {
        bail!("{e}");
    }
    // Nothing audited: the report still shows what was skipped and why, then the run fails.
    let nothing = (report.tally.conversations == 0).then(|| nothing_audited(&report));
    if nothing.is_none()
        && let Some(path) = &args.html
    {
        let html = report::export(&report, report::Format::Html, &style(false))?;
        std::fs::write(path, html).with_context(|| format!("cannot write {}", path.display()))?;
    }
    let text = report::export(&report, args.format.into(), &style(false))?;
    out.write_all(text.as_bytes())?;
    if let Some(e) = nothing {
        return Err(e);
    }
    Ok(if report.has_findings() {
        Outcome::Findings
    } else {
        Outcome::Clean
    })
}

fn nothing_audited(report: &corpus::CorpusReport) -> anyhow::Error {
    let t = &report.tally;
    if t.rows == 0 {
        return anyhow::anyhow!("the input holds no rows");
    }
    let reasons: Vec<String> = t
        .skipped
        .0
        .iter()
        .map(|(r, s)| format!("{} {r}", s.count))
        .collect();
    let first = t
        .skipped
        .0
        .values()
        .filter_map(|s| s.first_error.as_ref())
        .min_by_key(|(order, _)| *order);
    match first {
        Some((_, first)) => anyhow::anyhow!(
            "no conversation could be audited ({} rows: {}); the first: {first}",
            t.rows,
            reasons.join(", ")
        ),
        None => anyhow::anyhow!(
            "no conversation could be audited ({} rows: {})",
            t.rows,
            reasons.join(", ")
        ),
    }
}
