//! Token ids exactly as the model's tokenizer.json gives them (no special tokens added: the
//! template writes BOS itself).

use std::io::Write;
use std::path::Path;

use sha2::{Digest, Sha256};

#[derive(Debug, thiserror::Error)]
pub enum TokenizeError {
    #[error("cannot read tokenizer {path}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot load tokenizer {path}: {message}")]
    Load { path: String, message: String },
    #[error("cannot tokenize: {0}")]
    Encode(String),
}

mod prepared;
mod scan;

pub use prepared::cache_dir;

enum Inner {
    Crate(Box<tokenizers::Tokenizer>),
    Prepared(Box<prepared::FastTokenizer>),
}

pub struct Tokenizer {
    inner: Inner,
    sha256: String,
}

impl Tokenizer {
    /// Load with the prepared-tokenizer cache of the environment (see [`cache_dir`]).
    pub fn from_file(path: &Path) -> Result<Tokenizer, TokenizeError> {
        Tokenizer::load(path, cache_dir().as_deref())
    }

    /// Load `path`; with a cache directory, use (or create) its prepared form there.
    pub fn load(path: &Path, cache: Option<&Path>) -> Result<Tokenizer, TokenizeError> {
        let shown = path.display().to_string();
        let bytes = crate::input::read_bounded(path, MAX_TOKENIZER_JSON).map_err(|source| {
            TokenizeError::Read {
                path: shown.clone(),
                source,
            }
        })?;
        let key = xxhash_rust::xxh3::xxh3_128(&bytes);
        let cached = cache.map(|dir| dir.join(format!("{key:032x}.kvtok")));
        // The cache only saves time: a file that cannot be read, is not a regular file, or
        // fails any check is ignored and rebuilt below.
        if let Some(file) = &cached
            && let Ok(data) = crate::input::read_bounded(file, MAX_PREPARED)
            && let Ok((tok, sha256)) = prepared::load(&data, key, &bytes)
        {
            return Ok(Tokenizer {
                inner: Inner::Prepared(Box::new(tok)),
                sha256,
            });
        }
        let load_error = |message: String| TokenizeError::Load {
            path: shown.clone(),
            message,
        };
        // With a cache to fill, tokenizer.json is parsed once: the crate's tokenizer and the
        // prepared form are both built from that tree. Any failure there takes the plain
        // path, whose error names the line and column.
        let parsed = cached.as_ref().and_then(|_| {
            let json = serde_json::from_slice::<serde_json::Value>(&bytes).ok()?;
            let inner = serde::Deserialize::deserialize(&json).ok()?;
            Some((inner, json))
        });
        let (inner, json) = match parsed {
            Some((inner, json)) => (inner, Some(json)),
            None => (
                tokenizers::Tokenizer::from_bytes(&bytes).map_err(|e| load_error(e.to_string()))?,
                None,
            ),
        };
        // The crate keeps ids in maps and takes any u32, but the prepared form indexes its
        // tables by id: an absurd id is one error for every path, cache or not, rather than
        // a table sized by it. The crate's map is checked, so that a run without a cache
        // does not parse the JSON a second time.
        if let Some(&id) = inner.get_vocab(true).values().max() {
            prepared::check_id(id.into()).map_err(load_error)?;
        }
        let sha256 = hex(&Sha256::digest(&bytes));
        if let Some(file) = &cached
            && let Some(json) = &json
            && let Ok(data) = prepared::prepare(json, &bytes, key, &sha256)
            && verify(&inner, &data, key, &bytes, json)
        {
            // Best effort: a cache that cannot be written only costs speed.
            write_atomically(file, &data);
        }
        Ok(Tokenizer {
            inner: Inner::Crate(Box::new(inner)),
            sha256,
        })
    }

    /// Whether this tokenizer was read from its prepared form.
    pub fn is_prepared(&self) -> bool {
        matches!(self.inner, Inner::Prepared(_))
    }

    /// SHA-256 of the tokenizer.json bytes.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    pub fn encode(&self, text: &str) -> Result<Vec<u32>, TokenizeError> {
        let enc = match &self.inner {
            Inner::Crate(t) => t.encode_fast(text, false),
            Inner::Prepared(t) => t.encode_fast(text, false),
        };
        enc.map(|e| e.get_ids().to_vec())
            .map_err(|e| TokenizeError::Encode(e.to_string()))
    }

    /// The text of a token run, special tokens included.
    pub fn decode(&self, ids: &[u32]) -> String {
        match &self.inner {
            Inner::Crate(t) => t.decode(ids, false),
            Inner::Prepared(t) => t.decode(ids, false),
        }
        .unwrap_or_default()
    }

    pub fn token_id(&self, token: &str) -> Option<u32> {
        match &self.inner {
            Inner::Crate(t) => t.token_to_id(token),
            Inner::Prepared(t) => t.token_to_id(token),
        }
    }

    /// Ids of the added tokens marked `special` (what `skip_special_tokens` drops when
    /// decoding), so a report can set them apart from text tokens.
    pub fn special_ids(&self) -> std::collections::HashSet<u32> {
        let added = match &self.inner {
            Inner::Crate(t) => t.get_added_tokens_decoder(),
            Inner::Prepared(t) => t.get_added_tokens_decoder(),
        };
        added
            .into_iter()
            .filter(|(_, t)| t.special)
            .map(|(id, _)| id)
            .collect()
    }

    pub fn vocab_size(&self) -> usize {
        match &self.inner {
            Inner::Crate(t) => t.get_vocab_size(true),
            Inner::Prepared(t) => t.get_vocab_size(true),
        }
    }
}

/// A prepared form is kept only if it tokenizes the probe texts exactly like the crate.
fn verify(
    reference: &tokenizers::Tokenizer,
    data: &[u8],
    key: u128,
    source: &[u8],
    json: &serde_json::Value,
) -> bool {
    let Ok((fast, _)) = prepared::load(data, key, source) else {
        return false;
    };
    if fast.get_vocab_size(true) != reference.get_vocab_size(true) {
        return false;
    }
    prepared::probe_texts(json).iter().all(|text| {
        let a = reference
            .encode_fast(text.as_str(), false)
            .map(|e| e.get_ids().to_vec());
        let b = fast
            .encode_fast(text.as_str(), false)
            .map(|e| e.get_ids().to_vec());
        match (a, b) {
            (Ok(a), Ok(b)) => {
                a == b && reference.decode(&a, false).ok() == fast.decode(&b, false).ok()
            }
            _ => false,
        }
    })
}

/// Never writes through what is at `file` or at the temporary name: a FIFO or symlink
/// planted there is replaced by the rename, not opened.
fn write_atomically(file: &Path, data: &[u8]) {
    let Some(dir) = file.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let tmp = file.with_extension(format!("tmp{}", std::process::id()));
    // create_new is O_EXCL: it neither follows a symlink nor opens an existing file. A name
    // left by a crashed run with the same pid is removed (the link itself, not its target).
    let create = || {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
    };
    let created = create().or_else(|e| {
        if e.kind() != std::io::ErrorKind::AlreadyExists {
            return Err(e);
        }
        std::fs::remove_file(&tmp)?;
        create()
    });
    let Ok(mut out) = created else { return };
    let written = out.write_all(data).is_ok();
    drop(out);
    if !written || std::fs::rename(&tmp, file).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

/// tokenizer.json is refused above this size: the largest real ones are ~30 MB (gpt-oss's
/// 28 MB), and parsing builds several times the file's size in memory.
const MAX_TOKENIZER_JSON: u64 = 256 << 20;

/// A prepared file holds the vocabulary text (less than its tokenizer.json) and tables of 4 to
/// 16 bytes per id or merge; for the largest real tokenizers that is about 22 MB. Anything
/// past 512 MiB was not written by `prepare` from an accepted tokenizer.json.
const MAX_PREPARED: u64 = 512 << 20;

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}
