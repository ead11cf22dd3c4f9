//! Token ids exactly as the model's tokenizer.json gives them (no special tokens added: the
//! template writes BOS itself).

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
    /// A tokenizer.json kvaudit refuses before building anything from it. `error` is part of
    /// this error's text, not a cause of its own: callers show a load error by its text.
    #[error("cannot load tokenizer {path}: {error}")]
    Refused {
        path: String,
        error: TokenizerFileError,
    },
    #[error("cannot tokenize: {0}")]
    Encode(String),
}

impl TokenizeError {
    /// The tokenizers crate's error (or any other) as an encoding failure.
    pub(crate) fn encode(e: impl std::fmt::Display) -> TokenizeError {
        TokenizeError::Encode(e.to_string())
    }
}

/// What kvaudit refuses, or cannot prepare, in a tokenizer.json (an untrusted file).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenizerFileError {
    /// Past one of the bounds of [`bounds`]: more entries, steps, nesting or text growth than
    /// any real tokenizer has.
    #[error("{0}")]
    OverBound(String),
    /// A vocabulary id too large to size a table by.
    #[error(
        "token id {id} is out of range (ids must be below {max})",
        max = prepared::MAX_TOKEN_ID
    )]
    IdOutOfRange { id: u64 },
    /// A model the prepared form does not reproduce: the crate's own tokenizer runs it.
    #[error("{0}")]
    Unsupported(String),
    /// Not what a BPE tokenizer.json holds (a merge of tokens missing from the vocabulary, an
    /// id that is not a number).
    #[error("{0}")]
    Malformed(String),
}

/// A xorshift generator for the unit tests' random inputs (tests/common has the integration
/// tests' own).
#[cfg(test)]
pub(crate) fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

/// Asks the CPU to bring the cache line of `value` closer, without waiting for it: the
/// tokenizer's tables are megabytes read at random, and a lookup known a little ahead of
/// its use need not stall on its miss.
#[inline]
fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` is a hint: it reads nothing the program sees and never faults,
    // and the address is that of a live value. Its one requirement, SSE, is part of the
    // x86-64 baseline.
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(value).cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

mod added_scan;
mod ascii_split;
mod bounds;
mod direct;
mod gap_memo;
mod incremental;
pub mod llamacpp;
mod per_model;
mod prepared;
mod scan;
mod word_ids;

pub use incremental::Encoded;

/// A reply's ids, with what a later text that repeats the reply can take over.
#[derive(Debug, Clone)]
pub struct Reply {
    ids: Vec<u32>,
    tail: Option<direct::Tail>,
}

impl Reply {
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }
}
pub use prepared::{cache_dir, prepared_file};

enum Inner {
    Crate(Box<tokenizers::Tokenizer>),
    Prepared(Box<prepared::FastTokenizer>),
}

pub struct Tokenizer {
    inner: Inner,
    sha256: String,
    from_cache: bool,
    /// How texts are cut into pieces that encode on their own, built on first use; None when
    /// this tokenizer's pipeline does not allow it (see [`incremental`]).
    splitter: std::sync::OnceLock<Option<incremental::Splitter>>,
    /// The id-only encoder, when this pipeline is one it reproduces (see [`direct`]).
    direct: std::sync::OnceLock<Option<direct::Direct>>,
    /// The text of each single id, decoded on first use: reports show hundreds of tokens
    /// one by one, and each decode runs the whole decoder pipeline.
    token_texts: std::sync::OnceLock<Box<[std::sync::OnceLock<Box<str>>]>>,
    /// This tokenizer's key in each thread's memo of short runs (see [`gap_memo`]).
    memo_owner: u64,
}

impl Tokenizer {
    /// Load with the prepared-tokenizer cache of the environment (see [`cache_dir`]).
    pub fn from_file(path: &Path) -> Result<Tokenizer, TokenizeError> {
        Tokenizer::load(path, cache_dir().as_deref())
    }

    /// [`from_file`](Self::from_file) as llama.cpp tokenizes: without tokenizer.json's
    /// Unicode normalization (Qwen3's NFC: U+F98E stays itself instead of becoming U+5E74),
    /// and with the split and `ignore_merges` llama.cpp uses for the pre-tokenizer its
    /// converter recognises (Llama 3 looks whole words up; gpt-oss merges them, and its
    /// combining marks end words). See [`llamacpp`].
    pub fn from_file_as_llamacpp(path: &Path) -> Result<Tokenizer, TokenizeError> {
        Tokenizer::load_as_llamacpp(path, cache_dir().as_deref())
    }

    /// [`from_file_as_llamacpp`](Self::from_file_as_llamacpp) with this cache directory.
    pub fn load_as_llamacpp(path: &Path, cache: Option<&Path>) -> Result<Tokenizer, TokenizeError> {
        Tokenizer::load_with(path, cache, true)
    }

    /// Load `path`; with a cache directory, use (or create) its prepared form there.
    pub fn load(path: &Path, cache: Option<&Path>) -> Result<Tokenizer, TokenizeError> {
        Tokenizer::load_with(path, cache, false)
    }

    /// A loaded tokenizer with its per-use tables still to build.
    fn around(inner: Inner, sha256: String, from_cache: bool) -> Tokenizer {
        Tokenizer {
            inner,
            sha256,
            from_cache,
            splitter: Default::default(),
            direct: Default::default(),
            token_texts: Default::default(),
            memo_owner: per_model::new_key(),
        }
    }

    /// `llamacpp`: as llama.cpp tokenizes (see [`llamacpp`]). Its prepared form is keyed by
    /// the file and the profile, so a run that finds it reads tokenizer.json's bytes only;
    /// the rewrite leaves the vocabulary and merges as they are, which the prepared form's
    /// spot check reads from those bytes.
    fn load_with(
        path: &Path,
        cache: Option<&Path>,
        llamacpp: bool,
    ) -> Result<Tokenizer, TokenizeError> {
        let shown = path.display().to_string();
        let bytes = crate::input::read_bounded(path, MAX_TOKENIZER_JSON).map_err(|source| {
            TokenizeError::Read {
                path: shown.clone(),
                source,
            }
        })?;
        let mut key = xxhash_rust::xxh3::xxh3_128(&bytes);
        if llamacpp {
            key ^= llamacpp::CACHE_SALT;
        }
        let cached = cache.map(|dir| dir.join(format!("{key:032x}.kvtok")));
        // The cache only saves time: a file that cannot be read, is not a regular file, or
        // fails any check is ignored and rebuilt below.
        if let Some(file) = &cached
            && let Ok((tok, sha256)) = load_prepared(file, key, &bytes)
        {
            return Ok(Tokenizer::around(
                Inner::Prepared(Box::new(tok)),
                sha256,
                true,
            ));
        }
        let load_error = |message: String| TokenizeError::Load {
            path: shown.clone(),
            message,
        };
        let refused = |error| TokenizeError::Refused {
            path: shown.clone(),
            error,
        };
        // tokenizer.json is parsed once into a tree: its bounds are checked there, before the
        // crate sizes anything by it, and the crate's tokenizer and the prepared form are both
        // built from it. A failure to build takes the plain path, whose error names the line
        // and column.
        bounds::check_counts(&bytes).map_err(refused)?;
        let mut json = serde_json::from_slice::<serde_json::Value>(&bytes).ok();
        if let Some(json) = &mut json {
            bounds::check(json).map_err(refused)?;
            if llamacpp {
                as_llamacpp(json);
            }
        }
        let parsed = json
            .as_ref()
            .and_then(|json| serde::Deserialize::deserialize(json).ok());
        let mut inner: tokenizers::Tokenizer = match parsed {
            Some(inner) => inner,
            None => {
                tokenizers::Tokenizer::from_bytes(&bytes).map_err(|e| load_error(e.to_string()))?
            }
        };
        // transformers encodes a chat prompt with padding and truncation off, whatever
        // tokenizer.json says (set_truncation_and_padding with DO_NOT_PAD, DO_NOT_TRUNCATE),
        // and a fixed padding length of billions would be allocated on every encode.
        inner.with_padding(None);
        inner
            .with_truncation(None)
            .map_err(|e| load_error(e.to_string()))?;
        let json = json.filter(|_| cached.is_some());
        // The crate keeps ids in maps and takes any u32, but the prepared form indexes its
        // tables by id: an absurd id is one error for every path, cache or not, rather than
        // a table sized by it. The crate's map is checked, so that a run without a cache
        // does not parse the JSON a second time.
        if let Some(&id) = inner.get_vocab(true).values().max() {
            prepared::check_id(id.into()).map_err(refused)?;
        }
        let sha256 = hex(&Sha256::digest(&bytes));
        if let Some(file) = &cached
            && let Some(json) = &json
            && let Ok(data) = prepared::prepare(json, &bytes, key, &sha256)
            && let Some(fast) = verify(&inner, &data, key, &bytes, json)
        {
            // Best effort: a cache that cannot be written only costs speed. A FIFO or symlink
            // planted at the cache's name is replaced by the rename, never written through.
            let _ = crate::output::write_with(
                file,
                &data,
                crate::output::Options {
                    replace: true,
                    create_dirs: true,
                    ..Default::default()
                },
            );
            // The run that prepares tokenizes as the runs that read the cache will: with the
            // prepared form (whose long words also take a fraction of the crate's memory).
            return Ok(Tokenizer::around(
                Inner::Prepared(Box::new(fast)),
                sha256,
                false,
            ));
        }
        Ok(Tokenizer::around(
            Inner::Crate(Box::new(inner)),
            sha256,
            false,
        ))
    }
}

/// tokenizer.json's tree rewritten as llama.cpp tokenizes it (see [`llamacpp`]).
fn as_llamacpp(json: &mut serde_json::Value) {
    // The converter names the pre-tokenizer by transformers' ids for its check text.
    let check_ids = serde::Deserialize::deserialize(&*json).ok().and_then(
        |mut reference: tokenizers::Tokenizer| {
            reference.with_padding(None);
            reference.with_truncation(None).ok()?;
            let ids = reference.encode(llamacpp::check_text(), true).ok()?;
            Some(ids.get_ids().to_vec())
        },
    );
    llamacpp::rewrite(json, check_ids.as_deref());
}

impl Tokenizer {
    /// Whether this tokenizer runs its prepared form (read from the cache, or prepared and
    /// verified by this load).
    pub fn is_prepared(&self) -> bool {
        matches!(self.inner, Inner::Prepared(_))
    }

    /// Whether this tokenizer was read from the prepared-tokenizer cache.
    pub fn read_from_cache(&self) -> bool {
        self.from_cache
    }

    /// SHA-256 of the tokenizer.json bytes.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    pub fn encode(&self, text: &str) -> Result<Vec<u32>, TokenizeError> {
        match self.direct() {
            Some(d) => self.encode_direct(d, text),
            None => self.encode_pipeline(text),
        }
    }

    fn encode_direct(&self, d: &direct::Direct, text: &str) -> Result<Vec<u32>, TokenizeError> {
        match &self.inner {
            Inner::Crate(t) => d.encode(text, t.get_model()),
            Inner::Prepared(t) => d.encode(text, t.get_model()),
        }
    }

    /// A reply's ids, as [`encode`](Self::encode) gives them, with what a later prompt that
    /// repeats the reply can take over (see [`encode_after_reusing`](Self::encode_after_reusing)).
    pub fn encode_reply(&self, text: &str) -> Result<Reply, TokenizeError> {
        let Some(d) = self.direct() else {
            return Ok(Reply {
                ids: self.encode(text)?,
                tail: None,
            });
        };
        let (ids, tail) = match &self.inner {
            Inner::Crate(t) => d.encode_reply(text, t.get_model()),
            Inner::Prepared(t) => d.encode_reply(text, t.get_model()),
        }?;
        Ok(Reply { ids, tail })
    }

    /// Whether prompts can take over the ids of replies they repeat (the direct encoder with
    /// one isolating split and no normalized added tokens; see `direct::Direct::take_over`).
    pub fn takes_over_replies(&self) -> bool {
        self.direct().is_some_and(direct::Direct::reuses)
    }

    /// [`encode_reusing`](Self::encode_reusing) of a text the splitter's scan found no
    /// added token in, appended to `out`: the direct encoder's scan for them is skipped.
    fn encode_gap_reusing(
        &self,
        gap: &str,
        reply: Option<&Reply>,
        out: &mut Vec<u32>,
    ) -> Result<usize, TokenizeError> {
        if gap.is_empty() {
            return Ok(0);
        }
        gap_memo::encode(self.memo_owner, gap, out, |out| {
            let Some(d) = self.direct() else {
                out.extend(self.encode_pipeline(gap)?);
                return Ok(0);
            };
            let reply = reply.and_then(|r| Some((r.ids.as_slice(), r.tail.as_ref()?)));
            match &self.inner {
                Inner::Crate(t) => d.encode_gap(gap, t.get_model(), reply, out),
                Inner::Prepared(t) => d.encode_gap(gap, t.get_model(), reply, out),
            }
        })
    }

    /// The ids of `text`, and how many of them were taken over from `reply`.
    fn encode_reusing(
        &self,
        text: &str,
        reply: Option<&Reply>,
    ) -> Result<(Vec<u32>, usize), TokenizeError> {
        let (Some(d), Some((ids, Some(tail)))) = (self.direct(), reply.map(|r| (&r.ids, &r.tail)))
        else {
            return Ok((self.encode(text)?, 0));
        };
        match &self.inner {
            Inner::Crate(t) => d.encode_reusing(text, t.get_model(), (ids, tail)),
            Inner::Prepared(t) => d.encode_reusing(text, t.get_model(), (ids, tail)),
        }
    }

    /// `text` through the `tokenizers` crate's own pipeline, whatever [`encode`](Self::encode)
    /// would use: the reference the direct encoder is checked against.
    pub fn encode_pipeline(&self, text: &str) -> Result<Vec<u32>, TokenizeError> {
        let enc = match &self.inner {
            Inner::Crate(t) => t.encode_fast(text, false),
            Inner::Prepared(t) => t.encode_fast(text, false),
        };
        enc.map(|e| e.get_ids().to_vec())
            .map_err(TokenizeError::encode)
    }

    /// `text` encoded as [`encode`](Self::encode) does, reusing the ids of `base` up to the
    /// last added token both texts split at, so that a conversation's prompts, each
    /// extending the one before, cost only what is new in each. Exact for every pipeline it
    /// is used with; where it could not be, every text is encoded whole
    /// ([`resumes`](Self::resumes) says which).
    pub fn encode_after(
        &self,
        text: &str,
        base: Option<&Encoded>,
    ) -> Result<Encoded, TokenizeError> {
        self.encode_after_reusing(text, base, None)
    }

    /// [`encode_after`](Self::encode_after), also taking over the ids of `reply` where the
    /// text repeats it (a prompt whose history holds the reply before it): each reply is then
    /// merged once, not again inside every next prompt. The same ids either way.
    pub fn encode_after_reusing(
        &self,
        text: &str,
        base: Option<&Encoded>,
        reply: Option<&Reply>,
    ) -> Result<Encoded, TokenizeError> {
        let mut taken = 0;
        let mut encoded = match self.splitter() {
            Some(s) => s.encode(text, base, |gap, ids| {
                taken += self.encode_gap_reusing(gap, reply, ids)?;
                Ok::<_, TokenizeError>(())
            })?,
            None => {
                let (ids, n) = self.encode_reusing(text, reply)?;
                taken = n;
                incremental::whole(ids)
            }
        };
        encoded.set_taken_over(taken);
        Ok(encoded)
    }

    /// Each text encoded after the one before it (a conversation's prompts, in order).
    pub fn encode_each<'t>(
        &self,
        texts: impl IntoIterator<Item = &'t str>,
    ) -> Result<Vec<Vec<u32>>, TokenizeError> {
        let mut base: Option<Encoded> = None;
        let mut out = Vec::new();
        for text in texts {
            let encoded = self.encode_after(text, base.as_ref())?;
            out.push(encoded.ids().to_vec());
            base = Some(encoded);
        }
        Ok(out)
    }

    /// Whether [`encode`](Self::encode) computes ids without the crate's pipeline (and gets
    /// the same ids: see [`direct`]).
    pub fn is_direct(&self) -> bool {
        self.direct().is_some()
    }

    /// Builds what the first encode would (the direct encoder, its probe, the run splitter),
    /// so that a caller can have it done on a thread of its choosing.
    pub fn prepare_encoders(&self) {
        self.direct();
        self.splitter();
    }

    fn direct(&self) -> Option<&direct::Direct> {
        self.direct
            .get_or_init(|| {
                if let Inner::Crate(t) = &self.inner
                    && matches!(
                        t.get_model(),
                        tokenizers::ModelWrapper::BPE(b) if b.dropout.is_some()
                    )
                {
                    return None;
                }
                // Kept only if it agrees with the crate on every probe text. The crate's ids
                // of the probes and the run splitter are made on threads of their own while
                // this one builds the encoder: at the start of a corpus run these were a few
                // milliseconds each, one after another, with every other thread waiting.
                let texts = self.probe_texts();
                // Set when there is no encoder to check, so that the probes stop early.
                let unneeded = std::sync::atomic::AtomicBool::new(false);
                let crate_ids = || -> Vec<Option<Vec<u32>>> {
                    texts
                        .iter()
                        .map(|t| {
                            let stop = unneeded.load(std::sync::atomic::Ordering::Relaxed);
                            (!stop).then(|| self.encode_pipeline(t).ok()).flatten()
                        })
                        .collect()
                };
                std::thread::scope(|s| {
                    let thread = || std::thread::Builder::new();
                    let splitter = thread().spawn_scoped(s, || {
                        self.splitter();
                    });
                    let expected = thread().spawn_scoped(s, crate_ids);
                    let d = match &self.inner {
                        Inner::Crate(t) => direct_for(t),
                        Inner::Prepared(t) => direct_for(t),
                    };
                    if d.is_none() {
                        unneeded.store(true, std::sync::atomic::Ordering::Relaxed);
                    }
                    // A probe that panics in the crate leaves no direct encoder, as one that
                    // disagrees does.
                    let expected = match expected {
                        Ok(h) => h.join().ok(),
                        Err(_) => Some(crate_ids()),
                    };
                    // Joined here so that a panic there cannot become one of this scope's.
                    let _ = splitter.map(std::thread::ScopedJoinHandle::join);
                    let (d, expected) = (d?, expected?);
                    let agrees = texts.iter().zip(&expected).all(|(text, want)| {
                        matches!((self.encode_direct(&d, text), want), (Ok(a), Some(b)) if a == *b)
                    });
                    agrees.then_some(d)
                })
            })
            .as_ref()
    }

    /// The fixed probe texts and this tokenizer's added tokens, apart and run together.
    fn probe_texts(&self) -> Vec<String> {
        let added = match &self.inner {
            Inner::Crate(t) => t.get_added_tokens_decoder(),
            Inner::Prepared(t) => t.get_added_tokens_decoder(),
        };
        let mut contents: Vec<(u32, String)> =
            added.into_iter().map(|(id, t)| (id, t.content)).collect();
        contents.sort();
        let contents: Vec<String> = contents.into_iter().map(|(_, c)| c).collect();
        let mut texts = prepared::fixed_probe_texts();
        texts.push(contents.join(" x"));
        texts.push(contents.concat());
        texts
    }

    /// Whether [`encode_after`](Self::encode_after) can reuse a base's ids with this tokenizer.
    pub fn resumes(&self) -> bool {
        self.splitter().is_some()
    }

    fn splitter(&self) -> Option<&incremental::Splitter> {
        self.splitter
            .get_or_init(|| match &self.inner {
                Inner::Crate(t) => {
                    let dropout = matches!(
                        t.get_model(),
                        tokenizers::ModelWrapper::BPE(b) if b.dropout.is_some()
                    );
                    splitter_for(t, dropout)
                }
                // A prepared form is only written for BPE without dropout.
                Inner::Prepared(t) => splitter_for(t, false),
            })
            .as_ref()
    }

    /// The text of a token run, special tokens included.
    pub fn decode(&self, ids: &[u32]) -> String {
        match &self.inner {
            Inner::Crate(t) => t.decode(ids, false),
            Inner::Prepared(t) => t.decode(ids, false),
        }
        .unwrap_or_default()
    }

    /// The text of one token, as `decode(&[id])` gives it.
    pub fn token_text(&self, id: u32) -> std::borrow::Cow<'_, str> {
        let table = self.token_texts.get_or_init(|| {
            (0..self.vocab_size())
                .map(|_| std::sync::OnceLock::new())
                .collect()
        });
        match table.get(id as usize) {
            Some(slot) => {
                std::borrow::Cow::Borrowed(slot.get_or_init(|| self.decode(&[id]).into()))
            }
            // Not an id of this vocabulary: decoded each time (the decoder says what it makes
            // of it).
            None => std::borrow::Cow::Owned(self.decode(&[id])),
        }
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

/// A tokenizer with the crate's wrapper types and either BPE model (its own or the prepared one).
type Pipeline<M> = tokenizers::TokenizerImpl<
    M,
    tokenizers::NormalizerWrapper,
    tokenizers::PreTokenizerWrapper,
    tokenizers::PostProcessorWrapper,
    tokenizers::DecoderWrapper,
>;

/// The splitter of a pipeline that encodes its pieces independently, else None.
fn splitter_for<M: tokenizers::Model>(
    t: &Pipeline<M>,
    dropout: bool,
) -> Option<incremental::Splitter> {
    // A pre-tokenizer that cannot be inspected is treated as one that breaks piecewise encoding.
    let pre_tokenizer = match t.get_pre_tokenizer() {
        Some(p) => Some(serde_json::to_value(p).ok()?),
        None => None,
    };
    let added: Vec<(u32, tokenizers::AddedToken)> =
        t.get_added_tokens_decoder().into_iter().collect();
    let tokens: Vec<tokenizers::AddedToken> = added.iter().map(|(_, a)| a.clone()).collect();
    let why_not = incremental::unsupported(
        pre_tokenizer,
        t.get_truncation().is_some(),
        t.get_padding().is_some(),
        dropout,
        &tokens,
    );
    match why_not {
        Some(_) => None,
        None => incremental::Splitter::new(&added),
    }
}

/// The direct encoder of a pipeline it reproduces, else None.
fn direct_for<M: tokenizers::Model>(t: &Pipeline<M>) -> Option<direct::Direct> {
    if t.get_truncation().is_some() || t.get_padding().is_some() {
        return None;
    }
    let normalizer = match t.get_normalizer() {
        Some(n) => Some(serde_json::to_value(n).ok()?),
        None => None,
    };
    let pre_tokenizer = match t.get_pre_tokenizer() {
        Some(p) => Some(serde_json::to_value(p).ok()?),
        None => None,
    };
    let added: Vec<(u32, tokenizers::AddedToken)> =
        t.get_added_tokens_decoder().into_iter().collect();
    direct::Direct::new(normalizer, pre_tokenizer, &added)
}

/// The prepared file at `file`, read as a regular file of at most `MAX_PREPARED` bytes (a file
/// that grows while being read stops there too).
fn load_prepared(
    file: &Path,
    key: u128,
    source: &[u8],
) -> Result<(prepared::FastTokenizer, String), prepared::PreparedError> {
    use std::io::Read;
    let f = crate::input::open_regular(file)?;
    let len = f.metadata()?.len();
    if len > MAX_PREPARED {
        return Err(prepared::PreparedError::TooLarge);
    }
    prepared::load(
        std::io::BufReader::new(f).take(MAX_PREPARED),
        len,
        key,
        source,
    )
}

/// The prepared form, kept only if it tokenizes the probe texts exactly like the crate.
fn verify(
    reference: &tokenizers::Tokenizer,
    data: &[u8],
    key: u128,
    source: &[u8],
    json: &serde_json::Value,
) -> Option<prepared::FastTokenizer> {
    let (fast, _) = prepared::load(data, data.len() as u64, key, source).ok()?;
    if fast.get_vocab_size(true) != reference.get_vocab_size(true) {
        return None;
    }
    let same = prepared::probe_texts(json).iter().all(|text| {
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
    });
    same.then_some(fast)
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
