//! `kvaudit check`, the CI gate: config errors, codes, levels, allows, baselines and every
//! output format, on the project's fixtures and (when present) the reference models.

use crate::common::{self, fixture, kvaudit, kvaudit_in};

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use kvaudit::gate::codes::CODES;
use kvaudit::tokenize::Tokenizer;
use serde_json::{Value as Json, json};

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// `check` with `args` in `dir`, expecting `code`; the JSON report.
fn check_json(dir: &Path, args: &[&str], code: i32) -> Json {
    let out = kvaudit_in(dir)
        .arg("check")
        .args(args)
        .args(["--format", "json"])
        .assert()
        .code(code);
    serde_json::from_slice(&out.get_output().stdout).unwrap()
}

fn codes(report: &Json) -> Vec<String> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap().to_string())
        .collect()
}

fn stderr_of(dir: &Path, args: &[&str], code: i32) -> String {
    let out = kvaudit_in(dir).arg("check").args(args).assert().code(code);
    String::from_utf8_lossy(&out.get_output().stderr).into_owned()
}

fn shared_model(test: &str, name: &str) -> Option<String> {
    common::shared_dir(test).map(|d| d.join("models").join(name).display().to_string())
}

/// Every finding code the fixtures can produce, gathered from real runs: a code in the table
/// that no run produces is dead (or untested), and fails here.
#[test]
fn every_code_in_the_table_is_produced() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut seen = BTreeSet::new();
    let mut run = |args: &[&str], code: i32| {
        let v = check_json(d, args, code);
        seen.extend(codes(&v));
        v
    };
    let plain = fixture("models/tiny-plain");
    let think = fixture("models/tiny-think");
    // KVA101 reasoning dropped; KVA102 with thinking off.
    run(&["-m", &think], 1);
    write(
        d,
        "think-off.toml",
        &format!(
            "[[model]]\nsource = {:?}\ntemplate_kwargs = {{ enable_thinking = false }}\n",
            think
        ),
    );
    run(&["--config", "think-off.toml"], 1);
    // KVA103 date changed between two prompts; KVA104 trimmed; KVA105 system moved; KVA107.
    let dated = write(
        d,
        "dated.json",
        r#"{"messages":[{"role":"user","content":"What is a thread?"},{"role":"assistant","content":"A thread is a unit."},{"role":"user","content":"Thanks"}],"now_per_prompt":["2026-01-15T23:59:00","2026-01-16T00:01:00"]}"#,
    );
    let trim = write(
        d,
        "trim.json",
        r#"{"messages":[{"role":"user","content":"What is a thread?"},{"role":"assistant","content":"A thread is a unit.  \n\n","generated":"A thread is a unit.  \n\n"},{"role":"user","content":"Thanks"}]}"#,
    );
    let sys = write(
        d,
        "sys.json",
        r#"{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"What is a thread?"},{"role":"assistant","content":"A thread is a unit."},{"role":"user","content":"Thanks"}]}"#,
    );
    for (template, conv, code) in [
        ("dated.jinja", &dated, "KVA103"),
        ("trim.jinja", &trim, "KVA104"),
        ("system-last.jinja", &sys, "KVA105"),
        ("renamed-history.jinja", &trim, "KVA107"),
    ] {
        let v = run(
            &[
                "-m",
                &plain,
                "--template",
                &fixture(&format!("templates/{template}")),
                "-c",
                conv.to_str().unwrap(),
            ],
            1,
        );
        assert_eq!(codes(&v), vec![code], "{template}");
        // Located at the template line that names what the code is about.
        let line = v["findings"][0]["template_line"].as_u64().unwrap();
        let want = match code {
            "KVA103" => 2, // strftime_now
            "KVA104" => 3, // | trim
            "KVA105" => 2, // the system message
            _ => line,
        };
        assert_eq!(line, want, "{template}");
    }
    // KVA106 and KVA203: sampled ids that the tokenizer encodes differently.
    let tok =
        Tokenizer::from_file(&common::fixtures().join("models/tiny-plain/tokenizer.json")).unwrap();
    let reply = "A thread is a unit of execution.";
    let encoded = tok.encode(reply).unwrap();
    let (th, read) = (tok.encode(" th").unwrap(), tok.encode("read").unwrap());
    let mut sampled = vec![encoded[0], th[0], read[0]];
    sampled.extend_from_slice(&encoded[2..]);
    let drift = write(
        d,
        "drift.json",
        &json!({"messages": [
            {"role": "user", "content": "What is a thread?"},
            {"role": "assistant", "content": reply, "generated": reply, "generated_ids": sampled},
            {"role": "user", "content": "Thanks, makes sense."}]})
        .to_string(),
    );
    let v = run(&["-m", &plain, "-c", drift.to_str().unwrap()], 1);
    assert_eq!(codes(&v), vec!["KVA106", "KVA203"]);
    // KVA202: a dated template across midnight (a warning: exit 0).
    let v = run(
        &[
            "-m",
            &plain,
            "--template",
            &fixture("templates/dated.jinja"),
        ],
        0,
    );
    assert_eq!(codes(&v), vec!["KVA202"; 3]);
    // KVA301: the template raises; KVA302: a special token the tokenizer lacks.
    let v = run(
        &[
            "-m",
            &plain,
            "--template",
            &fixture("templates/raises.jinja"),
            "-c",
            sys.to_str().unwrap(),
        ],
        1,
    );
    assert_eq!(codes(&v), vec!["KVA301"]);
    assert!(
        v["findings"][0]["message"]
            .as_str()
            .unwrap()
            .contains("System role not supported")
    );
    let v = run(&["-m", &fixture("models/bad-special")], 1);
    assert_eq!(codes(&v), vec!["KVA302"]);
    // KVA108: the request added a tool the template prints before the history.
    let tools_change =
        common::repo_root().join("fixtures/conversations/remedies/tools-change.json");
    let v = run(
        &[
            "-m",
            &fixture("models/tiny-tools"),
            "-c",
            tools_change.to_str().unwrap(),
        ],
        1,
    );
    assert_eq!(codes(&v), vec!["KVA108"]);
    // KVA201 ceiling, KVA401 index behind the engine, KVA402 the decider misled by it. The
    // threshold sits between the engine's and the index's uncached counts of the first probe.
    let probe = check_json(d, &["--config", "think-off.toml"], 1);
    let ev = &probe["findings"][0]["evidence"];
    let next = ev["next_prompt_tokens"].as_u64().unwrap();
    let engine_cached = ev["common_prefix_tokens"].as_u64().unwrap().min(next - 1) / 16 * 16;
    let threshold = next - engine_cached + 1;
    write(
        d,
        "router.toml",
        &format!(
            "[[model]]\nsource = {think:?}\ntemplate_kwargs = {{ enable_thinking = false }}\n\
             [gate]\nmax_uncached = {{ 16 = 10 }}\n\
             router = {{ engine_block_size = 16, index_block_size = 64, decider = \"non-cached-tokens={threshold},prompt-tokens=0\" }}\n"
        ),
    );
    let v = run(&["--config", "router.toml"], 1);
    let got: BTreeSet<String> = codes(&v).into_iter().collect();
    for c in ["KVA102", "KVA201", "KVA401", "KVA402"] {
        assert!(got.contains(c), "{c} in {got:?}");
    }
    // KVA501-KVA505 against a lock; KVA901 an allow that matches nothing.
    write(
        d,
        "lock.toml",
        &format!(
            "[[model]]\nsource = {plain:?}\n[gate]\nrouter = {{ engine_block_size = 16, index_block_size = 16 }}\n\
             [[allow]]\ncode = \"KVA105\"\nreason = \"no such finding\"\n"
        ),
    );
    kvaudit_in(d)
        .args(["check", "--config", "lock.toml", "--update-baseline"])
        .assert()
        .code(0);
    let renamed = fixture("templates/renamed-history.jinja");
    let v = run(&["--config", "lock.toml", "--template", &renamed], 1);
    let got: BTreeSet<String> = codes(&v).into_iter().collect();
    for c in ["KVA501", "KVA502", "KVA503", "KVA504", "KVA901"] {
        assert!(got.contains(c), "{c} in {got:?}");
    }
    kvaudit_in(d)
        .args([
            "check",
            "--config",
            "lock.toml",
            "--update-baseline",
            "--template",
            &renamed,
        ])
        .assert()
        .code(0);
    // What the lock already holds is known, not a change: it passes.
    let v = run(&["--config", "lock.toml", "--template", &renamed], 0);
    assert_eq!(v["summary"]["baselined"], 3, "{v}");
    assert_eq!(v["summary"]["deny"], 0, "{v}");
    let v = run(&["--config", "lock.toml"], 0);
    assert!(codes(&v).contains(&"KVA505".to_string()), "{v}");

    // KVA403–KVA406: router configurations linted against the engine (a YAML --config is
    // linted on its own).
    let v = run(
        &["--config", &fixture("router-configs/precise-block-64.yaml")],
        1,
    );
    assert_eq!(codes(&v), ["KVA403"], "{v}");
    let v = run(&["--config", &fixture("router-configs/pd-approx.yaml")], 1);
    assert_eq!(codes(&v), ["KVA404", "KVA404", "KVA405"], "{v}");
    write(
        d,
        "custom.yaml",
        "kind: EndpointPickerConfig\nplugins:\n  - type: my-scorer\n",
    );
    let v = run(&["--config", "custom.yaml"], 0);
    assert_eq!(codes(&v), ["KVA406"], "{v}");
    run(
        &["--config", &fixture("router-configs/recommended.yaml")],
        0,
    );
    // KVA407: stock Dynamo routes decode by load, so a turn the pod could serve goes
    // elsewhere; KVA401/KVA402 stay off without [gate] router.
    // (in a directory of its own: no kvaudit.toml of the cases above)
    let fresh = tempfile::tempdir().unwrap();
    let v = check_json(fresh.path(), &["-m", &plain, "--router", "dynamo"], 0);
    let found = codes(&v);
    assert!(found.contains(&"KVA407".to_string()), "{v}");
    assert!(!found.iter().any(|c| c == "KVA401" || c == "KVA402"), "{v}");
    // With models, the block-size finding carries what it cost on them in this run.
    let v = check_json(
        fresh.path(),
        &[
            "--router-config",
            &fixture("router-configs/precise-block-64.yaml"),
            "-m",
            &plain,
        ],
        1,
    );
    let f = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "KVA403")
        .unwrap();
    let m = f["message"].as_str().unwrap();
    assert!(
        m.contains("measured on this run: ") && m.contains("the index (block 64) sees 0 of the "),
        "{m}"
    );
    // Against an engine of block 64 the precise sample is right.
    let v = run(
        &[
            "--router-config",
            &fixture("router-configs/precise-block-64.yaml"),
            "--engine-block-size",
            "64",
            "-m",
            &plain,
        ],
        0,
    );
    assert!(!codes(&v).contains(&"KVA403".to_string()), "{v}");

    // KVA408: vllm-router's cache_aware in front of vLLM started without --enable-scale-out
    // (the finding points at the engine's flags); with it, nothing.
    let serve = write(
        fresh.path(),
        "serve.args",
        "vllm serve Qwen/Qwen3-8B --block-size 16 \\\n  --kv-events-config '{\"enable_kv_cache_events\": true}'\n",
    );
    let router = fixture("router-configs/vllm-router.args");
    let lint = |serve: &Path, code: i32| {
        check_json(
            fresh.path(),
            &[
                "--router-config",
                &router,
                "--engine-args",
                serve.to_str().unwrap(),
            ],
            code,
        )
    };
    let v = lint(&serve, 1);
    assert_eq!(codes(&v), ["KVA408"], "{v}");
    let f = &v["findings"][0];
    assert!(
        f["template_file"].as_str().unwrap().ends_with("serve.args")
            && f["message"]
                .as_str()
                .unwrap()
                .contains("--enable-scale-out"),
        "{f}"
    );
    seen.extend(codes(&v));
    let scaled = write(
        fresh.path(),
        "scale-out.args",
        "vllm serve Qwen/Qwen3-8B --enable-scale-out\n",
    );
    assert_eq!(codes(&lint(&scaled, 0)), Vec::<String>::new());

    // KVA409, KVA410: llm-d's precise producer against the engine's --kv-events-config. The
    // topic of vLLM's docs never passes llm-d's default filter; with one bound socket for
    // every pod (zmqEndpoint) the topic must name the pod's address:port.
    let events = |topic: &str| {
        format!(
            "vllm serve Qwen/Qwen3-8B \\\n  --kv-events-config '{{\"enable_kv_cache_events\": true, \"publisher\": \"zmq\", \"topic\": \"{topic}\"}}'\n"
        )
    };
    let llm_d = |config: &str, serve: &str, code: i32| {
        let serve = write(fresh.path(), "serve-events.args", serve);
        check_json(
            fresh.path(),
            &[
                "--router-config",
                config,
                "--engine-args",
                serve.to_str().unwrap(),
            ],
            code,
        )
    };
    let recommended = fixture("router-configs/recommended.yaml");
    let v = llm_d(&recommended, &events("kv-events"), 1);
    assert_eq!(codes(&v), ["KVA409"], "{v}");
    seen.extend(codes(&v));
    let single = write(
        fresh.path(),
        "single-socket.yaml",
        "kind: EndpointPickerConfig\nplugins:\n  - type: precise-prefix-cache-producer\n    parameters:\n      kvEventsConfig:\n        zmqEndpoint: tcp://*:5557\n  - type: prefix-cache-scorer\n    parameters:\n      prefixMatchInfoProducerName: precise-prefix-cache-producer\n",
    );
    let v = llm_d(
        single.to_str().unwrap(),
        &events("kv@pod-a@Qwen/Qwen3-8B"),
        1,
    );
    assert_eq!(codes(&v), ["KVA410"], "{v}");
    seen.extend(codes(&v));
    let v = llm_d(
        single.to_str().unwrap(),
        &events("kv@10.0.0.5:8000@Qwen/Qwen3-8B"),
        0,
    );
    assert_eq!(codes(&v), Vec::<String>::new(), "{v}");
    // KVA411: llm-d's sglang adapter reads each event as an array; SGLang 0.5.23 sends maps.
    let sglang_adapter = write(
        fresh.path(),
        "sglang-adapter.yaml",
        "kind: EndpointPickerConfig\nplugins:\n  - type: precise-prefix-cache-producer\n    parameters:\n      kvEventsConfig:\n        engineType: sglang\n  - type: prefix-cache-scorer\n    parameters:\n      prefixMatchInfoProducerName: precise-prefix-cache-producer\n",
    );
    let v = llm_d(
        sglang_adapter.to_str().unwrap(),
        "python -m sglang.launch_server --kv-events-config '{\"publisher\": \"zmq\", \"topic\": \"kv@10.0.0.5:30000@m\"}'\n",
        1,
    );
    assert_eq!(codes(&v), ["KVA411"], "{v}");
    seen.extend(codes(&v));
    // An engine flags file that does not split is one error, exit 2.
    let bad = write(
        fresh.path(),
        "bad.args",
        "vllm serve m --kv-events-config '{",
    );
    kvaudit_in(fresh.path())
        .args(["check", "--router-config", &recommended, "--engine-args"])
        .arg(&bad)
        .assert()
        .code(2)
        .stderr(predicates::str::starts_with("error: --engine-args "));

    seen.extend(found);

    let table: BTreeSet<String> = CODES.iter().map(|c| c.id.to_string()).collect();
    let never: Vec<&String> = table.difference(&seen).collect();
    assert!(never.is_empty(), "codes no test produces: {never:?}");
    assert!(seen.is_subset(&table), "codes outside the table: {seen:?}");
}

#[test]
fn explain_and_list_codes_print_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let out = kvaudit_in(dir.path())
        .args(["check", "--explain", "kva101"])
        .assert()
        .code(0);
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        text.starts_with("KVA101 reasoning_dropped (default: deny)"),
        "{text}"
    );
    assert!(text.contains("help: send the reasoning back"), "{text}");
    let out = kvaudit_in(dir.path())
        .args(["check", "--list-codes"])
        .assert()
        .code(0);
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert_eq!(text.lines().count(), CODES.len());
    let err = stderr_of(dir.path(), &["--explain", "KVA999"], 2);
    assert!(
        err.starts_with("error: \"KVA999\" is not a kvaudit code"),
        "{err}"
    );
}

#[test]
fn docs_codes_md_is_the_table() {
    let path = common::repo_root().join("docs/codes.md");
    let table = kvaudit::gate::codes::markdown_table();
    if std::env::var("KVAUDIT_UPDATE_DOCS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &table).unwrap();
    }
    assert!(
        std::fs::read_to_string(&path).unwrap_or_default() == table,
        "docs/codes.md is stale: run KVAUDIT_UPDATE_DOCS=1 cargo test --test integration check::"
    );
}

#[test]
fn bad_configs_are_one_error_with_file_and_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let plain = fixture("models/tiny-plain");
    let cases = [
        (
            format!("[[model]]\nsource = {plain:?}\n\n[gate]\nrwrite = \"deny\"\n"),
            "error: kvaudit.toml:5: gate.rwrite: unknown field `rwrite`",
        ),
        (
            format!("[[model]]\nsource = {plain:?}\n[gate]\nblock_sizes = \"16\"\n"),
            "error: kvaudit.toml:4: gate.block_sizes: ",
        ),
        (
            "[[model]]\nsource = \"./no-such-model\"\n".to_string(),
            "error: kvaudit.toml:1: model ",
        ),
        (
            format!("[[model]]\nsource = {plain:?}\ntemplate = \"missing.jinja\"\n"),
            "error: kvaudit.toml:1: model ",
        ),
        (
            format!("[[model]]\nsource = {plain:?}\n[[allow]]\ncode = \"KVA101\"\n"),
            "error: kvaudit.toml:3: allow: an [[allow]] needs a reason",
        ),
        (
            format!("[[model]]\nsource = {plain:?}\n[[scenario]]\nconversation = \"nope.json\"\n"),
            "error: kvaudit.toml: scenario nope.json",
        ),
    ];
    for (text, want) in cases {
        write(d, "kvaudit.toml", &text);
        let err = stderr_of(d, &[], 2);
        assert!(err.starts_with(want), "{text}\n--- got: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    write(
        d,
        "kvaudit.toml",
        &format!("[[model]]\nsource = {plain:?}\ntemplate = \"missing.jinja\"\n"),
    );
    let err = stderr_of(d, &[], 2);
    assert!(err.contains("missing.jinja: not a readable file"), "{err}");
    let empty = tempfile::tempdir().unwrap();
    let err = stderr_of(empty.path(), &[], 2);
    assert!(err.starts_with("error: no kvaudit.toml here"), "{err}");
}

#[test]
fn an_allow_silences_exactly_its_finding() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let think = fixture("models/tiny-think");
    write(
        d,
        "kvaudit.toml",
        &format!(
            "[[model]]\nsource = {think:?}\n\n[[allow]]\ncode = \"KVA101\"\nscenario = \"probe:thanks\"\nreason = \"thinking is off in production\"\n"
        ),
    );
    let v = check_json(d, &[], 1);
    let f = v["findings"].as_array().unwrap();
    assert_eq!(f.len(), 3);
    let allowed: Vec<&Json> = f.iter().filter(|f| f.get("allowed").is_some()).collect();
    assert_eq!(allowed.len(), 1);
    assert_eq!(allowed[0]["scenario"], "probe:thanks");
    assert_eq!(allowed[0]["allowed"], "thinking is off in production");
    assert_eq!(v["summary"]["deny"], 2);
    assert_eq!(v["summary"]["allowed"], 1);
    // Without the scenario it silences all three, and the gate passes.
    write(
        d,
        "kvaudit.toml",
        &format!(
            "[[model]]\nsource = {think:?}\n\n[[allow]]\ncode = \"KVA101\"\nreason = \"accepted\"\n"
        ),
    );
    let v = check_json(d, &[], 0);
    assert_eq!(v["verdict"], "pass");
    assert_eq!(v["summary"]["allowed"], 3);
    // An allow for another model matches nothing: reported, a warning (exit stays 1 for the rest).
    write(
        d,
        "kvaudit.toml",
        &format!(
            "[[model]]\nsource = {think:?}\n\n[[allow]]\ncode = \"KVA101\"\nmodel = \"Qwen/Qwen3-8B\"\nreason = \"other model\"\n"
        ),
    );
    let v = check_json(d, &[], 1);
    let unused: Vec<&Json> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == "KVA901")
        .collect();
    assert_eq!(unused.len(), 1);
    assert_eq!(unused[0]["level"], "warn");
    assert!(
        unused[0]["message"]
            .as_str()
            .unwrap()
            .contains("kvaudit.toml:4")
    );
}

#[test]
fn levels_come_from_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let think = fixture("models/tiny-think");
    write(
        d,
        "kvaudit.toml",
        &format!("[[model]]\nsource = {think:?}\n[gate]\nrewrite = \"warn\"\n"),
    );
    let v = check_json(d, &[], 0);
    assert_eq!(v["summary"]["warn"], 3);
    write(
        d,
        "kvaudit.toml",
        &format!("[[model]]\nsource = {think:?}\n[gate]\nlevels = {{ KVA101 = \"allow\" }}\n"),
    );
    let v = check_json(d, &[], 0);
    assert_eq!(codes(&v), Vec::<String>::new());
}

#[test]
fn init_writes_a_config_check_reads_and_refuses_to_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let plain = fixture("models/tiny-plain");
    kvaudit_in(d)
        .args(["init", "--model", &plain])
        .assert()
        .code(0);
    let text = std::fs::read_to_string(d.join("kvaudit.toml")).unwrap();
    assert!(text.contains("[[allow]]") && text.contains(&plain));
    let out = kvaudit_in(d).args(["check"]).assert().code(0);
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        err.starts_with("warning: no baseline yet (kvaudit.lock not found)"),
        "{err}"
    );
    kvaudit_in(d)
        .args(["check", "--update-baseline"])
        .assert()
        .code(0);
    let v = check_json(d, &[], 0);
    assert_eq!(v["verdict"], "pass");
    assert_eq!(v["baseline"]["entries"], 3);
    let out = kvaudit_in(d)
        .args(["init", "--model", &plain])
        .assert()
        .code(2);
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains("exists; pass --force"), "{err}");
    kvaudit_in(d)
        .args(["init", "--model", &plain, "--force"])
        .assert()
        .code(0);
}

/// SARIF validated against the OASIS 2.1.0 schema (vendored in fixtures/sarif) with Python's
/// jsonschema, as GitHub's upload would reject an invalid log.
#[test]
fn sarif_validates_against_the_2_1_0_schema() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let think = fixture("models/tiny-think");
    write(
        d,
        "kvaudit.toml",
        &format!(
            "[[model]]\nsource = {think:?}\n[[allow]]\ncode = \"KVA101\"\nscenario = \"probe:thanks\"\nreason = \"r\"\n"
        ),
    );
    kvaudit_in(d)
        .args(["check", "--format", "sarif", "--output", "out.sarif"])
        .assert()
        .code(1)
        .stdout("");
    let text = std::fs::read_to_string(d.join("out.sarif")).unwrap();
    let v: Json = serde_json::from_str(&text).unwrap();
    let run = &v["runs"][0];
    assert_eq!(v["version"], "2.1.0");
    assert_eq!(
        run["tool"]["driver"]["rules"].as_array().unwrap().len(),
        CODES.len()
    );
    let results = run["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    assert_eq!(results[0]["ruleId"], "KVA101");
    assert_eq!(results[0]["level"], "error");
    let loc = &results[0]["locations"][0]["physicalLocation"];
    assert!(
        loc["artifactLocation"]["uri"]
            .as_str()
            .unwrap()
            .ends_with("tokenizer_config.json")
    );
    assert!(loc["region"]["startLine"].as_u64().unwrap() >= 1);
    assert_eq!(
        results
            .iter()
            .filter(|r| r.get("suppressions").is_some())
            .count(),
        1
    );

    let schema = common::fixtures().join("sarif/sarif-2.1.0-rtm.5.json");
    let py = std::process::Command::new("python3")
        .args([
            "-c",
            "import json,sys,jsonschema\n\
             s=json.load(open(sys.argv[1]));d=json.load(open(sys.argv[2]))\n\
             jsonschema.Draft4Validator.check_schema(s)\n\
             errs=[e.message for e in jsonschema.Draft4Validator(s).iter_errors(d)]\n\
             print('\\n'.join(errs));sys.exit(1 if errs else 0)",
        ])
        .arg(&schema)
        .arg(d.join("out.sarif"))
        .output();
    match py {
        Ok(o) if o.status.code() == Some(0) => {}
        Ok(o) if String::from_utf8_lossy(&o.stderr).contains("No module named") => {
            if std::env::var("KVAUDIT_REQUIRE_SHARED").is_ok_and(|v| v == "1") {
                panic!("python3 jsonschema is required to validate SARIF");
            }
            common::skipped(
                "sarif_validates_against_the_2_1_0_schema",
                "python3 jsonschema is not installed (pip install -r tests/requirements.txt)",
            );
        }
        Ok(o) => panic!(
            "SARIF does not validate:\n{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => eprintln!("SKIPPED schema validation: no python3 ({e})"),
    }
}

#[test]
fn junit_has_a_case_per_model_and_scenario() {
    let dir = tempfile::tempdir().unwrap();
    let out = kvaudit_in(dir.path())
        .args([
            "check",
            "-m",
            &fixture("models/tiny-think"),
            "-m",
            &fixture("models/tiny-plain"),
            "--format",
            "junit",
        ])
        .assert()
        .code(1);
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let doc = roxmltree::Document::parse(&text).unwrap();
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    assert_eq!(root.attribute("tests"), Some("6"));
    assert_eq!(root.attribute("failures"), Some("3"));
    let suites: Vec<_> = root.children().filter(|n| n.is_element()).collect();
    assert_eq!(suites.len(), 2);
    let cases: Vec<_> = suites[0]
        .children()
        .filter(|n| n.has_tag_name("testcase"))
        .collect();
    assert_eq!(cases[0].attribute("name"), Some("probe:thanks"));
    let failure = cases[0]
        .children()
        .find(|n| n.has_tag_name("failure"))
        .unwrap();
    assert_eq!(failure.attribute("type"), Some("KVA101"));
    // tiny-think drops the reasoning whatever the client resends: the measured help says so.
    assert!(
        failure
            .text()
            .unwrap()
            .contains("help: only a template change can remove this rewrite")
    );
    assert!(
        suites[1]
            .children()
            .filter(|n| n.has_tag_name("failure"))
            .count()
            == 0
    );
}

/// The fixtures' absolute path, as written and as Markdown escapes it.
fn redact(text: &str) -> String {
    let path = common::fixtures().display().to_string();
    let escaped: String = path
        .chars()
        .flat_map(|c| {
            let esc = c.is_ascii_punctuation().then_some('\\');
            esc.into_iter().chain(std::iter::once(c))
        })
        .collect();
    text.replace(&path, "[fixtures]")
        .replace(&escaped, "[fixtures]")
}

#[test]
fn human_json_and_markdown_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let think = fixture("models/tiny-think");
    write(
        d,
        "kvaudit.toml",
        &format!(
            "[[model]]\nsource = {think:?}\n[[allow]]\ncode = \"KVA101\"\nscenario = \"probe:thanks\"\nreason = \"a | reason *with* markup\"\n"
        ),
    );
    for (format, name) in [
        ("human", "check_human"),
        ("json", "check_json"),
        ("markdown", "check_markdown"),
    ] {
        let out = kvaudit_in(d)
            .args(["check", "--format", format])
            .assert()
            .code(1);
        let text = redact(&String::from_utf8_lossy(&out.get_output().stdout));
        insta::assert_snapshot!(name, text);
    }
}

/// Locks: a Qwen2.5 lock passes on its own template, fails when the template is swapped for
/// one with Qwen3-style history handling (the generation prompt pre-fills an empty think block
/// that history does not repeat), passes again when swapped back; the direct comparison with
/// --baseline-template gives the same verdicts.
#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn a_lock_catches_a_qwen3_style_history_change() {
    let Some(qwen25) = shared_model(
        "a_lock_catches_a_qwen3_style_history_change",
        "qwen2.5-7b-instruct",
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let config: Json = serde_json::from_str(
        &std::fs::read_to_string(Path::new(&qwen25).join("tokenizer_config.json")).unwrap(),
    )
    .unwrap();
    let original = config["chat_template"].as_str().unwrap().to_string();
    let gen_prompt = "{{- '<|im_start|>assistant\\n' }}";
    assert_eq!(
        original.matches(gen_prompt).count(),
        1,
        "Qwen2.5's generation prompt"
    );
    let variant = original.replace(
        gen_prompt,
        "{{- '<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n' }}",
    );
    write(d, "chat_template.jinja", &original);
    write(d, "old.jinja", &original);
    write(d, "qwen3-style.jinja", &variant);
    write(
        d,
        "kvaudit.toml",
        &format!(
            "[[model]]\nsource = {qwen25:?}\ntemplate = \"chat_template.jinja\"\n[gate]\nbaseline = \"kvaudit.lock\"\n"
        ),
    );
    kvaudit_in(d)
        .args(["check", "--update-baseline"])
        .assert()
        .code(0);
    let lock = std::fs::read_to_string(d.join("kvaudit.lock")).unwrap();
    assert!(
        lock.contains("schema_version = 1") && lock.contains("[[entry]]"),
        "{lock}"
    );
    assert_eq!(check_json(d, &[], 0)["verdict"], "pass");

    write(d, "chat_template.jinja", &variant);
    let v = check_json(d, &[], 1);
    let got: BTreeSet<String> = codes(&v).into_iter().collect();
    assert!(
        got.contains("KVA102") && got.contains("KVA501") && got.contains("KVA503"),
        "{got:?}"
    );
    let shrank = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "KVA501")
        .unwrap();
    assert!(
        shrank["message"].as_str().unwrap().contains("(template "),
        "{shrank}"
    );
    let direct = check_json(
        d,
        &[
            "-m",
            &qwen25,
            "--template",
            "qwen3-style.jinja",
            "--baseline-template",
            "old.jinja",
        ],
        1,
    );
    assert_eq!(codes(&direct), codes(&v));

    write(d, "chat_template.jinja", &original);
    assert_eq!(check_json(d, &[], 0)["verdict"], "pass");
    let direct = check_json(
        d,
        &[
            "-m",
            &qwen25,
            "--template",
            "old.jinja",
            "--baseline-template",
            "old.jinja",
        ],
        0,
    );
    assert_eq!(direct["verdict"], "pass");

    let old_schema = lock.replace("schema_version = 1", "schema_version = 0");
    write(d, "kvaudit.lock", &old_schema);
    let err = stderr_of(d, &[], 2);
    assert!(
        err.contains("lock schema version 0") && err.contains("--update-baseline"),
        "{err}"
    );
}

/// The reference models: Qwen3-8B denies with its help line, Qwen2.5 passes, Llama 3.2 warns
/// on the date, and every model's findings carry the numbers diff-turns gives.
#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn reference_models_and_diff_turns_agree() {
    let Some(shared) = common::shared_dir("reference_models_and_diff_turns_agree") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = |n: &str| shared.join("models").join(n).display().to_string();
    let out = kvaudit_in(d)
        .args(["check", "-m", &m("qwen3-8b")])
        .assert()
        .code(1);
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(text.contains("error[KVA101] reasoning_dropped"), "{text}");
    // Qwen3-8B drops the reasoning of past turns from history whatever the client resends,
    // and enable_thinking=false only trades it for the pre-filled empty think block.
    assert!(
        text.contains("help: only a template change can remove this rewrite"),
        "{text}"
    );
    assert_eq!(
        check_json(d, &["-m", &m("qwen2.5-7b-instruct")], 0)["findings"],
        json!([])
    );
    let v = check_json(d, &["-m", &m("llama-3.2-3b-instruct")], 0);
    assert_eq!(codes(&v), vec!["KVA202"; 3]);

    for name in [
        "gpt-oss-120b",
        "deepseek-r1",
        "qwen3-8b",
        "qwen2.5-7b-instruct",
    ] {
        let v = check_json(
            d,
            &["-m", &m(name)],
            if name.starts_with("qwen2.5") { 0 } else { 1 },
        );
        let out = kvaudit_in(d)
            .args([
                "diff-turns",
                "-m",
                &m(name),
                "--format",
                "json",
                "--now",
                "2026-01-15T10:00:00",
            ])
            .assert();
        let dt: Json = serde_json::from_slice(&out.get_output().stdout).unwrap();
        let mut want = Vec::new();
        for c in dt["conversations"].as_array().unwrap() {
            for t in c["transitions"].as_array().unwrap() {
                if let Some(r) = t["rewrite"].as_object() {
                    want.push((
                        c["source"].as_str().unwrap().to_string(),
                        r["class"].as_str().unwrap().to_string(),
                        t["common_prefix_tokens"].clone(),
                        t["uncached"].clone(),
                        r["held"].clone(),
                    ));
                }
            }
        }
        let got: Vec<_> = v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["code"].as_str().unwrap() < "KVA200")
            .map(|f| {
                (
                    f["scenario"].as_str().unwrap().to_string(),
                    f["name"]
                        .as_str()
                        .unwrap()
                        .replace("rewrite_other", "other"),
                    f["evidence"]["common_prefix_tokens"].clone(),
                    f["evidence"]["uncached"].clone(),
                    f["evidence"]["held"].clone(),
                )
            })
            .collect();
        assert_eq!(got, want, "{name}");
    }
}

/// The workflow in docs/ci.md is valid YAML, and every `kvaudit` command it runs parses with
/// this CLI (clap's own parser: a renamed flag or subcommand fails here).
#[test]
fn the_documented_workflow_runs_commands_that_exist() {
    use clap::Parser;
    let doc = std::fs::read_to_string(common::repo_root().join("docs/ci.md")).unwrap();
    let yaml = doc
        .split("```yaml\n")
        .nth(1)
        .and_then(|s| s.split("```").next())
        .unwrap();
    let wf: serde_yaml::Value = serde_yaml::from_str(yaml).unwrap();
    assert!(wf["on"]["pull_request"]["paths"].is_sequence());
    let steps = wf["jobs"]["check"]["steps"].as_sequence().unwrap();
    let mut commands = 0;
    for step in steps {
        let Some(run) = step["run"].as_str() else {
            continue;
        };
        for line in run
            .lines()
            .filter(|l| l.trim_start().starts_with("kvaudit "))
        {
            let line = line.split("||").next().unwrap();
            let argv: Vec<String> = line
                .split_whitespace()
                .map(|w| w.trim_matches('"').to_string())
                .collect();
            kvaudit::cli::Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{line}: {e}"));
            commands += 1;
        }
    }
    assert_eq!(commands, 2);
    assert!(steps.iter().any(|s| {
        s["uses"]
            .as_str()
            .is_some_and(|u| u.starts_with("github/codeql-action/upload-sarif"))
    }));
    assert!(steps.iter().any(|s| {
        s["uses"]
            .as_str()
            .is_some_and(|u| u.starts_with("actions/cache"))
    }));
    // The pre-commit hook's entry is a command of this CLI too.
    let hooks: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(common::repo_root().join(".pre-commit-hooks.yaml")).unwrap(),
    )
    .unwrap();
    let entry = hooks[0]["entry"].as_str().unwrap();
    kvaudit::cli::Cli::try_parse_from(entry.split_whitespace()).unwrap();
}

/// diff-turns --remedies (and --date-rollover) as JSON for a model: per (scenario, from
/// prompt), the transition's remedies and its rollover remedies.
fn diff_turns_remedies(d: &Path, model: &str) -> Vec<(String, u64, Json, Json)> {
    let out = kvaudit_in(d)
        .args(["diff-turns", "-m", model, "--remedies", "--date-rollover"])
        .args(["--format", "json", "--now", "2026-01-15T10:00:00"])
        .assert();
    let dt: Json = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let mut out = Vec::new();
    for c in dt["conversations"].as_array().unwrap() {
        for t in c["transitions"].as_array().unwrap() {
            out.push((
                c["source"].as_str().unwrap().to_string(),
                t["from_prompt"].as_u64().unwrap(),
                t.clone(),
                c["remedy_sources"].clone(),
            ));
        }
    }
    out
}

/// The help line a finding should carry, derived from diff-turns' numbers: the first remedy
/// that removes the rewrite or leaves fewer uncached tokens at no block size more.
fn expected_help(now: &Json, at: (&Json, &Json), remedies: &Json, sources: &Json) -> String {
    let tokens = |v: &Json| -> Vec<u64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|u| u["tokens"].as_u64().unwrap())
            .collect()
    };
    let before = tokens(now);
    let list = remedies.as_array().unwrap();
    let best = list.iter().find(|r| {
        let after = tokens(&r["uncached"]);
        r["removes_rewrite"] == true
            || (after.iter().zip(&before).all(|(a, b)| a <= b)
                && after.iter().zip(&before).any(|(a, b)| a < b))
    });
    let Some(best) = best else {
        let tried = match list.len() {
            0 => "no remedy applies".to_string(),
            1 => "the one remedy measured does not reduce it".to_string(),
            n => format!("none of the {n} remedies measured reduces it"),
        };
        let switch = if sources["history_switches"] == json!([]) {
            " (the template reads no history switch)"
        } else {
            ""
        };
        return format!("only a template change can remove this rewrite: {tried}{switch}");
    };
    let numbers: Vec<String> = now
        .as_array()
        .unwrap()
        .iter()
        .zip(best["uncached"].as_array().unwrap())
        .map(|(n, u)| {
            format!(
                "{} -> {} at B={}",
                n["tokens"], u["tokens"], n["block_size"]
            )
        })
        .collect();
    let numbers = numbers.join(", ");
    if best["removes_rewrite"] == true {
        format!("removes the rewrite (uncached {numbers})")
    } else if (&best["rewrite_position"], &best["class"]) != at {
        format!(
            "uncached {numbers} (the rewrite is then at {}, {})",
            best["rewrite_position"],
            best["class"].as_str().unwrap()
        )
    } else {
        format!("uncached {numbers}")
    }
}

/// Every rewrite-point finding (and every date-rollover finding) carries the remedies
/// `diff-turns --remedies` measures for that transition, equal field by field, and its help
/// quotes the best of them with the same numbers.
#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn findings_quote_the_remedies_diff_turns_measures() {
    let test = "findings_quote_the_remedies_diff_turns_measures";
    let Some(models) = common::shared_dir(test).map(|s| s.join("models")) else {
        return;
    };
    let m = |n: &str| models.join(n).display().to_string();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut quoted = 0;
    let mut reports = Vec::new();
    for name in [
        "qwen3-8b",
        "glm-4.7-flash",
        "deepseek-r1-distill-qwen-7b",
        "llama-3.2-3b-instruct",
        "gpt-oss-120b",
    ] {
        // Llama 3.2 only warns (the date across midnight).
        let code = if name.starts_with("llama") { 0 } else { 1 };
        let v = check_json(d, &["-m", &m(name)], code);
        let dt = diff_turns_remedies(d, &m(name));
        for f in v["findings"].as_array().unwrap() {
            let code = f["code"].as_str().unwrap();
            let rollover = code == "KVA202";
            if !(code < "KVA200" || rollover) {
                continue;
            }
            let from: u64 = f["transition"]
                .as_str()
                .unwrap()
                .split(' ')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            let (_, _, t, sources) = dt
                .iter()
                .find(|(s, k, _, _)| f["scenario"] == s.as_str() && *k == from)
                .unwrap_or_else(|| panic!("{name}: no transition for {f:#}"));
            let (now, at, remedies) = if rollover {
                let r = &t["date_rollover"];
                (
                    &r["uncached"],
                    (&r["rewrite_position"], &r["class"]),
                    &r["remedies"],
                )
            } else {
                let r = &t["rewrite"];
                (
                    &t["uncached"],
                    (&r["position"], &r["class"]),
                    &t["remedies"],
                )
            };
            assert!(remedies.is_array(), "{name} {code}: {t:#}");
            assert_eq!(&f["remedies"], remedies, "{name} {code}");
            let help = f["help"].as_str().unwrap();
            let want = expected_help(now, at, remedies, sources);
            assert!(help.ends_with(&want), "{name} {code}: {help:?} vs {want:?}");
            quoted += 1;
        }
        reports.push((name, v));
    }
    assert!(quoted >= 15, "{quoted}");

    // The exact lines, for one model of each kind.
    let help = |name: &str, code: &str| -> String {
        let (_, v) = reports.iter().find(|(n, _)| *n == name).unwrap();
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["code"] == code && f["scenario"] == "probe:thanks")
            .map(|f| f["help"].as_str().unwrap().to_string())
            .unwrap()
    };
    // GLM-4.7 keeps past reasoning with clear_thinking=false, once the reasoning is resent.
    assert_eq!(
        help("glm-4.7-flash", "KVA101"),
        "set template kwarg clear_thinking=false and resend the reasoning in its field \
         (--resend reasoning-field): removes the rewrite (uncached 66 -> 9 at B=16, 66 -> 25 at B=64)"
    );
    // Qwen3-8B reads a switch, but no setting keeps the reasoning of past turns.
    assert_eq!(
        help("qwen3-8b", "KVA101"),
        "only a template change can remove this rewrite: none of the 3 remedies measured reduces it"
    );
    // DeepSeek-R1-Distill reads no switch at all.
    assert_eq!(
        help("deepseek-r1-distill-qwen-7b", "KVA101"),
        "only a template change can remove this rewrite: none of the 2 remedies measured \
         reduces it (the template reads no history switch)"
    );
    // Llama 3.2 prints today's date: across midnight, pinning it removes the rewrite.
    assert_eq!(
        help("llama-3.2-3b-instruct", "KVA202"),
        "pin the date the template reads (date_string) for the whole conversation: removes \
         the rewrite (uncached 87 -> 23 at B=16, 103 -> 39 at B=64)"
    );
}

/// A report's findings without the fields named.
fn findings_without(report: &Json, fields: &[&str]) -> Vec<Json> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let mut f = f.clone();
            for k in fields {
                f.as_object_mut().unwrap().remove(*k);
            }
            f
        })
        .collect()
}

/// `--no-remedies` and `[gate] remedies = false` keep the table's help line and measure
/// nothing.
#[test]
fn remedies_can_be_turned_off() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let think = fixture("models/tiny-think");
    let table_help = kvaudit::gate::Code::ReasoningDropped.info().help;
    let on = check_json(d, &["-m", &think], 1);
    let f = &on["findings"][0];
    assert_eq!(f["code"], "KVA101");
    assert!(f["remedies"].is_array(), "{f:#}");
    assert_ne!(f["help"], table_help);
    let off = check_json(d, &["-m", &think, "--no-remedies"], 1);
    write(
        d,
        "kvaudit.toml",
        &format!("[[model]]\nsource = {think:?}\n[gate]\nremedies = false\n"),
    );
    let config_off = check_json(d, &[], 1);
    for v in [&off, &config_off] {
        for f in v["findings"].as_array().unwrap() {
            assert_eq!(f["help"], table_help, "{f:#}");
            assert!(f.get("remedies").is_none(), "{f:#}");
        }
    }
    // Only the help lines and the remedies differ.
    let strip = |v: &Json| findings_without(v, &["help", "remedies"]);
    assert_eq!(strip(&on), strip(&off));
}

/// A `source = "Org/name@<commit>"` in kvaudit.toml is fetched from HF_ENDPOINT into HF_HOME's
/// cache at that commit, audited like the same files in a directory, and answered from the
/// cache offline afterwards.
#[test]
fn a_hub_id_source_pinned_to_a_commit_is_fetched_and_checked() {
    use common::hub::{COMMIT, Hub};
    let Some(hub) = Hub::start() else { return };
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let source = format!("Org/tiny@{COMMIT}");
    write(
        d,
        "kvaudit.toml",
        &format!(
            "[[model]]\nsource = {source:?}\n\n[[allow]]\ncode = \"KVA101\"\nmodel = \"Org/tiny\"\n\
             scenario = \"probe:thanks\"\nreason = \"an allow names the model without its commit\"\n"
        ),
    );
    let run = |extra: &[&str]| -> Json {
        let out = hub
            .kvaudit(home.path())
            .current_dir(d)
            .args(["check", "--format", "json"])
            .args(extra)
            .assert()
            .code(1);
        serde_json::from_slice(&out.get_output().stdout).unwrap()
    };
    let v = run(&[]);
    assert_eq!(v["models"][0]["source"], source.as_str());
    let snapshot = home
        .path()
        .join("hub/models--Org--tiny/snapshots")
        .join(COMMIT);
    assert!(snapshot.join("tokenizer.json").is_file());
    let paths: Vec<String> = hub
        .requests()
        .iter()
        .filter(|r| r["method"] == "GET" && r["status"] == 200)
        .map(|r| r["path"].as_str().unwrap().to_string())
        .collect();
    assert!(
        paths.contains(&format!("/Org/tiny/resolve/{COMMIT}/tokenizer.json")),
        "{paths:?}"
    );
    assert!(
        v["models"][0]["template"]
            .as_str()
            .unwrap()
            .starts_with(&snapshot.display().to_string()),
        "{v:#}"
    );
    // The served files are tiny-think's: the same findings as its directory gives.
    let elsewhere = tempfile::tempdir().unwrap();
    let local = check_json(elsewhere.path(), &["-m", &fixture("models/tiny-think")], 1);
    // Only where the files are and the one allow differ.
    let comparable = |v: &Json| findings_without(v, &["model", "template_file", "allowed"]);
    assert_eq!(comparable(&v), comparable(&local));
    assert_eq!(v["summary"]["allowed"], 1, "{v:#}");
    assert_eq!(v["findings"][0]["model"], source.as_str());
    // Pinned to a commit and cached: offline, no request reaches the server.
    let asked = hub.requests().len();
    let offline = run(&["--offline"]);
    assert_eq!(hub.requests().len(), asked);
    assert_eq!(comparable(&offline), comparable(&v));
}

/// One template edit shows in every transition it reaches: the human view gives it once, with
/// everywhere it shows, and counts the causes.
#[test]
fn findings_sharing_one_cause_are_one_entry() {
    let dir = tempfile::tempdir().unwrap();
    let edited = write(
        dir.path(),
        "edit.jinja",
        "{%- for message in messages -%}\n{{ '<|im_start|>' + message.role + '\\n' + (message.content or '') + '<|im_end|>\\n' }}\n{%- endfor -%}\n{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\nSure. ' }}{%- endif -%}\n",
    );
    let out = kvaudit()
        .env("COLUMNS", "200")
        .args(["check", "-m", &fixture("models/tiny-plain"), "--template"])
        .arg(&edited)
        .assert()
        .code(1);
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert_eq!(text.matches("error[KVA102]").count(), 1, "{text}");
    assert!(
        text.contains("also at (2 more, one cause):\n    "),
        "{text}"
    );
    assert!(
        text.contains("result: FAILED: 3 denied from 1 cause,"),
        "{text}"
    );
    // The JSON keeps every finding.
    let v = check_json(
        dir.path(),
        &[
            "-m",
            &fixture("models/tiny-plain"),
            "--template",
            edited.to_str().unwrap(),
        ],
        1,
    );
    assert_eq!(codes(&v), ["KVA102", "KVA102", "KVA102"]);
}
