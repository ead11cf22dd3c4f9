//! Hostile templates (issue 38, class 3: a template aborts the renderer), each read the way
//! every command reads a model's template: from a model directory for `diff-turns`, `render`
//! and `corpus` (on two worker threads), and through a `kvaudit.toml` naming it for `check`.
//! Each runs under an address-space cap (384 MiB, 640 for corpus and its two workers; going
//! past it aborts the run, which fails the case).
//!
//! Before the bounds of render/guard/, namespace.rs and bounded.rs these aborted on an
//! allocation of gigabytes (`'x'.center(10**10)`, `'{:>999999999}'.format('x')`, a list that
//! repeats a long string turned into text) or overflowed the stack (a namespace holding
//! itself printed or compared, a 50,000-term expression, a value nested in a loop). Now
//! kvaudit's limits end each in one `error:` line and exit 2; what transformers raises for
//! (`tojson` of a namespace) is the same error, a `check` finding (KVA301) like any template
//! that raises; and what transformers renders, kvaudit renders the same.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

enum Outcome {
    /// One of kvaudit's limits: exit 2 and one `error:` line holding the fragment, in every
    /// command.
    Refused(&'static str),
    /// An error transformers raises too: exit 2 and one `error:` line, except in `check`,
    /// where a template that raises is finding KVA301 (exit 1) with the message.
    Raises(&'static str),
    /// Rendered as transformers renders it: `render` prints this as the first prompt, the
    /// other commands end without error.
    Renders(&'static str),
}

struct Case {
    name: &'static str,
    template: String,
    outcome: Outcome,
}

fn case(name: &'static str, template: impl Into<String>, outcome: Outcome) -> Case {
    Case {
        name,
        template: template.into(),
        outcome,
    }
}

fn cases() -> Vec<Case> {
    use Outcome::*;
    let chain = |unit: &str, n: usize, end: &str| format!("{{{{ {}{end} }}}}", unit.repeat(n));
    let ns = "{% set ns = namespace(a=1) %}";
    let selfish = "{% set ns = namespace(a=1) %}{% set ns.a = ns %}";
    let repeated = "{% set s = 'x' * 10**6 %}{% set l = [s] * 1000 %}";
    vec![
        // Found by the round-3 sweep: these panicked in the formatting or template engine.
        case(
            "'%.70000e'|format",
            "{{ '%.70000e'|format(1.5) }}",
            Refused("a precision over 65535 is not supported"),
        ),
        case(
            "'{:.65536g}'.format",
            "{{ '{:.65536g}'.format(1.5) }}",
            Refused("a precision over 65535 is not supported"),
        ),
        case(
            "loop.cycle() without arguments",
            "{% for x in [1] %}{{ loop.cycle() }}{% endfor %}",
            Refused("the template engine failed on it"),
        ),
        // Python's padding and format specs: the size is checked before anything is made.
        case(
            "center(10**10)",
            "{{ 'x'.center(10**10) }}",
            Refused("center would produce more than"),
        ),
        case(
            "ljust(10**10)",
            "{{ 'x'.ljust(10**10) }}",
            Refused("ljust would produce more than"),
        ),
        case(
            "rjust(10**10, '*')",
            "{{ 'x'.rjust(10**10, '*') }}",
            Refused("rjust would produce more than"),
        ),
        case(
            "zfill(10**10)",
            "{{ '-5'.zfill(10**10) }}",
            Refused("zfill would produce more than"),
        ),
        case(
            "format width 999999999",
            "{{ '{:>999999999}'.format('x') }}",
            Refused("format would produce more than"),
        ),
        case(
            "format zero fill 999999999",
            "{{ '{:0999999999d}'.format(1) }}",
            Refused("format would produce more than"),
        ),
        case(
            "format precision 2**31-1",
            "{{ '{:.2147483647f}'.format(1.0) }}",
            Refused("format would produce more than"),
        ),
        case(
            "printf width 999999999",
            "{{ '%0999999999d'|format(1) }}",
            Refused("format would produce more than"),
        ),
        case(
            "replace at every character",
            "{{ ('a' * 10**6).replace('', 'x' * 100) }}",
            Refused("replace would produce more than"),
        ),
        case(
            "join with a 1 MB separator",
            "{{ ('x' * 10**6).join(['a'] * 100) }}",
            Refused("join would produce more than"),
        ),
        case(
            "'x' * 10**8",
            "{{ ('x' * 10**8)|length }}",
            Refused("* would produce more than"),
        ),
        case(
            "[s] * 10**8",
            "{{ (['x'] * 10**8)|length }}",
            Refused("* would make more than"),
        ),
        case(
            "a list joined to itself 40 times",
            "{% set x = [1] %}".to_string() + &"{% set x = x + x %}".repeat(40) + "{{ x|length }}",
            Refused("+ would make more than"),
        ),
        case(
            "a string joined to itself 40 times",
            "{% set x = 'ab' %}".to_string() + &"{% set x = x + x %}".repeat(40) + "{{ x|length }}",
            Refused("+ would produce more than"),
        ),
        case(
            "a 10 MB string split into 5 million pieces",
            "{% set s = 'ab' * 5000000 %}{{ s.split('a')|length }}",
            Refused("split would make more than"),
        ),
        case(
            "a strftime format of a million specifiers",
            "{{ strftime_now('%c' * 1000000)|length }}",
            Refused("strftime_now would produce more than"),
        ),
        // A small value that prints as gigabytes: its text is measured before it is made.
        case(
            "~ of a list repeating 1 MB",
            format!("{repeated}{{{{ (l ~ '')|length }}}}"),
            Refused("~ would produce more than"),
        ),
        case(
            "|string of it",
            format!("{repeated}{{{{ l|string|length }}}}"),
            Refused("string would produce more than"),
        ),
        case(
            "str.format of it",
            format!("{repeated}{{{{ '{{}}'.format(l)|length }}}}"),
            Refused("format would produce more than"),
        ),
        case(
            "|upper of it",
            format!("{repeated}{{{{ l|upper|length }}}}"),
            Refused("upper would produce more than"),
        ),
        case(
            "|pprint of it",
            format!("{repeated}{{{{ l|pprint|length }}}}"),
            Refused("pprint would produce more than"),
        ),
        // 50,000-term expressions: refused from the tokens, before anything parses them.
        case(
            "1+1+... 50,000 terms",
            chain("1+", 50_000, "1"),
            Refused("nests 50000 levels deep"),
        ),
        case(
            "-----1, 50,000 signs",
            chain("-", 50_000, "1"),
            Refused("nests 50000 levels deep"),
        ),
        case(
            "x.a.a... 50,000 attributes",
            format!("{{{{ x{} }}}}", ".a".repeat(50_000)),
            Refused("nests 50000 levels deep"),
        ),
        case(
            "not not ... 50,000",
            chain("not ", 50_000, "1"),
            Refused("nests 50000 levels deep"),
        ),
        case(
            "|abs|abs... 50,000 filters",
            format!("{{{{ 1{} }}}}", "|abs".repeat(50_000)),
            Refused("nests 50000 levels deep"),
        ),
        case(
            "a if b else ... 50,000",
            chain("1 if x else ", 50_000, "1"),
            Refused("nests 50000 levels deep"),
        ),
        case(
            "'a' ~ ... a 100 KB template",
            chain("'a' ~ ", 16_000, "1"),
            Refused("nests 16000 levels deep"),
        ),
        case(
            "101 nested loops over nested lists",
            "{% for x in [[[[[[[[[[x]]]]]]]]]] %}".repeat(101) + &"{% endfor %}".repeat(101),
            Refused("nest expressions"),
        ),
        case(
            "200 sets nesting one value",
            "{% set x = 1 %}".to_string() + &"{% set x = [[[[[[[[[[x]]]]]]]]]] %}".repeat(200),
            Refused("`set` statements"),
        ),
        // Values fed back: checked when kept.
        case(
            "a namespace attribute nested in a loop",
            "{% set ns = namespace(x=1) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}\
             {% endfor %}{{ ns.x }}",
            Refused("nested more than 500 levels deep"),
        ),
        case(
            "a macro argument nested in a recursion",
            format!(
                "{{% macro m(x, n) %}}{{% if n %}}{{{{ m(x{}, n - 1) }}}}{{% else %}}{{{{ x }}}}\
                 {{% endif %}}{{% endmacro %}}{{{{ m([1], 80) }}}}",
                "|batch(1)".repeat(12)
            ),
            Refused("nested more than 500 levels deep"),
        ),
        case(
            "macro arguments nested in a mutual recursion",
            format!(
                "{{% macro a(x, n) %}}{{% if n %}}{{{{ b(x{}, n - 1) }}}}{{% endif %}}{{% endmacro %}}\
                 {{% macro b(x, n) %}}{{{{ a(x{}, n) }}}}{{% endmacro %}}{{{{ a([1], 35) }}}}",
                "|batch(1)".repeat(9),
                "|batch(1)".repeat(9)
            ),
            Refused("nested more than 500 levels deep"),
        ),
        case(
            "a macro argument nested through a namespace",
            format!(
                "{{% set ns = namespace() %}}{{% macro m(x, n) %}}{{% if n %}}\
                 {{{{ ns.f(x{}, n - 1) }}}}{{% endif %}}{{% endmacro %}}{{% set ns.f = m %}}\
                 {{{{ m([1], 80) }}}}",
                "|batch(1)".repeat(12)
            ),
            Refused("nested more than 500 levels deep"),
        ),
        // A namespace holding itself: as transformers renders and raises.
        case(
            "namespace holding itself, printed",
            format!(
                "{selfish}{{{{ ns }}}}|{{{{ ns|string }}}}|{{{{ ns|pprint }}}}|{{{{ ns ~ '' }}}}|\
                 {{{{ '{{}}'.format(ns) }}}}"
            ),
            Renders(
                "<Namespace {'a': <Namespace {...}>}>|<Namespace {'a': <Namespace {...}>}>|\
                 <Namespace {'a': <Namespace {...}>}>|<Namespace {'a': <Namespace {...}>}>|\
                 <Namespace {'a': <Namespace {...}>}>",
            ),
        ),
        case(
            "namespace holding itself through a list and a dict",
            format!("{ns}{{% set ns.a = [ns, {{'k': ns}}] %}}{{{{ ns.a }}}}|{{{{ ns }}}}"),
            Renders(
                "[<Namespace {'a': [...]}>, {'k': <Namespace {'a': [...]}>}]|\
                 <Namespace {'a': [<Namespace {...}>, {'k': <Namespace {...}>}]}>",
            ),
        ),
        case(
            "namespaces holding themselves, compared",
            format!(
                "{selfish}{{% set n2 = namespace() %}}{{% set n2.a = n2 %}}{{{{ ns == n2 }}}}|\
                 {{{{ ns == ns.a }}}}|{{{{ [ns, n2]|unique|list|length }}}}|{{{{ [ns.a] == [ns] }}}}|\
                 {{{{ ns in [n2, ns] }}}}"
            ),
            Renders("False|True|2|True|True"),
        ),
        case(
            "namespace holding itself, as JSON",
            format!("{selfish}{{{{ ns|tojson }}}}"),
            Raises("Object of type Namespace is not JSON serializable"),
        ),
        case(
            "namespace holding itself, its items()",
            format!("{selfish}{{{{ ns.items()|list }}}}"),
            Raises("'Namespace' object has no attribute 'items'"),
        ),
        case(
            "namespace holding itself, looped over",
            format!("{selfish}{{% for k in ns %}}{{{{ k }}}}{{% endfor %}}"),
            Raises("'Namespace' object is not iterable"),
        ),
        case(
            "a namespace inside another",
            format!("{ns}{{% set n2 = namespace() %}}{{% set ns.a = n2 %}}{{% set n2.b = ns %}}"),
            Raises("namespace stored inside another namespace"),
        ),
        // Within the bounds: rendered as transformers does, on worker threads too.
        case(
            "moderate widths",
            "{{ 'x'.center(20, '*') }}|{{ '{:>6}|{:06.2f}'.format('a', 3.14159) }}|\
             {{ '%-4s|%03d'|format('b', 7) }}|{{ 'ab'.replace('', '-') }}",
            Renders("*********x**********|     a|003.14|b   |007|-a-b-"),
        ),
        case(
            "deep but within the bounds",
            format!(
                "{}|{{% set ns = namespace(x=1) %}}{{% for i in range(400) %}}\
                 {{% set ns.x = [ns.x] %}}{{% endfor %}}{{{{ ns.x|tojson|length }}}}|\
                 {{{{ (ns.x|string)|length }}}}|{{{{ ns.x == ns.x|list }}}}",
                chain("1+", 400, "1")
            ),
            Renders("401|801|801|True"),
        ),
    ]
}

/// A copy of the tiny model whose chat template is `template`.
fn model_dir(root: &Path, index: usize, template: &str) -> PathBuf {
    let dir = root.join(format!("model-{index}"));
    std::fs::create_dir_all(&dir).unwrap();
    let tiny = common::fixtures().join("models/tiny-think");
    for file in ["tokenizer.json", "tokenizer_config.json"] {
        std::fs::copy(tiny.join(file), dir.join(file)).unwrap();
    }
    std::fs::write(dir.join("chat_template.jinja"), template).unwrap();
    dir
}

/// The four commands on the model at `dir`, each as (name, arguments).
fn commands(dir: &Path) -> Vec<(&'static str, Vec<String>)> {
    let model = dir.display().to_string();
    let config = dir.join("kvaudit.toml");
    std::fs::write(&config, format!("[[model]]\nsource = {model:?}\n")).unwrap();
    let now = ["--now", "2026-01-15T10:00:00"];
    let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    vec![
        (
            "diff-turns",
            args(&[&["diff-turns", "-m", &model][..], &now].concat()),
        ),
        (
            "render",
            args(&[&["render", "-m", &model][..], &now].concat()),
        ),
        (
            "check",
            args(&["check", "--config", &config.display().to_string()]),
        ),
        (
            "corpus",
            args(&[
                "corpus",
                "-m",
                &model,
                "fixtures/corpus/chats.jsonl",
                "--jobs",
                "2",
            ]),
        ),
    ]
}

/// The first prompt's text in `render --format json` output.
fn first_prompt(stdout: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(stdout).ok()?;
    v["conversations"][0]["prompts"][0]["text"]
        .as_str()
        .map(str::to_string)
}

#[test]
fn hostile_templates_end_cleanly_in_bounded_memory() {
    let root = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for (i, case) in cases().into_iter().enumerate() {
        let dir = model_dir(root.path(), i, &case.template);
        for (command, mut args) in commands(&dir) {
            if command == "render" && matches!(case.outcome, Outcome::Renders(_)) {
                args.extend(["--format".to_string(), "json".to_string()]);
            }
            let argv: Vec<&str> = args.iter().map(String::as_str).collect();
            let cap = if command == "corpus" { 640 } else { 384 };
            let m = common::run_measured(&argv, &[], Duration::from_secs(60), cap);
            let stdout = String::from_utf8_lossy(&m.stdout);
            let error_line =
                m.stderr.trim_end().lines().count() == 1 && m.stderr.starts_with("error: ");
            let ok = !m.killed
                && !m.stderr.contains("panicked")
                && !m.stderr.contains("overflow")
                && match &case.outcome {
                    Outcome::Refused(fragment) => {
                        m.code == 2 && error_line && m.stderr.contains(fragment)
                    }
                    Outcome::Raises(fragment) if command == "check" => {
                        // The human report wraps the message at the terminal's width.
                        let words = stdout.split_whitespace().collect::<Vec<_>>().join(" ");
                        m.code == 1 && words.contains("KVA301") && words.contains(fragment)
                    }
                    Outcome::Raises(fragment) => {
                        m.code == 2 && error_line && m.stderr.contains(fragment)
                    }
                    Outcome::Renders(text) if command == "render" => {
                        m.code == 0 && first_prompt(&m.stdout).as_deref() == Some(*text)
                    }
                    Outcome::Renders(_) => m.code == 0 || m.code == 1,
                };
            eprintln!(
                "{:<50} {:<10} exit {:>3}  {}",
                case.name,
                command,
                m.code,
                m.stderr
                    .lines()
                    .next()
                    .unwrap_or("")
                    .chars()
                    .take(110)
                    .collect::<String>()
            );
            if !ok {
                failures.push(format!(
                    "{} / {command}: exit {}, killed {}, stderr {:?}, stdout {:?}",
                    case.name,
                    m.code,
                    m.killed,
                    m.stderr.chars().take(600).collect::<String>(),
                    stdout.chars().take(600).collect::<String>()
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A `chat_template` list with a name given twice: transformers keeps the last one (it builds
/// a dict from the list), and so does kvaudit.
#[test]
fn a_template_name_given_twice_renders_its_last_template() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("m");
    std::fs::create_dir_all(&dir).unwrap();
    let tiny = common::fixtures().join("models/tiny-think");
    std::fs::copy(tiny.join("tokenizer.json"), dir.join("tokenizer.json")).unwrap();
    let mut config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tiny.join("tokenizer_config.json")).unwrap())
            .unwrap();
    config["chat_template"] = serde_json::json!([
        {"name": "default", "template": "first"},
        {"name": "tool_use", "template": "tools"},
        {"name": "default", "template": "last"}
    ]);
    std::fs::write(dir.join("tokenizer_config.json"), config.to_string()).unwrap();
    let model = dir.display().to_string();
    let m = common::run_measured(
        &["render", "-m", &model, "--format", "json"],
        &[],
        Duration::from_secs(60),
        256,
    );
    assert_eq!(m.code, 0, "{}", m.stderr);
    assert_eq!(first_prompt(&m.stdout).as_deref(), Some("last"));
}
