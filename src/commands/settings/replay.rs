//! The settings of the commands that read KV events: replay and capture.

use anyhow::{Context, Result, bail};
use serde_json::Value as Json;

use super::*;
use crate::cli::{EmulationArgs, EngineArg};
use crate::events::Engine;
use crate::replay::ReplayOptions;

/// Everything `replay` needs before it reads the capture.
pub struct ReplaySettings {
    pub options: ReplayOptions,
    pub lookups: Vec<crate::replay::LookupRequest>,
    pub format: Format,
}

impl ReplaySettings {
    pub fn from_args(args: &crate::cli::ReplayArgs) -> Result<ReplaySettings> {
        let options = replay_options(&args.emulation, args.keep_going, &args.pod)?;
        let lookups = match &args.lookup {
            Some(p) => lookups(p)?,
            None => Vec::new(),
        };
        Ok(ReplaySettings {
            options,
            lookups,
            format: args.format.into(),
        })
    }
}

/// Everything `capture` needs before it connects.
pub struct CaptureSettings {
    pub live: crate::capture::LiveOptions,
    pub format: Format,
}

impl CaptureSettings {
    pub fn from_args(args: &crate::cli::CaptureArgs) -> Result<CaptureSettings> {
        let duration = |flag: &str, v: &str| {
            parse_duration(v).map_err(|why| anyhow::anyhow!("{flag} {v:?}: {why}"))
        };
        let emulation = replay_options(&args.emulation, true, "pod-0")?;
        let engine = emulation.engine;
        let live = crate::capture::LiveOptions {
            endpoints: args.endpoint.clone(),
            replay_endpoints: args.replay_endpoint.clone(),
            bind: args.bind.clone(),
            topic: args.topic.clone(),
            out: args.out.clone(),
            max_messages: args.max_messages,
            duration: args
                .duration
                .as_deref()
                .map(|d| duration("--duration", d))
                .transpose()?,
            connect_timeout: duration("--connect-timeout", &args.connect_timeout)?,
            replay_timeout: duration("--replay-timeout", &args.replay_timeout)?,
            max_payload: crate::events::frames::MAX_PAYLOAD,
            max_message: args.max_message_size,
            live_replay: args.live_replay.then_some(emulation),
            engine,
        };
        Ok(CaptureSettings {
            live,
            format: args.format.into(),
        })
    }
}

/// The emulation settings shared by replay and capture --live-replay.
fn replay_options(
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

/// The largest lookup file read (a list of token lists).
const MAX_LOOKUP_FILE: u64 = 64 << 20;

/// `replay --lookup FILE`.
fn lookups(path: &std::path::Path) -> Result<Vec<crate::replay::LookupRequest>> {
    let shown = path.display();
    let text = crate::input::read_text(path, MAX_LOOKUP_FILE)
        .with_context(|| format!("cannot read lookups {shown}"))?;
    let v: Json = serde_json::from_str(&text)
        .with_context(|| format!("lookups {shown} is not valid JSON"))?;
    crate::replay::LookupRequest::parse_list(&v)
        .map_err(|e| anyhow::anyhow!("lookups {shown}: {e}"))
}
