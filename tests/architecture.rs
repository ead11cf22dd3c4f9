//! The module layering DESIGN.md asks for, checked from the source: no cycle between
//! top-level modules, and the lower layers (wire model, rendering, model files, tokenizers,
//! input reading, output writing) never import the higher ones. Test modules (`#[cfg(test)]` to the end of a
//! file) are left out: a test may use anything.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn top_level_imports() -> BTreeMap<String, BTreeSet<String>> {
    fn walk(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, files);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }
    let src = common::repo_root().join("src");
    let mut files = Vec::new();
    walk(&src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let rel = file.strip_prefix(&src).unwrap();
        let top = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        if top == "lib" || top == "main" {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        let deps = graph.entry(top.clone()).or_default();
        for (at, _) in code.match_indices("crate::") {
            let name: String = code[at + 7..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            if !name.is_empty() && name != top {
                deps.insert(name);
            }
        }
    }
    graph
}

#[test]
fn no_cycles_between_top_level_modules() {
    let graph = top_level_imports();
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) {
        if let Some(i) = path.iter().position(|p| p == node) {
            panic!("module cycle: {} -> {node}", path[i..].join(" -> "));
        }
        if done.contains(node) {
            return;
        }
        path.push(node.to_string());
        for dep in graph.get(node).into_iter().flatten() {
            visit(dep, graph, path, done);
        }
        path.pop();
        done.insert(node.to_string());
    }
    let mut done = BTreeSet::new();
    for node in graph.keys() {
        visit(node, &graph, &mut Vec::new(), &mut done);
    }
    assert!(
        graph.contains_key("events") && graph.contains_key("capture"),
        "{graph:?}"
    );
}

#[test]
fn lower_layers_never_import_higher_ones() {
    let graph = top_level_imports();
    let lower = [
        "events", "render", "model", "tokenize", "input", "output", "tally", "suggest",
    ];
    let higher = [
        "align", "routers", "replay", "audit", "gate", "capture", "report", "commands", "cli",
        "corpus", "probe", "watch",
    ];
    let mut wrong = Vec::new();
    for l in lower {
        for dep in graph.get(l).into_iter().flatten() {
            if higher.contains(&dep.as_str()) {
                wrong.push(format!("{l} imports {dep}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:?}");
}

/// DESIGN.md's layout: live capture is a directory of its own beside replay, and `events`
/// keeps only the wire model, decoding and the `.frames` format (no module named capture).
#[test]
fn capture_is_a_directory_and_events_holds_no_capture() {
    let src = common::repo_root().join("src");
    assert!(src.join("capture/mod.rs").is_file());
    assert!(!src.join("capture.rs").exists());
    assert!(src.join("events/frames.rs").is_file());
    assert!(!src.join("events/capture.rs").exists());
    let graph = top_level_imports();
    assert_eq!(
        graph["tally"],
        BTreeSet::new(),
        "tally is shared by replay and capture and imports nothing"
    );
    assert_eq!(
        graph["output"],
        BTreeSet::new(),
        "output is the one way every layer writes a file (model and tokenize caches \
         included), so it imports nothing"
    );
}

/// The `.rs` files under `dir`, at any depth.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            files.extend(rust_files(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            files.push(p);
        }
    }
    files
}

/// Every directory under src, as a path relative to it (`render`, `render/server`, ...).
fn source_directories() -> Vec<String> {
    fn walk(dir: &Path, src: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                let rel = p.strip_prefix(src).unwrap().to_string_lossy();
                out.push(rel.replace('\\', "/"));
                walk(&p, src, out);
            }
        }
    }
    let src = common::repo_root().join("src");
    let mut out = Vec::new();
    walk(&src, &src, &mut out);
    out.sort();
    out
}

/// The file of the module a directory holds: its `mod.rs`, or the `.rs` file beside it.
fn module_file(dir: &Path) -> Option<PathBuf> {
    let inside = dir.join("mod.rs");
    if inside.is_file() {
        return Some(inside);
    }
    let beside = dir.with_extension("rs");
    beside.is_file().then_some(beside)
}

/// The text a file's imports are read from: before its first `#[cfg(test)]` (a test may use
/// anything), without whole-line comments (a doc link names an item without importing it).
fn production_code(file: &Path) -> String {
    let text = std::fs::read_to_string(file).unwrap();
    let code = text.split("#[cfg(test)]").next().unwrap_or("");
    code.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether `file` is a test module of its own (`#[cfg(test)] mod tests;` in its parent).
fn is_test_module(file: &Path) -> bool {
    let stem = file.file_stem().unwrap().to_string_lossy();
    let Some(parent) = file.parent().and_then(module_file) else {
        return false;
    };
    let text = std::fs::read_to_string(parent).unwrap();
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    flat.contains(&format!("#[cfg(test)] mod {stem};"))
}

/// The names `file` re-exports, each with the module it takes it from (the first segment of
/// the path): `pub use a::{B, c as d};` gives B and d from a.
fn reexports(file: &Path) -> BTreeMap<String, String> {
    let code = production_code(file);
    let mut out = BTreeMap::new();
    for (at, _) in code.match_indices("use ") {
        let before = code[..at].trim_end();
        if !["pub", "pub(crate)", "pub(super)"]
            .iter()
            .any(|p| before.ends_with(p))
        {
            continue;
        }
        let statement = code[at + 4..].split(';').next().unwrap_or("");
        let statement = statement.split_whitespace().collect::<Vec<_>>().join(" ");
        let statement = statement.strip_prefix("self::").unwrap_or(&statement);
        let Some((module, rest)) = statement.split_once("::") else {
            continue;
        };
        for leaf in rest.split([',', '{', '}']) {
            let leaf = leaf.trim();
            let name = match leaf.split_once(" as ") {
                Some((_, alias)) => alias.trim(),
                None => leaf.rsplit("::").next().unwrap_or(""),
            };
            if !name.is_empty() && name != "*" && name != "self" {
                out.insert(name.to_string(), module.to_string());
            }
        }
    }
    out
}

/// The first name of the path that starts at `at`, or of each path of a group (`{a, b::c}`
/// names a and b).
fn names_at(code: &str, at: usize) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let rest = &code[at..];
    if !rest.starts_with('{') {
        return vec![ident(rest)];
    }
    let mut names = Vec::new();
    let mut depth = 0;
    let mut entry_start = true;
    for (i, c) in rest.char_indices() {
        match c {
            '{' => {
                depth += 1;
                entry_start = depth == 1;
            }
            '}' => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            ',' if depth == 1 => entry_start = true,
            c if entry_start && depth == 1 && !c.is_whitespace() => {
                names.push(ident(&rest[i..]));
                entry_start = false;
            }
            _ => {}
        }
    }
    names
}

/// Which of the modules inside `src/<dir>` (its files and subdirectories) import which of
/// the others: a file names a sibling by `super::NAME` (with as many `super::` as lead from
/// the file up to `<dir>`) or by `crate::<dir>::NAME`, groups (`super::{a, b}`) included. A
/// subdirectory is one module with all its files. `<dir>`'s own file is their parent, not
/// one of them: an item it defines is no edge, and an item it re-exports (`pub use
/// NAME::Item`) counts as NAME. Test code is left out.
fn sibling_imports(dir: &str) -> BTreeMap<String, BTreeSet<String>> {
    let root = common::repo_root().join("src").join(dir);
    let reexported = module_file(&root)
        .map(|f| reexports(&f))
        .unwrap_or_default();
    let files = rust_files(&root);
    // The path of a file's module below `<dir>`: `a.rs` and `a/mod.rs` are [a], `a/b.rs` [a, b].
    let module_of = |file: &Path| -> Vec<String> {
        let rel = file.strip_prefix(&root).unwrap().with_extension("");
        let mut segments: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().to_string())
            .collect();
        if segments.last().is_some_and(|s| s == "mod") {
            segments.pop();
        }
        segments
    };
    let siblings: BTreeSet<String> = files
        .iter()
        .filter_map(|f| module_of(f).first().cloned())
        .collect();
    let absolute = format!("crate::{}::", dir.replace('/', "::"));
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let module = module_of(file);
        let Some(node) = module.first() else {
            continue;
        };
        if is_test_module(file) {
            continue;
        }
        let deps = graph.entry(node.clone()).or_default();
        let code = production_code(file);
        let up_to_dir = "super::".repeat(module.len());
        let mut named = Vec::new();
        for (at, _) in code.match_indices(&up_to_dir) {
            let end = at + up_to_dir.len();
            // A longer run of `super::` leads out of `<dir>`.
            if !code[..at].ends_with("super::") && !code[end..].starts_with("super::") {
                named.extend(names_at(&code, end));
            }
        }
        for (at, _) in code.match_indices(&absolute) {
            named.extend(names_at(&code, at + absolute.len()));
        }
        for name in named {
            let target = if siblings.contains(&name) {
                Some(name)
            } else {
                reexported.get(&name).cloned()
            };
            if let Some(target) = target.filter(|t| t != node && siblings.contains(t)) {
                deps.insert(target);
            }
        }
    }
    graph
}

/// A cycle of `graph`, as the path around it, if it has one.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == node) {
            let mut cycle = path[i..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for dep in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(dep, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

/// The files of render, and of each directory inside it, form layers: none imports one that
/// imports it back, directly or around a longer circle, so each can be read, tested and
/// split with only the files below it in mind.
#[test]
fn no_cycles_between_the_files_of_render() {
    let graph = sibling_imports("render");
    assert!(
        graph["env"].contains("limits") && graph["reply"].contains("conversation"),
        "the graph misses imports render's files are known to make: {graph:?}"
    );
    for dir in source_directories() {
        if dir != "render" && !dir.starts_with("render/") {
            continue;
        }
        if let Some(cycle) = find_cycle(&sibling_imports(&dir)) {
            panic!(
                "files of src/{dir} import each other in a circle: {}",
                cycle.join(" -> ")
            );
        }
    }
}

#[test]
fn no_cycles_between_the_files_of_other_directories() {
    let mut cycles = Vec::new();
    for dir in source_directories() {
        if let Some(cycle) = find_cycle(&sibling_imports(&dir)) {
            cycles.push(format!("src/{dir}: {}", cycle.join(" -> ")));
        }
    }
    assert!(
        cycles.is_empty(),
        "files importing each other in a circle: {cycles:#?}"
    );
}
