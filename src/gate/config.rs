//! `kvaudit.toml`: what the gate audits and how strict it is. Every error names the file, the
//! line and the key (from the toml parser's spans), so a CI log points at the line to fix.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};
use serde::Deserialize;
use serde_json::{Map, Value as Json};
use toml::Spanned;

use super::codes::{Code, Level};
use crate::render::{ResendMode, ServerProfile};

/// The file `check` looks for in the current directory.
pub const FILE_NAME: &str = "kvaudit.toml";
/// Configs are small; a bigger file is a mistake, not a config.
const MAX_CONFIG_BYTES: u64 = 1 << 20;
/// Prompts are rendered at this time unless `[gate] now` says otherwise: a gate must give the
/// same tokens every day (dated templates are checked across midnight by `date_rollover`).
pub const DEFAULT_NOW: &str = "2026-01-15T10:00:00";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default, rename = "model")]
    models: Vec<Spanned<RawModel>>,
    #[serde(default)]
    gate: RawGate,
    #[serde(default, rename = "scenario")]
    scenarios: Vec<RawScenario>,
    #[serde(default, rename = "allow")]
    allows: Vec<Spanned<RawAllow>>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum RawResend {
    Content,
    Raw,
    ReasoningField,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawModel {
    source: Spanned<String>,
    template: Option<Spanned<String>>,
    template_name: Option<String>,
    tokenizer: Option<Spanned<String>>,
    #[serde(default)]
    template_kwargs: toml::Table,
    resend: Option<RawResend>,
    /// A `--server` value: transformers, vllm or sglang, `@release` allowed.
    server: Option<Spanned<String>>,
    #[serde(default)]
    server_template_kwargs: toml::Table,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGate {
    block_sizes: Option<Spanned<Vec<usize>>>,
    rewrite: Option<Level>,
    #[serde(default)]
    max_uncached: BTreeMap<Spanned<String>, usize>,
    date_rollover: Option<Level>,
    #[serde(default)]
    levels: BTreeMap<Spanned<String>, Level>,
    router: Option<Spanned<RawRouter>>,
    routers: Option<Spanned<Vec<String>>>,
    baseline: Option<Spanned<String>>,
    now: Option<Spanned<String>>,
    remedies: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRouter {
    engine_block_size: Option<usize>,
    index_block_size: Option<usize>,
    decider: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    conversation: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAllow {
    code: Spanned<String>,
    model: Option<String>,
    scenario: Option<String>,
    reason: Option<Spanned<String>>,
}

/// One model to audit.
#[derive(Debug, Clone)]
pub struct ModelConfig {
    /// Hub id (`org/name[@revision]`) or a directory (resolved against the config's folder).
    pub source: String,
    pub template: Option<PathBuf>,
    pub template_name: Option<String>,
    pub tokenizer: Option<PathBuf>,
    pub template_kwargs: Map<String, Json>,
    pub resend: ResendMode,
    pub server: ServerProfile,
    pub server_template_kwargs: Map<String, Json>,
    /// `kvaudit.toml:3`, for errors about this model.
    pub location: String,
}

#[derive(Debug, Clone)]
pub struct RouterConfig {
    pub engine_block_size: usize,
    pub index_block_size: usize,
    pub decider: crate::routers::llm_d::decider::DeciderConfig,
}

#[derive(Debug, Clone)]
pub struct GateOptions {
    pub block_sizes: Vec<usize>,
    pub rewrite: Level,
    pub date_rollover: Level,
    pub max_uncached: BTreeMap<usize, usize>,
    pub levels: BTreeMap<Code, Level>,
    pub router: Option<RouterConfig>,
    /// Other routers to ask about every transition (`routers = ["dynamo", ...]`, `check
    /// --router`): KVA407 when one sends a turn elsewhere that the pod could serve.
    pub routers: Vec<String>,
    pub baseline: Option<PathBuf>,
    pub now: chrono::NaiveDateTime,
    /// Measure every remedy of each rewrite point (as `diff-turns --remedies`) and quote the
    /// best in the finding's help: it re-renders the conversation once per remedy tried.
    pub remedies: bool,
}

impl Default for GateOptions {
    fn default() -> Self {
        GateOptions {
            block_sizes: vec![16, 64],
            rewrite: Level::Deny,
            date_rollover: Level::Warn,
            max_uncached: BTreeMap::new(),
            levels: BTreeMap::new(),
            router: None,
            routers: Vec::new(),
            baseline: None,
            now: default_now(),
            remedies: true,
        }
    }
}

pub fn default_now() -> chrono::NaiveDateTime {
    crate::render::parse_time(DEFAULT_NOW).unwrap_or_default()
}

impl GateOptions {
    /// The level a code's findings get: `[gate] levels` first, then the code's knob, then
    /// the table's default.
    pub fn level(&self, code: Code) -> Level {
        if let Some(l) = self.levels.get(&code) {
            return *l;
        }
        match code.info().knob {
            super::codes::Knob::Rewrite => self.rewrite,
            super::codes::Knob::DateRollover => self.date_rollover,
            super::codes::Knob::None => code.info().default_level,
        }
    }
}

/// A conversation file, named as the config writes it (stable across checkouts: the lock and
/// the allows refer to it by that name).
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    pub name: String,
    pub path: PathBuf,
}

#[derive(Debug, Clone)]
pub struct Allow {
    pub code: Code,
    pub model: Option<String>,
    pub scenario: Option<String>,
    pub reason: String,
    pub location: String,
}

#[derive(Debug, Clone, Default)]
pub struct GateConfig {
    /// The config file (None: built from flags alone).
    pub path: Option<PathBuf>,
    /// Its folder with every symlink followed: what the config names is read and written
    /// inside it (see [`confine`]).
    pub root: Option<PathBuf>,
    pub models: Vec<ModelConfig>,
    pub gate: GateOptions,
    /// Conversation files; empty means the built-in probe set.
    pub scenarios: Vec<Scenario>,
    pub allows: Vec<Allow>,
}

/// Turns byte spans into `file:line: key: message`.
struct Locator<'a> {
    file: String,
    text: &'a str,
}

impl Locator<'_> {
    fn line(&self, span: &Range<usize>) -> usize {
        let at = span.start.min(self.text.len());
        self.text[..at].bytes().filter(|&b| b == b'\n').count() + 1
    }

    fn at(&self, span: &Range<usize>) -> String {
        format!("{}:{}", self.file, self.line(span))
    }

    /// The dotted key a span is in: the table header above it, and the key on its line.
    fn key(&self, span: &Range<usize>) -> String {
        let line_no = self.line(span);
        let lines: Vec<&str> = self.text.lines().collect();
        let line = lines.get(line_no - 1).copied().unwrap_or("").trim();
        let header = |l: &str| {
            l.strip_prefix("[[")
                .and_then(|r| r.split_once("]]"))
                .or_else(|| l.strip_prefix('[').and_then(|r| r.split_once(']')))
                .map(|(h, _)| h.trim().to_string())
        };
        if let Some(h) = header(line) {
            return h;
        }
        let table = lines[..line_no.saturating_sub(1).min(lines.len())]
            .iter()
            .rev()
            .find_map(|l| header(l.trim()));
        let own = line
            .split_once('=')
            .map(|(k, _)| k.trim().trim_matches('"').to_string())
            .filter(|k| !k.is_empty() && !k.starts_with('#'));
        match (table, own) {
            (Some(t), Some(k)) => format!("{t}.{k}"),
            (Some(t), None) => t,
            (None, Some(k)) => k,
            (None, None) => "(top level)".into(),
        }
    }

    fn error(&self, span: &Range<usize>, message: impl std::fmt::Display) -> anyhow::Error {
        anyhow!("{}: {}: {}", self.at(span), self.key(span), message)
    }
}

/// Reads and checks a config file. Paths in it are relative to its folder.
pub fn load(path: &Path) -> Result<GateConfig> {
    let bytes = crate::input::read_bounded(path, MAX_CONFIG_BYTES)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let text =
        String::from_utf8(bytes).map_err(|_| anyhow!("{}: not UTF-8 text", path.display()))?;
    parse(&text, path)
}

pub fn parse(text: &str, path: &Path) -> Result<GateConfig> {
    let loc = Locator {
        file: path.display().to_string(),
        text,
    };
    let raw: RawConfig = toml::from_str(text).map_err(|e| match e.span() {
        Some(span) => loc.error(&span, e.message().trim()),
        None => anyhow!("{}: {}", loc.file, e.message().trim()),
    })?;
    let base = path.parent().unwrap_or(Path::new("")).to_path_buf();
    let root = crate::output::resolve(&base)
        .with_context(|| format!("cannot resolve the folder of {}", path.display()))?;
    let rel = |p: &str| -> PathBuf {
        let p = Path::new(p);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            base.join(p)
        }
    };
    // Every file the config names is inside its folder (see `confine`).
    let inside = |p: &Spanned<String>| -> Result<PathBuf> {
        let joined = rel(p.get_ref());
        confine(&root, &joined).map_err(|why| loc.error(&p.span(), why))?;
        Ok(joined)
    };

    let mut models = Vec::new();
    for m in &raw.models {
        let span = m.span();
        let m = m.get_ref();
        if m.source.get_ref().trim().is_empty() {
            return Err(loc.error(&m.source.span(), "the model source is empty"));
        }
        let source = m.source.get_ref().clone();
        // A directory is relative to the config; a Hub id stays as written. A model directory
        // given as an absolute path may be anywhere (a shared model folder on the machine):
        // only the fixed names of a model repository are read from it.
        let local = rel(&source);
        let source = if Path::new(&source).is_absolute() {
            source
        } else if local.is_dir() || source.starts_with('.') {
            inside(&m.source)?.display().to_string()
        } else {
            source
        };
        models.push(ModelConfig {
            source,
            template: m.template.as_ref().map(inside).transpose()?,
            template_name: m.template_name.clone(),
            tokenizer: m.tokenizer.as_ref().map(inside).transpose()?,
            template_kwargs: to_json(&m.template_kwargs),
            resend: match m.resend.unwrap_or(RawResend::Content) {
                RawResend::Content => ResendMode::Content,
                RawResend::Raw => ResendMode::Raw,
                RawResend::ReasoningField => ResendMode::ReasoningField,
            },
            server: match &m.server {
                None => ServerProfile::Transformers,
                Some(text) => match ServerProfile::parse(text.get_ref()) {
                    Some(p) if p != ServerProfile::Llamacpp => p,
                    Some(_) => {
                        return Err(loc.error(
                            &text.span(),
                            "server: the gate renders as transformers, vllm or sglang",
                        ));
                    }
                    None => {
                        return Err(loc.error(
                            &text.span(),
                            format!("server: {}", ServerProfile::unknown(text.get_ref())),
                        ));
                    }
                },
            },
            server_template_kwargs: to_json(&m.server_template_kwargs),
            location: loc.at(&span),
        });
        let last = models.last().expect("just pushed");
        if last.server == ServerProfile::Transformers && !last.server_template_kwargs.is_empty() {
            return Err(loc.error(
                &span,
                "server_template_kwargs needs server = \"vllm\" or \"sglang\"",
            ));
        }
    }

    let mut gate = GateOptions::default();
    let g = &raw.gate;
    if let Some(b) = &g.block_sizes {
        crate::align::check_block_sizes("block_sizes", b.get_ref())
            .map_err(|e| loc.error(&b.span(), e))?;
        gate.block_sizes = b.get_ref().clone();
    }
    gate.rewrite = g.rewrite.unwrap_or(gate.rewrite);
    gate.date_rollover = g.date_rollover.unwrap_or(gate.date_rollover);
    for (k, v) in &g.max_uncached {
        let block: usize = k.get_ref().parse().ok().filter(|&b| b > 0).ok_or_else(|| {
            loc.error(
                &k.span(),
                "max_uncached keys are block sizes, e.g. { 16 = 48 }",
            )
        })?;
        if !gate.block_sizes.contains(&block) {
            return Err(loc.error(
                &k.span(),
                format!(
                    "block size {block} is not in block_sizes {:?}",
                    gate.block_sizes
                ),
            ));
        }
        gate.max_uncached.insert(block, *v);
    }
    for (k, v) in &g.levels {
        let code = Code::parse(k.get_ref()).ok_or_else(|| {
            loc.error(
                &k.span(),
                format!(
                    "unknown code {:?} (see kvaudit check --list-codes)",
                    k.get_ref()
                ),
            )
        })?;
        gate.levels.insert(code, *v);
    }
    if let Some(r) = &g.router {
        let span = r.span();
        let r = r.get_ref();
        let engine = r.engine_block_size.unwrap_or(16);
        let index = r.index_block_size.unwrap_or(64);
        for (what, b) in [("engine_block_size", engine), ("index_block_size", index)] {
            crate::align::check_block_size(what, b).map_err(|e| loc.error(&span, e))?;
        }
        let text = r
            .decider
            .clone()
            .unwrap_or_else(|| "non-cached-tokens=512,prompt-tokens=1024".into());
        let decider = crate::routers::llm_d::decider::DeciderConfig::parse(&text)
            .map_err(|e| loc.error(&span, format!("decider {text:?}: {e}")))?;
        gate.router = Some(RouterConfig {
            engine_block_size: engine,
            index_block_size: index,
            decider,
        });
    }
    if let Some(list) = &g.routers {
        let base = crate::routers::llm_d::view::RouterSettings::default();
        for text in list.get_ref() {
            crate::routers::Spec::parse(text, &base)
                .map_err(|e| loc.error(&list.span(), format!("router {text:?}: {e}")))?;
        }
        gate.routers = list.get_ref().clone();
    }
    gate.baseline = g.baseline.as_ref().map(inside).transpose()?;
    gate.remedies = g.remedies.unwrap_or(gate.remedies);
    if let Some(now) = &g.now {
        gate.now = crate::render::parse_time(now.get_ref())
            .ok_or_else(|| loc.error(&now.span(), "expected a time like 2026-01-15T10:00:00"))?;
    }

    let scenarios = raw
        .scenarios
        .iter()
        .map(|s| {
            Ok(Scenario {
                name: s.conversation.get_ref().clone(),
                path: inside(&s.conversation)?,
            })
        })
        .collect::<Result<_>>()?;

    let mut allows = Vec::new();
    for a in &raw.allows {
        let span = a.span();
        let a = a.get_ref();
        let code = Code::parse(a.code.get_ref()).ok_or_else(|| {
            loc.error(
                &a.code.span(),
                format!(
                    "unknown code {:?} (see kvaudit check --list-codes)",
                    a.code.get_ref()
                ),
            )
        })?;
        let reason = match &a.reason {
            Some(r) if !r.get_ref().trim().is_empty() => r.get_ref().trim().to_string(),
            Some(r) => return Err(loc.error(&r.span(), "the reason is empty")),
            None => {
                return Err(loc.error(
                    &span,
                    "an [[allow]] needs a reason = \"...\" saying why the finding is accepted",
                ));
            }
        };
        allows.push(Allow {
            code,
            model: a.model.clone(),
            scenario: a.scenario.clone(),
            reason,
            location: loc.at(&span),
        });
    }

    Ok(GateConfig {
        path: Some(path.to_path_buf()),
        root: Some(root),
        models,
        gate,
        scenarios,
        allows,
    })
}

/// Why [`confine`] refused a path. Paths are shown with `{:?}` (quoted, escaped): they come
/// from an untrusted checkout and may hold anything.
#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    #[error("cannot resolve {path:?}: {error}")]
    Unresolvable {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error(
        "{:?} leads to {} through a symlink, outside the config's folder {} (kvaudit reads and writes only inside it)",
        path.display(),
        real.display(),
        root.display()
    )]
    ThroughSymlink {
        path: PathBuf,
        real: PathBuf,
        root: PathBuf,
    },
    #[error(
        "{:?} is outside the config's folder {} (kvaudit reads and writes only inside it)",
        path.display(),
        root.display()
    )]
    Outside { path: PathBuf, root: PathBuf },
}

/// Refuses a path a config names (`template`, `tokenizer`, a relative model `source`, a
/// `[[scenario]]`, the baseline) unless it leads inside `root`, the config's folder with its
/// symlinks followed: a checkout is untrusted, and `../x`, `/x` or a committed symlink must
/// not make kvaudit write a file elsewhere, nor read one whose text a report or an error line
/// would show. A symlink that stays inside is followed. Returns why, for the caller to place.
pub fn confine(root: &Path, path: &Path) -> std::result::Result<PathBuf, ConfineError> {
    let real = crate::output::resolve(path).map_err(|error| ConfineError::Unresolvable {
        path: path.to_path_buf(),
        error,
    })?;
    if real.starts_with(root) {
        return Ok(real);
    }
    let lexical = crate::output::resolve(&lexical_parent(path)).ok();
    let (path, root) = (path.to_path_buf(), root.to_path_buf());
    Err(match lexical {
        Some(parent) if parent.starts_with(&root) => {
            ConfineError::ThroughSymlink { path, real, root }
        }
        _ => ConfineError::Outside { path, root },
    })
}

/// The folder `path` names lexically (symlinks in it are still followed by `resolve`).
fn lexical_parent(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// `kvaudit init`: a commented config for the models given, every knob at its default.
pub fn starter(models: &[String]) -> String {
    let mut out = String::from(
        "# kvaudit.toml: the CI gate on chat-template and tokenizer changes (`kvaudit check`).\n\
         # Codes: `kvaudit check --list-codes`; one explained: `kvaudit check --explain KVA101`.\n\n",
    );
    for m in models {
        let quoted = toml::Value::String(m.clone()).to_string();
        out.push_str(&format!(
            "[[model]]\n\
             # Hub id (pin the revision with @<commit>) or a local directory.\n\
             source = {quoted}\n\
             # The template under review, instead of the model's own:\n\
             # template = \"chat_template.jinja\"\n\
             # template_name = \"tool_use\"\n\
             # template_kwargs = {{ enable_thinking = false }}\n\
             # How clients send replies back: content | raw | reasoning_field.\n\
             resend = \"content\"\n\
             # Whose request preprocessing applies: transformers | vllm | sglang\n\
             # (a release as `sglang@0.5.23`, `sglang@main`, `vllm@0.32`).\n\
             server = \"transformers\"\n\n"
        ));
    }
    out.push_str(
        "[gate]\n\
         block_sizes = [16, 64]\n\
         # deny | warn | note | allow, for every rewrite point (KVA101-KVA107).\n\
         rewrite = \"deny\"\n\
         # Render across midnight and report dated templates (KVA202).\n\
         date_rollover = \"warn\"\n\
         # Ceilings on uncached tokens per block size (KVA201):\n\
         # max_uncached = { 16 = 48 }\n\
         # Any code's level: levels = { KVA203 = \"deny\" }\n\
         # The router view (llm-d index and P/D decider, KVA401/KVA402):\n\
         # router = { engine_block_size = 16, index_block_size = 64, decider = \"non-cached-tokens=512\" }\n\
         # Other routers to ask (KVA407 when one sends a turn away from a pod that could serve it):\n\
         # routers = [\"dynamo\", \"vllm-router\"]\n\
         # Written by `kvaudit check --update-baseline`; regressions against it fail (KVA501-KVA504).\n\
         baseline = \"kvaudit.lock\"\n\
         # Measure the fixes of each rewrite point and quote the best in its help line\n\
         # (as `kvaudit diff-turns --remedies`); false saves the re-renders.\n\
         remedies = true\n\n\
         # Conversations to audit (default: the built-in probe set).\n\
         # [[scenario]]\n\
         # conversation = \"tests/conversations/tool-loop.json\"\n\n\
         # Accepted findings; a reason is required, and an allow that matches nothing is reported.\n\
         # [[allow]]\n\
         # code = \"KVA101\"\n\
         # model = \"Qwen/Qwen3-8B\"\n\
         # reason = \"thinking mode is off in production\"\n",
    );
    out
}

fn to_json(t: &toml::Table) -> Map<String, Json> {
    match serde_json::to_value(t) {
        Ok(Json::Object(m)) => m,
        _ => Map::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        parse(text, Path::new("kvaudit.toml"))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn errors_name_file_line_and_key() {
        let e = err("[[model]]\nsource = \"Qwen/Qwen3-8B\"\n\n[gate]\nrwrite = \"deny\"\n");
        assert!(
            e.starts_with("kvaudit.toml:5: gate.rwrite: unknown field `rwrite`"),
            "{e}"
        );
        let e = err("[gate]\nblock_sizes = [16, 64]\nrewrite = \"sometimes\"\n");
        assert!(e.starts_with("kvaudit.toml:3: gate.rewrite: "), "{e}");
        assert!(e.contains("sometimes"), "{e}");
        let e = err("[gate]\nblock_sizes = \"16\"\n");
        assert!(e.starts_with("kvaudit.toml:2: gate.block_sizes: "), "{e}");
        let e = err("[gate]\nblock_sizes = [0]\n");
        assert!(
            e.starts_with(
                "kvaudit.toml:2: gate.block_sizes: block_sizes 0: a block size is 1 to 65536"
            ),
            "{e}"
        );
        let e = err("[gate]\nmax_uncached = { 32 = 10 }\n");
        assert!(
            e.starts_with("kvaudit.toml:2: gate.max_uncached: block size 32"),
            "{e}"
        );
        let e = err("[[allow]]\ncode = \"KVA101\"\nmodel = \"m\"\n");
        assert!(
            e.starts_with("kvaudit.toml:1: allow: an [[allow]] needs a reason"),
            "{e}"
        );
        let e = err("[[allow]]\ncode = \"KVA999\"\nreason = \"x\"\n");
        assert!(
            e.starts_with("kvaudit.toml:2: allow.code: unknown code \"KVA999\""),
            "{e}"
        );
        let e = err("[gate]\nrouter = { engine_block_size = 16, decider = \"bogus\" }\n");
        assert!(e.starts_with("kvaudit.toml:2: gate.router: decider"), "{e}");
        let e = err("[[model]]\nsource = \"m\"\nserver = \"sglang@0.4\"\n");
        assert!(
            e.starts_with("kvaudit.toml:3: model.server: server: kvaudit does not know how \"sglang@0.4\" renders"),
            "{e}"
        );
        let e = err("[[model]]\nsource = \"m\"\nserver = \"llamacpp\"\n");
        assert!(
            e.contains("the gate renders as transformers, vllm or sglang"),
            "{e}"
        );
    }

    #[test]
    fn a_server_release_is_read() {
        for (text, want) in [
            ("sglang", ServerProfile::Sglang(Default::default())),
            ("sglang@main", ServerProfile::parse("sglang@main").unwrap()),
            ("vllm@0.32", ServerProfile::Vllm),
        ] {
            let c = parse(
                &format!("[[model]]\nsource = \"m\"\nserver = \"{text}\"\n"),
                Path::new("kvaudit.toml"),
            )
            .unwrap();
            assert_eq!(c.models[0].server, want, "{text}");
        }
    }

    #[test]
    fn the_starter_parses_to_the_defaults() {
        let text = starter(&["Qwen/Qwen3-8B@abc".into(), "my \"odd\" dir".into()]);
        let c = parse(&text, Path::new("kvaudit.toml")).unwrap();
        assert_eq!(c.models.len(), 2);
        assert_eq!(c.models[1].source, "my \"odd\" dir");
        assert_eq!(c.gate.block_sizes, vec![16, 64]);
        assert_eq!(c.gate.level(Code::ReasoningDropped), Level::Deny);
        assert_eq!(c.gate.baseline, Some(PathBuf::from("kvaudit.lock")));
    }

    #[test]
    fn a_full_config_parses() {
        let c = parse(
            r#"
[[model]]
source = "Qwen/Qwen3-8B@abc"
template = "chat_template.jinja"
template_kwargs = { enable_thinking = false }
resend = "reasoning_field"

[gate]
block_sizes = [16, 64]
rewrite = "warn"
max_uncached = { 16 = 48 }
date_rollover = "deny"
levels = { KVA203 = "allow", index_behind_engine = "deny" }
router = { engine_block_size = 16, index_block_size = 64, decider = "non-cached-tokens=512" }
baseline = "kvaudit.lock"

[[scenario]]
conversation = "tests/conversations/tool-loop.json"

[[allow]]
code = "KVA101"
model = "Qwen/Qwen3-8B"
reason = "thinking mode is off in production"
"#,
            Path::new("ci/kvaudit.toml"),
        )
        .unwrap();
        assert_eq!(c.models[0].source, "Qwen/Qwen3-8B@abc");
        assert_eq!(
            c.models[0].template,
            Some(PathBuf::from("ci/chat_template.jinja"))
        );
        assert_eq!(
            c.models[0].template_kwargs["enable_thinking"],
            Json::Bool(false)
        );
        assert_eq!(c.models[0].resend, ResendMode::ReasoningField);
        assert_eq!(c.gate.level(Code::ReasoningDropped), Level::Warn);
        assert_eq!(c.gate.level(Code::DateRollover), Level::Deny);
        assert_eq!(c.gate.level(Code::RetokenizationDrift), Level::Allow);
        assert_eq!(c.gate.level(Code::IndexBehindEngine), Level::Deny);
        assert_eq!(c.gate.level(Code::TemplateError), Level::Deny);
        assert_eq!(c.gate.max_uncached[&16], 48);
        assert_eq!(c.gate.baseline, Some(PathBuf::from("ci/kvaudit.lock")));
        assert_eq!(
            c.scenarios[0].path,
            PathBuf::from("ci/tests/conversations/tool-loop.json")
        );
        assert_eq!(c.scenarios[0].name, "tests/conversations/tool-loop.json");
        assert_eq!(c.allows[0].code, Code::ReasoningDropped);
        assert_eq!(c.allows[0].location, "ci/kvaudit.toml:20");
    }
}
