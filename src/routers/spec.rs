//! `--router NAME[:key=value,...]`: which router to emulate, and its settings.

use crate::index::decider::{DeciderConfig, MAX_TOKENS};
use crate::index::router::RouterSettings;

/// Dynamo's conditional disaggregation (`--router-conditional-disagg`): the ISL-bounding
/// policy's two limits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Conditional {
    pub isl_threshold: usize,
    pub ratio: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApproxPolicy {
    Ttl,
    Lru,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VllmRouterPolicy {
    CacheAware,
    KvAware,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SglangMode {
    Http,
    Events,
}

/// One router emulation and its settings. A block size left out is the engine's, where the
/// router learns it from the engine (Dynamo, smg's events, GAIE's auto-tune).
#[derive(Debug, Clone, PartialEq)]
pub enum Spec {
    LlmD(LlmD),
    LlmDApprox {
        block_size: Option<usize>,
        decider: DeciderConfig,
    },
    Dynamo {
        block_size: Option<usize>,
        conditional: Option<Conditional>,
    },
    DynamoApprox {
        policy: ApproxPolicy,
        block_size: Option<usize>,
    },
    VllmRouter {
        policy: VllmRouterPolicy,
        threshold: f64,
        /// `--kv-event-block-size` (kv_aware): 16 unless given.
        block_size: usize,
        pd: bool,
    },
    Sglang {
        mode: SglangMode,
        threshold: f64,
        pd: bool,
    },
    Gaie {
        block_size: Option<usize>,
        max_blocks: usize,
    },
}

/// llm-d's precise index and its decider (the settings of `index::router`).
#[derive(Debug, Clone, PartialEq)]
pub struct LlmD(pub RouterSettings);

/// The router names `--router` takes, with what each emulates.
pub const NAMES: &[(&str, &str)] = &[
    (
        "llm-d",
        "llm-d's precise prefix index and P/D decider (the default)",
    ),
    ("llm-d-approx", "llm-d's approx-prefix-cache-producer"),
    ("dynamo", "NVIDIA Dynamo 1.6.1's KV router on engine events"),
    (
        "dynamo-approx",
        "Dynamo 1.6.1 without KV events (policy=ttl|lru)",
    ),
    (
        "vllm-router",
        "vllm-router 0.1.17 (policy=cache_aware|kv_aware)",
    ),
    (
        "sglang",
        "SGLang's model gateway smg 1.13.0 (mode=http|events)",
    ),
    (
        "gaie",
        "the Gateway API Inference Extension's prefix plugin, v1.5.0",
    ),
];

impl Spec {
    pub fn name(&self) -> &'static str {
        match self {
            Spec::LlmD(_) => "llm-d",
            Spec::LlmDApprox { .. } => "llm-d-approx",
            Spec::Dynamo { .. } => "dynamo",
            Spec::DynamoApprox { .. } => "dynamo-approx",
            Spec::VllmRouter { .. } => "vllm-router",
            Spec::Sglang { .. } => "sglang",
            Spec::Gaie { .. } => "gaie",
        }
    }

    /// The version of the router's code the emulation follows.
    pub fn version(&self) -> &'static str {
        match self {
            Spec::LlmD(_) | Spec::LlmDApprox { .. } => "llm-d-router ebab687 (2026-08-21) + #2560",
            Spec::Dynamo { .. } | Spec::DynamoApprox { .. } => "dynamo 1.6.1",
            Spec::VllmRouter { .. } => "vllm-router 0.1.17",
            Spec::Sglang { .. } => "smg 1.13.0",
            Spec::Gaie { .. } => "gateway-api-inference-extension v1.5.0",
        }
    }

    /// Parse one `--router` value; `llm_d` holds the llm-d settings of the other flags
    /// (`--index-block-size`, `--decider`, …), which `llm-d:key=value` overrides.
    pub fn parse(text: &str, llm_d: &RouterSettings) -> Result<Spec, String> {
        let (name, rest) = match text.split_once(':') {
            Some((n, r)) => (n.trim(), r),
            None => (text.trim(), ""),
        };
        let mut params = Params::parse(name, rest)?;
        let spec = match name {
            "llm-d" => {
                let mut s = llm_d.clone();
                if let Some(b) = params.block_size()? {
                    s.index.block_size = b;
                }
                s.decider = params.decider(s.decider)?;
                Spec::LlmD(LlmD(s))
            }
            "llm-d-approx" => Spec::LlmDApprox {
                block_size: params.block_size()?,
                decider: params.decider(llm_d.decider)?,
            },
            "dynamo" => {
                let on = params.flag("conditional_disagg")?.unwrap_or(false);
                let isl = params.bounded("isl_threshold", 0..=MAX_TOKENS)?;
                let ratio = params.fraction("ratio")?;
                if !on && (isl.is_some() || ratio.is_some()) {
                    return Err(
                        "isl_threshold and ratio are settings of conditional_disagg=true".into(),
                    );
                }
                Spec::Dynamo {
                    block_size: params.block_size()?,
                    conditional: on.then(|| Conditional {
                        isl_threshold: isl.unwrap_or(2048),
                        ratio: ratio.unwrap_or(0.7),
                    }),
                }
            }
            "dynamo-approx" => Spec::DynamoApprox {
                policy: match params.word("policy")?.as_deref() {
                    None | Some("ttl") => ApproxPolicy::Ttl,
                    Some("lru") => ApproxPolicy::Lru,
                    Some(o) => return Err(format!("policy={o}: expected ttl or lru")),
                },
                block_size: params.block_size()?,
            },
            "vllm-router" => {
                let policy = match params.word("policy")?.as_deref() {
                    None | Some("cache_aware") => VllmRouterPolicy::CacheAware,
                    Some("kv_aware") => VllmRouterPolicy::KvAware,
                    Some(o) => return Err(format!("policy={o}: expected cache_aware or kv_aware")),
                };
                Spec::VllmRouter {
                    policy,
                    threshold: params.fraction("threshold")?.unwrap_or(0.3),
                    block_size: params.block_size()?.unwrap_or(16),
                    pd: params.flag("pd")?.unwrap_or(false),
                }
            }
            "sglang" | "smg" => Spec::Sglang {
                mode: match params.word("mode")?.as_deref() {
                    None | Some("http") => SglangMode::Http,
                    Some("events") => SglangMode::Events,
                    Some(o) => return Err(format!("mode={o}: expected http or events")),
                },
                threshold: params.fraction("threshold")?.unwrap_or(0.3),
                pd: params.flag("pd")?.unwrap_or(false),
            },
            "gaie" => Spec::Gaie {
                block_size: params.block_size()?,
                max_blocks: params
                    .bounded("max_blocks", 1..=MAX_GAIE_BLOCKS)?
                    .unwrap_or(256),
            },
            other => {
                let known: Vec<&str> = NAMES.iter().map(|(n, _)| *n).collect();
                let hint = crate::suggest::closest(other, known.iter().copied())
                    .map(|s| format!(" (did you mean {s}?)"))
                    .unwrap_or_default();
                return Err(format!(
                    "unknown router {other:?}{hint}; known: {}",
                    known.join(", ")
                ));
            }
        };
        params.finish(name)?;
        Ok(spec)
    }
}

/// GAIE's maxPrefixBlocksToMatch at most: 2^20 blocks is 64 M tokens at its smallest block.
pub const MAX_GAIE_BLOCKS: usize = 1 << 20;

/// `key=value` pairs, each taken once by the router that reads it; what is left is unknown.
struct Params {
    pairs: Vec<(String, String)>,
}

impl Params {
    fn parse(name: &str, text: &str) -> Result<Params, String> {
        let mut pairs: Vec<(String, String)> = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("{name}: expected key=value, got {part:?}"))?;
            // Both spellings users copy from the routers' own configs.
            let k = k.trim().replace('-', "_");
            let k = match k.as_str() {
                "blockSizeTokens" | "blocksize" | "kv_block_size" => "block_size".to_string(),
                "nonCachedTokens" => "non_cached_tokens".to_string(),
                "promptTokens" => "prompt_tokens".to_string(),
                _ => k,
            };
            if pairs.iter().any(|(have, _)| *have == k) {
                return Err(format!("{name}: {k} given twice"));
            }
            pairs.push((k, v.trim().to_string()));
        }
        Ok(Params { pairs })
    }

    fn take(&mut self, key: &str) -> Option<String> {
        let at = self.pairs.iter().position(|(k, _)| k == key)?;
        Some(self.pairs.remove(at).1)
    }

    fn word(&mut self, key: &str) -> Result<Option<String>, String> {
        Ok(self.take(key))
    }

    fn number(&mut self, key: &str) -> Result<Option<usize>, String> {
        self.take(key)
            .map(|v| {
                v.parse::<usize>()
                    .map_err(|_| format!("{key}={v}: expected a non-negative integer"))
            })
            .transpose()
    }

    fn block_size(&mut self) -> Result<Option<usize>, String> {
        self.number("block_size")?
            .map(|b| crate::align::check_block_size("block_size", b))
            .transpose()
    }

    /// A count setting within `range`, named with its range when it is not.
    fn bounded(
        &mut self,
        key: &str,
        range: std::ops::RangeInclusive<usize>,
    ) -> Result<Option<usize>, String> {
        match self.number(key)? {
            Some(n) if !range.contains(&n) => Err(format!(
                "{key}={n}: expected a whole number from {} to {}",
                range.start(),
                range.end()
            )),
            n => Ok(n),
        }
    }

    fn fraction(&mut self, key: &str) -> Result<Option<f64>, String> {
        self.take(key)
            .map(|v| match v.parse::<f64>() {
                Ok(x) if (0.0..=1.0).contains(&x) => Ok(x),
                _ => Err(format!("{key}={v}: expected a number from 0 to 1")),
            })
            .transpose()
    }

    fn flag(&mut self, key: &str) -> Result<Option<bool>, String> {
        self.take(key)
            .map(|v| match v.as_str() {
                "true" | "1" | "yes" | "on" => Ok(true),
                "false" | "0" | "no" | "off" => Ok(false),
                _ => Err(format!("{key}={v}: expected true or false")),
            })
            .transpose()
    }

    fn decider(&mut self, mut d: DeciderConfig) -> Result<DeciderConfig, String> {
        if let Some(n) = self.bounded("non_cached_tokens", 0..=MAX_TOKENS)? {
            d.non_cached_tokens = n;
        }
        if let Some(n) = self.bounded("prompt_tokens", 0..=MAX_TOKENS)? {
            d.prompt_tokens = n;
        }
        Ok(d)
    }

    fn finish(self, name: &str) -> Result<(), String> {
        match self.pairs.first() {
            None => Ok(()),
            Some((k, _)) => Err(format!("{name} has no setting {k:?}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn llm_d() -> RouterSettings {
        RouterSettings::default()
    }

    #[test]
    fn names_and_settings() {
        let d = llm_d();
        match Spec::parse("llm-d:block_size=16,nonCachedTokens=100", &d).unwrap() {
            Spec::LlmD(LlmD(s)) => {
                assert_eq!(s.index.block_size, 16);
                assert_eq!(s.decider.non_cached_tokens, 100);
                assert_eq!(s.decider.prompt_tokens, 1024);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            Spec::parse("llm-d", &d).unwrap(),
            Spec::LlmD(LlmD(d.clone()))
        );
        assert_eq!(
            Spec::parse("dynamo:conditional_disagg=true", &d).unwrap(),
            Spec::Dynamo {
                block_size: None,
                conditional: Some(Conditional {
                    isl_threshold: 2048,
                    ratio: 0.7
                })
            }
        );
        assert_eq!(
            Spec::parse("vllm-router:policy=kv_aware", &d).unwrap(),
            Spec::VllmRouter {
                policy: VllmRouterPolicy::KvAware,
                threshold: 0.3,
                block_size: 16,
                pd: false
            }
        );
        assert_eq!(Spec::parse("smg:mode=events", &d).unwrap().name(), "sglang");
    }

    #[test]
    fn mistakes_are_named() {
        let d = llm_d();
        let e = |s: &str| Spec::parse(s, &d).unwrap_err();
        assert!(
            e("dynamoo").contains("did you mean dynamo?"),
            "{}",
            e("dynamoo")
        );
        assert_eq!(
            e("dynamo:block_size=0"),
            "block_size 0: a block size is 1 to 65536 tokens"
        );
        assert_eq!(
            e("gaie:block_size=4611686018427387904"),
            "block_size 4611686018427387904: a block size is 1 to 65536 tokens"
        );
        assert_eq!(
            e("gaie:max_blocks=0"),
            "max_blocks=0: expected a whole number from 1 to 1048576"
        );
        assert_eq!(
            e("llm-d:nonCachedTokens=99999999999"),
            "non_cached_tokens=99999999999: expected a whole number from 0 to 4294967296"
        );
        assert_eq!(e("gaie:colour=red"), "gaie has no setting \"colour\"");
        assert_eq!(e("sglang:mode=grpc"), "mode=grpc: expected http or events");
        assert_eq!(
            e("vllm-router:threshold=2"),
            "threshold=2: expected a number from 0 to 1"
        );
        assert_eq!(
            e("dynamo:block_size=16,block-size=32"),
            "dynamo: block_size given twice"
        );
        assert_eq!(e("llm-d:x"), "llm-d: expected key=value, got \"x\"");
        assert_eq!(
            e("dynamo:ratio=0.5"),
            "isl_threshold and ratio are settings of conditional_disagg=true"
        );
    }
}
