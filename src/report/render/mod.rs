//! The `render` report: the prompts kvaudit renders for each conversation, exactly as rendered
//! (the strings are the template's output, byte for byte), or one transition's held stream.

mod human;

use serde::Serialize;

use super::{Exporter, Format, Report, View};
use crate::audit::{HeldStream, RenderedConversation, RenderedConversations, RenderedToken};

/// The JSON shape of the render report.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Serialize)]
pub struct RenderView<'a> {
    pub schema_version: u32,
    pub model: ModelView<'a>,
    pub conversations: Vec<ConversationView<'a>>,
}

#[derive(Serialize)]
pub struct ModelView<'a> {
    pub source: &'a str,
    pub tokenizer_sha256: &'a str,
}

#[derive(Serialize)]
pub struct ConversationView<'a> {
    pub source: &'a str,
    /// The template that rendered this conversation (tools select `tool_use`).
    pub template: &'a str,
    pub template_sha256: &'a str,
    /// How many prompts the conversation renders to, shown or not.
    pub prompt_count: usize,
    pub prompts: Vec<PromptView<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<HeldView<'a>>,
}

#[derive(Serialize)]
pub struct PromptView<'a> {
    pub prompt: usize,
    pub token_count: usize,
    pub text: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ids: Option<&'a [u32]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens: Option<Vec<TokenView<'a>>>,
}

#[derive(Serialize)]
pub struct HeldView<'a> {
    pub from_prompt: usize,
    pub to_prompt: usize,
    /// Prompt tokens plus generated tokens: diff-turns' `held_tokens`.
    pub token_count: usize,
    pub prompt_tokens: usize,
    pub generated_tokens: usize,
    /// `sampled` when the conversation gives `generated_ids`, else `encoded` (the text).
    pub generated_ids_from: &'static str,
    /// The prompt text followed by the generated text.
    pub text: String,
    pub generated_text: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ids: Option<&'a [u32]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens: Option<Vec<TokenView<'a>>>,
}

#[derive(Serialize)]
pub struct TokenView<'a> {
    pub id: u32,
    pub text: &'a str,
    pub special: bool,
}

fn token_views(tokens: &Option<Vec<RenderedToken>>) -> Option<Vec<TokenView<'_>>> {
    tokens.as_ref().map(|list| {
        list.iter()
            .map(|t| TokenView {
                id: t.id,
                text: &t.text,
                special: t.special,
            })
            .collect()
    })
}

impl<'a> HeldView<'a> {
    fn new(h: &'a HeldStream) -> Self {
        HeldView {
            from_prompt: h.from_prompt,
            to_prompt: h.from_prompt + 1,
            token_count: h.ids.len(),
            prompt_tokens: h.prompt_tokens,
            generated_tokens: h.ids.len() - h.prompt_tokens,
            generated_ids_from: if h.sampled_ids { "sampled" } else { "encoded" },
            text: format!("{}{}", h.prompt_text, h.generated_text),
            generated_text: &h.generated_text,
            ids: h.tokens.is_some().then_some(h.ids.as_slice()),
            tokens: token_views(&h.tokens),
        }
    }
}

impl<'a> ConversationView<'a> {
    fn new(c: &'a RenderedConversation) -> Self {
        ConversationView {
            source: &c.source,
            template: &c.template_origin,
            template_sha256: &c.template_sha256,
            prompt_count: c.prompt_count,
            prompts: c
                .prompts
                .iter()
                .map(|p| PromptView {
                    prompt: p.number,
                    token_count: p.ids.len(),
                    text: &p.text,
                    ids: p.tokens.is_some().then_some(p.ids.as_slice()),
                    tokens: token_views(&p.tokens),
                })
                .collect(),
            held: c.held.iter().map(HeldView::new).collect(),
        }
    }
}

impl View for RenderedConversations {
    type View<'a> = RenderView<'a>;

    fn view(&self) -> RenderView<'_> {
        RenderView {
            schema_version: SCHEMA_VERSION,
            model: ModelView {
                source: &self.model_source,
                tokenizer_sha256: &self.tokenizer_sha256,
            },
            conversations: self
                .conversations
                .iter()
                .map(ConversationView::new)
                .collect(),
        }
    }
}

impl Report for RenderedConversations {
    const NAME: &'static str = "render";

    fn exporter(&self, format: Format) -> Option<&dyn Exporter<Self>> {
        super::human_or_json(format, &human::Human)
    }
}
