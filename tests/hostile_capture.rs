//! `capture` against hostile ZMTP peers built here byte by byte on loopback: publishers and
//! a replay endpoint that claim 2^40-byte frames (as data and as a handshake command), send
//! endless MORE frames or millions of empty frames in one message. Each capture runs under
//! an address-space cap beside a well-behaved publisher: it must not abort or panic, must
//! drop the hostile peer and count why, and must still capture every message of the good
//! one. Before the bounded ZMTP reader, the 2^40 claims aborted capture ("memory allocation
//! of 1099511693321 bytes failed", exit 134) and the frame floods grew memory without bound.
//! Also: `--out` is replaced only by a complete capture.

use crate::common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use serde_json::Value as Json;
use zeromq::{Socket, SocketRecv, SocketSend, XPubSocket, ZmqMessage};

/// The address space capture may use: the binary, its runtime, mimalloc's arenas and a read
/// buffer per peer. A 2^40-byte claim honoured, or a flood buffered, goes past it and aborts.
const CAP_MB: u64 = 256;
const TERA: u64 = 1 << 40;

// ZMTP written out by hand (RFC 23), independent of the crate's own encoder.

fn greeting() -> Vec<u8> {
    let mut g = vec![0u8; 64];
    g[0] = 0xff;
    // libzmq puts its identity length + 1 in the padding.
    g[8] = 1;
    g[9] = 0x7f;
    g[10] = 3;
    g[11] = 1;
    g[12..16].copy_from_slice(b"NULL");
    g
}

fn ready(socket_type: &str) -> Vec<u8> {
    let mut body = vec![5];
    body.extend_from_slice(b"READY");
    body.push(11);
    body.extend_from_slice(b"Socket-Type");
    body.extend_from_slice(&(socket_type.len() as u32).to_be_bytes());
    body.extend_from_slice(socket_type.as_bytes());
    let mut f = vec![0x04, body.len() as u8];
    f.extend_from_slice(&body);
    f
}

/// A long-form frame header: flags | LONG, then the 8-byte length.
fn long_header(flags: u8, len: u64) -> Vec<u8> {
    let mut h = vec![flags | 0x02];
    h.extend_from_slice(&len.to_be_bytes());
    h
}

/// Serve every connection to a fresh loopback port with `behave` (capture reconnects to a
/// publisher it dropped, so there may be several); returns the endpoint.
fn hostile(behave: fn(&mut TcpStream)) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut s) = conn else { return };
            std::thread::spawn(move || {
                let _ = s.set_write_timeout(Some(Duration::from_secs(20)));
                behave(&mut s);
            });
        }
    });
    format!("tcp://{addr}")
}

/// Hold the connection open: capture has to close it itself.
fn hold(s: &mut TcpStream) {
    let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
    let mut sink = [0u8; 4096];
    while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
}

fn publisher_hello(s: &mut TcpStream) -> std::io::Result<()> {
    let mut hello = greeting();
    hello.extend_from_slice(&ready("PUB"));
    s.write_all(&hello)
}

/// (a) A data frame claiming 2^40 bytes, a few of them sent.
fn data_claim(s: &mut TcpStream) {
    let mut b = Vec::new();
    b.extend_from_slice(&long_header(0, TERA));
    b.extend_from_slice(&[0xab; 1000]);
    if publisher_hello(s).and_then(|()| s.write_all(&b)).is_ok() {
        hold(s);
    }
}

/// (b) A command frame claiming 2^40 bytes in place of READY.
fn command_claim(s: &mut TcpStream) {
    let mut b = greeting();
    b.extend_from_slice(&long_header(0x04, TERA));
    b.extend_from_slice(&[0xab; 1000]);
    if s.write_all(&b).is_ok() {
        hold(s);
    }
}

/// (c) Endless 100 KB frames, every one with MORE: one message that never ends.
fn endless_more(s: &mut TcpStream) {
    let mut f = long_header(0x01, 100_000);
    f.extend_from_slice(&[0xcd; 100_000]);
    if publisher_hello(s).is_err() {
        return;
    }
    while s.write_all(&f).is_ok() {}
}

/// (d) One message of 20 million empty frames (40 MB on the wire).
fn empty_frames(s: &mut TcpStream) {
    if publisher_hello(s).is_err() {
        return;
    }
    let chunk = [0x01u8, 0x00].repeat(1 << 19);
    for _ in 0..(20_000_000 / (1 << 19)) {
        if s.write_all(&chunk).is_err() {
            return;
        }
    }
    let _ = s.write_all(&[0x00, 0x00]);
    hold(s);
}

/// (e) A replay endpoint (ROUTER) that answers the gap request with a 2^40-byte frame.
fn replay_claim(s: &mut TcpStream) {
    let mut hello = greeting();
    hello.extend_from_slice(&ready("ROUTER"));
    if s.write_all(&hello).is_err() {
        return;
    }
    // The DEALER's greeting, its READY, then the request ["", seq]: read to the request's
    // last frame.
    let _ = s.set_read_timeout(Some(Duration::from_secs(20)));
    let mut greeting = [0u8; 64];
    if s.read_exact(&mut greeting).is_err() {
        return;
    }
    loop {
        let mut flags = [0u8; 1];
        if s.read_exact(&mut flags).is_err() {
            return;
        }
        let mut size = [0u8; 8];
        let len = if flags[0] & 0x02 != 0 {
            if s.read_exact(&mut size).is_err() {
                return;
            }
            u64::from_be_bytes(size)
        } else {
            if s.read_exact(&mut size[..1]).is_err() {
                return;
            }
            u64::from(size[0])
        };
        // Small by construction: the DEALER is kvaudit.
        let mut body = vec![0u8; len.min(1 << 16) as usize];
        if s.read_exact(&mut body).is_err() {
            return;
        }
        let command = flags[0] & 0x04 != 0;
        let more = flags[0] & 0x01 != 0;
        if !command && !more {
            break;
        }
    }
    let mut answer = vec![0x01, 0x00];
    answer.extend_from_slice(&long_header(0x01, TERA));
    answer.extend_from_slice(&[0xab; 1000]);
    if s.write_all(&answer).is_ok() {
        hold(s);
    }
}

/// vLLM's layout: [topic, seq, payload], the payload a small msgpack value (`[seq, []]`).
fn message(seq: u64) -> Vec<Bytes> {
    let mut p = vec![0x92, 0xcf];
    p.extend_from_slice(&seq.to_be_bytes());
    p.push(0x90);
    vec![
        Bytes::from_static(b"kv@good@m"),
        Bytes::copy_from_slice(&seq.to_be_bytes()),
        Bytes::from(p),
    ]
}

/// A well-behaved publisher (the zeromq crate's XPUB): waits for the subscription, lets the
/// hostile peer's connection be dealt with first, then sends `seqs` 10 ms apart and stays a
/// little. Returns its endpoint.
fn good_publisher(seqs: Vec<u64>) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let mut xpub = XPubSocket::new();
            let ep = xpub.bind("tcp://127.0.0.1:0").await.unwrap();
            tx.send(ep.to_string()).unwrap();
            let _ = tokio::time::timeout(Duration::from_secs(20), xpub.recv()).await;
            tokio::time::sleep(Duration::from_millis(300)).await;
            for seq in seqs {
                xpub.send(ZmqMessage::try_from(message(seq)).unwrap())
                    .await
                    .unwrap();
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        });
    });
    rx.recv().unwrap()
}

struct Run {
    code: i32,
    json: Json,
    stderr: String,
}

fn run_capture(args: &[String]) -> Run {
    let mut all = vec!["capture".to_string()];
    all.extend(args.iter().cloned());
    all.extend(["--format", "json", "--duration", "20s"].map(String::from));
    let argv: Vec<&str> = all.iter().map(String::as_str).collect();
    let m = common::run_measured(&argv, &[], Duration::from_secs(60), CAP_MB);
    assert!(!m.killed, "hung: {}", m.stderr);
    assert!(
        !m.stderr.contains("panicked") && !m.stderr.contains("memory allocation"),
        "exit {}: {}",
        m.code,
        m.stderr
    );
    let json = serde_json::from_slice(&m.stdout)
        .unwrap_or_else(|e| panic!("exit {}, {e}: {}", m.code, m.stderr));
    Run {
        code: m.code,
        json,
        stderr: m.stderr,
    }
}

/// Capture from `bad` beside a good publisher of 20 messages; the bad one must be dropped
/// with `kind` (its detail containing `detail`), the good one captured whole.
fn dropped_beside_a_good_publisher(bad: String, kind: &str, detail: &str, extra: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cap.frames");
    let good = good_publisher((0..20).collect());
    let mut args: Vec<String> = [
        "--endpoint",
        &bad,
        "--endpoint",
        &good,
        "--out",
        &out.display().to_string(),
        "--max-messages",
        "20",
    ]
    .map(String::from)
    .to_vec();
    args.extend(extra.iter().map(|s| s.to_string()));
    let r = run_capture(&args);
    let v = &r.json;
    assert_eq!(
        r.code, 1,
        "a dropped publisher is a finding: {}\n{v:#}",
        r.stderr
    );
    assert_eq!(
        v["messages"], 20,
        "the good publisher is captured whole: {v:#}"
    );
    assert_eq!(v["stopped_by"], "max messages");
    assert_eq!(v["publishers"][0]["endpoint"], good.as_str());
    assert_eq!(v["publishers"][0]["messages"], 20);
    assert!(v["peers_dropped"].as_u64().unwrap() >= 1, "{v:#}");
    let k = &v["malformed_kinds"][kind];
    assert!(k["count"].as_u64().unwrap_or(0) >= 1, "{kind}: {v:#}");
    assert_eq!(k["examples"][0]["endpoint"], bad.as_str());
    let d = k["examples"][0]["detail"].as_str().unwrap();
    assert!(d.contains(detail), "{kind}: {d}");
    // Only what the hostile peer caused is counted against it.
    let kinds: Vec<&String> = v["malformed_kinds"].as_object().unwrap().keys().collect();
    assert_eq!(kinds, [kind], "{v:#}");
    let bytes = std::fs::read(&out).unwrap();
    assert_eq!(bytes.len() as u64, v["bytes"].as_u64().unwrap());
}

#[test]
fn a_data_frame_claiming_a_terabyte_drops_the_publisher() {
    dropped_beside_a_good_publisher(
        hostile(data_claim),
        "oversized_message",
        "a frame of 1099511627776 bytes",
        &[],
    );
}

#[test]
fn a_handshake_command_claiming_a_terabyte_drops_the_publisher() {
    dropped_beside_a_good_publisher(
        hostile(command_claim),
        "oversized_command",
        "a command frame of 1099511627776 bytes",
        &[],
    );
}

/// The message bound is over a message's frames together, not per frame (libzmq's is per
/// frame, which endless MORE frames walk around).
#[test]
fn endless_more_frames_drop_the_publisher() {
    dropped_beside_a_good_publisher(
        hostile(endless_more),
        "oversized_message",
        "over the 1048576-byte message limit",
        &["--max-message-size", "1MiB"],
    );
}

#[test]
fn millions_of_empty_frames_drop_the_publisher() {
    dropped_beside_a_good_publisher(
        hostile(empty_frames),
        "too_many_frames",
        "more than 64 frames",
        &[],
    );
}

/// A peer that starts a greeting and stalls is given up on after --connect-timeout.
#[test]
fn a_stalled_handshake_drops_the_publisher() {
    fn stall(s: &mut TcpStream) {
        if s.write_all(&greeting()[..20]).is_ok() {
            hold(s);
        }
    }
    dropped_beside_a_good_publisher(
        hostile(stall),
        "handshake_timeout",
        "no ZMTP greeting and READY within",
        &["--connect-timeout", "200ms"],
    );
}

/// The same bounds on the DEALER side: the replay endpoint's answer to a gap request claims
/// 2^40 bytes. Its endpoint is marked failed with the reason; the live stream goes on.
#[test]
fn a_replay_answer_claiming_a_terabyte_fails_that_endpoint_only() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cap.frames");
    // Seq 1 never comes live: a gap to recover.
    let live: Vec<u64> = (0..30).filter(|&s| s != 1).collect();
    let good = good_publisher(live.clone());
    let replay = hostile(replay_claim);
    let r = run_capture(
        &[
            "--endpoint",
            &good,
            "--replay-endpoint",
            &replay,
            "--out",
            &out.display().to_string(),
            "--max-messages",
            &live.len().to_string(),
        ]
        .map(String::from),
    );
    let v = &r.json;
    assert_eq!(r.code, 1, "the gap stays unrecovered: {}\n{v:#}", r.stderr);
    assert_eq!(v["messages"], live.len(), "{v:#}");
    assert_eq!(v["gaps_unrecovered"], 1);
    let e = &v["replay_endpoints"][0];
    assert_eq!(e["endpoint"], replay.as_str());
    assert!(e["failures"].as_u64().unwrap() >= 1, "{e}");
    let why = e["last_error"].as_str().unwrap();
    assert!(
        why.contains("oversized message") && why.contains("1099511627776"),
        "{why}"
    );
    assert_eq!(v["peers_dropped"], 0, "the live publishers were fine");
}

/// A bound capture serves several publishers that connect to it: the hostile one is
/// dropped, the good one captured.
#[test]
fn a_bound_capture_drops_the_hostile_publisher_and_keeps_the_good_one() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bound.frames");
    // A port that was free a moment ago (capture prints the one it binds, but run_measured
    // reads stderr only at the end).
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("tcp://127.0.0.1:{port}");
    let connect = move || loop {
        if let Ok(s) = TcpStream::connect(("127.0.0.1", port)) {
            return s;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    std::thread::spawn(move || data_claim(&mut connect()));
    let publisher = std::thread::spawn({
        let addr = addr.clone();
        move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let mut xpub = XPubSocket::new();
                // Retries until capture listens.
                xpub.connect(&addr).await.unwrap();
                let _ = tokio::time::timeout(Duration::from_secs(20), xpub.recv()).await;
                tokio::time::sleep(Duration::from_millis(300)).await;
                for seq in 0..10 {
                    xpub.send(ZmqMessage::try_from(message(seq)).unwrap())
                        .await
                        .unwrap();
                }
                tokio::time::sleep(Duration::from_secs(2)).await;
            });
        }
    });
    let r = run_capture(
        &[
            "--bind",
            &addr,
            "--out",
            &out.display().to_string(),
            "--max-messages",
            "10",
        ]
        .map(String::from),
    );
    let _ = publisher.join();
    let v = &r.json;
    assert_eq!(r.code, 1, "{}\n{v:#}", r.stderr);
    assert_eq!(v["messages"], 10, "{v:#}");
    assert_eq!(v["peers_dropped"], 1, "{v:#}");
    let ex = &v["malformed_kinds"]["oversized_message"]["examples"][0];
    assert!(
        ex["endpoint"]
            .as_str()
            .unwrap()
            .ends_with(&format!("(via {addr})")),
        "{ex}"
    );
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// An existing capture survives a capture that fails: an unreachable publisher, a bind that
/// fails. It used to be emptied before connecting (0 bytes left).
#[test]
fn a_failed_capture_leaves_the_existing_file_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("old.frames");
    let old: Vec<u8> = (0..10_000u32).flat_map(|i| i.to_be_bytes()).collect();
    std::fs::write(&out, &old).unwrap();
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let in_use = format!("tcp://{}", taken.local_addr().unwrap());
    let out_arg = out.display().to_string();
    for (args, error) in [
        (
            vec![
                "--endpoint",
                "tcp://127.0.0.1:9",
                "--connect-timeout",
                "500ms",
            ],
            "error: cannot connect to tcp://127.0.0.1:9",
        ),
        (vec!["--bind", in_use.as_str()], "error: cannot bind"),
        (
            vec!["--endpoint", "udp://x:1"],
            "error: cannot connect to udp://x:1",
        ),
    ] {
        let mut argv = vec!["capture", "--out", &out_arg];
        argv.extend(args);
        let m = common::run_measured(&argv, &[], Duration::from_secs(30), CAP_MB);
        assert_eq!(m.code, 2, "{argv:?}: {}", m.stderr);
        assert!(m.stderr.starts_with(error), "{}", m.stderr);
        assert_eq!(m.stderr.trim_end().lines().count(), 1, "{}", m.stderr);
        assert!(std::fs::read(&out).unwrap() == old, "{argv:?}: changed");
        assert_eq!(names(dir.path()), ["old.frames"], "{argv:?}: a file left");
    }
}

/// A complete capture replaces an existing (longer) file whole, with nothing left beside it.
#[test]
fn a_complete_capture_replaces_the_existing_file_whole() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("old.frames");
    std::fs::write(&out, vec![0xee; 1 << 20]).unwrap();
    let good = good_publisher((0..5).collect());
    let r = run_capture(
        &[
            "--endpoint",
            &good,
            "--out",
            &out.display().to_string(),
            "--max-messages",
            "5",
        ]
        .map(String::from),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let bytes = std::fs::read(&out).unwrap();
    assert_eq!(bytes.len() as u64, r.json["bytes"].as_u64().unwrap());
    assert!(!bytes.contains(&0xee), "nothing of the old file is left");
    assert_eq!(names(dir.path()), ["old.frames"]);
    let replay = common::run_measured(
        &["replay", &out.display().to_string(), "--format", "json"],
        &[],
        Duration::from_secs(30),
        CAP_MB,
    );
    let v: Json = serde_json::from_slice(&replay.stdout).unwrap();
    assert_eq!(v["messages"], 5, "{}", replay.stderr);
}

/// Bad values of --max-message-size: one error line, exit 2, before anything is opened.
#[test]
fn max_message_size_takes_a_range() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.frames").display().to_string();
    for bad in [
        "0",
        "1023",
        "2GiB",
        "1.5MiB",
        "lots",
        "18446744073709551616",
        "99999999999G",
    ] {
        let m = common::run_measured(
            &[
                "capture",
                "--endpoint",
                "tcp://127.0.0.1:9",
                "--out",
                &out,
                "--max-message-size",
                bad,
            ],
            &[],
            Duration::from_secs(30),
            CAP_MB,
        );
        assert_eq!(m.code, 2, "{bad}: {}", m.stderr);
        let first = m.stderr.lines().next().unwrap_or("");
        assert!(
            first.starts_with("error: invalid value") && first.contains("--max-message-size"),
            "{bad}: {}",
            m.stderr
        );
        assert!(names(dir.path()).is_empty());
    }
}
