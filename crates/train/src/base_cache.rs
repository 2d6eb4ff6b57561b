//! The base model's validation, kept across runs. A run that starts from an adapter validates the
//! base model beside it (`eval/base.jsonl`), and that validation is the same for every run that
//! asks the same model the same tasks in the same way: another GRPO config, more steps, a new
//! adapter. So it is stored under a key of everything that decides it (the command builds the
//! key: model and its file, server, tools, prompt, tasks, episode and reward settings, engine) and
//! a later run with the same key copies it instead of playing it again.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// What names a base model's weights in a key: its name and, when it is a local file or directory,
/// the files' sizes and modification times, so a model replaced in place is validated again. A
/// directory counts by its files (its own time moves whenever anything is written beside them).
pub fn model_identity(model: &str) -> serde_json::Value {
    let file =
        |p: &Path| std::fs::metadata(p).ok().map(|m| (m.len(), m.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map(|d| d.as_nanos())));
    let path = Path::new(model);
    let mut files: Vec<_> = std::fs::read_dir(path)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().is_file())
        .map(|e| (e.file_name().to_string_lossy().into_owned(), file(&e.path())))
        .collect();
    files.sort();
    serde_json::json!([model, file(path).filter(|_| path.is_file()), files])
}

/// `TRAIN_AGENT_VALIDATION_CACHE` overrides where the validations are kept (default: the
/// `base-validation` folder of the train-agent cache).
pub const DIR_ENV: &str = "TRAIN_AGENT_VALIDATION_CACHE";

/// Where the base model's validation of one setting lives.
#[derive(Debug, Clone)]
pub struct BaseCache {
    path: PathBuf,
}

impl BaseCache {
    /// The entry of `key` (any JSON that names everything the validation depends on) under `dir`.
    pub fn new(dir: &Path, key: &serde_json::Value) -> BaseCache {
        let digest = Sha256::digest(serde_json::to_vec(key).expect("a JSON value serialises"));
        let name: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
        BaseCache { path: dir.join(format!("{name}.jsonl")) }
    }

    /// `DIR_ENV`, else `cache_root`/base-validation.
    pub fn dir(cache_root: &Path) -> PathBuf {
        std::env::var_os(DIR_ENV).map(PathBuf::from).unwrap_or_else(|| cache_root.join("base-validation"))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Copies a complete stored validation (one trajectory per task, `tasks` of them) to `into`;
    /// false when there is none.
    pub fn restore(&self, into: &Path, tasks: usize) -> bool {
        ta_types::trajectory::count_trajectories(&self.path) == tasks
            && into.parent().map_or(Ok(()), std::fs::create_dir_all).is_ok()
            && std::fs::copy(&self.path, into).is_ok()
    }

    /// Keeps `from`, a finished validation, unless an episode of it ended in an error (the engine
    /// or the server failed, not the model): that is no result to hand the next run. A failure is
    /// logged, never fatal: the cache only saves time.
    pub fn store(&self, from: &Path) {
        let errored = ta_types::trajectory::read_trajectories(from).map(|ts| ts.iter().filter(|t| t.error.is_some()).count()).unwrap_or(0);
        if errored > 0 {
            tracing::info!("the base model's validation in {} is not kept for later runs: {errored} episodes ended in an error", from.display());
            return;
        }
        // Atomically, so a reader never sees half a file.
        let stored = self
            .path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| ta_types::atomic::write_atomic(&self.path, |w| std::io::copy(&mut std::fs::File::open(from)?, w).map(|_| ())));
        if let Err(e) = stored {
            tracing::warn!("cannot keep the base model's validation in {}: {e}", self.path.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_file_replaced_in_place_is_another_model() {
        let dir = tempfile::tempdir().unwrap();
        let gguf = dir.path().join("m.gguf");
        std::fs::write(&gguf, b"weights").unwrap();
        let name = gguf.to_str().unwrap();
        let before = model_identity(name);
        assert_eq!(before, model_identity(name));
        std::fs::write(&gguf, b"other weights").unwrap();
        assert_ne!(before, model_identity(name), "another size");
        // a directory by its files; a hub id by its name alone
        std::fs::write(dir.path().join("config.json"), b"{}").unwrap();
        let listed = model_identity(dir.path().to_str().unwrap());
        assert_eq!(listed[2].as_array().map(Vec::len), Some(2), "{listed}");
        assert_eq!(model_identity("HuggingFaceTB/SmolLM2-135M-Instruct"), serde_json::json!(["HuggingFaceTB/SmolLM2-135M-Instruct", null, []]));
    }

    #[test]
    fn an_entry_is_named_by_its_key_and_restored_only_when_complete() {
        let dir = tempfile::tempdir().unwrap();
        let key = serde_json::json!({"model": "m", "tasks": ["a", "b"]});
        let cache = BaseCache::new(dir.path(), &key);
        assert_eq!(cache.path(), BaseCache::new(dir.path(), &key).path(), "the same key, the same entry");
        assert_ne!(cache.path(), BaseCache::new(dir.path(), &serde_json::json!({"model": "m", "tasks": ["a"]})).path());

        let into = dir.path().join("run/eval/base.jsonl");
        assert!(!cache.restore(&into, 2), "nothing stored yet");
        let from = dir.path().join("played.jsonl");
        let line = |id: &str| serde_json::to_string(&ta_types::Trajectory::start(id, ta_types::trajectory::GroupRef::default(), "base", vec![])).unwrap();
        std::fs::write(&from, format!("{}\n{}\n", line("a"), line("b"))).unwrap();
        cache.store(&from);
        assert!(!cache.restore(&into, 3), "a validation of other tasks is not reused");
        assert!(cache.restore(&into, 2));
        assert_eq!(std::fs::read(&into).unwrap(), std::fs::read(&from).unwrap());
    }

    #[test]
    fn a_validation_with_an_errored_episode_is_not_kept() {
        let dir = tempfile::tempdir().unwrap();
        let cache = BaseCache::new(dir.path(), &serde_json::json!({"model": "m"}));
        let mut failed = ta_types::Trajectory::start("b", ta_types::trajectory::GroupRef::default(), "base", vec![]);
        failed.error = Some("engine: connection refused".into());
        let ok = ta_types::Trajectory::start("a", ta_types::trajectory::GroupRef::default(), "base", vec![]);
        let from = dir.path().join("played.jsonl");
        std::fs::write(&from, format!("{}\n{}\n", serde_json::to_string(&ok).unwrap(), serde_json::to_string(&failed).unwrap())).unwrap();
        cache.store(&from);
        assert!(!cache.path().exists());
        assert!(!cache.restore(&dir.path().join("into.jsonl"), 2));
    }
}
