//! A model's audit turned into gate findings, lock entries and baseline changes, and the
//! `[[allow]]` entries applied to them.

use std::path::Path;

use super::codes::{Code, Level};
use super::config::{Allow, GateOptions, ModelConfig};
use super::lock::{self, Change, Lock, LockEntry};
use super::{Evidence, GateFinding};
use crate::align::{RewriteClass, Uncached};
use crate::audit::{
    self, AuditSettings, ConversationAudit, ConversationRemedies, DiffTurnsReport, Remedy,
    RemedyKind,
};
use crate::model::ModelFiles;
use crate::render::Conversation;
use crate::routers::llm_d::decider::{Verdict, decide};
use crate::tokenize::{Tokenizer, sha256_hex};

/// One model, audited (or stopped by a template error, which is a finding, not a crash).
pub struct Audited {
    pub model: ModelConfig,
    /// The file SARIF points at: the template under review, else the model's own.
    pub template_file: String,
    template_text: String,
    /// The template is a string inside a JSON file (tokenizer_config.json): its lines are not
    /// the file's, so findings point at the `chat_template` key's line.
    json_line: Option<usize>,
    pub template_sha256: String,
    pub tokenizer_sha256: String,
    pub scenarios: Vec<String>,
    pub report: Option<DiffTurnsReport>,
    /// A model-level template error (no transition could be audited).
    fatal: Option<(Code, String)>,
    /// Why kvaudit refused to evaluate the template (a bound on time, size or depth): no
    /// finding about the template, but an input check cannot pass (`check` stops with it).
    pub limit: Option<String>,
}

pub fn audit_with(
    m: &ModelConfig,
    files: &ModelFiles,
    tok: &Tokenizer,
    conversations: &[Conversation],
    settings: &AuditSettings,
) -> Audited {
    let name = crate::audit::template_name(files, m.server, m.template_name.as_deref());
    let selected = files.select_template(name, false).ok();
    let template_file = match &m.template {
        Some(t) => t.display().to_string(),
        None => {
            let origin = selected
                .as_ref()
                .map_or("chat_template.jinja", |s| s.origin.as_str());
            let file = origin.split('#').next().unwrap_or(origin);
            files.dir.join(file).display().to_string()
        }
    };
    let template_text = selected
        .as_ref()
        .map(|s| s.text.clone())
        .unwrap_or_default();
    let json_line = template_file.ends_with(".json").then(|| {
        crate::input::read_text(Path::new(&template_file), 64 << 20)
            .ok()
            .and_then(|t| t.lines().position(|l| l.contains("\"chat_template\"")))
            .map_or(1, |i| i + 1)
    });
    let mut a = Audited {
        json_line,
        model: m.clone(),
        template_file,
        template_sha256: sha256_hex(template_text.as_bytes()),
        template_text,
        tokenizer_sha256: tok.sha256().to_string(),
        scenarios: conversations.iter().map(|c| c.source.clone()).collect(),
        report: None,
        fatal: None,
        limit: None,
    };
    if let Err(e) = audit::check_special_tokens(files, tok) {
        a.fatal = Some((Code::SpecialTokenMissing, crate::error::chain_text(&e)));
        return a;
    }
    match audit::diff_turns(files, tok, conversations, settings) {
        Ok(r) => {
            a.limit = r
                .errors
                .iter()
                .find(|e| e.limit)
                .map(|e| format!("{}: {}", e.source, e.message));
            a.report = Some(r);
        }
        Err(e) if audit::hit_limit(&e) => a.limit = Some(crate::error::chain_text(&e)),
        Err(e) => a.fatal = Some((Code::TemplateError, crate::error::chain_text(&e))),
    }
    a
}

impl Audited {
    fn finding(&self, code: Code, gate: &GateOptions, message: String) -> GateFinding {
        let info = code.info();
        GateFinding {
            code,
            name: info.name,
            level: gate.level(code),
            model: self.model.source.clone(),
            scenario: None,
            transition: None,
            from_prompt: None,
            message,
            evidence: None,
            help: info.help.to_string(),
            remedies: None,
            template_file: Some(self.template_file.clone()),
            template_line: 1,
            allowed: None,
            baselined: false,
        }
    }
}

/// Every finding of one model that does not need a baseline.
pub fn model_findings(a: &Audited, gate: &GateOptions) -> Vec<GateFinding> {
    let mut out = Vec::new();
    if let Some((code, message)) = &a.fatal {
        out.push(a.finding(*code, gate, message.clone()));
    }
    if let Some(r) = &a.report {
        for c in &r.conversations {
            for i in 0..c.transitions.len() {
                out.extend(transition_findings(a, c, i, gate));
            }
        }
        for e in &r.errors {
            let mut f = a.finding(Code::TemplateError, gate, e.message.clone());
            f.scenario = Some(e.source.clone());
            out.push(f);
        }
    }
    out.retain(|f| f.level != Level::Allow);
    out
}

fn transition_findings(
    a: &Audited,
    c: &ConversationAudit,
    i: usize,
    gate: &GateOptions,
) -> Vec<GateFinding> {
    let t = &c.transitions[i];
    let evidence = Evidence {
        held_tokens: t.held_tokens,
        next_prompt_tokens: t.next_prompt_tokens,
        common_prefix_tokens: t.common_prefix_tokens,
        rewrite_position: t.rewrite.as_ref().map(|r| r.position),
        held: t
            .rewrite
            .as_ref()
            .map(|r| r.held.clone())
            .unwrap_or_default(),
        next: t
            .rewrite
            .as_ref()
            .map(|r| r.next.clone())
            .unwrap_or_default(),
        uncached: t.uncached.clone(),
    };
    let uncached = t
        .uncached
        .iter()
        .map(|u| format!("{}@{}", u.tokens, u.block_size))
        .collect::<Vec<_>>()
        .join(", ");
    let at = |code: Code, message: String| {
        let mut f = a.finding(code, gate, message);
        f.scenario = Some(c.source.clone());
        f.transition = Some(format!("{} -> {}", t.from_prompt, t.to_prompt));
        f.from_prompt = Some(t.from_prompt);
        f.evidence = Some(evidence.clone());
        f.template_line = a
            .json_line
            .unwrap_or_else(|| template_line(&a.template_text, code, &evidence));
        f
    };
    let mut out = Vec::new();
    if let Some(r) = &t.rewrite {
        let held: String = r.held.iter().map(|v| v.text.as_str()).collect();
        let next: String = r.next.iter().map(|v| v.text.as_str()).collect();
        let mut f = at(
            Code::for_rewrite(r.class),
            format!(
                "{}: held {}, next {}, common prefix {}; at {} held {:?} but next {:?}; uncached {}",
                r.class.name(),
                t.held_tokens,
                t.next_prompt_tokens,
                t.common_prefix_tokens,
                r.position,
                held,
                next,
                uncached
            ),
        );
        if let Some(found) = &c.remedies
            && let Some(list) = found
                .transitions
                .iter()
                .find(|x| x.from_prompt == t.from_prompt)
        {
            let at = (Some(r.position), Some(r.class));
            f.help = remedy_help(&t.uncached, at, found, &list.remedies);
            f.remedies = Some(list.remedies.clone());
        }
        out.push(f);
    }
    for u in &t.uncached {
        if let Some(&max) = gate.max_uncached.get(&u.block_size)
            && u.tokens > max
        {
            out.push(at(
                Code::UncachedAboveCeiling,
                format!(
                    "{} uncached tokens at block size {}, above the ceiling of {max}",
                    u.tokens, u.block_size
                ),
            ));
        }
    }
    if let Some(shift) = c.rollover.as_ref().and_then(|r| r.get(i))
        && shift.moved
    {
        let mut f = at(
            Code::DateRollover,
            format!(
                "rendered a day later the common prefix is {} instead of {}{}",
                shift.common_prefix_tokens,
                t.common_prefix_tokens,
                shift
                    .class
                    .map(|c| format!(" ({})", c.name()))
                    .unwrap_or_default()
            ),
        );
        if let (Some(found), Some(list)) = (&c.remedies, &shift.remedies) {
            let at = (shift.rewrite_position, shift.class);
            f.help = remedy_help(&shift.uncached, at, found, list);
            f.remedies = Some(list.clone());
        }
        out.push(f);
    }
    if let Some(d) = &t.retokenization_drift {
        let s: String = d.sampled.iter().map(|v| v.text.as_str()).collect();
        let e: String = d.encoded.iter().map(|v| v.text.as_str()).collect();
        out.push(at(
            Code::RetokenizationDrift,
            format!(
                "at {} the sampled ids give {s:?}, the tokenizer encodes {e:?}",
                d.position
            ),
        ));
    }
    if let Some(r) = c.routers.get(i).filter(|_| gate.router.is_some()) {
        if r.index_visible_tokens < r.engine_cached_tokens {
            out.push(at(
                Code::IndexBehindEngine,
                format!(
                    "the engine holds {} tokens of the next prompt, llm-d's index (block {}) sees {}",
                    r.engine_cached_tokens, r.index_block_size, r.index_visible_tokens
                ),
            ));
        }
        if let Some(cfg) = gate.router.as_ref().map(|g| &g.decider) {
            let engine = decide(cfg, t.next_prompt_tokens, r.engine_cached_tokens, 1);
            if r.decision.verdict == Verdict::PrefillDecode && engine.verdict == Verdict::DecodeOnly
            {
                out.push(at(
                    Code::DeciderPrefill,
                    format!(
                        "decode-only with the engine's {} cached tokens, prefill-decode with the index's {}",
                        r.engine_cached_tokens, r.index_visible_tokens
                    ),
                ));
            }
        }
    }
    if let (Some(r), Some(answers)) = (c.routers.get(i), c.answers.get(i)) {
        // What the decider does with what the pod really holds.
        let cfg = gate.router.as_ref().map(|g| g.decider).unwrap_or_default();
        let engine = decide(&cfg, t.next_prompt_tokens, r.engine_cached_tokens, 1);
        if engine.verdict == Verdict::DecodeOnly {
            for a in answers
                .iter()
                .filter(|a| a.decision == crate::routers::Decision::Other)
            {
                out.push(at(
                    Code::RouterSendsElsewhere,
                    format!(
                        "the pod holds {} of {} tokens, enough to stay decode-only, but {} credits {} and sends the turn elsewhere: {}",
                        r.engine_cached_tokens, t.next_prompt_tokens, a.label, a.visible_tokens, a.rule
                    ),
                ));
            }
        }
    }
    out.retain(|f| f.level != Level::Allow);
    out
}

/// A rewrite point's help: the best measured remedy that removes or reduces it, with the
/// numbers before and after, or that only a template change can help.
fn remedy_help(
    now: &[Uncached],
    (position, class_now): (Option<usize>, Option<RewriteClass>),
    found: &ConversationRemedies,
    remedies: &[Remedy],
) -> String {
    let helps = |r: &Remedy| {
        let pairs = || now.iter().zip(&r.uncached);
        r.removes_rewrite
            || (pairs().all(|(now, under)| under.tokens <= now.tokens)
                && pairs().any(|(now, under)| under.tokens < now.tokens))
    };
    let Some(best) = remedies.iter().find(|r| helps(r)) else {
        let switches = if found.switches.is_empty() {
            " (the template reads no history switch)"
        } else {
            ""
        };
        let tried = match remedies.len() {
            0 => "no remedy applies".to_string(),
            1 => "the one remedy measured does not reduce it".to_string(),
            n => format!("none of the {n} remedies measured reduces it"),
        };
        return format!("only a template change can remove this rewrite: {tried}{switches}");
    };
    let numbers = now
        .iter()
        .zip(&best.uncached)
        .map(|(now, under)| format!("{} -> {} at B={}", now.tokens, under.tokens, now.block_size))
        .collect::<Vec<_>>()
        .join(", ");
    let outcome = match best.rewrite {
        None => format!("removes the rewrite (uncached {numbers})"),
        // Say where the rewrite then is when that is not where it was.
        Some((at, class)) if position != Some(at) || class_now != Some(class) => format!(
            "uncached {numbers} (the rewrite is then at {at}, {})",
            class.name()
        ),
        Some(_) => format!("uncached {numbers}"),
    };
    format!("{}: {outcome}", remedy_action(best))
}

/// What to do for a remedy, in the words of the flag or kwarg that does it.
fn remedy_action(r: &Remedy) -> String {
    let field = |v: &Option<serde_json::Value>| {
        v.as_ref()
            .and_then(|v| v.as_str())
            .unwrap_or("reasoning_content")
            .to_string()
    };
    match r.kind {
        RemedyKind::Resend => match r.name.as_str() {
            "raw" => "resend the reasoning inside the reply's content (--resend raw)".into(),
            "reasoning_field" => format!(
                "resend the reasoning in the `{}` field (--resend reasoning-field)",
                field(&r.value)
            ),
            _ => "resend the reply's content only (--resend content)".into(),
        },
        RemedyKind::Kwarg => {
            let value = r.value.as_ref().map(|v| v.to_string()).unwrap_or_default();
            match r.with_resend {
                Some(_) => format!(
                    "set template kwarg {}={value} and resend the reasoning in its field (--resend reasoning-field)",
                    r.name
                ),
                None => format!("set template kwarg {}={value}", r.name),
            }
        }
        RemedyKind::PinDate => format!(
            "pin the date the template reads ({}) for the whole conversation",
            r.name
        ),
        RemedyKind::KeepRequest => {
            let what = match r.name.as_str() {
                "tools" => "tools",
                "kwargs_and_tools" => "kwargs and tools",
                _ => "kwargs",
            };
            let kept = r.kept_kwargs();
            let kept = if kept.is_empty() {
                String::new()
            } else {
                format!(" ({})", kept.join(", "))
            };
            format!("send the previous request's {what} again{kept}")
        }
    }
}

/// The template line a finding's text most likely comes from: a line that names what the
/// code is about, else one that holds the held side's text at the divergence, else line 1.
fn template_line(text: &str, code: Code, e: &Evidence) -> usize {
    let keys: &[&str] = match code {
        Code::ReasoningDropped => &["reasoning_content", "</think>", "<think>"],
        Code::GenerationPrefillNotReplayed => &["add_generation_prompt"],
        Code::DateChanged | Code::DateRollover => &["strftime_now", "date_string"],
        Code::SystemMoved => &["'system'", "\"system\""],
        Code::ContentTrimmed => &["| trim", "|trim", ".strip("],
        _ => &[],
    };
    // Comment lines name things too ("a template that trims ..."): they emit nothing.
    let find = |needle: &str| {
        text.lines()
            .position(|l| !l.trim_start().starts_with("{#") && l.contains(needle))
            .map(|i| i + 1)
    };
    keys.iter()
        .find_map(|k| find(k))
        .or_else(|| {
            let held: String = e.held.iter().map(|v| v.text.as_str()).collect();
            let held = held.trim();
            (held.chars().count() >= 2).then(|| find(held)).flatten()
        })
        .unwrap_or(1)
}

pub fn lock_entries(a: &Audited, gate: &GateOptions) -> Vec<LockEntry> {
    let Some(r) = &a.report else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for c in &r.conversations {
        for (i, t) in c.transitions.iter().enumerate() {
            out.push(LockEntry {
                model: a.model.source.clone(),
                scenario: c.source.clone(),
                from_prompt: t.from_prompt,
                to_prompt: t.to_prompt,
                template_sha256: a.template_sha256.clone(),
                tokenizer_sha256: a.tokenizer_sha256.clone(),
                held_tokens: t.held_tokens,
                next_prompt_tokens: t.next_prompt_tokens,
                common_prefix_tokens: t.common_prefix_tokens,
                uncached: t
                    .uncached
                    .iter()
                    .map(|u| (u.block_size.to_string(), u.tokens))
                    .collect(),
                rewrite: t.rewrite.as_ref().map(|r| r.class.name().to_string()),
                index_visible_tokens: c.routers.get(i).map(|r| r.index_visible_tokens),
                held_hash: lock::stream_hash(&t.held_ids),
                next_hash: lock::stream_hash(&t.next_ids),
                codes: transition_findings(a, c, i, gate)
                    .iter()
                    .map(|f| f.code.id().to_string())
                    .collect(),
            });
        }
    }
    out
}

/// Regressions and improvements against the baseline; findings already known there are
/// marked `baselined` (they are not a change).
pub fn baseline_findings(
    a: &Audited,
    now: &[LockEntry],
    baseline: &Lock,
    gate: &GateOptions,
    found: &mut [GateFinding],
) -> Vec<GateFinding> {
    for f in found.iter_mut() {
        if let (Some(s), Some(k)) = (&f.scenario, f.from_prompt)
            && let Some(was) = baseline.find((&f.model, s, k))
            && was.codes.iter().any(|c| c == f.code.id())
        {
            f.baselined = true;
        }
    }
    let mut out = Vec::new();
    for e in now {
        let Some(was) = baseline.find(e.key()) else {
            continue;
        };
        let why = lock::what_changed(was, e);
        for change in lock::compare(was, e) {
            let (code, what) = match change {
                Change::CommonPrefixShrank { was, now } => (
                    Code::CommonPrefixShrank,
                    format!("common prefix {was} -> {now}"),
                ),
                Change::UncachedGrew {
                    block_size,
                    was,
                    now,
                } => (
                    Code::UncachedGrew,
                    format!("uncached at block size {block_size}: {was} -> {now}"),
                ),
                Change::NewRewriteClass { was, now } => (
                    Code::NewRewriteClass,
                    format!("rewrite {} -> {now}", was.as_deref().unwrap_or("none")),
                ),
                Change::IndexVisibilityFell { was, now } => (
                    Code::IndexVisibilityFell,
                    format!("index sees {was} -> {now} tokens"),
                ),
                Change::Improved(what) => (Code::Improvement, what),
            };
            let mut f = a.finding(code, gate, format!("{what} ({why})"));
            f.scenario = Some(e.scenario.clone());
            f.transition = Some(format!("{} -> {}", e.from_prompt, e.to_prompt));
            f.from_prompt = Some(e.from_prompt);
            if f.level != Level::Allow {
                out.push(f);
            }
        }
    }
    out
}

/// A model source matches an allow's model when equal, equal without `@revision`, or a
/// directory whose path ends with it.
fn model_matches(source: &str, wanted: &str) -> bool {
    source == wanted
        || source.split('@').next() == Some(wanted)
        || Path::new(source).ends_with(wanted)
}

/// Silences what each allow matches; returns a warning per allow that matched nothing.
pub fn apply_allows(
    found: &mut [GateFinding],
    allows: &[Allow],
    gate: &GateOptions,
) -> Vec<GateFinding> {
    let mut unused = Vec::new();
    for a in allows {
        let mut used = false;
        for f in found.iter_mut() {
            if f.code == a.code
                && a.model
                    .as_deref()
                    .is_none_or(|m| model_matches(&f.model, m))
                && a.scenario
                    .as_deref()
                    .is_none_or(|s| f.scenario.as_deref() == Some(s))
            {
                f.allowed = Some(a.reason.clone());
                used = true;
            }
        }
        if !used && gate.level(Code::UnusedAllow) != Level::Allow {
            let info = Code::UnusedAllow.info();
            let (file, line) = a
                .location
                .rsplit_once(':')
                .map_or((a.location.as_str(), 1), |(f, l)| {
                    (f, l.parse().unwrap_or(1))
                });
            unused.push(GateFinding {
                code: Code::UnusedAllow,
                name: info.name,
                level: gate.level(Code::UnusedAllow),
                model: a.model.clone().unwrap_or_else(|| "*".into()),
                scenario: a.scenario.clone(),
                transition: None,
                from_prompt: None,
                message: format!(
                    "the [[allow]] of {} at {} matched no finding",
                    a.code.id(),
                    a.location
                ),
                evidence: None,
                help: info.help.to_string(),
                remedies: None,
                template_file: Some(file.to_string()),
                template_line: line,
                allowed: None,
                baselined: false,
            });
        }
    }
    unused
}
