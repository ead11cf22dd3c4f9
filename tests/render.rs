//! `kvaudit render` end to end on the project's small fixtures: the text exactly as the
//! template writes it, the held stream diff-turns counts, the token view, and exit codes.

use crate::common::{self, kvaudit};

use kvaudit::tokenize::Tokenizer;
use serde_json::{Value as Json, json};

const NOW: &str = "2026-01-15T10:00:00";
const THINK: &str = "fixtures/models/tiny-think";

/// The quick form every test here renders: one question, a reply with reasoning, a follow-up.
fn quick(model: &str) -> Vec<String> {
    [
        "render",
        "--model",
        model,
        "--user",
        "What is a thread?",
        "--reply",
        "A thread is a unit of execution.",
        "--reasoning",
        "Define it.",
        "--follow-up",
        "Thanks.",
        "--now",
        NOW,
    ]
    .map(String::from)
    .to_vec()
}

fn run(args: &[String], code: i32) -> (String, String) {
    let out = kvaudit().args(args).assert().code(code);
    let o = out.get_output();
    (
        String::from_utf8(o.stdout.clone()).unwrap(),
        String::from_utf8(o.stderr.clone()).unwrap(),
    )
}

fn json(args: &[String]) -> Json {
    let (stdout, _) = run(&[args, &["--format".into(), "json".into()]].concat(), 0);
    serde_json::from_str(&stdout).unwrap()
}

fn with(args: &[String], more: &[&str]) -> Vec<String> {
    let mut v = args.to_vec();
    v.extend(more.iter().map(|s| s.to_string()));
    v
}

fn write(dir: &tempfile::TempDir, name: &str, v: &Json) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, serde_json::to_string(v).unwrap()).unwrap();
    path.display().to_string()
}

#[test]
fn prompts_are_printed_verbatim_after_a_header() {
    let (text, stderr) = run(&quick(THINK), 0);
    assert!(stderr.is_empty(), "{stderr}");
    // tiny-think writes `<|im_start|>{role}\n{content}<|im_end|>\n` and drops the reasoning
    // from history, so both prompts can be spelled out here.
    let p1 = "<|im_start|>user\nWhat is a thread?<|im_end|>\n<|im_start|>assistant\n";
    let p2 = format!(
        "{p1}A thread is a unit of execution.<|im_end|>\n<|im_start|>user\nThanks.<|im_end|>\n<|im_start|>assistant\n"
    );
    let tok =
        Tokenizer::from_file(&common::fixtures().join("models/tiny-think/tokenizer.json")).unwrap();
    let (n1, n2) = (
        tok.encode(p1).unwrap().len(),
        tok.encode(&p2).unwrap().len(),
    );
    assert_eq!(
        text,
        format!(
            "==> prompt 1 ({n1} tokens, template tokenizer_config.json) <==\n{p1}\
             ==> prompt 2 ({n2} tokens, template tokenizer_config.json) <==\n{p2}"
        )
    );
    insta::assert_snapshot!("render_tiny_think", text);
}

#[test]
fn tokens_view_marks_special_tokens_and_spells_out_control_characters() {
    let (text, _) = run(&with(&quick(THINK), &["--tokens", "--prompt", "2"]), 0);
    assert!(text.starts_with("==> prompt 2 ("), "{text}");
    assert!(text.contains("⟨<|im_start|>⟩·1 "), "{text}");
    assert!(text.contains("⟨<|im_end|>⟩·2 \\n·203\n"), "{text}");
    assert!(!text.contains("prompt 1"), "--prompt 2 shows prompt 2 only");
    insta::assert_snapshot!("render_tiny_think_tokens", text);
}

#[test]
fn held_stream_is_what_diff_turns_holds() {
    let (text, _) = run(&with(&quick(THINK), &["--held", "1", "--tokens"]), 0);
    insta::assert_snapshot!("render_tiny_think_held_tokens", text);

    let held = json(&with(&quick(THINK), &["--held", "1", "--tokens"]));
    let h = &held["conversations"][0]["held"][0];
    assert_eq!(held["conversations"][0]["prompts"], json!([]));
    // The reply as tiny-think's family generates it: think block, then content, no stop token.
    assert_eq!(
        h["generated_text"],
        "<think>\nDefine it.\n</think>\n\nA thread is a unit of execution."
    );
    assert_eq!(h["generated_ids_from"], "encoded");
    assert_eq!(
        h["text"].as_str().unwrap(),
        format!(
            "{}{}",
            "<|im_start|>user\nWhat is a thread?<|im_end|>\n<|im_start|>assistant\n",
            h["generated_text"].as_str().unwrap()
        )
    );
    // diff-turns takes the same conversation flags.
    let mut diff_args = quick(THINK);
    diff_args[0] = "diff-turns".into();
    let out = kvaudit()
        .args(&diff_args)
        .args(["--format", "json"])
        .assert()
        .code(1);
    let d: Json = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let t = &d["conversations"][0]["transitions"][0];
    assert_eq!(h["token_count"], t["held_tokens"]);
    assert_eq!(h["ids"].as_array().unwrap().len(), h["token_count"]);
    let prompt1 = json(&with(&quick(THINK), &["--prompt", "1", "--tokens"]));
    let p1 = &prompt1["conversations"][0]["prompts"][0];
    assert_eq!(h["prompt_tokens"], p1["token_count"]);
    assert_eq!(
        h["ids"].as_array().unwrap()[..p1["ids"].as_array().unwrap().len()],
        p1["ids"].as_array().unwrap()[..]
    );
}

#[test]
fn held_stream_uses_the_sampled_ids_when_given() {
    let dir = tempfile::tempdir().unwrap();
    let conv = write(
        &dir,
        "sampled.json",
        &json!({"messages": [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello", "generated": "Hello", "generated_ids": [5, 6, 7]},
            {"role": "user", "content": "Bye"}
        ]}),
    );
    let args: Vec<String> = ["render", "-m", THINK, "-c", &conv, "--now", NOW]
        .map(String::from)
        .to_vec();
    let v = json(&with(&args, &["--held", "1", "--tokens"]));
    let h = &v["conversations"][0]["held"][0];
    assert_eq!(h["generated_ids_from"], "sampled");
    assert_eq!(h["generated_tokens"], 3);
    let ids = h["ids"].as_array().unwrap();
    assert_eq!(ids[ids.len() - 3..], [json!(5), json!(6), json!(7)]);
    let (text, _) = run(&with(&args, &["--held", "1"]), 0);
    assert!(
        text.starts_with("==> held 1 -> 2: prompt 1 + reply (")
            && text.contains("3 reply (generated_ids)"),
        "{text}"
    );
}

#[test]
fn json_has_the_strings_as_rendered_and_what_rendered_them() {
    let v = json(&with(&quick(THINK), &["--tokens"]));
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["model"]["source"], THINK);
    let tok_sha = v["model"]["tokenizer_sha256"].as_str().unwrap();
    assert_eq!(tok_sha.len(), 64);
    let c = &v["conversations"][0];
    assert_eq!(c["source"], "quick:follow-up-1");
    assert_eq!(c["template"], "tokenizer_config.json");
    assert_eq!(c["prompt_count"], 2);
    let config: Json = serde_json::from_str(
        &std::fs::read_to_string(
            common::fixtures().join("models/tiny-think/tokenizer_config.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let template = config["chat_template"].as_str().unwrap();
    assert_eq!(
        c["template_sha256"],
        kvaudit::tokenize::sha256_hex(template.as_bytes())
    );
    let tok =
        Tokenizer::from_file(&common::fixtures().join("models/tiny-think/tokenizer.json")).unwrap();
    for p in c["prompts"].as_array().unwrap() {
        let text = p["text"].as_str().unwrap();
        let ids: Vec<u32> = serde_json::from_value(p["ids"].clone()).unwrap();
        assert_eq!(ids, tok.encode(text).unwrap());
        assert_eq!(p["token_count"], ids.len());
        let tokens = p["tokens"].as_array().unwrap();
        assert_eq!(tokens.len(), ids.len());
        // Every added token of tiny-think is special; ordinary pieces are not.
        for t in tokens {
            let special = t["text"].as_str().unwrap().starts_with('<');
            assert_eq!(t["special"], special, "{t}");
        }
    }
    // Without --tokens: the text and the count only.
    let plain = json(&quick(THINK));
    let p = &plain["conversations"][0]["prompts"][0];
    assert!(p.get("ids").is_none() && p.get("tokens").is_none());
    assert_eq!(p["text"], c["prompts"][0]["text"]);
}

#[test]
fn a_request_without_a_reply_renders_as_one_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let conv = write(
        &dir,
        "request.json",
        &json!({"messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi\ttab"}
        ], "template_kwargs": {"enable_thinking": false}}),
    );
    let (text, _) = run(
        &["render", "-m", THINK, "-c", &conv, "--now", NOW].map(String::from),
        0,
    );
    let body = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi\ttab<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";
    let (header, rest) = text.split_once('\n').unwrap();
    assert!(header.starts_with("==> prompt 1 ("), "{header}");
    assert_eq!(rest, body, "the text is not escaped");
    // No transition to hold.
    let (_, err) = run(
        &["render", "-m", THINK, "-c", &conv, "--held", "1"].map(String::from),
        2,
    );
    assert_eq!(
        err,
        format!(
            "error: conversation {conv} has no transition (no assistant reply is followed by a prompt), so there is no held stream 1 -> 2\n"
        )
    );
}

#[test]
fn a_text_without_a_final_newline_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let template = dir.path().join("t.jinja");
    std::fs::write(
        &template,
        "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}",
    )
    .unwrap();
    let (text, _) = run(
        &with(
            &quick("fixtures/models/tiny-plain"),
            &["--template", template.to_str().unwrap(), "--prompt", "1"],
        ),
        0,
    );
    let prompt = "[user] What is a thread?\n[assistant]";
    let n = Tokenizer::from_file(&common::fixtures().join("models/tiny-plain/tokenizer.json"))
        .unwrap()
        .encode(prompt)
        .unwrap()
        .len();
    assert_eq!(
        text,
        format!(
            "==> prompt 1 ({n} tokens, template {}) <==\n{prompt}\n\\ No newline at end of text\n",
            template.display()
        )
    );
}

#[test]
fn colour_only_marks_headers_and_special_tokens() {
    let (coloured, _) = run(
        &with(&quick(THINK), &["--color", "always", "--prompt", "1"]),
        0,
    );
    let (header, body) = coloured.split_once('\n').unwrap();
    assert!(header.starts_with("\u{1b}[1m==> prompt 1"), "{header:?}");
    assert!(
        !body.contains('\u{1b}'),
        "the text itself is never coloured"
    );
    let (tokens, _) = run(
        &with(
            &quick(THINK),
            &["--color", "always", "--prompt", "1", "--tokens"],
        ),
        0,
    );
    assert!(
        tokens.contains("\u{1b}[1m⟨<|im_start|>⟩\u{1b}[0m·1"),
        "{tokens:?}"
    );
}

#[test]
fn bad_input_exits_2_and_render_never_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let base = quick(THINK);
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            with(&base, &["--prompt", "0"]),
            "error: --prompt counts from 1\n",
        ),
        (
            with(&base, &["--prompt", "3"]),
            "error: conversation quick:follow-up-1 has 2 prompts, so there is no prompt 3\n",
        ),
        (
            with(&base, &["--held", "2"]),
            "error: conversation quick:follow-up-1 has one transition, 1 -> 2, so there is no held stream 2 -> 3\n",
        ),
        (
            with(&base, &["--held", "0"]),
            "error: --held counts from 1 (transition 1 -> 2 is --held 1)\n",
        ),
    ];
    for (args, want) in cases {
        let (stdout, stderr) = run(&args, 2);
        assert_eq!(stderr, want, "{args:?}");
        assert!(stdout.is_empty());
    }
    // clap's own usage errors are exit 2 too.
    run(&with(&base, &["--prompt", "1", "--held", "1"]), 2);
    run(&with(&base, &["--prompt", "x"]), 2);
    // A template that raises, and a conversation that is not one.
    let raising = dir.path().join("raise.jinja");
    std::fs::write(&raising, "{{ raise_exception('no system messages') }}").unwrap();
    let (_, err) = run(&with(&base, &["--template", raising.to_str().unwrap()]), 2);
    assert!(
        err.starts_with("error: ") && err.contains("no system messages"),
        "{err}"
    );
    let empty = write(&dir, "empty.json", &json!({"messages": []}));
    let (_, err) = run(&["render", "-m", THINK, "-c", &empty].map(String::from), 2);
    assert!(err.contains("no messages"), "{err}");
    // diff-turns finds a rewrite on this conversation (exit 1); render only shows it.
    let mut diff = base.clone();
    diff[0] = "diff-turns".into();
    run(&diff, 1);
    run(&base, 0);
}

/// The special marks come from tokenizer.json's added tokens marked special, read the same
/// from the file and from its prepared (cached) form, on the fixtures and three shared models.
#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn special_ids_are_the_added_tokens_marked_special() {
    let mut paths = vec![
        common::fixtures().join("models/tiny-think/tokenizer.json"),
        common::fixtures().join("models/tiny-plain/tokenizer.json"),
    ];
    if let Some(shared) = common::shared_dir("special_ids_are_the_added_tokens_marked_special") {
        // Three families (preparing every model's tokenizer would take a minute).
        for model in ["qwen3-8b", "llama-3.1-8b-instruct", "gpt-oss-120b"] {
            paths.push(shared.join("models").join(model).join("tokenizer.json"));
        }
    }
    let cache = tempfile::tempdir().unwrap();
    for path in paths {
        let source: Json = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let want: std::collections::HashSet<u32> = source["added_tokens"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["special"] == true)
            .map(|t| t["id"].as_u64().unwrap() as u32)
            .collect();
        assert!(!want.is_empty(), "{}", path.display());
        let plain = Tokenizer::load(&path, None).unwrap();
        assert_eq!(plain.special_ids(), want, "{}", path.display());
        let _ = Tokenizer::load(&path, Some(cache.path())).unwrap();
        let prepared = Tokenizer::load(&path, Some(cache.path())).unwrap();
        assert!(prepared.is_prepared(), "{}", path.display());
        assert_eq!(prepared.special_ids(), want, "{}", path.display());
    }
}

/// vLLM refuses a request, not a conversation: a tool call without an id makes the request
/// whose history holds it a 400, and the requests before it are served. render shows those,
/// then names the refused request (exit 2); diff-turns audits the transitions before it.
#[test]
fn a_refused_request_stops_the_conversation_there_not_before() {
    let dir = tempfile::tempdir().unwrap();
    let conv = dir.path().join("conv.json");
    std::fs::write(
        &conv,
        json!({"messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello there"},
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"type": "function", "function": {"name": "w", "arguments": "{}"}}]},
            {"role": "tool", "content": "sunny"},
            {"role": "assistant", "content": "It is sunny"},
            {"role": "user", "content": "thanks"}
        ]})
        .to_string(),
    )
    .unwrap();
    let model = common::fixtures().join("models/tiny-call");
    let run = |args: &[&str]| {
        kvaudit()
            .args(args)
            .arg("-m")
            .arg(&model)
            .arg("-c")
            .arg(&conv)
            .args(["--server", "vllm", "--format", "json"])
            .output()
            .unwrap()
    };
    let out = run(&["render"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.starts_with("error: ")
            && stderr.contains("request 3: vllm rejects this request (tool_call_without_id)"),
        "{stderr}"
    );
    let report: Json = serde_json::from_slice(&out.stdout).unwrap();
    let numbers: Vec<&Json> = report["conversations"][0]["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| &p["prompt"])
        .collect();
    assert_eq!(numbers, [&json!(1), &json!(2)]);
    // A prompt before the refused one is served: no error.
    let out = run(&["render", "--prompt", "2"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(&["render", "--prompt", "3"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("request 3:"));
    // diff-turns: transition 1 -> 2 audited, then the refusal (exit 2), in the JSON too.
    let out = run(&["diff-turns"]);
    assert_eq!(out.status.code(), Some(2));
    let report: Json = serde_json::from_slice(&out.stdout).unwrap();
    let c = &report["conversations"][0];
    assert_eq!(c["transitions"].as_array().unwrap().len(), 1);
    assert_eq!(c["transitions"][0]["from_prompt"], json!(1));
    assert_eq!(c["refused"]["request"], json!(3));
    assert_eq!(
        c["refused"]["reason"],
        json!("rejected:tool_call_without_id")
    );
    // transformers renders what it is given: no refusal there.
    let out = kvaudit()
        .args(["render", "-m"])
        .arg(&model)
        .arg("-c")
        .arg(&conv)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A reply cut at max_tokens (finish_reason "length", as probe --save-conversation records
/// it) holds one token less: its last sampled token was never fed back.
#[test]
fn a_reply_cut_at_max_tokens_holds_one_token_less() {
    let dir = tempfile::tempdir().unwrap();
    let model = common::fixtures().join("models/tiny-call");
    let held = |finish: Option<&str>| {
        let mut reply = json!({"role": "assistant", "content": "one two three four"});
        if let Some(f) = finish {
            reply["finish_reason"] = json!(f);
        }
        let conv = dir.path().join("c.json");
        std::fs::write(
            &conv,
            json!({"messages": [{"role": "user", "content": "count"}, reply,
                {"role": "user", "content": "more"}]})
            .to_string(),
        )
        .unwrap();
        let out = kvaudit()
            .args(["diff-turns", "--format", "json", "-m"])
            .arg(&model)
            .arg("-c")
            .arg(&conv)
            .output()
            .unwrap();
        let report: Json = serde_json::from_slice(&out.stdout).unwrap();
        report["conversations"][0]["transitions"][0]["held_tokens"]
            .as_u64()
            .unwrap()
    };
    let whole = held(None);
    assert_eq!(held(Some("stop")), whole);
    assert_eq!(held(Some("length")), whole - 1);
}
