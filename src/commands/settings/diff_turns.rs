//! `diff-turns`' settings, made from its arguments in one place.

use anyhow::Result;

use super::{add_routers, audit_settings, conversations, resolved_model, style};
use crate::audit::AuditSettings;
use crate::cli::{ConversationArgs, DiffTurnsArgs, ReplyFormatArg};
use crate::model::ModelFiles;
use crate::render::{ChatRenderer, Conversation};
use crate::report::{Format, Style};

/// Everything `diff-turns` needs before it renders: its flags checked and parsed, the model
/// resolved, the conversations read.
pub struct DiffTurnsSettings {
    pub audit: AuditSettings,
    pub files: ModelFiles,
    pub conversations: Vec<Conversation>,
    pub format: Format,
    pub style: Style,
}

impl DiffTurnsSettings {
    /// `say` takes the notes and warnings for standard error as they arise (`note: …`,
    /// `warning: …`), so that they come before a later error as they always have.
    pub fn from_args(args: &DiffTurnsArgs, say: &mut dyn FnMut(&str)) -> Result<DiffTurnsSettings> {
        let mut settings = audit_settings(
            &args.conversation.rendering,
            args.model.template_name.clone(),
        )?;
        settings.date_rollover = args.date_rollover;
        settings.remedies = args.remedies;
        crate::align::check_block_sizes("--block-sizes", &args.block_sizes)
            .map_err(anyhow::Error::msg)?;
        settings.align.block_sizes = args.block_sizes.clone();
        add_routers(&mut settings, &args.router, &args.model.model)?;
        let conversations = conversations(&args.conversation)?;
        let files = resolved_model(&args.model, say)?;
        for warning in ignored_input_warnings(
            &args.conversation,
            &files,
            args.model.template_name.as_deref(),
            &conversations,
        ) {
            say(&format!("warning: {warning}"));
        }
        Ok(DiffTurnsSettings {
            audit: settings,
            files,
            conversations,
            format: args.format.into(),
            style: style(args.only_rewrites),
        })
    }
}

/// Input that would otherwise be dropped without a word, as warnings for the command to
/// print: a keyword argument no chat template in use reads, and reasoning that the plain
/// reply format leaves out.
pub fn ignored_input_warnings(
    args: &ConversationArgs,
    files: &ModelFiles,
    template_name: Option<&str>,
    conversations: &[Conversation],
) -> Vec<String> {
    let mut warnings = Vec::new();
    if args.rendering.reply_format == Some(ReplyFormatArg::Plain) && args.reasoning.is_some() {
        warnings.push(
            "--reasoning is left out of the reply: --reply-format plain has no reasoning block \
             (drop --reply-format to use the template's own layout)"
                .to_string(),
        );
    }
    // The variables each conversation's template reads (compiled once per template; one that
    // does not compile is the audit's error to report, not a warning).
    let mut read_by: Vec<(String, Vec<String>)> = Vec::new();
    let mut names_for = |conv: &Conversation| -> Option<Vec<String>> {
        let server = args.rendering.server;
        let has_tools = server.selects_tool_template(conv.any_tools());
        let name = crate::audit::template_name(files, server, template_name);
        let template = files.select_template(name, has_tools).ok()?;
        if let Some((_, names)) = read_by.iter().find(|(o, _)| *o == template.origin) {
            return Some(names.clone());
        }
        let renderer = ChatRenderer::new(
            &template.text,
            files.special_tokens.clone(),
            args.rendering.fuel,
        )
        .ok()?;
        let names = renderer.kwarg_names();
        read_by.push((template.origin, names.clone()));
        Some(names)
    };
    let unread = |given: &str, key: &str, names: &[String]| -> Option<String> {
        if names.iter().any(|n| n == key) {
            return None;
        }
        let hint = crate::suggest::closest(key, names.iter().map(String::as_str))
            .map(|n| format!(" (did you mean `{n}`?)"))
            .unwrap_or_default();
        let reads = if names.is_empty() {
            "it reads no variables besides messages, tools, documents and add_generation_prompt"
                .to_string()
        } else {
            format!("it reads: {}", names.join(", "))
        };
        Some(format!(
            "{given}: the chat template never reads `{key}`{hint}; {reads}"
        ))
    };
    let mut cli_names: Option<Vec<String>> = None;
    for conv in conversations {
        let Some(names) = names_for(conv) else {
            continue;
        };
        for key in conv.template_kwargs.keys() {
            let given = format!("conversation {} `template_kwargs`", conv.source);
            warnings.extend(unread(&given, key, &names));
        }
        let mut per_prompt: Vec<&String> = Vec::new();
        for key in conv.kwargs_per_prompt.iter().flat_map(|m| m.keys()) {
            if !per_prompt.contains(&key) {
                per_prompt.push(key);
                let given = format!("conversation {} `template_kwargs_per_prompt`", conv.source);
                warnings.extend(unread(&given, key, &names));
            }
        }
        let all = cli_names.get_or_insert_with(Vec::new);
        for n in names {
            if !all.contains(&n) {
                all.push(n);
            }
        }
    }
    if let Some(mut names) = cli_names {
        names.sort();
        for kv in &args.rendering.template_kwarg {
            if let Some((key, _)) = kv.split_once('=') {
                warnings.extend(unread(&format!("--template-kwarg {kv}"), key, &names));
            }
        }
        for flag in &args.rendering.kwargs_turn {
            let key = flag
                .split_once(':')
                .and_then(|(_, kv)| kv.split_once('='))
                .map(|(k, _)| k);
            if let Some(key) = key {
                warnings.extend(unread(&format!("--kwargs-turn {flag}"), key, &names));
            }
        }
    }
    warnings
}
