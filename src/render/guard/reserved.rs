//! The names kvaudit adds to a template's source, which the template itself may not use.

use minijinja::machinery::Token;

use super::tags::for_each_tag;
use crate::render::error::RenderError;

/// Names kvaudit adds to the source; a template may not use them itself (it could rebind a
/// check to something else).
pub const RESERVED_PREFIX: &str = "__kvaudit";
pub const BIND_FUNCTION: &str = "__kvaudit_bind";
pub const SETATTR_FUNCTION: &str = "__kvaudit_setattr";
pub const STR_FUNCTION: &str = "__kvaudit_str";
pub const IN_FUNCTION: &str = "__kvaudit_in";
pub const SUM_FUNCTION: &str = "__kvaudit_sum";
pub const PRODUCT_FUNCTION: &str = "__kvaudit_product";

pub(super) const SINK: &str = "__kvaudit_sink";
pub(super) const BLOCK_PREFIX: &str = "__kvaudit_block_";

/// Refuses a template that uses a name kvaudit adds to templates itself: it could rebind a
/// check to something else.
pub fn check_reserved(source: &str) -> Result<(), RenderError> {
    for_each_tag(source, |tag| {
        match tag.tokens.iter().find_map(|(t, _)| match t {
            Token::Ident(n) if n.starts_with(RESERVED_PREFIX) => Some(*n),
            _ => None,
        }) {
            Some(name) => Err(RenderError::Unsupported(format!(
                "the template uses the name `{name}`, which kvaudit reserves"
            ))),
            None => Ok(()),
        }
    })
}
