//! MarkupSafe's `Markup` as transformers' sandbox meets it (autoescape off).
//!
//! Jinja2's `|safe`, `|e`/`|escape` and `|forceescape` return `Markup` even with autoescape
//! off, and `Markup` escapes the other operand of `+` for HTML: `"'"|safe + name` renders the
//! name with `&#39;` and `&#34;` in it. Rendered alone a `Markup` prints as its text, and `~`
//! (Jinja2's `str_join` when autoescape is off) gives a plain `str`. minijinja marks such
//! strings *safe*, but with autoescape off it never escapes on `+`, so a template that makes
//! `Markup` values gets every `+` routed through [`ADD_FUNCTION`] and every `~` chain through
//! [`PLAIN_FUNCTION`] (a source rewrite, [`rewrite_operators`]); templates without those
//! filters are left as they are.
//!
//! Not reproduced: `Markup`'s own methods (`.strip()`, `.format()`, slicing and `%`) give a
//! plain string here, so their result no longer escapes on a later `+`.

use minijinja::value::ValueKind;
use minijinja::{Environment, Error, ErrorKind, Expression, Value};

use super::error::RenderError;
use super::limits::{max_output, too_large};

/// The function every `+` of a template that makes `Markup` values becomes.
pub const ADD_FUNCTION: &str = "__kvaudit_markup_add";
/// The function every `~` chain of such a template is wrapped in (a plain string result).
pub const PLAIN_FUNCTION: &str = "__kvaudit_plain_str";

/// The filters that return `Markup` in Jinja2.
const MARKUP_FILTERS: [&str; 4] = ["safe", "e", "escape", "forceescape"];

/// MarkupSafe's `escape` of a text: the five characters it replaces, with its entities.
pub fn html_escape(text: &str, out: &mut String) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\'' => out.push_str("&#39;"),
            '"' => out.push_str("&#34;"),
            c => out.push(c),
        }
    }
}

/// The text `Markup(value)` / `escape(value)` start from: strings as they are, other values
/// as the template would print them.
fn text_of(value: &Value) -> Result<String, Error> {
    if value.is_undefined() {
        return Err(Error::new(
            ErrorKind::UndefinedError,
            "undefined value given to a Markup filter",
        ));
    }
    Ok(match value.as_str() {
        Some(s) => s.to_string(),
        None => super::namespace::py_str(value, "a Markup filter")?,
    })
}

fn is_markup(value: &Value) -> bool {
    value.kind() == ValueKind::String && value.is_safe()
}

/// `|safe`: `Markup(value)`.
pub fn safe_filter(value: Value) -> Result<Value, Error> {
    if is_markup(&value) {
        return Ok(value);
    }
    Ok(Value::from_safe_string(text_of(&value)?))
}

/// `|e` / `|escape`: `markupsafe.escape(value)`, which leaves `Markup` as it is.
pub fn escape_filter(value: Value) -> Result<Value, Error> {
    if is_markup(&value) {
        return Ok(value);
    }
    let text = text_of(&value)?;
    let mut out = String::with_capacity(text.len());
    html_escape(&text, &mut out);
    Ok(Value::from_safe_string(out))
}

/// `|forceescape`: escapes a `Markup` value's text again.
pub fn forceescape_filter(value: Value) -> Result<Value, Error> {
    let text = text_of(&value)?;
    let mut out = String::with_capacity(text.len());
    html_escape(&text, &mut out);
    Ok(Value::from_safe_string(out))
}

/// Python's `+` with `Markup.__add__` / `__radd__`: a `Markup` operand escapes a `str` one
/// and the result is `Markup`; with anything but a string `Markup` refuses (TypeError). Every
/// other pair is added as minijinja's own `+` adds it.
pub fn markup_add(a: Value, b: Value) -> Result<Value, Error> {
    let (a_str, b_str) = (a.kind() == ValueKind::String, b.kind() == ValueKind::String);
    let markup = is_markup(&a) || is_markup(&b);
    if markup && !(a_str && b_str) {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            format!(
                "unsupported operand type(s) for +: '{}' and '{}'",
                type_name(&a),
                type_name(&b)
            ),
        ));
    }
    if a_str && b_str {
        let (x, y) = (a.as_str().unwrap_or(""), b.as_str().unwrap_or(""));
        if x.len().saturating_add(y.len()) > max_output() {
            return Err(too_large("+"));
        }
        if !markup {
            return Ok(Value::from([x, y].concat()));
        }
        let mut out = String::with_capacity(x.len() + y.len());
        for (v, text) in [(&a, x), (&b, y)] {
            if v.is_safe() {
                out.push_str(text);
            } else {
                html_escape(text, &mut out);
            }
        }
        if out.len() > max_output() {
            return Err(too_large("+"));
        }
        return Ok(Value::from_safe_string(out));
    }
    native_add(a, b)
}

/// minijinja's `+` on two values (numbers, lists, tuples, and its errors).
fn native_add(a: Value, b: Value) -> Result<Value, Error> {
    use std::sync::OnceLock;
    static ENV: OnceLock<Environment<'static>> = OnceLock::new();
    static EXPR: OnceLock<Expression<'static, 'static>> = OnceLock::new();
    let expr = EXPR.get_or_init(|| {
        ENV.get_or_init(Environment::new)
            .compile_expression("a + b")
            .expect("a + b compiles")
    });
    expr.eval(minijinja::context! { a => a, b => b })
        // The expression's own location (line 1 of `a + b`) would stand for the template's.
        .map_err(|e| match e.detail() {
            Some(detail) => Error::new(e.kind(), detail.to_string()),
            None => Error::from(e.kind()),
        })
}

fn type_name(v: &Value) -> &'static str {
    match v.kind() {
        ValueKind::String if v.is_safe() => "Markup",
        ValueKind::String => "str",
        ValueKind::None => "NoneType",
        ValueKind::Bool => "bool",
        ValueKind::Number if v.is_integer() => "int",
        ValueKind::Number => "float",
        ValueKind::Seq => "list",
        ValueKind::Map => "dict",
        ValueKind::Undefined => "Undefined",
        _ => "object",
    }
}

/// The result of `~` as Jinja2 gives it with autoescape off: a plain `str`.
pub fn plain_str(value: Value) -> Value {
    if is_markup(&value) {
        Value::from(value.as_str().unwrap_or_default())
    } else {
        value
    }
}

/// The template with its `+` and `~` rewritten when it uses a filter that makes `Markup`;
/// unchanged (borrowed) otherwise.
pub fn rewrite_operators(source: &str) -> Result<std::borrow::Cow<'_, str>, RenderError> {
    let tags = tags(source);
    let uses_markup = tags.iter().any(|t| {
        lex(source, t.body.0, t.body.1).is_ok_and(|tokens| {
            tokens.windows(2).any(|w| {
                w[0].kind == Tok::Op("|")
                    && matches!(w[1].kind, Tok::Name(n) if MARKUP_FILTERS.contains(&n))
            })
        })
    });
    if !uses_markup {
        return Ok(std::borrow::Cow::Borrowed(source));
    }
    let mut out = String::with_capacity(source.len() + 256);
    let mut at = 0;
    for tag in &tags {
        let (start, end) = tag.body;
        let tokens = lex(source, start, end).map_err(|e| unsupported(source, start, &e))?;
        let mut parser = Parser {
            toks: &tokens,
            pos: 0,
            depth: 0,
        };
        // A statement's keyword, then every expression in it in turn: the other words of a
        // statement (`=`, `,`, `in` of a `for` target list...) are skipped between them.
        if tag.statement && matches!(tokens.first().map(|t| t.kind), Some(Tok::Name(_))) {
            parser.pos = 1;
        }
        let mut nodes = Vec::new();
        while parser.pos < tokens.len() {
            if parser.starts_expression() {
                let node = parser
                    .expression()
                    .map_err(|e| unsupported(source, start, &e))?;
                nodes.push(node);
            } else {
                parser.pos += 1;
            }
        }
        out.push_str(&source[at..start]);
        let mut from = start;
        for node in &nodes {
            out.push_str(&source[from..node.start]);
            emit(source, node, &mut out);
            from = node.end;
        }
        out.push_str(&source[from..end]);
        at = end;
    }
    out.push_str(&source[at..]);
    Ok(std::borrow::Cow::Owned(out))
}

fn unsupported(source: &str, at: usize, why: &str) -> RenderError {
    let line = source[..at].matches('\n').count() + 1;
    RenderError::Unsupported(format!(
        "the template makes Markup values (|safe, |e) and kvaudit cannot read the expression at line {line} to apply MarkupSafe's `+`: {why}"
    ))
}

/// The expression text with its `+` and `~` operations replaced.
fn emit(src: &str, node: &Node, out: &mut String) {
    match &node.op {
        Op::Add => {
            out.push_str(ADD_FUNCTION);
            out.push('(');
            emit(src, &node.children[0], out);
            out.push_str(", ");
            emit(src, &node.children[1], out);
            out.push(')');
        }
        Op::Concat | Op::Other => {
            if node.op == Op::Concat {
                out.push_str(PLAIN_FUNCTION);
                out.push('(');
            }
            let mut from = node.start;
            for child in &node.children {
                out.push_str(&src[from..child.start]);
                emit(src, child, out);
                from = child.end;
            }
            out.push_str(&src[from..node.end]);
            if node.op == Op::Concat {
                out.push(')');
            }
        }
    }
}

/// A `{{ ... }}` or `{% ... %}` tag: the byte range of what is between its delimiters
/// (whitespace-control markers excluded).
struct Tag {
    body: (usize, usize),
    statement: bool,
}

/// Every expression or statement tag, skipping comments and `raw` blocks.
fn tags(src: &str) -> Vec<Tag> {
    let bytes = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(rel) = src[i..].find('{') {
        let at = i + rel;
        match bytes.get(at + 1) {
            Some(b'#') => {
                i = src[at + 2..]
                    .find("#}")
                    .map_or(src.len(), |e| at + 2 + e + 2);
            }
            Some(&c @ (b'{' | b'%')) => {
                let mut start = at + 2;
                if matches!(bytes.get(start), Some(b'-' | b'+')) {
                    start += 1;
                }
                let close = if c == b'{' { "}}" } else { "%}" };
                let Some(end) = tag_close(src, start, close) else {
                    return out;
                };
                let body_end = if end > start && matches!(bytes[end - 1], b'-' | b'+') {
                    end - 1
                } else {
                    end
                };
                let statement = c == b'%';
                let word = src[start..body_end].split_whitespace().next();
                out.push(Tag {
                    body: (start, body_end.max(start)),
                    statement,
                });
                i = end + 2;
                if statement && word == Some("raw") {
                    i = find_endraw(src, i);
                }
            }
            _ => i = at + 1,
        }
    }
    out
}

/// Where `close` ends the tag that starts at `from`: outside strings and, for `}}`, outside
/// the brackets of dict and list literals.
fn tag_close(src: &str, from: usize, close: &str) -> Option<usize> {
    let bytes = src.as_bytes();
    let mut depth = 0usize;
    let mut i = from;
    while i < bytes.len() {
        match bytes[i] {
            q @ (b'\'' | b'"') => {
                i += 1;
                while i < bytes.len() && bytes[i] != q {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' => depth = depth.saturating_sub(1),
            b'}' if depth > 0 => depth -= 1,
            // Bytes, not str: `i` steps through multi-byte characters.
            _ if depth == 0 && bytes[i..].starts_with(close.as_bytes()) => return Some(i),
            _ => {}
        }
        i += 1;
    }
    None
}

fn find_endraw(src: &str, from: usize) -> usize {
    let mut i = from;
    while let Some(rel) = src[i..].find("{%") {
        let at = i + rel;
        let mut start = at + 2;
        if matches!(src.as_bytes().get(start), Some(b'-' | b'+')) {
            start += 1;
        }
        let end = src[start..].find("%}").map_or(src.len(), |e| start + e);
        let body = src[start..end].trim_end_matches(['-', '+']).trim();
        if body == "endraw" {
            return (end + 2).min(src.len());
        }
        i = (end + 2).min(src.len());
        if i >= src.len() {
            break;
        }
    }
    src.len()
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Tok<'a> {
    Name(&'a str),
    Str,
    Num,
    Op(&'static str),
}

#[derive(Debug, Clone, Copy)]
struct Token<'a> {
    kind: Tok<'a>,
    start: usize,
    end: usize,
}

const OPS: [&str; 24] = [
    "//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">", "=", "(", ")", "[",
    "]", "{", "}", ",", ":", ".",
];

fn lex(src: &str, start: usize, end: usize) -> Result<Vec<Token<'_>>, String> {
    let text = &src[..end];
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = start;
    while i < end {
        let c = text[i..].chars().next().unwrap_or(' ');
        let begin = i;
        if c.is_whitespace() {
            i += c.len_utf8();
            continue;
        }
        let kind = if c == '\'' || c == '"' {
            i += 1;
            while i < end && bytes[i] != c as u8 {
                i += if bytes[i] == b'\\' { 2 } else { 1 };
            }
            if i >= end {
                return Err("unterminated string".into());
            }
            i += 1;
            Tok::Str
        } else if c.is_ascii_digit() {
            while i < end && (bytes[i].is_ascii_digit() || bytes[i] == b'_') {
                i += 1;
            }
            if i + 1 < end && bytes[i] == b'.' && bytes[i + 1].is_ascii_digit() {
                i += 1;
                while i < end && (bytes[i].is_ascii_digit() || bytes[i] == b'_') {
                    i += 1;
                }
            }
            if i < end && matches!(bytes[i], b'e' | b'E') {
                let mut j = i + 1;
                if j < end && matches!(bytes[j], b'+' | b'-') {
                    j += 1;
                }
                if j < end && bytes[j].is_ascii_digit() {
                    i = j;
                    while i < end && bytes[i].is_ascii_digit() {
                        i += 1;
                    }
                }
            }
            Tok::Num
        } else if c.is_alphabetic() || c == '_' {
            while i < end {
                let d = text[i..].chars().next().unwrap_or(' ');
                if !(d.is_alphanumeric() || d == '_') {
                    break;
                }
                i += d.len_utf8();
            }
            Tok::Name(&text[begin..i])
        } else if c == '|' {
            i += 1;
            Tok::Op("|")
        } else {
            let Some(op) = OPS.iter().find(|op| text[i..].starts_with(**op)) else {
                return Err(format!("unexpected character {c:?}"));
            };
            i += op.len();
            Tok::Op(op)
        };
        out.push(Token {
            kind,
            start: begin,
            end: i,
        });
    }
    Ok(out)
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Add,
    Concat,
    Other,
}

/// An expression's byte range and the sub-expressions that may hold `+` or `~`.
#[derive(Debug)]
struct Node {
    op: Op,
    start: usize,
    end: usize,
    children: Vec<Node>,
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

    fn bounded(self) -> Result<Node, String> {
        if self.depth > MAX_TREE_DEPTH {
            return Err(format!(
                "expression nested more than {MAX_TREE_DEPTH} levels deep"
            ));
        }
        Ok(self)
    }
}

/// Jinja2's expression grammar (its parser's precedence: conditional, `or`, `and`, `not`,
/// comparisons, `+`/`-`, `~`, `*`/`/`/`//`/`%`, `**`, unary, then primary, postfix and
/// filters/tests), keeping only what the rewrite needs.
struct Parser<'s, 't> {
    toks: &'t [Token<'s>],
    pos: usize,
    depth: usize,
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

    fn expect_op(&mut self, op: &str) -> Result<(), String> {
        if self.is_op(op) {
            self.pos += 1;
            Ok(())
        } else {
            Err(format!("expected `{op}`"))
        }
    }

    fn starts_expression(&self) -> bool {
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

    fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T, String>) -> Result<T, String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err("expression nested too deeply".into());
        }
        let r = f(self);
        self.depth -= 1;
        r
    }

    fn expression(&mut self) -> Result<Node, String> {
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
        operand: impl Fn(&mut Self) -> Result<Node, String>,
    ) -> Result<Node, String> {
        let start = self.start();
        let mut children = vec![operand(self)?];
        while let Some(n) = is_op(self) {
            self.pos += n;
            children.push(operand(self)?);
        }
        Ok(self.collapse(start, children))
    }

    fn or(&mut self) -> Result<Node, String> {
        self.binary_chain(|p| p.is_name("or").then_some(1), Self::and)
    }

    fn and(&mut self) -> Result<Node, String> {
        self.binary_chain(|p| p.is_name("and").then_some(1), Self::not)
    }

    fn not(&mut self) -> Result<Node, String> {
        if self.is_name("not") {
            let start = self.start();
            self.pos += 1;
            let inner = self.nested(Self::not)?;
            return Ok(Node::other(start, self.last_end(), vec![inner]));
        }
        self.compare()
    }

    fn compare(&mut self) -> Result<Node, String> {
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
    fn math1(&mut self) -> Result<Node, String> {
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

    fn concat(&mut self) -> Result<Node, String> {
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

    fn math2(&mut self) -> Result<Node, String> {
        self.binary_chain(
            |p| matches!(p.peek(), Some(Tok::Op("*" | "/" | "//" | "%"))).then_some(1),
            Self::pow,
        )
    }

    fn pow(&mut self) -> Result<Node, String> {
        self.binary_chain(|p| p.is_op("**").then_some(1), |p| p.unary(true))
    }

    fn unary(&mut self, with_filter: bool) -> Result<Node, String> {
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

    fn primary(&mut self) -> Result<Node, String> {
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
            _ => Err("expected an expression".into()),
        }
    }

    /// Comma-separated expressions up to `close` (dict items `k: v` when `pairs`), consuming it.
    fn list_until(&mut self, close: &str, pairs: bool) -> Result<Vec<Node>, String> {
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

    fn postfix(&mut self, start: usize, mut node: Node) -> Result<Node, String> {
        loop {
            if self.is_op(".") {
                self.pos += 1;
                match self.peek() {
                    Some(Tok::Name(_) | Tok::Num) => self.pos += 1,
                    _ => return Err("expected an attribute after `.`".into()),
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
    fn subscript(&mut self) -> Result<Vec<Node>, String> {
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
    fn call(&mut self, start: usize, callee: Node) -> Result<Node, String> {
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

    fn dotted_name(&mut self) -> Result<(), String> {
        if !matches!(self.peek(), Some(Tok::Name(_))) {
            return Err("expected a filter or test name".into());
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

    fn filters(&mut self, start: usize, mut node: Node) -> Result<Node, String> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn rewrite(src: &str) -> String {
        rewrite_operators(src).unwrap().into_owned()
    }

    #[test]
    fn templates_without_markup_are_left_alone() {
        let src = "{{ a + b ~ c }}{% set x = y + 1 %}";
        assert!(matches!(
            rewrite_operators(src).unwrap(),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    #[test]
    fn operators_become_calls_with_jinja2_precedence() {
        let a = ADD_FUNCTION;
        let p = PLAIN_FUNCTION;
        assert_eq!(
            rewrite("{{ 'x'|safe + t['name'] + 'y' }}"),
            format!("{{{{ {a}({a}('x'|safe, t['name']), 'y') }}}}")
        );
        // `~` binds tighter than `+`; `-` keeps its place in the chain.
        assert_eq!(
            rewrite("{{- a + b ~ c - d|e -}}"),
            format!("{{{{- {a}(a, {p}(b ~ c)) - d|e -}}}}")
        );
        assert_eq!(
            rewrite("{% set x = f(k=a + b, *c) if n is divisibleby 3 else [1 + 2] %}{{ x|e }}"),
            format!(
                "{{% set x = f(k={a}(a, b), *c) if n is divisibleby 3 else [{a}(1, 2)] %}}{{{{ x|e }}}}"
            )
        );
        assert_eq!(
            rewrite("{% for k, v in (d + e).items() if v + 1 %}{{ v|safe }}{% endfor %}"),
            format!(
                "{{% for k, v in ({a}(d, e)).items() if {a}(v, 1) %}}{{{{ v|safe }}}}{{% endfor %}}"
            )
        );
        // Comments, raw blocks and strings are not expressions.
        assert_eq!(
            rewrite(
                "{# a + b #}{% raw %}{{ a + b }}{% endraw %}{{ '+' ~ {'k': 1}['k'] }}{{ x|e }}"
            ),
            format!(
                "{{# a + b #}}{{% raw %}}{{{{ a + b }}}}{{% endraw %}}{{{{ {p}('+' ~ {{'k': 1}}['k']) }}}}{{{{ x|e }}}}"
            )
        );
    }

    /// Outputs measured with jinja2 3.1.6 / MarkupSafe 3.0.3 in transformers' environment.
    #[test]
    fn markup_renders_as_in_transformers() {
        use crate::render::TemplateEngine;
        let at = chrono::NaiveDate::from_ymd_opt(2026, 1, 15)
            .unwrap()
            .and_hms_opt(10, 0, 0)
            .unwrap();
        let ctx = minijinja::context! { x => "<x&y>", d => minijinja::context! { k => "<v'\"" } };
        let r = |src: &str| {
            TemplateEngine::new(src, crate::render::DEFAULT_FUEL)
                .and_then(|e| e.render(ctx.clone(), at))
                .map_err(|e| e.to_string())
        };
        let cases = [
            ("{{ '<a>'|safe + '<b>' }}", "<a>&lt;b&gt;"),
            ("{{ '<b>' + '<a>'|safe }}", "&lt;b&gt;<a>"),
            ("{{ '<a>'|safe + '<b>'|safe }}", "<a><b>"),
            ("{{ ('<a>'|safe ~ '<b>') + '<c>' }}", "<a><b><c>"),
            ("{{ '<a>'|safe ~ '<b>' }}", "<a><b>"),
            (
                "{{ '<a>'|e }}|{{ '<a>'|escape }}|{{ '\"&\\''|e }}",
                "&lt;a&gt;|&lt;a&gt;|&#34;&amp;&#39;",
            ),
            ("{{ ('<a>'|e) + '<' }}", "&lt;a&gt;&lt;"),
            (
                "{{ ('<a>'|e)|e }}|{{ ('<a>'|e)|forceescape }}",
                "&lt;a&gt;|&amp;lt;a&amp;gt;",
            ),
            (
                "{{ none|safe }}|{{ 1|safe }}|{{ true|e }}|{{ 1.5|e }}|{{ none|e }}",
                "None|1|True|1.5|None",
            ),
            ("{{ '<'|safe + x }}", "<&lt;x&amp;y&gt;"),
            (
                "{{ '<'|safe + d|tojson }}",
                "<{&#34;k&#34;: &#34;&lt;v&#39;\\&#34;&#34;}",
            ),
            ("{% set m = '<'|safe %}{{ m + '>' }}", "<&gt;"),
            ("{{ ('<'|safe|trim) + '>' }}", "<&gt;"),
            ("{{ ('<'|safe)|upper + '>' }}", "<&gt;"),
            ("{{ ('<'|safe)|string + '>' }}", "<&gt;"),
            ("{{ ('<'|safe)|indent(2) + '>' }}", "<&gt;"),
            ("{{ ('<'|safe)|default('x') + '>' }}", "<&gt;"),
            ("{{ ('<'|safe) * 2 + '>' }}", "<<&gt;"),
            ("{{ ['<'|safe, '>']|join + '>' }}", "<>>"),
            ("{{ ('<'|safe ~ '<'|safe) + '>' }}", "<<>"),
            (
                "{% macro f() %}<{% endmacro %}{{ f()|e + '>' }}",
                "&lt;&gt;",
            ),
            ("{% set c %}<{% endset %}{{ c + '>' }}{{ '|'|e }}", "<>|"),
            ("{{ ('a'|safe) + (['<']|first) }}", "a&lt;"),
            ("{{ ('<'|safe)|length }}{{ '<'|safe == '<' }}", "1True"),
            ("{{ ('<'|safe if true else 'x') + '>' }}", "<&gt;"),
            ("{{ '<'|safe + '>' if true }}", "<&gt;"),
            (
                "{{ 1 + 2 }}{{ [1] + [2] }}{{ 'a' + 'b' }}{{ x|e }}",
                "3[1, 2]ab&lt;x&amp;y&gt;",
            ),
        ];
        for (src, want) in cases {
            assert_eq!(r(src).as_deref(), Ok(want), "{src}");
        }
        for src in [
            "{{ '<a>'|safe + 1 }}",
            "{{ 1 + '<a>'|safe }}",
            "{{ '<a>'|safe + none }}",
            "{{ 'a' + 'b' - 1 }}{{ x|e }}",
        ] {
            assert!(r(src).is_err(), "{src} rendered {:?}", r(src));
        }
    }

    /// Long chains are refused with an error, never walked until the stack overflows.
    #[test]
    fn long_chains_stop_with_an_error() {
        for link in [" + a", ".a", "|trim", "(1)"] {
            let src = format!("{{{{ x|safe }}}}{{{{ y{} }}}}", link.repeat(200_000));
            let err = match rewrite_operators(&src) {
                Ok(_) => panic!("{link}: a 200,000-link chain was accepted"),
                Err(e) => e.to_string(),
            };
            assert!(err.contains("nested more than"), "{link}: {err}");
        }
        let fine = format!("{{{{ x|safe }}}}{{{{ y{} }}}}", " + a".repeat(500));
        assert!(rewrite_operators(&fine).is_ok());
    }

    /// Found by fuzzing: a multi-byte character inside a tag of a Markup template panicked
    /// (a str slice inside the character).
    #[test]
    fn multibyte_characters_inside_tags() {
        let src = "{{ x|e }}{{ 上 + '東' ~ ü }}{% set é = 'ß' %}";
        let out = rewrite(src);
        assert_eq!(
            out,
            format!(
                "{{{{ x|e }}}}{{{{ {ADD_FUNCTION}(上, {PLAIN_FUNCTION}('東' ~ ü)) }}}}{{% set é = 'ß' %}}"
            )
        );
    }

    #[test]
    fn escape_like_markupsafe() {
        let mut out = String::new();
        html_escape("<a href=\"x\">'&'</a>", &mut out);
        assert_eq!(out, "&lt;a href=&#34;x&#34;&gt;&#39;&amp;&#39;&lt;/a&gt;");
    }
}
