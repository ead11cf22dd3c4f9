//! The `render` command's pipeline: the prompts kvaudit renders for each conversation, or the
//! held stream of one transition, with their ids and, when asked, each token's text.

use anyhow::{Context, Result};

use super::{AuditSettings, Planned, Planner};
use crate::model::ModelFiles;
use crate::render::Conversation;
use crate::tokenize::{Tokenizer, sha256_hex};

/// Which part of each conversation `render` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RenderSelection {
    /// Every prompt, P_1 to the prompt after the last reply.
    AllPrompts,
    /// Prompt N (1-based).
    Prompt(usize),
    /// What the decode server holds after generation N: prompt N and its reply, without the
    /// stop token (transition N -> N+1).
    Held(usize),
}

/// One token of a rendered text.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderedToken {
    pub id: u32,
    /// The token decoded on its own (a piece of a multi-byte character shows as U+FFFD).
    pub text: String,
    /// An added token marked special in tokenizer.json.
    pub special: bool,
}

/// A prompt exactly as rendered, and its token ids.
#[derive(Debug, Clone)]
pub struct RenderedPrompt {
    /// 1-based.
    pub number: usize,
    pub text: String,
    pub ids: Vec<u32>,
    /// Each token's own text, when asked for.
    pub tokens: Option<Vec<RenderedToken>>,
}

/// The held stream of one transition: `prompt_N ++ generated_N`, the ids diff-turns aligns.
#[derive(Debug, Clone)]
pub struct HeldStream {
    /// N of transition N -> N+1.
    pub from_prompt: usize,
    pub prompt_text: String,
    pub generated_text: String,
    /// The conversation's `generated_ids` were used (else the generated text, encoded).
    pub sampled_ids: bool,
    pub prompt_tokens: usize,
    /// Prompt ids, then generated ids.
    pub ids: Vec<u32>,
    pub tokens: Option<Vec<RenderedToken>>,
}

#[derive(Debug, Clone)]
pub struct RenderedConversation {
    pub source: String,
    pub template_origin: String,
    pub template_sha256: String,
    /// How many prompts the conversation renders to (before any selection).
    pub prompt_count: usize,
    pub prompts: Vec<RenderedPrompt>,
    pub held: Vec<HeldStream>,
    /// The first request the server refuses: the prompts stop before it.
    pub refused: Option<crate::render::reply::Refused>,
}

#[derive(Debug, Clone)]
pub struct RenderedConversations {
    pub model_source: String,
    pub tokenizer_sha256: String,
    pub conversations: Vec<RenderedConversation>,
}

/// The prompts kvaudit renders for each conversation (the ones diff-turns aligns), or the
/// held stream of one transition. A conversation without an assistant message is one request
/// and renders to one prompt. `tokens` adds each token's own text.
pub fn render_conversations(
    files: &ModelFiles,
    tok: &Tokenizer,
    conversations: &[Conversation],
    settings: &AuditSettings,
    selection: RenderSelection,
    tokens: bool,
) -> Result<RenderedConversations> {
    let planner = Planner::for_tokenizer(files, tok, settings)?;
    let special = if tokens {
        tok.special_ids()
    } else {
        Default::default()
    };
    let pieces = |ids: &[u32]| {
        tokens.then(|| {
            ids.iter()
                .map(|&id| RenderedToken {
                    id,
                    text: tok.token_text(id).into_owned(),
                    special: special.contains(&id),
                })
                .collect::<Vec<_>>()
        })
    };
    let mut out = Vec::new();
    for conv in conversations {
        let context = || format!("conversation {}", conv.source);
        let (template, texts, turns, refused) = if crate::render::reply::is_single_request(conv) {
            let (template, renderer, clock) = planner.template(conv)?;
            let text = crate::render::reply::render_single_request(
                conv,
                &renderer,
                &clock,
                &planner.options,
            )
            .with_context(context)?;
            (template, vec![text], Vec::new(), None)
        } else {
            let Planned { template, plan, .. } = planner.plan(conv)?;
            let mut texts: Vec<String> = plan.turns.iter().map(|t| t.prompt.clone()).collect();
            if let Some(Some(last)) = plan.next_prompts.last() {
                texts.push(last.clone());
            }
            // A turn is a transition only when a prompt follows it.
            let turns: Vec<crate::render::Turn> = plan
                .turns
                .into_iter()
                .zip(&plan.next_prompts)
                .filter(|(_, next)| next.is_some())
                .map(|(t, _)| t)
                .collect();
            (template, texts, turns, plan.refused)
        };
        let count = texts.len();
        let mut rendered = RenderedConversation {
            source: conv.source.clone(),
            template_sha256: sha256_hex(template.text.as_bytes()),
            template_origin: template.origin,
            prompt_count: count,
            prompts: Vec::new(),
            held: Vec::new(),
            refused: None,
        };
        // A prompt or transition at or past the refused request is that refusal.
        let refused_error = |n: usize| {
            refused
                .as_ref()
                .filter(|r| r.request <= n)
                .map(|r| anyhow::anyhow!("conversation {}: {r}: {}", conv.source, r.source))
        };
        match selection {
            RenderSelection::AllPrompts | RenderSelection::Prompt(_) => {
                let mut base = None;
                for (i, text) in texts.into_iter().enumerate() {
                    let number = i + 1;
                    if matches!(selection, RenderSelection::Prompt(n) if n != number) {
                        continue;
                    }
                    let encoded = tok
                        .encode_after(&text, base.as_ref())
                        .with_context(context)?;
                    let ids = encoded.ids().to_vec();
                    base = Some(encoded);
                    rendered.prompts.push(RenderedPrompt {
                        number,
                        tokens: pieces(&ids),
                        text,
                        ids,
                    });
                }
                if let RenderSelection::Prompt(n) = selection
                    && rendered.prompts.is_empty()
                {
                    if let Some(e) = refused_error(n) {
                        return Err(e);
                    }
                    anyhow::bail!(
                        "conversation {} has {count} prompt{}, so there is no prompt {n}",
                        conv.source,
                        if count == 1 { "" } else { "s" }
                    );
                }
            }
            RenderSelection::Held(n) => {
                let Some(turn) = n.checked_sub(1).and_then(|k| turns.get(k)) else {
                    if let Some(e) = refused_error(n + 1) {
                        return Err(e);
                    }
                    let have = match turns.len() {
                        0 => "no transition (no assistant reply is followed by a prompt)".into(),
                        1 => "one transition, 1 -> 2".into(),
                        t => format!("transitions 1 -> 2 to {t} -> {}", t + 1),
                    };
                    anyhow::bail!(
                        "conversation {} has {have}, so there is no held stream {n} -> {}",
                        conv.source,
                        n.saturating_add(1)
                    );
                };
                // The same ids align_plan holds: prompt N, then the sampled ids when the
                // conversation gives them, else the generated text encoded.
                let mut ids = tok.encode(&turn.prompt).with_context(context)?;
                let prompt_tokens = ids.len();
                match &turn.generated_ids {
                    Some(sampled) => ids.extend_from_slice(sampled),
                    None => ids.extend(tok.encode(&turn.generated).with_context(context)?),
                }
                rendered.held.push(HeldStream {
                    from_prompt: n,
                    prompt_text: turn.prompt.clone(),
                    generated_text: turn.generated.clone(),
                    sampled_ids: turn.generated_ids.is_some(),
                    prompt_tokens,
                    tokens: pieces(&ids),
                    ids,
                });
            }
        }
        if selection == RenderSelection::AllPrompts {
            rendered.refused = refused;
        }
        out.push(rendered);
    }
    Ok(RenderedConversations {
        model_source: files.source.clone(),
        tokenizer_sha256: tok.sha256().to_string(),
        conversations: out,
    })
}
