//! What one observed request says: its chat body made a conversation to render, the pod that
//! served it and the engine's usage, read from a request-log line.

use serde_json::{Map, Value as Json};

use super::monitor::Exchange;
use crate::render::Conversation;

/// The longest request-log line read (a chat request with a long context is megabytes).
pub const MAX_LINE: usize = 64 << 20;

/// Why a request-log line is not a request: counted, the rest of the log still read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    #[error("not JSON: {0}")]
    Json(String),
    #[error("no `request` object")]
    NoRequest,
    #[error("`ts` is not a number of seconds")]
    Time,
    #[error("`pod` is not a string")]
    Pod,
    #[error("the request is not a chat completion: {0}")]
    Body(String),
}

/// One request-log line.
#[derive(Debug, Clone)]
pub struct LogLine {
    /// Seconds, on the engines' clock.
    pub ts: f64,
    pub exchange: Exchange,
}

/// A chat completion body as the conversation kvaudit renders (its messages, tools and
/// `chat_template_kwargs`).
pub fn conversation_of(body: &Json, source: &str) -> Result<Conversation, LineError> {
    let Some(obj) = body.as_object() else {
        return Err(LineError::Body("not an object".into()));
    };
    let mut file = Map::new();
    match obj.get("messages") {
        Some(m @ Json::Array(_)) => file.insert("messages".into(), m.clone()),
        _ => return Err(LineError::Body("no `messages` list".into())),
    };
    if let Some(t) = obj.get("tools").filter(|t| !t.is_null()) {
        file.insert("tools".into(), t.clone());
    }
    if let Some(k) = obj.get("chat_template_kwargs").filter(|k| !k.is_null()) {
        file.insert("template_kwargs".into(), k.clone());
    }
    Conversation::from_value(Json::Object(file), source).map_err(|e| LineError::Body(e.to_string()))
}

/// The engine's `prompt_tokens` and `prompt_tokens_details.cached_tokens` of a usage object.
pub fn usage_counts(usage: Option<&Json>) -> (Option<usize>, Option<usize>) {
    let count = |v: Option<&Json>| {
        v.and_then(Json::as_u64)
            .and_then(|n| usize::try_from(n).ok())
    };
    match usage {
        Some(u) => (
            count(u.get("prompt_tokens")),
            count(
                u.get("prompt_tokens_details")
                    .and_then(|d| d.get("cached_tokens")),
            ),
        ),
        None => (None, None),
    }
}

/// One line of the request log.
pub fn parse_line(line: &str, source: &str) -> Result<LogLine, LineError> {
    let v: Json = serde_json::from_str(line).map_err(|e| LineError::Json(e.to_string()))?;
    let ts = match v.get("ts") {
        None => 0.0,
        Some(t) => t
            .as_f64()
            .filter(|t| t.is_finite())
            .ok_or(LineError::Time)?,
    };
    let pod = match v.get("pod") {
        None | Some(Json::Null) => None,
        Some(Json::String(p)) => Some(p.clone()),
        Some(_) => return Err(LineError::Pod),
    };
    let body = v
        .get("request")
        .filter(|r| r.is_object())
        .ok_or(LineError::NoRequest)?;
    let conversation = conversation_of(body, source)?;
    let (engine_prompt_tokens, engine_cached) = usage_counts(v.get("usage"));
    Ok(LogLine {
        ts,
        exchange: Exchange {
            conversation,
            pod,
            engine_cached,
            engine_prompt_tokens,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_gives_its_conversation_pod_and_usage() {
        let line = r#"{"ts": 12.5, "pod": "d1", "request": {"model": "m", "messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {"enable_thinking": false}, "stream": true}, "usage": {"prompt_tokens": 9, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 0}}}"#;
        let l = parse_line(line, "log:1").unwrap();
        assert_eq!(l.ts, 12.5);
        assert_eq!(l.exchange.pod.as_deref(), Some("d1"));
        assert_eq!(
            (l.exchange.engine_prompt_tokens, l.exchange.engine_cached),
            (Some(9), Some(0))
        );
        assert_eq!(l.exchange.conversation.messages.len(), 1);
        assert_eq!(
            l.exchange.conversation.template_kwargs["enable_thinking"],
            Json::Bool(false)
        );
    }

    #[test]
    fn what_is_not_a_request_says_why() {
        let cases = [
            ("{", "not JSON"),
            (r#"{"ts": 1}"#, "no `request` object"),
            (r#"{"ts": "x", "request": {}}"#, "`ts` is not"),
            (r#"{"pod": 3, "request": {}}"#, "`pod` is not"),
            (r#"{"request": {"prompt": "x"}}"#, "no `messages` list"),
            (
                r#"{"request": {"messages": [{"content": "x"}]}}"#,
                "no string `role`",
            ),
        ];
        for (line, want) in cases {
            let e = parse_line(line, "log:1").unwrap_err().to_string();
            assert!(e.contains(want), "{line}: {e}");
        }
    }
}
