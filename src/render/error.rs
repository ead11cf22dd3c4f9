//! Why a render failed, in kinds a caller can tell apart without reading the message.

/// Why a template could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("the chat template does not compile: {0}")]
    Syntax(String),
    #[error("the chat template raised an exception: {0}")]
    Raised(String),
    #[error(
        "the chat template ran out of fuel ({0}: more instructions or data than any real template needs): it may loop forever or build huge strings"
    )]
    OutOfFuel(u64),
    #[error("the chat template failed: {0}")]
    Failed(String),
    #[error("kvaudit cannot render this template exactly as transformers does: {0}")]
    Unsupported(String),
    #[error("the chat template's output exceeds {0} bytes")]
    TooLarge(usize),
    #[error("the chat template is {0} bytes, more than the {1} allowed")]
    SourceTooLarge(usize, usize),
    #[error("the chat template nests too deeply: {0}")]
    TooDeep(String),
    #[error("the chat template goes past a limit of kvaudit: {0}")]
    Limit(String),
}

impl RenderError {
    /// Whether kvaudit refused to evaluate the template (a bound on time, size or depth that
    /// protects the process), as opposed to the template failing on its own terms.
    pub fn is_limit(&self) -> bool {
        matches!(
            self,
            RenderError::OutOfFuel(_)
                | RenderError::TooLarge(_)
                | RenderError::SourceTooLarge(..)
                | RenderError::TooDeep(_)
                | RenderError::Limit(_)
        )
    }
}

/// The source of a minijinja error that one of kvaudit's bounds raised (a result's size, a
/// kept value's depth): the render reports it as [`RenderError::Limit`], which callers can tell
/// from the template's own failures without reading the message.
#[derive(Debug)]
pub struct LimitExceeded;

impl std::fmt::Display for LimitExceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a limit of kvaudit")
    }
}

impl std::error::Error for LimitExceeded {}

/// The source of a minijinja error for something kvaudit does not render exactly as
/// transformers does ([`RenderError::Unsupported`]).
#[derive(Debug)]
pub struct NotSupported;

impl std::fmt::Display for NotSupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("not supported by kvaudit")
    }
}

impl std::error::Error for NotSupported {}
