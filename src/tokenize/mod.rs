//! Token ids exactly as the model's tokenizer.json gives them (no special tokens added: the
//! template writes BOS itself).

use std::path::Path;

use sha2::{Digest, Sha256};

#[derive(Debug, thiserror::Error)]
pub enum TokenizeError {
    #[error("cannot read tokenizer {path}: {source}")]
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
        let bytes = std::fs::read(path).map_err(|source| TokenizeError::Read {
            path: shown.clone(),
            source,
        })?;
        let key = xxhash_rust::xxh3::xxh3_128(&bytes);
        let cached = cache.map(|dir| dir.join(format!("{key:032x}.kvtok")));
        if let Some(file) = &cached
            && let Ok(data) = std::fs::read(file)
            && let Ok((tok, sha256)) = prepared::load(&data, key)
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
        let inner =
            tokenizers::Tokenizer::from_bytes(&bytes).map_err(|e| load_error(e.to_string()))?;
        let sha256 = hex(&Sha256::digest(&bytes));
        if let Some(file) = &cached {
            // Best effort: a cache that cannot be written only costs speed.
            if let Ok(json) = serde_json::from_slice::<serde_json::Value>(&bytes)
                && let Ok(data) = prepared::prepare(&json, key, &sha256)
                && verify(&inner, &data, key, &json)
            {
                write_atomically(file, &data);
            }
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
    json: &serde_json::Value,
) -> bool {
    let Ok((fast, _)) = prepared::load(data, key) else {
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

fn write_atomically(file: &Path, data: &[u8]) {
    let Some(dir) = file.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let tmp = file.with_extension(format!("tmp{}", std::process::id()));
    if std::fs::write(&tmp, data).is_ok() && std::fs::rename(&tmp, file).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}
