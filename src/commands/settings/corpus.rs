//! `corpus`' settings, made from its arguments in one place.

use anyhow::{Result, bail};

use super::*;
use crate::cli::CorpusArgs;
use crate::corpus::input::{RowFormat, Selection};
use crate::model::ModelFiles;

/// Everything `corpus` needs before it reads a row: its flags checked and parsed, the model
/// resolved, the outputs checked against the inputs.
pub struct CorpusRun {
    pub audit: AuditSettings,
    pub corpus: crate::corpus::CorpusSettings,
    pub files: ModelFiles,
    pub row_format: RowFormat,
    pub selection: Selection,
    pub format: Format,
}

impl CorpusRun {
    /// `say` takes the notes and warnings for standard error as they arise.
    pub fn from_args(args: &CorpusArgs, say: &mut dyn FnMut(&str)) -> Result<CorpusRun> {
        stdin_at_most_once(&args.files, "-")?;
        let mut settings = audit_settings(&args.rendering, args.model.template_name.clone())?;
        let files = resolved_model(&args.model, say)?;
        // Outputs over inputs are refused before any output is opened (the corpus itself, a
        // model file, or the HTML and per-transition files on each other).
        let inputs = model_inputs(&args.model, &files)
            .into_iter()
            .chain(args.files.iter().cloned());
        crate::output::check_outputs(
            inputs,
            args.per_transition
                .iter()
                .chain(&args.html)
                .chain(&args.partial),
        )?;
        if args.partial.is_some() {
            crate::corpus::partial::check_selection(args.sample.is_some(), args.limit.is_some())?;
        }
        let corpus = corpus_settings(args, &files, say)?;
        settings.align.block_sizes = corpus.block_sizes.clone();
        settings.align.sides = crate::align::Sides::Skip;
        settings.remedies = args.remedies;
        if !args.no_router {
            add_routers(&mut settings, &args.router, &args.model.model)?;
        } else if !args.router.choice.routers.is_empty() {
            bail!("--router and --no-router ask for opposite things: give one");
        }
        Ok(CorpusRun {
            audit: settings,
            selection: Selection {
                limit: args.limit,
                sample: args.sample.map(|n| (n, args.seed)),
                parquet: corpus.parquet_limits,
            },
            corpus,
            files,
            row_format: row_format(args.format_in),
            format: args.format.into(),
        })
    }
}

/// The corpus run's settings from its flags: validated block sizes and thresholds, the KV
/// bytes per token from the flag or the model's config.json.
fn corpus_settings(
    args: &CorpusArgs,
    files: &ModelFiles,
    say: &mut dyn FnMut(&str),
) -> Result<crate::corpus::CorpusSettings> {
    use crate::cli::PrefillAffinityArg;
    use crate::corpus::alternatives::{Assumptions, PrefillAffinity};
    use crate::corpus::kv_bytes::{self, KvBytes};
    crate::align::check_block_sizes("--block-sizes", &args.block_sizes)
        .map_err(anyhow::Error::msg)?;
    if args.worst > crate::corpus::MAX_WORST {
        bail!(
            "--worst {}: the report lists at most {} conversations",
            args.worst,
            crate::corpus::MAX_WORST
        );
    }
    // A file given twice would have its rows counted twice (a merge refuses that too).
    let mut seen = std::collections::HashSet::new();
    for f in args.files.iter().filter(|p| p.as_os_str() != "-") {
        if let Ok(real) = std::fs::canonicalize(f)
            && !seen.insert(real)
        {
            bail!(
                "{} is given twice: its rows would be counted twice",
                f.display()
            );
        }
    }
    if args.jobs == Some(0) {
        bail!("--jobs must be at least 1");
    }
    let jobs = match args.jobs {
        Some(n) => jobs(n)?,
        None => std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get),
    };
    if args.sample == Some(0) {
        bail!("--sample must be at least 1");
    }
    if args.sample.is_some() && args.limit.is_some() {
        bail!("give either --limit or --sample, not both");
    }
    let kv_bytes = match args.kv_bytes_per_token {
        Some(0) => bail!("--kv-bytes-per-token must be positive"),
        Some(b) => Some(KvBytes {
            bytes_per_token: b,
            derivation: "given with --kv-bytes-per-token".into(),
        }),
        None => match kv_bytes::from_config(&files.dir.join("config.json")) {
            Some(Ok(k)) => Some(k),
            Some(Err(e)) => {
                say(&format!(
                    "warning: no KV bytes per token: {e}; bytes moved are left out"
                ));
                None
            }
            None => None,
        },
    };
    let mut parquet_limits = crate::corpus::parquet_file::Limits::default();
    for text in &args.parquet_limit {
        parquet_limits
            .set(text)
            .map_err(|e| anyhow::anyhow!("--parquet-limit: {e}"))?;
    }
    Ok(crate::corpus::CorpusSettings {
        parquet_limits,
        block_sizes: args.block_sizes.clone(),
        jobs,
        seed: args.seed,
        assumptions: Assumptions {
            prefill_affinity: match args.prefill_affinity {
                PrefillAffinityArg::Same => PrefillAffinity::Same,
                PrefillAffinityArg::None => PrefillAffinity::None,
            },
            kv_recompute_threshold: args.kv_recompute_threshold,
        },
        kv_bytes,
        worst: args.worst,
        shared_keys: 10,
    })
}

fn row_format(f: crate::cli::FormatIn) -> crate::corpus::input::RowFormat {
    use crate::cli::FormatIn;
    use crate::corpus::input::RowFormat;
    match f {
        FormatIn::Auto => RowFormat::Auto,
        FormatIn::Openai => RowFormat::Openai,
        FormatIn::Sharegpt => RowFormat::Sharegpt,
        FormatIn::Wildchat => RowFormat::Wildchat,
    }
}
