//! The checkpoint layout of a run directory: `checkpoints/step-NNNNNN/` holds the trainer's
//! `adapter/` (PEFT) and `trainer_state.pt`, and `state.json` once the run has recorded the step,
//! so a step without `state.json` did not finish and a resume starts after the last one with it.

use std::path::{Path, PathBuf};

pub fn checkpoint_dir(out: &Path, step: u64) -> PathBuf {
    out.join("checkpoints").join(format!("step-{step:06}"))
}

/// The last step whose checkpoint is complete (its `state.json` exists), 0 when none.
pub fn last_complete_step(out: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(out.join("checkpoints")) else { return 0 };
    entries
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("state.json").exists())
        .filter_map(|e| e.file_name().to_str()?.strip_prefix("step-")?.parse::<u64>().ok())
        .max()
        .unwrap_or(0)
}

/// Marks step `step` complete: writes its `state.json` (`state` must hold `step`).
pub fn write_state(out: &Path, step: u64, state: &serde_json::Value) -> std::io::Result<()> {
    std::fs::write(checkpoint_dir(out, step).join("state.json"), serde_json::to_vec_pretty(state).map_err(std::io::Error::other)?)
}

/// Copies the directory `src` to `dst`, replacing what `dst` held, so a copied adapter never
/// keeps files of an older one (e.g. `final/` after a rerun with another rank).
pub fn copy_dir(src: &Path, dst: &Path) -> std::io::Result<()> {
    match std::fs::remove_dir_all(dst) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    copy_into(src, dst)
}

fn copy_into(src: &Path, dst: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dst)?;
    for entry in std::fs::read_dir(src)? {
        let entry = entry?;
        let target = dst.join(entry.file_name());
        if entry.path().is_dir() {
            copy_into(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_complete_step_needs_a_state_file() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(last_complete_step(dir.path()), 0);
        for s in [1, 2, 3] {
            std::fs::create_dir_all(checkpoint_dir(dir.path(), s)).unwrap();
        }
        write_state(dir.path(), 1, &serde_json::json!({"step": 1})).unwrap();
        write_state(dir.path(), 2, &serde_json::json!({"step": 2})).unwrap();
        assert_eq!(last_complete_step(dir.path()), 2, "step 3 has no state.json: it did not finish");
    }

    #[test]
    fn copy_dir_replaces_the_destination() {
        let dir = tempfile::tempdir().unwrap();
        let (src, dst) = (dir.path().join("src"), dir.path().join("dst"));
        std::fs::create_dir_all(src.join("sub")).unwrap();
        std::fs::write(src.join("sub/a"), "a").unwrap();
        std::fs::create_dir_all(&dst).unwrap();
        std::fs::write(dst.join("stale"), "old").unwrap();
        copy_dir(&src, &dst).unwrap();
        assert_eq!(std::fs::read_to_string(dst.join("sub/a")).unwrap(), "a");
        assert!(!dst.join("stale").exists(), "what the destination held is gone");
    }
}
