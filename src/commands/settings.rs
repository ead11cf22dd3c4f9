//! Command-line values turned into validated domain settings, in one place: every command
//! takes its settings from here, so a flag shared by several commands is checked one way.

use std::io::IsTerminal;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::{Map, Value as Json};

use crate::align::AlignOptions;
use crate::audit::{self, AuditSettings, QuickTurn, RenderSelection};
use crate::cli::{ConversationArgs, EmulationArgs, EngineArg, ReplyFormatArg, Resend};
use crate::events::Engine;
use crate::model::ModelFiles;
use crate::render::reply::PlanOptions;
use crate::render::{
    ChatRenderer, Clock, Conversation, ReplyFormat, ResendMode, ServerProfile, parse_time,
};
use crate::replay::ReplayOptions;
use crate::report::{Format, Style};

/// llm-d's index settings from the flags diff-turns, replay, capture and keys share.
pub fn index_config(
    args: &crate::cli::IndexArgs,
    block_size: usize,
) -> crate::routers::llm_d::IndexConfig {
    use crate::cli::{HashArg, ProfileArg};
    let mut cfg = crate::routers::llm_d::IndexConfig::new(block_size);
    cfg.algo = match args.hash {
        HashArg::CborFnv => crate::routers::llm_d::HashAlgo::CborFnv,
        HashArg::Xxh64 => crate::routers::llm_d::HashAlgo::Xxh64,
    };
    cfg.seed = args.hash_seed.clone();
    cfg.model_name = args.model_name.clone();
    cfg.profile = match args.llmd_profile {
        ProfileArg::DigestFirst => crate::routers::llm_d::Profile::DigestFirst,
        ProfileArg::Router202608 => crate::routers::llm_d::Profile::Router202608,
    };
    cfg
}

/// The emulation settings shared by replay and capture --live-replay.
pub fn replay_options(
    args: &EmulationArgs,
    keep_going: bool,
    default_pod: &str,
) -> Result<ReplayOptions> {
    crate::align::check_block_sizes("--block-sizes", &args.index_block_size)
        .map_err(anyhow::Error::msg)?;
    let mut views = Vec::new();
    let mut dynamo = Vec::new();
    // The llm-d settings a `--router llm-d:...` starts from (its engine block size and
    // decider do not apply to a capture).
    let base = crate::routers::llm_d::view::RouterSettings {
        engine_block_size: 16,
        index: index_config(&args.index, args.index_block_size[0]),
        decider: Default::default(),
    };
    for text in &args.routers {
        let spec = crate::routers::Spec::parse(text, &base)
            .map_err(|e| anyhow::anyhow!("--router {text:?}: {e}"))?;
        match spec {
            crate::routers::Spec::LlmD(_) if !text.contains(':') => views.extend(
                args.index_block_size
                    .iter()
                    .map(|&b| index_config(&args.index, b)),
            ),
            crate::routers::Spec::LlmD(l) => views.push(l.0.index),
            crate::routers::Spec::Dynamo(crate::routers::dynamo::Dynamo {
                block_size,
                conditional: None,
            }) => dynamo.push(block_size),
            other => bail!(
                "--router {text:?}: {} on a capture is not emulated: {}",
                other.name(),
                match other {
                    crate::routers::Spec::Dynamo(crate::routers::dynamo::Dynamo { .. }) => {
                        "conditional_disagg is a routing setting; replay answers what the index holds"
                    }
                    crate::routers::Spec::VllmRouter(crate::routers::vllm_router::VllmRouter {
                        ..
                    })
                    | crate::routers::Spec::Smg(crate::routers::smg::Smg { .. }) => {
                        "replay emulates llm-d and dynamo; for this router's view of a conversation use diff-turns or corpus --router"
                    }
                    _ =>
                        "it keys on requests, not engine events: use diff-turns or corpus --router",
                }
            ),
        }
    }
    if args.routers.is_empty() {
        views = args
            .index_block_size
            .iter()
            .map(|&b| index_config(&args.index, b))
            .collect();
    }
    Ok(ReplayOptions {
        views,
        dynamo,
        engine: match args.engine {
            EngineArg::Vllm => Engine::Vllm,
            EngineArg::Sglang => Engine::Sglang,
        },
        keep_going,
        default_pod: default_pod.to_string(),
    })
}

/// The router view's settings; llm-d hashes the served model's name, here the `--model` text
/// unless `--model-name` is given.
pub fn router_settings(
    args: &crate::cli::RouterArgs,
    model: &str,
) -> Result<crate::routers::llm_d::view::RouterSettings> {
    for (flag, b) in [
        ("--engine-block-size", args.engine_block_size),
        ("--index-block-size", args.index_block_size),
    ] {
        crate::align::check_block_size(flag, b).map_err(anyhow::Error::msg)?;
    }
    let decider = crate::routers::llm_d::decider::DeciderConfig::parse(&args.decider)
        .map_err(|e| anyhow::anyhow!("--decider {:?}: {e}", args.decider))?;
    let mut index = index_config(&args.index, args.index_block_size);
    index.model_name.get_or_insert_with(|| model.to_string());
    Ok(crate::routers::llm_d::view::RouterSettings {
        engine_block_size: args.engine_block_size,
        index,
        decider,
    })
}

/// A router configuration file, read (bounded) and parsed, with its text.
pub fn router_config(path: &std::path::Path) -> Result<(crate::routers::config::Loaded, String)> {
    let shown = path.display();
    let bytes = crate::input::read_bounded(path, crate::routers::config::MAX_CONFIG_BYTES)
        .with_context(|| format!("cannot read router config {shown}"))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| anyhow::anyhow!("router config {shown} is not UTF-8 text"))?;
    let loaded = crate::routers::config::parse(&text)
        .map_err(|e| anyhow::anyhow!("router config {shown}: {e}"))?;
    Ok((loaded, text))
}

/// The routers `--router` asks about (llm-d's precise index when none is given).
pub fn router_specs(
    args: &crate::cli::RouterArgs,
    llm_d: &crate::routers::llm_d::view::RouterSettings,
) -> Result<Vec<(std::sync::Arc<str>, crate::routers::Spec)>> {
    if args.routers.is_empty() && args.router_configs.is_empty() {
        return Ok(vec![(
            "llm-d".into(),
            crate::routers::Spec::LlmD(crate::routers::llm_d::LlmD(llm_d.clone())),
        )]);
    }
    let mut specs = Vec::new();
    for text in &args.routers {
        let spec = crate::routers::Spec::parse(text, llm_d)
            .map_err(|e| anyhow::anyhow!("--router {text:?}: {e}"))?;
        specs.push((text.trim().into(), spec));
    }
    for path in &args.router_configs {
        let (loaded, _) = router_config(path)?;
        let shown = path.display();
        for l in crate::routers::config::lint(&loaded, llm_d.engine_block_size) {
            super::terminal::stderr_line(&format!("warning: {shown}: {}", l.message));
        }
        let spec = loaded
            .spec(llm_d)
            .map_err(|e| anyhow::anyhow!("--router-config {shown}: {e}"))?;
        specs.push((format!("{} from {shown}", spec.name()).into(), spec));
    }
    Ok(specs)
}

pub fn audit_settings(
    args: &crate::cli::RenderingArgs,
    template_name: Option<String>,
) -> Result<AuditSettings> {
    let now = match &args.now {
        Some(t) => parse_time(t).with_context(|| {
            format!(
                "--now {t:?}: expected a time like 2026-01-15T10:00:00 or 2026-01-15T10:00:00+02:00"
            )
        })?,
        None => chrono::Local::now().naive_local(),
    };
    let kwargs = template_kwargs("--template-kwarg", &args.template_kwarg)?;
    let server = args.server;
    let server_kwargs = template_kwargs("--server-template-kwarg", &args.server_template_kwarg)?;
    if server == ServerProfile::Transformers && !server_kwargs.is_empty() {
        bail!("--server-template-kwarg needs --server vllm, sglang or llamacpp");
    }
    Ok(AuditSettings {
        clock: Clock::Fixed(now),
        date_rollover: false,
        plan: PlanOptions {
            reply_format: args.reply_format.map(|f| match f {
                ReplyFormatArg::Plain => ReplyFormat::Plain,
                ReplyFormatArg::ThinkNl => ReplyFormat::ThinkNl,
                ReplyFormatArg::ThinkTight => ReplyFormat::ThinkTight,
                ReplyFormatArg::Harmony => ReplyFormat::Harmony,
            }),
            kwargs,
            extra_stops: Vec::new(),
            server,
            server_kwargs,
            kwargs_from_prompt: kwargs_turns(&args.kwargs_turn)?,
            override_kwargs: Map::new(),
        },
        align: AlignOptions::default(),
        template_name,
        fuel: args.fuel,
        router: None,
        routers: Vec::new(),
        remedies: false,
    })
}

/// `check`'s config: `--config`, else ./kvaudit.toml, else the `--model` flags alone;
/// `--model` and `--template` override the file's models.
/// More worker threads than any machine has cores: each takes a stack and its own caches, so
/// a typo (`--jobs 100000`) is refused instead of exhausting the process.
pub const MAX_JOBS: usize = 1024;

/// `--jobs N` checked against [`MAX_JOBS`] (0 passes: `check` reads it as one per core).
pub fn jobs(n: usize) -> Result<usize> {
    if n > MAX_JOBS {
        bail!("--jobs {n} is more than the {MAX_JOBS} worker threads allowed");
    }
    Ok(n)
}

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

/// The files a model's flags make kvaudit read, once the model is resolved (a Hub id's
/// snapshot included): no output may be one of them.
pub fn model_inputs(
    args: &crate::cli::ModelArgs,
    files: &crate::model::ModelFiles,
) -> Vec<std::path::PathBuf> {
    let mut inputs = crate::model::files_read(&files.dir);
    inputs.push(files.tokenizer_path.clone());
    inputs.extend(args.template.iter().cloned());
    // A GGUF file is read itself (its files in the cache are made from it).
    let named = std::path::Path::new(&args.model);
    if named.is_file() {
        inputs.push(named.to_path_buf());
    }
    inputs
}

/// `KEY=VALUE` flags: the value as [`kwarg_value`] reads it.
fn template_kwargs(flag: &str, pairs: &[String]) -> Result<Map<String, Json>> {
    let mut kwargs = Map::new();
    for kv in pairs {
        let (k, v) = kv
            .split_once('=')
            .with_context(|| format!("{flag} {kv:?}: expected KEY=VALUE"))?;
        if k.is_empty() {
            bail!("{flag} {kv:?}: the key is empty");
        }
        kwargs.insert(k.to_string(), kwarg_value(v));
    }
    Ok(kwargs)
}

/// `--kwargs-turn N:KEY=VALUE` flags, grouped by prompt in the order given.
fn kwargs_turns(flags: &[String]) -> Result<Vec<(usize, Map<String, Json>)>> {
    let mut out: Vec<(usize, Map<String, Json>)> = Vec::new();
    for flag in flags {
        let (n, kv) = flag
            .split_once(':')
            .with_context(|| format!("--kwargs-turn {flag:?}: expected N:KEY=VALUE"))?;
        let n: usize = match n.trim().parse() {
            Ok(0) => bail!("--kwargs-turn {flag:?}: prompts count from 1"),
            Ok(n) => n,
            Err(_) => bail!("--kwargs-turn {flag:?}: {n:?} is not a prompt number"),
        };
        let kwargs = template_kwargs("--kwargs-turn", std::slice::from_ref(&kv.to_string()))?;
        match out.iter_mut().find(|(m, _)| *m == n) {
            Some((_, map)) => map.extend(kwargs),
            None => out.push((n, kwargs)),
        }
    }
    // Later prompts are applied over earlier ones.
    out.sort_by_key(|(n, _)| *n);
    Ok(out)
}

/// `render --prompt N` / `--held N`: which part of each conversation to show (1-based).
pub fn render_selection(prompt: Option<usize>, held: Option<usize>) -> Result<RenderSelection> {
    Ok(match (prompt, held) {
        (Some(_), Some(_)) => bail!("give --prompt or --held, not both"),
        (Some(0), None) => bail!("--prompt counts from 1"),
        (None, Some(0)) => bail!("--held counts from 1 (transition 1 -> 2 is --held 1)"),
        (Some(n), None) => RenderSelection::Prompt(n),
        (None, Some(n)) => RenderSelection::Held(n),
        (None, None) => RenderSelection::AllPrompts,
    })
}

/// A `--template-kwarg` value: JSON, or Python's spelling of a constant (what users copy
/// from `apply_chat_template(..., enable_thinking=False)`; as a string, "False" is true in a
/// template), else the text as a string.
fn kwarg_value(v: &str) -> Json {
    match v {
        "True" => Json::Bool(true),
        "False" => Json::Bool(false),
        "None" => Json::Null,
        _ => serde_json::from_str::<Json>(v).unwrap_or_else(|_| Json::String(v.to_string())),
    }
}

/// Input that would otherwise be dropped without a word, as warnings for the command to
/// print: a keyword argument no chat template in use reads, and reasoning that the plain
/// reply format leaves out.
pub fn ignored_input_warnings(
    args: &ConversationArgs,
    files: &ModelFiles,
    template_name: Option<&str>,
    conversations: &[Conversation],
) -> Vec<String> {
    let mut warnings = Vec::new();
    if args.rendering.reply_format == Some(ReplyFormatArg::Plain) && args.reasoning.is_some() {
        warnings.push(
            "--reasoning is left out of the reply: --reply-format plain has no reasoning block \
             (drop --reply-format to use the template's own layout)"
                .to_string(),
        );
    }
    // The variables each conversation's template reads (compiled once per template; one that
    // does not compile is the audit's error to report, not a warning).
    let mut read_by: Vec<(String, Vec<String>)> = Vec::new();
    let mut names_for = |conv: &Conversation| -> Option<Vec<String>> {
        let server = args.rendering.server;
        let has_tools = server.selects_tool_template(conv.any_tools());
        let name = crate::audit::template_name(files, server, template_name);
        let template = files.select_template(name, has_tools).ok()?;
        if let Some((_, names)) = read_by.iter().find(|(o, _)| *o == template.origin) {
            return Some(names.clone());
        }
        let renderer = ChatRenderer::new(
            &template.text,
            files.special_tokens.clone(),
            args.rendering.fuel,
        )
        .ok()?;
        let names = renderer.kwarg_names();
        read_by.push((template.origin, names.clone()));
        Some(names)
    };
    let unread = |given: &str, key: &str, names: &[String]| -> Option<String> {
        if names.iter().any(|n| n == key) {
            return None;
        }
        let hint = crate::suggest::closest(key, names.iter().map(String::as_str))
            .map(|n| format!(" (did you mean `{n}`?)"))
            .unwrap_or_default();
        let reads = if names.is_empty() {
            "it reads no variables besides messages, tools, documents and add_generation_prompt"
                .to_string()
        } else {
            format!("it reads: {}", names.join(", "))
        };
        Some(format!(
            "{given}: the chat template never reads `{key}`{hint}; {reads}"
        ))
    };
    let mut cli_names: Option<Vec<String>> = None;
    for conv in conversations {
        let Some(names) = names_for(conv) else {
            continue;
        };
        for key in conv.template_kwargs.keys() {
            let given = format!("conversation {} `template_kwargs`", conv.source);
            warnings.extend(unread(&given, key, &names));
        }
        let mut per_prompt: Vec<&String> = Vec::new();
        for key in conv.kwargs_per_prompt.iter().flat_map(|m| m.keys()) {
            if !per_prompt.contains(&key) {
                per_prompt.push(key);
                let given = format!("conversation {} `template_kwargs_per_prompt`", conv.source);
                warnings.extend(unread(&given, key, &names));
            }
        }
        let all = cli_names.get_or_insert_with(Vec::new);
        for n in names {
            if !all.contains(&n) {
                all.push(n);
            }
        }
    }
    if let Some(mut names) = cli_names {
        names.sort();
        for kv in &args.rendering.template_kwarg {
            if let Some((key, _)) = kv.split_once('=') {
                warnings.extend(unread(&format!("--template-kwarg {kv}"), key, &names));
            }
        }
        for flag in &args.rendering.kwargs_turn {
            let key = flag
                .split_once(':')
                .and_then(|(_, kv)| kv.split_once('='))
                .map(|(k, _)| k);
            if let Some(key) = key {
                warnings.extend(unread(&format!("--kwargs-turn {flag}"), key, &names));
            }
        }
    }
    warnings
}

impl From<Resend> for ResendMode {
    fn from(r: Resend) -> ResendMode {
        match r {
            Resend::Content => ResendMode::Content,
            Resend::Raw => ResendMode::Raw,
            Resend::ReasoningField => ResendMode::ReasoningField,
        }
    }
}

/// Standard input can be read once: a second `-` would read nothing and say so as if the
/// input were empty.
pub fn stdin_at_most_once(paths: &[std::path::PathBuf], what: &str) -> Result<()> {
    if paths.iter().filter(|p| p.as_os_str() == "-").count() > 1 {
        bail!("{what} (standard input) can be given once");
    }
    Ok(())
}

/// A `--conversation` file, `-` for standard input.
fn read_conversation(path: &std::path::Path) -> Result<Conversation> {
    Ok(if path.as_os_str() == "-" {
        Conversation::from_reader(std::io::stdin().lock(), "stdin")?
    } else {
        Conversation::from_file(path)?
    })
}

/// Three audits where one was asked for would surprise: after a run of `--user` and `--reply`
/// without `--follow-up`, say where the other two came from (after the report, so that a run
/// that fails still ends in its one error line).
pub fn note_built_in_follow_ups(args: &ConversationArgs) {
    if args.conversation.is_empty() && args.user.is_some() && args.follow_up.is_empty() {
        super::terminal::stderr_line(&format!(
            "note: no --follow-up given: audited {} built-in follow-ups (a short thanks, a \
             one-line and a three-line question); give --follow-up TEXT for your own",
            audit::PROBE_FOLLOW_UPS.len()
        ));
    }
}

pub fn conversations(args: &ConversationArgs) -> Result<Vec<Conversation>> {
    let resend: ResendMode = args.resend.into();
    if !args.conversation.is_empty() {
        stdin_at_most_once(&args.conversation, "--conversation -")?;
        return args
            .conversation
            .iter()
            .map(|p| read_conversation(p))
            .collect();
    }
    let Some(user) = &args.user else {
        return Ok(audit::probe_conversations(args.system.as_deref(), resend));
    };
    let Some(reply) = &args.reply else {
        bail!("--user needs --reply: the answer the model gave");
    };
    let follow_ups: Vec<(String, &str)> = if args.follow_up.is_empty() {
        audit::PROBE_FOLLOW_UPS
            .iter()
            .map(|(n, f)| (n.replace("probe:", "quick:"), *f))
            .collect()
    } else {
        args.follow_up
            .iter()
            .enumerate()
            .map(|(i, f)| (format!("quick:follow-up-{}", i + 1), f.as_str()))
            .collect()
    };
    Ok(follow_ups
        .into_iter()
        .map(|(source, follow_up)| {
            audit::quick_conversation(&QuickTurn {
                source,
                system: args.system.as_deref(),
                user,
                reply,
                reasoning: args.reasoning.as_deref(),
                follow_up,
                resend,
            })
        })
        .collect())
}

/// The longest duration a flag takes: tokio's timers reach about two years, and no capture
/// or timeout needs more than one.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// `90s`, `2m`, `1h`, `500ms`, or plain seconds; more than zero and at most a year.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (num, unit) = t.split_at(
        t.find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(t.len()),
    );
    let syntax = || "expected a duration like 90s, 5m or 500ms".to_string();
    let v: f64 = num.parse().map_err(|_| syntax())?;
    let secs = match unit {
        "" | "s" => v,
        "ms" => v / 1000.0,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        _ => return Err(syntax()),
    };
    // Compared as f64 before converting: Duration::from_secs_f64 panics past u64 seconds.
    if !secs.is_finite() || secs > MAX_DURATION.as_secs_f64() {
        return Err("longer than a year (365 days is the most)".into());
    }
    match Duration::try_from_secs_f64(secs) {
        Ok(d) if !d.is_zero() => Ok(d),
        _ => Err("must be more than zero".into()),
    }
}

/// Where the model's files come from (`--model`, `--revision`, `--offline`, overrides).
pub fn model_spec(args: &crate::cli::ModelArgs) -> audit::ModelSpec {
    audit::ModelSpec {
        model: args.model.clone(),
        revision: args.revision.clone(),
        offline: args.offline,
        template: args.template.clone(),
        tokenizer: args.tokenizer.clone(),
        progress: std::io::stderr().is_terminal(),
    }
}

/// The largest token-id file read (16 M ids written out take about 100 MB).
const MAX_TOKENS_FILE: u64 = 128 << 20;

/// `keys --tokens-file`: a JSON list of ids, or ids separated by commas or whitespace.
pub fn token_file(path: &std::path::Path) -> Result<Vec<u32>> {
    let shown = path.display();
    let text = crate::input::read_text(path, MAX_TOKENS_FILE)
        .with_context(|| format!("cannot read {shown}"))?;
    let t = text.trim();
    if t.starts_with('[') {
        return serde_json::from_str::<Vec<u32>>(t)
            .with_context(|| format!("{shown}: expected a JSON list of token ids"));
    }
    t.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|p| !p.is_empty())
        .map(|p| {
            p.parse::<u32>()
                .with_context(|| format!("{shown}: {p:?} is not a token id"))
        })
        .collect()
}

/// The largest lookup file read (a list of token lists).
const MAX_LOOKUP_FILE: u64 = 64 << 20;

/// `replay --lookup FILE`.
pub fn lookups(path: &std::path::Path) -> Result<Vec<crate::replay::LookupRequest>> {
    let shown = path.display();
    let text = crate::input::read_text(path, MAX_LOOKUP_FILE)
        .with_context(|| format!("cannot read lookups {shown}"))?;
    let v: Json = serde_json::from_str(&text)
        .with_context(|| format!("lookups {shown} is not valid JSON"))?;
    crate::replay::LookupRequest::parse_list(&v)
        .map_err(|e| anyhow::anyhow!("lookups {shown}: {e}"))
}

/// The human views' layout: `COLUMNS` when set (as terminals and `less` set it), else the width
/// of the terminal stdout is, else 80 (a file or a pipe).
pub fn style(only_findings: bool) -> Style {
    let width = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|&c| c > 0)
        .or_else(|| {
            std::io::stdout()
                .is_terminal()
                .then(|| terminal_size::terminal_size().map(|(w, _)| w.0 as usize))
                .flatten()
        })
        .unwrap_or(80)
        // A floor keeps a label and a value on one line, a ceiling keeps rows readable.
        .clamp(40, 400);
    Style {
        width,
        only_findings,
    }
}

/// The corpus run's settings from its flags: validated block sizes and thresholds, the KV
/// bytes per token from the flag or the model's config.json.
pub fn corpus_settings(
    args: &crate::cli::CorpusArgs,
    files: &ModelFiles,
) -> Result<crate::corpus::CorpusSettings> {
    use crate::cli::PrefillAffinityArg;
    use crate::corpus::alternatives::{Assumptions, PrefillAffinity};
    use crate::corpus::kv_bytes::{self, KvBytes};
    crate::align::check_block_sizes("--block-sizes", &args.block_sizes)
        .map_err(anyhow::Error::msg)?;
    if args.worst > crate::corpus::MAX_WORST {
        bail!(
            "--worst {}: the report lists at most {} conversations",
            args.worst,
            crate::corpus::MAX_WORST
        );
    }
    // A file given twice would have its rows counted twice (a merge refuses that too).
    let mut seen = std::collections::HashSet::new();
    for f in args.files.iter().filter(|p| p.as_os_str() != "-") {
        if let Ok(real) = std::fs::canonicalize(f)
            && !seen.insert(real)
        {
            bail!(
                "{} is given twice: its rows would be counted twice",
                f.display()
            );
        }
    }
    if args.jobs == Some(0) {
        bail!("--jobs must be at least 1");
    }
    let jobs = match args.jobs {
        Some(n) => jobs(n)?,
        None => std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get),
    };
    if args.sample == Some(0) {
        bail!("--sample must be at least 1");
    }
    if args.sample.is_some() && args.limit.is_some() {
        bail!("give either --limit or --sample, not both");
    }
    let kv_bytes = match args.kv_bytes_per_token {
        Some(0) => bail!("--kv-bytes-per-token must be positive"),
        Some(b) => Some(KvBytes {
            bytes_per_token: b,
            derivation: "given with --kv-bytes-per-token".into(),
        }),
        None => match kv_bytes::from_config(&files.dir.join("config.json")) {
            Some(Ok(k)) => Some(k),
            Some(Err(e)) => {
                super::terminal::stderr_line(&format!(
                    "warning: no KV bytes per token: {e}; bytes moved are left out"
                ));
                None
            }
            None => None,
        },
    };
    let mut parquet_limits = crate::corpus::parquet_file::Limits::default();
    for text in &args.parquet_limit {
        parquet_limits
            .set(text)
            .map_err(|e| anyhow::anyhow!("--parquet-limit: {e}"))?;
    }
    Ok(crate::corpus::CorpusSettings {
        parquet_limits,
        block_sizes: args.block_sizes.clone(),
        jobs,
        seed: args.seed,
        assumptions: Assumptions {
            prefill_affinity: match args.prefill_affinity {
                PrefillAffinityArg::Same => PrefillAffinity::Same,
                PrefillAffinityArg::None => PrefillAffinity::None,
            },
            kv_recompute_threshold: args.kv_recompute_threshold,
        },
        kv_bytes,
        worst: args.worst,
        shared_keys: 10,
    })
}

pub fn row_format(f: crate::cli::FormatIn) -> crate::corpus::input::RowFormat {
    use crate::cli::FormatIn;
    use crate::corpus::input::RowFormat;
    match f {
        FormatIn::Auto => RowFormat::Auto,
        FormatIn::Openai => RowFormat::Openai,
        FormatIn::Sharegpt => RowFormat::Sharegpt,
        FormatIn::Wildchat => RowFormat::Wildchat,
    }
}

impl From<crate::cli::CorpusFormat> for Format {
    fn from(f: crate::cli::CorpusFormat) -> Format {
        match f {
            crate::cli::CorpusFormat::Human => Format::Human,
            crate::cli::CorpusFormat::Json => Format::Json,
            crate::cli::CorpusFormat::Markdown => Format::Markdown,
            crate::cli::CorpusFormat::Html => Format::Html,
        }
    }
}

impl From<crate::cli::OutputFormat> for Format {
    fn from(f: crate::cli::OutputFormat) -> Format {
        match f {
            crate::cli::OutputFormat::Human => Format::Human,
            crate::cli::OutputFormat::Json => Format::Json,
        }
    }
}

impl From<crate::cli::ReportFormat> for Format {
    fn from(f: crate::cli::ReportFormat) -> Format {
        match f {
            crate::cli::ReportFormat::Human => Format::Human,
            crate::cli::ReportFormat::Json => Format::Json,
            crate::cli::ReportFormat::Markdown => Format::Markdown,
        }
    }
}

impl From<crate::cli::CheckFormat> for Format {
    fn from(f: crate::cli::CheckFormat) -> Format {
        match f {
            crate::cli::CheckFormat::Human => Format::Human,
            crate::cli::CheckFormat::Json => Format::Json,
            crate::cli::CheckFormat::Sarif => Format::Sarif,
            crate::cli::CheckFormat::Junit => Format::Junit,
            crate::cli::CheckFormat::Markdown => Format::Markdown,
        }
    }
}

impl From<crate::cli::ReplayFormat> for Format {
    fn from(f: crate::cli::ReplayFormat) -> Format {
        match f {
            crate::cli::ReplayFormat::Human => Format::Human,
            crate::cli::ReplayFormat::Json => Format::Json,
            crate::cli::ReplayFormat::Prometheus => Format::Prometheus,
        }
    }
}

/// `probe`'s settings: the rendering flags as diff-turns reads them, the engine, the HTTP
/// client's (the API key from `--api-key`, else `OPENAI_API_KEY`), and the conversation.
pub fn probe_settings(
    args: &crate::cli::ProbeArgs,
    env: impl Fn(&str) -> Option<String>,
) -> Result<(crate::probe::ProbeSettings, crate::probe::HttpSettings)> {
    use crate::probe::{HttpSettings, ProbeSettings};
    let rendering = crate::cli::RenderingArgs {
        reply_format: args.reply_format,
        template_kwarg: args.template_kwarg.clone(),
        kwargs_turn: Vec::new(),
        server: ServerProfile::Transformers,
        server_template_kwarg: Vec::new(),
        now: args.now.clone(),
        fuel: args.fuel,
    };
    let mut audit = audit_settings(&rendering, args.model.template_name.clone())?;
    audit.plan.server_kwargs =
        template_kwargs("--server-template-kwarg", &args.server_template_kwarg)?;
    let duration = |flag: &str, text: &str| {
        parse_duration(text).map_err(|e| anyhow::anyhow!("{flag} {text:?}: {e}"))
    };
    let mut headers = Vec::new();
    for h in &args.header {
        // A header is often a credential: errors name the flag, never its text.
        let Some((name, value)) = h.split_once(':') else {
            bail!("a --header has no ':' (expected NAME: VALUE; its text is not shown)");
        };
        if name.trim().is_empty() {
            bail!("a --header has an empty name (expected NAME: VALUE)");
        }
        headers.push((name.trim().to_string(), value.trim().to_string()));
    }
    if args.turns == Some(0) {
        bail!("--turns must be at least 1");
    }
    if args.max_tokens == 0 {
        bail!("--max-tokens must be at least 1");
    }
    if args.block_size == Some(0) {
        bail!("--block-sizes must be positive");
    }
    let api_key = args
        .api_key
        .clone()
        .or_else(|| env("OPENAI_API_KEY"))
        .filter(|k| !k.is_empty());
    let http = HttpSettings {
        api_key,
        headers,
        connect_timeout: duration("--connect-timeout", &args.connect_timeout)?,
        timeout: duration("--timeout", &args.timeout)?,
        max_body: crate::probe::http::DEFAULT_MAX_BODY,
    };
    let pod_headers = if args.pod_header.is_empty() {
        crate::probe::DEFAULT_POD_HEADERS
            .iter()
            .map(|h| h.to_string())
            .collect()
    } else {
        args.pod_header.clone()
    };
    Ok((
        ProbeSettings {
            server: args.server,
            served_model: args.served_model.clone(),
            turns: args.turns,
            max_tokens: args.max_tokens,
            seed: args.seed,
            block_size: args.block_size,
            pod_headers,
            audit,
        },
        http,
    ))
}

/// The conversation `probe` sends: `--conversation FILE`, the quick form (`--user`, then each
/// `--follow-up`), or the built-in probe (the question, then its three follow-ups in turn).
pub fn probe_conversation(args: &crate::cli::ProbeArgs) -> Result<Conversation> {
    let resend = args.resend.into();
    if let Some(path) = &args.conversation {
        let mut conv = read_conversation(path)?;
        conv.resend = resend;
        return Ok(conv);
    }
    let (source, first, rest): (&str, &str, Vec<&str>) = match &args.user {
        Some(user) => (
            "quick",
            user.as_str(),
            args.follow_up.iter().map(String::as_str).collect(),
        ),
        None => (
            "probe",
            audit::PROBE_QUESTION,
            audit::PROBE_FOLLOW_UPS.iter().map(|(_, f)| *f).collect(),
        ),
    };
    let mut messages = Vec::new();
    if let Some(s) = &args.system {
        messages.push(serde_json::json!({"role": "system", "content": s}));
    }
    for text in std::iter::once(first).chain(rest) {
        if !messages.is_empty()
            && messages.last().and_then(|m| m.get("role")) == Some(&"user".into())
        {
            messages.push(serde_json::json!({"role": "assistant", "content": ""}));
        }
        messages.push(serde_json::json!({"role": "user", "content": text}));
    }
    Ok(Conversation::of_messages(source, messages, resend))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_constants_are_booleans_and_null() {
        assert_eq!(kwarg_value("False"), Json::Bool(false));
        assert_eq!(kwarg_value("True"), Json::Bool(true));
        assert_eq!(kwarg_value("None"), Json::Null);
        assert_eq!(kwarg_value("false"), Json::Bool(false));
        assert_eq!(kwarg_value("3"), serde_json::json!(3));
        assert_eq!(kwarg_value("FALSE"), Json::String("FALSE".into()));
        assert_eq!(kwarg_value("hello"), Json::String("hello".into()));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert_eq!(parse_duration("8760h"), Ok(MAX_DURATION));
        assert!(
            parse_duration("soon")
                .unwrap_err()
                .contains("expected a duration")
        );
        assert!(parse_duration("0s").unwrap_err().contains("more than zero"));
        assert!(
            parse_duration("0.0000000001s")
                .unwrap_err()
                .contains("more than zero")
        );
        // Each of these panicked in Duration::from_secs_f64.
        for big in ["99999999999999999999s", "8761h", "1e400", &"9".repeat(400)] {
            let err = parse_duration(big).unwrap_err();
            assert!(
                err.contains("longer than a year") || err.contains("expected a duration"),
                "{big}: {err}"
            );
        }
        assert!(
            parse_duration("99999999999999999999s")
                .unwrap_err()
                .contains("year")
        );
    }
}
