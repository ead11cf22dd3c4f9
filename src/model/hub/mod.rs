//! The Hugging Face Hub: downloads into the cache Python's huggingface_hub uses, shared with it.
//!
//! Everything a Hub endpoint sends is untrusted: the commit and ETag become path parts only
//! after `cache` validates them, the token goes only to the endpoint's own origin, and every
//! request has a timeout and every body a size cap (`http`).

mod cache;
mod http;

pub use http::redact as redact_url;

pub use http::transport_words;

use std::path::PathBuf;
use std::time::Duration;

use sha2::{Digest, Sha256};

use self::cache::{RepoCache, blob_name, check_revision, is_commit};
use self::http::{Client, Endpoint, HttpError, Limits};
use super::{MODEL_FILES, ModelError};

/// The environment that decides where and how to download.
#[derive(Debug, Clone, Default)]
pub struct HubSettings {
    pub endpoint: String,
    pub cache_dir: PathBuf,
    pub token: Option<String>,
    pub offline: bool,
    /// Ask the endpoint again even when the cache has the revision (`fetch --force`): a branch
    /// or tag may point to a newer commit, and only files whose content changed download.
    pub force: bool,
    pub limits: Limits,
}

impl HubSettings {
    /// Read the variables huggingface_hub reads, in its order of precedence; `offline` is
    /// the command line's --offline (HF_HUB_OFFLINE turns it on too).
    pub fn from_env(offline: bool) -> Result<HubSettings, ModelError> {
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
                read_token_file(&path)
            });
        let env_offline = var("HF_HUB_OFFLINE").is_some_and(|v| {
            matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on")
        });
        let seconds = |name: &str, default: Duration| -> Result<Duration, ModelError> {
            match var(name) {
                None => Ok(default),
                Some(v) => v
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|s| s.is_finite() && *s > 0.0 && *s <= 86_400.0)
                    .map(Duration::from_secs_f64)
                    .ok_or_else(|| {
                        ModelError::Hub(format!(
                            "{name}={v:?}: expected a number of seconds between 0 and 86400"
                        ))
                    }),
            }
        };
        let defaults = Limits::default();
        let max_file_size = match var("KVAUDIT_HUB_MAX_FILE_SIZE") {
            None => defaults.max_file_size,
            Some(v) => v
                .trim()
                .parse::<u64>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| {
                    ModelError::Hub(format!(
                        "KVAUDIT_HUB_MAX_FILE_SIZE={v:?}: expected a positive number of bytes"
                    ))
                })?,
        };
        let limits = Limits {
            read_timeout: seconds("HF_HUB_DOWNLOAD_TIMEOUT", defaults.read_timeout)?,
            metadata_timeout: seconds("HF_HUB_ETAG_TIMEOUT", defaults.metadata_timeout)?,
            body_timeout: seconds("KVAUDIT_HUB_BODY_TIMEOUT", defaults.body_timeout)?,
            max_file_size,
        };
        Ok(HubSettings {
            endpoint: var("HF_ENDPOINT")
                .unwrap_or_else(|| "https://huggingface.co".into())
                .trim_end_matches('/')
                .to_string(),
            cache_dir,
            token,
            offline: offline || env_offline,
            force: false,
            limits,
        })
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

/// What a fetch did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub snapshot: PathBuf,
    /// The revision asked for (a branch, tag or commit) and the commit it resolved to.
    pub revision: String,
    pub commit: String,
    /// The commit the cache had for the revision before, when it had one.
    pub previous_commit: Option<String>,
    /// Resolved from the cache alone: the endpoint was not asked whether the revision moved.
    pub from_cache: bool,
    /// Files whose bytes were downloaded (not already in the cache under their ETag).
    pub downloaded: Vec<&'static str>,
}

/// Make sure the model's files are in the cache and return the snapshot directory.
pub fn fetch(
    id_and_rev: &str,
    revision: Option<&str>,
    settings: &HubSettings,
    progress: bool,
) -> Result<PathBuf, ModelError> {
    fetch_detailed(id_and_rev, revision, settings, progress).map(|f| f.snapshot)
}

/// [`fetch`], saying how the revision was resolved and what was downloaded.
pub fn fetch_detailed(
    id_and_rev: &str,
    revision: Option<&str>,
    settings: &HubSettings,
    progress: bool,
) -> Result<Fetched, ModelError> {
    let (id, rev_in_id) = match id_and_rev.split_once('@') {
        Some((id, rev)) => (id, Some(rev)),
        None => (id_and_rev, None),
    };
    if !is_hub_id(id) {
        return Err(ModelError::Hub(format!(
            "{id:?} is not a Hub id of the form org/name"
        )));
    }
    let revision = revision.or(rev_in_id).unwrap_or("main");
    check_revision(revision).map_err(|e| ModelError::Hub(e.to_string()))?;
    let repo = RepoCache::new(&settings.cache_dir, id);
    let required = &MODEL_FILES[..2];

    let previous_commit = repo.commit_of(revision);
    // A cached revision resolves without a request, for every file it has or is known to lack
    // (unless forced: a branch or tag may have moved since).
    if let Some(commit) = &previous_commit
        && (!settings.force || settings.offline)
    {
        let complete = MODEL_FILES.iter().all(|f| {
            repo.cached(commit, f).is_some()
                || (!required.contains(f) && (settings.offline || repo.known_missing(commit, f)))
        });
        if complete {
            return Ok(Fetched {
                snapshot: repo.snapshot_dir(commit),
                revision: revision.to_string(),
                commit: commit.clone(),
                previous_commit: previous_commit.clone(),
                from_cache: true,
                downloaded: Vec::new(),
            });
        }
    }
    if settings.offline {
        let file = required
            .iter()
            .find(|f| {
                repo.commit_of(revision)
                    .and_then(|c| repo.cached(&c, f))
                    .is_none()
            })
            .unwrap_or(&required[0]);
        return Err(ModelError::Hub(format!(
            "{id}@{revision}: {file} is not in the cache {} and offline mode is on \
             (--offline or HF_HUB_OFFLINE); run `kvaudit fetch {id}` with network access first",
            settings.cache_dir.display()
        )));
    }

    let endpoint =
        Endpoint::parse(&settings.endpoint).map_err(|e| ModelError::Hub(e.to_string()))?;
    let client = Client::new(endpoint, settings.token.clone(), settings.limits.clone());
    let mut snapshot: Option<String> = None;
    let mut downloaded = Vec::new();
    for file in MODEL_FILES {
        let optional = !required.contains(&file);
        let known = repo.commit_of(revision);
        if let Some(c) = &known
            && !settings.force
            && (repo.cached(c, file).is_some() || (optional && repo.known_missing(c, file)))
        {
            snapshot.get_or_insert_with(|| c.clone());
            continue;
        }
        let fail = |why: String| {
            ModelError::Hub(format!(
                "{id}@{revision}: cannot download {file} from {}: {why}",
                client.endpoint().shown
            ))
        };
        let url = client.endpoint().resolve_url(id, revision, file);
        let meta = match client.metadata(&url) {
            Ok(m) => m,
            Err(HttpError::Status(404)) if optional => {
                // The commit is not known from a 404; record the marker against the one the
                // required files resolved to, as huggingface_hub does.
                if let Some(c) = known {
                    let _ = repo.mark_missing(&c, file);
                }
                continue;
            }
            Err(e) => return Err(fail(explain(&e, settings))),
        };
        if !is_commit(&meta.commit) {
            let shown: String = meta.commit.chars().take(80).collect();
            return Err(fail(format!(
                "the endpoint sent a commit id that is not 40 hex digits ({shown:?})"
            )));
        }
        let commit = meta.commit.to_ascii_lowercase();
        let etag = blob_name(&meta.etag).map_err(|e| fail(e.to_string()))?;
        if meta.size.is_some_and(|n| n > settings.limits.max_file_size) {
            return Err(fail(format!(
                "the file is {} bytes, more than the {} allowed (KVAUDIT_HUB_MAX_FILE_SIZE)",
                meta.size.unwrap_or_default(),
                settings.limits.max_file_size
            )));
        }
        let write = |e: std::io::Error| {
            ModelError::Hub(format!(
                "{id}@{revision}: cannot write {file} into the cache {}: {e}",
                settings.cache_dir.display()
            ))
        };
        if !repo.blob(&etag).is_file() {
            download_blob(&client, &repo, &meta.location, &etag, file, progress).map_err(
                |why| match why {
                    BlobError::Http(HttpError::Io(e)) | BlobError::Io(e) => write(e),
                    BlobError::Http(e) => fail(explain(&e, settings)),
                    BlobError::Content(why) => fail(why),
                },
            )?;
            downloaded.push(file);
        }
        repo.link(&commit, file, &etag).map_err(write)?;
        repo.write_ref(revision, &commit).map_err(write)?;
        snapshot.get_or_insert(commit);
    }
    let commit =
        snapshot.ok_or_else(|| ModelError::Hub(format!("{id}: nothing was downloaded")))?;
    Ok(Fetched {
        snapshot: repo.snapshot_dir(&commit),
        revision: revision.to_string(),
        commit,
        previous_commit,
        from_cache: false,
        downloaded,
    })
}

enum BlobError {
    Http(HttpError),
    Io(std::io::Error),
    Content(String),
}

/// Download into a temporary file beside the blobs, check it, then rename it into place: an
/// interrupted or refused download never leaves a blob under its final name.
fn download_blob(
    client: &Client,
    repo: &RepoCache,
    url: &str,
    etag: &str,
    file: &str,
    progress: bool,
) -> Result<(), BlobError> {
    let io = |e: crate::output::OutputError| BlobError::Io(e.into_io());
    let out =
        crate::output::AtomicFile::create_with(&repo.blob(etag), cache::OWN_FILE).map_err(io)?;
    let bar = progress.then(|| {
        let bar = indicatif::ProgressBar::new(0).with_message(file.to_string());
        bar.set_style(
            indicatif::ProgressStyle::with_template("{msg} {bytes}/{total_bytes} {bar:30}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    });
    let mut hasher = Sha256::new();
    let mut writer = HashingWriter {
        out,
        hasher: &mut hasher,
        head: Vec::new(),
    };
    client
        .download(url, &mut writer, |done, total| {
            if let Some(bar) = &bar {
                bar.set_length(total.unwrap_or(done));
                bar.set_position(done);
            }
        })
        .map_err(|e| match e {
            HttpError::Io(e) => BlobError::Io(crate::output::os_error(e)),
            e => BlobError::Http(e),
        })?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let HashingWriter { out, head, .. } = writer;
    // An LFS file's ETag is the sha256 of its bytes: a body that does not match it is a
    // broken transfer or a lying server, not the file.
    if etag.len() == 64 && etag.bytes().all(|b| b.is_ascii_hexdigit()) {
        let got = format!("{:x}", hasher.finalize());
        if !got.eq_ignore_ascii_case(etag) {
            return Err(BlobError::Content(format!(
                "the downloaded bytes have sha256 {got}, not the {etag} the server announced"
            )));
        }
    }
    if file.ends_with(".json") && !looks_like_json(&head) {
        return Err(BlobError::Content(
            "the server sent something that is not JSON (an error page?)".into(),
        ));
    }
    out.commit().map_err(io)
}

/// The first bytes of a JSON document: an object or array after optional BOM and whitespace.
fn looks_like_json(head: &[u8]) -> bool {
    let t = head.strip_prefix(b"\xef\xbb\xbf").unwrap_or(head);
    matches!(
        t.iter().find(|b| !b.is_ascii_whitespace()),
        Some(b'{') | Some(b'[')
    )
}

/// Writes through to the file while hashing, and keeps the first bytes for the content check.
struct HashingWriter<'a, W: std::io::Write> {
    out: W,
    hasher: &'a mut Sha256,
    head: Vec<u8>,
}

impl<W: std::io::Write> std::io::Write for HashingWriter<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(buf)?;
        self.hasher.update(&buf[..n]);
        if self.head.len() < 64 {
            let take = (64 - self.head.len()).min(n);
            self.head.extend_from_slice(&buf[..take]);
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

fn explain(e: &HttpError, settings: &HubSettings) -> String {
    match e {
        HttpError::Status(code @ (401 | 403)) if settings.token.is_none() => format!(
            "the repository is gated or private (HTTP {code}); accept its licence on the Hub and set HF_TOKEN"
        ),
        HttpError::Status(code @ (401 | 403)) => format!(
            "access denied (HTTP {code}) with the configured token; check that it has access to this repository"
        ),
        HttpError::Status(404) => "not found (HTTP 404); check the repository id, the revision and that the repository has this file".into(),
        HttpError::Transport(why) => format!(
            "{why}; check the network or HF_ENDPOINT, or use --offline with a cached copy"
        ),
        other => other.to_string(),
    }
}

/// The token file's text, trimmed: at most 64 KiB is read (a token is under 100 bytes; the path
/// comes from the environment and may name a device or an endless file), and a longer file,
/// or one that is not text, is no token.
fn read_token_file(path: &std::path::Path) -> Option<String> {
    use std::io::Read;
    const MAX: u64 = 64 << 10;
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(MAX + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    if bytes.len() as u64 > MAX {
        return None;
    }
    let text = String::from_utf8(bytes).ok()?;
    Some(text.trim().to_string()).filter(|t| !t.is_empty())
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
