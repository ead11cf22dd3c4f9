//! `kvaudit fetch` and Hub ids in `--model`, against a local server in the Hub's URL layout.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command as Process, Stdio};

use assert_cmd::Command;
use serde_json::Value as Json;

const TOKEN: &str = "hf_secret_test_token";
const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

struct Hub {
    child: Child,
    url: String,
    log: PathBuf,
    _root: tempfile::TempDir,
}

impl Drop for Hub {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Hub {
    /// Serves the tiny fixture model as `Org/tiny` and `Gated/tiny`; `None` without python3.
    fn start() -> Option<Hub> {
        let root = tempfile::tempdir().unwrap();
        for repo in ["Org/tiny", "Gated/tiny"] {
            let dir = root.path().join(repo);
            std::fs::create_dir_all(&dir).unwrap();
            for f in ["tokenizer.json", "tokenizer_config.json"] {
                std::fs::copy(
                    common::fixtures().join("models/tiny-think").join(f),
                    dir.join(f),
                )
                .unwrap();
            }
        }
        let log = root.path().join("requests.jsonl");
        let mut child = match Process::new("python3")
            .arg(common::repo_root().join("tests/hub_server.py"))
            .arg(root.path())
            .arg(&log)
            .arg(TOKEN)
            .stdout(Stdio::piped())
            .spawn()
        {
            Ok(c) => c,
            Err(e) => {
                eprintln!("SKIPPED hub tests: cannot start python3 ({e})");
                return None;
            }
        };
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port: u16 = line.trim().parse().expect("server port");
        Some(Hub {
            child,
            url: format!("http://127.0.0.1:{port}"),
            log,
            _root: root,
        })
    }

    fn requests(&self) -> Vec<Json> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn kvaudit(&self, home: &Path) -> Command {
        let mut cmd = Command::cargo_bin("kvaudit").unwrap();
        cmd.current_dir(common::repo_root())
            .env("HF_ENDPOINT", &self.url)
            .env("HF_HOME", home)
            .env("NO_COLOR", "1")
            .env("KVAUDIT_TOKENIZER_CACHE", "off")
            .env_remove("HF_TOKEN")
            .env_remove("HF_HUB_CACHE")
            .env_remove("HUGGINGFACE_HUB_CACHE")
            .env_remove("HF_HUB_OFFLINE");
        cmd
    }
}

fn stdout(out: &assert_cmd::assert::Assert) -> String {
    String::from_utf8(out.get_output().stdout.clone()).unwrap()
}

fn stderr(out: &assert_cmd::assert::Assert) -> String {
    String::from_utf8(out.get_output().stderr.clone()).unwrap()
}

#[test]
fn fetch_downloads_into_the_shared_cache_layout() {
    let Some(hub) = Hub::start() else { return };
    let home = tempfile::tempdir().unwrap();
    let out = hub
        .kvaudit(home.path())
        .args(["fetch", "Org/tiny"])
        .assert()
        .success();
    let snapshot = PathBuf::from(stdout(&out).trim());
    let repo = home.path().join("hub/models--Org--tiny");
    assert_eq!(snapshot, repo.join("snapshots").join(COMMIT));
    for f in ["tokenizer.json", "tokenizer_config.json"] {
        let got = std::fs::read(snapshot.join(f)).unwrap();
        let want = std::fs::read(common::fixtures().join("models/tiny-think").join(f)).unwrap();
        assert_eq!(got, want, "{f} downloaded byte for byte");
    }
    assert_eq!(
        std::fs::read_to_string(repo.join("refs/main"))
            .unwrap()
            .trim(),
        COMMIT
    );
    let gets: Vec<String> = hub
        .requests()
        .iter()
        .filter(|r| r["method"] == "GET" && r["status"] != 404)
        .map(|r| r["path"].as_str().unwrap().to_string())
        .collect();
    assert!(
        gets.iter()
            .any(|p| p == "/Org/tiny/resolve/main/tokenizer.json"),
        "{gets:?}"
    );
    assert!(
        hub.requests().iter().all(|r| !r["auth"].as_bool().unwrap()),
        "no token configured, none sent"
    );

    // A second fetch is served from the cache without a request.
    let before = hub.requests().len();
    hub.kvaudit(home.path())
        .args(["fetch", "Org/tiny"])
        .assert()
        .success();
    let after = hub.requests().len();
    assert_eq!(before, after, "cache hit must not touch the network");

    // The Hub id works in diff-turns, online and offline.
    let run = |offline: bool| {
        let mut cmd = hub.kvaudit(home.path());
        cmd.args([
            "diff-turns",
            "--model",
            "Org/tiny",
            "--now",
            "2026-01-15T10:00:00",
            "--format",
            "json",
        ]);
        if offline {
            cmd.env("HF_HUB_OFFLINE", "1")
                .env("HF_ENDPOINT", "http://127.0.0.1:9");
        }
        let out = cmd.assert().code(1);
        let v: Json = serde_json::from_str(&stdout(&out)).unwrap();
        assert_eq!(v["model"]["source"], "Org/tiny");
        v["conversations"].clone()
    };
    assert_eq!(run(false), run(true));
}

#[test]
fn offline_without_cache_and_missing_repos_fail_clearly() {
    let Some(hub) = Hub::start() else { return };
    let home = tempfile::tempdir().unwrap();
    let out = hub
        .kvaudit(home.path())
        .args(["fetch", "Org/tiny", "--offline"])
        .assert()
        .code(2);
    let err = stderr(&out);
    assert!(
        err.contains("not in the cache") && err.contains("offline"),
        "{err}"
    );
    assert!(hub.requests().is_empty(), "offline must not send requests");

    let out = hub
        .kvaudit(home.path())
        .args(["fetch", "Org/missing"])
        .assert()
        .code(2);
    let err = stderr(&out);
    assert!(
        err.starts_with("error: Org/missing@main: cannot download tokenizer.json"),
        "{err}"
    );
    assert!(err.contains("404"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1);

    let out = hub
        .kvaudit(home.path())
        .args(["fetch", "Org/tiny"])
        .env("HF_ENDPOINT", "http://127.0.0.1:9")
        .assert()
        .code(2);
    assert!(
        stderr(&out).contains("check the network or HF_ENDPOINT"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn gated_repos_need_the_token_which_is_never_printed() {
    let Some(hub) = Hub::start() else { return };
    let home = tempfile::tempdir().unwrap();
    let out = hub
        .kvaudit(home.path())
        .args(["fetch", "Gated/tiny"])
        .assert()
        .code(2);
    let err = stderr(&out);
    assert!(
        err.contains("gated or private") && err.contains("HF_TOKEN"),
        "{err}"
    );

    let cache = tempfile::tempdir().unwrap();
    let out = hub
        .kvaudit(home.path())
        .args(["fetch", "Gated/tiny"])
        .env("HF_TOKEN", TOKEN)
        .env("HF_HUB_CACHE", cache.path())
        .assert()
        .success();
    let path = stdout(&out);
    assert!(
        path.starts_with(&cache.path().display().to_string()),
        "HF_HUB_CACHE honoured: {path}"
    );
    assert!(!path.contains(TOKEN) && !stderr(&out).contains(TOKEN));
    assert!(
        hub.requests()
            .iter()
            .any(|r| r["auth_ok"].as_bool().unwrap()),
        "token sent"
    );

    // A wrong token: access denied, and the token is not echoed.
    let out = hub
        .kvaudit(tempfile::tempdir().unwrap().path())
        .args(["fetch", "Gated/tiny"])
        .env("HF_TOKEN", "hf_wrong")
        .assert()
        .code(2);
    assert!(stderr(&out).contains("access denied") && !stderr(&out).contains("hf_wrong"));
}
