//! The direct id-only encoder (`Tokenizer::encode`) against the `tokenizers` crate's own
//! pipeline (`Tokenizer::encode_pipeline`): on all 15 reference tokenizers (as read from
//! tokenizer.json and in prepared form) over message texts and rendered prompts of sampled
//! ../shared/corpus conversations and seeded random strings of the characters the split
//! patterns treat specially; and on the project's tiny fixture rewritten into each pipeline
//! shape the direct encoder takes (NFC, normalized added tokens, several splits, `Removed`
//! with and without `invert`, string patterns), and into shapes it must leave to the crate.

use crate::common;

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

/// Where `ours` first differs from `reference`, the ids of `text`, if it does.
fn difference(label: &str, ours: &[u32], reference: &[u32], text: &str) -> Option<String> {
    (ours != reference).then(|| {
        let at = ours
            .iter()
            .zip(reference)
            .take_while(|(a, b)| a == b)
            .count();
        format!("{label}: first difference at id {at} of {text:?}")
    })
}

#[derive(Default)]
struct Tally {
    texts: usize,
    ids: usize,
    mismatches: Vec<String>,
}

impl Tally {
    /// `tok`'s direct encoding of `text` against `reference`'s pipeline.
    fn check(&mut self, tok: &Tokenizer, reference: &Tokenizer, label: &str, text: &str) {
        let ours = tok.encode(text).unwrap();
        let reference = reference.encode_pipeline(text).unwrap();
        self.texts += 1;
        self.ids += reference.len();
        self.mismatches
            .extend(difference(label, &ours, &reference, text));
    }
}

#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
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
        // Both forms against the crate's own BPE (the tokenizer.json form): the prepared form's
        // merge loop is kvaudit's, so its pipeline is no reference.
        let crate_form = &forms[0].1;
        for (form, tok) in &forms {
            // Every reference pipeline has the shape the direct encoder reproduces.
            assert!(tok.is_direct(), "{name} ({form}) is not encoded directly");
            let t = tallies.entry(format!("{name} ({form})")).or_default();
            for (label, record) in &records {
                for (i, m) in record["messages"].as_array().unwrap().iter().enumerate() {
                    if let Some(text) = m["content"].as_str() {
                        t.check(tok, crate_form, &format!("{label} message {}", i + 1), text);
                    }
                }
                if let Some(r) = &renderer {
                    for (end, prompt) in common::corpus_prompts(r, ServerProfile::Vllm, record) {
                        if let Ok(prompt) = prompt {
                            t.check(
                                tok,
                                crate_form,
                                &format!("{label} prompt to {end}"),
                                &prompt,
                            );
                        }
                    }
                }
            }
            for (i, text) in random.iter().enumerate() {
                t.check(tok, crate_form, &format!("random {i}"), text);
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
    common::keep_report("direct-tokenize.txt", &report);
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

/// `normalizer`, then one isolating regex split, then a plain `ByteLevel`.
fn one_split(normalizer: Json, pattern: &'static str) -> Change {
    Box::new(move |j: &mut Json| {
        pipeline(
            j,
            normalizer,
            vec![
                split(json!({"Regex": pattern}), "Isolated", false),
                byte_level(false),
            ],
        )
    })
}

#[test]
fn fixture_pipelines_the_direct_encoder_takes_encode_like_the_crate() {
    let shapes: Vec<(&str, Change)> = vec![
        // The fixture as it is: GPT-2's form, ByteLevel splitting with its own regex.
        ("ByteLevel with its own regex", Box::new(|_: &mut Json| {})),
        (
            "a digit split before ByteLevel's own regex, NFC",
            Box::new(|j: &mut Json| {
                pipeline(
                    j,
                    json!({"type": "NFC"}),
                    vec![
                        split(json!({"Regex": r"\p{N}{1,3}"}), "Isolated", false),
                        byte_level(true),
                    ],
                )
            }),
        ),
        (
            "NFC, Qwen split",
            one_split(json!({"type": "NFC"}), QWEN_SPLIT),
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
            t.check(&tok, &tok, &format!("text {i}"), text);
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
        (
            "ByteLevel adding a prefix space",
            Box::new(|j: &mut Json| {
                pipeline(
                    j,
                    Json::Null,
                    vec![json!({"type": "ByteLevel", "add_prefix_space": true,
                        "trim_offsets": true, "use_regex": true})],
                )
            }),
        ),
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

/// What kvaudit tokenizes a reply as, and how a following prompt repeats it: the assistant
/// message's content alone, after a think block (Qwen3's generated reply, whose history drops
/// the block), after blank lines, with a trailing line break, and in decomposed form (which
/// NFC changes).
fn reply_forms(content: &str) -> Vec<String> {
    use unicode_normalization_alignments::UnicodeNormalization;
    vec![
        content.to_string(),
        format!("<think>\n\n</think>\n\n{content}"),
        format!("<think>\nWhy.\n</think>\n\n{content}"),
        format!("\n\n{content}"),
        format!("{content}\n"),
        content.nfd().map(|(c, _)| c).collect(),
    ]
}

/// The crate's pipeline on whole texts, each text encoded once (both forms of a tokenizer and
/// every reply form are checked against the same next prompts).
struct Reference<'t> {
    tok: &'t Tokenizer,
    seen: std::cell::RefCell<std::collections::HashMap<String, Vec<u32>>>,
}

impl<'t> Reference<'t> {
    fn new(tok: &'t Tokenizer) -> Reference<'t> {
        Reference {
            tok,
            seen: Default::default(),
        }
    }

    fn whole(&self, text: &str) -> Vec<u32> {
        let mut seen = self.seen.borrow_mut();
        seen.entry(text.to_string())
            .or_insert_with(|| self.tok.encode_pipeline(text).unwrap())
            .clone()
    }
}

#[derive(Default)]
struct TakeOvers {
    prompts: usize,
    taken: usize,
    ids: usize,
    mismatches: Vec<String>,
}

impl TakeOvers {
    /// `next` encoded after `prompt` and taking over `reply`'s ids, against the crate's
    /// pipeline on the whole text; the reply's own ids too.
    fn check(&mut self, tok: &Tokenizer, reference: &Reference, label: &str, texts: [&str; 3]) {
        let [prompt, reply, next] = texts;
        let base = tok.encode_after(prompt, None).unwrap();
        let encoded = tok.encode_reply(reply).unwrap();
        if encoded.ids() != reference.whole(reply) {
            self.mismatches.push(format!("{label}: the reply itself"));
        }
        let e = tok
            .encode_after_reusing(next, Some(&base), Some(&encoded))
            .unwrap();
        let whole = reference.whole(next);
        self.prompts += 1;
        self.ids += whole.len();
        self.taken += e.taken_over();
        self.mismatches
            .extend(difference(label, e.ids(), &whole, next));
    }
}

#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn prompts_take_over_the_replies_they_repeat_exactly() {
    let test = "prompts_take_over_the_replies_they_repeat_exactly";
    let Some(shared) = common::shared_dir(test) else {
        return;
    };
    let records = common::sampled_corpus(&shared, Some(PER_FILE));
    let mut report = format!(
        "{} conversations sampled ({PER_FILE} per corpus file), each reply in {} forms:\n",
        records.len(),
        reply_forms("").len()
    );
    let mut failures = Vec::new();
    let mut taking = Vec::new();
    for dir in &common::reference_models(&shared) {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let files = ModelFiles::from_dir(dir, &name, None, None).unwrap();
        let forms = common::tokenizer_forms(&files.tokenizer_path);
        let Some(renderer) = files.select_template(None, false).ok().and_then(|t| {
            ChatRenderer::new(&t.text, files.special_tokens.clone(), DEFAULT_FUEL).ok()
        }) else {
            continue;
        };
        let reference = Reference::new(&forms[0].1);
        for (form, tok) in &forms {
            let mut t = TakeOvers::default();
            for (label, record) in &records {
                let messages = record["messages"].as_array().unwrap();
                let prompts: Vec<(usize, String)> =
                    common::corpus_prompts(&renderer, ServerProfile::Vllm, record)
                        .filter_map(|(end, p)| Some((end, p.ok()?)))
                        .collect();
                for pair in prompts.windows(2) {
                    let [(end, prompt), (_, next)] = pair else {
                        continue;
                    };
                    let Some(content) = messages[*end]["content"].as_str() else {
                        continue;
                    };
                    for (i, reply) in reply_forms(content).iter().enumerate() {
                        let what = format!("{label} prompt after message {end}, reply form {i}");
                        t.check(tok, &reference, &what, [prompt, reply, next]);
                    }
                }
            }
            report.push_str(&format!(
                "{name} ({form}): {} prompts, {} ids, {} taken over from the reply ({:.1}%), {} mismatches\n",
                t.prompts,
                t.ids,
                t.taken,
                100.0 * t.taken as f64 / t.ids.max(1) as f64,
                t.mismatches.len()
            ));
            failures.extend(
                t.mismatches
                    .iter()
                    .take(5)
                    .map(|m| format!("{name} ({form}): {m}")),
            );
            assert!(t.prompts > records.len(), "{name}: too few prompts");
            // Pipelines of one isolating split and no normalized added tokens take replies
            // over (the benchmark's two models among them); DeepSeek's three splits and
            // MiniMax's `Removed` split do not.
            let takes = tok.takes_over_replies();
            if name == "qwen3-8b" || name == "llama-3.1-8b-instruct" {
                assert!(takes, "{name} ({form}) does not take replies over");
            }
            if takes && t.taken == 0 {
                failures.push(format!("{name} ({form}): no reply was taken over"));
            }
            if !takes && t.taken > 0 {
                failures.push(format!(
                    "{name} ({form}): took over without the pipeline for it"
                ));
            }
            taking.push(format!(
                "{name} ({form}): {}",
                if takes { "takes over" } else { "does not" }
            ));
        }
    }
    report.push_str(&taking.join("\n"));
    report.push('\n');
    common::keep_report("take-over.txt", &report);
    assert!(
        failures.is_empty(),
        "taking over a reply's ids differs from encoding the whole prompt:\n{}",
        failures.join("\n")
    );
}

#[test]
fn fixture_take_overs_agree_with_whole_texts_at_every_junction() {
    // Junctions where the split, NFC or an added token could join the text before the
    // repeated reply with the reply: line breaks and spaces that one whitespace match would
    // span, letters that one word match would span, a combining mark NFC composes with the
    // character before it, an apostrophe a contraction takes, a lone `<`.
    const JUNCTIONS: [&str; 12] = [
        "",
        "\n",
        "\n\n",
        " ",
        "  ",
        "x",
        "é",
        "e",
        "\u{301}",
        "'",
        "<",
        "assistant\n",
    ];
    const STARTS: [&str; 10] = [
        "", " ", "\n", "\u{301}", "s over", "'s", "é", "東京", "  \n", "1",
    ];
    const ENDS: [&str; 5] = [
        "",
        "<|im_end|>",
        "<|im_end|>\n<|im_start|>user\nhi",
        " ",
        "\n\n",
    ];
    const BODY: &str = "Hello world, this reply is long enough to be taken over: é and ü.";
    let shapes: Vec<(&str, Change)> = vec![
        (
            "NFC, Qwen split",
            one_split(json!({"type": "NFC"}), QWEN_SPLIT),
        ),
        (
            "Qwen split, no normalizer",
            one_split(Json::Null, QWEN_SPLIT),
        ),
        (
            "a split without look-around",
            one_split(Json::Null, r" ?\p{L}+|\s+|\p{N}|[^\s\p{L}\p{N}]+"),
        ),
    ];
    for (shape, change) in shapes {
        let (_dir, tok) = common::tiny_tokenizer(change);
        assert!(tok.is_direct(), "{shape}: not encoded directly");
        let reference = Reference::new(&tok);
        let mut t = TakeOvers::default();
        for (j, junction) in JUNCTIONS.iter().enumerate() {
            for (s, start) in STARTS.iter().enumerate() {
                for (e, end) in ENDS.iter().enumerate() {
                    let content = format!("{start}{BODY}");
                    let next = format!(
                        "<|im_start|>user\nq<|im_end|>\n<|im_start|>{junction}{content}{end}"
                    );
                    let prompt = "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n";
                    for (f, reply) in reply_forms(&content).iter().enumerate() {
                        let what = format!("junction {j}, start {s}, end {e}, reply form {f}");
                        t.check(&tok, &reference, &what, [prompt, reply, &next]);
                    }
                }
            }
        }
        assert!(
            t.mismatches.is_empty(),
            "{shape}: {} mismatches:\n{}",
            t.mismatches.len(),
            t.mismatches[..t.mismatches.len().min(10)].join("\n")
        );
        // A third of the ends leave the reply's text last in its run, and the junctions and
        // starts that let NFC or the split join it with what precedes are refused: about a
        // quarter of all ids are taken over.
        eprintln!("{shape}: {} of {} ids taken over", t.taken, t.ids);
        assert!(
            t.taken * 8 > t.ids,
            "{shape}: {} of {} ids taken over",
            t.taken,
            t.ids
        );
    }
}

/// A prepared tokenizer's short words (up to 15 bytes) wait in a queue of eight for their
/// slots in the shared short-word table, and a longer word settles the queue first: the ids
/// must come out in text order whatever the mix, on the first sight of every word (merged)
/// and on the second (found in the table).
#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn queued_short_words_come_out_in_text_order() {
    let texts = [
        "one two three four five six seven eight",
        "one two three four five six seven eight nine ten",
        "a b c d e f g h i j k l m n o p q r s t u v w x y z",
        "alpha beta incomprehensibilities gamma delta epsilon zeta eta theta",
        "x fourteenbytes fifteenbytes16 sixteenbytes_17 seventeen_bytes_18 y",
        "the the the the the the the the the the the the",
        "incomprehensibilities incomprehensibilities a incomprehensibilities",
        "",
        " ",
        "sentence one.\n\n  sentence two, with 12345 digits and émigré words",
    ];
    let all = texts.concat();
    // The tiny fixture as a pipeline the direct encoder takes (a Qwen split, byte level).
    let (fixture, _) = common::tiny_tokenizer(one_split(Json::Null, QWEN_SPLIT));
    let mut models = vec![fixture.path().join("tokenizer.json")];
    match common::shared_dir("queued_short_words_come_out_in_text_order") {
        Some(shared) => {
            for m in ["llama-3.1-8b-instruct", "qwen3-8b"] {
                models.push(shared.join("models").join(m).join("tokenizer.json"));
            }
        }
        None => eprintln!("queued_short_words_come_out_in_text_order: the tiny fixture only"),
    }
    for path in &models {
        let [(_, crate_form), (_, prepared)] = common::tokenizer_forms(path);
        assert!(prepared.is_direct(), "{}", path.display());
        for round in ["first sight", "second sight"] {
            for text in texts.iter().copied().chain([all.as_str()]) {
                assert_eq!(
                    prepared.encode(text).unwrap(),
                    crate_form.encode_pipeline(text).unwrap(),
                    "{} ({round}): {text:?}",
                    path.display()
                );
            }
        }
    }
}
