//! An episode's working directory: a fresh copy of the server's starting state (`--server-state`,
//! a file or a directory), deleted when the episode is done with it.
//!
//! Copies use reflinks (copy-on-write clones on btrfs, XFS, APFS, ...) where the filesystem
//! allows them, so copying a large database costs almost nothing; elsewhere they are plain copies.
//! Reflinks only work within one filesystem: set `TMPDIR` to a directory beside the state to get
//! them.

use std::path::{Path, PathBuf};

/// How a state copy was made, for logs and the cost bench.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CopyStats {
    /// Files cloned by reflink (no data copied).
    pub reflinked: u64,
    /// Files copied byte by byte.
    pub copied: u64,
    /// Bytes copied (reflinked files count 0).
    pub bytes: u64,
}

/// A temporary directory holding one copy of the starting state; removed on drop.
#[derive(Debug)]
pub struct Workdir {
    dir: tempfile::TempDir,
    stats: CopyStats,
}

impl Workdir {
    /// A new directory under the system's temporary directory, named after `label`, holding a
    /// copy of `state`: a file is copied into it under its own name (`{workdir}/memory.jsonl`),
    /// a directory's contents are copied into it (`{workdir}` is the copy).
    pub fn create(state: Option<&Path>, label: &str) -> std::io::Result<Workdir> {
        let dir = tempfile::Builder::new().prefix(&format!("ta-{label}-")).tempdir()?;
        let mut stats = CopyStats::default();
        if let Some(src) = state {
            let meta = std::fs::metadata(src).map_err(|e| std::io::Error::new(e.kind(), format!("--server-state {}: {e}", src.display())))?;
            if meta.is_dir() {
                copy_dir(src, dir.path(), &mut stats)?;
            } else {
                let name = src.file_name().ok_or_else(|| std::io::Error::other(format!("--server-state {} has no file name", src.display())))?;
                copy_file(src, &dir.path().join(name), &mut stats)?;
            }
        }
        Ok(Workdir { dir, stats })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn stats(&self) -> CopyStats {
        self.stats
    }
}

fn copy_file(src: &Path, dst: &Path, stats: &mut CopyStats) -> std::io::Result<()> {
    match reflink_copy::reflink_or_copy(src, dst)? {
        None => stats.reflinked += 1,
        Some(bytes) => {
            stats.copied += 1;
            stats.bytes += bytes;
        }
    }
    Ok(())
}

fn copy_dir(src: &Path, dst: &Path, stats: &mut CopyStats) -> std::io::Result<()> {
    for entry in std::fs::read_dir(src)? {
        let entry = entry?;
        let to: PathBuf = dst.join(entry.file_name());
        let kind = entry.file_type()?;
        if kind.is_dir() {
            std::fs::create_dir(&to)?;
            copy_dir(&entry.path(), &to, stats)?;
        } else if kind.is_symlink() {
            // A link is state too (it may point into the directory): keep it a link.
            std::os::unix::fs::symlink(std::fs::read_link(entry.path())?, &to)?;
        } else {
            copy_file(&entry.path(), &to, stats)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_and_directories_are_copied_and_removed_on_drop() {
        let src = tempfile::tempdir().unwrap();
        std::fs::write(src.path().join("db.json"), "{\"a\": 1}").unwrap();
        std::fs::create_dir(src.path().join("sub")).unwrap();
        std::fs::write(src.path().join("sub/x.txt"), "x").unwrap();

        let file = Workdir::create(Some(&src.path().join("db.json")), "t").unwrap();
        assert_eq!(std::fs::read_to_string(file.path().join("db.json")).unwrap(), "{\"a\": 1}");
        let dir = Workdir::create(Some(src.path()), "t").unwrap();
        assert_eq!(std::fs::read_to_string(dir.path().join("sub/x.txt")).unwrap(), "x");
        let s = dir.stats();
        assert_eq!(s.reflinked + s.copied, 2);

        // A write in one copy is not seen by the source or another copy.
        std::fs::write(file.path().join("db.json"), "changed").unwrap();
        let other = Workdir::create(Some(&src.path().join("db.json")), "t").unwrap();
        assert_eq!(std::fs::read_to_string(other.path().join("db.json")).unwrap(), "{\"a\": 1}");

        let path = file.path().to_path_buf();
        drop(file);
        assert!(!path.exists());
        let err = Workdir::create(Some(Path::new("/nonexistent/state.db")), "t").unwrap_err().to_string();
        assert!(err.contains("--server-state /nonexistent/state.db"), "{err}");
    }
}
