//! The Hub cache layout shared with Python's huggingface_hub, and the checks on every name a
//! server or a user hands us before it becomes part of a path.
//!
//! Layout: `models--ORG--NAME/{refs/REVISION, blobs/ETAG, snapshots/COMMIT/FILE -> ../../blobs/ETAG,
//! .no_exist/COMMIT/FILE}`. The revision, the commit and the ETag come from the command line or
//! from the endpoint's headers, so each is validated here: a hostile endpoint must not be able
//! to write outside the cache by answering `X-Repo-Commit: ../../x` or `ETag: "../../x"`.

use std::path::{Path, PathBuf};

/// How the cache's own files are written (see [`crate::output::CACHE_FILE`]).
pub const OWN_FILE: crate::output::Options<'static> = crate::output::CACHE_FILE;

/// A name that cannot become part of a path in the cache.
#[derive(Debug, thiserror::Error)]
pub enum NameError {
    #[error("revision {rev:?} is not a valid ref name: {why}")]
    Revision { rev: String, why: String },
    /// `shown` is the header's first 80 characters.
    #[error(
        "the endpoint sent an ETag that is not a blob id ({shown:?}); refusing to use it as a file name"
    )]
    Etag { shown: String },
}

/// A full commit id: 40 hex digits, as the Hub sends in `X-Repo-Commit`.
pub fn is_commit(text: &str) -> bool {
    text.len() == 40 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A revision as a branch, tag or commit name: the Hub's ref names (git's rules, narrowed to
/// the characters Hub refs use). `refs/pr/1` is valid and becomes nested folders under `refs/`,
/// as huggingface_hub writes it; no component can be empty, `.`/`..`-led or absolute.
pub fn check_revision(rev: &str) -> Result<(), NameError> {
    let bad = |why: &str| {
        Err(NameError::Revision {
            rev: rev.to_string(),
            why: why.to_string(),
        })
    };
    if rev.is_empty() {
        return bad("it is empty");
    }
    if rev.len() > 255 {
        return bad("it is longer than 255 characters");
    }
    if let Some(c) = rev
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "-_./+".contains(*c)))
    {
        return bad(&format!("{c:?} is not allowed"));
    }
    for part in rev.split('/') {
        if part.is_empty() {
            return bad("an empty path component (leading, trailing or double '/')");
        }
        if part.starts_with('.') {
            return bad("a component starts with '.'");
        }
        if part.ends_with(".lock") {
            return bad("a component ends with '.lock'");
        }
    }
    Ok(())
}

/// The blob name an `ETag` header gives: quotes and a weak-validator prefix removed; only
/// `[A-Za-z0-9_-]` (the Hub sends a sha256 or a git sha1 in hex), at most 128 characters.
pub fn blob_name(etag: &str) -> Result<String, NameError> {
    let t = etag.trim();
    let t = t.strip_prefix("W/").unwrap_or(t);
    let t = t.trim_matches('"');
    if t.is_empty()
        || t.len() > 128
        || !t
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(NameError::Etag {
            shown: etag.chars().take(80).collect(),
        });
    }
    Ok(t.to_string())
}

/// One repository's folder in the cache. Every path it returns is built from validated names.
pub struct RepoCache {
    pub dir: PathBuf,
}

impl RepoCache {
    /// `id` must already be `org/name` with safe characters (`is_hub_id`).
    pub fn new(cache_dir: &Path, id: &str) -> RepoCache {
        RepoCache {
            dir: cache_dir.join(format!("models--{}", id.replace('/', "--"))),
        }
    }

    /// The commit a revision points to: the revision itself when it is a commit, else what
    /// `refs/REVISION` says (ignored unless it is a commit id, whoever wrote it).
    pub fn commit_of(&self, revision: &str) -> Option<String> {
        if is_commit(revision) {
            return Some(revision.to_ascii_lowercase());
        }
        let text = read_small(&self.dir.join("refs").join(revision), 128)?;
        let c = text.trim();
        is_commit(c).then(|| c.to_string())
    }

    pub fn snapshot_dir(&self, commit: &str) -> PathBuf {
        debug_assert!(is_commit(commit));
        self.dir.join("snapshots").join(commit)
    }

    /// A file of the snapshot, when it is there.
    pub fn cached(&self, commit: &str, file: &str) -> Option<PathBuf> {
        let p = self.snapshot_dir(commit).join(file);
        p.is_file().then_some(p)
    }

    pub fn blob(&self, etag: &str) -> PathBuf {
        self.dir.join("blobs").join(etag)
    }

    fn no_exist_marker(&self, commit: &str, file: &str) -> PathBuf {
        self.dir.join(".no_exist").join(commit).join(file)
    }

    /// huggingface_hub records files a commit does not have, so a cached model resolves
    /// without asking the server again.
    pub fn known_missing(&self, commit: &str, file: &str) -> bool {
        self.no_exist_marker(commit, file).exists()
    }

    pub fn mark_missing(&self, commit: &str, file: &str) -> std::io::Result<()> {
        crate::output::write_with(&self.no_exist_marker(commit, file), b"", OWN_FILE)
            .map_err(crate::output::OutputError::into_io)
    }

    pub fn write_ref(&self, revision: &str, commit: &str) -> std::io::Result<()> {
        if is_commit(revision) {
            return Ok(());
        }
        let path = self.dir.join("refs").join(revision);
        crate::output::write_with(&path, commit.as_bytes(), OWN_FILE)
            .map_err(crate::output::OutputError::into_io)
    }

    /// Put `blob` into the snapshot as `file`: a relative symlink as huggingface_hub makes it
    /// (a copy where symlinks are not available).
    pub fn link(&self, commit: &str, file: &str, etag: &str) -> std::io::Result<PathBuf> {
        let dir = self.snapshot_dir(commit);
        std::fs::create_dir_all(&dir)?;
        let dest = dir.join(file);
        if dest.symlink_metadata().is_ok() {
            std::fs::remove_file(&dest)?;
        }
        #[cfg(unix)]
        std::os::unix::fs::symlink(Path::new("../../blobs").join(etag), &dest)?;
        #[cfg(not(unix))]
        std::fs::copy(self.blob(etag), &dest)?;
        Ok(dest)
    }
}

/// A small text file, read only when it is a regular file of at most `limit` bytes.
fn read_small(path: &Path, limit: u64) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > limit {
        return None;
    }
    std::fs::read_to_string(path).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revisions_that_would_escape_are_refused() {
        for ok in [
            "main",
            "v1.0",
            "refs/pr/1",
            "0123456789abcdef0123456789abcdef01234567",
            "release-2024_06",
        ] {
            assert!(check_revision(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "..",
            "../..",
            "/etc/passwd",
            "a/../b",
            "a//b",
            "a/",
            ".hidden",
            "x.lock",
            "a b",
            "a\\b",
            "a\0b",
            "~",
            "a:b",
        ] {
            assert!(check_revision(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn etags_become_blob_names_only_when_safe() {
        let sha = "a".repeat(64);
        assert_eq!(blob_name(&format!("\"{sha}\"")).unwrap(), sha);
        assert_eq!(blob_name(&format!("W/\"{sha}\"")).unwrap(), sha);
        for bad in [
            "\"../../../tmp/x\"",
            "\"\"",
            "\"a/b\"",
            "\".\"",
            "\"..\"",
            &"b".repeat(200),
            "\"a.b\"",
        ] {
            assert!(blob_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn commits_are_forty_hex_digits() {
        assert!(is_commit("0123456789abcdef0123456789abcdef01234567"));
        assert!(!is_commit("../0123456789abcdef0123456789abcdef01234"));
        assert!(!is_commit("/tmp"));
        assert!(!is_commit("0123456789abcdef0123456789abcdef0123456"));
    }

    #[test]
    fn refs_that_are_not_commits_are_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let repo = RepoCache::new(dir.path(), "Org/m");
        std::fs::create_dir_all(repo.dir.join("refs")).unwrap();
        std::fs::write(repo.dir.join("refs/main"), "../../../etc").unwrap();
        assert_eq!(repo.commit_of("main"), None);
        repo.write_ref("main", &"c".repeat(40)).unwrap();
        assert_eq!(repo.commit_of("main"), Some("c".repeat(40)));
    }
}
