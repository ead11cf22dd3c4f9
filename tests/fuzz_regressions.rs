//! Replays the fuzz targets' inputs on stable Rust, without libFuzzer: every committed seed
//! (`fuzz/seeds/<target>/`) and every minimised crash found by fuzzing
//! (`fuzz/regressions/<target>/`) goes through the same code as the target
//! (`fuzz/src/lib.rs`, included here), which must return without panicking.

#[path = "../fuzz/src/lib.rs"]
#[allow(dead_code)]
mod harness;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

fn replay(target: &str) {
    let run = harness::TARGETS
        .iter()
        .find(|(name, _)| *name == target)
        .map(|(_, f)| *f)
        .expect("unknown fuzz target");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut failed = Vec::new();
    let mut n = 0;
    for kind in ["seeds", "regressions"] {
        let Ok(dir) = std::fs::read_dir(root.join(kind).join(target)) else {
            continue;
        };
        let mut files: Vec<_> = dir.filter_map(|e| e.ok().map(|e| e.path())).collect();
        files.sort();
        for file in files.iter().filter(|p| p.is_file()) {
            let data = std::fs::read(file).expect("read fuzz input");
            n += 1;
            if catch_unwind(AssertUnwindSafe(|| run(&data))).is_err() {
                failed.push(file.display().to_string());
            }
        }
    }
    assert!(n > 0, "no inputs for {target}");
    assert!(failed.is_empty(), "{target} panicked on: {failed:#?}");
}

#[test]
fn decode_events() {
    replay("decode_events");
}

#[test]
fn frames_reader() {
    replay("frames_reader");
}

#[test]
fn replay_bytes() {
    replay("replay_bytes");
}

#[test]
fn conversation_json() {
    replay("conversation_json");
}

#[test]
fn template_render() {
    replay("template_render");
}

#[test]
fn prepared_tokenizer() {
    replay("prepared_tokenizer");
}

#[test]
fn zmtp_frames() {
    replay("zmtp_frames");
}

#[test]
fn template_methods() {
    replay("template_methods");
}

#[test]
fn parquet_rows() {
    replay("parquet_rows");
}

#[test]
fn gguf_metadata() {
    replay("gguf_metadata");
}

#[test]
fn corpus_partial() {
    replay("corpus_partial");
}

#[test]
fn every_target_is_tested() {
    let names: Vec<&str> = harness::TARGETS.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        names,
        [
            "decode_events",
            "frames_reader",
            "replay_bytes",
            "conversation_json",
            "template_render",
            "prepared_tokenizer",
            "zmtp_frames",
            "template_methods",
            "parquet_rows",
            "gguf_metadata",
            "corpus_partial",
            "server_request",
            "http_follower",
            "router_config"
        ]
    );
}

/// decode_events compares the fast path with the general decoder: the seeds must reach the
/// fast path, or the comparison checks nothing.
#[test]
fn decode_events_seeds_reach_the_fast_path() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/decode_events");
    let mut pool = kvaudit::events::Pool::default();
    for entry in std::fs::read_dir(dir).expect("seeds") {
        let data = std::fs::read(entry.expect("entry").path()).expect("seed");
        for engine in [
            kvaudit::events::Engine::Vllm,
            kvaudit::events::Engine::Sglang,
        ] {
            let _ = kvaudit::events::decode_batch_with(&data, 0, engine, &mut pool);
        }
    }
    assert!(pool.fast_decoded() > 0, "no seed event took the fast path");
}

/// The prepared_tokenizer seeds follow the current file format and the harness's source: each
/// loads, so fuzzing mutates files the loader accepts, not only ones it refuses.
#[test]
fn prepared_tokenizer_seeds_load() {
    let seeds = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/prepared_tokenizer");
    for name in ["tiny.body", "no-merges.body", "tiny-plain.body"] {
        let body = std::fs::read(seeds.join(name)).expect("seed");
        let dir = tempfile::tempdir().expect("temp dir");
        let tok = harness::load_body(dir.path(), &body).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(tok.is_prepared(), "{name}");
    }
}

/// The zmtp_frames seeds reach what the target checks: whole messages, commands, and each
/// bound's error (a seed that failed at the greeting would check nothing else).
#[test]
fn zmtp_frames_seeds_reach_messages_and_bounds() {
    use kvaudit::capture::zmtp::{Decoder, ErrorKind, Event, Limits, greeting};
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/zmtp_frames");
    let run = |name: &str, limits: Limits| {
        let data = std::fs::read(dir.join(name)).expect("seed");
        let mut input = Vec::new();
        if data[0] & 1 == 0 {
            input.extend_from_slice(&greeting());
        }
        input.extend_from_slice(&data[1..]);
        let mut d = Decoder::new(limits);
        let (mut messages, mut commands) = (0, 0);
        let mut rest = &input[..];
        loop {
            match d.decode(rest) {
                Ok((n, e)) => {
                    rest = &rest[n..];
                    match e {
                        Some(Event::Message(_)) => messages += 1,
                        Some(Event::Command(_)) => commands += 1,
                        Some(Event::Greeting(_)) => {}
                        None => return (messages, commands, None),
                    }
                }
                Err(e) => return (messages, commands, Some(e.kind)),
            }
        }
    };
    let big = Limits {
        max_message: 1 << 16,
        max_frames: 64,
        max_command: 1 << 16,
    };
    assert_eq!(run("publisher.bin", big), (2, 1, None));
    assert_eq!(run("replay-reply.bin", big), (2, 1, None));
    assert_eq!(
        run("ping-and-claim.bin", big),
        (0, 2, Some(ErrorKind::OversizedMessage))
    );
    assert_eq!(
        run("empty-frames.bin", big),
        (0, 1, Some(ErrorKind::TooManyFrames))
    );
    let small = Limits {
        max_message: 16,
        max_frames: 3,
        max_command: 0,
    };
    assert_eq!(
        run("own-greeting-small-limits.bin", small),
        (1, 0, Some(ErrorKind::OversizedMessage))
    );
}

#[test]
fn server_request() {
    replay("server_request");
}

#[test]
fn http_follower() {
    replay("http_follower");
}

#[test]
fn router_config() {
    replay("router_config");
}
