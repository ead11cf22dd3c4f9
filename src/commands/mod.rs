//! One thin file per subcommand: parse-level values in, a report and an outcome out.

pub mod capture;
pub mod diff_turns;
pub mod fetch;
pub mod keys;
pub mod replay;

/// What a command found; main maps it to the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Clean,
    Findings,
}

/// llm-d's index settings from the flags diff-turns, replay, capture and keys share.
pub(crate) fn index_config(
    args: &crate::cli::IndexArgs,
    block_size: usize,
) -> crate::index::IndexConfig {
    use crate::cli::{HashArg, ProfileArg};
    let mut cfg = crate::index::IndexConfig::new(block_size);
    cfg.algo = match args.hash {
        HashArg::CborFnv => crate::index::HashAlgo::CborFnv,
        HashArg::Xxh64 => crate::index::HashAlgo::Xxh64,
    };
    cfg.seed = args.hash_seed.clone();
    cfg.model_name = args.model_name.clone();
    cfg.profile = match args.llmd_profile {
        ProfileArg::DigestFirst => crate::index::Profile::DigestFirst,
        ProfileArg::Router202608 => crate::index::Profile::Router202608,
    };
    cfg
}
