//! `corpus FILE.parquet`: the layouts Hugging Face datasets ship (an OpenAI `messages` column,
//! WildChat's `conversation` with per-message fields, ShareGPT's `conversations`), with snappy,
//! zstd and gzip pages, give the report the same rows give as JSONL; a gigabyte of rows streams
//! through in bounded memory; a damaged or hostile file is a counted skip or one clear error,
//! never a crash.

use crate::common::{self, kvaudit};

use std::path::{Path, PathBuf};
use std::process::Command as Process;

use serde_json::Value as Json;

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `input` (JSON lines) as Parquet at `out` in `layout` ("" for OpenAI's), and the same rows
/// as JSON lines back from the Parquet file, beside it.
fn make_parquet(input: &Path, out: &Path, codec: &str, layout: &str, group_rows: usize) -> PathBuf {
    let same = out.with_extension("jsonl");
    let mut cmd = Process::new("python3");
    cmd.arg(common::repo_root().join("tests/make_parquet.py"))
        .arg(input)
        .arg(out)
        .args([
            "--codec",
            codec,
            "--row-group-rows",
            &group_rows.to_string(),
        ])
        .arg("--jsonl-out")
        .arg(&same);
    if !layout.is_empty() {
        cmd.arg(layout);
    }
    let done = cmd.output().unwrap();
    assert!(
        done.status.success(),
        "make_parquet.py: {}",
        String::from_utf8_lossy(&done.stderr)
    );
    same
}

/// The JSON report of `corpus -m MODEL FILE`, with the file's name and its compression (the
/// only things that differ between a Parquet file and the same rows as JSONL) taken out.
fn report(model: &str, file: &Path, code: i32) -> Json {
    let out = kvaudit()
        .args(["corpus", "-m", model, path_str(file), "--format", "json"])
        .args(["--now", "2026-01-15T10:00:00", "--worst", "5"])
        .assert()
        .code(code);
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    let name = file.file_name().unwrap().to_str().unwrap();
    let mut v: Json = serde_json::from_str(&text.replace(name, "FILE")).unwrap();
    v["input"]["files"][0]["compression"] = Json::Null;
    v
}

fn assert_same_as_jsonl(model: &str, input: &Path, dir: &Path, group_rows: usize) -> Vec<Json> {
    let mut reports = Vec::new();
    for layout in ["", "--wildchat", "--sharegpt"] {
        for codec in ["snappy", "zstd", "gzip"] {
            let pq = dir.join(format!("rows{layout}-{codec}.parquet"));
            let same = make_parquet(input, &pq, codec, layout, group_rows);
            let from_parquet = report(model, &pq, 1);
            let from_jsonl = report(model, &same, 1);
            assert_eq!(from_parquet, from_jsonl, "{layout} {codec}");
            // The report says which codec the file used, and the layout it found.
            let raw = kvaudit()
                .args(["corpus", "-m", model, path_str(&pq), "--format", "json"])
                .assert()
                .code(1);
            let r: Json = serde_json::from_slice(&raw.get_output().stdout).unwrap();
            assert_eq!(r["input"]["files"][0]["compression"], codec);
            let format = match layout {
                "--wildchat" => "wildchat",
                "--sharegpt" => "sharegpt",
                _ => "openai",
            };
            assert_eq!(r["input"]["files"][0]["format"], format);
            reports.push(from_parquet);
        }
    }
    reports
}

#[test]
fn parquet_layouts_and_codecs_read_as_the_same_rows_in_jsonl() {
    let dir = tempfile::tempdir().unwrap();
    let model = common::fixtures().join("models/tiny-think");
    let reports = assert_same_as_jsonl(
        path_str(&model),
        &common::fixtures().join("corpus/chats.jsonl"),
        dir.path(),
        3,
    );
    // Every layout audits the same conversations (ShareGPT's has no tool calls, so compare the
    // OpenAI and WildChat ones, whose rows carry the same messages).
    assert_eq!(reports[0]["conversations"], reports[3]["conversations"]);
    assert!(reports[0]["conversations"].as_u64().unwrap() >= 5);
}

#[test]
#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
fn real_corpora_as_parquet_read_as_the_same_rows() {
    let Some(shared) = common::shared_dir("real_corpora_as_parquet_read_as_the_same_rows") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // ShareGPT conversations, OASST trees and MT-Bench-101 dialogues, one after the other.
    let input = dir.path().join("real.jsonl");
    let mut text = String::new();
    for name in ["sharegpt-v3-sample", "oasst1-en100", "mt-bench-101"] {
        let file = std::fs::read_to_string(shared.join(format!("corpus/{name}.jsonl"))).unwrap();
        for line in file.lines().take(400) {
            text.push_str(line);
            text.push('\n');
        }
    }
    std::fs::write(&input, text).unwrap();
    let model = shared.join("models/qwen3-8b");
    let reports = assert_same_as_jsonl(path_str(&model), &input, dir.path(), 100);
    assert!(reports[0]["conversations"].as_u64().unwrap() > 1000);
}

/// 1 GiB of rows (each a 1 MiB system prompt with no user turn, skipped after it is read,
/// real conversations between) in row groups of 16 rows, zstd so the file is small, under a
/// 768 MiB address-space cap: rows are read a row group at a time, not the file.
#[test]
fn a_gigabyte_of_parquet_streams_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.parquet");
    let good = std::fs::read_to_string(common::fixtures().join("corpus/chats.jsonl")).unwrap();
    let good = good.lines().next().unwrap();
    let script = r#"
import json, sys
import pyarrow as pa, pyarrow.parquet as pq
good = json.loads(sys.argv[2])["messages"]
filler = [{"role": "system", "content": "x" * (1 << 20)}]
schema = pa.schema([("messages", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())])))])
with pq.ParquetWriter(sys.argv[1], schema, compression="zstd") as w:
    for group in range(64):
        rows = [{"messages": filler} for _ in range(16)]
        if group % 16 == 0:
            rows.append({"messages": [{"role": m["role"], "content": m["content"]} for m in good]})
        w.write_table(pa.Table.from_pylist(rows, schema=schema), row_group_size=32)
"#;
    let made = Process::new("python3")
        .args(["-c", script, path_str(&path), good])
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    assert!(std::fs::metadata(&path).unwrap().len() < 16 << 20);
    let m = common::run_measured(
        &[
            "corpus",
            "-m",
            "fixtures/models/tiny-think",
            path_str(&path),
            "--format",
            "json",
        ],
        &[],
        std::time::Duration::from_secs(120),
        768,
    );
    assert!(!m.killed, "timed out");
    assert_eq!(m.code, 1, "{}", m.stderr);
    let r: Json = serde_json::from_slice(&m.stdout).unwrap();
    assert_eq!(r["skipped_rows"], serde_json::json!({"no_user_turn": 1024}));
    assert_eq!(r["conversations"], 4);
    assert_eq!(r["input"]["files"][0]["compression"], "zstd");
}

/// Where the first page header's uncompressed size is (after `PAR1`: field 1, the page
/// type, then field 2), and the bytes it takes.
fn uncompressed_size_field(bytes: &[u8]) -> (usize, usize) {
    assert_eq!(&bytes[..4], b"PAR1");
    assert_eq!(bytes[4], 0x15, "field 1 (type) as i32");
    let mut at = 5;
    while bytes[at] & 0x80 != 0 {
        at += 1;
    }
    at += 1;
    assert_eq!(bytes[at], 0x15, "field 2 (uncompressed size) as i32");
    let start = at + 1;
    let mut end = start;
    while bytes[end] & 0x80 != 0 {
        end += 1;
    }
    (start, end + 1 - start)
}

#[test]
fn damaged_and_hostile_parquet_files_are_skips_or_one_error() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let model = common::fixtures().join("models/tiny-think");
    let model = path_str(&model);
    let good = d.join("good.parquet");
    make_parquet(
        &common::fixtures().join("corpus/chats.jsonl"),
        &good,
        "snappy",
        "",
        3,
    );
    let bytes = std::fs::read(&good).unwrap();
    let run = |name: &str, data: &[u8]| {
        let p = d.join(name);
        std::fs::write(&p, data).unwrap();
        let out = kvaudit()
            .args(["corpus", "-m", model, path_str(&p), "--format", "json"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(!stderr.contains("panicked"), "{name}: {stderr}");
        let code = out.status.code();
        assert!(matches!(code, Some(0..=2)), "{name}: {code:?} {stderr}");
        (code.unwrap(), out.stdout, stderr)
    };
    let skipped = |stdout: &[u8]| -> Json {
        let r: Json = serde_json::from_slice(stdout).unwrap();
        r["skipped_examples"]["unreadable"]["first_error"].clone()
    };
    // Cut short: the footer is gone.
    let (code, stdout, stderr) = run("cut.parquet", &bytes[..bytes.len() / 2]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("no conversation could be audited"),
        "{stderr}"
    );
    assert!(
        skipped(&stdout)
            .as_str()
            .unwrap()
            .contains("does not end like one"),
        "{}",
        skipped(&stdout)
    );
    // A footer length past the file.
    let mut long_footer = bytes.clone();
    let n = long_footer.len();
    long_footer[n - 8..n - 4].copy_from_slice(&u32::MAX.to_le_bytes());
    let (code, stdout, _) = run("footer.parquet", &long_footer);
    assert_eq!(code, 2);
    assert!(
        skipped(&stdout)
            .as_str()
            .unwrap()
            .contains("more than the file holds")
    );
    // A page that claims a gigabyte decompressed: refused before the crate allocates it.
    let (at, len) = uncompressed_size_field(&bytes);
    let mut huge = bytes[..at].to_vec();
    let zigzag = |v: u64| {
        let mut v = v << 1;
        let mut out = Vec::new();
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
        out
    };
    huge.extend(zigzag(1 << 30));
    huge.extend(&bytes[at + len..]);
    let (code, stdout, _) = run("huge-page.parquet", &huge);
    assert_eq!(code, 2);
    let why = skipped(&stdout);
    assert!(
        why.as_str()
            .unwrap()
            .contains("over kvaudit's limit of 134217728"),
        "{why}"
    );
    // Flipped bytes anywhere: whatever is read, nothing crashes (checked in `run`).
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    for i in 0..40 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let mut flipped = bytes.clone();
        let at = (state % bytes.len() as u64) as usize;
        flipped[at] ^= 1 << ((state >> 60) % 8);
        run(&format!("flip-{i}.parquet"), &flipped);
    }
    // Parquet from standard input: one clear error.
    let out = kvaudit()
        .args(["corpus", "-m", model, "-"])
        .pipe_stdin(&good)
        .unwrap()
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("Parquet cannot be read from standard input"),
        "{stderr}"
    );
}
