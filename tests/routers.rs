//! `--router`, `--router-config` and `replay --router` from the command line, on the
//! project's own fixtures (the real routers: tests/routers_live.rs).

use crate::common::{self, fixture, kvaudit};

use assert_cmd::Command;
use serde_json::Value as Json;

fn quick(extra: &[&str]) -> Command {
    let mut cmd = kvaudit();
    cmd.args(["diff-turns", "-m", &fixture("models/tiny-plain")])
        .args([
            "--user",
            "What is a thread?",
            "--reply",
            "A unit of execution.",
        ])
        .args(["--follow-up", "Thanks"])
        .args(extra);
    cmd
}

#[test]
fn each_router_answers_every_transition_in_the_order_given() {
    let out = quick(&[
        "--router",
        "dynamo",
        "--router",
        "vllm-router:threshold=0.9",
        "--router",
        "gaie",
        "--router-config",
        &fixture("router-configs/recommended.yaml"),
        "--format",
        "json",
    ])
    .output()
    .unwrap();
    let v: Json = serde_json::from_slice(&out.stdout).unwrap();
    let t = &v["conversations"][0]["transitions"][0];
    let routers = t["routers"].as_array().unwrap();
    let specs: Vec<&str> = routers
        .iter()
        .map(|r| r["spec"].as_str().unwrap())
        .collect();
    let recommended = format!("llm-d from {}", fixture("router-configs/recommended.yaml"));
    assert_eq!(
        specs,
        [
            "dynamo",
            "vllm-router:threshold=0.9",
            "gaie",
            recommended.as_str()
        ]
    );
    let names: Vec<&str> = routers
        .iter()
        .map(|r| r["router"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["dynamo", "vllm-router", "gaie", "llm-d"]);
    // Dynamo at the engine's block size credits the held prompt and reply's full blocks,
    // exactly what the pod reuses; vllm-router credits prompt 1 only.
    let held = t["held_tokens"].as_u64().unwrap();
    let common = t["common_prefix_tokens"].as_u64().unwrap();
    assert_eq!(
        routers[0]["visible_tokens"].as_u64().unwrap(),
        common.min(held) / 16 * 16
    );
    assert_eq!(routers[0]["decision"], "other");
    assert_eq!(routers[2]["unit"], "bytes");
    assert!(routers[2]["input_units"].as_u64().unwrap() > 0);
    // The recommended wiring: a precise index at 16, decider at 512.
    assert!(
        routers[3]["rule"]
            .as_str()
            .unwrap()
            .contains("index block 16"),
        "{}",
        routers[3]
    );
    // The human summary ends with the answer, one entry per router.
    // (the quick turn's JSON is under one 64-byte block: GAIE at block 4 hashes 16 bytes)
    let out = quick(&["--router", "dynamo", "--router", "gaie:block_size=4"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let answer = text[text.find("answer: ").unwrap()..].replace("\n  ", " ");
    assert!(
        answer.starts_with("answer: of 1 transition, the next turn stays on the decode pod in 0 with dynamo (decode chosen by load, conditional disaggregation off); 1 with gaie:block_size=4 (highest prefix score)"),
        "{answer}"
    );
}

#[test]
fn a_router_config_that_names_what_is_not_modelled_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("epp.yaml");
    std::fs::write(
        &path,
        "kind: EndpointPickerConfig\nplugins:\n  - type: my-scorer\n  - type: prefix-cache-scorer\n",
    )
    .unwrap();
    let out = quick(&[
        "--router-config",
        path.to_str().unwrap(),
        "--format",
        "json",
    ])
    .output()
    .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("plugin type my-scorer is not modelled"),
        "{err}"
    );
    assert!(
        err.contains("prefix-cache-scorer reads approx-prefix-cache-producer"),
        "{err}"
    );
    let v: Json = serde_json::from_slice(&out.stdout).unwrap();
    let r = &v["conversations"][0]["transitions"][0]["routers"][0];
    assert_eq!(r["router"], "llm-d-approx", "{r}");
}

#[test]
fn bad_router_input_is_one_error_line() {
    let dir = tempfile::tempdir().unwrap();
    // A YAML alias bomb: each level repeats the one before nine times.
    let mut bomb = String::from("a: &a [\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\"]\n");
    for i in 1..12 {
        let p = (b'a' + i - 1) as char;
        let c = (b'a' + i) as char;
        bomb.push_str(&format!(
            "{c}: &{c} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]\n"
        ));
    }
    std::fs::write(dir.path().join("bomb.yaml"), &bomb).unwrap();
    std::fs::write(dir.path().join("big.yaml"), vec![b' '; 2 << 20]).unwrap();
    let bomb = dir.path().join("bomb.yaml").display().to_string();
    let big = dir.path().join("big.yaml").display().to_string();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--router", "dynamoo"],
            "error: --router \"dynamoo\": unknown router \"dynamoo\" (did you mean dynamo?)",
        ),
        (
            vec!["--router", "gaie:block_size=0"],
            "error: --router \"gaie:block_size=0\": block_size 0: a block size is 1 to 65536 tokens",
        ),
        (
            vec!["--router-config", "/nonexistent/epp.yaml"],
            "error: cannot read router config /nonexistent/epp.yaml",
        ),
        (vec!["--router-config", &bomb], "error: router config"),
        (
            vec!["--router-config", &big],
            "error: cannot read router config",
        ),
    ];
    for (args, start) in cases {
        let out = quick(&args).output().unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.starts_with(start), "{args:?}: {err}");
        assert_eq!(
            err.lines().filter(|l| l.starts_with("error:")).count(),
            1,
            "{err}"
        );
    }
    let capture = fixture("events/two-pods.frames");
    for (router, want) in [
        ("gaie", "keys on requests, not engine events"),
        ("vllm-router", "replay emulates llm-d and dynamo"),
        (
            "dynamo:conditional_disagg=true",
            "conditional_disagg is a routing setting",
        ),
    ] {
        let out = kvaudit()
            .args(["replay", &capture, "--router", router])
            .output()
            .unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{router}: {err}");
        assert!(err.contains(want), "{router}: {err}");
    }
}

#[test]
fn replay_gives_one_view_per_router() {
    let out = kvaudit()
        .args(["replay", &fixture("events/two-pods.frames")])
        .args([
            "--router",
            "llm-d",
            "--router",
            "dynamo",
            "--router",
            "dynamo:block_size=64",
        ])
        .args(["--format", "json"])
        .output()
        .unwrap();
    let v: Json = serde_json::from_slice(&out.stdout).unwrap();
    let views = v["views"].as_array().unwrap();
    let routers: Vec<&str> = views
        .iter()
        .map(|x| x["router"].as_str().unwrap())
        .collect();
    assert_eq!(routers, ["llm-d", "dynamo", "dynamo"]);
    assert_eq!(views[2]["index_block_size"], 64);
    // The capture's engine block size, learned from its first stored event.
    let learned = views[1]["index_block_size"].as_u64().unwrap();
    assert!(learned > 0 && learned != 64, "{}", views[1]);
    // At its own block size Dynamo finds every sequence the engine holds; at another, none.
    for s in views[1]["sequences"].as_array().unwrap() {
        assert_eq!(s["index_tokens"], s["engine_tokens"], "{s}");
    }
    for s in views[2]["sequences"].as_array().unwrap() {
        assert_eq!(s["index_tokens"], 0, "{s}");
    }
}

/// One block-size flag name everywhere the block sizes are the subcommand's own
/// (`--block-sizes`), the older names as aliases giving the same output.
#[test]
fn block_sizes_is_the_flag_and_the_old_names_still_work() {
    let capture = fixture("events/two-pods.frames");
    let run = |args: &[&str]| {
        let out = kvaudit().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        out.stdout
    };
    assert_eq!(
        run(&[
            "replay",
            &capture,
            "--block-sizes",
            "16,64",
            "--format",
            "json"
        ]),
        run(&[
            "replay",
            &capture,
            "--index-block-size",
            "16,64",
            "--format",
            "json"
        ])
    );
    let keys = |flag: &str| {
        let out = kvaudit()
            .args([
                "keys",
                "--tokens",
                "1,2,3,4,5,6,7,8",
                "--model-name",
                "m",
                flag,
                "4",
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{flag}");
        out.stdout
    };
    assert_eq!(keys("--block-sizes"), keys("--index-block-size"));
    let help = kvaudit().args(["probe", "--help"]).output().unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    assert!(
        help.contains("--block-sizes <B>") && help.contains("--block-size"),
        "{help}"
    );
}

/// Every example in a subcommand's --help parses as the command line it shows.
#[test]
fn help_examples_parse() {
    use clap::Parser;
    let mut seen = 0;
    for sub in ["diff-turns", "corpus", "check", "render", "probe", "replay"] {
        let out = kvaudit().args([sub, "--help"]).output().unwrap();
        let help = String::from_utf8(out.stdout).unwrap();
        let examples = help
            .split("Examples:\n")
            .nth(1)
            .unwrap_or_else(|| panic!("{sub} --help has no examples"));
        for line in examples.lines().take_while(|l| l.starts_with("  kvaudit ")) {
            let words = common::shell_words(line.trim());
            kvaudit::cli::Cli::try_parse_from(&words).unwrap_or_else(|e| panic!("{line}: {e}"));
            seen += 1;
        }
    }
    assert!(seen >= 16, "{seen} examples");
}
