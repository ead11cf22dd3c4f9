//! A router's real configuration, read so kvaudit emulates exactly that wiring: llm-d's
//! EndpointPickerConfig (YAML or JSON), or a file of Dynamo's, vllm-router's or smg's
//! command-line flags. What it names and kvaudit does not model is listed, never guessed.

use std::collections::BTreeMap;

use serde_json::Value as Json;

use super::Spec;
use super::dynamo::{Conditional, Dynamo};
use super::dynamo_approx::{ApproxPolicy, DynamoApprox};
use super::llm_d::{DEFAULT_TOPIC_FILTER, LlmD};
use super::llm_d_approx::LlmDApprox;
use super::smg::{Smg, SmgMode};
use super::vllm_router::{VllmRouter, VllmRouterPolicy};
use crate::routers::llm_d::decider::DeciderConfig;
use crate::routers::llm_d::view::RouterSettings;

/// Why a router configuration is refused. Each says all of itself in its text: callers print
/// it inside a message of their own.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// Text the YAML parser refuses.
    #[error("not YAML: {0}")]
    NotYaml(String),
    /// YAML past what kvaudit parses (nesting, flow collections, aliases), refused unparsed.
    #[error("{0}")]
    Limit(String),
    /// Neither an EndpointPickerConfig nor a router's flags.
    #[error("{0}")]
    NotAConfig(String),
    /// A setting missing, of the wrong kind or out of its range.
    #[error("{0}")]
    Invalid(String),
    /// A wiring kvaudit does not emulate (a policy that ignores the cache, a producer it does
    /// not model).
    #[error("{0}")]
    Unmodelled(String),
    #[error(transparent)]
    BlockSize(#[from] crate::align::BlockSizeError),
}

/// A config file is small; a larger one is refused before it is parsed.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;
/// Flow collections (`[` or `{`, counted wherever they stand) a YAML config may open: the YAML
/// parser's time grows with the square of their nesting, and counting them all bounds the
/// nesting whatever quotes or strings surround them. Real configs open a few dozen.
pub const MAX_FLOW_COLLECTIONS: usize = 4096;
/// A line's indentation plus its leading `- ` and `? ` markers: what bounds block nesting.
pub const MAX_BLOCK_NESTING: usize = 512;

/// Which of llm-d's prefix producers a consumer reads, and how it hashes.
#[derive(Debug, Clone, PartialEq)]
pub enum Producer {
    /// `precise-prefix-cache-producer`: the engine's KV events, at this block size.
    Precise {
        name: String,
        block_size: usize,
        hash_algo: String,
        hash_seed: String,
        /// `kvEventsConfig.topicFilter`: only topics starting with it are received.
        topic_filter: String,
        /// `kvEventsConfig.engineType`: the adapter that decodes the events (`vllm`,
        /// `sglang`).
        engine_type: String,
        /// `kvEventsConfig.zmqEndpoint` is set: one bound socket for every pod, which takes
        /// each event's pod from its topic (global-socket mode); else pods are discovered
        /// and named by their endpoint.
        global_socket: bool,
    },
    /// `approx-prefix-cache-producer`: the requests routed, at this block size (none: the
    /// engine's, auto-tuned), floored at 64.
    Approx {
        name: String,
        block_size: Option<usize>,
    },
    /// Another producer (e.g. `burst-prefix-cache-producer`), not modelled.
    Other { name: String, kind: String },
}

impl Producer {
    pub fn name(&self) -> &str {
        match self {
            Producer::Precise { name, .. }
            | Producer::Approx { name, .. }
            | Producer::Other { name, .. } => name,
        }
    }
}

/// llm-d's EndpointPickerConfig, as far as the prefix view and the P/D decision go.
#[derive(Debug, Clone, PartialEq)]
pub struct Epp {
    /// What the prefix-cache scorer reads (none: no prefix-cache scorer).
    pub scorer_reads: Option<Producer>,
    /// The P/D decider and what it reads (none: no disaggregation handler or decider).
    pub decider: Option<(DeciderConfig, Producer)>,
    /// Plugin types kvaudit does not know (reported, not guessed).
    pub unknown: Vec<String>,
    /// Plugin types known to leave the prefix view alone (filters, pickers, load scorers).
    pub ignored: Vec<String>,
}

/// A router configuration, read.
#[derive(Debug, Clone, PartialEq)]
pub enum Loaded {
    LlmD(Epp),
    /// A router's flags: the emulation they select, and flags it does not model.
    Flags {
        spec: Spec,
        unknown: Vec<String>,
    },
}

/// Plugin types that do not change what a pod is believed to hold or whether a turn is
/// disaggregated (llm-d-router ebab687).
const NEUTRAL: &[&str] = &[
    "token-producer",
    "decode-filter",
    "prefill-filter",
    "encode-filter",
    "max-score-picker",
    "random-picker",
    "queue-scorer",
    "kv-cache-utilization-scorer",
    "load-aware-scorer",
    "no-hit-lru-scorer",
    "single-profile-handler",
    "data-parallel-profile-handler",
    "always-disagg-multimodal-decider",
    "endpoint-notification-source",
    "metrics-data-source",
    "core-metrics-extractor",
    "mm-embeddings-cache-producer",
    "mm-embeddings-cache-scorer",
    "topology-extractor",
    "topology-affinity-filter",
    "topology-affinity-scorer",
    "dcgm-data-source",
    "dcgm-extractor",
    "endpoint-attribute-filter",
    "endpoint-attribute-scorer",
    "probabilistic-admitter",
    "utilization-detector",
    "program-aware-fairness",
    "soft-reflective-ceiling-policy",
];

const APPROX: &str = "approx-prefix-cache-producer";
const PRECISE: &str = "precise-prefix-cache-producer";

fn uint(v: Option<&Json>, what: &str) -> Result<Option<usize>, ConfigError> {
    match v {
        None | Some(Json::Null) => Ok(None),
        Some(x) => x
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| {
                ConfigError::Invalid(format!("{what} must be a non-negative integer, found {x}"))
            }),
    }
}

/// A token threshold: absent, or 0 to [`crate::routers::llm_d::decider::MAX_TOKENS`].
fn tokens(v: Option<&Json>, what: &str) -> Result<Option<usize>, ConfigError> {
    use crate::routers::llm_d::decider::MAX_TOKENS;
    match uint(v, what)? {
        Some(n) if n > MAX_TOKENS => Err(ConfigError::Invalid(format!(
            "{what} {n}: expected a whole number from 0 to {MAX_TOKENS}"
        ))),
        n => Ok(n),
    }
}

/// A block size setting: absent, 0 (the router's default) or 1 to
/// [`crate::align::MAX_BLOCK_SIZE`].
fn block(v: Option<&Json>, what: &str) -> Result<Option<usize>, ConfigError> {
    match uint(v, what)? {
        Some(b) if b > 0 => crate::align::check_block_size(what, b)
            .map(Some)
            .map_err(ConfigError::from),
        b => Ok(b),
    }
}

fn text(v: Option<&Json>) -> &str {
    v.and_then(Json::as_str).unwrap_or("")
}

/// Read an EndpointPickerConfig document (already parsed).
pub fn epp(doc: &Json) -> Result<Epp, ConfigError> {
    let kind = text(doc.get("kind"));
    if kind != "EndpointPickerConfig" {
        return Err(ConfigError::NotAConfig(format!(
            "expected kind: EndpointPickerConfig, found {}",
            if kind.is_empty() { "none" } else { kind }
        )));
    }
    let plugins = doc.get("plugins").and_then(Json::as_array).ok_or_else(|| {
        ConfigError::Invalid("an EndpointPickerConfig needs a plugins list".into())
    })?;
    let mut producers: BTreeMap<String, Producer> = BTreeMap::new();
    let mut scorer: Option<String> = None;
    let mut decider: Option<(DeciderConfig, String)> = None;
    let mut handler = false;
    let mut unknown = Vec::new();
    let mut ignored = Vec::new();
    for (i, p) in plugins.iter().enumerate() {
        let kind = text(p.get("type"));
        if kind.is_empty() {
            return Err(ConfigError::Invalid(format!("plugins[{i}] has no type")));
        }
        // A plugin's name defaults to its type.
        let name = match text(p.get("name")) {
            "" => kind.to_string(),
            n => n.to_string(),
        };
        let params = p.get("parameters").cloned().unwrap_or(Json::Null);
        let param = |k: &str| params.get(k);
        match kind {
            PRECISE => {
                let tp = param("tokenProcessorConfig");
                let at = |k: &str| tp.and_then(|t| t.get(k));
                let tokens = block(at("blockSizeTokens"), "blockSizeTokens")?.filter(|&b| b > 0);
                let old = block(at("blockSize"), "blockSize")?.filter(|&b| b > 0);
                let algo = text(at("hashAlgorithm"));
                let events = match param("kvEventsConfig") {
                    None | Some(Json::Null) => None,
                    Some(e @ Json::Object(_)) => Some(e),
                    Some(_) => {
                        return Err(ConfigError::Invalid(format!(
                            "{name}: kvEventsConfig is not a mapping"
                        )));
                    }
                };
                let setting = |k: &str, what: &str, fits: fn(&Json) -> bool| match events
                    .and_then(|e| e.get(k))
                {
                    None => Ok(None),
                    Some(v) if fits(v) => Ok(Some(v)),
                    Some(_) => Err(ConfigError::Invalid(format!(
                        "{name}: kvEventsConfig.{k} is not {what}"
                    ))),
                };
                let topic_filter = setting("topicFilter", "a string", Json::is_string)?
                    .and_then(Json::as_str)
                    .unwrap_or(DEFAULT_TOPIC_FILTER)
                    .to_string();
                let engine_type = setting("engineType", "a string", Json::is_string)?
                    .and_then(Json::as_str)
                    .filter(|t| !t.is_empty())
                    .unwrap_or("vllm")
                    .to_string();
                if !matches!(engine_type.as_str(), "vllm" | "sglang") {
                    return Err(ConfigError::Invalid(format!(
                        "{name}: kvEventsConfig.engineType {engine_type:?} is not vllm or sglang"
                    )));
                }
                setting("discoverPods", "true or false", Json::is_boolean)?;
                let global_socket = setting("zmqEndpoint", "a string", Json::is_string)?
                    .and_then(Json::as_str)
                    .is_some_and(|e| !e.is_empty());
                if !matches!(algo, "" | "cbor-fnv" | "xxh64") {
                    return Err(ConfigError::Invalid(format!(
                        "{name}: hashAlgorithm {algo:?} is not cbor-fnv or xxh64"
                    )));
                }
                producers.insert(
                    name.clone(),
                    Producer::Precise {
                        name,
                        // blockSizeTokens wins over the deprecated blockSize; neither is 16.
                        block_size: tokens.or(old).unwrap_or(16),
                        hash_algo: if algo.is_empty() { "cbor-fnv" } else { algo }.to_string(),
                        hash_seed: text(at("hashSeed")).to_string(),
                        topic_filter,
                        engine_type,
                        global_socket,
                    },
                );
            }
            APPROX => {
                let auto = param("autoTune").and_then(Json::as_bool).unwrap_or(true);
                let tokens = block(param("blockSizeTokens"), "blockSizeTokens")?;
                let old = block(param("blockSize"), "blockSize")?.filter(|&b| b > 0);
                let set = match (tokens, old) {
                    (Some(16) | None, Some(b)) => b,
                    (Some(b), _) => b,
                    (None, None) => 16,
                };
                producers.insert(
                    name.clone(),
                    Producer::Approx {
                        name,
                        block_size: (!auto).then_some(set),
                    },
                );
            }
            "burst-prefix-cache-producer" => {
                producers.insert(
                    name.clone(),
                    Producer::Other {
                        name,
                        kind: kind.to_string(),
                    },
                );
            }
            "prefix-cache-scorer" => {
                scorer = Some(text(param("prefixMatchInfoProducerName")).to_string());
            }
            "prefix-based-pd-decider" => {
                let cfg = DeciderConfig {
                    non_cached_tokens: tokens(param("nonCachedTokens"), "nonCachedTokens")?
                        .unwrap_or(0),
                    prompt_tokens: tokens(param("promptTokens"), "promptTokens")?.unwrap_or(0),
                };
                decider = Some((cfg, text(param("prefixMatchInfoProducerName")).to_string()));
            }
            "disagg-profile-handler" | "pd-profile-handler" => handler = true,
            k if NEUTRAL.contains(&k) => ignored.push(k.to_string()),
            k => unknown.push(k.to_string()),
        }
    }
    // A consumer that names no producer reads the approximate one, created with its
    // defaults when the config has none.
    let reads = |wanted: &str| -> Producer {
        let name = if wanted.is_empty() { APPROX } else { wanted };
        producers.get(name).cloned().unwrap_or_else(|| {
            if name == APPROX {
                Producer::Approx {
                    name: APPROX.to_string(),
                    block_size: None,
                }
            } else {
                Producer::Other {
                    name: name.to_string(),
                    kind: "missing".to_string(),
                }
            }
        })
    };
    Ok(Epp {
        scorer_reads: scorer.as_deref().map(reads),
        decider: decider
            .filter(|_| handler)
            .map(|(cfg, wanted)| (cfg, reads(&wanted))),
        unknown,
        ignored,
    })
}

impl Epp {
    /// The emulation of this wiring: what the decider reads decides the turn. `base` holds
    /// the engine block size and the index's other settings.
    pub fn spec(&self, base: &RouterSettings) -> Result<Spec, ConfigError> {
        let (decider, reads) = match &self.decider {
            Some((d, r)) => (*d, r.clone()),
            // No P/D decider: every turn stays where the scorer sends it.
            None => (
                DeciderConfig {
                    non_cached_tokens: 0,
                    prompt_tokens: 0,
                },
                self.scorer_reads.clone().unwrap_or(Producer::Approx {
                    name: APPROX.into(),
                    block_size: None,
                }),
            ),
        };
        match reads {
            Producer::Precise {
                block_size,
                hash_algo,
                hash_seed,
                topic_filter,
                global_socket,
                ..
            } => {
                let mut s = base.clone();
                s.index.block_size = block_size;
                s.index.seed = hash_seed;
                s.index.topic_filter = topic_filter;
                s.index.global_socket = global_socket;
                s.index.algo = match hash_algo.as_str() {
                    "xxh64" => crate::routers::llm_d::HashAlgo::Xxh64,
                    _ => crate::routers::llm_d::HashAlgo::CborFnv,
                };
                s.decider = decider;
                Ok(Spec::LlmD(LlmD(s)))
            }
            Producer::Approx { block_size, .. } => Ok(Spec::LlmDApprox(LlmDApprox {
                block_size,
                decider,
            })),
            Producer::Other { name, kind } => Err(ConfigError::Unmodelled(format!(
                "the decider reads {name} ({kind}), which kvaudit does not model"
            ))),
        }
    }
}

/// Read a router configuration from its text: an EndpointPickerConfig (YAML or JSON), or
/// command-line flags of Dynamo, vllm-router or smg.
pub fn parse(text: &str) -> Result<Loaded, ConfigError> {
    let trimmed = text
        .lines()
        .map(str::trim_start)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .unwrap_or("");
    let looks_like_flags = (trimmed.starts_with('-') && !trimmed.starts_with("---"))
        || ["dynamo", "python", "vllm-router", "smg"]
            .iter()
            .any(|w| trimmed.starts_with(w));
    if !looks_like_flags {
        check_nesting(text)?;
        let doc: Json =
            serde_yaml::from_str(text).map_err(|e| ConfigError::NotYaml(e.to_string()))?;
        return epp(&doc).map(Loaded::LlmD);
    }
    flags(text)
}

/// Bounds a YAML text's nesting before the parser sees it, in one pass: flow collections by
/// counting every bracket that could open one, block collections by each line's indentation
/// and leading markers, a line ending at any break a YAML parser takes (LF, CR, NEL, U+2028,
/// U+2029). Aliases (`*name` where a node starts) are refused: serde_yaml expands each one
/// into the document, so a few hundred kilobytes of them make gigabytes (a "billion laughs").
/// Over-counting (a bracket or a `*` inside a string) only makes the bounds stricter; nothing
/// a string holds can make them looser.
fn check_nesting(text: &str) -> Result<(), ConfigError> {
    let flows = text.bytes().filter(|&b| b == b'[' || b == b'{').count();
    if flows > MAX_FLOW_COLLECTIONS {
        return Err(ConfigError::Limit(format!(
            "{flows} flow collections ('[' or '{{'), over kvaudit's limit of \
             {MAX_FLOW_COLLECTIONS} for a router config"
        )));
    }
    let breaks = ['\n', '\r', '\u{85}', '\u{2028}', '\u{2029}'];
    for (i, line) in text.split(breaks).enumerate() {
        let mut rest = line.trim_start_matches([' ', '\t']);
        let mut depth = line.len() - rest.len();
        while let Some(r) = rest
            .strip_prefix('-')
            .or_else(|| rest.strip_prefix('?'))
            .filter(|r| r.is_empty() || r.starts_with([' ', '\t']))
        {
            rest = r.trim_start_matches([' ', '\t']);
            depth += 1;
            if depth > MAX_BLOCK_NESTING {
                break;
            }
        }
        if depth > MAX_BLOCK_NESTING {
            return Err(ConfigError::Limit(format!(
                "line {}: nested {depth} levels deep (indentation and leading '- '), over \
                 kvaudit's limit of {MAX_BLOCK_NESTING} for a router config",
                i + 1
            )));
        }
        // `*` where a node may start: after a line's markers, a space, a bracket or a comma.
        let mut before = ' ';
        for c in line.chars() {
            if c == '*' && matches!(before, ' ' | '\t' | '[' | '{' | ',' | ':' | '-' | '?') {
                return Err(ConfigError::Limit(format!(
                    "line {}: a YAML alias (*name); kvaudit reads router configs without \
                     aliases (each would be expanded in full): write the value out",
                    i + 1
                )));
            }
            before = c;
        }
    }
    Ok(())
}

/// The flags of the routers' command lines that take a value.
const VALUE_FLAGS: &[&str] = &[
    "--kv-cache-block-size",
    "--block-size",
    "--kv-event-block-size",
    "--router-mode",
    "--router-approximate-cache-policy",
    "--policy",
    "--decode-policy",
    "--cache-threshold",
];

/// Words of a flags file: whitespace-separated, `#` comments and line continuations
/// dropped, `--flag=value` split in two.
fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.split(" #").next().unwrap_or("");
        if line.trim_start().starts_with('#') {
            continue;
        }
        for w in line.split_whitespace() {
            let w = w.trim_matches(|c| c == '"' || c == '\'');
            if w == "\\" || w.is_empty() {
                continue;
            }
            match w.split_once('=') {
                Some((k, v)) if k.starts_with("--") => {
                    out.push(k.to_string());
                    out.push(v.to_string());
                }
                _ => out.push(w.to_string()),
            }
        }
    }
    out
}

fn flags(text: &str) -> Result<Loaded, ConfigError> {
    let w = words(text);
    let has = |f: &str| w.iter().any(|x| x == f);
    // As argparse reads them: a flag given twice takes its last value; a flag whose value is
    // missing (the file's end, or another flag next) is an error, not a default.
    for (i, x) in w.iter().enumerate() {
        if VALUE_FLAGS.contains(&x.as_str()) && w.get(i + 1).is_none_or(|v| v.starts_with("--")) {
            return Err(ConfigError::Invalid(format!("{x} has no value")));
        }
    }
    let value = |f: &str| -> Option<&str> {
        w.iter()
            .rposition(|x| x == f)
            .and_then(|i| w.get(i + 1))
            .map(String::as_str)
    };
    // Every number these flags files carry is a block size; each time a flag is given, its
    // value is checked (the last one is used).
    let number = |f: &str| -> Result<Option<usize>, ConfigError> {
        let mut last = None;
        for (i, _) in w.iter().enumerate().filter(|(_, x)| *x == f) {
            let v = w.get(i + 1).map_or("", String::as_str);
            let b = v
                .parse::<usize>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| {
                    ConfigError::Invalid(format!("{f} {v}: expected a positive integer"))
                })
                .and_then(|b| crate::align::check_block_size(f, b).map_err(ConfigError::from))?;
            last = Some(b);
        }
        Ok(last)
    };
    let fraction = |f: &str| -> Result<Option<f64>, ConfigError> {
        value(f)
            .map(|v| {
                v.parse::<f64>()
                    .ok()
                    .filter(|x| (0.0..=1.0).contains(x))
                    .ok_or_else(|| {
                        ConfigError::Invalid(format!("{f} {v}: expected a number from 0 to 1"))
                    })
            })
            .transpose()
    };
    let first = w.first().map(String::as_str).unwrap_or("");
    let dynamo =
        first == "dynamo" || w.iter().any(|x| x.starts_with("dynamo.")) || has("--router-mode");
    let mut unknown = Vec::new();
    let spec = if dynamo {
        if value("--router-mode").is_some_and(|m| m != "kv") {
            unknown.push(format!(
                "--router-mode {} (not kv: the router does not use the KV cache)",
                value("--router-mode").unwrap_or("")
            ));
        }
        let block_size = number("--kv-cache-block-size")?.or(number("--block-size")?);
        if has("--no-router-kv-events") || has("--no-kv-events") {
            Spec::DynamoApprox(DynamoApprox {
                policy: match value("--router-approximate-cache-policy") {
                    Some("lru") => ApproxPolicy::Lru,
                    _ => ApproxPolicy::Ttl,
                },
                block_size,
            })
        } else {
            Spec::Dynamo(Dynamo {
                block_size,
                conditional: has("--router-conditional-disagg").then_some(Conditional {
                    isl_threshold: 2048,
                    ratio: 0.7,
                }),
            })
        }
    } else if first == "vllm-router" || has("--vllm-pd-disaggregation") || has("--kv-event-source")
    {
        let pd = has("--vllm-pd-disaggregation") || has("--pd-disaggregation");
        let policy = if pd {
            value("--decode-policy").or(value("--policy"))
        } else {
            value("--policy")
        };
        let policy = match policy.unwrap_or("cache_aware") {
            "cache_aware" => VllmRouterPolicy::CacheAware,
            "kv_aware" => VllmRouterPolicy::KvAware,
            other => {
                return Err(ConfigError::Unmodelled(format!(
                    "vllm-router policy {other} does not use the cache: kvaudit models cache_aware and kv_aware"
                )));
            }
        };
        Spec::VllmRouter(VllmRouter {
            policy,
            threshold: fraction("--cache-threshold")?.unwrap_or(0.3),
            block_size: number("--kv-event-block-size")?.unwrap_or(16),
            pd,
        })
    } else if first == "smg" || has("--cache-threshold") || has("--policy") {
        if value("--policy").is_some_and(|p| p != "cache_aware") {
            return Err(ConfigError::Unmodelled(format!(
                "smg policy {} does not use the cache: kvaudit models cache_aware",
                value("--policy").unwrap_or("")
            )));
        }
        Spec::Smg(Smg {
            mode: SmgMode::Http,
            threshold: fraction("--cache-threshold")?.unwrap_or(0.3),
            pd: has("--pd-disaggregation"),
        })
    } else {
        return Err(ConfigError::NotAConfig(
            "neither an EndpointPickerConfig nor the flags of dynamo, vllm-router or smg".into(),
        ));
    };
    Ok(Loaded::Flags { spec, unknown })
}

impl Loaded {
    /// The emulation this configuration selects.
    pub fn spec(&self, base: &RouterSettings) -> Result<Spec, ConfigError> {
        match self {
            Loaded::LlmD(e) => e.spec(base),
            Loaded::Flags { spec, .. } => Ok(spec.clone()),
        }
    }
}

/// What a router configuration gets wrong for keeping a turn on its decode pod (the seed
/// write-up's three conditions, and what kvaudit cannot see).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LintKind {
    /// The router's block size cannot see the engine's decode-time blocks.
    BlockSize,
    /// Scoring or the P/D decision reads the approximate producer, not the engine's events.
    ReadsApproximate,
    /// The decider's threshold splits nearly every follow-up turn.
    NonCachedTooLow,
    /// Something the configuration names that kvaudit does not model.
    Unmodelled,
    /// The router asks the engine for something its serving flags refuse.
    CannotRender,
    /// llm-d's subscriber never receives the engine's events: their topic does not start
    /// with its topic filter.
    TopicFiltered,
    /// llm-d takes the pod from the topic (`kv@POD@MODEL`) and scores endpoints by
    /// `address:port`: a topic that does not name one scores nothing.
    TopicPod,
    /// llm-d's engine adapter cannot decode the engine's events: every message is dropped.
    EventsUndecodable,
}

/// What a router depends on in the engine's serving flags (`vllm serve …`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EngineArgs {
    /// `--enable-scale-out`: vLLM 0.32 answers `/v1/chat/completions/render` only with it.
    pub enable_scale_out: bool,
    /// The topic the engine publishes its KV events under (vLLM's and SGLang's default topic
    /// is empty); `None` when it publishes none (no `--kv-events-config`, events not enabled,
    /// or the `null` publisher).
    pub kv_events_topic: Option<String>,
    /// The engine the command line starts, when it says: `vllm` or `sglang`.
    pub server: Option<&'static str>,
}

/// The engine's flags from a file of them (the command line as a shell reads it: quotes,
/// `#` comments, line continuations). A flag given twice takes its last value, as argparse
/// does.
pub fn engine_args(text: &str) -> Result<EngineArgs, ConfigError> {
    let split = shlex::split(text).ok_or_else(|| {
        ConfigError::Invalid(
            "the engine's flags do not split as a shell splits them (a quote left open?)".into(),
        )
    })?;
    // vLLM is the one whose events are off unless enabled; SGLang publishes once a publisher
    // is named.
    // The program (a path to it, or `python -m` its module) among the first words.
    let starts = |program: &str, module: &str| {
        split
            .iter()
            .take(4)
            .any(|w| w == program || w.ends_with(&format!("/{program}")) || w.starts_with(module))
    };
    let vllm = starts("vllm", "vllm.entrypoints");
    let sglang = starts("sglang", "sglang.launch_server");
    let mut w: Vec<String> = Vec::new();
    for word in split {
        // `--flag=value` is `--flag value`, and `--kv_events_config` is `--kv-events-config`,
        // as vLLM's argument parser reads them.
        let (flag, value) = match word.split_once('=') {
            Some((k, v)) if k.starts_with("--") => (k.to_string(), Some(v.to_string())),
            _ => (word, None),
        };
        w.push(match flag.strip_prefix("--") {
            Some(name) => match name.split_once('.') {
                Some((base, key)) => format!("--{}.{key}", base.replace('_', "-")),
                None => format!("--{}", name.replace('_', "-")),
            },
            None => flag,
        });
        w.extend(value);
    }
    let mut e = EngineArgs {
        server: match (vllm, sglang) {
            (true, _) => Some("vllm"),
            (false, true) => Some("sglang"),
            (false, false) => None,
        },
        ..EngineArgs::default()
    };
    let mut config: Option<serde_json::Map<String, Json>> = None;
    let value = |i: usize, flag: &str| {
        w.get(i + 1)
            .ok_or_else(|| ConfigError::Invalid(format!("{flag} has no value")))
    };
    let mut i = 0;
    while i < w.len() {
        let flag = w[i].as_str();
        match flag {
            "--enable-scale-out" => e.enable_scale_out = true,
            "--no-enable-scale-out" => e.enable_scale_out = false,
            "--kv-events-config" => {
                let text = value(i, flag)?;
                let parsed: Json = serde_json::from_str(text).map_err(|err| {
                    ConfigError::Invalid(format!(
                        "--kv-events-config is not one JSON object (quote it as one word): {err}"
                    ))
                })?;
                let Json::Object(map) = parsed else {
                    return Err(ConfigError::Invalid(
                        "--kv-events-config is not a JSON object".into(),
                    ));
                };
                // Given twice, the last holds; dotted keys given before it are kept.
                let mut merged = config.take().unwrap_or_default();
                merged.extend(map);
                config = Some(merged);
                i += 1;
            }
            _ => {
                if let Some(key) = flag.strip_prefix("--kv-events-config.") {
                    let text = value(i, flag)?;
                    // A dotted key's value is JSON where it parses (true, 3), else a string.
                    let v =
                        serde_json::from_str(text).unwrap_or_else(|_| Json::String(text.clone()));
                    config.get_or_insert_default().insert(key.to_string(), v);
                    i += 1;
                }
            }
        }
        i += 1;
    }
    if let Some(c) = config {
        let topic = match c.get("topic") {
            None | Some(Json::Null) => String::new(),
            Some(Json::String(t)) => t.clone(),
            Some(_) => {
                return Err(ConfigError::Invalid(
                    "--kv-events-config's topic is not a string".into(),
                ));
            }
        };
        let enabled = match c.get("enable_kv_cache_events") {
            Some(Json::Bool(b)) => *b,
            None => !vllm,
            Some(_) => {
                return Err(ConfigError::Invalid(
                    "--kv-events-config's enable_kv_cache_events is not true or false".into(),
                ));
            }
        };
        let null_publisher = c.get("publisher").and_then(Json::as_str) == Some("null");
        if enabled && !null_publisher {
            e.kv_events_topic = Some(topic);
        }
    }
    Ok(e)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lint {
    pub kind: LintKind,
    pub message: String,
}

/// Whether llm-d's precise producers receive the engine's events and can tell its pods:
/// each producer a scorer or the decider reads, once.
fn wiring(e: &Epp, engine: &EngineArgs) -> Vec<Lint> {
    let mut out = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    let readers = [e.scorer_reads.as_ref(), e.decider.as_ref().map(|(_, r)| r)];
    for p in readers.into_iter().flatten() {
        let Producer::Precise {
            name,
            topic_filter,
            engine_type,
            global_socket,
            ..
        } = p
        else {
            continue;
        };
        if seen.contains(&name.as_str()) {
            continue;
        }
        seen.push(name);
        let Some(topic) = &engine.kv_events_topic else {
            out.push(Lint {
                kind: LintKind::TopicFiltered,
                message: format!(
                    "{name} reads the engine's KV events, and the engine's flags publish none (no --kv-events-config, enable_kv_cache_events not true, or the null publisher): every lookup scores 0"
                ),
            });
            continue;
        };
        if !topic.starts_with(topic_filter.as_str()) {
            out.push(Lint {
                kind: LintKind::TopicFiltered,
                message: format!(
                    "{name} receives only topics starting with {topic_filter:?} (kvEventsConfig.topicFilter), and the engine publishes under {topic:?} (--kv-events-config topic): llm-d never receives one of its events, and every lookup scores 0"
                ),
            });
            continue;
        }
        // Both engines send each event as a map (vLLM 0.26 on, SGLang 0.5.23): llm-d's
        // `sglang` adapter decodes events as positional arrays and drops every message; its
        // `vllm` adapter reads the tagged maps of both.
        if engine_type == "sglang" {
            let engine = match engine.server {
                Some("vllm") => "vLLM",
                Some(_) => "SGLang",
                None => "the engine",
            };
            out.push(Lint {
                kind: LintKind::EventsUndecodable,
                message: format!(
                    "{name} decodes events with llm-d's sglang adapter (kvEventsConfig.engineType), which reads each event as a positional array, and {engine} sends each as a map (SGLang 0.5.23, vLLM 0.26 on): every message fails to decode and is dropped, and every lookup scores 0 (engineType vllm reads both)"
                ),
            });
        }
        // llm-d reads kv@POD@MODEL: the model always from the topic, the pod too when one
        // bound socket serves every pod.
        let parts: Vec<&str> = topic.split('@').collect();
        if parts.len() != 3 {
            out.push(Lint {
                kind: LintKind::TopicPod,
                message: format!(
                    "{name} reads the model from the topic's third part (kv@POD@MODEL), and the engine's topic {topic:?} has no such part: every event is indexed under the model \"\" and no request's lookup matches it"
                ),
            });
        } else if *global_socket && !crate::routers::llm_d::names_endpoint(parts[1]) {
            out.push(Lint {
                kind: LintKind::TopicPod,
                message: format!(
                    "{name} binds one socket for every pod (kvEventsConfig.zmqEndpoint) and takes each event's pod from the topic (kv@POD@MODEL), and scores endpoints by address:port; the engine's topic {topic:?} names {:?}, no address:port: every lookup against the real endpoints scores 0 (publish under kv@$(POD_IP):PORT@MODEL)",
                    parts[1]
                ),
            });
        }
    }
    out
}

/// Things not modelled that one lint lists by name; the rest are counted in one more line.
pub const MAX_LISTED: usize = 8;

/// The configuration against an engine of `engine_block_size`, and against the engine's
/// serving flags when they are given.
pub fn lint(loaded: &Loaded, engine_block_size: usize, engine: Option<&EngineArgs>) -> Vec<Lint> {
    let eb = engine_block_size;
    let mut out = Vec::new();
    if let (Loaded::LlmD(e), Some(engine)) = (loaded, engine) {
        out.extend(wiring(e, engine));
    }
    let mut push = |kind, message: String| out.push(Lint { kind, message });
    match loaded {
        Loaded::LlmD(e) => {
            let mut seen: Vec<&str> = Vec::new();
            let readers = [
                ("prefix-cache-scorer", e.scorer_reads.as_ref()),
                (
                    "prefix-based-pd-decider",
                    e.decider.as_ref().map(|(_, r)| r),
                ),
            ];
            for (who, reads) in readers {
                let Some(p) = reads else { continue };
                match p {
                    Producer::Precise {
                        name, block_size, ..
                    } => {
                        let b = *block_size;
                        if b != eb && !eb.is_multiple_of(b) && !seen.contains(&name.as_str()) {
                            seen.push(name);
                            push(
                                LintKind::BlockSize,
                                if b > eb {
                                    format!(
                                        "{name} indexes blocks of {b} tokens; vLLM stores blocks of {eb} and announces each decode-time block alone, so every reply block is shorter than an index block and dropped: the index never sees a reply"
                                    )
                                } else {
                                    format!(
                                        "{name} indexes blocks of {b} tokens, which does not divide vLLM's {eb}: each event's tail beyond a multiple of {b} is lost"
                                    )
                                },
                            );
                        }
                    }
                    Producer::Approx { name, .. } => push(
                        LintKind::ReadsApproximate,
                        format!(
                            "{who} reads {name}, the approximate producer: it records requests only, in blocks of at least 64 tokens, so it never credits a decode pod with the reply it generated (name the precise producer in prefixMatchInfoProducerName)"
                        ),
                    ),
                    Producer::Other { name, kind } => push(
                        LintKind::Unmodelled,
                        format!("{who} reads {name} ({kind}), which kvaudit does not model"),
                    ),
                }
            }
            if let Some((d, _)) = &e.decider
                && d.non_cached_tokens > 0
                && d.non_cached_tokens < 2 * eb
            {
                push(
                    LintKind::NonCachedTooLow,
                    format!(
                        "nonCachedTokens {} is under two engine blocks ({}): a follow-up turn leaves the partial last block (up to {} tokens) and the template's turn markers uncached, so nearly every turn goes to a prefill pod; pick it from `kvaudit corpus`'s table on your traffic",
                        d.non_cached_tokens,
                        2 * eb,
                        eb - 1
                    ),
                );
            }
            let mut kinds: Vec<&str> = Vec::new();
            for kind in &e.unknown {
                if !kinds.contains(&kind.as_str()) {
                    kinds.push(kind);
                }
            }
            for kind in kinds.iter().take(MAX_LISTED) {
                push(
                    LintKind::Unmodelled,
                    format!(
                        "plugin type {kind} is not modelled: its effect on routing is not counted"
                    ),
                );
            }
            if kinds.len() > MAX_LISTED {
                push(
                    LintKind::Unmodelled,
                    format!(
                        "and {} more plugin types that are not modelled",
                        kinds.len() - MAX_LISTED
                    ),
                );
            }
        }
        Loaded::Flags { spec, unknown } => {
            match spec {
                Spec::Dynamo(Dynamo {
                    block_size: Some(b),
                    ..
                }) if *b != eb => push(
                    LintKind::BlockSize,
                    format!(
                        "Dynamo's KV block size {b} is not the engine's {eb}: every event is converted to zero blocks and the worker is invisible to the router, prompt included"
                    ),
                ),
                Spec::VllmRouter(VllmRouter {
                    policy: VllmRouterPolicy::KvAware,
                    block_size,
                    ..
                }) if *block_size != eb => push(
                    LintKind::BlockSize,
                    format!(
                        "vllm-router's --kv-event-block-size {block_size} is not the engine's {eb}: every event batch is rejected and the source cleared"
                    ),
                ),
                _ => {}
            }
            if let Spec::VllmRouter(VllmRouter {
                policy: VllmRouterPolicy::CacheAware,
                ..
            }) = spec
                && engine.is_some_and(|e| !e.enable_scale_out)
            {
                push(
                    LintKind::CannotRender,
                    "vllm-router's cache_aware asks every worker to render each request (POST /v1/chat/completions/render), and vLLM 0.32 refuses that (403) unless started with --enable-scale-out, which the engine's flags lack: every turn is routed by load alone, silently".to_string(),
                );
            }
            for u in unknown.iter().take(MAX_LISTED) {
                push(LintKind::Unmodelled, u.clone());
            }
            if unknown.len() > MAX_LISTED {
                push(
                    LintKind::Unmodelled,
                    format!(
                        "and {} more flags that are not modelled",
                        unknown.len() - MAX_LISTED
                    ),
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
