//! `kvaudit corpus`: every per-transition number equals `diff-turns` for the same
//! conversation, totals are the sums of the transitions, bad rows are counted by reason, the
//! report is the same whatever `--jobs`, every input layout and compression reads alike, the
//! real corpora in ../shared all load, and the HTML page renders in a real browser.

use crate::common::{self, fixture, kvaudit};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value as Json, json};

/// `corpus` with `args`, expecting `code`: the JSON report.
fn corpus_json(args: &[&str], code: i32) -> Json {
    let out = kvaudit()
        .arg("corpus")
        .args(args)
        .args(["--format", "json"])
        .assert()
        .code(code);
    serde_json::from_slice(&out.get_output().stdout).unwrap()
}

fn lines_of(path: &Path) -> Vec<Json> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The conversations a corpus run audited, each as a diff-turns conversation file, with its
/// `source` (FILE:LINE) — rebuilt from the input independently of kvaudit's reader for the
/// OpenAI layout: the row's own fields other than the conversation format's (its `FIELDS`)
/// are dropped.
fn openai_rows(path: &Path) -> BTreeMap<String, Json> {
    let fields = kvaudit::render::conversation::FIELDS;
    let mut out = BTreeMap::new();
    for (i, line) in std::fs::read_to_string(path).unwrap().lines().enumerate() {
        let Ok(mut v) = serde_json::from_str::<Json>(line) else {
            continue;
        };
        if let Some(o) = v.as_object_mut() {
            o.retain(|k, _| fields.contains(&k.as_str()));
        }
        out.insert(format!("{}:{}", path.display(), i + 1), v);
    }
    out
}

/// For every line of `--per-transition`, the same transition from `diff-turns --format json`
/// on that conversation alone: equal field for field, the router view included.
fn assert_lines_equal_diff_turns(
    model: &str,
    lines: &[Json],
    rows: &BTreeMap<String, Json>,
    extra: &[&str],
) {
    assert!(!lines.is_empty());
    let dir = tempfile::tempdir().unwrap();
    let mut by_conversation: BTreeMap<String, Vec<&Json>> = BTreeMap::new();
    for l in lines {
        by_conversation
            .entry(l["conversation"].as_str().unwrap().to_string())
            .or_default()
            .push(l);
    }
    for (source, lines) in by_conversation {
        let conv = dir.path().join("c.json");
        std::fs::write(&conv, rows[&source].to_string()).unwrap();
        let out = kvaudit()
            .args(["diff-turns", "-m", model, "-c"])
            .arg(&conv)
            .args(extra)
            .args(["--format", "json"])
            .output()
            .unwrap();
        let report: Json = serde_json::from_slice(&out.stdout).unwrap();
        // A conversation the server stops part-way: diff-turns reports the transitions before
        // the refused request and exits 2; corpus counts those same transitions.
        let refused = !report["conversations"][0]["refused"].is_null();
        assert!(
            out.status
                .code()
                .is_some_and(|c| c <= 1 || (refused && c == 2)),
            "{source}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let transitions = report["conversations"][0]["transitions"]
            .as_array()
            .unwrap();
        assert_eq!(transitions.len(), lines.len(), "{source}");
        for (t, line) in transitions.iter().zip(lines) {
            let mut line = (*line).clone();
            let o = line.as_object_mut().unwrap();
            for k in ["schema_version", "conversation", "alternatives"] {
                o.remove(k);
            }
            assert_eq!(&line, t, "{source}: transition differs from diff-turns");
        }
    }
}

#[test]
fn every_transition_equals_diff_turns_on_the_fixtures() {
    let dir = tempfile::tempdir().unwrap();
    let per = dir.path().join("t.jsonl");
    let input = common::fixtures().join("corpus/chats.jsonl");
    // tiny-think drops reasoning from history (rewrites: exit 1), tiny-plain keeps it (0).
    for (model, code) in [("models/tiny-think", 1), ("models/tiny-plain", 0)] {
        let model = fixture(model);
        let report = corpus_json(
            &[
                "-m",
                &model,
                input.to_str().unwrap(),
                "--per-transition",
                per.to_str().unwrap(),
            ],
            code,
        );
        let lines = lines_of(&per);
        assert_eq!(lines.len() as u64, report["transitions"].as_u64().unwrap());
        assert_lines_equal_diff_turns(&model, &lines, &openai_rows(&input), &[]);
        assert_totals_are_sums(&report, &lines);
    }
}

/// The report's totals per block size are the sums and exact percentiles of its lines.
fn assert_totals_are_sums(report: &Json, lines: &[Json]) {
    for b in report["block_sizes"].as_array().unwrap() {
        let bs = b["block_size"].as_u64().unwrap();
        let mut uncached: Vec<u64> = lines
            .iter()
            .map(|l| {
                l["uncached"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|u| u["block_size"].as_u64() == Some(bs))
                    .unwrap()["tokens"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        uncached.sort_unstable();
        let n = uncached.len() as u64;
        // Nearest rank: the value at rank ceil(p/100 * n), 1-based.
        let at = |p: u64| uncached[((p * n).div_ceil(100).max(1) - 1) as usize];
        let u = &b["uncached"];
        assert_eq!(u["count"].as_u64(), Some(n));
        assert_eq!(u["sum"].as_u64(), Some(uncached.iter().sum::<u64>()));
        assert_eq!(u["p50"].as_u64(), Some(at(50)));
        assert_eq!(u["p90"].as_u64(), Some(at(90)));
        assert_eq!(u["p99"].as_u64(), Some(at(99)));
        assert_eq!(u["max"].as_u64(), uncached.last().copied());
        let next: u64 = lines
            .iter()
            .map(|l| l["next_prompt_tokens"].as_u64().unwrap())
            .sum();
        assert_eq!(b["next_prompt_tokens"].as_u64(), Some(next));
        // Each alternative's totals are the sums of its per-transition costs.
        let alt = report["alternatives"]["block_sizes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["block_size"].as_u64() == Some(bs))
            .unwrap();
        for path in [
            "pd",
            "vllm_bidirectional",
            "sglang_decode_radix",
            "decode_local",
        ] {
            for field in [
                "prefill_computed",
                "decode_computed",
                "moved_p_to_d",
                "moved_d_to_p",
            ] {
                let sum: u64 = lines
                    .iter()
                    .map(|l| {
                        l["alternatives"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .find(|a| a["block_size"].as_u64() == Some(bs))
                            .unwrap()[path][field]
                            .as_u64()
                            .unwrap()
                    })
                    .sum();
                assert_eq!(
                    alt[path][field].as_u64(),
                    Some(sum),
                    "{path}.{field} at B={bs}"
                );
            }
        }
    }
    let rewrites = lines.iter().filter(|l| !l["rewrite"].is_null()).count() as u64;
    assert_eq!(report["transitions_with_rewrite"].as_u64(), Some(rewrites));
}

#[test]
fn bad_rows_are_counted_by_reason_with_their_lines() {
    let input = fixture("corpus/chats.jsonl");
    let report = corpus_json(&["-m", &fixture("models/tiny-think"), &input], 1);
    assert_eq!(
        report["skipped_rows"],
        json!({"no_transition": 1, "no_user_turn": 1, "not_json": 1,
               "roles_out_of_order": 1, "unknown_role": 1})
    );
    let rows = |reason: &str| report["skipped_examples"][reason]["rows"].clone();
    assert_eq!(rows("not_json"), json!([format!("{input}:3")]));
    assert_eq!(rows("roles_out_of_order"), json!([format!("{input}:5")]));
    assert_eq!(rows("no_user_turn"), json!([format!("{input}:6")]));
    assert_eq!(rows("unknown_role"), json!([format!("{input}:8")]));
    assert_eq!(rows("no_transition"), json!([format!("{input}:9")]));
    // Ten non-empty lines: five audited, five skipped; the empty line is no row.
    assert_eq!(report["rows"], 10);
    assert_eq!(report["conversations"], 5);
    // Exact names the issue asks for.
    for key in [
        "schema_version",
        "conversations",
        "transitions",
        "skipped_rows",
        "block_sizes",
        "alternatives",
        "session_key_collisions",
    ] {
        assert!(report.get(key).is_some(), "{key}");
    }
    for key in ["sum", "mean", "p50", "p90", "p99", "max"] {
        assert!(
            report["block_sizes"][0]["uncached"].get(key).is_some(),
            "{key}"
        );
    }
}

#[test]
fn session_keys_counted_by_hand() {
    // chats.jsonl: "hi" opens rows 1, 2 and 4 with 2, 1 and 2 transitions; rows 7 and 11
    // open with their own messages. One shared key, three conversations, five turn-2+
    // requests, of which those of the two smaller conversations (1 + 2 = 3, the largest
    // keeping its pod) land on another conversation's pod.
    let report = corpus_json(
        &[
            "-m",
            &fixture("models/tiny-plain"),
            &fixture("corpus/chats.jsonl"),
        ],
        0,
    );
    let c = &report["session_key_collisions"];
    assert_eq!(c["distinct_keys"], 3);
    assert_eq!(c["shared_keys"], 1);
    assert_eq!(c["conversations_sharing"], 3);
    assert_eq!(c["turn2plus_requests_sharing"], 5);
    assert_eq!(c["turn2plus_requests_misrouted"], 3);
    // MD5("hi"), as hashlib gives it.
    assert_eq!(c["largest"][0]["key"], "49f68a5c8493ec2c0bf489821c21fc3b");
    assert_eq!(c["largest"][0]["first_user_message"], "hi");
    // tiny-plain renders history as generated: every transition extends (exit 0 above).
    assert_eq!(report["transitions_with_rewrite"], 0);
}

#[test]
fn jobs_do_not_change_the_report_or_the_lines() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixture("corpus/chats.jsonl");
    // A second file of the same rows (one file named twice is refused: it would be counted
    // twice).
    let copy = dir.path().join("copy.jsonl");
    std::fs::copy(&input, &copy).unwrap();
    let copy = copy.display().to_string();
    let model = fixture("models/tiny-think");
    let run = |jobs: &str| {
        let per = dir.path().join(format!("t{jobs}.jsonl"));
        let mut r = corpus_json(
            &[
                "-m",
                &model,
                &input,
                &copy,
                "--jobs",
                jobs,
                "--per-transition",
                per.to_str().unwrap(),
            ],
            1,
        );
        r["input"]["jobs"] = Json::Null;
        (r, std::fs::read(&per).unwrap())
    };
    let (one, one_lines) = run("1");
    for jobs in ["2", "5"] {
        let (r, lines) = run(jobs);
        assert_eq!(r, one, "--jobs {jobs}");
        assert_eq!(lines, one_lines, "--jobs {jobs}");
    }
    // Both copies are audited: seven transitions each.
    let lines = String::from_utf8(one_lines).unwrap();
    assert_eq!(lines.lines().count(), 2 * 7);
}

#[test]
fn compressed_files_and_stdin_read_like_the_plain_file() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read(fixture("corpus/chats.jsonl")).unwrap();
    let gz = dir.path().join("chats.jsonl.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(&text).unwrap();
    std::fs::write(&gz, enc.finish().unwrap()).unwrap();
    let zst = dir.path().join("chats.jsonl.zst");
    std::fs::write(
        &zst,
        ruzstd::encoding::compress_to_vec(&text[..], ruzstd::encoding::CompressionLevel::Fastest),
    )
    .unwrap();
    let model = fixture("models/tiny-think");
    let strip = |mut r: Json| {
        r["input"] = Json::Null;
        // Sources name the file.
        for e in r["skipped_examples"].as_object_mut().unwrap().values_mut() {
            e["rows"] = Json::Null;
        }
        for w in r["worst_conversations"].as_array_mut().unwrap() {
            w["source"] = Json::Null;
        }
        r
    };
    let plain = corpus_json(&["-m", &model, &fixture("corpus/chats.jsonl")], 1);
    let gz_report = corpus_json(&["-m", &model, gz.to_str().unwrap()], 1);
    assert_eq!(gz_report["input"]["files"][0]["compression"], "gzip");
    assert_eq!(strip(gz_report), strip(plain.clone()));
    let zst_report = corpus_json(&["-m", &model, zst.to_str().unwrap()], 1);
    assert_eq!(zst_report["input"]["files"][0]["compression"], "zstd");
    assert_eq!(strip(zst_report), strip(plain.clone()));
    let out = kvaudit()
        .args(["corpus", "-m", &model, "-", "--format", "json"])
        .write_stdin(text)
        .assert()
        .code(1);
    let stdin: Json = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(strip(stdin), strip(plain));
}

#[test]
fn sharegpt_and_wildchat_rows_audit_as_their_openai_form() {
    // The same chats written in kvaudit's own format give the same transitions.
    let dir = tempfile::tempdir().unwrap();
    let model = fixture("models/tiny-think");
    let share = corpus_json(&["-m", &model, &fixture("corpus/sharegpt.json")], 1);
    assert_eq!(share["input"]["files"][0]["format"], "sharegpt");
    assert_eq!(share["skipped_rows"], json!({"unknown_role": 1}));
    let wild = corpus_json(&["-m", &model, &fixture("corpus/wildchat.jsonl")], 1);
    assert_eq!(wild["input"]["files"][0]["format"], "wildchat");
    let as_openai = dir.path().join("same.jsonl");
    let m = |role: &str, content: &str| json!({"role": role, "content": content});
    let rows = [
        json!({"messages": [m("user", "hi"), m("assistant", "Hello!"), m("user", "What is a thread?"),
                            m("assistant", "A unit of execution."), m("user", "Thanks.")]}),
        json!({"messages": [m("user", "Name a prime."), m("assistant", "Seven."), m("user", "Another?")]}),
    ];
    std::fs::write(
        &as_openai,
        rows.iter()
            .map(|r| r.to_string())
            .collect::<Vec<_>>()
            .join("\n"),
    )
    .unwrap();
    let openai = corpus_json(&["-m", &model, as_openai.to_str().unwrap()], 1);
    assert_eq!(share["block_sizes"], openai["block_sizes"]);
    assert_eq!(share["alternatives"], openai["alternatives"]);
    assert_eq!(wild["transitions"], 3);
}

#[test]
fn input_errors_exit_2_with_one_line() {
    let model = fixture("models/tiny-think");
    let out = kvaudit()
        .args(["corpus", "-m", &model, "/nonexistent/corpus.jsonl"])
        .assert()
        .code(2);
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: cannot read /nonexistent/corpus.jsonl"),
        "{err}"
    );
    // Every row unusable: the report says why, and the run fails.
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "not json\n{\"messages\": []}\n").unwrap();
    let out = kvaudit()
        .args([
            "corpus",
            "-m",
            &model,
            bad.to_str().unwrap(),
            "--format",
            "json",
        ])
        .assert()
        .code(2);
    let report: Json = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(
        report["skipped_rows"],
        json!({"no_user_turn": 1, "not_json": 1})
    );
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        err.contains("no conversation could be audited (2 rows: 1 no_user_turn, 1 not_json)"),
        "{err}"
    );
    for (flags, says) in [
        (vec!["--block-sizes", "0"], "--block-sizes"),
        (vec!["--jobs", "0"], "--jobs"),
        (
            vec!["--sample", "3", "--limit", "2"],
            "either --limit or --sample",
        ),
    ] {
        let out = kvaudit()
            .args(["corpus", "-m", &model, &fixture("corpus/chats.jsonl")])
            .args(&flags)
            .assert()
            .code(2);
        let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        assert!(err.contains(says), "{flags:?}: {err}");
    }
}

#[test]
fn kv_bytes_come_from_config_json_and_price_the_bytes_moved() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m");
    std::fs::create_dir(&model).unwrap();
    for f in ["tokenizer.json", "tokenizer_config.json"] {
        std::fs::copy(
            common::fixtures().join("models/tiny-think").join(f),
            model.join(f),
        )
        .unwrap();
    }
    // Llama 3.1 8B's shape: 32 layers x 8 KV heads x 128 x 2 x 2 bytes = 131072.
    std::fs::write(
        model.join("config.json"),
        r#"{"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
            "hidden_size": 4096, "torch_dtype": "bfloat16"}"#,
    )
    .unwrap();
    let r = corpus_json(
        &[
            "-m",
            model.to_str().unwrap(),
            &fixture("corpus/chats.jsonl"),
        ],
        1,
    );
    let alt = &r["alternatives"];
    assert_eq!(alt["kv_bytes_per_token"], 131072);
    assert!(
        alt["kv_bytes_source"]
            .as_str()
            .unwrap()
            .contains("32 layers x 8 KV heads")
    );
    let pd = &alt["block_sizes"][0]["pd"];
    assert_eq!(
        pd["bytes_moved"].as_u64(),
        Some(
            (pd["moved_p_to_d"].as_u64().unwrap() + pd["moved_d_to_p"].as_u64().unwrap()) * 131072
        )
    );
    // The flag wins.
    let r = corpus_json(
        &[
            "-m",
            model.to_str().unwrap(),
            &fixture("corpus/chats.jsonl"),
            "--kv-bytes-per-token",
            "2",
        ],
        1,
    );
    assert_eq!(r["alternatives"]["kv_bytes_per_token"], 2);
    // Without either, bytes are absent, not zero.
    let r = corpus_json(
        &[
            "-m",
            &fixture("models/tiny-think"),
            &fixture("corpus/chats.jsonl"),
        ],
        1,
    );
    assert!(r["alternatives"]["block_sizes"][0]["pd"]["bytes_moved"].is_null());
}

#[test]
fn human_summary() {
    let out = kvaudit()
        .args([
            "corpus",
            "-m",
            "fixtures/models/tiny-think",
            "fixtures/corpus/chats.jsonl",
            "--jobs",
            "2",
        ])
        .current_dir(common::repo_root())
        .assert()
        .code(1);
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    insta::assert_snapshot!(text);
}

/// Every corpus file in ../shared loads: rows are audited or skipped for a stated reason,
/// never a stop, under transformers and under vLLM's preprocessing.
#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn every_shared_corpus_loads() {
    let Some(shared) = common::shared_dir("every_shared_corpus_loads") else {
        return;
    };
    let files = common::corpus_files(&shared);
    assert!(files.len() >= 10, "{files:?}");
    let model = shared.join("models/qwen3-8b").display().to_string();
    let mut audited_by: BTreeMap<PathBuf, Vec<u64>> = BTreeMap::new();
    for server in ["transformers", "vllm"] {
        for f in &files {
            // The first 150 rows of each file (all of most), so every file's layout is read.
            // A file none of whose rows renders (tool-call turns with content null under
            // plain transformers) still reports its skips, and exits 2.
            let out = kvaudit()
                .args(["corpus", "-m", &model, "--server", server, "--no-router"])
                .args(["--limit", "150", "--format", "json"])
                .arg(f)
                .output()
                .unwrap();
            let r: Json = serde_json::from_slice(&out.stdout).unwrap();
            let expected = if r["conversations"] == 0 { 2 } else { 1 };
            assert_eq!(out.status.code(), Some(expected), "{}", f.display());
            let audited = r["conversations"].as_u64().unwrap();
            let skipped: u64 = r["skipped_rows"]
                .as_object()
                .unwrap()
                .values()
                .map(|v| v.as_u64().unwrap())
                .sum();
            assert_eq!(
                audited + skipped,
                r["rows"].as_u64().unwrap(),
                "{}",
                f.display()
            );
            assert_eq!(r["input"]["files"][0]["format"], "openai");
            for reason in r["skipped_rows"].as_object().unwrap().keys() {
                assert!(
                    ["template_error", "server_refused"].contains(&reason.as_str()),
                    "{} under {server}: unexpected skip reason {reason}",
                    f.display()
                );
            }
            audited_by.entry(f.clone()).or_default().push(audited);
        }
    }
    // vLLM's preprocessing renders the content-null tool-call turns plain transformers
    // rejects, so it audits at least as many rows of every file, and more in all.
    for (f, n) in &audited_by {
        assert!(
            n[1] >= n[0],
            "{}: vllm {} < transformers {}",
            f.display(),
            n[1],
            n[0]
        );
    }
    let total = |i: usize| audited_by.values().map(|n| n[i]).sum::<u64>();
    assert!(total(1) > total(0), "{} vs {}", total(1), total(0));
}

/// On real models and real conversations (a few rows of every corpus file), each
/// per-transition line equals diff-turns on that conversation.
#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn shared_corpora_transitions_equal_diff_turns() {
    let Some(shared) = common::shared_dir("shared_corpora_transitions_equal_diff_turns") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // Three rows of each file, as one small corpus.
    let sample = dir.path().join("sample.jsonl");
    let mut text = String::new();
    for f in common::corpus_files(&shared) {
        for line in std::fs::read_to_string(&f).unwrap().lines().take(3) {
            text.push_str(line);
            text.push('\n');
        }
    }
    std::fs::write(&sample, &text).unwrap();
    let rows = openai_rows(&sample);
    for model in ["qwen3-8b", "llama-3.1-8b-instruct"] {
        let model = shared.join("models").join(model).display().to_string();
        let per = dir.path().join("t.jsonl");
        let r = corpus_json(
            &[
                "-m",
                &model,
                "--server",
                "vllm",
                sample.to_str().unwrap(),
                "--per-transition",
                per.to_str().unwrap(),
            ],
            1,
        );
        assert!(
            r["conversations"].as_u64().unwrap() >= 20,
            "{model}: {}",
            r["skipped_rows"]
        );
        let lines = lines_of(&per);
        assert_lines_equal_diff_turns(&model, &lines, &rows, &["--server", "vllm"]);
        assert_totals_are_sums(&r, &lines);
    }
}

/// The HTML page is one self-contained file, and a real browser renders it with no console
/// error and non-empty charts (headless Chromium, Debian's package; CI installs it).
#[test]
fn html_report_renders_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("report.html");
    kvaudit()
        .args([
            "corpus",
            "-m",
            &fixture("models/tiny-think"),
            &fixture("corpus/chats.jsonl"),
            "-q",
            "--html",
        ])
        .arg(&html)
        .assert()
        .code(1);
    let page = std::fs::read_to_string(&html).unwrap();
    for outside in ["http://", "https://", "<script", "<link", "@import", "url("] {
        assert!(
            !page.contains(outside),
            "the page refers outside itself: {outside}"
        );
    }
    assert!(page.contains("<svg"));
    // Where the work runs: the computed charts stack the prefill pod's tokens and the decode
    // pod's (decode_local computes everything on D).
    assert!(page.contains("class=\"bar2\""), "no stacked segment");
    assert!(
        page.contains(">P 0 + D "),
        "decode_local's value names both pods"
    );
    // Replies without reasoning on a thinking model: the page says the held reply was
    // derived from the model's format.
    assert!(
        page.contains("carried no reasoning and no generated text: kvaudit derived"),
        "no note on derived replies"
    );
    // Values from untrusted input are escaped: the bad row's text never becomes markup.
    assert!(
        !page.contains("<|im_start|>"),
        "token text must be HTML-escaped"
    );
    let check = common::repo_root().join("tests/html_check.py");
    let chromium = ["chromium", "chromium-browser"].into_iter().find(|c| {
        std::process::Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    let Some(chromium) = chromium else {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("CI needs chromium for the HTML check (.ci/run installs it)");
        }
        common::skipped("html_report_renders_in_chromium", "chromium not installed");
        return;
    };
    let out = std::process::Command::new("python3")
        .arg(&check)
        .arg(chromium)
        .arg(&html)
        .arg(dir.path().join("shot.png"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A corpus larger than the memory kvaudit may use streams through: 1 GiB of rows (gzip,
/// so the test file is small) under a 768 MiB address-space cap. Each row is a 1 MiB system
/// prompt with no user turn (skipped after parsing), with real conversations between.
#[test]
fn a_gigabyte_streams_in_bounded_memory() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.jsonl.gz");
    let mut enc = flate2::write::GzEncoder::new(
        std::io::BufWriter::new(std::fs::File::create(&path).unwrap()),
        flate2::Compression::fast(),
    );
    let filler = "x".repeat(1 << 20);
    let good = std::fs::read_to_string(common::fixtures().join("corpus/chats.jsonl")).unwrap();
    let good = good.lines().next().unwrap();
    for i in 0..1024 {
        writeln!(
            enc,
            r#"{{"messages": [{{"role": "system", "content": "{filler}"}}]}}"#
        )
        .unwrap();
        if i % 256 == 0 {
            writeln!(enc, "{good}").unwrap();
        }
    }
    enc.finish().unwrap().flush().unwrap();
    let m = common::run_measured(
        &[
            "corpus",
            "-m",
            "fixtures/models/tiny-think",
            path.to_str().unwrap(),
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
    assert_eq!(r["skipped_rows"], json!({"no_user_turn": 1024}));
    assert_eq!(r["conversations"], 4);
    assert_eq!(r["input"]["files"][0]["compression"], "gzip");
}

/// `--remedies` totals are the sums, per remedy, of what `diff-turns --remedies` measures for
/// each conversation alone.
#[test]
fn remedy_totals_are_the_sums_of_diff_turns_remedies() {
    let input = common::fixtures().join("corpus/chats.jsonl");
    let model = fixture("models/tiny-think");
    let report = corpus_json(&["-m", &model, input.to_str().unwrap(), "--remedies"], 1);
    let r = &report["remedies"];
    assert_eq!(
        r["transitions_with_rewrite"],
        report["transitions_with_rewrite"]
    );
    // key -> (applies, removes, uncached after per block size)
    let mut expected: BTreeMap<String, (u64, u64, Vec<u64>)> = BTreeMap::new();
    let dir = tempfile::tempdir().unwrap();
    for conv in openai_rows(&input).values() {
        let path = dir.path().join("c.json");
        std::fs::write(&path, conv.to_string()).unwrap();
        let out = kvaudit()
            .args([
                "diff-turns",
                "-m",
                &model,
                "--remedies",
                "--format",
                "json",
                "-c",
            ])
            .arg(&path)
            .output()
            .unwrap();
        let Ok(d) = serde_json::from_slice::<Json>(&out.stdout) else {
            continue; // a row corpus skips too (diff-turns refuses it)
        };
        let Some(c) = d["conversations"].get(0) else {
            continue;
        };
        for t in c["transitions"].as_array().unwrap() {
            for m in t["remedies"].as_array().into_iter().flatten() {
                let kind = m["kind"].as_str().unwrap();
                let name = m["name"].as_str().unwrap();
                let key = match (kind, m.get("with_resend").and_then(Json::as_str)) {
                    ("kwarg", Some(mode)) => {
                        format!("kwarg {name}={} with resend {mode}", m["value"])
                    }
                    ("kwarg", None) => format!("kwarg {name}={}", m["value"]),
                    _ => format!("{kind} {name}"),
                };
                let e = expected.entry(key).or_insert((0, 0, vec![0, 0]));
                e.0 += 1;
                e.1 += u64::from(m["removes_rewrite"] == true);
                for (i, u) in m["uncached"].as_array().unwrap().iter().enumerate() {
                    e.2[i] += u["tokens"].as_u64().unwrap();
                }
            }
        }
    }
    assert!(!expected.is_empty());
    let got: BTreeMap<String, (u64, u64, Vec<u64>)> = r["by_remedy"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["remedy"].as_str().unwrap().to_string(),
                (
                    m["transitions"].as_u64().unwrap(),
                    m["removes_rewrite"].as_u64().unwrap(),
                    m["uncached"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|u| u["after"].as_u64().unwrap())
                        .collect(),
                ),
            )
        })
        .collect();
    assert_eq!(got, expected);
    // Every rewrite point is counted once in the best-per-point row, never worse than before.
    let best = &r["best_per_transition"];
    assert_eq!(best["transitions"], report["transitions_with_rewrite"]);
    for u in best["uncached"].as_array().unwrap() {
        assert!(u["after"].as_u64() <= u["before"].as_u64());
    }
}

/// A conversation the server stops part-way (SGLang refuses arguments that are not JSON, vLLM
/// a tool call without an id, both at request 4) is audited up to that request and counted
/// as partial with its reason: its transitions are diff-turns' on the conversation, which
/// stops at the same request, and the conversation is among those audited.
#[test]
fn a_conversation_the_server_stops_part_way_is_audited_up_to_that_request() {
    let dir = tempfile::tempdir().unwrap();
    let call = |with_id: bool| {
        let mut c = serde_json::json!({"type": "function",
            "function": {"name": "f", "arguments": if with_id { "{oops" } else { "{}" }}});
        if with_id {
            c["id"] = "c1".into();
        }
        c
    };
    for (server, with_id) in [("sglang", true), ("vllm", false)] {
        let stopped = serde_json::json!({"messages": [
            {"role": "user", "content": "one"},
            {"role": "assistant", "content": "first answer"},
            {"role": "user", "content": "two"},
            {"role": "assistant", "content": "second answer"},
            {"role": "user", "content": "three"},
            {"role": "assistant", "content": null, "tool_calls": [call(with_id)]},
            {"role": "tool", "tool_call_id": "c1", "content": "r"},
            {"role": "user", "content": "four"},
        ]});
        let whole = serde_json::json!({"messages": [
            {"role": "user", "content": "one"},
            {"role": "assistant", "content": "first answer"},
            {"role": "user", "content": "two"},
        ]});
        let file = dir.path().join(format!("{server}.jsonl"));
        std::fs::write(&file, format!("{stopped}\n{whole}\n")).unwrap();
        let conv = dir.path().join(format!("{server}-stopped.json"));
        std::fs::write(&conv, stopped.to_string()).unwrap();
        let model = fixture("models/tiny-tools");
        let r = corpus_json(
            &[
                "-m",
                &model,
                "--server",
                server,
                "--no-router",
                file.to_str().unwrap(),
            ],
            0,
        );
        let single = kvaudit()
            .args([
                "diff-turns",
                "-m",
                &model,
                "--server",
                server,
                "--format",
                "json",
            ])
            .arg("-c")
            .arg(&conv)
            .output()
            .unwrap();
        let single: Json = serde_json::from_slice(&single.stdout).unwrap();
        let stopped_transitions = single["conversations"][0]["transitions"]
            .as_array()
            .unwrap()
            .len();
        assert_eq!(stopped_transitions, 2, "{server}: {single:#}");
        assert_eq!(r["conversations"], 2, "{server}: {r:#}");
        assert_eq!(
            r["transitions"],
            stopped_transitions as u64 + 1,
            "{server}: {r:#}"
        );
        assert_eq!(r["skipped_rows"], serde_json::json!({}), "{server}");
        assert_eq!(
            r["partial_conversations"],
            serde_json::json!({"server_refused": 1}),
            "{server}"
        );
        let example = &r["partial_examples"]["server_refused"];
        assert_eq!(
            example["rows"],
            serde_json::json!([format!("{}:1", file.display())])
        );
        assert!(
            example["first_error"]
                .as_str()
                .unwrap()
                .starts_with(&format!("request 4: {server} rejects this request")),
            "{example:#}"
        );
    }
}
