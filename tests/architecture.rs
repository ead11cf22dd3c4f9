//! The module layering DESIGN.md asks for, checked from the source: no cycle between
//! top-level modules, and the lower layers (wire model, rendering, model files, tokenizers,
//! input reading, output writing) never import the higher ones. Test modules (`#[cfg(test)]` to the end of a
//! file) are left out: a test may use anything.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

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
        "align", "index", "replay", "audit", "gate", "capture", "report", "commands", "cli",
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
