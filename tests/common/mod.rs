//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The read-only reference data beside the repository, when it is there. Tests that need it
/// say so and skip when it is absent, unless KVAUDIT_REQUIRE_SHARED=1 (set in CI) makes the
/// absence a failure.
pub fn shared_dir(test: &str) -> Option<PathBuf> {
    let dir = repo_root().join("../shared");
    if dir.join("models").is_dir() {
        return Some(dir);
    }
    if std::env::var("KVAUDIT_REQUIRE_SHARED").is_ok_and(|v| v == "1") {
        panic!("{test}: ../shared is required (KVAUDIT_REQUIRE_SHARED=1) but not found");
    }
    eprintln!("SKIPPED {test}: ../shared (reference models and templates) not found");
    None
}

pub fn fixtures() -> PathBuf {
    repo_root().join("fixtures")
}

/// A deterministic xorshift64 generator (mutation tests: the same cases on every run).
pub fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut state = seed;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}
