//! One thin file per subcommand: parse-level values in, a report and an outcome out.

pub mod capture;
pub mod check;
pub mod completions;
pub mod diff_turns;
pub mod fetch;
pub mod init;
pub mod keys;
pub mod progress;
pub mod render;
pub mod replay;
pub mod settings;

/// What a command found; main maps it to the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Clean,
    Findings,
}
