//! kvaudit's integration tests, one test binary (`cargo test --test integration`): each file
//! of tests/ is a module here, so the crate and its dependencies are linked once rather than
//! once per file. Cargo.toml turns off the discovery of tests/*.rs as binaries of their own
//! (`autotests = false`), so a new file counts only once it is listed below (checked by
//! `every_test_file_is_a_module`). Run one file's tests with its module path as the filter:
//! `cargo test --release --test integration -- replay::`.
//!
//! Every test that runs kvaudit builds the command with `common::kvaudit()` (or
//! `common::kvaudit_process()` where a `std::process::Command` is needed), which sets the
//! environment once; insta names snapshots after the module path, so those of a file `NAME.rs`
//! are `tests/snapshots/integration__NAME__*.snap`.

mod common;

mod architecture;
mod capture;
mod check;
mod cli;
mod cli_edge_cases;
mod completions;
mod conformance;
mod corpus;
mod direct_tokenize;
mod events;
mod fetch;
mod findings;
mod fixtures;
mod fuzz_regressions;
mod gaie_real;
mod gguf;
mod hostile;
mod hostile_capture;
mod hostile_files;
mod hostile_limits;
mod hostile_templates;
mod incremental_tokenize;
mod llmd_real;
mod merge;
mod parquet;
mod pgo_profile;
mod probe;
mod ray_example;
mod readme;
mod remedies;
mod render;
mod replay;
mod report_formats;
mod routers;
mod routers_live;
mod server_profiles;
mod sglang_live;
mod tokenizer;
mod ux;
mod vllm_live;
mod watch;
mod watch_live;
mod watch_proxy;

/// Each `tests/NAME.rs` is `mod NAME;` above (a file left out would never be compiled, let
/// alone run), and each snapshot belongs to one of them.
#[test]
fn every_test_file_is_a_module() {
    let tests = common::repo_root().join("tests");
    let main = std::fs::read_to_string(tests.join("integration.rs")).unwrap();
    let declared: Vec<&str> = main
        .lines()
        .filter_map(|l| l.strip_prefix("mod ")?.strip_suffix(';'))
        .collect();
    let mut files: Vec<String> = std::fs::read_dir(&tests)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter_map(|n| n.strip_suffix(".rs").map(String::from))
        .filter(|n| n != "integration")
        .collect();
    files.sort();
    let missing: Vec<&String> = files
        .iter()
        .filter(|f| !declared.contains(&f.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "tests/{{{}}}.rs: not a module of tests/integration.rs",
        missing
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(",")
    );
    for snap in std::fs::read_dir(tests.join("snapshots")).unwrap() {
        let name = snap.unwrap().file_name().to_string_lossy().into_owned();
        let module = name
            .strip_prefix("integration__")
            .and_then(|rest| rest.split("__").next())
            .unwrap_or("");
        assert!(
            files.iter().any(|f| f == module),
            "tests/snapshots/{name} is no snapshot of a module of tests/integration.rs"
        );
    }
}
