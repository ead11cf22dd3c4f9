//! `kvaudit watch`'s parts against real data: each pod's holdings, kept by the KV events vLLM's
//! own classes encoded (../shared/fixtures/vllm-events), must say for every request's tokens
//! exactly what the pod held after each published message, as the truth files' decoded events
//! say it, computed here independently (a block is held while its hash is stored and not
//! removed; its tokens are its parent's tokens and its own).

use crate::common;

use std::collections::{HashMap, HashSet};

use kvaudit::events::frames::CaptureReader;
use kvaudit::events::{Engine, decode_batch};
use kvaudit::watch::Holdings;
use serde_json::Value as Json;

/// One pod as the truth file's events say: every block ever stored (hash → all the tokens up
/// to and including it) and the hashes stored now.
#[derive(Default)]
struct TruthPod {
    prefix: HashMap<String, Vec<u32>>,
    alive: HashSet<String>,
    /// A store named a parent never stored: what follows cannot be known until a clear.
    lost: bool,
}

impl TruthPod {
    fn apply(&mut self, event: &Json, block: usize) {
        let on_gpu = event["medium"].as_str().is_none_or(|m| m == "GPU");
        match event["type"].as_str().unwrap() {
            "BlockStored" if on_gpu => {
                let mut tokens = match &event["parent_block_hash"] {
                    Json::Null => Vec::new(),
                    parent => match self.prefix.get(&parent.to_string()) {
                        Some(t) if self.alive.contains(&parent.to_string()) => t.clone(),
                        _ => {
                            self.lost = true;
                            return;
                        }
                    },
                };
                let ids: Vec<u32> = event["token_ids"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| t.as_u64().unwrap() as u32)
                    .collect();
                for (hash, chunk) in event["block_hashes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .zip(ids.chunks(block))
                {
                    tokens.extend_from_slice(chunk);
                    self.prefix.insert(hash.to_string(), tokens.clone());
                    self.alive.insert(hash.to_string());
                }
            }
            "BlockRemoved" if on_gpu => {
                for hash in event["block_hashes"].as_array().unwrap() {
                    self.alive.remove(&hash.to_string());
                }
            }
            "AllBlocksCleared" => {
                self.alive.clear();
                self.lost = false;
            }
            _ => {}
        }
    }

    /// The token sequences the pod's held blocks end.
    fn held_set(&self) -> HashSet<&[u32]> {
        self.alive
            .iter()
            .map(|h| self.prefix[h].as_slice())
            .collect()
    }
}

/// The tokens of `seq` held: whole blocks from the start, while each is held.
fn held_of(held: &HashSet<&[u32]>, seq: &[u32], block: usize) -> usize {
    let mut n = 0;
    while n + block <= seq.len() && held.contains(&seq[..n + block]) {
        n += block;
    }
    n
}

fn ids(v: &Json) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_u64().unwrap() as u32)
        .collect()
}

#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn holdings_say_what_each_pod_held_after_every_message_of_the_real_captures() {
    let test = "holdings_say_what_each_pod_held_after_every_message_of_the_real_captures";
    let Some(shared) = common::shared_dir(test) else {
        return;
    };
    let dir = shared.join("fixtures/vllm-events");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json") && n != "index.json" && n != "live-check.json")
        .collect();
    names.sort();
    let (mut lookups, mut nonzero, mut captures, mut stale) = (0, 0, 0, 0);
    for name in &names {
        let truth: Json =
            serde_json::from_str(&std::fs::read_to_string(dir.join(name)).unwrap()).unwrap();
        let block = truth["block_size"].as_u64().unwrap() as usize;
        let mut sequences: Vec<Vec<u32>> = Vec::new();
        for r in truth["requests"].as_array().into_iter().flatten() {
            let prompt = ids(&r["prompt_token_ids"]);
            let mut left = prompt.clone();
            left.extend(ids(&r["output_token_ids"]));
            left.pop();
            sequences.push(prompt);
            sequences.push(left);
        }
        let frames = dir.join(name.replace(".json", ".frames"));
        let mut reader = CaptureReader::new(std::io::BufReader::new(
            std::fs::File::open(&frames).unwrap(),
        ))
        .unwrap();
        let mut holdings = Holdings::new(block, 1 << 20);
        let messages = truth["messages"].as_array().unwrap();
        if sequences.is_empty() {
            // No requests on record: every sequence a store published is one to look up.
            let mut all: HashMap<String, TruthPod> = HashMap::new();
            for m in messages {
                let pod = all.entry(m["pod"].to_string()).or_default();
                for event in m["events"].as_array().unwrap() {
                    pod.apply(event, block);
                }
            }
            let mut seen: Vec<Vec<u32>> = all
                .into_values()
                .flat_map(|p| p.prefix.into_values())
                .collect();
            seen.sort();
            seen.dedup();
            sequences = seen;
        }
        // The long stream is checked every 25 messages; the others after each.
        let every = if messages.len() > 100 { 25 } else { 1 };
        let mut pods: HashMap<String, TruthPod> = HashMap::new();
        for (i, m) in messages.iter().enumerate() {
            let message = reader.next_message().unwrap().unwrap();
            let pod = m["pod"].as_str().unwrap_or("pod").to_string();
            assert_eq!(message.topic.as_deref(), m["topic"].as_str(), "{name} #{i}");
            let batch = decode_batch(&message.payload, 0, Engine::Vllm).unwrap();
            holdings.apply(&pod, &batch);
            let truth_pod = pods.entry(pod.clone()).or_default();
            for event in m["events"].as_array().unwrap() {
                truth_pod.apply(event, block);
            }
            if i % every != 0 && i + 1 != messages.len() {
                continue;
            }
            for (p, t) in &pods {
                let held = t.held_set();
                assert_eq!(holdings.stale(p).is_some(), t.lost, "{name} #{i} {p}");
                if t.lost {
                    stale += 1;
                    continue;
                }
                assert_eq!(holdings.blocks(p), t.alive.len(), "{name} #{i} {p}");
                for seq in &sequences {
                    let want = held_of(&held, seq, block);
                    assert_eq!(
                        holdings.held(p, &holdings.keys(seq)),
                        want,
                        "{name} after message {i}, pod {p}, a {}-token sequence",
                        seq.len()
                    );
                    lookups += 1;
                    nonzero += usize::from(want > 0);
                }
            }
        }
        assert!(reader.next_message().is_none(), "{name}: frames left over");
        captures += 1;
    }
    eprintln!(
        "{test}: {captures} captures, {lookups} lookups, {nonzero} holding something, \
         {stale} checks of a pod known to be stale"
    );
    assert!(
        captures >= 19 && nonzero > 100_000 && stale > 0,
        "{captures} captures, {nonzero} non-zero"
    );
}
