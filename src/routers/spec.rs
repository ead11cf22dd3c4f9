//! `--router NAME[:key=value,...]`: which router to emulate, and its settings (each router's
//! file reads its own).

use super::Router;
use super::dynamo::Dynamo;
use super::dynamo_approx::DynamoApprox;
use super::gaie::Gaie;
use super::llm_d::LlmD;
use super::llm_d::view::RouterSettings;
use super::llm_d_approx::LlmDApprox;
use super::params::{Params, RouterSpecError};
use super::smg::Smg;
use super::vllm_router::VllmRouter;

/// One router emulation and its settings, each kept by the router's own file.
#[derive(Debug, Clone, PartialEq)]
pub enum Spec {
    LlmD(LlmD),
    LlmDApprox(LlmDApprox),
    Dynamo(Dynamo),
    DynamoApprox(DynamoApprox),
    VllmRouter(VllmRouter),
    Smg(Smg),
    Gaie(Gaie),
}

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
    /// The router this value configures.
    pub fn router(&self) -> &dyn Router {
        match self {
            Spec::LlmD(r) => r,
            Spec::LlmDApprox(r) => r,
            Spec::Dynamo(r) => r,
            Spec::DynamoApprox(r) => r,
            Spec::VllmRouter(r) => r,
            Spec::Smg(r) => r,
            Spec::Gaie(r) => r,
        }
    }

    pub fn name(&self) -> &'static str {
        self.router().name()
    }

    /// The version of the router's code the emulation follows.
    pub fn version(&self) -> &'static str {
        self.router().version()
    }

    /// Parse one `--router` value; `llm_d` holds the llm-d settings of the other flags
    /// (`--index-block-size`, `--decider`, …), which `llm-d:key=value` overrides.
    pub fn parse(text: &str, llm_d: &RouterSettings) -> Result<Spec, RouterSpecError> {
        let (name, rest) = match text.split_once(':') {
            Some((n, r)) => (n.trim(), r),
            None => (text.trim(), ""),
        };
        let mut params = Params::parse(name, rest)?;
        let spec = match name {
            "llm-d" => Spec::LlmD(LlmD::parse(&mut params, llm_d)?),
            "llm-d-approx" => Spec::LlmDApprox(LlmDApprox::parse(&mut params, llm_d)?),
            "dynamo" => Spec::Dynamo(Dynamo::parse(&mut params)?),
            "dynamo-approx" => Spec::DynamoApprox(DynamoApprox::parse(&mut params)?),
            "vllm-router" => Spec::VllmRouter(VllmRouter::parse(&mut params)?),
            "sglang" | "smg" => Spec::Smg(Smg::parse(&mut params)?),
            "gaie" => Spec::Gaie(Gaie::parse(&mut params)?),
            other => {
                let known: Vec<&str> = NAMES.iter().map(|(n, _)| *n).collect();
                let hint = crate::suggest::closest(other, known.iter().copied())
                    .map(|s| format!(" (did you mean {s}?)"))
                    .unwrap_or_default();
                return Err(RouterSpecError::UnknownRouter(format!(
                    "unknown router {other:?}{hint}; known: {}",
                    known.join(", ")
                )));
            }
        };
        params.finish(name)?;
        Ok(spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routers::dynamo::Conditional;
    use crate::routers::vllm_router::VllmRouterPolicy;

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
            Spec::Dynamo(Dynamo {
                block_size: None,
                conditional: Some(Conditional {
                    isl_threshold: 2048,
                    ratio: 0.7
                })
            })
        );
        assert_eq!(
            Spec::parse("vllm-router:policy=kv_aware", &d).unwrap(),
            Spec::VllmRouter(VllmRouter {
                policy: VllmRouterPolicy::KvAware,
                threshold: 0.3,
                block_size: 16,
                pd: false
            })
        );
        assert_eq!(Spec::parse("smg:mode=events", &d).unwrap().name(), "sglang");
    }

    #[test]
    fn mistakes_are_named() {
        let d = llm_d();
        let e = |s: &str| Spec::parse(s, &d).unwrap_err().to_string();
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
