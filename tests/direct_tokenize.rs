//! The direct id-only encoder (`Tokenizer::encode`) against the `tokenizers` crate's own
//! pipeline (`Tokenizer::encode_pipeline`): on all 15 reference tokenizers (as read from
//! tokenizer.json and in prepared form) over message texts and rendered prompts of sampled
//! ../shared/corpus conversations and seeded random strings of the characters the split
//! patterns treat specially; and on the project's tiny fixture rewritten into each pipeline
//! shape the direct encoder takes (NFC, normalized added tokens, several splits, `Removed`
//! with and without `invert`, string patterns), and into shapes it must leave to the crate.

mod common;

use std::collections::BTreeMap;

use kvaudit::model::ModelFiles;
use kvaudit::render::{ChatRenderer, DEFAULT_FUEL, ServerProfile};
use kvaudit::tokenize::Tokenizer;
use serde_json::{Value as Json, json};

/// Conversations per corpus file.
const PER_FILE: usize = 10;
/// Random strings per tokenizer.
const RANDOM: usize = 3000;

/// Characters each pattern branch turns on: ASCII and Unicode spaces, CR/LF runs,
/// apostrophes for contractions, letters of several scripts and cases, combining marks,
/// digits of several scripts, punctuation and symbols, CJK and kana (DeepSeek's split),
/// emoji, and what NFC composes.
const ALPHABET: &[&str] = &[
    " ",
    " ",
    " ",
    "  ",
    "\n",
    "\n\n",
    "\r\n",
    "\r",
    "\t",
    "\u{a0}",
    "\u{3000}",
    "\u{2028}",
    "\u{85}",
    "\u{200b}",
    "'",
    "'s",
    "'LL",
    "’",
    "a",
    "Z",
    "hello",
    "World",
    "é",
    "e\u{301}",
    "\u{301}",
    "ß",
    "Ω",
    "я",
    "ك",
    "\u{94d}",
    "1",
    "42",
    "123456",
    "٣",
    "१",
    "½",
    ".",
    ",",
    "!",
    "?",
    "-",
    "/",
    "//",
    "(",
    ")",
    "{",
    "}",
    "\"",
    "$",
    "€",
    "+",
    "=",
    "_",
    "`",
    "#",
    "東京",
    "晴れ",
    "カタカナ",
    "한국",
    "😀",
    "👍🏽",
    "\u{1100}\u{1161}",
    "A\u{30a}",
    "\u{212b}",
    "x",
];

fn random_texts(seed: u64, n: usize) -> Vec<String> {
    let mut next = common::xorshift(seed);
    (0..n)
        .map(|_| {
            let len = 1 + (next() % 24) as usize;
            (0..len)
                .map(|_| ALPHABET[(next() % ALPHABET.len() as u64) as usize])
                .collect()
        })
        .collect()
}

#[derive(Default)]
struct Tally {
    texts: usize,
    ids: usize,
    mismatches: Vec<String>,
}

impl Tally {
    fn check(&mut self, tok: &Tokenizer, label: &str, text: &str) {
        let ours = tok.encode(text).unwrap();
        let reference = tok.encode_pipeline(text).unwrap();
        self.texts += 1;
        self.ids += reference.len();
        if ours != reference {
            let at = ours
                .iter()
                .zip(&reference)
                .take_while(|(a, b)| a == b)
                .count();
            self.mismatches
                .push(format!("{label}: first difference at id {at} of {text:?}"));
        }
    }
}

#[test]
fn reference_tokenizers_encode_like_the_crate_pipeline() {
    let test = "reference_tokenizers_encode_like_the_crate_pipeline";
    let Some(shared) = common::shared_dir(test) else {
        return;
    };
    let records = common::sampled_corpus(&shared, Some(PER_FILE));
    let models = common::reference_models(&shared);
    let random = random_texts(0x5eed_d1ec, RANDOM);
    let mut tallies: BTreeMap<String, Tally> = BTreeMap::new();
    for dir in &models {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let files = ModelFiles::from_dir(dir, &name, None, None).unwrap();
        let path = &files.tokenizer_path;
        let forms = common::tokenizer_forms(path);
        let renderer = files.select_template(None, false).ok().and_then(|t| {
            ChatRenderer::new(&t.text, files.special_tokens.clone(), DEFAULT_FUEL).ok()
        });
        for (form, tok) in &forms {
            // Every reference pipeline has the shape the direct encoder reproduces.
            assert!(tok.is_direct(), "{name} ({form}) is not encoded directly");
            let t = tallies.entry(format!("{name} ({form})")).or_default();
            for (label, record) in &records {
                for (i, m) in record["messages"].as_array().unwrap().iter().enumerate() {
                    if let Some(text) = m["content"].as_str() {
                        t.check(tok, &format!("{label} message {}", i + 1), text);
                    }
                }
                if let Some(r) = &renderer {
                    for (end, prompt) in common::corpus_prompts(r, ServerProfile::Vllm, record) {
                        if let Ok(prompt) = prompt {
                            t.check(tok, &format!("{label} prompt to {end}"), &prompt);
                        }
                    }
                }
            }
            for (i, text) in random.iter().enumerate() {
                t.check(tok, &format!("random {i}"), text);
            }
        }
    }
    let mut report = format!(
        "{} conversations sampled ({PER_FILE} per corpus file), {RANDOM} random strings:\n",
        records.len()
    );
    let mut failures = Vec::new();
    for (model, t) in &tallies {
        report.push_str(&format!(
            "{model}: {} texts, {} ids, {} mismatches\n",
            t.texts,
            t.ids,
            t.mismatches.len()
        ));
        assert!(t.texts > RANDOM + records.len(), "{model}: too few texts");
        failures.extend(t.mismatches.iter().take(5).map(|m| format!("{model}: {m}")));
    }
    eprintln!("{report}");
    let out = common::repo_root().join("target/conformance");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("direct-tokenize.txt"), &report).unwrap();
    assert!(
        failures.is_empty(),
        "the direct encoder differs from the crate's pipeline:\n{}",
        failures.join("\n")
    );
}

/// An edit of the fixture's tokenizer.json.
type Change = Box<dyn FnOnce(&mut Json)>;

const QWEN_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

fn split(pattern: Json, behavior: &str, invert: bool) -> Json {
    json!({"type": "Split", "pattern": pattern, "behavior": behavior, "invert": invert})
}

fn byte_level(use_regex: bool) -> Json {
    json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true,
           "use_regex": use_regex})
}

fn pipeline(json: &mut Json, normalizer: Json, steps: Vec<Json>) {
    json["normalizer"] = normalizer;
    json["pre_tokenizer"] = json!({"type": "Sequence", "pretokenizers": steps});
}

#[test]
fn fixture_pipelines_the_direct_encoder_takes_encode_like_the_crate() {
    let shapes: Vec<(&str, Change)> = vec![
        (
            "NFC, Qwen split",
            Box::new(|j: &mut Json| {
                pipeline(
                    j,
                    json!({"type": "NFC"}),
                    vec![
                        split(json!({"Regex": QWEN_SPLIT}), "Isolated", false),
                        byte_level(false),
                    ],
                )
            }),
        ),
        (
            "raw CR/LF in the pattern, normalized added tokens",
            Box::new(|j: &mut Json| {
                pipeline(
                    j,
                    json!({"type": "Sequence", "normalizers": []}),
                    vec![
                        split(
                            json!({"Regex": QWEN_SPLIT.replace(r"[\r\n]", "[\r\n]")}),
                            "Isolated",
                            false,
                        ),
                        byte_level(false),
                    ],
                );
                for t in j["added_tokens"].as_array_mut().unwrap().iter_mut().skip(2) {
                    t["normalized"] = json!(true);
                }
            }),
        ),
        (
            "three splits, digits and a literal string",
            Box::new(|j: &mut Json| {
                pipeline(
                    j,
                    Json::Null,
                    vec![
                        split(json!({"Regex": r"\p{N}{1,3}"}), "Isolated", false),
                        split(json!({"String": "."}), "Isolated", false),
                        split(json!({"Regex": QWEN_SPLIT}), "Isolated", false),
                        byte_level(false),
                    ],
                )
            }),
        ),
        (
            "Removed with invert (matches kept), NFC",
            Box::new(|j: &mut Json| {
                pipeline(
                    j,
                    json!({"type": "NFC"}),
                    vec![
                        split(json!({"Regex": QWEN_SPLIT}), "Removed", true),
                        byte_level(false),
                    ],
                )
            }),
        ),
        (
            "a look-ahead outside the usual tail (fancy-regex runs it)",
            Box::new(|j: &mut Json| {
                pipeline(
                    j,
                    Json::Null,
                    vec![
                        split(
                            json!({"Regex": r"\p{L}+(?=\s)|\s+(?!\S)|."}),
                            "Isolated",
                            false,
                        ),
                        byte_level(false),
                    ],
                )
            }),
        ),
        (
            "Removed (matches dropped)",
            Box::new(|j: &mut Json| {
                pipeline(
                    j,
                    Json::Null,
                    vec![
                        split(json!({"Regex": r"\s+"}), "Removed", false),
                        byte_level(false),
                    ],
                )
            }),
        ),
    ];
    let mut texts = random_texts(7, 1500);
    texts.extend(
        [
            "<|im_start|>user\n  hi  there <think>\n\n x</think>  \n",
            "<|im_end|><|im_end|>  ",
            "",
        ]
        .map(String::from),
    );
    for (shape, change) in shapes {
        let (_dir, tok) = common::tiny_tokenizer(change);
        assert!(tok.is_direct(), "{shape}: not encoded directly");
        let mut t = Tally::default();
        for (i, text) in texts.iter().enumerate() {
            t.check(&tok, &format!("text {i}"), text);
        }
        assert!(t.ids > texts.len(), "{shape}: too few ids to compare");
        assert!(
            t.mismatches.is_empty(),
            "{shape}: {:?}",
            &t.mismatches[..t.mismatches.len().min(5)]
        );
    }
}

#[test]
fn other_pipelines_are_encoded_by_the_crate() {
    let shapes: Vec<(&str, Change)> = vec![
        ("ByteLevel with its own regex", Box::new(|_: &mut Json| {})),
        (
            "NFKC",
            Box::new(|j: &mut Json| {
                pipeline(
                    j,
                    json!({"type": "NFKC"}),
                    vec![
                        split(json!({"Regex": QWEN_SPLIT}), "Isolated", false),
                        byte_level(false),
                    ],
                )
            }),
        ),
        (
            "MergedWithPrevious",
            Box::new(|j: &mut Json| {
                pipeline(
                    j,
                    Json::Null,
                    vec![
                        split(json!({"Regex": r"\s"}), "MergedWithPrevious", false),
                        byte_level(false),
                    ],
                )
            }),
        ),
        (
            "an added token with lstrip",
            Box::new(|j: &mut Json| {
                pipeline(
                    j,
                    Json::Null,
                    vec![
                        split(json!({"Regex": QWEN_SPLIT}), "Isolated", false),
                        byte_level(false),
                    ],
                );
                j["added_tokens"][1]["lstrip"] = json!(true);
            }),
        ),
    ];
    for (shape, change) in shapes {
        let (_dir, tok) = common::tiny_tokenizer(change);
        assert!(!tok.is_direct(), "{shape}: encoded directly");
        let text = "<|im_start|>user\n  Hello  world 42!\n\n";
        assert_eq!(
            tok.encode(text).unwrap(),
            tok.encode_pipeline(text).unwrap(),
            "{shape}"
        );
    }
}
