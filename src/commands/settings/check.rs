//! `check`'s settings: its config, baseline and lock, and the files it reads.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::Map;

use crate::cli::CheckArgs;
use crate::gate::{self, Baseline, CheckOptions};
use crate::render::{ResendMode, ServerProfile};

/// What `check` was asked to do, its flags checked.
pub enum CheckSettings {
    ListCodes,
    Explain(gate::Code),
    /// A router config linted on its own: nothing names a model to run.
    LintRouterConfig {
        path: PathBuf,
        engine: Option<EngineFlags>,
    },
    Gate(Box<GateRun>),
}

/// A gate run, everything it needs before it renders: the config with the flags applied, the
/// router config whose wiring it measures, the baseline and where the lock is written.
pub struct GateRun {
    pub config: gate::config::GateConfig,
    pub router_config: Option<PathBuf>,
    /// The engine's serving flags the router config is linted against.
    pub engine: Option<EngineFlags>,
    pub baseline: Baseline,
    pub lock: LockFile,
    pub options: CheckOptions,
}

/// The engine's serving flags, read from `--engine-args`.
pub struct EngineFlags {
    pub path: PathBuf,
    pub args: crate::routers::config::EngineArgs,
}

impl EngineFlags {
    fn read(path: &Path) -> Result<EngineFlags> {
        let shown = path.display();
        let text = crate::input::read_text(path, crate::routers::config::MAX_CONFIG_BYTES)
            .with_context(|| format!("cannot read --engine-args {shown}"))?;
        Ok(EngineFlags {
            path: path.to_path_buf(),
            args: crate::routers::config::engine_args(&text)
                .map_err(|e| anyhow::anyhow!("--engine-args {shown}: {e}"))?,
        })
    }
}

impl CheckSettings {
    /// `say` takes the warnings for standard error as they arise.
    pub fn from_args(args: &CheckArgs, say: &mut dyn FnMut(&str)) -> Result<CheckSettings> {
        if args.list_codes {
            return Ok(CheckSettings::ListCodes);
        }
        if let Some(code) = &args.explain {
            let code = gate::Code::parse(code).with_context(|| {
                format!("{code:?} is not a kvaudit code (see kvaudit check --list-codes)")
            })?;
            return Ok(CheckSettings::Explain(code));
        }
        let engine = args
            .engine_args
            .as_deref()
            .map(EngineFlags::read)
            .transpose()?;
        if let Some(path) = alone(args) {
            check_engine_block_size(args)?;
            return Ok(CheckSettings::LintRouterConfig {
                path: path.to_path_buf(),
                engine,
            });
        }
        if engine.is_some() && args.router_config.is_none() {
            bail!(
                "--engine-args lints a router configuration against the engine: give it with \
                 --router-config FILE (or a YAML --config)"
            );
        }
        let mut config = check_config(args)?;
        for text in &args.routers {
            crate::routers::Spec::parse(text, &default_llm_d(args))
                .map_err(|e| anyhow::anyhow!("--router {text:?}: {e}"))?;
            config.gate.routers.push(text.clone());
        }
        check_engine_block_size(args)?;
        if let Some(path) = &args.router_config {
            let (loaded, _) = super::router_config(path)?;
            // Its llm-d wiring becomes the router view of the run (KVA401/KVA402 measure it).
            if let Ok(crate::routers::Spec::LlmD(l)) = loaded.spec(&default_llm_d(args)) {
                config.gate.router = Some(gate::config::RouterConfig {
                    engine_block_size: args.engine_block_size,
                    index_block_size: l.0.index.block_size,
                    decider: l.0.decider,
                });
            }
        }
        let (baseline, lock) = check_baseline(args, &config)?;
        // Nothing is written over what the run reads, checked before the run.
        let written = if args.update_baseline {
            Some(lock.path.clone())
        } else {
            args.output.clone()
        };
        crate::output::check_outputs(check_inputs(args, &config, &lock), written.iter())?;
        if matches!(baseline, Baseline::None)
            && !args.update_baseline
            && config.gate.baseline.is_some()
        {
            say(&format!(
                "warning: no baseline yet ({} not found): record one with `kvaudit check --update-baseline`",
                lock.path.display()
            ));
        }
        let options = CheckOptions {
            offline: args.offline,
            progress: std::io::stderr().is_terminal(),
            jobs: super::jobs(args.jobs)?,
        };
        Ok(CheckSettings::Gate(Box::new(GateRun {
            config,
            router_config: args.router_config.clone(),
            engine,
            baseline,
            lock,
            options,
        })))
    }
}

/// A router config given as --config (YAML) is linted on its own: there is no model to run.
/// So is --router-config when nothing names a model to run (no --model, no config given and
/// no ./kvaudit.toml).
fn alone(args: &CheckArgs) -> Option<&Path> {
    let yaml = |p: &Path| {
        p.extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("yaml") || e.eq_ignore_ascii_case("yml"))
    };
    match (&args.router_config, args.config.as_deref()) {
        (None, Some(path)) if yaml(path) => Some(path),
        (Some(path), None)
            if args.model.is_empty()
                && args.scenario.is_empty()
                && !Path::new(gate::config::FILE_NAME).exists() =>
        {
            Some(path.as_path())
        }
        _ => None,
    }
}

fn check_engine_block_size(args: &CheckArgs) -> Result<()> {
    if args.engine_block_size == 0 {
        bail!("--engine-block-size must be positive");
    }
    Ok(())
}

/// The llm-d settings a router config's wiring starts from.
fn default_llm_d(args: &CheckArgs) -> crate::routers::llm_d::view::RouterSettings {
    crate::routers::llm_d::view::RouterSettings {
        engine_block_size: args.engine_block_size,
        ..Default::default()
    }
}

/// `check`'s config: `--config`, else ./kvaudit.toml, else the `--model` flags alone;
/// `--model` and `--template` override the file's models.
fn check_config(args: &crate::cli::CheckArgs) -> Result<crate::gate::config::GateConfig> {
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
fn check_baseline(
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
fn check_inputs(
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
