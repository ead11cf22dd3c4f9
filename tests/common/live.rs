//! What the live engine tests (vllm_live.rs, sglang_live.rs) share: starting an engine in a
//! process group of its own that stops when the test process exits, HTTP to it, and comparing
//! `kvaudit render` with the engine's own tokenization of a corpus conversation.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::kvaudit_process;
use serde_json::{Value as Json, json};

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// GET or POST on the server; the status and the body (JSON, or the text as a JSON string).
pub fn http(root: &str, method: &str, path: &str, body: Option<&Json>) -> (u16, Json) {
    let agent = ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(300)))
            .build(),
    );
    let url = format!("{root}{path}");
    let mut resp = match (method, body) {
        ("GET", _) => agent.get(&url).call(),
        (_, Some(b)) => agent
            .post(&url)
            .header("Content-Type", "application/json")
            .send(serde_json::to_vec(b).unwrap().as_slice()),
        (_, None) => agent.post(&url).send_empty(),
    }
    .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    let status = resp.status().as_u16();
    let text = resp.body_mut().read_to_string().unwrap_or_default();
    let body = serde_json::from_str(&text).unwrap_or(Json::String(text));
    (status, body)
}

/// An engine process started by [`start_engine`]: stopped (its whole process group) when this
/// test process exits and closes the shell's stdin.
pub struct Engine {
    /// `http://127.0.0.1:PORT`.
    pub root: String,
    pub log: PathBuf,
    _stdin: Mutex<ChildStdin>,
}

/// Start `program args…` (with `env`) in a session of its own behind a shell that kills the
/// session when its stdin reaches end of file, and wait until `GET /health` on `port` answers
/// 200: an error with the log's last lines if it exits or `timeout` passes first.
pub fn start_engine(
    name: &str,
    program: &Path,
    args: &[String],
    env: &[(&str, String)],
    port: u16,
    log: &Path,
    timeout: Duration,
) -> Result<Engine, String> {
    let pid_file = log.with_extension("pid");
    let script = r#"setsid "$@" & pid=$!; echo $pid > "$PIDFILE"; cat >/dev/null; kill -TERM -- -$pid 2>/dev/null; sleep 5; kill -KILL -- -$pid 2>/dev/null; true"#;
    let mut cmd = Command::new("bash");
    cmd.args(["-c", script, name])
        .arg(program)
        .args(args)
        .env("PIDFILE", &pid_file);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(std::fs::File::create(log).unwrap())
        .stderr(Stdio::from(
            std::fs::OpenOptions::new().append(true).open(log).unwrap(),
        ))
        .spawn()
        .map_err(|e| format!("cannot start {name}: {e}"))?;
    let stdin = child.stdin.take().unwrap();
    let started = Instant::now();
    let failed = |why: String| {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(60).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        Err(format!(
            "{why}; {name}'s log ({}):\n{}",
            log.display(),
            tail.join("\n")
        ))
    };
    loop {
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
            let _ = s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
            let mut text = String::new();
            let _ = s.read_to_string(&mut text);
            if text.starts_with("HTTP/1.1 200") {
                break;
            }
        }
        let alive = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|p| std::fs::read_to_string(format!("/proc/{}/stat", p.trim())).ok())
            .is_some_and(|stat| !stat.contains(") Z "));
        if started.elapsed() > Duration::from_secs(5) && !alive {
            return failed(format!("{name} exited during start-up"));
        }
        if started.elapsed() > timeout {
            return failed(format!("{name} did not come up in {timeout:?}"));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let _ = writeln!(
        std::io::stderr(),
        "{name} up in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(Engine {
        root: format!("http://127.0.0.1:{port}"),
        log: log.to_path_buf(),
        _stdin: Mutex::new(stdin),
    })
}

/// The tiny random-weight model of `family` (`qwen3`, `llama`) carrying the real tokenizer
/// and template of ../shared/models/`reference`, written once into `dir` by
/// tests/make_tiny_hf.py with `python` (an engine's environment: torch and transformers).
pub fn tiny_model(python: &Path, shared: &Path, family: &str, reference: &str, dir: &Path) {
    if dir.join("model.safetensors").is_file() {
        return;
    }
    let out = Command::new(python)
        .arg(super::repo_root().join("tests/make_tiny_hf.py"))
        .arg(family)
        .arg(shared.join("models").join(reference))
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "make_tiny_hf.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A message as a client sends it: without the keys a conversation file records about replies.
pub fn sent(m: &Json) -> Json {
    let mut m = m.clone();
    if let Some(o) = m.as_object_mut() {
        for k in ["generated", "generated_ids", "finish_reason"] {
            o.shift_remove(k);
        }
    }
    m
}

/// The engine's ids of prompt `messages` with the generation prompt (`/tokenize` with
/// `messages`: its chat path), or its error status and answer.
pub fn tokenize_chat(
    root: &str,
    messages: &[Json],
    tools: Option<&Json>,
) -> Result<Vec<u32>, (u16, String)> {
    let mut body = json!({
        "model": "tiny",
        "messages": messages.iter().map(sent).collect::<Vec<_>>(),
        "add_generation_prompt": true,
    });
    if let Some(t) = tools {
        body["tools"] = t.clone();
    }
    let (status, answer) = http(root, "POST", "/tokenize", Some(&body));
    if status != 200 {
        return Err((status, answer.to_string()));
    }
    Ok(answer["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_u64().unwrap() as u32)
        .collect())
}

/// `kvaudit render --server SERVER` of one conversation: its prompts' ids, exit code, stderr.
pub fn kvaudit_render(server: &str, model: &Path, conv: &Path) -> (Vec<Vec<u32>>, i32, String) {
    let out = kvaudit_process()
        .args([
            "render", "--server", server, "--format", "json", "--tokens", "-m",
        ])
        .arg(model)
        .arg("-c")
        .arg(conv)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let report: Json = serde_json::from_slice(&out.stdout).unwrap_or(Json::Null);
    let prompts = report["conversations"][0]["prompts"]
        .as_array()
        .map(|ps| {
            ps.iter()
                .map(|p| {
                    p["ids"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|x| x.as_u64().unwrap() as u32)
                        .collect()
                })
                .collect()
        })
        .unwrap_or_default();
    (prompts, out.status.code().unwrap_or(-1), stderr)
}

/// A tool-call conversation with the ids and string arguments vLLM requires, and each tool
/// answer pointing at its call.
pub fn with_call_ids(record: &Json) -> Option<Json> {
    let mut record = record.clone();
    let mut changed = false;
    let mut last_ids: Vec<String> = Vec::new();
    let mut n = 0;
    for m in record["messages"].as_array_mut()? {
        if let Some(calls) = m.get_mut("tool_calls").and_then(Json::as_array_mut) {
            last_ids.clear();
            for c in calls {
                if c.get("id").is_none() {
                    n += 1;
                    c["id"] = json!(format!("call_{n}"));
                    changed = true;
                }
                last_ids.push(c["id"].as_str().unwrap_or("").to_string());
                let args = &mut c["function"]["arguments"];
                if !args.is_string() {
                    *args = json!(args.to_string());
                    changed = true;
                }
            }
        } else if m["role"] == "tool" && m.get("tool_call_id").is_none() && !last_ids.is_empty() {
            m["tool_call_id"] = json!(last_ids.remove(0));
            changed = true;
        }
    }
    changed.then_some(record)
}

#[derive(Default, Debug)]
pub struct RenderTally {
    pub conversations: usize,
    pub prompts: usize,
    pub identical: usize,
    /// Prompts that carry tool definitions, and of those the identical ones.
    pub with_tools: usize,
    pub identical_with_tools: usize,
    pub refused_by_both: usize,
    pub differ: Vec<String>,
}

/// An engine's `/tokenize` of a chat: the ids, or its error status and answer.
pub type TokenizeFn = dyn Fn(&[Json], Option<&Json>) -> Result<Vec<u32>, (u16, String)>;

/// An engine as the render comparison sees it: its name, the `--server` value kvaudit renders
/// it with, its model directory and its `/tokenize`.
pub struct Tokenizing<'a> {
    pub engine: &'a str,
    pub server: &'a str,
    pub model: &'a Path,
    pub tokenize: &'a TokenizeFn,
}

/// Every prompt kvaudit renders equals the engine's `/tokenize` of the same request, and the
/// first request the engine refuses is the one kvaudit refuses (the ones before it rendered by
/// both). The conversation is written under `dir`.
pub fn compare_conversation(
    with: &Tokenizing,
    dir: &Path,
    label: &str,
    record: &Json,
    tally: &mut RenderTally,
) {
    let file = dir.join(format!("conv/{}.json", label.replace([':', '/'], "_")));
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let conv = json!({"messages": record["messages"], "tools": record.get("tools").cloned().unwrap_or(Json::Null)});
    std::fs::write(&file, serde_json::to_vec(&conv).unwrap()).unwrap();
    let messages = record["messages"].as_array().unwrap();
    let tools = record.get("tools").filter(|t| !t.is_null());
    let carries_tools = tools
        .and_then(Json::as_array)
        .is_some_and(|a| !a.is_empty());
    let (ours, code, stderr) = kvaudit_render(with.server, with.model, &file);
    tally.conversations += 1;
    let engine = with.engine;
    let ends = super::prompt_ends(messages);
    for (i, &end) in ends.iter().enumerate() {
        let request = i + 1;
        match (with.tokenize)(&messages[..end], tools) {
            Ok(theirs) => {
                tally.prompts += 1;
                tally.with_tools += usize::from(carries_tools);
                match ours.get(i) {
                    Some(ids) if *ids == theirs => {
                        tally.identical += 1;
                        tally.identical_with_tools += usize::from(carries_tools);
                    }
                    Some(ids) => {
                        let at = ids.iter().zip(&theirs).take_while(|(a, b)| a == b).count();
                        tally.differ.push(format!(
                            "{label} prompt {request}: first difference at token {at} (kvaudit {}, {engine} {} tokens)",
                            ids.len(),
                            theirs.len()
                        ));
                    }
                    None => tally.differ.push(format!(
                        "{label} prompt {request}: {engine} serves it, kvaudit did not render it (exit {code}): {stderr}"
                    )),
                }
            }
            Err((status, why)) => {
                // The engine refuses this request: kvaudit rendered exactly the ones before
                // it and names this one.
                let named =
                    stderr.contains(&format!("request {request}:")) || (request == 1 && code == 2);
                if status == 400 && ours.len() == i && code == 2 && named {
                    tally.refused_by_both += 1;
                } else {
                    tally.differ.push(format!(
                        "{label} request {request}: {engine} answers {status} ({why}); kvaudit rendered {} prompts, exit {code}: {stderr}",
                        ours.len()
                    ));
                }
                break;
            }
        }
    }
}

/// [`compare_conversation`] over `per_file` conversations of every ../shared/corpus file, as
/// sent and (where it has tool calls) with the call ids and string arguments OpenAI clients
/// send: the two tallies.
pub fn compare_corpus(
    with: &Tokenizing,
    dir: &Path,
    shared: &Path,
    per_file: usize,
) -> (RenderTally, RenderTally) {
    let (mut tally, mut with_ids) = (RenderTally::default(), RenderTally::default());
    for (label, record) in super::sampled_corpus(shared, Some(per_file)) {
        compare_conversation(with, dir, &label, &record, &mut tally);
        if let Some(fixed) = with_call_ids(&record) {
            let label = format!("{label}+ids");
            compare_conversation(with, dir, &label, &fixed, &mut with_ids);
        }
    }
    (tally, with_ids)
}

/// A command's stdout as JSON (it must print some).
pub fn json_out(cmd: &mut Command) -> Json {
    let out = cmd.output().unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON ({e}), exit {:?}: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// What a setup script installs outside the repository (an engine's environment, a built
/// server): the path `var` names, else `default`, when `ready` finds it complete; else `None`,
/// and the test says it skips and why (under CI=true it fails: CI installs everything).
pub fn installed(
    test: &str,
    what: &str,
    var: &str,
    default: PathBuf,
    ready: impl Fn(&Path) -> bool,
    script: &str,
) -> Option<PathBuf> {
    let path = std::env::var_os(var).map(PathBuf::from).unwrap_or(default);
    if ready(&path) {
        return Some(path);
    }
    let why = format!(
        "{what} not found at {} (set {var}; {script} installs it)",
        path.display()
    );
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{test}: {why}");
    }
    super::skipped(test, &why);
    None
}

/// A virtual environment a setup script marks complete when it is done, holding `program`.
pub fn complete_venv(program: &'static str) -> impl Fn(&Path) -> bool {
    move |dir: &Path| dir.join(".complete").is_file() && dir.join(program).is_file()
}

/// The set of router versions .ci/routers.sh installs (its cache folder's name).
pub const ROUTERS_KEY: &str = "dynamo-1.6.1+vllm-router-0.1.17+smg-1.13.0";

/// The real routers' environment (.ci/routers.sh), or `None` (the caller skips, saying why;
/// under CI it fails).
pub fn routers_venv(test: &str) -> Option<PathBuf> {
    installed(
        test,
        "the routers' environment",
        "KVAUDIT_ROUTERS_VENV",
        super::user_cache().join(format!("kvaudit-routers/{ROUTERS_KEY}")),
        complete_venv("bin/python"),
        ".ci/routers.sh",
    )
}

/// `kvaudit probe` of the engine at `root` with the model in `model` and `args`; the JSON
/// report, exit code and stderr (the engine's log named if it printed no JSON).
pub fn probe(engine: &Engine, model: &Path, args: &[&str]) -> (Json, i32, String) {
    let out = kvaudit_process()
        .args(["probe", "--format", "json", "--url"])
        .arg(format!("{}/v1", engine.root))
        .arg("-m")
        .arg(model)
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "probe printed no JSON ({e}); stderr: {stderr}; the engine's log: {}",
            engine.log.display()
        )
    });
    (report, out.status.code().unwrap_or(-1), stderr)
}

/// `kvaudit capture --bind events` into `frames` while `work` runs: the engine's publisher
/// connects out, so capture binds first and is given time to be joined (what is published
/// before that is lost) and, after `work`, time for the last messages; then it is stopped
/// as Ctrl-C stops it and must have exited 0 or 1.
pub fn capture_while<T>(events: &str, frames: &Path, work: impl FnOnce() -> T) -> T {
    let _ = std::fs::remove_file(frames);
    let mut capture = kvaudit_process()
        .args(["capture", "--bind", events, "--duration", "300s", "--out"])
        .arg(frames)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    let done = work();
    std::thread::sleep(Duration::from_secs(2));
    let _ = Command::new("kill")
        .args(["-INT", &capture.id().to_string()])
        .status();
    let status = capture.wait().unwrap();
    let mut err = String::new();
    capture
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(
        status.code().is_some_and(|c| c < 2),
        "capture: {status}: {err}"
    );
    done
}

/// One chat request's body for the tests' tiny model (served as `tiny`): 24 tokens at
/// temperature 0, Qwen3's thinking on or off, streamed with the usage chunk or not.
pub fn chat_body(messages: &[Json], thinking: bool, stream: bool) -> Json {
    let mut body = json!({
        "model": "tiny",
        "messages": messages,
        "max_tokens": 24,
        "temperature": 0,
        "seed": 7,
        "chat_template_kwargs": {"enable_thinking": thinking},
    });
    if stream {
        body["stream"] = json!(true);
        body["stream_options"] = json!({"include_usage": true});
    }
    body
}

/// One chat turn through `root`: the reply's text and the usage vLLM reported.
pub fn chat(root: &str, body: &Json) -> (String, Json) {
    let stream = body["stream"] == json!(true);
    let (status, answer) = http(root, "POST", "/v1/chat/completions", Some(body));
    assert_eq!(status, 200, "{answer}");
    if !stream {
        let text = answer["choices"][0]["message"]["content"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        return (text, answer["usage"].clone());
    }
    let raw = answer.as_str().unwrap().to_string();
    let mut text = String::new();
    let mut usage = Json::Null;
    for line in raw.lines() {
        let Some(data) = line.strip_prefix("data: ") else {
            continue;
        };
        if data == "[DONE]" {
            continue;
        }
        let chunk: Json = serde_json::from_str(data).unwrap();
        if let Some(t) = chunk["choices"][0]["delta"]["content"].as_str() {
            text.push_str(t);
        }
        if !chunk["usage"].is_null() {
            usage = chunk["usage"].clone();
        }
    }
    (text, usage)
}

/// watch's causes, in the attribution's order.
pub const CAUSES: [&str; 6] = [
    "reused",
    "misrouted",
    "evicted",
    "block_tail",
    "rewritten",
    "new",
];

/// `watch --per-request` lines, in the order the requests came (by id).
pub fn per_request_lines(path: &Path) -> Vec<Json> {
    let mut lines: Vec<Json> = std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    lines.sort_by_key(|l| l["id"].as_u64());
    lines
}

/// Checks `watch`'s lines (by id) against the usage the engine reported for each request, in
/// the same order: one line a request, the prompt length the engine's, the causes summing to
/// it, `reused` and `engine_cached` the engine's `cached_tokens`. The causes' totals.
pub fn check_against_engine(
    lines: &[Json],
    usages: &[Json],
    context: &str,
) -> std::collections::BTreeMap<&'static str, u64> {
    assert_eq!(lines.len(), usages.len(), "{context}");
    let mut totals = std::collections::BTreeMap::new();
    for (line, usage) in lines.iter().zip(usages) {
        let prompt = usage["prompt_tokens"].as_u64().unwrap();
        let cached = usage["prompt_tokens_details"]["cached_tokens"].as_u64();
        assert!(cached.is_some(), "no cached_tokens: {usage}");
        assert_eq!(
            line["prompt_tokens"].as_u64(),
            Some(prompt),
            "{line} vs {usage}"
        );
        let sum: u64 = CAUSES
            .iter()
            .map(|c| line["causes"][c].as_u64().unwrap())
            .sum();
        assert_eq!(sum, prompt, "{line}");
        assert_eq!(
            line["causes"]["reused"].as_u64(),
            cached,
            "{line} vs {usage}"
        );
        assert_eq!(line["engine_cached"].as_u64(), cached, "{line}");
        for c in CAUSES {
            *totals.entry(c).or_default() += line["causes"][c].as_u64().unwrap();
        }
    }
    totals
}

/// A Go harness's commands (`bin/` of harness/NAME): from `var` (.ci/run sets it), else built
/// (or found built) by .ci/go-harness.sh when Go is on this machine; else `None`, the test
/// skipped saying why (under CI, failed).
pub fn go_harness(test: &str, name: &str, var: &str) -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os(var) {
        return Some(PathBuf::from(dir).join("bin"));
    }
    let go = std::process::Command::new("go").arg("version").output();
    if !go.is_ok_and(|o| o.status.success()) {
        let why =
            format!("Go is not installed (the harness is built with it: .ci/go-harness.sh {name})");
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{test}: {why}");
        }
        super::skipped(test, &why);
        return None;
    }
    let built = std::process::Command::new("bash")
        .arg(super::repo_root().join(".ci/go-harness.sh"))
        .arg(name)
        .stderr(std::process::Stdio::inherit())
        .output()
        .unwrap();
    assert!(built.status.success(), ".ci/go-harness.sh {name} failed");
    let dir = String::from_utf8(built.stdout).unwrap();
    Some(PathBuf::from(dir.trim()).join("bin"))
}

/// Whether pyzmq is there for a test's libzmq publisher (tests/zmq_publisher.py); without it
/// the test is skipped, saying so, and under `KVAUDIT_REQUIRE_REFERENCE=1` it fails.
pub fn pyzmq(test: &str) -> bool {
    let there = Command::new("python3")
        .args(["-c", "import zmq"])
        .status()
        .is_ok_and(|s| s.success());
    if !there {
        if std::env::var("KVAUDIT_REQUIRE_REFERENCE").is_ok_and(|v| v == "1") {
            panic!("pyzmq is required in CI (pip install pyzmq)");
        }
        super::skipped(test, "pyzmq is not installed (pip install pyzmq)");
    }
    there
}

/// tests/zmq_publisher.py sending `frames` (with `args`), and the ports it printed: its
/// publisher's, then its replay socket's.
pub fn zmq_publisher(frames: &Path, args: &[&str]) -> (std::process::Child, Vec<u16>) {
    let mut publisher = Command::new("python3")
        .arg(super::repo_root().join("tests/zmq_publisher.py"))
        .arg(frames)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(publisher.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let ports = line
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    (publisher, ports)
}

/// Asks `child` to stop as an orchestrator does (SIGTERM).
pub fn sigterm(child: &std::process::Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
}

/// `kvaudit watch` once it has ended: it must have exited 0 (its standard error shown if not);
/// its JSON report and its standard output as printed.
pub fn watch_report(
    watch: &mut std::process::Child,
    stderr: &mut impl std::io::Read,
) -> (Json, String) {
    let status = watch.wait().unwrap();
    let mut out = String::new();
    watch
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    if !status.success() {
        let mut err = String::new();
        let _ = stderr.read_to_string(&mut err);
        panic!("watch: {status}: {err}");
    }
    (serde_json::from_str(&out).unwrap(), out)
}

/// Reads `kvaudit watch`'s standard error until it says where `what` (proxy, mirror, metrics)
/// listens; that address.
pub fn watch_listening(stderr: &mut impl std::io::Read, what: &str) -> String {
    let mut seen = String::new();
    let mut byte = [0u8; 1];
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::time::Instant::now() < deadline {
        if stderr.read(&mut byte).unwrap_or(0) == 0 {
            break;
        }
        seen.push(byte[0] as char);
        if seen.ends_with('\n')
            && let Some(addr) = seen
                .lines()
                .last()
                .and_then(|l| l.strip_prefix(&format!("watch: {what} listening on ")))
        {
            return addr.to_string();
        }
    }
    panic!("watch never said where {what} listens: {seen}");
}

/// `program`'s answers to `cases`, one JSON line in and out each (the Go harnesses).
pub fn json_lines(program: &Path, cases: &[Json]) -> Vec<Json> {
    let mut child = Command::new(program)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = String::new();
    for c in cases {
        input.push_str(&c.to_string());
        input.push('\n');
    }
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(out.status.success(), "{}", program.display());
    let answers: Vec<Json> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(answers.len(), cases.len(), "{}", program.display());
    answers
}
