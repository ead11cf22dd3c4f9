use std::io::IsTerminal;

use anyhow::{Context, Result};

use super::Outcome;
use super::settings::{check_baseline, check_config, check_inputs};
use crate::cli::CheckArgs;
use crate::gate::{self, CheckOptions, codes};
use crate::{output, report};

pub fn run(args: &CheckArgs, out: &mut dyn std::io::Write) -> Result<Outcome> {
    if args.list_codes {
        out.write_all(codes::list().as_bytes())?;
        return Ok(Outcome::Clean);
    }
    if let Some(code) = &args.explain {
        let code = gate::Code::parse(code).with_context(|| {
            format!("{code:?} is not a kvaudit code (see kvaudit check --list-codes)")
        })?;
        out.write_all(codes::explain(code).as_bytes())?;
        return Ok(Outcome::Clean);
    }
    let config = check_config(args)?;
    let (baseline, lock) = check_baseline(args, &config)?;
    let lock_path = &lock.path;
    // Nothing is written over what the run reads, checked before the run.
    let written = if args.update_baseline {
        Some(lock_path.clone())
    } else {
        args.output.clone()
    };
    output::check_outputs(check_inputs(args, &config, &lock), written.iter())?;
    if matches!(baseline, gate::Baseline::None)
        && !args.update_baseline
        && config.gate.baseline.is_some()
    {
        super::terminal::stderr_line(&format!(
            "warning: no baseline yet ({} not found): record one with `kvaudit check --update-baseline`",
            lock_path.display()
        ));
    }
    let options = CheckOptions {
        offline: args.offline,
        progress: std::io::stderr().is_terminal(),
        jobs: super::settings::jobs(args.jobs)?,
    };
    let spinner = super::progress::Spinner::start("checking");
    let report = gate::check(&config, &baseline, &options)?;
    drop(spinner);
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
    let text = report::export(&report, args.format.into(), &super::settings::style(false))?;
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
