//! A GGUF model file as kvaudit reads it: the header and the metadata key/value section only,
//! never the tensor infos or the tensors, and of the metadata only the tokenizer's keys and
//! the chat templates (the rest is read past). From those, llama.cpp's tokenizer: a byte-level
//! BPE tokenizer.json with the split llama.cpp runs for `tokenizer.ggml.pre` (see
//! [`crate::tokenize::llamacpp`]), and a tokenizer_config.json with the templates and special
//! tokens, written to a directory of the cache that the rest of kvaudit reads as a model
//! directory.
//!
//! Everything in the file is untrusted: every count and length is checked against a limit
//! before anything is allocated for it, and against what the file can still hold.

use std::collections::BTreeMap;
use std::io::{BufReader, Read, Seek};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value as Json, json};
use sha2::{Digest, Sha256};

/// `GGUF` as the first four bytes.
pub const MAGIC: &[u8; 4] = b"GGUF";
/// Metadata entries in a file (real ones have a few dozen).
const MAX_ENTRIES: u64 = 1 << 16;
/// A key's length.
const MAX_KEY_BYTES: u64 = 1 << 16;
/// One string value (a chat template is tens of kilobytes; a token a few bytes).
const MAX_STRING_BYTES: u64 = 16 << 20;
/// Elements of one array (vocabularies are up to a few hundred thousand tokens, merges up to
/// a few hundred thousand more).
const MAX_ARRAY_ELEMENTS: u64 = 1 << 23;
/// Everything kept from the metadata, in bytes of strings and elements.
const MAX_KEPT_BYTES: u64 = 512 << 20;

#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path} is not a GGUF file kvaudit can read: {why}")]
    Invalid { path: String, why: String },
    #[error("{path}: {why}")]
    Unsupported { path: String, why: String },
}

/// A metadata value kvaudit keeps.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Int(i128),
    Bool(bool),
    Str(String),
    Strs(Vec<String>),
    Ints(Vec<i128>),
    /// Read past: a type or an array kvaudit has no use for.
    Other,
}

/// The metadata keys kvaudit keeps: the tokenizer's and the architecture.
fn wanted(key: &str) -> bool {
    key.starts_with("tokenizer.") || key == "general.architecture" || key == "general.name"
}

/// Reads little-endian values from the file, counting what it may still read.
struct Reader<R> {
    r: R,
    /// Bytes of the file not yet read (a length past them is a damaged file).
    left: u64,
    kept: u64,
    hash: Sha256,
}

type Why = String;

impl<R: Read + Seek> Reader<BufReader<R>> {
    fn bytes(&mut self, n: u64) -> Result<Vec<u8>, Why> {
        if n > self.left {
            return Err(format!(
                "a length of {n} bytes runs past the end of the file"
            ));
        }
        let mut buf = vec![0u8; n as usize];
        self.r
            .read_exact(&mut buf)
            .map_err(|e| format!("cut short: {e}"))?;
        self.left -= n;
        self.hash.update(&buf);
        Ok(buf)
    }

    /// Moves past `n` bytes without reading them: what is skipped is a value kvaudit does not
    /// use (the digest, which names the files made, covers what it does use), and a file may
    /// carry gigabytes of it.
    fn skip(&mut self, n: u64) -> Result<(), Why> {
        if n > self.left {
            return Err(format!(
                "a length of {n} bytes runs past the end of the file"
            ));
        }
        let step = i64::try_from(n).map_err(|_| format!("a length of {n} bytes"))?;
        // Within the buffer, no system call; past it, one seek.
        self.r
            .seek_relative(step)
            .map_err(|e| format!("cannot move past {n} bytes: {e}"))?;
        self.left -= n;
        Ok(())
    }

    fn fixed<const N: usize>(&mut self) -> Result<[u8; N], Why> {
        let b = self.bytes(N as u64)?;
        let mut out = [0u8; N];
        out.copy_from_slice(&b);
        Ok(out)
    }

    fn u32(&mut self) -> Result<u32, Why> {
        Ok(u32::from_le_bytes(self.fixed()?))
    }

    fn u64(&mut self) -> Result<u64, Why> {
        Ok(u64::from_le_bytes(self.fixed()?))
    }

    fn keep(&mut self, n: u64) -> Result<(), Why> {
        self.kept += n;
        if self.kept > MAX_KEPT_BYTES {
            return Err(format!(
                "its tokenizer metadata is over {MAX_KEPT_BYTES} bytes, kvaudit's limit"
            ));
        }
        Ok(())
    }

    fn string(&mut self, limit: u64, keep: bool) -> Result<Option<String>, Why> {
        let n = self.u64()?;
        // A string kvaudit does not keep costs nothing but a move past it (within the file).
        if !keep {
            self.skip(n)?;
            return Ok(None);
        }
        if n > limit {
            return Err(format!(
                "a string of {n} bytes, over kvaudit's limit of {limit}"
            ));
        }
        // A kept string costs its bytes and its own header.
        self.keep(n + std::mem::size_of::<String>() as u64)?;
        String::from_utf8(self.bytes(n)?)
            .map(Some)
            .map_err(|_| "a string that is not UTF-8".into())
    }

    /// A scalar of GGUF type `ty` (not a string or an array).
    fn scalar(&mut self, ty: u32) -> Result<Value, Why> {
        Ok(match ty {
            0 => Value::Int(self.fixed::<1>()?[0].into()),
            1 => Value::Int(i8::from_le_bytes(self.fixed()?).into()),
            2 => Value::Int(u16::from_le_bytes(self.fixed()?).into()),
            3 => Value::Int(i16::from_le_bytes(self.fixed()?).into()),
            4 => Value::Int(self.u32()?.into()),
            5 => Value::Int(i32::from_le_bytes(self.fixed()?).into()),
            // No tokenizer key is a float: read past.
            6 => self.fixed::<4>().map(|_| Value::Other)?,
            7 => match self.fixed::<1>()?[0] {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                b => return Err(format!("a bool of value {b}")),
            },
            10 => Value::Int(self.u64()?.into()),
            11 => Value::Int(i64::from_le_bytes(self.fixed()?).into()),
            12 => self.fixed::<8>().map(|_| Value::Other)?,
            other => return Err(format!("a value of unknown type {other}")),
        })
    }

    fn value(&mut self, ty: u32, keep: bool) -> Result<Value, Why> {
        match ty {
            8 => Ok(self
                .string(MAX_STRING_BYTES, keep)?
                .map_or(Value::Other, Value::Str)),
            9 => self.array(keep),
            _ => self.scalar(ty),
        }
    }

    fn array(&mut self, keep: bool) -> Result<Value, Why> {
        let ty = self.u32()?;
        let n = self.u64()?;
        if n > MAX_ARRAY_ELEMENTS {
            return Err(format!(
                "an array of {n} elements, over kvaudit's limit of {MAX_ARRAY_ELEMENTS}"
            ));
        }
        match ty {
            8 => {
                let mut out = Vec::new();
                for _ in 0..n {
                    if let Some(s) = self.string(MAX_STRING_BYTES, keep)? {
                        out.push(s);
                    }
                }
                Ok(if keep { Value::Strs(out) } else { Value::Other })
            }
            9 => Err("an array of arrays".into()),
            _ => {
                let mut out = Vec::new();
                for _ in 0..n {
                    match self.scalar(ty)? {
                        Value::Int(i) if keep => {
                            self.keep(std::mem::size_of::<i128>() as u64)?;
                            out.push(i);
                        }
                        _ => {}
                    }
                }
                Ok(if keep { Value::Ints(out) } else { Value::Other })
            }
        }
    }
}

/// The tokenizer metadata of a GGUF file, and a digest of the bytes it was read from and of
/// how kvaudit makes files of them ([`FILES_VERSION`]): the name of those files' directory.
pub struct Metadata {
    entries: BTreeMap<String, Value>,
    pub sha256: String,
}

/// Changes whenever [`Metadata::hf_files`] or llama.cpp's split table would make other files
/// of the same metadata, so that files made before are not read as this version's.
const FILES_VERSION: &str = "kvaudit gguf files 1";

/// Whether the file at `path` starts with the GGUF magic.
pub fn is_gguf(path: &Path) -> bool {
    let mut magic = [0u8; 4];
    crate::input::open_regular(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && &magic == MAGIC
}

pub fn read_metadata(path: &Path) -> Result<Metadata, GgufError> {
    let shown = path.display().to_string();
    let invalid = |why: Why| GgufError::Invalid {
        path: shown.clone(),
        why,
    };
    let file = crate::input::open_regular(path).map_err(|source| GgufError::Read {
        path: shown.clone(),
        source,
    })?;
    let len = file
        .metadata()
        .map_err(|source| GgufError::Read {
            path: shown.clone(),
            source,
        })?
        .len();
    let mut r = Reader {
        r: BufReader::with_capacity(1 << 16, file),
        left: len,
        kept: 0,
        hash: Sha256::new(),
    };
    r.hash.update(FILES_VERSION);
    r.hash
        .update(crate::tokenize::llamacpp::CACHE_SALT.to_le_bytes());
    let magic: [u8; 4] = r.fixed().map_err(&invalid)?;
    if &magic != MAGIC {
        return Err(invalid("it does not start with GGUF".into()));
    }
    let version = r.u32().map_err(&invalid)?;
    if version.swap_bytes() == 2 || version.swap_bytes() == 3 {
        return Err(GgufError::Unsupported {
            path: shown,
            why: "a big-endian GGUF file: kvaudit reads little-endian ones".into(),
        });
    }
    if version != 2 && version != 3 {
        return Err(GgufError::Unsupported {
            path: shown,
            why: format!("GGUF version {version}: kvaudit reads versions 2 and 3"),
        });
    }
    let _tensors = r.u64().map_err(&invalid)?;
    let count = r.u64().map_err(&invalid)?;
    if count > MAX_ENTRIES {
        return Err(invalid(format!(
            "{count} metadata entries, over kvaudit's limit of {MAX_ENTRIES}"
        )));
    }
    let mut entries = BTreeMap::new();
    for i in 0..count {
        let entry = (|| -> Result<(), Why> {
            let key = r.string(MAX_KEY_BYTES, true)?.unwrap_or_default();
            let ty = r.u32()?;
            let keep = wanted(&key);
            let value = r.value(ty, keep)?;
            if keep && entries.insert(key.clone(), value).is_some() {
                return Err(format!("the key {key:?} twice"));
            }
            Ok(())
        })();
        entry.map_err(|why| invalid(format!("metadata entry {i}: {why}")))?;
    }
    let sha256 = format!("{:x}", r.hash.finalize());
    Ok(Metadata { entries, sha256 })
}

impl Metadata {
    fn str(&self, key: &str) -> Option<&str> {
        match self.entries.get(key) {
            Some(Value::Str(s)) => Some(s),
            _ => None,
        }
    }

    fn int(&self, key: &str) -> Option<i128> {
        match self.entries.get(key) {
            Some(Value::Int(i)) => Some(*i),
            _ => None,
        }
    }

    fn bool(&self, key: &str) -> Option<bool> {
        match self.entries.get(key) {
            Some(Value::Bool(b)) => Some(*b),
            _ => None,
        }
    }

    fn strs(&self, key: &str) -> Option<&[String]> {
        match self.entries.get(key) {
            Some(Value::Strs(s)) => Some(s),
            _ => None,
        }
    }

    fn ints(&self, key: &str) -> Option<&[i128]> {
        match self.entries.get(key) {
            Some(Value::Ints(s)) => Some(s),
            _ => None,
        }
    }

    /// The chat templates: the default one, then every named one, `tokenizer.chat_template.NAME`
    /// (llama.cpp looks them up by key; the `tokenizer.chat_templates` list is not needed).
    fn templates(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if let Some(t) = self.str("tokenizer.chat_template") {
            out.push(("default".to_string(), t.to_string()));
        }
        for (key, value) in &self.entries {
            if let (Some(name), Value::Str(t)) =
                (key.strip_prefix("tokenizer.chat_template."), value)
                && name != "default"
            {
                out.push((name.to_string(), t.clone()));
            }
        }
        out
    }

    /// tokenizer.json and tokenizer_config.json as llama.cpp would tokenize and template.
    pub fn hf_files(&self, shown: &str) -> Result<(Json, Json), GgufError> {
        let unsupported = |why: String| GgufError::Unsupported {
            path: shown.to_string(),
            why,
        };
        let model = self.str("tokenizer.ggml.model").unwrap_or("(none)");
        if model != "gpt2" {
            return Err(unsupported(format!(
                "tokenizer.ggml.model is {model:?}: kvaudit reads GGUF vocabularies of \
                 byte-level BPE (\"gpt2\") only"
            )));
        }
        let tokens = self
            .strs("tokenizer.ggml.tokens")
            .ok_or_else(|| unsupported("no tokenizer.ggml.tokens".into()))?;
        let merges = self
            .strs("tokenizer.ggml.merges")
            .ok_or_else(|| unsupported("no tokenizer.ggml.merges".into()))?;
        let types = self.ints("tokenizer.ggml.token_type");
        if types.is_some_and(|t| t.len() != tokens.len()) {
            return Err(unsupported(format!(
                "{} token types for {} tokens",
                types.map_or(0, <[i128]>::len),
                tokens.len()
            )));
        }
        let pre = self.str("tokenizer.ggml.pre").ok_or_else(|| {
            unsupported(
                "no tokenizer.ggml.pre: llama.cpp then splits text its own default way, \
                 which kvaudit does not reproduce"
                    .into(),
            )
        })?;
        let (split, ignore_merges) =
            crate::tokenize::llamacpp::split_for_gguf(pre).ok_or_else(|| {
                unsupported(format!(
                    "tokenizer.ggml.pre is {pre:?}, a pre-tokenizer whose split kvaudit does \
                     not know (it knows {})",
                    crate::tokenize::llamacpp::gguf_pre_names().join(", ")
                ))
            })?;
        let token = |key: &str| -> Option<&String> {
            let id = self.int(key)?;
            usize::try_from(id).ok().and_then(|i| tokens.get(i))
        };
        let mut vocab = Map::new();
        let mut added = Vec::new();
        for (id, text) in tokens.iter().enumerate() {
            // llama.cpp refuses a vocabulary with a text twice.
            if vocab.insert(text.clone(), json!(id)).is_some() {
                return Err(unsupported(format!(
                    "the token {text:?} twice in its vocabulary"
                )));
            }
            // 2 unknown, 3 control, 4 user-defined: matched in raw text before the split, as
            // tokenizer.json's added tokens are (llama-server parses special tokens in prompts).
            let ty = types.map_or(1, |t| t[id]);
            if (2..=4).contains(&ty) && !text.is_empty() {
                added.push(json!({
                    "id": id, "content": text, "single_word": false, "lstrip": false,
                    "rstrip": false, "normalized": false, "special": ty != 4,
                }));
            }
        }
        let add_bos = self.bool("tokenizer.ggml.add_bos_token").unwrap_or(false);
        let bos = token("tokenizer.ggml.bos_token_id");
        let post_processor = match (add_bos, bos) {
            (true, Some(bos)) => {
                let id = vocab[bos].clone();
                json!({
                    "type": "TemplateProcessing",
                    "single": [{"SpecialToken": {"id": bos, "type_id": 0}},
                               {"Sequence": {"id": "A", "type_id": 0}}],
                    "pair": [{"SpecialToken": {"id": bos, "type_id": 0}},
                             {"Sequence": {"id": "A", "type_id": 0}},
                             {"SpecialToken": {"id": bos, "type_id": 1}},
                             {"Sequence": {"id": "B", "type_id": 1}}],
                    "special_tokens": {bos.as_str(): {"id": bos, "ids": [id], "tokens": [bos]}},
                })
            }
            _ => json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true,
                        "use_regex": false}),
        };
        let mut pretokenizers: Vec<Json> = split
            .iter()
            .map(|pattern| {
                json!({"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated",
                       "invert": false})
            })
            .collect();
        pretokenizers.push(json!({"type": "ByteLevel", "add_prefix_space": false,
                                  "trim_offsets": true, "use_regex": false}));
        let tokenizer = json!({
            "version": "1.0",
            "truncation": null,
            "padding": null,
            "added_tokens": added,
            "normalizer": null,
            "pre_tokenizer": {"type": "Sequence", "pretokenizers": pretokenizers},
            "post_processor": post_processor,
            "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true,
                        "use_regex": true},
            "model": {
                "type": "BPE", "dropout": null, "unk_token": null,
                "continuing_subword_prefix": null, "end_of_word_suffix": null,
                "fuse_unk": false, "byte_fallback": false, "ignore_merges": ignore_merges,
                "vocab": vocab, "merges": merges,
            },
        });
        let mut config = Map::new();
        let templates = self.templates();
        match templates.as_slice() {
            [] => {}
            [(name, text)] if name == "default" => {
                config.insert("chat_template".into(), json!(text));
            }
            many => {
                config.insert(
                    "chat_template".into(),
                    Json::Array(
                        many.iter()
                            .map(|(name, text)| json!({"name": name, "template": text}))
                            .collect(),
                    ),
                );
            }
        }
        for (name, key) in [
            ("bos_token", "tokenizer.ggml.bos_token_id"),
            ("eos_token", "tokenizer.ggml.eos_token_id"),
            ("unk_token", "tokenizer.ggml.unknown_token_id"),
            ("pad_token", "tokenizer.ggml.padding_token_id"),
        ] {
            if let Some(t) = token(key) {
                config.insert(name.into(), json!(t));
            }
        }
        config.insert("add_bos_token".into(), json!(add_bos));
        if let Some(name) = self.str("general.name") {
            config.insert("name_or_path".into(), json!(name));
        }
        Ok((tokenizer, Json::Object(config)))
    }
}

/// A new directory under the temporary directory that only this user can enter, for a run
/// with the tokenizer cache off (a fixed name there could be made beforehand by another user).
/// Its name is registered with the signal watcher before it is made, so a signal at any point
/// after leaves nothing behind.
fn private_dir() -> std::io::Result<ScratchDir> {
    let base = std::env::temp_dir();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    for attempt in 0..16u32 {
        let dir = base.join(format!(
            "kvaudit-gguf-{}-{nanos:09}-{attempt}",
            std::process::id()
        ));
        remove_on_signal(&dir);
        let mut builder = std::fs::DirBuilder::new();
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        match builder.create(&dir) {
            Ok(()) => return Ok(ScratchDir(dir)),
            Err(e) => {
                // Not ours: never removed, by a signal or otherwise.
                forget(&dir);
                if e.kind() != std::io::ErrorKind::AlreadyExists {
                    return Err(e);
                }
            }
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AlreadyExists,
        "no fresh temporary directory for the GGUF's tokenizer",
    ))
}

/// A directory of this run's own (the tokenizer cache off), removed with its files when the
/// last model read from it is dropped, on every path out, errors included.
#[derive(Debug)]
pub struct ScratchDir(PathBuf);

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
        forget(&self.0);
    }
}

/// `dir` is no longer the signal watcher's to remove.
fn forget(dir: &Path) {
    if let Ok(mut dirs) = SCRATCH.lock() {
        dirs.retain(|d| d != dir);
    }
}

/// Scratch directories alive now, for the signal watcher.
static SCRATCH: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Registers `dir` with the signal watcher, which the first call starts: its handlers are
/// installed before this returns. On a signal the watcher removes every registered directory
/// and exits as the signal would have (128 + its number).
fn remove_on_signal(dir: &Path) {
    use tokio::signal::unix::{SignalKind, signal};
    static WATCHER: std::sync::Once = std::sync::Once::new();
    if let Ok(mut dirs) = SCRATCH.lock() {
        dirs.push(dir.to_path_buf());
    }
    WATCHER.call_once(|| {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
        else {
            return;
        };
        let streams = {
            let _entered = rt.enter();
            (
                signal(SignalKind::interrupt()),
                signal(SignalKind::terminate()),
                signal(SignalKind::hangup()),
            )
        };
        let (Ok(mut int), Ok(mut term), Ok(mut hup)) = streams else {
            return;
        };
        let _ = std::thread::Builder::new()
            .name("kvaudit-scratch".into())
            .spawn(move || {
                let code = rt.block_on(async {
                    tokio::select! {
                        _ = int.recv() => 130,
                        _ = term.recv() => 143,
                        _ = hup.recv() => 129,
                    }
                });
                // Held to the exit: a run making its files waits for it (see `materialize`).
                if let Ok(mut dirs) = SCRATCH.lock() {
                    for d in dirs.drain(..) {
                        // The run may be writing a file into it right now: removing fails
                        // while one appears, so try until the directory is gone.
                        for _ in 0..100 {
                            if std::fs::remove_dir_all(&d).is_ok() || !d.exists() {
                                break;
                            }
                            std::thread::sleep(std::time::Duration::from_millis(1));
                        }
                    }
                    std::process::exit(code);
                }
                std::process::exit(code);
            });
    });
}

/// Where a model read from a GGUF file came from: the file the user named (errors name it,
/// not the files made from it) and, with the cache off, the directory those files live in.
#[derive(Debug, Clone)]
pub struct GgufOrigin {
    pub file: PathBuf,
    pub scratch: Option<std::sync::Arc<ScratchDir>>,
}

/// The model directory kvaudit reads for the GGUF file at `path`: tokenizer.json and
/// tokenizer_config.json made from its metadata, under the cache (`gguf/<digest>`), written
/// once per distinct metadata; with the cache off, in a directory removed when the returned
/// origin's last copy is dropped.
pub fn materialize(path: &Path) -> Result<(PathBuf, GgufOrigin), GgufError> {
    let shown = path.display().to_string();
    let meta = read_metadata(path)?;
    // Beside the prepared tokenizers (which the next step adds to); with that cache off, in a
    // directory of this run's own.
    let (dir, scratch) = match crate::tokenize::cache_dir() {
        Some(root) => (root.join("gguf").join(&meta.sha256[..32]), None),
        None => {
            let scratch = private_dir().map_err(|source| GgufError::Read {
                path: std::env::temp_dir().display().to_string(),
                source,
            })?;
            (scratch.0.clone(), Some(std::sync::Arc::new(scratch)))
        }
    };
    let origin = GgufOrigin {
        file: path.to_path_buf(),
        scratch,
    };
    // Made before from the same metadata by this version's rules: both files are renamed into
    // place whole, so their presence is all there is to check.
    let made = |name: &str| {
        std::fs::symlink_metadata(dir.join(name)).is_ok_and(|m| m.file_type().is_file())
    };
    if made("tokenizer.json") && made("tokenizer_config.json") {
        return Ok((dir, origin));
    }
    let (tokenizer, config) = meta.hf_files(&shown)?;
    // In a scratch directory, the files are made while the signal watcher waits: it never
    // removes the directory under a write that would make it again.
    let _hold = origin.scratch.as_ref().map(|_| SCRATCH.lock());
    let write_err = |source: std::io::Error| GgufError::Read {
        path: dir.display().to_string(),
        source,
    };
    for (name, value) in [
        ("tokenizer.json", &tokenizer),
        ("tokenizer_config.json", &config),
    ] {
        let target = dir.join(name);
        let text = serde_json::to_vec(value).map_err(|e| write_err(e.into()))?;
        // Whatever was planted under the name (a symlink, a FIFO) is replaced, not written
        // through.
        crate::output::write_with(&target, &text, crate::output::CACHE_FILE)
            .map_err(|e| write_err(e.into_io()))?;
    }
    Ok((dir, origin))
}
