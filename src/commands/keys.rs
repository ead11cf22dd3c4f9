use std::io::IsTerminal;

use anyhow::{Result, bail};

use super::Outcome;
use super::settings::{audit_settings, conversations, ignored_input_warnings, index_config};
use crate::audit;
use crate::cli::KeysArgs;
use crate::model::ModelSpec;
use crate::report::keys::KeysReport;

pub fn run(args: &KeysArgs, out: &mut dyn std::io::Write) -> Result<Outcome> {
    if args.index_block_size == 0 {
        bail!("--block-sizes must be positive");
    }
    let cfg = index_config(&args.index, args.index_block_size);
    // llm-d hashes the served model's name into every key: say which name, and where from.
    let mut model_name = cfg
        .model_name
        .clone()
        .map(|n| (n, "--model-name".to_string()));
    let sequences: Vec<(String, Vec<u32>)> = if let Some(model) = &args.model {
        let files = crate::model::resolve_model(&ModelSpec {
            model: model.clone(),
            offline: args.offline,
            template: args.template.clone(),
            progress: std::io::stderr().is_terminal(),
            ..ModelSpec::default()
        })?;
        super::note_cached_model(&files, args.offline);
        let convs = conversations(&args.conversation)?;
        for warning in ignored_input_warnings(&args.conversation, &files, None, &convs) {
            super::terminal::stderr_line(&format!("warning: {warning}"));
        }
        let settings = audit_settings(&args.conversation.rendering, None)?;
        let tok = crate::model::tokenizer_for(&files, settings.plan.server)?;
        if model_name.is_none() {
            model_name = files.served_name(model);
        }
        audit::conversation_prompts(&files, &tok, &convs, &settings)?
            .into_iter()
            .flat_map(|(source, prompts)| {
                prompts
                    .into_iter()
                    .enumerate()
                    .map(move |(i, ids)| (format!("{source} prompt {}", i + 1), ids))
            })
            .collect()
    } else if let Some(path) = &args.tokens_file {
        vec![(
            path.display().to_string(),
            super::settings::token_file(path)?,
        )]
    } else if !args.tokens.is_empty() {
        vec![("tokens".into(), args.tokens.clone())]
    } else {
        bail!("give --tokens, --tokens-file or --model");
    };
    let Some((model_name, from)) = model_name else {
        bail!(match &args.model {
            Some(m) => format!(
                "--model-name is needed: llm-d hashes the served model's name into every key, and \
                 {m} is a local directory whose config.json and tokenizer_config.json name no \
                 model (`_name_or_path`)"
            ),
            None => "--model-name is needed: llm-d hashes the model name into every key".into(),
        });
    };
    let b = args.index_block_size;
    if sequences.iter().all(|(_, ids)| ids.len() < b) {
        let longest = sequences
            .iter()
            .map(|(_, ids)| ids.len())
            .max()
            .unwrap_or(0);
        bail!(
            "no keys: llm-d keys whole {b}-token blocks only, and the longest sequence has \
             {longest} tokens (lower --block-sizes or give more tokens)"
        );
    }
    let mut report = KeysReport::new(&cfg, &model_name, &from, sequences);
    if args.model.is_some() {
        report.server = Some(
            audit_settings(&args.conversation.rendering, None)?
                .plan
                .server
                .name(),
        );
    }
    let text = crate::report::export(&report, args.format.into(), &super::settings::style(false))?;
    out.write_all(text.as_bytes())?;
    Ok(Outcome::Clean)
}
