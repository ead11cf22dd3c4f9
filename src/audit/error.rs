//! Why a conversation could not be audited: the error as it was raised, and its kind read from
//! the first cause in its chain that kvaudit knows, so reports count failures by kind.

use crate::align::AlignError;
use crate::render::RenderError;
use crate::render::reply::PlanError;
use crate::tokenize::TokenizeError;

/// The kind of a failed audit: the first cause in the error's chain kvaudit knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// The conversation is past one of kvaudit's size limits.
    TooLarge,
    /// The server profile refuses a request.
    ServerRefused,
    InvalidConversation,
    TemplateError,
    TokenizerError,
    /// The reply's ids do not come back from its text.
    ReplyIdsMismatch,
    Other,
}

impl FailureKind {
    /// The name reports count it under.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::TooLarge => "too_large",
            FailureKind::ServerRefused => "server_refused",
            FailureKind::InvalidConversation => "invalid_conversation",
            FailureKind::TemplateError => "template_error",
            FailureKind::TokenizerError => "tokenizer_error",
            FailureKind::ReplyIdsMismatch => "reply_ids_mismatch",
            FailureKind::Other => "audit_error",
        }
    }
}

/// A conversation's audit that failed: the error as it was, its kind, and whether a render
/// went past one of kvaudit's limits.
#[derive(Debug)]
pub struct AuditError(anyhow::Error);

impl AuditError {
    pub fn kind(&self) -> FailureKind {
        kind_of(&self.0)
    }

    /// kvaudit refused to evaluate the template ([`RenderError::is_limit`]).
    pub fn hit_limit(&self) -> bool {
        hit_limit(&self.0)
    }

    /// The error and its causes, as a person reads them.
    pub fn message(&self) -> String {
        crate::error::chain_text(&self.0)
    }
}

impl From<anyhow::Error> for AuditError {
    fn from(error: anyhow::Error) -> AuditError {
        AuditError(error)
    }
}

fn kind_of(e: &anyhow::Error) -> FailureKind {
    for cause in e.chain() {
        if let Some(p) = cause.downcast_ref::<PlanError>() {
            return match p {
                PlanError::TooLarge { .. } => FailureKind::TooLarge,
                PlanError::Server { .. } => FailureKind::ServerRefused,
                PlanError::Shape(_) => FailureKind::InvalidConversation,
                PlanError::Render { .. } => FailureKind::TemplateError,
            };
        }
        if cause.is::<TokenizeError>() {
            return FailureKind::TokenizerError;
        }
        if let Some(a) = cause.downcast_ref::<AlignError>() {
            return match a {
                AlignError::Tokenize(_) => FailureKind::TokenizerError,
                _ => FailureKind::ReplyIdsMismatch,
            };
        }
    }
    FailureKind::Other
}

/// Whether `e` is, or was caused by, a render that went past one of kvaudit's limits.
pub fn hit_limit(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<RenderError>()
            .is_some_and(RenderError::is_limit)
    })
}
