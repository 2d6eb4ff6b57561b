//! A run's `metrics.jsonl` (one JSON row per step, validation rows too) and `metrics.csv` beside
//! it, which follows every change (for spreadsheets and `tail -f`-style watching).

use std::io::Write;
use std::path::Path;

use serde_json::Value;

use crate::metrics_csv::write_csv;

/// Appends `row` to `metrics.jsonl` (a torn last line from a kill is cut first) and rewrites the
/// CSV.
pub fn append(path: &Path, row: &Value) -> std::io::Result<()> {
    let mut f = ta_types::jsonl::open_append(path)?;
    writeln!(f, "{row}")?;
    write_csv(path, &path.with_extension("csv"))
}

/// The rows of `metrics.jsonl` in file order: none when it cannot be read, a line that is not JSON
/// (a torn last line) skipped.
pub fn rows(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path).unwrap_or_default().lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

/// Keeps the rows of steps up to `last_step` (validation rows of step 0 included): rows of steps
/// that did not finish (a kill between the row and the checkpoint) go, so every step has one row
/// however often the run was interrupted. Atomic: a kill leaves the old file or the new one.
pub fn truncate(path: &Path, last_step: u64) -> std::io::Result<()> {
    let Ok(text) = std::fs::read_to_string(path) else { return Ok(()) };
    let kept: Vec<&str> = text.lines().filter(|l| serde_json::from_str::<Value>(l).ok().and_then(|v| v["step"].as_u64()).is_some_and(|s| s <= last_step)).collect();
    if kept.len() == text.lines().count() {
        return Ok(());
    }
    ta_types::atomic::write_atomic(path, |w| kept.iter().try_for_each(|l| writeln!(w, "{l}")))?;
    write_csv(path, &path.with_extension("csv"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncating_drops_rows_of_unfinished_steps_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metrics.jsonl");
        let rows = ["{\"step\":0,\"val_reward\":0.1}", "{\"step\":1}", "{\"step\":2}", "{\"step\":3}", "not json"];
        std::fs::write(&path, rows.join("\n") + "\n").unwrap();
        truncate(&path, 2).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"step\":0,\"val_reward\":0.1}\n{\"step\":1}\n{\"step\":2}\n");
        assert_eq!(std::fs::read_to_string(dir.path().join("metrics.csv")).unwrap().lines().count(), 4, "the CSV follows: header + 3 rows");
        truncate(&dir.path().join("absent.jsonl"), 0).unwrap();
        assert_eq!(super::rows(&path).len(), 3);
        std::fs::write(&path, "{\"step\":0}\nnot json\n{\"step\":1}").unwrap();
        assert_eq!(super::rows(&path), [serde_json::json!({"step": 0}), serde_json::json!({"step": 1})], "a line that is not JSON is skipped");
        assert!(super::rows(&dir.path().join("absent.jsonl")).is_empty());
    }

    #[test]
    fn appending_keeps_the_csv_in_step() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metrics.jsonl");
        append(&path, &serde_json::json!({"step": 1, "loss": 0.5})).unwrap();
        append(&path, &serde_json::json!({"step": 2, "loss": 0.25})).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 2);
        assert_eq!(std::fs::read_to_string(dir.path().join("metrics.csv")).unwrap(), "step,loss\n1,0.5\n2,0.25\n");
    }
}
