use anyhow::Result;

use super::Outcome;
use super::settings::{CheckSettings, GateRun};
use crate::cli::CheckArgs;
use crate::gate::{self, codes};
use crate::{output, report};

pub fn run(args: &CheckArgs, out: &mut dyn std::io::Write) -> Result<Outcome> {
    let run = match CheckSettings::from_args(args, &mut super::terminal::stderr_line)? {
        CheckSettings::ListCodes => {
            out.write_all(codes::list().as_bytes())?;
            return Ok(Outcome::Clean);
        }
        CheckSettings::Explain(code) => {
            out.write_all(codes::explain(code).as_bytes())?;
            return Ok(Outcome::Clean);
        }
        CheckSettings::LintRouterConfig { path, engine } => {
            let findings = router_lints(&path, args.engine_block_size, engine.as_ref(), None)?;
            let report = gate::CheckReport {
                models: Vec::new(),
                findings,
                baseline: None,
                lock: gate::lock::Lock::new(Vec::new()),
            };
            return finish(args, &report, out);
        }
        CheckSettings::Gate(run) => *run,
    };
    let GateRun {
        config,
        router_config: router,
        engine,
        baseline,
        lock,
        options,
    } = run;
    let lock_path = &lock.path;
    let spinner = super::progress::Spinner::start("checking");
    let mut report = gate::check(&config, &baseline, &options)?;
    drop(spinner);
    if let Some(path) = &router {
        let measured = measured_cost(&report.models);
        let mut lints = router_lints(
            path,
            args.engine_block_size,
            engine.as_ref(),
            Some(&config.gate),
        )?;
        for f in &mut lints {
            if matches!(
                f.code,
                gate::Code::RouterBlockSize | gate::Code::RouterReadsApproximate
            ) && !measured.is_empty()
            {
                f.message = format!("{}; measured on this run: {measured}", f.message);
            }
        }
        report.findings.extend(lints);
    }
    if args.update_baseline {
        let text = report.lock.to_text()?;
        let options = output::Options {
            within: lock.within.as_deref(),
            ..Default::default()
        };
        output::write_with(lock_path, text.as_bytes(), options)?;
        writeln!(
            out,
            "wrote {} ({} transitions of {} models)",
            lock_path.display(),
            report.lock.entries.len(),
            report.models.len()
        )?;
        return Ok(Outcome::Clean);
    }
    finish(args, &report, out)
}

fn finish(
    args: &CheckArgs,
    report: &gate::CheckReport,
    out: &mut dyn std::io::Write,
) -> Result<Outcome> {
    let text = report::export(report, args.format.into(), &super::settings::style(false))?;
    match &args.output {
        Some(path) => output::write(path, text.as_bytes())?,
        None => out.write_all(text.as_bytes())?,
    }
    Ok(if report.failed() {
        Outcome::Findings
    } else {
        Outcome::Clean
    })
}

/// What the configured router view cost on each model of the run, in a phrase.
fn measured_cost(models: &[gate::ModelSummary]) -> String {
    models
        .iter()
        .filter_map(|m| {
            let r = m.router?;
            Some(format!(
                "{}: the index (block {}) sees {} of the {} tokens the engine holds over {} transitions, and the decider keeps {} on the decode pod where the engine's view would keep {}",
                m.source,
                r.index_block_size,
                r.index_visible_tokens,
                r.engine_cached_tokens,
                m.transitions,
                r.decode_only_index,
                r.decode_only_engine
            ))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// A router configuration's lint findings, each at the line of the setting it is about.
fn router_lints(
    path: &std::path::Path,
    engine_block_size: usize,
    engine: Option<&super::settings::EngineFlags>,
    gate: Option<&gate::config::GateOptions>,
) -> Result<Vec<gate::GateFinding>> {
    use crate::routers::config::LintKind;
    let (loaded, text) = super::settings::router_config(path)?;
    let shown = path.display().to_string();
    let line_of = |needles: &[&str]| {
        needles
            .iter()
            .find_map(|n| {
                text.lines()
                    .position(|l| !l.trim_start().starts_with('#') && l.contains(n))
            })
            .map_or(1, |i| i + 1)
    };
    let mut out = Vec::new();
    for l in crate::routers::config::lint(&loaded, engine_block_size, engine.map(|e| &e.args)) {
        // Where the finding points: the router config's line, or the engine's flags file.
        let mut file = shown.clone();
        let (code, line) = match l.kind {
            LintKind::BlockSize => (
                gate::Code::RouterBlockSize,
                line_of(&[
                    "blockSizeTokens",
                    "blockSize",
                    "--kv-cache-block-size",
                    "--block-size",
                    "--kv-event-block-size",
                ]),
            ),
            LintKind::ReadsApproximate => (
                gate::Code::RouterReadsApproximate,
                line_of(&[if l.message.starts_with("prefix-cache-scorer") {
                    "type: prefix-cache-scorer"
                } else {
                    "type: prefix-based-pd-decider"
                }]),
            ),
            LintKind::NonCachedTooLow => {
                (gate::Code::NonCachedTooLow, line_of(&["nonCachedTokens"]))
            }
            LintKind::Unmodelled => (gate::Code::RouterUnmodelled, 1),
            LintKind::EventsUndecodable => {
                (gate::Code::EventsUndecodable, line_of(&["engineType"]))
            }
            LintKind::CannotRender | LintKind::TopicFiltered | LintKind::TopicPod => {
                if let Some(e) = engine {
                    file = e.path.display().to_string();
                }
                let code = match l.kind {
                    LintKind::CannotRender => gate::Code::RouterCannotRender,
                    LintKind::TopicFiltered => gate::Code::EventsNotReceived,
                    _ => gate::Code::TopicPodNotEndpoint,
                };
                (code, 1)
            }
        };
        let level = gate.map_or(code.info().default_level, |g| g.level(code));
        if level == codes::Level::Allow {
            continue;
        }
        out.push(gate::GateFinding {
            code,
            name: code.info().name,
            level,
            model: shown.clone(),
            scenario: None,
            transition: None,
            from_prompt: None,
            message: l.message,
            evidence: None,
            help: code.info().help.to_string(),
            remedies: None,
            template_file: Some(file),
            template_line: line,
            allowed: None,
            baselined: false,
        });
    }
    Ok(out)
}
