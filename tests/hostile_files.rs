//! Hostile input, files (issue 38, classes 4 and 5): kvaudit never writes a file outside the
//! folder of the config that names it, never replaces a good file with a cut one, and never
//! writes over one of its own inputs.
//!
//! Each case builds a small checkout in a temporary folder beside an `outside/` folder of
//! victims, runs the binary as a child (under an address-space cap, and for the full-disk
//! cases under RLIMIT_FSIZE, which makes writes past the limit fail with EFBIG as on a full
//! disk), and compares every file of the whole temporary tree — bytes, mtime, symlink
//! targets — before and after: a refused run changes nothing and leaves no temporary file.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use common::{Child, Measured};

const TIME: Duration = Duration::from_secs(120);
const MAX_MB: u64 = 2048;

fn tiny() -> PathBuf {
    common::fixtures().join("models/tiny-think")
}

/// A checkout (`repo/`) beside files it must not touch (`outside/`).
struct World {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    repo: PathBuf,
    outside: PathBuf,
}

impl World {
    fn new() -> World {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let repo = root.join("repo");
        let outside = root.join("outside");
        std::fs::create_dir_all(&repo).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("victim.txt"), "precious, not a lock\n").unwrap();
        // Inputs outside, for the read paths a config could name.
        let template = chat_template();
        std::fs::write(outside.join("t.jinja"), &template).unwrap();
        std::fs::copy(
            common::fixtures().join("conversations/tool-loop.json"),
            outside.join("conv.json"),
        )
        .unwrap();
        copy_model(&outside.join("model"));
        std::fs::copy(
            tiny().join("tokenizer.json"),
            outside.join("tokenizer.json"),
        )
        .unwrap();
        // The same inside, for what a checkout legitimately holds.
        std::fs::create_dir_all(repo.join("templates")).unwrap();
        std::fs::write(repo.join("templates/t.jinja"), &template).unwrap();
        std::fs::copy(
            common::fixtures().join("conversations/tool-loop.json"),
            repo.join("conv.json"),
        )
        .unwrap();
        World {
            _tmp: tmp,
            root,
            repo,
            outside,
        }
    }

    /// `kvaudit.toml` with the fixture model (an absolute model folder: allowed anywhere)
    /// and `extra` appended.
    fn config(&self, model_extra: &str, extra: &str) {
        std::fs::write(
            self.repo.join("kvaudit.toml"),
            format!(
                "[[model]]\nsource = {:?}\n{model_extra}\n{extra}",
                tiny().display().to_string()
            ),
        )
        .unwrap();
    }

    fn link(&self, target: impl AsRef<Path>, name: &str) {
        std::os::unix::fs::symlink(target, self.repo.join(name)).unwrap();
    }

    fn run(&self, args: &[&str]) -> Measured {
        self.run_limited(args, None)
    }

    fn run_limited(&self, args: &[&str], max_file_bytes: Option<u64>) -> Measured {
        self.run_with(args, max_file_bytes, None)
    }

    fn run_with(
        &self,
        args: &[&str],
        max_file_bytes: Option<u64>,
        stdin: Option<&Path>,
    ) -> Measured {
        self.run_child(args, max_file_bytes, true, stdin)
    }

    fn run_child(
        &self,
        args: &[&str],
        max_file_bytes: Option<u64>,
        ignore_sigxfsz: bool,
        stdin: Option<&Path>,
    ) -> Measured {
        let home = self.root.join("hf");
        let m = common::run_child(&Child {
            args,
            env: &[("HF_HUB_OFFLINE", "1"), ("HF_HOME", home.to_str().unwrap())],
            dir: &self.repo,
            time: TIME,
            max_mb: MAX_MB,
            max_file_bytes,
            ignore_sigxfsz,
            stdin,
        });
        assert!(!m.killed, "{args:?} hung");
        assert!(!m.stderr.contains("panicked"), "{args:?}: {}", m.stderr);
        m
    }

    /// Every entry of the whole temporary tree.
    fn snapshot(&self) -> BTreeMap<PathBuf, Entry> {
        let mut out = BTreeMap::new();
        walk(&self.root, &self.root, &mut out);
        out
    }
}

#[derive(Debug, PartialEq)]
enum Entry {
    File(Vec<u8>, SystemTime),
    Link(PathBuf),
    Dir,
    Other,
}

fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Entry>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let m = std::fs::symlink_metadata(&p).unwrap();
        let rel = p.strip_prefix(root).unwrap().to_path_buf();
        let entry = if m.is_symlink() {
            Entry::Link(std::fs::read_link(&p).unwrap())
        } else if m.is_dir() {
            walk(root, &p, out);
            Entry::Dir
        } else if m.is_file() {
            Entry::File(std::fs::read(&p).unwrap(), m.modified().unwrap())
        } else {
            Entry::Other
        };
        out.insert(rel, entry);
    }
}

/// Files added, removed or changed between two snapshots.
fn changes(before: &BTreeMap<PathBuf, Entry>, after: &BTreeMap<PathBuf, Entry>) -> Vec<String> {
    let mut out = Vec::new();
    for (p, e) in before {
        match after.get(p) {
            None => out.push(format!("removed {}", p.display())),
            Some(a) if a != e => out.push(format!("changed {}", p.display())),
            _ => {}
        }
    }
    for p in after.keys().filter(|p| !before.contains_key(*p)) {
        out.push(format!("added {}", p.display()));
    }
    out
}

fn chat_template() -> String {
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tiny().join("tokenizer_config.json")).unwrap())
            .unwrap();
    config["chat_template"].as_str().unwrap().to_string()
}

fn copy_model(to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for f in ["tokenizer.json", "tokenizer_config.json"] {
        std::fs::copy(tiny().join(f), to.join(f)).unwrap();
    }
}

/// Exit 2 with exactly one `error:` line that contains `fragment`; else what went wrong.
fn refusal(m: &Measured, what: &str, fragment: &str) -> Result<(), String> {
    let errors: Vec<&str> = m
        .stderr
        .lines()
        .filter(|l| l.starts_with("error:"))
        .collect();
    if m.code == 2 && errors.len() == 1 && errors[0].contains(fragment) {
        return Ok(());
    }
    Err(format!(
        "{what}: expected exit 2 and one error line with {fragment:?}, got exit {}:\n{}",
        m.code, m.stderr
    ))
}

fn assert_refused(m: &Measured, what: &str, fragment: &str) {
    if let Err(e) = refusal(m, what, fragment) {
        panic!("{e}");
    }
}

/// Runs `args` in `world` expecting a refusal that leaves the whole tree as it was; what went
/// wrong is added to `failures` (every case runs, so a broken build shows all it breaks).
fn refused_untouched(
    world: &World,
    what: &str,
    args: &[&str],
    fragment: &str,
    failures: &mut Vec<String>,
) {
    let before = world.snapshot();
    let m = world.run(args);
    if let Err(e) = refusal(&m, what, fragment) {
        failures.push(e);
    }
    let changed = changes(&before, &world.snapshot());
    if !changed.is_empty() {
        failures.push(format!("{what}: {changed:?}"));
        restore(world, &before);
    }
}

/// Puts back the files a failed case changed, so that the next case starts from the same
/// tree (what was added is removed; what was changed gets its bytes back).
fn restore(world: &World, before: &BTreeMap<PathBuf, Entry>) {
    let after = world.snapshot();
    for p in after.keys().filter(|p| !before.contains_key(*p)).rev() {
        let full = world.root.join(p);
        let _ = std::fs::remove_file(&full).or_else(|_| std::fs::remove_dir_all(&full));
    }
    for (p, e) in before {
        if let Entry::File(bytes, _) = e
            && after.get(p) != Some(e)
        {
            let _ = std::fs::write(world.root.join(p), bytes);
        }
    }
}

fn assert_no_failures(failures: &[String]) {
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

const OUTSIDE: &str = "outside the config's folder";

/// Class 4: every path kvaudit.toml names, written or read, stays inside its folder. The
/// baseline is written by --update-baseline; the rest are read, and refused as well (their
/// text ends up in reports and error lines, and a checkout is untrusted).
#[test]
fn paths_a_config_names_are_kept_inside_its_folder() {
    let w = World::new();
    let out = w.outside.display().to_string();
    let configs: Vec<(String, String, String)> = vec![
        (
            "baseline ../outside/victim.txt".into(),
            String::new(),
            "[gate]\nbaseline = \"../outside/victim.txt\"\n".into(),
        ),
        (
            "baseline as an absolute path outside".into(),
            String::new(),
            format!("[gate]\nbaseline = \"{out}/victim.txt\"\n"),
        ),
        (
            "baseline in a symlinked folder".into(),
            String::new(),
            "[gate]\nbaseline = \"dirlink/victim.txt\"\n".into(),
        ),
        (
            "baseline a/../../outside".into(),
            String::new(),
            "[gate]\nbaseline = \"templates/../../outside/victim.txt\"\n".into(),
        ),
        (
            "template ../outside".into(),
            "template = \"../outside/t.jinja\"".into(),
            String::new(),
        ),
        (
            "template absolute outside".into(),
            format!("template = \"{out}/t.jinja\""),
            String::new(),
        ),
        (
            "template symlinked outside".into(),
            "template = \"t-out.jinja\"".into(),
            String::new(),
        ),
        (
            "tokenizer ../outside".into(),
            "tokenizer = \"../outside/tokenizer.json\"".into(),
            String::new(),
        ),
        (
            "tokenizer symlinked outside".into(),
            "tokenizer = \"tok-out.json\"".into(),
            String::new(),
        ),
        (
            "conversation ../outside".into(),
            String::new(),
            "[[scenario]]\nconversation = \"../outside/conv.json\"\n".into(),
        ),
        (
            "conversation absolute outside".into(),
            String::new(),
            format!("[[scenario]]\nconversation = \"{out}/conv.json\"\n"),
        ),
        (
            "conversation symlinked outside".into(),
            String::new(),
            "[[scenario]]\nconversation = \"conv-out.json\"\n".into(),
        ),
    ];
    w.link(&w.outside, "dirlink");
    w.link("../outside/t.jinja", "t-out.jinja");
    w.link(w.outside.join("tokenizer.json"), "tok-out.json");
    w.link("../outside/conv.json", "conv-out.json");
    let mut failures = Vec::new();
    for (what, model_extra, extra) in &configs {
        w.config(model_extra, extra);
        for args in [&["check", "--update-baseline"][..], &["check"][..]] {
            let what = format!("{what} ({args:?})");
            refused_untouched(&w, &what, args, OUTSIDE, &mut failures);
        }
    }
    // A model folder named relative to the config is inside it too (through a symlink or
    // `..`); an absolute one may be a shared model folder anywhere (every config above uses
    // one). The model line replaces the fixture's.
    w.link("../outside/model", "model-out");
    for source in ["../outside/model", "model-out", "./model-out"] {
        std::fs::write(
            w.repo.join("kvaudit.toml"),
            format!("[[model]]\nsource = {source:?}\n"),
        )
        .unwrap();
        let args = ["check", "--update-baseline"];
        refused_untouched(&w, source, &args, OUTSIDE, &mut failures);
    }
    assert_no_failures(&failures);
}

/// Class 4: a kvaudit.lock committed as a symlink out of the checkout (to a file, or dangling
/// to one --update-baseline would create) is refused, whether named by `[gate] baseline` or
/// found by default; a symlink that stays inside is written through.
#[test]
fn a_symlinked_lock_never_leads_out() {
    let w = World::new();
    w.link("../outside/victim.txt", "kvaudit.lock");
    let mut failures = Vec::new();
    for extra in ["", "[gate]\nbaseline = \"kvaudit.lock\"\n"] {
        w.config("", extra);
        for args in [&["check", "--update-baseline"][..], &["check"][..]] {
            refused_untouched(
                &w,
                &format!("lock -> victim ({extra:?}, {args:?})"),
                args,
                "through a symlink, outside the config's folder",
                &mut failures,
            );
        }
    }
    std::fs::remove_file(w.repo.join("kvaudit.lock")).unwrap();
    w.link("../outside/created.lock", "kvaudit.lock");
    w.config("", "");
    refused_untouched(
        &w,
        "dangling lock",
        &["check", "--update-baseline"],
        "through a symlink",
        &mut failures,
    );
    assert_no_failures(&failures);
    assert!(!w.outside.join("created.lock").exists());

    // Inside: the link stays a link, its target gets the lock, and check reads it back.
    std::fs::remove_file(w.repo.join("kvaudit.lock")).unwrap();
    std::fs::create_dir(w.repo.join("ci")).unwrap();
    w.link("ci/kvaudit.lock", "kvaudit.lock");
    w.link("templates/t.jinja", "t-in.jinja");
    w.config("template = \"t-in.jinja\"", "");
    let victim = std::fs::read(w.outside.join("victim.txt")).unwrap();
    let m = w.run(&["check", "--update-baseline"]);
    assert_eq!(m.code, 0, "{}", m.stderr);
    assert!(
        w.repo
            .join("kvaudit.lock")
            .symlink_metadata()
            .unwrap()
            .is_symlink()
    );
    assert!(
        std::fs::read_to_string(w.repo.join("ci/kvaudit.lock"))
            .unwrap()
            .contains("schema_version = 1")
    );
    let m = w.run(&["check"]);
    assert_eq!(m.code, 0, "{}", m.stderr);
    assert_eq!(std::fs::read(w.outside.join("victim.txt")).unwrap(), victim);
    // --baseline on the command line is the user's own word: it goes where it says.
    let chosen = w.outside.join("chosen.lock");
    let m = w.run(&[
        "check",
        "--update-baseline",
        "--baseline",
        chosen.to_str().unwrap(),
    ]);
    assert_eq!(m.code, 0, "{}", m.stderr);
    assert!(chosen.is_file());
}

/// Runs `args` on a "full disk" (RLIMIT_FSIZE of `limit` bytes): refused with a "File too
/// large" error line, nothing in the tree changed, no temporary file left.
fn full_disk(w: &World, what: &str, args: &[&str], limit: u64) {
    let before = w.snapshot();
    let m = w.run_limited(args, Some(limit));
    assert_refused(&m, what, "File too large");
    assert_eq!(
        changes(&before, &w.snapshot()),
        Vec::<String>::new(),
        "{what}"
    );
}

fn size(w: &World, name: &str) -> u64 {
    std::fs::metadata(w.repo.join(name)).unwrap().len()
}

/// Class 5: `check -o report.sarif` on a full disk (RLIMIT_FSIZE below the report's size)
/// keeps the previous report byte for byte, and leaves no temporary file.
#[test]
fn a_full_disk_keeps_the_previous_report() {
    let w = World::new();
    w.config("", "");
    let args = ["check", "--format", "sarif", "-o", "report.sarif"];
    let m = w.run(&args);
    assert_eq!(m.code, 1, "{}", m.stderr);
    let limit = size(&w, "report.sarif") / 2;
    full_disk(&w, "check -o on a full disk", &args, limit);
    // `ulimit -f` in a shell leaves SIGXFSZ at its default, which kills: kvaudit ignores it
    // itself, so that it can clean up and say why.
    let before = w.snapshot();
    let m = w.run_child(&args, Some(limit), false, None);
    assert_refused(&m, "check -o past ulimit -f", "File too large");
    assert!(m.stderr.contains("report.sarif"), "{}", m.stderr);
    assert_eq!(changes(&before, &w.snapshot()), Vec::<String>::new());
    let sarif: serde_json::Value =
        serde_json::from_slice(&std::fs::read(w.repo.join("report.sarif")).unwrap()).unwrap();
    assert_eq!(sarif["version"], "2.1.0");
}

/// Class 5: `--update-baseline` on a full disk keeps the old lock whole, and the next `check`
/// still reads it.
#[test]
fn a_full_disk_keeps_the_previous_lock() {
    let w = World::new();
    w.config("", "");
    let m = w.run(&["check", "--update-baseline"]);
    assert_eq!(m.code, 0, "{}", m.stderr);
    // A different lock would be written (another conversation), but not on this disk.
    w.config("", "[[scenario]]\nconversation = \"conv.json\"\n");
    let limit = size(&w, "kvaudit.lock") / 2;
    full_disk(
        &w,
        "--update-baseline on a full disk",
        &["check", "--update-baseline"],
        limit,
    );
    w.config("", "");
    let m = w.run(&["check"]);
    assert_eq!(m.code, 0, "the old lock still works: {}", m.stderr);
}

/// Class 5: corpus's per-transition and HTML files on a full disk: neither is replaced, also
/// when the per-transition file would fit and only the HTML report does not (both are
/// written whole before either is renamed into place).
#[test]
fn a_full_disk_keeps_the_previous_corpus_outputs() {
    let w = World::new();
    std::fs::copy(
        common::fixtures().join("corpus/chats.jsonl"),
        w.repo.join("chats.jsonl"),
    )
    .unwrap();
    let model = tiny().display().to_string();
    let run = |outputs: &[&str]| {
        let mut args = vec!["corpus", "-m", &model, "chats.jsonl"];
        args.extend_from_slice(outputs);
        args.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    let both = run(&["--per-transition", "t.jsonl", "--html", "r.html"]);
    let both: Vec<&str> = both.iter().map(String::as_str).collect();
    let m = w.run(&both);
    assert_eq!(m.code, 1, "{}", m.stderr);
    let (lines, html) = (size(&w, "t.jsonl"), size(&w, "r.html"));
    let per_transition = run(&["--per-transition", "t.jsonl"]);
    let per_transition: Vec<&str> = per_transition.iter().map(String::as_str).collect();
    full_disk(&w, "--per-transition", &per_transition, lines / 2);
    let html_only = run(&["--html", "r.html"]);
    let html_only: Vec<&str> = html_only.iter().map(String::as_str).collect();
    full_disk(&w, "--html", &html_only, html / 2);
    assert!(
        lines < html,
        "the HTML report is the larger ({lines} vs {html})"
    );
    full_disk(
        &w,
        "both, the HTML too large",
        &both,
        lines + (html - lines) / 2,
    );
    // The per-transition file's last bytes leave its buffer only at the end, after the HTML
    // report is written: that must not replace the HTML report either.
    let rows = std::fs::read_to_string(w.repo.join("chats.jsonl")).unwrap();
    std::fs::write(w.repo.join("chats.jsonl"), rows.repeat(3)).unwrap();
    let m = w.run(&both);
    assert_eq!(m.code, 1, "{}", m.stderr);
    let (lines, html) = (size(&w, "t.jsonl"), size(&w, "r.html"));
    assert!(html + 100 < lines, "{html} {lines}");
    full_disk(
        &w,
        "both, the lines' last bytes too large",
        &both,
        lines - 10,
    );
}

/// Class 5: `init --force` on a full disk keeps the previous config.
#[test]
fn a_full_disk_keeps_the_previous_config() {
    let w = World::new();
    let m = w.run(&["init", "-m", "Org/model", "--output", "init.toml"]);
    assert_eq!(m.code, 0, "{}", m.stderr);
    let limit = size(&w, "init.toml") / 2;
    full_disk(
        &w,
        "init on a full disk",
        &[
            "init",
            "-m",
            "Org/other",
            "--output",
            "init.toml",
            "--force",
        ],
        limit,
    );
}

/// Class 5: an output that is one of the run's inputs — by name, through a symlink, as a
/// hard link, as standard input — or another output of the same run is refused before
/// anything is opened for writing.
#[test]
fn outputs_over_inputs_are_refused() {
    let w = World::new();
    w.config("", "[[scenario]]\nconversation = \"conv.json\"\n");
    let corpus = w.repo.join("chats.jsonl");
    std::fs::copy(common::fixtures().join("corpus/chats.jsonl"), &corpus).unwrap();
    w.link("chats.jsonl", "sym.jsonl");
    std::fs::hard_link(&corpus, w.repo.join("hard.jsonl")).unwrap();
    copy_model(&w.repo.join("model"));
    let tiny = tiny().display().to_string();
    let corpus_run = |model: &str, rest: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = ["corpus", "-m", model, "chats.jsonl"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        v.extend(rest.iter().map(|s| s.to_string()));
        v
    };
    let cases: Vec<(&str, Vec<String>, &str)> = vec![
        (
            "corpus X --per-transition X",
            corpus_run(&tiny, &["--per-transition", "chats.jsonl"]),
            "it is the input",
        ),
        (
            "--per-transition through a symlink to the input",
            corpus_run(&tiny, &["--per-transition", "sym.jsonl"]),
            "it is the input",
        ),
        (
            "--per-transition as a hard link to the input",
            corpus_run(&tiny, &["--per-transition", "hard.jsonl"]),
            "it is the input",
        ),
        (
            "--html the input",
            corpus_run(&tiny, &["--html", "./chats.jsonl"]),
            "it is the input",
        ),
        (
            "--per-transition the model's tokenizer.json",
            corpus_run("model", &["--per-transition", "model/tokenizer.json"]),
            "it is the input",
        ),
        (
            "--html the model's tokenizer_config.json through a symlink",
            corpus_run("model", &["--html", "sym-config.json"]),
            "it is the input",
        ),
        (
            "--per-transition and --html the same new file",
            corpus_run(
                &tiny,
                &["--per-transition", "new.out", "--html", "./new.out"],
            ),
            "they are the same file",
        ),
        (
            "check -o the config",
            ["check", "-o", "kvaudit.toml"].map(String::from).to_vec(),
            "it is the input",
        ),
        (
            "check -o a scenario",
            ["check", "-o", "conv.json"].map(String::from).to_vec(),
            "it is the input",
        ),
        (
            "check -o the template under review",
            [
                "check",
                "--template",
                "templates/t.jinja",
                "-o",
                "templates/t.jinja",
            ]
            .map(String::from)
            .to_vec(),
            "it is the input",
        ),
        (
            "check -o a model file",
            ["check", "-m", "model", "-o", "model/tokenizer_config.json"]
                .map(String::from)
                .to_vec(),
            "it is the input",
        ),
        (
            "--update-baseline --baseline over a scenario",
            ["check", "--update-baseline", "--baseline", "conv.json"]
                .map(String::from)
                .to_vec(),
            "it is the input",
        ),
        (
            "probe --save-conversation over its --conversation",
            [
                "probe",
                "--url",
                "http://127.0.0.1:9",
                "-m",
                &tiny,
                "-c",
                "conv.json",
                "--save-conversation",
                "conv.json",
            ]
            .map(String::from)
            .to_vec(),
            "it is the input",
        ),
    ];
    w.link("model/tokenizer_config.json", "sym-config.json");
    let mut failures = Vec::new();
    for (what, args, fragment) in &cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        refused_untouched(&w, what, &args, fragment, &mut failures);
    }
    // The lock a config names, written over the config itself.
    w.config("", "[gate]\nbaseline = \"kvaudit.toml\"\n");
    refused_untouched(
        &w,
        "baseline = the config",
        &["check", "--update-baseline"],
        "it is the input",
        &mut failures,
    );
    // Standard input is an input too.
    let before = w.snapshot();
    let m = w.run_with(
        &[
            "corpus",
            "-m",
            &tiny,
            "-",
            "--per-transition",
            "chats.jsonl",
        ],
        None,
        Some(&corpus),
    );
    let what = "corpus - < X --per-transition X";
    failures.extend(refusal(&m, what, "it is the input").err());
    let changed = changes(&before, &w.snapshot());
    if !changed.is_empty() {
        failures.push(format!("{what}: {changed:?}"));
    }
    assert_no_failures(&failures);
}

/// The second sweep's minor messages: each says what is wrong, once, and nothing is written.
#[test]
fn refusals_say_what_is_wrong_once() {
    let w = World::new();
    let tiny = tiny().display().to_string();
    let mut failures = Vec::new();
    // A baseline that is a directory is not "not found".
    w.config("", "[gate]\nbaseline = \".\"\n");
    refused_untouched(
        &w,
        "baseline = \".\"",
        &["check"],
        "is not a lock file",
        &mut failures,
    );
    w.config("", "");
    // --update-baseline writes no report: an -o beside it (even the lock itself) is refused.
    refused_untouched(
        &w,
        "--update-baseline --baseline x.lock -o x.lock",
        &[
            "check",
            "--update-baseline",
            "--baseline",
            "x.lock",
            "-o",
            "x.lock",
        ],
        "cannot be used with",
        &mut failures,
    );
    // Standard input read twice would be empty the second time.
    refused_untouched(
        &w,
        "corpus - -",
        &["corpus", "-m", &tiny, "-", "-"],
        "can be given once",
        &mut failures,
    );
    // A directory as the capture file: said once.
    let m = w.run(&[
        "capture",
        "--endpoint",
        "tcp://127.0.0.1:9",
        "--out",
        "templates",
        "--duration",
        "1s",
    ]);
    match refusal(&m, "capture --out DIR", "it is a directory") {
        Err(e) => failures.push(e),
        Ok(()) if m.stderr.matches("cannot write").count() != 1 => {
            failures.push(format!("capture --out DIR: {}", m.stderr));
        }
        Ok(()) => {}
    }
    assert_no_failures(&failures);
}

/// The minor item: a per-transition FIFO whose reader leaves is lost output (exit 2, one
/// error line), not the closed standard output of `| head` (exit 0); /dev/null is written
/// directly.
#[test]
fn a_per_transition_pipe_whose_reader_leaves_is_an_error() {
    let w = World::new();
    // Enough lines to fill any pipe buffer many times over.
    let rows = std::fs::read_to_string(common::fixtures().join("corpus/chats.jsonl")).unwrap();
    std::fs::write(w.repo.join("big.jsonl"), rows.repeat(200)).unwrap();
    let fifo = w.repo.join("pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            use std::io::Read;
            // Blocks until kvaudit opens the write end; takes a little and leaves.
            let mut f = std::fs::File::open(&fifo).unwrap();
            let mut buf = [0u8; 100];
            let _ = f.read(&mut buf);
        })
    };
    let model = tiny().display().to_string();
    let m = w.run(&[
        "corpus",
        "-m",
        &model,
        "big.jsonl",
        "--per-transition",
        "pipe",
        "--format",
        "json",
    ]);
    // Should kvaudit have failed before opening the FIFO, this lets the reader go.
    {
        use std::os::unix::fs::OpenOptionsExt;
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo);
    }
    reader.join().unwrap();
    assert_refused(&m, "per-transition FIFO", "Broken pipe");
    assert!(m.stderr.contains("pipe"), "{}", m.stderr);

    let m = w.run(&[
        "corpus",
        "-m",
        &model,
        "big.jsonl",
        "--per-transition",
        "/dev/null",
    ]);
    assert_eq!(m.code, 1, "{}", m.stderr);
}

/// Standard output closed by its reader stays a success, also with a per-transition file.
#[test]
fn stdout_closed_by_its_reader_is_still_success() {
    use std::process::Stdio;
    let w = World::new();
    let rows = std::fs::read_to_string(common::fixtures().join("corpus/chats.jsonl")).unwrap();
    std::fs::write(w.repo.join("big.jsonl"), rows.repeat(20)).unwrap();
    let mut child = common::kvaudit_process()
        .args(["corpus", "-m"])
        .arg(tiny())
        .args([
            "big.jsonl",
            "--per-transition",
            "t.jsonl",
            "--format",
            "json",
        ])
        .current_dir(&w.repo)
        .env("KVAUDIT_TOKENIZER_CACHE", "off")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The reader leaves before kvaudit writes its report.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = std::fs::read_to_string(w.repo.join("t.jsonl")).unwrap();
    let n = lines.lines().count();
    assert!(n > 0 && n.is_multiple_of(20), "{n} lines");
    for line in lines.lines() {
        serde_json::from_str::<serde_json::Value>(line).unwrap();
    }
}
