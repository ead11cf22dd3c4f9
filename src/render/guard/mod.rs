//! A template's shape, bounded and instrumented before minijinja compiles it.
//!
//! minijinja limits how deeply brackets and statements nest, but a chain (`1+1+...`,
//! `-----1`, `x.a.a...`, `x|f|f...`, `a if b else c if ...`) becomes a syntax tree as deep as
//! the chain is long, and minijinja's parser, compiler and variable analysis, kvaudit's own
//! readers of the tree (server profiles, history switches) and the tree's drop all recurse on
//! it: a 50,000-term expression overflowed the stack. [`check_depth`] bounds that depth from the
//! template's tokens (minijinja's own lexer, which does not recurse), before anything parses it.
//!
//! Values nest too, and what recurses over them (printing, `tojson`, `==`, sorting, dropping)
//! cannot be reached from outside minijinja. A value can only grow deeper than one expression
//! makes it by being kept and fed back. A variable `set` at one point of the template is kept
//! for what follows, but never fed back to the same statement (a loop's body starts each
//! iteration from the variables outside it, a macro's from those it was defined with), so
//! [`check_depth`] bounds what all `set` statements together can nest. What is fed back, a
//! namespace attribute set in a loop, a macro or `caller` argument in a recursion, a recursive
//! loop's item, [`instrument`](fn@instrument) routes through a function that checks the
//! value when it is kept (see `namespace.rs`). It also routes every operand of `~` through
//! Python's `str()` with a bound on its size (minijinja formats a list operand into one
//! string with no limit: a list that repeats a long string made gigabytes).

mod depth;
mod edits;
mod instrument;
mod operators;
mod reserved;
mod tags;

pub use depth::check_depth;
pub use edits::Instrumented;
pub use instrument::instrument;
pub use reserved::{
    BIND_FUNCTION, IN_FUNCTION, PRODUCT_FUNCTION, SETATTR_FUNCTION, STR_FUNCTION, SUM_FUNCTION,
    check_reserved,
};
