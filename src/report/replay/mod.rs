//! The replay report: its view (the JSON shape, defined once) and its exporters.

mod human;
mod prometheus;

use std::borrow::Cow;

use serde::Serialize;
use serde::ser::SerializeMap;

use super::json::Json;
use super::{Exporter, Format, Report, View};
use crate::replay::{EventCounts, MalformedCounts, ReplayReport};
use crate::routers::llm_d::{Counts, DropReason, SkipReason};

/// The JSON shape of the replay report.
pub const SCHEMA_VERSION: u32 = 1;

/// Where the input came from and how far it was read.
pub struct InputInfo<'a> {
    pub path: &'a str,
    pub format: &'a str,
    /// Set when reading stopped on an undecodable message.
    pub error: Option<(u64, String)>,
}

/// A replay report with the input it was read from: what the replay exporters take.
pub struct ReplayOutput<'a> {
    pub report: &'a ReplayReport,
    pub input: InputInfo<'a>,
}

#[derive(Serialize)]
pub struct ReplayView<'a> {
    pub schema_version: u32,
    pub input: InputView<'a>,
    pub messages: u64,
    pub malformed: u64,
    pub malformed_kinds: MalformedKindsView<'a>,
    pub events: &'a EventCounts,
    pub engine_skipped: &'a Counts<SkipReason>,
    pub incomplete_sequences: u64,
    pub views: Vec<AnyView<'a>>,
}

/// A view of the replay: llm-d's index or Dynamo's indexer.
#[derive(Serialize)]
#[serde(untagged)]
pub enum AnyView<'a> {
    LlmD(IndexView<'a>),
    Dynamo(DynamoView<'a>),
}

/// A Dynamo indexer's view (`--router dynamo`).
#[derive(Serialize)]
pub struct DynamoView<'a> {
    pub router: &'static str,
    pub version: &'static str,
    /// None when no stored event gave the engine's.
    pub index_block_size: Option<usize>,
    pub stores_applied: u64,
    pub stores_skipped: &'a std::collections::BTreeMap<&'static str, u64>,
    pub blocks_indexed: u64,
    pub blocks_wrong_size: u64,
    pub removals: u64,
    pub batches_rejected: u64,
    pub sequences: Vec<SequenceView<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lookups: Option<Vec<LookupView<'a>>>,
}

#[derive(Serialize)]
pub struct InputView<'a> {
    pub path: &'a str,
    pub format: &'a str,
    pub bytes_read: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<StopView<'a>>,
}

#[derive(Serialize)]
pub struct StopView<'a> {
    pub offset: u64,
    pub reason: Cow<'a, str>,
}

/// `{kind: {count, examples: [{offset, reason}]}}`, bounded whatever the input.
pub struct MalformedKindsView<'a>(&'a MalformedCounts);

#[derive(Serialize)]
struct MalformedKindView<'a> {
    count: u64,
    examples: Vec<StopView<'a>>,
}

impl Serialize for MalformedKindsView<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        for k in self.0.kinds() {
            let examples = k
                .examples
                .iter()
                .map(|e| StopView {
                    offset: e.offset,
                    reason: Cow::Borrowed(&e.reason),
                })
                .collect();
            map.serialize_entry(
                k.kind.as_str(),
                &MalformedKindView {
                    count: k.count,
                    examples,
                },
            )?;
        }
        map.end()
    }
}

/// One index view (block size × profile × hash) of the replay.
#[derive(Serialize)]
pub struct IndexView<'a> {
    pub router: &'static str,
    pub index_block_size: usize,
    pub profile: &'static str,
    pub hash: &'static str,
    pub messages_dropped: &'a Counts<DropReason>,
    pub stores_accepted: u64,
    pub stores_skipped: &'a Counts<SkipReason>,
    pub stores_with_dropped_tail: u64,
    pub tier_updates: u64,
    pub tokens_stored: u64,
    pub tokens_indexed: u64,
    pub removed_hashes_forwarded: u64,
    pub removed_hashes_suppressed: u64,
    pub sequences: Vec<SequenceView<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lookups: Option<Vec<LookupView<'a>>>,
}

#[derive(Serialize)]
pub struct SequenceView<'a> {
    pub pod: &'a str,
    pub model: &'a str,
    pub engine_tokens: usize,
    pub index_tokens: usize,
}

#[derive(Serialize)]
pub struct LookupView<'a> {
    pub pod: &'a str,
    pub model: &'a str,
    pub tokens: usize,
    pub index_tokens: usize,
}

impl<'a> ReplayView<'a> {
    pub fn new(r: &'a ReplayReport, input: &InputInfo<'a>) -> Self {
        let views = r
            .views
            .iter()
            .enumerate()
            .map(|(i, v)| IndexView {
                router: "llm-d",
                index_block_size: v.config.block_size,
                profile: v.config.profile.name(),
                hash: v.config.algo.name(),
                messages_dropped: &v.stats.messages_dropped,
                stores_accepted: v.stats.stores_accepted,
                stores_skipped: &v.stats.stores_skipped,
                stores_with_dropped_tail: v.stats.stores_with_dropped_tail,
                tier_updates: v.stats.tier_updates,
                tokens_stored: v.stats.tokens_stored,
                tokens_indexed: v.stats.tokens_indexed,
                removed_hashes_forwarded: v.stats.removed_hashes_forwarded,
                removed_hashes_suppressed: v.stats.removed_hashes_suppressed,
                sequences: sequence_views(r, i),
                lookups: lookup_views(r, i),
            })
            .map(AnyView::LlmD)
            .chain(r.dynamo.iter().enumerate().map(|(j, d)| {
                let i = r.views.len() + j;
                AnyView::Dynamo(DynamoView {
                    router: "dynamo",
                    version: "dynamo 1.6.1",
                    index_block_size: d.block_size,
                    stores_applied: d.stats.stores_applied,
                    stores_skipped: &d.stats.stores_skipped,
                    blocks_indexed: d.stats.blocks_indexed,
                    blocks_wrong_size: d.stats.blocks_wrong_size,
                    removals: d.stats.removals,
                    batches_rejected: d.stats.batches_rejected,
                    sequences: sequence_views(r, i),
                    lookups: lookup_views(r, i),
                })
            }))
            .collect();
        ReplayView {
            schema_version: SCHEMA_VERSION,
            input: InputView {
                path: input.path,
                format: input.format,
                bytes_read: r.bytes,
                error: input.error.as_ref().map(|(offset, reason)| StopView {
                    offset: *offset,
                    reason: Cow::Owned(reason.clone()),
                }),
            },
            messages: r.messages,
            malformed: r.malformed.total(),
            malformed_kinds: MalformedKindsView(&r.malformed),
            events: &r.events,
            engine_skipped: &r.engine_skipped,
            incomplete_sequences: r.incomplete_sequences,
            views,
        }
    }
}

fn sequence_views(r: &ReplayReport, i: usize) -> Vec<SequenceView<'_>> {
    r.sequences
        .iter()
        .map(|s| SequenceView {
            pod: &s.pod,
            model: &s.model,
            engine_tokens: s.engine_tokens,
            index_tokens: s.index_tokens[i],
        })
        .collect()
}

fn lookup_views(r: &ReplayReport, i: usize) -> Option<Vec<LookupView<'_>>> {
    (!r.lookups.is_empty()).then(|| {
        r.lookups
            .iter()
            .map(|l| LookupView {
                pod: &l.pod,
                model: &l.model,
                tokens: l.tokens,
                index_tokens: l.index_tokens[i],
            })
            .collect()
    })
}

impl View for ReplayOutput<'_> {
    type View<'a>
        = ReplayView<'a>
    where
        Self: 'a;

    fn view(&self) -> ReplayView<'_> {
        ReplayView::new(self.report, &self.input)
    }
}

impl Report for ReplayOutput<'_> {
    const NAME: &'static str = "replay";

    fn exporter(&self, format: Format) -> Option<&dyn Exporter<Self>> {
        match format {
            Format::Human => Some(&human::Human),
            Format::Json => Some(&Json),
            Format::Prometheus => Some(&prometheus::Prometheus),
            Format::Markdown | Format::Sarif | Format::Junit | Format::Html => None,
        }
    }
}
