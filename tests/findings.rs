//! One finding model for every command: what diff-turns and replay report as findings, with
//! the numbers they carry (the exit code follows from them).

use kvaudit::events::encode::encode_batch;
use kvaudit::events::frames::{CaptureReader, write_frame};
use kvaudit::events::{Batch, BatchWire, Engine};
use kvaudit::finding::FindingKind;
use kvaudit::replay::ReplayOptions;
use kvaudit::routers::llm_d::IndexConfig;
use kvaudit::routers::llm_d::view::generation_events;

/// A decode pod's events as vLLM emits them for a 40-token prompt and an 88-token reply at
/// engine block 16: one BlockStored for the prompt's two full blocks, then one per block.
fn decode_pod_capture() -> Vec<u8> {
    let held: Vec<u32> = (1000..1128).collect();
    let batch = Batch {
        ts: 0.0,
        events: generation_events(40, &held, 16),
        data_parallel_rank: Some(0),
        wire: BatchWire::Array(3),
    };
    let mut out = Vec::new();
    write_frame(&mut out, b"kv@decode-0@m", 0, &encode_batch(&batch));
    out
}

fn replay(block: usize) -> kvaudit::replay::ReplayReport {
    let data = decode_pod_capture();
    let reader = CaptureReader::new(&data[..]).unwrap();
    let options = ReplayOptions {
        views: vec![IndexConfig::new(block)],
        dynamo: Vec::new(),
        engine: Engine::Vllm,
        keep_going: false,
        default_pod: "p".into(),
    };
    kvaudit::replay::run(reader, options, &[], |_| {}).report
}

#[test]
fn replay_findings_carry_their_counts() {
    // Index block 16: every event is indexed, nothing to report.
    assert!(replay(16).findings().is_empty());
    // Index block 64: each 16-token decode event is shorter than one index block.
    let found = replay(64).findings();
    let kinds: Vec<FindingKind> = found.iter().map(|f| f.kind).collect();
    assert_eq!(
        kinds,
        vec![FindingKind::StoresSkipped, FindingKind::IndexBehindEngine],
        "{found:?}"
    );
    assert_eq!(found[0].subject, "index block 64");
    // One event for the prompt's 2 full blocks (32 tokens) and one per later block (6):
    // all shorter than 64 tokens.
    assert_eq!(found[0].evidence, "7 BlockStored events skipped");
    assert_eq!(
        found[1].evidence,
        "1 of 1 sequences: the engine holds 128 tokens, the index finds 0"
    );
    assert!(found.iter().all(|f| f.severity.is_none()));
}

#[test]
fn diff_turns_findings_are_rewrite_points() {
    use kvaudit::audit::{self, AuditSettings};
    use kvaudit::model::{ModelSpec, resolve_model};
    let dir = env!("CARGO_MANIFEST_DIR");
    let files = resolve_model(&ModelSpec {
        model: format!("{dir}/fixtures/models/tiny-think"),
        ..ModelSpec::default()
    })
    .unwrap();
    let tok = kvaudit::tokenize::Tokenizer::load(&files.tokenizer_path, None).unwrap();
    let conversations = audit::probe_conversations(None, kvaudit::render::ResendMode::Content);
    let now = kvaudit::render::parse_time("2026-01-15T10:00:00").unwrap();
    let settings = AuditSettings {
        clock: kvaudit::render::Clock::Fixed(now),
        date_rollover: false,
        plan: Default::default(),
        align: Default::default(),
        template_name: None,
        fuel: kvaudit::render::DEFAULT_FUEL,
        router: None,
        routers: Vec::new(),
        remedies: false,
    };
    let report = audit::diff_turns(&files, &tok, &conversations, &settings).unwrap();
    let found = report.findings();
    let rewrites = report
        .conversations
        .iter()
        .flat_map(|c| &c.transitions)
        .filter(|t| t.rewrite.is_some())
        .count();
    assert!(rewrites > 0);
    assert_eq!(found.len(), rewrites);
    assert!(found.iter().all(|f| f.kind == FindingKind::RewritePoint));
    assert!(
        found[0].subject.starts_with("probe:thanks turn 1 -> 2"),
        "{}",
        found[0].subject
    );
    assert!(
        found[0].evidence.contains("rewrite at"),
        "{}",
        found[0].evidence
    );
    assert_eq!(report.has_findings(), !found.is_empty());
}
