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

pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    sha256: String,
}

impl Tokenizer {
    pub fn from_file(path: &Path) -> Result<Tokenizer, TokenizeError> {
        let shown = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|source| TokenizeError::Read {
            path: shown.clone(),
            source,
        })?;
        let sha256 = hex(&Sha256::digest(&bytes));
        let inner = tokenizers::Tokenizer::from_bytes(&bytes).map_err(|e| TokenizeError::Load {
            path: shown,
            message: e.to_string(),
        })?;
        Ok(Tokenizer { inner, sha256 })
    }

    /// SHA-256 of the tokenizer.json bytes.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    pub fn encode(&self, text: &str) -> Result<Vec<u32>, TokenizeError> {
        self.inner
            .encode_fast(text, false)
            .map(|e| e.get_ids().to_vec())
            .map_err(|e| TokenizeError::Encode(e.to_string()))
    }

    /// The text of a token run, special tokens included.
    pub fn decode(&self, ids: &[u32]) -> String {
        self.inner.decode(ids, false).unwrap_or_default()
    }

    pub fn token_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}
