//! One thin file per subcommand: parse-level values in, a report and an outcome out.

pub mod capture;
pub mod check;
pub mod completions;
pub mod corpus;
pub mod diff_turns;
pub mod fetch;
pub mod init;
pub mod keys;
pub mod merge;
pub mod probe;
pub mod progress;
pub mod render;
pub mod replay;
pub mod settings;
pub mod terminal;
pub mod watch;

/// What a command found; main maps it to the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Clean,
    Findings,
}

/// Whether human output is coloured. `--color always|never` decides; with `auto`, a non-empty
/// `NO_COLOR` turns colour off (no-color.org: an empty value does not), a non-empty
/// `FORCE_COLOR` other than `0`/`false` turns it on, and otherwise stdout must be a terminal
/// that is not `TERM=dumb`. `env` looks a variable up.
pub fn color_wanted(
    choice: crate::cli::ColorChoice,
    stdout_is_terminal: bool,
    env: impl Fn(&str) -> Option<String>,
) -> bool {
    use crate::cli::ColorChoice;
    let set = |k: &str| env(k).filter(|v| !v.is_empty());
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto if set("NO_COLOR").is_some() => false,
        ColorChoice::Auto => match set("FORCE_COLOR") {
            Some(v) => !matches!(v.as_str(), "0" | "false"),
            None => stdout_is_terminal && set("TERM").is_none_or(|t| t != "dumb"),
        },
    }
}

/// On stderr, when a Hub id was answered from the cache without asking the Hub: the user
/// should know the revision may have moved since (`kvaudit fetch --force` checks).
pub fn note_cached_model(files: &crate::model::ModelFiles, offline_flag: bool) {
    if let Some(note) = cached_model_note(files, offline_flag) {
        terminal::stderr_line(&format!("note: {note}"));
    }
}

/// What [`note_cached_model`] prints, for a command that prints its notes itself.
pub fn cached_model_note(files: &crate::model::ModelFiles, offline_flag: bool) -> Option<String> {
    let f = files.fetched.as_ref().filter(|f| f.from_cache)?;
    let offline =
        crate::model::HubSettings::from_env(offline_flag).map_or(offline_flag, |s| s.offline);
    let id = files
        .source
        .split_once('@')
        .map_or(&*files.source, |(id, _)| id);
    Some(fetch::resolution(id, f, offline))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::ColorChoice::{Always, Auto, Never};

    #[test]
    fn colour_follows_the_flag_then_no_color_then_the_terminal() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                vars.iter()
                    .find(|(name, _)| *name == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert!(color_wanted(Always, false, env(&[("NO_COLOR", "1")])));
        assert!(!color_wanted(Never, true, env(&[("FORCE_COLOR", "1")])));
        assert!(color_wanted(Auto, true, env(&[])));
        assert!(!color_wanted(Auto, false, env(&[])));
        assert!(!color_wanted(Auto, true, env(&[("NO_COLOR", "1")])));
        // no-color.org: any non-empty value disables, an empty one does not.
        assert!(!color_wanted(Auto, true, env(&[("NO_COLOR", "0")])));
        assert!(color_wanted(Auto, true, env(&[("NO_COLOR", "")])));
        assert!(!color_wanted(Auto, true, env(&[("TERM", "dumb")])));
        assert!(color_wanted(Auto, false, env(&[("FORCE_COLOR", "1")])));
        assert!(!color_wanted(Auto, true, env(&[("FORCE_COLOR", "0")])));
        assert!(!color_wanted(
            Auto,
            false,
            env(&[("FORCE_COLOR", "1"), ("NO_COLOR", "1")])
        ));
    }
}
