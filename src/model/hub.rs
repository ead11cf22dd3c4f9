//! The Hugging Face Hub: downloads through hf-hub into the cache Python's huggingface_hub uses.
//!
//! hf-hub 0.5 ignores HF_TOKEN, HF_HUB_CACHE and offline mode, so they are resolved here.

use std::path::{Path, PathBuf};

use hf_hub::api::sync::{ApiBuilder, ApiError};
use hf_hub::{Cache, Repo, RepoType};

use super::{MODEL_FILES, ModelError};

/// The environment that decides where and how to download.
#[derive(Debug, Clone, Default)]
pub struct HubSettings {
    pub endpoint: String,
    pub cache_dir: PathBuf,
    pub token: Option<String>,
    pub offline: bool,
}

impl HubSettings {
    /// Read the variables huggingface_hub reads, in its order of precedence; `offline` is
    /// the command line's --offline (HF_HUB_OFFLINE turns it on too).
    pub fn from_env(offline: bool) -> HubSettings {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let home = || -> PathBuf {
            var("HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("."))
        };
        let hf_home = var("HF_HOME").map(PathBuf::from).unwrap_or_else(|| {
            var("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| home().join(".cache"))
                .join("huggingface")
        });
        let cache_dir = var("HF_HUB_CACHE")
            .or_else(|| var("HUGGINGFACE_HUB_CACHE"))
            .map(PathBuf::from)
            .unwrap_or_else(|| hf_home.join("hub"));
        let token = var("HF_TOKEN")
            .or_else(|| var("HUGGING_FACE_HUB_TOKEN"))
            .or_else(|| {
                let path = var("HF_TOKEN_PATH")
                    .map(PathBuf::from)
                    .unwrap_or_else(|| hf_home.join("token"));
                std::fs::read_to_string(path)
                    .ok()
                    .map(|t| t.trim().to_string())
                    .filter(|t| !t.is_empty())
            });
        let env_offline = var("HF_HUB_OFFLINE").is_some_and(|v| {
            matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on")
        });
        HubSettings {
            endpoint: var("HF_ENDPOINT")
                .unwrap_or_else(|| "https://huggingface.co".into())
                .trim_end_matches('/')
                .to_string(),
            cache_dir,
            token,
            offline: offline || env_offline,
        }
    }
}

/// `org/name` or `org/name@revision`, not an existing path.
pub fn is_hub_id(text: &str) -> bool {
    let id = text.split_once('@').map_or(text, |(id, _)| id);
    let mut parts = id.split('/');
    let ok = |p: Option<&str>| {
        p.is_some_and(|p| {
            !p.is_empty()
                && p != "."
                && p != ".."
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        })
    };
    ok(parts.next()) && ok(parts.next()) && parts.next().is_none()
}

/// Make sure the model's files are in the cache and return the snapshot directory.
pub fn fetch(
    id_and_rev: &str,
    revision: Option<&str>,
    settings: &HubSettings,
    progress: bool,
) -> Result<PathBuf, ModelError> {
    let (id, rev_in_id) = match id_and_rev.split_once('@') {
        Some((id, rev)) => (id, Some(rev)),
        None => (id_and_rev, None),
    };
    let revision = revision.or(rev_in_id).unwrap_or("main").to_string();
    let repo = Repo::with_revision(id.to_string(), RepoType::Model, revision.clone());
    let required = &MODEL_FILES[..2];

    if settings.offline {
        let cache = Cache::new(settings.cache_dir.clone()).repo(repo.clone());
        let mut snapshot: Option<PathBuf> = None;
        for file in required {
            let found = cache
                .get(file)
                .or_else(|| by_commit(&settings.cache_dir, id, &revision, file));
            match found {
                Some(p) => snapshot = snapshot.or_else(|| p.parent().map(Path::to_path_buf)),
                None => {
                    return Err(ModelError::Hub(format!(
                        "{id}@{revision}: {file} is not in the cache {} and offline mode is on \
                         (--offline or HF_HUB_OFFLINE); run `kvaudit fetch {id}` with network access first",
                        settings.cache_dir.display()
                    )));
                }
            }
        }
        return snapshot.ok_or_else(|| ModelError::Hub(format!("{id}: empty cache entry")));
    }

    let api = ApiBuilder::new()
        .with_endpoint(settings.endpoint.clone())
        .with_cache_dir(settings.cache_dir.clone())
        .with_token(settings.token.clone())
        .with_progress(progress)
        .with_user_agent("kvaudit", env!("CARGO_PKG_VERSION"))
        .build()
        .map_err(|e| ModelError::Hub(format!("cannot set up the Hub client: {e}")))?;
    let api_repo = api.repo(repo);
    let repo_dir = settings
        .cache_dir
        .join(format!("models--{}", id.replace('/', "--")));
    let mut snapshot: Option<PathBuf> = None;
    for file in MODEL_FILES {
        let optional = !required.contains(&file);
        // huggingface_hub records files a commit does not have under `.no_exist`, so a cached
        // model is resolved without asking the server again; kvaudit reads and writes the same.
        let commit = std::fs::read_to_string(repo_dir.join("refs").join(&revision))
            .ok()
            .map(|c| c.trim().to_string());
        let no_exist = commit
            .as_ref()
            .map(|c| repo_dir.join(".no_exist").join(c).join(file));
        if optional && no_exist.as_ref().is_some_and(|p| p.exists()) {
            continue;
        }
        match api_repo.get(file) {
            Ok(path) => snapshot = snapshot.or_else(|| path.parent().map(Path::to_path_buf)),
            Err(e) => {
                let status = http_status(&e);
                if optional && status == Some(404) {
                    if let Some(marker) = no_exist {
                        if let Some(parent) = marker.parent() {
                            let _ = std::fs::create_dir_all(parent);
                        }
                        let _ = std::fs::write(marker, b"");
                    }
                    continue;
                }
                return Err(ModelError::Hub(explain(
                    id, &revision, file, &e, status, settings,
                )));
            }
        }
    }
    snapshot.ok_or_else(|| ModelError::Hub(format!("{id}: nothing was downloaded")))
}

/// Python's huggingface_hub writes no `refs/<sha>` when downloading by commit; look in the
/// snapshot directly.
fn by_commit(cache_dir: &Path, id: &str, revision: &str, file: &str) -> Option<PathBuf> {
    if revision.len() != 40 || !revision.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let folder = format!("models--{}", id.replace('/', "--"));
    let p = cache_dir
        .join(folder)
        .join("snapshots")
        .join(revision)
        .join(file);
    p.is_file().then_some(p)
}

fn http_status(e: &ApiError) -> Option<u16> {
    match e {
        ApiError::RequestError(inner) => match inner.as_ref() {
            ureq::Error::StatusCode(code) => Some(*code),
            _ => None,
        },
        ApiError::TooManyRetries(inner) => http_status(inner),
        _ => None,
    }
}

fn explain(
    id: &str,
    revision: &str,
    file: &str,
    e: &ApiError,
    status: Option<u16>,
    settings: &HubSettings,
) -> String {
    let what = format!(
        "{id}@{revision}: cannot download {file} from {}",
        settings.endpoint
    );
    match status {
        Some(401) | Some(403) if settings.token.is_none() => format!(
            "{what}: the repository is gated or private (HTTP {}); accept its licence on the Hub and set HF_TOKEN",
            status.unwrap_or_default()
        ),
        Some(401) | Some(403) => format!(
            "{what}: access denied (HTTP {}) with the configured token; check that it has access to this repository",
            status.unwrap_or_default()
        ),
        Some(404) => format!(
            "{what}: not found (HTTP 404); check the repository id, the revision and that the repository has this file"
        ),
        Some(code) => format!("{what}: the server answered HTTP {code}"),
        None => format!(
            "{what}: {e}; check the network or HF_ENDPOINT, or use --offline with a cached copy"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hub_ids() {
        assert!(is_hub_id("Qwen/Qwen3-8B"));
        assert!(is_hub_id("Qwen/Qwen3-8B@abc123"));
        assert!(!is_hub_id("fixtures/tiny/model"));
        assert!(!is_hub_id("./x"));
        assert!(!is_hub_id("../shared"));
        assert!(!is_hub_id("plain"));
    }
}
