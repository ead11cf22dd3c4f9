//! kvaudit against a running vLLM: the CPU build from PyPI (`.ci/vllm.sh`) serving tiny
//! random-weight models that carry real tokenizers and chat templates (`tests/make_tiny_hf.py`
//! from ../shared/models). Checked against the engine: `render --server vllm` equals vLLM's
//! `/tokenize` on a sample of every ../shared/corpus file, requests vLLM refuses are the ones
//! kvaudit refuses, `probe` agrees on every turn (Qwen3 thinking on and off, Llama 3.1), a
//! reply cut at max_tokens saved by probe audits to what vLLM reused, the block size is read
//! from `/metrics`, and `capture` of the engine's KV events then `replay` gives, per index
//! block size, what `diff-turns` predicts for the same conversation.
//!
//! One server per model family for the whole binary, started on first use (bounded wait,
//! its log shown on failure) and stopped when the test process exits: a shell between the
//! tests and vLLM kills vLLM's process group when its stdin (held by this process) closes.
//! Tests that use a server take its lock and empty its prefix cache first, so each sees only
//! its own requests. The environment is found at KVAUDIT_VLLM_VENV (what .ci/run exports),
//! else where .ci/vllm.sh puts it; without it the tests say they skip (under CI=true they
//! fail).

use crate::common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use common::live::{self, Tokenizing, free_port, http, json_out, routers_venv};
use serde_json::{Value as Json, json};

/// The vLLM release .ci/vllm.sh installs.
const VLLM_VERSION: &str = "0.32.0";
/// vLLM's CPU attention takes only multiples of 32.
const BLOCK: usize = 32;
/// Bound on vLLM's start-up (about 60 s on 2 cores with --enforce-eager).
const START_TIMEOUT: Duration = Duration::from_secs(420);

fn work_dir() -> PathBuf {
    let dir = common::repo_root().join("target/vllm-live");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Family {
    Qwen3,
    Llama,
}

impl Family {
    fn name(self) -> &'static str {
        match self {
            Family::Qwen3 => "qwen3",
            Family::Llama => "llama",
        }
    }

    fn reference(self) -> &'static str {
        match self {
            Family::Qwen3 => "qwen3-8b",
            Family::Llama => "llama-3.1-8b-instruct",
        }
    }
}

/// The vLLM environment, or `None` (the test skips, saying why; under CI it fails).
fn venv(test: &str) -> Option<PathBuf> {
    live::installed(
        test,
        &format!("vLLM {VLLM_VERSION}"),
        "KVAUDIT_VLLM_VENV",
        common::user_cache().join(format!("kvaudit-vllm/{VLLM_VERSION}")),
        live::complete_venv("bin/vllm"),
        ".ci/vllm.sh",
    )
}

/// A running vLLM serving one tiny model.
struct Server {
    engine: live::Engine,
    /// `http://127.0.0.1:PORT`.
    root: String,
    /// Where the KV-event publisher connects (a subscriber binds it), `tcp://127.0.0.1:PORT`.
    events: String,
    model_dir: PathBuf,
    /// One test at a time: the prefix cache is shared state.
    turn: Mutex<()>,
}

fn start(venv: &Path, shared: &Path, family: Family) -> Result<Server, String> {
    let model_dir = work_dir().join(format!("models/tiny-{}", family.name()));
    live::tiny_model(
        &venv.join("bin/python"),
        shared,
        family.name(),
        family.reference(),
        &model_dir,
    );
    let (port, events, replay) = (free_port(), free_port(), free_port());
    let log = work_dir().join(format!("vllm-{}-{port}.log", family.name()));
    let kv_events = json!({
        "enable_kv_cache_events": true,
        "publisher": "zmq",
        "endpoint": format!("tcp://127.0.0.1:{events}"),
        "replay_endpoint": format!("tcp://127.0.0.1:{replay}"),
        "topic": "kv-events",
    });
    let mut args: Vec<String> = vec!["serve".into(), model_dir.display().to_string()];
    for a in [
        "--served-model-name",
        "tiny",
        "--host",
        "127.0.0.1",
        "--port",
        &port.to_string(),
        "--block-size",
        &BLOCK.to_string(),
        "--max-model-len",
        "4096",
        "--enforce-eager",
        "--enable-prompt-tokens-details",
        "--kv-events-config",
        &kv_events.to_string(),
    ] {
        args.push(a.to_string());
    }
    let env = [
        ("VLLM_TARGET_DEVICE", "cpu".to_string()),
        ("VLLM_CPU_KVCACHE_SPACE", "1".to_string()),
        // /reset_prefix_cache, so each test starts from an empty cache.
        ("VLLM_SERVER_DEV_MODE", "1".to_string()),
        ("VLLM_NO_USAGE_STATS", "1".to_string()),
        ("HF_HUB_OFFLINE", "1".to_string()),
    ];
    let name = format!("vLLM {}", family.name());
    let engine = live::start_engine(
        &name,
        &venv.join("bin/vllm"),
        &args,
        &env,
        port,
        &log,
        START_TIMEOUT,
    )?;
    Ok(Server {
        root: engine.root.clone(),
        engine,
        events: format!("tcp://127.0.0.1:{events}"),
        model_dir,
        turn: Mutex::new(()),
    })
}

/// The server of `family` for `test`, its lock held and its prefix cache empty; `None` when
/// the test skips.
fn server(
    test: &str,
    family: Family,
) -> Option<(&'static Server, MutexGuard<'static, ()>, PathBuf)> {
    static QWEN3: OnceLock<Result<Server, String>> = OnceLock::new();
    static LLAMA: OnceLock<Result<Server, String>> = OnceLock::new();
    let shared = common::shared_dir(test)?;
    let venv = venv(test)?;
    let cell = match family {
        Family::Qwen3 => &QWEN3,
        Family::Llama => &LLAMA,
    };
    let server = match cell.get_or_init(|| start(&venv, &shared, family)) {
        Ok(s) => s,
        Err(e) => panic!("{test}: {e}"),
    };
    let guard = server.turn.lock().unwrap_or_else(|e| e.into_inner());
    let (status, body) = http(&server.root, "POST", "/reset_prefix_cache", None);
    assert_eq!(status, 200, "/reset_prefix_cache: {body}");
    Some((server, guard, shared))
}

#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn render_equals_vllm_tokenize_on_every_corpus_file() {
    let test = "render_equals_vllm_tokenize_on_every_corpus_file";
    let Some((server, _turn, shared)) = server(test, Family::Qwen3) else {
        return;
    };
    let tokenize = |m: &[Json], t: Option<&Json>| live::tokenize_chat(&server.root, m, t);
    let with = Tokenizing {
        engine: "vLLM",
        server: "vllm",
        model: &server.model_dir,
        tokenize: &tokenize,
    };
    let (tally, with_ids) = live::compare_corpus(&with, &work_dir(), &shared, 4);
    let _ = writeln!(
        std::io::stderr(),
        "render vs vLLM /tokenize: {} conversations, {} prompts, {} identical, {} refused by both; \
         with tool-call ids: {} conversations, {} prompts, {} identical, {} refused by both",
        tally.conversations,
        tally.prompts,
        tally.identical,
        tally.refused_by_both,
        with_ids.conversations,
        with_ids.prompts,
        with_ids.identical,
        with_ids.refused_by_both,
    );
    let differ: Vec<&String> = tally.differ.iter().chain(&with_ids.differ).collect();
    assert!(differ.is_empty(), "{} differ:\n{:#?}", differ.len(), differ);
    assert!(tally.conversations >= 30, "{tally:?}");
    assert!(
        tally.refused_by_both > 0,
        "no conversation exercised a refusal"
    );
    assert!(
        with_ids.identical > 0,
        "no tool-call conversation rendered with ids"
    );
}

/// `kvaudit probe` against `server`; the JSON report, exit code and stderr.
fn probe(server: &Server, extra: &[&str]) -> (Json, i32, String) {
    let args = [&["--server", "vllm"], extra].concat();
    live::probe(&server.engine, &server.model_dir, &args)
}

/// Every turn agrees: the server's prompt ids are kvaudit's, and from turn 2 on it reused
/// exactly the predicted number of tokens, more than none.
fn assert_agrees(what: &str, report: &Json, code: i32, stderr: &str) {
    let turns = report["turns"].as_array().unwrap();
    assert!(turns.len() >= 3, "{what}: {} turns", turns.len());
    for t in turns {
        assert_eq!(t["verdict"], json!("agrees"), "{what}: {t:#}");
        assert_eq!(
            t["server_prompt_ids_from"],
            json!("prompt_token_ids"),
            "{what}"
        );
        assert_eq!(t["generated_ids_from"], json!("sampled"), "{what}");
    }
    for t in &turns[1..] {
        assert_eq!(
            t["server_cached_tokens"], t["predicted_cached_tokens"],
            "{what}: {t:#}"
        );
    }
    // A random reply can retokenize differently and end the reuse early, but never on every
    // turn: a check that only ever compared zeros would check nothing.
    let reused: u64 = turns[1..]
        .iter()
        .map(|t| t["server_cached_tokens"].as_u64().unwrap())
        .sum();
    assert!(reused > 0, "{what}: no turn reused anything");
    assert_eq!(code, 0, "{what}: {stderr}");
}

#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn probe_agrees_with_vllm_on_qwen3_thinking_on_and_off() {
    let test = "probe_agrees_with_vllm_on_qwen3_thinking_on_and_off";
    for (what, extra) in [
        ("thinking on", vec![]),
        (
            "thinking off",
            vec!["--template-kwarg", "enable_thinking=false"],
        ),
    ] {
        let Some((server, _turn, _)) = server(test, Family::Qwen3) else {
            return;
        };
        let mut args = vec!["--block-size", "32", "--max-tokens", "40"];
        args.extend(extra);
        let (report, code, stderr) = probe(server, &args);
        assert_agrees(what, &report, code, &stderr);
        assert_eq!(report["server"]["block_size_from"], json!("--block-size"));
    }
}

#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn probe_agrees_with_vllm_on_llama_3_1() {
    let test = "probe_agrees_with_vllm_on_llama_3_1";
    let Some((server, _turn, _)) = server(test, Family::Llama) else {
        return;
    };
    let (report, code, stderr) = probe(server, &["--block-size", "32", "--max-tokens", "40"]);
    assert_agrees("llama 3.1", &report, code, &stderr);
}

/// Without --block-size, probe reads vLLM's from /metrics and says so.
#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn probe_reads_the_block_size_from_vllm_metrics() {
    let test = "probe_reads_the_block_size_from_vllm_metrics";
    let Some((server, _turn, _)) = server(test, Family::Qwen3) else {
        return;
    };
    let (report, code, stderr) = probe(server, &["--max-tokens", "24"]);
    assert_eq!(report["server"]["block_size"], json!(BLOCK), "{stderr}");
    assert_eq!(report["server"]["block_size_from"], json!("/metrics"));
    assert_agrees("block size from /metrics", &report, code, &stderr);
}

/// The same chat probed twice (temperature 0, so the same replies): the second run's turn 2
/// finds its whole prompt cached, more than turn 1's reply left, and the report traces that
/// to the cache holding the chat before the probe began.
#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn probe_says_why_vllm_reused_more_than_predicted() {
    let test = "probe_says_why_vllm_reused_more_than_predicted";
    let Some((server, _turn, _)) = server(test, Family::Qwen3) else {
        return;
    };
    // A question no other test sends, and a follow-up longer than a block, so that turn 2's
    // whole prompt reaches past the blocks turn 1 left.
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let question = format!("Run {nonce}: what does a prefix cache keep between requests?");
    let follow_up = "Thanks. Now compare that with a paged attention cache, naming every \
                     structure involved, how blocks are hashed and looked up, and what happens \
                     to them when a request finishes or the pool runs out of free blocks.";
    let run = || chat_probe(server, &question, follow_up, 2, 24, &[]);
    let (first, code, stderr) = run();
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        first["turns"][0]["server_cached_tokens"],
        json!(0),
        "{first:#}"
    );
    let (second, code, stderr) = run();
    let turns = second["turns"].as_array().unwrap();
    let turn_1_cached = turns[0]["server_cached_tokens"].as_u64().unwrap();
    assert!(turn_1_cached > 0, "{second:#}");
    let t = &turns[1];
    assert_eq!(t["verdict"], json!("reused_more"), "{t:#}");
    assert!(
        t["server_cached_tokens"].as_u64() > t["predicted_cached_tokens"].as_u64(),
        "{t:#}"
    );
    assert_eq!(
        t["more_reuse"],
        json!({"cause": "before_the_probe", "turn_1_cached_tokens": turn_1_cached}),
        "{t:#}"
    );
    assert_eq!(code, 1, "{stderr}");
}

const QUESTION: &str = "Explain how a KV cache speeds up decoding.";
const FOLLOW_UP: &str = "And what evicts it?";

/// `probe` of a two-message chat with thinking off: `question`, then `follow_up`, `turns`
/// turns of at most `max_tokens`, block size 32, with `extra` flags.
fn chat_probe(
    server: &Server,
    question: &str,
    follow_up: &str,
    turns: usize,
    max_tokens: usize,
    extra: &[&str],
) -> (Json, i32, String) {
    let (turns, max_tokens) = (turns.to_string(), max_tokens.to_string());
    let mut args = vec![
        "--block-size",
        "32",
        "--template-kwarg",
        "enable_thinking=false",
        "--user",
        question,
        "--follow-up",
        follow_up,
        "--turns",
        &turns,
        "--max-tokens",
        &max_tokens,
    ];
    args.extend_from_slice(extra);
    probe(server, &args)
}

/// `probe` of the quick-form chat (QUESTION, then FOLLOW_UP) saved to `saved`; probe's report
/// (it must exit 0).
fn quick_probe(server: &Server, turns: usize, max_tokens: usize, saved: &Path) -> Json {
    let saved = saved.to_str().unwrap();
    let (report, code, stderr) = chat_probe(
        server,
        QUESTION,
        FOLLOW_UP,
        turns,
        max_tokens,
        &["--save-conversation", saved],
    );
    assert_eq!(code, 0, "{stderr}");
    report
}

/// One quick-form turn saved by probe, the follow-up appended: a conversation `diff-turns`
/// audits.
fn one_turn(server: &Server, name: &str, max_tokens: usize) -> PathBuf {
    let saved = work_dir().join(format!("{name}.json"));
    quick_probe(server, 1, max_tokens, &saved);
    let mut conv: Json = serde_json::from_slice(&std::fs::read(&saved).unwrap()).unwrap();
    conv["messages"]
        .as_array_mut()
        .unwrap()
        .push(json!({"role": "user", "content": FOLLOW_UP}));
    std::fs::write(&saved, serde_json::to_vec(&conv).unwrap()).unwrap();
    saved
}

/// The engine's KV events, captured live, replayed through the index at each block size:
/// what the index stores and finds of turn 2's prompt is what diff-turns predicts for the same
/// conversation from its text alone.
#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn capture_then_replay_gives_what_diff_turns_predicts() {
    let test = "capture_then_replay_gives_what_diff_turns_predicts";
    let Some((server, _turn, _)) = server(test, Family::Qwen3) else {
        return;
    };
    let frames = work_dir().join("live.frames");
    // vLLM's publisher connects to a host:port endpoint (it binds only `*`), so capture binds
    // on loopback.
    let conv = live::capture_while(&server.events, &frames, || {
        one_turn(server, "capture-turn", 100)
    });

    // Turn 2's prompt ids, the lookup replay makes.
    let rendered = json_out(
        common::kvaudit_process()
            .args([
                "render", "--server", "vllm", "--tokens", "--format", "json", "--prompt", "2",
            ])
            .args(["--template-kwarg", "enable_thinking=false", "-m"])
            .arg(&server.model_dir)
            .arg("-c")
            .arg(&conv),
    );
    let next_ids = rendered["conversations"][0]["prompts"][0]["ids"].clone();
    let lookup = work_dir().join("live-lookup.json");
    std::fs::write(&lookup, json!([next_ids]).to_string()).unwrap();

    let mut compared = 0;
    for index in [16, 32, 64, 128] {
        let predicted = json_out(
            common::kvaudit_process()
                .args(["diff-turns", "--server", "vllm", "--format", "json"])
                .args(["--template-kwarg", "enable_thinking=false"])
                .args([
                    "--engine-block-size",
                    "32",
                    "--index-block-size",
                    &index.to_string(),
                ])
                .arg("-m")
                .arg(&server.model_dir)
                .arg("-c")
                .arg(&conv),
        );
        let router = &predicted["conversations"][0]["transitions"][0]["router"];
        let replayed = json_out(
            common::kvaudit_process()
                .args([
                    "replay",
                    "--format",
                    "json",
                    "--index-block-size",
                    &index.to_string(),
                ])
                // The engine publishes under `kv-events`, which llm-d's default topic filter
                // (`kv@`) never receives (checked below): an empty filter receives it.
                .args(["--topic-filter", ""])
                .arg("--lookup")
                .arg(&lookup)
                .arg(&frames),
        );
        let view = &replayed["views"][0];
        let what = format!("index block {index}: predicted {router:#}\nreplayed {view:#}");
        assert_eq!(
            replayed["events"]["block_stored"], router["events_emitted"],
            "{what}"
        );
        assert_eq!(view["stores_skipped"], router["events_skipped"], "{what}");
        assert_eq!(
            view["lookups"][0]["index_tokens"], router["index_visible_tokens"],
            "{what}"
        );
        // The engine stored every full block of prompt + reply (less the last token).
        let held = predicted["conversations"][0]["transitions"][0]["held_tokens"]
            .as_u64()
            .unwrap();
        assert_eq!(
            view["sequences"][0]["engine_tokens"],
            json!(held / BLOCK as u64 * BLOCK as u64),
            "{what}"
        );
        compared += 1;
    }
    assert_eq!(compared, 4);
    // With llm-d's default topic filter nothing of it is received: every message is counted.
    let unfiltered = json_out(
        common::kvaudit_process()
            .args(["replay", "--format", "json"])
            .arg(&frames),
    );
    assert_eq!(
        unfiltered["views"][0]["messages_dropped"],
        json!({"topic_filter": unfiltered["messages"]}),
        "{unfiltered:#}"
    );

    // The same live capture through the real Dynamo indexer (tests/routers_live.rs runs it
    // on the reference captures): its answer for turn 2 equals `replay --router dynamo`'s
    // at the engine's block size and at others, and diff-turns' prediction at the engine's.
    let Some(routers) = routers_venv(test) else {
        return;
    };
    let predicted = json_out(
        common::kvaudit_process()
            .args(["diff-turns", "--server", "vllm", "--format", "json"])
            .args(["--template-kwarg", "enable_thinking=false"])
            .args(["--engine-block-size", "32", "--router", "dynamo"])
            .arg("-m")
            .arg(&server.model_dir)
            .arg("-c")
            .arg(&conv),
    );
    let dynamo = &predicted["conversations"][0]["transitions"][0]["routers"][0];
    // Turn 2's prompt, and what the engine holds after turn 1 (render --held).
    let held = json_out(
        common::kvaudit_process()
            .args([
                "render", "--server", "vllm", "--tokens", "--format", "json", "--held", "1",
            ])
            .args(["--template-kwarg", "enable_thinking=false", "-m"])
            .arg(&server.model_dir)
            .arg("-c")
            .arg(&conv),
    );
    let held_ids = held["conversations"][0]["held"][0]["ids"].clone();
    let held_len = held_ids.as_array().unwrap().len() as u64;
    let lookups = work_dir().join("live-lookups-dynamo.json");
    std::fs::write(&lookups, json!([next_ids, held_ids]).to_string()).unwrap();
    for block in [16, 32, 64] {
        let real = json_out(
            Command::new(routers.join("bin/python"))
                .arg(common::repo_root().join("tests/routers/dynamo_indexer.py"))
                .arg("--capture")
                .arg(&frames)
                .args(["--block-size", &block.to_string(), "--lookups"])
                .arg(&lookups),
        );
        let replayed = json_out(
            common::kvaudit_process()
                .args(["replay", "--format", "json"])
                .args(["--router", &format!("dynamo:block_size={block}")])
                .arg("--lookup")
                .arg(&lookups)
                .arg(&frames),
        );
        for i in 0..2 {
            let theirs = &real["lookups"][i]["matched_tokens"];
            let ours = &replayed["views"][0]["lookups"][i]["index_tokens"];
            assert_eq!(
                ours, theirs,
                "Dynamo at block {block}, lookup {i}: {real:#}"
            );
        }
        let (next_found, held_found) = (
            &real["lookups"][0]["matched_tokens"],
            &real["lookups"][1]["matched_tokens"],
        );
        if block == BLOCK {
            // Every full block the engine holds; of turn 2, what diff-turns predicted.
            assert_eq!(
                held_found,
                &json!(held_len / BLOCK as u64 * BLOCK as u64),
                "{real:#}"
            );
            assert_eq!(&dynamo["visible_tokens"], next_found, "{dynamo:#}");
        } else {
            assert_eq!((next_found, held_found), (&json!(0), &json!(0)), "{real:#}");
        }
    }
}

/// A reply cut at max_tokens where prompt + reply end exactly on a block boundary: vLLM
/// never computed the last sampled token's KV, so one block fewer is reused. probe predicts
/// it live, and diff-turns on what probe saved counts the same.
#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn a_reply_cut_on_a_block_boundary_audits_to_what_vllm_reused() {
    let test = "a_reply_cut_on_a_block_boundary_audits_to_what_vllm_reused";
    let Some((server, _turn, _)) = server(test, Family::Qwen3) else {
        return;
    };
    // Prompt 1's length, so that prompt + reply fill exactly three blocks.
    let prompt = json_out(
        common::kvaudit_process()
            .args([
                "render", "--server", "vllm", "--format", "json", "--prompt", "1",
            ])
            .args(["--template-kwarg", "enable_thinking=false"])
            .args([
                "--user",
                QUESTION,
                "--reply",
                "x",
                "--follow-up",
                FOLLOW_UP,
                "-m",
            ])
            .arg(&server.model_dir),
    );
    let prompt_tokens = prompt["conversations"][0]["prompts"][0]["token_count"]
        .as_u64()
        .unwrap() as usize;
    let max_tokens = 3 * BLOCK - prompt_tokens;
    // Both turns live with the same limit; turn 2's reuse is what vLLM did after the cut.
    let saved = work_dir().join("cut-turns.json");
    let report = quick_probe(server, 2, max_tokens, &saved);
    let turns = report["turns"].as_array().unwrap();
    assert_eq!(turns[0]["finish_reason"], json!("length"), "{report:#}");
    let recorded: Json = serde_json::from_slice(&std::fs::read(&saved).unwrap()).unwrap();
    assert_eq!(recorded["messages"][1]["finish_reason"], json!("length"));

    let audited = json_out(
        common::kvaudit_process()
            .args([
                "diff-turns",
                "--server",
                "vllm",
                "--format",
                "json",
                "--block-sizes",
                "32",
            ])
            .args(["--template-kwarg", "enable_thinking=false", "-m"])
            .arg(&server.model_dir)
            .arg("-c")
            .arg(&saved),
    );
    let t = &audited["conversations"][0]["transitions"][0];
    let n = |k: &str| t[k].as_u64().unwrap() as usize;
    assert_eq!(n("held_tokens"), 3 * BLOCK - 1, "{t:#}");
    // vLLM's rule on diff-turns' numbers equals what vLLM reused.
    let reusable = n("common_prefix_tokens")
        .min(n("held_tokens"))
        .min(n("next_prompt_tokens") - 1);
    assert_eq!(
        turns[1]["server_cached_tokens"].as_u64().unwrap() as usize,
        reusable / BLOCK * BLOCK,
        "{t:#}\n{:#}",
        turns[1]
    );
}
