//! Server profiles: how a serving engine turns an OpenAI chat request into the values its chat
//! template receives. transformers' `apply_chat_template` sees the messages exactly as given;
//! vLLM and SGLang validate and rewrite them first (content `null`, part lists, tool-call
//! arguments, reasoning fields, tools, kwargs). The rules and their sources are in
//! ../shared/reference/server-preprocessing.md; each rule below names its section.
//!
//! Both servers render with transformers' environment and encode the text without adding
//! special tokens (sections 1.7-1.8, 2.7), so after this step rendering and tokenizing are the
//! same as for transformers: the only BOS is the one the template writes.

mod detect;
pub mod llamacpp;
mod sglang;
mod sglang_schema;
mod vllm;

pub use detect::{ContentFormat, sglang_content_format, vllm_content_format};

use serde_json::{Map, Value as Json};

/// The SGLang whose rules `ServerProfile::Sglang` follows: releases differ in how they write
/// tool definitions (server-preprocessing.md 2.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SglangRelease {
    /// 0.5.23, the release the live tests run: tools as the client wrote them.
    #[default]
    V0_5_23,
    /// The main branch with the chat_input package: every tool field written, `strict` false.
    Main,
}

impl SglangRelease {
    pub fn name(self) -> &'static str {
        match self {
            SglangRelease::V0_5_23 => "0.5.23",
            SglangRelease::Main => "main",
        }
    }
}

/// The vLLM release the `vllm` profile follows (the one the live tests run).
pub const VLLM_RELEASE: &str = "0.32";

/// Whose message preprocessing applies before the template.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ServerProfile {
    /// The raw `apply_chat_template` contract: messages, tools and kwargs as given.
    #[default]
    Transformers,
    /// vLLM's OpenAI server with the HF (Jinja) renderer.
    Vllm,
    /// SGLang's OpenAI server on its Jinja path, as one release writes it.
    Sglang(SglangRelease),
    /// llama.cpp's llama-server with `--jinja` (post-b7756 engine).
    Llamacpp,
}

impl ServerProfile {
    pub fn name(self) -> &'static str {
        match self {
            ServerProfile::Transformers => "transformers",
            ServerProfile::Vllm => "vllm",
            ServerProfile::Sglang(_) => "sglang",
            ServerProfile::Llamacpp => "llamacpp",
        }
    }

    /// The server release whose rules apply, where kvaudit follows one release.
    pub fn release(self) -> Option<&'static str> {
        match self {
            ServerProfile::Vllm => Some(VLLM_RELEASE),
            ServerProfile::Sglang(r) => Some(r.name()),
            ServerProfile::Transformers | ServerProfile::Llamacpp => None,
        }
    }

    /// `name@release`, as `--server` takes it.
    pub fn label(self) -> String {
        match self.release() {
            Some(r) => format!("{}@{r}", self.name()),
            None => self.name().to_string(),
        }
    }

    /// Whether the request's `tools` select a dict template's `tool_use` entry: vLLM asks
    /// transformers for it whenever tools is not None, `[]` included (section 1.5);
    /// transformers' own callers and kvaudit pass tools only when there are some. SGLang
    /// 0.5.23 fixes one template at start-up, tools or not.
    pub fn selects_tool_template(self, tools: Option<&Json>) -> bool {
        match self {
            ServerProfile::Vllm => tools.is_some(),
            ServerProfile::Sglang(SglangRelease::V0_5_23) => false,
            _ => tools
                .and_then(Json::as_array)
                .is_some_and(|a| !a.is_empty()),
        }
    }

    /// Whether, of several named templates, the server takes the first when not told which
    /// (SGLang 0.5.23's `_select_named_template`; transformers takes `default`).
    pub fn takes_first_named_template(self) -> bool {
        self == ServerProfile::Sglang(SglangRelease::V0_5_23)
    }
}

impl ServerProfile {
    /// Every `--server` value (`name@release` where kvaudit follows releases), the profile it
    /// selects and what it reproduces (`--help`); a bare name is the newest release the tests
    /// run, and an empty text an alias `--help` leaves out.
    pub const VALUES: [(&'static str, ServerProfile, &'static str); 8] = [
        (
            "transformers",
            ServerProfile::Transformers,
            "transformers' apply_chat_template on the messages as given (4.57)",
        ),
        (
            "vllm",
            ServerProfile::Vllm,
            "vLLM 0.32, the release the tests run (vllm/renderers since PR #48922), OpenAI \
             server with the HF tokenizer mode; gpt-oss (Harmony) and Mistral (mistral-common) \
             bypass Jinja there",
        ),
        ("vllm@0.32", ServerProfile::Vllm, "the same as vllm"),
        ("vllm@0.32.0", ServerProfile::Vllm, ""),
        (
            "sglang",
            ServerProfile::Sglang(SglangRelease::V0_5_23),
            "SGLang 0.5.23, the release the tests run, OpenAI server on its Jinja path: tools \
             as the client wrote them",
        ),
        (
            "sglang@0.5.23",
            ServerProfile::Sglang(SglangRelease::V0_5_23),
            "the same as sglang",
        ),
        (
            "sglang@main",
            ServerProfile::Sglang(SglangRelease::Main),
            "SGLang main with the chat_input package (commits 3ba38dc0, 310081f7), Jinja path: \
             every tool field written, strict false",
        ),
        (
            "llamacpp",
            ServerProfile::Llamacpp,
            "llama.cpp llama-server --jinja after b7756: messages re-serialised \
             (reasoning_content kept, `reasoning` dropped), BOS/EOS text stripped; capability \
             polyfills not emulated",
        ),
    ];

    /// The profile a `--server` value names.
    pub fn parse(text: &str) -> Option<ServerProfile> {
        Self::VALUES
            .iter()
            .find(|(name, _, _)| *name == text)
            .map(|&(_, p, _)| p)
    }

    /// Why `text` names no profile: the releases kvaudit knows for that server.
    pub fn unknown(text: &str) -> String {
        let server = text.split('@').next().unwrap_or(text);
        let known: Vec<&str> = Self::VALUES
            .iter()
            .filter(|(name, _, help)| !help.is_empty() && name.split('@').next() == Some(server))
            .map(|(name, _, _)| *name)
            .collect();
        if known.is_empty() {
            let names: Vec<&str> = Self::VALUES
                .iter()
                .map(|(name, _, _)| *name)
                .filter(|name| !name.contains('@'))
                .collect();
            format!("unknown server {text:?} (one of {})", names.join(", "))
        } else {
            format!(
                "kvaudit does not know how {text:?} renders (known: {}); a release not listed \
                 may render differently",
                known.join(", ")
            )
        }
    }
}

/// Stored as the `--server` value that selects it (partials name their settings).
impl serde::Serialize for ServerProfile {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&match self {
            ServerProfile::Sglang(_) => self.label(),
            other => other.name().to_string(),
        })
    }
}

impl<'de> serde::Deserialize<'de> for ServerProfile {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        ServerProfile::parse(&text).ok_or_else(|| serde::de::Error::custom(Self::unknown(&text)))
    }
}

/// A chat request as a client sends it.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub messages: &'a [Json],
    pub tools: Option<&'a Json>,
    pub documents: Option<&'a Json>,
    /// The request's `chat_template_kwargs`.
    pub kwargs: &'a Map<String, Json>,
    /// The server's `--default-chat-template-kwargs`.
    pub server_kwargs: &'a Map<String, Json>,
    pub add_generation_prompt: bool,
    /// kvaudit's own render of a reply turn (the last message is the assistant's, no generation
    /// prompt): the message rules apply, the request-level rewrites of a final assistant
    /// message do not (no server renders this; it stands for what the model generated).
    pub reply: bool,
}

/// What the template receives.
#[derive(Debug, Clone, PartialEq)]
pub struct TemplateInput<'a> {
    /// Borrowed from the request where the server passes messages as they are.
    pub messages: std::borrow::Cow<'a, [Json]>,
    pub tools: Option<Json>,
    pub documents: Option<Json>,
    pub kwargs: Map<String, Json>,
    pub add_generation_prompt: bool,
    /// Tools to render with instead when rendering with `tools` raises (SGLang's retry).
    pub retry_tools: Option<Json>,
}

impl TemplateInput<'_> {
    pub fn into_owned(self) -> TemplateInput<'static> {
        TemplateInput {
            messages: std::borrow::Cow::Owned(self.messages.into_owned()),
            tools: self.tools,
            documents: self.documents,
            kwargs: self.kwargs,
            add_generation_prompt: self.add_generation_prompt,
            retry_tools: self.retry_tools,
        }
    }
}

/// Why a server profile refused a request.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ServerError {
    /// The server answers 400 before any template runs. `code` names the rule (stable, used by
    /// the conformance harness); `detail` says where.
    #[error("{server} rejects this request ({code}): {detail}")]
    Rejected {
        server: &'static str,
        code: &'static str,
        detail: String,
    },
    /// Input whose server handling needs more than the chat template (a model's multimodal
    /// processor): kvaudit does not emulate it.
    #[error("kvaudit cannot reproduce {server}'s handling of {what}")]
    Unsupported { server: &'static str, what: String },
}

impl ServerError {
    pub fn rejected(server: &'static str, code: &'static str, detail: String) -> ServerError {
        ServerError::Rejected {
            server,
            code,
            detail,
        }
    }
}

impl ServerError {
    /// The stable reason name: `rejected:<code>` or `unsupported`.
    pub fn reason(&self) -> String {
        match self {
            ServerError::Rejected { code, .. } => format!("rejected:{code}"),
            ServerError::Unsupported { .. } => "unsupported".into(),
        }
    }
}

/// The content formats of one template, detected once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContentFormats {
    pub vllm: ContentFormat,
    pub sglang: ContentFormat,
}

impl ContentFormats {
    pub fn detect(template: &str) -> ContentFormats {
        ContentFormats {
            vllm: vllm_content_format(template),
            sglang: sglang_content_format(template),
        }
    }
}

impl ServerProfile {
    /// The template's inputs for `request` as this server builds them.
    pub fn prepare<'a>(
        self,
        template: &str,
        formats: &ContentFormats,
        request: &Request<'a>,
    ) -> Result<TemplateInput<'a>, ServerError> {
        match self {
            ServerProfile::Transformers => {
                let mut kwargs = request.server_kwargs.clone();
                kwargs.extend(request.kwargs.iter().map(|(k, v)| (k.clone(), v.clone())));
                Ok(TemplateInput {
                    messages: std::borrow::Cow::Borrowed(request.messages),
                    tools: request.tools.cloned(),
                    documents: request.documents.cloned(),
                    kwargs,
                    add_generation_prompt: request.add_generation_prompt,
                    retry_tools: None,
                })
            }
            ServerProfile::Vllm => vllm::prepare(template, formats.vllm, request),
            ServerProfile::Sglang(release) => sglang::prepare(release, formats.sglang, request),
            ServerProfile::Llamacpp => llamacpp::prepare(request),
        }
    }
}

/// A `bool | None` field in pydantic's lax mode: booleans, the integers 0 and 1, and the
/// strings pydantic reads as booleans (case-insensitive).
pub(super) fn lax_bool(v: &Json) -> Option<Json> {
    let b = match v {
        Json::Bool(b) => *b,
        Json::Number(n) => match n.as_f64()? {
            0.0 => false,
            1.0 => true,
            _ => return None,
        },
        Json::String(s) => match s.to_ascii_lowercase().as_str() {
            "0" | "off" | "f" | "false" | "n" | "no" => false,
            "1" | "on" | "t" | "true" | "y" | "yes" => true,
            _ => return None,
        },
        _ => return None,
    };
    Some(Json::Bool(b))
}

/// `value` as a short JSON text for error details.
fn shown(value: Option<&Json>) -> String {
    let text = value.map_or("missing".to_string(), |v| v.to_string());
    if text.len() > 60 {
        let cut = (0..=60)
            .rev()
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(0);
        format!("{}...", &text[..cut])
    } else {
        text
    }
}

#[cfg(test)]
mod tests;
