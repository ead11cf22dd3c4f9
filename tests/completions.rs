//! The shell completions in completions/ are generated from the CLI definition; this keeps
//! them current (regenerate with KVAUDIT_UPDATE_COMPLETIONS=1 cargo test --test completions).

mod common;

use clap::CommandFactory;
use clap_complete::{Shell, generate};
use kvaudit::cli::Cli;

#[test]
fn completions_match_the_cli() {
    let dir = common::repo_root().join("completions");
    let update = std::env::var("KVAUDIT_UPDATE_COMPLETIONS").is_ok_and(|v| v == "1");
    for (shell, file) in [
        (Shell::Bash, "kvaudit.bash"),
        (Shell::Zsh, "_kvaudit"),
        (Shell::Fish, "kvaudit.fish"),
    ] {
        let mut out = Vec::new();
        generate(shell, &mut Cli::command(), "kvaudit", &mut out);
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("replay")
                && text.contains("index-block-size")
                && text.contains("baseline-template"),
            "{file}"
        );
        let path = dir.join(file);
        if update {
            std::fs::write(&path, &text).unwrap();
            continue;
        }
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            on_disk == text,
            "completions/{file} is stale: run KVAUDIT_UPDATE_COMPLETIONS=1 cargo test --test completions"
        );
    }
}

/// The man page (completions/kvaudit.1) is generated with clap_mangen from the same
/// definition (regenerate with KVAUDIT_UPDATE_COMPLETIONS=1 cargo test --test completions).
#[test]
fn man_page_matches_the_cli() {
    let mut out = Vec::new();
    clap_mangen::Man::new(Cli::command())
        .render(&mut out)
        .unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.contains(".TH kvaudit") && text.contains("check"),
        "{text}"
    );
    let path = common::repo_root().join("completions/kvaudit.1");
    if std::env::var("KVAUDIT_UPDATE_COMPLETIONS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &text).unwrap();
    }
    assert!(
        std::fs::read_to_string(&path).unwrap_or_default() == text,
        "completions/kvaudit.1 is stale: run KVAUDIT_UPDATE_COMPLETIONS=1 cargo test --test completions"
    );
}

/// `kvaudit completions SHELL` prints the committed script.
#[test]
fn completions_subcommand_prints_the_committed_script() {
    let out = assert_cmd::Command::cargo_bin("kvaudit")
        .unwrap()
        .args(["completions", "bash"])
        .assert()
        .code(0);
    let on_disk =
        std::fs::read_to_string(common::repo_root().join("completions/kvaudit.bash")).unwrap();
    assert_eq!(String::from_utf8_lossy(&out.get_output().stdout), on_disk);
}
