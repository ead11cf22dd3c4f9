//! A local stand-in for the Hugging Face Hub (tests/hub_server.py) in the Hub's URL layout,
//! and kvaudit commands pointed at it through `HF_ENDPOINT` with their own `HF_HOME`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command as Process, Stdio};

use assert_cmd::Command;
use serde_json::Value as Json;

pub const TOKEN: &str = "hf_secret_test_token";
pub const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

pub struct Hub {
    child: Child,
    pub url: String,
    log: PathBuf,
    /// The served repositories (a test may write a `.commit` file into one).
    pub root: tempfile::TempDir,
}

impl Drop for Hub {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Hub {
    /// Serves the tiny fixture model as `Org/tiny` and `Gated/tiny`; `None` without python3.
    pub fn start() -> Option<Hub> {
        Hub::start_with(&[])
    }

    /// With the server's environment (`HUB_BIND`, `HUB_REDIRECT_TO`: see hub_server.py).
    pub fn start_with(env: &[(&str, &str)]) -> Option<Hub> {
        let root = tempfile::tempdir().unwrap();
        for repo in ["Org/tiny", "Gated/tiny"] {
            let dir = root.path().join(repo);
            std::fs::create_dir_all(&dir).unwrap();
            for f in ["tokenizer.json", "tokenizer_config.json"] {
                std::fs::copy(
                    super::fixtures().join("models/tiny-think").join(f),
                    dir.join(f),
                )
                .unwrap();
            }
        }
        let log = root.path().join("requests.jsonl");
        let mut child = match Process::new("python3")
            .arg(super::repo_root().join("tests/hub_server.py"))
            .arg(root.path())
            .arg(&log)
            .arg(TOKEN)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .spawn()
        {
            Ok(c) => c,
            Err(e) => {
                super::skipped("hub tests", &format!("cannot start python3 ({e})"));
                return None;
            }
        };
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port: u16 = line.trim().parse().expect("server port");
        let host = env
            .iter()
            .find(|(k, _)| *k == "HUB_BIND")
            .map_or("127.0.0.1", |(_, v)| v);
        Some(Hub {
            child,
            url: format!("http://{host}:{port}"),
            log,
            root,
        })
    }

    pub fn requests(&self) -> Vec<Json> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// [`super::kvaudit`] pointed at this Hub, online, with `home` as HF_HOME (its cache
    /// under it).
    pub fn kvaudit(&self, home: &Path) -> Command {
        let mut cmd = super::kvaudit();
        cmd.env("HF_ENDPOINT", &self.url)
            .env("HF_HOME", home)
            .env("KVAUDIT_TOKENIZER_CACHE", "off")
            .env_remove("HF_HUB_CACHE")
            .env_remove("HUGGINGFACE_HUB_CACHE")
            .env_remove("HF_HUB_OFFLINE");
        cmd
    }
}
