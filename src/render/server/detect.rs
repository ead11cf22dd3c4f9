//! Which content format a server hands a template: plain strings, or OpenAI-style part lists.
//! vLLM and SGLang decide it by reading the template's syntax tree; this reads the same tree
//! (minijinja's parser, on the template as prepared for rendering) and applies their rules
//! (server-preprocessing.md 1.2 and 2.2).

use minijinja::machinery::ast::{CallArg, Expr, Stmt};
use minijinja::syntax::SyntaxConfig;

use crate::render::source::{ITER_FILTER, prepare};

/// How message content reaches the template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContentFormat {
    /// Text parts joined into one string.
    String,
    /// A list of `{"type": ...}` parts.
    OpenAi,
}

/// Everything of the tree the detectors look at, in Jinja2's `find_all` order (pre-order).
#[derive(Default)]
struct Facts<'a> {
    /// `{% set name = expr %}`: the target when it is a plain name, and the value.
    sets: Vec<(Option<&'a str>, &'a Expr<'a>)>,
    /// Every `for` loop: its target when a plain name, its iterable, and the macro it is in.
    loops: Vec<Loop<'a>>,
    macros: Vec<MacroFacts<'a>>,
    calls: Vec<CallFacts<'a>>,
}

/// A call of a plain name: the name, positional arguments, keyword arguments.
struct CallFacts<'a> {
    name: &'a str,
    positional: Vec<&'a Expr<'a>>,
    keywords: Vec<(&'a str, &'a Expr<'a>)>,
}

struct Loop<'a> {
    target: Option<&'a str>,
    iter: &'a Expr<'a>,
    /// Index into `Facts::macros` of every macro the loop is inside.
    macros: Vec<usize>,
}

struct MacroFacts<'a> {
    name: &'a str,
    params: Vec<&'a str>,
}

fn var_name<'a>(e: &'a Expr<'a>) -> Option<&'a str> {
    match e {
        Expr::Var(v) => Some(v.id),
        _ => None,
    }
}

/// kvaudit's own iteration filter is not in the template Jinja2 parses: look through it.
fn unwrap_iter<'a>(e: &'a Expr<'a>) -> &'a Expr<'a> {
    match e {
        Expr::Filter(f) if f.name == ITER_FILTER => f.expr.as_ref().map_or(e, unwrap_iter),
        _ => e,
    }
}

impl<'a> Facts<'a> {
    fn stmts(&mut self, stmts: &'a [Stmt<'a>], in_macros: &[usize]) {
        for s in stmts {
            self.stmt(s, in_macros);
        }
    }

    fn stmt(&mut self, s: &'a Stmt<'a>, in_macros: &[usize]) {
        match s {
            Stmt::Template(t) => self.stmts(&t.children, in_macros),
            Stmt::EmitExpr(e) => self.expr(&e.expr),
            Stmt::EmitRaw(_) => {}
            Stmt::ForLoop(f) => {
                self.loops.push(Loop {
                    target: var_name(&f.target),
                    iter: unwrap_iter(&f.iter),
                    macros: in_macros.to_vec(),
                });
                self.expr(&f.iter);
                self.stmts(&f.body, in_macros);
                self.stmts(&f.else_body, in_macros);
                if let Some(e) = &f.filter_expr {
                    self.expr(e);
                }
            }
            Stmt::IfCond(c) => {
                self.expr(&c.expr);
                self.stmts(&c.true_body, in_macros);
                self.stmts(&c.false_body, in_macros);
            }
            Stmt::WithBlock(w) => {
                for (_, value) in &w.assignments {
                    self.expr(value);
                }
                self.stmts(&w.body, in_macros);
            }
            Stmt::Set(set) => {
                self.sets.push((var_name(&set.target), &set.expr));
                self.expr(&set.expr);
            }
            Stmt::SetBlock(b) => {
                if let Some(f) = &b.filter {
                    self.expr(f);
                }
                self.stmts(&b.body, in_macros);
            }
            Stmt::AutoEscape(a) => self.stmts(&a.body, in_macros),
            Stmt::FilterBlock(f) => {
                self.expr(&f.filter);
                self.stmts(&f.body, in_macros);
            }
            Stmt::Block(b) => self.stmts(&b.body, in_macros),
            Stmt::Macro(m) => self.macro_decl(m.name, &m.args, &m.defaults, &m.body, in_macros),
            Stmt::CallBlock(c) => {
                self.call(&c.call.expr, &c.call.args);
                let m = &c.macro_decl;
                self.macro_decl(m.name, &m.args, &m.defaults, &m.body, in_macros);
            }
            Stmt::Do(d) => self.call(&d.call.expr, &d.call.args),
            _ => {}
        }
    }

    fn macro_decl(
        &mut self,
        name: &'a str,
        args: &'a [Expr<'a>],
        defaults: &'a [Expr<'a>],
        body: &'a [Stmt<'a>],
        in_macros: &[usize],
    ) {
        self.macros.push(MacroFacts {
            name,
            params: args.iter().filter_map(var_name).collect(),
        });
        let mut inside = in_macros.to_vec();
        inside.push(self.macros.len() - 1);
        for d in defaults {
            self.expr(d);
        }
        self.stmts(body, &inside);
    }

    fn call(&mut self, callee: &'a Expr<'a>, args: &'a [CallArg<'a>]) {
        if let Some(name) = var_name(callee) {
            let mut pos = Vec::new();
            let mut kw = Vec::new();
            for a in args {
                match a {
                    CallArg::Pos(e) => pos.push(e),
                    CallArg::Kwarg(k, e) => kw.push((*k, e)),
                    _ => {}
                }
            }
            self.calls.push(CallFacts {
                name,
                positional: pos,
                keywords: kw,
            });
        }
        self.expr(callee);
        self.args(args);
    }

    fn expr(&mut self, e: &'a Expr<'a>) {
        match e {
            Expr::Var(_) | Expr::Const(_) => {}
            Expr::Slice(s) => {
                self.expr(&s.expr);
                for part in [&s.start, &s.stop, &s.step].into_iter().flatten() {
                    self.expr(part);
                }
            }
            Expr::UnaryOp(u) => self.expr(&u.expr),
            Expr::BinOp(b) => {
                self.expr(&b.left);
                self.expr(&b.right);
            }
            Expr::Compare(c) => {
                self.expr(&c.expr);
                for op in &c.ops {
                    self.expr(&op.expr);
                }
            }
            Expr::IfExpr(i) => {
                self.expr(&i.test_expr);
                self.expr(&i.true_expr);
                if let Some(f) = &i.false_expr {
                    self.expr(f);
                }
            }
            Expr::Filter(f) => {
                if let Some(x) = &f.expr {
                    self.expr(x);
                }
                self.args(&f.args);
            }
            Expr::Test(t) => {
                self.expr(&t.expr);
                self.args(&t.args);
            }
            Expr::GetAttr(g) => self.expr(&g.expr),
            Expr::GetItem(g) => {
                self.expr(&g.expr);
                self.expr(&g.subscript_expr);
            }
            Expr::Call(c) => self.call(&c.expr, &c.args),
            Expr::List(l) => l.items.iter().for_each(|x| self.expr(x)),
            Expr::Tuple(t) => t.items.iter().for_each(|x| self.expr(x)),
            Expr::Map(m) => {
                for (k, v) in m.keys.iter().zip(&m.values) {
                    self.expr(k);
                    self.expr(v);
                }
            }
        }
    }

    fn args(&mut self, args: &'a [CallArg<'a>]) {
        for a in args {
            match a {
                CallArg::Pos(e)
                | CallArg::Kwarg(_, e)
                | CallArg::PosSplat(e)
                | CallArg::KwargSplat(e) => self.expr(e),
            }
        }
    }
}

/// `name`, or `name.key` / `name['key']`, seen through filters, tests and slices.
fn reaches(e: &Expr, name: &str, key: Option<&str>) -> bool {
    match e {
        Expr::Filter(f) => f.expr.as_ref().is_some_and(|x| reaches(x, name, key)),
        Expr::Test(t) => reaches(&t.expr, name, key),
        Expr::Slice(s) => reaches(&s.expr, name, key),
        _ => match key {
            None => var_name(e) == Some(name),
            Some(key) => match e {
                Expr::GetAttr(g) => g.name == key && var_name(&g.expr) == Some(name),
                Expr::GetItem(g) => {
                    var_name(&g.expr) == Some(name)
                        && matches!(&g.subscript_expr, Expr::Const(c) if c.value.as_str() == Some(key))
                }
                _ => false,
            },
        },
    }
}

/// vLLM's detector asserts a plain name where it binds one; anything else ends detection with
/// its default ("string").
struct Unclear;

fn vllm_loops_over_content(facts: &Facts) -> Result<bool, Unclear> {
    let mut lists = vec!["messages"];
    let mut queue = std::collections::VecDeque::from(["messages"]);
    while let Some(current) = queue.pop_front() {
        for (target, value) in &facts.sets {
            if reaches(value, current, None) {
                let lhs = target.ok_or(Unclear)?;
                lists.push(lhs);
                if lhs != current {
                    queue.push_back(lhs);
                }
            }
            // A template that keeps re-assigning in a cycle would grow the queue forever in
            // vLLM too (it only skips self-assignment); stop where vLLM's answer is fixed.
            if lists.len() > 10_000 {
                return Err(Unclear);
            }
        }
    }
    let mut messages = Vec::new();
    for l in &facts.loops {
        if lists.iter().any(|n| reaches(l.iter, n, None)) {
            messages.push(l.target.ok_or(Unclear)?);
        }
    }
    let bound: Vec<Vec<&str>> = facts
        .macros
        .iter()
        .map(|m| {
            let mut params = Vec::new();
            for call in &facts.calls {
                if call.name != m.name {
                    continue;
                }
                for (i, arg) in call.positional.iter().enumerate() {
                    if i < m.params.len()
                        && messages.iter().any(|v| reaches(arg, v, Some("content")))
                    {
                        params.push(m.params[i]);
                    }
                }
                for (k, value) in &call.keywords {
                    if m.params.contains(k)
                        && messages.iter().any(|v| reaches(value, v, Some("content")))
                    {
                        params.push(*k);
                    }
                }
            }
            params
        })
        .collect();
    for l in &facts.loops {
        if messages.iter().any(|v| reaches(l.iter, v, Some("content"))) {
            return l.target.map(|_| true).ok_or(Unclear);
        }
        // vLLM keeps one parameter set per loop, the innermost macro's that has any.
        let params = l
            .macros
            .iter()
            .rev()
            .map(|&m| &bound[m])
            .find(|p| !p.is_empty());
        if let (Some(name), Some(params)) = (var_name(l.iter), params)
            && params.contains(&name)
        {
            return l.target.map(|_| true).ok_or(Unclear);
        }
        if l.macros.is_empty() && var_name(l.iter) == Some("content") {
            return l.target.map(|_| true).ok_or(Unclear);
        }
    }
    Ok(false)
}

fn parsed<T>(template: &str, read: impl FnOnce(&Facts) -> T) -> Option<T> {
    let source = prepare(template).ok()?;
    let ast =
        minijinja::machinery::parse(&source, "chat_template", SyntaxConfig::default()).ok()?;
    let mut facts = Facts::default();
    facts.stmt(&ast, &[]);
    Some(read(&facts))
}

/// vLLM (`_detect_content_format`): "openai" when a loop iterates a message's content.
pub fn vllm_content_format(template: &str) -> ContentFormat {
    match parsed(template, vllm_loops_over_content) {
        Some(Ok(true)) => ContentFormat::OpenAi,
        _ => ContentFormat::String,
    }
}

/// SGLang (`detect_jinja_template_content_format`): a media keyword anywhere in the text, or a
/// loop over `message`/`msg`/`m` `.content`.
pub fn sglang_content_format(template: &str) -> ContentFormat {
    if ["image", "audio", "video", "vision"]
        .iter()
        .any(|k| template.contains(k))
    {
        return ContentFormat::OpenAi;
    }
    let loops = parsed(template, |facts| {
        facts.loops.iter().any(|l| {
            ["message", "msg", "m"]
                .iter()
                .any(|v| reaches(l.iter, v, Some("content")))
        })
    });
    if loops == Some(true) {
        ContentFormat::OpenAi
    } else {
        ContentFormat::String
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ContentFormat::{OpenAi, String as Str};

    #[test]
    fn vllm_follows_assignments_loops_and_macros() {
        let cases = [
            ("{% for m in messages %}{{ m.content }}{% endfor %}", Str),
            (
                "{% for m in messages %}{% for c in m.content %}{{ c }}{% endfor %}{% endfor %}",
                OpenAi,
            ),
            (
                "{% for m in messages %}{% for c in m['content'] | list %}{% endfor %}{% endfor %}",
                OpenAi,
            ),
            (
                "{% set ms = messages[1:] %}{% for m in ms %}{% for c in m.content %}{% endfor %}{% endfor %}",
                OpenAi,
            ),
            (
                "{% for m in messages if m.role == 'user' %}{% for c in m.content %}{% endfor %}{% endfor %}",
                OpenAi,
            ),
            // An assignment to a namespace attribute fails vLLM's assertion: the default.
            (
                "{% set ns = namespace() %}{% set ns.x = messages %}{% for m in messages %}{% for c in m.content %}{% endfor %}{% endfor %}",
                Str,
            ),
            (
                "{% macro r(c) %}{% for p in c %}{{ p }}{% endfor %}{% endmacro %}{% for m in messages %}{{ r(m.content) }}{% endfor %}",
                OpenAi,
            ),
            (
                "{% macro r(c) %}{% for p in c %}{{ p }}{% endfor %}{% endmacro %}{% for m in messages %}{{ r(c=m.content) }}{% endfor %}",
                OpenAi,
            ),
            (
                "{% macro r(c) %}{% for p in c %}{{ p }}{% endfor %}{% endmacro %}{% for m in messages %}{{ r(m.role) }}{% endfor %}",
                Str,
            ),
            (
                "{% for m in messages %}{% set content = m.content %}{% for p in content %}{% endfor %}{% endfor %}",
                OpenAi,
            ),
            (
                "{% for x in messages %}{% if x.content is string %}{{ x.content }}{% endif %}{% endfor %}",
                Str,
            ),
            ("{% for %}", Str),
        ];
        for (src, want) in cases {
            assert_eq!(vllm_content_format(src), want, "{src}");
        }
    }

    #[test]
    fn sglang_uses_keywords_and_three_loop_names() {
        assert_eq!(sglang_content_format("{{ 'vision' }}"), OpenAi);
        assert_eq!(
            sglang_content_format(
                "{% for msg in messages %}{% for c in msg.content %}{% endfor %}{% endfor %}"
            ),
            OpenAi
        );
        // Another loop variable name is not recognised by SGLang (vLLM follows it).
        let other = "{% for turn in messages %}{% for c in turn.content %}{% endfor %}{% endfor %}";
        assert_eq!(sglang_content_format(other), Str);
        assert_eq!(vllm_content_format(other), OpenAi);
    }
}
