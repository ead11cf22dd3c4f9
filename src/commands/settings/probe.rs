//! `probe`'s settings: the rendering flags as diff-turns reads them, the HTTP client's, the conversation.

use anyhow::{Result, bail};

use super::*;
use crate::audit::{self};
use crate::render::{Conversation, ServerProfile};

/// Everything `probe` needs before it sends a request: its flags checked, the client made, the
/// conversation read, the model resolved, the outputs checked against the inputs.
pub struct ProbeRun {
    pub probe: crate::probe::ProbeSettings,
    pub client: crate::probe::Client,
    pub conversation: Conversation,
    pub files: crate::model::ModelFiles,
    pub format: Format,
}

impl ProbeRun {
    /// `env` reads the environment (`OPENAI_API_KEY`); `say` takes the notes for standard
    /// error as they arise.
    pub fn from_args(
        args: &crate::cli::ProbeArgs,
        env: impl Fn(&str) -> Option<String>,
        say: &mut dyn FnMut(&str),
    ) -> Result<ProbeRun> {
        let (probe, http) = probe_settings(args, env)?;
        let conversation = probe_conversation(args)?;
        let client = crate::probe::Client::new(&args.url, http)?;
        let files = resolved_model(&args.model, say)?;
        let inputs = model_inputs(&args.model, &files)
            .into_iter()
            .chain(args.conversation.iter().cloned());
        crate::output::check_outputs(inputs, args.save_conversation.iter())?;
        Ok(ProbeRun {
            probe,
            client,
            conversation,
            files,
            format: args.format.into(),
        })
    }
}

/// `probe`'s settings: the rendering flags as diff-turns reads them, the engine, the HTTP
/// client's (the API key from `--api-key`, else `OPENAI_API_KEY`), and the conversation.
fn probe_settings(
    args: &crate::cli::ProbeArgs,
    env: impl Fn(&str) -> Option<String>,
) -> Result<(crate::probe::ProbeSettings, crate::probe::HttpSettings)> {
    use crate::probe::{HttpSettings, ProbeSettings};
    let rendering = crate::cli::RenderingArgs {
        reply_format: args.reply_format,
        template_kwarg: args.template_kwarg.clone(),
        kwargs_turn: Vec::new(),
        server: ServerProfile::Transformers,
        server_template_kwarg: Vec::new(),
        now: args.now.clone(),
        fuel: args.fuel,
    };
    let mut audit = audit_settings(&rendering, args.model.template_name.clone())?;
    audit.plan.server_kwargs =
        template_kwargs("--server-template-kwarg", &args.server_template_kwarg)?;
    let duration = |flag: &str, text: &str| {
        parse_duration(text).map_err(|e| anyhow::anyhow!("{flag} {text:?}: {e}"))
    };
    let mut headers = Vec::new();
    for h in &args.header {
        // A header is often a credential: errors name the flag, never its text.
        let Some((name, value)) = h.split_once(':') else {
            bail!("a --header has no ':' (expected NAME: VALUE; its text is not shown)");
        };
        if name.trim().is_empty() {
            bail!("a --header has an empty name (expected NAME: VALUE)");
        }
        headers.push((name.trim().to_string(), value.trim().to_string()));
    }
    if args.turns == Some(0) {
        bail!("--turns must be at least 1");
    }
    if args.max_tokens == 0 {
        bail!("--max-tokens must be at least 1");
    }
    if args.block_size == Some(0) {
        bail!("--block-sizes must be positive");
    }
    let api_key = args
        .api_key
        .clone()
        .or_else(|| env("OPENAI_API_KEY"))
        .filter(|k| !k.is_empty());
    let http = HttpSettings {
        api_key,
        headers,
        connect_timeout: duration("--connect-timeout", &args.connect_timeout)?,
        timeout: duration("--timeout", &args.timeout)?,
        max_body: crate::probe::http::DEFAULT_MAX_BODY,
    };
    let pod_headers = if args.pod_header.is_empty() {
        crate::probe::DEFAULT_POD_HEADERS
            .iter()
            .map(|h| h.to_string())
            .collect()
    } else {
        args.pod_header.clone()
    };
    Ok((
        ProbeSettings {
            server: args.server,
            served_model: args.served_model.clone(),
            turns: args.turns,
            max_tokens: args.max_tokens,
            seed: args.seed,
            block_size: args.block_size,
            pod_headers,
            audit,
        },
        http,
    ))
}

/// The conversation `probe` sends: `--conversation FILE`, the quick form (`--user`, then each
/// `--follow-up`), or the built-in probe (the question, then its three follow-ups in turn).
fn probe_conversation(args: &crate::cli::ProbeArgs) -> Result<Conversation> {
    let resend = args.resend.into();
    if let Some(path) = &args.conversation {
        let mut conv = read_conversation(path)?;
        conv.resend = resend;
        return Ok(conv);
    }
    let (source, first, rest): (&str, &str, Vec<&str>) = match &args.user {
        Some(user) => (
            "quick",
            user.as_str(),
            args.follow_up.iter().map(String::as_str).collect(),
        ),
        None => (
            "probe",
            audit::PROBE_QUESTION,
            audit::PROBE_FOLLOW_UPS.iter().map(|(_, f)| *f).collect(),
        ),
    };
    let mut messages = Vec::new();
    if let Some(s) = &args.system {
        messages.push(serde_json::json!({"role": "system", "content": s}));
    }
    for text in std::iter::once(first).chain(rest) {
        if !messages.is_empty()
            && messages.last().and_then(|m| m.get("role")) == Some(&"user".into())
        {
            messages.push(serde_json::json!({"role": "assistant", "content": ""}));
        }
        messages.push(serde_json::json!({"role": "user", "content": text}));
    }
    Ok(Conversation::of_messages(source, messages, resend))
}
