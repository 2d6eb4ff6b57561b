//! Replacing a file so that a crash or a kill leaves either the old file or the new one, never half
//! of one: the one way every run file that is rewritten whole (trajectories, traces, metrics, the
//! trainer's inbox files, the report) is written.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// The temporary name [`write_atomic`] writes first: `path` with `.tmp` appended, in the same
/// directory (so the rename stays on one filesystem), and not ending in the final name's extension
/// (so a reader that lists `*.json` or `*.jsonl` never sees it).
pub fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".tmp");
    PathBuf::from(name)
}

/// Writes what `fill` writes to [`tmp_path`]`(path)`, then renames it over `path`.
pub fn write_atomic(path: &Path, fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> std::io::Result<()> {
    let tmp = tmp_path(path);
    let mut w = BufWriter::new(std::fs::File::create(&tmp)?);
    fill(&mut w)?;
    w.into_inner().map_err(|e| e.into_error())?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_file_and_leaves_no_temporary_behind() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rows.jsonl");
        std::fs::write(&path, "old\n").unwrap();
        write_atomic(&path, |w| w.write_all(b"new\n")).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new\n");
        assert_eq!(tmp_path(&path), dir.path().join("rows.jsonl.tmp"));
        assert!(!tmp_path(&path).exists());
    }

    #[test]
    fn a_failed_fill_keeps_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rows.jsonl");
        std::fs::write(&path, "old\n").unwrap();
        let err = write_atomic(&path, |w| {
            w.write_all(b"half")?;
            Err(std::io::Error::other("serialisation failed"))
        });
        assert!(err.is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old\n");
    }
}
