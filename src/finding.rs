//! One model for what kvaudit finds, whichever command found it: a kind, the subject it is
//! about, the evidence in words, and a severity slot that the CI gate fills from its config.
//! Commands decide their exit code from these (any finding: exit 1).

use serde::Serialize;

/// What was found. The names are stable: reports, baselines and the gate's codes hang on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FindingKind {
    /// diff-turns: turn k+1 does not extend what the decode pod holds after turn k.
    RewritePoint,
    /// diff-turns --date-rollover: rendered a day later, a prompt diverges.
    DateRollover,
    /// replay: messages that could not be decoded at all.
    MalformedMessages,
    /// replay: whole messages llm-d drops.
    MessagesDropped,
    /// replay: BlockStored events llm-d's index skips.
    StoresSkipped,
    /// replay: BlockStored events the engine view cannot split into blocks.
    EngineSkipped,
    /// replay: token ids outside u32, cast as llm-d casts them.
    TokenIdsOutOfRange,
    /// replay: a lookup in the index finds fewer tokens than the engine holds.
    IndexBehindEngine,
}

impl FindingKind {
    pub const ALL: [FindingKind; 8] = [
        FindingKind::RewritePoint,
        FindingKind::DateRollover,
        FindingKind::MalformedMessages,
        FindingKind::MessagesDropped,
        FindingKind::StoresSkipped,
        FindingKind::EngineSkipped,
        FindingKind::TokenIdsOutOfRange,
        FindingKind::IndexBehindEngine,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FindingKind::RewritePoint => "rewrite_point",
            FindingKind::DateRollover => "date_rollover",
            FindingKind::MalformedMessages => "malformed_messages",
            FindingKind::MessagesDropped => "messages_dropped",
            FindingKind::StoresSkipped => "stores_skipped",
            FindingKind::EngineSkipped => "engine_skipped",
            FindingKind::TokenIdsOutOfRange => "token_ids_out_of_range",
            FindingKind::IndexBehindEngine => "index_behind_engine",
        }
    }
}

impl Serialize for FindingKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// How much a finding matters; set by the gate's configuration, not by the finder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Note,
    Warning,
    Error,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub kind: FindingKind,
    /// What it is about: `conversation › turn 1 -> 2`, `view block 64`, a pod and model.
    pub subject: String,
    pub evidence: String,
    pub severity: Option<Severity>,
}

impl Finding {
    pub fn new(kind: FindingKind, subject: impl Into<String>, evidence: impl Into<String>) -> Self {
        Finding {
            kind,
            subject: subject.into(),
            evidence: evidence.into(),
            severity: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_names_are_unique() {
        let mut names: Vec<&str> = FindingKind::ALL.iter().map(|k| k.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), FindingKind::ALL.len());
    }
}
