//! The shell completions in completions/ are generated from the CLI definition; this keeps
//! them current (regenerate with KVAUDIT_UPDATE_COMPLETIONS=1 cargo test --test integration completions::).

use crate::common;

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
            // Whole or not at all, as every file kvaudit writes.
            kvaudit::output::write(&path, text.as_bytes()).unwrap();
            continue;
        }
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            on_disk == text,
            "completions/{file} is stale: run KVAUDIT_UPDATE_COMPLETIONS=1 cargo test --test integration completions::"
        );
    }
}

/// The man pages (completions/kvaudit.1 and one per subcommand, kvaudit-check.1, ...) are
/// generated with clap_mangen from the same definition (regenerate with
/// KVAUDIT_UPDATE_COMPLETIONS=1 cargo test --test integration completions::); a page for a subcommand that
/// no longer exists is stale too.
#[test]
fn man_pages_match_the_cli() {
    let generated = tempfile::tempdir().unwrap();
    clap_mangen::generate_to(Cli::command(), generated.path()).unwrap();
    let pages = |dir: &std::path::Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("kvaudit") && n.ends_with(".1"))
            .collect();
        names.sort();
        names
    };
    let want = pages(generated.path());
    let subcommands: Vec<String> = Cli::command()
        .get_subcommands()
        .map(|s| format!("kvaudit-{}.1", s.get_name()))
        .collect();
    assert!(want.contains(&"kvaudit.1".to_string()), "{want:?}");
    for page in &subcommands {
        assert!(want.contains(page), "{page} in {want:?}");
    }
    assert_eq!(want.len(), subcommands.len() + 1, "{want:?}");
    let check =
        std::fs::read_to_string(generated.path().join("kvaudit-check.1")).unwrap_or_default();
    assert!(
        check.contains(".TH kvaudit-check") && check.contains("no\\-remedies"),
        "{check}"
    );
    let dir = common::repo_root().join("completions");
    let update = std::env::var("KVAUDIT_UPDATE_COMPLETIONS").is_ok_and(|v| v == "1");
    if update {
        for stale in pages(&dir).iter().filter(|p| !want.contains(p)) {
            std::fs::remove_file(dir.join(stale)).unwrap();
        }
    }
    for page in &want {
        let text = std::fs::read_to_string(generated.path().join(page)).unwrap();
        if update {
            kvaudit::output::write(&dir.join(page), text.as_bytes()).unwrap();
        }
        assert!(
            std::fs::read_to_string(dir.join(page)).unwrap_or_default() == text,
            "completions/{page} is stale: run KVAUDIT_UPDATE_COMPLETIONS=1 cargo test --test integration completions::"
        );
    }
    assert_eq!(
        pages(&dir),
        want,
        "completions/ has man pages of no subcommand: run KVAUDIT_UPDATE_COMPLETIONS=1 cargo test --test integration completions::"
    );
}

/// `kvaudit completions SHELL` prints the committed script.
#[test]
fn completions_subcommand_prints_the_committed_script() {
    let out = common::kvaudit()
        .args(["completions", "bash"])
        .assert()
        .code(0);
    let on_disk =
        std::fs::read_to_string(common::repo_root().join("completions/kvaudit.bash")).unwrap();
    assert_eq!(String::from_utf8_lossy(&out.get_output().stdout), on_disk);
}
