//! The trainer as a child process and its file mailbox (see `python/train_agent/trainer/`):
//! step batches go into `trainer/inbox/`, reports come back in `trainer/outbox/`, a crash leaves
//! `trainer/error.json`. Files work the same for one process, DDP and several nodes.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use crate::env::PythonEnv;

#[derive(Debug, thiserror::Error)]
pub enum TrainerError {
    #[error("cannot start the trainer: {0}")]
    Io(#[from] std::io::Error),
    #[error("the trainer failed at step {step}: {message}\n(log: {log}){}", memory_hint(.message))]
    Failed { step: u64, message: String, log: PathBuf },
    /// The process ended without reporting an error (killed, out of memory): starting it again
    /// from the last checkpoint may well work.
    #[error("the trainer process exited during step {step} ({status}); last lines of {log}:\n{tail}{}", memory_hint(.tail))]
    Exited { step: u64, status: String, tail: String, log: PathBuf },
}

/// What frees GPU memory, when the trainer's error is PyTorch's `OutOfMemoryError`: the trainer
/// shares the card with the engine (in `train` on one GPU) and with whatever else runs there,
/// which its own settings cannot see (eight runs on one card ran out so, benches/RESULTS.md
/// "Run 19").
fn memory_hint(text: &str) -> &'static str {
    if text.contains("OutOfMemoryError") || text.contains("CUDA out of memory") {
        "\nhint: the GPU ran out of memory. Other processes on it count (nvidia-smi lists them); in `train` on one GPU the engine holds --gpu-memory-utilization of it; a smaller `[trainer] micro_batch_tokens` (sft: --micro-batch-tokens) lowers the trainer's own peak"
    } else {
        ""
    }
}

/// A running trainer process; killed when dropped.
pub struct Trainer {
    child: tokio::process::Child,
    dir: PathBuf,
    log: PathBuf,
}

impl Trainer {
    /// Writes `config` (`ta_trainer::TrainerConfig`, which owns its keys) to
    /// `<output_dir>/trainer/config.json` and starts the trainer on it. Stale mailbox files (from an
    /// interrupted run) past `resume_step` are removed first.
    pub fn start(env: &PythonEnv, output_dir: &Path, config: &impl serde::Serialize, resume_step: u64, extra_env: &[(String, String)]) -> Result<Trainer, TrainerError> {
        let dir = output_dir.join("trainer");
        for sub in ["inbox", "outbox"] {
            let d = dir.join(sub);
            std::fs::create_dir_all(&d)?;
            for entry in std::fs::read_dir(&d)? {
                let path = entry?.path();
                let stale = match step_of(&path) {
                    Some(n) => n > resume_step,
                    None => true,
                };
                if stale {
                    std::fs::remove_file(&path)?;
                }
            }
        }
        let _ = std::fs::remove_file(dir.join("error.json"));
        let config_path = dir.join("config.json");
        std::fs::write(&config_path, serde_json::to_vec_pretty(config).map_err(std::io::Error::other)?)?;
        let logs = output_dir.join("logs");
        std::fs::create_dir_all(&logs)?;
        let log = logs.join("trainer.log");
        let log_file = std::fs::OpenOptions::new().create(true).append(true).open(&log)?;
        let mut cmd = env.module_command(crate::env::TRAINER_MODULE);
        cmd.arg("--config")
            .arg(&config_path)
            .envs(extra_env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(log_file.try_clone()?)
            .stderr(log_file)
            .kill_on_drop(true);
        crate::die_with_parent(&mut cmd);
        let child = cmd.spawn()?;
        Ok(Trainer { child, dir, log })
    }

    /// Where step files go (`ta_trainer::StepFile::write`, their one writer).
    pub fn inbox(&self) -> PathBuf {
        self.dir.join("inbox")
    }

    /// Waits for step `step`'s report, read as `R` (`ta_trainer::StepReport`, which owns its keys).
    pub async fn wait<R: serde::de::DeserializeOwned>(&mut self, step: u64) -> Result<R, TrainerError> {
        let out = self.dir.join("outbox").join(format!("step-{step:06}.json"));
        let error = self.dir.join("error.json");
        loop {
            // The trainer renames a finished file into place, so what is there is whole: a file
            // that does not parse is an error, not something to wait out.
            if let Ok(bytes) = std::fs::read(&out) {
                return serde_json::from_slice(&bytes).map_err(|e| TrainerError::Failed {
                    step,
                    message: format!("its report {} does not parse: {e}", out.display()),
                    log: self.log.clone(),
                });
            }
            if let Ok(bytes) = std::fs::read(&error) {
                let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
                let message = v["error"].as_str().unwrap_or("unknown error (see the log)").to_string();
                return Err(TrainerError::Failed { step, message, log: self.log.clone() });
            }
            if let Some(status) = self.child.try_wait()? {
                let tail = crate::engine::log_tail(&self.log, 20);
                return Err(TrainerError::Exited { step, status: status.to_string(), tail, log: self.log.clone() });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Asks the trainer to finish and waits for it.
    pub async fn stop(mut self) -> Result<(), TrainerError> {
        std::fs::write(self.inbox().join("stop"), b"")?;
        let status = tokio::time::timeout(Duration::from_secs(120), self.child.wait()).await;
        match status {
            Ok(Ok(s)) if s.success() => Ok(()),
            Ok(Ok(s)) => Err(TrainerError::Failed { step: 0, message: format!("exited with {s} on stop"), log: self.log.clone() }),
            Ok(Err(e)) => Err(e.into()),
            Err(_) => {
                let _ = self.child.start_kill();
                Err(TrainerError::Failed { step: 0, message: "did not stop within 120 s".into(), log: self.log.clone() })
            }
        }
    }
}

/// The step a mailbox file is of: `step-N.json` (a step file or its report) or
/// `validation-N.json` (the validation metrics measured at step N).
fn step_of(path: &Path) -> Option<u64> {
    let name = path.file_name()?.to_str()?;
    let rest = name.strip_prefix("step-").or_else(|| name.strip_prefix("validation-"))?;
    rest.strip_suffix(".json")?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_out_of_memory_failure_says_what_frees_the_gpu() {
        let log = PathBuf::from("/run/logs/trainer.log");
        let oom = "OutOfMemoryError: CUDA out of memory. Tried to allocate 410.00 MiB. GPU 0 has a total capacity of 139.80 GiB of which 328.94 MiB is free.";
        let failed = TrainerError::Failed { step: 1, message: oom.into(), log: log.clone() }.to_string();
        assert!(failed.contains("hint: the GPU ran out of memory"), "{failed}");
        assert!(failed.contains("--gpu-memory-utilization") && failed.contains("micro_batch_tokens"), "{failed}");
        let exited = TrainerError::Exited { step: 3, status: "exit status: 1".into(), tail: format!("Traceback ...\ntorch.{oom}"), log: log.clone() }.to_string();
        assert!(exited.contains("hint: the GPU ran out of memory"), "{exited}");
        let other = TrainerError::Failed { step: 1, message: "ValueError: no trainable tokens".into(), log }.to_string();
        assert!(!other.contains("hint"), "{other}");
    }

    #[test]
    fn step_numbers_come_from_file_names() {
        assert_eq!(step_of(Path::new("/x/step-000042.json")), Some(42));
        assert_eq!(step_of(Path::new("/x/.step-000042.tmp")), None);
        assert_eq!(step_of(Path::new("/x/stop")), None);
        assert_eq!(step_of(Path::new("/x/validation-000007.json")), Some(7));
        assert_eq!(step_of(Path::new("/x/.validation-000007.tmp")), None);
        // the temporary names ta_types::atomic::write_atomic gives the inbox files
        assert_eq!(step_of(Path::new("/x/step-000042.json.tmp")), None);
        assert_eq!(step_of(Path::new("/x/validation-000007.json.tmp")), None);
    }
}
