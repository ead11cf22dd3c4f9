//! The rest of a tokenizer around the prepared model (normalizer, pre-tokenizer, decoder,
//! added tokens), which the crate builds from tokenizer.json as it always does.

use serde_json::Value as Json;
use tokenizers::decoders::DecoderWrapper;
use tokenizers::normalizers::NormalizerWrapper;
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::processors::PostProcessorWrapper;
use tokenizers::{AddedToken, TokenizerImpl};

use super::{FastBpe, FastTokenizer, PreparedError};

/// The pipeline around the model, built the way the crate's deserializer builds it.
/// The parts of the crate's pipeline around the model, as tokenizer.json describes them.
pub(super) struct Parts {
    normalizer: Option<NormalizerWrapper>,
    pre_tokenizer: Option<PreTokenizerWrapper>,
    post_processor: Option<PostProcessorWrapper>,
    decoder: Option<DecoderWrapper>,
    truncation: Option<tokenizers::TruncationParams>,
    padding: Option<tokenizers::PaddingParams>,
    added: Vec<AddedToken>,
}

impl Parts {
    pub(super) fn of(rest: &Json) -> Result<Parts, PreparedError> {
        fn part<T: serde::de::DeserializeOwned>(
            rest: &Json,
            key: &str,
        ) -> Result<Option<T>, PreparedError> {
            match rest.get(key) {
                None | Some(Json::Null) => Ok(None),
                Some(v) => serde_json::from_value(v.clone())
                    .map(Some)
                    .map_err(|e| PreparedError::Pipeline(format!("{key}: {e}"))),
            }
        }
        Ok(Parts {
            normalizer: part(rest, "normalizer")?,
            pre_tokenizer: part(rest, "pre_tokenizer")?,
            post_processor: part(rest, "post_processor")?,
            decoder: part(rest, "decoder")?,
            truncation: part(rest, "truncation")?,
            padding: part(rest, "padding")?,
            added: part(rest, "added_tokens")?.unwrap_or_default(),
        })
    }

    pub(super) fn assemble(self, bpe: FastBpe) -> Result<FastTokenizer, PreparedError> {
        let failed = |e: tokenizers::Error| PreparedError::Pipeline(e.to_string());
        let mut tok = TokenizerImpl::new(bpe);
        tok.with_normalizer(self.normalizer).map_err(failed)?;
        tok.with_pre_tokenizer(self.pre_tokenizer);
        tok.with_post_processor(self.post_processor);
        tok.with_decoder(self.decoder);
        // Off, as transformers encodes prompts (and as the crate's tokenizer is loaded).
        let _ = (self.truncation, self.padding);
        tok.with_truncation(None).map_err(failed)?;
        tok.with_padding(None);
        tok.add_tokens(self.added).map_err(failed)?;
        Ok(tok)
    }
}
