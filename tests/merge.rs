//! `corpus --partial` and `kvaudit merge`: the merge of a corpus split into shards prints the
//! report one run over the shards prints, byte for byte in every format (every count,
//! percentile, worst conversation, skipped row and session key), for k = 1, 3 and 7 shards
//! of the real corpus; partials of different models or settings are refused, and so is
//! anything that is not a partial.

use crate::common::{self, fixture, kvaudit};

use std::path::{Path, PathBuf};

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Writes `lines` split into `k` contiguous shards (the last ones may be empty) in `dir`.
fn shards(dir: &Path, lines: &[String], k: usize) -> Vec<PathBuf> {
    let per = lines.len().div_ceil(k);
    (0..k)
        .map(|i| {
            let p = dir.join(format!("shard-{k}-{i}.jsonl"));
            let part: Vec<&str> = lines
                .iter()
                .skip(i * per)
                .take(per)
                .map(String::as_str)
                .collect();
            let mut text = part.join("\n");
            if !text.is_empty() {
                text.push('\n');
            }
            std::fs::write(&p, text).unwrap();
            p
        })
        .collect()
}

/// stdout of `kvaudit ARGS`, which must exit with `code`.
fn stdout_of(args: &[&str], code: i32) -> Vec<u8> {
    kvaudit()
        .args(args)
        .assert()
        .code(code)
        .get_output()
        .stdout
        .clone()
}

/// One run over `files` and the merge of one partial per file give the same report in
/// every format (and the same exit code, `code`); the partials are left in `dir`.
fn assert_merge_is_one_run(
    dir: &Path,
    common_args: &[&str],
    files: &[PathBuf],
    code: i32,
) -> Vec<PathBuf> {
    let html_one = dir.join("one.html");
    let mut one: Vec<&str> = vec!["corpus"];
    one.extend(common_args);
    one.extend(files.iter().map(|f| path_str(f)));
    let json_one = stdout_of(&[&one[..], &["--format", "json"]].concat(), code);
    let human_one = stdout_of(&[&one[..], &["--html", path_str(&html_one)]].concat(), code);
    let partials: Vec<PathBuf> = files
        .iter()
        .map(|f| {
            let p = f.with_extension("partial.json");
            let mut args: Vec<&str> = vec!["corpus"];
            args.extend(common_args);
            args.extend([path_str(f), "--partial", path_str(&p), "--format", "json"]);
            // A shard's own exit code is its own findings (0 for a shard without any).
            let out = kvaudit().args(&args).assert();
            let status = out.get_output().status.code().unwrap();
            assert!(status == 0 || status == 1, "{:?}", out.get_output());
            p
        })
        .collect();
    let names: Vec<&str> = partials.iter().map(|p| path_str(p)).collect();
    let html_merged = dir.join("merged.html");
    let merge = |extra: &[&str]| stdout_of(&[&["merge"], &names[..], extra].concat(), code);
    let json_merged = merge(&["--format", "json"]);
    assert_eq!(
        String::from_utf8_lossy(&json_merged),
        String::from_utf8_lossy(&json_one),
        "JSON of {} shards",
        files.len()
    );
    assert_eq!(
        String::from_utf8_lossy(&merge(&["--html", path_str(&html_merged)])),
        String::from_utf8_lossy(&human_one)
    );
    assert_eq!(
        std::fs::read(&html_merged).unwrap(),
        std::fs::read(&html_one).unwrap()
    );
    assert_eq!(
        merge(&["--format", "html"]),
        std::fs::read(&html_one).unwrap()
    );
    partials
}

fn fixture_rows() -> Vec<String> {
    let chats = std::fs::read_to_string(fixture("corpus/chats.jsonl")).unwrap();
    let mut rows: Vec<String> = chats.lines().map(String::from).collect();
    // Skipped rows of two reasons, in two shards, so the quoted rows and the first error
    // depend on where each shard starts.
    rows.insert(2, "not json".into());
    rows.insert(
        7,
        r#"{"messages": [{"role": "user", "content": "only one turn"}]}"#.into(),
    );
    rows.push("still not json".into());
    rows
}

#[test]
fn shards_of_the_fixture_corpus_merge_into_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let rows = fixture_rows();
    // --worst 2: the worst list is cut, and conversations tie on their counts.
    let args = [
        "-m",
        &fixture("models/tiny-think"),
        "--now",
        "2026-01-15T10:00:00",
        "--block-sizes",
        "1,16",
        "--worst",
        "2",
        "--router",
        "dynamo",
        "--router",
        "vllm-router",
        "--jobs",
        "2",
    ];
    for k in [1, 3, 5] {
        let files = shards(dir.path(), &rows, k);
        let partials = assert_merge_is_one_run(dir.path(), &args, &files, 1);
        assert_eq!(partials.len(), k);
    }
    // An empty shard and a shard of skipped rows only: their partials are written (the merge
    // counts their rows), with a note rather than the error one run of them would give.
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "not json\n").unwrap();
    let good = dir.path().join("good.jsonl");
    std::fs::write(&good, rows[..2].join("\n") + "\n").unwrap();
    let p = dir.path().join("bad.partial.json");
    kvaudit()
        .args(["corpus", path_str(&bad), "--partial", path_str(&p)])
        .args(args)
        .assert()
        .code(0)
        .stderr(predicates::str::contains(
            "note: no conversation could be audited",
        ));
    assert!(p.is_file());
    assert_merge_is_one_run(dir.path(), &args, &[empty, bad.clone(), good], 1);
    // As one run of it alone: nothing audited is an error, after the report.
    kvaudit()
        .args(["merge", path_str(&p)])
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "no conversation could be audited",
        ));
}

#[test]
fn remedies_and_the_router_view_merge_too() {
    let dir = tempfile::tempdir().unwrap();
    let rows = fixture_rows();
    let args = [
        "-m",
        &fixture("models/tiny-think"),
        "--now",
        "2026-01-15T10:00:00",
        "--remedies",
        "--engine-block-size",
        "4",
        "--index-block-size",
        "8",
    ];
    let files = shards(dir.path(), &rows, 4);
    assert_merge_is_one_run(dir.path(), &args, &files, 1);
}

/// A partial of `rows` with `args` in `dir`, named `name`.
fn partial(dir: &Path, name: &str, rows: &[String], args: &[&str]) -> PathBuf {
    let input = dir.join(format!("{name}.jsonl"));
    std::fs::write(&input, rows.join("\n") + "\n").unwrap();
    let p = dir.join(format!("{name}.partial.json"));
    let out = kvaudit()
        .args(["corpus", path_str(&input), "--partial", path_str(&p)])
        .args(args)
        .assert();
    assert!(p.is_file(), "{:?}", out.get_output());
    p
}

fn merge_error(partials: &[&Path]) -> String {
    let out = kvaudit()
        .arg("merge")
        .args(partials)
        .assert()
        .code(2)
        .get_output()
        .clone();
    assert!(out.stdout.is_empty());
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("error: "), "{err}");
    err
}

#[test]
fn partials_of_other_models_or_settings_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let rows = fixture_rows();
    let think = fixture("models/tiny-think");
    let base = ["-m", &think, "--now", "2026-01-15T10:00:00"];
    let a = partial(d, "a", &rows[..5], &base);
    let b = partial(d, "b", &rows[5..], &base);
    kvaudit()
        .args(["merge", path_str(&a), path_str(&b)])
        .assert()
        .code(1);

    let plain = fixture("models/tiny-plain");
    let other_model = partial(
        d,
        "other-model",
        &rows[5..],
        &["-m", &plain, "--now", "2026-01-15T10:00:00"],
    );
    let err = merge_error(&[&a, &other_model]);
    assert!(err.contains("are not shards of one run"), "{err}");
    assert!(
        err.contains("tokenizers") || err.contains("chat templates"),
        "{err}"
    );

    // One setting apart: each named in the error.
    for (name, extra, said) in [
        ("blocks", ["--block-sizes", "32"], "--block-sizes [32]"),
        (
            "server",
            ["--server", "vllm"],
            "--server transformers and --server vllm",
        ),
        (
            "router",
            ["--router", "dynamo"],
            "audit settings that differ",
        ),
    ] {
        let other = partial(d, name, &rows[5..], &[&base[..], &extra[..]].concat());
        let err = merge_error(&[&a, &other]);
        assert!(err.contains(said), "{name}: {err}");
    }

    // The model's other files: a special token changed in tokenizer_config.json (the
    // tokenizer and the default template as they were).
    let copy = d.join("tiny-think-copy");
    std::fs::create_dir_all(&copy).unwrap();
    for entry in std::fs::read_dir(&think).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), copy.join(entry.file_name())).unwrap();
    }
    let config_path = copy.join("tokenizer_config.json");
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&config_path).unwrap()).unwrap();
    config["pad_token"] = "<|im_end|>".into();
    std::fs::write(&config_path, config.to_string()).unwrap();
    let copied = partial(
        d,
        "copied",
        &rows[5..],
        &["-m", path_str(&copy), "--now", "2026-01-15T10:00:00"],
    );
    let err = merge_error(&[&a, &copied]);
    assert!(err.contains("model files that differ"), "{err}");

    // The clock matters only to a template that prints it.
    let later = partial(
        d,
        "later",
        &rows[5..],
        &["-m", &think, "--now", "2026-02-01T10:00:00"],
    );
    kvaudit()
        .args(["merge", path_str(&a), path_str(&later)])
        .assert()
        .code(1);
    let dated = [
        "-m",
        &think,
        "--template",
        &fixture("templates/dated.jinja"),
    ];
    let day1 = partial(
        d,
        "day1",
        &rows[..5],
        &[&dated[..], &["--now", "2026-01-15T10:00:00"]].concat(),
    );
    let day2 = partial(
        d,
        "day2",
        &rows[5..],
        &[&dated[..], &["--now", "2026-01-16T10:00:00"]].concat(),
    );
    let err = merge_error(&[&day1, &day2]);
    assert!(
        err.contains("strftime_now (pass one --now to every shard)"),
        "{err}"
    );

    // Not a partial: a report, a file that is not JSON, a partial of another layout, one
    // whose totals do not fit its settings.
    let report = d.join("report.json");
    std::fs::write(
        &report,
        stdout_of(&["merge", path_str(&a), "--format", "json"], 1),
    )
    .unwrap();
    assert!(merge_error(&[&report]).contains("is not a corpus partial"));
    let text = d.join("text.json");
    std::fs::write(&text, "hello").unwrap();
    assert!(merge_error(&[&text]).contains("is not a corpus partial"));
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&a).unwrap()).unwrap();
    let edited = |name: &str, f: &dyn Fn(&mut serde_json::Value)| {
        let mut v = json.clone();
        f(&mut v);
        let p = d.join(name);
        std::fs::write(&p, serde_json::to_vec(&v).unwrap()).unwrap();
        merge_error(&[&p])
    };
    let err = edited("layout.json", &|v| v["layout"] = 99.into());
    assert!(err.contains("in layout 99"), "{err}");
    let err = edited("blocks.json", &|v| {
        v["tally"]["blocks"].as_array_mut().unwrap().pop();
    });
    assert!(err.contains("totals for block sizes"), "{err}");
    let err = edited("rows.json", &|v| v["tally"]["rows"] = 1_000.into());
    assert!(err.contains("rows in its files"), "{err}");
    let err = edited("count.json", &|v| {
        v["tally"]["transitions"] = (1u64 << 50).into()
    });
    assert!(err.contains("more than one shard can hold"), "{err}");
    let err = edited("parts.json", &|v| {
        v["tally"]["transitions_with_rewrite"] =
            (v["tally"]["transitions"].as_u64().unwrap() + 1).into()
    });
    assert!(err.contains("more transitions with a rewrite"), "{err}");
    let err = edited("twice.json", &|v| {
        let counts = v["tally"]["decode_uncached"]["counts"]
            .as_array_mut()
            .unwrap();
        let first = counts[0].clone();
        counts.push(first);
    });
    assert!(err.contains("listed twice"), "{err}");
    // Rows past what one shard can hold: an error before any sum could wrap.
    let mut huge = json.clone();
    huge["tally"]["rows"] = u64::MAX.into();
    huge["input"]["files"][0]["rows"] = u64::MAX.into();
    let huge_path = d.join("huge.json");
    std::fs::write(&huge_path, serde_json::to_vec(&huge).unwrap()).unwrap();
    let err = merge_error(&[&a, &huge_path]);
    assert!(err.contains("more than one shard can hold"), "{err}");
    // A truncated partial (a copy cut short) is an error too.
    let cut = d.join("cut.json");
    let whole = std::fs::read(&a).unwrap();
    std::fs::write(&cut, &whole[..whole.len() / 2]).unwrap();
    let err = merge_error(&[&cut]);
    assert!(err.contains("is not a corpus partial"), "{err}");
}

#[test]
fn partial_flags_that_cannot_merge_exactly_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixture("corpus/chats.jsonl");
    let p = dir.path().join("p.json");
    for extra in [["--sample", "3"], ["--limit", "3"]] {
        kvaudit()
            .args(["corpus", "-m", &fixture("models/tiny-think"), &input])
            .args(["--partial", path_str(&p)])
            .args(extra)
            .assert()
            .code(2)
            .stderr(predicates::str::contains("--partial cannot be combined"));
        assert!(!p.exists());
    }
    // The partial is an output: it may not be the input.
    let copy = dir.path().join("chats.jsonl");
    std::fs::copy(&input, &copy).unwrap();
    kvaudit()
        .args([
            "corpus",
            "-m",
            &fixture("models/tiny-think"),
            path_str(&copy),
        ])
        .args(["--partial", path_str(&copy)])
        .assert()
        .code(2);
    assert_eq!(
        std::fs::read(&copy).unwrap(),
        std::fs::read(&input).unwrap()
    );
}

/// The whole real corpus (every JSONL file of ../shared/corpus, 7,676 conversations) split
/// into 1, 3 and 7 shards: each merge equals one run, with routers asked.
#[test]
#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
fn shards_of_the_real_corpus_merge_into_one_run() {
    let Some(shared) = common::shared_dir("shards_of_the_real_corpus_merge_into_one_run") else {
        return;
    };
    let mut rows = Vec::new();
    for f in &common::corpus_files(&shared) {
        rows.extend(
            std::fs::read_to_string(f)
                .unwrap()
                .lines()
                .map(String::from),
        );
    }
    assert!(rows.len() > 7_000, "{} rows", rows.len());
    let dir = tempfile::tempdir().unwrap();
    for (model, routers) in [
        ("qwen3-8b", &["--router", "llm-d", "--router", "sglang"][..]),
        (
            "llama-3.1-8b-instruct",
            &["--router", "dynamo:conditional_disagg=true"][..],
        ),
    ] {
        let m = shared.join("models").join(model);
        let mut args = vec![
            "-m",
            path_str(&m),
            "--now",
            "2026-01-15T10:00:00",
            "--block-sizes",
            "16,64",
        ];
        args.extend(routers);
        for k in [1, 3, 7] {
            let shard_files = shards(dir.path(), &rows, k);
            assert_merge_is_one_run(dir.path(), &args, &shard_files, 1);
        }
    }
}

/// Conversations a server stops part-way (one in a later shard, one skipped because the first
/// refused request leaves no transition) merge into what one run reports.
#[test]
fn conversations_stopped_part_way_merge_too() {
    let dir = tempfile::tempdir().unwrap();
    let mut rows = fixture_rows();
    let stopped = |args: &str| {
        format!(
            r#"{{"messages": [{{"role": "user", "content": "one"}}, {{"role": "assistant", "content": "a"}},
            {{"role": "user", "content": "two"}}, {{"role": "assistant", "content": "b"}},
            {{"role": "user", "content": "three"}}, {{"role": "assistant", "content": null,
            "tool_calls": [{{"id": "c1", "type": "function", "function": {{"name": "f", "arguments": {args}}}}}]}},
            {{"role": "tool", "tool_call_id": "c1", "content": "r"}}, {{"role": "user", "content": "four"}}]}}"#
        )
        .replace('\n', " ")
    };
    rows.insert(1, stopped(r#""{\"a\": 1}""#));
    rows.push(stopped(r#""{oops""#));
    rows.push(
        r#"{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "phase": "draft"}, {"role": "user", "content": "r"}]}"#
            .into(),
    );
    let args = [
        "-m",
        &fixture("models/tiny-tools"),
        "--now",
        "2026-01-15T10:00:00",
        "--server",
        "sglang",
    ];
    let files = shards(dir.path(), &rows, 3);
    let partials = assert_merge_is_one_run(dir.path(), &args, &files, 0);
    let merged: serde_json::Value = serde_json::from_slice(&stdout_of(
        &[
            &["merge"],
            &partials.iter().map(|p| path_str(p)).collect::<Vec<_>>()[..],
            &["--format", "json"],
        ]
        .concat(),
        0,
    ))
    .unwrap();
    assert_eq!(
        merged["partial_conversations"],
        serde_json::json!({"server_refused": 1})
    );
    assert_eq!(
        merged["skipped_rows"]["server_refused"],
        serde_json::json!(1)
    );
}
