//! Output formats. Reports are built as strings; only the command layer prints them.

pub mod diff_turns;
pub mod replay;
