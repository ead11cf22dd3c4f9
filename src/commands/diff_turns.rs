use std::io::IsTerminal;

use anyhow::{Context, Result, bail};
use serde_json::{Map, Value as Json};

use super::{Outcome, index_config};
use crate::align::AlignOptions;
use crate::audit::{self, AuditSettings, ModelSpec, QuickTurn};
use crate::cli::{ConversationArgs, DiffTurnsArgs, OutputFormat, ReplyFormatArg, Resend};
use crate::render::reply::PlanOptions;
use crate::render::{Clock, Conversation, ReplyFormat, ResendMode, parse_time};
use crate::report;
use crate::tokenize::Tokenizer;

pub fn run(args: &DiffTurnsArgs, out: &mut dyn std::io::Write) -> Result<Outcome> {
    let mut settings = settings(&args.conversation, args.model.template_name.clone())?;
    settings.date_rollover = args.date_rollover;
    if args.block_sizes.is_empty() || args.block_sizes.contains(&0) {
        bail!("--block-sizes must be positive integers, e.g. 16,64");
    }
    settings.align.block_sizes = args.block_sizes.clone();
    settings.router = Some(router_settings(args)?);
    let conversations = conversations(&args.conversation)?;
    let files = audit::resolve_model(&ModelSpec {
        model: args.model.model.clone(),
        revision: args.model.revision.clone(),
        offline: args.model.offline,
        template: args.model.template.clone(),
        tokenizer: args.model.tokenizer.clone(),
        progress: std::io::stderr().is_terminal(),
    })?;
    let tok = Tokenizer::from_file(&files.tokenizer_path)?;
    let report = audit::diff_turns(&files, &tok, &conversations, &settings)?;
    let text = match args.format {
        OutputFormat::Json => {
            let mut s = serde_json::to_string_pretty(&report::diff_turns::to_json(&report))?;
            s.push('\n');
            s
        }
        OutputFormat::Human => report::diff_turns::to_human(&report),
    };
    out.write_all(text.as_bytes())?;
    Ok(if report.has_findings() {
        Outcome::Findings
    } else {
        Outcome::Clean
    })
}

fn router_settings(args: &DiffTurnsArgs) -> Result<crate::index::router::RouterSettings> {
    if args.engine_block_size == 0 || args.index_block_size == 0 {
        bail!("--engine-block-size and --index-block-size must be positive");
    }
    let decider = crate::index::decider::DeciderConfig::parse(&args.decider)
        .map_err(|e| anyhow::anyhow!("--decider {:?}: {e}", args.decider))?;
    let mut index = index_config(&args.index, args.index_block_size);
    index
        .model_name
        .get_or_insert_with(|| args.model.model.clone());
    Ok(crate::index::router::RouterSettings {
        engine_block_size: args.engine_block_size,
        index,
        decider,
    })
}

pub(crate) fn settings(
    args: &ConversationArgs,
    template_name: Option<String>,
) -> Result<AuditSettings> {
    let now = match &args.now {
        Some(t) => parse_time(t)
            .with_context(|| format!("--now {t:?}: expected a time like 2026-01-15T10:00:00"))?,
        None => chrono::Local::now().naive_local(),
    };
    let mut kwargs = Map::new();
    for kv in &args.template_kwarg {
        let (k, v) = kv
            .split_once('=')
            .with_context(|| format!("--template-kwarg {kv:?}: expected KEY=VALUE"))?;
        if k.is_empty() {
            bail!("--template-kwarg {kv:?}: the key is empty");
        }
        let value = serde_json::from_str::<Json>(v).unwrap_or_else(|_| Json::String(v.to_string()));
        kwargs.insert(k.to_string(), value);
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
        },
        align: AlignOptions::default(),
        template_name,
        fuel: args.fuel,
        router: None,
    })
}

pub(crate) fn conversations(args: &ConversationArgs) -> Result<Vec<Conversation>> {
    let resend = match args.resend {
        Resend::Content => ResendMode::Content,
        Resend::Raw => ResendMode::Raw,
        Resend::ReasoningField => ResendMode::ReasoningField,
    };
    if !args.conversation.is_empty() {
        return args
            .conversation
            .iter()
            .map(|p| Conversation::from_file(p).map_err(Into::into))
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
