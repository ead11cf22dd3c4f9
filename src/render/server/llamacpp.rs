//! llama-server with `--jinja` (server-preprocessing.md section 3), the post-b7756 engine: what
//! `common_chat_msgs_parse_oaicompat` keeps of each message, the re-serialised tools, and the
//! template variables. The capability polyfills (system merged into user, tools injected into
//! the system prompt, ...) apply only to templates that lack a feature; they are not emulated,
//! and a template that needs one is one `probe` reports as rendering differently.

use serde_json::{Map, Value as Json, json};

use super::{Request, ServerError, TemplateInput, shown};

const SERVER: &str = "llamacpp";

fn rejected(code: &'static str, detail: String) -> ServerError {
    ServerError::rejected(SERVER, code, detail)
}

/// Content as the template sees it: text as given, `null` as `""` (post-b7756), typed text
/// parts joined with `"\n"` (templates that take strings).
fn content(value: Option<&Json>, at: usize) -> Result<Json, ServerError> {
    match value {
        None | Some(Json::Null) => Ok(Json::String(String::new())),
        Some(s @ Json::String(_)) => Ok(s.clone()),
        Some(Json::Array(parts)) => {
            let mut texts = Vec::with_capacity(parts.len());
            for p in parts {
                match (p.get("type").and_then(Json::as_str), p.get("text")) {
                    (Some("text"), Some(Json::String(t))) => texts.push(t.as_str()),
                    (Some(kind @ ("image_url" | "input_audio")), _) => {
                        return Err(ServerError::Unsupported {
                            server: SERVER,
                            what: format!("a {kind:?} content part (message {at})"),
                        });
                    }
                    _ => {
                        return Err(rejected(
                            "content_part_not_text",
                            format!("message {at}: part {}", shown(Some(p))),
                        ));
                    }
                }
            }
            Ok(Json::String(texts.join("\n")))
        }
        Some(other) => Err(rejected(
            "content_not_string",
            format!("message {at}: content {}", shown(Some(other))),
        )),
    }
}

/// Each call as `{"type","function":{"name","arguments"},"id"}`, `arguments` a string (an
/// object is dumped), `id` only when the client sent one.
fn tool_calls(calls: &[Json], at: usize) -> Result<Json, ServerError> {
    let mut out = Vec::with_capacity(calls.len());
    for c in calls {
        let f = c.get("function").and_then(Json::as_object).ok_or_else(|| {
            rejected(
                "tool_call_not_a_function",
                format!("message {at}: tool call {}", shown(Some(c))),
            )
        })?;
        let arguments = match f.get("arguments") {
            Some(Json::String(s)) => s.clone(),
            None | Some(Json::Null) => String::new(),
            Some(other) => other.to_string(),
        };
        let mut call = json!({
            "type": "function",
            "function": {
                "name": f.get("name").and_then(Json::as_str).unwrap_or(""),
                "arguments": arguments,
            },
        });
        if let Some(id) = c.get("id").and_then(Json::as_str) {
            call["id"] = Json::String(id.to_string());
        }
        out.push(call);
    }
    Ok(Json::Array(out))
}

fn message(m: &Json, at: usize) -> Result<Json, ServerError> {
    let obj = m.as_object().ok_or_else(|| {
        rejected(
            "message_not_an_object",
            format!("message {at}: {}", shown(Some(m))),
        )
    })?;
    let mut out = Map::new();
    let role = obj.get("role").and_then(Json::as_str).unwrap_or("");
    out.insert("role".into(), Json::String(role.to_string()));
    out.insert("content".into(), content(obj.get("content"), at)?);
    if let Some(calls) = obj.get("tool_calls").and_then(Json::as_array)
        && !calls.is_empty()
    {
        out.insert("tool_calls".into(), tool_calls(calls, at)?);
    }
    // `reasoning_content` is kept when not empty; `reasoning` (vLLM's name) is ignored.
    if let Some(Json::String(r)) = obj.get("reasoning_content")
        && !r.is_empty()
    {
        out.insert("reasoning_content".into(), Json::String(r.clone()));
    }
    for key in ["name", "tool_call_id"] {
        if let Some(Json::String(v)) = obj.get(key) {
            out.insert(key.into(), Json::String(v.clone()));
        }
    }
    Ok(Json::Object(out))
}

/// `{"type":"function","function":{"name","description","parameters"}}`, description `""`
/// when missing; no tools is `null`.
fn tools(tools: Option<&Json>) -> Option<Json> {
    let list = tools?.as_array().filter(|a| !a.is_empty())?;
    Some(Json::Array(
        list.iter()
            .map(|t| {
                let f = t.get("function").unwrap_or(t);
                json!({
                    "type": "function",
                    "function": {
                        "name": f.get("name").cloned().unwrap_or(Json::String(String::new())),
                        "description": f.get("description").cloned()
                            .filter(|d| !d.is_null())
                            .unwrap_or(Json::String(String::new())),
                        "parameters": f.get("parameters").cloned().unwrap_or(json!({})),
                    },
                })
            })
            .collect(),
    ))
}

pub fn prepare(request: &Request) -> Result<TemplateInput<'static>, ServerError> {
    let messages = request
        .messages
        .iter()
        .enumerate()
        .map(|(i, m)| message(m, i))
        .collect::<Result<Vec<_>, _>>()?;
    // `--chat-template-kwargs`, then the request's own per key; a string enable_thinking is
    // an error.
    let mut kwargs = request.server_kwargs.clone();
    kwargs.extend(request.kwargs.iter().map(|(k, v)| (k.clone(), v.clone())));
    if let Some(v @ Json::String(_)) = kwargs.get("enable_thinking") {
        return Err(rejected(
            "enable_thinking_not_bool",
            format!("chat_template_kwargs.enable_thinking is {v}"),
        ));
    }
    Ok(TemplateInput {
        messages: messages.into(),
        tools: tools(request.tools),
        documents: None,
        kwargs,
        add_generation_prompt: request.add_generation_prompt,
        retry_tools: None,
    })
}

/// `common_chat_templates_apply` strips a leading BOS text and a trailing EOS text of the
/// rendered prompt (the tokenizer adds BOS itself, when its vocabulary does).
pub fn strip_bos_eos<'a>(text: &'a str, bos: Option<&str>, eos: Option<&str>) -> &'a str {
    let mut t = text;
    if let Some(b) = bos.filter(|b| !b.is_empty()) {
        t = t.strip_prefix(b).unwrap_or(t);
    }
    if let Some(e) = eos.filter(|e| !e.is_empty()) {
        t = t.strip_suffix(e).unwrap_or(t);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prep(messages: Json) -> TemplateInput<'static> {
        let messages = messages.as_array().unwrap().clone();
        let (kwargs, server_kwargs) = (Map::new(), Map::new());
        prepare(&Request {
            messages: &messages,
            tools: None,
            documents: None,
            kwargs: &kwargs,
            server_kwargs: &server_kwargs,
            add_generation_prompt: true,
            reply: false,
        })
        .unwrap()
    }

    #[test]
    fn keeps_reasoning_content_drops_reasoning_and_unknown_keys() {
        let got = prep(json!([
            {"role": "user", "content": null},
            {"role": "assistant", "content": "a", "reasoning": "r", "thinking": "t"},
            {"role": "assistant", "content": [{"type": "text", "text": "x"}, {"type": "text", "text": "y"}],
             "reasoning_content": "kept"},
            {"role": "assistant", "content": "b", "reasoning_content": ""},
        ]));
        assert_eq!(
            got.messages,
            vec![
                json!({"role": "user", "content": ""}),
                json!({"role": "assistant", "content": "a"}),
                json!({"role": "assistant", "content": "x\ny", "reasoning_content": "kept"}),
                json!({"role": "assistant", "content": "b"}),
            ]
        );
        assert_eq!(got.tools, None);
    }

    #[test]
    fn tool_call_arguments_become_strings() {
        let got = prep(
            json!([{"role": "assistant", "content": null, "tool_calls": [
                {"type": "function", "function": {"name": "f", "arguments": {"a": 1}}},
                {"id": "c1", "type": "function", "function": {"name": "g", "arguments": "{}"}},
            ]}]),
        );
        assert_eq!(
            got.messages[0]["tool_calls"],
            json!([
                {"type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}},
                {"type": "function", "function": {"name": "g", "arguments": "{}"}, "id": "c1"},
            ])
        );
    }

    #[test]
    fn bos_and_eos_text_are_stripped_once() {
        assert_eq!(strip_bos_eos("<s>hi</s>", Some("<s>"), Some("</s>")), "hi");
        assert_eq!(strip_bos_eos("hi\n", None, Some("<|im_end|>")), "hi\n");
    }
}
