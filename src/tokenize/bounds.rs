//! What a tokenizer.json may ask of the tokenizer built from it. The file is untrusted (a Hub
//! repository, a pull request), and the tokenizers crate sizes its tables by it and applies its
//! normalizers to every prompt: a few kilobytes of stacked `Replace` normalizers with an empty
//! pattern make every text thousands of times longer, and millions of merges take gigabytes.
//! The bounds are far above any real tokenizer (the largest vocabularies are about 260,000
//! tokens; real normalizers grow text at most threefold: " " to "▁").

use serde_json::Value as Json;

use super::TokenizerFileError;

/// Merges of a BPE model (real ones: under 520,000).
pub const MAX_MERGES: usize = 1 << 20;
/// Vocabulary entries and added tokens.
pub const MAX_VOCAB: usize = 1 << 20;
/// How many times longer the normalizers may make a text, at worst.
pub const MAX_GROWTH: u64 = 64;
/// Text a normalizer or pre-tokenizer adds (`Prepend`, a `Metaspace` replacement).
pub const MAX_AFFIX: usize = 1024;
/// Pieces of a post-processor template and ids per special token.
pub const MAX_TEMPLATE: usize = 1024;
/// Steps of a `Sequence` normalizer or post-processor.
const MAX_STEPS: usize = 64;

/// The bounds on counts, checked on the file's bytes before any tree is built from them (a
/// tree of millions of merges is itself gigabytes): nothing is kept but the counts. A file
/// that does not parse passes here; the parse that follows names its error.
pub fn check_counts(bytes: &[u8]) -> Result<(), TokenizerFileError> {
    let Ok(top) = serde_json::from_slice::<Top>(bytes) else {
        return Ok(());
    };
    if let Some(p) = &top.post_processor {
        p.check(0)?;
    }
    let model = top.model.unwrap_or_default();
    for (what, n, max) in [
        ("model.merges", model.merges.0, MAX_MERGES),
        ("model.vocab", model.vocab.0, MAX_VOCAB),
        ("added_tokens", top.added_tokens.0, MAX_VOCAB),
    ] {
        if n > max {
            return Err(over_bound(format!(
                "{what} has {n} entries, more than the {max} kvaudit accepts"
            )));
        }
    }
    Ok(())
}

#[derive(serde::Deserialize, Default)]
struct Top {
    #[serde(default)]
    model: Option<ModelCounts>,
    #[serde(default)]
    added_tokens: Count,
    #[serde(default)]
    post_processor: Option<ProcessorCounts>,
}

/// A post-processor's template sizes, and those of the steps of a Sequence.
#[derive(serde::Deserialize, Default)]
struct ProcessorCounts {
    #[serde(default)]
    single: Count,
    #[serde(default)]
    pair: Count,
    #[serde(default)]
    special_tokens: Option<std::collections::HashMap<String, SpecialCounts>>,
    #[serde(default)]
    processors: Option<Vec<ProcessorCounts>>,
}

/// The ids and tokens of one special token of a template.
#[derive(serde::Deserialize, Default)]
struct SpecialCounts {
    #[serde(default)]
    ids: Count,
    #[serde(default)]
    tokens: Count,
}

impl ProcessorCounts {
    fn check(&self, depth: usize) -> Result<(), TokenizerFileError> {
        if depth > 8 {
            return Err(over_bound(
                "the post_processor nests Sequences more than 8 deep".into(),
            ));
        }
        let specials = self.special_tokens.as_ref();
        let longest_special = specials
            .into_iter()
            .flat_map(|m| m.values())
            .map(|s| s.ids.0.max(s.tokens.0))
            .max()
            .unwrap_or(0);
        for (what, n) in [
            ("single", self.single.0),
            ("pair", self.pair.0),
            ("special_tokens", specials.map_or(0, |m| m.len())),
            ("special token ids", longest_special),
        ] {
            if n > MAX_TEMPLATE {
                return Err(over_bound(format!(
                    "the post_processor's {what} has {n} entries, more than {MAX_TEMPLATE}"
                )));
            }
        }
        let steps = self.processors.as_deref().unwrap_or_default();
        if steps.len() > MAX_STEPS {
            return Err(over_bound(format!(
                "the post_processor has {} steps, more than {MAX_STEPS}",
                steps.len()
            )));
        }
        steps.iter().try_for_each(|p| p.check(depth + 1))
    }
}

#[derive(serde::Deserialize, Default)]
struct ModelCounts {
    #[serde(default)]
    merges: Count,
    #[serde(default)]
    vocab: Count,
}

/// The number of entries of a list or map, read without keeping any (anything else is 0).
#[derive(Default)]
struct Count(usize);

impl<'de> serde::Deserialize<'de> for Count {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Count, D::Error> {
        use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
        struct Counter;
        impl<'de> Visitor<'de> for Counter {
            type Value = Count;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any value")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Count, A::Error> {
                let mut n = 0;
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    n += 1;
                }
                Ok(Count(n))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Count, A::Error> {
                let mut n = 0;
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {
                    n += 1;
                }
                Ok(Count(n))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Count, E> {
                Ok(Count(0))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Count, E> {
                Ok(Count(0))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Count, E> {
                Ok(Count(0))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Count, E> {
                Ok(Count(0))
            }
            fn visit_str<E>(self, _: &str) -> Result<Count, E> {
                Ok(Count(0))
            }
            fn visit_unit<E>(self) -> Result<Count, E> {
                Ok(Count(0))
            }
            fn visit_none<E>(self) -> Result<Count, E> {
                Ok(Count(0))
            }
        }
        d.deserialize_any(Counter)
    }
}

/// Refuses a tokenizer.json whose normalizer or pre-tokenizer breaks a bound (the counts are
/// [`check_counts`]'s, on the bytes before the tree).
pub fn check(json: &Json) -> Result<(), TokenizerFileError> {
    if let Some(n) = json.get("normalizer").filter(|n| !n.is_null()) {
        let growth = growth(n, 0)?;
        if growth > MAX_GROWTH {
            return Err(over_bound(format!(
                "the normalizer can make a text {growth} times longer (more than {MAX_GROWTH}): \
                 its Replace steps grow every match"
            )));
        }
    }
    if let Some(p) = json.get("pre_tokenizer").filter(|p| !p.is_null()) {
        affixes(p, "pre_tokenizer", 0)?;
    }
    Ok(())
}

fn over_bound(message: String) -> TokenizerFileError {
    TokenizerFileError::OverBound(message)
}

fn kind(v: &Json) -> &str {
    v.get("type").and_then(Json::as_str).unwrap_or("")
}

fn steps<'a>(v: &'a Json, key: &str, what: &str) -> Result<&'a [Json], TokenizerFileError> {
    let list = v
        .get(key)
        .and_then(Json::as_array)
        .map_or(&[][..], Vec::as_slice);
    if list.len() > MAX_STEPS {
        return Err(over_bound(format!(
            "the {what} has {} steps, more than {MAX_STEPS}",
            list.len()
        )));
    }
    Ok(list)
}

/// At most how many times longer `n` makes a text: each `Replace` can write its content for
/// every byte it matches, or between every two bytes when its pattern can match nothing (an
/// empty string; any regex is counted so).
fn growth(n: &Json, depth: usize) -> Result<u64, TokenizerFileError> {
    if depth > 8 {
        return Err(over_bound(
            "the normalizer nests Sequences more than 8 deep".into(),
        ));
    }
    Ok(match kind(n) {
        "Sequence" => {
            let mut total = 1u64;
            for step in steps(n, "normalizers", "normalizer")? {
                total = total.saturating_mul(growth(step, depth + 1)?);
            }
            total
        }
        "Replace" => {
            let content = n.get("content").and_then(Json::as_str).map_or(0, str::len) as u64;
            match n
                .get("pattern")
                .and_then(|p| p.get("String"))
                .and_then(Json::as_str)
            {
                Some(s) if !s.is_empty() => content.div_ceil(s.len() as u64).max(1),
                _ => content + 1,
            }
        }
        "Prepend" => {
            let prepend = n.get("prepend").and_then(Json::as_str).map_or(0, str::len);
            if prepend > MAX_AFFIX {
                return Err(over_bound(format!(
                    "the normalizer prepends {prepend} bytes, more than {MAX_AFFIX}"
                )));
            }
            1
        }
        _ => 1,
    })
}

/// Refuses a pre-tokenizer that adds more than [`MAX_AFFIX`] bytes (a Metaspace replacement).
fn affixes(p: &Json, what: &str, depth: usize) -> Result<(), TokenizerFileError> {
    if depth > 8 {
        return Err(over_bound(format!(
            "the {what} nests Sequences more than 8 deep"
        )));
    }
    if kind(p) == "Sequence" {
        for step in steps(p, "pretokenizers", what)? {
            affixes(step, what, depth + 1)?;
        }
        return Ok(());
    }
    let replacement = p
        .get("replacement")
        .and_then(Json::as_str)
        .map_or(0, str::len);
    if replacement > MAX_AFFIX {
        return Err(over_bound(format!(
            "the {what}'s replacement is {replacement} bytes, more than {MAX_AFFIX}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn real_normalizers_pass_and_growing_ones_are_refused() {
        // Llama 2 / Mistral: Prepend "▁", Replace " " -> "▁" (3 bytes for 1).
        let sentencepiece = json!({"normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "▁"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}});
        assert_eq!(check(&sentencepiece), Ok(()));
        let empty = json!({"type": "Replace", "pattern": {"String": ""}, "content": "ab"});
        let stacked = json!({"normalizer": {"type": "Sequence",
            "normalizers": vec![empty; 4]}});
        let err = check(&stacked).unwrap_err().to_string();
        assert!(err.contains("81 times longer"), "{err}");
        let prepend = json!({"normalizer": {"type": "Prepend", "prepend": "x".repeat(2000)}});
        assert!(
            check(&prepend)
                .unwrap_err()
                .to_string()
                .contains("prepends 2000 bytes")
        );
    }

    #[test]
    fn counts_are_read_from_the_bytes() {
        let text = json!({"model": {"merges": vec!["a b"; MAX_MERGES + 1], "vocab": {"a": 0}},
            "added_tokens": []})
        .to_string();
        let err = check_counts(text.as_bytes()).unwrap_err().to_string();
        assert!(err.contains("model.merges has 1048577 entries"), "{err}");
        assert_eq!(check_counts(br#"{"model": {"vocab": {"a": 0}}}"#), Ok(()));
        assert_eq!(check_counts(b"not json"), Ok(()));
    }

    #[test]
    fn counts_over_the_bounds_are_refused() {
        let merges = json!({"model": {"type": "BPE", "merges": vec!["a b"; MAX_MERGES + 1]}});
        let counts = |j: &Json| check_counts(j.to_string().as_bytes()).map_err(|e| e.to_string());
        assert!(counts(&merges).unwrap_err().contains("model.merges"));
        let template = json!({"post_processor": {"type": "TemplateProcessing",
            "single": vec![json!({"Sequence": {"id": "A", "type_id": 0}}); MAX_TEMPLATE + 1]}});
        assert!(counts(&template).unwrap_err().contains("single"));
        let ids = json!({"post_processor": {"type": "TemplateProcessing", "special_tokens":
            {"A": {"id": "A", "ids": vec![1; MAX_TEMPLATE + 1], "tokens": ["A"]}}}});
        assert!(counts(&ids).unwrap_err().contains("special token ids"));
    }
}
