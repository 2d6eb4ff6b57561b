//! Appending to JSONL files (trajectories, metrics, the judge cache) so that a crash mid-write
//! costs at most the line being written: before a file is opened for appending, a torn last line
//! (no trailing newline, or not JSON) is cut off with a warning. Without this, the next line
//! would be glued onto the fragment and the file would stop parsing two runs later. Files rewritten
//! whole go through `crate::atomic::write_atomic`, with [`write_rows`] for their lines. Files a
//! person wrote are read through [`strip_bom`].

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

/// `text` without a leading UTF-8 byte-order mark. Editors on Windows (Notepad, Excel's "UTF-8"
/// export) start files with one, and serde_json rejects it with "expected value at line 1
/// column 1", which does not say why; every reader of a file a person wrote goes through here.
pub fn strip_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

/// Writes `rows` to `w` as JSON lines (one object and a newline each).
pub fn write_rows<T: serde::Serialize>(w: &mut dyn Write, rows: &[T]) -> std::io::Result<()> {
    for r in rows {
        serde_json::to_writer(&mut *w, r).map_err(std::io::Error::other)?;
        w.write_all(b"\n")?;
    }
    Ok(())
}

/// Opens `path` for appending (creating it and its directory), after cutting a torn last line.
/// Every JSONL appender goes through here.
pub fn open_append(path: &Path) -> std::io::Result<std::fs::File> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    repair_torn_tail(path)?;
    std::fs::OpenOptions::new().create(true).append(true).open(path)
}

/// Cuts a torn last line off `path` (a missing file is fine); returns the bytes removed.
pub fn repair_torn_tail(path: &Path) -> std::io::Result<u64> {
    let mut file = match std::fs::OpenOptions::new().read(true).write(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(0);
    }
    // The last line is read whole: lines are one record each, so this is bounded by one record.
    let mut start = len;
    let mut chunk = vec![0u8; 64 * 1024];
    let mut tail: Vec<u8> = Vec::new();
    // Find the start of the last line (after the last '\n' that is not the final byte).
    loop {
        let from = start.saturating_sub(chunk.len() as u64);
        let n = (start - from) as usize;
        file.seek(SeekFrom::Start(from))?;
        file.read_exact(&mut chunk[..n])?;
        let mut piece = chunk[..n].to_vec();
        piece.extend_from_slice(&tail);
        tail = piece;
        start = from;
        let search_end = tail.len() - usize::from(tail.last() == Some(&b'\n'));
        if let Some(i) = tail[..search_end].iter().rposition(|&b| b == b'\n') {
            tail.drain(..=i);
            start += i as u64 + 1;
            break;
        }
        if from == 0 {
            break;
        }
    }
    let complete = tail.last() == Some(&b'\n');
    let text = String::from_utf8_lossy(&tail);
    let whole = text.trim().is_empty() || serde_json::from_str::<serde_json::Value>(text.trim()).is_ok();
    if whole {
        if !complete {
            // A whole record that only lacks its newline is kept.
            file.seek(SeekFrom::End(0))?;
            std::io::Write::write_all(&mut file, b"\n")?;
        }
        return Ok(0);
    }
    let removed = len - start;
    tracing::warn!("{}: cut a torn last line ({removed} bytes, left by a crash mid-write) before appending", path.display());
    file.set_len(start)?;
    file.sync_all()?;
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn appended(initial: &[u8]) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/m.jsonl");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, initial).unwrap();
        writeln!(open_append(&path).unwrap(), "{{\"n\": 9}}").unwrap();
        std::fs::read_to_string(&path).unwrap()
    }

    #[test]
    fn a_torn_tail_is_cut_before_appending() {
        // No trailing newline: a crash mid-write.
        assert_eq!(appended(b"{\"n\": 1}\n{\"n\": 2"), "{\"n\": 1}\n{\"n\": 9}\n");
        // A newline after an unparsable fragment (two torn writes glued together) goes too.
        assert_eq!(appended(b"{\"n\": 1}\n{\"n\": 2{\"n\": 3}\n"), "{\"n\": 1}\n{\"n\": 9}\n");
        // The only line torn.
        assert_eq!(appended(b"{\"n\""), "{\"n\": 9}\n");
        // A whole record missing only its newline is kept.
        assert_eq!(appended(b"{\"n\": 1}"), "{\"n\": 1}\n{\"n\": 9}\n");
    }

    #[test]
    fn clean_files_are_left_alone() {
        assert_eq!(appended(b""), "{\"n\": 9}\n");
        assert_eq!(appended(b"{\"n\": 1}\n{\"n\": 2}\n"), "{\"n\": 1}\n{\"n\": 2}\n{\"n\": 9}\n");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new.jsonl");
        assert_eq!(repair_torn_tail(&path).unwrap(), 0);
        writeln!(open_append(&path).unwrap(), "{{}}").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{}\n");
    }

    #[test]
    fn a_long_torn_line_spanning_chunks_is_cut_whole() {
        let mut initial = b"{\"n\": 1}\n".to_vec();
        initial.extend(std::iter::repeat_n(b'x', 200_000));
        assert_eq!(appended(&initial), "{\"n\": 1}\n{\"n\": 9}\n");
    }
}
