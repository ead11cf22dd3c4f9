//! SGLang's model gateway smg 1.13.0 (`--router sglang`): over HTTP, cache-aware on the
//! request's text matched character by character; with `mode=events`, on the engine's KV
//! events at the block size it learns from them.

use serde_json::Value as Json;

use super::params::{Params, RouterSpecError};
use super::{
    Answer, Reason, Router, TransitionView, Units, by_event_match, scaled, threshold_rule,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmgMode {
    Http,
    Events,
}

/// `--router sglang` (or `smg`).
#[derive(Debug, Clone, PartialEq)]
pub struct Smg {
    pub mode: SmgMode,
    pub threshold: f64,
    pub pd: bool,
}

impl Smg {
    pub(crate) fn parse(params: &mut Params) -> Result<Self, RouterSpecError> {
        Ok(Smg {
            mode: match params.word("mode")?.as_deref() {
                None | Some("http") => SmgMode::Http,
                Some("events") => SmgMode::Events,
                Some(o) => return Err(RouterSpecError::value("mode", o, "http or events")),
            },
            threshold: params.fraction("threshold")?.unwrap_or(0.3),
            pd: params.flag("pd")?.unwrap_or(false),
        })
    }
}

impl Router for Smg {
    fn name(&self) -> &'static str {
        "sglang"
    }

    fn version(&self) -> &'static str {
        "smg 1.13.0"
    }

    fn answer(&self, t: &TransitionView) -> Answer {
        if self.mode == SmgMode::Http {
            let before = routing_text(t.request);
            let after = routing_text(t.next_request);
            let matched = common_chars(&before, &after);
            let input = after.chars().count();
            let (decision, why, rule) = threshold_rule(matched, input, self.threshold, self.pd);
            return Answer {
                units: Some(Units {
                    unit: "characters",
                    matched,
                    input,
                }),
                ..Answer::tokens(
                    self,
                    scaled(matched, input, t.next.len()),
                    decision,
                    why,
                    rule,
                )
            };
        }
        // The router learns the block size from the first stored event: always the
        // engine's.
        by_event_match(
            self,
            t,
            self.pd,
            [
                (
                    Reason::PdPrefillAlways,
                    "P/D: a prefill and a decode pod are always both chosen",
                ),
                (Reason::HighestOverlap, "the pod with the highest overlap"),
                (Reason::NoOverlap, "no overlap: least-loaded pod"),
            ],
        )
    }
}

/// The text smg routes a chat request by: every message's text, in order and without roles,
/// joined by one space (smg's `extract_text_for_routing`). A message's text is its string
/// `content`, or the `text` of its `{"type": "text"}` parts, then an assistant's
/// `reasoning_content` (or `reasoning`); empty texts add nothing, not even a space.
pub fn routing_text(messages: &[Json]) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for m in messages {
        match m.get("content") {
            Some(Json::String(s)) => parts.push(s),
            Some(Json::Array(items)) => {
                for it in items {
                    if it.get("type").and_then(Json::as_str) == Some("text")
                        && let Some(Json::String(s)) = it.get("text")
                    {
                        parts.push(s);
                    }
                }
            }
            _ => {}
        }
        if m.get("role").and_then(Json::as_str) == Some("assistant")
            && let Some(Json::String(s)) = m.get("reasoning_content").or_else(|| m.get("reasoning"))
        {
            parts.push(s);
        }
    }
    parts.retain(|p| !p.is_empty());
    parts.join(" ")
}

/// Characters (Unicode scalar values, as smg's tree counts them) `a` and `b` start with.
pub fn common_chars(a: &str, b: &str) -> usize {
    a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn contents_joined_by_a_space_without_roles() {
        let m = vec![
            json!({"role": "system", "content": "Be brief."}),
            json!({"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "image_url", "image_url": {"url": "x"}}, {"type": "text", "text": "there"}]}),
            json!({"role": "assistant", "content": "Hello", "reasoning_content": "greet"}),
            json!({"role": "assistant", "content": null, "tool_calls": []}),
            json!({"role": "user", "content": ""}),
            json!({"role": "tool", "content": "42"}),
        ];
        assert_eq!(routing_text(&m), "Be brief. Hi there Hello greet 42");
        assert_eq!(common_chars("héllo wörld", "héllo world"), 7);
    }
}
