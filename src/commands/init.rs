use anyhow::{Result, bail};

use super::Outcome;
use crate::cli::InitArgs;
use crate::gate::config::starter;

pub fn run(args: &InitArgs, out: &mut dyn std::io::Write) -> Result<Outcome> {
    if args.output.exists() && !args.force {
        bail!(
            "{} exists; pass --force to overwrite it",
            args.output.display()
        );
    }
    let text = starter(&args.model);
    crate::output::write(&args.output, text.as_bytes())?;
    writeln!(
        out,
        "wrote {}; run `kvaudit check` to audit, then `kvaudit check --update-baseline` to record the baseline",
        args.output.display()
    )?;
    Ok(Outcome::Clean)
}
