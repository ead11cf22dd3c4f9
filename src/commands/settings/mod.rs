//! Command-line values turned into validated domain settings, in one place: every command
//! takes its settings from here, so a flag shared by several commands is checked one way.

use std::io::IsTerminal;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::{Map, Value as Json};

use crate::align::AlignOptions;
use crate::audit::{self, AuditSettings, QuickTurn};
use crate::cli::{ConversationArgs, ReplyFormatArg, Resend};
use crate::render::reply::PlanOptions;
use crate::render::{Clock, Conversation, ReplyFormat, ResendMode, ServerProfile, parse_time};
use crate::report::{Format, Style};

mod check;
mod corpus;
mod diff_turns;
mod keys;
mod probe;
mod render;
mod replay;
mod watch;

pub use check::*;
pub use corpus::*;
pub use diff_turns::*;
pub use keys::*;
pub use probe::*;
pub use render::*;
pub use replay::*;
pub use watch::*;

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
    cfg.topic_filter = args.topic_filter.clone();
    cfg.global_socket = args.global_socket;
    cfg.profile = match args.llmd_profile {
        ProfileArg::DigestFirst => crate::routers::llm_d::Profile::DigestFirst,
        ProfileArg::Router202608 => crate::routers::llm_d::Profile::Router202608,
    };
    cfg
}

/// The router view's settings; llm-d hashes the served model's name, here the `--model` text
/// unless `--model-name` is given.
pub fn router_settings(
    args: &crate::cli::RouterChoiceArgs,
    engine_block_size: usize,
    model: &str,
) -> Result<crate::routers::llm_d::view::RouterSettings> {
    for (flag, b) in [
        ("--engine-block-size", engine_block_size),
        ("--index-block-size", args.index_block_size),
    ] {
        crate::align::check_block_size(flag, b).map_err(anyhow::Error::msg)?;
    }
    let decider = crate::routers::llm_d::decider::DeciderConfig::parse(&args.decider)
        .map_err(|e| anyhow::anyhow!("--decider {:?}: {e}", args.decider))?;
    let mut index = index_config(&args.index, args.index_block_size);
    index.model_name.get_or_insert_with(|| model.to_string());
    Ok(crate::routers::llm_d::view::RouterSettings {
        engine_block_size,
        index,
        decider,
    })
}

/// The router view of diff-turns and corpus: llm-d's settings and the routers to ask, into
/// `settings`.
pub fn add_routers(
    settings: &mut AuditSettings,
    args: &crate::cli::RouterArgs,
    model: &str,
) -> Result<()> {
    let llm_d = router_settings(&args.choice, args.engine_block_size, model)?;
    settings.routers = router_specs(&args.choice, &llm_d)?;
    settings.router = Some(llm_d);
    Ok(())
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
    args: &crate::cli::RouterChoiceArgs,
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
        for l in crate::routers::config::lint(&loaded, llm_d.engine_block_size, None) {
            crate::commands::terminal::stderr_line(&format!("warning: {shown}: {}", l.message));
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
        crate::commands::terminal::stderr_line(&format!(
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

/// Why a duration flag was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("expected a duration like 90s, 5m or 500ms")]
    Syntax,
    #[error("longer than a year (365 days is the most)")]
    TooLong,
    #[error("must be more than zero")]
    NotPositive,
}

/// `90s`, `2m`, `1h`, `500ms`, or plain seconds; more than zero and at most a year.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let t = text.trim();
    let (num, unit) = t.split_at(
        t.find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(t.len()),
    );
    let v: f64 = num.parse().map_err(|_| DurationError::Syntax)?;
    let secs = match unit {
        "" | "s" => v,
        "ms" => v / 1000.0,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        _ => return Err(DurationError::Syntax),
    };
    // Compared as f64 before converting: Duration::from_secs_f64 panics past u64 seconds.
    if !secs.is_finite() || secs > MAX_DURATION.as_secs_f64() {
        return Err(DurationError::TooLong);
    }
    match Duration::try_from_secs_f64(secs) {
        Ok(d) if !d.is_zero() => Ok(d),
        _ => Err(DurationError::NotPositive),
    }
}

/// The model's files, found (or fetched) where the flags say; `say` gets the note that they
/// came from the cache.
pub fn resolved_model(
    args: &crate::cli::ModelArgs,
    say: &mut dyn FnMut(&str),
) -> Result<crate::model::ModelFiles> {
    let files = crate::model::resolve_model(&model_spec(args))?;
    if let Some(note) = crate::commands::cached_model_note(&files, args.offline) {
        say(&format!("note: {note}"));
    }
    Ok(files)
}

/// Where the model's files come from (`--model`, `--revision`, `--offline`, overrides).
pub fn model_spec(args: &crate::cli::ModelArgs) -> crate::model::ModelSpec {
    crate::model::ModelSpec {
        model: args.model.clone(),
        revision: args.revision.clone(),
        offline: args.offline,
        template: args.template.clone(),
        tokenizer: args.tokenizer.clone(),
        progress: std::io::stderr().is_terminal(),
    }
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
                .to_string()
                .contains("expected a duration")
        );
        assert!(
            parse_duration("0s")
                .unwrap_err()
                .to_string()
                .contains("more than zero")
        );
        assert!(
            parse_duration("0.0000000001s")
                .unwrap_err()
                .to_string()
                .contains("more than zero")
        );
        // Each of these panicked in Duration::from_secs_f64.
        for big in ["99999999999999999999s", "8761h", "1e400", &"9".repeat(400)] {
            let err = parse_duration(big).unwrap_err().to_string();
            assert!(
                err.contains("longer than a year") || err.contains("expected a duration"),
                "{big}: {err}"
            );
        }
        assert!(
            parse_duration("99999999999999999999s")
                .unwrap_err()
                .to_string()
                .contains("year")
        );
    }
}
