//! `kvaudit.lock`: the numbers of every model × scenario × transition at the last accepted
//! state, as sorted TOML (one table per transition, so a change shows as a small diff), and
//! the comparison that turns a changed number into a regression or an improvement.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result, anyhow, bail};
use serde::{Deserialize, Serialize};

/// Bumped when the meaning or shape of an entry changes; older locks are refused.
pub const LOCK_SCHEMA_VERSION: u32 = 1;
const MAX_LOCK_BYTES: u64 = 64 << 20;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LockEntry {
    pub model: String,
    pub scenario: String,
    pub from_prompt: usize,
    pub to_prompt: usize,
    pub template_sha256: String,
    pub tokenizer_sha256: String,
    pub held_tokens: usize,
    pub next_prompt_tokens: usize,
    pub common_prefix_tokens: usize,
    /// Block size (as text: TOML keys are strings) → uncached tokens.
    pub uncached: BTreeMap<String, usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewrite: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_visible_tokens: Option<usize>,
    /// xxh3-64 of the held and next token ids (little-endian u32s).
    pub held_hash: String,
    pub next_hash: String,
    /// Codes found on this transition when the lock was written (known, so not reported again).
    #[serde(default)]
    pub codes: Vec<String>,
}

impl LockEntry {
    pub fn key(&self) -> (&str, &str, usize) {
        (&self.model, &self.scenario, self.from_prompt)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lock {
    pub schema_version: u32,
    pub kvaudit_version: String,
    #[serde(default, rename = "entry")]
    pub entries: Vec<LockEntry>,
}

impl Lock {
    pub fn new(mut entries: Vec<LockEntry>) -> Lock {
        entries.sort_by(|a, b| a.key().cmp(&b.key()));
        for e in &mut entries {
            e.codes.sort();
            e.codes.dedup();
        }
        Lock {
            schema_version: LOCK_SCHEMA_VERSION,
            kvaudit_version: env!("CARGO_PKG_VERSION").to_string(),
            entries,
        }
    }

    pub fn to_text(&self) -> Result<String> {
        let body = toml::to_string(self).context("cannot write the lock")?;
        Ok(format!(
            "# kvaudit.lock: written by `kvaudit check --update-baseline`; commit it, do not edit it.\n{body}"
        ))
    }

    pub fn parse(text: &str, shown: &str) -> Result<Lock> {
        // The version is read first, so an old lock says how to regenerate it rather than
        // which field it lacks.
        #[derive(Deserialize)]
        struct Version {
            schema_version: Option<u32>,
        }
        let regen = "regenerate it with `kvaudit check --update-baseline`";
        let v: Version = toml::from_str(text).map_err(|e| {
            anyhow!(
                "{shown}: not a kvaudit lock ({}); {regen}",
                e.message().trim()
            )
        })?;
        match v.schema_version {
            Some(LOCK_SCHEMA_VERSION) => {}
            Some(other) => bail!(
                "{shown}: lock schema version {other}, this kvaudit reads version {LOCK_SCHEMA_VERSION}; {regen}"
            ),
            None => bail!("{shown}: no schema_version, not a kvaudit lock; {regen}"),
        }
        toml::from_str(text).map_err(|e| anyhow!("{shown}: {}; {regen}", e.message().trim()))
    }

    pub fn load(path: &Path) -> Result<Lock> {
        let shown = path.display().to_string();
        let text = crate::input::read_text(path, MAX_LOCK_BYTES).map_err(|e| {
            anyhow!("cannot read the baseline {shown}: {e}; write one with `kvaudit check --update-baseline`")
        })?;
        Lock::parse(&text, &shown)
    }

    pub fn find(&self, key: (&str, &str, usize)) -> Option<&LockEntry> {
        self.entries
            .binary_search_by(|e| e.key().cmp(&key))
            .ok()
            .map(|i| &self.entries[i])
    }
}

pub fn stream_hash(ids: &[u32]) -> String {
    let mut bytes = Vec::with_capacity(ids.len() * 4);
    for id in ids {
        bytes.extend_from_slice(&id.to_le_bytes());
    }
    format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&bytes))
}

/// What changed on one transition between the baseline and now.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    CommonPrefixShrank {
        was: usize,
        now: usize,
    },
    UncachedGrew {
        block_size: String,
        was: usize,
        now: usize,
    },
    NewRewriteClass {
        was: Option<String>,
        now: String,
    },
    IndexVisibilityFell {
        was: usize,
        now: usize,
    },
    Improved(String),
}

pub fn compare(was: &LockEntry, now: &LockEntry) -> Vec<Change> {
    let mut out = Vec::new();
    if now.common_prefix_tokens < was.common_prefix_tokens {
        out.push(Change::CommonPrefixShrank {
            was: was.common_prefix_tokens,
            now: now.common_prefix_tokens,
        });
    }
    let mut better = Vec::new();
    if now.common_prefix_tokens > was.common_prefix_tokens
        && now.rewrite.is_none() == was.rewrite.is_none()
    {
        better.push(format!(
            "common prefix {} -> {}",
            was.common_prefix_tokens, now.common_prefix_tokens
        ));
    }
    for (b, &n) in &now.uncached {
        match was.uncached.get(b) {
            Some(&w) if n > w => out.push(Change::UncachedGrew {
                block_size: b.clone(),
                was: w,
                now: n,
            }),
            Some(&w) if n < w => better.push(format!("uncached@{b} {w} -> {n}")),
            _ => {}
        }
    }
    match (&was.rewrite, &now.rewrite) {
        (w, Some(n)) if w.as_ref() != Some(n) => out.push(Change::NewRewriteClass {
            was: w.clone(),
            now: n.clone(),
        }),
        (Some(w), None) => better.push(format!("rewrite {w} gone")),
        _ => {}
    }
    if let (Some(w), Some(n)) = (was.index_visible_tokens, now.index_visible_tokens) {
        if n < w {
            out.push(Change::IndexVisibilityFell { was: w, now: n });
        } else if n > w {
            better.push(format!("index sees {w} -> {n}"));
        }
    }
    if !better.is_empty() {
        out.push(Change::Improved(better.join(", ")));
    }
    out
}

/// Why the numbers may have moved: the hashes that differ.
pub fn what_changed(was: &LockEntry, now: &LockEntry) -> String {
    let short = |h: &str| h.chars().take(12).collect::<String>();
    let mut parts = Vec::new();
    if was.template_sha256 != now.template_sha256 {
        parts.push(format!(
            "template {} -> {}",
            short(&was.template_sha256),
            short(&now.template_sha256)
        ));
    }
    if was.tokenizer_sha256 != now.tokenizer_sha256 {
        parts.push(format!(
            "tokenizer {} -> {}",
            short(&was.tokenizer_sha256),
            short(&now.tokenizer_sha256)
        ));
    }
    if parts.is_empty() {
        "template and tokenizer unchanged (kvaudit or the scenario changed)".into()
    } else {
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(cp: usize, rewrite: Option<&str>) -> LockEntry {
        LockEntry {
            model: "m".into(),
            scenario: "s".into(),
            from_prompt: 1,
            to_prompt: 2,
            template_sha256: "aa".into(),
            tokenizer_sha256: "bb".into(),
            held_tokens: 100,
            next_prompt_tokens: 120,
            common_prefix_tokens: cp,
            uncached: [("16".to_string(), 120 - cp / 16 * 16)]
                .into_iter()
                .collect(),
            rewrite: rewrite.map(String::from),
            index_visible_tokens: None,
            held_hash: "0".into(),
            next_hash: "1".into(),
            codes: vec![],
        }
    }

    #[test]
    fn lock_round_trips_sorted_and_old_schemas_are_refused() {
        let mut b = entry(100, None);
        b.scenario = "b".into();
        let lock = Lock::new(vec![b, entry(50, Some("reasoning_dropped"))]);
        assert_eq!(lock.entries[0].scenario, "b");
        let text = lock.to_text().unwrap();
        assert_eq!(Lock::parse(&text, "kvaudit.lock").unwrap(), lock);
        let old = text.replace("schema_version = 1", "schema_version = 0");
        let e = Lock::parse(&old, "kvaudit.lock").unwrap_err().to_string();
        assert!(
            e.contains("schema version 0") && e.contains("--update-baseline"),
            "{e}"
        );
    }

    #[test]
    fn changes_are_regressions_or_improvements() {
        let good = entry(100, None);
        let bad = entry(40, Some("reasoning_dropped"));
        let c = compare(&good, &bad);
        assert!(matches!(
            c[0],
            Change::CommonPrefixShrank { was: 100, now: 40 }
        ));
        assert!(matches!(
            &c[1],
            Change::UncachedGrew {
                was: 24,
                now: 88,
                ..
            }
        ));
        assert!(matches!(&c[2], Change::NewRewriteClass { was: None, .. }));
        let c = compare(&bad, &good);
        assert_eq!(
            c,
            vec![Change::Improved(
                "uncached@16 88 -> 24, rewrite reasoning_dropped gone".into()
            )]
        );
        assert!(compare(&good, &good).is_empty());
    }
}
