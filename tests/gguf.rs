//! `--model FILE.gguf`: the tokenizer and chat templates come from the GGUF's metadata (the
//! tensors are never read), tokenized as llama.cpp tokenizes them. On the reference models
//! llama.cpp supports, a vocab-only GGUF written from the model's directory gives the corpus
//! report the directory gives under `--server llamacpp`, on every conversation of the corpus;
//! a hostile or unsupported file is one clear error.

use crate::common::{self, kvaudit};

use std::path::{Path, PathBuf};
use std::process::Command as Process;

use serde_json::Value as Json;

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A little-endian GGUF writer for hand-made files.
#[derive(Default)]
struct Gguf {
    entries: Vec<u8>,
    count: u64,
}

impl Gguf {
    fn key(&mut self, key: &str, ty: u32) -> &mut Self {
        self.entries.extend((key.len() as u64).to_le_bytes());
        self.entries.extend(key.as_bytes());
        self.entries.extend(ty.to_le_bytes());
        self.count += 1;
        self
    }

    fn string(&mut self, key: &str, value: &str) -> &mut Self {
        self.key(key, 8);
        self.entries.extend((value.len() as u64).to_le_bytes());
        self.entries.extend(value.as_bytes());
        self
    }

    fn strings(&mut self, key: &str, values: &[&str]) -> &mut Self {
        self.key(key, 9);
        self.entries.extend(8u32.to_le_bytes());
        self.entries.extend((values.len() as u64).to_le_bytes());
        for v in values {
            self.entries.extend((v.len() as u64).to_le_bytes());
            self.entries.extend(v.as_bytes());
        }
        self
    }

    fn ints(&mut self, key: &str, values: &[i32]) -> &mut Self {
        self.key(key, 9);
        self.entries.extend(5u32.to_le_bytes());
        self.entries.extend((values.len() as u64).to_le_bytes());
        for v in values {
            self.entries.extend(v.to_le_bytes());
        }
        self
    }

    fn u32(&mut self, key: &str, value: u32) -> &mut Self {
        self.key(key, 4);
        self.entries.extend(value.to_le_bytes());
        self
    }

    fn bool(&mut self, key: &str, value: bool) -> &mut Self {
        self.key(key, 7);
        self.entries.push(u8::from(value));
        self
    }

    fn bytes(&self) -> Vec<u8> {
        let mut out = b"GGUF".to_vec();
        out.extend(3u32.to_le_bytes());
        out.extend(0u64.to_le_bytes());
        out.extend(self.count.to_le_bytes());
        out.extend(&self.entries);
        out
    }
}

/// A small byte-level BPE vocabulary in GGUF form: every byte as its GPT-2 character, a few
/// merges, two control tokens and a chat template.
fn tiny(pre: &str) -> Gguf {
    tiny_with_merges(
        pre,
        &[
            "h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "l d", "Ġwor ld",
        ],
    )
}

/// [`tiny`] with these merges.
fn tiny_with_merges(pre: &str, merges: &[&str]) -> Gguf {
    // GPT-2's byte-to-character map, as tokenizer.json vocabularies spell bytes.
    let mut chars: Vec<String> = Vec::new();
    let mut n = 0u32;
    for b in 0u32..256 {
        let printable =
            (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
        let c = if printable {
            char::from_u32(b).unwrap()
        } else {
            n += 1;
            char::from_u32(255 + n).unwrap()
        };
        chars.push(c.to_string());
    }
    let mut tokens: Vec<String> = chars.clone();
    for t in [
        "he", "ll", "hell", "hello", "Ġw", "or", "Ġwor", "ld", "Ġworld",
    ] {
        tokens.push(t.into());
    }
    tokens.push("<|im_start|>".into());
    tokens.push("<|im_end|>".into());
    let mut types = vec![1i32; tokens.len()];
    let n = types.len();
    types[n - 2] = 3;
    types[n - 1] = 3;
    let token_refs: Vec<&str> = tokens.iter().map(String::as_str).collect();
    let mut g = Gguf::default();
    g.string("general.architecture", "qwen3")
        .string("tokenizer.ggml.model", "gpt2")
        .string("tokenizer.ggml.pre", pre)
        .strings("tokenizer.ggml.tokens", &token_refs)
        .ints("tokenizer.ggml.token_type", &types)
        .strings("tokenizer.ggml.merges", merges)
        .u32("tokenizer.ggml.eos_token_id", (n - 1) as u32)
        .bool("tokenizer.ggml.add_bos_token", false)
        .string(
            "tokenizer.chat_template",
            "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
        );
    g
}

/// The ids of each prompt `render` gives for a two-turn exchange.
fn render_ids(model: &Path) -> Vec<Vec<u64>> {
    let out = kvaudit()
        .args([
            "render",
            "--model",
            path_str(model),
            "--user",
            "hello world",
        ])
        .args([
            "--reply",
            "hello",
            "--follow-up",
            "world",
            "--tokens",
            "--format",
            "json",
        ])
        .assert()
        .success();
    let r: Json = serde_json::from_slice(&out.get_output().stdout).unwrap();
    r["conversations"][0]["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            p["ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i.as_u64().unwrap())
                .collect()
        })
        .collect()
}

#[test]
fn a_hand_made_gguf_tokenizes_and_templates_as_its_metadata_says() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.gguf");
    std::fs::write(&path, tiny("qwen2").bytes()).unwrap();
    let prompts = render_ids(&path);
    // Bytes are their own ids; the merges make "hello" 259 and " world" 264; the control
    // tokens <|im_start|> 265 and <|im_end|> 266 are matched in the rendered text; qwen2's
    // split keeps "\n" apart from the words.
    let text = |s: &str| s.bytes().map(u64::from).collect::<Vec<_>>();
    let mut first = vec![265];
    first.extend(text("user"));
    first.extend([10, 259, 264, 266, 10, 265]);
    first.extend(text("assistant"));
    first.push(10);
    assert_eq!(prompts[0], first);
    assert_eq!(prompts.len(), 2);
    assert!(prompts[1].starts_with(&first), "{:?}", prompts[1]);
    assert_eq!(prompts[1][first.len()..first.len() + 3], [259, 266, 10]);
}

fn one_error(model: &Path) -> String {
    let out = kvaudit()
        .args(["diff-turns", "--model", path_str(model)])
        .assert()
        .code(2);
    let err = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(err.starts_with("error: "), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

#[test]
fn hostile_and_unsupported_gguf_files_are_one_error() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let write = |name: &str, bytes: &[u8]| {
        let p = d.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    };
    let good = tiny("qwen2").bytes();
    // Cut anywhere in the metadata.
    for cut in [6, 20, 40, good.len() / 2, good.len() - 1] {
        let err = one_error(&write("cut.gguf", &good[..cut]));
        assert!(
            err.contains("is not a GGUF file kvaudit can read"),
            "{cut}: {err}"
        );
    }
    // Counts and lengths past the limits or the file: refused before allocating.
    let mut huge_count = good.clone();
    huge_count[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(one_error(&write("count.gguf", &huge_count)).contains("metadata entries"));
    let mut huge_key = good.clone();
    huge_key[24..32].copy_from_slice(&(1u64 << 40).to_le_bytes());
    assert!(one_error(&write("key.gguf", &huge_key)).contains("over kvaudit's limit"));
    let mut g = Gguf::default();
    g.key("tokenizer.ggml.tokens", 9);
    g.entries.extend(8u32.to_le_bytes());
    g.entries.extend(u64::MAX.to_le_bytes());
    assert!(one_error(&write("array.gguf", &g.bytes())).contains("an array of"));
    let mut g = Gguf::default();
    g.key("tokenizer.chat_template", 8);
    g.entries.extend((1u64 << 23).to_le_bytes());
    assert!(one_error(&write("string.gguf", &g.bytes())).contains("runs past the end"));
    // Another version, another byte order, another magic.
    let mut v1 = good.clone();
    v1[4..8].copy_from_slice(&1u32.to_le_bytes());
    assert!(one_error(&write("v1.gguf", &v1)).contains("GGUF version 1"));
    let mut be = good.clone();
    be[4..8].copy_from_slice(&3u32.to_be_bytes());
    assert!(one_error(&write("be.gguf", &be)).contains("big-endian"));
    // A pre-tokenizer kvaudit does not know, a SentencePiece vocabulary.
    let err = one_error(&write("pre.gguf", &tiny("no-such-pre").bytes()));
    assert!(
        err.contains("\"no-such-pre\"") && err.contains("qwen2"),
        "{err}"
    );
    let mut spm = tiny("qwen2");
    spm.string("tokenizer.ggml.model", "llama");
    let err = one_error(&write("spm.gguf", &spm.bytes()));
    assert!(
        err.contains("the key \"tokenizer.ggml.model\" twice"),
        "{err}"
    );
    let mut g = Gguf::default();
    g.string("tokenizer.ggml.model", "llama");
    let err = one_error(&write("spm2.gguf", &g.bytes()));
    assert!(err.contains("byte-level BPE"), "{err}");
    // A text twice in the vocabulary: llama.cpp refuses it, and so does kvaudit.
    let mut twice = Gguf::default();
    twice
        .string("tokenizer.ggml.model", "gpt2")
        .string("tokenizer.ggml.pre", "qwen2")
        .strings("tokenizer.ggml.tokens", &["a", "b", "a"])
        .strings("tokenizer.ggml.merges", &[]);
    let err = one_error(&write("twice.gguf", &twice.bytes()));
    assert!(err.contains("the token \"a\" twice"), "{err}");
    // Flipped bytes: an error or a model, never a crash (checked in one_error / success).
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    for i in 0..30 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let mut bad = good.clone();
        let at = 24 + (state % (bad.len() as u64 - 24)) as usize;
        bad[at] ^= 1 << ((state >> 59) % 8);
        let p = write(&format!("flip-{i}.gguf"), &bad);
        let out = kvaudit()
            .args(["diff-turns", "--model", path_str(&p)])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(matches!(out.status.code(), Some(0..=2)), "{i}: {err}");
        assert!(!err.contains("panicked"), "{i}: {err}");
    }
}

/// The GGUF is an input: no output may replace it. With the tokenizer cache off, its files go
/// to a fresh private directory, and named templates are found by their keys.
#[test]
fn the_gguf_is_an_input_and_the_cache_off_still_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.gguf");
    let mut g = tiny("qwen2");
    g.string(
        "tokenizer.chat_template.tool_use",
        "{{ messages | length }} tools",
    );
    let bytes = g.bytes();
    std::fs::write(&path, &bytes).unwrap();
    let corpus = common::fixtures().join("corpus/chats.jsonl");
    for flag in ["--partial", "--html", "--per-transition"] {
        kvaudit()
            .args([
                "corpus",
                "-m",
                path_str(&path),
                path_str(&corpus),
                flag,
                path_str(&path),
            ])
            .assert()
            .code(2);
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "{flag}");
    }
    let out = kvaudit()
        .env("KVAUDIT_TOKENIZER_CACHE", "off")
        .args([
            "render",
            "--model",
            path_str(&path),
            "--user",
            "hello",
            "--reply",
            "hi",
        ])
        .args(["--template-name", "tool_use", "--format", "json"])
        .assert()
        .success();
    let r: Json = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(r["conversations"][0]["prompts"][0]["text"], "1 tools");
}

fn vocab_only_gguf(shared: &Path, model: &str, arch: &str, pre: &str, out: &Path) {
    let done = Process::new("python3")
        .arg(common::repo_root().join("tests/make_tiny_gguf.py"))
        .arg(shared.join("models").join(model))
        .arg(out)
        .args([
            "--arch",
            arch,
            "--pre",
            pre,
            "--vocab-only",
            "--all-templates",
        ])
        .output()
        .unwrap();
    assert!(
        done.status.success(),
        "make_tiny_gguf.py {model}: {}",
        String::from_utf8_lossy(&done.stderr)
    );
}

/// The corpus report without what names its model's files.
fn corpus_report(model: &Path, corpus: &[PathBuf]) -> Json {
    let out = kvaudit()
        .args(["corpus", "-m", path_str(model), "--server", "llamacpp"])
        .args(corpus)
        .args(["--now", "2026-01-15T10:00:00", "--format", "json"])
        .assert()
        .code(1);
    let mut v: Json = serde_json::from_slice(&out.get_output().stdout).unwrap();
    for k in ["source", "template", "tokenizer_sha256"] {
        v["model"][k] = Json::Null;
    }
    v
}

#[test]
#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
fn a_vocab_only_gguf_reports_as_its_model_directory_under_llamacpp() {
    let Some(shared) =
        common::shared_dir("a_vocab_only_gguf_reports_as_its_model_directory_under_llamacpp")
    else {
        return;
    };
    let corpus = common::corpus_files(&shared);
    let dir = tempfile::tempdir().unwrap();
    let mut compared = 0;
    for (model, arch, pre) in common::LLAMACPP_FAMILIES {
        let gguf = dir.path().join(format!("{model}.gguf"));
        vocab_only_gguf(&shared, model, arch, pre, &gguf);
        let from_gguf = corpus_report(&gguf, &corpus);
        let from_dir = corpus_report(&shared.join("models").join(model), &corpus);
        assert_eq!(from_gguf, from_dir, "{model}");
        assert!(
            from_gguf["conversations"].as_u64().unwrap() > 7000,
            "{model}"
        );
        compared += 1;
        // Under transformers' tokenization of the directory (the default --server), llama.cpp's
        // differs on a few transitions (Unicode normalization): the counts docs/diff-turns.md
        // quotes.
        let expected = match model {
            "qwen3-8b" => Some((12_985, 2)),
            "gpt-oss-120b" => Some((12_981, 3)),
            "llama-3.1-8b-instruct" => Some((15_964, 0)),
            _ => None,
        };
        if let Some(expected) = expected {
            let gguf_lines = transitions(&gguf, &corpus, dir.path());
            let dir_lines = transitions(&shared.join("models").join(model), &corpus, dir.path());
            assert_eq!(gguf_lines.len(), dir_lines.len(), "{model}");
            let differing = gguf_lines
                .iter()
                .zip(&dir_lines)
                .filter(|(g, d)| g != d)
                .count();
            assert_eq!((dir_lines.len(), differing), expected, "{model}");
        }
    }
    assert_eq!(compared, 10);
}

/// Each transition of `corpus -m MODEL` (default --server) as (row, prompt, held, next,
/// common prefix), in input order.
fn transitions(model: &Path, corpus: &[PathBuf], dir: &Path) -> Vec<(String, u64, [u64; 3])> {
    let lines = dir.join("transitions.jsonl");
    kvaudit()
        .args(["corpus", "-m", path_str(model)])
        .args(corpus)
        .args(["--now", "2026-01-15T10:00:00", "--format", "json"])
        .arg("--per-transition")
        .arg(&lines)
        .assert()
        .code(1);
    std::fs::read_to_string(&lines)
        .unwrap()
        .lines()
        .map(|l| {
            let t: Json = serde_json::from_str(l).unwrap();
            let n = |k: &str| t[k].as_u64().unwrap();
            (
                t["conversation"].as_str().unwrap().to_string(),
                n("from_prompt"),
                [
                    n("held_tokens"),
                    n("next_prompt_tokens"),
                    n("common_prefix_tokens"),
                ],
            )
        })
        .collect()
}

/// Files in `dir` and below (what a run may have left there).
fn left_in(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        out.push(e.path());
        if e.path().is_dir() {
            out.extend(left_in(&e.path()));
        }
    }
    out
}

/// With the tokenizer cache off, the files made from a GGUF live in a directory of the run's
/// own under TMPDIR, removed on every way out: success, a GGUF kvaudit refuses after making the
/// directory, and a tokenizer that fails to load. The failing tokenizer is named by the GGUF the
/// user gave, not by the file made from it.
#[test]
fn the_cache_off_leaves_nothing_behind_and_errors_name_the_gguf() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.gguf");
    std::fs::write(&good, tiny("qwen2").bytes()).unwrap();
    // A merge of two tokens whose result is not in the vocabulary: the tokenizer made from it
    // does not load.
    let broken = dir.path().join("broken.gguf");
    std::fs::write(&broken, tiny_with_merges("qwen2", &["h e", "q z"]).bytes()).unwrap();
    // A SentencePiece vocabulary: refused after the metadata is read.
    let mut bytes = tiny("qwen2").bytes();
    let spm = dir.path().join("spm.gguf");
    let at = bytes
        .windows(4)
        .position(|w| w == b"gpt2")
        .expect("the model key's value");
    bytes[at..at + 4].copy_from_slice(b"llam");
    std::fs::write(&spm, &bytes).unwrap();
    for (model, code) in [(&good, 0), (&broken, 2), (&spm, 2)] {
        let out = kvaudit()
            .env("KVAUDIT_TOKENIZER_CACHE", "off")
            .env("TMPDIR", tmp.path())
            .args([
                "render",
                "--model",
                path_str(model),
                "--user",
                "hello",
                "--reply",
                "hi",
            ])
            .assert()
            .code(code);
        let err = String::from_utf8_lossy(&out.get_output().stderr).to_string();
        if code == 2 {
            assert!(err.starts_with("error: "), "{err}");
            assert_eq!(err.trim_end().lines().count(), 1, "{err}");
            assert!(err.contains(path_str(model)), "{err}");
            assert!(!err.contains("kvaudit-gguf-"), "{err}");
        }
        assert_eq!(
            left_in(tmp.path()),
            Vec::<PathBuf>::new(),
            "{}",
            model.display()
        );
    }
}

/// A file named .gguf that is not one is told what is wrong with it; a local path, whatever
/// its spelling, never becomes a request to the Hub.
#[test]
fn a_local_file_is_read_as_itself_never_fetched() {
    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("models");
    std::fs::create_dir(&models).unwrap();
    std::fs::write(models.join("m.gguf"), b"not a gguf at all").unwrap();
    std::fs::write(models.join("m"), b"{}").unwrap();
    // A Hub that answers nothing: any request to it would be a failure of its own kind.
    for (model, want) in [
        (
            "models/m.gguf",
            "is not a GGUF file kvaudit can read: it does not start with GGUF",
        ),
        ("models/m", "is a file; kvaudit reads a model directory"),
    ] {
        let out = kvaudit()
            .current_dir(dir.path())
            .env("HF_ENDPOINT", "http://127.0.0.1:9")
            .env("HF_HUB_OFFLINE", "0")
            .args(["diff-turns", "--model", model])
            .assert()
            .code(2);
        let err = String::from_utf8_lossy(&out.get_output().stderr).to_string();
        assert!(err.contains(want), "{model}: {err}");
        assert!(!err.contains("127.0.0.1"), "{model}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
}

/// Metadata kvaudit does not use is moved past, not read: a GGUF carrying a gigabyte of it
/// (a sparse file here) is read in bounded memory and well within the hang guard.
#[test]
fn a_gigabyte_of_unread_metadata_is_skipped() {
    use std::io::{Seek, SeekFrom, Write};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.gguf");
    let rest = tiny("qwen2");
    let mut head = b"GGUF".to_vec();
    head.extend(3u32.to_le_bytes());
    head.extend(0u64.to_le_bytes());
    head.extend((rest.count + 1).to_le_bytes());
    let key = "general.description";
    head.extend((key.len() as u64).to_le_bytes());
    head.extend(key.as_bytes());
    head.extend(8u32.to_le_bytes());
    let gib = 1u64 << 30;
    head.extend(gib.to_le_bytes());
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(&head).unwrap();
    f.seek(SeekFrom::Current(gib as i64)).unwrap();
    f.write_all(&rest.entries).unwrap();
    drop(f);
    let m = common::run_measured(
        &[
            "render",
            "--model",
            path_str(&path),
            "--user",
            "hello",
            "--reply",
            "hi",
        ],
        &[],
        std::time::Duration::from_secs(20),
        512,
    );
    assert!(!m.killed, "not done within the hang guard");
    assert_eq!(m.code, 0, "{}", m.stderr);
}

/// Told to stop (SIGINT, SIGTERM, SIGHUP) mid-run, a run with the cache off removes its
/// scratch directory and exits as the signal would have (128 + its number); a missing local
/// GGUF file is not asked of the Hub.
#[test]
fn a_signal_leaves_no_scratch_behind_and_a_missing_gguf_is_not_fetched() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let model = dir.path().join("tiny.gguf");
    std::fs::write(&model, tiny("qwen2").bytes()).unwrap();
    let rows = std::fs::read(common::fixtures().join("corpus/chats.jsonl")).unwrap();
    let big = dir.path().join("big.jsonl");
    std::fs::write(&big, rows.repeat(30_000)).unwrap();
    for (signal, code) in [
        (libc::SIGTERM, 143),
        (libc::SIGINT, 130),
        (libc::SIGHUP, 129),
    ] {
        let mut child = common::kvaudit_process()
            .args(["corpus", "-m", path_str(&model), "-j", "1", path_str(&big)])
            .env("KVAUDIT_TOKENIZER_CACHE", "off")
            .env("TMPDIR", tmp.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Signalled once the scratch directory is there (the run is under way).
        let start = std::time::Instant::now();
        while left_in(tmp.path()).is_empty() && start.elapsed().as_secs() < 20 {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(
            !left_in(tmp.path()).is_empty(),
            "no scratch directory appeared"
        );
        // SAFETY: signalling our own child, not yet reaped.
        unsafe { libc::kill(child.id() as libc::pid_t, signal) };
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(code), "signal {signal}");
        assert_eq!(
            left_in(tmp.path()),
            Vec::<PathBuf>::new(),
            "signal {signal}"
        );
    }
    let d = dir.path();
    std::fs::create_dir(d.join("gg")).unwrap();
    let out = kvaudit()
        .current_dir(d)
        .env("HF_ENDPOINT", "http://127.0.0.1:9")
        .env_remove("HF_HUB_OFFLINE")
        .args(["diff-turns", "-m", "gg/missing.gguf"])
        .assert()
        .code(2);
    let err = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(err.contains("does not exist"), "{err}");
    assert!(!err.contains("127.0.0.1"), "{err}");
}
