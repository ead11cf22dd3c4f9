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

// ---- request-log mode over a scripted two-pod scenario ----------------------------------

use std::hash::{Hash, Hasher};
use std::path::Path;

use kvaudit::events::encode::encode_batch;
use kvaudit::events::frames::write_frame;
use kvaudit::events::msgpack::IntWidth;
use kvaudit::events::{
    Batch, BatchWire, BlockRemoved, BlockStored, Event, EventKind, EventWire, WireHash,
};
use serde_json::json;

const B: usize = 16;
/// Fixed, so every prompt's date line is the same day.
const NOW: &str = "2024-07-26T10:00:00";

/// A pod as the scenario drives it: the engine's hash of each held block, and its capture.
struct ScriptedPod {
    name: &'static str,
    alive: HashSet<u64>,
    frames: Vec<u8>,
    seq: u64,
}

/// The engine's hash of each whole block of `ids` (any function of the block and its parent
/// will do: kvaudit never computes it).
fn chain_hashes(ids: &[u32]) -> Vec<u64> {
    let mut parent = 0u64;
    ids.chunks_exact(B)
        .map(|block| {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            (parent, block).hash(&mut h);
            parent = h.finish();
            parent
        })
        .collect()
}

fn wire(h: u64) -> WireHash {
    WireHash::Uint(h, IntWidth::U64)
}

impl ScriptedPod {
    fn new(name: &'static str) -> ScriptedPod {
        ScriptedPod {
            name,
            alive: HashSet::new(),
            frames: Vec::new(),
            seq: 0,
        }
    }

    fn publish(&mut self, ts: f64, kind: EventKind) {
        let batch = Batch {
            ts,
            events: vec![Event {
                kind,
                wire: EventWire::Map,
            }],
            data_parallel_rank: Some(0),
            wire: BatchWire::Array(3),
        };
        let topic = format!("kv@{}@tiny", self.name);
        write_frame(
            &mut self.frames,
            topic.as_bytes(),
            self.seq,
            &encode_batch(&batch),
        );
        self.seq += 1;
    }

    /// Serves a request as vLLM does: one store for the prompt's whole blocks it did not hold
    /// (parent: the last it held), then one per block the reply fills. `kept` is the prompt
    /// and the reply less its last token.
    fn serve(&mut self, ts: f64, prompt_len: usize, kept: &[u32]) {
        let hashes = chain_hashes(kept);
        let cached = hashes.iter().take_while(|h| self.alive.contains(h)).count();
        let prefill_end = (prompt_len / B).max(cached);
        let mut spans = vec![(cached, prefill_end)];
        spans.extend((prefill_end..hashes.len()).map(|i| (i, i + 1)));
        for (k, (from, to)) in spans.into_iter().filter(|(a, b)| b > a).enumerate() {
            let store = BlockStored {
                block_hashes: hashes[from..to].iter().map(|&h| wire(h)).collect(),
                parent_block_hash: from.checked_sub(1).map(|p| wire(hashes[p])),
                token_ids: kept[from * B..to * B].to_vec(),
                block_size: B as i64,
                medium: Some("GPU".into()),
                ..BlockStored::default()
            };
            self.alive.extend(&hashes[from..to]);
            self.publish(ts + 0.01 * k as f64, EventKind::Stored(Box::new(store)));
        }
    }

    /// Evicts the blocks of `ids` from the first that `keep` does not share.
    fn evict_after_shared(&mut self, ts: f64, ids: &[u32], keep: &[u32]) {
        let keep: HashSet<u64> = chain_hashes(keep).into_iter().collect();
        let gone: Vec<u64> = chain_hashes(ids)
            .into_iter()
            .filter(|h| !keep.contains(h) && self.alive.remove(h))
            .collect();
        let removed = BlockRemoved {
            block_hashes: gone.iter().map(|&h| wire(h)).collect(),
            medium: Some("GPU".into()),
            ..BlockRemoved::default()
        };
        self.publish(ts, EventKind::Removed(Box::new(removed)));
    }

    /// Tokens of `ids` held: whole blocks from the start.
    fn held(&self, ids: &[u32]) -> usize {
        chain_hashes(ids)
            .iter()
            .take_while(|h| self.alive.contains(h))
            .count()
            * B
    }
}

/// Prompt ids and what the pod keeps after each reply, as `kvaudit render` gives them.
struct Rendered {
    prompts: Vec<Vec<u32>>,
    kept: Vec<Vec<u32>>,
}

fn rendered(model: &Path, conv: &Path) -> Rendered {
    let run = |extra: &[&str]| -> Json {
        let out = common::kvaudit()
            .args([
                "render", "--server", "vllm", "--now", NOW, "--format", "json", "--tokens",
            ])
            .arg("-m")
            .arg(model)
            .arg("-c")
            .arg(conv)
            .args(extra)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let prompts: Vec<Vec<u32>> = run(&[])["conversations"][0]["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| ids(&p["ids"]))
        .collect();
    let kept = (1..prompts.len())
        .map(|k| ids(&run(&["--held", &k.to_string()])["conversations"][0]["held"][0]["ids"]))
        .collect();
    Rendered { prompts, kept }
}

/// What the causes must be, token by token: the first rule that claims a token wins.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Want {
    reused: u64,
    misrouted: u64,
    evicted: u64,
    block_tail: u64,
    rewritten: u64,
    new: u64,
}

fn want(prompt: &[u32], serving: usize, others: usize, previous: Option<&[u32]>) -> Want {
    let n = prompt.len();
    // The engine computes the last token whatever it holds.
    let reusable = (n - 1) / B * B;
    let (left, shared) = match previous {
        Some(p) => (
            p.len(),
            p.iter().zip(prompt).take_while(|(a, b)| a == b).count(),
        ),
        None => (0, 0),
    };
    let mut w = Want::default();
    for i in 0..n {
        let in_whole = |end: usize| i < end / B * B && i < reusable;
        if in_whole(serving) {
            w.reused += 1;
        } else if in_whole(others) {
            w.misrouted += 1;
        } else if in_whole(shared) {
            w.evicted += 1;
        } else if i < shared.max(serving).max(others) {
            w.block_tail += 1;
        } else if i < left {
            w.rewritten += 1;
        } else {
            w.new += 1;
        }
    }
    w
}

fn causes(v: &Json) -> Want {
    let n = |k: &str| v[k].as_u64().unwrap();
    Want {
        reused: n("reused"),
        misrouted: n("misrouted"),
        evicted: n("evicted"),
        block_tail: n("block_tail"),
        rewritten: n("rewritten"),
        new: n("new"),
    }
}

fn add(a: Want, b: Want) -> Want {
    Want {
        reused: a.reused + b.reused,
        misrouted: a.misrouted + b.misrouted,
        evicted: a.evicted + b.evicted,
        block_tail: a.block_tail + b.block_tail,
        rewritten: a.rewritten + b.rewritten,
        new: a.new + b.new,
    }
}

#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn request_log_mode_attributes_every_token_of_a_scripted_two_pod_day() {
    let test = "request_log_mode_attributes_every_token_of_a_scripted_two_pod_day";
    let Some(shared) = common::shared_dir(test) else {
        return;
    };
    let model = shared.join("models/llama-3.1-8b-instruct");
    let dir = tempfile::tempdir().unwrap();
    let talk = |name: &str, first: &str, reply: &str, second: &str| -> (Json, Rendered) {
        let conv = json!({"messages": [
            {"role": "user", "content": first},
            {"role": "assistant", "content": reply},
            {"role": "user", "content": second},
        ]});
        let path = dir.path().join(format!("{name}.json"));
        std::fs::write(&path, conv.to_string()).unwrap();
        (conv, rendered(&model, &path))
    };
    let a = talk(
        "a",
        "Name three rivers of Europe and the seas they flow into, one line each.",
        "The Danube flows into the Black Sea.\nThe Rhine flows into the North Sea.\nThe Rhone flows into the Mediterranean Sea.",
        "Which of them is the longest?",
    );
    let b = talk(
        "b",
        "Write a haiku about the first snow of winter falling on a quiet village.",
        "Soft flakes drift and fall\nroofs and lanes turn white and still\nthe village breathes slow",
        "Now one about spring rain.",
    );
    let c = talk(
        "c",
        "Explain in two sentences why the sky looks blue during the day.",
        "Sunlight scatters off the molecules of the air, and shorter blue wavelengths scatter far more than red ones. So light reaching us from every part of the sky is mostly blue.",
        "And why is it red at sunset?",
    );
    let (d, d_rendered) = {
        let conv = json!({"messages": [{"role": "user", "content": "Count from one to ten in French, separated by commas, please."}]});
        let path = dir.path().join("d.json");
        std::fs::write(&path, conv.to_string()).unwrap();
        let r = rendered(&model, &path);
        (conv, r)
    };
    let first = |conv: &Json| json!({"model": "tiny", "messages": [conv["messages"][0]]});
    let whole = |conv: &Json| json!({"model": "tiny", "messages": conv["messages"]});

    let mut pods = [ScriptedPod::new("d0"), ScriptedPod::new("d1")];
    let mut lines: Vec<String> = Vec::new();
    let mut expected: Vec<(&str, Want)> = Vec::new();
    let ts = std::cell::Cell::new(100.0);
    // One request: its line, what it must be attributed, then its pod serving it.
    let mut request = |pods: &mut [ScriptedPod; 2],
                       pod: usize,
                       named: bool,
                       body: Json,
                       prompt: &[u32],
                       previous: Option<&[u32]>,
                       kept: &[u32],
                       cached_off: usize| {
        let serving = pods[pod].held(prompt);
        let others = pods[1 - pod].held(prompt);
        let w = want(prompt, serving, others, previous);
        let mut line = json!({"ts": ts.get(), "request": body,
            "usage": {"prompt_tokens": prompt.len(),
                      "prompt_tokens_details": {"cached_tokens": w.reused as usize + cached_off}}});
        if named {
            line["pod"] = json!(pods[pod].name);
        }
        lines.push(line.to_string());
        expected.push((pods[pod].name, w));
        pods[pod].serve(ts.get() + 0.5, prompt.len(), kept);
        ts.set(ts.get() + 1.0);
    };
    let (av, ar) = &a;
    let (bv, br) = &b;
    let (cv, cr) = &c;
    request(
        &mut pods,
        0,
        true,
        first(av),
        &ar.prompts[0],
        None,
        &ar.kept[0],
        0,
    );
    request(
        &mut pods,
        1,
        true,
        first(bv),
        &br.prompts[0],
        None,
        &br.kept[0],
        0,
    );
    request(
        &mut pods,
        0,
        true,
        first(cv),
        &cr.prompts[0],
        None,
        &cr.kept[0],
        0,
    );
    // A's second turn on the pod that served its first: reused, a block tail, new.
    let a2 = ar.prompts[1].clone();
    request(
        &mut pods,
        0,
        true,
        whole(av),
        &a2,
        Some(&ar.kept[0]),
        &a2,
        16,
    );
    // C's first turn evicted from d0 (all but what other conversations share), then C's
    // second turn there: evicted.
    pods[0].evict_after_shared(ts.get(), &cr.kept[0], &ar.kept[0]);
    ts.set(ts.get() + 1.0);
    let c2 = cr.prompts[1].clone();
    request(
        &mut pods,
        0,
        true,
        whole(cv),
        &c2,
        Some(&cr.kept[0]),
        &c2,
        0,
    );
    // B's second turn sent to d0 while d1 holds its first: misrouted.
    let b2 = br.prompts[1].clone();
    request(
        &mut pods,
        0,
        true,
        whole(bv),
        &b2,
        Some(&br.kept[0]),
        &b2,
        0,
    );
    // D names no pod: d1's stores of its prompt say d1 served it.
    let d1 = d_rendered.prompts[0].clone();
    let mut d_kept = d1.clone();
    d_kept.extend(1000..1040u32);
    request(&mut pods, 1, false, whole(&d), &d1, None, &d_kept, 0);
    lines.insert(3, "{not json".into());

    let requests = dir.path().join("requests.jsonl");
    std::fs::write(&requests, lines.join("\n") + "\n").unwrap();
    for p in &pods {
        std::fs::write(dir.path().join(format!("{}.frames", p.name)), &p.frames).unwrap();
    }
    let record = dir.path().join("record.jsonl");
    let watch = |format: &str, record: bool, routers: &[&str]| {
        let mut cmd = common::kvaudit();
        cmd.current_dir(dir.path())
            .args([
                "watch",
                "--server",
                "vllm",
                "--now",
                NOW,
                "--block-size",
                "16",
            ])
            .args(["--format", format, "--requests", "requests.jsonl"])
            .args(["--pod", "d0=d0.frames", "--pod", "d1=d1.frames"])
            .args(["-m", "llama-3.1"]);
        if record {
            cmd.args(["--record", "record.jsonl", "--partial", "watch.partial"]);
        }
        for r in routers {
            cmd.args(["--router", r]);
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    // The model by a short name of its own, as the metrics' label and the summary show it.
    std::os::unix::fs::symlink(&model, dir.path().join("llama-3.1")).unwrap();
    let routers = ["vllm-router", "vllm-router:threshold=0.9"];
    let report: Json = serde_json::from_str(&watch("json", true, &routers)).unwrap();
    let totals = &report["totals"];

    let mut all = Want::default();
    let mut by_pod: HashMap<&str, (Want, u64)> = HashMap::new();
    for (pod, w) in &expected {
        all = add(all, *w);
        let e = by_pod.entry(pod).or_default();
        e.0 = add(e.0, *w);
        e.1 += 1;
    }
    // Every cause occurs, so each rule is exercised.
    assert!(
        all.reused > 0 && all.misrouted > 0 && all.evicted > 0 && all.block_tail > 0 && all.new > 0,
        "{all:?}"
    );
    assert_eq!(causes(&totals["causes"]), all, "{report:#}");
    for (pod, (w, n)) in &by_pod {
        assert_eq!(causes(&totals["pods"][pod]["causes"]), *w, "{pod}");
        assert_eq!(totals["pods"][pod]["requests"], json!(n), "{pod}");
    }
    let prompt_tokens: u64 = expected
        .iter()
        .map(|(_, w)| add(*w, Want::default()))
        .map(|w| w.reused + w.misrouted + w.evicted + w.block_tail + w.rewritten + w.new)
        .sum();
    assert_eq!(totals["prompt_tokens"], json!(prompt_tokens));
    assert_eq!(totals["requests"], json!(7));
    // The one request whose cached_tokens was off by a block.
    assert_eq!(totals["causes"]["disagreement"], json!(16));
    assert_eq!(totals["prompt_mismatches"], json!(0));
    assert_eq!(totals["unattributed"], json!({}));
    assert_eq!(report["input"]["links"], json!({"first": 4, "linked": 3}));
    assert_eq!(report["input"]["bad_lines"], json!({"json": 1}));
    assert_eq!(report["input"]["first_bad"][0], json!(4));

    // Each router's answer for the three turns that continue a conversation (A, C, B: the
    // requests at 3, 4 and 5, whose first requests were at 0, 2 and 1): vllm-router's
    // cache_aware keys prompt k alone and sends the turn back when the match rate is over its
    // threshold; a turn went back when its pod served the conversation's request before.
    let linked = [
        (3, 0, &ar.prompts[0], &ar.kept[0], &a2),
        (4, 2, &cr.prompts[0], &cr.kept[0], &c2),
        (5, 1, &br.prompts[0], &br.kept[0], &b2),
    ];
    let mut observed_back = Vec::new();
    for (threshold, label) in [(0.3, routers[0]), (0.9, routers[1])] {
        let mut want = json!({"router": label, "version": "vllm-router 0.1.17", "turns": 3,
            "credited_tokens": 0, "rule_back": 0, "observed": 0, "as_rule": 0, "misrouted": {}});
        for (at, before, prompt_k, kept_k, next) in linked {
            let shared = kept_k
                .iter()
                .zip(next.iter())
                .take_while(|(a, b)| a == b)
                .count();
            let matched = shared.min(prompt_k.len());
            let back = matched as f64 / next.len() as f64 > threshold;
            let went = Some(expected[at].0 == expected[before].0);
            let misrouted = expected[at].1.misrouted;
            let add = |v: &mut Json, n: u64| *v = json!(v.as_u64().unwrap() + n);
            add(&mut want["credited_tokens"], matched as u64);
            add(&mut want["rule_back"], u64::from(back));
            if let Some(went_back) = went {
                add(&mut want["observed"], 1);
                add(&mut want["as_rule"], u64::from(went_back == back));
            }
            if misrouted > 0 {
                let why = match (went, back) {
                    (Some(true), _) => "back to the previous turn's pod; another pod held more",
                    (_, true) => "sent elsewhere against its rule",
                    (_, false) => "match rate at or under the threshold: the reply is not keyed",
                };
                let before = want["misrouted"][why].as_u64().unwrap_or(0);
                want["misrouted"][why] = json!(before + misrouted);
            }
            observed_back.push((back, went));
        }
        let got = totals["routers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["router"] == label)
            .unwrap();
        assert_eq!(got, &want, "{label}");
    }
    // The script covers both readings: a rule that sends a turn back and one that does not,
    // a turn that went back and one that went elsewhere.
    for (back, went) in [
        (true, Some(false)),
        (false, Some(false)),
        (true, Some(true)),
    ] {
        assert!(observed_back.contains(&(back, went)), "{observed_back:?}");
    }

    // The record holds each conversation once, at its last request, as corpus reads it.
    let rows: Vec<Json> = std::fs::read_to_string(&record)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 4);
    for conv in [av, bv, cv, &d] {
        assert!(
            rows.contains(&json!({"messages": conv["messages"]})),
            "{conv}"
        );
    }
    let corpus = common::kvaudit()
        .args([
            "corpus",
            "--server",
            "vllm",
            "--now",
            NOW,
            "--format",
            "json",
            "--block-sizes",
            "16",
        ])
        .arg("-m")
        .arg(&model)
        .arg(&record)
        .output()
        .unwrap();
    let corpus: Json = serde_json::from_slice(&corpus.stdout).unwrap();
    // D has one request, so no turn to audit; A, B and C one transition each, none
    // rewritten (Llama 3.1's template extends its history).
    assert_eq!(
        (&corpus["conversations"], &corpus["transitions"]),
        (&json!(3), &json!(3)),
        "{corpus:#}"
    );
    assert_eq!(corpus["transitions_with_rewrite"], json!(0), "{corpus:#}");
    // Its partial is the one `kvaudit corpus --partial` writes over the record with the same
    // flags, byte for byte, and `kvaudit merge` reads it, HTML report too.
    let mut corpus = common::kvaudit();
    corpus
        .current_dir(dir.path())
        .args(["corpus", "record.jsonl", "--server", "vllm", "--now", NOW])
        .args(["--block-sizes", "16", "--engine-block-size", "16"])
        .args(["--partial", "corpus.partial", "-m", "llama-3.1"]);
    for r in routers {
        corpus.args(["--router", r]);
    }
    let done = corpus.output().unwrap();
    assert_eq!(done.status.code(), Some(0), "{done:?}");
    let read = |name: &str| std::fs::read(dir.path().join(name)).unwrap();
    assert!(
        read("watch.partial") == read("corpus.partial"),
        "watch's partial differs from corpus'"
    );
    let merged = common::kvaudit()
        .current_dir(dir.path())
        .args([
            "merge",
            "watch.partial",
            "--format",
            "json",
            "--html",
            "merged.html",
        ])
        .output()
        .unwrap();
    assert_eq!(merged.status.code(), Some(0), "{merged:?}");
    let merged: Json = serde_json::from_slice(&merged.stdout).unwrap();
    assert_eq!(
        (&merged["conversations"], &merged["transitions"]),
        (&json!(3), &json!(3)),
        "{merged:#}"
    );
    assert!(read("merged.html").starts_with(b"<!DOCTYPE html>"));

    // The Prometheus text, read by the Prometheus client's own parser, says the same.
    let text = watch("prometheus", false, &routers);
    let parsed = prometheus_samples(&text);
    let mut by_cause: HashMap<String, u64> = HashMap::new();
    for (name, labels, value) in &parsed {
        if name == "kvaudit_watch_prompt_tokens_total" {
            assert_eq!(labels["model"], "llama-3.1");
            *by_cause.entry(labels["cause"].clone()).or_default() += *value as u64;
        }
    }
    for cause in common::live::CAUSES {
        assert_eq!(json!(by_cause[cause]), totals["causes"][cause], "{cause}");
    }
    for r in totals["routers"].as_array().unwrap() {
        let label = r["router"].as_str().unwrap();
        let mut by_reason: HashMap<String, u64> = HashMap::new();
        let mut turns = 0;
        for (name, labels, value) in &parsed {
            if labels.get("router").map(String::as_str) != Some(label) {
                continue;
            }
            match name.as_str() {
                "kvaudit_watch_router_misrouted_tokens_total" => {
                    by_reason.insert(labels["reason"].clone(), *value as u64);
                }
                "kvaudit_watch_router_turns_total" => turns = *value as u64,
                _ => {}
            }
        }
        let want: HashMap<String, u64> = serde_json::from_value(r["misrouted"].clone()).unwrap();
        assert_eq!(
            (by_reason, json!(turns)),
            (want, r["turns"].clone()),
            "{label}"
        );
    }
    insta::assert_snapshot!("watch_log_human", watch("human", false, &routers));
}

/// Every sample of a Prometheus text exposition as prometheus_client parses it: name, labels,
/// value.
fn prometheus_samples(text: &str) -> Vec<(String, HashMap<String, String>, f64)> {
    use std::io::Write as _;
    let script = "import json, sys\n\
        from prometheus_client.parser import text_string_to_metric_families as parse\n\
        print(json.dumps([[s.name, s.labels, s.value] for f in parse(sys.stdin.read()) for s in f.samples]))";
    let mut child = std::process::Command::new("python3")
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "prometheus_client could not parse it ({}):\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// watch stopped right after a response whose pod's events had not come yet (an engine
/// publishes on a socket of its own, which may deliver after the response): it reads events
/// on after the stop, within --drain, until that request has its pod. The publisher sends the
/// store only once watch has been told to stop.
#[test]
fn a_request_answered_before_its_events_still_gets_its_pod_after_the_stop() {
    use std::io::Write;
    let test = "a_request_answered_before_its_events_still_gets_its_pod_after_the_stop";
    if !common::live::pyzmq(test) {
        return;
    }
    let model = common::repo_root().join("fixtures/models/tiny-think");
    let dir = tempfile::tempdir().unwrap();
    let messages = json!([{"role": "user", "content":
        "Describe how tides follow the moon, and why most coasts see two high tides a day."}]);
    let conv = dir.path().join("conv.json");
    std::fs::write(&conv, json!({"messages": messages}).to_string()).unwrap();
    let prompt = rendered(&model, &conv).prompts.remove(0);
    assert!(prompt.len() >= 2 * B, "{} tokens", prompt.len());
    let mut pod = ScriptedPod::new("d1");
    pod.serve(1.0, prompt.len(), &prompt);
    let frames = dir.path().join("d1.frames");
    std::fs::write(&frames, &pod.frames).unwrap();
    let (mut publisher, ports) = common::live::zmq_publisher(&frames, &["--wait-line"]);
    let per_request = dir.path().join("per-request.jsonl");
    let mut watch = common::kvaudit_process()
        .args(["watch", "--server", "vllm", "--block-size", &B.to_string()])
        .arg("-m")
        .arg(&model)
        .args(["--pod", &format!("d1=tcp://127.0.0.1:{}", ports[0])])
        .args([
            "--mirror",
            "127.0.0.1:0",
            "--format",
            "json",
            "--drain",
            "10s",
        ])
        .arg("--per-request")
        .arg(&per_request)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = watch.stderr.take().unwrap();
    let mirror = common::live::watch_listening(&mut stderr, "mirror");
    let body = json!({"model": "tiny", "messages": messages});
    let (status, _) = common::live::http(
        &format!("http://{mirror}"),
        "POST",
        "/v1/chat/completions",
        Some(&body),
    );
    assert_eq!(status, 200);
    let stopped = std::time::Instant::now();
    common::live::sigterm(&watch);
    std::thread::sleep(std::time::Duration::from_millis(300));
    writeln!(publisher.stdin.take().unwrap(), "go").unwrap();
    let (report, _) = common::live::watch_report(&mut watch, &mut stderr);
    let took = stopped.elapsed();
    let _ = publisher.kill();
    let _ = publisher.wait();
    let totals = &report["totals"];
    assert_eq!(totals["unattributed"], json!({}), "{report:#}");
    assert_eq!(totals["pods"]["d1"]["requests"], json!(1), "{report:#}");
    let line: Json =
        serde_json::from_str(std::fs::read_to_string(&per_request).unwrap().trim()).unwrap();
    assert_eq!(
        (&line["pod"], &line["prompt_tokens"]),
        (&json!("d1"), &json!(prompt.len())),
        "{line}"
    );
    // It stopped once the request had its pod, not at the end of --drain.
    assert!(took < std::time::Duration::from_secs(5), "{took:?}");
}
