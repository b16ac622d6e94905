//! Every file the project rewrites in place (templates, heads, settings, caches, exports) goes
//! through [`write_atomically`], so a crash, a kill or a power cut leaves the old content or the
//! new one, never a torn mix, and a rename that returned is on disk.
//!
//! The sequence is the one databases use for their own files: write a sibling temporary file,
//! fsync it (its bytes are durable before its name is), rename it over the target (atomic within
//! one folder on POSIX and NTFS), then fsync the folder so the rename itself survives a power cut.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A file operation that failed, naming the file.
#[derive(Debug, thiserror::Error)]
#[error("cannot write {path}: {source}")]
pub struct FileError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

impl FileError {
    fn at(path: &Path) -> impl FnOnce(std::io::Error) -> FileError + '_ {
        move |source| FileError {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Replaces `path` with `bytes` durably and atomically, creating its folder if needed.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), FileError> {
    let dir = folder_of(path);
    std::fs::create_dir_all(&dir).map_err(FileError::at(&dir))?;
    let temporary = sibling_temporary(path);
    let written = write_and_sync(&temporary, bytes)
        .and_then(|()| std::fs::rename(&temporary, path))
        .map_err(FileError::at(path));
    if written.is_err() {
        // Best effort: a leftover temporary is harmless (its name says so) but untidy.
        let _ = std::fs::remove_file(&temporary);
    }
    written?;
    sync_folder(&dir)
}

/// Removes `path` and makes the removal durable; a file already gone is not an error.
pub fn remove_durably(path: &Path) -> Result<(), FileError> {
    match std::fs::remove_file(path) {
        Ok(()) => sync_folder(&folder_of(path)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(FileError::at(path)(e)),
    }
}

const TEMPORARY_SUFFIX: &str = ".partial";

fn folder_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// A name no other writer uses at the same moment: two processes (the app and `aegis train`)
/// or two threads writing one file must not share a temporary, or one could rename the other's
/// half-written bytes into place.
fn sibling_temporary(path: &Path) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let unique = NEXT.fetch_add(1, Ordering::Relaxed);
    path.with_file_name(format!(
        ".{name}.{}-{unique}{TEMPORARY_SUFFIX}",
        std::process::id()
    ))
}

fn write_and_sync(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = OpenOptions::new().write(true).create_new(true).open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Makes a folder's entries (a rename, a removal) durable. Only POSIX can open a folder for
/// this; Windows makes a completed rename durable with the file's own flush.
fn sync_folder(dir: &Path) -> Result<(), FileError> {
    if cfg!(unix) {
        File::open(dir)
            .and_then(|folder| folder.sync_all())
            .map_err(FileError::at(dir))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn replaces_the_content_and_leaves_no_temporary_behind() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("nested/head.json");
        write_atomically(&path, b"old").expect("first write creates the folder");
        write_atomically(&path, b"new").expect("second write replaces");
        assert_eq!(std::fs::read(&path).expect("read"), b"new");
        assert_eq!(names(&dir.path().join("nested")), ["head.json"]);
    }

    #[test]
    fn a_failed_write_keeps_the_old_file_and_names_the_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        // A folder where the file should be: the rename fails, the old entry stays as it was.
        let path = dir.path().join("taken");
        std::fs::create_dir(&path).expect("mkdir");
        std::fs::write(path.join("inside"), b"kept").expect("write");
        let error = write_atomically(&path, b"new").expect_err("cannot replace a folder");
        assert_eq!(error.path, path);
        assert_eq!(std::fs::read(path.join("inside")).expect("read"), b"kept");
        assert_eq!(names(dir.path()), ["taken"], "no temporary left behind");
    }

    #[test]
    fn concurrent_writers_each_leave_a_whole_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("settings.json");
        let contents: Vec<Vec<u8>> = (0..8u8).map(|i| vec![b'a' + i; 64 * 1024]).collect();
        std::thread::scope(|scope| {
            for content in &contents {
                let path = &path;
                scope.spawn(move || write_atomically(path, content).expect("write"));
            }
        });
        let last = std::fs::read(&path).expect("read");
        assert!(contents.contains(&last), "the file is one writer's bytes");
        assert_eq!(names(dir.path()), ["settings.json"]);
    }

    #[test]
    fn removal_is_quiet_about_a_missing_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("journal");
        std::fs::write(&path, b"x").expect("write");
        remove_durably(&path).expect("removed");
        remove_durably(&path).expect("already gone is fine");
        assert!(!path.exists());
    }
}
