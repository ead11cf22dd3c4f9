//! The prepared tokenizer against the `tokenizers` crate reading tokenizer.json, on a large and
//! varied corpus (every chat template in ../shared is code, markup and prose in one), for every
//! model directory; and the cache's behaviour on the project's own tiny tokenizer.

use crate::common;

use std::path::Path;

use kvaudit::tokenize::Tokenizer;

fn corpus(shared: &Path) -> Vec<String> {
    let mut texts = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(shared.join("templates"))
        .unwrap()
        .filter_map(|e| e.ok())
        .collect();
    files.sort_by_key(|e| e.path());
    for f in files {
        if let Ok(t) = std::fs::read_to_string(f.path()) {
            texts.push(t);
        }
    }
    for f in [
        "reference/templates.md",
        "reference/llm-d.md",
        "seed/000_1554e6b969bbf78c.txt",
        "reference/scenarios.json",
    ] {
        if let Ok(t) = std::fs::read_to_string(shared.join(f)) {
            texts.push(t);
        }
    }
    texts.push(
        "\u{0}\u{1}\u{7f} \u{feff}BOM ﬁ ligature Å vs A\u{30a} (NFC) 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ‍👨‍👩‍👧 \t\t\n\n\n".into(),
    );
    texts
}

#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn prepared_tokenizers_match_the_crate_on_every_model() {
    let Some(shared) = common::shared_dir("prepared_tokenizers_match_the_crate_on_every_model")
    else {
        return;
    };
    let texts = corpus(&shared);
    let cache = tempfile::tempdir().unwrap();
    let mut models: Vec<_> = std::fs::read_dir(shared.join("models"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    models.sort();
    let mut total_tokens = 0;
    for dir in models {
        let path = dir.join("tokenizer.json");
        let plain = Tokenizer::load(&path, None).unwrap();
        Tokenizer::load(&path, Some(cache.path())).unwrap();
        let prepared = Tokenizer::load(&path, Some(cache.path())).unwrap();
        assert!(
            prepared.read_from_cache(),
            "{}: no prepared form",
            dir.display()
        );
        assert_eq!(plain.vocab_size(), prepared.vocab_size());
        for text in &texts {
            let a = plain.encode(text).unwrap();
            let b = prepared.encode(text).unwrap();
            assert_eq!(a, b, "{}: ids differ", dir.display());
            assert_eq!(plain.decode(&a), prepared.decode(&b));
            total_tokens += a.len();
        }
    }
    eprintln!("prepared tokenizers: {total_tokens} tokens identical to tokenizer.json");
}

#[test]
fn cache_is_keyed_by_content_and_survives_corruption() {
    let src = common::fixtures().join("models/tiny-think/tokenizer.json");
    let cache = tempfile::tempdir().unwrap();
    let first = Tokenizer::load(&src, Some(cache.path())).unwrap();
    // Prepared and verified by this load, and used at once.
    assert!(!first.read_from_cache() && first.is_prepared());
    let files: Vec<_> = std::fs::read_dir(cache.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .collect();
    assert_eq!(files.len(), 1, "one prepared file");
    let second = Tokenizer::load(&src, Some(cache.path())).unwrap();
    assert!(second.read_from_cache());
    assert_eq!(first.sha256(), second.sha256());
    let text = "Thanks, makes sense. <|im_start|>user\nWhat is a thread?<|im_end|>";
    assert_eq!(first.encode(text).unwrap(), second.encode(text).unwrap());

    // A truncated cache file is ignored and rewritten, never trusted.
    let data = std::fs::read(&files[0]).unwrap();
    std::fs::write(&files[0], &data[..data.len() / 2]).unwrap();
    let third = Tokenizer::load(&src, Some(cache.path())).unwrap();
    assert!(!third.read_from_cache());
    assert_eq!(third.encode(text).unwrap(), first.encode(text).unwrap());
    assert!(
        Tokenizer::load(&src, Some(cache.path()))
            .unwrap()
            .read_from_cache()
    );

    // A flipped bit anywhere in the body is caught by its checksum.
    let mut flipped = std::fs::read(&files[0]).unwrap();
    let last = flipped.len() - 1;
    flipped[last] ^= 1;
    std::fs::write(&files[0], &flipped).unwrap();
    assert!(
        !Tokenizer::load(&src, Some(cache.path()))
            .unwrap()
            .read_from_cache()
    );
    assert!(
        Tokenizer::load(&src, Some(cache.path()))
            .unwrap()
            .read_from_cache()
    );

    // Another tokenizer.json (one byte changed) gets its own entry.
    let dir = tempfile::tempdir().unwrap();
    let changed = dir.path().join("tokenizer.json");
    let mut bytes = std::fs::read(&src).unwrap();
    bytes.push(b'\n');
    std::fs::write(&changed, bytes).unwrap();
    assert!(
        !Tokenizer::load(&changed, Some(cache.path()))
            .unwrap()
            .read_from_cache()
    );
    assert_eq!(std::fs::read_dir(cache.path()).unwrap().count(), 2);
}

// Hostile input: each case ends in one clear error or a silent rebuild of the cache, never a
// panic, an abort on allocation or a hang (the CLI runs have a timeout as a hang guard).

/// `kvaudit diff-turns` with its prepared tokenizers in `cache`.
fn diff_turns_with_cache(cache: &Path) -> assert_cmd::Command {
    let mut cmd = common::kvaudit();
    cmd.env("KVAUDIT_TOKENIZER_CACHE", cache)
        .timeout(std::time::Duration::from_secs(60))
        .args(["diff-turns", "--now", "2026-01-15T10:00:00"]);
    cmd
}

fn tiny_json() -> serde_json::Value {
    let src = common::fixtures().join("models/tiny-think/tokenizer.json");
    serde_json::from_slice(&std::fs::read(src).unwrap()).unwrap()
}

/// A copy of tiny-think with `edit` applied to its tokenizer.json.
fn tiny_model(edit: impl FnOnce(&mut serde_json::Value)) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let from = common::fixtures().join("models/tiny-think");
    std::fs::copy(
        from.join("tokenizer_config.json"),
        dir.path().join("tokenizer_config.json"),
    )
    .unwrap();
    let mut json = tiny_json();
    edit(&mut json);
    std::fs::write(
        dir.path().join("tokenizer.json"),
        serde_json::to_vec(&json).unwrap(),
    )
    .unwrap();
    dir
}

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The one cache file of `dir`.
fn cache_file(dir: &Path) -> std::path::PathBuf {
    let files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files[0].clone()
}

#[test]
fn out_of_range_token_ids_are_one_clear_error() {
    let last_vocab = |j: &mut serde_json::Value| {
        let vocab = j["model"]["vocab"].as_object_mut().unwrap();
        let last = vocab.keys().next_back().unwrap().clone();
        vocab[&last] = 4294967295u64.into();
    };
    let just_over = |j: &mut serde_json::Value| {
        let vocab = j["model"]["vocab"].as_object_mut().unwrap();
        let last = vocab.keys().next_back().unwrap().clone();
        vocab[&last] = (1u64 << 24).into();
    };
    type Edit<'a> = &'a dyn Fn(&mut serde_json::Value);
    let cases: [(&str, Edit, &str); 2] = [
        ("vocab", &last_vocab, "token id 4294967295 is out of range"),
        ("2^24", &just_over, "token id 16777216 is out of range"),
    ];
    for (name, edit, message) in cases {
        let model = tiny_model(edit);
        let path = model.path().join("tokenizer.json");
        let cache = tempfile::tempdir().unwrap();
        for dir in [None, Some(cache.path())] {
            let err = Tokenizer::load(&path, dir).err().expect(name).to_string();
            assert!(err.contains(message), "{name}: {err}");
        }
        let out = diff_turns_with_cache(cache.path())
            .arg("--model")
            .arg(model.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{name}");
        let err = stderr_of(&out);
        assert_eq!(err.lines().count(), 1, "{name}: {err}");
        assert!(
            err.starts_with("error: ") && err.contains(message),
            "{name}: {err}"
        );
        assert_eq!(std::fs::read_dir(cache.path()).unwrap().count(), 0);
    }
    // The largest vocabulary id allowed still loads, both ways; an added token's id is
    // ignored by the crate (it takes the vocabulary's), so any value there is harmless.
    let largest = |j: &mut serde_json::Value| {
        let vocab = j["model"]["vocab"].as_object_mut().unwrap();
        let last = vocab.keys().next_back().unwrap().clone();
        vocab[&last] = ((1u64 << 24) - 1).into();
    };
    let added = |j: &mut serde_json::Value| j["added_tokens"][1]["id"] = 4294967295u64.into();
    let text = "Thanks, makes sense and is concise. <|im_start|>user";
    for edit in [&largest as Edit, &added] {
        let model = tiny_model(edit);
        let cache = tempfile::tempdir().unwrap();
        let path = model.path().join("tokenizer.json");
        let plain = Tokenizer::load(&path, Some(cache.path())).unwrap();
        let prepared = Tokenizer::load(&path, Some(cache.path())).unwrap();
        assert!(prepared.read_from_cache());
        assert_eq!(plain.encode(text).unwrap(), prepared.encode(text).unwrap());
        assert!(plain.encode(text).unwrap().iter().all(|&id| id < 1 << 24));
    }
}

#[cfg(unix)]
fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

#[cfg(unix)]
#[test]
fn a_tokenizer_that_is_not_a_regular_file_is_one_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo.json");
    mkfifo(&fifo);
    let zero = dir.path().join("zero.json");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    let cache = tempfile::tempdir().unwrap();
    for (file, message) in [
        (&fifo, "not a regular file"),
        (&zero, "not a regular file"),
        (&dir.path().to_path_buf(), "not a regular file"),
    ] {
        let out = diff_turns_with_cache(cache.path())
            .args(["--model", "fixtures/models/tiny-think", "--tokenizer"])
            .arg(file)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", file.display());
        let err = stderr_of(&out);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("error: cannot read tokenizer") && err.contains(message),
            "{err}"
        );
    }
    // Too big: refused from its size, before a byte is read (the file is sparse).
    let big = dir.path().join("big.json");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(300 << 20)
        .unwrap();
    let err = Tokenizer::load(&big, None).err().unwrap();
    // The path is the error's own text, the limit its source's.
    let err = format!("{err}: {}", std::error::Error::source(&err).unwrap());
    assert!(err.contains("larger than the 256 MiB limit"), "{err}");
}

#[cfg(unix)]
#[test]
fn a_cache_file_that_is_not_a_regular_file_is_replaced() {
    let src = common::fixtures().join("models/tiny-think/tokenizer.json");
    let text = "Thanks, makes sense. <|im_start|>user\nWhat is a thread?<|im_end|>";
    let want = Tokenizer::load(&src, None).unwrap().encode(text).unwrap();
    let cache = tempfile::tempdir().unwrap();
    Tokenizer::load(&src, Some(cache.path())).unwrap();
    let file = cache_file(cache.path());
    type Plant = fn(&Path);
    let plants: [(&str, Plant); 3] = [
        ("fifo", mkfifo),
        ("/dev/zero", |p| {
            std::os::unix::fs::symlink("/dev/zero", p).unwrap()
        }),
        ("directory", |p| std::fs::create_dir(p).unwrap()),
    ];
    for (name, plant) in plants {
        std::fs::remove_file(&file).unwrap();
        plant(&file);
        let out = diff_turns_with_cache(cache.path())
            .args(["--model", "fixtures/models/tiny-think"])
            .output()
            .unwrap();
        // 1: the tiny template's findings; what matters is that the run completed.
        assert_eq!(out.status.code(), Some(1), "{name}: {}", stderr_of(&out));
        assert_eq!(stderr_of(&out), "", "{name}");
        // A directory cannot be renamed over; the FIFO and the link are replaced by the
        // rebuilt file (the rename swaps the entry, /dev/zero is never opened for writing).
        if name == "directory" {
            assert!(file.is_dir());
            std::fs::remove_dir(&file).unwrap();
            Tokenizer::load(&src, Some(cache.path())).unwrap();
            continue;
        }
        let meta = std::fs::symlink_metadata(&file).unwrap();
        assert!(meta.is_file(), "{name}: {meta:?}");
        let tok = Tokenizer::load(&src, Some(cache.path())).unwrap();
        assert!(tok.read_from_cache(), "{name}");
        assert_eq!(tok.encode(text).unwrap(), want, "{name}");
    }
    // A cache file far larger than any prepared form is not read.
    std::fs::File::create(&file)
        .unwrap()
        .set_len(600 << 20)
        .unwrap();
    let tok = Tokenizer::load(&src, Some(cache.path())).unwrap();
    assert!(!tok.read_from_cache());
    assert!(std::fs::metadata(&file).unwrap().len() < 1 << 20);
}

/// tiny-think with the ids of two ordinary tokens exchanged: another tokenizer whose ids
/// differ on the same text.
fn tiny_swapped() -> tempfile::TempDir {
    tiny_model(|j| {
        let vocab = j["model"]["vocab"].as_object_mut().unwrap();
        let (a, b) = (vocab["Ġthe"].clone(), vocab["Ġconcise"].clone());
        vocab["Ġthe"] = b;
        vocab["Ġconcise"] = a;
    })
}

#[test]
fn a_cache_file_relabelled_from_another_model_is_rebuilt() {
    let a = common::fixtures().join("models/tiny-think/tokenizer.json");
    let model_b = tiny_swapped();
    let b = model_b.path().join("tokenizer.json");
    let text = "the answer is concise";
    let want_b = Tokenizer::load(&b, None).unwrap().encode(text).unwrap();
    assert_ne!(
        Tokenizer::load(&a, None).unwrap().encode(text).unwrap(),
        want_b
    );

    let cache_a = tempfile::tempdir().unwrap();
    Tokenizer::load(&a, Some(cache_a.path())).unwrap();
    let file_a = cache_file(cache_a.path());
    let cache_b = tempfile::tempdir().unwrap();
    Tokenizer::load(&b, Some(cache_b.path())).unwrap();
    let file_b = cache_file(cache_b.path());
    let key_b: [u8; 16] = std::fs::read(&file_b).unwrap()[8..24].try_into().unwrap();

    // Copied as it is; with the key in its header rewritten for B; and with the checksum
    // recomputed for that key too.
    let copied = std::fs::read(&file_a).unwrap();
    let mut rekeyed = copied.clone();
    rekeyed[8..24].copy_from_slice(&key_b);
    let mut relabelled = rekeyed.clone();
    reseal(&mut relabelled);
    for (name, data) in [
        ("copied", copied),
        ("rekeyed", rekeyed),
        ("relabelled", relabelled),
    ] {
        std::fs::write(&file_b, &data).unwrap();
        let tok = Tokenizer::load(&b, Some(cache_b.path())).unwrap();
        assert!(
            !tok.read_from_cache(),
            "{name}: another model's tables were used"
        );
        assert_eq!(tok.encode(text).unwrap(), want_b, "{name}");
        let again = Tokenizer::load(&b, Some(cache_b.path())).unwrap();
        assert!(again.read_from_cache(), "{name}: not rebuilt");
        assert_eq!(again.encode(text).unwrap(), want_b, "{name}");
        assert_eq!(again.sha256(), tok.sha256());

        std::fs::write(&file_b, &data).unwrap();
        let out = diff_turns_with_cache(cache_b.path())
            .arg("--model")
            .arg(model_b.path())
            .output()
            .unwrap();
        // 1: the tiny template's findings; what matters is that the run completed.
        assert_eq!(out.status.code(), Some(1), "{name}: {}", stderr_of(&out));
        assert_eq!(stderr_of(&out), "", "{name}");
    }
}

/// Byte offset of a prepared file's merge table and its number of slots, each slot a key and
/// then its value. The layout is prepared/file.rs's: magic, key, checksum, then length-prefixed or
/// counted fields.
fn merge_table(data: &[u8]) -> (usize, usize) {
    let u64_at = |at: usize| u64::from_le_bytes(data[at..at + 8].try_into().unwrap()) as usize;
    let mut at = 32;
    at += 8 + u64_at(at); // sha256
    at += 16; // offsets of the vocabulary and merges in tokenizer.json
    at += 8 + u64_at(at); // the pipeline around the model, as JSON
    let n_ids = u64_at(at + 8);
    at += 16;
    at += 8 + u64_at(at); // vocabulary text
    at += n_ids * 8; // starts and lengths
    at += 8 + u64_at(at) * 4; // vocabulary table
    let slots = u64_at(at);
    (at + 8, slots)
}

/// Exchange the ranks of the merges ranked `r1` and `r2`, and recompute the checksum as
/// prepared/file.rs does (seeded with the key in the header): a deliberate forgery.
fn swap_merge_ranks(data: &mut [u8], r1: u64, r2: u64) {
    let (table, slots) = merge_table(data);
    let key_at = |i: usize| table + i * 16;
    let val_at = |i: usize| table + i * 16 + 8;
    let val = |data: &[u8], i: usize| {
        u64::from_le_bytes(data[val_at(i)..val_at(i) + 8].try_into().unwrap())
    };
    let occupied = |data: &[u8], i: usize| data[key_at(i)..key_at(i) + 8] != [0xff; 8];
    let find = |data: &[u8], rank: u64| {
        (0..slots)
            .find(|&i| occupied(data, i) && val(data, i) >> 32 == rank)
            .unwrap()
    };
    let (i, j) = (find(data, r1), find(data, r2));
    let (vi, vj) = (val(data, i), val(data, j));
    let swapped = [
        (i, (vj & !0xffff_ffff) | (vi & 0xffff_ffff)),
        (j, (vi & !0xffff_ffff) | (vj & 0xffff_ffff)),
    ];
    for (slot, v) in swapped {
        data[val_at(slot)..val_at(slot) + 8].copy_from_slice(&v.to_le_bytes());
    }
    reseal(data);
}

/// The checksum recomputed as prepared/file.rs computes it (seeded with the key in the header).
fn reseal(data: &mut [u8]) {
    let key = u128::from_le_bytes(data[8..24].try_into().unwrap());
    let seed = key as u64 ^ (key >> 64) as u64;
    let sum = xxhash_rust::xxh3::xxh3_64_with_seed(&data[32..], seed);
    data[24..32].copy_from_slice(&sum.to_le_bytes());
}

/// A prepared file with two merges exchanged and a valid checksum is refused and rebuilt,
/// and the run's ids stay the crate's.
fn forged_merges_are_refused(src: &Path, r1: u64, r2: u64, texts: &[&str]) {
    let plain = Tokenizer::load(src, None).unwrap();
    let cache = tempfile::tempdir().unwrap();
    Tokenizer::load(src, Some(cache.path())).unwrap();
    let file = cache_file(cache.path());
    let mut data = std::fs::read(&file).unwrap();
    swap_merge_ranks(&mut data, r1, r2);
    std::fs::write(&file, &data).unwrap();
    let tok = Tokenizer::load(src, Some(cache.path())).unwrap();
    assert!(
        !tok.read_from_cache(),
        "{}: a forged table was used",
        src.display()
    );
    let again = Tokenizer::load(src, Some(cache.path())).unwrap();
    assert!(again.read_from_cache(), "{}: not rebuilt", src.display());
    assert_ne!(std::fs::read(&file).unwrap(), data);
    for text in texts {
        let want = plain.encode(text).unwrap();
        assert_eq!(tok.encode(text).unwrap(), want, "{text}");
        assert_eq!(again.encode(text).unwrap(), want, "{text}");
    }
}

#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn a_forged_cache_file_with_merges_swapped_is_rebuilt() {
    let tiny = common::fixtures().join("models/tiny-think/tokenizer.json");
    forged_merges_are_refused(&tiny, 0, 17, &["the answer is concise", "there are three"]);
    let Some(shared) = common::shared_dir("a_forged_cache_file_with_merges_swapped_is_rebuilt")
    else {
        return;
    };
    let qwen3 = shared.join("models/qwen3-8b/tokenizer.json");
    // Ranks within the spot-checked prefix (the first 1024 merges).
    forged_merges_are_refused(
        &qwen3,
        2,
        900,
        &["What is the difference between a process and a thread? interesting international"],
    );
}

/// A merge table with no free slot would make every lookup of an absent pair probe forever;
/// such a file (checksum valid) is refused before any lookup.
#[test]
fn a_forged_cache_file_with_a_full_table_does_not_hang() {
    let src = common::fixtures().join("models/tiny-think/tokenizer.json");
    let cache = tempfile::tempdir().unwrap();
    Tokenizer::load(&src, Some(cache.path())).unwrap();
    let file = cache_file(cache.path());
    let mut data = std::fs::read(&file).unwrap();
    let (table, slots) = merge_table(&data);
    for i in 0..slots {
        let k = &mut data[table + i * 16..table + i * 16 + 8];
        if k == [0xff; 8] {
            k.copy_from_slice(&(u64::MAX - 1 - i as u64).to_le_bytes());
        }
    }
    reseal(&mut data);
    std::fs::write(&file, &data).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let tok = Tokenizer::load(&src, Some(cache.path())).unwrap();
        let ids = tok.encode("the answer is concise, zebra quux").unwrap();
        tx.send((tok.read_from_cache(), ids)).unwrap();
    });
    let (prepared, _) = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("loading a full table hung");
    assert!(!prepared);
}

/// The loader takes a merge table up to three quarters full (a free slot still ends every
/// probe of an absent pair) and refuses one more used slot; the ids stay the crate's.
#[test]
fn a_merge_table_three_quarters_full_loads_and_one_slot_more_is_refused() {
    let src = common::fixtures().join("models/tiny-think/tokenizer.json");
    let plain = Tokenizer::load(&src, None).unwrap();
    let text = "the answer is concise, zebra quux";
    for (over, loads) in [(0usize, true), (1, false)] {
        let cache = tempfile::tempdir().unwrap();
        Tokenizer::load(&src, Some(cache.path())).unwrap();
        let file = cache_file(cache.path());
        let mut data = std::fs::read(&file).unwrap();
        let (table, slots) = merge_table(&data);
        let free = |data: &[u8], i: usize| data[table + i * 16..table + i * 16 + 8] == [0xff; 8];
        let used = (0..slots).filter(|&i| !free(&data, i)).count();
        let mut fill = (slots / 4 * 3 + over)
            .checked_sub(used)
            .expect("prepare left the table at most two thirds full");
        for i in 0..slots {
            if fill > 0 && free(&data, i) {
                // No pair of real ids has this key.
                let key = u64::MAX - 1 - i as u64;
                data[table + i * 16..table + i * 16 + 8].copy_from_slice(&key.to_le_bytes());
                fill -= 1;
            }
        }
        assert_eq!(fill, 0);
        reseal(&mut data);
        std::fs::write(&file, &data).unwrap();
        let tok = Tokenizer::load(&src, Some(cache.path())).unwrap();
        assert_eq!(
            tok.read_from_cache(),
            loads,
            "{over} slots over three quarters"
        );
        assert_eq!(tok.encode(text).unwrap(), plain.encode(text).unwrap());
    }
}

/// The fuzz harness seals its bodies with `prepared_file`: it must give the very file the
/// cache holds, or the harness would explore a header that `load` refuses (as it did while
/// it kept a copy of an old magic).
#[test]
fn prepared_file_seals_a_body_as_the_cache_does() {
    let src = common::fixtures().join("models/tiny-think/tokenizer.json");
    let cache = tempfile::tempdir().unwrap();
    Tokenizer::load(&src, Some(cache.path())).unwrap();
    let data = std::fs::read(cache_file(cache.path())).unwrap();
    let source = std::fs::read(&src).unwrap();
    assert_eq!(kvaudit::tokenize::prepared_file(&data[32..], &source), data);
    assert_ne!(kvaudit::tokenize::prepared_file(&data[32..], b"{}"), data);
}

/// Found by the round-3 sweep: small tokenizer.json files that made the crate allocate
/// gigabytes (stacked empty-pattern Replace normalizers, a fixed padding of 4e9, a 10 MB
/// Prepend, millions of merges or template pieces). Each is one error naming the bound, at
/// once, in little memory; a padding config is ignored, as transformers encodes prompts
/// without padding.
#[test]
fn a_tokenizer_that_asks_for_gigabytes_is_refused_or_ignored() {
    let cache = tempfile::tempdir().unwrap();
    let conv = "fixtures/conversations/tool-loop.json";
    let empty = serde_json::json!({"type": "Replace", "pattern": {"String": ""}, "content": "ab"});
    type Edit = Box<dyn Fn(&mut serde_json::Value)>;
    let cases: Vec<(&str, Edit, Option<&str>)> = vec![
        (
            "stacked empty Replace",
            Box::new(move |j| {
                j["normalizer"] =
                    serde_json::json!({"type": "Sequence", "normalizers": vec![empty.clone(); 8]})
            }),
            Some("the normalizer can make a text 6561 times longer"),
        ),
        (
            "10 MB Prepend",
            Box::new(|j| {
                j["normalizer"] =
                    serde_json::json!({"type": "Prepend", "prepend": "x".repeat(10 << 20)})
            }),
            Some("prepends 10485760 bytes"),
        ),
        (
            "2M merges",
            Box::new(|j| j["model"]["merges"] = serde_json::json!(vec!["a b"; 2 << 20])),
            Some("model.merges has 2097152 entries"),
        ),
        (
            "1M template pieces",
            Box::new(|j| {
                j["post_processor"] = serde_json::json!({"type": "TemplateProcessing",
                    "single": vec![serde_json::json!({"Sequence": {"id": "A", "type_id": 0}}); 1 << 20],
                    "pair": [], "special_tokens": {}})
            }),
            Some("the post_processor's single has 1048576 entries"),
        ),
        (
            "fixed padding of 4e9",
            Box::new(|j| {
                j["padding"] = serde_json::json!({"strategy": {"Fixed": 4_000_000_000u64},
                    "direction": "Right", "pad_to_multiple_of": null, "pad_id": 0,
                    "pad_type_id": 0, "pad_token": "x"})
            }),
            None,
        ),
    ];
    for (what, edit, refused) in cases {
        let model = tiny_model(edit);
        let out = diff_turns_with_cache(cache.path())
            .arg("--model")
            .arg(model.path())
            .args(["-c", conv])
            .timeout(std::time::Duration::from_secs(30))
            .output()
            .unwrap();
        let err = stderr_of(&out);
        match refused {
            Some(says) => {
                assert_eq!(out.status.code(), Some(2), "{what}: {err}");
                assert_eq!(err.lines().count(), 1, "{what}: {err}");
                assert!(
                    err.starts_with("error: ") && err.contains(says),
                    "{what}: {err}"
                );
            }
            // Audited like the model without it.
            None => assert!(matches!(out.status.code(), Some(0 | 1)), "{what}: {err}"),
        }
    }
}

/// The llama.cpp form has a prepared entry of its own, keyed by the same tokenizer.json: a run
/// that finds it reads it (no rewrite, no reference tokenizer built), and it still tokenizes
/// without the normalizer where the plain form normalizes. Both name the file's own SHA-256.
#[test]
fn the_llamacpp_form_is_cached_beside_the_plain_one() {
    let (dir, _) = common::tiny_tokenizer(|j| j["normalizer"] = serde_json::json!({"type": "NFC"}));
    let src = dir.path().join("tokenizer.json");
    let cache = tempfile::tempdir().unwrap();
    let plain = Tokenizer::load(&src, Some(cache.path())).unwrap();
    let llama = Tokenizer::load_as_llamacpp(&src, Some(cache.path())).unwrap();
    assert!(!llama.read_from_cache() && llama.is_prepared());
    assert_eq!(std::fs::read_dir(cache.path()).unwrap().count(), 2);
    let again = Tokenizer::load_as_llamacpp(&src, Some(cache.path())).unwrap();
    assert!(again.read_from_cache());
    let plain_again = Tokenizer::load(&src, Some(cache.path())).unwrap();
    assert!(plain_again.read_from_cache());
    // A decomposed é: NFC composes it for transformers, llama.cpp keeps both characters.
    let text = "caf\u{65}\u{301} ok";
    assert_ne!(plain.encode(text).unwrap(), llama.encode(text).unwrap());
    assert_eq!(again.encode(text).unwrap(), llama.encode(text).unwrap());
    assert_eq!(
        plain_again.encode(text).unwrap(),
        plain.encode(text).unwrap()
    );
    assert_eq!(llama.sha256(), plain.sha256());
    assert_eq!(again.sha256(), plain.sha256());
}
