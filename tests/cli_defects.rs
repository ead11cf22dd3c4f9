//! The sharp edges a newcomer hit (issue 10): each test pins the behaviour that replaced one.

mod common;

use assert_cmd::Command;
use serde_json::{Value as Json, json};

const NOW: &str = "2026-01-15T10:00:00";

fn kvaudit() -> Command {
    let mut cmd = Command::cargo_bin("kvaudit").unwrap();
    cmd.env("NO_COLOR", "1")
        .env_remove("HF_HUB_OFFLINE")
        .env_remove("FORCE_COLOR")
        .current_dir(common::repo_root());
    cmd
}

fn model(name: &str) -> String {
    format!("fixtures/models/{name}")
}

fn stdout(out: &assert_cmd::assert::Assert) -> String {
    String::from_utf8(out.get_output().stdout.clone()).unwrap()
}

fn stderr(out: &assert_cmd::assert::Assert) -> String {
    String::from_utf8(out.get_output().stderr.clone()).unwrap()
}

fn quick_json(extra: &[&str], code: i32) -> Json {
    let out = kvaudit()
        .args(["diff-turns", "--model", &model("tiny-plain")])
        .args([
            "--user",
            "What is a thread?",
            "--reply",
            "A unit of execution.",
        ])
        .args(["--follow-up", "Thanks."])
        .args(extra)
        .args(["--format", "json", "--now", NOW])
        .assert()
        .code(code);
    serde_json::from_slice(&out.get_output().stdout).unwrap()
}

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

// 11: a partial --decider keeps the documented default of the setting left out.
#[test]
fn partial_decider_keeps_the_other_default() {
    let rule = |decider: &str| {
        let v = quick_json(&["--decider", decider], 0);
        v["conversations"][0]["transitions"][0]["router"]["decider"]["rule"]
            .as_str()
            .unwrap()
            .to_string()
    };
    // The prompt is a few dozen tokens: at least 10, far below 512 and 1024.
    assert_eq!(
        rule("prompt-tokens=10"),
        "prompt shorter than non_cached_tokens"
    );
    assert_eq!(
        rule("non-cached-tokens=4"),
        "prompt shorter than prompt_tokens"
    );
    assert_eq!(
        rule("non-cached-tokens=0"),
        "non_cached_tokens is 0 (decider disabled)"
    );
    assert_eq!(
        rule("non-cached-tokens=4,prompt-tokens=0"),
        "uncached tokens at or above non_cached_tokens"
    );
}

fn keys_of(extra: &[&str]) -> Json {
    let out = kvaudit()
        .args(["keys", "--model", &model("tiny-plain")])
        .args(["--user", "Hi there, how are you?", "--reply", "Fine, thanks."])
        .args(["--follow-up", "Good."])
        .args(["--index-block-size", "4", "--format", "json"])
        .args(extra)
        .assert()
        .code(0);
    serde_json::from_slice(&out.get_output().stdout).unwrap()
}

// 18: --now takes a zone and renders the wall clock at that offset (not UTC).
#[test]
fn now_with_a_zone_is_the_wall_clock_at_that_offset() {
    let dated = ["--template", "fixtures/templates/dated.jinja", "--now"];
    let keys = |now: &str| {
        let mut args = dated.to_vec();
        args.push(now);
        keys_of(&args)["sequences"].clone()
    };
    let local = keys("2026-01-16T00:30:00");
    assert_eq!(keys("2026-01-16T00:30:00+02:00"), local);
    assert_eq!(keys("2026-01-16T00:30:00Z"), local);
    // The same instant in UTC is the day before: a different date in the prompt.
    assert_ne!(keys("2026-01-15T22:30:00"), local);
    let bad = kvaudit()
        .args(["diff-turns", "--model", &model("tiny-plain"), "--now"])
        .arg("2026-01-16T00:30:00 CET")
        .assert()
        .code(2);
    assert!(stderr(&bad).contains("+02:00"), "{}", stderr(&bad));
}
