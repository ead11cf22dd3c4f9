//! `Tokenizer::encode_after` (a prompt tokenized after the one before it, reusing its ids)
//! against `Tokenizer::encode` of the whole text: on every prompt of sampled
//! ../shared/corpus conversations for all 15 model directories, each tokenizer both as read
//! from tokenizer.json and in its prepared form; and on tokenizers built from the project's
//! tiny fixture with the pipeline features that make piecewise encoding unsafe (which must then
//! fall back to whole texts) or tricky (added tokens that overlap one another), under random
//! edits.
//!
//! CI samples PER_FILE conversations per corpus file, spread evenly over the file;
//! KVAUDIT_INCREMENTAL_CORPUS=N takes N per file, =all every conversation (7,676: hours).

use crate::common;

use std::collections::BTreeMap;

use kvaudit::model::ModelFiles;
use kvaudit::render::{ChatRenderer, DEFAULT_FUEL, ServerProfile};
use kvaudit::tokenize::{Encoded, Tokenizer};
use serde_json::{Value as Json, json};

/// Conversations per corpus file in CI.
const PER_FILE: usize = 3;

/// Every prompt of a conversation (messages up to each assistant message, then all of them
/// when a user or tool message ends the conversation) as transformers renders it, or else as
/// vLLM or SGLang do (which turn a `content: null` many templates refuse into "" and parse
/// tool-call arguments, so the agentic traces render too); None when all three refuse it.
fn prompts(renderer: &ChatRenderer, record: &Json) -> Option<Vec<String>> {
    [
        ServerProfile::Transformers,
        ServerProfile::Vllm,
        ServerProfile::parse("sglang").unwrap(),
    ]
    .into_iter()
    .find_map(|profile| prompts_as(renderer, record, profile))
}

fn prompts_as(
    renderer: &ChatRenderer,
    record: &Json,
    profile: ServerProfile,
) -> Option<Vec<String>> {
    common::corpus_prompts(renderer, profile, record)
        .map(|(_, rendered)| rendered.ok())
        .collect()
}

#[derive(Default)]
struct Tally {
    conversations: usize,
    refused: usize,
    prompts: usize,
    ids: usize,
    reused: usize,
    mismatches: Vec<String>,
}

impl Tally {
    /// Each prompt encoded after the previous one, and after the next one (a base that goes on
    /// past the shared prefix and diverges), against the whole text's ids.
    fn check(&mut self, tok: &Tokenizer, label: &str, texts: &[String], whole: &[Vec<u32>]) {
        let mut base: Option<Encoded> = None;
        let mut forward = Vec::new();
        for (i, text) in texts.iter().enumerate() {
            let e = tok.encode_after(text, base.as_ref()).unwrap();
            self.prompts += 1;
            self.ids += e.ids().len();
            self.reused += e.reused();
            if e.ids() != whole[i] {
                self.mismatches.push(format!("{label} prompt {}", i + 1));
            }
            forward.push(e.clone());
            base = Some(e);
        }
        for i in 1..texts.len() {
            let back = tok.encode_after(&texts[i - 1], Some(&forward[i])).unwrap();
            if back.ids() != whole[i - 1] {
                self.mismatches
                    .push(format!("{label} prompt {} after prompt {}", i, i + 1));
            }
        }
    }
}

#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn corpus_prompts_encode_alike_whole_and_after_the_previous_prompt() {
    let test = "corpus_prompts_encode_alike_whole_and_after_the_previous_prompt";
    let Some(shared) = common::shared_dir(test) else {
        return;
    };
    let per_file = match std::env::var("KVAUDIT_INCREMENTAL_CORPUS").as_deref() {
        Ok("all") => None,
        Ok(n) => Some(
            n.parse()
                .expect("KVAUDIT_INCREMENTAL_CORPUS: a number or all"),
        ),
        Err(_) => Some(PER_FILE),
    };
    let records = common::sampled_corpus(&shared, per_file);
    let models = common::reference_models(&shared);
    let mut tallies: BTreeMap<String, Tally> = BTreeMap::new();
    let mut seconds: BTreeMap<String, f64> = BTreeMap::new();
    for dir in &models {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let files = ModelFiles::from_dir(dir, &name, None, None).unwrap();
        let path = &files.tokenizer_path;
        let started = std::time::Instant::now();
        let forms = common::tokenizer_forms(path);
        for (form, tok) in &forms {
            // Every reference tokenizer is byte-level BPE split at non-normalized added
            // tokens, so none needs the fallback.
            assert!(tok.resumes(), "{name} ({form}) encodes every text whole");
        }
        let mut renderers: BTreeMap<bool, Option<ChatRenderer>> = BTreeMap::new();
        for (label, record) in &records {
            let has_tools = record.get("tools").is_some_and(|t| !t.is_null());
            let renderer = renderers.entry(has_tools).or_insert_with(|| {
                let t = files.select_template(None, has_tools).ok()?;
                ChatRenderer::new(&t.text, files.special_tokens.clone(), DEFAULT_FUEL).ok()
            });
            let texts = renderer.as_ref().and_then(|r| prompts(r, record));
            // The whole texts are encoded once, by the crate's pipeline from tokenizer.json
            // (the prepared form encodes like it: tests/tokenizer.rs; the direct encoder
            // too: tests/direct_tokenize.rs), and both forms resume.
            let whole: Option<Vec<Vec<u32>>> = texts.as_ref().map(|texts| {
                texts
                    .iter()
                    .map(|t| forms[0].1.encode_pipeline(t).unwrap())
                    .collect()
            });
            for (form, tok) in &forms {
                let t = tallies.entry(format!("{name} ({form})")).or_default();
                t.conversations += 1;
                match (&texts, &whole) {
                    (Some(texts), Some(whole)) => t.check(tok, label, texts, whole),
                    _ => t.refused += 1,
                }
            }
        }
        seconds.insert(name, started.elapsed().as_secs_f64());
    }
    let mut report = format!(
        "{} conversations sampled ({}):\n",
        records.len(),
        match per_file {
            Some(n) => format!("{n} per corpus file, spread evenly"),
            None => "all".into(),
        }
    );
    let mut failures = Vec::new();
    for (model, t) in &tallies {
        report.push_str(&format!(
            "{model}: {} conversations ({} refused by the template), {} prompts, {} ids, {} reused ({:.1}%), {} mismatches; {:.1} s for the model\n",
            t.conversations,
            t.refused,
            t.prompts,
            t.ids,
            t.reused,
            100.0 * t.reused as f64 / t.ids.max(1) as f64,
            t.mismatches.len(),
            seconds[model.split(' ').next().unwrap()]
        ));
        failures.extend(t.mismatches.iter().take(5).map(|m| format!("{model}: {m}")));
        assert!(
            t.prompts > t.conversations,
            "{model}: too few prompts rendered to check anything"
        );
        assert!(t.reused > 0, "{model}: no prompt reused any id");
    }
    common::keep_report("incremental-tokenize.txt", &report);
    assert!(
        failures.is_empty(),
        "encode_after differs from encode:\n{}",
        failures.join("\n")
    );
}

fn add_token(json: &mut Json, id: u64, content: &str, normalized: bool) {
    json["added_tokens"].as_array_mut().unwrap().push(json!({
        "id": id, "content": content, "single_word": false, "lstrip": false,
        "rstrip": false, "normalized": normalized, "special": true
    }));
}

/// Texts that each keep a random prefix of the one before and add random pieces: pieces of
/// added tokens, whole ones, and look-alikes that overlap them, so cuts fall inside, at the
/// edge of and just past a token.
fn edits(seed: u64, steps: usize) -> Vec<String> {
    const PIECES: [&str; 22] = [
        "<|im_start|>",
        "<|im_end|>",
        "<|im_",
        "end|>",
        "<think>",
        "</think>",
        "<",
        "|",
        ">",
        "user",
        "assistant",
        " ",
        "\n",
        "\n\n",
        "é",
        "東京",
        "hello",
        "x",
        "<|im_end|>x",
        "end|><|im",
        "  world",
        "Hello",
    ];
    let mut next = common::xorshift(seed);
    let mut texts = Vec::new();
    let mut text = String::new();
    for _ in 0..steps {
        let cuts: Vec<usize> = (0..=text.len())
            .filter(|&i| text.is_char_boundary(i))
            .collect();
        // Mostly the whole text, as a prompt keeps the one before; else a random prefix.
        let keep = if next().is_multiple_of(4) {
            cuts[next() as usize % cuts.len()]
        } else {
            text.len()
        };
        text.truncate(keep);
        for _ in 0..1 + next() % 6 {
            text.push_str(PIECES[next() as usize % PIECES.len()]);
        }
        texts.push(text.clone());
    }
    texts
}

/// Random edit chains encode after each other exactly as whole texts; returns the ids reused.
fn random_edits_agree(tok: &Tokenizer, what: &str) -> usize {
    let mut reused = 0;
    for seed in 1..=20u64 {
        let texts = edits(seed * 0x9E37_79B9, 150);
        let mut base: Option<Encoded> = None;
        for (i, text) in texts.iter().enumerate() {
            let e = tok.encode_after(text, base.as_ref()).unwrap();
            assert_eq!(
                e.ids(),
                tok.encode(text).unwrap(),
                "{what}: seed {seed}, text {i}: {text:?}"
            );
            reused += e.reused();
            base = Some(e);
        }
    }
    reused
}

#[test]
fn fixture_tokenizer_resumes_exactly_under_random_edits() {
    let (_dir, tok) = common::tiny_tokenizer(|_| {});
    assert!(tok.resumes());
    assert!(random_edits_agree(&tok, "tiny-think") > 0);
}

#[test]
fn overlapping_and_normalized_added_tokens_resume_exactly() {
    // `<|im_end|>x` extends `<|im_end|>` (a cut just past `<|im_end|>` is not one when an `x`
    // follows in the next text), `end|><|im` starts inside one token and ends inside the next,
    // and `hello`, normalized, is matched inside the pieces rather than split at.
    let (_dir, tok) = common::tiny_tokenizer(|j| {
        add_token(j, 600, "<|im_end|>x", false);
        add_token(j, 601, "end|><|im", false);
        add_token(j, 602, "hello", true);
    });
    assert!(tok.resumes());
    let base = tok.encode_after("a<|im_end|>b<|im_end|>", None).unwrap();
    let longer = tok
        .encode_after("a<|im_end|>b<|im_end|>x", Some(&base))
        .unwrap();
    assert_eq!(longer.ids(), tok.encode("a<|im_end|>b<|im_end|>x").unwrap());
    assert_eq!(longer.ids().last(), tok.token_id("<|im_end|>x").as_ref());
    // Only the first cut survives: the second `<|im_end|>` became part of `<|im_end|>x`.
    assert_eq!(longer.reused(), tok.encode("a<|im_end|>").unwrap().len());
    assert!(random_edits_agree(&tok, "overlapping added tokens") > 0);
}

#[test]
fn pipelines_that_are_not_piecewise_encode_every_text_whole() {
    // Metaspace with prepend_scheme `first` prepends `▁` only to the piece at offset 0, so a
    // piece encoded on its own would differ from the same piece inside the whole text.
    let (_d1, metaspace) = common::tiny_tokenizer(|j| {
        j["model"]["vocab"]["▁"] = json!(501);
        j["pre_tokenizer"] = json!({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": true});
    });
    let whole = metaspace.encode("<|im_start|>hi there").unwrap();
    let mut pieces = metaspace.encode("<|im_start|>").unwrap();
    pieces.extend(metaspace.encode("hi there").unwrap());
    assert_ne!(
        whole, pieces,
        "the piece after a token encodes alike: no test"
    );
    let (_d2, rstrip) = common::tiny_tokenizer(|j| j["added_tokens"][2]["rstrip"] = json!(true));
    let (_d3, truncation) = common::tiny_tokenizer(|j| {
        j["truncation"] =
            json!({"direction": "Right", "max_length": 9, "strategy": "LongestFirst", "stride": 0});
    });
    let (_d4, dropout) = common::tiny_tokenizer(|j| j["model"]["dropout"] = json!(0.5));
    // tokenizer.json's truncation is not applied (transformers encodes a chat prompt with
    // truncation off): the whole text is encoded, and pieces resume.
    let text = "<|im_start|>user\nhello there, how are you today?<|im_end|>";
    assert!(truncation.encode(text).unwrap().len() > 9);
    assert!(truncation.resumes());
    for (what, tok) in [("metaspace first", &metaspace), ("rstrip", &rstrip)] {
        assert!(!tok.resumes(), "{what} resumes");
        assert_eq!(random_edits_agree(tok, what), 0, "{what} reused ids");
    }
    // Dropout is random: only that it never resumes can be checked.
    assert!(!dropout.resumes());
}
