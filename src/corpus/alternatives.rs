//! What each way of serving turn k+1 costs, in tokens computed and KV moved, from one
//! transition's numbers. The assumptions are stated in [`ASSUMPTIONS`] and printed with every
//! report, because each figure is only as good as them.

use serde::{Deserialize, Serialize};

/// Whether the prefill pod that computed prompt k still holds it when prompt k+1 arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PrefillAffinity {
    /// The same prefill pod, its prefix cache intact: it reuses prompt k's full blocks.
    Same,
    /// Another prefill pod (or an evicted cache): it computes the whole prompt.
    None,
}

impl PrefillAffinity {
    pub fn name(self) -> &'static str {
        match self {
            PrefillAffinity::Same => "same",
            PrefillAffinity::None => "none",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assumptions {
    pub prefill_affinity: PrefillAffinity,
    /// vLLM's `kv_recompute_threshold`: pulls shorter than this are recomputed instead.
    pub kv_recompute_threshold: usize,
}

/// The four serving paths, in report order.
pub const NAMES: [&str; 4] = [
    "pd",
    "vllm_bidirectional",
    "sglang_decode_radix",
    "decode_local",
];

/// Every assumption behind the figures, one sentence each (printed in every output format).
pub const ASSUMPTIONS: [&str; 7] = [
    "N is the next prompt's tokens; D (the decode pod) can reuse R_D = floor(min(LCP, held) / B) * B of them, as diff-turns computes (full blocks only)",
    "P (a prefill pod) can reuse R_P = floor(min(LCP, prompt_k) / B) * B with --prefill-affinity same (the pod that prefilled prompt k, its cache intact), else 0; R_P <= R_D always, since prompt k starts what D holds",
    "pd (plain P/D, every turn through P): P computes N - R_P; the whole prompt's KV, N tokens, moves P->D (no decode-side prefix reuse, as SGLang without its decode radix cache)",
    "vllm_bidirectional (vLLM bidirectional_kv_xfer): P pulls D's blocks past its own, R_D - R_P tokens D->P, when that is at least --kv-recompute-threshold tokens, and computes N - R_D; below the threshold it recomputes, N - R_P; either way D reads back only the blocks it lacks, N - R_D tokens P->D",
    "sglang_decode_radix (SGLang with the decode-side radix cache): P computes N - R_P; the transfer starts at D's matched prefix, N - R_D tokens P->D",
    "decode_local (append prefill on D, as in the PPD paper and llm-d's skip_prefill): D computes N - R_D; nothing moves",
    "no eviction, no preemption and one block size B for D, P and the transfer; bytes = tokens x KV bytes per token",
];

/// Tokens computed and moved for one transition (or summed over many).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cost {
    pub prefill_computed: u64,
    pub decode_computed: u64,
    pub moved_p_to_d: u64,
    pub moved_d_to_p: u64,
}

impl Cost {
    pub fn moved(&self) -> u64 {
        self.moved_p_to_d + self.moved_d_to_p
    }

    pub fn add(&mut self, other: &Cost) {
        self.prefill_computed += other.prefill_computed;
        self.decode_computed += other.decode_computed;
        self.moved_p_to_d += other.moved_p_to_d;
        self.moved_d_to_p += other.moved_d_to_p;
    }
}

/// The four paths' costs, in the order of [`NAMES`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Costs(pub [Cost; 4]);

impl Costs {
    pub fn add(&mut self, other: &Costs) {
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            a.add(b);
        }
    }

    pub fn named(&self) -> impl Iterator<Item = (&'static str, &Cost)> {
        NAMES.into_iter().zip(&self.0)
    }
}

/// One transition's numbers at one block size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransitionTokens {
    pub next_prompt: usize,
    pub held: usize,
    pub prompt: usize,
    pub common_prefix: usize,
    pub block_size: usize,
}

pub fn price(t: &TransitionTokens, a: &Assumptions) -> Costs {
    let whole = |n: usize| (n / t.block_size * t.block_size) as u64;
    let n = t.next_prompt as u64;
    // min(...) <= next_prompt only when the prefix is at most N long, which LCP is; the min
    // with N guards a caller passing held/prompt lengths without an LCP bound.
    let r_d = whole(t.common_prefix.min(t.held)).min(n);
    let r_p = match a.prefill_affinity {
        PrefillAffinity::Same => whole(t.common_prefix.min(t.prompt)).min(r_d),
        PrefillAffinity::None => 0,
    };
    let pull = r_d - r_p;
    let bidirectional = if pull >= a.kv_recompute_threshold as u64 && pull > 0 {
        Cost {
            prefill_computed: n - r_d,
            decode_computed: 0,
            moved_p_to_d: n - r_d,
            moved_d_to_p: pull,
        }
    } else {
        Cost {
            prefill_computed: n - r_p,
            decode_computed: 0,
            moved_p_to_d: n - r_d,
            moved_d_to_p: 0,
        }
    };
    Costs([
        Cost {
            prefill_computed: n - r_p,
            decode_computed: 0,
            moved_p_to_d: n,
            moved_d_to_p: 0,
        },
        bidirectional,
        Cost {
            prefill_computed: n - r_p,
            decode_computed: 0,
            moved_p_to_d: n - r_d,
            moved_d_to_p: 0,
        },
        Cost {
            prefill_computed: 0,
            decode_computed: n - r_d,
            moved_p_to_d: 0,
            moved_d_to_p: 0,
        },
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAME: Assumptions = Assumptions {
        prefill_affinity: PrefillAffinity::Same,
        kv_recompute_threshold: 64,
    };
    const NONE: Assumptions = Assumptions {
        prefill_affinity: PrefillAffinity::None,
        kv_recompute_threshold: 64,
    };

    fn cost(p: u64, d: u64, pd: u64, dp: u64) -> Cost {
        Cost {
            prefill_computed: p,
            decode_computed: d,
            moved_p_to_d: pd,
            moved_d_to_p: dp,
        }
    }

    #[test]
    fn seed_llama_turn_two_by_hand() {
        // Llama 3.1, seed write-up: prompt 1 is 53 tokens, held 181 (53 + 128 reply), next 196,
        // LCP 181 (no rewrite). B = 16: R_D = 176, R_P = 48.
        let t = TransitionTokens {
            next_prompt: 196,
            held: 181,
            prompt: 53,
            common_prefix: 181,
            block_size: 16,
        };
        let c = price(&t, &SAME);
        assert_eq!(c.0[0], cost(196 - 48, 0, 196, 0));
        // Pull 176 - 48 = 128 >= 64: P computes 20, moves 128 D->P and 20 back.
        assert_eq!(c.0[1], cost(20, 0, 20, 128));
        assert_eq!(c.0[2], cost(148, 0, 20, 0));
        assert_eq!(c.0[3], cost(0, 20, 0, 0));
        // Another prefill pod: nothing of its own; the pull is all of R_D.
        let c = price(&t, &NONE);
        assert_eq!(c.0[0], cost(196, 0, 196, 0));
        assert_eq!(c.0[1], cost(20, 0, 20, 176));
        assert_eq!(c.0[2], cost(196, 0, 20, 0));
    }

    #[test]
    fn short_pulls_are_recomputed() {
        // B = 64: R_D = 128, R_P = 0 (prompt 53 < one block); pull 128 >= 64.
        let t = TransitionTokens {
            next_prompt: 196,
            held: 181,
            prompt: 53,
            common_prefix: 181,
            block_size: 64,
        };
        assert_eq!(price(&t, &SAME).0[1], cost(68, 0, 68, 128));
        // Threshold 200 > 128: P recomputes everything it lacks, D still reads only its gap.
        let high = Assumptions {
            kv_recompute_threshold: 200,
            ..SAME
        };
        assert_eq!(price(&t, &high).0[1], cost(196, 0, 68, 0));
    }

    #[test]
    fn rewrite_at_the_assistant_header() {
        // Qwen3-like: the rewrite is right after prompt k (LCP 40 < prompt 45 < held 173).
        let t = TransitionTokens {
            next_prompt: 90,
            held: 173,
            prompt: 45,
            common_prefix: 40,
            block_size: 16,
        };
        let c = price(&t, &SAME);
        // R_D = R_P = 32: no pull; every path computes 58.
        assert_eq!(c.0[1], cost(58, 0, 58, 0));
        assert_eq!(c.0[3], cost(0, 58, 0, 0));
        assert_eq!(c.0[0], cost(58, 0, 90, 0));
    }
}
