use std::io::Write;
use std::sync::OnceLock;

use anyhow::{Result, bail};

use super::Outcome;
use super::settings::{CorpusRun, style};
use crate::audit;
use crate::cli::CorpusArgs;
use crate::corpus::input::Rows;
use crate::corpus::{self, Hooks, PerTransition};
use crate::{output, report};

pub fn run(args: &CorpusArgs, out: &mut dyn std::io::Write) -> Result<Outcome> {
    let run = CorpusRun::from_args(args, &mut super::terminal::stderr_line)?;
    let (report, per_transition) = audit_rows(&run, args)?;
    // Nothing audited: the report still shows what was skipped and why, then the run fails
    // (and no output file is replaced). A shard's partial is written all the same: its
    // skipped rows count in the merge.
    let nothing = (report.tally.conversations == 0).then(|| nothing_audited(&report));
    if let Some(path) = &args.partial {
        write_partial(&run, &report, path)?;
    }
    if let Some(e) = nothing.as_ref().filter(|_| args.partial.is_some()) {
        // Only this shard: the merge decides whether the run audited anything.
        super::terminal::stderr_line(&format!("note: {e}; its partial is written"));
        return print_report(&report, run.format, out, None);
    }
    if nothing.is_none() {
        replace_files(&report, args.html.as_deref(), per_transition)?;
    }
    print_report(&report, run.format, out, nothing)
}

fn write_partial(
    run: &CorpusRun,
    report: &corpus::CorpusReport,
    path: &std::path::Path,
) -> Result<()> {
    let settings = corpus::partial::RunSettings::new(&run.audit, &run.files);
    let partial = corpus::partial::Partial::new(report, settings)?;
    Ok(output::write(path, &partial.to_bytes()?)?)
}

/// `args.partial` written, nothing printed (`watch --partial` over its record).
pub(super) fn partial_only(args: &CorpusArgs) -> Result<()> {
    let run = CorpusRun::from_args(args, &mut super::terminal::stderr_line)?;
    let (report, _) = audit_rows(&run, args)?;
    match &args.partial {
        Some(path) => write_partial(&run, &report, path),
        None => Ok(()),
    }
}

/// The run's report, and its per-transition file written but not yet in place.
fn audit_rows(
    run: &CorpusRun,
    args: &CorpusArgs,
) -> Result<(corpus::CorpusReport, Option<output::AtomicFile>)> {
    // Without a per-transition file, the tokenizer loads while the workers render the first
    // rows. With one, it loads before the input is opened: the load-ahead path has not been
    // tested with per-transition lines.
    let tokenizer = OnceLock::new();
    let ahead = args.per_transition.is_none();
    let model = corpus::ModelLoad::start(&run.files, &run.audit, &tokenizer, ahead)?;
    let rows = Rows::new(args.files.clone(), run.row_format, run.selection);
    if let Some(e) = rows.open_error.as_ref() {
        bail!("{e}: {}", e.source);
    }
    // Written beside its destination and renamed into place once the run succeeds: an error
    // half-way keeps the previous file.
    let mut per_transition = args
        .per_transition
        .as_deref()
        .map(output::AtomicFile::create)
        .transpose()?;
    let per_token = run.corpus.kv_bytes.as_ref().map(|k| k.bytes_per_token);
    let block_sizes = run.corpus.block_sizes.clone();
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
    let summary = |r: &Rows| {
        open_error = r.open_error.as_ref().map(|e| format!("{e}: {}", e.source));
        r.summary()
    };
    let report = corpus::run_loading(model, rows, summary, &run.corpus, hooks)?;
    drop(bar);
    if let Some(e) = open_error {
        bail!("{e}");
    }
    Ok((report, per_transition))
}

/// The HTML report and the per-transition file put in place of the old ones.
fn replace_files(
    report: &corpus::CorpusReport,
    html: Option<&std::path::Path>,
    mut per_transition: Option<output::AtomicFile>,
) -> Result<()> {
    let mut html = match html {
        Some(path) => {
            let text = report::export(report, report::Format::Html, &style(false))?;
            let mut file = output::AtomicFile::create(path)?;
            file.write_all(text.as_bytes())?;
            Some(file)
        }
        None => None,
    };
    // Both whole on disk before either replaces its old file: a full disk fails the run with
    // both old files as they were (the per-transition file's last lines are still in its
    // buffer until now).
    for file in per_transition.iter_mut().chain(html.iter_mut()) {
        file.sync()?;
    }
    if let Some(file) = html {
        file.commit()?;
    }
    if let Some(file) = per_transition {
        file.commit()?;
    }
    Ok(())
}

/// The report on standard output in `format`, then the outcome: `nothing` (no conversation
/// could be audited) is the run's error, after the report has shown what was skipped.
pub(super) fn print_report(
    report: &corpus::CorpusReport,
    format: report::Format,
    out: &mut dyn std::io::Write,
    nothing: Option<anyhow::Error>,
) -> Result<Outcome> {
    let text = report::export(report, format, &style(false))?;
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

pub(super) fn nothing_audited(report: &corpus::CorpusReport) -> anyhow::Error {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::Auditor;
    use crate::cli::{Cli, Command};
    use crate::corpus::SetOnDrop;
    use crate::corpus::input::{InputSummary, Item};
    use clap::Parser;
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// The rows of a file, saying when they have all been taken.
    struct Watched<'f> {
        rows: Rows,
        taken_all: &'f AtomicBool,
    }

    impl Iterator for Watched<'_> {
        type Item = Item;
        fn next(&mut self) -> Option<Item> {
            let next = self.rows.next();
            if next.is_none() {
                self.taken_all.store(true, Ordering::SeqCst);
            }
            next
        }
    }

    #[test]
    fn rows_rendered_ahead_of_the_tokenizer_give_the_same_report() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("rows.jsonl");
        let chats = std::fs::read_to_string(root.join("fixtures/corpus/chats.jsonl")).unwrap();
        // A reply with a tool call (not rendered ahead: where it ends depends on the
        // tokenizer's stop tokens) and a row that is not JSON, among the plain chats. The
        // model ends a call with a stop token only its generation_config.json names, so a
        // call rendered ahead would end elsewhere and change the report.
        let tool = r#"{"messages": [{"role": "user", "content": "Weather in Paris?"}, {"role": "assistant", "content": null, "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]}, {"role": "tool", "content": "sunny"}, {"role": "assistant", "content": "It is sunny."}, {"role": "user", "content": "Thanks."}], "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]}"#;
        std::fs::write(&input, format!("{tool}\nnot json\n{chats}{tool}\n")).unwrap();
        let model = root.join("fixtures/models/tiny-call");
        let cli = Cli::try_parse_from([
            "kvaudit",
            "corpus",
            "-m",
            model.to_str().unwrap(),
            input.to_str().unwrap(),
            "--jobs",
            "2",
            "--now",
            "2026-01-15T10:00:00",
            // Block size 1 counts every token: the two tokens a call rendered ahead would
            // hold past its stop token do not cross a 16-token block boundary.
            "--block-sizes",
            "1,16",
        ])
        .unwrap();
        let Command::Corpus(args) = cli.command else {
            panic!("not the corpus command");
        };
        let corpus_run = CorpusRun::from_args(&args, &mut |line| panic!("{line}")).unwrap();
        let (settings, files, corpus_settings) =
            (&corpus_run.audit, &corpus_run.files, &corpus_run.corpus);
        let rows = || {
            Rows::new(
                args.files.clone(),
                corpus_run.row_format,
                corpus_run.selection,
            )
        };
        let export = |r: Result<corpus::CorpusReport>| {
            report::export(&r.unwrap(), report::Format::Json, &style(false)).unwrap()
        };
        let summary = |w: &Watched| -> InputSummary { w.rows.summary() };
        let no_hooks = || Hooks {
            progress: None,
            per_transition: None,
        };
        let run = |at: corpus::AuditorAt<'_, '_>, taken_all: &AtomicBool| {
            let rows = Watched {
                rows: rows(),
                taken_all,
            };
            corpus::run(at, rows, summary, corpus_settings, no_hooks())
        };
        let taken_all = AtomicBool::new(false);
        let tok = crate::tokenize::Tokenizer::from_file(&files.tokenizer_path).unwrap();
        let auditor = Auditor::new(files, &tok, settings).unwrap();
        let ready = export(run(corpus::AuditorAt::Ready(&auditor), &taken_all));
        assert!(ready.contains("\"not_json\": 2"), "{ready}");

        // The auditor arrives only once every row has been taken: all were taken ahead, and
        // all but the tool-call rows rendered.
        let taken_all = AtomicBool::new(false);
        let ahead = audit::PlanAhead::new(files, settings);
        let conv = |text: &str| {
            crate::corpus::input::Raw {
                source: "row".into(),
                text: text.into(),
                format: crate::corpus::input::RowFormat::Openai,
            }
            .conversation()
            .unwrap()
        };
        let slot: OnceLock<Result<Auditor>> = OnceLock::new();
        let later = std::thread::scope(|s| {
            s.spawn(|| {
                // Bounded: a change that stops the rows being taken ahead fails the test below
                // rather than hanging it.
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
                while !taken_all.load(Ordering::SeqCst) && std::time::Instant::now() < deadline {
                    std::thread::yield_now();
                }
                let guard = SetOnDrop(&slot);
                let _ = slot.set(Auditor::adopting(files, &tok, settings, Some(&ahead)));
                drop(guard);
            });
            let at = corpus::AuditorAt::Loading {
                ahead: &ahead,
                auditor: &slot,
            };
            run(at, &taken_all)
        });
        assert!(
            taken_all.load(Ordering::SeqCst),
            "not every row was taken ahead"
        );
        assert_eq!(export(later), ready);
        // After the runs, so that a tool-call row planned ahead fails on the report above
        // (the assertion the fixture model makes possible) before it fails here.
        assert!(ahead.plan(&conv(tool)).is_none());
        assert!(ahead.plan(&conv(chats.lines().next().unwrap())).is_some());

        // An auditor that cannot be made ends the run with an error, whatever was taken.
        let failed: OnceLock<Result<Auditor>> = OnceLock::new();
        let _ = failed.set(Err(anyhow::anyhow!("no tokenizer")));
        let at = corpus::AuditorAt::Loading {
            ahead: &ahead,
            auditor: &failed,
        };
        assert!(run(at, &taken_all).is_err());
    }
}
