//! examples/ray_corpus.py on Ray Data in local mode: one task per shard runs `kvaudit corpus
//! --partial`, the driver merges, and the report equals one `kvaudit corpus` run over the same
//! shards. It runs the installed wheel's kvaudit when .ci/run set one up (KVAUDIT_WHEEL_BIN),
//! else the binary these tests built; Ray comes from .ci/ray.sh's environment (KVAUDIT_RAY_VENV,
//! or its cache).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

/// The Python that has Ray Data, or why there is none.
fn ray_python() -> Result<PathBuf, String> {
    let venv = match std::env::var_os("KVAUDIT_RAY_VENV") {
        Some(v) => PathBuf::from(v),
        None => {
            let cache = std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
                .ok_or("no HOME")?;
            cache.join("kvaudit-ray/ray-2.60.0")
        }
    };
    let python = venv.join("bin/python");
    if venv.join(".complete").is_file() && python.is_file() {
        Ok(python)
    } else {
        Err(format!(
            "Ray is not installed at {} (bash .ci/ray.sh installs it)",
            venv.display()
        ))
    }
}

fn kvaudit_bin() -> PathBuf {
    std::env::var_os("KVAUDIT_WHEEL_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_kvaudit")))
}

fn shard_files(dir: &Path) -> Vec<PathBuf> {
    let chats = std::fs::read_to_string(common::fixtures().join("corpus/chats.jsonl")).unwrap();
    let mut rows: Vec<String> = chats.lines().map(String::from).collect();
    rows.insert(3, "not json".into());
    let per = rows.len().div_ceil(4);
    rows.chunks(per)
        .enumerate()
        .map(|(i, part)| {
            let p = dir.join(format!("part-{i}.jsonl"));
            std::fs::write(&p, part.join("\n") + "\n").unwrap();
            p
        })
        .collect()
}

#[test]
fn the_ray_example_merges_shards_into_one_runs_report() {
    let test = "the_ray_example_merges_shards_into_one_runs_report";
    let python = match ray_python() {
        Ok(p) => p,
        Err(why) => {
            if std::env::var("KVAUDIT_REQUIRE_RAY").is_ok_and(|v| v == "1") {
                panic!("{test}: {why}");
            }
            common::skipped(test, &why);
            return;
        }
    };
    let kvaudit = kvaudit_bin();
    let dir = tempfile::tempdir().unwrap();
    let files = shard_files(dir.path());
    let model = common::fixtures().join("models/tiny-think");
    let flags = ["--now", "2026-01-15T10:00:00", "--worst", "3"];
    let one = Command::new(&kvaudit)
        .args(["corpus", "-m"])
        .arg(&model)
        .args(&files)
        .args(flags)
        // The example's tasks run one thread each; the report says how many a run used.
        .args(["--jobs", "1", "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(one.status.code(), Some(1), "{one:?}");
    for workers in ["1", "2"] {
        let out = Command::new(&python)
            .arg(common::repo_root().join("examples/ray_corpus.py"))
            .arg("-m")
            .arg(&model)
            .args(&files)
            .args(["--workers", workers, "--format", "json", "--kvaudit"])
            .arg(&kvaudit)
            .arg("--")
            .args(flags)
            // Ray writes its session files under the temp directory; keep them in the test's.
            .env("RAY_TMPDIR", dir.path())
            .env("TMPDIR", dir.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&one.stdout),
            "{workers} workers"
        );
        // The example's own account: every shard and conversation, at this many workers.
        let summary = stderr
            .lines()
            .find(|l| l.contains("conversations/s"))
            .unwrap_or_else(|| panic!("no timing line: {stderr}"));
        let json: serde_json::Value = serde_json::from_slice(&one.stdout).unwrap();
        let expected = format!(
            "{} shards, {} conversations, {workers} workers:",
            files.len(),
            json["conversations"]
        );
        assert!(summary.starts_with(&expected), "{summary}");
    }
}
