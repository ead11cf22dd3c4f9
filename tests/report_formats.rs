//! Every report in every format, snapshotted byte for byte: the JSON shapes are defined by view
//! structs and must not drift, and the Markdown report is rendered from `templates/`.

use crate::common::{self, kvaudit_in};

use assert_cmd::Command;
use kvaudit::events::frames::write_frame;

fn stdout(cmd: &mut Command, code: i32) -> String {
    let out = cmd.assert().code(code);
    String::from_utf8(out.get_output().stdout.clone()).unwrap()
}

const DIFF_TURNS: &[&str] = &[
    "diff-turns",
    "--model",
    "fixtures/models/tiny-think",
    "--conversation",
    "fixtures/conversations/tool-loop.json",
    "--date-rollover",
    "--block-sizes",
    "4,8",
    "--engine-block-size",
    "4",
    "--index-block-size",
    "8",
];

#[test]
fn diff_turns_json_and_markdown() {
    let root = common::repo_root();
    let json = stdout(
        kvaudit_in(&root)
            .args(DIFF_TURNS)
            .args(["--format", "json"]),
        1,
    );
    insta::assert_snapshot!("diff_turns_json", json);
    let md = stdout(
        kvaudit_in(&root)
            .args(DIFF_TURNS)
            .args(["--format", "markdown"]),
        1,
    );
    insta::assert_snapshot!("diff_turns_markdown", md);
}

#[test]
fn markdown_escapes_what_comes_from_input() {
    let dir = tempfile::tempdir().unwrap();
    let name = "x|y <img src=a> *b*.json";
    std::fs::copy(
        common::repo_root().join("fixtures/conversations/tool-loop.json"),
        dir.path().join(name),
    )
    .unwrap();
    let model = common::repo_root().join("fixtures/models/tiny-think");
    let md = stdout(
        kvaudit_in(dir.path()).args([
            "diff-turns",
            "--model",
            &model.display().to_string(),
            "-c",
            name,
            "--format",
            "markdown",
        ]),
        1,
    );
    assert!(
        md.contains("### x\\|y \\<img src\\=a\\> \\*b\\*\\.json"),
        "{md}"
    );
    // Every angle bracket from input is escaped: no raw HTML reaches a CI summary.
    assert!(
        md.match_indices('<').all(|(i, _)| md[..i].ends_with('\\')),
        "{md}"
    );
}

/// The seed write-up's shape (a prefill event, then one event per 16-token reply block), then a
/// frame that is not msgpack, so the report has malformed kinds and sequences.
fn capture() -> Vec<u8> {
    let mut frames = common::event_fixtures::seed_capture(64, 64);
    // The seed capture holds 1 prefill event and 4 reply events (sequence numbers 0..5).
    write_frame(&mut frames, b"kv@decode-0@demo-model", 5, &[0xc1]);
    frames
}

#[test]
fn replay_json_human_and_prometheus() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("seed.frames"), capture()).unwrap();
    let all: Vec<u32> = (1..=128).collect();
    std::fs::write(
        dir.path().join("lookups.json"),
        serde_json::json!([all[..64], {"tokens": all, "pod": "decode-0"}]).to_string(),
    )
    .unwrap();
    let args = [
        "replay",
        "seed.frames",
        "--keep-going",
        "--index-block-size",
        "16,64",
        "--lookup",
        "lookups.json",
    ];
    let json = stdout(
        kvaudit_in(dir.path()).args(args).args(["--format", "json"]),
        1,
    );
    insta::assert_snapshot!("replay_json", json);
    // The snapshot is at 80 columns (what kvaudit gives a pipe when COLUMNS is unset).
    let human = stdout(kvaudit_in(dir.path()).env("COLUMNS", "80").args(args), 1);
    insta::assert_snapshot!("replay_human", human);
    let prom = stdout(
        kvaudit_in(dir.path())
            .args(args)
            .args(["--format", "prometheus"]),
        1,
    );
    insta::assert_snapshot!("replay_prometheus", prom);
    // Stopped on a truncated frame: the input's error is part of the JSON.
    let bytes = capture();
    std::fs::write(dir.path().join("cut.frames"), &bytes[..bytes.len() - 3]).unwrap();
    let json = stdout(
        kvaudit_in(dir.path()).args(["replay", "cut.frames", "--format", "json"]),
        2,
    );
    insta::assert_snapshot!("replay_json_stopped", json);
}

#[test]
fn keys_json_and_human() {
    let root = common::repo_root();
    let tokens: Vec<String> = (1..=40).map(|t| t.to_string()).collect();
    let args = [
        "keys",
        "--tokens",
        &tokens.join(","),
        "--index-block-size",
        "16",
        "--model-name",
        "demo-model",
    ];
    let json = stdout(kvaudit_in(&root).args(args).args(["--format", "json"]), 0);
    insta::assert_snapshot!("keys_json", json);
    let human = stdout(kvaudit_in(&root).args(args), 0);
    insta::assert_snapshot!("keys_human", human);
}
