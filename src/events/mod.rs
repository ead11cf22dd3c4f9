//! KV-cache events as vLLM (0.9 → 0.33) and SGLang publish them: the event model, payload
//! decoding, and the `.frames` capture file format — nothing else (live capture and the
//! index emulation are higher layers that use this one).

mod decode;
pub mod encode;
mod fast;
pub mod frames;
mod memo;
mod model;
pub mod msgpack;
mod pool;
mod schema;

pub use decode::{decode_batch, decode_batch_with};
pub use model::{
    Batch, BatchWire, BlockRemoved, BlockStored, Engine, Event, EventKind, EventWire, Owned, Text,
    WireHash,
};
pub use pool::Pool;
