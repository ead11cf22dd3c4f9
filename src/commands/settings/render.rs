//! `render`'s settings, made from its arguments in one place.

use anyhow::{Result, bail};

use super::{audit_settings, conversations, resolved_model, style};
use crate::audit::{AuditSettings, RenderSelection};
use crate::cli::RenderArgs;
use crate::model::ModelFiles;
use crate::render::Conversation;
use crate::report::{Format, Style};

/// Everything `render` needs before it renders: its flags checked, the conversations read,
/// the model resolved.
pub struct RenderSettings {
    pub audit: AuditSettings,
    pub selection: RenderSelection,
    pub conversations: Vec<Conversation>,
    pub files: ModelFiles,
    pub format: Format,
    pub style: Style,
}

impl RenderSettings {
    /// `say` takes the notes for standard error as they arise.
    pub fn from_args(args: &RenderArgs, say: &mut dyn FnMut(&str)) -> Result<RenderSettings> {
        let audit = audit_settings(
            &args.conversation.rendering,
            args.model.template_name.clone(),
        )?;
        let selection = render_selection(args.prompt, args.held)?;
        let conversations = conversations(&args.conversation)?;
        let files = resolved_model(&args.model, say)?;
        Ok(RenderSettings {
            audit,
            selection,
            conversations,
            files,
            format: args.format.into(),
            style: style(false),
        })
    }
}

/// `render --prompt N` / `--held N`: which part of each conversation to show (1-based).
fn render_selection(prompt: Option<usize>, held: Option<usize>) -> Result<RenderSelection> {
    Ok(match (prompt, held) {
        (Some(_), Some(_)) => bail!("give --prompt or --held, not both"),
        (Some(0), None) => bail!("--prompt counts from 1"),
        (None, Some(0)) => bail!("--held counts from 1 (transition 1 -> 2 is --held 1)"),
        (Some(n), None) => RenderSelection::Prompt(n),
        (None, Some(n)) => RenderSelection::Held(n),
        (None, None) => RenderSelection::AllPrompts,
    })
}
