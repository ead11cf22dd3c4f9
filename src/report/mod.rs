//! Output formats. Reports are built as strings; only the command layer prints them.

pub mod capture;
pub mod diff_turns;
pub mod keys;
pub mod replay;
