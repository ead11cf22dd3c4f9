//! `kvaudit fetch` and Hub ids in `--model`, against a local server in the Hub's URL layout.

use crate::common;

use std::path::{Path, PathBuf};

use common::hub::{COMMIT, Hub, TOKEN};
use serde_json::Value as Json;

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

/// The token goes to the endpoint's origin only: a redirect to another host (a CDN, or an
/// attacker) gets the request without `Authorization`, as huggingface_hub does it.
#[test]
fn the_token_never_follows_a_redirect_to_another_host() {
    // The other host: another loopback address and port, serving the files.
    let Some(other) = Hub::start_with(&[("HUB_BIND", "127.0.0.2")]) else {
        return;
    };
    let Some(hub) = Hub::start_with(&[("HUB_REDIRECT_TO", &other.url)]) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let out = hub
        .kvaudit(home.path())
        .args(["fetch", "Hostile/redirect"])
        .env("HF_TOKEN", TOKEN)
        .assert()
        .success();
    let snapshot = PathBuf::from(stdout(&out).trim());
    let got = std::fs::read(snapshot.join("tokenizer.json")).unwrap();
    let want = std::fs::read(common::fixtures().join("models/tiny-think/tokenizer.json")).unwrap();
    assert_eq!(got, want, "downloaded through the redirect");
    assert!(
        hub.requests().iter().all(|r| r["auth_ok"] == true),
        "the endpoint gets the token: {:?}",
        hub.requests()
    );
    let at_other = other.requests();
    assert!(!at_other.is_empty(), "the redirect was followed");
    assert!(
        at_other.iter().all(|r| r["auth"] == false),
        "no Authorization at the other host: {at_other:?}"
    );
}

/// Names from the command line or the endpoint's headers never become paths outside the cache.
#[test]
fn a_hostile_endpoint_cannot_write_outside_the_cache() {
    let Some(hub) = Hub::start() else { return };
    let base = tempfile::tempdir().unwrap();
    let home = base.path().join("a/b/c/d/home");
    std::fs::create_dir_all(&home).unwrap();
    let listing = |root: &Path| -> Vec<PathBuf> {
        fn walk(p: &Path, out: &mut Vec<PathBuf>) {
            if let Ok(rd) = std::fs::read_dir(p) {
                for e in rd.flatten() {
                    out.push(e.path());
                    walk(&e.path(), out);
                }
            }
        }
        let mut v = Vec::new();
        walk(root, &mut v);
        v
    };
    for (repo, fragment) in [
        ("Hostile/etag-escape", "ETag"),
        ("Hostile/commit-dotdot", "commit"),
        ("Hostile/commit-abs", "commit"),
    ] {
        let out = hub.kvaudit(&home).args(["fetch", repo]).assert().code(2);
        let err = stderr(&out);
        assert!(
            err.contains(fragment) && err.trim_end().lines().count() == 1,
            "{repo}: {err}"
        );
    }
    for (args, fragment) in [
        (vec!["fetch", "Org/tiny", "--revision", "../.."], "revision"),
        (
            vec!["fetch", "Org/tiny", "--revision", "/etc/passwd"],
            "revision",
        ),
        (vec!["fetch", "Org/tiny@../../../x"], "revision"),
        (
            vec!["diff-turns", "--model", "Org/tiny@../../x"],
            "revision",
        ),
    ] {
        let before = hub.requests().len();
        let out = hub.kvaudit(&home).args(&args).assert().code(2);
        let err = stderr(&out);
        assert!(
            err.contains(fragment) && !err.contains("panicked"),
            "{args:?}: {err}"
        );
        assert_eq!(
            hub.requests().len(),
            before,
            "{args:?}: refused before any request"
        );
    }
    // Nothing was written anywhere but under HF_HOME (the server's own root holds its log).
    let outside: Vec<PathBuf> = listing(base.path())
        .into_iter()
        .filter(|p| !p.starts_with(&home) && !home.starts_with(p))
        .collect();
    assert!(outside.is_empty(), "written outside the cache: {outside:?}");
    assert!(
        listing(&home)
            .iter()
            .all(|p| !p.to_string_lossy().contains("escaped"))
    );
    assert!(!hub.root.path().join("abs-commit").exists());
}

/// Broken or hostile servers end in one clear line, in bounded time and disk.
#[test]
fn broken_servers_fail_clearly_within_the_limits() {
    let Some(hub) = Hub::start() else { return };
    let home = tempfile::tempdir().unwrap();
    type Env<'a> = &'a [(&'a str, &'a str)];
    let cases: [(&str, Env, &str); 5] = [
        ("Hostile/no-location", &[], "Location"),
        (
            "Hostile/silent",
            &[
                ("HF_HUB_ETAG_TIMEOUT", "1"),
                ("HF_HUB_DOWNLOAD_TIMEOUT", "1"),
            ],
            "timed out",
        ),
        (
            "Hostile/trickle",
            &[("KVAUDIT_HUB_BODY_TIMEOUT", "1")],
            "timed out",
        ),
        (
            "Hostile/endless",
            &[("KVAUDIT_HUB_MAX_FILE_SIZE", "1000000")],
            "larger than 1000000 bytes",
        ),
        ("Hostile/html", &[], "HTML"),
    ];
    for (repo, env, fragment) in cases {
        let started = std::time::Instant::now();
        let out = hub
            .kvaudit(home.path())
            .args(["fetch", repo])
            .envs(env.iter().copied())
            .timeout(std::time::Duration::from_secs(20))
            .assert()
            .code(2);
        let err = stderr(&out);
        assert!(
            err.contains(fragment) && err.trim_end().lines().count() == 1,
            "{repo}: {err}"
        );
        assert!(
            started.elapsed().as_secs() < 15,
            "{repo} took {:?}",
            started.elapsed()
        );
    }
    // No partial download is left behind, and nothing grew past the cap.
    let mut total = 0;
    let mut stack = vec![home.path().to_path_buf()];
    while let Some(p) = stack.pop() {
        for e in std::fs::read_dir(&p).into_iter().flatten().flatten() {
            let m = e.metadata().unwrap();
            if m.is_dir() {
                stack.push(e.path());
            } else {
                total += m.len();
                assert!(
                    !e.path().to_string_lossy().ends_with(".incomplete"),
                    "{:?}",
                    e.path()
                );
            }
        }
    }
    assert!(total < 2_000_000, "{total} bytes left in the cache");

    // Credentials in HF_ENDPOINT are never echoed.
    let out = hub
        .kvaudit(home.path())
        .args(["fetch", "Org/missing"])
        .env(
            "HF_ENDPOINT",
            hub.url.replace("http://", "http://user:hunter2@"),
        )
        .assert()
        .code(2);
    assert!(!stderr(&out).contains("hunter2"), "{}", stderr(&out));
    let out = hub
        .kvaudit(home.path())
        .args(["fetch", "Org/tiny"])
        .env("HF_HUB_DOWNLOAD_TIMEOUT", "soon")
        .assert()
        .code(2);
    assert!(
        stderr(&out).contains("HF_HUB_DOWNLOAD_TIMEOUT"),
        "{}",
        stderr(&out)
    );
}

/// `fetch --force` re-resolves a branch that moved and downloads only what changed; without it
/// a cached branch resolves from the cache, and stderr says the Hub was not asked.
#[test]
fn force_re_resolves_a_moved_branch_and_says_when_the_cache_answered() {
    let Some(hub) = Hub::start() else { return };
    let home = tempfile::tempdir().unwrap();
    let short = &COMMIT[..12];
    let fetch = |args: &[&str]| {
        let out = hub
            .kvaudit(home.path())
            .arg("fetch")
            .args(args)
            .assert()
            .success();
        (stdout(&out), stderr(&out))
    };
    let (dir, said) = fetch(&["Org/tiny"]);
    assert_eq!(
        said,
        format!(
            "Org/tiny@main: commit {short}; downloaded tokenizer.json, tokenizer_config.json\n"
        )
    );
    let before = hub.requests().len();
    let (again, said) = fetch(&["Org/tiny"]);
    assert_eq!(
        (again.as_str(), hub.requests().len()),
        (dir.as_str(), before)
    );
    assert_eq!(
        said,
        format!(
            "Org/tiny@main: commit {short} from the cache without the network (the Hub was not \
             asked whether main moved; --force checks)\n"
        )
    );
    // Forced with nothing changed: the Hub is asked, nothing is downloaded.
    let (same, said) = fetch(&["Org/tiny", "--force"]);
    assert_eq!(same, dir);
    assert_eq!(
        said,
        format!("Org/tiny@main: commit {short}; nothing to download, the cache had every file\n")
    );
    assert!(hub.requests().len() > before);
    assert!(
        hub.requests()[before..]
            .iter()
            .all(|r| r["method"] == "HEAD"),
        "{:?}",
        &hub.requests()[before..]
    );

    // main moves to a commit that changes tokenizer_config.json only.
    let repo = hub.root.path().join("Org/tiny");
    let moved = "fedcba9876543210fedcba9876543210fedcba98";
    std::fs::write(repo.join(".commit"), moved).unwrap();
    let mut config: Json =
        serde_json::from_slice(&std::fs::read(repo.join("tokenizer_config.json")).unwrap())
            .unwrap();
    config["model_max_length"] = 4096.into();
    std::fs::write(repo.join("tokenizer_config.json"), config.to_string()).unwrap();
    // Without --force the cache still answers with the old commit.
    assert_eq!(fetch(&["Org/tiny"]).0, dir);
    let before = hub.requests().len();
    let (new_dir, said) = fetch(&["Org/tiny", "--force"]);
    assert_eq!(
        said,
        format!(
            "Org/tiny@main: commit {} (was {short}); downloaded tokenizer_config.json\n",
            &moved[..12]
        )
    );
    let cache = home.path().join("hub/models--Org--tiny");
    assert_eq!(
        PathBuf::from(new_dir.trim()),
        cache.join("snapshots").join(moved)
    );
    assert_eq!(
        std::fs::read_to_string(cache.join("refs/main"))
            .unwrap()
            .trim(),
        moved
    );
    let gets: Vec<String> = hub.requests()[before..]
        .iter()
        .filter(|r| r["method"] == "GET")
        .map(|r| r["path"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(gets, ["/Org/tiny/resolve/main/tokenizer_config.json"]);
    let snapshot = cache.join("snapshots").join(moved);
    assert_eq!(
        std::fs::read(snapshot.join("tokenizer_config.json")).unwrap(),
        config.to_string().as_bytes()
    );
    assert!(
        snapshot.join("tokenizer.json").is_file(),
        "unchanged file linked too"
    );
    // Later runs resolve main to the new commit from the cache.
    assert_eq!(fetch(&["Org/tiny"]).0, new_dir);

    let out = hub
        .kvaudit(home.path())
        .args(["fetch", "Org/tiny", "--force", "--offline"])
        .assert()
        .code(2);
    assert!(
        stderr(&out).contains("cannot be used with"),
        "{}",
        stderr(&out)
    );
}

/// keys with a Hub id hashes that id (without `@revision`), as llm-d does for the served name.
#[test]
fn keys_of_a_hub_model_use_the_hub_id() {
    let Some(hub) = Hub::start() else { return };
    let home = tempfile::tempdir().unwrap();
    let keys = |args: &[&str]| {
        let out = hub
            .kvaudit(home.path())
            .args(["keys", "--now", "2026-01-15T10:00:00", "--format", "json"])
            .args(["--index-block-size", "4"])
            .args(args)
            .assert()
            .success();
        serde_json::from_str::<Json>(&stdout(&out)).unwrap()
    };
    let v = keys(&["--model", "Org/tiny@main"]);
    assert_eq!(v["model_name"], "Org/tiny");
    assert_eq!(v["model_name_from"], "the Hub id");
    let dir = home
        .path()
        .join("hub/models--Org--tiny/snapshots")
        .join(COMMIT);
    let named = keys(&[
        "--model",
        &dir.display().to_string(),
        "--model-name",
        "Org/tiny",
    ]);
    assert_eq!(v["sequences"], named["sequences"]);
}

/// diff-turns, keys and render on a Hub id the cache already has say on stderr that the Hub
/// was not asked (the branch may have moved); the first run, which asked, says nothing.
#[test]
fn commands_say_when_the_cache_answered_for_a_hub_id() {
    let Some(hub) = Hub::start() else { return };
    let home = tempfile::tempdir().unwrap();
    let first = hub
        .kvaudit(home.path())
        .args(["diff-turns", "--model", "Org/tiny"])
        .assert()
        .code(1);
    assert!(
        !stderr(&first).contains("from the cache"),
        "{}",
        stderr(&first)
    );
    for args in [
        vec!["diff-turns", "--model", "Org/tiny"],
        vec!["render", "--model", "Org/tiny"],
        vec!["keys", "--model", "Org/tiny"],
    ] {
        let out = hub.kvaudit(home.path()).args(&args).output().unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(
            err.contains("note: Org/tiny@main: commit ")
                && err.contains("from the cache without the network"),
            "{args:?}: {err}"
        );
    }
}
