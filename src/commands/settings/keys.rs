//! `keys`' settings, made from its arguments in one place.

use anyhow::{Context, Result, bail};

use super::{audit_settings, conversations, ignored_input_warnings, index_config};
use crate::audit::AuditSettings;
use crate::cli::KeysArgs;
use crate::model::{ModelFiles, ModelSpec};
use crate::render::Conversation;
use crate::report::Format;
use crate::routers::llm_d::index::IndexConfig;

/// The token ids `keys` hashes: a model's rendered prompts, or ids given as they are.
// One value per run: its size does not matter, boxing would only add a step to read it.
#[allow(clippy::large_enum_variant)]
pub enum KeysInput {
    Prompts {
        files: ModelFiles,
        conversations: Vec<Conversation>,
        audit: AuditSettings,
    },
    /// Named for the report.
    Ids(String, Vec<u32>),
}

/// Everything `keys` needs before it tokenizes: its flags checked, the model resolved, the
/// served model's name found.
pub struct KeysSettings {
    pub index: IndexConfig,
    pub input: KeysInput,
    /// The name llm-d hashes into every key, and where it came from.
    pub model_name: (String, String),
    pub format: Format,
}

impl KeysSettings {
    /// `say` takes the notes and warnings for standard error as they arise.
    pub fn from_args(args: &KeysArgs, say: &mut dyn FnMut(&str)) -> Result<KeysSettings> {
        if args.index_block_size == 0 {
            bail!("--block-sizes must be positive");
        }
        let index = index_config(&args.index, args.index_block_size);
        let mut model_name = index
            .model_name
            .clone()
            .map(|n| (n, "--model-name".to_string()));
        let input = if let Some(model) = &args.model {
            let files = crate::model::resolve_model(&ModelSpec {
                model: model.clone(),
                offline: args.offline,
                template: args.template.clone(),
                progress: std::io::IsTerminal::is_terminal(&std::io::stderr()),
                ..ModelSpec::default()
            })?;
            if let Some(note) = crate::commands::cached_model_note(&files, args.offline) {
                say(&format!("note: {note}"));
            }
            let conversations = conversations(&args.conversation)?;
            for warning in ignored_input_warnings(&args.conversation, &files, None, &conversations)
            {
                say(&format!("warning: {warning}"));
            }
            let audit = audit_settings(&args.conversation.rendering, None)?;
            if model_name.is_none() {
                model_name = files.served_name(model);
            }
            KeysInput::Prompts {
                files,
                conversations,
                audit,
            }
        } else if let Some(path) = &args.tokens_file {
            KeysInput::Ids(path.display().to_string(), token_file(path)?)
        } else if !args.tokens.is_empty() {
            KeysInput::Ids("tokens".into(), args.tokens.clone())
        } else {
            bail!("give --tokens, --tokens-file or --model");
        };
        let Some(model_name) = model_name else {
            bail!(match &args.model {
                Some(m) => format!(
                    "--model-name is needed: llm-d hashes the served model's name into every \
                     key, and {m} is a local directory whose config.json and \
                     tokenizer_config.json name no model (`_name_or_path`)"
                ),
                None => {
                    "--model-name is needed: llm-d hashes the model name into every key".into()
                }
            });
        };
        Ok(KeysSettings {
            index,
            input,
            model_name,
            format: args.format.into(),
        })
    }
}

/// The largest token-id file read (16 M ids written out take about 100 MB).
const MAX_TOKENS_FILE: u64 = 128 << 20;

/// `keys --tokens-file`: a JSON list of ids, or ids separated by commas or whitespace.
fn token_file(path: &std::path::Path) -> Result<Vec<u32>> {
    let shown = path.display();
    let text = crate::input::read_text(path, MAX_TOKENS_FILE)
        .with_context(|| format!("cannot read {shown}"))?;
    let t = text.trim();
    if t.starts_with('[') {
        return serde_json::from_str::<Vec<u32>>(t)
            .with_context(|| format!("{shown}: expected a JSON list of token ids"));
    }
    t.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|p| !p.is_empty())
        .map(|p| {
            p.parse::<u32>()
                .with_context(|| format!("{shown}: {p:?} is not a token id"))
        })
        .collect()
}
