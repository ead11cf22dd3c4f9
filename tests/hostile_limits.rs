//! Hostile input against the limits of the surfaces added last: router settings and block
//! sizes, Parquet corpora, corpus partials and `merge`, router configurations. Each input is
//! built here, run under an address-space cap and a hang guard, and must end in one `error:`
//! line (exit 2) or a counted skip, never an abort, a hang, a double count or a file left
//! behind.

use crate::common::{self, fixture};

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value as Json;

/// The address-space cap every case runs under (the campaign's was 3 GB).
const CAP_MB: u64 = 1536;

fn model() -> String {
    fixture("models/tiny-think")
}

/// Runs kvaudit under the cap and a 30 s hang guard in `dir`.
fn run_in(dir: &Path, args: &[&str]) -> common::Measured {
    let m = common::run_child(&common::Child {
        args,
        env: &[],
        dir,
        time: Duration::from_secs(30),
        max_mb: CAP_MB,
        max_file_bytes: None,
        ignore_sigxfsz: false,
        stdin: None,
    });
    assert!(!m.killed, "{args:?}: not done within the hang guard");
    m
}

fn run(args: &[&str]) -> common::Measured {
    run_in(&common::repo_root(), args)
}

/// Exit 2 with one `error:` line (clap's usage errors add a hint line after it) that says
/// `want`.
fn one_error(m: &common::Measured, want: &str, what: &str) {
    assert_eq!(m.code, 2, "{what}: {}", m.stderr);
    assert!(m.stderr.starts_with("error: "), "{what}: {}", m.stderr);
    let errors = m.stderr.lines().filter(|l| l.starts_with("error")).count();
    assert_eq!(errors, 1, "{what}: {}", m.stderr);
    assert!(!m.stderr.contains("panicked"), "{what}: {}", m.stderr);
    assert!(
        m.stderr.contains(want),
        "{what}: want {want:?} in {}",
        m.stderr
    );
}

/// `text` written to `dir/name`.
fn write_in(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

// ---------------------------------------------------------------------------------------
// Router settings and block sizes

/// Every numeric router setting and block size has a range, checked where it is parsed (a
/// flag, a `--router` spec, a router config, kvaudit.toml), so no arithmetic or allocation is
/// ever sized by an unchecked number.
#[test]
fn router_settings_and_block_sizes_are_checked_where_they_are_parsed() {
    let m = model();
    let corpus = fixture("corpus/chats.jsonl");
    let frames = fixture("events/two-pods.frames");
    let epp = fixture("router-configs/recommended.yaml");
    let range = "a block size is 1 to 65536 tokens";
    let flag_range = "a block size is a whole number of tokens from 1 to 65536";
    // Each command line with {m} (the model), {corpus}, {frames} and {epp} filled in.
    let cases: [(&str, &str); 18] = [
        (
            "diff-turns -m {m} --router gaie:block_size=4611686018427387904",
            range,
        ),
        (
            "diff-turns -m {m} --router gaie:block_size=2305843009213693952",
            range,
        ),
        (
            "diff-turns -m {m} --router gaie:block_size=1000000000",
            range,
        ),
        ("diff-turns -m {m} --router dynamo:block_size=0", range),
        (
            "diff-turns -m {m} --router vllm-router:block_size=99999999999999999999",
            "expected a non-negative integer",
        ),
        (
            "diff-turns -m {m} --engine-block-size 1000000000 --router gaie",
            flag_range,
        ),
        (
            "corpus -m {m} {corpus} --engine-block-size 1000000000 --router gaie",
            flag_range,
        ),
        (
            "corpus -m {m} {corpus} --block-sizes 16,281474976710657",
            flag_range,
        ),
        ("diff-turns -m {m} --block-sizes 0", flag_range),
        (
            "diff-turns -m {m} --block-sizes 16,16",
            "block size 16 given twice",
        ),
        ("diff-turns -m {m} --index-block-size 65537", flag_range),
        ("replay {frames} --block-sizes 100000", flag_range),
        ("keys --tokens 1,2,3 --block-sizes 0", flag_range),
        (
            "check --router-config {epp} --engine-block-size 4611686018427387904",
            flag_range,
        ),
        (
            "diff-turns -m {m} --router gaie:max_blocks=0",
            "max_blocks=0: expected a whole number from 1 to 1048576",
        ),
        (
            "diff-turns -m {m} --router dynamo:conditional_disagg=true,isl_threshold=18446744073709551615",
            "expected a whole number from 0 to 4294967296",
        ),
        (
            "diff-turns -m {m} --router llm-d:nonCachedTokens=4294967297",
            "expected a whole number from 0 to 4294967296",
        ),
        (
            "diff-turns -m {m} --decider prompt-tokens=18446744073709551615",
            "is not a whole number from 0 to 4294967296",
        ),
    ];
    let cases = cases.map(|(line, want)| {
        let line = line
            .replace("{m}", &m)
            .replace("{corpus}", &corpus)
            .replace("{frames}", &frames)
            .replace("{epp}", &epp);
        (line, want)
    });
    for (line, want) in &cases {
        let args: Vec<&str> = line.split_whitespace().collect();
        one_error(&run(&args), want, line);
    }
    // The largest block size is taken, and works end to end.
    for spec in [
        "gaie:block_size=65536",
        "dynamo:block_size=65536",
        "llm-d:block_size=65536",
    ] {
        let r = run(&[
            "diff-turns",
            "-m",
            &m,
            "--router",
            spec,
            "--engine-block-size",
            "65536",
        ]);
        assert!(r.code == 0 || r.code == 1, "{spec}: {}", r.stderr);
    }
}

/// Block sizes in files: a router config's and kvaudit.toml's.
#[test]
fn block_sizes_in_configs_are_checked_too() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let epp = d.join("epp.yaml");
    std::fs::write(
        &epp,
        "apiVersion: inference.networking.x-k8s.io/v1alpha1\nkind: EndpointPickerConfig\nplugins:\n- type: precise-prefix-cache-producer\n  parameters:\n    tokenProcessorConfig:\n      blockSizeTokens: 1000000000\n",
    )
    .unwrap();
    let flags = d.join("dynamo.args");
    std::fs::write(
        &flags,
        "python -m dynamo.frontend --router-mode kv --kv-cache-block-size 4294967296\n",
    )
    .unwrap();
    for config in [&epp, &flags] {
        let r = run(&[
            "diff-turns",
            "-m",
            &model(),
            "--router-config",
            path_str(config),
        ]);
        one_error(
            &r,
            "a block size is 1 to 65536 tokens",
            &config.display().to_string(),
        );
    }
    std::fs::write(
        d.join("kvaudit.toml"),
        "[gate]\nblock_sizes = [16, 1000000]\n",
    )
    .unwrap();
    let r = run_in(d, &["check"]);
    one_error(
        &r,
        "block_sizes 1000000: a block size is 1 to 65536 tokens",
        "kvaudit.toml",
    );
}

// ---------------------------------------------------------------------------------------
// Router configurations

/// A YAML config's nesting is bounded before the parser sees it (whose time grows with the
/// square of it), in every command that reads one; a config naming 50,000 unmodelled plugin
/// types says so in a bounded number of lines.
#[test]
fn deep_or_huge_router_configs_are_refused_quickly() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let write = |name: &str, text: &str| write_in(d, name, text);
    let flow = write(
        "flow.yaml",
        &format!("plugins: {}{}\n", "[".repeat(400_000), "]".repeat(400_000)),
    );
    let block = write(
        "block.yaml",
        &format!("plugins:\n{}x\n", "- ".repeat(300_000)),
    );
    let indent = {
        let mut t = String::from("plugins:\n");
        for i in 0..600 {
            t.push_str(&format!("{}k{i}:\n", " ".repeat(i + 1)));
        }
        write("indent.yaml", &t)
    };
    // Brackets inside quoted strings still count: a string cannot hide nesting.
    let quoted = write(
        "quoted.yaml",
        &format!("plugins: {}\n", "[ \"]\" ".repeat(5000) + &"]".repeat(5000)),
    );
    let m = model();
    for (config, want) in [
        (
            &flow,
            "400000 flow collections ('[' or '{'), over kvaudit's limit of 4096",
        ),
        (
            &quoted,
            "flow collections ('[' or '{'), over kvaudit's limit of 4096",
        ),
        (&block, "over kvaudit's limit of 512 for a router config"),
        (&indent, "over kvaudit's limit of 512 for a router config"),
    ] {
        let c = path_str(config);
        for args in [
            vec!["diff-turns", "-m", m.as_str(), "--router-config", c],
            vec!["check", "--router-config", c],
            vec!["check", "--config", c],
        ] {
            one_error(&run_in(d, &args), want, &args.join(" "));
        }
    }
    // At the limits the parser answers at once (a wrong document, not a hang).
    let at_limit = write(
        "at-limit.yaml",
        &format!("plugins: {}{}\n", "[".repeat(4096), "]".repeat(4096)),
    );
    let r = run_in(d, &["check", "--router-config", path_str(&at_limit)]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    // 50,000 plugin types kvaudit does not model: a few named, the rest counted.
    let mut many = String::from("kind: EndpointPickerConfig\nplugins:\n");
    for i in 0..50_000 {
        many.push_str(&format!("- type: u{i}\n"));
    }
    let many = write("many.yaml", &many);
    let r = run_in(
        d,
        &[
            "check",
            "--router-config",
            path_str(&many),
            "--format",
            "json",
        ],
    );
    let report: Json = serde_json::from_slice(&r.stdout).unwrap_or(Json::Null);
    let findings = report["findings"].as_array().cloned().unwrap_or_default();
    assert!(
        (1..=9).contains(&findings.len()),
        "{} findings: {}",
        findings.len(),
        r.stderr
    );
    assert!(
        findings.iter().any(|f| f["message"]
            .as_str()
            .unwrap_or("")
            .contains("and 49992 more plugin types")),
        "{findings:?}"
    );
}

/// A flags file is read as the routers' argparse reads it: a flag given twice takes its last
/// value, every value is checked, and a flag without its value is an error; a YAML document
/// that starts with `---` is YAML.
#[test]
fn router_flag_files_are_read_as_argparse_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let write = |name: &str, text: &str| write_in(d, name, text);
    let twice = write(
        "twice.args",
        "python -m dynamo.frontend --router-mode kv --kv-cache-block-size 16 --kv-cache-block-size 0\n",
    );
    let bare = write(
        "bare.args",
        "python -m dynamo.frontend --router-mode kv --kv-cache-block-size\n",
    );
    let huge = write(
        "huge.yaml",
        "kind: EndpointPickerConfig\nplugins:\n- type: prefix-based-pd-decider\n  parameters:\n    nonCachedTokens: 18446744073709551615\n",
    );
    for (config, want) in [
        (
            &twice,
            "--kv-cache-block-size 0: expected a positive integer",
        ),
        (&bare, "--kv-cache-block-size has no value"),
        (
            &huge,
            "nonCachedTokens 18446744073709551615: expected a whole number from 0 to 4294967296",
        ),
    ] {
        let r = run_in(d, &["check", "--router-config", path_str(config)]);
        one_error(&r, want, &config.display().to_string());
    }
    let last = write(
        "last.args",
        "python -m dynamo.frontend --router-mode kv --kv-cache-block-size 16 --kv-cache-block-size 32\n",
    );
    let r = run_in(
        d,
        &[
            "check",
            "--router-config",
            path_str(&last),
            "--engine-block-size",
            "32",
        ],
    );
    assert_eq!(
        r.code, 0,
        "the last value, 32, is the engine's: {}",
        r.stderr
    );
    let doc = write(
        "doc.yaml",
        &format!(
            "---\n{}",
            std::fs::read_to_string(
                common::fixtures().join("router-configs/precise-block-64.yaml")
            )
            .unwrap()
        ),
    );
    let r = run_in(d, &["check", "--router-config", path_str(&doc)]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(String::from_utf8_lossy(&r.stdout).contains("KVA403"));
}

/// The documented lint of a router config alone runs where there is no kvaudit.toml.
#[test]
fn a_router_config_is_linted_alone() {
    let dir = tempfile::tempdir().unwrap();
    let r = run_in(
        dir.path(),
        &[
            "check",
            "--router-config",
            &fixture("router-configs/precise-block-64.yaml"),
            "--engine-block-size",
            "16",
        ],
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    let out = String::from_utf8_lossy(&r.stdout);
    assert!(out.contains("KVA403"), "{out}");
    assert!(r.stderr.is_empty(), "{}", r.stderr);
}

// ---------------------------------------------------------------------------------------
// Parquet corpora

fn hostile_parquet(out: &Path, shape: &[&str]) {
    let done = std::process::Command::new("python3")
        .arg(common::repo_root().join("tests/make_hostile_parquet.py"))
        .arg(out)
        .args(shape)
        .output()
        .unwrap();
    assert!(
        done.status.success(),
        "make_hostile_parquet.py: {}",
        String::from_utf8_lossy(&done.stderr)
    );
}

/// Small files that ask for far more work or memory than they carry: refused before any row
/// is read, as one counted `unreadable` row with the limit and the flag that raises it.
#[test]
fn small_parquet_files_cannot_ask_for_unbounded_work() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cases: [(&str, &[&str], &str); 8] = [
        (
            "repeated-groups",
            &["10000"],
            "two of its column chunks share bytes",
        ),
        (
            "dictionary-rows",
            &["16000000", "1048576"],
            "--parquet-limit row_group_bytes=SIZE",
        ),
        (
            "dictionary-rows",
            &["3000000", "2000"],
            "--parquet-limit row_group_bytes=SIZE",
        ),
        (
            "dictionary-list",
            &["8000000"],
            "values, over kvaudit's limit for one row group",
        ),
        (
            "wide-group",
            &["4", "100000000"],
            "--parquet-limit row_group_bytes=SIZE",
        ),
        (
            "many-columns",
            &["5000"],
            "declares 5001 fields, over kvaudit's limit of 4096",
        ),
        (
            "delta-rows",
            &["60000", "5000"],
            "--parquet-limit row_group_bytes=SIZE",
        ),
        (
            "tiny-rows",
            &["17", "3500000"],
            "--parquet-limit row_group_bytes=SIZE",
        ),
    ];
    for (shape, args, want) in cases {
        let file = d.join(format!("{shape}-{}.parquet", args.join("-")));
        let mut all = vec![shape];
        all.extend(args);
        hostile_parquet(&file, &all);
        let r = run(&[
            "corpus",
            "-m",
            &model(),
            path_str(&file),
            "--format",
            "json",
        ]);
        assert_eq!(r.code, 2, "{shape}: {}", r.stderr);
        let report: Json = serde_json::from_slice(&r.stdout).unwrap();
        assert_eq!(report["skipped_rows"]["unreadable"], 1, "{shape}: {report}");
        let why = report["skipped_examples"]["unreadable"]["first_error"]
            .as_str()
            .unwrap_or_default();
        assert!(why.contains(want), "{shape}: {why}");
    }
}

/// The limits are flags: lowered, an ordinary file is refused naming the flag; raised, a file
/// past a default is read.
#[test]
fn parquet_limits_are_flags() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let file = d.join("rows.parquet");
    // 600,000 rows of one 1 KiB dictionary entry: 600 MiB of rows, past the row-group default.
    hostile_parquet(&file, &["dictionary-rows", "600000", "1024"]);
    let base = [
        "corpus",
        "-m",
        &model(),
        path_str(&file),
        "--format",
        "json",
    ];
    let r = run(&base);
    assert_eq!(r.code, 2, "{}", r.stderr);
    let mut raised = base.to_vec();
    raised.extend(["--parquet-limit", "row_group_bytes=1GiB"]);
    let r = run(&raised);
    // Read: 600,000 rows that are not conversations, each a counted skip.
    let report: Json = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(report["rows"], 600_000, "{}", r.stderr);
    assert!(report["skipped_rows"]["unreadable"].is_null(), "{report}");
    let small = d.join("small.parquet");
    hostile_parquet(&small, &["dictionary-rows", "1000", "10"]);
    let r = run(&[
        "corpus",
        "-m",
        &model(),
        path_str(&small),
        "--format",
        "json",
    ]);
    let report: Json = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(report["rows"], 1000, "{}", r.stderr);
    let r = run(&[
        "corpus",
        "-m",
        &model(),
        path_str(&small),
        "--format",
        "json",
        "--parquet-limit",
        "file_bytes=1KiB",
    ]);
    let report: Json = serde_json::from_slice(&r.stdout).unwrap();
    let why = report["skipped_examples"]["unreadable"]["first_error"]
        .as_str()
        .unwrap_or_default();
    assert!(why.contains("--parquet-limit file_bytes=SIZE"), "{why}");
    for bad in ["rows=5", "file_bytes=0", "file_bytes", "file_bytes=lots"] {
        let mut args = base.to_vec();
        args.extend(["--parquet-limit", bad]);
        one_error(&run(&args), "--parquet-limit", bad);
    }
}

// ---------------------------------------------------------------------------------------
// Partials and merge

/// A partial of the fixture corpus file `name`, written in `dir`.
fn partial(dir: &Path, name: &str) -> PathBuf {
    let out = dir.join(format!("{name}.partial.json"));
    let r = run(&[
        "corpus",
        "-m",
        &model(),
        &fixture(&format!("corpus/{name}")),
        "--partial",
        path_str(&out),
    ]);
    assert!(r.code == 0 || r.code == 1, "{}", r.stderr);
    out
}

/// The same rows merged twice (the same file again, a copy of it, or another partial of the
/// same input) are refused, naming both partials; different shards merge.
#[test]
fn the_same_rows_are_never_merged_twice() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let a = partial(d, "chats.jsonl");
    let b = partial(d, "wildchat.jsonl");
    let copy = d.join("copy.json");
    std::fs::copy(&a, &copy).unwrap();
    let again = d.join("again.json");
    let r = run(&[
        "corpus",
        "-m",
        &model(),
        &fixture("corpus/chats.jsonl"),
        "--partial",
        path_str(&again),
    ]);
    assert!(r.code == 0 || r.code == 1, "{}", r.stderr);
    for (list, second) in [
        (vec![&a, &b, &a], &a),
        (vec![&a, &copy], &copy),
        (vec![&b, &a, &again], &again),
    ] {
        let args: Vec<&str> = std::iter::once("merge")
            .chain(list.iter().map(|p| path_str(p)))
            .collect();
        let r = run(&args);
        one_error(&r, "both audited", &args.join(" "));
        assert!(r.stderr.contains(path_str(second)), "{}", r.stderr);
        assert!(r.stderr.contains("would count"), "{}", r.stderr);
    }
    let r = run(&["merge", path_str(&a), path_str(&b)]);
    assert!(r.code == 0 || r.code == 1, "{}", r.stderr);
    // The same rows compressed, or with other line endings, are the same rows.
    let rows = std::fs::read(common::fixtures().join("corpus/chats.jsonl")).unwrap();
    let gz = d.join("chats.jsonl.gz");
    let mut enc = flate2_free_gzip(&rows);
    std::fs::write(&gz, &mut enc).unwrap();
    let crlf = d.join("crlf.jsonl");
    let text = String::from_utf8(rows.clone())
        .unwrap()
        .replace('\n', "\r\n")
        + "\r\n";
    std::fs::write(&crlf, text).unwrap();
    for copy in [&gz, &crlf] {
        let p = d.join("copy.partial.json");
        let r = run(&[
            "corpus",
            "-m",
            &model(),
            path_str(copy),
            "--partial",
            path_str(&p),
        ]);
        assert!(r.code == 0 || r.code == 1, "{}", r.stderr);
        let r = run(&["merge", path_str(&a), path_str(&p)]);
        one_error(&r, "both audited", &copy.display().to_string());
    }
    // One run given the same file twice would count it twice: refused before reading.
    let chats = fixture("corpus/chats.jsonl");
    let r = run(&["corpus", "-m", &model(), &chats, &chats]);
    one_error(
        &r,
        "is given twice: its rows would be counted twice",
        "twice",
    );
}

/// A gzip stream of `data` as `gzip` writes it with no compression (stored blocks), made
/// here so the test needs no compressor.
fn flate2_free_gzip(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
    let chunks: Vec<&[u8]> = data.chunks(65_535).collect();
    for (i, c) in chunks.iter().enumerate() {
        out.push(u8::from(i + 1 == chunks.len()));
        out.extend((c.len() as u16).to_le_bytes());
        out.extend((!(c.len() as u16)).to_le_bytes());
        out.extend(*c);
    }
    out.extend(crc32(data).to_le_bytes());
    out.extend((data.len() as u32).to_le_bytes());
    out
}

fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xEDB8_8320 & (crc & 1).wrapping_neg());
        }
    }
    !crc
}

/// Each count of a partial says what is wrong with it; a partial may not list more example
/// rows than kvaudit keeps.
#[test]
fn a_partials_counts_and_examples_are_named_when_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let a = partial(d, "chats.jsonl");
    let json: Json = serde_json::from_slice(&std::fs::read(&a).unwrap()).unwrap();
    let edited = |name: &str, raw_rows: &str| {
        let text = serde_json::to_string(&json).unwrap();
        let rows = format!("\"rows\":{}", json["tally"]["rows"]);
        // The tally's own rows count (the last "rows" key written).
        let at = text.rfind(&rows).unwrap();
        let p = d.join(name);
        std::fs::write(
            &p,
            format!(
                "{}\"rows\":{raw_rows}{}",
                &text[..at],
                &text[at + rows.len()..]
            ),
        )
        .unwrap();
        run(&["merge", path_str(&p)])
    };
    for (raw, want) in [
        (
            "-5",
            "-5 where a count belongs, which is not a non-negative integer",
        ),
        (
            "1.5",
            "1.5 where a count belongs, which is not a non-negative integer",
        ),
        (
            "100.0",
            "100.0 where a count belongs, which is not a non-negative integer",
        ),
        ("18446744073709551616", "more than one shard can hold"),
        (
            "281474976710657",
            "a count of 281474976710657, more than one shard can hold",
        ),
    ] {
        one_error(&edited("count.json", raw), want, raw);
    }
    // A million example rows of one skip reason: refused, not printed.
    let mut many = json.clone();
    let rows: Vec<Json> = (0..1_000_000u64)
        .map(|i| serde_json::json!([i, format!("f:{i}")]))
        .collect();
    many["tally"]["skipped"] = serde_json::json!({
        "unreadable": {"count": 1_000_000u64, "rows": rows, "first_error": null}
    });
    let p = d.join("many.json");
    std::fs::write(&p, serde_json::to_vec(&many).unwrap()).unwrap();
    let r = run(&["merge", path_str(&p)]);
    one_error(&r, "a partial keeps at most 5", "a million examples");
    assert!(r.stdout.is_empty());
    // A --worst no report lists (each merge inserts into that list), a version no kvaudit
    // has, and a field kvaudit does not write.
    for (edit, want) in [
        (
            &(|v: &mut Json| v["settings"]["worst"] = (1u64 << 40).into()) as &dyn Fn(&mut Json),
            "--worst 1099511627776, more than kvaudit lists (10000)",
        ),
        (
            &|v: &mut Json| v["kvaudit_version"] = "9".repeat(100_000).into(),
            "a kvaudit version longer than any kvaudit writes",
        ),
        (
            &|v: &mut Json| v["tally"]["invented"] = 1.into(),
            "unknown field `invented`",
        ),
    ] {
        let mut v = json.clone();
        edit(&mut v);
        let p = d.join("edited.json");
        std::fs::write(&p, serde_json::to_vec(&v).unwrap()).unwrap();
        let r = run(&["merge", path_str(&p)]);
        one_error(&r, want, want);
        assert!(r.stderr.len() < 2000, "{}", r.stderr.len());
    }
    let r = run(&[
        "corpus",
        "-m",
        &model(),
        &fixture("corpus/chats.jsonl"),
        "--worst",
        "10001",
    ]);
    one_error(
        &r,
        "--worst 10001: the report lists at most 10000",
        "--worst",
    );
}

/// A partial is read in memory that follows what it holds, not its text: 10 million zeros in
/// one list (20 MB) are refused as the wrong shape within a small cap, and an honest partial
/// of 2 million distinct session keys (what a 2-million-conversation shard writes) merges
/// within the cap.
#[test]
fn partials_are_read_in_memory_that_follows_what_they_hold() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let a = partial(d, "chats.jsonl");
    let json: Json = serde_json::from_slice(&std::fs::read(&a).unwrap()).unwrap();
    let mut zeros = json.clone();
    zeros["tally"]["answers"] = Json::Array(vec![Json::from(0); 10_000_000]);
    let p = d.join("zeros.json");
    std::fs::write(&p, serde_json::to_vec(&zeros).unwrap()).unwrap();
    let r = common::run_measured(&["merge", path_str(&p)], &[], Duration::from_secs(30), 256);
    one_error(&r, "is not a valid corpus partial", "ten million zeros");

    // 2,000,000 distinct session keys, each a distinct opening message's key.
    let mut keys = String::with_capacity(2_000_000 * 100);
    keys.push('[');
    for i in 0..2_000_000u64 {
        if i > 0 {
            keys.push(',');
        }
        keys.push_str(&format!(
            "[\"{:032x}\",1,1,1,{i},\"an opening message, one of two million: {i}\"]",
            (i as u128).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835)
        ));
    }
    keys.push(']');
    let mut text = serde_json::to_string(&json).unwrap();
    let sessions = serde_json::to_string(&json["tally"]["sessions"]).unwrap();
    let at = text.find(&format!("\"sessions\":{sessions}")).unwrap();
    text.replace_range(
        at..at + "\"sessions\":".len() + sessions.len(),
        &format!("\"sessions\":{keys}"),
    );
    // As many conversations as keys, so the totals agree.
    let big = d.join("keys.json");
    let mut v: Json = serde_json::from_str(&text).unwrap();
    let conversations = v["tally"]["conversations"].as_u64().unwrap();
    let rows = v["tally"]["rows"].as_u64().unwrap();
    v["tally"]["conversations"] = (2_000_000u64).into();
    v["tally"]["rows"] = (rows - conversations + 2_000_000).into();
    v["input"]["files"][0]["rows"] = v["tally"]["rows"].clone();
    std::fs::write(&big, serde_json::to_vec(&v).unwrap()).unwrap();
    drop((v, text, keys));
    let r = common::run_measured(
        &["merge", path_str(&big), "--format", "json"],
        &[],
        Duration::from_secs(60),
        1536,
    );
    assert!(!r.killed);
    assert!(r.code == 0 || r.code == 1, "{}", r.stderr);
    let report: Json = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(
        report["session_key_collisions"]["distinct_keys"], 2_000_000,
        "{}",
        r.stderr
    );
}

/// A run whose partial `merge` would refuse is refused when it is written, and nothing is
/// left where the partial would have gone.
#[test]
fn a_partial_merge_would_refuse_is_never_written() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.json");
    let r = run(&[
        "corpus",
        "-m",
        &model(),
        &fixture("corpus/chats.jsonl"),
        "--block-sizes",
        "16,281474976710657",
        "--partial",
        path_str(&out),
    ]);
    one_error(
        &r,
        "a block size is a whole number of tokens from 1 to 65536",
        "block size",
    );
    assert!(!out.exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// At the limits, a file is read in memory the default cap honours: one row of 600,000
/// messages (218 MiB of rows, under the row group's 256 MiB) and two 120 MB strings in one
/// row group are read and skipped as too large, never copied again to find that out.
#[test]
fn parquet_files_at_the_limits_stay_within_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (name, shape) in [
        ("list.parquet", &["dictionary-list", "600000"][..]),
        ("wide.parquet", &["wide-group", "2", "120000000"][..]),
    ] {
        let file = d.join(name);
        hostile_parquet(&file, shape);
        let r = common::run_measured(
            &[
                "corpus",
                "-m",
                &model(),
                path_str(&file),
                "--format",
                "json",
            ],
            &[],
            Duration::from_secs(60),
            1024,
        );
        assert!(!r.killed, "{name}");
        assert_eq!(r.code, 2, "{name}: {}", r.stderr);
        let report: Json = serde_json::from_slice(&r.stdout).unwrap();
        assert_eq!(report["skipped_rows"]["too_large"], 1, "{name}: {report}");
    }
}
