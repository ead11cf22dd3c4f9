//! A corpus run's totals written to a file for merging (`corpus --partial`), and the merge of
//! such files (`kvaudit merge`): the report one run over all the shards, in the order given,
//! would have printed — every figure equal, percentiles included.
//!
//! That holds because every total is already mergeable (see the module above): sums, exact
//! counts per value, top-k lists with ties broken by the place in the input. A shard's places
//! start at 0; the merge moves them past the rows of the shards before it, so ties and "first"
//! rows come out as in one run. A partial also carries what the numbers depend on (kvaudit's
//! version, the model's tokenizer and template digests, the corpus and audit settings):
//! partials that differ there do not describe one run, and merging them is an error.

use std::io::{BufReader, Read};
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use super::input::InputSummary;
use super::{CorpusReport, CorpusSettings, Tally};
use crate::audit::ModelInfo;

/// The `format` field of every partial.
pub const FORMAT: &str = "kvaudit-corpus-partial";
/// Bumped when the layout changes; a partial of another layout is refused. Layout 2: each
/// input file's digest; session keys as arrays.
pub const LAYOUT: u32 = 3;
/// A partial holds totals, not rows: it grows with the distinct opening messages (about 110
/// bytes each in the file) and distinct token counts, so 4 GiB is some 35 million
/// conversations.
pub const MAX_BYTES: u64 = 4 << 30;
/// Distinct session keys a merge holds: about 250 bytes each at a merge's peak (the totals'
/// table while it grows, and the partial being merged into it: 2.5 GB for 10 M keys in
/// `benches/merge_partials.py`), so about 8 GB at the limit, whatever the number of partials.
pub const MAX_SESSION_KEYS: usize = 32 << 20;

/// Why a partial cannot be written or merged: its totals and settings are not what one kvaudit
/// run writes (an edited or damaged file, or a shard given twice).
#[derive(Debug, thiserror::Error)]
pub enum PartialError {
    #[error(transparent)]
    BlockSizes(#[from] crate::align::BlockSizeError),
    /// A figure past what kvaudit ever writes.
    #[error("{0}")]
    OutOfBounds(String),
    /// Totals that contradict each other or the settings.
    #[error("{0}")]
    Inconsistent(String),
    #[error(
        "its input holds the same rows twice ({path}, digest {digest}): they would be counted twice"
    )]
    RowsTwice { path: String, digest: String },
}

/// What the audit's numbers depend on beyond the corpus settings, as the command saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSettings {
    /// The audit settings (rendering, server profile, reply format, kwargs, router view,
    /// routers, remedies), written as kvaudit prints them for debugging: equal text, equal
    /// settings within one version of kvaudit.
    pub audit: String,
    /// The time `strftime_now` returns, and whether the model's templates call it: only then
    /// must the shards agree on it.
    pub clock: String,
    pub clock_read: bool,
    /// SHA-256 of what the audit reads of the model besides tokenizer.json and the default
    /// template: every template by name, the special tokens, the stop token ids.
    pub model_files: String,
}

impl RunSettings {
    /// What a shard's numbers depend on beyond the corpus settings.
    pub fn new(
        settings: &crate::audit::AuditSettings,
        files: &crate::model::ModelFiles,
    ) -> RunSettings {
        use crate::model::ChatTemplates;
        let texts: Vec<&str> = match &files.templates {
            ChatTemplates::None => Vec::new(),
            ChatTemplates::Single { text, .. } => vec![text],
            ChatTemplates::Named { templates, .. } => templates.iter().map(|(_, t)| &**t).collect(),
        };
        let clock_read = texts
            .iter()
            .any(|t| crate::render::inspect_switches(t).1.strftime_now);
        let clock = format!("{:?}", settings.clock);
        let model_files = {
            use sha2::{Digest, Sha256};
            let described = serde_json::json!({
                "templates": match &files.templates {
                    ChatTemplates::None => serde_json::Value::Null,
                    ChatTemplates::Single { text, .. } => serde_json::json!(text),
                    ChatTemplates::Named { templates, .. } => serde_json::json!(templates),
                },
                "special_tokens": files.special_tokens,
                "stop_token_ids": files.stop_token_ids,
            });
            format!("{:x}", Sha256::digest(described.to_string().as_bytes()))
        };
        let mut without_clock = settings.clone();
        without_clock.clock = crate::render::Clock::Fixed(Default::default());
        RunSettings {
            audit: format!("{without_clock:?}"),
            clock,
            clock_read,
            model_files,
        }
    }
}

/// One shard's result. Only kvaudit writes partials: a field it does not write is refused.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Partial {
    pub format: String,
    pub layout: u32,
    pub kvaudit_version: String,
    pub model: ModelInfo,
    pub settings: CorpusSettings,
    pub run: RunSettings,
    pub input: InputSummary,
    pub tally: Tally,
}

impl Partial {
    pub fn new(report: &CorpusReport, run: RunSettings) -> Result<Partial> {
        check_selection(report.input.sampled.is_some(), report.input.limited)?;
        let p = Partial {
            format: FORMAT.into(),
            layout: LAYOUT,
            kvaudit_version: env!("CARGO_PKG_VERSION").into(),
            model: report.model.clone(),
            settings: report.settings.clone(),
            run,
            input: report.input.clone(),
            tally: report.tally.clone(),
        };
        // What `merge` would refuse is refused here, before the file is written.
        p.check_shape()
            .map_err(|e| anyhow::anyhow!("this run cannot be written as a partial: {e}"))?;
        Ok(p)
    }

    /// One line of JSON.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut out = serde_json::to_vec(self)?;
        out.push(b'\n');
        Ok(out)
    }

    /// Reads and checks one partial, streamed twice from the file so that memory holds what
    /// it describes and never a tree of its text: first its header and every count (kept:
    /// nothing), then its totals, typed. Its size is bounded before either.
    pub fn read(path: &Path) -> Result<Partial> {
        let shown = path.display();
        let open = || -> Result<BufReader<std::io::Take<std::fs::File>>> {
            let file =
                crate::input::open_regular(path).with_context(|| format!("cannot read {shown}"))?;
            let len = file
                .metadata()
                .with_context(|| format!("cannot read {shown}"))?
                .len();
            if len > MAX_BYTES {
                bail!("{shown} is {len} bytes; a partial is at most {MAX_BYTES} bytes");
            }
            // A file that grows while it is read stops at the limit too.
            Ok(BufReader::with_capacity(1 << 20, file.take(MAX_BYTES)))
        };
        let not_partial = |e: &dyn std::fmt::Display| {
            anyhow::anyhow!("{shown} is not a corpus partial (kvaudit corpus --partial): {e}")
        };
        // The header first, so that a file of another kind or layout gets that answer rather
        // than a complaint about some field deep inside it.
        let mut scan = Scan::default();
        let mut de = serde_json::Deserializer::from_reader(open()?);
        serde::Deserializer::deserialize_map(&mut de, TopLevel(&mut scan))
            .and_then(|()| de.end())
            .map_err(|e| not_partial(&e))?;
        if scan.format.as_deref() != Some(FORMAT) {
            bail!("{shown} is not a corpus partial (kvaudit corpus --partial writes them)");
        }
        if scan.layout != Some(u64::from(LAYOUT)) {
            bail!(
                "{shown} was written by kvaudit {} in layout {}; this kvaudit {} reads layout {LAYOUT}",
                scan.version.as_deref().map_or("(unknown)", |v| v
                    .char_indices()
                    .nth(64)
                    .map_or(v, |(i, _)| &v[..i])),
                scan.layout.map_or("(none)".into(), |l| l.to_string()),
                env!("CARGO_PKG_VERSION"),
            );
        }
        // Every count of the input and the totals within what one shard can hold, so that the
        // sums of [`MAX_PARTIALS`] of them cannot overflow.
        if let Some(bad) = scan.bad {
            bail!("{shown}: {bad}");
        }
        let mut de = serde_json::Deserializer::from_reader(open()?);
        let p = Partial::deserialize(&mut de)
            .and_then(|p| de.end().map(|()| p))
            .map_err(|e| anyhow::anyhow!("{shown} is not a valid corpus partial: {e}"))?;
        p.check_shape()
            .map_err(|e| anyhow::anyhow!("{shown}: {e}"))?;
        Ok(p)
    }

    fn check_shape(&self) -> Result<(), PartialError> {
        let t = &self.tally;
        let parts = [
            (
                t.transitions_with_rewrite,
                t.transitions,
                "transitions with a rewrite",
            ),
            (
                t.transitions_with_drift,
                t.transitions,
                "transitions with drift",
            ),
            (t.derived_replies, t.replies, "derived replies"),
            (t.conversations, t.rows, "conversations"),
        ];
        if let Some((_, _, what)) = parts.iter().find(|(part, whole, _)| part > whole) {
            return Err(PartialError::Inconsistent(format!(
                "more {what} than the totals they are part of"
            )));
        }
        if t.blocks
            .iter()
            .any(|b| b.reusable > b.next_tokens || b.uncached.count() != t.transitions)
        {
            return Err(PartialError::Inconsistent(
                "block totals that do not add up to the transitions".into(),
            ));
        }
        let sizes = &self.settings.block_sizes;
        crate::align::check_block_sizes("block_sizes", sizes)?;
        let blocks: Vec<usize> = t.blocks.iter().map(|b| b.block_size).collect();
        if &blocks != sizes {
            return Err(PartialError::Inconsistent(format!(
                "totals for block sizes {blocks:?}, settings for {sizes:?}"
            )));
        }
        if self.settings.worst > super::MAX_WORST {
            return Err(PartialError::OutOfBounds(format!(
                "--worst {}, more than kvaudit lists ({})",
                self.settings.worst,
                super::MAX_WORST
            )));
        }
        if self.kvaudit_version.len() > 64 {
            return Err(PartialError::OutOfBounds(
                "a kvaudit version longer than any kvaudit writes".into(),
            ));
        }
        let mut digests = std::collections::HashSet::new();
        if let Some(f) = self
            .input
            .files
            .iter()
            .filter(|f| f.rows > 0)
            .find(|f| !digests.insert(f.digest.as_str()))
        {
            return Err(PartialError::RowsTwice {
                path: f.path.clone(),
                digest: f.digest.clone(),
            });
        }
        if t.worst.len() > self.settings.worst {
            return Err(PartialError::Inconsistent(format!(
                "{} worst conversations kept, --worst {}",
                t.worst.len(),
                self.settings.worst
            )));
        }
        if t.partial.total() > t.conversations {
            return Err(PartialError::Inconsistent(format!(
                "{} conversations counted as stopped part-way, of {} audited",
                t.partial.total(),
                t.conversations
            )));
        }
        if let Some((reason, s)) = t
            .skipped
            .0
            .iter()
            .chain(&t.partial.0)
            .find(|(_, s)| s.rows.len() > super::EXAMPLE_ROWS || s.rows.len() as u64 > s.count)
        {
            return Err(PartialError::OutOfBounds(format!(
                "{} example rows for {} counted as {reason}: a partial keeps at most {}",
                s.rows.len(),
                s.count,
                super::EXAMPLE_ROWS
            )));
        }
        if t.worst.iter().any(|w| w.uncached.len() != sizes.len()) {
            return Err(PartialError::Inconsistent(
                "a worst conversation without a count per block size".into(),
            ));
        }
        if let Some(r) = &t.remedies {
            let lists = r.by_remedy.values().chain([&r.best]);
            if lists
                .flat_map(|x| [&x.before, &x.after])
                .any(|l| l.len() > sizes.len())
            {
                return Err(PartialError::Inconsistent(
                    "remedy totals for more block sizes than the settings".into(),
                ));
            }
        }
        let files = self
            .input
            .files
            .iter()
            .try_fold(0u64, |sum, f| sum.checked_add(f.rows))
            .ok_or_else(|| {
                PartialError::OutOfBounds("more rows in its files than a count holds".into())
            })?;
        if files != t.rows {
            return Err(PartialError::Inconsistent(format!(
                "{} rows in its files, {} in its totals",
                files, t.rows
            )));
        }
        Ok(())
    }
}

/// A shard read with `--sample` or `--limit` makes no partial: a sample or a limit of each
/// shard is not a sample or a limit of the whole.
pub fn check_selection(sampled: bool, limited: bool) -> Result<()> {
    if sampled || limited {
        bail!(
            "--partial cannot be combined with --sample or --limit: a merge of sampled or \
             limited shards is not one run over them (split the input instead)"
        );
    }
    Ok(())
}

/// The largest count a partial may hold: sums of [`MAX_PARTIALS`] of them stay within u64
/// (2^48 is 280 trillion: tokens of a shard, rows of a shard).
const MAX_COUNT: u64 = 1 << 48;
/// Partials one merge takes.
pub const MAX_PARTIALS: usize = 1 << 15;

/// What the first pass over a partial finds: its header, and the first count that is not one
/// (negative, fractional, or past [`MAX_COUNT`]).
#[derive(Default)]
struct Scan {
    format: Option<String>,
    layout: Option<u64>,
    version: Option<String>,
    bad: Option<String>,
}

/// The partial's top level: a map whose `format`, `layout` and `kvaudit_version` are kept and
/// whose `input` and `tally` have every number checked.
struct TopLevel<'s>(&'s mut Scan);

impl<'de> serde::de::Visitor<'de> for TopLevel<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        use serde::de::IgnoredAny;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "format" => self.0.format = map.next_value::<Scalar>()?.text,
                "kvaudit_version" => self.0.version = map.next_value::<Scalar>()?.text,
                "layout" => self.0.layout = map.next_value::<Scalar>()?.number,
                "input" | "tally" => map.next_value_seed(Counts(&mut self.0.bad))?,
                _ => map.next_value::<IgnoredAny>().map(drop)?,
            }
        }
        Ok(())
    }
}

/// A header value: a string or a whole number kept, anything else passed over.
#[derive(Default)]
struct Scalar {
    text: Option<String>,
    number: Option<u64>,
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Scalar, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Scalar;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a value")
            }
            fn visit_str<E>(self, v: &str) -> Result<Scalar, E> {
                Ok(Scalar {
                    text: Some(v.to_string()),
                    number: None,
                })
            }
            fn visit_u64<E>(self, v: u64) -> Result<Scalar, E> {
                Ok(Scalar {
                    text: None,
                    number: Some(v),
                })
            }
            fn visit_i64<E>(self, _: i64) -> Result<Scalar, E> {
                Ok(Scalar::default())
            }
            fn visit_f64<E>(self, _: f64) -> Result<Scalar, E> {
                Ok(Scalar::default())
            }
            fn visit_bool<E>(self, _: bool) -> Result<Scalar, E> {
                Ok(Scalar::default())
            }
            fn visit_unit<E>(self) -> Result<Scalar, E> {
                Ok(Scalar::default())
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<Scalar, A::Error> {
                serde::de::IgnoredAny
                    .visit_seq(seq)
                    .map(|_| Scalar::default())
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Scalar, A::Error> {
                serde::de::IgnoredAny
                    .visit_map(map)
                    .map(|_| Scalar::default())
            }
        }
        d.deserialize_any(V)
    }
}

/// Checks every number of a value as it streams past, keeping none of it; the first that is
/// not a count is written to the slot.
struct Counts<'s>(&'s mut Option<String>);

impl Counts<'_> {
    fn flag(&mut self, why: String) {
        self.0.get_or_insert(why);
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for Counts<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Counts<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("counts")
    }

    fn visit_u64<E>(mut self, n: u64) -> Result<(), E> {
        if n > MAX_COUNT {
            self.flag(format!(
                "a count of {n}, more than one shard can hold ({MAX_COUNT})"
            ));
        }
        Ok(())
    }

    fn visit_i64<E>(mut self, n: i64) -> Result<(), E> {
        // Only negative numbers come here (serde_json gives the others as u64).
        self.flag(format!(
            "{n} where a count belongs, which is not a non-negative integer"
        ));
        Ok(())
    }

    fn visit_f64<E>(mut self, x: f64) -> Result<(), E> {
        // Integers past u64 reach here as floats: too large, not malformed.
        self.flag(if x.fract() == 0.0 && x >= 2f64.powi(53) {
            format!("a count of {x:e}, more than one shard can hold ({MAX_COUNT})")
        } else {
            format!("{x:?} where a count belongs, which is not a non-negative integer")
        });
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Counts(self.0))?.is_some() {}
        Ok(())
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_key::<serde::de::IgnoredAny>()?.is_some() {
            map.next_value_seed(Counts(self.0))?;
        }
        Ok(())
    }
}

/// Why two partials do not describe one run, in words (`None`: they do).
fn mismatch(a: &Partial, b: &Partial) -> Option<String> {
    if a.kvaudit_version != b.kvaudit_version {
        return Some(format!(
            "kvaudit {} and kvaudit {}",
            a.kvaudit_version, b.kvaudit_version
        ));
    }
    let (ma, mb) = (&a.model, &b.model);
    if ma.tokenizer_sha256 != mb.tokenizer_sha256 {
        return Some(format!(
            "tokenizers {} ({}) and {} ({})",
            short(&ma.tokenizer_sha256),
            ma.source,
            short(&mb.tokenizer_sha256),
            mb.source
        ));
    }
    if ma.template_sha256 != mb.template_sha256 || ma.template_origin != mb.template_origin {
        return Some(format!(
            "chat templates {} {} and {} {}",
            ma.template_origin,
            short(&ma.template_sha256),
            mb.template_origin,
            short(&mb.template_sha256)
        ));
    }
    if ma.server != mb.server {
        return Some(format!(
            "--server {} and --server {}",
            ma.server.label(),
            mb.server.label()
        ));
    }
    // --jobs changes no figure (the report says which a run used: the first shard's).
    let (sa, sb) = (&a.settings, &b.settings);
    // --seed only matters with --sample, which --partial refuses.
    let same_corpus = sa.block_sizes == sb.block_sizes
        && sa.assumptions == sb.assumptions
        && sa.kv_bytes == sb.kv_bytes
        && sa.worst == sb.worst
        && sa.shared_keys == sb.shared_keys;
    if !same_corpus {
        return Some(format!(
            "corpus settings {} and {}",
            corpus_words(sa),
            corpus_words(sb)
        ));
    }
    if a.run.model_files != b.run.model_files {
        return Some(
            "model files that differ beyond the tokenizer and the default template (named \
             templates, special tokens, stop tokens)"
                .into(),
        );
    }
    if a.run.audit != b.run.audit {
        return Some(format!(
            "audit settings that differ at {}",
            first_difference(&a.run.audit, &b.run.audit)
        ));
    }
    if a.run.clock_read && a.run.clock != b.run.clock {
        return Some(format!(
            "clocks {} and {}, which the template prints with strftime_now (pass one --now to \
             every shard)",
            a.run.clock, b.run.clock
        ));
    }
    None
}

fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

fn corpus_words(s: &CorpusSettings) -> String {
    format!(
        "(--block-sizes {:?}, --prefill-affinity {}, --kv-recompute-threshold {}, \
         --kv-bytes-per-token {}, --worst {})",
        s.block_sizes,
        s.assumptions.prefill_affinity.name(),
        s.assumptions.kv_recompute_threshold,
        s.kv_bytes
            .as_ref()
            .map_or("(none)".into(), |k| k.bytes_per_token.to_string()),
        s.worst
    )
}

/// The two texts around where they first differ.
fn first_difference(a: &str, b: &str) -> String {
    let at = a
        .char_indices()
        .zip(b.chars())
        .find(|((_, x), y)| x != y)
        .map_or(a.len().min(b.len()), |((i, _), _)| i);
    let around = |s: &str| -> String {
        let (from, to) = (at.saturating_sub(30), at + 30);
        s.char_indices()
            .filter(|(i, _)| (from..to).contains(i))
            .map(|(_, c)| c)
            .collect()
    };
    format!("{:?} / {:?}", around(a), around(b))
}

/// The report of one run over the shards' inputs, in the order given: each partial is read,
/// checked against the first and merged before the next is read, so memory holds the totals
/// and one partial.
pub fn merge_files(paths: &[std::path::PathBuf]) -> Result<CorpusReport> {
    if paths.len() > MAX_PARTIALS {
        bail!(
            "{} partials: one merge takes at most {MAX_PARTIALS} (split the input into fewer \
             shards)",
            paths.len()
        );
    }
    // The first partial holds the totals: its places start at 0 as one run's do.
    let mut merged: Option<(String, Partial)> = None;
    let mut offset: u64 = 0;
    // Every input file with rows, by digest: the same rows merged twice would count twice.
    let mut audited: std::collections::HashMap<String, (String, String)> = Default::default();
    for path in paths {
        let name = path.display().to_string();
        let p = Partial::read(path)?;
        for f in p.input.files.iter().filter(|f| f.rows > 0) {
            if let Some((other, file)) =
                audited.insert(f.digest.clone(), (name.clone(), f.path.clone()))
            {
                bail!(
                    "{other} and {name} both audited the same rows: {file} and {} have the same \
                     bytes (digest {}), and merging them would count those rows twice",
                    f.path,
                    f.digest
                );
            }
        }
        let rows = p.tally.rows;
        let Some((first_name, first)) = &mut merged else {
            offset = rows;
            merged = Some((name, p));
            continue;
        };
        if let Some(why) = mismatch(first, &p) {
            bail!("{first_name} and {name} are not shards of one run: {why}");
        }
        let shifted = p
            .tally
            .shifted(offset)
            .with_context(|| format!("{name}: more rows than kvaudit counts"))?;
        first.tally.merge(shifted, first.settings.worst);
        if first.tally.sessions.len() > MAX_SESSION_KEYS {
            bail!(
                "{name}: the partials up to it hold over {MAX_SESSION_KEYS} distinct session \
                 keys, more than one merge keeps in memory (merge fewer shards at a time)"
            );
        }
        first.input.files.extend(p.input.files);
        offset = offset
            .checked_add(rows)
            .with_context(|| format!("{name}: more rows than kvaudit counts"))?;
    }
    let Some((_, all)) = merged else {
        bail!("no partial to merge");
    };
    Ok(CorpusReport {
        collisions: all.tally.sessions.collisions(all.settings.shared_keys),
        model: all.model,
        settings: all.settings,
        tally: all.tally,
        input: all.input,
    })
}
