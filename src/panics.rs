//! Panics of code kvaudit runs on untrusted input (a template's methods in minijinja, a
//! Parquet file's pages in the parquet crate), contained: the input's failure is one error
//! like any other, not an abort of the run.

thread_local! {
    /// Set while [`quietly_catching`] runs something on this thread.
    static CATCHING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A panic caught by [`quietly_catching`], shown as its message ("a panic" when its payload is
/// not text).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Panicked {
    message: String,
}

/// Runs `f`, turning a panic into an error without the panic hook printing it.
pub fn quietly_catching<T>(f: impl FnOnce() -> T) -> Result<T, Panicked> {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !CATCHING.with(|c| c.get()) {
                previous(info);
            }
        }));
    });
    let was = CATCHING.with(|c| c.replace(true));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    CATCHING.with(|c| c.set(was));
    result.map_err(|payload| Panicked {
        message: payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".into()),
    })
}
