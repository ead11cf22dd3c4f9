//! SGLang's OpenAI server, Jinja path (server-preprocessing.md section 2).

use serde_json::{Map, Value as Json, json};

use super::{ContentFormat, Request, ServerError, TemplateInput, shown};

const SERVER: &str = "sglang";

fn rejected(code: &'static str, detail: String) -> ServerError {
    ServerError::rejected(SERVER, code, detail)
}

/// Roles of the generic message model (lower-cased on input); `user` has its own model.
const ROLES: [&str; 6] = [
    "system",
    "assistant",
    "tool",
    "function",
    "developer",
    "latest_reminder",
];

/// A content part validated by the schema: text, or a thinking part (later dropped).
fn part(p: &Json, at: usize) -> Result<Json, ServerError> {
    let kind = p.get("type").and_then(Json::as_str).unwrap_or("");
    match kind {
        "text" => match p.get("text") {
            Some(Json::String(t)) => Ok(json!({"type": "text", "text": t})),
            other => Err(rejected(
                "content_part_without_text",
                format!("message {at}: a text part with text {}", shown(other)),
            )),
        },
        "thinking" | "reasoning" => {
            let thinking = p.get("thinking").filter(|v| !v.is_null());
            let text = p.get("text").filter(|v| !v.is_null());
            if thinking.is_some() == text.is_some() {
                return Err(rejected(
                    "content_part_without_text",
                    format!("message {at}: a {kind} part needs exactly one of thinking or text"),
                ));
            }
            Ok(json!({"type": kind}))
        }
        "image_url" | "video_url" | "audio_url" | "input_audio" | "tool_reference" => {
            Err(ServerError::Unsupported {
                server: SERVER,
                what: format!("a {kind:?} content part (message {at})"),
            })
        }
        _ => Err(rejected(
            "content_part_unknown",
            format!("message {at}: part type {kind:?}"),
        )),
    }
}

fn optional_string(
    obj: &Map<String, Json>,
    key: &str,
    at: usize,
    code: &'static str,
) -> Result<Json, ServerError> {
    match obj.get(key) {
        None | Some(Json::Null) => Ok(Json::Null),
        Some(v @ Json::String(_)) => Ok(v.clone()),
        Some(other) => Err(rejected(
            code,
            format!("message {at}: {key} {}", shown(Some(other))),
        )),
    }
}

/// `ToolCall.model_dump()` with `arguments` parsed strictly: id, index, type, function (2.3).
fn tool_call(c: &Json, at: usize) -> Result<Json, ServerError> {
    let bad = || {
        rejected(
            "tool_call_not_a_function",
            format!("message {at}: tool call {}", shown(Some(c))),
        )
    };
    let obj = c.as_object().ok_or_else(bad)?;
    let function = obj
        .get("function")
        .and_then(Json::as_object)
        .ok_or_else(bad)?;
    if obj
        .get("type")
        .is_some_and(|t| t.as_str() != Some("function"))
    {
        return Err(bad());
    }
    let name = match function.get("name") {
        None | Some(Json::Null) => Json::Null,
        Some(v @ Json::String(_)) => v.clone(),
        Some(_) => return Err(bad()),
    };
    let id = optional_string(obj, "id", at, "tool_call_without_id")?;
    let index = match obj.get("index") {
        None | Some(Json::Null) => Json::Null,
        Some(v) if v.is_i64() || v.is_u64() => v.clone(),
        Some(_) => return Err(bad()),
    };
    let arguments = match function.get("arguments") {
        None | Some(Json::Null) => Json::Null,
        Some(v @ Json::Object(_)) => v.clone(),
        Some(Json::String(text)) => match serde_json::from_str::<Json>(text) {
            Ok(v @ Json::Object(_)) => v,
            Ok(_) => {
                return Err(rejected(
                    "arguments_not_an_object",
                    format!(
                        "message {at}: arguments {} must be a JSON object",
                        shown(Some(&Json::String(text.clone())))
                    ),
                ));
            }
            Err(_) => {
                return Err(rejected(
                    "arguments_invalid_json",
                    format!(
                        "message {at}: arguments {} must be valid JSON",
                        shown(Some(&Json::String(text.clone())))
                    ),
                ));
            }
        },
        Some(other) => {
            return Err(rejected(
                "tool_call_arguments_not_a_string",
                format!("message {at}: arguments {}", shown(Some(other))),
            ));
        }
    };
    Ok(
        json!({"id": id, "index": index, "type": "function", "function": {"name": name, "arguments": arguments}}),
    )
}

/// `Tool.model_dump()`: type, function {description, name, parameters, strict[, defer_loading]},
/// defer_loading (2.6).
fn tool(t: &Json, at: usize) -> Result<Json, ServerError> {
    let bad = || {
        rejected(
            "tool_not_a_function",
            format!("tool {at}: {}", shown(Some(t))),
        )
    };
    let obj = t.as_object().ok_or_else(bad)?;
    let f = obj
        .get("function")
        .and_then(Json::as_object)
        .ok_or_else(bad)?;
    let name = f.get("name").and_then(Json::as_str).ok_or_else(bad)?;
    let description = match f.get("description") {
        None | Some(Json::Null) => Json::Null,
        Some(v @ Json::String(_)) => v.clone(),
        Some(_) => return Err(bad()),
    };
    let strict = match f.get("strict") {
        None => false,
        Some(Json::Bool(b)) => *b,
        Some(_) => return Err(bad()),
    };
    let kind = match obj.get("type") {
        None => "function".to_string(),
        Some(Json::String(s)) => s.clone(),
        Some(_) => return Err(bad()),
    };
    let defer = obj.get("defer_loading").cloned().unwrap_or(Json::Null);
    let fn_defer = f
        .get("defer_loading")
        .filter(|v| !v.is_null())
        .cloned()
        .unwrap_or_else(|| defer.clone());
    let mut function = Map::new();
    function.insert("description".into(), description);
    function.insert("name".into(), name.into());
    function.insert(
        "parameters".into(),
        f.get("parameters").cloned().unwrap_or(Json::Null),
    );
    function.insert("strict".into(), strict.into());
    if !fn_defer.is_null() {
        function.insert("defer_loading".into(), fn_defer);
    }
    Ok(json!({"type": kind, "function": Json::Object(function), "defer_loading": defer}))
}

/// One message after `model_dump()` and `process_content_for_template_format` (2.2).
fn message(m: &Json, format: ContentFormat, at: usize) -> Result<Json, ServerError> {
    let empty = Map::new();
    let obj = m.as_object().unwrap_or(&empty);
    let Some(raw_role) = obj.get("role").and_then(Json::as_str) else {
        return Err(rejected(
            "role_not_allowed",
            format!("message {at}: role {}", shown(obj.get("role"))),
        ));
    };
    let content = match obj.get("content") {
        None | Some(Json::Null) => Json::Null,
        Some(v @ (Json::String(_) | Json::Array(_))) => v.clone(),
        Some(other) => {
            return Err(rejected(
                "content_not_text_or_parts",
                format!("message {at}: content {}", shown(Some(other))),
            ));
        }
    };
    let mut d = Map::new();
    let role = if raw_role == "user" {
        // The user model keeps role and content only.
        if content.is_null() {
            return Err(rejected(
                "user_content_missing",
                format!("message {at}: a user message needs content"),
            ));
        }
        d.insert("role".into(), "user".into());
        d.insert("content".into(), content);
        "user".to_string()
    } else {
        let role = raw_role.to_lowercase();
        if !ROLES.contains(&role.as_str()) {
            return Err(rejected(
                "role_not_allowed",
                format!("message {at}: role {raw_role:?}"),
            ));
        }
        d.insert("role".into(), role.clone().into());
        d.insert("content".into(), content);
        d.insert(
            "tool_call_id".into(),
            optional_string(obj, "tool_call_id", at, "tool_call_id_not_a_string")?,
        );
        d.insert(
            "name".into(),
            optional_string(obj, "name", at, "name_not_a_string")?,
        );
        d.insert(
            "reasoning_content".into(),
            optional_string(
                obj,
                "reasoning_content",
                at,
                "reasoning_content_not_a_string",
            )?,
        );
        let calls = match obj.get("tool_calls") {
            None | Some(Json::Null) => Json::Null,
            Some(Json::Array(a)) => Json::Array(
                a.iter()
                    .map(|c| tool_call(c, at))
                    .collect::<Result<_, _>>()?,
            ),
            Some(other) => {
                return Err(rejected(
                    "tool_calls_not_a_list",
                    format!("message {at}: tool_calls {}", shown(Some(other))),
                ));
            }
        };
        d.insert("tool_calls".into(), calls);
        let tools = match obj.get("tools") {
            None | Some(Json::Null) => Json::Null,
            Some(Json::Array(a)) => Json::Array(
                a.iter()
                    .enumerate()
                    .map(|(i, t)| tool(t, i))
                    .collect::<Result<_, _>>()?,
            ),
            Some(other) => {
                return Err(rejected(
                    "tools_not_a_list",
                    format!("message {at}: tools {}", shown(Some(other))),
                ));
            }
        };
        d.insert("tools".into(), tools);
        role
    };
    if let Some(Json::Array(parts)) = d.get("content") {
        let parts = parts
            .iter()
            .map(|p| part(p, at))
            .collect::<Result<Vec<_>, _>>()?;
        if role != "assistant"
            && parts.iter().any(|p| {
                matches!(
                    p.get("type").and_then(Json::as_str),
                    Some("thinking" | "reasoning")
                )
            })
        {
            return Err(rejected(
                "thinking_part_outside_assistant",
                format!("message {at}: thinking parts are only valid in assistant messages"),
            ));
        }
        d.insert("content".into(), Json::Array(parts));
    }
    if d.get("content").is_some_and(Json::is_null) {
        d.insert("content".into(), Json::String(String::new()));
    }
    let text_parts = |d: &Map<String, Json>| -> Vec<String> {
        d.get("content")
            .and_then(Json::as_array)
            .map(|a| {
                a.iter()
                    .filter(|p| p.get("type").and_then(Json::as_str) == Some("text"))
                    .filter_map(|p| p.get("text").and_then(Json::as_str).map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut d: Map<String, Json> = if !d.get("content").is_some_and(Json::is_array) {
        d.into_iter().filter(|(_, v)| !v.is_null()).collect()
    } else if format == ContentFormat::OpenAi {
        // Content moves to the end; other parts than text are dropped.
        let parts: Vec<Json> = text_parts(&d)
            .into_iter()
            .map(|t| json!({"type": "text", "text": t}))
            .collect();
        let mut out: Map<String, Json> = d
            .into_iter()
            .filter(|(k, v)| !v.is_null() && k != "content")
            .collect();
        out.insert("content".into(), Json::Array(parts));
        out
    } else {
        let joined = text_parts(&d).join(" ");
        d.insert("content".into(), Json::String(joined));
        d.into_iter().filter(|(_, v)| !v.is_null()).collect()
    };
    // Tool results made of text parts become one string (`normalize_tool_content`).
    if role == "tool"
        && let Some(Json::Array(parts)) = d.get("content")
        && parts
            .iter()
            .all(|p| p.is_string() || p.get("type").and_then(Json::as_str) == Some("text"))
    {
        let joined = parts
            .iter()
            .map(|p| match p {
                Json::String(s) => s.clone(),
                other => other
                    .get("text")
                    .and_then(Json::as_str)
                    .unwrap_or("")
                    .to_string(),
            })
            .collect::<Vec<_>>()
            .join(" ");
        d.insert("content".into(), Json::String(joined));
    }
    Ok(Json::Object(d))
}

pub fn prepare(
    format: ContentFormat,
    req: &Request,
) -> Result<TemplateInput<'static>, ServerError> {
    let mut conv = req
        .messages
        .iter()
        .enumerate()
        .map(|(i, m)| message(m, format, i))
        .collect::<Result<Vec<_>, _>>()?;
    if !req.reply
        && let Some(last) = conv.last_mut()
        && last.get("role").and_then(Json::as_str) == Some("assistant")
        && let Some(text) = last.get("content").and_then(Json::as_str)
    {
        // Without continue_final_message a final assistant message is sent as a user turn (2.5).
        *last = json!({"role": "user", "content": text});
    }
    let tools = match req.tools {
        Some(Json::Array(a)) if !a.is_empty() => Some(Json::Array(
            a.iter()
                .enumerate()
                .map(|(i, t)| tool(t, i))
                .collect::<Result<_, _>>()?,
        )),
        Some(Json::Array(_)) | None | Some(Json::Null) => None,
        Some(other) => {
            return Err(rejected(
                "tools_not_a_list",
                format!("tools {}", shown(Some(other))),
            ));
        }
    };
    // Request kwargs win over the server's defaults (setdefault), per key (2.5).
    let mut kwargs = req.kwargs.clone();
    for (k, v) in req.server_kwargs {
        if !kwargs.contains_key(k) {
            kwargs.insert(k.clone(), v.clone());
        }
    }
    kwargs.shift_remove("add_generation_prompt");
    let retry_tools = tools.as_ref().and_then(Json::as_array).map(|a| {
        Json::Array(
            a.iter()
                .map(|t| t.get("function").cloned().unwrap_or(Json::Null))
                .collect(),
        )
    });
    Ok(TemplateInput {
        messages: conv.into(),
        tools,
        // SGLang has no `documents` (2.5).
        documents: None,
        kwargs,
        add_generation_prompt: req.add_generation_prompt || !req.reply,
        retry_tools,
    })
}
