//! Differential tests against Hugging Face transformers: every template in ../shared rendered by
//! transformers (tests/conformance/reference.py) and by kvaudit, compared byte for byte, token
//! for token, and turn alignment for every model x scenario.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use kvaudit::align::{AlignOptions, align_plan};
use kvaudit::model::ModelFiles;
use kvaudit::render::reply::PlanOptions;
use kvaudit::render::{
    ChatRenderer, Clock, Conversation, DEFAULT_FUEL, RenderInput, ResendMode, parse_time,
    plan_turns,
};
use kvaudit::tokenize::Tokenizer;
use serde_json::{Map, Value as Json};

/// Runs the reference harness once per test binary; `None` when transformers is unavailable.
fn reference(test: &str) -> Option<&'static Json> {
    static REF: OnceLock<Option<Json>> = OnceLock::new();
    let shared = common::shared_dir(test)?;
    REF.get_or_init(|| {
        let out = match std::env::var("KVAUDIT_REFERENCE") {
            Ok(p) if Path::new(&p).is_file() => PathBuf::from(p),
            _ => {
                let out = common::repo_root().join("target/conformance/reference.json");
                std::fs::create_dir_all(out.parent().unwrap()).unwrap();
                let status = Command::new("python3")
                    .arg(common::repo_root().join("tests/conformance/reference.py"))
                    .arg("--shared")
                    .arg(&shared)
                    .arg("--out")
                    .arg(&out)
                    .status();
                match status {
                    Ok(s) if s.success() => out,
                    other => {
                        if std::env::var("KVAUDIT_REQUIRE_REFERENCE").is_ok_and(|v| v == "1") {
                            panic!("the transformers reference harness failed: {other:?}");
                        }
                        common::skipped(
                            test,
                            &format!(
                                "the transformers reference harness did not run ({other:?}); \
                                 pip install transformers==4.57.6 jinja2"
                            ),
                        );
                        return None;
                    }
                }
            }
        };
        let text = std::fs::read_to_string(&out).expect("reference output");
        Some(serde_json::from_str(&text).expect("reference JSON"))
    })
    .as_ref()
}

/// The tokenizer loaded from tokenizer.json and from its prepared form (both must match).
fn tokenizers_both_ways(path: &Path) -> [Tokenizer; 2] {
    let cache = common::repo_root().join("target/conformance/tokenizer-cache");
    let first = Tokenizer::load(path, Some(&cache)).unwrap();
    let second = Tokenizer::load(path, Some(&cache)).unwrap();
    let plain = Tokenizer::load(path, None).unwrap();
    assert!(!plain.is_prepared());
    assert!(
        second.is_prepared() || first.is_prepared(),
        "{} was not prepared",
        path.display()
    );
    assert_eq!(plain.sha256(), second.sha256());
    [plain, second]
}

fn report(name: &str, text: &str) {
    let dir = common::repo_root().join("target/conformance");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(name), text).unwrap();
    eprintln!("{text}");
}

fn obj(v: &Json) -> Map<String, Json> {
    v.as_object().cloned().unwrap_or_default()
}

fn messages(case: &Json) -> Vec<Json> {
    case["messages"].as_array().cloned().unwrap_or_default()
}

fn opt(v: &Json) -> Option<&Json> {
    (!v.is_null()).then_some(v)
}

fn render_case(renderer: &ChatRenderer, case: &Json) -> Result<String, String> {
    let msgs = messages(case);
    let kwargs = obj(&case["kwargs"]);
    renderer
        .render(&RenderInput {
            messages: &msgs,
            tools: opt(&case["tools"]),
            documents: opt(&case["documents"]),
            kwargs: &kwargs,
            add_generation_prompt: case["add_generation_prompt"].as_bool().unwrap_or(false),
            now: parse_time(case["now"].as_str().unwrap()).unwrap(),
        })
        .map_err(|e| e.to_string())
}

#[derive(Default)]
struct Tally {
    pass: usize,
    total: usize,
    problems: Vec<String>,
    wrong: Vec<String>,
}

impl Tally {
    /// Compare kvaudit's render with the reference's; `check` looks further at a text match
    /// (token ids) and names what differs. Both refusing counts as agreement.
    fn record(
        &mut self,
        shape: &str,
        case: &Json,
        ours: Result<String, String>,
        check: impl FnOnce(&str) -> Option<String>,
    ) {
        self.total += 1;
        match (case.get("text").and_then(Json::as_str), ours) {
            (Some(want), Ok(got)) if want == got => match check(&got) {
                None => self.pass += 1,
                Some(what) => self.wrong.push(format!("{shape}: {what}")),
            },
            (Some(_), Ok(_)) => self.wrong.push(format!("{shape}: different text")),
            (Some(_), Err(e)) => self.problems.push(format!("{shape}: kvaudit refused: {e}")),
            (None, Err(_)) => self.pass += 1,
            (None, Ok(_)) => self.wrong.push(format!(
                "{shape}: transformers raised ({}) but kvaudit rendered",
                case["error"].as_str().unwrap_or("")
            )),
        }
    }
}

#[test]
fn model_directories_render_like_transformers() {
    let Some(reference) = reference("model_directories_render_like_transformers") else {
        return;
    };
    let shared = common::shared_dir("model").unwrap();
    let mut per_model: BTreeMap<String, Tally> = BTreeMap::new();
    let mut loaded: BTreeMap<String, (ModelFiles, [Tokenizer; 2])> = BTreeMap::new();
    for case in reference["models"].as_array().unwrap() {
        let model = case["model"].as_str().unwrap().to_string();
        let shape = case["shape"].as_str().unwrap();
        let (files, tok) = loaded.entry(model.clone()).or_insert_with(|| {
            let dir = shared.join("models").join(&model);
            let files = ModelFiles::from_dir(&dir, &model, None, None).unwrap();
            let both = tokenizers_both_ways(&files.tokenizer_path);
            (files, both)
        });
        let has_tools = case["tools"].as_array().is_some_and(|a| !a.is_empty());
        let template = files.select_template(None, has_tools).unwrap();
        let renderer =
            ChatRenderer::new(&template.text, files.special_tokens.clone(), DEFAULT_FUEL).unwrap();
        let ours = render_case(&renderer, case);
        let [json_tok, prepared_tok] = &*tok;
        per_model
            .entry(model.clone())
            .or_default()
            .record(shape, case, ours, |got| {
                let want_ids: Vec<u32> = serde_json::from_value(case["ids"].clone()).unwrap();
                if json_tok.encode(got).unwrap() != want_ids {
                    Some("same text, different token ids".into())
                } else if prepared_tok.encode(got).unwrap() != want_ids {
                    Some("prepared tokenizer gives other ids".into())
                } else {
                    None
                }
            });
    }
    let mut text = String::from("model directories (render + token ids vs transformers):\n");
    let mut all_pass = true;
    for (model, t) in &per_model {
        text.push_str(&format!("  {model:32} {}/{}\n", t.pass, t.total));
        for p in t.problems.iter().chain(&t.wrong) {
            text.push_str(&format!("      {p}\n"));
        }
        all_pass &= t.pass == t.total;
    }
    let passing = per_model.values().filter(|t| t.pass == t.total).count();
    text.push_str(&format!(
        "  models fully matching: {passing}/{}\n",
        per_model.len()
    ));
    report("models.txt", &text);
    assert!(
        all_pass,
        "every model directory must match transformers:\n{text}"
    );
}

#[test]
fn template_collection_renders_like_transformers() {
    let Some(reference) = reference("template_collection_renders_like_transformers") else {
        return;
    };
    let shared = common::shared_dir("templates").unwrap();
    let mut per_template: BTreeMap<String, Tally> = BTreeMap::new();
    let mut renderers: BTreeMap<String, Result<ChatRenderer, String>> = BTreeMap::new();
    for case in reference["templates"].as_array().unwrap() {
        let name = case["template"].as_str().unwrap().to_string();
        let shape = case["shape"].as_str().unwrap();
        let renderer = renderers.entry(name.clone()).or_insert_with(|| {
            let text = std::fs::read_to_string(shared.join("templates").join(&name)).unwrap();
            ChatRenderer::new(&text, obj(&case["special_tokens"]), DEFAULT_FUEL)
                .map_err(|e| e.to_string())
        });
        let ours = match renderer {
            Ok(r) => render_case(r, case),
            Err(e) => Err(e.clone()),
        };
        per_template
            .entry(name.clone())
            .or_default()
            .record(shape, case, ours, |_| None);
    }
    let mut text = String::from("template collection (render vs transformers):\n");
    for (name, t) in &per_template {
        text.push_str(&format!("  {name:56} {}/{}\n", t.pass, t.total));
        for p in t.problems.iter().chain(&t.wrong).take(4) {
            text.push_str(&format!("      {p}\n"));
        }
    }
    let passing = per_template.values().filter(|t| t.pass == t.total).count();
    let wrong: usize = per_template.values().map(|t| t.wrong.len()).sum();
    text.push_str(&format!(
        "  templates fully matching: {passing}/{} ({:.1}%); silent mismatches: {wrong}\n",
        per_template.len(),
        100.0 * passing as f64 / per_template.len() as f64
    ));
    report("templates.txt", &text);
    assert_eq!(
        wrong, 0,
        "kvaudit rendered something other than transformers:\n{text}"
    );
    assert!(
        passing * 100 >= per_template.len() * 95,
        "fewer than 95% of templates match:\n{text}"
    );
}

#[test]
fn scenario_alignment_matches_transformers() {
    let Some(reference) = reference("scenario_alignment_matches_transformers") else {
        return;
    };
    let shared = common::shared_dir("scenarios").unwrap();
    let blocks = [1usize, 16, 32, 64, 128];
    let mut loaded: BTreeMap<String, (ModelFiles, Tokenizer)> = BTreeMap::new();
    let (mut pass, mut total) = (0, 0);
    let mut failures = Vec::new();
    let mut seed = Vec::new();
    for case in reference["scenarios"].as_array().unwrap() {
        let model = case["model"].as_str().unwrap().to_string();
        let scenario = case["scenario"].as_str().unwrap();
        let (files, tok) = loaded.entry(model.clone()).or_insert_with(|| {
            let files =
                ModelFiles::from_dir(&shared.join("models").join(&model), &model, None, None)
                    .unwrap();
            let tok = Tokenizer::from_file(&files.tokenizer_path).unwrap();
            (files, tok)
        });
        total += 1;
        let label = format!("{model} / {scenario}");
        let msgs = &case["messages"];
        let resend = match case["resend"].as_str().unwrap() {
            "content" => ResendMode::Content,
            "raw" => ResendMode::Raw,
            _ => ResendMode::ReasoningField,
        };
        let clocks: Vec<_> = case["now_per_prompt"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| parse_time(t.as_str().unwrap()).unwrap())
            .collect();
        let conv = Conversation {
            source: label.clone(),
            messages: msgs.as_array().unwrap().clone(),
            tools: opt(&case["tools"]).cloned(),
            documents: None,
            template_kwargs: obj(&case["kwargs"]),
            clock: Some(Clock::PerPrompt(clocks.clone())),
            resend,
        };
        let has_tools = conv.tools.is_some();
        let template = files.select_template(None, has_tools).unwrap();
        let renderer =
            ChatRenderer::new(&template.text, files.special_tokens.clone(), DEFAULT_FUEL).unwrap();
        let planned = plan_turns(
            &conv,
            &renderer,
            &Clock::PerPrompt(clocks),
            &PlanOptions::default(),
        );
        let plan = match (planned, case.get("error")) {
            // transformers raised on this conversation: kvaudit must refuse it as well.
            (Err(_), Some(_)) => {
                pass += 1;
                continue;
            }
            (Ok(_), Some(err)) => {
                failures.push(format!(
                    "{label}: transformers raised ({err}) but kvaudit planned the turns"
                ));
                continue;
            }
            (Err(e), None) => {
                failures.push(format!("{label}: kvaudit failed: {e}"));
                continue;
            }
            (Ok(p), None) => p,
        };
        let opts = AlignOptions {
            block_sizes: blocks.to_vec(),
            ..AlignOptions::default()
        };
        let got = align_plan(&plan, tok, &opts).unwrap();
        let want = case["transitions"].as_array().unwrap();
        let mut ok = got.len() == want.len();
        for (g, w) in got.iter().zip(want) {
            let uncached: BTreeMap<String, usize> = g
                .uncached
                .iter()
                .map(|u| (u.block_size.to_string(), u.tokens))
                .collect();
            let want_uncached: BTreeMap<String, usize> =
                serde_json::from_value(w["uncached"].clone()).unwrap();
            let fields = [
                (
                    "held",
                    g.held_tokens,
                    w["held_tokens"].as_u64().unwrap() as usize,
                ),
                (
                    "next",
                    g.next_prompt_tokens,
                    w["next_prompt_tokens"].as_u64().unwrap() as usize,
                ),
                (
                    "lcp",
                    g.common_prefix_tokens,
                    w["common_prefix_tokens"].as_u64().unwrap() as usize,
                ),
            ];
            for (name, a, b) in fields {
                if a != b {
                    ok = false;
                    failures.push(format!("{label}: {name} kvaudit {a} vs transformers {b}"));
                }
            }
            let pos = g.rewrite.as_ref().map(|r| r.position as u64);
            if pos != w["rewrite_position"].as_u64() {
                ok = false;
                failures.push(format!(
                    "{label}: rewrite position {pos:?} vs {}",
                    w["rewrite_position"]
                ));
            }
            if uncached != want_uncached {
                ok = false;
                failures.push(format!(
                    "{label}: uncached {uncached:?} vs {want_uncached:?}"
                ));
            }
        }
        if ok {
            pass += 1;
        }
        if scenario.starts_with("writeup_")
            && matches!(
                model.as_str(),
                "llama-3.1-8b-instruct" | "qwen2.5-7b-instruct" | "qwen3-8b"
            )
            && let Some(g) = got.first()
        {
            seed.push(format!(
                "  {model:24} {scenario:12} held {:3}  lcp {:3}  next {:3}  uncached@16 {:3}",
                g.held_tokens, g.common_prefix_tokens, g.next_prompt_tokens, g.uncached[1].tokens
            ));
        }
    }
    let mut text = format!(
        "scenario alignment (H, N, LCP, rewrite, uncached at 1/16/32/64/128 vs transformers): {pass}/{total}\n"
    );
    for f in &failures {
        text.push_str(&format!("  {f}\n"));
    }
    text.push_str("seed write-up check (18-token question, 128-token reply; values equal transformers above):\n");
    for line in &seed {
        text.push_str(line);
        text.push('\n');
    }
    report("scenarios.txt", &text);
    assert!(failures.is_empty(), "{text}");
}
