//! SGLang's OpenAI server, Jinja path (server-preprocessing.md section 2).

use serde_json::{Map, Value as Json, json};

use super::{ContentFormat, Request, ServerError, SglangRelease, TemplateInput, lax_bool, shown};

const SERVER: &str = "sglang";

fn rejected(code: &'static str, detail: String) -> ServerError {
    ServerError::rejected(SERVER, code, detail)
}

/// Roles of the generic message model (lower-cased on input); `user` has its own model.
/// 0.5.23 also takes `root` (protocol.py `_GenericMessageRole`).
fn role_allowed(role: &str, release: SglangRelease) -> bool {
    matches!(
        role,
        "system" | "assistant" | "tool" | "function" | "developer" | "latest_reminder"
    ) || (release == SglangRelease::V0_5_23 && role == "root")
}

/// A content part validated by the schema: text, a thinking part (later dropped), or on
/// 0.5.23 a `tool_reference` (kept in the OpenAI format, dropped in the string one).
fn part(p: &Json, at: usize, release: SglangRelease) -> Result<Json, ServerError> {
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
            // 0.5.23 types both fields as strings.
            let typed = release == SglangRelease::Main
                || [thinking, text].iter().flatten().all(|v| v.is_string());
            if thinking.is_some() == text.is_some() || !typed {
                return Err(rejected(
                    "content_part_without_text",
                    format!("message {at}: a {kind} part needs exactly one of thinking or text"),
                ));
            }
            Ok(json!({"type": kind}))
        }
        "tool_reference" if release == SglangRelease::V0_5_23 => match p.get("name") {
            Some(Json::String(name)) => Ok(json!({"type": "tool_reference", "name": name})),
            other => Err(rejected(
                "tool_reference_without_name",
                format!(
                    "message {at}: a tool_reference part with name {}",
                    shown(other)
                ),
            )),
        },
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

/// pydantic's lax `int`: integers, floats without a fraction (within i64), booleans, and
/// integer strings (white space around, a sign, single underscores between digits, a fraction
/// of zeros). Integers past u64 (pydantic takes any) are refused here.
fn lax_int(v: &Json) -> Option<Json> {
    match v {
        Json::Number(n) if n.is_i64() || n.is_u64() => Some(v.clone()),
        Json::Number(n) => {
            let f = n.as_f64()?;
            (f.fract() == 0.0 && f.abs() < 9.2e18).then(|| json!(f as i64))
        }
        Json::Bool(b) => Some(json!(i64::from(*b))),
        Json::String(s) => {
            let t = s.trim();
            let (negative, t) = match t.as_bytes().first() {
                Some(b'-') => (true, &t[1..]),
                Some(b'+') => (false, &t[1..]),
                _ => (false, t),
            };
            let (whole, fraction) = t.split_once('.').unwrap_or((t, "0"));
            let bytes = whole.as_bytes();
            let grouped = !whole.is_empty()
                && bytes.first().is_some_and(u8::is_ascii_digit)
                && bytes.last().is_some_and(u8::is_ascii_digit)
                && bytes.iter().all(|c| c.is_ascii_digit() || *c == b'_')
                && !whole.contains("__");
            if !grouped || fraction.is_empty() || !fraction.bytes().all(|c| c == b'0') {
                return None;
            }
            let digits = whole.replace('_', "");
            if negative {
                format!("-{digits}").parse::<i64>().ok().map(|i| json!(i))
            } else {
                digits.parse::<u64>().ok().map(|i| json!(i))
            }
        }
        _ => None,
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

/// `ToolCall.model_dump()`: id, index, type, function (2.3). `arguments` text is parsed
/// strictly where `parse` says (main: every message; 0.5.23: assistant messages only, in
/// `normalize_assistant_tool_call_arguments`), else kept as sent.
fn tool_call(
    c: &Json,
    at: usize,
    parse: bool,
    release: SglangRelease,
) -> Result<Json, ServerError> {
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
        Some(v) if release == SglangRelease::V0_5_23 => lax_int(v).ok_or_else(bad)?,
        Some(_) => return Err(bad()),
    };
    let arguments = match function.get("arguments") {
        None | Some(Json::Null) => Json::Null,
        Some(v @ Json::Object(_)) => v.clone(),
        Some(v @ Json::String(_)) if !parse => v.clone(),
        Some(Json::String(text)) => match serde_json::from_str::<Json>(text) {
            Ok(v @ Json::Object(_)) => v,
            parsed => {
                let (code, must) = match parsed {
                    Ok(_) => ("arguments_not_an_object", "be a JSON object"),
                    Err(_) => ("arguments_invalid_json", "be valid JSON"),
                };
                return Err(rejected(
                    code,
                    format!(
                        "message {at}: arguments {} must {must}",
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

/// `Tool.model_dump()` as `release` writes it: type, function, defer_loading (the tool's,
/// `null` when not sent). Both releases take the same fields; they write `function`
/// differently.
fn tool(t: &Json, at: usize, release: SglangRelease) -> Result<Json, ServerError> {
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
    let kind = match obj.get("type") {
        None => "function".to_string(),
        Some(Json::String(s)) => s.clone(),
        Some(_) => return Err(bad()),
    };
    let parameters = f.get("parameters").cloned().unwrap_or(Json::Null);
    let (function, tool_defer) = match release {
        SglangRelease::V0_5_23 => function_0_5_23(obj, f, name, description, parameters),
        SglangRelease::Main => function_main(obj, f, name, description, parameters),
    }
    .ok_or_else(bad)?;
    Ok(json!({"type": kind, "function": Json::Object(function), "defer_loading": tool_defer}))
}

/// 0.5.23's function: the keys the client sent that are its fields, in the client's order,
/// then the fields not sent (description and parameters as `null`); `strict` and
/// `defer_loading` (pydantic's lax booleans) only when set, the tool's `defer_loading` filling
/// the function's (protocol.py `Function._capture_key_order`, `_serialize`;
/// `Tool._propagate_defer_loading`). With the tool's `defer_loading`.
fn function_0_5_23(
    obj: &Map<String, Json>,
    f: &Map<String, Json>,
    name: &str,
    description: Json,
    parameters: Json,
) -> Option<(Map<String, Json>, Json)> {
    let optional_bool = |map: &Map<String, Json>, key: &str| match map.get(key) {
        None | Some(Json::Null) => Some(Json::Null),
        Some(v) => lax_bool(v),
    };
    let strict = optional_bool(f, "strict")?;
    let tool_defer = optional_bool(obj, "defer_loading")?;
    let mut defer = optional_bool(f, "defer_loading")?;
    if defer.is_null() {
        defer = tool_defer.clone();
    }
    // The fields in declaration order, the unset optional ones left out.
    let mut fields: Vec<(&str, Json)> = vec![
        ("description", description),
        ("name", name.into()),
        ("parameters", parameters),
    ];
    if !strict.is_null() {
        fields.push(("strict", strict));
    }
    if !defer.is_null() {
        fields.push(("defer_loading", defer));
    }
    let mut function = Map::new();
    for key in f.keys() {
        if let Some((k, v)) = fields.iter().find(|(k, _)| k == key) {
            function.insert((*k).into(), v.clone());
        }
    }
    for (k, v) in fields {
        if !function.contains_key(k) {
            function.insert(k.into(), v);
        }
    }
    Some((function, tool_defer))
}

/// Main's function (chat_input): description, name, parameters, strict (false when not sent),
/// then defer_loading when set (the tool's filling the function's) (2.6). With the tool's
/// `defer_loading` as sent.
fn function_main(
    obj: &Map<String, Json>,
    f: &Map<String, Json>,
    name: &str,
    description: Json,
    parameters: Json,
) -> Option<(Map<String, Json>, Json)> {
    let strict = match f.get("strict") {
        None => false,
        Some(Json::Bool(b)) => *b,
        Some(_) => return None,
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
    function.insert("parameters".into(), parameters);
    function.insert("strict".into(), strict.into());
    if !fn_defer.is_null() {
        function.insert("defer_loading".into(), fn_defer);
    }
    Some((function, defer))
}

/// One message after `model_dump()` and `process_content_for_template_format` (2.2).
fn message(
    m: &Json,
    format: ContentFormat,
    at: usize,
    release: SglangRelease,
) -> Result<Json, ServerError> {
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
        if !role_allowed(&role, release) {
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
        if release == SglangRelease::V0_5_23 {
            let phase = match obj.get("phase") {
                None | Some(Json::Null) => Json::Null,
                Some(v) if matches!(v.as_str(), Some("commentary" | "final_answer")) => v.clone(),
                Some(other) => {
                    return Err(rejected(
                        "phase_not_allowed",
                        format!("message {at}: phase {}", shown(Some(other))),
                    ));
                }
            };
            d.insert("phase".into(), phase);
        }
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
                    .map(|c| {
                        let parse = release == SglangRelease::Main || role == "assistant";
                        tool_call(c, at, parse, release)
                    })
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
                    .map(|(i, t)| tool(t, i, release))
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
        if release == SglangRelease::V0_5_23 {
            let prefix = match obj.get("prefix") {
                None | Some(Json::Null) => Json::Null,
                Some(v) => lax_bool(v).ok_or_else(|| {
                    rejected(
                        "prefix_not_a_bool",
                        format!("message {at}: prefix {}", shown(Some(v))),
                    )
                })?,
            };
            d.insert("prefix".into(), prefix);
        }
        role
    };
    if let Some(Json::Array(parts)) = d.get("content") {
        let parts = parts
            .iter()
            .map(|p| part(p, at, release))
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
        // Content moves to the end; text parts and (0.5.23) tool references stay, in order.
        let parts: Vec<Json> = d
            .get("content")
            .and_then(Json::as_array)
            .map(|a| {
                a.iter()
                    .filter(|p| {
                        matches!(
                            p.get("type").and_then(Json::as_str),
                            Some("text" | "tool_reference")
                        )
                    })
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
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

/// Template kwargs 0.5.23's render call (transformers 5.19's `apply_chat_template` under
/// `tokenize=False, add_generation_prompt=True, tools=…, return_dict=False`) refuses: it names
/// them itself, so a TypeError (answered 400).
const RESERVED_KWARGS: [&str; 6] = [
    "add_generation_prompt",
    "tools",
    "tokenize",
    "return_dict",
    "conversation",
    "messages",
];

/// Kwargs transformers takes as its own arguments: never template variables, and a ValueError
/// (400) when truthy for the first two.
const CONSUMED_KWARGS: [&str; 7] = [
    "continue_final_message",
    "return_assistant_tokens_mask",
    "padding",
    "truncation",
    "max_length",
    "return_tensors",
    "tokenizer_kwargs",
];

/// Python's truth of a JSON value.
fn truthy(v: &Json) -> bool {
    match v {
        Json::Null => false,
        Json::Bool(b) => *b,
        Json::Number(n) => n.as_f64() != Some(0.0),
        Json::String(s) => !s.is_empty(),
        Json::Array(a) => !a.is_empty(),
        Json::Object(o) => !o.is_empty(),
    }
}

/// The template variables 0.5.23's chat path passes, and its `documents`: the request's
/// `reasoning_effort` is taken out first (and set back unless the server's defaults give one),
/// the server's defaults fill the keys the request left out, and what transformers takes as
/// its own arguments is refused or left out (serving_chat.py `_process_messages`,
/// `_apply_jinja_template`).
fn kwargs_0_5_23(req: &Request) -> Result<(Map<String, Json>, Option<Json>), ServerError> {
    if req.kwargs.contains_key("chat_template") {
        return Err(rejected(
            "template_kwarg_reserved",
            "chat_template_kwargs \"chat_template\" needs a server started with \
             --trust-request-chat-template"
                .into(),
        ));
    }
    let mut kwargs = req.kwargs.clone();
    let effort = kwargs
        .shift_remove("reasoning_effort")
        .filter(|v| !v.is_null());
    for (k, v) in req.server_kwargs {
        if !kwargs.contains_key(k) {
            kwargs.insert(k.clone(), v.clone());
        }
    }
    if let Some(e) = effort
        && !kwargs.contains_key("reasoning_effort")
    {
        kwargs.insert("reasoning_effort".into(), e);
    }
    let refused = RESERVED_KWARGS
        .iter()
        .find(|k| kwargs.contains_key(**k))
        .or_else(|| {
            CONSUMED_KWARGS[..2]
                .iter()
                .find(|k| kwargs.get(**k).is_some_and(truthy))
        });
    if let Some(key) = refused {
        return Err(rejected(
            "template_kwarg_reserved",
            format!("chat_template_kwargs {key:?} is an argument of the render call SGLang makes"),
        ));
    }
    if kwargs.contains_key("chat_template") {
        return Err(ServerError::Unsupported {
            server: SERVER,
            what: "a default chat_template kwarg (it replaces the template)".into(),
        });
    }
    for k in CONSUMED_KWARGS {
        kwargs.shift_remove(k);
    }
    let documents = kwargs.shift_remove("documents").filter(|d| !d.is_null());
    Ok((kwargs, documents))
}

/// 0.5.23's `_validate_request` on the effective tools (the request's and those of root,
/// system and developer messages): names unique when messages carry tools, and each
/// `parameters` rewritten to standard types (what the template then receives) and checked
/// against the JSON Schema metaschema.
fn check_tools_0_5_23(conv: &mut [Json], tools: Option<&mut Json>) -> Result<(), ServerError> {
    let mut effective: Vec<&mut Json> = Vec::new();
    if let Some(Json::Array(list)) = tools {
        effective.extend(list.iter_mut());
    }
    let mut has_message_tools = false;
    for m in conv.iter_mut() {
        let hosts = matches!(
            m.get("role").and_then(Json::as_str),
            Some("root" | "system" | "developer")
        );
        if let (true, Some(Json::Array(list))) = (hosts, m.get_mut("tools")) {
            has_message_tools |= !list.is_empty();
            effective.extend(list.iter_mut());
        }
    }
    if has_message_tools {
        let names: Vec<&Json> = effective
            .iter()
            .map(|t| t.pointer("/function/name").unwrap_or(&Json::Null))
            .collect();
        if names
            .iter()
            .enumerate()
            .any(|(i, n)| names[..i].contains(n))
        {
            return Err(rejected(
                "tool_names_not_unique",
                "tool names must be unique across request and message tools".into(),
            ));
        }
    }
    for (i, t) in effective.into_iter().enumerate() {
        let Some(params) = t
            .pointer_mut("/function/parameters")
            .filter(|p| !p.is_null())
        else {
            continue;
        };
        super::sglang_schema::normalize(params);
        super::sglang_schema::check(params, "parameters").map_err(|why| {
            rejected(
                "tool_parameters_invalid",
                format!("tool {i} has an invalid parameters schema: {why}"),
            )
        })?;
    }
    Ok(())
}

pub fn prepare(
    release: SglangRelease,
    format: ContentFormat,
    req: &Request,
) -> Result<TemplateInput<'static>, ServerError> {
    let mut conv = req
        .messages
        .iter()
        .enumerate()
        .map(|(i, m)| message(m, format, i, release))
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
                .map(|(i, t)| tool(t, i, release))
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
    let mut tools = tools;
    let (kwargs, documents) = if release == SglangRelease::V0_5_23 {
        let kwargs = kwargs_0_5_23(req)?;
        check_tools_0_5_23(&mut conv, tools.as_mut())?;
        kwargs
    } else {
        // Request kwargs win over the server's defaults (setdefault), per key (2.5).
        let mut kwargs = req.kwargs.clone();
        for (k, v) in req.server_kwargs {
            if !kwargs.contains_key(k) {
                kwargs.insert(k.clone(), v.clone());
            }
        }
        kwargs.shift_remove("add_generation_prompt");
        (kwargs, None)
    };
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
        // SGLang main has no `documents` (2.5); 0.5.23 hands transformers the kwarg.
        documents,
        kwargs,
        add_generation_prompt: req.add_generation_prompt || !req.reply,
        retry_tools,
    })
}
