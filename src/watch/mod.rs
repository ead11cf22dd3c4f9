//! The live monitor (`kvaudit watch`, issue 51): each request of a running fleet, its prompt
//! tokens attributed to why they were or were not served from KV cache.

pub mod attribute;
pub mod catchup;
pub mod conversations;
pub mod exchange;
pub mod holdings;
pub mod http;
pub mod live;
pub mod log;
mod lru;
pub mod monitor;
pub mod proxy;
pub mod routing;

pub use attribute::{Causes, Request, attribute};
pub use holdings::{Holdings, Unapplied};
pub use monitor::{Attributed, CauseTotals, Exchange, Monitor, PodTotals, Totals, Unattributed};
