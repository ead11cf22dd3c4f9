//! A prepared form of byte-level BPE tokenizers that loads in milliseconds.
//!
//! Building the `tokenizers` crate's BPE from tokenizer.json (JSON parse, ~150k vocabulary
//! strings, ~150k merges into hash maps) takes 0.3–1 s, which dominates a kvaudit run. The
//! prepared file holds the vocabulary as one string blob and both lookup tables as ready-made
//! open-addressing arrays; everything else (normalizer, pre-tokenizer, added tokens, decoder)
//! is still built by the `tokenizers` crate from the original JSON, so only the merge loop is
//! ours. A prepared file is written only after it encodes a probe corpus to exactly the ids of
//! the crate's own tokenizer, and it is keyed by the xxh3-128 of its source.

mod bpe;
mod file;
mod pipeline;
mod short_words;
mod spot_check;

use std::path::PathBuf;

use serde_json::Value as Json;
use tokenizers::TokenizerImpl;
use tokenizers::decoders::DecoderWrapper;
use tokenizers::normalizers::NormalizerWrapper;
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::processors::PostProcessorWrapper;

pub use bpe::FastBpe;
pub use file::{load, prepare, prepared_file};

use super::TokenizerFileError;

/// Why a prepared file is not used (the tokenizer is then built from tokenizer.json, and the
/// file written again).
#[derive(Debug, thiserror::Error)]
pub enum PreparedError {
    /// The file cannot be opened as a regular file, or read.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("prepared tokenizer too large")]
    TooLarge,
    /// Written in another version of the format.
    #[error("not a prepared tokenizer of this version")]
    OtherVersion,
    /// Its key is another tokenizer.json's.
    #[error("prepared for another tokenizer.json")]
    OtherSource,
    /// Cut short, damaged, or tables that would make a lookup fail or loop.
    #[error("corrupt prepared tokenizer")]
    Corrupt,
    /// Tables that disagree with tokenizer.json on the spot check.
    #[error("prepared tables differ from tokenizer.json")]
    Differs,
    /// The crate cannot build the pipeline around the model from what the file holds.
    #[error("{0}")]
    Pipeline(String),
}

const EMPTY32: u32 = u32::MAX;
const EMPTY64: u64 = u64::MAX;

pub type FastTokenizer = TokenizerImpl<
    FastBpe,
    NormalizerWrapper,
    PreTokenizerWrapper,
    PostProcessorWrapper,
    DecoderWrapper,
>;

/// The merge table's key of a pair of ids.
#[inline]
fn merge_key(left: u32, right: u32) -> u64 {
    u64::from(left) << 32 | u64::from(right)
}

/// The slot of `x` in an open-addressed table of `mask + 1` (a power of two) slots: the top
/// bits of `x` times 2^64 / φ. A product's low bits depend only on the low bits of `x`; taking
/// bits 17 and up, as v04 did, let the merge slot see the right id and 4 bits of the left one,
/// and a hit on Qwen3's merges took 6.7 probes on average (1.2 now).
#[inline]
pub(super) fn table_slot(x: u64, mask: usize) -> usize {
    // The mask is 2^bits - 1: its trailing ones are a bit scan, where `count_ones` is a
    // dozen instructions on a CPU without popcnt (the x86-64 baseline this is built for).
    let bits = mask.trailing_ones();
    if bits == 0 {
        return 0;
    }
    (x.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - bits)) as usize & mask
}

/// Token ids must be below 2^24. The largest real vocabularies have ~262k entries (Gemma 3:
/// 262,144), so this leaves 64x headroom, while an id-indexed table stays under 64 MiB per u32
/// column: a hostile id like 4294967295 would otherwise size a 16 GiB table before any other
/// check could refuse the file.
pub const MAX_TOKEN_ID: u64 = 1 << 24;

/// Refuse vocabulary ids no real tokenizer has, before anything is sized by an id. The
/// `id` of added tokens is not checked: the crate ignores it (an added token gets its
/// vocabulary id, or the next free one), and so does `assemble`.
pub fn check_ids(source: &Json) -> Result<(), TokenizerFileError> {
    let vocab = source.pointer("/model/vocab").and_then(Json::as_object);
    for id in vocab.into_iter().flat_map(|v| v.values()) {
        if let Json::Number(n) = id {
            // A negative or fractional id is not a u64; the crate refuses those itself.
            check_id(n.as_u64().unwrap_or(u64::MAX))?;
        }
    }
    Ok(())
}

pub fn check_id(id: u64) -> Result<(), TokenizerFileError> {
    if id < MAX_TOKEN_ID {
        return Ok(());
    }
    Err(TokenizerFileError::IdOutOfRange { id })
}

/// Texts every prepared tokenizer must encode exactly like the crate before it is kept:
/// prose, code, numbers, whitespace runs, several scripts, emoji, and every added token.
pub fn probe_texts(source: &Json) -> Vec<String> {
    let mut texts = fixed_probe_texts();
    if let Some(added) = source.get("added_tokens").and_then(Json::as_array) {
        let specials: Vec<&str> = added
            .iter()
            .filter_map(|t| t.get("content").and_then(Json::as_str))
            .collect();
        texts.push(specials.join(" x"));
        texts.push(specials.concat());
    }
    if let Some(vocab) = source.pointer("/model/vocab").and_then(Json::as_object) {
        // Every 97th vocabulary entry, as text: exercises merges across the whole rank range.
        let sample: Vec<&str> = vocab.keys().step_by(97).map(String::as_str).collect();
        texts.push(sample.concat());
    }
    texts
}

/// Prose, code, numbers, whitespace runs, several scripts, emoji, and text that NFC changes
/// (a combining accent, a decomposed Hangul syllable, an angstrom sign).
pub fn fixed_probe_texts() -> Vec<String> {
    vec![
        "What is the difference between a process and a thread? A process is an independent program.".to_string(),
        "fn main() {\n    let x = vec![1, 2, 3];\n\tprintln!(\"{x:?}\");\n}\n\n\n   trailing   spaces  ".to_string(),
        "1234567890 3.14159 1e-05 -42 0x1F 2026-01-15T10:00:00 $1,000,000 50%".to_string(),
        "Größe naïve café — 東京の天気は晴れです。 Привет, мир! مرحبا بالعالم 안녕하세요 😀🚀👍🏽 \u{200b}".to_string(),
        "I'm you're he'll we'd they've it's ISN'T  \r\n\r\n  \u{a0}nbsp".to_string(),
        "{\"city\": \"Paris\", \"temperature_c\": 18, \"condition\": \"cloudy\"}".to_string(),
        "e\u{301}te\u{301} A\u{30a}ngstro\u{308}m \u{212b} \u{1100}\u{1161}\u{11a8} \u{1e9b}\u{323}".to_string(),
    ]
}

/// Where prepared tokenizers live: KVAUDIT_TOKENIZER_CACHE (a directory, or `off`), else
/// `$XDG_CACHE_HOME/kvaudit/tokenizers`, else `~/.cache/kvaudit/tokenizers`.
pub fn cache_dir() -> Option<PathBuf> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    match var("KVAUDIT_TOKENIZER_CACHE").as_deref() {
        Some("off") | Some("0") => None,
        Some(dir) => Some(PathBuf::from(dir)),
        None => var("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .map(|d| d.join("kvaudit").join("tokenizers")),
    }
}
