//! Files kvaudit writes: reports, the lock, per-transition lines, `init`'s config, caches.
//!
//! A file is written to a temporary name in its own directory and renamed over the
//! destination only once it is whole and on disk (flushed, fsynced), so a full disk, a crash
//! or an error half-way leaves the previous file byte for byte, never a cut one; the
//! temporary file is removed when the write fails or is abandoned. The rename needs a
//! directory entry to replace: a FIFO or a character device named as output (`/dev/stdout`,
//! `/dev/null`, a named pipe) holds no user file to destroy, so it is written directly, and a
//! write error there (a reader that left) is an error like any other.
//!
//! An output that is one of the command's inputs, or another output of the same run, is
//! refused before anything is opened for writing ([`check_outputs`]): renaming a report over
//! the corpus it is read from would lose the corpus as surely as truncating it.
//!
//! Errors are [`OutputError`]; those raised while writing travel inside an `std::io::Error`
//! (the `Write` trait's error) that keeps the OS error's kind. The binary treats a broken
//! pipe on standard output as a reader that has had enough (`| head`), but one on a named
//! output file is lost data: it tells them apart by finding an `OutputError` in the chain.

use std::ffi::OsString;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Component, Path, PathBuf};

/// Why an output was refused or could not be written. Each names the path the user gave.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("cannot write {}", .path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("refusing to write {}: it is the input {} (the same file)", .output.display(), .input.display())]
    IsInput { output: PathBuf, input: PathBuf },
    #[error("refusing to write {} and {}: they are the same file", .first.display(), .second.display())]
    SameOutput { first: PathBuf, second: PathBuf },
    #[error("refusing to write {}: it resolves to {}, outside {}", .path.display(), .real.display(), .root.display())]
    Outside {
        path: PathBuf,
        real: PathBuf,
        root: PathBuf,
    },
    #[error("cannot write {}: {why}", .path.display())]
    Unusable { path: PathBuf, why: &'static str },
}

impl OutputError {
    fn io(path: &Path, source: std::io::Error) -> OutputError {
        OutputError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// The OS error underneath, or the refusal as an error of its own: for callers that name
    /// the file in their own words.
    pub fn into_io(self) -> std::io::Error {
        match self {
            OutputError::Io { source, .. } => source,
            other => std::io::Error::other(other.to_string()),
        }
    }
}

/// The OS error under an error of [`AtomicFile`]'s writer (any other error as it is).
pub fn os_error(e: std::io::Error) -> std::io::Error {
    if e.get_ref().is_some_and(|inner| inner.is::<OutputError>()) {
        return unwrap_output(e, Path::new("")).into_io();
    }
    e
}

/// How a destination is treated. The default is for files a user names: a symlink is
/// written through (as the shell's `>` would), a missing directory is an error.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options<'a> {
    /// The destination, once every symlink on the way is followed, must lie inside this
    /// directory (paths a checked-out config names); checked again when the file is opened.
    pub within: Option<&'a Path>,
    /// Replace whatever is at the path (a symlink, a FIFO) instead of writing through it: for
    /// kvaudit's own cache files, where anything but a regular file was planted.
    pub replace: bool,
    /// Create the parent directories (caches).
    pub create_dirs: bool,
}

/// How kvaudit's own cache files are written: a symlink or FIFO planted under a name is
/// replaced, never written through, and missing folders are made.
pub const CACHE_FILE: Options<'static> = Options {
    within: None,
    replace: true,
    create_dirs: true,
};

/// An output file being written: a temporary file beside the destination, buffered, renamed
/// into place by [`commit`](Self::commit). Dropped without a commit, the temporary file is
/// removed and the destination is as it was.
pub struct AtomicFile {
    /// The path as the user gave it, for messages.
    shown: PathBuf,
    out: Option<BufWriter<File>>,
    /// None: written in place (a FIFO or a device), nothing to rename.
    temp: Option<PathBuf>,
    dest: PathBuf,
    /// A write failed: what was written is not the whole file, whatever follows.
    poisoned: bool,
}

impl std::fmt::Debug for AtomicFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AtomicFile")
            .field("dest", &self.dest)
            .field("temp", &self.temp)
            .finish()
    }
}

impl AtomicFile {
    /// An output file the user named (see [`Options::default`]).
    pub fn create(path: &Path) -> Result<AtomicFile, OutputError> {
        AtomicFile::create_with(path, Options::default())
    }

    pub fn create_with(path: &Path, options: Options) -> Result<AtomicFile, OutputError> {
        let fail = |e| OutputError::io(path, e);
        let dest = if options.replace {
            // The last component stays as named (the rename replaces it); the directories
            // above it are followed.
            let name = path
                .file_name()
                .ok_or(OutputError::Unusable {
                    path: path.to_path_buf(),
                    why: "not a file name",
                })?
                .to_owned();
            resolve(parent_of(path)).map_err(fail)?.join(name)
        } else {
            resolve(path).map_err(fail)?
        };
        if let Some(root) = options.within {
            let root = resolve(root).map_err(fail)?;
            if !dest.starts_with(&root) {
                return Err(OutputError::Outside {
                    path: path.to_path_buf(),
                    real: dest,
                    root,
                });
            }
        }
        let dir = parent_of(&dest).to_path_buf();
        if options.create_dirs {
            std::fs::create_dir_all(&dir).map_err(fail)?;
        }
        let existing = match std::fs::symlink_metadata(&dest) {
            Ok(m) => Some(m),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(fail(e)),
        };
        let unusable = |why| OutputError::Unusable {
            path: path.to_path_buf(),
            why,
        };
        if let Some(m) = &existing {
            let kind = m.file_type();
            if kind.is_dir() {
                return Err(unusable("it is a directory"));
            }
            if !options.replace && !kind.is_file() {
                // A descriptor (`/dev/stdout`) is whatever another process handed kvaudit:
                // written through, appended to, never replaced under it.
                let descriptor = kind.is_symlink();
                if !descriptor && !is_stream(&kind) {
                    return Err(unusable(
                        "it is neither a regular file, a FIFO nor a character device",
                    ));
                }
                let own = descriptor.then(|| own_descriptor(&dest)).flatten();
                let file = match own {
                    Some(file) => file,
                    None => std::fs::OpenOptions::new()
                        .append(descriptor)
                        .write(true)
                        .open(&dest)
                        .map_err(fail)?,
                };
                return Ok(AtomicFile {
                    shown: path.to_path_buf(),
                    out: Some(BufWriter::new(file)),
                    temp: None,
                    dest,
                    poisoned: false,
                });
            }
            // The shell's `>` fails on a read-only file; replacing it by rename would not.
            if kind.is_file() && !options.replace && m.permissions().readonly() {
                return Err(unusable("it is read-only"));
            }
        }
        let (temp, file) = create_temp(&dir, dest.file_name()).map_err(fail)?;
        let mut made = AtomicFile {
            shown: path.to_path_buf(),
            out: None,
            temp: Some(temp),
            dest,
            poisoned: false,
        };
        // The new file keeps the old one's permissions (and, when kvaudit may, its owner):
        // replacing a file must not change who can read it.
        if let Some(m) = existing.filter(|m| m.file_type().is_file()) {
            file.set_permissions(m.permissions()).map_err(fail)?;
            #[cfg(unix)]
            {
                use std::os::unix::fs::MetadataExt;
                let _ = std::os::unix::fs::fchown(&file, Some(m.uid()), Some(m.gid()));
            }
        }
        made.out = Some(BufWriter::new(file));
        Ok(made)
    }

    /// The path as it was given.
    pub fn path(&self) -> &Path {
        &self.shown
    }

    /// Everything but the rename: flushed and on disk. A command with several outputs syncs
    /// them all before committing any, so that a full disk fails the run before one of them
    /// has been replaced.
    pub fn sync(&mut self) -> Result<(), OutputError> {
        let shown = self.shown.clone();
        let fail = |e| OutputError::io(&shown, e);
        if self.poisoned {
            return Err(fail(std::io::Error::other("an earlier write to it failed")));
        }
        let Some(out) = self.out.as_mut() else {
            return Err(fail(std::io::Error::other("already closed")));
        };
        if let Err(e) = out.flush() {
            self.poisoned = true;
            return Err(fail(e));
        }
        // A FIFO or a device: flushed is all there is (fsync is not defined on them).
        if self.temp.is_some() {
            out.get_ref().sync_all().map_err(fail)?;
        }
        Ok(())
    }

    /// Flushes, fsyncs and renames the file into place. Refused when any write failed: what
    /// was written then is not the whole file.
    pub fn commit(mut self) -> Result<(), OutputError> {
        self.sync()?;
        let shown = self.shown.clone();
        let fail = |e| OutputError::io(&shown, e);
        // Flushed by `sync`: nothing is left in the buffer.
        if let Some(out) = self.out.take() {
            drop(out.into_parts());
        }
        let Some(temp) = self.temp.as_ref() else {
            return Ok(());
        };
        std::fs::rename(temp, &self.dest).map_err(fail)?;
        self.temp = None;
        // The rename itself is on disk once the directory is; a filesystem that cannot sync a
        // directory still has the whole file under one of the two names.
        if let Ok(dir) = File::open(parent_of(&self.dest)) {
            let _ = dir.sync_all();
        }
        Ok(())
    }

    fn wrap(&mut self, e: std::io::Error) -> std::io::Error {
        self.poisoned = true;
        std::io::Error::new(e.kind(), OutputError::io(&self.shown, e))
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let result = match self.out.as_mut() {
            Some(out) => out.write(buf),
            None => Err(std::io::Error::other("already closed")),
        };
        result.map_err(|e| self.wrap(e))
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        let result = match self.out.as_mut() {
            Some(out) => out.write_all(buf),
            None => Err(std::io::Error::other("already closed")),
        };
        result.map_err(|e| self.wrap(e))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let result = match self.out.as_mut() {
            Some(out) => out.flush(),
            None => Ok(()),
        };
        result.map_err(|e| self.wrap(e))
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        // Not flushed: an abandoned file's buffer goes nowhere (a broken pipe would only fail
        // again).
        if let Some(out) = self.out.take() {
            drop(out.into_parts());
        }
        if let Some(temp) = self.temp.take() {
            let _ = std::fs::remove_file(temp);
        }
    }
}

/// Writes `data` as the whole of `path` (see [`AtomicFile`]).
pub fn write(path: &Path, data: &[u8]) -> Result<(), OutputError> {
    write_with(path, data, Options::default())
}

pub fn write_with(path: &Path, data: &[u8], options: Options) -> Result<(), OutputError> {
    let mut file = AtomicFile::create_with(path, options)?;
    // The error inside is already an OutputError naming the path.
    file.write_all(data).map_err(|e| unwrap_output(e, path))?;
    file.commit()
}

fn unwrap_output(e: std::io::Error, path: &Path) -> OutputError {
    if !e.get_ref().is_some_and(|inner| inner.is::<OutputError>()) {
        return OutputError::io(path, e);
    }
    match e.into_inner().map(|inner| inner.downcast::<OutputError>()) {
        Some(Ok(inner)) => *inner,
        _ => OutputError::io(path, std::io::Error::other("write failed")),
    }
}

/// Whether `e` is, or carries inside an `io::Error`, an [`OutputError`]: an error about a
/// file kvaudit writes rather than about standard output.
pub fn is_output_error(e: &(dyn std::error::Error + 'static)) -> bool {
    if e.is::<OutputError>() {
        return true;
    }
    e.downcast_ref::<std::io::Error>()
        .and_then(std::io::Error::get_ref)
        .is_some_and(|inner| inner.is::<OutputError>())
}

/// Refuses outputs that are one of `inputs` or each other, before any is opened for writing.
/// Files are compared by device and inode, so a symlink or a hard link to an input is caught;
/// outputs that do not exist yet, by where their path leads. FIFOs and devices hold no file
/// to lose and are not compared. Inputs that do not exist are left to their reader's error;
/// `-` stands for standard input.
pub fn check_outputs<I, O>(inputs: I, outputs: O) -> Result<(), OutputError>
where
    I: IntoIterator,
    I::Item: AsRef<Path>,
    O: IntoIterator,
    O::Item: AsRef<Path>,
{
    let inputs: Vec<(PathBuf, FileId)> = inputs
        .into_iter()
        .filter_map(|p| {
            let p = p.as_ref();
            let id = if p == Path::new("-") {
                stdin_id()
            } else {
                FileId::of(p)
            };
            id.map(|id| (p.to_path_buf(), id))
        })
        .collect();
    let mut seen: Vec<(PathBuf, Identity)> = Vec::new();
    for out in outputs {
        let out = out.as_ref();
        let identity = match std::fs::metadata(out) {
            Ok(m) if !m.is_file() => continue,
            Ok(m) => Identity::File(FileId::from(&m)),
            // A missing file (or one behind a dangling link) is where its path leads.
            Err(_) => match resolve(out) {
                Ok(real) => Identity::Path(real),
                Err(_) => continue,
            },
        };
        if let Identity::File(id) = &identity
            && let Some((input, _)) = inputs.iter().find(|(_, i)| i == id)
        {
            return Err(OutputError::IsInput {
                output: out.to_path_buf(),
                input: input.clone(),
            });
        }
        if let Some((first, _)) = seen.iter().find(|(_, i)| *i == identity) {
            return Err(OutputError::SameOutput {
                first: first.clone(),
                second: out.to_path_buf(),
            });
        }
        seen.push((out.to_path_buf(), identity));
    }
    Ok(())
}

#[derive(Debug, Clone, PartialEq)]
enum Identity {
    File(FileId),
    Path(PathBuf),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileId {
    dev: u64,
    ino: u64,
}

impl FileId {
    fn of(path: &Path) -> Option<FileId> {
        std::fs::metadata(path).ok().map(|m| FileId::from(&m))
    }
}

impl From<&std::fs::Metadata> for FileId {
    #[cfg(unix)]
    fn from(m: &std::fs::Metadata) -> FileId {
        use std::os::unix::fs::MetadataExt;
        FileId {
            dev: m.dev(),
            ino: m.ino(),
        }
    }

    #[cfg(not(unix))]
    fn from(_: &std::fs::Metadata) -> FileId {
        // No inode to compare: outputs are then compared by path only.
        FileId { dev: 0, ino: 0 }
    }
}

/// Standard input's file, when it is a regular file (`kvaudit corpus - < x`).
fn stdin_id() -> Option<FileId> {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        let fd = std::io::stdin().as_fd().try_clone_to_owned().ok()?;
        let m = File::from(fd).metadata().ok()?;
        m.is_file().then(|| FileId::from(&m))
    }
    #[cfg(not(unix))]
    None
}

fn is_stream(kind: &std::fs::FileType) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        kind.is_fifo() || kind.is_char_device()
    }
    #[cfg(not(unix))]
    {
        let _ = kind;
        false
    }
}

fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Symlinks met on one path before it is taken for a loop (Linux's own limit).
const MAX_LINKS: usize = 40;

/// Where `path` leads: absolute, every symlink on the way followed (the last one too), `.`
/// and `..` applied to the real directories. Unlike `canonicalize`, the path need not exist:
/// from the first missing component on, the rest is taken as written, which is where a file
/// created there would go — a dangling symlink leads to where its target would be created.
/// A descriptor link (`/dev/stdout` is `/proc/PID/fd/1`) is where it stops.
pub fn resolve(path: &Path) -> std::io::Result<PathBuf> {
    let mut out = if path.is_absolute() {
        PathBuf::from("/")
    } else {
        std::env::current_dir()?
    };
    let mut pending: Vec<OsString> = Vec::new();
    push_components(&mut pending, path);
    let mut links = 0;
    let mut missing = false;
    while let Some(part) = pending.pop() {
        if part == "/" {
            out = PathBuf::from("/");
            continue;
        }
        if part == ".." {
            out.pop();
            continue;
        }
        let next = out.join(&part);
        if missing {
            out = next;
            continue;
        }
        match std::fs::symlink_metadata(&next) {
            // Its "target" (`pipe:[123]`, or a file that may since have been renamed) is not
            // a path to follow: the link itself is opened.
            Ok(m) if m.file_type().is_symlink() && is_descriptor_link(&next) => out = next,
            Ok(m) if m.file_type().is_symlink() => {
                links += 1;
                if links > MAX_LINKS {
                    return Err(std::io::Error::other(format!(
                        "more than {MAX_LINKS} symbolic links in {}",
                        path.display()
                    )));
                }
                push_components(&mut pending, &std::fs::read_link(&next)?);
            }
            Ok(_) => out = next,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                missing = true;
                out = next;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// A process's open file as Linux shows it, `/proc/PID/fd/N` (where `/dev/stdout` and
/// `/dev/fd/N` lead).
fn is_descriptor_link(link: &Path) -> bool {
    link.starts_with("/proc")
        && link
            .parent()
            .and_then(Path::file_name)
            .is_some_and(|d| d == "fd")
}

/// One of kvaudit's own descriptors (`/proc/PID/fd/N` of this process), duplicated: the
/// copy shares the descriptor's offset, so `--per-transition /dev/stdout > file` adds to the
/// file after what standard output wrote instead of writing over it from the start, as a
/// second opening of the file would.
#[cfg(unix)]
fn own_descriptor(link: &Path) -> Option<File> {
    use std::os::fd::FromRawFd;
    let fd: libc::c_int = link.file_name()?.to_str()?.parse().ok()?;
    let owner = link.parent()?.parent()?.file_name()?;
    if owner != std::process::id().to_string().as_str() && owner != "self" {
        return None;
    }
    // SAFETY: F_DUPFD_CLOEXEC only reads `fd` (EBADF when it is not open) and returns a new
    // descriptor that nothing else owns.
    let copy = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    // SAFETY: `copy` is a fresh descriptor owned by nothing else.
    (copy >= 0).then(|| unsafe { File::from_raw_fd(copy) })
}

#[cfg(not(unix))]
fn own_descriptor(_: &Path) -> Option<File> {
    None
}

/// Pushes the components of `path` so that popping gives them in order; an absolute path
/// starts with `/`, which restarts at the root.
fn push_components(stack: &mut Vec<OsString>, path: &Path) {
    let parts: Vec<OsString> = path
        .components()
        .filter_map(|c| match c {
            Component::RootDir | Component::Prefix(_) => Some(OsString::from("/")),
            Component::CurDir => None,
            Component::ParentDir => Some(OsString::from("..")),
            Component::Normal(n) => Some(n.to_owned()),
        })
        .collect();
    stack.extend(parts.into_iter().rev());
}

/// A new file beside the destination, named after it (hidden, with the process id), created
/// exclusively: never an existing file, never through a symlink someone planted there.
fn create_temp(dir: &Path, name: Option<&std::ffi::OsStr>) -> std::io::Result<(PathBuf, File)> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    // Long names are cut so that the temporary name stays within NAME_MAX (255 bytes).
    let base: String = name
        .map(|n| n.to_string_lossy().chars().take(100).collect())
        .unwrap_or_default();
    let mut last = None;
    for _ in 0..64 {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let temp = dir.join(format!(".{base}.{}-{n}{TEMP_SUFFIX}", std::process::id()));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
        {
            Ok(file) => return Ok((temp, file)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no free temporary name")))
}

/// How kvaudit's temporary files end, so that one left by a killed run is recognisable.
pub const TEMP_SUFFIX: &str = ".kvaudit-tmp";

#[cfg(test)]
mod tests {
    use super::*;

    fn temps(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(TEMP_SUFFIX))
            .collect()
    }

    #[test]
    fn a_file_is_replaced_only_by_a_commit() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("report.txt");
        std::fs::write(&p, "old").unwrap();
        let mut f = AtomicFile::create(&p).unwrap();
        f.write_all(b"new, longer").unwrap();
        f.flush().unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "old");
        assert_eq!(temps(dir.path()).len(), 1);
        drop(f);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "old");
        assert!(temps(dir.path()).is_empty());
        write(&p, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new");
        assert!(temps(dir.path()).is_empty());
    }

    #[cfg(unix)]
    #[test]
    fn permissions_are_kept_and_read_only_files_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("lock");
        std::fs::write(&p, "old").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        write(&p, b"new").unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o640);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o444)).unwrap();
        let e = write(&p, b"x").unwrap_err().to_string();
        assert!(e.ends_with("it is read-only"), "{e}");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new");
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_are_written_through_unless_replaced_or_outside() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir(d.join("repo")).unwrap();
        std::fs::write(d.join("target"), "old").unwrap();
        std::os::unix::fs::symlink(d.join("target"), d.join("repo/link")).unwrap();
        write(&d.join("repo/link"), b"through").unwrap();
        assert_eq!(
            std::fs::read_to_string(d.join("target")).unwrap(),
            "through"
        );
        assert!(d.join("repo/link").symlink_metadata().unwrap().is_symlink());
        let inside = Options {
            within: Some(&d.join("repo")),
            ..Options::default()
        };
        let e = write_with(&d.join("repo/link"), b"x", inside).unwrap_err();
        assert!(matches!(e, OutputError::Outside { .. }), "{e}");
        // A dangling link leads outside too: it would create its target there.
        std::os::unix::fs::symlink(d.join("new"), d.join("repo/dangling")).unwrap();
        let e = write_with(&d.join("repo/dangling"), b"x", inside).unwrap_err();
        assert!(matches!(e, OutputError::Outside { .. }), "{e}");
        assert!(!d.join("new").exists());
        let e = write_with(&d.join("repo/../target"), b"x", inside).unwrap_err();
        assert!(matches!(e, OutputError::Outside { .. }), "{e}");
        assert_eq!(
            std::fs::read_to_string(d.join("target")).unwrap(),
            "through"
        );
        let cache = Options {
            replace: true,
            ..Options::default()
        };
        write_with(&d.join("repo/link"), b"replaced", cache).unwrap();
        assert!(d.join("repo/link").symlink_metadata().unwrap().is_file());
        assert_eq!(
            std::fs::read_to_string(d.join("target")).unwrap(),
            "through"
        );
        assert!(temps(&d.join("repo")).is_empty());
    }

    #[cfg(unix)]
    #[test]
    fn streams_are_written_directly_and_directories_refused() {
        write(Path::new("/dev/null"), b"x").unwrap();
        // Standard error, whatever the harness made it (a pipe, a file, a terminal).
        if Path::new("/proc/self/fd").is_dir() {
            write(Path::new("/dev/stderr"), b"").unwrap();
            let real = resolve(Path::new("/dev/stderr")).unwrap();
            assert!(is_descriptor_link(&real), "{}", real.display());
        }
        let dir = tempfile::tempdir().unwrap();
        let e = write(dir.path(), b"x").unwrap_err().to_string();
        assert!(e.ends_with("it is a directory"), "{e}");
        let e = write(&dir.path().join("no/such/dir/f"), b"x").unwrap_err();
        assert!(matches!(e, OutputError::Io { .. }), "{e}");
        let made = Options {
            create_dirs: true,
            ..Options::default()
        };
        write_with(&dir.path().join("a/b/f"), b"x", made).unwrap();
        assert_eq!(std::fs::read(dir.path().join("a/b/f")).unwrap(), b"x");
    }

    #[cfg(unix)]
    #[test]
    fn outputs_that_are_inputs_or_each_other_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let input = d.join("in.jsonl");
        std::fs::write(&input, "x").unwrap();
        std::os::unix::fs::symlink(&input, d.join("sym")).unwrap();
        std::fs::hard_link(&input, d.join("hard")).unwrap();
        for out in [
            input.clone(),
            d.join("sym"),
            d.join("hard"),
            d.join("./in.jsonl"),
        ] {
            let e = check_outputs([&input], [&out]).unwrap_err();
            assert!(matches!(e, OutputError::IsInput { .. }), "{e}");
        }
        check_outputs([&input], [d.join("new.jsonl"), d.join("new.html")]).unwrap();
        let e = check_outputs([&input], [d.join("new"), d.join("sub/../new")]).unwrap_err();
        assert!(matches!(e, OutputError::SameOutput { .. }), "{e}");
        check_outputs([&input], ["/dev/null", "/dev/null"]).unwrap();
        // An input that is not there is its reader's business.
        check_outputs([d.join("missing")], [d.join("missing2")]).unwrap();
    }

    #[test]
    fn write_errors_name_the_file_and_keep_their_kind() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = AtomicFile::create(&dir.path().join("out")).unwrap();
        let e = f.wrap(std::io::Error::from(std::io::ErrorKind::BrokenPipe));
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe);
        assert!(is_output_error(&e));
        assert!(e.to_string().starts_with("cannot write "), "{e}");
        // Once a write failed, the file is never committed.
        assert!(f.commit().is_err());
        assert!(temps(dir.path()).is_empty());
        assert!(!dir.path().join("out").exists());
    }

    #[test]
    fn resolve_applies_dots_to_real_directories() {
        let dir = tempfile::tempdir().unwrap();
        let d = resolve(dir.path()).unwrap();
        std::fs::create_dir(d.join("a")).unwrap();
        assert_eq!(resolve(&d.join("a/../b/./c")).unwrap(), d.join("b/c"));
        #[cfg(unix)]
        {
            std::fs::create_dir_all(d.join("x/y")).unwrap();
            std::os::unix::fs::symlink(d.join("x/y"), d.join("a/l")).unwrap();
            // l/.. is x, not a.
            assert_eq!(resolve(&d.join("a/l/../f")).unwrap(), d.join("x/f"));
            std::os::unix::fs::symlink("loop", d.join("loop")).unwrap();
            assert!(resolve(&d.join("loop")).is_err());
        }
    }
}
