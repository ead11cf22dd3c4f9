//! Every example in the README and in the docs/ guide that shows a `$ kvaudit …` command with
//! its output is what the tool prints: each is run as written, at 80 columns without colour,
//! and compared byte for byte.
//! The Hub ids it uses name directories of a scratch folder linked to their copies in
//! ../shared/models (a local directory wins over the Hub), so no network is needed and the
//! output names the model as the README does. `KVAUDIT_UPDATE_README=1` writes the tool's
//! output into the README instead (then review the diff). The README, a landing page, shows
//! the template and tokenizer hash prefixes of its examples as `<hash>` (the guide keeps them).

use crate::common;

/// Hub ids the README uses, and the directory under ../shared/models holding that model.
const MODELS: &[(&str, &str)] = &[
    ("Qwen/Qwen3-8B", "qwen3-8b"),
    ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b-instruct"),
];

/// `(command, expected output)` of every fenced block that starts with `$ kvaudit `.
fn examples(readme: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for block in readme.split("```\n").skip(1).step_by(2) {
        let Some(rest) = block.strip_prefix("$ kvaudit ") else {
            continue;
        };
        let mut lines = rest.split_inclusive('\n');
        let mut command = String::new();
        for line in lines.by_ref() {
            match line.trim_end().strip_suffix('\\') {
                Some(part) => command.push_str(part),
                None => {
                    command.push_str(line.trim_end());
                    break;
                }
            }
        }
        out.push((command, lines.collect()));
    }
    out
}

#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn readme_examples_are_the_tools_output() {
    let Some(shared) = common::shared_dir("readme_examples_are_the_tools_output") else {
        return;
    };
    let root = common::repo_root();
    // The README and the guide pages in docs/ it links to.
    let mut pages = vec![root.join("README.md")];
    let mut docs: Vec<_> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    let total: usize = pages
        .iter()
        .map(|p| examples(&std::fs::read_to_string(p).unwrap()).len())
        .sum();
    assert!(total >= 4, "found {total} examples");
    for page in &pages {
        check_page(&shared, &root, page);
    }
}

/// Runs every example of one page (`KVAUDIT_UPDATE_README=1`: writes the tool's output in).
fn check_page(shared: &std::path::Path, root: &std::path::Path, page: &std::path::Path) {
    let readme = std::fs::read_to_string(page).unwrap();
    let examples = examples(&readme);
    if examples.is_empty() {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(root.join("fixtures"), scratch.path().join("fixtures")).unwrap();
    for (id, dir) in MODELS {
        let link = scratch.path().join(id);
        std::fs::create_dir_all(link.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(shared.join("models").join(dir), &link).unwrap();
    }
    let update = std::env::var_os("KVAUDIT_UPDATE_README").is_some();
    let mut updated = readme.clone();
    for (command, expected) in &examples {
        let out = common::kvaudit_in(scratch.path())
            .env("COLUMNS", "80")
            .args(common::shell_words(command))
            .output()
            .unwrap();
        let code = out.status.code();
        assert!(
            matches!(code, Some(0 | 1)),
            "kvaudit {command}: exit {code:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut stdout = String::from_utf8(out.stdout).unwrap();
        if page.ends_with("README.md") {
            stdout = without_hashes(&stdout);
        }
        if update {
            // Where the old output stands (each example's text is unique in the README).
            let at = updated
                .find(expected.as_str())
                .expect("example text in README");
            updated.replace_range(at..at + expected.len(), &stdout);
            continue;
        }
        assert_eq!(&stdout, expected, "README example: kvaudit {command}");
    }
    if update {
        std::fs::write(page, updated).unwrap();
    }
}

/// `text` with each run of exactly 12 lowercase hexadecimal digits (a content hash prefix, as
/// the report header names a template and a tokenizer) shown as `<hash>`.
fn without_hashes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(|c: char| c.is_ascii_hexdigit()) {
        out.push_str(&rest[..start]);
        let tail = &rest[start..];
        let len = tail
            .find(|c: char| !c.is_ascii_alphanumeric())
            .unwrap_or(tail.len());
        let word = &tail[..len];
        let at_word_start = !out.ends_with(|c: char| c.is_ascii_alphanumeric());
        if at_word_start
            && word.len() == 12
            && word.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        {
            out.push_str("<hash>");
        } else {
            out.push_str(word);
        }
        rest = &tail[len..];
    }
    out.push_str(rest);
    out
}

#[test]
fn hash_prefixes_are_masked_and_nothing_else() {
    assert_eq!(
        without_hashes("template x.json (87a2728cb8dc)  tokenizer\n  aeb13307a71a\n"),
        "template x.json (<hash>)  tokenizer\n  <hash>\n"
    );
    // Not 12 digits, not hex, or inside a longer word: kept.
    let kept = "held 158 deadbeef 87a2728cb8dcf 87a2728cb8dg x87a2728cb8dc turn 1 -> 2";
    assert_eq!(without_hashes(kept), kept);
}
