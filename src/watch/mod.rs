//! The live monitor (`kvaudit watch`, issue 51): each request of a running fleet, its prompt
//! tokens attributed to why they were or were not served from KV cache. This stage holds the
//! attribution itself; the pod subscriptions, the proxy and the exports build on it.

pub mod attribute;

pub use attribute::{Causes, Request, attribute};
