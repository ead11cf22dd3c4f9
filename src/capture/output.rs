//! The capture file: written under a temporary name beside `--out` and renamed over it only
//! when the capture is complete, so an existing capture survives a capture that fails (an
//! unreachable publisher, a full disk) and never holds half of a new one.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

pub(super) struct CaptureFile {
    file: File,
    /// The temporary name while the capture runs; `None` once renamed, or when writing in
    /// place.
    tmp: Option<PathBuf>,
    dest: PathBuf,
}

impl CaptureFile {
    /// Create the temporary file (`.NAME.PID.N.tmp` in the destination's directory). O_EXCL:
    /// a name that exists, a symlink planted there included, is never opened.
    pub(super) fn create(dest: &Path) -> io::Result<CaptureFile> {
        if let Ok(m) = std::fs::metadata(dest)
            && !m.is_file()
        {
            if m.is_dir() {
                return Err(io::Error::new(
                    io::ErrorKind::IsADirectory,
                    "it is a directory",
                ));
            }
            // A device or FIFO (`--out /dev/null` beside --live-replay): written in place,
            // since a rename would replace the device node itself.
            let file = OpenOptions::new().write(true).open(dest)?;
            return Ok(CaptureFile {
                file,
                tmp: None,
                dest: dest.to_path_buf(),
            });
        }
        let name = dest
            .file_name()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the path names no file"))?;
        let dir = match dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let mut last = None;
        for n in 0..64 {
            let tmp = dir.join(format!(
                ".{}.{}.{n}.tmp",
                name.to_string_lossy(),
                std::process::id()
            ));
            match OpenOptions::new().write(true).create_new(true).open(&tmp) {
                Ok(file) => {
                    return Ok(CaptureFile {
                        file,
                        tmp: Some(tmp),
                        dest: dest.to_path_buf(),
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("no free temporary name")))
    }

    pub(super) fn file(&mut self) -> &mut File {
        &mut self.file
    }

    /// The capture is complete: on disk (fsync), then renamed over the destination, then the
    /// directory entry on disk too. On failure the temporary file is removed (by drop).
    pub(super) fn commit(mut self) -> io::Result<()> {
        self.file.flush()?;
        let Some(tmp) = &self.tmp else {
            return Ok(());
        };
        self.file.sync_all()?;
        std::fs::rename(tmp, &self.dest)?;
        self.tmp = None;
        // Best effort: without it a crash right after could lose the rename, but the data
        // (and any older file) would still be whole.
        if let Some(dir) = self.dest.parent() {
            let dir = if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            };
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(())
    }
}

impl Drop for CaptureFile {
    /// Not committed (an error, a panic): the temporary file goes, the destination is as it was.
    fn drop(&mut self) {
        if let Some(tmp) = &self.tmp {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn replaced_only_on_commit() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("c.frames");
        std::fs::write(&dest, b"old").unwrap();
        let mut f = CaptureFile::create(&dest).unwrap();
        f.file().write_all(b"new capture").unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"old");
        assert_eq!(names(dir.path()).len(), 2, "the temporary file beside it");
        drop(f);
        assert_eq!(std::fs::read(&dest).unwrap(), b"old");
        assert_eq!(names(dir.path()), ["c.frames"]);
        let mut f = CaptureFile::create(&dest).unwrap();
        f.file().write_all(b"new capture").unwrap();
        f.commit().unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"new capture");
        assert_eq!(names(dir.path()), ["c.frames"]);
    }

    #[test]
    fn a_directory_a_missing_directory_and_a_device() {
        let dir = tempfile::tempdir().unwrap();
        assert!(CaptureFile::create(dir.path()).is_err(), "a directory");
        assert!(CaptureFile::create(&dir.path().join("no/such/dir/x")).is_err());
        #[cfg(unix)]
        {
            use std::os::unix::fs::FileTypeExt;
            let mut f = CaptureFile::create(Path::new("/dev/null")).unwrap();
            f.file().write_all(b"x").unwrap();
            f.commit().unwrap();
            let t = Path::new("/dev/null").metadata().unwrap().file_type();
            assert!(t.is_char_device(), "written in place, not renamed over");
        }
    }
}
