//! vLLM's OpenAI server, HF renderer (server-preprocessing.md section 1).

use serde_json::{Map, Value as Json, json};

use super::{ContentFormat, Request, ServerError, TemplateInput, lax_bool, shown};

const SERVER: &str = "vllm";

fn rejected(code: &'static str, detail: String) -> ServerError {
    ServerError::rejected(SERVER, code, detail)
}

/// Content-part types read as text, and the field holding the text (`MM_PARSER_MAP`).
fn text_field(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "text" | "input_text" | "output_text" => "text",
        "refusal" => "refusal",
        "thinking" => "thinking",
        _ => return None,
    })
}

fn media_modality(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "image_url" | "input_image" | "image_pil" | "image_embeds" => "image",
        "audio_url" | "input_audio" | "audio_embeds" => "audio",
        "video_url" | "video_embeds" => "video",
        _ => return None,
    })
}

/// Keys of the content-part schemas; any other key of a part is copied onto the normalised
/// part in "openai" format (`_collect_extra_fields`).
const PART_FIELDS: [&str; 18] = [
    "type",
    "text",
    "refusal",
    "thinking",
    "closed",
    "uuid",
    "name",
    "image_url",
    "input_image",
    "image_pil",
    "image_embeds",
    "audio_url",
    "input_audio",
    "audio_embeds",
    "video_url",
    "video_embeds",
    "data",
    "file",
];

const BILLING_HEADER: &str = "x-anthropic-billing-header";

/// Claude Code's per-request attribution line is dropped from system text parts (1.2).
fn strip_billing_header(parts: Vec<Json>) -> Vec<Json> {
    let mut out = Vec::with_capacity(parts.len());
    for part in parts {
        let text = match &part {
            Json::String(s) => Some(s.as_str()),
            Json::Object(o) if o.get("type").and_then(Json::as_str) == Some("text") => {
                o.get("text").and_then(Json::as_str)
            }
            _ => None,
        };
        let Some(text) = text.filter(|t| t.starts_with(BILLING_HEADER)) else {
            out.push(part);
            continue;
        };
        let rest = text.split_once('\n').map_or("", |(_, r)| r).to_string();
        if rest.is_empty() {
            continue;
        }
        out.push(match part {
            Json::Object(mut o) => {
                o.insert("text".into(), Json::String(rest));
                Json::Object(o)
            }
            _ => Json::String(rest),
        });
    }
    out
}

/// Message content as the template sees it (1.2): null → no parts, a string → one text part;
/// then text joined with "\n" ("string") or normalised parts ("openai").
fn content(
    role: &str,
    value: Option<&Json>,
    format: ContentFormat,
    at: usize,
) -> Result<Json, ServerError> {
    let mut parts: Vec<Json> = match value {
        None | Some(Json::Null) => Vec::new(),
        Some(Json::String(s)) => vec![json!({"type": "text", "text": s})],
        Some(Json::Array(a)) => a.clone(),
        Some(other) => {
            return Err(rejected(
                "content_not_text_or_parts",
                format!("message {at}: content {}", shown(Some(other))),
            ));
        }
    };
    if role == "system" {
        parts = strip_billing_header(parts);
    }
    let openai = format == ContentFormat::OpenAi;
    let mut texts: Vec<String> = Vec::new();
    let mut list: Vec<Json> = Vec::new();
    for part in parts {
        let obj = match part {
            Json::String(s) => {
                if openai {
                    list.push(json!({"type": "text", "text": s}));
                } else if !s.is_empty() {
                    texts.push(s);
                }
                continue;
            }
            Json::Object(o) => o,
            other => {
                return Err(rejected(
                    "content_part_not_an_object",
                    format!("message {at}: part {}", shown(Some(&other))),
                ));
            }
        };
        let kind = obj.get("type").and_then(Json::as_str).unwrap_or("");
        let extras = || {
            obj.iter()
                .filter(|(k, _)| !PART_FIELDS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
        };
        if let Some(field) = text_field(kind) {
            let text = match obj.get(field) {
                None | Some(Json::Null) if matches!(kind, "text" | "refusal") => continue,
                Some(Json::String(s)) => s.clone(),
                other => {
                    return Err(rejected(
                        "content_part_without_text",
                        format!("message {at}: a {kind} part with {field} {}", shown(other)),
                    ));
                }
            };
            if openai {
                let mut p = Map::new();
                p.insert("type".into(), "text".into());
                p.insert("text".into(), Json::String(text));
                p.extend(extras());
                list.push(Json::Object(p));
            } else if !text.is_empty() {
                texts.push(text);
            }
        } else if let (Some(modality), true) = (media_modality(kind), openai) {
            let mut p = Map::new();
            p.insert("type".into(), modality.into());
            p.extend(extras());
            list.push(Json::Object(p));
        } else if media_modality(kind).is_some()
            || matches!(kind, "tool_reference" | "prompt_embeds")
        {
            // In "string" format vLLM puts the model's own placeholder (its processor's) in
            // front of the text; kvaudit has no processor.
            return Err(ServerError::Unsupported {
                server: SERVER,
                what: format!("a {kind:?} content part (message {at})"),
            });
        } else {
            return Err(rejected(
                "content_part_unknown",
                format!("message {at}: part type {kind:?}"),
            ));
        }
    }
    Ok(if openai {
        Json::Array(list)
    } else {
        Json::String(texts.join("\n"))
    })
}

/// One tool call validated as openai-python's TypedDict: `id`, `function.name` and
/// `function.arguments` (a string) are required, unknown keys are dropped and the keys come
/// in the declared order (1.3). A dict `arguments` fails that schema: vLLM's own coercion of
/// dicts only serves callers that skip validation (offline `LLM.chat`).
fn tool_call(item: &Json, at: usize) -> Result<Json, ServerError> {
    let Some(obj) = item.as_object() else {
        return Err(rejected(
            "tool_call_not_an_object",
            format!("message {at}: tool call {}", shown(Some(item))),
        ));
    };
    let Some(id) = obj.get("id").and_then(Json::as_str) else {
        return Err(rejected(
            "tool_call_without_id",
            format!("message {at}: a tool call has id {}", shown(obj.get("id"))),
        ));
    };
    let function = obj.get("function").and_then(Json::as_object);
    let name = function.and_then(|f| f.get("name")).and_then(Json::as_str);
    let (Some(function), Some(name), Some("function")) =
        (function, name, obj.get("type").and_then(Json::as_str))
    else {
        return Err(rejected(
            "tool_call_not_a_function",
            format!("message {at}: tool call {}", shown(Some(item))),
        ));
    };
    let Some(arguments) = function.get("arguments").and_then(Json::as_str) else {
        return Err(rejected(
            "tool_call_arguments_not_a_string",
            format!(
                "message {at}: tool call {name:?} has arguments {}",
                shown(function.get("arguments"))
            ),
        ));
    };
    Ok(json!({"id": id, "function": {"arguments": arguments, "name": name}, "type": "function"}))
}

/// `arguments` for the template (`_postprocess_messages`): a JSON object, or `{}` for an empty,
/// invalid or non-object string.
fn parsed_arguments(text: &str) -> Json {
    if text.is_empty() {
        return json!({});
    }
    match serde_json::from_str::<Json>(text) {
        Ok(v @ Json::Object(_)) => v,
        _ => json!({}),
    }
}

fn message(m: &Json, format: ContentFormat, at: usize) -> Result<Json, ServerError> {
    let empty = Map::new();
    let obj = m.as_object().unwrap_or(&empty);
    let Some(role) = obj.get("role").and_then(Json::as_str) else {
        return Err(rejected(
            "role_not_a_string",
            format!("message {at}: role {}", shown(obj.get("role"))),
        ));
    };
    let mut out = Map::new();
    out.insert("role".into(), role.into());
    out.insert(
        "content".into(),
        content(role, obj.get("content"), format, at)?,
    );
    match role {
        "assistant" => {
            match obj.get("tool_calls") {
                None | Some(Json::Null) => {}
                Some(Json::Array(calls)) => {
                    let calls = calls
                        .iter()
                        .map(|c| tool_call(c, at))
                        .collect::<Result<Vec<_>, _>>()?;
                    out.insert("tool_calls".into(), Json::Array(calls));
                }
                Some(other) => {
                    return Err(rejected(
                        "tool_calls_not_a_list",
                        format!("message {at}: tool_calls {}", shown(Some(other))),
                    ));
                }
            }
            // Only `reasoning` is read, and it reaches the template under both names (1.4);
            // `reasoning_content` is not a declared field and validation drops it.
            match obj.get("reasoning") {
                None | Some(Json::Null) => {}
                Some(Json::String(r)) => {
                    out.insert("reasoning".into(), r.clone().into());
                    out.insert("reasoning_content".into(), r.clone().into());
                }
                Some(other) => {
                    return Err(rejected(
                        "reasoning_not_a_string",
                        format!("message {at}: reasoning {}", shown(Some(other))),
                    ));
                }
            }
        }
        "tool" => {
            if let Some(id) = obj.get("tool_call_id") {
                out.insert("tool_call_id".into(), id.clone());
            }
            // Text-only part lists become one string even in "openai" format.
            if let Some(Json::Array(parts)) = out.get("content") {
                let text_only = !parts
                    .iter()
                    .any(|p| p.is_object() && p.get("type").and_then(Json::as_str) != Some("text"));
                if text_only {
                    let texts: Vec<&str> = parts
                        .iter()
                        .filter(|p| p.get("type").and_then(Json::as_str) == Some("text"))
                        .map(|p| p.get("text").and_then(Json::as_str).unwrap_or(""))
                        .collect();
                    let joined = texts.join("\n");
                    out.insert("content".into(), Json::String(joined));
                }
            }
        }
        _ => {}
    }
    for key in ["name", "task"] {
        if let Some(Json::String(v)) = obj.get(key) {
            out.insert(key.into(), v.clone().into());
        }
    }
    if role == "developer" {
        out.insert(
            "tools".into(),
            obj.get("tools").cloned().unwrap_or(Json::Null),
        );
    }
    Ok(Json::Object(out))
}

/// `ChatCompletionToolsParam.model_dump()` (vLLM 0.32: `chat_completion/protocol.py` and
/// `FunctionDefinition` in `generate/base/protocol.py`). The models accept unknown keys but
/// their serializers keep only their own fields, so the template sees `type`, then `function`
/// with `name`, `description` and `parameters` (null when missing), `strict` and
/// `defer_loading` only when not null, then the tool's `defer_loading` when not null; a
/// tool-level `defer_loading` is also copied into a function that has none. A field of the
/// wrong type fails validation (400).
fn tool(t: &Json, at: usize) -> Result<Json, ServerError> {
    let obj = t.as_object();
    let function = obj
        .and_then(|o| o.get("function"))
        .and_then(Json::as_object);
    let kind_ok = obj
        .and_then(|o| o.get("type"))
        .is_none_or(|k| k.as_str() == Some("function"));
    let (Some(obj), Some(function), true) = (obj, function, kind_ok) else {
        return Err(rejected(
            "tool_not_a_function",
            format!("tool {at}: {}", shown(Some(t))),
        ));
    };
    let Some(name) = function.get("name").and_then(Json::as_str) else {
        return Err(rejected(
            "tool_not_a_function",
            format!("tool {at}: {}", shown(Some(t))),
        ));
    };
    let field =
        |map: &Map<String, Json>, key: &str, ok: fn(&Json) -> Option<Json>| match map.get(key) {
            None | Some(Json::Null) => Ok(Json::Null),
            Some(v) => ok(v).ok_or_else(|| {
                rejected(
                    "tool_field_invalid",
                    format!("tool {at}: {key} {}", shown(Some(v))),
                )
            }),
        };
    let string = |v: &Json| v.is_string().then(|| v.clone());
    let object = |v: &Json| v.is_object().then(|| v.clone());
    let mut f = Map::new();
    f.insert("name".into(), name.into());
    f.insert(
        "description".into(),
        field(function, "description", string)?,
    );
    f.insert("parameters".into(), field(function, "parameters", object)?);
    let strict = field(function, "strict", lax_bool)?;
    let tool_defer = field(obj, "defer_loading", lax_bool)?;
    let mut defer = field(function, "defer_loading", lax_bool)?;
    if defer.is_null() {
        defer = tool_defer.clone();
    }
    if !strict.is_null() {
        f.insert("strict".into(), strict);
    }
    if !defer.is_null() {
        f.insert("defer_loading".into(), defer);
    }
    let mut out = Map::new();
    out.insert("type".into(), "function".into());
    out.insert("function".into(), Json::Object(f));
    if !tool_defer.is_null() {
        out.insert("defer_loading".into(), tool_defer);
    }
    Ok(Json::Object(out))
}

/// A developer message becomes system when the template never names the role, and all system
/// messages merge into one at index 0 when one is not first or there are several (1.5).
fn convert_developer(conv: Vec<Json>, template: &str) -> Vec<Json> {
    let role = |m: &Json| m.get("role").and_then(Json::as_str).map(str::to_string);
    if !conv.iter().any(|m| role(m).as_deref() == Some("developer"))
        || template.contains("\"developer\"")
        || template.contains("'developer'")
    {
        return conv;
    }
    let conv: Vec<Json> = conv
        .into_iter()
        .map(|mut m| {
            if role(&m).as_deref() == Some("developer")
                && let Some(o) = m.as_object_mut()
            {
                o.insert("role".into(), "system".into());
                o.shift_remove("tools");
            }
            m
        })
        .collect();
    let mut systems: Vec<String> = Vec::new();
    let mut rest = Vec::new();
    let mut merge = false;
    for (i, m) in conv.iter().enumerate() {
        if role(m).as_deref() != Some("system") {
            rest.push(m.clone());
            continue;
        }
        merge |= i > 0 || !systems.is_empty();
        let text = match m.get("content") {
            Some(Json::Array(parts)) => parts
                .iter()
                .filter_map(|p| match p {
                    Json::String(s) => Some(s.clone()),
                    Json::Object(o) => o.get("text").map(|t| match t {
                        Json::String(s) => s.clone(),
                        other => other.to_string(),
                    }),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("\n"),
            Some(Json::String(s)) => s.clone(),
            _ => String::new(),
        };
        if !text.is_empty() {
            systems.push(text);
        }
    }
    if !merge {
        return conv;
    }
    let mut out = vec![json!({"role": "system", "content": systems.join("\n\n")})];
    out.extend(rest);
    out
}

pub fn prepare(
    template: &str,
    format: ContentFormat,
    req: &Request,
) -> Result<TemplateInput<'static>, ServerError> {
    let mut conv = req
        .messages
        .iter()
        .enumerate()
        .map(|(i, m)| message(m, format, i))
        .collect::<Result<Vec<_>, _>>()?;
    for m in &mut conv {
        if m.get("role").and_then(Json::as_str) != Some("assistant") {
            continue;
        }
        let Some(obj) = m.as_object_mut() else {
            continue;
        };
        match obj.get_mut("tool_calls") {
            Some(Json::Array(calls)) if calls.is_empty() => {
                obj.shift_remove("tool_calls");
            }
            Some(Json::Array(calls)) => {
                for call in calls {
                    if let Some(f) = call.get_mut("function").and_then(Json::as_object_mut) {
                        let text = f.get("arguments").and_then(Json::as_str).unwrap_or("");
                        let parsed = parsed_arguments(text);
                        f.insert("arguments".into(), parsed);
                    }
                }
            }
            _ => {}
        }
    }
    let conv = convert_developer(conv, template);
    for key in ["chat_template", "tokenize"] {
        if req.kwargs.contains_key(key) {
            return Err(rejected(
                "kwarg_not_allowed",
                format!("chat_template_kwargs may not set {key:?}"),
            ));
        }
    }
    // Server defaults, then the request's tools, then its kwargs (ignoring null and "auto"),
    // then the first-class fields (1.6).
    let mut kwargs = req.server_kwargs.clone();
    if let Some(tools) = req.tools {
        let list = match tools {
            Json::Array(a) => a
                .iter()
                .enumerate()
                .map(|(i, t)| tool(t, i))
                .collect::<Result<Vec<_>, _>>()?,
            other => {
                return Err(rejected(
                    "tools_not_a_list",
                    format!("tools {}", shown(Some(other))),
                ));
            }
        };
        kwargs.insert("tools".into(), Json::Array(list));
    }
    for (k, v) in req.kwargs {
        if v.is_null() || v.as_str() == Some("auto") {
            continue;
        }
        kwargs.insert(k.clone(), v.clone());
    }
    kwargs.shift_remove("add_generation_prompt");
    kwargs.shift_remove("continue_final_message");
    let tools = kwargs.shift_remove("tools").filter(|t| !t.is_null());
    let documents = match req.documents {
        Some(d) => Some(d.clone()),
        None => kwargs.shift_remove("documents").filter(|d| !d.is_null()),
    };
    kwargs.shift_remove("documents");
    Ok(TemplateInput {
        messages: conv.into(),
        tools,
        documents,
        kwargs,
        add_generation_prompt: req.add_generation_prompt,
        retry_tools: None,
    })
}
