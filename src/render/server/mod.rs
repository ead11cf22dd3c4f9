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
mod vllm;

pub use detect::{ContentFormat, sglang_content_format, vllm_content_format};

use serde_json::{Map, Value as Json};

/// Whose message preprocessing applies before the template.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerProfile {
    /// The raw `apply_chat_template` contract: messages, tools and kwargs as given.
    #[default]
    Transformers,
    /// vLLM's OpenAI server with the HF (Jinja) renderer.
    Vllm,
    /// SGLang's OpenAI server on its Jinja path.
    Sglang,
    /// llama.cpp's llama-server with `--jinja` (post-b7756 engine).
    Llamacpp,
}

impl ServerProfile {
    pub fn name(self) -> &'static str {
        match self {
            ServerProfile::Transformers => "transformers",
            ServerProfile::Vllm => "vllm",
            ServerProfile::Sglang => "sglang",
            ServerProfile::Llamacpp => "llamacpp",
        }
    }

    /// The server version whose rules the profile reproduces.
    pub fn pinned_to(self) -> &'static str {
        match self {
            ServerProfile::Transformers => "transformers 4.57 apply_chat_template",
            ServerProfile::Vllm => {
                "vLLM main after v0.25.1 (vllm/renderers, PR #48922, July 2026), HF tokenizer mode"
            }
            ServerProfile::Sglang => {
                "SGLang main with the chat_input package (commits 3ba38dc0, 310081f7), Jinja path"
            }
            ServerProfile::Llamacpp => {
                "llama.cpp llama-server --jinja after b7756 (common/jinja engine), no polyfills"
            }
        }
    }

    /// Whether the request's `tools` select a dict template's `tool_use` entry: vLLM asks
    /// transformers for it whenever tools is not None, `[]` included (section 1.5);
    /// transformers' own callers and kvaudit pass tools only when there are some.
    pub fn selects_tool_template(self, tools: Option<&Json>) -> bool {
        match self {
            ServerProfile::Vllm => tools.is_some(),
            _ => tools
                .and_then(Json::as_array)
                .is_some_and(|a| !a.is_empty()),
        }
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
            ServerProfile::Sglang => sglang::prepare(formats.sglang, request),
            ServerProfile::Llamacpp => llamacpp::prepare(request),
        }
    }
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
