//! `check`'s settings: its config, baseline and lock, and the files it reads.

use anyhow::{Result, bail};
use serde_json::Map;

use crate::render::{ResendMode, ServerProfile};

/// `check`'s config: `--config`, else ./kvaudit.toml, else the `--model` flags alone;
/// `--model` and `--template` override the file's models.
pub fn check_config(args: &crate::cli::CheckArgs) -> Result<crate::gate::config::GateConfig> {
    use crate::gate::config::{self, GateConfig, ModelConfig};
    let default = std::path::Path::new(config::FILE_NAME);
    let path = args
        .config
        .clone()
        .or_else(|| default.is_file().then(|| default.to_path_buf()));
    let mut cfg = match &path {
        Some(p) => config::load(p)?,
        None if !args.model.is_empty() => GateConfig::default(),
        None => bail!(
            "no {} here: write one with `kvaudit init --model ORG/NAME`, or pass --config FILE or --model",
            config::FILE_NAME
        ),
    };
    if !args.model.is_empty() {
        cfg.models = args
            .model
            .iter()
            .map(|m| ModelConfig {
                source: m.clone(),
                template: None,
                template_name: None,
                tokenizer: None,
                template_kwargs: Map::new(),
                resend: ResendMode::Content,
                server: ServerProfile::Transformers,
                server_template_kwargs: Map::new(),
                location: "--model".into(),
            })
            .collect();
    }
    if !args.scenario.is_empty() {
        cfg.scenarios = args
            .scenario
            .iter()
            .map(|p| config::Scenario {
                name: p.display().to_string(),
                path: p.clone(),
            })
            .collect();
    }
    if let Some(t) = &args.template {
        for m in &mut cfg.models {
            m.template = Some(t.clone());
        }
    }
    if args.no_remedies {
        cfg.gate.remedies = false;
    }
    Ok(cfg)
}

/// Where `check --update-baseline` writes the lock.
#[derive(Debug, Clone)]
pub struct LockFile {
    pub path: std::path::PathBuf,
    /// The folder it must stay in when the config named it (or it defaulted beside the
    /// config): `--baseline FILE` is the user's own word and goes where it says.
    pub within: Option<std::path::PathBuf>,
}

/// What `check` compares with, and where `--update-baseline` writes: `--baseline-template`,
/// else `--baseline` (must exist unless it is being written), else the config's `baseline`
/// when that file exists.
pub fn check_baseline(
    args: &crate::cli::CheckArgs,
    cfg: &crate::gate::config::GateConfig,
) -> Result<(crate::gate::Baseline, LockFile)> {
    use crate::gate::Baseline;
    use crate::gate::lock::Lock;
    let lock = match &args.baseline {
        Some(path) => LockFile {
            path: path.clone(),
            within: None,
        },
        None => {
            let path = cfg.gate.baseline.clone().unwrap_or_else(|| {
                cfg.path
                    .as_ref()
                    .and_then(|p| p.parent())
                    .unwrap_or(std::path::Path::new(""))
                    .join("kvaudit.lock")
            });
            // A committed kvaudit.lock may be a symlink: it must not lead out of the folder.
            if let Some(root) = &cfg.root {
                crate::gate::config::confine(root, &path)
                    .map_err(|why| anyhow::anyhow!("the baseline {}: {why}", path.display()))?;
            }
            LockFile {
                path,
                within: cfg.root.clone(),
            }
        }
    };
    if let Some(old) = &args.baseline_template {
        if !old.is_file() {
            bail!("--baseline-template {}: not a readable file", old.display());
        }
        return Ok((Baseline::Template(old.clone()), lock));
    }
    if args.update_baseline || (args.baseline.is_none() && !lock.path.exists()) {
        return Ok((Baseline::None, lock));
    }
    if !lock.path.is_file() {
        bail!(
            "the baseline {} is not a lock file (it is a directory or a special file)",
            lock.path.display()
        );
    }
    let loaded = Lock::load(&lock.path)?;
    Ok((
        Baseline::Lock {
            lock: loaded,
            source: lock.path.display().to_string(),
        },
        lock,
    ))
}

/// Every file `check` reads that a path names (config, lock, templates, tokenizers,
/// conversations, local model folders' files): no output may be one of them.
pub fn check_inputs(
    args: &crate::cli::CheckArgs,
    cfg: &crate::gate::config::GateConfig,
    lock: &LockFile,
) -> Vec<std::path::PathBuf> {
    let mut inputs: Vec<std::path::PathBuf> = cfg.path.iter().cloned().collect();
    if !args.update_baseline {
        inputs.push(lock.path.clone());
    }
    inputs.extend(args.baseline_template.iter().cloned());
    for m in &cfg.models {
        inputs.extend(m.template.iter().cloned());
        inputs.extend(m.tokenizer.iter().cloned());
        let dir = std::path::Path::new(&m.source);
        if dir.is_dir() {
            inputs.extend(crate::model::files_read(dir));
        }
    }
    inputs.extend(cfg.scenarios.iter().map(|s| s.path.clone()));
    inputs
}
