use std::io::IsTerminal;

use anyhow::{Result, bail};

use super::Outcome;
use crate::cli::FetchArgs;
use crate::model::{HubSettings, fetch_from_hub, is_hub_id};

pub fn run(args: &FetchArgs, out: &mut dyn std::io::Write) -> Result<Outcome> {
    if !is_hub_id(&args.model) {
        bail!(
            "{:?} is not a Hub id of the form org/name[@revision]",
            args.model
        );
    }
    let progress = std::io::stderr().is_terminal();
    let settings = HubSettings::from_env(args.offline)?;
    let dir = fetch_from_hub(&args.model, args.revision.as_deref(), &settings, progress)?;
    writeln!(out, "{}", dir.display())?;
    Ok(Outcome::Clean)
}
