//! The generator of the committed `.frames` fixtures in `fixtures/events/`: small captures in
//! vLLM 0.33's layout written by kvaudit's own encoder (`events::encode`), so the replay and
//! capture tests run where `../shared` (the real vLLM captures) is absent. tests/fixtures.rs
//! checks the committed files are exactly what this writes; after changing it, rewrite them:
//!
//!     cargo test --release --test integration -- --ignored fixtures::write_event_fixtures

use std::borrow::Cow;

use kvaudit::events::encode::encode_batch;
use kvaudit::events::frames::write_frame;
use kvaudit::events::msgpack::IntWidth;
use kvaudit::events::{Batch, BatchWire, BlockRemoved, Event, EventKind, EventWire, WireHash};
use kvaudit::routers::llm_d::view::generation_events;

/// Where the fixtures live, from the repository root.
pub const DIR: &str = "fixtures/events";

/// Every fixture: (file name, bytes).
pub fn all() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("two-pods.frames", two_pods()),
        ("narrow-hashes.frames", narrow_hashes()),
    ]
}

/// Topics of the fixtures (llm-d's `kv@<pod>@<model>`).
pub const POD_A: &str = "kv@pod-a@demo-model";
pub const POD_B: &str = "kv@pod-b@demo-model";

fn batch(ts: f64, events: Vec<Event>) -> Vec<u8> {
    encode_batch(&Batch {
        ts,
        events,
        data_parallel_rank: Some(0),
        wire: BatchWire::Array(3),
    })
}

/// Two pods publishing interleaved, each with its own sequence numbers, as s3.frames in
/// ../shared: pod-a serves a 32-token prompt and a 64-token reply (a 2-block prefill store,
/// then one store per reply block: 5 messages, seq 0..=4); pod-b a 48-token prompt and a
/// 16-token reply (2 stores), then evicts its last block (1 removal: seq 0..=2). Block size
/// 16; 8 messages, 8 events (7 BlockStored, 1 BlockRemoved).
pub fn two_pods() -> Vec<u8> {
    let a: Vec<u32> = (1..=96).collect();
    let b: Vec<u32> = (1001..=1064).collect();
    let a_events = generation_events(32, &a, 16);
    let mut b_events = generation_events(48, &b, 16);
    let EventKind::Stored(last) = &b_events[b_events.len() - 1].kind else {
        unreachable!("generation events are stores")
    };
    let evicted = BlockRemoved {
        block_hashes: last.block_hashes.clone(),
        medium: Some(Cow::Borrowed("GPU")),
        ..BlockRemoved::default()
    };
    b_events.push(Event {
        kind: EventKind::Removed(Box::new(evicted)),
        wire: EventWire::Map,
    });
    let (mut a_events, mut b_events) = (a_events.into_iter(), b_events.into_iter());
    let mut out = Vec::new();
    let (mut a_seq, mut b_seq, mut ts) = (0u64, 0u64, 1.0);
    loop {
        let mut any = false;
        if let Some(e) = a_events.next() {
            write_frame(&mut out, POD_A.as_bytes(), a_seq, &batch(ts, vec![e]));
            a_seq += 1;
            ts += 0.5;
            any = true;
        }
        if let Some(e) = b_events.next() {
            write_frame(&mut out, POD_B.as_bytes(), b_seq, &batch(ts, vec![e]));
            b_seq += 1;
            ts += 0.5;
            any = true;
        }
        if !any {
            return out;
        }
    }
}

/// One pod's 64-token prompt and 64-token reply (block size 16: a 4-block prefill store and
/// 4 reply-block stores, 5 messages) with every block hash packed as a 32-bit integer, as
/// s7.frames in ../shared: kvaudit decodes every width, llm-d drops each such message whole.
pub fn narrow_hashes() -> Vec<u8> {
    let tokens: Vec<u32> = (1..=128).collect();
    let narrow = |h: &WireHash| WireHash::Uint(h.as_u64() & 0xffff_ffff, IntWidth::U32);
    let mut out = Vec::new();
    for (seq, mut e) in generation_events(64, &tokens, 16).into_iter().enumerate() {
        if let EventKind::Stored(s) = &mut e.kind {
            s.block_hashes = s.block_hashes.iter().map(narrow).collect();
            s.parent_block_hash = s.parent_block_hash.as_ref().map(narrow);
        }
        write_frame(
            &mut out,
            POD_A.as_bytes(),
            seq as u64,
            &batch(1.0 + seq as f64, vec![e]),
        );
    }
    out
}

/// A capture in the seed write-up's shape, for tests that build one on the fly: one decode
/// pod (`kv@decode-0@demo-model`) holding a `prompt`-token prefill and a `reply`-token reply
/// (tokens 1, 2, …), as vLLM emits it: one BlockStored for the prompt's full 16-token blocks,
/// then one per reply block that fills.
pub fn seed_capture(prompt: u32, reply: u32) -> Vec<u8> {
    let tokens: Vec<u32> = (1..=prompt + reply).collect();
    let mut frames = Vec::new();
    for (seq, ev) in generation_events(prompt as usize, &tokens, 16)
        .into_iter()
        .enumerate()
    {
        let batch = Batch {
            ts: 1.0 + seq as f64,
            events: vec![ev],
            data_parallel_rank: Some(0),
            wire: BatchWire::Array(3),
        };
        write_frame(
            &mut frames,
            b"kv@decode-0@demo-model",
            seq as u64,
            &encode_batch(&batch),
        );
    }
    frames
}

/// A `.frames` capture's messages: topic, sequence number, payload.
pub fn read_frames(path: &std::path::Path) -> Vec<(Vec<u8>, u64, Vec<u8>)> {
    let data = std::fs::read(path).unwrap();
    let (mut out, mut at) = (Vec::new(), 0);
    let u32_at = |i: usize| u32::from_be_bytes(data[i..i + 4].try_into().unwrap()) as usize;
    while at < data.len() {
        let tl = u32_at(at);
        let topic = data[at + 4..at + 4 + tl].to_vec();
        let seq = u64::from_be_bytes(data[at + 4 + tl..at + 12 + tl].try_into().unwrap());
        let pl = u32_at(at + 12 + tl);
        out.push((topic, seq, data[at + 16 + tl..at + 16 + tl + pl].to_vec()));
        at += 16 + tl + pl;
    }
    out
}
