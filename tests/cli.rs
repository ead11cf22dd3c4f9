//! End-to-end tests of the kvaudit binary on the project's own small fixtures.

use crate::common::{self, kvaudit};

use kvaudit::tokenize::Tokenizer;
use predicates::prelude::*;
use serde_json::{Value as Json, json};

const NOW: &str = "2026-01-15T10:00:00";

fn model(name: &str) -> String {
    format!("fixtures/models/{name}")
}

fn tiny_tokenizer() -> Tokenizer {
    Tokenizer::from_file(&common::fixtures().join("models/tiny-plain/tokenizer.json")).unwrap()
}

fn json_run(args: &[&str], code: i32) -> Json {
    let out = kvaudit()
        .args(args)
        .args(["--format", "json", "--now", NOW])
        .assert()
        .code(code);
    serde_json::from_slice(&out.get_output().stdout).unwrap()
}

fn write_conversation(dir: &tempfile::TempDir, name: &str, v: &Json) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, serde_json::to_string_pretty(v).unwrap()).unwrap();
    path.display().to_string()
}

#[test]
fn extending_template_counts_uncached_whole_blocks() {
    // tiny-plain writes `<|im_start|>{role}\n{content}<|im_end|>\n` and `<|im_start|>assistant\n`,
    // so the prompts can be written out here and counted with the tokenizer directly.
    let tok = tiny_tokenizer();
    let (q, a, f) = (
        "What is a thread?",
        "A thread is a unit of execution.",
        "Thanks, makes sense.",
    );
    let v = json_run(
        &[
            "diff-turns",
            "--model",
            &model("tiny-plain"),
            "--user",
            q,
            "--reply",
            a,
            "--follow-up",
            f,
            "--block-sizes",
            "1,4,16",
        ],
        0,
    );
    let p1 = format!("<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n");
    let held = tok.encode(&p1).unwrap().len() + tok.encode(a).unwrap().len();
    let next = tok
        .encode(&format!(
            "{p1}{a}<|im_end|>\n<|im_start|>user\n{f}<|im_end|>\n<|im_start|>assistant\n"
        ))
        .unwrap()
        .len();
    let t = &v["conversations"][0]["transitions"][0];
    assert_eq!(t["held_tokens"], held);
    assert_eq!(t["next_prompt_tokens"], next);
    assert_eq!(t["common_prefix_tokens"], held);
    assert_eq!(t["rewrite"], Json::Null);
    let uncached: Vec<(u64, u64)> = t["uncached"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| {
            (
                u["block_size"].as_u64().unwrap(),
                u["tokens"].as_u64().unwrap(),
            )
        })
        .collect();
    let want: Vec<(u64, u64)> = [1usize, 4, 16]
        .iter()
        .map(|&b| (b as u64, (next - held / b * b) as u64))
        .collect();
    assert_eq!(uncached, want);
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["conversations"][0]["source"], "quick:follow-up-1");
}

#[test]
fn dropped_reasoning_and_unreplayed_prefill_are_told_apart() {
    let tok = tiny_tokenizer();
    let header = tok
        .encode("<|im_start|>user\nWhat is the difference between a process and a thread?<|im_end|>\n<|im_start|>assistant\n")
        .unwrap()
        .len();
    // Thinking on: the model's own <think> is the first lost token.
    let v = json_run(&["diff-turns", "--model", &model("tiny-think")], 1);
    for conv in v["conversations"].as_array().unwrap() {
        let r = &conv["transitions"][0]["rewrite"];
        assert_eq!(r["class"], "reasoning_dropped", "{conv}");
        assert_eq!(r["position"], header);
        assert_eq!(r["held"][0]["text"], "<think>");
    }
    assert_eq!(v["conversations"].as_array().unwrap().len(), 3);
    // Thinking off: the template pre-fills an empty think block that history never repeats.
    let v = json_run(
        &[
            "diff-turns",
            "--model",
            &model("tiny-think"),
            "--template-kwarg",
            "enable_thinking=false",
        ],
        1,
    );
    let r = &v["conversations"][0]["transitions"][0]["rewrite"];
    assert_eq!(r["class"], "generation_prefill_not_replayed");
    assert_eq!(r["position"], header);
    assert_eq!(r["next"][0]["text"], "A");
}

#[test]
fn human_report_snapshot() {
    // The snapshot is at 80 columns (what kvaudit gives a pipe when COLUMNS is unset).
    let out = kvaudit()
        .env("COLUMNS", "80")
        .args([
            "diff-turns",
            "--model",
            &model("tiny-think"),
            "--now",
            NOW,
            "--follow-up",
            "Thanks, makes sense.",
        ])
        .args([
            "--user",
            "What is a thread?",
            "--reply",
            "A thread is a unit of execution.",
            "--reasoning",
            "Define it.",
        ])
        .assert()
        .code(1);
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(
        !text.contains('\u{1b}'),
        "no colour when stdout is not a terminal"
    );
    insta::assert_snapshot!("diff_turns_tiny_think", text);
}

#[test]
fn colour_on_request_only() {
    let args = [
        "diff-turns",
        "--model",
        "fixtures/models/tiny-think",
        "--now",
        NOW,
    ];
    let coloured = kvaudit()
        .args(args)
        .args(["--color", "always"])
        .assert()
        .code(1);
    let text = String::from_utf8_lossy(&coloured.get_output().stdout).into_owned();
    assert!(text.contains("\u{1b}["));
    // Long diff lines are cut; a coloured line must still end its colour.
    for line in text.lines().filter(|l| l.starts_with("\u{1b}[3")) {
        assert!(line.ends_with("\u{1b}[39m"), "colour left open: {line:?}");
    }
    let plain = kvaudit()
        .args(args)
        .args(["--color", "never"])
        .assert()
        .code(1);
    assert!(!String::from_utf8_lossy(&plain.get_output().stdout).contains('\u{1b}'));
}

#[test]
fn sampled_ids_report_retokenization_drift() {
    let tok = tiny_tokenizer();
    let reply = "A thread is a unit of execution.";
    let encoded = tok.encode(reply).unwrap();
    // The model sampled " thread" as two tokens where the tokenizer uses one.
    let th = tok.encode(" th").unwrap();
    let read = tok.encode("read").unwrap();
    assert_eq!((th.len(), read.len()), (1, 1), "fixture tokenizer pieces");
    let mut sampled = vec![encoded[0], th[0], read[0]];
    sampled.extend_from_slice(&encoded[2..]);
    assert_eq!(tok.decode(&sampled), reply);
    let dir = tempfile::tempdir().unwrap();
    let conv = write_conversation(
        &dir,
        "drift.json",
        &json!({"messages": [
            {"role": "user", "content": "What is a thread?"},
            {"role": "assistant", "content": reply, "generated": reply, "generated_ids": sampled},
            {"role": "user", "content": "Thanks, makes sense."}]}),
    );
    let v = json_run(
        &["diff-turns", "--model", &model("tiny-plain"), "-c", &conv],
        1,
    );
    let t = &v["conversations"][0]["transitions"][0];
    let prompt = tok
        .encode("<|im_start|>user\nWhat is a thread?<|im_end|>\n<|im_start|>assistant\n")
        .unwrap()
        .len();
    assert_eq!(t["retokenization_drift"]["position"], prompt + 1);
    assert_eq!(t["retokenization_drift"]["sampled"][0]["id"], th[0]);
    assert_eq!(t["retokenization_drift"]["encoded"][0]["id"], encoded[1]);
    // The next prompt is tokenized from text, so it diverges exactly where the sampled ids do.
    assert_eq!(t["rewrite"]["position"], prompt + 1);
    assert_eq!(t["rewrite"]["class"], "retokenized");
    assert_eq!(t["held_tokens"], prompt + sampled.len());
}

#[test]
fn date_rollover_moves_the_divergence_to_the_date() {
    let tok = tiny_tokenizer();
    let v = json_run(
        &[
            "diff-turns",
            "--model",
            &model("tiny-plain"),
            "--template",
            "fixtures/templates/dated.jinja",
            "--date-rollover",
        ],
        1,
    );
    let t = &v["conversations"][0]["transitions"][0];
    assert_eq!(t["rewrite"], Json::Null, "same day: extends");
    let same_until = tok.encode("<|im_start|>system\nToday: 1").unwrap().len();
    assert_eq!(t["date_rollover"]["moved"], true);
    assert_eq!(t["date_rollover"]["class"], "date_changed");
    assert!(t["date_rollover"]["rewrite_position"].as_u64().unwrap() as usize <= same_until);
}

#[test]
fn conversation_files_are_audited_one_by_one() {
    let v = json_run(
        &[
            "diff-turns",
            "--model",
            &model("tiny-think"),
            "-c",
            "fixtures/conversations/tool-loop.json",
            "-c",
            "fixtures/conversations/tool-loop.json",
        ],
        1,
    );
    let convs = v["conversations"].as_array().unwrap();
    assert_eq!(convs.len(), 2);
    assert_eq!(convs[0], convs[1]);
    let t = convs[0]["transitions"].as_array().unwrap();
    assert_eq!(
        (t[0]["from_prompt"].clone(), t[1]["to_prompt"].clone()),
        (json!(1), json!(3))
    );
    assert_eq!(t[0]["rewrite"]["class"], "reasoning_dropped");
    assert_eq!(t[1]["rewrite"]["class"], "reasoning_dropped");
}

fn fails_with(args: &[&str], message: &str) {
    let out = kvaudit().args(args).assert().code(2).stdout("");
    let err = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(err.starts_with("error: "), "{err}");
    assert!(err.contains(message), "expected {message:?} in {err:?}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err:?}");
    assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
        "{err}"
    );
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let tiny = model("tiny-plain");
    fails_with(
        &["diff-turns", "--model", "fixtures/models/nope"],
        "fixtures/models/nope does not exist, and it is not a Hub id",
    );
    fails_with(
        &["diff-turns", "--model", "fixtures/none/such/x"],
        "fixtures/none does not exist, and it is not a Hub id",
    );
    fails_with(
        &[
            "diff-turns",
            "--model",
            &tiny,
            "-c",
            "fixtures/conversations/malformed.json",
        ],
        "line 4 column 26",
    );
    fails_with(
        &[
            "diff-turns",
            "--model",
            &tiny,
            "-c",
            "fixtures/conversations/missing.json",
        ],
        "cannot read conversation",
    );
    fails_with(
        &[
            "diff-turns",
            "--model",
            &tiny,
            "-c",
            "fixtures/conversations/no-assistant.json",
        ],
        "no assistant message",
    );
    fails_with(
        &[
            "diff-turns",
            "--model",
            &tiny,
            "--template",
            "fixtures/templates/raises.jinja",
            "--system",
            "s",
            "--user",
            "u",
            "--reply",
            "r",
        ],
        "raised an exception: System role not supported",
    );
    fails_with(
        &["diff-turns", "--model", &model("bad-special")],
        "sets eos_token to \"<|eot|>\", which is not a token",
    );
    fails_with(
        &[
            "diff-turns",
            "--model",
            &tiny,
            "--template",
            "fixtures/templates/loops.jinja",
        ],
        "ran out of fuel",
    );
    fails_with(
        &["diff-turns", "--model", &tiny, "--now", "yesterday"],
        "--now",
    );
    fails_with(
        &[
            "diff-turns",
            "--model",
            &tiny,
            "--template-kwarg",
            "novalue",
        ],
        "KEY=VALUE",
    );
    fails_with(
        &["diff-turns", "--model", &tiny, "--block-sizes", "0"],
        "--block-sizes",
    );
    fails_with(
        &[
            "diff-turns",
            "--model",
            &tiny,
            "--template",
            "fixtures/templates/none.jinja",
        ],
        "cannot read",
    );
    fails_with(&["fetch", "not a hub id"], "not a Hub id");
}

#[test]
fn usage_errors_exit_2() {
    kvaudit()
        .args(["diff-turns"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--model"));
    kvaudit()
        .args(["diff-turns", "--model", "x", "--format", "xml"])
        .assert()
        .code(2);
    kvaudit().arg("--help").assert().code(0);
}

#[test]
fn router_view_simulates_decode_events_and_the_decider() {
    let reply = "A process is an independent program with its own memory space, while a thread is a unit of execution inside a process. Threads of the same process share memory, so they are cheaper to create but need synchronization. The user asks about processes versus threads.";
    let quick = [
        "--user",
        "What is the difference between a process and a thread?",
        "--reply",
        reply,
        "--follow-up",
        "Thanks, makes sense.",
    ];
    // The prompt length, from `keys` (an independent path through the renderer).
    let keys = kvaudit()
        .args([
            "keys",
            "--model",
            &model("tiny-plain"),
            "--now",
            NOW,
            "--model-name",
            "m",
            "--format",
            "json",
        ])
        .args(quick)
        .assert()
        .success();
    let keys: Json = serde_json::from_slice(&keys.get_output().stdout).unwrap();
    let p = keys["sequences"][0]["tokens"].as_u64().unwrap();
    for (index_bs, decider) in [
        (64u64, "non-cached-tokens=16,prompt-tokens=0"),
        (16, "non-cached-tokens=16,prompt-tokens=0"),
        (64, "non-cached-tokens=512,prompt-tokens=1024"),
    ] {
        let v = {
            let out = kvaudit()
                .args([
                    "diff-turns",
                    "--model",
                    &model("tiny-plain"),
                    "--now",
                    NOW,
                    "--format",
                    "json",
                    "--index-block-size",
                    &index_bs.to_string(),
                    "--decider",
                    decider,
                ])
                .args(quick)
                .assert()
                .code(0);
            serde_json::from_slice::<Json>(&out.get_output().stdout).unwrap()
        };
        let t = &v["conversations"][0]["transitions"][0];
        let (h, n) = (
            t["held_tokens"].as_u64().unwrap(),
            t["next_prompt_tokens"].as_u64().unwrap(),
        );
        let r = &t["router"];
        let full_blocks = h / 16;
        let prefill_blocks = p / 16;
        assert_eq!(
            r["events_emitted"],
            1 + full_blocks - prefill_blocks,
            "one prefill event, one per decode block (p {p}, h {h}, n {n})"
        );
        assert_eq!(
            r["engine_cached_tokens"],
            full_blocks * 16,
            "the template extends: every held block is reused"
        );
        let visible = if index_bs == 16 {
            full_blocks * 16
        } else {
            prefill_blocks * 16 / 64 * 64
        };
        assert_eq!(r["index_visible_tokens"], visible, "block {index_bs}");
        let skipped: u64 = r["events_skipped"]
            .as_object()
            .unwrap()
            .values()
            .map(|x| x.as_u64().unwrap())
            .sum();
        // At block 64 every 16-token decode event is skipped, and so is a prefill shorter than 64.
        let short_prefill = u64::from(prefill_blocks > 0 && prefill_blocks * 16 < 64);
        assert_eq!(
            skipped,
            if index_bs == 16 {
                0
            } else {
                full_blocks - prefill_blocks + short_prefill
            }
        );
        assert_eq!(r["decider"]["non_cached_tokens"], n - visible);
        let want = match decider {
            "non-cached-tokens=16,prompt-tokens=0" if n - visible >= 16 => "prefill-decode",
            _ => "decode-only",
        };
        assert_eq!(r["decider"]["verdict"], want, "block {index_bs}, {decider}");
    }
}

#[test]
fn tokenizer_and_template_overrides() {
    // The same tokenizer given explicitly gives the same numbers; a missing one is named.
    let base = json_run(&["diff-turns", "--model", &model("tiny-think")], 1);
    let over = json_run(
        &[
            "diff-turns",
            "--model",
            &model("tiny-think"),
            "--tokenizer",
            "fixtures/models/tiny-plain/tokenizer.json",
        ],
        1,
    );
    assert_eq!(base["conversations"], over["conversations"]);
    fails_with(
        &[
            "diff-turns",
            "--model",
            &model("tiny-think"),
            "--tokenizer",
            "fixtures/models/none.json",
        ],
        "tokenizer file fixtures/models/none.json does not exist",
    );
    // The template under review replaces the model's: tiny-plain's template extends.
    let v = json_run(
        &[
            "diff-turns",
            "--model",
            &model("tiny-think"),
            "--template",
            "fixtures/models/tiny-plain/../../templates/dated.jinja",
        ],
        0,
    );
    assert!(
        v["model"]["template"]
            .as_str()
            .unwrap()
            .ends_with("dated.jinja")
    );
    assert_eq!(
        v["conversations"][0]["transitions"][0]["rewrite"],
        Json::Null
    );
}

/// The JSON's model.template names the template that rendered the conversations: `tool_use`
/// for a conversation with tools, with that template's SHA-256; both when both rendered.
#[test]
fn model_template_is_the_one_that_rendered() {
    use sha2::{Digest, Sha256};
    let dir = tempfile::tempdir().unwrap();
    let tools = write_conversation(
        &dir,
        "tools.json",
        &json!({
            "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}}}],
            "messages": [
                {"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": "Sunny."},
                {"role": "user", "content": "Thanks"}
            ]
        }),
    );
    let plain = write_conversation(
        &dir,
        "plain.json",
        &json!({"messages": [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello."},
            {"role": "user", "content": "Thanks"}
        ]}),
    );
    let config: Json = serde_json::from_slice(
        &std::fs::read(common::fixtures().join("models/tiny-tools/tokenizer_config.json")).unwrap(),
    )
    .unwrap();
    let tool_use = config["chat_template"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "tool_use")
        .unwrap()["template"]
        .as_str()
        .unwrap();
    let sha = format!("{:x}", Sha256::digest(tool_use.as_bytes()));
    let m = model("tiny-tools");
    let v = json_run(&["diff-turns", "-m", &m, "-c", &tools], 0);
    assert_eq!(
        v["model"]["template"], "tokenizer_config.json#tool_use",
        "{v}"
    );
    assert_eq!(v["model"]["template_sha256"], sha.as_str());
    let v = json_run(&["diff-turns", "-m", &m, "-c", &plain], 0);
    assert_eq!(v["model"]["template"], "tokenizer_config.json#default");
    let v = json_run(&["diff-turns", "-m", &m, "-c", &plain, "-c", &tools], 0);
    assert_eq!(
        v["model"]["template"],
        "tokenizer_config.json#default, tokenizer_config.json#tool_use"
    );
}

/// `--server` names a release where kvaudit follows releases: the bare name is the newest the
/// tests run, named in the JSON and the header; a release kvaudit does not know is one error
/// line listing the ones it does.
#[test]
fn server_releases_are_named_and_unknown_ones_refused() {
    let tiny = model("tiny-tools");
    for (server, name, release) in [
        ("sglang", "sglang", Some("0.5.23")),
        ("sglang@0.5.23", "sglang", Some("0.5.23")),
        ("sglang@main", "sglang", Some("main")),
        ("vllm", "vllm", Some("0.32")),
        ("vllm@0.32.0", "vllm", Some("0.32")),
        ("transformers", "transformers", None),
    ] {
        let r = json_run(&["diff-turns", "--model", &tiny, "--server", server], 0);
        assert_eq!(r["model"]["server"], json!(name), "{server}");
        assert_eq!(
            r["model"].get("server_release"),
            release.map(|r| json!(r)).as_ref(),
            "{server}"
        );
    }
    let out = kvaudit()
        .args(["diff-turns", "--model", &tiny, "--server", "sglang@main"])
        .args(["--now", NOW])
        .env("COLUMNS", "200")
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.lines().next().unwrap().contains("server sglang@main"),
        "{text}"
    );
    fails_with(
        &["diff-turns", "--model", &tiny, "--server", "sglang@0.5.22"],
        "kvaudit does not know how \"sglang@0.5.22\" renders (known: sglang, sglang@0.5.23, sglang@main)",
    );
    fails_with(
        &["diff-turns", "--model", &tiny, "--server", "tgi"],
        "unknown server \"tgi\" (one of transformers, vllm, sglang, llamacpp)",
    );
    fails_with(
        &[
            "probe",
            "--url",
            "http://127.0.0.1:9/v1",
            "--model",
            &tiny,
            "--server",
            "transformers",
        ],
        "probe talks to an engine: vllm, sglang or llamacpp",
    );
}

/// SGLang 0.5.23 fixes one template at start-up, the first of several named ones, tools or
/// not; transformers (and vLLM) take `tool_use` for a request with tools, else `default`. The
/// two SGLang releases write a tool differently, so they render different prompts.
#[test]
fn sglang_takes_the_first_named_template_and_its_release_writes_tools() {
    let dir = tempfile::tempdir().unwrap();
    let conv = write_conversation(
        &dir,
        "tools.json",
        &json!({"messages": [
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": "Sunny."},
            {"role": "user", "content": "Tomorrow?"},
        ], "tools": [{"type": "function", "function": {"name": "weather",
            "parameters": {"type": "object"}}}]}),
    );
    let template = |model: &str, server: &str| {
        let r = json_run(
            &[
                "diff-turns",
                "--model",
                model,
                "-c",
                &conv,
                "--server",
                server,
            ],
            0,
        );
        r["conversations"][0]["template"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let tiny = model("tiny-tools");
    assert_eq!(
        template(&tiny, "transformers"),
        "tokenizer_config.json#tool_use"
    );
    assert_eq!(
        template(&tiny, "sglang@main"),
        "tokenizer_config.json#tool_use"
    );
    assert_eq!(template(&tiny, "sglang"), "tokenizer_config.json#default");
    // The same templates listed tool_use first: SGLang 0.5.23 takes it, with tools or not.
    let reordered = dir.path().join("reordered");
    std::fs::create_dir(&reordered).unwrap();
    let src = common::fixtures().join("models/tiny-tools");
    std::fs::copy(src.join("tokenizer.json"), reordered.join("tokenizer.json")).unwrap();
    let mut config: Json =
        serde_json::from_slice(&std::fs::read(src.join("tokenizer_config.json")).unwrap()).unwrap();
    config["chat_template"].as_array_mut().unwrap().reverse();
    std::fs::write(reordered.join("tokenizer_config.json"), config.to_string()).unwrap();
    let reordered = reordered.to_str().unwrap();
    assert_eq!(
        template(reordered, "sglang"),
        "tokenizer_config.json#tool_use"
    );
    let r = json_run(
        &["diff-turns", "--model", reordered, "--server", "sglang"],
        0,
    );
    assert_eq!(
        r["model"]["template"],
        json!("tokenizer_config.json#tool_use")
    );
    let r = json_run(
        &[
            "diff-turns",
            "--model",
            reordered,
            "--server",
            "transformers",
        ],
        0,
    );
    assert_eq!(
        r["model"]["template"],
        json!("tokenizer_config.json#default")
    );
    // With --template-name the server is told which.
    let r = json_run(
        &[
            "diff-turns",
            "--model",
            &tiny,
            "-c",
            &conv,
            "--server",
            "sglang",
            "--template-name",
            "tool_use",
        ],
        0,
    );
    assert_eq!(
        r["conversations"][0]["template"],
        json!("tokenizer_config.json#tool_use")
    );
    // The releases' tool definitions differ, and so do the prompts of a template that writes
    // them out.
    let jinja = dir.path().join("tools.jinja");
    std::fs::write(
        &jinja,
        "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}{{ tools | tojson }}",
    )
    .unwrap();
    let text = |server: &str| {
        let out = kvaudit()
            .args([
                "render", "--model", &tiny, "-c", &conv, "--server", server, "--prompt", "1",
            ])
            .arg("--template")
            .arg(&jinja)
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    let (release, main) = (text("sglang"), text("sglang@main"));
    assert!(
        release.contains(
            r#"{"name": "weather", "parameters": {"type": "object"}, "description": null}"#
        ),
        "{release}"
    );
    assert!(
        main.contains(r#"{"description": null, "name": "weather", "parameters": {"type": "object"}, "strict": false}"#),
        "{main}"
    );
}
