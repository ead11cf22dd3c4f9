use std::io::IsTerminal;

use anyhow::{Result, bail};

use super::Outcome;
use crate::cli::FetchArgs;
use crate::model::{Fetched, HubSettings, fetch_detailed, is_hub_id};

/// Prints the snapshot directory on stdout (for `$(kvaudit fetch ...)`) and on stderr how the
/// revision was resolved: from the cache alone, or from the endpoint and what it downloaded.
pub fn run(args: &FetchArgs, out: &mut dyn std::io::Write) -> Result<Outcome> {
    if !is_hub_id(&args.model) {
        bail!(
            "{:?} is not a Hub id of the form org/name[@revision]",
            args.model
        );
    }
    let progress = std::io::stderr().is_terminal();
    let mut settings = HubSettings::from_env(args.offline)?;
    if args.force && settings.offline {
        bail!("--force asks the Hub for the revision again, but HF_HUB_OFFLINE is set");
    }
    settings.force = args.force;
    let fetched = fetch_detailed(&args.model, args.revision.as_deref(), &settings, progress)?;
    writeln!(out, "{}", fetched.snapshot.display())?;
    let id = args
        .model
        .split_once('@')
        .map_or(&*args.model, |(id, _)| id);
    super::terminal::stderr_line(&resolution(id, &fetched, settings.offline));
    Ok(Outcome::Clean)
}

pub fn resolution(id: &str, f: &Fetched, offline: bool) -> String {
    let short = |c: &str| c.chars().take(12).collect::<String>();
    let name = format!("{id}@{}", f.revision);
    if f.from_cache {
        let why = if offline {
            "offline mode is on".to_string()
        } else if f.revision.eq_ignore_ascii_case(&f.commit) {
            return format!("{name}: from the cache (a commit never changes)");
        } else {
            format!(
                "the Hub was not asked whether {} moved; --force checks",
                f.revision
            )
        };
        return format!(
            "{name}: commit {} from the cache without the network ({why})",
            short(&f.commit)
        );
    }
    let moved = match &f.previous_commit {
        Some(p) if *p != f.commit => format!(" (was {})", short(p)),
        _ => String::new(),
    };
    let files = if f.downloaded.is_empty() {
        "nothing to download, the cache had every file".to_string()
    } else {
        format!("downloaded {}", f.downloaded.join(", "))
    };
    format!("{name}: commit {}{moved}; {files}", short(&f.commit))
}
