//! The bounds every render runs within (fuel, the size of its output and source, the length
//! of a list it makes) and the helpers that check them. Every filter, method and check of
//! render refuses work past these, so they stand apart from the engine that calls those.

use minijinja::{Error, ErrorKind};

use super::error::LimitExceeded;

/// Fuel one render may burn. minijinja charges one fuel per instruction and one per 64 bytes
/// of data created (strings built by `~`/`+`/`*`, filter results, output), so this bounds both
/// time and the bytes a hostile template can make the renderer allocate (4 M fuel = 256 MB).
/// Measured need: the 15 models on the longest conversation of each corpus source burn at
/// most 8,050 fuel (Qwen3.5 on a 43-message SWE-agent run), so this is 500 times that.
pub const DEFAULT_FUEL: u64 = 4_000_000;

/// The longest prompt one render may produce, and the largest result of kvaudit's own filters
/// (`indent`, `tojson`): a hostile template stops with a clear error here instead of growing
/// until the process aborts. Real prompts are kilobytes; a million-token context is ~4 MB.
pub const MAX_OUTPUT: usize = 16 << 20;

/// The output limit in force on this thread: [`MAX_OUTPUT`], or a smaller one a test or fuzz
/// target set (`test-hooks`), so that inputs asking for the most output stay fast to run.
pub fn max_output() -> usize {
    #[cfg(any(test, feature = "test-hooks"))]
    {
        OUTPUT_LIMIT.with(std::cell::Cell::get)
    }
    #[cfg(not(any(test, feature = "test-hooks")))]
    {
        MAX_OUTPUT
    }
}

#[cfg(any(test, feature = "test-hooks"))]
thread_local! {
    static OUTPUT_LIMIT: std::cell::Cell<usize> = const { std::cell::Cell::new(MAX_OUTPUT) };
}

/// Sets [`max_output`] for renders on this thread (test switch: compiled out of the tool).
#[cfg(any(test, feature = "test-hooks"))]
pub fn set_output_limit(limit: usize) {
    OUTPUT_LIMIT.with(|l| l.set(limit));
}

/// An error of one of kvaudit's bounds (see [`LimitExceeded`]).
pub fn limit_error(text: String) -> Error {
    Error::new(ErrorKind::InvalidOperation, text).with_source(LimitExceeded)
}

/// The largest template source accepted: real chat templates are at most tens of kilobytes.
pub const MAX_TEMPLATE_SOURCE: usize = 4 << 20;

/// Makes room for `additional` more bytes in `out`, growing it as a `Vec` would (doubling)
/// but never past `limit` unless the bytes themselves need it: a result refused at the limit
/// must not have asked for twice the limit on the way.
pub fn reserve_within(out: &mut Vec<u8>, additional: usize, limit: usize) {
    if let Some(more) = growth(out.len(), out.capacity(), additional, limit) {
        out.reserve_exact(more);
    }
}

/// [`reserve_within`] for a `String`.
pub fn reserve_str_within(out: &mut String, additional: usize, limit: usize) {
    if let Some(more) = growth(out.len(), out.capacity(), additional, limit) {
        out.reserve_exact(more);
    }
}

/// What [`reserve_within`] reserves past `len`, when `capacity` does not hold `additional`.
fn growth(len: usize, capacity: usize, additional: usize, limit: usize) -> Option<usize> {
    let needed = len.saturating_add(additional);
    (needed > capacity).then(|| {
        capacity
            .saturating_mul(2)
            .max(needed)
            .min(limit.max(needed))
            - len
    })
}

/// The most items a method or filter of ours makes into one list: a list of a million takes
/// ~24 MB of values where its text took a few (`('ab' * 5000000).split('a')`), so lists are
/// bounded by count as text is by size.
pub fn max_items() -> usize {
    max_output() / 16
}

/// Refuses a list of `n` items past [`max_items`], before it is made.
pub fn items_fit(n: usize, what: &str) -> Result<(), Error> {
    if n > max_items() {
        return Err(limit_error(format!(
            "{what} would make more than {} items",
            max_items()
        )));
    }
    Ok(())
}

/// The error a filter of ours returns instead of building a result past [`MAX_OUTPUT`].
pub fn too_large(filter: &str) -> Error {
    limit_error(format!(
        "{filter} would produce more than {} bytes",
        max_output()
    ))
}
