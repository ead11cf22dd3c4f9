//! One gate run: every model audited in parallel with the diff-turns pipeline, then findings,
//! the baseline comparison and the allows, in a stable order.

use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, Result, anyhow};

use super::config::{GateConfig, GateOptions, ModelConfig};
use super::findings::{self, Audited};
use super::lock::Lock;
use super::{BaselineSummary, CheckReport, ModelSummary};
use crate::align::AlignOptions;
use crate::audit::{self, AuditSettings};
use crate::model::ModelSpec;
use crate::render::reply::PlanOptions;
use crate::render::{Clock, Conversation};

/// What the run compares against.
#[derive(Debug, Clone)]
pub enum Baseline {
    None,
    Lock {
        lock: Lock,
        source: String,
    },
    /// Another template for every model: audited first, its numbers are the baseline.
    Template(PathBuf),
}

#[derive(Debug, Clone, Default)]
pub struct CheckOptions {
    pub offline: bool,
    pub progress: bool,
    /// Models audited at once (0: one per core).
    pub jobs: usize,
}

pub fn check(
    config: &GateConfig,
    baseline: &Baseline,
    options: &CheckOptions,
) -> Result<CheckReport> {
    let scenarios = load_scenarios(config)?;
    let (lock, baseline_summary) = match baseline {
        Baseline::None => (None, None),
        Baseline::Lock { lock, source } => (
            Some(lock.clone()),
            Some(BaselineSummary {
                source: source.clone(),
                entries: lock.entries.len(),
            }),
        ),
        Baseline::Template(old) => {
            let mut before = config.clone();
            // The baseline's numbers are compared, never its help lines.
            before.gate.remedies = false;
            for m in &mut before.models {
                m.template = Some(old.clone());
            }
            let audited = audit_all(&before, &scenarios, options)?;
            let lock = Lock::new(
                audited
                    .iter()
                    .flat_map(|a| findings::lock_entries(a, &before.gate))
                    .collect(),
            );
            let summary = BaselineSummary {
                source: format!("template {}", old.display()),
                entries: lock.entries.len(),
            };
            (Some(lock), Some(summary))
        }
    };
    let audited = audit_all(config, &scenarios, options)?;
    let mut all = Vec::new();
    let mut entries = Vec::new();
    for a in &audited {
        let mut found = findings::model_findings(a, &config.gate);
        let now = findings::lock_entries(a, &config.gate);
        if let Some(lock) = &lock {
            let changes = findings::baseline_findings(a, &now, lock, &config.gate, &mut found);
            found.extend(changes);
        }
        entries.extend(now);
        all.extend(found);
    }
    let unused = findings::apply_allows(&mut all, &config.allows, &config.gate);
    all.extend(unused);
    Ok(CheckReport {
        models: audited.iter().map(|a| summary(a, &config.gate)).collect(),
        findings: all,
        baseline: baseline_summary,
        lock: Lock::new(entries),
    })
}

fn summary(a: &Audited, gate: &GateOptions) -> ModelSummary {
    let router = gate.router.as_ref().and_then(|g| {
        let report = a.report.as_ref()?;
        let mut s = super::RouterSummary {
            index_block_size: g.index_block_size,
            engine_cached_tokens: 0,
            index_visible_tokens: 0,
            decode_only_engine: 0,
            decode_only_index: 0,
        };
        let mut any = false;
        for c in &report.conversations {
            for (t, r) in c.transitions.iter().zip(&c.routers) {
                any = true;
                s.engine_cached_tokens += r.engine_cached_tokens as u64;
                s.index_visible_tokens += r.index_visible_tokens as u64;
                let engine = crate::routers::llm_d::decider::decide(
                    &g.decider,
                    t.next_prompt_tokens,
                    r.engine_cached_tokens,
                    1,
                );
                let decode = crate::routers::llm_d::decider::Verdict::DecodeOnly;
                s.decode_only_engine += u64::from(engine.verdict == decode);
                s.decode_only_index += u64::from(r.decision.verdict == decode);
            }
        }
        any.then_some(s)
    });
    ModelSummary {
        source: a.model.source.clone(),
        server: a.model.server.label(),
        template: a.template_file.clone(),
        template_sha256: a.template_sha256.clone(),
        tokenizer_sha256: a.tokenizer_sha256.clone(),
        scenarios: a.scenarios.clone(),
        transitions: a.report.as_ref().map_or(0, |r| {
            r.conversations.iter().map(|c| c.transitions.len()).sum()
        }),
        router,
    }
}

/// Conversation files, read once (an unreadable one is an error naming the file); none: the
/// probe set, built per model (each model's `resend`).
fn load_scenarios(config: &GateConfig) -> Result<Vec<Conversation>> {
    let at = config
        .path
        .as_ref()
        .map(|p| format!("{}: ", p.display()))
        .unwrap_or_default();
    config
        .scenarios
        .iter()
        .map(|s| {
            let mut c = Conversation::from_file(&s.path)
                .with_context(|| format!("{at}scenario {}", s.name))?;
            c.source = s.name.clone();
            Ok(c)
        })
        .collect()
}

fn audit_all(
    config: &GateConfig,
    scenarios: &[Conversation],
    options: &CheckOptions,
) -> Result<Vec<Audited>> {
    if config.models.is_empty() {
        anyhow::bail!(
            "no model to check: add a [[model]] to {} or pass --model",
            config
                .path
                .as_ref()
                .map_or("kvaudit.toml".into(), |p| p.display().to_string())
        );
    }
    let jobs = match options.jobs {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
    .min(config.models.len());
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, Result<Audited>)>> = Mutex::new(Vec::new());
    let not_started = std::thread::scope(|s| {
        for k in 0..jobs {
            let started = std::thread::Builder::new().spawn_scoped(s, || {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(m) = config.models.get(i) else { break };
                    let r = audit_model(m, config, scenarios, options);
                    if let Ok(mut v) = results.lock() {
                        v.push((i, r));
                    }
                }
            });
            if let Err(e) = started {
                // The threads already started stop after the model each is auditing.
                next.store(config.models.len(), Ordering::Relaxed);
                return Some(anyhow::Error::new(e).context(format!(
                    "cannot start audit thread {} of {jobs} (try a smaller --jobs)",
                    k + 1
                )));
            }
        }
        None
    });
    if let Some(e) = not_started {
        return Err(e);
    }
    let mut results = results
        .into_inner()
        .map_err(|_| anyhow!("a model audit thread panicked"))?;
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}

fn audit_model(
    m: &ModelConfig,
    config: &GateConfig,
    scenarios: &[Conversation],
    options: &CheckOptions,
) -> Result<Audited> {
    let gate = &config.gate;
    let context = || format!("{}: model {}", m.location, m.source);
    if let Some(t) = &m.template
        && !t.is_file()
    {
        return Err(anyhow!("template {}: not a readable file", t.display())).with_context(context);
    }
    let files = crate::model::resolve_model(&ModelSpec {
        model: m.source.clone(),
        revision: None,
        offline: options.offline,
        template: m.template.clone(),
        tokenizer: m.tokenizer.clone(),
        progress: options.progress,
    })
    .with_context(context)?;
    let tok = crate::model::tokenizer_for(&files, m.server).with_context(context)?;
    // Routers asked about need the simulated events too: the llm-d settings configured, or
    // llm-d's defaults (whose own findings stay off without [gate] router).
    let router = gate
        .router
        .as_ref()
        .map(|r| crate::routers::llm_d::view::RouterSettings {
            engine_block_size: r.engine_block_size,
            index: crate::routers::llm_d::IndexConfig::new(r.index_block_size),
            decider: r.decider,
        })
        .or_else(|| (!gate.routers.is_empty()).then(Default::default))
        .map(|mut s| {
            s.index.model_name = Some(m.source.clone());
            s
        });
    let routers = match &router {
        Some(base) => gate
            .routers
            .iter()
            .map(|text| {
                crate::routers::Spec::parse(text, base)
                    .map(|spec| (std::sync::Arc::<str>::from(text.as_str()), spec))
                    .map_err(|e| anyhow::anyhow!("router {text:?}: {e}"))
            })
            .collect::<Result<Vec<_>>>()?,
        None => Vec::new(),
    };
    let settings = AuditSettings {
        clock: Clock::Fixed(gate.now),
        date_rollover: gate.level(super::Code::DateRollover) != super::Level::Allow,
        plan: PlanOptions {
            reply_format: None,
            kwargs: m.template_kwargs.clone(),
            extra_stops: Vec::new(),
            server: m.server,
            server_kwargs: m.server_template_kwargs.clone(),
            kwargs_from_prompt: Vec::new(),
            override_kwargs: Default::default(),
        },
        align: AlignOptions {
            block_sizes: gate.block_sizes.clone(),
            ..AlignOptions::default()
        },
        template_name: m.template_name.clone(),
        fuel: crate::render::DEFAULT_FUEL,
        router,
        routers,
        remedies: gate.remedies,
    };
    let probes;
    let conversations = if scenarios.is_empty() {
        probes = audit::probe_conversations(None, m.resend);
        &probes
    } else {
        scenarios
    };
    let mut audited = findings::audit_with(m, &files, &tok, conversations, &settings);
    // A template kvaudit refuses to evaluate is an input error, not a finding about it: the
    // gate cannot say what the template does to the cache (and it is one line, not a finding
    // per scenario with the same message).
    if let Some(why) = audited.limit.take() {
        return Err(anyhow!(why)).with_context(context);
    }
    Ok(audited)
}
