//! Chat rendering exactly as transformers' `apply_chat_template(..., tokenize=False)`.

pub mod conversation;
mod env;
mod markup;
mod pyjson;
mod pymethods;
pub mod reply;
pub mod server;
mod source;
mod switches;

pub use conversation::{Clock, Conversation, ConversationError, entry, field, parse_time};
pub use env::{DEFAULT_FUEL, RenderError, TemplateEngine, strftime};
pub use pyjson::{DumpOptions, dump as dump_json, python_float_repr};
pub use reply::{ReplyFormat, ResendMode, Turn, TurnPlan, plan_turns};
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

/// The template's variables, serialized straight from the borrowed inputs (a conversation's
/// history is rendered once per prompt, so copying it into a JSON map first doubled the work):
/// each name once, with the value the last of special tokens, kwargs, and the fixed four
/// gives it.
struct Context<'a> {
    special_tokens: &'a Map<String, Json>,
    input: &'a RenderInput<'a>,
}

const FIXED: [&str; 4] = ["messages", "tools", "documents", "add_generation_prompt"];

impl serde::Serialize for Context<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let input = self.input;
        let mut m = s.serialize_map(None)?;
        for (k, v) in self.special_tokens {
            if !input.kwargs.contains_key(k) && !FIXED.contains(&k.as_str()) {
                m.serialize_entry(k, v)?;
            }
        }
        for (k, v) in input.kwargs {
            if !FIXED.contains(&k.as_str()) {
                m.serialize_entry(k, v)?;
            }
        }
        // A `Value` serialized into a value passes through as it is.
        match input.message_values {
            Some(values) => m.serialize_entry("messages", values)?,
            None => m.serialize_entry("messages", input.messages)?,
        }
        m.serialize_entry("tools", input.tools.unwrap_or(&Json::Null))?;
        m.serialize_entry("documents", input.documents.unwrap_or(&Json::Null))?;
        m.serialize_entry("add_generation_prompt", &input.add_generation_prompt)?;
        m.end()
    }
}

/// A message as the template context holds it (what [`RenderInput::message_values`] keeps).
pub fn template_value(message: &Json) -> Value {
    Value::from(Serde(message))
}

/// A chat template bound to a model's special tokens.
pub struct ChatRenderer {
    engine: TemplateEngine,
    source: String,
    special_tokens: Map<String, Json>,
    /// The content formats vLLM and SGLang detect for this template, read on first use.
    formats: std::sync::OnceLock<server::ContentFormats>,
    /// The reply layout and stop strings the template's markers imply: looked up in its text
    /// once, not for every conversation of a corpus.
    reply_format: std::sync::OnceLock<reply::ReplyFormat>,
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

    /// [`reply::ReplyFormat::detect`] of the template.
    pub fn reply_format(&self) -> reply::ReplyFormat {
        *self
            .reply_format
            .get_or_init(|| reply::ReplyFormat::detect(&self.source))
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
        let ctx = Context {
            special_tokens: &self.special_tokens,
            input,
        };
        self.engine.render(Value::from(Serde(&ctx)), input.now)
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
    /// to template values (`values[i]` is [`template_value`] of `request.messages[i]`): they
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
