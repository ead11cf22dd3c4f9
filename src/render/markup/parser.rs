//! Jinja2's expression grammar, read only as far as the rewrite needs: where each `+` and `~`
//! applies, with the precedence Jinja2's parser gives them.

use super::lexer::{Tok, Token};

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Op {
    Add,
    Concat,
    Other,
}

/// An expression's byte range and the sub-expressions that may hold `+` or `~`.
#[derive(Debug)]
pub(super) struct Node {
    pub(super) op: Op,
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) children: Vec<Node>,
    /// Levels of nodes below and including this one (emitting and dropping recurse on it).
    depth: usize,
}

/// The deepest expression tree accepted: chains such as `a + b + c ...`, `x.a.b ...` or
/// `x|f|g ...` nest one level per link without recursing in the parser, so they are bounded
/// here, before a hostile template's tree could overflow the stack when it is walked.
const MAX_TREE_DEPTH: usize = 1000;

impl Node {
    fn new(op: Op, start: usize, end: usize, children: Vec<Node>) -> Node {
        let depth = 1 + children.iter().map(|c| c.depth).max().unwrap_or(0);
        Node {
            op,
            start,
            end,
            children,
            depth,
        }
    }

    fn other(start: usize, end: usize, children: Vec<Node>) -> Node {
        Node::new(Op::Other, start, end, children)
    }

    fn bounded(self) -> Result<Node, ParseError> {
        if self.depth > MAX_TREE_DEPTH {
            return Err(ParseError::TreeTooDeep);
        }
        Ok(self)
    }
}

/// Why an expression could not be read. The rewrite refuses the template either way, but a
/// depth bound is kvaudit protecting its stack, not a template Jinja2 would reject.
#[derive(Debug, thiserror::Error)]
pub(super) enum ParseError {
    #[error("expected `{0}`")]
    ExpectedOp(&'static str),
    #[error("expected {0}")]
    Expected(&'static str),
    #[error("expression nested more than {MAX_TREE_DEPTH} levels deep")]
    TreeTooDeep,
    #[error("expression nested too deeply")]
    TooDeep,
}

/// Jinja2's expression grammar (its parser's precedence: conditional, `or`, `and`, `not`,
/// comparisons, `+`/`-`, `~`, `*`/`/`/`//`/`%`, `**`, unary, then primary, postfix and
/// filters/tests), keeping only what the rewrite needs.
pub(super) struct Parser<'s, 't> {
    pub(super) toks: &'t [Token<'s>],
    pub(super) pos: usize,
    pub(super) depth: usize,
}

const MAX_DEPTH: usize = 200;

impl<'s> Parser<'s, '_> {
    fn peek(&self) -> Option<Tok<'s>> {
        self.toks.get(self.pos).map(|t| t.kind)
    }

    fn is_name(&self, word: &str) -> bool {
        self.peek() == Some(Tok::Name(word))
    }

    fn is_op(&self, op: &str) -> bool {
        matches!(self.peek(), Some(Tok::Op(o)) if o == op)
    }

    fn start(&self) -> usize {
        self.toks
            .get(self.pos)
            .map_or_else(|| self.toks.last().map_or(0, |t| t.end), |t| t.start)
    }

    fn last_end(&self) -> usize {
        self.toks[self.pos - 1].end
    }

    fn expect_op(&mut self, op: &'static str) -> Result<(), ParseError> {
        if self.is_op(op) {
            self.pos += 1;
            Ok(())
        } else {
            Err(ParseError::ExpectedOp(op))
        }
    }

    pub(super) fn starts_expression(&self) -> bool {
        match self.peek() {
            Some(Tok::Name(w)) => !matches!(
                w,
                "in" | "if" | "else" | "is" | "and" | "or" | "recursive" | "ignore" | "missing"
            ),
            Some(Tok::Str | Tok::Num) => true,
            Some(Tok::Op(o)) => matches!(o, "(" | "[" | "{" | "-" | "+"),
            None => false,
        }
    }

    fn nested<T>(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<T, ParseError>,
    ) -> Result<T, ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(ParseError::TooDeep);
        }
        let r = f(self);
        self.depth -= 1;
        r
    }

    pub(super) fn expression(&mut self) -> Result<Node, ParseError> {
        self.nested(|p| {
            let start = p.start();
            let mut children = vec![p.or()?];
            while p.is_name("if") {
                p.pos += 1;
                children.push(p.or()?);
                if p.is_name("else") {
                    p.pos += 1;
                    children.push(p.expression()?);
                }
            }
            Ok(p.collapse(start, children))
        })
    }

    /// One child spanning the whole range stands for itself; more make an `Other` node.
    fn collapse(&self, start: usize, mut children: Vec<Node>) -> Node {
        if children.len() == 1 {
            return children.remove(0);
        }
        Node::other(start, self.last_end(), children)
    }

    fn binary_chain(
        &mut self,
        is_op: impl Fn(&Self) -> Option<usize>,
        operand: impl Fn(&mut Self) -> Result<Node, ParseError>,
    ) -> Result<Node, ParseError> {
        let start = self.start();
        let mut children = vec![operand(self)?];
        while let Some(n) = is_op(self) {
            self.pos += n;
            children.push(operand(self)?);
        }
        Ok(self.collapse(start, children))
    }

    fn or(&mut self) -> Result<Node, ParseError> {
        self.binary_chain(|p| p.is_name("or").then_some(1), Self::and)
    }

    fn and(&mut self) -> Result<Node, ParseError> {
        self.binary_chain(|p| p.is_name("and").then_some(1), Self::not)
    }

    fn not(&mut self) -> Result<Node, ParseError> {
        if self.is_name("not") {
            let start = self.start();
            self.pos += 1;
            let inner = self.nested(Self::not)?;
            return Ok(Node::other(start, self.last_end(), vec![inner]));
        }
        self.compare()
    }

    fn compare(&mut self) -> Result<Node, ParseError> {
        self.binary_chain(
            |p| {
                if p.is_name("in")
                    || matches!(
                        p.peek(),
                        Some(Tok::Op("==" | "!=" | "<" | ">" | "<=" | ">="))
                    )
                {
                    Some(1)
                } else if p.is_name("not")
                    && p.toks.get(p.pos + 1).map(|t| t.kind) == Some(Tok::Name("in"))
                {
                    Some(2)
                } else {
                    None
                }
            },
            Self::math1,
        )
    }

    /// `+` and `-`, left-associative: `a + b - c` is `(a + b) - c`.
    fn math1(&mut self) -> Result<Node, ParseError> {
        let start = self.start();
        let mut left = self.concat()?;
        loop {
            let add = self.is_op("+");
            if !add && !self.is_op("-") {
                return Ok(left);
            }
            self.pos += 1;
            let right = self.concat()?;
            let op = if add { Op::Add } else { Op::Other };
            left = Node::new(op, start, self.last_end(), vec![left, right]).bounded()?;
        }
    }

    fn concat(&mut self) -> Result<Node, ParseError> {
        let start = self.start();
        let mut children = vec![self.math2()?];
        while self.is_op("~") {
            self.pos += 1;
            children.push(self.math2()?);
        }
        if children.len() == 1 {
            return Ok(children.remove(0));
        }
        Node::new(Op::Concat, start, self.last_end(), children).bounded()
    }

    fn math2(&mut self) -> Result<Node, ParseError> {
        self.binary_chain(
            |p| matches!(p.peek(), Some(Tok::Op("*" | "/" | "//" | "%"))).then_some(1),
            Self::pow,
        )
    }

    fn pow(&mut self) -> Result<Node, ParseError> {
        self.binary_chain(|p| p.is_op("**").then_some(1), |p| p.unary(true))
    }

    fn unary(&mut self, with_filter: bool) -> Result<Node, ParseError> {
        self.nested(|p| {
            let start = p.start();
            let mut node = if p.is_op("-") || p.is_op("+") {
                p.pos += 1;
                let inner = p.unary(false)?;
                Node::other(start, p.last_end(), vec![inner])
            } else {
                p.primary()?
            };
            node = p.postfix(start, node)?;
            if with_filter {
                node = p.filters(start, node)?;
            }
            Ok(node)
        })
    }

    fn primary(&mut self) -> Result<Node, ParseError> {
        let start = self.start();
        match self.peek() {
            Some(Tok::Name(_) | Tok::Num) => {
                self.pos += 1;
                Ok(Node::other(start, self.last_end(), vec![]))
            }
            Some(Tok::Str) => {
                // Adjacent string literals are one string.
                while self.peek() == Some(Tok::Str) {
                    self.pos += 1;
                }
                Ok(Node::other(start, self.last_end(), vec![]))
            }
            Some(Tok::Op("(")) => {
                self.pos += 1;
                let children = self.list_until(")", false)?;
                Ok(Node::other(start, self.last_end(), children))
            }
            Some(Tok::Op("[")) => {
                self.pos += 1;
                let children = self.list_until("]", false)?;
                Ok(Node::other(start, self.last_end(), children))
            }
            Some(Tok::Op("{")) => {
                self.pos += 1;
                let children = self.list_until("}", true)?;
                Ok(Node::other(start, self.last_end(), children))
            }
            _ => Err(ParseError::Expected("an expression")),
        }
    }

    /// Comma-separated expressions up to `close` (dict items `k: v` when `pairs`), consuming it.
    fn list_until(&mut self, close: &'static str, pairs: bool) -> Result<Vec<Node>, ParseError> {
        let mut out = Vec::new();
        while !self.is_op(close) {
            out.push(self.expression()?);
            if pairs {
                self.expect_op(":")?;
                out.push(self.expression()?);
            }
            if !self.is_op(",") {
                break;
            }
            self.pos += 1;
        }
        self.expect_op(close)?;
        Ok(out)
    }

    fn postfix(&mut self, start: usize, mut node: Node) -> Result<Node, ParseError> {
        loop {
            if self.is_op(".") {
                self.pos += 1;
                match self.peek() {
                    Some(Tok::Name(_) | Tok::Num) => self.pos += 1,
                    _ => return Err(ParseError::Expected("an attribute after `.`")),
                }
                node = Node::other(start, self.last_end(), vec![node]).bounded()?;
            } else if self.is_op("[") {
                self.pos += 1;
                let mut children = vec![node];
                children.extend(self.subscript()?);
                node = Node::other(start, self.last_end(), children).bounded()?;
            } else if self.is_op("(") {
                node = self.call(start, node)?;
            } else {
                return Ok(node);
            }
        }
    }

    /// `[a]`, `[a:b:c]` with any part left out, and comma-separated ones; consumes `]`.
    fn subscript(&mut self) -> Result<Vec<Node>, ParseError> {
        let mut out = Vec::new();
        loop {
            if self.is_op("]") {
                self.pos += 1;
                return Ok(out);
            }
            if self.is_op(":") || self.is_op(",") {
                self.pos += 1;
                continue;
            }
            out.push(self.expression()?);
        }
    }

    /// A call's arguments: expressions, `name=expr`, `*expr` and `**expr`.
    fn call(&mut self, start: usize, callee: Node) -> Result<Node, ParseError> {
        self.expect_op("(")?;
        let mut children = vec![callee];
        while !self.is_op(")") {
            if self.is_op("*") || self.is_op("**") {
                self.pos += 1;
            } else if matches!(self.peek(), Some(Tok::Name(_)))
                && self.toks.get(self.pos + 1).map(|t| t.kind) == Some(Tok::Op("="))
            {
                self.pos += 2;
            }
            children.push(self.expression()?);
            if !self.is_op(",") {
                break;
            }
            self.pos += 1;
        }
        self.expect_op(")")?;
        Node::other(start, self.last_end(), children).bounded()
    }

    fn dotted_name(&mut self) -> Result<(), ParseError> {
        if !matches!(self.peek(), Some(Tok::Name(_))) {
            return Err(ParseError::Expected("a filter or test name"));
        }
        self.pos += 1;
        while self.is_op(".")
            && matches!(
                self.toks.get(self.pos + 1).map(|t| t.kind),
                Some(Tok::Name(_))
            )
        {
            self.pos += 2;
        }
        Ok(())
    }

    fn filters(&mut self, start: usize, mut node: Node) -> Result<Node, ParseError> {
        loop {
            if self.is_op("|") {
                self.pos += 1;
                self.dotted_name()?;
                node = if self.is_op("(") {
                    self.call(start, node)?
                } else {
                    Node::other(start, self.last_end(), vec![node]).bounded()?
                };
            } else if self.is_name("is") {
                self.pos += 1;
                if self.is_name("not") {
                    self.pos += 1;
                }
                self.dotted_name()?;
                if self.is_op("(") {
                    node = self.call(start, node)?;
                } else {
                    let takes_arg = match self.peek() {
                        Some(Tok::Name(w)) => !matches!(w, "else" | "or" | "and"),
                        Some(Tok::Str | Tok::Num) => true,
                        Some(Tok::Op(o)) => matches!(o, "(" | "[" | "{"),
                        None => false,
                    };
                    let mut children = vec![node];
                    if takes_arg {
                        let arg_start = self.start();
                        let arg = self.primary()?;
                        children.push(self.postfix(arg_start, arg)?);
                    }
                    node = Node::other(start, self.last_end(), children).bounded()?;
                }
            } else if self.is_op("(") {
                node = self.call(start, node)?;
            } else {
                return Ok(node);
            }
        }
    }
}
