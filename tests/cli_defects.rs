//! The sharp edges a newcomer hit (issue 10): each test pins the behaviour that replaced one.

mod common;

use assert_cmd::Command;
use serde_json::Value as Json;

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
        .args([
            "--user",
            "Hi there, how are you?",
            "--reply",
            "Fine, thanks.",
        ])
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

const CONVERSATION: &str = r#"{"messages": [
    {"role": "user", "content": "What is a thread?"},
    {"role": "assistant", "content": "A unit of execution."},
    {"role": "user", "content": "Thanks."}
]}"#;

// 6: `-c -` reads the conversation from standard input, bounded like a file.
#[test]
fn conversation_from_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(&dir, "c.json", CONVERSATION);
    let run = |args: &[&str], stdin: &str| {
        let out = kvaudit()
            .args(["diff-turns", "--model", &model("tiny-plain"), "--now", NOW])
            .args(["--format", "json"])
            .args(args)
            .write_stdin(stdin)
            .assert()
            .code(0);
        serde_json::from_slice::<Json>(&out.get_output().stdout).unwrap()
    };
    let from_file = run(&["-c", &file], "");
    let from_stdin = run(&["-c", "-"], CONVERSATION);
    assert_eq!(from_stdin["conversations"][0]["source"], "stdin");
    assert_eq!(
        from_stdin["conversations"][0]["transitions"],
        from_file["conversations"][0]["transitions"]
    );
    // Mixed with files, in order.
    let both = run(&["-c", &file, "-c", "-"], CONVERSATION);
    assert_eq!(both["conversations"][1]["source"], "stdin");
    // Past the 8 MiB file limit, refused like a file.
    let huge = format!("[{}]", " ".repeat(9 << 20));
    let out = kvaudit()
        .args(["diff-turns", "--model", &model("tiny-plain"), "-c", "-"])
        .write_stdin(huge)
        .assert()
        .code(2);
    assert_eq!(
        stderr(&out),
        "error: cannot read conversation stdin: more than the 8 MiB limit\n"
    );
    let out = kvaudit()
        .args([
            "diff-turns",
            "--model",
            &model("tiny-plain"),
            "-c",
            "-",
            "-c",
            "-",
        ])
        .assert()
        .code(2);
    assert!(
        stderr(&out).contains("can be given once"),
        "{}",
        stderr(&out)
    );
}

// 15: a misspelt key is a shape error with a suggestion, not "not valid JSON"; a bare message
// array is a conversation.
#[test]
fn structural_errors_and_bare_message_arrays() {
    let dir = tempfile::tempdir().unwrap();
    let misspelt = write(
        &dir,
        "m.json",
        r#"{"messages": [{"role": "user", "content": "hi"}], "template_kwarg": {}}"#,
    );
    let out = kvaudit()
        .args([
            "diff-turns",
            "--model",
            &model("tiny-plain"),
            "-c",
            &misspelt,
        ])
        .assert()
        .code(2);
    assert_eq!(
        stderr(&out),
        format!(
            "error: {misspelt} is not a conversation: unknown field `template_kwarg` \
             (did you mean `template_kwargs`?)\n"
        )
    );
    let v: Json = serde_json::from_str(CONVERSATION).unwrap();
    let bare = write(&dir, "bare.json", &v["messages"].to_string());
    let object = write(&dir, "object.json", CONVERSATION);
    let run = |file: &str| {
        let out = kvaudit()
            .args(["diff-turns", "--model", &model("tiny-plain"), "-c", file])
            .args(["--now", NOW, "--format", "json"])
            .assert()
            .code(0);
        serde_json::from_slice::<Json>(&out.get_output().stdout).unwrap()["conversations"][0]
            ["transitions"]
            .clone()
    };
    assert_eq!(run(&bare), run(&object));
    assert!(run(&bare).as_array().is_some_and(|t| t.len() == 1));
}

// 12: keys names the model it hashes and where the name came from, labels every sequence
// and block, says which tokens get no key, and never prints nothing with exit 0.
#[test]
fn keys_name_their_model_and_label_their_blocks() {
    // A local directory without a declared name needs --model-name.
    let out = kvaudit()
        .args(["keys", "--model", &model("tiny-plain"), "--now", NOW])
        .assert()
        .code(2);
    assert!(
        stderr(&out).starts_with("error: --model-name is needed")
            && stderr(&out).contains("_name_or_path"),
        "{}",
        stderr(&out)
    );
    // With config.json's `_name_or_path` (as save_pretrained writes it), that name is used:
    // the same keys as --model-name with that name, never the directory path.
    let dir = tempfile::tempdir().unwrap();
    for f in ["tokenizer.json", "tokenizer_config.json"] {
        std::fs::copy(
            common::fixtures().join("models/tiny-plain").join(f),
            dir.path().join(f),
        )
        .unwrap();
    }
    std::fs::write(
        dir.path().join("config.json"),
        r#"{"_name_or_path": "Org/tiny-chat", "model_type": "qwen3"}"#,
    )
    .unwrap();
    let keys = |args: &[&str]| {
        let out = kvaudit()
            .args(["keys", "--now", NOW, "--index-block-size", "8"])
            .args(["--user", "What is a thread?", "--reply", "A unit."])
            .args(["--follow-up", "Thanks."])
            .args(args)
            .assert()
            .code(0);
        stdout(&out)
    };
    let shown = dir.path().display().to_string();
    let declared = keys(&["--model", &shown, "--format", "json"]);
    let v: Json = serde_json::from_str(&declared).unwrap();
    assert_eq!(v["model_name"], "Org/tiny-chat");
    assert_eq!(v["model_name_from"], "`_name_or_path` in config.json");
    let named = keys(&[
        "--model",
        &shown,
        "--model-name",
        "Org/tiny-chat",
        "--format",
        "json",
    ]);
    let w: Json = serde_json::from_str(&named).unwrap();
    assert_eq!(v["sequences"], w["sequences"]);
    assert_eq!(w["model_name_from"], "--model-name");
    let human = keys(&["--model", &shown]);
    insta::assert_snapshot!("keys_labelled", human);

    // Too few tokens for one block: an error, not empty output.
    let out = kvaudit()
        .args(["keys", "--tokens", "1,2", "--index-block-size", "4"])
        .args(["--model-name", "m"])
        .assert()
        .code(2);
    assert_eq!(stdout(&out), "");
    assert_eq!(
        stderr(&out),
        "error: no keys: llm-d keys whole 4-token blocks only, and the longest sequence has 2 \
         tokens (lower --index-block-size or give more tokens)\n"
    );
}
