//! Chat rendering exactly as transformers' `apply_chat_template(..., tokenize=False)`.

mod bounded;
pub mod conversation;
mod env;
mod error;
mod filters;
mod guard;
mod limits;
mod markup;
mod namespace;
mod pyjson;
mod pymethods;
pub mod reply;
mod reply_format;
pub mod resend;
pub mod server;
mod source;
mod switches;

pub use conversation::{
    Clock, Conversation, ConversationError, entry, field, last_reply, parse_time,
};
pub use env::{TemplateEngine, strftime};
pub use error::RenderError;
#[cfg(any(test, feature = "test-hooks"))]
pub use limits::set_output_limit;
pub use limits::{DEFAULT_FUEL, MAX_OUTPUT, max_output};
pub use namespace::python_float_repr;
pub use pyjson::{DumpOptions, dump as dump_json};
pub use reply::{Turn, TurnPlan, plan_turns};
pub use reply_format::ReplyFormat;
pub use resend::ResendMode;
pub use server::{ServerError, ServerProfile};
pub use switches::{DateSource, SWITCH_WORDS, Switch, inspect as inspect_switches};

use chrono::NaiveDateTime;
use minijinja::Value;
use minijinja::value::Serde;
use serde_json::{Map, Value as Json};

/// What one render call passes to the template besides the special tokens.
#[derive(Debug, Clone, Copy)]
pub struct RenderInput<'a> {
    pub messages: &'a [Json],
    /// `messages`, each already converted to a template value (what the context would
    /// convert it to), when the caller keeps them.
    pub message_values: Option<&'a [Value]>,
    pub tools: Option<&'a Json>,
    pub documents: Option<&'a Json>,
    pub kwargs: &'a Map<String, Json>,
    pub add_generation_prompt: bool,
    pub now: NaiveDateTime,
}

/// The template's variables: each name once, with the value the last of special tokens,
/// kwargs, and the fixed four gives it. Looked up by name rather than built into a map for
/// each render: a conversation's history is rendered once per prompt, and a map of the
/// special tokens, the kwargs and the history cost a hashed insert per name and a copy of
/// every value for each of them.
#[derive(Debug)]
struct Variables {
    /// The values of [`FIXED`], in its order.
    fixed: [Value; 4],
    /// The kwargs, less the fixed names.
    kwargs: Vec<(String, Value)>,
    /// The renderer's special tokens, less the fixed names (kwargs over them at lookup).
    special: std::sync::Arc<[(String, Value)]>,
}

const FIXED: [&str; 4] = ["messages", "tools", "documents", "add_generation_prompt"];

/// The value named `key` in `list`: the lookup of [`Variables`] and [`Message`], whose lists
/// are a handful of names each, so a scan beats hashing the name.
fn named<'v>(list: &'v [(String, Value)], key: &str) -> Option<&'v Value> {
    list.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

/// `map`'s entries with their values as template values, in order.
fn entries(map: &Map<String, Json>) -> impl Iterator<Item = (String, Value)> + '_ {
    map.iter().map(|(k, v)| (k.clone(), template_value(v)))
}

impl minijinja::value::Object for Variables {
    fn get_value(self: &std::sync::Arc<Self>, key: &Value) -> Option<Value> {
        self.get_value_by_str(key.as_str()?)
    }

    fn get_value_by_str(self: &std::sync::Arc<Self>, key: &str) -> Option<Value> {
        if let Some(i) = FIXED.iter().position(|f| *f == key) {
            return Some(self.fixed[i].clone());
        }
        named(&self.kwargs, key)
            .or_else(|| named(&self.special, key))
            .cloned()
    }

    /// The names in the order transformers' dict has them: special tokens a kwarg does not
    /// replace, kwargs, then the fixed four.
    fn enumerate(self: &std::sync::Arc<Self>) -> minijinja::value::Enumerator {
        let special = self
            .special
            .iter()
            .filter(|(k, _)| named(&self.kwargs, k).is_none());
        let names: Vec<Value> = special
            .chain(&self.kwargs)
            .map(|(k, _)| Value::from(k.as_str()))
            .chain(FIXED.iter().map(|f| Value::from(*f)))
            .collect();
        minijinja::value::Enumerator::Values(names)
    }
}

/// `map`'s entries as template values, less the fixed names.
fn variable_values(map: &Map<String, Json>) -> Vec<(String, Value)> {
    entries(map)
        .filter(|(k, _)| !FIXED.contains(&k.as_str()))
        .collect()
}

/// A JSON value as the template context holds it.
pub fn template_value(v: &Json) -> Value {
    Value::from(Serde(v))
}

/// A message as the template context holds it (what [`RenderInput::message_values`] keeps):
/// a [`Message`] when it is an object, else as [`template_value`] makes it.
pub fn message_value(message: &Json) -> Value {
    match message {
        Json::Object(map) => Value::from_object(Message(entries(map).collect())),
        other => template_value(other),
    }
}

/// A message's fields in their order. Templates look fields up as `message['role']`, which
/// on minijinja's own map hashes the key with SipHash each time; a message has a handful of
/// fields, so comparing them in order is cheaper, and converting one builds no hash table.
/// It is a map to the template in every other way: its entries enumerate in order, and
/// equality, `items()`, `tojson` and the rest go through them as for any map.
struct Message(Vec<(String, Value)>);

impl std::fmt::Debug for Message {
    /// As minijinja's own map prints (`{"role": "user"}`), for `pprint`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.0.iter().map(|(k, v)| (Value::from(k.as_str()), v)))
            .finish()
    }
}

impl minijinja::value::Object for Message {
    fn get_value(self: &std::sync::Arc<Self>, key: &Value) -> Option<Value> {
        self.get_value_by_str(key.as_str()?)
    }

    fn get_value_by_str(self: &std::sync::Arc<Self>, key: &str) -> Option<Value> {
        named(&self.0, key).cloned()
    }

    fn enumerate(self: &std::sync::Arc<Self>) -> minijinja::value::Enumerator {
        minijinja::value::Enumerator::Values(
            self.0
                .iter()
                .map(|(k, _)| Value::from(k.as_str()))
                .collect(),
        )
    }

    fn enumerator_len(self: &std::sync::Arc<Self>) -> Option<usize> {
        Some(self.0.len())
    }
}

/// A chat template bound to a model's special tokens.
pub struct ChatRenderer {
    engine: TemplateEngine,
    source: String,
    special_tokens: Map<String, Json>,
    /// `special_tokens` as template variables (see [`Variables`]).
    special_values: std::sync::Arc<[(String, Value)]>,
    /// The content formats vLLM and SGLang detect for this template, read on first use.
    formats: std::sync::OnceLock<server::ContentFormats>,
    /// The reply layout and stop strings the template's markers imply: looked up in its text
    /// once, not for every conversation of a corpus.
    reply_format: std::sync::OnceLock<reply_format::ReplyFormat>,
    stops: std::sync::OnceLock<Vec<String>>,
}

/// Why a request through a server profile did not render.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error(transparent)]
    Server(#[from] ServerError),
    #[error(transparent)]
    Render(#[from] RenderError),
}

impl ChatRenderer {
    pub fn new(
        source: &str,
        special_tokens: Map<String, Json>,
        fuel: u64,
    ) -> Result<Self, RenderError> {
        Ok(ChatRenderer {
            engine: TemplateEngine::new(source, fuel)?,
            // The text Jinja2 compiles: the family's markers are looked up in it.
            source: source::normalize_newlines(source).into_owned(),
            special_values: variable_values(&special_tokens).into(),
            special_tokens,
            formats: std::sync::OnceLock::new(),
            reply_format: std::sync::OnceLock::new(),
            stops: std::sync::OnceLock::new(),
        })
    }

    /// The template text (used to find the family's markers).
    pub fn source(&self) -> &str {
        &self.source
    }

    /// [`reply_format::ReplyFormat::detect`] of the template.
    pub fn reply_format(&self) -> reply_format::ReplyFormat {
        *self
            .reply_format
            .get_or_init(|| reply_format::ReplyFormat::detect(&self.source))
    }

    /// [`reply::stop_strings`] of the template.
    pub fn stops(&self) -> &[String] {
        self.stops.get_or_init(|| reply::stop_strings(self))
    }

    /// The variables a keyword argument can set: what the template reads, less what every
    /// render passes itself (messages, tools, documents, add_generation_prompt).
    pub fn kwarg_names(&self) -> Vec<String> {
        const PASSED: [&str; 4] = ["messages", "tools", "documents", "add_generation_prompt"];
        self.engine
            .variables()
            .into_iter()
            .filter(|name| !PASSED.contains(&name.as_str()))
            .collect()
    }

    pub fn special_token(&self, name: &str) -> Option<&str> {
        self.special_tokens.get(name).and_then(Json::as_str)
    }

    /// The variables transformers passes: special tokens, then caller kwargs over them, then
    /// messages, tools, documents and add_generation_prompt.
    pub fn render(&self, input: &RenderInput) -> Result<String, RenderError> {
        let messages = match input.message_values {
            Some(values) => Value::from(values.to_vec()),
            None => Value::from(input.messages.iter().map(message_value).collect::<Vec<_>>()),
        };
        let null = Json::Null;
        let vars = Variables {
            fixed: [
                messages,
                template_value(input.tools.unwrap_or(&null)),
                template_value(input.documents.unwrap_or(&null)),
                Value::from(input.add_generation_prompt),
            ],
            kwargs: variable_values(input.kwargs),
            special: self.special_values.clone(),
        };
        // The contents and a header's worth per message: most of a prompt is its history.
        let expected = input
            .messages
            .iter()
            .map(|m| m.get("content").and_then(Json::as_str).map_or(0, str::len) + 32)
            .fold(256usize, usize::saturating_add);
        self.engine
            .render_sized(Value::from_object(vars), input.now, expected)
    }

    /// Render `request` as `profile`'s server does: its preprocessing, then this template.
    pub fn render_request(
        &self,
        profile: ServerProfile,
        request: &server::Request,
        now: NaiveDateTime,
    ) -> Result<String, RequestError> {
        self.render_converted(profile, request, None, now)
    }

    /// [`render_request`](Self::render_request) with the request's messages already converted
    /// to template values (`values[i]` is [`message_value`] of `request.messages[i]`): they
    /// stand in for the messages when the server profile passes the messages through as
    /// they are, which is what saves a conversation's history from being converted again for
    /// every prompt.
    pub fn render_converted(
        &self,
        profile: ServerProfile,
        request: &server::Request,
        values: Option<&[Value]>,
        now: NaiveDateTime,
    ) -> Result<String, RequestError> {
        // transformers takes content as given: no need to read the template's syntax tree.
        let formats = match profile {
            ServerProfile::Transformers => server::ContentFormats {
                vllm: server::ContentFormat::String,
                sglang: server::ContentFormat::String,
            },
            _ => *self
                .formats
                .get_or_init(|| server::ContentFormats::detect(&self.source)),
        };
        let input = profile.prepare(&self.source, &formats, request)?;
        let passed_through = matches!(&input.messages, std::borrow::Cow::Borrowed(m)
            if std::ptr::eq(*m, request.messages));
        let message_values = values.filter(|v| passed_through && v.len() == input.messages.len());
        let render = |tools: Option<&Json>| {
            self.render(&RenderInput {
                messages: &input.messages,
                message_values,
                tools,
                documents: input.documents.as_ref(),
                kwargs: &input.kwargs,
                add_generation_prompt: input.add_generation_prompt,
                now,
            })
        };
        match (render(input.tools.as_ref()), &input.retry_tools) {
            // llama-server strips the BOS and EOS texts around the prompt it tokenizes.
            (Ok(text), _) if profile == ServerProfile::Llamacpp && !request.reply => {
                Ok(server::llamacpp::strip_bos_eos(
                    &text,
                    self.special_token("bos_token"),
                    self.special_token("eos_token"),
                )
                .to_string())
            }
            (Ok(text), _) => Ok(text),
            // SGLang renders once more with the bare function dicts when the template raises.
            (Err(_), Some(retry)) => Ok(render(Some(retry))?),
            (Err(e), None) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use minijinja::value::Object;

    fn map(v: Json) -> Map<String, Json> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn variables_are_the_fixed_four_over_kwargs_over_special_tokens() {
        let special = map(serde_json::json!({
            "bos_token": "<s>", "eos_token": "</s>", "messages": "never", "pad_token": null
        }));
        let renderer = ChatRenderer::new(
            "{{ bos_token }}|{{ eos_token }}|{{ extra }}|{{ tools }}|{{ messages | length }}|\
             {{ add_generation_prompt }}|{{ pad_token is none }}|{{ missing is defined }}",
            special.clone(),
            DEFAULT_FUEL,
        )
        .unwrap();
        let kwargs = map(serde_json::json!({"eos_token": "<|end|>", "tools": "never", "extra": 3}));
        let messages = [serde_json::json!({"role": "user", "content": "hi"})];
        let values: Vec<Value> = messages.iter().map(message_value).collect();
        for message_values in [None, Some(values.as_slice())] {
            let text = renderer
                .render(&RenderInput {
                    messages: &messages,
                    message_values,
                    tools: None,
                    documents: None,
                    kwargs: &kwargs,
                    add_generation_prompt: true,
                    now: parse_time("2026-01-15T10:00:00").unwrap(),
                })
                .unwrap();
            assert_eq!(text, "<s>|<|end|>|3|None|1|True|True|False");
        }
        // The names in the order of transformers' dict.
        let vars = std::sync::Arc::new(Variables {
            fixed: [
                Value::UNDEFINED,
                Value::UNDEFINED,
                Value::UNDEFINED,
                Value::from(true),
            ],
            kwargs: variable_values(&kwargs),
            special: variable_values(&special).into(),
        });
        let names: Vec<String> = match vars.enumerate() {
            minijinja::value::Enumerator::Values(v) => v.iter().map(|n| n.to_string()).collect(),
            _ => Vec::new(),
        };
        assert_eq!(
            names,
            [
                "bos_token",
                "pad_token",
                "eos_token",
                "extra",
                "messages",
                "tools",
                "documents",
                "add_generation_prompt"
            ]
        );
        assert_eq!(vars.get_value(&Value::from(1)), None);
    }

    #[test]
    fn a_message_object_renders_as_minijinja_map_of_it_does() {
        let template = "{% set m = messages[0] %}{{ m['role'] }}|{{ m.content }}|{{ m | length }}|\
            {{ m is mapping }}|{{ 'tool_calls' in m }}|{{ 'x' in m }}|{{ m.get('x', 'd') }}|\
            {% for k, v in m.items() %}{{ k }}={{ v }};{% endfor %}|{% for k in m %}{{ k }},{% endfor %}|\
            {{ m | tojson }}|{{ m | dictsort }}|{{ m == messages[1] }}|{{ m != messages[2] }}|\
            {{ m }}|{{ m | pprint }}|{{ m.tool_calls[0].function.name }}|{{ m | list }}|\
            {{ m.keys() | list }}|{{ m.values() | list | length }}|{% if m %}t{% endif %}|\
            {{ messages[3] | length }}|{% if messages[3] %}t{% else %}f{% endif %}";
        let renderer = ChatRenderer::new(template, Map::new(), DEFAULT_FUEL).unwrap();
        let msg = serde_json::json!({"role": "assistant", "content": "hi", "z": null,
            "tool_calls": [{"function": {"name": "f", "arguments": {"b": 1, "a": [2]}}}]});
        let messages = [
            msg.clone(),
            msg,
            serde_json::json!({"role": "user"}),
            serde_json::json!({}),
        ];
        let render = |convert: fn(&Json) -> Value| {
            let values: Vec<Value> = messages.iter().map(convert).collect();
            renderer
                .render(&RenderInput {
                    messages: &messages,
                    message_values: Some(&values),
                    tools: None,
                    documents: None,
                    kwargs: &Map::new(),
                    add_generation_prompt: false,
                    now: parse_time("2026-01-15T10:00:00").unwrap(),
                })
                .unwrap()
        };
        let ours = render(message_value);
        assert_eq!(ours, render(template_value));
        assert!(
            ours.starts_with("assistant|hi|4|True|True|False|d|role=assistant;"),
            "{ours}"
        );
    }
}
