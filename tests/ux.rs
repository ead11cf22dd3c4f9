//! diff-turns as a user meets it: output that fits the terminal, a summary, `--only-rewrites`,
//! `--quiet`, carrying on past a bad conversation, the template that actually rendered, and
//! the two sides of a divergence shown as they are.

use crate::common::kvaudit;

use assert_cmd::Command;
use serde_json::{Value as Json, json};

const NOW: &str = "2026-01-15T10:00:00";

fn run(cmd: &mut Command, code: i32) -> (String, String) {
    let out = cmd.assert().code(code);
    let o = out.get_output();
    (
        String::from_utf8(o.stdout.clone()).unwrap(),
        String::from_utf8(o.stderr.clone()).unwrap(),
    )
}

fn width(s: &str) -> usize {
    s.lines().map(|l| l.chars().count()).max().unwrap_or(0)
}

/// A Qwen-style exchange on tiny-think with the router view on: the longest lines kvaudit
/// prints (token rows, the router line, the note).
const EXCHANGE: &[&str] = &[
    "diff-turns",
    "--model",
    "fixtures/models/tiny-think",
    "--now",
    NOW,
    "--user",
    "What is a thread? Please explain it in detail with examples of how threads share memory.",
    "--reply",
    "A thread is a unit of execution inside a process; threads of one process share its memory.",
    "--reasoning",
    "Define it, then contrast with processes.",
    "--follow-up",
    "Thanks, makes sense.",
    "--block-sizes",
    "4,8,16,32,64,128,256",
];

#[test]
fn human_output_follows_the_terminal_width() {
    for columns in [80usize, 200] {
        let (out, _) = run(
            kvaudit().args(EXCHANGE).env("COLUMNS", columns.to_string()),
            1,
        );
        assert!(width(&out) <= columns, "wider than {columns}:\n{out}");
        insta::assert_snapshot!(format!("exchange_{columns}_columns"), out);
    }
    // Not a terminal and no COLUMNS: 80.
    let (out, _) = run(kvaudit().args(EXCHANGE).env_remove("COLUMNS"), 1);
    assert!(width(&out) <= 80, "{out}");
    // JSON is never wrapped.
    let (json, _) = run(
        kvaudit()
            .args(EXCHANGE)
            .args(["--format", "json"])
            .env("COLUMNS", "40"),
        1,
    );
    let v: Json = serde_json::from_str(&json).unwrap();
    assert!(v["model"]["template_sha256"].as_str().unwrap().len() == 64);
}

#[test]
fn help_is_wrapped_to_the_width() {
    for columns in [80usize, 200] {
        let (out, _) = run(
            kvaudit()
                .args(["diff-turns", "--help"])
                .env("COLUMNS", columns.to_string()),
            0,
        );
        assert!(width(&out) <= columns, "{out}");
    }
}

#[test]
fn quiet_prints_nothing_and_keeps_the_exit_code() {
    let (out, err) = run(kvaudit().args(EXCHANGE).arg("--quiet"), 1);
    assert_eq!(out, "");
    assert_eq!(err, "");
    let (out, _) = run(
        kvaudit().args(["-q", "diff-turns", "--model", "fixtures/models/tiny-plain"]),
        0,
    );
    assert_eq!(out, "");
    // Errors still reach stderr.
    let (out, err) = run(
        kvaudit().args(["-q", "diff-turns", "--model", "no/such/dir"]),
        2,
    );
    assert_eq!(out, "");
    assert!(err.starts_with("error: "), "{err}");
}

fn conversation(dir: &tempfile::TempDir, name: &str, v: &Json) -> String {
    let p = dir.path().join(name);
    std::fs::write(&p, v.to_string()).unwrap();
    p.display().to_string()
}

fn exchange(follow_up: Json) -> Json {
    json!({"messages": [
        {"role": "user", "content": "What is a thread?"},
        {"role": "assistant", "content": "A thread is a unit of execution."},
        {"role": "user", "content": follow_up},
    ]})
}

#[test]
fn a_bad_conversation_does_not_hide_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let good = conversation(&dir, "good.json", &exchange(json!("Thanks.")));
    // tiny-think concatenates content with `+`: a list content makes the template fail.
    let bad = conversation(&dir, "bad.json", &exchange(json!([1, 2])));
    let also = conversation(&dir, "also.json", &exchange(json!("And a process?")));
    let args = [
        "diff-turns",
        "--model",
        "fixtures/models/tiny-think",
        "-c",
        &good,
        "-c",
        &bad,
        "-c",
        &also,
    ];
    let (out, err) = run(kvaudit().args(args), 2);
    assert!(
        out.contains("good.json") && out.contains("also.json"),
        "{out}"
    );
    assert!(out.contains("error: ") && out.contains("bad.json"), "{out}");
    assert!(out.contains("rendering prompt 2"), "{out}");
    assert!(
        out.contains("verdict: 1 conversation could not be audited (exit 2)"),
        "{out}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: 1 of 3 conversations could not be audited"),
        "{err}"
    );
    let (json, _) = run(kvaudit().args(args).args(["--format", "json"]), 2);
    let v: Json = serde_json::from_str(&json).unwrap();
    assert_eq!(v["conversations"].as_array().unwrap().len(), 2);
    assert_eq!(v["errors"].as_array().unwrap().len(), 1);
    assert_eq!(v["errors"][0]["source"], bad.as_str());
    let why = v["errors"][0]["error"].as_str().unwrap();
    // The failing expression is quoted from the template, not only its line number.
    assert!(
        why.contains("at `") && why.contains("message.content"),
        "{why}"
    );
}

#[test]
fn the_template_that_rendered_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let mut with_tools = exchange(json!("Thanks."));
    with_tools["tools"] =
        json!([{"type": "function", "function": {"name": "get_time", "parameters": {}}}]);
    let tools = conversation(&dir, "tools.json", &with_tools);
    let plain = conversation(&dir, "plain.json", &exchange(json!("Thanks.")));
    let args = [
        "diff-turns",
        "--model",
        "fixtures/models/tiny-tools",
        "-c",
        &tools,
        "-c",
        &plain,
    ];
    let (json, _) = run(kvaudit().args(args).args(["--format", "json"]), 0);
    let v: Json = serde_json::from_str(&json).unwrap();
    // Both rendered, so the model's line names both; each conversation names its own.
    assert_eq!(
        v["model"]["template"],
        "tokenizer_config.json#default, tokenizer_config.json#tool_use"
    );
    assert_eq!(
        v["conversations"][0]["template"],
        "tokenizer_config.json#tool_use"
    );
    assert_eq!(
        v["conversations"][1]["template"],
        "tokenizer_config.json#default"
    );
    let (out, _) = run(kvaudit().args(args), 0);
    assert!(
        out.contains("tools.json  (template tokenizer_config.json#tool_use)"),
        "{out}"
    );
}

#[test]
fn only_rewrites_hides_extending_transitions_but_counts_them() {
    let dir = tempfile::tempdir().unwrap();
    let conv = json!({"messages": [
        {"role": "user", "content": "What is a thread?"},
        {"role": "assistant", "content": "<think>Define it.</think>A thread is a unit of execution."},
        {"role": "user", "content": "And a process?"},
        // Generated exactly as history renders it: this transition extends.
        {"role": "assistant", "content": "A process owns memory.", "generated": "A process owns memory."},
        {"role": "user", "content": "Thanks."},
    ]});
    let file = conversation(&dir, "two.json", &conv);
    let args = [
        "diff-turns",
        "--model",
        "fixtures/models/tiny-think",
        "-c",
        &file,
    ];
    let (all, _) = run(kvaudit().args(args), 1);
    assert!(
        all.contains("turn 1 -> 2") && all.contains("turn 2 -> 3: held"),
        "{all}"
    );
    let (only, _) = run(kvaudit().args(args).arg("--only-rewrites"), 1);
    assert!(only.contains("turn 1 -> 2: held"), "{only}");
    assert!(!only.contains("turn 2 -> 3: held"), "{only}");
    let summary = |s: &str| s[s.find("summary:").unwrap()..].to_string();
    assert_eq!(summary(&all), summary(&only));
    let words = summary(&only)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        words.starts_with(
            "summary: 1 conversation, 2 transitions: 1 rewrite point (1 reasoning_dropped), 1 extends"
        ),
        "{only}"
    );
}

#[test]
fn the_divergence_shows_both_sides_as_they_are() {
    // Thinking off: the generation prompt pre-fills an empty think block that history never
    // repeats. The held side goes on with that block, the next side with the reply.
    let (out, _) = run(
        kvaudit().args([
            "diff-turns",
            "--model",
            "fixtures/models/tiny-think",
            "--template-kwarg",
            "enable_thinking=false",
            "--user",
            "What is a thread?",
            "--reply",
            "A thread is a unit of execution.",
            "--follow-up",
            "Thanks.",
        ]),
        1,
    );
    let line = |prefix: &str| {
        out.lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} in {out}"))
            .to_string()
    };
    assert!(
        line("  - held    ").starts_with("  - held    <think>·3 "),
        "{out}"
    );
    assert!(
        line("  + next    ").starts_with("  + next    A·37  thread·288"),
        "{out}"
    );
    assert!(!out.contains("same"), "no re-aligned rows: {out}");
}

#[test]
fn the_header_names_a_server_profile_other_than_transformers() {
    let args = ["diff-turns", "--model", "fixtures/models/tiny-plain"];
    let (out, _) = run(kvaudit().args(args), 0);
    assert!(
        out.starts_with("model fixtures/models/tiny-plain  template "),
        "{out}"
    );
    let (out, _) = run(kvaudit().args(args).args(["--server", "vllm"]), 0);
    assert!(
        out.starts_with("model fixtures/models/tiny-plain  server vllm@0.32  template"),
        "{out}"
    );
}
