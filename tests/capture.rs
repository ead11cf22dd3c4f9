//! `kvaudit capture` against in-test publishers on loopback: a pure-Rust XPUB/ROUTER pair and
//! a libzmq one through pyzmq, in vLLM's frame layout.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command as Process, Stdio};
use std::time::Duration;

use bytes::Bytes;
use serde_json::Value as Json;
use zeromq::{RouterSocket, Socket, SocketRecv, SocketSend, XPubSocket, ZmqMessage};

/// The frames of a `.frames` file: (topic, seq, payload).
fn read_frames(path: &Path) -> Vec<(Vec<u8>, u64, Vec<u8>)> {
    let data = std::fs::read(path).unwrap();
    let mut out = Vec::new();
    let mut at = 0;
    let u32_at = |i: usize| u32::from_be_bytes(data[i..i + 4].try_into().unwrap()) as usize;
    while at < data.len() {
        let tl = u32_at(at);
        let topic = data[at + 4..at + 4 + tl].to_vec();
        let seq = u64::from_be_bytes(data[at + 4 + tl..at + 12 + tl].try_into().unwrap());
        let pl = u32_at(at + 12 + tl);
        let payload = data[at + 16 + tl..at + 16 + tl + pl].to_vec();
        at += 16 + tl + pl;
        out.push((topic, seq, payload));
    }
    out
}

fn s3() -> Option<PathBuf> {
    Some(common::shared_dir("capture")?.join("fixtures/vllm-events/s3.frames"))
}

type Frames = Vec<Vec<Vec<u8>>>;

fn as_messages(frames: &[(Vec<u8>, u64, Vec<u8>)]) -> Frames {
    frames
        .iter()
        .map(|(t, s, p)| vec![t.clone(), s.to_be_bytes().to_vec(), p.clone()])
        .collect()
}

/// Runs an XPUB publisher (and optionally a ROUTER replay server) on a background runtime.
/// It waits for the first subscription before sending, so no message is lost to the slow
/// joiner, then sends every message with `gap` between them.
struct Publisher {
    port: u16,
    replay_port: Option<u16>,
    handle: std::thread::JoinHandle<()>,
}

fn start_publisher(messages: Frames, gap: Duration, replay: Option<Frames>) -> Publisher {
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
            let mut router = None;
            let mut replay_port = None;
            if replay.is_some() {
                let mut r = RouterSocket::new();
                let rep = r.bind("tcp://127.0.0.1:0").await.unwrap();
                replay_port = Some(port_of(&rep.to_string()));
                router = Some(r);
            }
            ports_tx.send((port, replay_port)).unwrap();
            // The subscription message (0x01 + prefix) tells us the subscriber is in.
            let _ = tokio::time::timeout(Duration::from_secs(20), xpub.recv()).await;
            tokio::time::sleep(Duration::from_millis(50)).await;
            let serve = async {
                let (Some(mut r), Some(msgs)) = (router, replay) else {
                    return std::future::pending::<()>().await;
                };
                {
                    loop {
                        let Ok(req) = r.recv().await else { return };
                        let req = req.into_vec();
                        let id = req[0].clone();
                        for m in &msgs {
                            let mut frames = vec![id.clone(), Bytes::new()];
                            frames.extend(m.iter().map(|f| Bytes::copy_from_slice(f)));
                            let _ = r.send(ZmqMessage::try_from(frames).unwrap()).await;
                        }
                        let end = vec![
                            id,
                            Bytes::new(),
                            Bytes::new(),
                            Bytes::copy_from_slice(&[0xff; 8]),
                            Bytes::new(),
                        ];
                        let _ = r.send(ZmqMessage::try_from(end).unwrap()).await;
                    }
                }
            };
            let send = async {
                for m in messages {
                    let frames: Vec<Bytes> = m.into_iter().map(Bytes::from).collect();
                    xpub.send(ZmqMessage::try_from(frames).unwrap())
                        .await
                        .unwrap();
                    tokio::time::sleep(gap).await;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            };
            tokio::select! {
                _ = send => {}
                _ = serve => {}
            }
            // Keep serving replays briefly after the last message.
        });
    });
    let (port, replay_port) = ports_rx.recv().unwrap();
    Publisher {
        port,
        replay_port,
        handle,
    }
}

fn port_of(endpoint: &str) -> u16 {
    endpoint.rsplit(':').next().unwrap().parse().unwrap()
}

fn capture(args: &[String]) -> Child {
    Process::new(env!("CARGO_BIN_EXE_kvaudit"))
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

#[test]
fn captures_s3_byte_for_byte() {
    let Some(src) = s3() else { return };
    let frames = read_frames(&src);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cap.frames");
    let publisher = start_publisher(as_messages(&frames), Duration::from_millis(2), None);
    let child = capture(&args(
        publisher.port,
        &out,
        &["--max-messages", &frames.len().to_string()],
    ));
    let (code, v, err) = finish(child);
    publisher.handle.join().unwrap();
    assert_eq!(code, 0, "{err}");
    assert!(
        std::fs::read(&out).unwrap() == std::fs::read(&src).unwrap(),
        "byte-identical capture: {} frames",
        read_frames(&out).len()
    );
    assert_eq!(v["messages"], 11);
    assert_eq!(v["events"], 20);
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
    let Some(src) = s3() else { return };
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
    let publisher = start_publisher(as_messages(&live), Duration::from_millis(2), None);
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
    let publisher = start_publisher(as_messages(&live), Duration::from_millis(2), Some(replay));
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
    assert!(
        std::fs::read(&out).unwrap() == std::fs::read(&src).unwrap(),
        "recovered capture is byte-identical: {} frames",
        read_frames(&out).len()
    );
}

#[test]
fn restarts_and_malformed_messages_do_not_stop_capture() {
    let Some(src) = s3() else { return };
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
    let publisher = start_publisher(messages, Duration::from_millis(2), None);
    let (code, v, err) = finish(capture(&args(
        publisher.port,
        &out,
        &["--max-messages", "5"],
    )));
    publisher.handle.join().unwrap();
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["malformed"], 3);
    let reasons: Vec<&str> = v["malformed_reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["reason"].as_str().unwrap())
        .collect();
    assert!(
        reasons[0].contains("2 frames")
            && reasons[1].contains("4-byte sequence")
            && reasons[2].contains("msgpack"),
        "{reasons:?}"
    );
    assert_eq!(v["gaps"], serde_json::json!([]), "a restart is not a gap");
    assert_eq!(v["restarts"][0]["from_seq"], 2);
    assert_eq!(v["restarts"][0]["to_seq"], 0);
    assert_eq!(read_frames(&out).len(), 5);
}

#[test]
fn sigterm_leaves_whole_frames_that_replay() {
    let Some(src) = s3() else { return };
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
    let publisher = start_publisher(messages.clone(), Duration::from_millis(5), None);
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
    let replay = Process::new(env!("CARGO_BIN_EXE_kvaudit"))
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
    let Some(src) = s3() else { return };
    let frames = read_frames(&src);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("live.frames");
    let publisher = start_publisher(as_messages(&frames), Duration::from_millis(2), None);
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
    let offline = Process::new(env!("CARGO_BIN_EXE_kvaudit"))
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
    let out = Process::new(env!("CARGO_BIN_EXE_kvaudit"))
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
    let out = Process::new(env!("CARGO_BIN_EXE_kvaudit"))
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
    let Some(src) = s3() else { return };
    let has_pyzmq = Process::new("python3")
        .args(["-c", "import zmq"])
        .status()
        .is_ok_and(|s| s.success());
    if !has_pyzmq {
        if std::env::var("KVAUDIT_REQUIRE_REFERENCE").is_ok_and(|v| v == "1") {
            panic!("pyzmq is required in CI (pip install pyzmq)");
        }
        eprintln!("SKIPPED interop_with_a_libzmq_publisher: pyzmq is not installed");
        return;
    }
    let frames = read_frames(&src);
    let missing = frames
        .iter()
        .position(|(t, s, _)| t == b"kv@pod-b@demo-model" && *s == 1)
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("pyzmq.frames");
    let mut publisher = Process::new("python3")
        .arg(common::repo_root().join("tests/zmq_publisher.py"))
        .arg(&src)
        .arg("--skip")
        .arg(missing.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(publisher.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let ports: Vec<u16> = line
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
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
    assert!(
        std::fs::read(&out).unwrap() == std::fs::read(&src).unwrap(),
        "byte-identical: {} frames",
        read_frames(&out).len()
    );
}

/// Durations past what Duration holds were a panic in Duration::from_secs_f64.
#[test]
fn huge_durations_are_usage_errors() {
    for flag in ["--connect-timeout", "--replay-timeout", "--duration"] {
        for value in ["99999999999999999999s", "1e999", "0s"] {
            let out = Process::new(env!("CARGO_BIN_EXE_kvaudit"))
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
