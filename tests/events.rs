//! Decoding conformance: every capture in ../shared/fixtures/vllm-events (vLLM 0.9 → 0.33,
//! `.msgpack` and `.frames`, int and bytes hashes) decodes to exactly its `.json` truth file.

use crate::common;

use std::path::Path;

use kvaudit::events::frames::CaptureReader;
use kvaudit::events::{
    BatchWire, Engine, EventKind, EventWire, Owned, Pool, WireHash, decode_batch, decode_batch_with,
};
use serde_json::{Value as Json, json};

fn hash_json(h: &WireHash) -> Json {
    match h {
        WireHash::Uint(v, _) => json!(v),
        WireHash::Int(v, _) => json!(v),
        WireHash::Bytes(b) => {
            json!({"bytes_hex": b.iter().map(|x| format!("{x:02x}")).collect::<String>()})
        }
    }
}

fn owned_json(o: &Owned) -> Json {
    match o {
        Owned::Nil => Json::Null,
        Owned::Bool(b) => json!(b),
        Owned::Int(i) => serde_json::from_str(&i.to_string()).unwrap(),
        Owned::Float(f) => json!(f),
        Owned::Str(s) => json!(s),
        Owned::Bytes(b) => {
            json!({"bytes_hex": b.iter().map(|x| format!("{x:02x}")).collect::<String>()})
        }
        Owned::List(l) => Json::Array(l.iter().map(owned_json).collect()),
        Owned::Map(m) => Json::Array(
            m.iter()
                .map(|(k, v)| json!([owned_json(k), owned_json(v)]))
                .collect(),
        ),
    }
}

fn event_json(kind: &EventKind) -> Json {
    match kind {
        EventKind::Stored(s) => json!({
            "type": "BlockStored",
            "block_hashes": s.block_hashes.iter().map(hash_json).collect::<Vec<_>>(),
            "parent_block_hash": s.parent_block_hash.as_ref().map(hash_json),
            "token_ids": s.token_ids,
            "block_size": s.block_size,
            "lora_id": s.lora_id,
            "medium": s.medium,
            "lora_name": s.lora_name,
            "extra_keys": s.extra_keys.as_ref().map(|e| e.iter().map(owned_json).collect::<Vec<_>>()),
            "group_idx": s.group_idx,
            "kv_cache_spec_kind": s.kv_cache_spec_kind,
            "kv_cache_spec_sliding_window": s.kv_cache_spec_sliding_window,
            "locality": s.locality,
            "ownership": s.ownership,
            "session_id": s.session_id,
            "lookahead_token_ids": s.lookahead_token_ids,
        }),
        EventKind::Removed(r) => json!({
            "type": "BlockRemoved",
            "block_hashes": r.block_hashes.iter().map(hash_json).collect::<Vec<_>>(),
            "medium": r.medium,
            "group_idx": r.group_idx,
            "locality": r.locality,
            "ownership": r.ownership,
        }),
        EventKind::AllCleared => json!({"type": "AllBlocksCleared"}),
    }
}

fn read_all(path: &Path) -> Vec<kvaudit::events::frames::Message> {
    let f = std::fs::File::open(path).unwrap();
    let mut r = CaptureReader::new(std::io::BufReader::new(f)).unwrap();
    let mut out = Vec::new();
    while let Some(m) = r.next_message() {
        out.push(m.unwrap_or_else(|e| panic!("{}: {e}", path.display())));
    }
    out
}

#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn every_fixture_decodes_to_its_truth_file() {
    let Some(shared) = common::shared_dir("every_fixture_decodes_to_its_truth_file") else {
        return;
    };
    let dir = shared.join("fixtures/vllm-events");
    let mut checked_events = 0;
    let mut files = 0;
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json") && n != "index.json" && n != "live-check.json")
        .collect();
    names.sort();
    for name in &names {
        let truth: Json =
            serde_json::from_str(&std::fs::read_to_string(dir.join(name)).unwrap()).unwrap();
        let stem = name.trim_end_matches(".json");
        let truth_msgs = truth["messages"].as_array().unwrap();
        for ext in ["msgpack", "frames"] {
            let path = dir.join(format!("{stem}.{ext}"));
            let msgs = read_all(&path);
            files += 1;
            assert_eq!(msgs.len(), truth_msgs.len(), "{stem}.{ext}: message count");
            for (m, t) in msgs.iter().zip(truth_msgs) {
                let where_ = format!("{stem}.{ext} message {}", t["index"]);
                if ext == "frames" {
                    assert_eq!(m.topic.as_deref(), t["topic"].as_str(), "{where_}: topic");
                    assert_eq!(m.seq, t["seq"].as_u64(), "{where_}: seq");
                } else {
                    assert_eq!(
                        m.payload_offset,
                        t["payload_offset"].as_u64().unwrap(),
                        "{where_}: offset"
                    );
                }
                assert_eq!(
                    m.payload.len() as u64,
                    t["payload_len"].as_u64().unwrap(),
                    "{where_}: payload length"
                );
                let batch = decode_batch(&m.payload, m.payload_offset as usize, Engine::Vllm)
                    .unwrap_or_else(|e| panic!("{where_}: {e}"));
                assert_eq!(batch.ts, t["ts"].as_f64().unwrap(), "{where_}: ts");
                assert_eq!(
                    batch.data_parallel_rank,
                    t["data_parallel_rank"].as_i64(),
                    "{where_}: rank"
                );
                assert_eq!(
                    batch.wire,
                    BatchWire::Array(t["batch_wire_length"].as_u64().unwrap() as usize),
                    "{where_}"
                );
                let tev = t["events"].as_array().unwrap();
                assert_eq!(batch.events.len(), tev.len(), "{where_}: event count");
                for (e, te) in batch.events.iter().zip(tev) {
                    let ours = event_json(&e.kind);
                    let wire = &te["_wire"];
                    match (e.wire, wire["form"].as_str().unwrap()) {
                        (EventWire::Array(n), "array") => {
                            assert_eq!(n as u64, wire["length"].as_u64().unwrap(), "{where_}")
                        }
                        (EventWire::Map, "map") => {}
                        other => panic!("{where_}: wire form {other:?}"),
                    }
                    // Every field of the truth, and nothing set that the truth lacks.
                    for (k, v) in ours.as_object().unwrap() {
                        match te.get(k) {
                            Some(want) => assert_eq!(v, want, "{where_}: {k}"),
                            None => assert!(
                                v.is_null(),
                                "{where_}: {k} = {v} but absent in this version"
                            ),
                        }
                    }
                    for k in te.as_object().unwrap().keys().filter(|k| *k != "_wire") {
                        assert!(ours.get(k).is_some(), "{where_}: field {k} not decoded");
                    }
                    checked_events += 1;
                }
            }
        }
    }
    eprintln!(
        "decoded {files} capture files, {checked_events} events identical to their truth files"
    );
    assert!(files >= 38, "expected every fixture, found {files}");
}

/// The decoder's fast path (vLLM's usual layout) and its general path give identical batches
/// for every fixture and for thousands of mutations of them; the fast path must actually
/// take the fixtures' events, or the comparison would prove nothing.
#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn fast_and_general_decoding_agree() {
    let Some(shared) = common::shared_dir("fast_and_general_decoding_agree") else {
        return;
    };
    let dir = shared.join("fixtures/vllm-events");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "frames"))
        .collect();
    paths.sort();
    let mut rand = common::xorshift(0x2545_F491_4F6C_DD1D);
    let (mut fast, mut compared, mut mutated_ok) = (Pool::default(), 0, 0);
    let mut declined = Vec::new();
    for path in &paths {
        let fast_before = fast.fast_decoded();
        for m in read_all(path) {
            for engine in [Engine::Vllm, Engine::Sglang] {
                let mut payloads = vec![m.payload.clone()];
                for _ in 0..8 {
                    let mut p = m.payload.clone();
                    let at = rand() as usize % p.len();
                    match rand() % 3 {
                        0 => p[at] ^= 1 << (rand() % 8),
                        1 => {
                            p[at] = [0xc0, 0xcf, 0xce, 0xa3, 0x91, 0xdc, 0x00][rand() as usize % 7]
                        }
                        _ => {
                            p.remove(at);
                        }
                    }
                    payloads.push(p);
                }
                for (i, p) in payloads.iter().enumerate() {
                    let a = decode_batch_with(p, 0, engine, &mut fast);
                    let b = decode_batch_with(p, 0, engine, &mut Pool::general_only());
                    assert_eq!(a, b, "{} (mutation {i})", path.display());
                    compared += 1;
                    if i > 0 && a.is_ok() {
                        mutated_ok += 1;
                    }
                    if let Ok(batch) = a {
                        fast.recycle(batch);
                    }
                }
            }
        }
        if fast.fast_decoded() == fast_before {
            declined.push(path.file_stem().unwrap().to_string_lossy().into_owned());
        }
    }
    eprintln!(
        "{compared} payloads decoded alike by both paths ({mutated_ok} mutated ones still decodable), {} events on the fast path",
        fast.fast_decoded()
    );
    // Only the captures whose hashes are bytes (s6) or narrow ints (s7) are left to the
    // general path entirely.
    assert!(
        declined
            .iter()
            .all(|n| n.ends_with("s6") || n.ends_with("s7")),
        "the fast path declined {declined:?}"
    );
    assert!(paths.len() >= 19 && mutated_ok > 100);
}

#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn re_encoding_vllm_0_33_captures_reproduces_their_bytes() {
    let Some(shared) = common::shared_dir("re_encoding_vllm_0_33_captures_reproduces_their_bytes")
    else {
        return;
    };
    let dir = shared.join("fixtures/vllm-events");
    let mut payloads = 0;
    for name in ["s1", "s2", "s3", "s4", "s5", "s6", "s7"] {
        for m in read_all(&dir.join(format!("{name}.msgpack"))) {
            let batch = decode_batch(&m.payload, 0, Engine::Vllm).unwrap();
            let again = kvaudit::events::encode::encode_batch(&batch);
            assert!(
                again == m.payload,
                "{name}: payload at {} re-encodes differently",
                m.payload_offset
            );
            payloads += 1;
        }
    }
    eprintln!("{payloads} payloads re-encoded byte for byte");
}

/// Token ids outside u32 take the general path (the fast path reads only unsigned ids of up
/// to 32 bits) and both paths give the same batch: the ids cast as llm-d casts them, and
/// the event marked, so the cast is never silent.
#[test]
fn out_of_range_token_ids_decode_alike_and_are_marked() {
    use kvaudit::events::msgpack::Writer;
    for (bad, cast, marked) in [
        (7i64, 7u32, false),
        (u32::MAX as i64, u32::MAX, false),
        (-1, u32::MAX, true),
        (i64::MIN, 0, true),
        (1 << 32, 0, true),
        (i64::MAX, u32::MAX, true),
    ] {
        for map in [false, true] {
            let mut w = Writer::default();
            w.array(3).f64(1.0).array(1);
            if map {
                w.map(5).str("type").str("BlockStored").str("block_hashes");
            } else {
                w.array(5).str("BlockStored");
            }
            w.array(1).u64_wide(1 << 40);
            if map {
                w.str("parent_block_hash");
            }
            w.nil();
            if map {
                w.str("token_ids");
            }
            w.array(3).uint(1).int(bad).uint(300);
            if map {
                w.str("block_size");
            }
            w.uint(3).uint(0);
            let fast = decode_batch_with(&w.buf, 0, Engine::Vllm, &mut Pool::default()).unwrap();
            let general =
                decode_batch_with(&w.buf, 0, Engine::Vllm, &mut Pool::general_only()).unwrap();
            assert_eq!(fast, general, "{bad}");
            let EventKind::Stored(s) = &fast.events[0].kind else {
                panic!()
            };
            assert_eq!(s.token_ids, vec![1, cast, 300], "{bad}");
            assert_eq!(s.token_ids_out_of_range, marked, "{bad}");
        }
    }
}
