//! Differential tests against Hugging Face transformers: every template in ../shared rendered by
//! transformers (tests/conformance/reference.py) and by kvaudit, compared byte for byte, token
//! for token, and turn alignment for every model x scenario.

use crate::common;

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
                let cached = reference_cache_path(&shared);
                if let Some(path) = cached.as_ref().filter(|p| p.is_file()) {
                    eprintln!("conformance: reference from cache {}", path.display());
                    let text = std::fs::read_to_string(path).expect("cached reference output");
                    return Some(serde_json::from_str(&text).expect("cached reference JSON"));
                }
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
                    Ok(s) if s.success() => {
                        if let Some(path) = cached {
                            // One entry: outputs for earlier inputs are never read again.
                            for old in std::fs::read_dir(path.parent().unwrap())
                                .into_iter()
                                .flatten()
                                .flatten()
                            {
                                let _ = std::fs::remove_file(old.path());
                            }
                            std::fs::copy(&out, &path).expect("write the reference cache");
                        }
                        out
                    }
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

/// Where the reference output for the current inputs is cached: a name from SHA-256 over the
/// harness scripts, kvaudit's fixture templates, everything in ../shared the harness reads
/// (models, templates, templates-extra, reference, corpus) and the versions of the Python
/// packages that render and tokenize. `None` when the versions cannot be read (no cache then).
fn reference_cache_path(shared: &Path) -> Option<PathBuf> {
    use sha2::{Digest, Sha256};
    let versions = Command::new("python3")
        .args([
            "-c",
            "import importlib.metadata as m; print(*(m.version(p) for p in \
             ('transformers', 'jinja2', 'markupsafe', 'tokenizers')))",
        ])
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let mut hasher = Sha256::new();
    hasher.update(&versions.stdout);
    let root = common::repo_root();
    let trees = [
        root.join("tests/conformance"),
        root.join("fixtures/templates"),
        shared.join("models"),
        shared.join("templates"),
        shared.join("templates-extra"),
        shared.join("reference"),
        shared.join("corpus"),
    ];
    for tree in &trees {
        let mut files = Vec::new();
        list_files(tree, &mut files);
        files.sort();
        for file in files {
            let name = file.strip_prefix(tree).unwrap_or(&file);
            hasher.update(name.to_string_lossy().as_bytes());
            hasher.update([0]);
            hasher.update(std::fs::read(&file).ok()?);
            hasher.update([0]);
        }
    }
    let key: String = hasher
        .finalize()
        .iter()
        .take(12)
        .map(|b| format!("{b:02x}"))
        .collect();
    let dir = root.join("target/conformance/cache");
    std::fs::create_dir_all(&dir).ok()?;
    Some(dir.join(format!("reference-{key}.json")))
}

fn list_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        // Python's bytecode caches come and go with imports; they are no input.
        let name = entry.file_name();
        if name == "__pycache__" || name.to_string_lossy().ends_with(".pyc") {
            continue;
        }
        if path.is_dir() {
            list_files(&path, out);
        } else if path.is_file() {
            out.push(path);
        }
    }
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

fn obj(v: &Json) -> Map<String, Json> {
    v.as_object().cloned().unwrap_or_default()
}

fn messages(case: &Json) -> Vec<Json> {
    case["messages"].as_array().cloned().unwrap_or_default()
}

fn opt(v: &Json) -> Option<&Json> {
    (!v.is_null()).then_some(v)
}

/// The case rendered from its messages, and again from the messages converted to template
/// values beforehand (as a conversation's prompts are rendered): the two must agree.
fn render_case(renderer: &ChatRenderer, case: &Json) -> Result<String, String> {
    let msgs = messages(case);
    let kwargs = obj(&case["kwargs"]);
    let values: Vec<_> = msgs.iter().map(kvaudit::render::message_value).collect();
    let render = |message_values| {
        renderer
            .render(&RenderInput {
                messages: &msgs,
                message_values,
                tools: opt(&case["tools"]),
                documents: opt(&case["documents"]),
                kwargs: &kwargs,
                add_generation_prompt: case["add_generation_prompt"].as_bool().unwrap_or(false),
                now: parse_time(case["now"].as_str().unwrap()).unwrap(),
            })
            .map_err(|e| e.to_string())
    };
    let plain = render(None);
    let converted = render(Some(&values));
    if plain != converted {
        return Err(format!(
            "rendering from converted messages gives {converted:?}, from the messages {plain:?}"
        ));
    }
    plain
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

#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
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
    common::keep_report("models.txt", &text);
    assert!(
        all_pass,
        "every model directory must match transformers:\n{text}"
    );
}

#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
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
    common::keep_report("templates.txt", &text);
    assert_eq!(
        wrong, 0,
        "kvaudit rendered something other than transformers:\n{text}"
    );
    assert!(
        passing * 100 >= per_template.len() * 95,
        "fewer than 95% of templates match:\n{text}"
    );
}

#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
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
            kwargs_per_prompt: Vec::new(),
            tools_per_prompt: Vec::new(),
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
    common::keep_report("scenarios.txt", &text);
    assert!(failures.is_empty(), "{text}");
}

/// kvaudit's own fixture templates (CR LF line endings, MarkupSafe's Markup, Python's
/// whitespace in string methods, padding and format specs within the output limit and
/// Jinja2's Namespace printed), rendered by transformers and by kvaudit for every
/// conversation shape.
#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn fixture_templates_render_like_transformers() {
    let Some(reference) = reference("fixture_templates_render_like_transformers") else {
        return;
    };
    let mut per_template: BTreeMap<String, Tally> = BTreeMap::new();
    let mut renderers: BTreeMap<String, Result<ChatRenderer, String>> = BTreeMap::new();
    for case in reference["fixture_templates"].as_array().unwrap() {
        let name = case["template"].as_str().unwrap().to_string();
        let shape = case["shape"].as_str().unwrap();
        let renderer = renderers.entry(name.clone()).or_insert_with(|| {
            let text =
                std::fs::read_to_string(common::fixtures().join("templates").join(&name)).unwrap();
            ChatRenderer::new(&text, obj(&case["special_tokens"]), DEFAULT_FUEL)
                .map_err(|e| e.to_string())
        });
        let ours = match renderer {
            Ok(r) => render_case(r, case),
            Err(e) => Err(e.clone()),
        };
        per_template
            .entry(name)
            .or_default()
            .record(shape, case, ours, |_| None);
    }
    let mut text = String::from("fixture templates (render vs transformers):\n");
    for (name, t) in &per_template {
        text.push_str(&format!("  {name:56} {}/{}\n", t.pass, t.total));
        for p in t.problems.iter().chain(&t.wrong) {
            text.push_str(&format!("      {p}\n"));
        }
    }
    common::keep_report("fixtures.txt", &text);
    assert_eq!(per_template.len(), 4, "{text}");
    assert!(
        per_template.values().all(|t| t.pass == t.total),
        "kvaudit differs from transformers on its own fixtures:\n{text}"
    );
}

/// How one extra-template case came out.
enum ExtraOutcome {
    Match,
    BothRefuse,
    /// Numbers or tokens differ, or only one side refused: what differs.
    Differs(String),
}

fn ids_digest(ids: &[u32]) -> String {
    use sha2::{Digest, Sha256};
    let text = ids.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
    Sha256::digest(text.as_bytes())
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Turn alignment of one extra-template case by kvaudit, against the reference's numbers and
/// the digests of its held and next token ids.
fn extra_case(
    renderer: &Result<ChatRenderer, String>,
    tok: &Tokenizer,
    case: &Json,
) -> ExtraOutcome {
    let error = case.get("error").and_then(Json::as_str);
    let renderer = match (renderer, error) {
        (Err(_), Some(_)) => return ExtraOutcome::BothRefuse,
        (Err(e), None) => {
            return ExtraOutcome::Differs(format!("kvaudit refused the template: {e}"));
        }
        (Ok(r), _) => r,
    };
    let resend = match case["resend"].as_str().unwrap_or("content") {
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
        source: "extra".into(),
        messages: messages(case),
        tools: opt(&case["tools"]).cloned(),
        documents: None,
        template_kwargs: obj(&case["kwargs"]),
        kwargs_per_prompt: Vec::new(),
        tools_per_prompt: Vec::new(),
        clock: Some(Clock::PerPrompt(clocks.clone())),
        resend,
    };
    let planned = plan_turns(
        &conv,
        renderer,
        &Clock::PerPrompt(clocks),
        &PlanOptions::default(),
    );
    let plan = match (planned, error) {
        (Err(_), Some(_)) => return ExtraOutcome::BothRefuse,
        (Ok(_), Some(err)) => {
            return ExtraOutcome::Differs(format!(
                "transformers raised ({err}) but kvaudit planned the turns"
            ));
        }
        (Err(e), None) => return ExtraOutcome::Differs(format!("kvaudit failed: {e}")),
        (Ok(p), None) => p,
    };
    let want_format = case["reply_format"].as_str().unwrap_or("");
    if let Some(turn) = plan.turns.first()
        && turn.format.name() != want_format
    {
        return ExtraOutcome::Differs(format!(
            "reply format kvaudit {} vs reference {want_format}",
            turn.format.name()
        ));
    }
    let opts = AlignOptions {
        block_sizes: vec![1, 16, 32, 64, 128],
        ..AlignOptions::default()
    };
    let got = match align_plan(&plan, tok, &opts) {
        Ok(g) => g,
        Err(e) => return ExtraOutcome::Differs(format!("kvaudit failed to tokenize: {e}")),
    };
    let want = case["transitions"].as_array().unwrap();
    if got.len() != want.len() {
        return ExtraOutcome::Differs(format!("{} transitions vs {}", got.len(), want.len()));
    }
    let mut diffs = Vec::new();
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        let n = |f: &str| w[f].as_u64().unwrap_or(u64::MAX) as usize;
        let pos = g.rewrite.as_ref().map(|r| r.position as u64);
        let uncached: BTreeMap<String, usize> = g
            .uncached
            .iter()
            .map(|u| (u.block_size.to_string(), u.tokens))
            .collect();
        let want_uncached: BTreeMap<String, usize> =
            serde_json::from_value(w["uncached"].clone()).unwrap_or_default();
        if (g.held_tokens, g.next_prompt_tokens, g.common_prefix_tokens)
            != (
                n("held_tokens"),
                n("next_prompt_tokens"),
                n("common_prefix_tokens"),
            )
            || pos != w["rewrite_position"].as_u64()
            || uncached != want_uncached
        {
            diffs.push(format!(
                "transition {k}: kvaudit held {} / next {} / LCP {} / rewrite {pos:?}, transformers held {} / next {} / LCP {} / rewrite {}",
                g.held_tokens,
                g.next_prompt_tokens,
                g.common_prefix_tokens,
                n("held_tokens"),
                n("next_prompt_tokens"),
                n("common_prefix_tokens"),
                w["rewrite_position"]
            ));
        } else if ids_digest(&g.held_ids) != w["held_digest"].as_str().unwrap_or("")
            || ids_digest(&g.next_ids) != w["next_digest"].as_str().unwrap_or("")
        {
            diffs.push(format!("transition {k}: same numbers, different token ids"));
        }
    }
    if diffs.is_empty() {
        ExtraOutcome::Match
    } else {
        ExtraOutcome::Differs(diffs.join("; "))
    }
}

/// ../shared/templates-extra (246 templates, latest and earlier revisions), each on the
/// tokenizer its README pairs it with: turn alignment of every applicable scenario, with the
/// scenario texts and a second set of texts, against transformers.
#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn extra_templates_align_like_transformers() {
    let Some(reference) = reference("extra_templates_align_like_transformers") else {
        return;
    };
    let shared = common::shared_dir("extra templates").unwrap();
    let mut tokenizers: BTreeMap<String, (ModelFiles, Tokenizer)> = BTreeMap::new();
    let mut renderers: BTreeMap<String, Result<ChatRenderer, String>> = BTreeMap::new();
    // template -> (cases, matching, both refuse, differences)
    let mut per_template: BTreeMap<String, (usize, usize, usize, Vec<String>)> = BTreeMap::new();
    for case in reference["extra_templates"].as_array().unwrap() {
        let path = case["template"].as_str().unwrap().to_string();
        let tok_dir = case["tokenizer"].as_str().unwrap().to_string();
        let (files, tok) = tokenizers.entry(tok_dir.clone()).or_insert_with(|| {
            let dir = shared.join("models").join(&tok_dir);
            let files = ModelFiles::from_dir(&dir, &tok_dir, None, None).unwrap();
            let tok = Tokenizer::from_file(&files.tokenizer_path).unwrap();
            (files, tok)
        });
        let renderer = renderers.entry(path.clone()).or_insert_with(|| {
            // The template's special tokens: the tokenizer's, with the README's kwargs over them.
            let mut special = files.special_tokens.clone();
            special.extend(obj(&case["special_kwargs"]));
            let text = std::fs::read_to_string(shared.join("templates-extra").join(&path)).unwrap();
            ChatRenderer::new(&text, special, DEFAULT_FUEL).map_err(|e| e.to_string())
        });
        let entry = per_template.entry(path).or_default();
        entry.0 += 1;
        match extra_case(renderer, tok, case) {
            ExtraOutcome::Match => entry.1 += 1,
            ExtraOutcome::BothRefuse => entry.2 += 1,
            ExtraOutcome::Differs(what) => entry.3.push(format!(
                "{} / {}: {what}",
                case["scenario"].as_str().unwrap_or(""),
                case["texts"].as_str().unwrap_or("")
            )),
        }
    }
    let total: usize = per_template.values().map(|t| t.0).sum();
    let matching: usize = per_template.values().map(|t| t.1).sum();
    let refused: usize = per_template.values().map(|t| t.2).sum();
    let differing: usize = per_template.values().map(|t| t.3.len()).sum();
    let clean = per_template.values().filter(|t| t.3.is_empty()).count();
    let mut text = String::from(
        "templates-extra (turn alignment and token ids vs transformers, per template: cases, match, both refuse):\n",
    );
    for (name, (n, m, r, diffs)) in &per_template {
        if diffs.is_empty() {
            continue;
        }
        text.push_str(&format!(
            "  {name:64} {n} cases: {m} match, {r} both refuse, {} differ\n",
            diffs.len()
        ));
        for d in diffs {
            text.push_str(&format!("      {d}\n"));
        }
    }
    text.push_str(&format!(
        "  templates fully agreeing: {clean}/{}; cases: {matching} match + {refused} both refuse = {}/{total}; differing: {differing}\n",
        per_template.len(),
        matching + refused
    ));
    common::keep_report("templates-extra.txt", &text);
    assert_eq!(per_template.len(), 246, "{text}");
    assert_eq!(differing, 0, "kvaudit differs from transformers:\n{text}");
}

/// Runs `kvaudit render --format json --tokens` with `args` and the conversation files;
/// `Err(stderr)` when it exits 2, a panic on any other exit code (render never exits 1).
fn kvaudit_render(args: &[&str], files: &[PathBuf]) -> Result<Json, String> {
    let mut cmd = common::kvaudit_process();
    cmd.arg("render")
        .args(args)
        .args(["--format", "json", "--tokens"]);
    for f in files {
        cmd.arg("-c").arg(f);
    }
    let out = cmd.output().expect("run kvaudit");
    match out.status.code() {
        Some(0) => Ok(serde_json::from_slice(&out.stdout).expect("render JSON")),
        Some(2) => Err(String::from_utf8_lossy(&out.stderr).trim().to_string()),
        other => panic!(
            "kvaudit render exited {other:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

/// Each file's rendered conversation: one run for all of them, and one per file only when
/// that run fails (so one refused conversation names itself).
fn kvaudit_render_each(args: &[&str], files: &[PathBuf]) -> Vec<Result<Json, String>> {
    if let Ok(v) = kvaudit_render(args, files) {
        let convs = v["conversations"].as_array().unwrap().clone();
        assert_eq!(convs.len(), files.len());
        return convs.into_iter().map(Ok).collect();
    }
    files
        .iter()
        .map(|f| {
            kvaudit_render(args, std::slice::from_ref(f)).map(|v| v["conversations"][0].clone())
        })
        .collect()
}

/// `kvaudit render` prints what transformers renders, byte for byte and id for id: every
/// model-directory case with a generation prompt becomes a conversation file, and each prompt
/// render prints is compared with the reference case of the same messages (the last prompt is
/// always the case itself; earlier ones when another case has their messages). Its held
/// stream of transition 1 -> 2 has as many tokens as transformers' held stream (scenarios).
#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn render_command_prints_what_transformers_renders() {
    let Some(reference) = reference("render_command_prints_what_transformers_renders") else {
        return;
    };
    let shared = common::shared_dir("render").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let key = |model: &str, msgs: &[Json], case: &Json| {
        serde_json::to_string(&json_key(model, msgs, case)).unwrap()
    };
    fn json_key(model: &str, msgs: &[Json], case: &Json) -> Json {
        serde_json::json!([
            model,
            msgs,
            case["tools"],
            case["documents"],
            case["kwargs"]
        ])
    }
    let mut by_messages: BTreeMap<String, &Json> = BTreeMap::new();
    for case in reference["models"].as_array().unwrap() {
        if case["add_generation_prompt"].as_bool() == Some(true) {
            let model = case["model"].as_str().unwrap();
            by_messages.insert(key(model, &messages(case), case), case);
        }
    }
    // One conversation file per case with a generation prompt, grouped by model.
    let mut per_model: BTreeMap<String, Vec<(PathBuf, &Json)>> = BTreeMap::new();
    for (i, case) in reference["models"].as_array().unwrap().iter().enumerate() {
        if case["add_generation_prompt"].as_bool() != Some(true) {
            continue;
        }
        let path = dir.path().join(format!("case-{i}.json"));
        let mut conv = serde_json::json!({
            "messages": case["messages"],
            "template_kwargs": case["kwargs"],
            "now": case["now"],
        });
        for k in ["tools", "documents"] {
            if !case[k].is_null() {
                conv[k] = case[k].clone();
            }
        }
        std::fs::write(&path, serde_json::to_string(&conv).unwrap()).unwrap();
        per_model
            .entry(case["model"].as_str().unwrap().to_string())
            .or_default()
            .push((path, case));
    }
    let mut text = String::from(
        "render command (kvaudit render --format json vs transformers, text and ids):\n",
    );
    let (mut prompts_equal, mut prompts_total) = (0usize, 0usize);
    let mut failures = Vec::new();
    for (model, cases) in &per_model {
        let model_dir = shared.join("models").join(model);
        let model_arg = model_dir.to_str().unwrap();
        let (mut equal, mut total) = (0usize, 0usize);
        let paths: Vec<PathBuf> = cases.iter().map(|(p, _)| p.clone()).collect();
        let rendered = kvaudit_render_each(&["--model", model_arg], &paths);
        for ((_, case), got) in cases.iter().zip(rendered) {
            let shape = case["shape"].as_str().unwrap();
            let label = format!("{model} / {shape}");
            let conv = match (got, case.get("text")) {
                (Ok(conv), Some(_)) => conv,
                (Err(_), None) => {
                    // transformers raised on this request: kvaudit refused it too.
                    total += 1;
                    equal += 1;
                    continue;
                }
                (Err(e), Some(_)) => {
                    total += 1;
                    failures.push(format!("{label}: kvaudit refused: {e}"));
                    continue;
                }
                (Ok(_), None) => {
                    total += 1;
                    failures.push(format!(
                        "{label}: transformers raised ({}) but kvaudit rendered",
                        case["error"].as_str().unwrap_or("")
                    ));
                    continue;
                }
            };
            // Prompt k of a conversation is rendered from the messages before its k-th
            // assistant message; the last from all of them.
            let msgs = messages(case);
            let mut ends: Vec<usize> = msgs
                .iter()
                .enumerate()
                .filter(|(_, m)| m["role"] == "assistant")
                .map(|(i, _)| i)
                .collect();
            ends.push(msgs.len());
            let printed = conv["prompts"].as_array().unwrap();
            if printed.len() != ends.len() || conv["prompt_count"] != ends.len() {
                total += 1;
                failures.push(format!(
                    "{label}: {} prompts printed, {} expected",
                    printed.len(),
                    ends.len()
                ));
                continue;
            }
            for (p, end) in printed.iter().zip(&ends) {
                let Some(want) = by_messages.get(&key(model, &msgs[..*end], case)) else {
                    continue;
                };
                let Some(want_text) = want["text"].as_str() else {
                    continue;
                };
                total += 1;
                let ids: Vec<u32> = serde_json::from_value(p["ids"].clone()).unwrap();
                let token_ids: Vec<u32> = p["tokens"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| t["id"].as_u64().unwrap() as u32)
                    .collect();
                let want_ids: Vec<u32> = serde_json::from_value(want["ids"].clone()).unwrap();
                let what = if p["text"].as_str() != Some(want_text) {
                    Some("different text")
                } else if ids != want_ids || token_ids != want_ids {
                    Some("same text, different token ids")
                } else if p["token_count"] != want_ids.len() {
                    Some("wrong token_count")
                } else {
                    None
                };
                match what {
                    None => equal += 1,
                    Some(w) => failures.push(format!("{label} prompt {}: {w}", p["prompt"])),
                }
            }
        }
        prompts_equal += equal;
        prompts_total += total;
        text.push_str(&format!("  {model:32} {equal}/{total}\n"));
    }
    // Held streams: transition 1 -> 2 of every scenario transformers ran. Its held tokens
    // (prompt 1 + the generated reply) do not depend on how later replies are sent back, so
    // the conversation file (which sends replies back as given) holds what the scenario
    // holds, except where the first reply is a tool call: kvaudit derives that reply from a
    // render of the message as sent, and a file cannot say to send it without its reasoning.
    let (mut held_equal, mut held_total, mut held_skipped) = (0usize, 0usize, 0usize);
    let mut per_model_held: BTreeMap<String, Vec<(PathBuf, String, u64)>> = BTreeMap::new();
    for (i, case) in reference["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
    {
        let Some(want) = case["transitions"].as_array().and_then(|t| t.first()) else {
            continue;
        };
        let first_reply = messages(case)
            .into_iter()
            .find(|m| m["role"] == "assistant")
            .unwrap();
        if first_reply.get("tool_calls").is_some() {
            held_skipped += 1;
            continue;
        }
        let path = dir.path().join(format!("scenario-{i}.json"));
        let mut conv = serde_json::json!({
            "messages": case["messages"],
            "template_kwargs": case["kwargs"],
            "now_per_prompt": case["now_per_prompt"],
        });
        if !case["tools"].is_null() {
            conv["tools"] = case["tools"].clone();
        }
        std::fs::write(&path, serde_json::to_string(&conv).unwrap()).unwrap();
        let label = format!(
            "{} / {} held 1 -> 2",
            case["model"].as_str().unwrap(),
            case["scenario"].as_str().unwrap()
        );
        per_model_held
            .entry(case["model"].as_str().unwrap().to_string())
            .or_default()
            .push((path, label, want["held_tokens"].as_u64().unwrap()));
    }
    for (model, cases) in &per_model_held {
        let model_dir = shared.join("models").join(model);
        let paths: Vec<PathBuf> = cases.iter().map(|(p, _, _)| p.clone()).collect();
        let rendered = kvaudit_render_each(
            &["--model", model_dir.to_str().unwrap(), "--held", "1"],
            &paths,
        );
        for ((_, label, want), got) in cases.iter().zip(rendered) {
            held_total += 1;
            match got {
                Ok(conv) => {
                    let h = &conv["held"][0];
                    let n = h["ids"].as_array().map_or(0, Vec::len) as u64;
                    if h["token_count"] == *want && n == *want {
                        held_equal += 1;
                    } else {
                        failures.push(format!(
                            "{label}: {} tokens vs transformers {want}",
                            h["token_count"]
                        ));
                    }
                }
                Err(e) => failures.push(format!("{label}: kvaudit refused: {e}")),
            }
        }
    }
    text.push_str(&format!(
        "  prompts equal to transformers (text and ids): {prompts_equal}/{prompts_total}\n  \
         held streams 1 -> 2 with transformers' held token count: {held_equal}/{held_total} \
         ({held_skipped} tool-call first replies not comparable through a file)\n"
    ));
    for f in &failures {
        text.push_str(&format!("    {f}\n"));
    }
    common::keep_report("render.txt", &text);
    assert!(failures.is_empty(), "{text}");
    assert!(prompts_total > 0 && held_total > 0, "{text}");
}
