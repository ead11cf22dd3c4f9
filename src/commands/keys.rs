use anyhow::{Result, bail};

use super::Outcome;
use super::settings::{KeysInput, KeysSettings};
use crate::audit;
use crate::report::keys::KeysReport;

pub fn run(args: &crate::cli::KeysArgs, out: &mut dyn std::io::Write) -> Result<Outcome> {
    let KeysSettings {
        index,
        input,
        model_name: (model_name, from),
        format,
    } = KeysSettings::from_args(args, &mut super::terminal::stderr_line)?;
    let (sequences, server) = match input {
        KeysInput::Prompts {
            files,
            conversations,
            audit,
        } => {
            let tok = crate::model::tokenizer_for(&files, audit.plan.server)?;
            let prompts = audit::conversation_prompts(&files, &tok, &conversations, &audit)?;
            let sequences: Vec<(String, Vec<u32>)> = prompts
                .into_iter()
                .flat_map(|(source, prompts)| {
                    prompts
                        .into_iter()
                        .enumerate()
                        .map(move |(i, ids)| (format!("{source} prompt {}", i + 1), ids))
                })
                .collect();
            (sequences, Some(audit.plan.server.name()))
        }
        KeysInput::Ids(name, ids) => (vec![(name, ids)], None),
    };
    let b = index.block_size;
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
    let mut report = KeysReport::new(&index, &model_name, &from, sequences);
    report.server = server;
    let text = crate::report::export(&report, format, &super::settings::style(false))?;
    out.write_all(text.as_bytes())?;
    Ok(Outcome::Clean)
}
