use serde_json::json;

use super::*;
use crate::routers::llm_d::IndexConfig;
use crate::routers::llm_d::decider::DeciderConfig;
use crate::routers::llm_d::view::RouterSettings;

fn llm_d() -> RouterSettings {
    RouterSettings {
        engine_block_size: 16,
        index: IndexConfig::new(64),
        decider: DeciderConfig::default(),
    }
}

fn answer(spec: &Spec, t: &TransitionView) -> Answer {
    spec.router().answer(t)
}

fn spec(s: &str) -> Spec {
    Spec::parse(s, &llm_d()).unwrap()
}

fn turn<'a>(prompt: usize, held: &'a [u32], next: &'a [u32]) -> TransitionView<'a> {
    TransitionView {
        prompt_tokens: prompt,
        held,
        next,
        request: &[],
        next_request: &[],
        engine_block_size: 16,
        model: "m",
        index_view: None,
    }
}

/// Prompt k+1 = the holdings (prompt k of `prompt` tokens and a reply), then `more` new tokens.
fn extending(prompt: usize, reply: usize, more: usize) -> (Vec<u32>, Vec<u32>) {
    let held: Vec<u32> = (1..=(prompt + reply) as u32).collect();
    let mut next = held.clone();
    next.extend((0..more as u32).map(|i| 100_000 + i));
    (held, next)
}

#[test]
fn vllm_router_credits_prompt_k_only_and_compares_over_the_threshold() {
    // routers.md §2.1's run: turn 1 of 17 tokens; a 300-word reply makes turn 2 324 tokens
    // (17/324 = 0.0525: least loaded), a 20-word one 44 (17/44 = 0.386: back).
    let (held, next) = extending(17, 300, 7);
    let a = answer(&spec("vllm-router"), &turn(17, &held, &next));
    assert_eq!((a.visible_tokens, a.decision), (17, Decision::Other));
    assert!(
        a.rule.starts_with("match rate 17/324 = 0.0525 <= 0.3"),
        "{}",
        a.rule
    );
    let (held, next) = extending(17, 20, 7);
    let a = answer(&spec("vllm-router"), &turn(17, &held, &next));
    assert_eq!((a.visible_tokens, a.decision), (17, Decision::Decode));
    let a = answer(&spec("vllm-router:pd=true"), &turn(17, &held, &next));
    assert_eq!(a.decision, Decision::Other);
    // Exactly at the threshold is not over it.
    let (held, next) = extending(3, 0, 7);
    let a = answer(&spec("vllm-router"), &turn(3, &held, &next));
    assert_eq!(a.decision, Decision::Other, "{}", a.rule);
}

#[test]
fn dynamo_sees_the_reply_at_the_engines_block_size_and_nothing_at_any_other() {
    // s1: prompt 64, reply 64 held as 127 tokens; prompt k+1 repeats them.
    let (held, next) = extending(64, 63, 20);
    let t = turn(64, &held, &next);
    assert_eq!(answer(&spec("dynamo"), &t).visible_tokens, 112);
    assert_eq!(
        answer(&spec("dynamo:block_size=16"), &t).visible_tokens,
        112
    );
    for b in [8, 32, 64] {
        let a = answer(&spec(&format!("dynamo:block_size={b}")), &t);
        assert_eq!((a.visible_tokens, a.decision), (0, Decision::Other));
    }
    // Stock Dynamo routes decode by load; conditional disaggregation keeps 147 - 112 = 35
    // net new tokens (35 < 2048, 0.238 < 0.7) on the pod.
    assert_eq!(answer(&spec("dynamo"), &t).decision, Decision::Other);
    let a = answer(&spec("dynamo:conditional_disagg=true"), &t);
    assert_eq!(a.decision, Decision::Decode, "{}", a.rule);
    let a = answer(&spec("dynamo:conditional_disagg=true,isl_threshold=35"), &t);
    assert_eq!(a.decision, Decision::Other, "{}", a.rule);
    let a = answer(&spec("dynamo:conditional_disagg=true,ratio=0.2"), &t);
    assert_eq!(a.decision, Decision::Other, "{}", a.rule);
}

#[test]
fn approximate_routers_record_the_prompt_or_the_streamed_reply() {
    let (held, next) = extending(70, 60, 5);
    let t = turn(70, &held, &next);
    assert_eq!(answer(&spec("dynamo-approx"), &t).visible_tokens, 64);
    assert_eq!(
        answer(&spec("dynamo-approx:policy=lru"), &t).visible_tokens,
        128
    );
    // llm-d's approximate producer: blocks of at least 64, prompt k only.
    let a = answer(&spec("llm-d-approx"), &t);
    assert_eq!(a.visible_tokens, 64);
    assert_eq!(a.decision, Decision::Decode, "short prompt: {}", a.rule);
    let (held, next) = extending(700, 60, 600);
    let a = answer(
        &spec("llm-d-approx:prompt_tokens=0,block_size=128"),
        &turn(700, &held, &next),
    );
    assert_eq!(a.visible_tokens, 640);
    assert_eq!(
        a.decision,
        Decision::Other,
        "720 uncached >= 512: {}",
        a.rule
    );
}

#[test]
fn event_fed_routers_follow_their_block_size_rules() {
    let (held, next) = extending(64, 63, 20);
    let t = turn(64, &held, &next);
    let kv = answer(&spec("vllm-router:policy=kv_aware"), &t);
    assert_eq!((kv.visible_tokens, kv.decision), (112, Decision::Decode));
    let kv32 = answer(&spec("vllm-router:policy=kv_aware,block_size=32"), &t);
    assert_eq!(kv32.visible_tokens, 0);
    let pd = answer(&spec("vllm-router:policy=kv_aware,pd=true"), &t);
    assert_eq!((pd.visible_tokens, pd.decision), (112, Decision::Other));
    let smg = answer(&spec("sglang:mode=events"), &t);
    assert_eq!((smg.visible_tokens, smg.decision), (112, Decision::Decode));
}

#[test]
fn smg_matches_request_text_in_characters() {
    let t1 = vec![json!({"role": "user", "content": "What is the capital of France?"})];
    let mut t2 = t1.clone();
    t2.push(json!({"role": "assistant", "content": "Paris. ".repeat(100)}));
    t2.push(json!({"role": "user", "content": "And of Spain?"}));
    let (held, next) = extending(10, 200, 10);
    let mut t = turn(10, &held, &next);
    t.request = &t1;
    t.next_request = &t2;
    let a = answer(&spec("sglang"), &t);
    let units = a.units.unwrap();
    assert_eq!((units.unit, units.matched), ("characters", 30));
    assert_eq!(units.input, 30 + 1 + 700 + 1 + 13);
    assert_eq!(a.decision, Decision::Other);
    assert_eq!(a.visible_tokens, 30 * 220 / 745);
    // A short reply: 30 of 51 characters is over 0.3.
    let mut short = t2.clone();
    short[1] = json!({"role": "assistant", "content": "Paris."});
    t.next_request = &short;
    let a = answer(&spec("sglang"), &t);
    assert_eq!(a.decision, Decision::Decode, "{}", a.rule);
}

#[test]
fn gaie_matches_whole_byte_blocks_of_request_k() {
    let t1 = vec![json!({"role": "user", "content": "y".repeat(500)})];
    let mut t2 = t1.clone();
    t2.push(json!({"role": "assistant", "content": "ok"}));
    t2.push(json!({"role": "user", "content": "next"}));
    let (held, next) = extending(130, 5, 10);
    let mut t = turn(130, &held, &next);
    t.request = &t1;
    t.next_request = &t2;
    let a = answer(&spec("gaie"), &t);
    let len1 = gaie::request_bytes(&t1).len();
    assert_eq!(a.visible_tokens, (len1 - 1) / 64 * 16);
    assert_eq!(a.units.unwrap().matched, (len1 - 1) / 64 * 64);
    assert_eq!(a.decision, Decision::Decode);
    let a = answer(&spec("gaie:block_size=200"), &t);
    assert_eq!((a.visible_tokens, a.decision), (0, Decision::Other));
}
