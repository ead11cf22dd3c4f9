//! The live monitor (`kvaudit watch`, issue 51): each request of a running fleet, its prompt
//! tokens attributed to why they were or were not served from KV cache. This stage holds the
//! attribution and each pod's holdings; the pod subscriptions, the proxy and the exports
//! build on them.

pub mod attribute;
pub mod holdings;

pub use attribute::{Causes, Request, attribute};
pub use holdings::{Holdings, Unapplied};
