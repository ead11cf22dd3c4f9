//! kvaudit: where chat templates and KV-cache routing lose prefix reuse between chat turns.

pub mod align;
pub mod audit;
pub mod capture;
pub mod cli;
pub mod commands;
pub mod corpus;
pub mod error;
pub mod events;
pub mod finding;
pub mod gate;
pub mod input;
pub mod model;
pub mod names;
pub mod output;
pub mod panics;
pub mod probe;
pub mod render;
pub mod replay;
pub mod report;
pub mod routers;
pub mod suggest;
pub mod tally;
pub mod tokenize;
pub mod watch;
