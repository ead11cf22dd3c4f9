//! The switches a chat template exposes to keep history stable, read from its source.
//!
//! The rule (no model list): a *history switch* is a variable that
//! 1. the caller supplies — minijinja's `undeclared_variables` of the template as kvaudit
//!    compiles it (a name the template reads before or without setting it);
//! 2. is named for thinking, reasoning or history — its lower-cased name contains one of
//!    [`SWITCH_WORDS`] (`clear_thinking`, `preserve_thinking`, `enable_thinking`,
//!    `truncate_history_thinking`, `keep_reasoning`, …);
//! 3. and is *tested*: compared with a string literal (`x == "all"`), which makes those
//!    literals its values, or used as a condition (`if x`, `not x`, `x is false`, a ternary),
//!    which makes `true` and `false` its values. A name that is only checked with
//!    `is defined` and then printed (gpt-oss's `reasoning_effort`) is a setting, not a switch:
//!    the remedy for changing it between requests is keeping it, which is priced separately.
//!
//! A date variable is one the caller supplies whose name contains `date` (Llama 3's
//! `date_string`), or a call of `strftime_now`.

use std::collections::BTreeSet;

use minijinja::machinery::ast::{CallArg, CompareOpKind, Expr, Stmt, UnaryOpKind};
use minijinja::syntax::SyntaxConfig;
use serde_json::Value as Json;

use super::source::prepare;

/// Words a history switch's name contains.
pub const SWITCH_WORDS: [&str; 8] = [
    "think",
    "reason",
    "history",
    "preserve",
    "clear",
    "truncate",
    "interleav",
    "keep",
];

/// The most switch values tried per template: each is a full re-render of the conversation,
/// and a hostile template could compare a name with thousands of literals. Real templates
/// have one to three switches of two values.
pub const MAX_SWITCH_VALUES: usize = 16;

/// A kwarg the template tests, and the values worth trying.
#[derive(Debug, Clone, PartialEq)]
pub struct Switch {
    pub name: String,
    pub values: Vec<Json>,
}

/// What the template reads that makes prompts depend on the date.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DateSource {
    /// Caller-supplied variables named for a date (`date_string`).
    pub variables: Vec<String>,
    /// The template calls `strftime_now`.
    pub strftime_now: bool,
}

impl DateSource {
    pub fn reads_date(&self) -> bool {
        self.strftime_now || !self.variables.is_empty()
    }
}

/// The template's history switches and date sources (empty when it does not parse: then it
/// does not render either, and the audit says so).
pub fn inspect(template: &str) -> (Vec<Switch>, DateSource) {
    let Ok(source) = prepare(template) else {
        return Default::default();
    };
    let env = minijinja::Environment::new();
    let Ok(compiled) = env.template_from_str(&source) else {
        return Default::default();
    };
    let undeclared: BTreeSet<String> = compiled.undeclared_variables(false).into_iter().collect();
    let Ok(ast) = minijinja::machinery::parse(&source, "chat_template", SyntaxConfig::default())
    else {
        return Default::default();
    };
    let mut uses = Uses::default();
    uses.stmt(&ast);

    let mut switches = Vec::new();
    let mut tried = 0usize;
    for name in &undeclared {
        let lower = name.to_ascii_lowercase();
        if !SWITCH_WORDS.iter().any(|w| lower.contains(w)) {
            continue;
        }
        let literals: BTreeSet<&str> = uses
            .compared
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .collect();
        let values: Vec<Json> = if !literals.is_empty() {
            literals
                .into_iter()
                .map(|v| Json::String(v.into()))
                .collect()
        } else if uses.conditions.contains(name) {
            vec![Json::Bool(false), Json::Bool(true)]
        } else {
            continue;
        };
        let room = MAX_SWITCH_VALUES - tried;
        if room == 0 {
            break;
        }
        let values: Vec<Json> = values.into_iter().take(room).collect();
        tried += values.len();
        switches.push(Switch {
            name: name.clone(),
            values,
        });
    }
    let dates = DateSource {
        variables: undeclared
            .iter()
            .filter(|n| n.to_ascii_lowercase().contains("date"))
            .cloned()
            .collect(),
        strftime_now: uses.calls.contains("strftime_now"),
    };
    (switches, dates)
}

/// How names are used: as conditions, compared with literals, called.
#[derive(Default)]
struct Uses {
    conditions: BTreeSet<String>,
    compared: BTreeSet<(String, String)>,
    calls: BTreeSet<String>,
}

fn var(e: &Expr) -> Option<String> {
    match e {
        Expr::Var(v) => Some(v.id.to_string()),
        _ => None,
    }
}

fn literal(e: &Expr) -> Option<String> {
    match e {
        Expr::Const(c) => c.value.as_str().map(str::to_string),
        _ => None,
    }
}

impl Uses {
    fn stmts(&mut self, stmts: &[Stmt]) {
        for s in stmts {
            self.stmt(s);
        }
    }

    fn stmt(&mut self, s: &Stmt) {
        match s {
            Stmt::Template(t) => self.stmts(&t.children),
            Stmt::EmitExpr(e) => self.expr(&e.expr, false),
            Stmt::ForLoop(f) => {
                self.expr(&f.iter, false);
                if let Some(e) = &f.filter_expr {
                    self.expr(e, true);
                }
                self.stmts(&f.body);
                self.stmts(&f.else_body);
            }
            Stmt::IfCond(c) => {
                self.expr(&c.expr, true);
                self.stmts(&c.true_body);
                self.stmts(&c.false_body);
            }
            Stmt::WithBlock(w) => {
                for (_, value) in &w.assignments {
                    self.expr(value, false);
                }
                self.stmts(&w.body);
            }
            Stmt::Set(set) => self.expr(&set.expr, false),
            Stmt::SetBlock(b) => {
                if let Some(f) = &b.filter {
                    self.expr(f, false);
                }
                self.stmts(&b.body);
            }
            Stmt::AutoEscape(a) => self.stmts(&a.body),
            Stmt::FilterBlock(f) => {
                self.expr(&f.filter, false);
                self.stmts(&f.body);
            }
            Stmt::Block(b) => self.stmts(&b.body),
            Stmt::Macro(m) => {
                for d in &m.defaults {
                    self.expr(d, false);
                }
                self.stmts(&m.body);
            }
            Stmt::CallBlock(c) => {
                self.expr(&c.call.expr, false);
                self.args(&c.call.args);
                self.stmts(&c.macro_decl.body);
            }
            Stmt::Do(d) => {
                self.expr(&d.call.expr, false);
                self.args(&d.call.args);
            }
            _ => {}
        }
    }

    fn args(&mut self, args: &[CallArg]) {
        for a in args {
            match a {
                CallArg::Pos(e)
                | CallArg::Kwarg(_, e)
                | CallArg::PosSplat(e)
                | CallArg::KwargSplat(e) => self.expr(e, false),
            }
        }
    }

    /// `name == "literal"` either way round.
    fn compare(&mut self, left: &Expr, right: &Expr) {
        for (a, b) in [(left, right), (right, left)] {
            if let (Some(name), Some(value)) = (var(a), literal(b)) {
                self.compared.insert((name, value));
            }
        }
    }

    /// `condition`: the value of `e` decides a branch (so a bare name in it is a switch).
    fn expr(&mut self, e: &Expr, condition: bool) {
        match e {
            Expr::Var(v) => {
                if condition {
                    self.conditions.insert(v.id.to_string());
                }
            }
            Expr::Const(_) => {}
            Expr::UnaryOp(u) => self.expr(&u.expr, condition && matches!(u.op, UnaryOpKind::Not)),
            Expr::BinOp(b) => {
                // `and` / `or` keep their operands' truth deciding the branch.
                use minijinja::machinery::ast::BinOpKind;
                // A single comparison parses as a binary operator, a chain as `Compare`.
                if matches!(b.op, BinOpKind::Eq | BinOpKind::Ne) {
                    self.compare(&b.left, &b.right);
                }
                let logic = matches!(b.op, BinOpKind::ScAnd | BinOpKind::ScOr);
                self.expr(&b.left, condition && logic);
                self.expr(&b.right, condition && logic);
            }
            Expr::Compare(c) => {
                let mut left = &c.expr;
                for op in &c.ops {
                    if matches!(op.op, CompareOpKind::Eq | CompareOpKind::Ne) {
                        self.compare(left, &op.expr);
                    }
                    left = &op.expr;
                }
                self.expr(&c.expr, false);
                for op in &c.ops {
                    self.expr(&op.expr, false);
                }
            }
            Expr::IfExpr(i) => {
                self.expr(&i.test_expr, true);
                self.expr(&i.true_expr, false);
                if let Some(f) = &i.false_expr {
                    self.expr(f, false);
                }
            }
            Expr::Test(t) => {
                // `x is defined` asks whether the caller passed it, not what it says.
                let about_value = !matches!(t.name, "defined" | "undefined" | "none");
                self.expr(&t.expr, condition && about_value);
                self.args(&t.args);
            }
            Expr::Filter(f) => {
                if let Some(x) = &f.expr {
                    self.expr(x, false);
                }
                self.args(&f.args);
            }
            Expr::Slice(s) => {
                self.expr(&s.expr, false);
                for part in [&s.start, &s.stop, &s.step].into_iter().flatten() {
                    self.expr(part, false);
                }
            }
            Expr::GetAttr(g) => self.expr(&g.expr, false),
            Expr::GetItem(g) => {
                self.expr(&g.expr, false);
                self.expr(&g.subscript_expr, false);
            }
            Expr::Call(c) => {
                if let Some(name) = var(&c.expr) {
                    self.calls.insert(name);
                }
                self.expr(&c.expr, false);
                self.args(&c.args);
            }
            Expr::List(l) => l.items.iter().for_each(|x| self.expr(x, false)),
            Expr::Tuple(t) => t.items.iter().for_each(|x| self.expr(x, false)),
            Expr::Map(m) => {
                for (k, v) in m.keys.iter().zip(&m.values) {
                    self.expr(k, false);
                    self.expr(v, false);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(t: &str) -> Vec<(String, Vec<Json>)> {
        inspect(t)
            .0
            .into_iter()
            .map(|s| (s.name, s.values))
            .collect()
    }

    #[test]
    fn tested_names_are_switches_printed_ones_are_not() {
        let t = "{% if clear_thinking is defined and not clear_thinking %}a{% endif %}\
                 {% if reasoning_effort is not defined %}{% set reasoning_effort = 'medium' %}{% endif %}\
                 {{ reasoning_effort }}{{ 'x' if enable_thinking else 'y' }}\
                 {% if history_mode == 'all' %}{% endif %}{% if user_name %}{% endif %}";
        assert_eq!(
            names(t),
            vec![
                (
                    "clear_thinking".into(),
                    vec![Json::Bool(false), Json::Bool(true)]
                ),
                (
                    "enable_thinking".into(),
                    vec![Json::Bool(false), Json::Bool(true)]
                ),
                ("history_mode".into(), vec![Json::String("all".into())]),
            ]
        );
    }

    #[test]
    fn values_tried_are_bounded() {
        let mut t = String::new();
        for i in 0..40 {
            t.push_str(&format!(
                "{{% if history_{i} == 'a' or history_{i} == 'b' %}}{{% endif %}}"
            ));
        }
        let found = inspect(&t).0;
        let values: usize = found.iter().map(|s| s.values.len()).sum();
        assert_eq!(values, MAX_SWITCH_VALUES);
    }

    #[test]
    fn a_name_the_template_sets_itself_is_not_read() {
        assert!(names("{% set thinking = true %}{% if thinking %}{% endif %}").is_empty());
    }

    #[test]
    fn dates() {
        let (_, d) = inspect("{{ strftime_now('%d %b %Y') }}");
        assert!(d.strftime_now && d.variables.is_empty());
        let (_, d) = inspect("{% if not date_string is defined %}{% endif %}{{ date_string }}");
        assert_eq!(d.variables, vec!["date_string".to_string()]);
        assert!(!inspect("{{ messages }}").1.reads_date());
    }
}
