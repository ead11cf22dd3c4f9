//! `kvaudit watch`: each request's prompt tokens attributed to why they were, or were not,
//! served from the KV cache, with each pod's view kept by its KV events.

use std::io::{BufRead, Read, Write};

use anyhow::{Context, Result};

use super::Outcome;
use super::settings::{WatchMode, WatchSettings, style};
use crate::cli::WatchArgs;
use crate::events::frames::CaptureReader;
use crate::output::{self, AtomicFile};
use crate::report::watch::WatchOutput;
use crate::report::{Format, Style};
use crate::watch::conversations::Conversations;
use crate::watch::live::LiveHooks;
use crate::watch::log::{InputCounts, Outputs, PodCapture};
use crate::watch::monitor::{Attributed, Monitor, Totals};

pub fn run(args: &WatchArgs, out: &mut dyn Write) -> Result<Outcome> {
    let s = WatchSettings::from_args(args, &mut super::terminal::stderr_line)?;
    let mut inputs = Vec::new();
    if let WatchMode::Log { requests, captures } = &s.mode {
        inputs.extend(captures.iter().map(|(_, p)| p.clone()));
        inputs.push(requests.clone());
    }
    let partial = s.partial.as_ref().and_then(|c| c.partial.as_ref());
    output::check_outputs(
        inputs,
        s.record.iter().chain(s.per_request.iter()).chain(partial),
    )?;
    let mut files = Files {
        record: s.record.as_deref().map(AtomicFile::create).transpose()?,
        per_request: s
            .per_request
            .as_deref()
            .map(AtomicFile::create)
            .transpose()?,
        error: None,
    };
    let tok = crate::model::tokenizer_for(&s.files, s.audit.plan.server)?;
    let auditor = crate::audit::Auditor::new(&s.files, &tok, &s.audit)?;
    let pods = s.pod_names();
    let mut monitor = Monitor::new(auditor, s.block_size, s.capacity, &pods)
        .with_routers(s.routers, s.conversations);
    for (pod, url) in &s.pod_apis {
        let blocks = pool_blocks(pod, url, s.engine, s.block_size, s.connect_timeout)?;
        monitor.set_capacity(pod, blocks);
    }
    let mut conversations = Conversations::new(s.conversations, files.record.is_some());
    let header = Header {
        model: s.model_label.clone(),
        server: s.audit.plan.server.name(),
        block_size: s.block_size,
    };
    let (counts, shown) = match s.mode {
        WatchMode::Log { requests, captures } => {
            let shown = requests.display().to_string();
            let counts = from_log(
                &requests,
                captures,
                s.engine,
                &mut monitor,
                &mut conversations,
                &mut files,
            )?;
            if monitor.totals().requests == 0
                && let Some((line, why)) = &counts.first_bad
            {
                anyhow::bail!("{shown}: no line is a request (line {line}: {why})");
            }
            (counts, shown)
        }
        WatchMode::Live(live) => {
            let shown = match &live.proxy {
                Some((addr, p)) => match &p.upstream {
                    Some(up) => format!("proxy {addr} -> {up}"),
                    None => format!("mirror {addr}"),
                },
                None => "live".into(),
            };
            let mut hooks = Hooks {
                header: &header,
                shown: &shown,
                files: &mut files,
                last: Totals::default(),
                interval: live.interval,
            };
            let counts = crate::watch::live::run(
                live,
                &mut monitor,
                &mut conversations,
                s.pod_header.as_deref(),
                &mut hooks,
            )?;
            (counts, shown)
        }
    };
    files.forgotten(conversations.drain_rows());
    files.commit()?;
    if let Some(corpus) = &s.partial {
        super::corpus::partial_only(corpus)?;
    }
    let totals = monitor.totals();
    let text = crate::report::export(
        &header.output(&shown, &totals, &counts),
        s.format,
        &style(false),
    )?;
    out.write_all(text.as_bytes())?;
    Ok(Outcome::Clean)
}

/// What names a report.
struct Header {
    model: String,
    server: &'static str,
    block_size: usize,
}

impl Header {
    fn output<'a>(
        &'a self,
        shown: &'a str,
        totals: &'a Totals,
        counts: &'a InputCounts,
    ) -> WatchOutput<'a> {
        WatchOutput {
            model: &self.model,
            server: self.server,
            block_size: self.block_size,
            requests: shown,
            totals,
            counts,
        }
    }
}

/// The files written as the run goes: the record and the per-request lines. Each is put in
/// place only when the run ends well; the first write error is kept for then.
struct Files {
    record: Option<AtomicFile>,
    per_request: Option<AtomicFile>,
    error: Option<std::io::Error>,
}

impl Files {
    fn line(file: Option<&mut AtomicFile>, text: &str, error: &mut Option<std::io::Error>) {
        if let Some(f) = file
            && let Err(e) = writeln!(f, "{text}")
        {
            error.get_or_insert(e);
        }
    }

    fn commit(self) -> Result<()> {
        if let Some(e) = self.error {
            return Err(e.into());
        }
        for mut file in self.record.into_iter().chain(self.per_request) {
            file.sync()?;
            file.commit()?;
        }
        Ok(())
    }
}

impl Outputs for Files {
    fn forgotten(&mut self, rows: Vec<serde_json::Value>) {
        for row in rows {
            Files::line(self.record.as_mut(), &row.to_string(), &mut self.error);
        }
    }

    fn attributed(&mut self, a: &Attributed) {
        if self.per_request.is_some() {
            let text = serde_json::to_string(a).unwrap_or_default();
            Files::line(self.per_request.as_mut(), &text, &mut self.error);
        }
    }
}

/// The command's side of live mode: where it listens and the summaries, on standard error;
/// the metrics text; the files.
struct Hooks<'h> {
    header: &'h Header,
    shown: &'h str,
    files: &'h mut Files,
    /// The totals at the last summary, and how long ago that is at each summary.
    last: Totals,
    interval: std::time::Duration,
}

impl Outputs for Hooks<'_> {
    fn forgotten(&mut self, rows: Vec<serde_json::Value>) {
        self.files.forgotten(rows);
    }

    fn attributed(&mut self, a: &Attributed) {
        self.files.attributed(a);
    }
}

impl LiveHooks for Hooks<'_> {
    fn listening(&mut self, what: &str, addr: &str) {
        super::terminal::stderr_line(&format!("watch: {what} listening on {addr}"));
    }

    fn metrics(&mut self, totals: &Totals, counts: &InputCounts) -> String {
        crate::report::export(
            &self.header.output(self.shown, totals, counts),
            Format::Prometheus,
            &Style::default(),
        )
        .unwrap_or_default()
    }

    fn summary(&mut self, totals: &Totals, counts: &InputCounts) {
        if let Ok(text) = crate::report::export(
            &self.header.output(self.shown, totals, counts),
            Format::Human,
            &style(true),
        ) {
            eprint!("{text}");
        }
        // The answer for the last interval alone: what changed lately, not the run's average.
        let window = totals.since(&self.last);
        eprintln!(
            "in the last {}: {}\n",
            crate::report::watch::span(self.interval),
            crate::report::watch::answer(&window)
        );
        self.last = totals.clone();
    }
}

/// A pod's block count from its own API, its block size checked against ours: a vLLM pod's
/// `/metrics` (`vllm:cache_config_info`), an SGLang pod's `/server_info` (its pool's tokens
/// over its page size).
fn pool_blocks(
    pod: &str,
    url: &str,
    engine: crate::events::Engine,
    block_size: usize,
    timeout: std::time::Duration,
) -> Result<usize> {
    use crate::probe::http::{Client, DEFAULT_MAX_BODY, HttpSettings};
    use crate::probe::wire;
    let client = Client::new(
        url,
        HttpSettings {
            api_key: None,
            headers: Vec::new(),
            connect_timeout: timeout,
            timeout: timeout * 2,
            max_body: DEFAULT_MAX_BODY,
        },
    )
    .map_err(|e| anyhow::anyhow!("--pod-api {pod}: {e}"))?;
    let shown = client.shown().to_string();
    let cannot = |path: &str, e: &dyn std::fmt::Display| {
        anyhow::anyhow!("--pod-api {pod}: cannot read {shown}{path}: {e}")
    };
    let said = |path: &str, what: &str| {
        anyhow::anyhow!("--pod-api {pod}: {shown}{path} gives no {what}; give --capacity instead")
    };
    let (theirs, blocks) = match engine {
        crate::events::Engine::Vllm => {
            let text = client
                .get_text("/metrics", false)
                .map_err(|e| cannot("/metrics", &e))?;
            let no = |what| said("/metrics", &format!("{what} (vllm:cache_config_info)"));
            (
                wire::metrics_block_size(&text).ok_or_else(|| no("block_size"))?,
                wire::metrics_gpu_blocks(&text).ok_or_else(|| no("num_gpu_blocks"))?,
            )
        }
        crate::events::Engine::Sglang => {
            let answer = client
                .get("/server_info", false)
                .map_err(|e| cannot("/server_info", &e))?;
            let info = wire::sglang_server_info(&answer.body);
            let page = info
                .page_size
                .ok_or_else(|| said("/server_info", "page_size"))?;
            let tokens = info
                .pool_tokens
                .ok_or_else(|| said("/server_info", "max_total_num_tokens"))?;
            (
                page,
                usize::try_from(tokens / page as u64).unwrap_or(usize::MAX),
            )
        }
    };
    if theirs != block_size {
        anyhow::bail!(
            "--pod-api {pod}: the pod stores blocks of {theirs} tokens, and --block-size is {block_size}"
        );
    }
    Ok(blocks)
}

fn from_log(
    requests: &std::path::Path,
    captures: Vec<(String, std::path::PathBuf)>,
    engine: crate::events::Engine,
    monitor: &mut Monitor,
    conversations: &mut Conversations,
    outputs: &mut dyn Outputs,
) -> Result<InputCounts> {
    let mut pods = Vec::with_capacity(captures.len());
    for (name, path) in captures {
        let shown = path.display();
        let f = crate::input::open_regular(&path)
            .with_context(|| format!("--pod {name}: cannot open capture {shown}"))?;
        let reader = CaptureReader::new(Box::new(std::io::BufReader::new(f)) as Box<dyn Read>)
            .with_context(|| format!("--pod {name}: cannot read capture {shown}"))?;
        pods.push(PodCapture { name, reader });
    }
    let shown = requests.display().to_string();
    let mut input: Box<dyn BufRead> = if shown == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        let f = crate::input::open_regular(requests)
            .with_context(|| format!("cannot open requests {shown}"))?;
        Box::new(std::io::BufReader::new(f))
    };
    crate::watch::log::run(
        &mut input,
        &shown,
        pods,
        engine,
        monitor,
        conversations,
        outputs,
    )
    .with_context(|| format!("cannot read requests {shown}"))
}
