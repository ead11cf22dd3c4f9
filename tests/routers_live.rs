//! kvaudit's router emulations against the real routers, run from their PyPI packages
//! (`.ci/routers.sh`; the drivers are tests/routers/*.py):
//!
//! - Dynamo 1.6.1's standalone KV indexer fed real vLLM event captures: what it finds for each
//!   request's prompt, prompt + reply without its last token, and prompt + reply equals
//!   `replay --router dynamo:block_size=B`'s lookups, at the engine's block size and at others.
//! - vllm-router 0.1.17 and smg 1.13.0 (HTTP, cache_aware) in front of two loopback workers that
//!   render each request to kvaudit's own `render --server vllm` ids: the match each router
//!   logs for turn k+1, and its branch, equal `diff-turns --router`'s `visible_tokens` /
//!   `matched_units` / `input_units` and `decision` for that transition.
//!
//! The routers' environment is found at KVAUDIT_ROUTERS_VENV (what .ci/run exports), else where
//! .ci/routers.sh puts it; without it, or without ../shared, the tests say they skip (under
//! CI=true they fail).

use crate::common::{self, kvaudit_process};

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value as Json, json};

fn venv(test: &str) -> Option<PathBuf> {
    common::live::routers_venv(test)
}

fn json_of(cmd: &mut Command, what: &str) -> Json {
    let out = cmd.output().unwrap();
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "{what}: exit {:?}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{what}: {e}\n{}", String::from_utf8_lossy(&out.stdout)))
}

fn work_dir(name: &str) -> PathBuf {
    let dir = common::repo_root().join("target/routers-live").join(name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn ids(v: &Json) -> Vec<u64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect()
}

/// The lookups of a capture's truth file: per request, its prompt, its prompt and reply
/// without the last token (what the engine holds), and its prompt and whole reply.
fn truth_lookups(truth: &Json) -> Vec<Vec<u64>> {
    let mut out = Vec::new();
    for r in truth["requests"].as_array().unwrap() {
        let prompt = ids(&r["prompt_token_ids"]);
        let reply = ids(&r["output_token_ids"]);
        let mut held = prompt.clone();
        held.extend_from_slice(&reply[..reply.len().saturating_sub(1)]);
        let mut whole = prompt.clone();
        whole.extend_from_slice(&reply);
        out.extend([prompt, held, whole]);
    }
    out
}

#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn dynamo_indexer_finds_what_replay_says_at_every_block_size() {
    let test = "dynamo_indexer_finds_what_replay_says_at_every_block_size";
    let Some(shared) = common::shared_dir(test) else {
        return;
    };
    let Some(venv) = venv(test) else { return };
    let dir = work_dir("dynamo");
    let events = shared.join("fixtures/vllm-events");
    let mut compared = 0;
    let mut cases = Vec::new();
    for capture in [
        "s1",
        "s2",
        "s3",
        "s6",
        "legacy-v0.9.0-s1",
        "legacy-v0.10.2-s1",
        "legacy-v0.23.0-s1",
    ] {
        for block in [8, 16, 32, 64] {
            cases.push((capture, block));
        }
    }
    let mut nonzero_at_16 = 0;
    for (capture, block) in cases {
        let truth: Json =
            serde_json::from_slice(&std::fs::read(events.join(format!("{capture}.json"))).unwrap())
                .unwrap();
        let lookups = truth_lookups(&truth);
        let file = dir.join(format!("{capture}-lookups.json"));
        std::fs::write(&file, serde_json::to_vec(&lookups).unwrap()).unwrap();
        let frames = events.join(format!("{capture}.frames"));
        let real = json_of(
            Command::new(venv.join("bin/python"))
                .arg(common::repo_root().join("tests/routers/dynamo_indexer.py"))
                .arg("--capture")
                .arg(&frames)
                .args(["--block-size", &block.to_string(), "--lookups"])
                .arg(&file),
            &format!("dynamo indexer on {capture} at {block}"),
        );
        let ours = json_of(
            kvaudit_process()
                .arg("replay")
                .arg(&frames)
                .args(["--router", &format!("dynamo:block_size={block}")])
                .arg("--lookup")
                .arg(&file)
                .args(["--format", "json", "--keep-going"]),
            &format!("replay of {capture} at {block}"),
        );
        let view = ours["views"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["router"] == "dynamo")
            .unwrap();
        // kvaudit answers a lookup without a pod once per pod; Dynamo's `/query` answers with
        // every worker's match: compare the best of each.
        let ours_lookups = view["lookups"].as_array().unwrap();
        for (i, tokens) in lookups.iter().enumerate() {
            let pods = ours_lookups.len() / lookups.len();
            let ours_best = ours_lookups[i * pods..(i + 1) * pods]
                .iter()
                .map(|l| l["index_tokens"].as_u64().unwrap())
                .max()
                .unwrap();
            let theirs = real["lookups"][i]["matched_tokens"].as_u64().unwrap();
            assert_eq!(
                ours_best,
                theirs,
                "{capture} at block {block}, lookup {i} ({} tokens): kvaudit {ours_best}, Dynamo {theirs}",
                tokens.len()
            );
            if block == 16 && theirs > 0 {
                nonzero_at_16 += 1;
            }
            compared += 1;
        }
    }
    // The comparison must have had something to find: at the engine's block size Dynamo
    // finds prompt and reply blocks of s1, s2, s3 and the two later legacy captures.
    assert!(
        nonzero_at_16 >= 15,
        "only {nonzero_at_16} lookups found blocks at 16"
    );
    assert_eq!(compared, 156, "lookups compared");
}

/// A conversation's requests as the client sends them, and each prompt's ids as vLLM renders
/// them (kvaudit's `render --server vllm`, equal to vLLM's own on 4,280 real prompts).
fn case_for(model: &Path, conversation: &Path) -> Json {
    let rendered = json_of(
        kvaudit_process()
            .args([
                "render", "--server", "vllm", "--tokens", "--format", "json", "-m",
            ])
            .arg(model)
            .arg("-c")
            .arg(conversation),
        "render",
    );
    let conv: Json = serde_json::from_slice(&std::fs::read(conversation).unwrap()).unwrap();
    let messages = conv["messages"].as_array().unwrap();
    let prompts = rendered["conversations"][0]["prompts"].as_array().unwrap();
    let mut turns = Vec::new();
    let mut k = 0;
    for (i, m) in messages.iter().enumerate() {
        if m["role"] == "assistant" {
            turns.push(json!({"messages": &messages[..i], "prompt_token_ids": prompts[k]["ids"]}));
            k += 1;
        }
    }
    if messages.last().is_some_and(|m| m["role"] != "assistant") {
        turns.push(json!({"messages": messages, "prompt_token_ids": prompts[k]["ids"]}));
    }
    json!({ "turns": turns })
}

fn conversation(user: &[&str], replies: &[String]) -> Json {
    let mut messages = Vec::new();
    for (i, u) in user.iter().enumerate() {
        messages.push(json!({"role": "user", "content": u}));
        if let Some(r) = replies.get(i) {
            messages.push(json!({"role": "assistant", "content": r}));
        }
    }
    json!({ "messages": messages })
}

#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn vllm_router_and_smg_match_and_route_as_diff_turns_says() {
    let test = "vllm_router_and_smg_match_and_route_as_diff_turns_says";
    let Some(shared) = common::shared_dir(test) else {
        return;
    };
    let Some(venv) = venv(test) else { return };
    let dir = work_dir("http");
    let model = shared.join("models/llama-3.1-8b-instruct");
    let long = "The lighthouse keeper counted ships & storms <all night>. ".repeat(40);
    let mut convs = vec![
        (
            "short-reply",
            conversation(
                &[
                    "Name one planet with rings, in a word.",
                    "And the largest moon of Jupiter?",
                ],
                &["Saturn.".to_string()],
            ),
        ),
        (
            "long-reply",
            conversation(
                &[
                    "Tell me about lighthouses.",
                    "Thanks. Shorter please?",
                    "One word?",
                ],
                &[long.clone(), "Lights for ships.".to_string()],
            ),
        ),
    ];
    // Real multi-turn conversations: the first six MT-Bench answers (two user turns each).
    let text = std::fs::read_to_string(shared.join("corpus/mt-bench-answers.jsonl")).unwrap();
    for line in text.lines().take(6) {
        let row: Json = serde_json::from_str(line).unwrap();
        let id = row["id"].as_str().unwrap().replace([':', '/'], "-");
        convs.push((
            Box::leak(id.into_boxed_str()),
            json!({"messages": row["messages"]}),
        ));
    }
    let mut compared = 0;
    let mut decisions = std::collections::BTreeSet::new();
    for (name, conv) in &convs {
        let path = dir.join(format!("{name}.json"));
        std::fs::write(&path, serde_json::to_vec(conv).unwrap()).unwrap();
        let case = dir.join(format!("{name}-case.json"));
        std::fs::write(&case, serde_json::to_vec(&case_for(&model, &path)).unwrap()).unwrap();
        let audit = json_of(
            kvaudit_process()
                .args(["diff-turns", "--server", "vllm", "--format", "json", "-m"])
                .arg(&model)
                .arg("-c")
                .arg(&path)
                .args(["--router", "vllm-router", "--router", "sglang"]),
            "diff-turns",
        );
        let transitions = audit["conversations"][0]["transitions"].as_array().unwrap();
        for (router, index) in [("vllm-router", 0), ("smg", 1)] {
            let real = json_of(
                Command::new(venv.join("bin/python"))
                    .arg(common::repo_root().join("tests/routers/http_router.py"))
                    .args(["--router", router, "--case"])
                    .arg(&case),
                &format!("{router} on {name}"),
            );
            let turns = real["turns"].as_array().unwrap();
            assert_eq!(turns.len(), transitions.len() + 1, "{router} on {name}");
            for (k, t) in transitions.iter().enumerate() {
                let ours = &t["routers"][index];
                let theirs = &turns[k + 1];
                let (matched, input) = if router == "smg" {
                    (ours["matched_units"].as_u64(), ours["input_units"].as_u64())
                } else {
                    (
                        ours["visible_tokens"].as_u64(),
                        t["next_prompt_tokens"].as_u64(),
                    )
                };
                assert_eq!(
                    (matched, input),
                    (
                        theirs["matched_units"].as_u64(),
                        theirs["input_units"].as_u64()
                    ),
                    "{router} on {name}, turn {}: {theirs}",
                    k + 2
                );
                let hit = matches!(theirs["branch"].as_str(), Some("prefix_hit" | "tree_match"));
                let decision = ours["decision"].as_str().unwrap();
                assert_eq!(
                    decision == "decode",
                    hit,
                    "{router} on {name}, turn {}: kvaudit {decision}, router {}",
                    k + 2,
                    theirs["branch"]
                );
                decisions.insert((router, decision.to_string()));
                compared += 1;
            }
        }
    }
    // Both routers were seen to keep a turn and to send one elsewhere.
    assert_eq!(decisions.len(), 4, "{decisions:?}");
    assert_eq!(compared, 18, "transitions compared");
}
