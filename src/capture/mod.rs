//! Live capture from vLLM/SGLang ZMQ publishers: SUB sockets, frame validation, sequence
//! tracking per publisher (gaps, duplicates, restarts), and gap recovery through the
//! publisher's ROUTER replay socket (reference/vllm-events.md §2).

mod live;
mod ranges;
mod recovery;
mod sequence;
pub mod subscribe;
mod summary;
mod validate;
pub mod zmtp;

pub use live::{LiveOptions, Progress, Status, capture};
pub(crate) use ranges::Missing;
pub(crate) use recovery::{GapRequest, RECOVERED_QUEUE, Recovery, ReplayWorker, WorkerStatus};
pub use sequence::{PublisherState, SeqTracker, SeqVerdict};
pub use subscribe::CaptureFailure;
pub use summary::{
    CaptureSummary, Gap, MalformedCounts, MalformedExample, ReplayEndpointSummary, Restart,
};
pub use validate::{Malformed, MalformedKind, validate};
