//! `watch`'s settings, made from its arguments in one place.

use std::path::PathBuf;

use anyhow::{Result, bail};

use super::{audit_settings, resolved_model};
use crate::audit::AuditSettings;
use crate::cli::WatchArgs;
use crate::model::ModelFiles;
use crate::report::Format;

/// The longest pod name: it is a metric label.
const MAX_POD_NAME: usize = 63;

/// Everything `watch` needs before it reads a request.
pub struct WatchSettings {
    pub files: ModelFiles,
    pub audit: AuditSettings,
    /// The model as the flag named it (the metrics' `model` label).
    pub model_label: String,
    /// Each pod's name and its capture.
    pub pods: Vec<(String, PathBuf)>,
    pub requests: PathBuf,
    pub engine: crate::events::Engine,
    pub block_size: usize,
    pub capacity: usize,
    pub conversations: usize,
    pub record: Option<PathBuf>,
    pub format: Format,
}

impl WatchSettings {
    pub fn from_args(args: &WatchArgs, say: &mut dyn FnMut(&str)) -> Result<WatchSettings> {
        let (engine, default_block) = match args.rendering.server {
            crate::render::ServerProfile::Vllm => (crate::events::Engine::Vllm, 16),
            crate::render::ServerProfile::Sglang(_) => (crate::events::Engine::Sglang, 1),
            other => bail!(
                "--server {}: watch reads a serving engine's KV events; give --server vllm or \
                 --server sglang",
                other.name()
            ),
        };
        let mut pods: Vec<(String, PathBuf)> = Vec::with_capacity(args.pod.len());
        for spec in &args.pod {
            let (name, source) = pod_spec(spec)?;
            if pods.iter().any(|(n, _)| *n == name) {
                bail!("--pod {spec:?}: pod {name:?} is named twice");
            }
            pods.push((name, source));
        }
        if args.capacity == 0 {
            bail!("--capacity must be at least 1 block");
        }
        if args.conversations == 0 {
            bail!("--conversations must be at least 1");
        }
        let files = resolved_model(&args.model, say)?;
        let audit = audit_settings(&args.rendering, args.model.template_name.clone())?;
        Ok(WatchSettings {
            files,
            audit,
            model_label: args.model.model.clone(),
            pods,
            requests: args.requests.clone(),
            engine,
            block_size: args.block_size.unwrap_or(default_block),
            capacity: args.capacity,
            conversations: args.conversations,
            record: args.record.clone(),
            format: args.format.into(),
        })
    }
}

/// `NAME=SOURCE`: a name fit for a metric label, and a capture file.
fn pod_spec(spec: &str) -> Result<(String, PathBuf)> {
    let Some((name, source)) = spec.split_once('=') else {
        bail!("--pod {spec:?}: expected NAME=SOURCE, e.g. d0=d0.frames");
    };
    let fit = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if name.is_empty() || name.len() > MAX_POD_NAME || !name.chars().all(fit) {
        bail!("--pod {spec:?}: a pod name is 1 to {MAX_POD_NAME} letters, digits, '-', '_' or '.'");
    }
    if source.is_empty() {
        bail!("--pod {spec:?}: no source after '='");
    }
    if ["tcp://", "ipc://"].iter().any(|p| source.starts_with(p)) {
        bail!(
            "--pod {spec:?}: watch reads pods' captures (`kvaudit capture --out FILE`) so far; \
             subscribing to a live publisher is not built yet"
        );
    }
    Ok((name.to_string(), PathBuf::from(source)))
}
