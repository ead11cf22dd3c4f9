//! kvaudit's llm-d view against llm-d's own Go code, run by the project's harness
//! (harness/llm-d, built by .ci/go-harness.sh from llm-d's module on the Go module proxy): each
//! comparison exact.

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value as Json, json};

use crate::common;

fn harness(test: &str) -> Option<PathBuf> {
    common::live::go_harness(test, "llm-d", "KVAUDIT_LLMD_HARNESS")
}

/// A small deterministic generator (64-bit LCG, high bits out).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.next() as usize % from.len()]
    }
}

/// Block keys: llm-d's token processor (`kvblock.NewChunkedTokenDatabase`, CBOR-FNV over
/// `[parent, tokens, extra]`) and `kvaudit keys` agree on every key of every case: block sizes
/// 1 to 128, seeds, model names (the empty one too), token ids at every CBOR width boundary
/// up to 2^32 - 1, prompts shorter than a block and not a whole number of blocks.
#[test]
fn block_keys_equal_llm_ds_own_token_processor() {
    let test = "block_keys_equal_llm_ds_own_token_processor";
    let Some(bin) = harness(test) else {
        return;
    };
    let mut rng = Lcg(0x6b76_6175_6469_7421);
    let boundaries: [u32; 12] = [
        0,
        1,
        23,
        24,
        255,
        256,
        65_535,
        65_536,
        151_643,
        1 << 24,
        u32::MAX - 1,
        u32::MAX,
    ];
    let block_sizes = [1, 2, 3, 7, 8, 15, 16, 17, 31, 32, 63, 64, 100, 127, 128];
    let seeds = ["", "0", "42", "kvaudit", "ü-seed"];
    let models = [
        "",
        "Qwen/Qwen3-8B",
        "meta-llama/Llama-3.1-8B-Instruct",
        "tiny",
        "m@d",
    ];
    let cases: Vec<Json> = (0..300)
        .map(|i| {
            let block = block_sizes[i % block_sizes.len()];
            let len = match i % 5 {
                0 => rng.next() as usize % block.max(2),
                1 => block * (1 + rng.next() as usize % 8),
                _ => rng.next() as usize % 1200,
            };
            let tokens: Vec<u32> = (0..len)
                .map(|_| match rng.next() % 3 {
                    0 => rng.pick(&boundaries),
                    1 => (rng.next() % 160_000) as u32,
                    _ => (rng.next() as u32) ^ ((rng.next() as u32) << 31),
                })
                .collect();
            json!({
                "block_size": block,
                "hash_seed": rng.pick(&seeds),
                "model": rng.pick(&models),
                "tokens": tokens,
            })
        })
        .collect();
    let theirs = common::live::json_lines(&bin.join("keys"), &cases);
    let dir = tempfile::tempdir().unwrap();
    let (mut keys, mut short) = (0, 0);
    for (i, (case, real)) in cases.iter().zip(&theirs).enumerate() {
        assert_eq!(real["error"], Json::Null, "case {i}: {real}");
        let file = dir.path().join(format!("{i}.json"));
        std::fs::write(&file, case["tokens"].to_string()).unwrap();
        let ours = common::kvaudit()
            .arg("keys")
            .arg("--tokens-file")
            .arg(&file)
            .args(["--index-block-size", &case["block_size"].to_string()])
            .args(["--hash-seed", case["hash_seed"].as_str().unwrap()])
            .args(["--model-name", case["model"].as_str().unwrap()])
            .args(["--format", "json"])
            .output()
            .unwrap();
        let n = real["keys"].as_array().unwrap().len();
        keys += n;
        if n == 0 {
            // llm-d keys no partial block; kvaudit says so, as an error, rather than print none.
            let err = String::from_utf8_lossy(&ours.stderr);
            assert_eq!(ours.status.code(), Some(2), "case {i}: {err}");
            assert!(err.starts_with("error: no keys: llm-d keys whole"), "{err}");
            short += 1;
            continue;
        }
        assert!(ours.status.success(), "case {i}: {ours:?}");
        let ours: Json = serde_json::from_slice(&ours.stdout).unwrap();
        let ours = &ours["sequences"][0]["keys"];
        assert_eq!(
            ours, &real["keys"],
            "case {i}: block size {}",
            case["block_size"]
        );
    }
    eprintln!(
        "{test}: {} cases, {keys} keys equal ({short} cases shorter than a block)",
        cases.len()
    );
    assert!(keys > 5_000 && short > 0);
}

/// Capture `name`'s messages (from `DIR/NAME.frames`) up to the first that carries an
/// AllBlocksCleared (its truth, `NAME.json`, says which): llm-d-kv-cache v0.8.1 only logs a
/// clear, so the comparisons stop before one.
fn before_clear(dir: &std::path::Path, name: &str) -> Vec<(Vec<u8>, u64, Vec<u8>)> {
    let truth: Json =
        serde_json::from_slice(&std::fs::read(dir.join(format!("{name}.json"))).unwrap()).unwrap();
    let clears_at = truth["messages"].as_array().unwrap().iter().position(|m| {
        m["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["type"] == "AllBlocksCleared")
    });
    let mut messages = common::event_fixtures::read_frames(&dir.join(format!("{name}.frames")));
    messages.truncate(clears_at.unwrap_or(messages.len()));
    messages
}

fn write_frames(path: &std::path::Path, messages: &[(Vec<u8>, u64, Vec<u8>)]) {
    let mut data = Vec::new();
    for (topic, seq, payload) in messages {
        data.extend_from_slice(&(topic.len() as u32).to_be_bytes());
        data.extend_from_slice(topic);
        data.extend_from_slice(&seq.to_be_bytes());
        data.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        data.extend_from_slice(payload);
    }
    std::fs::write(path, data).unwrap();
}

/// kvaudit's llm-d view of `frames` (`replay --router SPEC --llmd-profile router-2026-08`)
/// asked the harness's `lookups`, against llm-d's scores (the harness's standard output
/// `real`), every pod of every lookup in name order: each score times the block size equals
/// `index_tokens`. The view, how many were compared, and how many credited.
fn compare_lookups(
    frames: &std::path::Path,
    lookups: &std::path::Path,
    spec: &str,
    real: &[u8],
    block: usize,
    name: &str,
) -> (Json, u64, u64) {
    let scores: Vec<Json> = String::from_utf8_lossy(real)
        .lines()
        .map(|l| serde_json::from_str::<Json>(l).unwrap()["scores"].clone())
        .collect();
    let out = common::kvaudit()
        .arg("replay")
        .arg(frames)
        .args(["--router", spec])
        .args(["--llmd-profile", "router-2026-08", "--format", "json"])
        .arg("--lookup")
        .arg(lookups)
        .output()
        .unwrap();
    assert!(out.status.code() != Some(2), "{name}: {out:?}");
    let mut report: Json = serde_json::from_slice(&out.stdout).unwrap();
    let view = report["views"][0].take();
    let ours = view["lookups"].as_array().unwrap();
    let pods: std::collections::BTreeSet<&str> =
        ours.iter().map(|l| l["pod"].as_str().unwrap()).collect();
    assert_eq!(ours.len(), scores.len() * pods.len(), "{name} at {block}");
    let (mut compared, mut credited) = (0, 0);
    for (i, score) in scores.iter().enumerate() {
        for (j, pod) in pods.iter().enumerate() {
            let o = &ours[i * pods.len() + j];
            assert_eq!(o["pod"], json!(pod));
            let theirs = score.get(*pod).and_then(Json::as_f64).unwrap_or(0.0);
            let theirs = (theirs * block as f64) as u64;
            assert_eq!(
                o["index_tokens"].as_u64(),
                Some(theirs),
                "{name} at block size {block}, lookup {i}, pod {pod}"
            );
            compared += 1;
            credited += u64::from(theirs > 0);
        }
    }
    (view, compared, credited)
}

/// Real vLLM captures through llm-d's own event pool (its vLLM adapter, in-memory index and
/// token processor) and its longest-prefix scorer, against `replay --router llm-d
/// --llmd-profile router-2026-08`: every sequence a store of the capture ends is looked up, at
/// block sizes 8 to 64, and each pod's score times the block size equals kvaudit's
/// `index_tokens`, every pod of every lookup.
///
/// What llm-d-kv-cache v0.8.1 (the module served here) cannot take is shaped as it can, and
/// said: its subscriber takes only topics under `kv@` and names the pod from the topic, so
/// single-pod captures under `kv-events` are renamed `kv@POD@demo-model`; it ignores
/// AllBlocksCleared (it only logs it), so each capture is cut before the first message that
/// carries one; and a capture whose batches its adapter cannot decode (vLLM 0.9's batch
/// layout, every map-form capture of vLLM 0.26 on) is counted as such, its decode error
/// checked, not compared.
#[test]
fn llm_ds_own_pool_and_scorer_find_what_kvaudit_finds() {
    let test = "llm_ds_own_pool_and_scorer_find_what_kvaudit_finds";
    let Some(shared) = common::shared_dir(test) else {
        return;
    };
    let Some(bin) = harness(test) else {
        return;
    };
    let captures = shared.join("fixtures/vllm-events");
    let dir = tempfile::tempdir().unwrap();
    let (mut compared, mut credited, mut undecodable) = (0u64, 0u64, Vec::new());
    let mut crashes = Vec::new();
    for name in [
        "legacy-v0.9.0-s1",
        "legacy-v0.9.0-s3",
        "legacy-v0.10.2-s1",
        "legacy-v0.10.2-s3",
        "legacy-v0.23.0-s1",
        "legacy-v0.23.0-s3",
        "legacy-v0.10.2-s4",
        "legacy-v0.23.0-s4",
        "legacy-v0.10.2-s7",
        "legacy-v0.23.0-s7",
        "s1",
        "s3",
    ] {
        let mut messages = before_clear(&captures, name);
        for (topic, _, _) in &mut messages {
            if !topic.starts_with(b"kv@") {
                *topic = b"kv@pod-0@demo-model".to_vec();
            }
        }
        let frames = dir.path().join(format!("{name}.frames"));
        write_frames(&frames, &messages);
        for block in [8, 16, 32, 64] {
            let lookups = dir.path().join(format!("{name}-{block}.json"));
            let real = Command::new(bin.join("replay"))
                .arg("-frames")
                .arg(&frames)
                .args(["-block-size", &block.to_string(), "-derive"])
                .arg(&lookups)
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&real.stderr);
            if !real.status.success() {
                // llm-d-kv-cache v0.8.1 crashes on a store with extra keys (multimodal, a
                // cache salt) shorter than one of its blocks: realignExtraFeatures indexes an
                // empty slice. Its process ends; kvaudit skips that store and goes on.
                assert!(
                    err.contains("panic: runtime error: index out of range")
                        && err.contains("realignExtraFeatures"),
                    "{name}: {err}"
                );
                crashes.push(format!("{name} at {block}"));
                continue;
            }
            if !err.is_empty() {
                // Every message refused, each for its layout.
                assert_eq!(err.lines().count(), messages.len(), "{name}: {err}");
                assert!(
                    err.lines()
                        .all(|l| l.contains("failed to decode vLLM event")),
                    "{name}: {err}"
                );
                undecodable.push(name);
                break;
            }
            let spec = format!("llm-d:block_size={block}");
            let (_, c, k) = compare_lookups(&frames, &lookups, &spec, &real.stdout, block, name);
            compared += c;
            credited += k;
        }
    }
    eprintln!(
        "{test}: {compared} pod lookups equal ({credited} credited); not decodable by llm-d's \
         adapter: {undecodable:?}; llm-d crashed on: {crashes:?}"
    );
    assert!(compared >= 100 && credited >= 50, "{compared} {credited}");
}

/// One socket for every pod (llm-d's kvEventsConfig.zmqEndpoint): each message's pod is the
/// one its topic names, and the scheduler asks llm-d's index about its endpoints by IP
/// address:port. Two pods, one publishing under its endpoint's address and one under a pod
/// name, through llm-d's own pool and index with the lookups restricted to the endpoints
/// (`-endpoints`), against `replay --router llm-d:global_socket=true` (vLLM 0.10.2's two-pod
/// capture, the first under 10.0.0.5:8000, the second under its name): the named pod is
/// scored 0 by both (kvaudit counts its messages `pod_not_endpoint`), the other equally.
#[test]
fn one_socket_for_every_pod_scores_only_what_llm_ds_own_index_gives_its_endpoints() {
    let test = "one_socket_for_every_pod_scores_only_what_llm_ds_own_index_gives_its_endpoints";
    let Some(shared) = common::shared_dir(test) else {
        return;
    };
    let Some(bin) = harness(test) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // vLLM 0.10.2's two pods, cut before the clear llm-d-kv-cache v0.8.1 ignores.
    let captures = shared.join("fixtures/vllm-events");
    let mut messages = before_clear(&captures, "legacy-v0.10.2-s3");
    for (topic, _, _) in &mut messages {
        if topic.as_slice() == common::event_fixtures::POD_A.as_bytes() {
            *topic = b"kv@10.0.0.5:8000@demo-model".to_vec();
        }
    }
    let named = messages
        .iter()
        .filter(|(t, _, _)| t.as_slice() == common::event_fixtures::POD_B.as_bytes())
        .count();
    assert!(named > 0 && named < messages.len());
    let frames = dir.path().join("one-socket.frames");
    write_frames(&frames, &messages);
    let (mut compared, mut credited) = (0u64, 0u64);
    for block in [4, 8, 16] {
        let lookups = dir.path().join(format!("lookups-{block}.json"));
        let real = Command::new(bin.join("replay"))
            .arg("-frames")
            .arg(&frames)
            .args(["-block-size", &block.to_string()])
            .args(["-endpoints", "10.0.0.5:8000,10.0.0.6:8000", "-derive"])
            .arg(&lookups)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&real.stderr);
        assert!(real.status.success() && err.is_empty(), "{err}");
        let spec = format!("llm-d:block_size={block},global_socket=true");
        let (view, c, k) =
            compare_lookups(&frames, &lookups, &spec, &real.stdout, block, "one socket");
        assert_eq!(
            view["messages_dropped"],
            json!({"pod_not_endpoint": named}),
            "{view}"
        );
        let lookups_asked = String::from_utf8_lossy(&real.stdout).lines().count() as u64;
        assert_eq!(c, 2 * lookups_asked, "two pods");
        compared += c;
        credited += k;
        // Nothing is credited to the pod the topic names by name.
        assert!(!String::from_utf8_lossy(&real.stdout).contains("pod-b"));
    }
    eprintln!("{test}: {compared} pod lookups equal ({credited} credited)");
    assert!(credited > 0 && credited < compared, "{compared} {credited}");
}
