//! The prepared tokenizer against the `tokenizers` crate reading tokenizer.json, on a large and
//! varied corpus (every chat template in ../shared is code, markup and prose in one), for every
//! model directory; and the cache's behaviour on the project's own tiny tokenizer.

mod common;

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
            prepared.is_prepared(),
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
    assert!(!first.is_prepared());
    let files: Vec<_> = std::fs::read_dir(cache.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .collect();
    assert_eq!(files.len(), 1, "one prepared file");
    let second = Tokenizer::load(&src, Some(cache.path())).unwrap();
    assert!(second.is_prepared());
    assert_eq!(first.sha256(), second.sha256());
    let text = "Thanks, makes sense. <|im_start|>user\nWhat is a thread?<|im_end|>";
    assert_eq!(first.encode(text).unwrap(), second.encode(text).unwrap());

    // A truncated cache file is ignored and rewritten, never trusted.
    let data = std::fs::read(&files[0]).unwrap();
    std::fs::write(&files[0], &data[..data.len() / 2]).unwrap();
    let third = Tokenizer::load(&src, Some(cache.path())).unwrap();
    assert!(!third.is_prepared());
    assert_eq!(third.encode(text).unwrap(), first.encode(text).unwrap());
    assert!(
        Tokenizer::load(&src, Some(cache.path()))
            .unwrap()
            .is_prepared()
    );

    // A flipped bit anywhere in the body is caught by its checksum.
    let mut flipped = std::fs::read(&files[0]).unwrap();
    let last = flipped.len() - 1;
    flipped[last] ^= 1;
    std::fs::write(&files[0], &flipped).unwrap();
    assert!(
        !Tokenizer::load(&src, Some(cache.path()))
            .unwrap()
            .is_prepared()
    );
    assert!(
        Tokenizer::load(&src, Some(cache.path()))
            .unwrap()
            .is_prepared()
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
            .is_prepared()
    );
    assert_eq!(std::fs::read_dir(cache.path()).unwrap().count(), 2);
}
