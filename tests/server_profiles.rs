//! Differential test of the server profiles: every prompt of sampled ../shared/corpus
//! conversations rendered by kvaudit's `--server` profiles and by an independent Python
//! implementation of the same rules (tests/conformance/servers.py, written from
//! server-preprocessing.md, then transformers' apply_chat_template), compared text for text and
//! token for token, failures reason for reason.
//!
//! CI samples a few conversations per corpus file; KVAUDIT_SERVER_CORPUS=all runs every one.

use crate::common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use kvaudit::model::ModelFiles;
use kvaudit::render::{ChatRenderer, DEFAULT_FUEL, RequestError, ServerProfile};
use kvaudit::tokenize::Tokenizer;
use serde_json::Value as Json;
use sha2::{Digest, Sha256};

const MODELS: [&str; 5] = [
    "qwen3-8b",
    "llama-3.1-8b-instruct",
    "gpt-oss-120b",
    "deepseek-r1",
    "mistral-nemo-instruct-2407",
];

/// Conversations per corpus file in CI (spread evenly over the file).
const PER_FILE: usize = 4;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The reference output, computed once per input: the harness, the models, the sample size and
/// the corpus checksums key the cache under target/conformance/.
fn reference(shared: &std::path::Path, per_file: Option<usize>) -> Option<Json> {
    let root = common::repo_root();
    let script = root.join("tests/conformance/servers.py");
    let mut key = Sha256::new();
    key.update(std::fs::read(&script).unwrap());
    key.update(std::fs::read(shared.join("corpus/SHA256SUMS")).unwrap_or_default());
    key.update(MODELS.join(",").as_bytes());
    key.update(format!("{per_file:?}").as_bytes());
    let digest = hex(&key.finalize()[..8]);
    let dir = root.join("target/conformance");
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(format!("servers-reference-{digest}.json"));
    if !out.is_file() {
        let partial = out.with_extension("partial");
        let mut cmd = Command::new("python3");
        cmd.arg(&script)
            .arg("--shared")
            .arg(shared)
            .arg("--out")
            .arg(&partial)
            .arg("--models")
            .arg(MODELS.join(","));
        if let Some(n) = per_file {
            cmd.arg("--per-file").arg(n.to_string());
        }
        match cmd.status() {
            Ok(s) if s.success() => std::fs::rename(&partial, &out).unwrap(),
            other => {
                if std::env::var("KVAUDIT_REQUIRE_REFERENCE").is_ok_and(|v| v == "1") {
                    panic!("the server-profile reference harness failed: {other:?}");
                }
                eprintln!(
                    "SKIPPED server profiles: the reference harness did not run ({other:?}); \
                     pip install -r tests/requirements.txt"
                );
                return None;
            }
        }
    }
    Some(serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap())
}

fn profile(name: &str) -> ServerProfile {
    match name {
        "transformers" => ServerProfile::Transformers,
        "vllm" => ServerProfile::Vllm,
        // servers.py follows SGLang's main branch; the 0.5.23 release is checked against the
        // running server (tests/sglang_live.rs).
        "sglang" => ServerProfile::parse("sglang@main").unwrap(),
        other => panic!("unknown profile {other}"),
    }
}

/// What kvaudit makes of one conversation: each prompt's text and token ids, or the reason
/// the first failing prompt failed.
struct Ours {
    prompts: Vec<(usize, String, Vec<u32>)>,
    fail: Option<(String, String)>,
}

fn render_ours(
    renderer: &ChatRenderer,
    tok: &Tokenizer,
    profile: ServerProfile,
    record: &Json,
) -> Ours {
    let mut ours = Ours {
        prompts: Vec::new(),
        fail: None,
    };
    for (end, rendered) in common::corpus_prompts(renderer, profile, record) {
        match rendered {
            Ok(text) => {
                let ids = tok.encode(&text).unwrap();
                ours.prompts.push((end, text, ids));
            }
            Err(RequestError::Server(e)) => {
                ours.fail = Some((e.reason(), e.to_string()));
                break;
            }
            Err(RequestError::Render(e)) => {
                ours.fail = Some(("template_error".into(), e.to_string()));
                break;
            }
        }
    }
    ours
}

#[derive(Default)]
struct Tally {
    conversations: usize,
    rendered: usize,
    matched: usize,
    failed: BTreeMap<String, usize>,
    disagreements: Vec<String>,
}

#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn server_profiles_render_like_the_reference() {
    let Some(shared) = common::shared_dir("server_profiles_render_like_the_reference") else {
        return;
    };
    let all = std::env::var("KVAUDIT_SERVER_CORPUS").is_ok_and(|v| v == "all");
    let per_file = (!all).then_some(PER_FILE);
    let Some(reference) = reference(&shared, per_file) else {
        return;
    };
    let mut models: BTreeMap<String, (ChatRenderer, Tokenizer)> = BTreeMap::new();
    let mut corpus: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut tallies: BTreeMap<(String, String), Tally> = BTreeMap::new();
    for case in reference["cases"].as_array().unwrap() {
        let model = case["model"].as_str().unwrap().to_string();
        let file = case["file"].as_str().unwrap().to_string();
        let line = case["line"].as_u64().unwrap() as usize;
        let prof = case["profile"].as_str().unwrap().to_string();
        let (renderer, tok) = models.entry(model.clone()).or_insert_with(|| {
            let dir = shared.join("models").join(&model);
            let files = ModelFiles::from_dir(&dir, &model, None, None).unwrap();
            let template = files.select_template(None, false).unwrap();
            let renderer =
                ChatRenderer::new(&template.text, files.special_tokens.clone(), DEFAULT_FUEL)
                    .unwrap();
            (
                renderer,
                Tokenizer::from_file(&files.tokenizer_path).unwrap(),
            )
        });
        let lines = corpus.entry(file.clone()).or_insert_with(|| {
            std::fs::read_to_string(shared.join("corpus").join(&file))
                .unwrap()
                .lines()
                .map(str::to_string)
                .collect()
        });
        let record: Json = serde_json::from_str(&lines[line]).unwrap();
        let ours = render_ours(renderer, tok, profile(&prof), &record);
        let t = tallies.entry((model.clone(), prof.clone())).or_default();
        t.conversations += 1;
        let label = format!("{file}:{line}");
        let want_prompts = case["prompts"].as_array().unwrap();
        let want_fail = case.get("fail").and_then(Json::as_str);
        let mut agree = want_fail == ours.fail.as_ref().map(|(r, _)| r.as_str())
            && want_prompts.len() == ours.prompts.len();
        if !agree {
            t.disagreements.push(format!(
                "{label}: reference {} prompts then {:?} ({}); kvaudit {} prompts then {:?}",
                want_prompts.len(),
                want_fail,
                case["detail"].as_str().unwrap_or(""),
                ours.prompts.len(),
                ours.fail
            ));
        }
        for (w, (end, text, ids)) in want_prompts.iter().zip(&ours.prompts) {
            let digest = hex(&Sha256::digest(
                ids.iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
                    .as_bytes(),
            ));
            let what = if w["end"].as_u64() != Some(*end as u64) {
                Some("another prompt")
            } else if w["text"].as_str() != Some(text.as_str()) {
                Some("different text")
            } else if w["ids_len"].as_u64() != Some(ids.len() as u64)
                || w["ids_sha256"].as_str() != Some(digest.as_str())
            {
                Some("same text, different token ids")
            } else {
                None
            };
            if let Some(what) = what {
                agree = false;
                t.disagreements
                    .push(format!("{label}: prompt ending at message {end}: {what}"));
                break;
            }
        }
        match &ours.fail {
            None => {
                t.rendered += 1;
                if agree {
                    t.matched += 1;
                }
            }
            Some((reason, _)) => *t.failed.entry(reason.clone()).or_default() += 1,
        }
    }
    let sample = match per_file {
        Some(n) => format!("{n} per corpus file"),
        None => "the whole corpus".into(),
    };
    let mut text = format!(
        "server profiles (every prompt of {sample}; render = all prompts rendered, match = equal to the reference, text and token ids):\n"
    );
    let mut disagreements = 0;
    for ((model, prof), t) in &tallies {
        let failed = t
            .failed
            .iter()
            .map(|(r, n)| format!("{r} {n}"))
            .collect::<Vec<_>>()
            .join(", ");
        text.push_str(&format!(
            "  {model:28} {prof:12} conversations {:4}  render {:4}  match {:4}  fail {:4}{}\n",
            t.conversations,
            t.rendered,
            t.matched,
            t.conversations - t.rendered,
            if failed.is_empty() {
                String::new()
            } else {
                format!(" ({failed})")
            }
        ));
        for d in t.disagreements.iter().take(5) {
            text.push_str(&format!("      {d}\n"));
        }
        disagreements += t.disagreements.len();
    }
    text.push_str(&format!(
        "  disagreements with the reference: {disagreements}\n"
    ));
    std::fs::write(
        common::repo_root().join("target/conformance/servers.txt"),
        &text,
    )
    .unwrap();
    eprintln!("{text}");
    assert_eq!(disagreements, 0, "{text}");
    // The agent traces whose `content: null` makes transformers raise render on vLLM and SGLang
    // for the models whose templates take dict arguments.
    for model in ["qwen3-8b", "llama-3.1-8b-instruct", "gpt-oss-120b"] {
        for prof in ["vllm", "sglang"] {
            let t = &tallies[&(model.to_string(), prof.to_string())];
            assert!(
                !t.failed.contains_key("template_error"),
                "{model} under {prof}: {text}"
            );
        }
    }
}

/// The CLI path: a tool-call turn with `content: null` and JSON-string arguments, which
/// transformers (and so the default profile) cannot render with Qwen3's template.
#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn diff_turns_renders_tool_calls_under_vllm() {
    let Some(shared) = common::shared_dir("diff_turns_renders_tool_calls_under_vllm") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let conv = dir.path().join("agent.json");
    std::fs::write(
        &conv,
        r#"{"messages": [
          {"role": "user", "content": "Weather in Paris?"},
          {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
          {"role": "tool", "tool_call_id": "call_1", "content": "18 C"},
          {"role": "assistant", "content": "It is 18 C in Paris."},
          {"role": "user", "content": "Thanks"}],
          "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
          "now": "2026-01-15T10:00:00"}"#,
    )
    .unwrap();
    let model: PathBuf = shared.join("models/qwen3-8b");
    let run = |server: &str| {
        common::kvaudit()
            .args(["diff-turns", "--format", "json", "--server", server, "-m"])
            .arg(&model)
            .arg("-c")
            .arg(&conv)
            .output()
            .unwrap()
    };
    let raw = run("transformers");
    assert_eq!(
        raw.status.code(),
        Some(2),
        "transformers renders null content?"
    );
    let stderr = String::from_utf8_lossy(&raw.stderr);
    assert!(stderr.contains("rendering prompt 1"), "{stderr}");
    let out = run("vllm");
    assert_ne!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: Json = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["model"]["server"], "vllm");
    let transitions = json["conversations"][0]["transitions"].as_array().unwrap();
    assert_eq!(transitions.len(), 2);
}
