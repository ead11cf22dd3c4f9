//! The settings of the commands that read KV events: replay and capture.

use anyhow::{Context, Result, bail};
use serde_json::Value as Json;

use super::*;
use crate::cli::{EmulationArgs, EngineArg};
use crate::events::Engine;
use crate::replay::ReplayOptions;

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
