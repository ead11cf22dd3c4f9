//! kvaudit against a running SGLang 0.5.23: PyPI's release on the CPU (`.ci/sglang.sh`)
//! serving a tiny random-weight Qwen3 that carries Qwen3-8B's real tokenizer and chat template
//! (`tests/make_tiny_hf.py`). Checked against the engine: `render --server sglang` equals
//! SGLang's `/tokenize` (its chat path) on a sample of every ../shared/corpus file, tool
//! definitions included, and the requests SGLang refuses are the ones kvaudit refuses; `probe`
//! agrees on every turn, reading the page size from `/server_info`; `capture` of the engine's
//! KV events then `replay --engine sglang` gives what `diff-turns` predicts at the server's
//! page size, through kvaudit's Dynamo view and the real Dynamo indexer alike; llm-d's view
//! drops every message of SGLang's (docs/events.md); `watch` proxying to it attributes every
//! request with `reused` equal to SGLang's own `cached_tokens`.
//!
//! SGLang's CPU path imports two ops from `sgl_kernel`, which has no CPU build on PyPI: the
//! tests put a stand-in on PYTHONPATH (tests/sglang/sgl_kernel) that logs every call, and each
//! test asserts the log stayed empty, so every step ran SGLang's own code.
//!
//! One server for the whole binary, started on first use and stopped when the test process
//! exits. Tests take its lock and flush its cache first. The environment is found at
//! KVAUDIT_SGLANG_VENV (what .ci/run exports), else where .ci/sglang.sh puts it; without it the
//! tests say they skip (under CI=true they fail).

use crate::common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use common::live::{self, RenderTally, Tokenizing, free_port, http, json_out, routers_venv};
use serde_json::{Value as Json, json};

/// The SGLang release .ci/sglang.sh installs, and the one `--server sglang` follows.
const SGLANG_VERSION: &str = "0.5.23";
/// The page size the server runs with (its KV granularity, what a prefix reuses in).
const PAGE: usize = 16;
/// Bound on SGLang's start-up (20–90 s on 2 cores).
const START_TIMEOUT: Duration = Duration::from_secs(420);

fn work_dir() -> PathBuf {
    let dir = common::repo_root().join("target/sglang-live");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The SGLang environment, or `None` (the test skips, saying why; under CI it fails).
fn venv(test: &str) -> Option<PathBuf> {
    live::installed(
        test,
        &format!("SGLang {SGLANG_VERSION}"),
        "KVAUDIT_SGLANG_VENV",
        common::user_cache().join(format!("kvaudit-sglang/{SGLANG_VERSION}")),
        live::complete_venv("bin/python"),
        ".ci/sglang.sh",
    )
}

struct Server {
    engine: live::Engine,
    /// Where the KV-event publisher connects (a subscriber binds it), `tcp://127.0.0.1:PORT`.
    events: String,
    model_dir: PathBuf,
    /// The stand-in `sgl_kernel`'s call log: it must stay empty.
    kernel_log: PathBuf,
    turn: Mutex<()>,
}

impl Server {
    fn root(&self) -> &str {
        &self.engine.root
    }

    /// Nothing called the `sgl_kernel` stand-in: every step ran SGLang's own code.
    fn assert_stand_in_unused(&self) {
        let calls = std::fs::read_to_string(&self.kernel_log).unwrap_or_default();
        assert!(
            calls.is_empty(),
            "SGLang called the sgl_kernel stand-in ({}): {calls}",
            self.kernel_log.display()
        );
    }
}

fn start(venv: &Path, shared: &Path) -> Result<Server, String> {
    let model_dir = work_dir().join("models/tiny-qwen3");
    let python = venv.join("bin/python");
    live::tiny_model(&python, shared, "qwen3", "qwen3-8b", &model_dir);
    let (port, events) = (free_port(), free_port());
    let log = work_dir().join(format!("sglang-{port}.log"));
    let kernel_log = work_dir().join(format!("sgl-kernel-calls-{port}.log"));
    let _ = std::fs::remove_file(&kernel_log);
    let kv_events = json!({
        "publisher": "zmq",
        "endpoint": format!("tcp://127.0.0.1:{events}"),
        "topic": "kv",
    });
    let mut args: Vec<String> = ["-m", "sglang.launch_server", "--model-path"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.push(model_dir.display().to_string());
    for a in [
        "--served-model-name",
        "tiny",
        "--host",
        "127.0.0.1",
        "--port",
        &port.to_string(),
        "--device",
        "cpu",
        "--attention-backend",
        "torch_native",
        "--dtype",
        "bfloat16",
        "--page-size",
        &PAGE.to_string(),
        "--disable-cuda-graph",
        "--skip-server-warmup",
        "--context-length",
        "4096",
        "--max-total-tokens",
        "65536",
        "--enable-cache-report",
        "--kv-events-config",
        &kv_events.to_string(),
    ] {
        args.push(a.to_string());
    }
    let env = [
        (
            "PYTHONPATH",
            common::repo_root()
                .join("tests/sglang")
                .display()
                .to_string(),
        ),
        // `--device cpu` alone does not select SGLang's CPU engine.
        ("SGLANG_USE_CPU_ENGINE", "1".to_string()),
        ("KVAUDIT_SGL_KERNEL_LOG", kernel_log.display().to_string()),
        ("HF_HUB_OFFLINE", "1".to_string()),
    ];
    let engine = live::start_engine("SGLang", &python, &args, &env, port, &log, START_TIMEOUT)?;
    Ok(Server {
        engine,
        events: format!("tcp://127.0.0.1:{events}"),
        model_dir,
        kernel_log,
        turn: Mutex::new(()),
    })
}

/// The server for `test`, its lock held and its cache flushed; `None` when the test skips.
fn server(test: &str) -> Option<(&'static Server, MutexGuard<'static, ()>, PathBuf)> {
    static SERVER: OnceLock<Result<Server, String>> = OnceLock::new();
    let shared = common::shared_dir(test)?;
    let venv = venv(test)?;
    let server = match SERVER.get_or_init(|| start(&venv, &shared)) {
        Ok(s) => s,
        Err(e) => panic!("{test}: {e}"),
    };
    let guard = server.turn.lock().unwrap_or_else(|e| e.into_inner());
    let (status, body) = http(server.root(), "POST", "/flush_cache", None);
    assert_eq!(status, 200, "/flush_cache: {body}");
    Some((server, guard, shared))
}

#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn render_equals_sglang_tokenize_on_every_corpus_file() {
    let test = "render_equals_sglang_tokenize_on_every_corpus_file";
    let Some((server, _turn, shared)) = server(test) else {
        return;
    };
    let tokenize = |m: &[Json], t: Option<&Json>| live::tokenize_chat(server.root(), m, t);
    let with = Tokenizing {
        engine: "SGLang",
        server: "sglang",
        model: &server.model_dir,
        tokenize: &tokenize,
    };
    let (tally, with_ids) = live::compare_corpus(&with, &work_dir(), &shared, 4);
    let _ = writeln!(
        std::io::stderr(),
        "render vs SGLang {SGLANG_VERSION} /tokenize: {} conversations, {} prompts, {} identical \
         ({} of {} with tools), {} refused by both; with tool-call ids: {} conversations, {} \
         prompts, {} identical ({} of {} with tools), {} refused by both",
        tally.conversations,
        tally.prompts,
        tally.identical,
        tally.identical_with_tools,
        tally.with_tools,
        tally.refused_by_both,
        with_ids.conversations,
        with_ids.prompts,
        with_ids.identical,
        with_ids.identical_with_tools,
        with_ids.with_tools,
        with_ids.refused_by_both,
    );
    let differ: Vec<&String> = tally.differ.iter().chain(&with_ids.differ).collect();
    assert!(differ.is_empty(), "{} differ:\n{:#?}", differ.len(), differ);
    assert!(tally.conversations >= 30, "{tally:?}");
    // Tool definitions are where releases differ: some prompts must carry them.
    assert!(
        tally.with_tools + with_ids.with_tools >= 20,
        "{tally:?} {with_ids:?}"
    );
    server.assert_stand_in_unused();
}

/// The same file rendered as SGLang's main branch writes tools (`sglang@main`) differs from
/// the running 0.5.23 on a prompt with tools: the release matters, and the test above would
/// see it.
#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn sglang_main_rules_are_not_what_the_release_renders() {
    let test = "sglang_main_rules_are_not_what_the_release_renders";
    let Some((server, _turn, _)) = server(test) else {
        return;
    };
    let tools = json!([{"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]);
    let messages = json!([{"role": "user", "content": "Weather in Oslo?"}]);
    let conv = work_dir().join("tools-order.json");
    std::fs::write(
        &conv,
        json!({"messages": messages, "tools": tools}).to_string(),
    )
    .unwrap();
    let theirs =
        live::tokenize_chat(server.root(), messages.as_array().unwrap(), Some(&tools)).unwrap();
    let (release, code, stderr) = live::kvaudit_render("sglang@0.5.23", &server.model_dir, &conv);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(release, vec![theirs.clone()]);
    let (main, code, stderr) = live::kvaudit_render("sglang@main", &server.model_dir, &conv);
    assert_eq!(code, 0, "{stderr}");
    assert_ne!(main, vec![theirs]);
    server.assert_stand_in_unused();
}

/// `kvaudit probe` against the server; the JSON report, exit code and stderr.
fn probe(server: &Server, extra: &[&str]) -> (Json, i32, String) {
    live::probe(&server.engine, &server.model_dir, extra)
}

/// Probe finds SGLang behind the URL (`owned_by`), reads its page size and release from
/// `/server_info`, and agrees on every turn: SGLang's prompt ids (`prompt_token_ids`) are
/// kvaudit's, and from turn 2 on it reused exactly the predicted number of tokens.
#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn probe_agrees_with_sglang_on_qwen3_thinking_on_and_off() {
    let test = "probe_agrees_with_sglang_on_qwen3_thinking_on_and_off";
    let mut reused = 0;
    for (what, extra) in [
        ("thinking on", vec![]),
        (
            "thinking off",
            vec!["--template-kwarg", "enable_thinking=false"],
        ),
    ] {
        let Some((server, _turn, _)) = server(test) else {
            return;
        };
        let mut args = vec!["--max-tokens", "40"];
        args.extend(extra);
        let (report, code, stderr) = probe(server, &args);
        assert_eq!(report["server"]["engine"], json!("sglang"), "{report:#}");
        assert_eq!(report["server"]["block_size"], json!(PAGE), "{report:#}");
        assert_eq!(report["server"]["block_size_from"], json!("/server_info"));
        assert_eq!(report["server"]["version"], json!(SGLANG_VERSION));
        assert_eq!(report["model"]["server_release"], json!(SGLANG_VERSION));
        let turns = report["turns"].as_array().unwrap();
        assert!(turns.len() >= 3, "{what}: {} turns", turns.len());
        for t in turns {
            assert_eq!(t["verdict"], json!("agrees"), "{what}: {t:#}");
            assert_eq!(t["server_prompt_ids_from"], json!("prompt_token_ids"));
            assert_eq!(t["generated_ids_from"], json!("sampled"), "{what}");
        }
        for t in &turns[1..] {
            assert_eq!(
                t["server_cached_tokens"], t["predicted_cached_tokens"],
                "{what}: {t:#}"
            );
            reused += t["server_cached_tokens"].as_u64().unwrap();
        }
        assert_eq!(code, 0, "{what}: {stderr}");
        assert!(!stderr.contains("warning"), "{what}: {stderr}");
        server.assert_stand_in_unused();
    }
    // A check that only ever compared zeros would check nothing.
    assert!(reused > 0, "no turn reused anything");
    // Told to render as another release than the server says it runs, probe says so.
    let Some((server, _turn, _)) = server(test) else {
        return;
    };
    let (report, _, stderr) = probe(server, &["--server", "sglang@main", "--turns", "1"]);
    assert_eq!(report["model"]["server_release"], json!("main"));
    assert!(
        stderr.contains(&format!(
            "warning: the server runs sglang \"{SGLANG_VERSION}\"; kvaudit renders as sglang@main"
        )),
        "{stderr}"
    );
}

const QUESTION: &str = "Explain how a KV cache speeds up decoding.";
const FOLLOW_UP: &str = "And what evicts it?";

/// SGLang's KV events, captured live while probe holds one turn of a chat (thinking off),
/// then replayed: every message decodes, the engine's sequences are the page-aligned prefixes
/// of prompt + reply that diff-turns predicts, kvaudit's Dynamo view and the real Dynamo
/// indexer find what diff-turns predicts for turn 2, and llm-d's view drops every message.
#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn capture_then_replay_gives_what_diff_turns_predicts() {
    let test = "capture_then_replay_gives_what_diff_turns_predicts";
    let Some((server, _turn, _)) = server(test) else {
        return;
    };
    let frames = work_dir().join("live.frames");
    let saved = work_dir().join("capture-turn.json");
    live::capture_while(&server.events, &frames, || {
        // What SGLang published before capture joined is lost: a flush now starts the
        // capture from an empty cache (it publishes AllBlocksCleared).
        let (status, body) = http(server.root(), "POST", "/flush_cache", None);
        assert_eq!(status, 200, "/flush_cache: {body}");
        let (report, code, stderr) = probe(
            server,
            &[
                "--template-kwarg",
                "enable_thinking=false",
                "--user",
                QUESTION,
                "--follow-up",
                FOLLOW_UP,
                "--turns",
                "1",
                "--max-tokens",
                "100",
                "--save-conversation",
                saved.to_str().unwrap(),
            ],
        );
        assert_eq!(code, 0, "{stderr}\n{report:#}");
    });
    let mut conv: Json = serde_json::from_slice(&std::fs::read(&saved).unwrap()).unwrap();
    conv["messages"]
        .as_array_mut()
        .unwrap()
        .push(json!({"role": "user", "content": FOLLOW_UP}));
    std::fs::write(&saved, serde_json::to_vec(&conv).unwrap()).unwrap();

    let render = |what: &str, n: &str| {
        json_out(
            common::kvaudit_process()
                .args([
                    "render", "--server", "sglang", "--tokens", "--format", "json",
                ])
                .args([what, n])
                .args(["--template-kwarg", "enable_thinking=false", "-m"])
                .arg(&server.model_dir)
                .arg("-c")
                .arg(&saved),
        )
    };
    let next_ids = render("--prompt", "2")["conversations"][0]["prompts"][0]["ids"].clone();
    let held_ids = render("--held", "1")["conversations"][0]["held"][0]["ids"].clone();
    let lookups = work_dir().join("live-lookups.json");
    std::fs::write(&lookups, json!([next_ids, held_ids]).to_string()).unwrap();

    let predicted = json_out(
        common::kvaudit_process()
            .args(["diff-turns", "--server", "sglang", "--format", "json"])
            .args(["--template-kwarg", "enable_thinking=false"])
            .args([
                "--engine-block-size",
                &PAGE.to_string(),
                "--router",
                "dynamo",
            ])
            .arg("-m")
            .arg(&server.model_dir)
            .arg("-c")
            .arg(&saved),
    );
    let transition = &predicted["conversations"][0]["transitions"][0];
    // What the engine holds: prompt + reply, less the last sampled token (never computed).
    let held = transition["held_tokens"].as_u64().unwrap() as usize;
    assert_eq!(
        held + 1,
        held_ids.as_array().unwrap().len(),
        "{transition:#}"
    );
    let dynamo = &transition["routers"][0];

    // kvaudit's own views of the capture: every message decodes; the engine holds every full
    // page of prompt + reply; Dynamo's view finds what diff-turns predicts.
    let replayed = json_out(
        common::kvaudit_process()
            .args(["replay", "--engine", "sglang", "--format", "json"])
            .args(["--router", &format!("dynamo:block_size={PAGE}")])
            .arg("--lookup")
            .arg(&lookups)
            .arg(&frames),
    );
    let what = format!("{replayed:#}");
    assert_eq!(replayed["malformed"], json!(0), "{what}");
    assert!(
        replayed["events"]["block_stored"].as_u64() > Some(0),
        "{what}"
    );
    let view = &replayed["views"][0];
    assert_eq!(
        view["sequences"][0]["engine_tokens"],
        json!(held / PAGE * PAGE),
        "{what}"
    );
    assert_eq!(
        view["lookups"][0]["index_tokens"], dynamo["visible_tokens"],
        "{what}"
    );
    assert_eq!(
        view["lookups"][1]["index_tokens"],
        json!(held / PAGE * PAGE),
        "{what}"
    );

    // llm-d's view: its SGLang adapter decodes each event as an array, SGLang 0.5.23 sends
    // maps, so every message is dropped whole and nothing is found (the topic here, `kv`,
    // would not even pass llm-d's default filter: an empty one lets the adapter be seen).
    let llmd = json_out(
        common::kvaudit_process()
            .args(["replay", "--engine", "sglang", "--format", "json"])
            .args(["--router", "llm-d", "--topic-filter", ""])
            .arg("--lookup")
            .arg(&lookups)
            .arg(&frames),
    );
    let view = &llmd["views"][0];
    assert_eq!(
        view["messages_dropped"]["event_decode_error"], llmd["messages"],
        "{llmd:#}"
    );
    assert_eq!(view["lookups"][0]["index_tokens"], json!(0), "{llmd:#}");
    // And llm-d's own sglang adapter (harness/llm-d) refuses every message of it, the fault
    // `check` finds as KVA411.
    if let Some(bin) = common::live::go_harness(test, "llm-d", "KVAUDIT_LLMD_HARNESS") {
        let derived = work_dir().join("llm-d-derived.json");
        let real = Command::new(bin.join("replay"))
            .arg("-frames")
            .arg(&frames)
            .args(["-block-size", &PAGE.to_string(), "-engine", "sglang"])
            .args(["-topic-filter", "", "-derive"])
            .arg(&derived)
            .output()
            .unwrap();
        assert!(real.status.success(), "{real:?}");
        let err = String::from_utf8_lossy(&real.stderr);
        assert_eq!(
            json!(err.lines().count()),
            llmd["messages"],
            "llm-d's sglang adapter: {err}"
        );
        assert!(
            err.lines()
                .all(|l| l.contains("failed to decode SGLang event")),
            "{err}"
        );
    }

    // The real Dynamo indexer on the same capture agrees with kvaudit's view.
    if let Some(routers) = routers_venv(test) {
        let real = json_out(
            Command::new(routers.join("bin/python"))
                .arg(common::repo_root().join("tests/routers/dynamo_indexer.py"))
                .arg("--capture")
                .arg(&frames)
                .args(["--block-size", &PAGE.to_string(), "--lookups"])
                .arg(&lookups),
        );
        for i in 0..2 {
            assert_eq!(
                replayed["views"][0]["lookups"][i]["index_tokens"],
                real["lookups"][i]["matched_tokens"],
                "lookup {i}: {real:#}"
            );
        }
    }
    server.assert_stand_in_unused();
}

/// Requests written to reach each rule where SGLang 0.5.23's request handling differs from its
/// main branch or from vLLM's (tool fields and types, `root`, `phase`, `prefix`, tool
/// references, lax integers, arguments on other roles than assistant; and the refusals: an
/// invalid parameters schema, tool names not unique, a bad `phase`, a thinking part that is
/// not text, arguments that are not JSON in a later request): each prompt renders as SGLang
/// renders it, and each refusal is SGLang's, at the same request.
#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn edge_requests_render_or_are_refused_as_sglang_does() {
    let test = "edge_requests_render_or_are_refused_as_sglang_does";
    let Some((server, _turn, _)) = server(test) else {
        return;
    };
    let tool = |name: &str, params: Json| json!({"type": "function", "function": {"parameters": params, "name": name, "description": "d"}});
    let user = |t: &str| json!({"role": "user", "content": t});
    let call = |args: Json| {
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "index": "0", "type": "function", "function": {"name": "f", "arguments": args}}]})
    };
    let answer = json!({"role": "tool", "content": "ok", "tool_call_id": "c1"});
    // (label, record, requests SGLang serves, the rule kvaudit names for the one it refuses)
    let cases: Vec<(&str, Json, usize, Option<&str>)> = vec![
        (
            "database-types",
            json!({"messages": [user("q"), call(json!("{\"n\": 1}")), answer, user("again")],
                   "tools": [tool("f", json!({"type": "object", "properties": {
                       "n": {"type": "INT"}, "s": {"type": "varchar(20)"}, "l": {"type": ["list[str]", "null"]}}}))]}),
            2,
            None,
        ),
        (
            "phase-prefix-reference",
            json!({"messages": [
                user("q"),
                {"role": "assistant", "content": "a", "phase": "commentary", "prefix": "no"},
                {"role": "user", "content": [{"type": "text", "text": "x"}, {"type": "tool_reference", "name": "f"}]},
            ], "tools": [tool("f", json!({"type": "object"}))]}),
            2,
            None,
        ),
        (
            "system-arguments-kept",
            json!({"messages": [
                {"role": "system", "content": "s", "tool_calls": [{"function": {"name": "f", "arguments": "not json"}}]},
                user("q"),
            ]}),
            1,
            None,
        ),
        (
            "schema-invalid",
            json!({"messages": [user("q")], "tools": [tool("f", json!({"type": "foo"}))]}),
            0,
            Some("tool_parameters_invalid"),
        ),
        (
            "names-not-unique",
            json!({"messages": [
                {"role": "system", "content": "s", "tools": [tool("f", json!({"type": "object"}))]},
                user("q"),
            ], "tools": [tool("f", json!({"type": "object"}))]}),
            0,
            Some("tool_names_not_unique"),
        ),
        (
            "phase-invalid",
            json!({"messages": [user("q"), {"role": "assistant", "content": "a", "phase": "draft"}, user("r")]}),
            1,
            Some("phase_not_allowed"),
        ),
        (
            "thinking-not-text",
            json!({"messages": [user("q"), {"role": "assistant", "content": [{"type": "thinking", "thinking": 5}]}, user("r")]}),
            1,
            Some("content_part_without_text"),
        ),
        (
            "arguments-not-json-later",
            json!({"messages": [user("q"), call(json!("{\"n\": 1}")), answer, user("r"), call(json!("{oops")), answer, user("s")],
                   "tools": [tool("f", json!({"type": "object"}))]}),
            2,
            Some("arguments_invalid_json"),
        ),
    ];
    let tokenize = |m: &[Json], t: Option<&Json>| live::tokenize_chat(server.root(), m, t);
    let with = Tokenizing {
        engine: "SGLang",
        server: "sglang",
        model: &server.model_dir,
        tokenize: &tokenize,
    };
    let dir = work_dir().join("edge");
    for (label, record, served, rule) in cases {
        let mut tally = RenderTally::default();
        live::compare_conversation(&with, &dir, label, &record, &mut tally);
        assert!(tally.differ.is_empty(), "{label}: {:#?}", tally.differ);
        assert_eq!(
            (tally.identical, tally.refused_by_both),
            (served, usize::from(rule.is_some())),
            "{label}: {tally:?}"
        );
        // kvaudit refuses it for the rule SGLang applies, not for another reason.
        if let Some(rule) = rule {
            let file = dir.join(format!("conv/{label}.json"));
            let (_, _, stderr) = live::kvaudit_render("sglang", &server.model_dir, &file);
            assert!(stderr.contains(&format!("({rule})")), "{label}: {stderr}");
        }
    }
    server.assert_stand_in_unused();
}

/// `chat_template_kwargs` as SGLang 0.5.23 hands them to transformers 5.19: the keys its
/// render call names itself are refused, transformers' own arguments are refused when truthy
/// (`continue_final_message`) or taken out, and the rest reach the template.
#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn template_kwargs_render_or_are_refused_as_sglang_does() {
    let test = "template_kwargs_render_or_are_refused_as_sglang_does";
    let Some((server, _turn, _)) = server(test) else {
        return;
    };
    let messages = json!([{"role": "user", "content": "Hello there"}]);
    let conv = work_dir().join("kwargs.json");
    std::fs::write(&conv, json!({"messages": messages}).to_string()).unwrap();
    // (key, value, refused)
    let cases = [
        ("enable_thinking", json!(false), false),
        ("continue_final_message", json!(false), false),
        ("continue_final_message", json!(true), true),
        ("padding", json!(true), false),
        ("max_length", json!(3), false),
        ("documents", json!([{"title": "t", "text": "x"}]), false),
        ("tokenize", json!(false), true),
        ("messages", json!([1]), true),
        ("add_generation_prompt", json!(false), true),
    ];
    for (key, value, refused) in cases {
        let body = json!({"model": "tiny", "messages": messages, "add_generation_prompt": true,
            "chat_template_kwargs": {key: value}});
        let (status, answer) = http(server.root(), "POST", "/tokenize", Some(&body));
        let out = common::kvaudit_process()
            .args([
                "render", "--server", "sglang", "--format", "json", "--tokens",
            ])
            .args(["--template-kwarg", &format!("{key}={value}"), "-m"])
            .arg(&server.model_dir)
            .arg("-c")
            .arg(&conv)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        if refused {
            // 400, or 500 where SGLang's own code trips first (`tokenize`: a KeyError).
            assert!(status >= 400, "{key}={value}: {answer}");
            assert_eq!(out.status.code(), Some(2), "{key}={value}: {stderr}");
            assert!(stderr.contains("(template_kwarg_reserved)"), "{stderr}");
        } else {
            assert_eq!(status, 200, "{key}={value}: {answer}");
            let ours: Json = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(
                ours["conversations"][0]["prompts"][0]["ids"], answer["tokens"],
                "{key}={value}: {stderr}"
            );
        }
    }
    server.assert_stand_in_unused();
}

/// `kvaudit watch` proxying to the SGLang server, its KV events bound for as SGLang's publisher
/// connects out: scripted conversations (thinking on and off, streamed and not) attributed
/// request by request. Checked against SGLang itself: the causes of every request sum to the
/// prompt length SGLang reports, `reused` equals SGLang's own `cached_tokens`
/// (`--enable-cache-report`) on every request, and Qwen3's template rewriting the history of a
/// thinking-off conversation is found as `rewritten`.
#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn watch_in_front_of_sglang_agrees_with_its_cached_tokens() {
    let test = "watch_in_front_of_sglang_agrees_with_its_cached_tokens";
    let Some((server, _turn, _)) = server(test) else {
        return;
    };
    let dir = work_dir().join("watch");
    std::fs::create_dir_all(&dir).unwrap();
    let listen = free_port();
    let per_request = dir.join("per-request.jsonl");
    let out = dir.join("watch.json");
    let err = dir.join("watch.err");
    let mut watch = common::kvaudit_process()
        .args([
            "watch",
            "--server",
            "sglang",
            "--block-size",
            &PAGE.to_string(),
        ])
        .args(["--format", "json"])
        .arg("-m")
        .arg(&server.model_dir)
        .args(["--bind", &format!("p0={}", server.events)])
        .args(["--upstream", server.root()])
        .args(["--listen", &format!("127.0.0.1:{listen}")])
        // The pod's view bounded by its own pool, read from its /server_info.
        .args(["--pod-api", &format!("p0={}", server.root())])
        .arg("--per-request")
        .arg(&per_request)
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", listen)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "watch does not listen"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // SGLang's publisher connects out and reconnects on its own: give it time to find watch,
    // then start from an empty cache (a flush publishes AllBlocksCleared).
    std::thread::sleep(Duration::from_secs(3));
    let (status, body) = http(server.root(), "POST", "/flush_cache", None);
    assert_eq!(status, 200, "/flush_cache: {body}");
    std::thread::sleep(Duration::from_millis(500));
    let through = format!("http://127.0.0.1:{listen}");
    let mut usages = Vec::new();
    let mut convs: Vec<(Vec<Json>, bool)> = (0..3)
        .map(|i| {
            let first = format!("Conversation {i}: {QUESTION}");
            (vec![json!({"role": "user", "content": first})], i != 1)
        })
        .collect();
    for turn in 1..=3 {
        for (i, (messages, thinking)) in convs.iter_mut().enumerate() {
            let stream = (i + turn) % 2 == 0;
            let (reply, usage) =
                live::chat(&through, &live::chat_body(messages, *thinking, stream));
            usages.push(usage);
            messages.push(json!({"role": "assistant", "content": reply}));
            messages.push(json!({"role": "user", "content": format!("{FOLLOW_UP} ({turn})")}));
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    let _ = Command::new("kill")
        .args(["-TERM", &watch.id().to_string()])
        .status();
    let status = watch.wait().unwrap();
    let stderr = std::fs::read_to_string(&err).unwrap();
    assert!(status.success(), "watch: {status}: {stderr}");
    server.assert_stand_in_unused();
    let report: Json = serde_json::from_str(&std::fs::read_to_string(&out).unwrap())
        .unwrap_or_else(|e| panic!("watch printed no JSON ({e}): {stderr}"));
    let lines = live::per_request_lines(&per_request);
    let totals = live::check_against_engine(&lines, &usages, &format!("{report:#}\n{stderr}"));
    let _ = writeln!(
        std::io::stderr(),
        "watch in front of SGLang {SGLANG_VERSION}: {} requests, causes {totals:?}",
        lines.len()
    );
    assert_eq!(
        report["totals"]["causes"]["disagreement"],
        json!(0),
        "{report:#}"
    );
    assert_eq!(report["totals"]["unattributed"], json!({}), "{report:#}");
    // The pool SGLang says it has (`--max-total-tokens 65536`, in pages of 16).
    let (status, info) = http(server.root(), "GET", "/server_info", None);
    assert_eq!(status, 200, "/server_info: {info}");
    let pool = info["max_total_num_tokens"].as_u64().unwrap();
    assert_eq!(
        report["totals"]["pods"]["p0"]["capacity"].as_u64(),
        Some(pool / PAGE as u64),
        "{report:#}"
    );
    // One pod: nothing is misrouted or evicted; later turns reuse, the thinking-off
    // conversation's history is rewritten.
    assert_eq!(
        (totals["misrouted"], totals["evicted"]),
        (0, 0),
        "{totals:?}"
    );
    assert!(
        totals["reused"] > 0 && totals["rewritten"] > 0 && totals["new"] > 0,
        "{totals:?}"
    );
}
