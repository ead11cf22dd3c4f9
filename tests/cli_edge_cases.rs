//! The sharp edges a newcomer hit (issue 10): each test pins the behaviour that replaced one.

use crate::common::{self, kvaudit};

use serde_json::Value as Json;

const NOW: &str = "2026-01-15T10:00:00";

fn model(name: &str) -> String {
    format!("fixtures/models/{name}")
}

fn stdout(out: &assert_cmd::assert::Assert) -> String {
    String::from_utf8(out.get_output().stdout.clone()).unwrap()
}

fn stderr(out: &assert_cmd::assert::Assert) -> String {
    String::from_utf8(out.get_output().stderr.clone()).unwrap()
}

/// `diff-turns` of the tiny model on a quick-form exchange, with `extra` flags.
fn quick_run(extra: &[&str], code: i32) -> assert_cmd::assert::Assert {
    kvaudit()
        .args(["diff-turns", "--model", &model("tiny-plain")])
        .args([
            "--user",
            "What is a thread?",
            "--reply",
            "A unit of execution.",
        ])
        .args(extra)
        .assert()
        .code(code)
}

fn quick_json(extra: &[&str], code: i32) -> Json {
    let mut args = vec!["--follow-up", "Thanks."];
    args.extend_from_slice(extra);
    args.extend(["--format", "json", "--now", NOW]);
    let out = quick_run(&args, code);
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
        .args([
            "--index-block-size",
            "4",
            "--format",
            "json",
            "--model-name",
            "m",
        ])
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
         tokens (lower --block-sizes or give more tokens)\n"
    );
}

// 16: a file that is not a capture is one error (not a zero report plus the error twice); an
// empty capture warns and exits 1; the exit codes are in --help.
#[test]
fn replay_of_non_captures_and_empty_captures() {
    let dir = tempfile::tempdir().unwrap();
    let truth = write(&dir, "s1.json", r#"{"events": [], "expected": {}}"#);
    let out = kvaudit().args(["replay", &truth]).assert().code(2);
    assert_eq!(stdout(&out), "");
    assert_eq!(
        stderr(&out),
        format!(
            "error: {truth} is JSON text, not a capture (replay reads `.frames` captures, as \
             `kvaudit capture` writes them, and raw msgpack event batches)\n"
        )
    );
    // Another kind of file: where decoding stopped.
    let log = write(&dir, "vllm.log", "INFO starting the engine\n");
    let out = kvaudit().args(["replay", &log]).assert().code(2);
    assert_eq!(
        stderr(&out),
        format!(
            "error: {log}: byte 0: event batch must be an array or a map, found int: nothing \
             in it decodes as KV events (replay reads `.frames` captures, as `kvaudit capture` \
             writes them, and raw msgpack event batches)\n"
        )
    );
    // Machine formats keep their document, with the error in it; stderr has the one line.
    let out = kvaudit()
        .args(["replay", &truth, "--format", "json"])
        .assert()
        .code(2);
    let v: Json = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["input"]["error"]["offset"], 0);
    assert_eq!(stderr(&out).lines().count(), 1);
    let empty = write(&dir, "empty.frames", "");
    let out = kvaudit().args(["replay", &empty]).assert().code(1);
    assert!(stdout(&out).contains("0 messages"), "{}", stdout(&out));
    assert_eq!(
        stderr(&out),
        format!("warning: {empty} holds no messages: nothing was checked (exit code 1)\n")
    );
    let out = kvaudit()
        .args(["replay", "-"])
        .write_stdin("")
        .assert()
        .code(1);
    assert!(stderr(&out).contains("holds no messages"));
    // Bad bytes after good messages: the counts on stdout, the reason once, on stderr.
    let mut cut = common::event_fixtures::seed_capture(80, 64);
    let good = cut.len();
    cut.extend_from_slice(&[0, 0, 0, 3, b'k', b'v', b'@']);
    let cut = {
        let path = dir.path().join("cut.frames");
        std::fs::write(&path, &cut).unwrap();
        path.display().to_string()
    };
    let out = kvaudit().args(["replay", &cut]).assert().code(2);
    let (o, e) = (stdout(&out), stderr(&out));
    let at = good + 7;
    assert!(o.contains(&format!("stopped early at byte {at} (")), "{o}");
    assert_eq!(
        e,
        format!(
            "error: {cut}: byte {at}: truncated frame: sequence number needs 8 bytes, 0 left; \
             --keep-going counts such messages and goes on where the framing allows\n"
        )
    );
    assert!(!o.contains("truncated"), "{o}");
    // Exit codes are documented where users look.
    let help = kvaudit().args(["replay", "--help"]).assert().code(0);
    let help = stdout(&help);
    assert!(help.contains("Exit codes:") && help.contains("a capture with no messages"));
    let guide = std::fs::read_to_string(common::repo_root().join("docs/events.md")).unwrap();
    assert!(guide.contains("and for a capture with no messages"));
}

// 19: --color always colours replay and keys too; NO_COLOR only counts when non-empty.
#[test]
fn color_always_reaches_replay_and_keys() {
    let dir = tempfile::tempdir().unwrap();
    let capture = dir.path().join("c.frames");
    std::fs::write(&capture, common::event_fixtures::seed_capture(80, 64)).unwrap();
    let capture = capture.display().to_string();
    let replay = |args: &[&str], env: &[(&str, &str)]| {
        let out = kvaudit()
            .args(["replay", &capture])
            .args(args)
            .envs(env.iter().copied())
            .assert()
            .code(1);
        stdout(&out)
    };
    let keys = |args: &[&str], env: &[(&str, &str)]| {
        let out = kvaudit()
            .args(["keys", "--tokens", "1,2,3,4", "--index-block-size", "2"])
            .args(["--model-name", "m"])
            .args(args)
            .envs(env.iter().copied())
            .assert()
            .code(0);
        stdout(&out)
    };
    const ESC: &str = "\x1b[";
    for out in [
        replay(&["--color", "always"], &[]),
        keys(&["--color", "always"], &[]),
        // An empty NO_COLOR is not set (no-color.org); FORCE_COLOR stands in for a terminal.
        replay(&[], &[("NO_COLOR", ""), ("FORCE_COLOR", "1")]),
        keys(&[], &[("NO_COLOR", ""), ("FORCE_COLOR", "1")]),
    ] {
        assert!(out.contains(ESC), "{out}");
    }
    for out in [
        replay(&[], &[]),
        keys(&[], &[]),
        replay(&[], &[("NO_COLOR", "1"), ("FORCE_COLOR", "1")]),
        keys(&["--color", "never"], &[("FORCE_COLOR", "1")]),
    ] {
        assert!(!out.contains(ESC), "{out}");
    }
    // Colour never reaches JSON.
    let json = kvaudit()
        .args(["replay", &capture, "--format", "json", "--color", "always"])
        .assert()
        .code(1);
    assert!(!stdout(&json).contains(ESC));
}

// 22: the install instructions say what the build needs: the Rust version Cargo.toml
// declares, and a C compiler whenever a dependency builds C through the `cc` crate.
#[test]
fn install_instructions_match_the_build() {
    let root = common::repo_root();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let install = readme
        .split("## Install")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("README has an Install section");
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let rust_version = manifest
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = "))
        .unwrap()
        .trim_matches('"');
    assert!(
        install.contains(&format!("Rust toolchain ({rust_version} or newer")),
        "{install}"
    );
    let lock = std::fs::read_to_string(root.join("Cargo.lock")).unwrap();
    if lock.contains("\nname = \"cc\"\n") {
        assert!(install.contains("C compiler"), "{install}");
        assert!(!install.contains("no C or C++ libraries, no Python"));
    }
}

// 14: sampled ids that decode to another text are an error, not "retokenized" drift.
#[test]
fn generated_ids_must_decode_to_the_reply() {
    let tok = kvaudit::tokenize::Tokenizer::from_file(
        &common::fixtures().join("models/tiny-plain/tokenizer.json"),
    )
    .unwrap();
    let reply = "A thread is a unit of execution.";
    let other = tok.encode("The weather is nice today.").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let conv = |ids: &[u32]| {
        let v = serde_json::json!({"messages": [
            {"role": "user", "content": "What is a thread?"},
            {"role": "assistant", "content": reply, "generated": reply, "generated_ids": ids},
            {"role": "user", "content": "Thanks."}]});
        write(&dir, "c.json", &v.to_string())
    };
    let file = conv(&other);
    let out = kvaudit()
        .args(["diff-turns", "--model", &model("tiny-plain"), "--now", NOW])
        .args(["-c", &file])
        .assert()
        .code(2);
    assert_eq!(stdout(&out), "");
    assert_eq!(
        stderr(&out),
        format!(
            "error: {file}: reply 1: `generated_ids` decode to another text than \
             `generated` (first difference at character 0: the ids give \"The weather is nice \
             toda\", the text has \"A thread is a unit of ex\")\n"
        )
    );
    // The same text in the tokenizer's own ids is fine (no drift, no rewrite).
    let file = conv(&tok.encode(reply).unwrap());
    let out = kvaudit()
        .args(["diff-turns", "--model", &model("tiny-plain"), "--now", NOW])
        .args(["-c", &file, "--format", "json"])
        .assert()
        .code(0);
    let v: Json = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(
        v["conversations"][0]["transitions"][0]["retokenization_drift"],
        Json::Null
    );
}

// 17: Python's True/False/None are booleans and null; a kwarg the template never reads and
// --reasoning under --reply-format plain are warned about instead of dropped in silence.
#[test]
fn silently_ignored_input_is_refused_or_warned() {
    let dir = tempfile::tempdir().unwrap();
    let template = write(
        &dir,
        "t.jinja",
        "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n\
         {% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n\
         {% if enable_thinking %}<think>\n{% endif %}{% endif %}",
    );
    let run = |kwarg: &str, extra: &[&str]| {
        let out = kvaudit()
            .args(["keys", "--model", &model("tiny-plain"), "--model-name", "m"])
            .args(["--template", &template, "--now", NOW, "--format", "json"])
            .args(["--index-block-size", "1"])
            .args(["--user", "What is a thread?", "--reply", "A unit."])
            .args(["--follow-up", "Thanks.", "--template-kwarg", kwarg])
            .args(extra)
            .assert()
            .code(0);
        let v: Json = serde_json::from_slice(&out.get_output().stdout).unwrap();
        (v["sequences"].clone(), stderr(&out))
    };
    let (python_false, warned) = run("enable_thinking=False", &[]);
    assert_eq!(warned, "");
    assert_eq!(python_false, run("enable_thinking=false", &[]).0);
    assert_ne!(python_false, run("enable_thinking=True", &[]).0);
    assert_eq!(python_false, run("enable_thinking=None", &[]).0);
    // The string "False" is truthy in a template: only the JSON string spelling gives it.
    assert_ne!(python_false, run("enable_thinking=\"False\"", &[]).0);

    let (_, warned) = run("enable_thinkng=false", &[]);
    assert_eq!(
        warned,
        "warning: --template-kwarg enable_thinkng=false: the chat template never reads \
         `enable_thinkng` (did you mean `enable_thinking`?); it reads: enable_thinking\n"
    );
    let (_, warned) = run(
        "enable_thinking=true",
        &["--reply-format", "plain", "--reasoning", "Let me think."],
    );
    assert_eq!(
        warned,
        "warning: --reasoning is left out of the reply: --reply-format plain has no reasoning \
         block (drop --reply-format to use the template's own layout)\n"
    );
    // A conversation's own template_kwargs are checked too, in diff-turns as well.
    let conv = write(
        &dir,
        "c.json",
        r#"{"template_kwargs": {"enable_thinking": false, "thinking": true}, "messages": [
            {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"},
            {"role": "user", "content": "Ok"}]}"#,
    );
    let out = kvaudit()
        .args(["diff-turns", "--model", &model("tiny-plain"), "--now", NOW])
        .args(["--template", &template, "-c", &conv])
        .assert()
        .code(1);
    assert_eq!(
        stderr(&out),
        format!(
            "warning: conversation {conv} `template_kwargs`: the chat template never reads \
             `thinking`; it reads: enable_thinking\n"
        )
    );
}

// Issue 41's sharp edges: each says what the input is and what to do instead.

fn one_error(args: &[&str]) -> String {
    let out = kvaudit().args(args).assert().code(2);
    let err = stderr(&out);
    assert!(err.starts_with("error: "), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    err
}

#[test]
fn a_model_that_is_not_there_says_what_is_missing() {
    for (spec, want) in [
        (
            "fixtures/models/tiny-thnik",
            "fixtures/models/tiny-thnik does not exist (did you mean fixtures/models/tiny-think?)",
        ),
        (
            "fixtures/none/such/x",
            "fixtures/none does not exist, and it is not a Hub id",
        ),
        (
            "fixtures/models/model.gguf",
            "fixtures/models/model.gguf does not exist",
        ),
        (
            "Cargo.toml",
            "is a file; kvaudit reads a model directory (holding tokenizer.json and \
             tokenizer_config.json), a GGUF file",
        ),
    ] {
        let err = one_error(&["diff-turns", "--model", spec]);
        assert!(err.contains(want), "{spec}: {err}");
    }
}

#[test]
fn a_corpus_given_as_one_conversation_points_at_kvaudit_corpus() {
    let err = one_error(&[
        "diff-turns",
        "--model",
        &model("tiny-plain"),
        "-c",
        "fixtures/corpus/chats.jsonl",
    ]);
    assert!(
        err.contains("looks like JSON Lines")
            && err.contains("`kvaudit corpus fixtures/corpus/chats.jsonl`"),
        "{err}"
    );
}

#[test]
fn replay_of_a_json_file_says_it_is_json() {
    let err = one_error(&["replay", "fixtures/conversations/tool-loop.json"]);
    assert!(
        err.contains("tool-loop.json is JSON text, not a capture"),
        "{err}"
    );
}

#[test]
fn built_in_follow_ups_are_announced() {
    let err = stderr(&quick_run(&[], 0));
    assert!(
        err.contains("note: no --follow-up given: audited 3 built-in follow-ups"),
        "{err}"
    );
    // With one given, nothing is said.
    let err = stderr(&quick_run(&["--follow-up", "Thanks."], 0));
    assert!(!err.contains("--follow-up"), "{err}");
}

#[test]
fn corpus_reads_a_conversation_file_as_a_corpus_of_one() {
    let out = kvaudit()
        .args([
            "corpus",
            "--model",
            &model("tiny-think"),
            "--format",
            "json",
        ])
        .arg("fixtures/conversations/tool-loop.json")
        .assert()
        .code(1);
    let v: Json = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(v["rows"], 1, "{v}");
    assert_eq!(v["conversations"], 1, "{v}");
    assert_eq!(v["transitions"], 2, "{v}");
    assert_eq!(v["skipped_rows"], serde_json::json!({}), "{v}");
}
