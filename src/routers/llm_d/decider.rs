//! llm-d's prefix-based P/D decider (reference/llm-d.md §5.2): does a request need a remote
//! prefill, given how much of its prompt the decode pod is known to hold?

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeciderConfig {
    pub non_cached_tokens: usize,
    pub prompt_tokens: usize,
}

impl Default for DeciderConfig {
    /// The decider README's example.
    fn default() -> Self {
        DeciderConfig {
            non_cached_tokens: 512,
            prompt_tokens: 1024,
        }
    }
}

/// Why a decider setting (`--decider`, a gate's `decider`) is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeciderConfigError {
    #[error("expected key=value, got {0:?}")]
    NotKeyValue(String),
    #[error("{key}: {value:?} is not a whole number from 0 to {max}", max = MAX_TOKENS)]
    NotATokenCount { key: String, value: String },
    #[error("unknown decider setting {0:?} (non-cached-tokens, prompt-tokens)")]
    UnknownSetting(String),
}

/// The largest token threshold a decider or router setting takes (nonCachedTokens,
/// promptTokens, Dynamo's isl_threshold): past any prompt a model serves, and small enough
/// that no sum of them overflows.
pub const MAX_TOKENS: usize = 1 << 32;

impl DeciderConfig {
    /// `non-cached-tokens=512,prompt-tokens=1024`; a setting left out keeps its default
    /// (the documented 512 / 1024), so `non-cached-tokens=16` does not turn the prompt
    /// threshold off. `0` disables a threshold, as in llm-d.
    pub fn parse(text: &str) -> Result<DeciderConfig, DeciderConfigError> {
        let mut cfg = DeciderConfig::default();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| DeciderConfigError::NotKeyValue(part.to_string()))?;
            let v: usize = v
                .trim()
                .parse()
                .ok()
                .filter(|&n| n <= MAX_TOKENS)
                .ok_or_else(|| DeciderConfigError::NotATokenCount {
                    key: k.to_string(),
                    value: v.to_string(),
                })?;
            match k.trim() {
                "non-cached-tokens" | "nonCachedTokens" => cfg.non_cached_tokens = v,
                "prompt-tokens" | "promptTokens" => cfg.prompt_tokens = v,
                other => return Err(DeciderConfigError::UnknownSetting(other.to_string())),
            }
        }
        Ok(cfg)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    DecodeOnly,
    PrefillDecode,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::DecodeOnly => "decode-only",
            Verdict::PrefillDecode => "prefill-decode",
        }
    }
}

/// Which rule decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    Disabled,
    ShortPrompt,
    BelowThreshold,
    EnoughCached,
    TooManyUncached,
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Rule::Disabled => "non_cached_tokens is 0 (decider disabled)",
            Rule::ShortPrompt => "prompt shorter than prompt_tokens",
            Rule::BelowThreshold => "prompt shorter than non_cached_tokens",
            Rule::EnoughCached => "uncached tokens below non_cached_tokens",
            Rule::TooManyUncached => "uncached tokens at or above non_cached_tokens",
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub verdict: Verdict,
    pub rule: Rule,
    pub input_tokens: usize,
    pub cached_tokens: usize,
    pub non_cached: usize,
}

/// `disaggregate`: true (prefill-decode) when the uncached part reaches the threshold.
pub fn decide(
    cfg: &DeciderConfig,
    input_tokens: usize,
    cached_block_count: usize,
    block_size: usize,
) -> Outcome {
    let cached_tokens = cached_block_count * block_size;
    let non_cached = input_tokens.saturating_sub(cached_tokens);
    let (verdict, rule) = if cfg.non_cached_tokens == 0 {
        (Verdict::DecodeOnly, Rule::Disabled)
    } else if cfg.prompt_tokens > 0 && input_tokens < cfg.prompt_tokens {
        (Verdict::DecodeOnly, Rule::ShortPrompt)
    } else if input_tokens < cfg.non_cached_tokens {
        (Verdict::DecodeOnly, Rule::BelowThreshold)
    } else if non_cached < cfg.non_cached_tokens {
        (Verdict::DecodeOnly, Rule::EnoughCached)
    } else {
        (Verdict::PrefillDecode, Rule::TooManyUncached)
    };
    Outcome {
        verdict,
        rule,
        input_tokens,
        cached_tokens,
        non_cached,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(threshold: usize, prompt: usize, cached: usize) -> bool {
        let cfg = DeciderConfig {
            non_cached_tokens: threshold,
            prompt_tokens: prompt,
        };
        decide(&cfg, 10, cached, 1).verdict == Verdict::PrefillDecode
    }

    #[test]
    fn llm_d_test_vectors() {
        // prefix_based_pd_decider_test.go TestDisaggregate (BS 1, input 10).
        assert!(d(5, 0, 5));
        assert!(!d(5, 0, 8));
        assert!(d(3, 0, 2));
        assert!(!d(1, 0, 10));
        assert!(d(5, 0, 0));
        assert!(!d(20, 0, 0));
        assert!(!d(5, 20, 0));
        assert!(d(5, 10, 5));
        assert!(!d(0, 0, 0));
        // TestDisaggregate_UsesUnweightedCachedBlockCount.
        let cfg = DeciderConfig {
            non_cached_tokens: 512,
            prompt_tokens: 0,
        };
        assert_eq!(decide(&cfg, 4096, 240, 16).verdict, Verdict::DecodeOnly);
        assert_eq!(decide(&cfg, 4096, 192, 16).verdict, Verdict::PrefillDecode);
    }

    #[test]
    fn parse_settings() {
        assert_eq!(
            DeciderConfig::parse("non-cached-tokens=512,prompt-tokens=1024").unwrap(),
            DeciderConfig::default()
        );
        // A setting left out keeps its documented default instead of 0 (disabled).
        assert_eq!(
            DeciderConfig::parse("non-cached-tokens=16").unwrap(),
            DeciderConfig {
                non_cached_tokens: 16,
                prompt_tokens: 1024
            }
        );
        assert_eq!(
            DeciderConfig::parse("promptTokens=10").unwrap(),
            DeciderConfig {
                non_cached_tokens: 512,
                prompt_tokens: 10
            }
        );
        assert_eq!(
            DeciderConfig::parse("non-cached-tokens=0,prompt-tokens=0").unwrap(),
            DeciderConfig {
                non_cached_tokens: 0,
                prompt_tokens: 0
            }
        );
        assert!(DeciderConfig::parse("threshold=3").is_err());
        assert!(DeciderConfig::parse("non-cached-tokens=-1").is_err());
    }
}
