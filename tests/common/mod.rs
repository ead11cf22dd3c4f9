//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

pub mod event_fixtures;
pub mod hub;
pub mod live;

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The read-only reference data beside the repository (or at KVAUDIT_SHARED_DIR, which lets
/// anyone check what runs without it: KVAUDIT_SHARED_DIR=/nonexistent cargo test), when it
/// is there. Tests that need it skip when it is absent, saying so where the skip is seen
/// (see [`skipped`]), unless KVAUDIT_REQUIRE_SHARED=1 (set in CI) makes the absence a
/// failure.
pub fn shared_dir(test: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("KVAUDIT_SHARED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("../shared"));
    if dir.join("models").is_dir() {
        return Some(dir);
    }
    if std::env::var("KVAUDIT_REQUIRE_SHARED").is_ok_and(|v| v == "1") {
        panic!(
            "{test}: {} is required (KVAUDIT_REQUIRE_SHARED=1) but not found",
            dir.display()
        );
    }
    skipped(
        test,
        "../shared (reference models, templates, captures) not found",
    );
    None
}

/// Tests that returned early without checking anything, and why.
static SKIPPED: std::sync::Mutex<Vec<(String, String)>> = std::sync::Mutex::new(Vec::new());

/// Record that `test` skips its checks. libtest can only report such a test as passed, and
/// shows what tests print only with --nocapture, so the skip is written where it is seen
/// anyway: at once to the process's stderr (written directly, not through eprintln!, which
/// the harness captures), and again after the binary's "test result" line, as a list.
pub fn skipped(test: &str, why: &str) {
    use std::io::Write;
    let mut list = SKIPPED.lock().unwrap_or_else(|e| e.into_inner());
    if list.is_empty() {
        // SAFETY: registers a plain function with no arguments, run once at process exit.
        unsafe { libc::atexit(report_skipped) };
    }
    list.push((test.to_string(), why.to_string()));
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
}

extern "C" fn report_skipped() {
    use std::io::Write;
    let list = SKIPPED.lock().unwrap_or_else(|e| e.into_inner());
    let mut err = std::io::stderr().lock();
    let _ = writeln!(
        err,
        "warning: {} of the tests above passed without checking anything (skipped):",
        list.len()
    );
    for (test, why) in list.iter() {
        let _ = writeln!(err, "    {test}: {why}");
    }
    let _ = writeln!(
        err,
        "    (CI runs with KVAUDIT_REQUIRE_SHARED=1 KVAUDIT_REQUIRE_REFERENCE=1, which fail instead)\n"
    );
}

/// Where each prompt of a corpus conversation ends: before every assistant message after the
/// first message, and after the last message when a user or tool message ends it.
pub fn prompt_ends(messages: &[serde_json::Value]) -> Vec<usize> {
    let role = |m: &serde_json::Value| {
        m.get("role")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let mut ends: Vec<usize> = (1..messages.len())
        .filter(|&i| role(&messages[i]) == "assistant")
        .collect();
    if messages.last().is_some_and(|m| role(m) != "assistant") {
        ends.push(messages.len());
    }
    ends
}

/// Each prompt of a corpus conversation (`messages` and optional `tools` of one JSONL record)
/// rendered through `profile` with the generation prompt, no kwargs, at 2026-01-15T10:00:00,
/// with the message index it ends at.
pub fn corpus_prompts<'a>(
    renderer: &'a kvaudit::render::ChatRenderer,
    profile: kvaudit::render::ServerProfile,
    record: &'a serde_json::Value,
) -> impl Iterator<Item = (usize, Result<String, kvaudit::render::RequestError>)> + 'a {
    let messages = record["messages"].as_array().map_or(&[][..], Vec::as_slice);
    let tools = record.get("tools").filter(|t| !t.is_null());
    let none = serde_json::Map::new();
    let now = kvaudit::render::parse_time("2026-01-15T10:00:00").unwrap();
    prompt_ends(messages).into_iter().map(move |end| {
        let request = kvaudit::render::server::Request {
            messages: &messages[..end],
            tools,
            documents: None,
            kwargs: &none,
            server_kwargs: &none,
            add_generation_prompt: true,
            reply: false,
        };
        (end, renderer.render_request(profile, &request, now))
    })
}

/// `$XDG_CACHE_HOME`, else `~/.cache`: where the .ci scripts keep the engines they build.
pub fn user_cache() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_default()
}

pub fn fixtures() -> PathBuf {
    repo_root().join("fixtures")
}

/// `rel` under fixtures/, as a command-line argument.
pub fn fixture(rel: &str) -> String {
    fixtures().join(rel).display().to_string()
}

/// The kvaudit binary these tests built, in the environment every test runs it in, set here
/// once: in the repository (relative paths are the repository's), plain text at a fixed width
/// whatever the developer's terminal and settings are, never the real Hub, and none of the
/// developer's credentials. A test that needs something else says so on the command it runs
/// (`.env("COLUMNS", "250")`, `.env_remove("COLUMNS")`, `.current_dir(dir)`, ...).
pub fn kvaudit_process() -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_kvaudit"));
    cmd.current_dir(repo_root())
        // No colour: NO_COLOR decides (FORCE_COLOR would only matter were NO_COLOR empty).
        .env("NO_COLOR", "1")
        .env_remove("FORCE_COLOR")
        // The human views' width: COLUMNS wins over the terminal (a pipe gets 80).
        .env("COLUMNS", COLUMNS)
        // Hub ids resolve from the cache or fail: a test that wants a Hub starts its own
        // (hub.rs) and turns this off.
        .env("HF_HUB_OFFLINE", "1")
        // Secrets kvaudit would send and mask in what it prints: a test that needs one sets it.
        .env_remove("HF_TOKEN")
        .env_remove("HUGGING_FACE_HUB_TOKEN")
        .env_remove("OPENAI_API_KEY");
    cmd
}

/// The width [`kvaudit_process`] gives the human views.
pub const COLUMNS: &str = "100";

/// [`kvaudit_process`] as an assert_cmd command (`.assert()`, `.write_stdin()`).
pub fn kvaudit() -> assert_cmd::Command {
    assert_cmd::Command::from_std(kvaudit_process())
}

/// [`kvaudit`] run in `dir`.
pub fn kvaudit_in(dir: &std::path::Path) -> assert_cmd::Command {
    let mut cmd = kvaudit();
    cmd.current_dir(dir);
    cmd
}

/// A deterministic xorshift64 generator (mutation tests: the same cases on every run).
pub fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut state = seed;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

/// What a finished kvaudit process left: exit code (-1 when killed by a signal), output.
pub struct Measured {
    pub code: i32,
    pub stdout: Vec<u8>,
    pub stderr: String,
    pub killed: bool,
}

/// Run the kvaudit binary with `args` under an address-space cap of `max_mb` MiB (going past
/// it makes an allocation fail, which aborts: exit 134 or a signal, never a pass), and kill it
/// after `limit` (a hang guard, not a timing assertion). The cap is used rather than the
/// child's peak RSS because wait4 reports the test process's own memory for a spawned child.
pub fn run_measured(
    args: &[&str],
    env: &[(&str, &str)],
    limit: std::time::Duration,
    max_mb: u64,
) -> Measured {
    run_child(&Child {
        args,
        env,
        dir: &repo_root(),
        time: limit,
        max_mb,
        max_file_bytes: None,
        ignore_sigxfsz: false,
        stdin: None,
    })
}

/// How [`run_child`] runs kvaudit.
pub struct Child<'a> {
    pub args: &'a [&'a str],
    pub env: &'a [(&'a str, &'a str)],
    /// The working directory.
    pub dir: &'a std::path::Path,
    /// Killed after this long (a hang guard).
    pub time: std::time::Duration,
    /// Address-space cap in MiB.
    pub max_mb: u64,
    /// RLIMIT_FSIZE: no file the child writes can grow past this many bytes, which is how a
    /// full disk looks to it (the write fails with EFBIG). Works without root, unlike a small
    /// tmpfs.
    pub max_file_bytes: Option<u64>,
    /// Start the child with SIGXFSZ ignored, so that a write past `max_file_bytes` fails
    /// rather than killing it whatever the child does; false checks that it ignores the
    /// signal itself.
    pub ignore_sigxfsz: bool,
    /// Standard input read from this file (else nothing).
    pub stdin: Option<&'a std::path::Path>,
}

/// Run the kvaudit binary as `child` says, under its limits (see [`run_measured`]).
pub fn run_child(child: &Child) -> Measured {
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let cap = child.max_mb << 20;
    let fsize = child.max_file_bytes;
    let ignore_sigxfsz = child.ignore_sigxfsz;
    let limit = child.time;
    let mut command = kvaudit_process();
    // SAFETY: setrlimit and signal are async-signal-safe and touch only the child being set
    // up.
    unsafe {
        command.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: cap,
                rlim_max: cap,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(bytes) = fsize {
                let lim = libc::rlimit {
                    rlim_cur: bytes,
                    rlim_max: bytes,
                };
                if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if ignore_sigxfsz && libc::signal(libc::SIGXFSZ, libc::SIG_IGN) == libc::SIG_ERR {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let stdin = match child.stdin {
        Some(p) => Stdio::from(std::fs::File::open(p).expect("open the child's stdin")),
        None => Stdio::null(),
    };
    let mut child = command
        .args(child.args)
        .env("KVAUDIT_TOKENIZER_CACHE", "off")
        .envs(child.env.iter().copied())
        .current_dir(child.dir)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start kvaudit");
    let drain = |mut r: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut b = Vec::new();
            let _ = r.read_to_end(&mut b);
            b
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let pid = child.id() as libc::pid_t;
    let done = Arc::new(AtomicBool::new(false));
    let killed = Arc::new(AtomicBool::new(false));
    // Signals only while `done` is false, i.e. before the child is reaped.
    let watchdog = {
        let (done, killed) = (done.clone(), killed.clone());
        std::thread::spawn(move || {
            let start = std::time::Instant::now();
            while start.elapsed() < limit {
                if done.load(Ordering::SeqCst) {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            if !done.load(Ordering::SeqCst) {
                killed.store(true, Ordering::SeqCst);
                // SAFETY: signalling our own child, which has not been reaped yet.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        })
    };
    let status = child.wait().expect("wait for kvaudit");
    done.store(true, Ordering::SeqCst);
    let _ = watchdog.join();
    Measured {
        code: status.code().unwrap_or(-1),
        stdout: out.join().unwrap(),
        stderr: String::from_utf8_lossy(&err.join().unwrap()).into_owned(),
        killed: killed.load(Ordering::SeqCst),
    }
}

/// Splits a command line of plain words and double-quoted strings (what the examples use).
pub fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let (mut quoted, mut started) = (false, false);
    for c in line.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                started = true;
            }
            c if c.is_whitespace() && !quoted => {
                if started {
                    words.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            c => {
                word.push(c);
                started = true;
            }
        }
    }
    if started {
        words.push(word);
    }
    words
}

/// The reference tokenizers llama.cpp serves: the model folder, the architecture of the tiny
/// GGUF that carries it, and the pre-tokenizer name llama.cpp's converter gives that tokenizer
/// (the name picks llama.cpp's own split regex).
pub const LLAMACPP_FAMILIES: [(&str, &str, &str); 10] = [
    ("qwen3-8b", "qwen3", "qwen2"),
    ("llama-3.1-8b-instruct", "llama", "llama-bpe"),
    ("deepseek-r1-distill-llama-8b", "llama", "smaug-bpe"),
    ("deepseek-r1", "llama", "joyai-llm"),
    ("deepseek-r1-distill-qwen-7b", "llama", "qwen2"),
    ("gpt-oss-120b", "llama", "gpt-4o"),
    ("glm-4.7-flash", "llama", "glm4"),
    ("mistral-nemo-instruct-2407", "llama", "pixtral"),
    ("minimax-m2.7", "llama", "minimax-m2"),
    ("qwen3.5", "llama", "qwen35"),
];

/// Every JSONL file of ../shared/corpus, sorted.
pub fn corpus_files(shared: &std::path::Path) -> Vec<PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(shared.join("corpus"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    files
}

/// `n` conversations of every JSONL file of ../shared/corpus (all of them for None), spread
/// evenly over each file, labelled `FILE:LINE`.
pub fn sampled_corpus(
    shared: &std::path::Path,
    n: Option<usize>,
) -> Vec<(String, serde_json::Value)> {
    let mut records = Vec::new();
    for f in &corpus_files(shared) {
        let text = std::fs::read_to_string(f).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        let picked: Vec<usize> = match n {
            Some(n) if n < lines.len() => (0..n).map(|k| k * lines.len() / n).collect(),
            _ => (0..lines.len()).collect(),
        };
        for i in picked {
            records.push((
                format!("{name}:{}", i + 1),
                serde_json::from_str(lines[i]).unwrap(),
            ));
        }
    }
    records
}

/// The 15 model directories of ../shared/models, sorted.
pub fn reference_models(shared: &std::path::Path) -> Vec<PathBuf> {
    let mut models: Vec<_> = std::fs::read_dir(shared.join("models"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.join("tokenizer.json").is_file())
        .collect();
    models.sort();
    assert_eq!(models.len(), 15, "the 15 model directories of ../shared");
    models
}

/// A tokenizer.json in both forms kvaudit loads it in: as read by the tokenizers crate, and
/// prepared (written to and read from a cache under target/conformance).
pub fn tokenizer_forms(
    path: &std::path::Path,
) -> [(&'static str, kvaudit::tokenize::Tokenizer); 2] {
    use kvaudit::tokenize::Tokenizer;
    let cache = repo_root().join("target/conformance/tokenizer-cache");
    let mut prepared = Tokenizer::load(path, Some(&cache)).unwrap();
    if !prepared.is_prepared() {
        // The first load wrote the prepared form.
        prepared = Tokenizer::load(path, Some(&cache)).unwrap();
    }
    assert!(
        prepared.is_prepared(),
        "{} was not prepared",
        path.display()
    );
    [
        ("tokenizer.json", Tokenizer::load(path, None).unwrap()),
        ("prepared", prepared),
    ]
}

/// The tiny fixture tokenizer with `change` applied to its JSON, loaded from tokenizer.json
/// (the prepared form refuses added tokens outside the vocabulary).
pub fn tiny_tokenizer(
    change: impl FnOnce(&mut serde_json::Value),
) -> (tempfile::TempDir, kvaudit::tokenize::Tokenizer) {
    let path = fixtures().join("models/tiny-think/tokenizer.json");
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    change(&mut json);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokenizer.json");
    std::fs::write(&file, serde_json::to_string(&json).unwrap()).unwrap();
    let tok = kvaudit::tokenize::Tokenizer::load(&file, None).unwrap();
    (dir, tok)
}

/// A differential test's report: shown with --nocapture and kept as
/// target/conformance/`name` beside the other conformance reports (CI prints them).
pub fn keep_report(name: &str, report: &str) {
    eprintln!("{report}");
    let out = repo_root().join("target/conformance");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join(name), report).unwrap();
}
