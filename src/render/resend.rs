//! What a client sends back of an assistant reply in the next request.

use serde_json::{Map, Value as Json};

use super::server::ServerProfile;

/// How the client sends an assistant reply back in the next request (`history_modes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResendMode {
    /// The messages exactly as the conversation file gives them.
    AsGiven,
    /// Content only (a server with a reasoning parser strips the reasoning).
    Content,
    /// The generated text verbatim as content, reasoning block included.
    Raw,
    /// Content plus the reasoning field the server reads when the turn emitted reasoning:
    /// `reasoning` for vLLM (server-preprocessing.md 1.4), else `reasoning_content` and
    /// `thinking` (SGLang, llama.cpp, templates under transformers).
    ReasoningField,
}

/// Keys a conversation file records about a reply that a client does not send back.
const RECORD_KEYS: [&str; 3] = ["generated", "generated_ids", "finish_reason"];

/// A message without kvaudit's own keys ([`RECORD_KEYS`]): what a client sends.
pub fn clean(m: &Json) -> Json {
    match m {
        Json::Object(obj) => {
            let mut obj = obj.clone();
            for k in RECORD_KEYS {
                obj.shift_remove(k);
            }
            Json::Object(obj)
        }
        other => other.clone(),
    }
}

const REASONING_KEYS: [&str; 3] = ["reasoning_content", "thinking", "reasoning"];

/// The assistant message as the client sends it back: what
/// [`plan_turns`](super::plan_turns) puts in the history (and `probe` sends to a live server).
pub fn history_message(
    obj: &Map<String, Json>,
    mode: ResendMode,
    server: ServerProfile,
    generated: Option<&str>,
    reasoning: Option<&str>,
) -> Json {
    let mut m = obj.clone();
    for k in RECORD_KEYS {
        m.shift_remove(k);
    }
    match mode {
        ResendMode::AsGiven => {}
        ResendMode::Content => {
            for k in REASONING_KEYS {
                m.shift_remove(k);
            }
        }
        ResendMode::Raw => {
            for k in REASONING_KEYS {
                m.shift_remove(k);
            }
            if let Some(text) = generated {
                m.insert("content".into(), Json::String(text.to_string()));
            }
        }
        ResendMode::ReasoningField => {
            for k in REASONING_KEYS {
                m.shift_remove(k);
            }
            if let Some(r) = reasoning.filter(|r| !r.is_empty()) {
                let keys: &[&str] = match server {
                    ServerProfile::Vllm => &["reasoning"],
                    _ => &["reasoning_content", "thinking"],
                };
                for k in keys {
                    m.insert((*k).into(), Json::String(r.to_string()));
                }
            }
        }
    }
    Json::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasoning_field_is_the_one_the_server_reads() {
        let obj = serde_json::json!({"role": "assistant", "content": "A.", "reasoning": "old"});
        let obj = obj.as_object().unwrap();
        let keys = |server| {
            let m = history_message(obj, ResendMode::ReasoningField, server, None, Some("R"));
            let mut keys: Vec<String> = m
                .as_object()
                .unwrap()
                .iter()
                .filter(|(_, v)| *v == "R")
                .map(|(k, _)| k.clone())
                .collect();
            keys.sort();
            keys
        };
        // vLLM reads only `reasoning` (server-preprocessing.md 1.4).
        assert_eq!(keys(ServerProfile::Vllm), ["reasoning"]);
        assert_eq!(
            keys(ServerProfile::Sglang(Default::default())),
            ["reasoning_content", "thinking"]
        );
        assert_eq!(
            keys(ServerProfile::Transformers),
            ["reasoning_content", "thinking"]
        );
    }
}
