//! The row layouts a corpus may use, and a row of each turned into kvaudit's conversation
//! format and checked for what the audit needs.

use serde_json::{Map, Value as Json};

use super::Raw;
use crate::render::Conversation;
use crate::render::conversation::{ConversationError, FIELDS, MAX_MESSAGES, entry, field};

/// How rows are laid out (`--format-in`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowFormat {
    /// Decided per file by its first row.
    Auto,
    /// kvaudit's conversation format (`{"messages": [...], "tools": ...}`) or a bare list of
    /// messages; fields other than the conversation's (`id`, `meta`, ...) are ignored.
    Openai,
    /// `{"conversations": [{"from": "human"|"gpt"|..., "value": ...}]}`.
    Sharegpt,
    /// `{"conversation": [{"role": ..., "content": ...}, ...]}` (WildChat, LMSYS-Chat-1M).
    Wildchat,
}

impl RowFormat {
    pub fn name(self) -> &'static str {
        match self {
            RowFormat::Auto => "auto",
            RowFormat::Openai => "openai",
            RowFormat::Sharegpt => "sharegpt",
            RowFormat::Wildchat => "wildchat",
        }
    }

    /// The format a row's JSON has, from its keys.
    pub(super) fn of(value: &Json) -> Option<RowFormat> {
        match value {
            Json::Array(_) => Some(RowFormat::Openai),
            Json::Object(o) if o.contains_key("messages") => Some(RowFormat::Openai),
            Json::Object(o) if o.contains_key("conversations") => Some(RowFormat::Sharegpt),
            Json::Object(o) if o.contains_key("conversation") => Some(RowFormat::Wildchat),
            _ => None,
        }
    }
}

/// Why a row that was read is not a usable conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Unusable {
    pub reason: &'static str,
    pub message: String,
}

fn unusable(reason: &'static str, message: impl Into<String>) -> Unusable {
    Unusable {
        reason,
        message: message.into(),
    }
}

impl Raw {
    /// The row as a conversation, checked the way the audit needs: at least one user turn,
    /// known roles in a usable order.
    pub fn conversation(&self) -> Result<Conversation, Unusable> {
        let text = self.text.strip_prefix('\u{feff}').unwrap_or(&self.text);
        let value: Json =
            serde_json::from_str(text).map_err(|e| unusable("not_json", e.to_string()))?;
        let value = match self.format {
            RowFormat::Openai | RowFormat::Auto => openai_row(value)?,
            RowFormat::Sharegpt => sharegpt_row(value)?,
            RowFormat::Wildchat => wildchat_row(value)?,
        };
        check_roles(&value)?;
        Conversation::from_value(value, &self.source).map_err(|e| match e {
            ConversationError::Invalid { message, .. } => unusable("not_a_conversation", message),
            ConversationError::Shape { why, .. } => unusable("not_a_conversation", why.to_string()),
            other => unusable("not_a_conversation", other.to_string()),
        })
    }
}

/// A row in kvaudit's conversation format, with the fields it does not know left out (logs
/// carry ids, sources and metadata beside the messages).
fn openai_row(value: Json) -> Result<Json, Unusable> {
    match value {
        Json::Array(_) => Ok(value),
        Json::Object(mut o) => {
            o.retain(|k, _| FIELDS.contains(&k.as_str()));
            Ok(Json::Object(o))
        }
        _ => Err(unusable(
            "not_a_conversation",
            "the row is neither an object with `messages` nor a list of messages",
        )),
    }
}

/// ShareGPT roles: `human`/`gpt` as in the original dumps, plus the `system`,
/// `function_call` and `observation` turns of LLaMA-Factory's ShareGPT layout.
fn sharegpt_row(value: Json) -> Result<Json, Unusable> {
    let (mut o, turns) = row_list(value, "conversations", "ShareGPT")?;
    let mut messages = Vec::with_capacity(turns.len() + 1);
    if let Some(Json::String(system)) = o.remove("system")
        && !system.is_empty()
    {
        messages.push(message("system", Json::String(system)));
    }
    for (i, turn) in turns.into_iter().enumerate() {
        let from = field(&turn, "from")
            .and_then(Json::as_str)
            .unwrap_or_default();
        let value = match field(&turn, "value") {
            Some(Json::String(s)) => Json::String(s.clone()),
            Some(Json::Null) | None => Json::String(String::new()),
            Some(_) => {
                return Err(unusable(
                    "not_a_conversation",
                    format!("turn {i}: `value` is not a string"),
                ));
            }
        };
        messages.push(match from {
            "human" | "user" => message("user", value),
            "gpt" | "assistant" | "chatgpt" | "bing" | "bard" | "model" => {
                message("assistant", value)
            }
            "system" => message("system", value),
            "function_call" => tool_call_message(i, &value)?,
            "observation" | "tool" | "function" => message("tool", value),
            other => {
                return Err(unusable(
                    "unknown_role",
                    format!("turn {i}: unknown ShareGPT role {other:?}"),
                ));
            }
        });
    }
    let mut out = Map::new();
    out.insert("messages".into(), Json::Array(messages));
    // LLaMA-Factory keeps the tool list as JSON text.
    match o.remove("tools") {
        Some(Json::String(s)) if !s.trim().is_empty() => {
            let tools: Json = serde_json::from_str(&s)
                .map_err(|e| unusable("not_a_conversation", format!("`tools`: {e}")))?;
            out.insert("tools".into(), wrap_tools(tools));
        }
        Some(tools @ Json::Array(_)) => {
            out.insert("tools".into(), wrap_tools(tools));
        }
        _ => {}
    }
    Ok(Json::Object(out))
}

/// A row object and its list of turns under `field`, taken out of it.
fn row_list(
    value: Json,
    field: &str,
    layout: &str,
) -> Result<(Map<String, Json>, Vec<Json>), Unusable> {
    let Json::Object(mut o) = value else {
        return Err(unusable(
            "not_a_conversation",
            format!("a {layout} row is an object"),
        ));
    };
    match o.remove(field) {
        Some(Json::Array(turns)) => Ok((o, turns)),
        _ => Err(unusable(
            "not_a_conversation",
            format!("no `{field}` list ({layout})"),
        )),
    }
}

fn message(role: &str, content: Json) -> Json {
    let mut m = Map::new();
    m.insert("role".into(), Json::String(role.into()));
    m.insert("content".into(), content);
    Json::Object(m)
}

/// A `function_call` turn: its value is `{"name": ..., "arguments": ...}` as JSON text (or a
/// list of them for parallel calls); it becomes an assistant message with OpenAI tool calls.
fn tool_call_message(turn: usize, value: &Json) -> Result<Json, Unusable> {
    let text = value.as_str().unwrap_or_default();
    let parsed: Json = serde_json::from_str(text).map_err(|e| {
        unusable(
            "not_a_conversation",
            format!("turn {turn}: a function_call value is not JSON: {e}"),
        )
    })?;
    let calls = match parsed {
        Json::Array(list) => list,
        one => vec![one],
    };
    let mut tool_calls = Vec::with_capacity(calls.len());
    for call in calls {
        let Some(name) = call.get("name").and_then(Json::as_str) else {
            return Err(unusable(
                "not_a_conversation",
                format!("turn {turn}: a function_call without a `name`"),
            ));
        };
        let mut function = Map::new();
        function.insert("name".into(), Json::String(name.into()));
        function.insert(
            "arguments".into(),
            call.get("arguments")
                .cloned()
                .unwrap_or(Json::Object(Map::new())),
        );
        let mut c = Map::new();
        c.insert("type".into(), Json::String("function".into()));
        c.insert("function".into(), Json::Object(function));
        tool_calls.push(Json::Object(c));
    }
    let mut m = Map::new();
    m.insert("role".into(), Json::String("assistant".into()));
    m.insert("content".into(), Json::Null);
    m.insert("tool_calls".into(), Json::Array(tool_calls));
    Ok(Json::Object(m))
}

/// Tool lists as OpenAI requests carry them (`{"type": "function", "function": {...}}`); bare
/// function schemas are wrapped.
fn wrap_tools(tools: Json) -> Json {
    match tools {
        Json::Array(list) => Json::Array(
            list.into_iter()
                .map(|t| {
                    if t.get("type").is_some() && t.get("function").is_some() {
                        t
                    } else {
                        let mut w = Map::new();
                        w.insert("type".into(), Json::String("function".into()));
                        w.insert("function".into(), t);
                        Json::Object(w)
                    }
                })
                .collect(),
        ),
        other => other,
    }
}

/// The message fields a chat request carries; WildChat and LMSYS rows add per-message
/// metadata (timestamps, language, moderation flags) that no template reads.
const MESSAGE_FIELDS: [&str; 6] = [
    "role",
    "content",
    "tool_calls",
    "tool_call_id",
    "name",
    "reasoning_content",
];

fn wildchat_row(value: Json) -> Result<Json, Unusable> {
    let (mut o, turns) = row_list(value, "conversation", "WildChat/LMSYS")?;
    let messages = turns
        .into_iter()
        .map(|t| match t {
            Json::Object(mut m) => {
                m.retain(|k, _| MESSAGE_FIELDS.contains(&k.as_str()));
                Json::Object(m)
            }
            other => other,
        })
        .collect();
    let mut out = Map::new();
    out.insert("messages".into(), Json::Array(messages));
    if let Some(tools @ Json::Array(_)) = o.remove("tools") {
        out.insert("tools".into(), tools);
    }
    Ok(Json::Object(out))
}

/// The order the audit needs: known roles, system messages only before the first user
/// message, and no assistant or tool message before it (a turn k -> k+1 starts at a user
/// message); a tool result follows an assistant or another tool result.
fn check_roles(value: &Json) -> Result<(), Unusable> {
    let messages = match value {
        Json::Array(m) => m,
        Json::Object(o) => match entry(o, "messages") {
            Some(Json::Array(m)) => m,
            _ => return Err(unusable("not_a_conversation", "no `messages` list")),
        },
        _ => return Err(unusable("not_a_conversation", "not a conversation")),
    };
    if messages.len() > MAX_MESSAGES {
        return Err(unusable(
            "too_large",
            format!(
                "{} messages, more than the {MAX_MESSAGES} kvaudit audits in one conversation",
                messages.len()
            ),
        ));
    }
    let mut seen_user = false;
    let mut previous = "";
    // A transition needs a request after a reply: a user or tool message after an assistant.
    let mut replied = false;
    let mut followed = false;
    for (i, m) in messages.iter().enumerate() {
        let Some(role) = field(m, "role").and_then(Json::as_str) else {
            return Err(unusable(
                "not_a_conversation",
                format!("message {i} has no string `role`"),
            ));
        };
        match role {
            "system" | "developer" if !seen_user => {}
            "user" => seen_user = true,
            "assistant" if seen_user => {}
            "tool" | "ipython" | "function"
                if matches!(previous, "assistant" | "tool" | "ipython" | "function") => {}
            "system" | "developer" | "assistant" | "tool" | "ipython" | "function" => {
                return Err(unusable(
                    "roles_out_of_order",
                    format!(
                        "message {i} ({role}) after {}",
                        if previous.is_empty() {
                            "the start"
                        } else {
                            previous
                        }
                    ),
                ));
            }
            other => {
                return Err(unusable(
                    "unknown_role",
                    format!("message {i}: unknown role {other:?}"),
                ));
            }
        }
        replied |= role == "assistant";
        followed |= replied && role != "assistant" && role != "system";
        previous = role;
    }
    if !seen_user {
        return Err(unusable("no_user_turn", "no user message"));
    }
    if !followed {
        return Err(unusable(
            "no_transition",
            "a single request: no message follows an assistant reply",
        ));
    }
    Ok(())
}
