//! `watch`'s settings, made from its arguments in one place.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use super::{audit_settings, parse_duration, resolved_model, router_settings, router_specs};
use crate::audit::AuditSettings;
use crate::capture::subscribe::Source;
use crate::cli::WatchArgs;
use crate::model::ModelFiles;
use crate::report::Format;
use crate::watch::live::LiveOptions;
use crate::watch::proxy::ProxySettings;
use crate::watch::routing::Routers;

/// The longest pod name: it is a metric label.
const MAX_POD_NAME: usize = 63;

/// Where the requests and the events come from.
// One value per run: its size does not matter.
#[allow(clippy::large_enum_variant)]
pub enum WatchMode {
    /// A request log and each pod's capture.
    Log {
        requests: PathBuf,
        captures: Vec<(String, PathBuf)>,
    },
    /// The pods' publishers, the proxy, the metrics endpoint.
    Live(LiveOptions),
}

/// Everything `watch` needs before it reads a request.
pub struct WatchSettings {
    pub files: ModelFiles,
    pub audit: AuditSettings,
    /// The model as the flag named it (the metrics' `model` label).
    pub model_label: String,
    pub mode: WatchMode,
    pub engine: crate::events::Engine,
    pub block_size: usize,
    pub capacity: usize,
    /// Pods whose `/metrics` gives their block count: the pod and its HTTP address.
    pub pod_apis: Vec<(String, String)>,
    pub conversations: usize,
    /// How long to wait for a connection (publishers, `--pod-api`).
    pub connect_timeout: Duration,
    pub pod_header: Option<String>,
    pub record: Option<PathBuf>,
    /// With `--partial`: the corpus run over the record that writes it.
    pub partial: Option<Box<crate::cli::CorpusArgs>>,
    pub per_request: Option<PathBuf>,
    /// The `--router`s to ask about each turn (none unless given).
    pub routers: Routers,
    pub format: Format,
}

impl WatchSettings {
    pub fn from_args(args: &WatchArgs, say: &mut dyn FnMut(&str)) -> Result<WatchSettings> {
        let (engine, default_block) = match args.rendering.server {
            crate::render::ServerProfile::Vllm => (crate::events::Engine::Vllm, 16),
            crate::render::ServerProfile::Sglang(_) => (crate::events::Engine::Sglang, 1),
            other => bail!(
                "--server {}: watch reads a serving engine's KV events; give --server vllm or \
                 --server sglang",
                other.name()
            ),
        };
        let duration = |flag: &str, v: &str| -> Result<Duration> {
            parse_duration(v).map_err(|why| anyhow::anyhow!("{flag} {v:?}: {why}"))
        };
        let mut names: Vec<String> = Vec::new();
        let mut named = |spec: &str, flag: &str| -> Result<(String, String)> {
            let (name, source) = pod_spec(spec, flag)?;
            if names.contains(&name) {
                bail!("{flag} {spec:?}: pod {name:?} is named twice");
            }
            names.push(name.clone());
            Ok((name, source))
        };
        let mut pods = Vec::new();
        for spec in &args.pod {
            pods.push(named(spec, "--pod")?);
        }
        let mut bound = Vec::new();
        for spec in &args.bind {
            bound.push(named(spec, "--bind")?);
        }
        if pods.is_empty() && bound.is_empty() {
            bail!(
                "give each pod with --pod NAME=ENDPOINT (or --bind, or with --requests a capture)"
            );
        }
        if args.capacity == 0 {
            bail!("--capacity must be at least 1 block");
        }
        if args.conversations == 0 {
            bail!("--conversations must be at least 1");
        }
        let connect_timeout = duration("--connect-timeout", &args.connect_timeout)?;
        let replays = per_pod(&args.pod_replay, "--pod-replay", &names)?;
        for (name, endpoint) in &replays {
            crate::capture::zmtp::endpoint::Endpoint::parse(endpoint)
                .map_err(|e| anyhow::anyhow!("--pod-replay {name}={endpoint}: {e}"))?;
        }
        if args.requests.is_some() && !replays.is_empty() {
            bail!(
                "--pod-replay recovers a live pod's gaps; with --requests the events are captures"
            );
        }
        let replay_of = |name: &str| {
            replays
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, e)| e.clone())
        };
        let is_endpoint = |s: &str| ["tcp://", "ipc://"].iter().any(|p| s.starts_with(p));
        let front = match (&args.upstream, &args.mirror) {
            (Some(upstream), _) => Some((Some(upstream_authority(upstream)?), &args.listen)),
            (None, Some(mirror)) => Some((None, mirror)),
            (None, None) => None,
        };
        let mode = match (&args.requests, front) {
            (Some(requests), _) => {
                if !bound.is_empty() {
                    bail!("--bind subscribes to a live publisher; with --requests give captures");
                }
                if let Some((name, source)) = pods.iter().find(|(_, s)| is_endpoint(s)) {
                    bail!(
                        "--pod {name}={source}: with --requests each pod's events come from a \
                         capture file (`kvaudit capture --out FILE`)"
                    );
                }
                WatchMode::Log {
                    requests: requests.clone(),
                    captures: pods
                        .into_iter()
                        .map(|(n, s)| (n, PathBuf::from(s)))
                        .collect(),
                }
            }
            (None, Some((upstream, listen))) => {
                let mut sources = Vec::new();
                for (name, source) in pods {
                    if !is_endpoint(&source) {
                        bail!(
                            "--pod {name}={source}: a live pod is a publisher's endpoint \
                             (tcp://HOST:PORT or ipc://PATH); captures go with --requests"
                        );
                    }
                    sources.push((name, Source::Retry(source)));
                }
                for (name, source) in bound {
                    sources.push((name, Source::Bind(source)));
                }
                let flag = if upstream.is_some() {
                    "--listen"
                } else {
                    "--mirror"
                };
                let listen = socket(flag, listen)?;
                if !listen.ip().is_loopback() {
                    say(&format!(
                        "note: watch listens on {listen}, beyond this machine{}",
                        match &upstream {
                            Some(u) => format!("; it forwards only to {u}"),
                            None => String::new(),
                        }
                    ));
                }
                let metrics = args
                    .metrics
                    .as_deref()
                    .map(|m| socket("--metrics", m))
                    .transpose()?;
                WatchMode::Live(LiveOptions {
                    replays: sources.iter().map(|(name, _)| replay_of(name)).collect(),
                    replay_timeout: duration("--replay-timeout", &args.replay_timeout)?,
                    pods: sources,
                    topic: args.topic.clone(),
                    limits: crate::capture::zmtp::Limits::new(
                        crate::capture::zmtp::Limits::DEFAULT_MAX_MESSAGE,
                    ),
                    connect_timeout,
                    engine,
                    proxy: Some((
                        listen,
                        ProxySettings {
                            upstream,
                            pod_header: args.pod_header.clone(),
                            max_body: args.max_body,
                            connect_timeout,
                        },
                    )),
                    metrics,
                    interval: duration("--interval", &args.interval)?,
                    duration: args
                        .duration
                        .as_deref()
                        .map(|d| duration("--duration", d))
                        .transpose()?,
                    drain: duration("--drain", &args.drain)?,
                })
            }
            (None, None) => bail!(
                "give --upstream URL (proxy mode, in the request path), --mirror ADDR (copies of \
                 the requests) or --requests FILE (a request log)"
            ),
        };
        let block_size = args.block_size.unwrap_or(default_block);
        let pod_apis = per_pod(&args.pod_api, "--pod-api", &names)?;
        let routers = if args.router.routers.is_empty() && args.router.router_configs.is_empty() {
            Routers::new(Vec::new(), String::new(), block_size)
        } else {
            let llm_d = router_settings(&args.router, block_size, &args.model.model)?;
            let model = llm_d.index.model_name.clone().unwrap_or_default();
            let specs = router_specs(&args.router, &llm_d)?;
            // Each router's label is a metric label: two alike would be one series twice.
            for (i, (label, _)) in specs.iter().enumerate() {
                if specs[..i].iter().any(|(l, _)| l == label) {
                    bail!("--router {label:?} is given twice");
                }
            }
            Routers::new(specs, model, block_size)
        };
        // clap requires --record with --partial.
        let partial = match (&args.partial, &args.record) {
            (Some(path), Some(record)) => Some(corpus_of_record(args, record, path, block_size)?),
            _ => None,
        };
        let files = resolved_model(&args.model, say)?;
        let audit = audit_settings(&args.rendering, args.model.template_name.clone())?;
        Ok(WatchSettings {
            partial,
            files,
            audit,
            model_label: args.model.model.clone(),
            mode,
            engine,
            block_size,
            capacity: args.capacity,
            pod_apis,
            connect_timeout,
            conversations: args.conversations,
            pod_header: args.pod_header.clone(),
            record: args.record.clone(),
            per_request: args.per_request.clone(),
            routers,
            format: args.format.into(),
        })
    }

    /// The pods' names, in the order given.
    pub fn pod_names(&self) -> Vec<String> {
        match &self.mode {
            WatchMode::Log { captures, .. } => captures.iter().map(|(n, _)| n.clone()).collect(),
            WatchMode::Live(l) => l.pods.iter().map(|(n, _)| n.clone()).collect(),
        }
    }
}

/// The `kvaudit corpus` run over the record that writes `--partial`: corpus' own defaults,
/// with watch's model, rendering and routers at its block size.
fn corpus_of_record(
    args: &WatchArgs,
    record: &std::path::Path,
    partial: &std::path::Path,
    block_size: usize,
) -> Result<Box<crate::cli::CorpusArgs>> {
    use clap::Parser;
    // The model is watch's, set below; corpus' parser needs one to give its defaults.
    let parsed = crate::cli::Cli::try_parse_from([
        std::ffi::OsStr::new("kvaudit"),
        std::ffi::OsStr::new("corpus"),
        std::ffi::OsStr::new("--model=-"),
        record.as_os_str(),
    ])
    .context("the corpus run of --partial")?;
    let crate::cli::Command::Corpus(mut c) = parsed.command else {
        bail!("the corpus run of --partial is not a corpus run");
    };
    c.model = args.model.clone();
    c.rendering = args.rendering.clone();
    c.block_sizes = vec![block_size];
    c.router.choice = args.router.clone();
    c.router.engine_block_size = block_size;
    c.no_router = args.router.routers.is_empty() && args.router.router_configs.is_empty();
    c.partial = Some(partial.to_path_buf());
    Ok(c)
}

/// A flag's `NAME=VALUE`s, each for a pod `--pod` or `--bind` gave, at most one a pod.
fn per_pod(specs: &[String], flag: &str, pods: &[String]) -> Result<Vec<(String, String)>> {
    let mut out: Vec<(String, String)> = Vec::new();
    for spec in specs {
        let (name, value) = pod_spec(spec, flag)?;
        if !pods.contains(&name) {
            bail!("{flag} {spec:?}: no pod {name:?} is given with --pod or --bind");
        }
        if out.iter().any(|(n, _)| *n == name) {
            bail!("{flag} {spec:?}: pod {name:?} is named twice");
        }
        out.push((name, value));
    }
    Ok(out)
}

/// `NAME=SOURCE`: a name fit for a metric label, and where its events come from.
fn pod_spec(spec: &str, flag: &str) -> Result<(String, String)> {
    let Some((name, source)) = spec.split_once('=') else {
        bail!("{flag} {spec:?}: expected NAME=SOURCE, e.g. d0=tcp://10.0.0.5:5557");
    };
    let fit = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if name.is_empty() || name.len() > MAX_POD_NAME || !name.chars().all(fit) {
        bail!(
            "{flag} {spec:?}: a pod name is 1 to {MAX_POD_NAME} letters, digits, '-', '_' or '.'"
        );
    }
    if source.is_empty() {
        bail!("{flag} {spec:?}: nothing after '='");
    }
    Ok((name.to_string(), source.to_string()))
}

fn socket(flag: &str, text: &str) -> Result<SocketAddr> {
    text.parse().with_context(|| {
        format!("{flag} {text:?}: expected HOST:PORT with an IP address, e.g. 127.0.0.1:8001")
    })
}

/// `http://HOST[:PORT][/]` as the `HOST:PORT` the proxy connects to.
fn upstream_authority(url: &str) -> Result<String> {
    let Some(rest) = url.strip_prefix("http://") else {
        if url.starts_with("https://") {
            bail!(
                "--upstream {url:?}: the proxy speaks plain HTTP; put watch before the TLS \
                 terminator, or next to the router inside it"
            );
        }
        bail!("--upstream {url:?}: expected http://HOST:PORT");
    };
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority.is_empty() || authority.contains(['/', '?', '#', '@']) {
        bail!(
            "--upstream {url:?}: give only http://HOST:PORT (the proxy forwards each path as the \
             client sent it)"
        );
    }
    let has_port = authority
        .rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
    Ok(if has_port {
        authority.to_string()
    } else {
        format!("{authority}:80")
    })
}
