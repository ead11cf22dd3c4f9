use std::io::IsTerminal;

use anyhow::{Context, Result, bail};
use serde_json::{Map, Value as Json};

use super::Outcome;
use crate::align::AlignOptions;
use crate::audit::{self, AuditSettings, ModelSpec, QuickTurn};
use crate::cli::{DiffTurnsArgs, OutputFormat, ReplyFormatArg, Resend};
use crate::render::reply::PlanOptions;
use crate::render::{Clock, Conversation, ReplyFormat, ResendMode, parse_time};
use crate::report;
use crate::tokenize::Tokenizer;

pub fn run(args: &DiffTurnsArgs, out: &mut dyn std::io::Write) -> Result<Outcome> {
    let settings = settings(args)?;
    let conversations = conversations(args)?;
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

fn settings(args: &DiffTurnsArgs) -> Result<AuditSettings> {
    let now = match &args.now {
        Some(t) => parse_time(t)
            .with_context(|| format!("--now {t:?}: expected a time like 2026-01-15T10:00:00"))?,
        None => chrono::Local::now().naive_local(),
    };
    if args.block_sizes.is_empty() || args.block_sizes.contains(&0) {
        bail!("--block-sizes must be positive integers, e.g. 16,64");
    }
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
        date_rollover: args.date_rollover,
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
        align: AlignOptions {
            block_sizes: args.block_sizes.clone(),
            ..AlignOptions::default()
        },
        template_name: args.model.template_name.clone(),
        fuel: args.fuel,
    })
}

fn conversations(args: &DiffTurnsArgs) -> Result<Vec<Conversation>> {
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
