//! kvaudit's llm-d view against llm-d's own Go code, run by the project's harness
//! (harness/llm-d, built by .ci/llm-d.sh from llm-d's module on the Go module proxy): each
//! comparison exact.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::{Value as Json, json};

use crate::common;

/// The harness's commands (`bin/`): from KVAUDIT_LLMD_HARNESS (.ci/run sets it), else built
/// (or found built) by .ci/llm-d.sh when Go is on this machine; else `None`, the test skipped
/// saying why (under CI, failed).
fn harness(test: &str) -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("KVAUDIT_LLMD_HARNESS") {
        return Some(PathBuf::from(dir).join("bin"));
    }
    let go = Command::new("go").arg("version").output();
    if !go.is_ok_and(|o| o.status.success()) {
        let why = "Go is not installed (the harness is built with it: .ci/llm-d.sh)";
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{test}: {why}");
        }
        common::skipped(test, why);
        return None;
    }
    let built = Command::new("bash")
        .arg(common::repo_root().join(".ci/llm-d.sh"))
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(built.status.success(), ".ci/llm-d.sh failed");
    let dir = String::from_utf8(built.stdout).unwrap();
    Some(PathBuf::from(dir.trim()).join("bin"))
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
    let mut child = Command::new(bin.join("keys"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = String::new();
    for c in &cases {
        input.push_str(&c.to_string());
        input.push('\n');
    }
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(out.status.success());
    let theirs: Vec<Json> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(theirs.len(), cases.len());
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
