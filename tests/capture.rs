//! `kvaudit capture` against in-test publishers on loopback: a pure-Rust XPUB/ROUTER pair and
//! a libzmq one through pyzmq, in vLLM's frame layout.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command as Process, Stdio};
use std::time::Duration;

use bytes::Bytes;
use serde_json::Value as Json;
use zeromq::{RouterSocket, Socket, SocketRecv, SocketSend, XPubSocket, ZmqMessage};

/// The frames of a `.frames` file: (topic, seq, payload).
use common::event_fixtures::read_frames;

/// The capture the publishers send: the committed two-pod fixture (kvaudit's encoder,
/// vLLM 0.33's layout; tests/common/event_fixtures.rs), so these tests run without ../shared.
fn source() -> PathBuf {
    common::fixtures().join("events/two-pods.frames")
}

/// vLLM's own s3 capture, when ../shared is there.
fn s3() -> Option<PathBuf> {
    Some(
        common::shared_dir("captures_byte_for_byte on s3.frames")?
            .join("fixtures/vllm-events/s3.frames"),
    )
}

type Frames = Vec<Vec<Vec<u8>>>;

fn as_messages(frames: &[(Vec<u8>, u64, Vec<u8>)]) -> Frames {
    frames
        .iter()
        .map(|(t, s, p)| vec![t.clone(), s.to_be_bytes().to_vec(), p.clone()])
        .collect()
}

/// The replay (ROUTER) socket beside an in-test publisher.
enum Router {
    None,
    /// Like vLLM's: for a request from `start`, every message of the list with
    /// `start <= seq <=` the highest seq published live so far, then the end marker.
    Serve(Frames),
    /// The same in vLLM < 0.26's layout: `[seq, payload]`, no topic.
    ServeLegacy(Frames),
    /// Binds and reads requests, never answers.
    Silent,
    /// Answers each request with 1 MB messages (seqs far beyond any gap) and no end marker,
    /// until the requester goes away.
    Flood,
}

/// Runs an XPUB publisher (and optionally a ROUTER replay server) on a background runtime.
/// It waits for the first subscription before sending, so no message is lost to the slow
/// joiner, then sends every message with `gap` between them.
struct Publisher {
    port: u16,
    replay_port: Option<u16>,
    handle: std::thread::JoinHandle<()>,
}

fn seq_of(m: &[Vec<u8>]) -> Option<u64> {
    Some(u64::from_be_bytes(m.get(1)?.as_slice().try_into().ok()?))
}

fn start_publisher(messages: Frames, gap: Duration, router: Router) -> Publisher {
    let (ports_tx, ports_rx) = std::sync::mpsc::channel();
    let handle = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let mut xpub = XPubSocket::new();
            let ep = xpub.bind("tcp://127.0.0.1:0").await.unwrap();
            let port = port_of(&ep.to_string());
            let mut socket = None;
            let mut replay_port = None;
            if !matches!(router, Router::None) {
                let mut r = RouterSocket::new();
                let rep = r.bind("tcp://127.0.0.1:0").await.unwrap();
                replay_port = Some(port_of(&rep.to_string()));
                socket = Some(r);
            }
            ports_tx.send((port, replay_port)).unwrap();
            // The subscription message (0x01 + prefix) tells us the subscriber is in.
            let _ = tokio::time::timeout(Duration::from_secs(20), xpub.recv()).await;
            tokio::time::sleep(Duration::from_millis(50)).await;
            // The highest seq published so far: what a real replay buffer could hold.
            let high = std::cell::Cell::new(0u64);
            let serve = async {
                let Some(mut r) = socket else {
                    return std::future::pending::<()>().await;
                };
                loop {
                    let Ok(req) = r.recv().await else { return };
                    let req = req.into_vec();
                    let id = req[0].clone();
                    let start = req
                        .last()
                        .and_then(|f| <[u8; 8]>::try_from(f.as_ref()).ok())
                        .map_or(0, u64::from_be_bytes);
                    let reply = |frames: Vec<Bytes>| {
                        let mut all = vec![id.clone(), Bytes::new()];
                        all.extend(frames);
                        ZmqMessage::try_from(all).unwrap()
                    };
                    match &router {
                        Router::None | Router::Silent => continue,
                        Router::Serve(msgs) | Router::ServeLegacy(msgs) => {
                            let legacy = usize::from(matches!(router, Router::ServeLegacy(_)));
                            for m in msgs {
                                let seq = seq_of(m).unwrap();
                                if start <= seq && seq <= high.get() {
                                    let frames =
                                        m[legacy..].iter().map(|f| Bytes::copy_from_slice(f));
                                    let _ = r.send(reply(frames.collect())).await;
                                }
                            }
                            if legacy == 1 {
                                let end = vec![Bytes::copy_from_slice(&[0xff; 8]), Bytes::new()];
                                let _ = r.send(reply(end)).await;
                                continue;
                            }
                        }
                        Router::Flood => {
                            let payload = Bytes::from(mb_payload());
                            for i in 0..2048u64 {
                                let seq = (start + 1_000_000 + i).to_be_bytes();
                                let frames = vec![
                                    Bytes::from_static(b"kv@pod-a@m"),
                                    Bytes::copy_from_slice(&seq),
                                    payload.clone(),
                                ];
                                if r.send(reply(frames)).await.is_err() {
                                    break;
                                }
                                tokio::task::yield_now().await;
                            }
                            continue;
                        }
                    }
                    let end = vec![
                        Bytes::new(),
                        Bytes::copy_from_slice(&[0xff; 8]),
                        Bytes::new(),
                    ];
                    let _ = r.send(reply(end)).await;
                }
            };
            let send = async {
                for m in messages {
                    if let Some(seq) = seq_of(&m) {
                        high.set(high.get().max(seq));
                    }
                    let frames: Vec<Bytes> = m.into_iter().map(Bytes::from).collect();
                    xpub.send(ZmqMessage::try_from(frames).unwrap())
                        .await
                        .unwrap();
                    tokio::time::sleep(gap).await;
                }
                // Keep serving replays briefly after the last message.
                tokio::time::sleep(Duration::from_millis(500)).await;
            };
            tokio::select! {
                _ = send => {}
                _ = serve => {}
            }
        });
    });
    let (port, replay_port) = ports_rx.recv().unwrap();
    Publisher {
        port,
        replay_port,
        handle,
    }
}

/// A msgpack bin32 of 1 MiB.
fn mb_payload() -> Vec<u8> {
    let n = 1usize << 20;
    let mut p = vec![0xc6];
    p.extend_from_slice(&(n as u32).to_be_bytes());
    p.resize(5 + n, 0xab);
    p
}

fn port_of(endpoint: &str) -> u16 {
    endpoint.rsplit(':').next().unwrap().parse().unwrap()
}

fn capture(args: &[String]) -> Child {
    common::kvaudit_process()
        .arg("capture")
        .args(args)
        .args(["--format", "json", "--duration", "30s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn finish(child: Child) -> (i32, Json, String) {
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    (out.status.code().unwrap_or(-1), v, stderr)
}

fn args(port: u16, out: &Path, extra: &[&str]) -> Vec<String> {
    let mut a = vec![
        "--endpoint".into(),
        format!("tcp://127.0.0.1:{port}"),
        "--out".into(),
        out.display().to_string(),
    ];
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

/// The committed fixture always, vLLM's s3 capture too when ../shared is there.
#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn captures_byte_for_byte() {
    captures_byte_for_byte_from(&source(), 8, 8);
    if let Some(s3) = s3() {
        captures_byte_for_byte_from(&s3, 11, 20);
    }
}

fn captures_byte_for_byte_from(src: &Path, messages: u64, events: u64) {
    let frames = read_frames(src);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cap.frames");
    let publisher = start_publisher(as_messages(&frames), Duration::from_millis(2), Router::None);
    let child = capture(&args(
        publisher.port,
        &out,
        &["--max-messages", &frames.len().to_string()],
    ));
    let (code, v, err) = finish(child);
    publisher.handle.join().unwrap();
    assert_eq!(code, 0, "{err}");
    assert!(
        std::fs::read(&out).unwrap() == std::fs::read(src).unwrap(),
        "byte-identical capture: {} frames",
        read_frames(&out).len()
    );
    assert_eq!(v["messages"], messages);
    assert_eq!(v["events"], events);
    assert_eq!(v["gaps"], serde_json::json!([]));
    assert_eq!(
        v["publishers"].as_array().unwrap().len(),
        2,
        "two topics, two sequences"
    );
    assert_eq!(v["stopped_by"], "max messages");
}

#[test]
fn gaps_are_reported_then_recovered_through_replay() {
    let src = source();
    let frames = read_frames(&src);
    // Drop pod-a's seq 2 from the live stream.
    let missing = frames
        .iter()
        .position(|(t, s, _)| t == b"kv@pod-a@demo-model" && *s == 2)
        .unwrap();
    let mut live = frames.clone();
    let dropped = live.remove(missing);
    let dir = tempfile::tempdir().unwrap();

    let out = dir.path().join("gap.frames");
    let publisher = start_publisher(as_messages(&live), Duration::from_millis(2), Router::None);
    let (code, v, _) = finish(capture(&args(
        publisher.port,
        &out,
        &["--max-messages", &live.len().to_string()],
    )));
    publisher.handle.join().unwrap();
    assert_eq!(code, 1, "an unrecovered gap is a finding");
    assert_eq!(
        v["gaps"],
        serde_json::json!([{"endpoint": format!("tcp://127.0.0.1:{}", publisher.port), "topic": "kv@pod-a@demo-model", "after_seq": 1, "missing": 1, "recovered": 0}])
    );

    let out = dir.path().join("recovered.frames");
    let replay = as_messages(&[dropped]);
    let publisher = start_publisher(
        as_messages(&live),
        Duration::from_millis(2),
        Router::Serve(replay),
    );
    let rep = format!("tcp://127.0.0.1:{}", publisher.replay_port.unwrap());
    let (code, v, err) = finish(capture(&args(
        publisher.port,
        &out,
        &[
            "--max-messages",
            &frames.len().to_string(),
            "--replay-endpoint",
            &rep,
        ],
    )));
    publisher.handle.join().unwrap();
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["gaps"][0]["recovered"], 1);
    assert_eq!(v["gaps_unrecovered"], 0);
    assert_eq!(v["replay_endpoints"][0]["recovered"], 1);
    assert_eq!(v["messages"], frames.len());
    assert_publishers_add_up(&v);
    assert_eq!(
        sorted(read_frames(&out)),
        sorted(frames),
        "recovered capture holds the original frames (the recovered one where it arrived)"
    );
}

/// The per-publisher counts add up to the total: recovered messages count for their
/// publisher too (the summary said "captured 2000 messages" over "(1999 messages)").
fn assert_publishers_add_up(v: &Json) {
    let per_publisher: u64 = v["publishers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["messages"].as_u64().unwrap())
        .sum();
    assert_eq!(per_publisher, v["messages"].as_u64().unwrap(), "{v:#}");
}

/// Frames in seq order within each topic: recovered frames are written when they arrive.
fn sorted(mut frames: Vec<(Vec<u8>, u64, Vec<u8>)>) -> Vec<(Vec<u8>, u64, Vec<u8>)> {
    frames.sort();
    frames
}

#[test]
fn restarts_and_malformed_messages_do_not_stop_capture() {
    let src = source();
    let frames = read_frames(&src);
    let (t, _, p) = frames[0].clone();
    let msg = |seq: u64| vec![t.clone(), seq.to_be_bytes().to_vec(), p.clone()];
    let messages = vec![
        msg(0),
        msg(1),
        vec![t.clone(), 2u64.to_be_bytes().to_vec()],
        vec![t.clone(), vec![0, 0, 0, 2], p.clone()],
        vec![
            t.clone(),
            2u64.to_be_bytes().to_vec(),
            b"\xc1 not msgpack".to_vec(),
        ],
        msg(2),
        msg(0),
        msg(1),
    ];
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("restart.frames");
    let publisher = start_publisher(messages, Duration::from_millis(2), Router::None);
    let (code, v, err) = finish(capture(&args(
        publisher.port,
        &out,
        &["--max-messages", "5"],
    )));
    publisher.handle.join().unwrap();
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["malformed"], 3);
    let kinds = &v["malformed_kinds"];
    let detail = |kind: &str| kinds[kind]["examples"][0]["detail"].as_str().unwrap();
    assert!(
        detail("frame_count").contains("2 frames")
            && detail("sequence_frame").contains("4-byte sequence")
            && detail("not_msgpack").contains("msgpack"),
        "{kinds}"
    );
    for kind in ["frame_count", "sequence_frame", "not_msgpack"] {
        assert_eq!(kinds[kind]["count"], 1, "{kinds}");
    }
    assert_eq!(v["gaps"], serde_json::json!([]), "a restart is not a gap");
    assert_eq!(v["restarts"][0]["from_seq"], 2);
    assert_eq!(v["restarts"][0]["to_seq"], 0);
    assert_eq!(read_frames(&out).len(), 5);
}

#[test]
fn sigterm_leaves_whole_frames_that_replay() {
    let src = source();
    let frames = read_frames(&src);
    // Many messages, slowly, so the signal lands mid-stream.
    let mut messages = Vec::new();
    for i in 0..400u64 {
        // One topic: its sequence must run without gaps.
        let (t, _, _) = &frames[0];
        let (_, _, p) = &frames[(i % 3) as usize];
        messages.push(vec![t.clone(), i.to_be_bytes().to_vec(), p.clone()]);
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("term.frames");
    let publisher = start_publisher(messages.clone(), Duration::from_millis(5), Router::None);
    let child = capture(&args(publisher.port, &out, &[]));
    std::thread::sleep(Duration::from_millis(900));
    Process::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let (code, v, err) = finish(child);
    publisher.handle.join().unwrap();
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["stopped_by"], "terminated");
    let got = read_frames(&out);
    assert!(
        !got.is_empty() && got.len() < 400,
        "stopped mid-stream: {}",
        got.len()
    );
    assert_eq!(got.len() as u64, v["messages"].as_u64().unwrap());
    for (i, (t, s, p)) in got.iter().enumerate() {
        assert_eq!(
            (t, *s, p),
            (&messages[i][0], i as u64, &messages[i][2]),
            "frame {i}"
        );
    }
    let replay = common::kvaudit_process()
        .args(["replay", &out.display().to_string(), "--format", "json"])
        .output()
        .unwrap();
    assert_ne!(
        replay.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&replay.stderr)
    );
}

#[test]
fn live_replay_reports_like_replay() {
    let src = source();
    let frames = read_frames(&src);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("live.frames");
    let publisher = start_publisher(as_messages(&frames), Duration::from_millis(2), Router::None);
    let (code, v, err) = finish(capture(&args(
        publisher.port,
        &out,
        &[
            "--max-messages",
            "11",
            "--live-replay",
            "--index-block-size",
            "16,64",
        ],
    )));
    publisher.handle.join().unwrap();
    assert_eq!(code, 0, "{err}");
    let offline = common::kvaudit_process()
        .args([
            "replay",
            &src.display().to_string(),
            "--format",
            "json",
            "--index-block-size",
            "16,64",
        ])
        .output()
        .unwrap();
    let offline: Json = serde_json::from_slice(&offline.stdout).unwrap();
    assert_eq!(v["replay"]["views"], offline["views"]);
}

#[test]
fn unreachable_publisher_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = common::kvaudit_process()
        .args([
            "capture",
            "--endpoint",
            "tcp://127.0.0.1:9",
            "--out",
            &dir.path().join("x.frames").display().to_string(),
            "--connect-timeout",
            "500ms",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("error: cannot connect to tcp://127.0.0.1:9"),
        "{err}"
    );
    let out = common::kvaudit_process()
        .args([
            "capture",
            "--endpoint",
            "tcp://127.0.0.1:9",
            "--out",
            "/nonexistent-dir/x.frames",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot write /nonexistent-dir/x.frames")
    );
}

/// libzmq on the publisher side: pyzmq in vLLM's layout (skipped, saying so, without pyzmq).
#[test]
fn interop_with_a_libzmq_publisher() {
    let src = source();
    if !common::live::pyzmq("interop_with_a_libzmq_publisher") {
        return;
    }
    let frames = read_frames(&src);
    let missing = frames
        .iter()
        .position(|(t, s, _)| t == b"kv@pod-b@demo-model" && *s == 1)
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("pyzmq.frames");
    let (mut publisher, ports) =
        common::live::zmq_publisher(&src, &["--skip", &missing.to_string()]);
    let rep = format!("tcp://127.0.0.1:{}", ports[1]);
    let (code, v, err) = finish(capture(&args(
        ports[0],
        &out,
        &[
            "--max-messages",
            &frames.len().to_string(),
            "--replay-endpoint",
            &rep,
        ],
    )));
    let _ = publisher.kill();
    let _ = publisher.wait();
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        v["gaps"][0]["recovered"], 1,
        "recovered through libzmq's ROUTER"
    );
    assert_eq!(sorted(read_frames(&out)), sorted(frames));
}

/// A libzmq publisher with heartbeats on (ZMQ_HEARTBEAT_IVL 100 ms, timeout 300 ms) pings its
/// subscribers and drops one that does not answer with PONG; capture stays connected through
/// 1 s of pings (one subscription seen: no drop and reconnect) and gets every message.
#[test]
fn a_libzmq_publisher_with_heartbeats_keeps_capture_connected() {
    if !common::live::pyzmq("a_libzmq_publisher_with_heartbeats_keeps_capture_connected") {
        return;
    }
    let src = source();
    let frames = read_frames(&src);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("heartbeat.frames");
    let mut publisher = Process::new("python3")
        .arg(common::repo_root().join("tests/zmq_publisher.py"))
        .arg(&src)
        .args(["--heartbeat-ms", "100"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(publisher.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
    let port: u16 = line.split_whitespace().next().unwrap().parse().unwrap();
    let (code, v, err) = finish(capture(&args(
        port,
        &out,
        &["--max-messages", &frames.len().to_string()],
    )));
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    let _ = publisher.wait();
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["messages"], frames.len());
    assert_eq!(v["malformed"], 0, "{v:#}");
    assert_eq!(rest.trim(), "subscriptions 1", "dropped and reconnected");
}

/// A small msgpack value unique to `seq`: `[seq, []]`.
fn payload_for(seq: u64) -> Vec<u8> {
    let mut p = vec![0x92, 0xcf];
    p.extend_from_slice(&seq.to_be_bytes());
    p.push(0x90);
    p
}

fn message(seq: u64) -> Vec<Vec<u8>> {
    vec![
        b"kv@pod-a@m".to_vec(),
        seq.to_be_bytes().to_vec(),
        payload_for(seq),
    ]
}

/// Waits for a capture and takes its peak RSS (KiB) from wait4: this child's own, where
/// RUSAGE_CHILDREN would be the largest of every child the test process has waited for.
fn finish_measured(mut child: Child) -> (i32, Json, String, u64) {
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut b = Vec::new();
        std::io::Read::read_to_end(&mut stdout, &mut b).unwrap();
        b
    });
    let err = std::thread::spawn(move || {
        let mut b = Vec::new();
        std::io::Read::read_to_end(&mut stderr, &mut b).unwrap();
        b
    });
    let mut status = 0;
    // SAFETY: rusage is plain data; wait4 writes it and the status for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as libc::pid_t);
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    let stdout = out.join().unwrap();
    let stderr = String::from_utf8_lossy(&err.join().unwrap()).into_owned();
    let v = serde_json::from_slice(&stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    (code, v, stderr, usage.ru_maxrss as u64)
}

/// Every other seq: each message after the first follows a gap of one.
fn every_other(n: u64) -> Frames {
    (0..n).map(|i| message(2 * i)).collect()
}

/// With a replay endpoint that cannot help, the live stream is captured as fast as without
/// one. Before, each gap waited out the replay timeout in the receive loop: 6 of 572
/// messages were captured at 200 msg/s.
fn unhelpful_replay_endpoint(router: Router, want_error: &str) {
    let n = 300;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("gaps.frames");
    let dead = matches!(router, Router::None);
    let publisher = start_publisher(every_other(n), Duration::from_millis(5), router);
    let rep = match publisher.replay_port {
        Some(p) => format!("tcp://127.0.0.1:{p}"),
        // A port just freed: nothing listens there.
        None => {
            assert!(dead);
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            format!("tcp://{}", l.local_addr().unwrap())
        }
    };
    let started = std::time::Instant::now();
    let (code, v, err) = finish(capture(&args(
        publisher.port,
        &out,
        &[
            "--max-messages",
            &n.to_string(),
            "--replay-endpoint",
            &rep,
            "--replay-timeout",
            "500ms",
        ],
    )));
    let took = started.elapsed();
    publisher.handle.join().unwrap();
    assert_eq!(code, 1, "unrecovered gaps are findings: {err}");
    assert_eq!(v["messages"], n, "every live message is captured");
    assert_eq!(read_frames(&out).len() as u64, n);
    assert_eq!(v["stopped_by"], "max messages");
    assert_eq!(v["gaps"].as_array().unwrap().len() as u64, n - 1);
    assert_eq!(v["gaps_unrecovered"], n - 1);
    // ~1.6 s of publishing; a timeout per gap would be 150 s.
    eprintln!("{want_error}: took {took:?}, {}", v["replay_endpoints"]);
    assert!(took < Duration::from_secs(8), "took {took:?}");
    let r = &v["replay_endpoints"][0];
    assert_eq!(r["endpoint"], rep.as_str());
    assert_eq!(r["recovered"], 0);
    assert_eq!(r["down"], true, "{r}");
    // One timeout, then retries with backoff (1 s, 2 s, ...), not one per gap.
    let failures = r["failures"].as_u64().unwrap();
    assert!((1..=4).contains(&failures), "{r}");
    assert!(
        r["last_error"].as_str().unwrap().contains(want_error),
        "{r}"
    );
}

#[test]
fn dead_replay_port_does_not_slow_the_live_stream() {
    unhelpful_replay_endpoint(Router::None, "connect");
}

#[test]
fn silent_replay_router_does_not_slow_the_live_stream() {
    unhelpful_replay_endpoint(Router::Silent, "no reply");
}

/// Publish `total` messages leaving out every one whose seq % `every` == `skip`, let `router`
/// serve them back, capture, and check the file holds exactly the original frames. Returns
/// the capture's JSON summary.
fn capture_recovering(total: u64, every: u64, skip: u64, router: fn(Frames) -> Router) -> Json {
    let all: Frames = (0..total).map(message).collect();
    let live: Frames = all
        .iter()
        .filter(|m| seq_of(m).unwrap() % every != skip)
        .cloned()
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("recovered.frames");
    let publisher = start_publisher(live, Duration::from_millis(5), router(all.clone()));
    let rep = format!("tcp://127.0.0.1:{}", publisher.replay_port.unwrap());
    let (code, v, err) = finish(capture(&args(
        publisher.port,
        &out,
        &[
            "--max-messages",
            &total.to_string(),
            "--replay-endpoint",
            &rep,
        ],
    )));
    publisher.handle.join().unwrap();
    assert_eq!(code, 0, "{err}\n{v}");
    let want: Vec<_> = all
        .iter()
        .map(|m| (m[0].clone(), seq_of(m).unwrap(), m[2].clone()))
        .collect();
    assert_eq!(
        sorted(read_frames(&out)),
        want,
        "exactly the original frames"
    );
    v
}

/// 40 gaps, all recovered beside the live stream. Before, the first recovery stopped at the
/// count it wanted and left the rest of the reply in the DEALER, where the next recoveries
/// read it: 1 of 39 gaps was recovered.
#[test]
fn forty_gaps_are_all_recovered() {
    assert_eq!((0..120u64).filter(|s| s % 3 == 1).count(), 40);
    let v = capture_recovering(120, 3, 1, Router::Serve);
    let gaps = v["gaps"].as_array().unwrap();
    assert_eq!(gaps.len(), 40);
    assert!(
        gaps.iter()
            .all(|g| g["missing"] == 1 && g["recovered"] == 1),
        "{gaps:?}"
    );
    assert_eq!(v["gaps_unrecovered"], 0);
    assert_eq!(v["replay_endpoints"][0]["recovered"], 40);
    assert_eq!(v["replay_endpoints"][0]["failures"], 0);
}

/// vLLM before 0.26 replies `[seq, payload]`: the seq alone says which gap it fills.
#[test]
fn gaps_are_recovered_from_a_pre_0_26_router() {
    let v = capture_recovering(30, 6, 3, Router::ServeLegacy);
    assert_eq!(v["gaps"].as_array().unwrap().len(), 5);
    assert_eq!(v["replay_endpoints"][0]["recovered"], 5);
}

/// A ROUTER that answers every request with endless 1 MB messages: the capture reads and
/// drops them, gives up on the endpoint, and its memory stays bounded.
#[test]
fn flooding_replay_router_keeps_memory_bounded() {
    let n = 300;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("flood.frames");
    let publisher = start_publisher(every_other(n), Duration::from_millis(10), Router::Flood);
    let rep = format!("tcp://127.0.0.1:{}", publisher.replay_port.unwrap());
    let (code, v, err, peak_kib) = finish_measured(capture(&args(
        publisher.port,
        &out,
        &["--max-messages", &n.to_string(), "--replay-endpoint", &rep],
    )));
    publisher.handle.join().unwrap();
    assert_eq!(code, 1, "{err}");
    assert_eq!(v["messages"], n);
    assert_eq!(v["gaps_unrecovered"], n - 1);
    let r = &v["replay_endpoints"][0];
    assert_eq!(r["recovered"], 0, "{r}");
    assert!(r["failures"].as_u64().unwrap() >= 1, "{r}");
    assert!(r["last_error"].as_str().unwrap().contains("flood"), "{r}");
    eprintln!("flood: peak RSS {peak_kib} KiB, {r}");
    assert!(
        peak_kib < 64 * 1024,
        "peak RSS {} MiB while flooded",
        peak_kib / 1024
    );
}

/// Malformed messages are counted by kind with a few examples, not listed one by one
/// (500k of them made a 60 MB summary).
#[test]
fn malformed_flood_leaves_a_small_summary() {
    let topic = b"kv@pod-a@m".to_vec();
    let mut messages: Frames = vec![vec![topic.clone()]; 10_000];
    for i in 0..5u8 {
        messages.push(vec![topic.clone(), vec![i; 3], payload_for(0)]);
    }
    messages.push(vec![
        topic.clone(),
        0u64.to_be_bytes().to_vec(),
        b"\xc1".to_vec(),
    ]);
    messages.extend((0..5).map(message));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("malformed.frames");
    let publisher = start_publisher(messages, Duration::ZERO, Router::None);
    let child = common::kvaudit_process()
        .arg("capture")
        .args(args(publisher.port, &out, &["--max-messages", "5"]))
        .args(["--format", "json", "--duration", "60s"])
        .output()
        .unwrap();
    publisher.handle.join().unwrap();
    let stderr = String::from_utf8_lossy(&child.stderr);
    assert_eq!(child.status.code(), Some(0), "{stderr}");
    assert!(
        child.stdout.len() < 4096,
        "{} bytes of JSON",
        child.stdout.len()
    );
    let v: Json = serde_json::from_slice(&child.stdout).unwrap();
    assert_eq!(v["messages"], 5);
    assert_eq!(v["malformed"], 10_006);
    let kinds = &v["malformed_kinds"];
    assert_eq!(kinds["frame_count"]["count"], 10_000);
    assert_eq!(kinds["sequence_frame"]["count"], 5);
    assert_eq!(kinds["not_msgpack"]["count"], 1);
    assert_eq!(kinds.as_object().unwrap().len(), 3, "{kinds}");
    let examples = kinds["frame_count"]["examples"].as_array().unwrap();
    assert_eq!(examples.len(), 3);
    assert_eq!(
        examples[0]["endpoint"],
        format!("tcp://127.0.0.1:{}", publisher.port)
    );
    assert!(examples[0]["detail"].as_str().unwrap().contains("1 frames"));
}

/// Payloads over the limit are counted as malformed and never written: `replay` refuses
/// frames over the same limit (`events::frames::MAX_PAYLOAD`, 1 GiB on the command line,
/// too large to send here, so this runs the library with a small one).
#[test]
fn oversized_payloads_are_malformed_not_written() {
    use kvaudit::capture::{LiveOptions, capture as run_capture};
    let bin = |n: usize| {
        let mut p = vec![0xc5];
        p.extend_from_slice(&(n as u16).to_be_bytes());
        p.resize(3 + n, 7);
        p
    };
    let t = b"kv@pod-a@m".to_vec();
    let limit = 1000;
    let messages = vec![
        vec![t.clone(), 0u64.to_be_bytes().to_vec(), bin(limit - 3)],
        vec![t.clone(), 1u64.to_be_bytes().to_vec(), bin(limit - 2)],
        vec![t.clone(), 2u64.to_be_bytes().to_vec(), payload_for(2)],
    ];
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("big.frames");
    let publisher = start_publisher(messages, Duration::from_millis(2), Router::None);
    let opts = LiveOptions {
        endpoints: vec![format!("tcp://127.0.0.1:{}", publisher.port)],
        replay_endpoints: Vec::new(),
        bind: None,
        topic: String::new(),
        out: out.clone(),
        max_messages: Some(2),
        duration: Some(Duration::from_secs(30)),
        connect_timeout: Duration::from_secs(10),
        replay_timeout: Duration::from_secs(2),
        max_payload: limit,
        max_message: 1 << 20,
        live_replay: None,
        engine: kvaudit::events::Engine::Vllm,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let s = rt
        .block_on(run_capture(opts, |_| {}, std::future::pending()))
        .unwrap();
    publisher.handle.join().unwrap();
    assert_eq!(s.messages, 2);
    assert_eq!(s.malformed.total(), 1);
    let c = s.malformed.kinds().next().unwrap();
    assert_eq!(c.kind.name(), "oversized_payload");
    assert!(c.examples[0].detail.contains("1001-byte payload"), "{c:?}");
    let seqs: Vec<u64> = read_frames(&out).iter().map(|f| f.1).collect();
    assert_eq!(seqs, [0, 2], "the oversized one is not written");
    assert_eq!(
        (s.gaps.len(), s.gaps[0].after_seq, s.gaps[0].missing),
        (1, 0, 1),
        "and the stream has lost it"
    );
}

/// Durations past what Duration holds were a panic in Duration::from_secs_f64.
#[test]
fn huge_durations_are_usage_errors() {
    for flag in ["--connect-timeout", "--replay-timeout", "--duration"] {
        for value in ["99999999999999999999s", "1e999", "0s"] {
            let out = common::kvaudit_process()
                .args([
                    "capture",
                    "--endpoint",
                    "tcp://127.0.0.1:9",
                    "--out",
                    "/nonexistent-dir/x.frames",
                    flag,
                    value,
                ])
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{flag} {value}: {err}");
            assert!(
                err.starts_with(&format!("error: {flag} ")) && err.lines().count() == 1,
                "{flag} {value}: {err}"
            );
            assert!(!err.contains("panicked"), "{err}");
        }
    }
}

/// `--bind tcp://127.0.0.1:0`: the port the system chose is printed on stderr at once (a
/// publisher needs it to connect) and given in the JSON summary.
#[test]
fn bind_to_port_zero_tells_the_port() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bound.frames");
    let mut child = common::kvaudit_process()
        .args(["capture", "--bind", "tcp://127.0.0.1:0", "--out"])
        .arg(&out)
        .args([
            "--max-messages",
            "3",
            "--format",
            "json",
            "--duration",
            "30s",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let addr = line
        .trim_end()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("no address on stderr: {line:?}"))
        .to_string();
    assert!(addr.starts_with("tcp://127.0.0.1:"), "{addr}");
    assert_ne!(port_of(&addr), 0);
    // A publisher that connects out, as publishers of a bound capture do.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut xpub = XPubSocket::new();
        xpub.connect(&addr).await.unwrap();
        let _ = tokio::time::timeout(Duration::from_secs(20), xpub.recv()).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        for seq in 0..3 {
            let frames: Vec<Bytes> = message(seq).into_iter().map(Bytes::from).collect();
            xpub.send(ZmqMessage::try_from(frames).unwrap())
                .await
                .unwrap();
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    });
    let output = child.wait_with_output().unwrap();
    let v: Json = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(v["bound"], addr.as_str());
    assert_eq!(v["messages"], 3);
    assert_eq!(v["publishers"][0]["endpoint"], addr.as_str());
    assert_eq!(v["stopped_by"], "max messages");
}

/// With --max-messages and a gap nothing recovers, the publishers have sent N messages but
/// capture has fewer: it stops (after one replay timeout when a replay endpoint could still
/// bring them) and says so, where it used to wait for messages that would never come.
#[test]
fn max_messages_with_an_unrecovered_gap_does_not_wait_forever() {
    let dir = tempfile::tempdir().unwrap();
    for router in [Router::None, Router::Silent] {
        let with_replay = matches!(router, Router::Silent);
        let live: Frames = [0, 1, 3, 4].into_iter().map(message).collect();
        let publisher = start_publisher(live, Duration::from_millis(2), router);
        let out = dir.path().join("lost.frames");
        let mut extra = vec!["--max-messages", "5", "--replay-timeout", "1s"];
        let rep = publisher
            .replay_port
            .map(|p| format!("tcp://127.0.0.1:{p}"));
        if let Some(rep) = &rep {
            extra.extend(["--replay-endpoint", rep.as_str()]);
        }
        let started = std::time::Instant::now();
        // capture() gives --duration 30s: the old behaviour ran into it.
        let (code, v, err) = finish(capture(&args(publisher.port, &out, &extra)));
        let took = started.elapsed();
        publisher.handle.join().unwrap();
        assert_eq!(code, 1, "an unrecovered gap is a finding: {err}");
        assert_eq!(v["stopped_by"], "max messages with gaps", "{v:#}");
        assert_eq!(
            (v["messages"].as_u64(), v["gaps_unrecovered"].as_u64()),
            (Some(4), Some(1))
        );
        assert!(
            took < Duration::from_secs(15),
            "replay {with_replay}: took {took:?}"
        );
        assert_publishers_add_up(&v);
    }
}
