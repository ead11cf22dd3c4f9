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
            text.contains("replay") && text.contains("index-block-size"),
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
