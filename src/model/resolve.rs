//! From what a user names (`--model`: a directory, a GGUF file, a Hub id; `--template`,
//! `--tokenizer`) to the model's files, and the tokenizer a server profile tokenizes with.

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::{HubSettings, ModelFiles, fetch_detailed, is_hub_id};
use crate::tokenize::Tokenizer;

/// Where to find a model and which of its files to override.
#[derive(Debug, Clone, Default)]
pub struct ModelSpec {
    pub model: String,
    pub revision: Option<String>,
    pub offline: bool,
    pub template: Option<PathBuf>,
    pub tokenizer: Option<PathBuf>,
    pub progress: bool,
}

/// The model's tokenizer as `server` tokenizes prompts: llama.cpp without tokenizer.json's
/// Unicode normalization ([`Tokenizer::from_file_as_llamacpp`]), the others as transformers;
/// a GGUF's tokenizer, made as llama.cpp makes it, for every server.
pub fn tokenizer_for(
    files: &ModelFiles,
    server: crate::render::ServerProfile,
) -> Result<Tokenizer, crate::tokenize::TokenizeError> {
    match server {
        // A GGUF's tokenizer is llama.cpp's own already.
        crate::render::ServerProfile::Llamacpp if files.gguf.is_none() => {
            Tokenizer::from_file_as_llamacpp(&files.tokenizer_path)
        }
        _ => Tokenizer::from_file(&files.tokenizer_path),
    }
    .map_err(|e| match &files.gguf {
        // The tokenizer.json made from a GGUF is kvaudit's file: name the user's.
        Some(g) => crate::tokenize::TokenizeError::Load {
            path: g.file.display().to_string(),
            message: format!(
                "the tokenizer made from its metadata: {}",
                without_path(&e, &files.tokenizer_path)
            ),
        },
        None => e,
    })
}

/// An error's words without the path it names (the made file's, which means nothing to a user).
fn without_path(e: &crate::tokenize::TokenizeError, path: &Path) -> String {
    use crate::tokenize::TokenizeError as E;
    match e {
        E::Read { source, .. } => source.to_string(),
        E::Load { message, .. } => message.clone(),
        E::Refused { error, .. } => error.to_string(),
        E::Encode(m) => m.clone(),
    }
    .replace(&path.display().to_string(), "tokenizer.json")
}

/// Why `spec` names no model, in the words a user needs: a file that is not one kvaudit reads,
/// or a path that does not exist (with the part that is missing, and the nearest sibling
/// directory when one is a likely typo).
fn not_a_model(spec: &str) -> String {
    const KINDS: &str = "a model directory (holding tokenizer.json and tokenizer_config.json), \
                         a GGUF file, or a Hub id of the form org/name[@revision]";
    let path = Path::new(spec);
    if path.exists() {
        return format!("model {spec:?} is a file; kvaudit reads {KINDS}");
    }
    // The deepest part of the path that exists, and the first that does not.
    let mut missing = path;
    while let Some(parent) = missing.parent() {
        if parent.as_os_str().is_empty() || parent.is_dir() {
            break;
        }
        missing = parent;
    }
    let mut text = format!("model {spec:?}: {} does not exist", missing.display());
    let parent = match missing.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let near = missing.file_name().and_then(|typed| {
        let dirs: Vec<String> = std::fs::read_dir(parent)
            .ok()?
            .take(10_000)
            .flatten()
            .filter(|e| e.path().is_dir())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        crate::suggest::closest(&typed.to_string_lossy(), dirs.iter().map(String::as_str))
            .map(|name| missing.with_file_name(name))
    });
    match near {
        Some(near) => text.push_str(&format!(" (did you mean {}?)", near.display())),
        None => text.push_str(", and it is not a Hub id of the form org/name[@revision]"),
    }
    text
}

/// The model's files: a directory (a directory wins over a Hub id of the same spelling, as in
/// transformers), a GGUF file, or a Hub id fetched into the Hugging Face cache.
pub fn resolve_model(spec: &ModelSpec) -> Result<ModelFiles> {
    let path = Path::new(&spec.model);
    let mut fetched = None;
    let mut gguf = None;
    let named_gguf = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gguf"));
    let dir = if path.is_dir() {
        path.to_path_buf()
    } else if path.is_file() && (named_gguf || crate::model::gguf::is_gguf(path)) {
        // A file named .gguf that is not one gets the reader's own word on what is wrong.
        let (dir, origin) = crate::model::gguf::materialize(path)?;
        gguf = Some(origin);
        dir
    } else if std::fs::symlink_metadata(path).is_err() && !named_gguf && is_hub_id(&spec.model) {
        // Only a name that is nothing on this machine is asked of the Hub: a local path never
        // becomes a network request, nor does a missing GGUF file.
        let settings = HubSettings::from_env(spec.offline)?;
        let f = fetch_detailed(
            &spec.model,
            spec.revision.as_deref(),
            &settings,
            spec.progress,
        )?;
        let dir = f.snapshot.clone();
        fetched = Some(f);
        dir
    } else {
        anyhow::bail!("{}", not_a_model(&spec.model));
    };
    let mut files = ModelFiles::from_dir(
        &dir,
        &spec.model,
        spec.template.as_deref(),
        spec.tokenizer.as_deref(),
    )
    .map_err(|e| match &gguf {
        Some(g) => anyhow::anyhow!(
            "{}: the files made from its metadata: {e}",
            g.file.display()
        ),
        None => e.into(),
    })?;
    files.fetched = fetched;
    files.gguf = gguf;
    Ok(files)
}
