use anyhow::Result;
use clap::CommandFactory;

use super::Outcome;
use crate::cli::{Cli, CompletionsArgs};

/// The same script as the committed files under completions/ (tests/completions.rs).
pub fn run(args: &CompletionsArgs, out: &mut dyn std::io::Write) -> Result<Outcome> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "kvaudit", &mut script);
    out.write_all(&script)?;
    Ok(Outcome::Clean)
}
