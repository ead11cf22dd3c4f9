//! kvaudit: where chat templates and KV-cache routing lose prefix reuse between chat turns.

pub mod align;
pub mod audit;
pub mod cli;
pub mod commands;
pub mod model;
pub mod render;
pub mod report;
pub mod tokenize;
