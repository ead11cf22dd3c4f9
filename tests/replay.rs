//! `kvaudit replay` and `kvaudit keys` end to end: the reference's worked examples, captures
//! built here in the seed write-up's shape, bad input, and output formats.

use crate::common::{self, kvaudit};

use kvaudit::events::encode::encode_batch;
use kvaudit::events::frames::write_frame;
use kvaudit::events::msgpack::Writer;
use kvaudit::events::{Batch, BatchWire};
use serde_json::Value as Json;

/// A capture from ../shared's vLLM fixtures, for `test`.
fn vllm_capture(test: &str, name: &str) -> Option<String> {
    let shared = common::shared_dir(test)?;
    Some(
        shared
            .join("fixtures/vllm-events")
            .join(name)
            .display()
            .to_string(),
    )
}

fn replay_json(file: &str, extra: &[&str], code: i32) -> Json {
    let out = kvaudit()
        .args(["replay", file, "--format", "json"])
        .args(extra)
        .assert()
        .code(code);
    serde_json::from_slice(&out.get_output().stdout).unwrap()
}

fn view(v: &Json, block: u64) -> &Json {
    v["views"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["index_block_size"] == block)
        .unwrap()
}

fn skipped(view: &Json) -> u64 {
    view["stores_skipped"]
        .as_object()
        .unwrap()
        .values()
        .map(|n| n.as_u64().unwrap())
        .sum()
}

fn seq(view: &Json) -> (u64, u64) {
    let s = &view["sequences"][0];
    (
        s["engine_tokens"].as_u64().unwrap(),
        s["index_tokens"].as_u64().unwrap(),
    )
}

#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn vllm_captures_s1_and_s2() {
    for (name, full) in [
        ("s1.frames", 112),
        ("s1.msgpack", 112),
        ("s2.frames", 128),
        ("legacy-v0.23.0-s1.frames", 112),
    ] {
        let Some(file) = vllm_capture("vllm_captures_s1_and_s2", name) else {
            return;
        };
        // vLLM's topic here is `kv-events`: llm-d's default topic filter (`kv@`) never
        // receives it, and an empty filter receives every topic.
        if name.ends_with(".frames") {
            let v = replay_json(&file, &["--index-block-size", "16"], 1);
            assert_eq!(
                view(&v, 16)["messages_dropped"]["topic_filter"],
                4,
                "{name}"
            );
            assert_eq!(seq(view(&v, 16)), (full, 0), "{name}");
        }
        let v = replay_json(
            &file,
            &["--index-block-size", "16,64", "--topic-filter", ""],
            1,
        );
        let (b16, b64) = (view(&v, 16), view(&v, 64));
        assert_eq!(skipped(b16), 0, "{name}");
        assert_eq!(seq(b16), (full, full), "{name}");
        assert_eq!(skipped(b64), 3, "{name}");
        assert_eq!(
            b64["stores_skipped"]["incomplete_canonical_block"], 3,
            "{name}"
        );
        assert_eq!(seq(b64), (full, 64), "{name}");
        assert_eq!(v["events"]["block_stored"], 4);
    }
}

#[test]
fn seed_shape_captures() {
    let dir = tempfile::tempdir().unwrap();
    for (prompt, full) in [(64u32, 128u64), (80, 144)] {
        let path = dir.path().join(format!("seed-{prompt}.frames"));
        std::fs::write(&path, common::event_fixtures::seed_capture(prompt, 64)).unwrap();
        let file = path.display().to_string();
        let v = replay_json(&file, &["--index-block-size", "16,64"], 1);
        assert_eq!(skipped(view(&v, 16)), 0);
        assert_eq!(seq(view(&v, 16)), (full, full));
        let b64 = view(&v, 64);
        assert_eq!(
            b64["stores_skipped"],
            serde_json::json!({"incomplete_canonical_block": 4})
        );
        assert_eq!(seq(b64), (full, 64));
        assert_eq!(b64["sequences"][0]["model"], "demo-model");
        assert_eq!(b64["sequences"][0]["pod"], "decode-0");
        // llm-d-router's own behaviour: one silent drop, then the cascade.
        let v = replay_json(&file, &["--llmd-profile", "router-2026-08"], 1);
        assert_eq!(
            view(&v, 64)["stores_skipped"],
            serde_json::json!({"incomplete_canonical_block": 1, "parent_unresolved": 3})
        );
        assert_eq!(seq(view(&v, 64)), (full, 64));
        // Prometheus: the digest-first view counts the seed's metric, llm-d-router does not.
        let prom = kvaudit()
            .args(["replay", &file, "--format", "prometheus"])
            .assert()
            .code(1);
        let text = String::from_utf8(prom.get_output().stdout.clone()).unwrap();
        assert!(text.contains("llm_d_epp_kv_cache_events_stores_skipped_total{cache_kind=\"full_attention\",reason=\"incomplete_canonical_block\",index_block_size=\"64\",profile=\"digest-first\"} 4"), "{text}");
        let prom = kvaudit()
            .args([
                "replay",
                &file,
                "--format",
                "prometheus",
                "--llmd-profile",
                "router-2026-08",
            ])
            .assert()
            .code(1);
        let text = String::from_utf8(prom.get_output().stdout.clone()).unwrap();
        assert!(
            !text.contains("llm_d_epp_kv_cache_events_stores_skipped_total{"),
            "{text}"
        );
        assert!(text.contains("kvaudit_events_skipped_total{reason=\"parent_unresolved\",index_block_size=\"64\",profile=\"router-2026-08\"} 3"), "{text}");
    }
}

#[test]
fn explicit_lookups() {
    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("seed.frames");
    std::fs::write(&cap, common::event_fixtures::seed_capture(64, 64)).unwrap();
    let lookups = dir.path().join("lookups.json");
    let all: Vec<u32> = (1..=128).collect();
    std::fs::write(&lookups, serde_json::to_string(&serde_json::json!([all[..64], {"tokens": all, "pod": "decode-0"}, {"tokens": all, "pod": "other"}])).unwrap()).unwrap();
    let v = replay_json(
        &cap.display().to_string(),
        &[
            "--index-block-size",
            "16,64",
            "--lookup",
            &lookups.display().to_string(),
        ],
        1,
    );
    let found = |b: u64| -> Vec<u64> {
        view(&v, b)["lookups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["index_tokens"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(found(16), vec![64, 128, 0]);
    assert_eq!(found(64), vec![64, 64, 0]);
}

#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn narrow_integer_hashes_make_llm_d_drop_whole_messages() {
    let Some(file) = vllm_capture(
        "narrow_integer_hashes_make_llm_d_drop_whole_messages",
        "s7.frames",
    ) else {
        return;
    };
    // Its topic is vLLM's default, empty: received only with an empty filter.
    let v = replay_json(&file, &["--topic-filter", ""], 1);
    assert_eq!(v["messages"], 3);
    assert_eq!(v["malformed"], 0, "kvaudit itself decodes every width");
    assert_eq!(view(&v, 64)["messages_dropped"]["batch_decode_error"], 3);
    let Some(file) = vllm_capture(
        "narrow_integer_hashes_make_llm_d_drop_whole_messages",
        "legacy-v0.9.0-s1.frames",
    ) else {
        return;
    };
    let v = replay_json(&file, &["--topic-filter", ""], 1);
    assert_eq!(
        view(&v, 64)["messages_dropped"]["batch_decode_error"],
        4,
        "2-element batches"
    );
}

fn frame(topic: &[u8], seq: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    write_frame(&mut out, topic, seq, payload);
    out
}

fn fails(bytes: &[u8], extra: &[&str], want: &str) -> (String, Json) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.frames");
    std::fs::write(&path, bytes).unwrap();
    let out = kvaudit()
        .args(["replay", &path.display().to_string(), "--format", "json"])
        .args(extra)
        .assert()
        .code(2);
    let err = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(err.contains(want), "expected {want:?} in {err:?}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(!err.contains("panicked"));
    (
        err,
        serde_json::from_slice(&out.get_output().stdout).unwrap(),
    )
}

#[test]
fn bad_input_reports_the_offset_and_keeps_counts() {
    let good = common::event_fixtures::seed_capture(64, 64);
    let first_len = {
        // Length of the first frame: 4 + topic + 8 + 4 + payload.
        let topic = u32::from_be_bytes(good[..4].try_into().unwrap()) as usize;
        let pl =
            u32::from_be_bytes(good[4 + topic + 8..4 + topic + 12].try_into().unwrap()) as usize;
        4 + topic + 12 + pl
    };
    // Truncated in the middle of the second frame's payload.
    let (err, v) = fails(&good[..first_len + 40], &[], "truncated frame");
    assert!(
        err.contains(&format!("byte {}", first_len + 4 + 22 + 12)),
        "{err}"
    );
    assert_eq!(v["messages"], 1, "counts of everything before the error");
    assert_eq!(v["input"]["error"]["offset"], first_len + 4 + 22 + 12);
    // A payload length beyond the file.
    let mut beyond = good[..first_len].to_vec();
    beyond.extend_from_slice(&frame(b"kv@p@m", 1, &[0x93])[..18]);
    beyond.extend_from_slice(&1000u32.to_be_bytes());
    fails(
        &beyond,
        &[],
        &format!("the frame at byte {first_len} claims 1000 payload bytes but the file ends"),
    );
    // Invalid UTF-8 topic.
    let mut bad_topic = good[..first_len].to_vec();
    bad_topic.extend_from_slice(&frame(&[0x6b, 0xff, 0x40], 1, &[0x93, 0x00, 0x90, 0x00]));
    let (err, _) = fails(&bad_topic, &[], "topic is not valid UTF-8");
    assert!(err.contains(&format!("byte {}", first_len + 4)), "{err}");
    // Unknown tag and wrong field types: stop, or count and go on with --keep-going.
    let mut w = Writer::default();
    w.array(3)
        .f64(0.0)
        .array(1)
        .map(2)
        .str("type")
        .str("BlockMigrated")
        .str("block_hashes")
        .array(0)
        .uint(0);
    let mut unknown = good[..first_len].to_vec();
    unknown.extend_from_slice(&frame(b"kv@decode-0@demo-model", 1, &w.buf));
    unknown.extend_from_slice(&good[first_len..]);
    fails(&unknown, &[], "unknown event tag \"BlockMigrated\"");
    let mut w = Writer::default();
    w.array(3)
        .f64(0.0)
        .array(1)
        .map(4)
        .str("type")
        .str("BlockRemoved")
        .str("block_hashes")
        .array(0)
        .str("medium")
        .uint(3);
    w.str("group_idx").nil().uint(0);
    let mut wrong = good[..first_len].to_vec();
    wrong.extend_from_slice(&frame(b"kv@decode-0@demo-model", 1, &w.buf));
    fails(&wrong, &[], "medium: expected a string or nil, found int");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mixed.frames");
    std::fs::write(&path, &unknown).unwrap();
    let out = kvaudit()
        .args([
            "replay",
            &path.display().to_string(),
            "--format",
            "json",
            "--keep-going",
        ])
        .assert()
        .code(1);
    let v: Json = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(v["messages"], 6);
    assert_eq!(v["malformed"], 1);
    assert_eq!(view(&v, 64)["messages_dropped"]["batch_decode_error"], 1);
    assert_eq!(
        seq(view(&v, 64)).0,
        128,
        "the events after the bad message still count"
    );
    // Not a capture at all.
    fails(b"\x00\x00\x00\x05kv", &[], "truncated frame: topic");
    fails(b"\xc1\xc1", &[], "not msgpack");
}

#[test]
fn replay_reads_stdin() {
    let out = kvaudit()
        .args(["replay", "-", "--format", "json"])
        .write_stdin(common::event_fixtures::seed_capture(80, 64))
        .assert()
        .code(1);
    let v: Json = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(v["input"]["format"], "frames");
    assert_eq!(seq(view(&v, 64)), (144, 64));
}

#[test]
fn keys_match_llm_d_vectors() {
    let out = kvaudit()
        .args([
            "keys",
            "--tokens",
            "8197,438,322,18926,432,45600,49",
            "--index-block-size",
            "4",
            "--model-name",
            "ibm-granite/granite-3.1-8b-instruct",
        ])
        .assert()
        .success();
    assert_eq!(
        String::from_utf8_lossy(&out.get_output().stdout),
        "model name \"ibm-granite/granite-3.1-8b-instruct\" (from --model-name)\n\
         hash cbor-fnv, seed \"\", index block size 4\n\n\
         tokens: 7 tokens, 1 key; the last 3 tokens are not in a whole block and get no key\n  \
         block 0    tokens 0..4         1334984470577408192\n"
    );
    let tokens: Vec<String> = (1..=32).map(|t| t.to_string()).collect();
    let out = kvaudit()
        .args([
            "keys",
            "--tokens",
            &tokens.join(","),
            "--index-block-size",
            "16",
            "--model-name",
            "test-model",
            "--hash",
            "xxh64",
            "--format",
            "json",
        ])
        .assert()
        .success();
    let v: Json = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(
        v["sequences"][0]["keys"],
        serde_json::json!([13553460584553255540u64, 9887990258693334188u64])
    );
    kvaudit()
        .args(["keys", "--tokens", "1,2"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("--model-name"));
}

#[test]
fn keys_of_rendered_prompts() {
    let out = kvaudit()
        .args([
            "keys",
            "--model",
            "fixtures/models/tiny-plain",
            "--model-name",
            "tiny",
            "--now",
            "2026-01-15T10:00:00",
            "--index-block-size",
            "8",
            "--format",
            "json",
        ])
        .env("KVAUDIT_TOKENIZER_CACHE", "off")
        .assert()
        .success();
    let v: Json = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let seqs = v["sequences"].as_array().unwrap();
    assert_eq!(seqs.len(), 6, "three probes, two prompts each");
    // Prompt 2 extends prompt 1 on an extending template: its keys start with prompt 1's.
    let k1 = seqs[0]["keys"].as_array().unwrap();
    let k2 = seqs[1]["keys"].as_array().unwrap();
    assert_eq!(k1.len(), seqs[0]["tokens"].as_u64().unwrap() as usize / 8);
    assert_eq!(&k2[..k1.len()], &k1[..]);
}

/// No byte sequence makes replay panic: thousands of mutations of a real capture (flipped,
/// inserted, deleted and truncated bytes) through the reader, decoder and every view.
#[test]
fn mutated_captures_never_panic() {
    use kvaudit::events::Engine;
    use kvaudit::events::frames::CaptureReader;
    use kvaudit::replay::ReplayOptions;
    use kvaudit::routers::llm_d::{IndexConfig, Profile};
    let base = common::event_fixtures::seed_capture(80, 64);
    let mut rand = common::xorshift(0x9E37_79B9_7F4A_7C15);
    for case in 0..3000 {
        let mut data = base.clone();
        for _ in 0..1 + rand() % 4 {
            let at = (rand() as usize) % data.len();
            match rand() % 4 {
                0 => data[at] ^= 1 << (rand() % 8),
                1 => data.insert(at, rand() as u8),
                2 => {
                    data.remove(at);
                }
                _ => data.truncate(at),
            }
            if data.is_empty() {
                break;
            }
        }
        let mut views = vec![IndexConfig::new(16), IndexConfig::new(64)];
        views[1].profile = Profile::Router202608;
        let options = ReplayOptions {
            views,
            dynamo: Vec::new(),
            engine: Engine::Vllm,
            keep_going: case % 2 == 0,
            default_pod: "p".into(),
        };
        let lookup = kvaudit::replay::LookupRequest {
            tokens: (1..=144).collect(),
            pod: None,
            model: None,
        };
        let reader = CaptureReader::new(&data[..]).unwrap();
        kvaudit::replay::run(reader, options, &[lookup], |_| {});
    }
}

// ---- hostile captures: bounded memory, linear time, counted reasons, no panic ----

fn stored_event(hashes: usize, tokens: Vec<u32>, block_size: i64, group: bool) -> Batch {
    use kvaudit::events::msgpack::IntWidth;
    use kvaudit::events::{BlockStored, Event, EventKind, EventWire, WireHash};
    let ev = BlockStored {
        block_hashes: (0..hashes)
            .map(|i| WireHash::Uint((1 << 40) + i as u64, IntWidth::U64))
            .collect(),
        token_ids: tokens,
        block_size,
        medium: Some("GPU".into()),
        group_idx: group.then_some(0),
        kv_cache_spec_kind: group.then(|| "full_attention".into()),
        ..BlockStored::default()
    };
    Batch {
        ts: 1.0,
        events: vec![Event {
            kind: EventKind::Stored(Box::new(ev)),
            wire: EventWire::Map,
        }],
        data_parallel_rank: Some(0),
        wire: BatchWire::Array(3),
    }
}

fn write_temp(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    path.display().to_string()
}

/// The campaign's crafted BlockStored (block_size 2^62+1, four hashes, four tokens: `n *
/// block_size` wrapped to 4) panicked replay. It and the other impossible block sizes are
/// now skipped and counted: by llm-d's own reasons in the views when the event has a group
/// (llm-d's density check), and by the engine view, which needs the blocks, always.
#[test]
fn impossible_block_sizes_are_counted_not_panicked() {
    let dir = tempfile::tempdir().unwrap();
    let cases: Vec<(usize, Vec<u32>, i64)> = vec![
        (4, vec![1, 2, 3, 4], (1 << 62) + 1),
        (1, (1..=16).collect(), 0),
        (1, (1..=16).collect(), -16),
        (1, (1..=16).collect(), i64::MAX),
        (2, (1..=20).collect(), 16),
        (0, (1..=16).collect(), 16),
        (3, (1..=32).collect(), 16),
    ];
    for group in [false, true] {
        let mut frames = Vec::new();
        for (seq, (hashes, tokens, bs)) in cases.iter().enumerate() {
            let batch = stored_event(*hashes, tokens.clone(), *bs, group);
            write_frame(&mut frames, b"kv@p@m", seq as u64, &encode_batch(&batch));
        }
        let file = write_temp(&dir, "crafted.frames", &frames);
        let v = replay_json(&file, &["--index-block-size", "16,64"], 1);
        assert_eq!(v["messages"], cases.len());
        assert_eq!(v["malformed"], 0);
        assert_eq!(v["engine_skipped"]["invalid_block_size"], 2, "{v}");
        assert_eq!(v["engine_skipped"]["non_dense_block_span"], 5, "{v}");
        for bs in [16, 64] {
            let skipped = &view(&v, bs)["stores_skipped"];
            if group {
                assert_eq!(skipped["invalid_block_size"], 2, "{skipped}");
                assert_eq!(skipped["non_dense_block_span"], 5, "{skipped}");
            } else {
                // llm-d checks density only for events with a group; it re-chunks the rest.
                assert!(skipped.get("non_dense_block_span").is_none(), "{skipped}");
            }
        }
    }
    // The crafted event alone, as the campaign sent it: one clear count, exit 1 (findings).
    let batch = stored_event(4, vec![1, 2, 3, 4], (1 << 62) + 1, false);
    let file = write_temp(
        &dir,
        "one.frames",
        &frame(b"kv@p@m", 0, &encode_batch(&batch)),
    );
    // Wide enough that no report line wraps (it names a temporary file): the test looks for a
    // whole line.
    let out = kvaudit()
        .env("COLUMNS", "250")
        .args(["replay", &file])
        .assert()
        .code(1);
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(
        text.contains(
            "1 BlockStored events the engine view cannot split into blocks: non_dense_block_span"
        ),
        "{text}"
    );
    assert!(out.get_output().stderr.is_empty());
}

/// Address space a hostile-input run may use: kvaudit replays small captures in under
/// 32 MB, and each defect these tests pin needed hundreds of MB or more.
const MEMORY_CAP: u64 = 64 << 20;

/// Runs kvaudit with stdout to a file, its address space capped at `cap` bytes, and returns
/// its stdout; panics with its stderr unless it exits with `want`. A run that needs more
/// than the cap aborts on allocation and fails here. (A cap, not a peak measured after the
/// fact: the kernel's max RSS of a child includes the RSS of the test process it was
/// spawned from, which the other tests running alongside inflate.)
fn run_capped(args: &[&str], stdin: Option<&str>, cap: Option<u64>, want: i32) -> Vec<u8> {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("stdout");
    let err_path = dir.path().join("stderr");
    let mut cmd = common::kvaudit_process();
    cmd.args(args)
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap());
    if let Some(path) = stdin {
        cmd.stdin(std::fs::File::open(path).unwrap());
    }
    if let Some(cap) = cap {
        let limit = libc::rlimit {
            rlim_cur: cap as libc::rlim_t,
            rlim_max: cap as libc::rlim_t,
        };
        // SAFETY: setrlimit is async-signal-safe and touches only the child being spawned.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setrlimit(libc::RLIMIT_AS, &limit) == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            });
        }
    }
    let status = cmd.status().unwrap();
    let stderr = std::fs::read_to_string(&err_path).unwrap();
    assert_eq!(status.code(), Some(want), "{args:?}: {status}: {stderr}");
    std::fs::read(&out_path).unwrap()
}

/// 50 MB of zeros read as frames is 3.2 million empty, undecodable messages. With
/// --keep-going each was kept in a list (2 GB of zeros aborted at 3.8 GB); they are counted
/// by kind with a few examples, so memory and the report stay small.
#[test]
fn keep_going_on_zeros_keeps_memory_and_report_small() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("zeros.frames");
    let size = 50u64 << 20;
    std::fs::File::create(&path).unwrap().set_len(size).unwrap();
    let path = path.display().to_string();
    let stdout = run_capped(
        &["replay", &path, "--keep-going", "--format", "json"],
        None,
        Some(MEMORY_CAP),
        1,
    );
    assert!(stdout.len() < 8 << 10, "report of {} bytes", stdout.len());
    let v: Json = serde_json::from_slice(&stdout).unwrap();
    let messages = size / 16; // each frame: topic length, empty topic, seq, payload length
    assert_eq!(v["messages"], messages);
    assert_eq!(v["malformed"], messages);
    let kinds = v["malformed_kinds"].as_object().unwrap();
    assert_eq!(kinds.len(), 1, "{kinds:?}");
    let (kind, what) = kinds.iter().next().unwrap();
    assert_eq!(kind, "truncated");
    assert_eq!(what["count"], messages);
    let offsets: Vec<u64> = what["examples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["offset"].as_u64().unwrap())
        .collect();
    assert_eq!(offsets, vec![16, 32, 48]);
}

/// A raw msgpack array header claiming 2^32-1 elements before 64 MB of zeros took 17 s (the
/// value was re-scanned from its start on every read). Such a claim cannot fit the 1 GiB
/// message limit and fails at once; a claim that could fit is scanned once (stdin: no file
/// size to check against), failing where the input ends.
#[test]
fn raw_msgpack_claims_fail_fast_and_scan_once() {
    let dir = tempfile::tempdir().unwrap();
    let zeros = 64u64 << 20;
    let make = |name: &str, head: &[u8]| {
        let path = dir.path().join(name);
        std::fs::write(&path, head).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(head.len() as u64 + zeros)
            .unwrap();
        path.display().to_string()
    };
    let huge = make("huge.msgpack", &[0xdd, 0xff, 0xff, 0xff, 0xff]);
    run_capped(&["replay", &huge], None, Some(MEMORY_CAP), 2);
    fails_at(&huge, "more than the 1 GiB limit");
    // 2^28 elements: within the limit, but more than the file holds.
    let big = make("big.msgpack", &[0xdd, 0x10, 0x00, 0x00, 0x00]);
    fails_at(
        &big,
        &format!(
            "its headers claim more bytes than the file holds (it ends at byte {})",
            5 + zeros
        ),
    );
    // The whole value is buffered as it arrives (64 MB): no cap here.
    let stdout = run_capped(&["replay", "-", "--format", "json"], Some(&big), None, 2);
    let v: Json = serde_json::from_slice(&stdout).unwrap();
    assert_eq!(v["input"]["error"]["offset"], 0);
    assert_eq!(
        v["input"]["error"]["reason"],
        format!(
            "truncated msgpack message: {} bytes left at the end",
            5 + zeros
        )
    );
}

fn fails_at(path: &str, want: &str) {
    let out = kvaudit().args(["replay", path]).assert().code(2);
    let err = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(err.contains(want), "expected {want:?} in {err:?}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}

/// A 154-byte capture whose second frame claims a 1 GiB payload allocated 1 GiB before
/// finding the file too short. It fails with where the frame is and where the file ends,
/// from a file (size known: nothing read) and from stdin (read as it comes).
#[test]
fn frames_claiming_more_than_the_file_holds_allocate_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = Writer::default();
    w.array(3).f64(0.0).array(0).uint(0);
    let mut data = frame(b"kv@p@m", 0, &w.buf);
    let second = data.len();
    data.extend_from_slice(&frame(b"kv@p@m", 1, &[])[..18]);
    data.extend_from_slice(&(1u32 << 30).to_be_bytes());
    data.resize(154, 0x93);
    let file = write_temp(&dir, "claim.frames", &data);
    let want = format!(
        "byte {}: truncated frame: the frame at byte {second} claims 1073741824 payload bytes but the file ends at byte 154",
        second + 22
    );
    fails_at(&file, &want);
    for stdin in [false, true] {
        let args: &[&str] = if stdin {
            &["replay", "-", "--format", "json"]
        } else {
            &["replay", &file, "--format", "json"]
        };
        let stdout = run_capped(args, stdin.then_some(file.as_str()), Some(MEMORY_CAP), 2);
        let v: Json = serde_json::from_slice(&stdout).unwrap();
        assert_eq!(v["messages"], 1, "the frame before still counts");
    }
}

/// 100,000 distinct topics took 17.5 s (each new pod was looked for by a scan of all pods).
#[test]
fn one_hundred_thousand_topics() {
    let dir = tempfile::tempdir().unwrap();
    let n = 100_000u32;
    let mut frames = Vec::new();
    for i in 0..n {
        let tokens: Vec<u32> = (0..16).map(|t| i * 16 + t).collect();
        let batch = stored_event(1, tokens, 16, true);
        let topic = format!("kv@pod-{i}@m");
        write_frame(&mut frames, topic.as_bytes(), 0, &encode_batch(&batch));
    }
    let file = write_temp(&dir, "topics.frames", &frames);
    let v = replay_json(&file, &["--index-block-size", "16"], 0);
    assert_eq!(v["messages"], n);
    assert_eq!(v["events"]["block_stored"], n);
    let b16 = view(&v, 16);
    assert_eq!(b16["stores_accepted"], n);
    let sequences = b16["sequences"].as_array().unwrap();
    assert_eq!(sequences.len(), n as usize);
    assert!(
        sequences
            .iter()
            .all(|s| s["engine_tokens"] == 16 && s["index_tokens"] == 16)
    );
    assert_eq!(sequences[0]["pod"], "pod-0");
}

/// Token ids outside u32 (negative, or 2^32 and up) are cast as llm-d casts them, and
/// counted: vLLM never sends one, so a capture that has them is not what it seems.
#[test]
fn out_of_range_token_ids_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    let mut frames = Vec::new();
    for (seq, bad) in [None, Some(-1i64), Some(1 << 32)].into_iter().enumerate() {
        let mut w = Writer::default();
        w.array(3).f64(1.0).array(1).array(11).str("BlockStored");
        w.array(1).u64_wide((1 << 40) + seq as u64).nil();
        w.array(16);
        for t in 0..16i64 {
            w.int(if t == 5 {
                bad.unwrap_or(t)
            } else {
                t + 100 * seq as i64
            });
        }
        w.uint(16).nil().str("GPU").nil().array(1).nil().uint(0);
        w.str("full_attention").uint(0);
        write_frame(&mut frames, b"kv@p@m", seq as u64, &w.buf);
    }
    let file = write_temp(&dir, "tokens.frames", &frames);
    let v = replay_json(&file, &["--index-block-size", "16"], 1);
    assert_eq!(v["malformed"], 0);
    assert_eq!(v["events"]["block_stored"], 3);
    assert_eq!(v["events"]["token_ids_out_of_range"], 2);
    assert_eq!(
        view(&v, 16)["stores_accepted"],
        3,
        "llm-d indexes them cast"
    );
}

/// The committed fixtures (fixtures/events/, written by kvaudit's own encoder) replay where
/// ../shared is absent: the counts are those the generator built in (see
/// tests/common/event_fixtures.rs), and llm-d's losses are the same kinds as on the real
/// captures (s3.frames, s7.frames).
#[test]
fn committed_fixtures_replay_without_shared() {
    let file = |name: &str| {
        common::fixtures()
            .join("events")
            .join(name)
            .display()
            .to_string()
    };
    let v = replay_json(
        &file("two-pods.frames"),
        &["--index-block-size", "16,64"],
        1,
    );
    assert_eq!(v["messages"], 8);
    assert_eq!(v["malformed"], 0);
    assert_eq!(
        v["events"],
        serde_json::json!({"block_stored": 7, "block_removed": 1, "all_blocks_cleared": 0, "token_ids_out_of_range": 0})
    );
    let held = |view: &Json, pod: &str| -> (u64, u64) {
        let s = view["sequences"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["pod"] == pod)
            .unwrap_or_else(|| panic!("no sequence on {pod}: {view}"));
        assert_eq!(s["model"], "demo-model");
        (
            s["engine_tokens"].as_u64().unwrap(),
            s["index_tokens"].as_u64().unwrap(),
        )
    };
    let b16 = view(&v, 16);
    assert_eq!(skipped(b16), 0);
    // pod-b's last block was evicted: 64 tokens stored, 48 held.
    assert_eq!(
        (held(b16, "pod-a"), held(b16, "pod-b")),
        ((96, 96), (48, 48))
    );
    let b64 = view(&v, 64);
    assert_eq!(
        b64["stores_skipped"],
        serde_json::json!({"incomplete_canonical_block": 7})
    );
    assert_eq!((held(b64, "pod-a"), held(b64, "pod-b")), ((96, 0), (48, 0)));

    let v = replay_json(&file("narrow-hashes.frames"), &[], 1);
    assert_eq!(v["messages"], 5);
    assert_eq!(v["malformed"], 0, "kvaudit itself decodes every width");
    assert_eq!(view(&v, 64)["messages_dropped"]["batch_decode_error"], 5);
}

/// llm-d with one socket for every pod (kvEventsConfig.zmqEndpoint set) takes each message's
/// pod from its topic, and its scheduler scores endpoints by IP address:port: a topic naming a
/// pod any other way is indexed where no scored endpoint is (counted `pod_not_endpoint`,
/// nothing credited); with pods discovered, each is named by its endpoint whatever the topic.
#[test]
fn one_socket_for_every_pod_credits_only_topics_naming_an_endpoint() {
    use kvaudit::events::frames::write_frame;
    let dir = tempfile::tempdir().unwrap();
    let capture = dir.path().join("seed.frames");
    std::fs::write(&capture, common::event_fixtures::seed_capture(64, 64)).unwrap();
    let messages = common::event_fixtures::read_frames(&capture);
    for (pod, scored) in [
        ("decode-0", false),
        ("decode-0.pods.svc:8000", false),
        ("10.0.0.5", false),
        ("10.0.0.5:8000", true),
        ("[fd00::5]:8000", true),
    ] {
        let mut frames = Vec::new();
        for (_, seq, payload) in &messages {
            write_frame(
                &mut frames,
                format!("kv@{pod}@demo-model").as_bytes(),
                *seq,
                payload,
            );
        }
        let file = dir.path().join("topic.frames");
        std::fs::write(&file, frames).unwrap();
        let file = file.display().to_string();
        let run = |extra: &[&str]| -> Json {
            let out = kvaudit()
                .args([
                    "replay",
                    &file,
                    "--format",
                    "json",
                    "--index-block-size",
                    "16",
                ])
                .args(extra)
                .output()
                .unwrap();
            assert!(matches!(out.status.code(), Some(0 | 1)), "{out:?}");
            serde_json::from_slice(&out.stdout).unwrap()
        };
        let discovered = run(&[]);
        assert_eq!(seq(view(&discovered, 16)), (128, 128), "{pod}");
        for global in [
            run(&["--global-socket"]),
            run(&["--router", "llm-d:global_socket=true"]),
        ] {
            let b16 = view(&global, 16);
            if scored {
                assert_eq!(b16["messages_dropped"], serde_json::json!({}), "{pod}");
                assert_eq!(seq(b16), (128, 128), "{pod}");
            } else {
                assert_eq!(
                    b16["messages_dropped"],
                    serde_json::json!({"pod_not_endpoint": messages.len()}),
                    "{pod}"
                );
                assert_eq!(seq(b16), (128, 0), "{pod}");
            }
        }
    }
}
