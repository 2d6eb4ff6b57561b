//! Reading what `train`, `eval` and `rollout` leave on disk, for `stats` and `report`.
//!
//! - a training run: `config.toml`, `run.json`, `metrics.jsonl`, `trajectories/step-N.jsonl`,
//!   `eval/step-N.jsonl` (validation: step 0 is the base model, the last step the trained adapter),
//!   `eval/step-N.sampled.jsonl` (sampled validation, `rollout.eval_rollouts` episodes per task);
//! - an SFT run: `config.toml` and `metrics.jsonl` (training and held-out losses by step);
//! - an evaluation: `eval.json` and `trajectories/<model>.jsonl` (`base`, `trained`);
//! - a rollout: `trajectories.jsonl` and `summary.json`.
//!
//! Every command that writes such a directory holds its [`RunLock`] while it does.

use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use ta_types::Trajectory;
use ta_types::trajectory::read_trajectories;

use ta_metrics::{Comparison, Metrics, compare};

#[derive(Debug, thiserror::Error)]
pub enum RunDirError {
    #[error("cannot read {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}:{line}: {message}")]
    Parse { path: PathBuf, line: usize, message: String },
    #[error("{} holds no run, evaluation or rollout\nhint: {POINT_AT}", .0.display())]
    Unknown(PathBuf),
    #[error("{} does not exist\nhint: {POINT_AT}", .0.display())]
    Missing(PathBuf),
    #[error("{} is a file, and a command's output is a directory\nhint: name a directory for --out (it is created if needed)", .0.display())]
    OutIsFile(PathBuf),
    #[error("cannot create {}: {source}", .path.display())]
    Create { path: PathBuf, source: std::io::Error },
    #[error("cannot claim {} for this run: {source}\nhint: --out must be a directory this user can write, on a file system with file locks", .path.display())]
    Lock { path: PathBuf, source: std::io::Error },
    #[error(
        "{} is being written by another train-agent process ({holder})\nhint: wait for it to finish, stop it{}, or write to another --out directory; the lock ends with that process",
        path.display(),
        holder.pid.map(|pid| format!(" (kill {pid})")).unwrap_or_default()
    )]
    Locked { path: PathBuf, holder: LockHolder },
}

/// What a directory that `stats` and `report` read may be.
const POINT_AT: &str =
    "point at a `train` or `sft --out` (metrics.jsonl), an `eval --out` (eval.json), a `rollout --out` (trajectories.jsonl) or a `fit` or `demo --out` directory";

/// The lock file of a run directory (see [`RunLock`]).
pub const LOCK_FILE: &str = ".lock";

/// Who holds a [`RunLock`], as its `.lock` file says.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockHolder {
    pub pid: Option<u32>,
    pub command: Option<String>,
}

impl std::fmt::Display for LockHolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.pid, &self.command) {
            (Some(pid), Some(command)) => write!(f, "PID {pid}: {command}"),
            (Some(pid), None) => write!(f, "PID {pid}"),
            _ => write!(f, "its PID not written yet"),
        }
    }
}

/// An exclusive claim on a run directory for as long as a command writes it. Two commands
/// writing one `--out` at once lose results silently (two rollouts each reported 10
/// trajectories; the file held the first one's 10), so the second one fails at once instead.
///
/// The claim is an advisory lock (`flock`) on `.lock`, which holds the owner's PID and command
/// line for the other's message. The kernel drops the lock when the process ends, however it
/// ends, so a `.lock` left behind by a killed run never blocks the next one; the file is left in
/// place, since removing it would let a third process lock a fresh file while a second still
/// holds the old one.
#[derive(Debug)]
pub struct RunLock {
    _file: std::fs::File,
}

impl RunLock {
    /// Creates `dir` if needed and claims it, or fails naming the process that holds it.
    pub fn acquire(dir: &Path) -> Result<RunLock, RunDirError> {
        if dir.exists() && !dir.is_dir() {
            return Err(RunDirError::OutIsFile(dir.to_path_buf()));
        }
        std::fs::create_dir_all(dir).map_err(|source| RunDirError::Create { path: dir.to_path_buf(), source })?;
        let path = dir.join(LOCK_FILE);
        let mut file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).map_err(claim(&path))?;
        match fs4::FileExt::try_lock(&file) {
            Ok(()) => {}
            Err(fs4::TryLockError::WouldBlock) => {
                let mut text = String::new();
                // Best effort: the holder may be between taking the lock and writing its PID.
                let _ = file.read_to_string(&mut text);
                let holder = serde_json::from_str(&text).unwrap_or_default();
                return Err(RunDirError::Locked { path: dir.to_path_buf(), holder });
            }
            Err(fs4::TryLockError::Error(source)) => return Err(RunDirError::Lock { path, source }),
        }
        // URL credentials in the command line (`--base-url http://user:pass@...`) stay out of it.
        let command = ta_types::redact::redact_urls_in(&std::env::args().collect::<Vec<_>>().join(" "));
        let holder = LockHolder { pid: Some(std::process::id()), command: Some(command) };
        let text = serde_json::to_string(&holder).expect("a holder is JSON");
        file.set_len(0).and_then(|()| file.rewind()).and_then(|()| file.write_all(text.as_bytes())).map_err(claim(&path))?;
        Ok(RunLock { _file: file })
    }
}

/// A failure to open, lock or write the lock file: the run cannot start there.
fn claim(path: &Path) -> impl FnOnce(std::io::Error) -> RunDirError + '_ {
    move |source| RunDirError::Lock { path: path.to_path_buf(), source }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> RunDirError + '_ {
    move |source| RunDirError::Io { path: path.to_path_buf(), source }
}

/// What `train-agent eval` writes to `eval.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalSummary {
    /// Model label (`trained`, `base`) to what it is (adapter directory or base model).
    pub models: Vec<EvalModel>,
    pub server: String,
    pub dataset: String,
    pub split: Option<String>,
    pub rollouts_per_scenario: u32,
    /// Agent settings: temperature, max_turns, max_tokens, ...
    pub settings: Value,
    /// Elapsed seconds of the whole evaluation.
    pub wall_s: f64,
    /// Per model, in the order of `models`.
    pub metrics: Vec<Metrics>,
    /// The last model against the one before it, per scenario, with the paired test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison: Option<Comparison>,
}

impl EvalSummary {
    /// The summary of an evaluation whose model `models[i]` played `trajectories[i]`; with two or
    /// more, the last is the model under test and the one before it what it is compared against
    /// (the base model, or `--baseline`).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        models: Vec<EvalModel>,
        trajectories: &[Vec<Trajectory>],
        server: String,
        dataset: String,
        split: Option<String>,
        rollouts_per_scenario: u32,
        settings: Value,
        wall_s: f64,
    ) -> EvalSummary {
        let metrics = trajectories.iter().map(|ts| Metrics::of(ts)).collect();
        let comparison = match trajectories {
            [.., base, trained] => Some(compare(base, trained)),
            _ => None,
        };
        EvalSummary { models, server, dataset, split, rollouts_per_scenario, settings, wall_s, metrics, comparison }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalModel {
    /// The name the model was requested under and the trajectories file's stem.
    pub label: String,
    /// An adapter directory or a base model spec.
    pub source: String,
}

/// Whether metrics rows are an SFT run's: losses, and no GRPO step (a trainer or reward entry).
fn is_sft(metrics: &[Value]) -> bool {
    metrics.iter().any(|r| r.get("train_loss").is_some() || r.get("eval_loss").is_some())
        && !metrics.iter().any(|r| r.get("trainer").is_some() || r.get("reward").is_some())
}

/// What kind of directory a [`RunDir`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Train,
    /// A `train-agent sft` run: loss rows in `metrics.jsonl`, no episodes.
    Sft,
    Eval,
    Rollout,
}

/// A run, evaluation or rollout directory, read.
#[derive(Debug, Clone)]
pub struct RunDir {
    pub path: PathBuf,
    pub kind: Kind,
    /// `config.toml` as JSON (training runs).
    pub config: Option<Value>,
    /// `run.json`: server, data set and command line (training runs).
    pub run_info: Option<Value>,
    /// `metrics.jsonl`, one value per line: step rows and validation rows.
    pub metrics: Vec<Value>,
    pub eval: Option<EvalSummary>,
    /// `phases.jsonl` summed by phase (training runs; empty when not recorded).
    pub phases: Vec<ta_types::phases::PhaseTotal>,
}

impl RunDir {
    pub fn open(path: &Path) -> Result<RunDir, RunDirError> {
        if !path.exists() {
            return Err(RunDirError::Missing(path.to_path_buf()));
        }
        let read_json = |name: &str| -> Result<Option<Value>, RunDirError> {
            let p = path.join(name);
            if !p.exists() {
                return Ok(None);
            }
            let text = std::fs::read_to_string(&p).map_err(io(&p))?;
            serde_json::from_str(&text).map(Some).map_err(|e| RunDirError::Parse { path: p, line: e.line(), message: e.to_string() })
        };
        let eval: Option<EvalSummary> = match read_json("eval.json")? {
            Some(v) => Some(serde_json::from_value(v).map_err(|e| RunDirError::Parse { path: path.join("eval.json"), line: 0, message: e.to_string() })?),
            None => None,
        };
        let metrics = read_metrics(&path.join("metrics.jsonl"))?;
        let config = match std::fs::read_to_string(path.join("config.toml")) {
            Ok(text) => Some(
                toml::from_str::<toml::Value>(&text)
                    .map_err(|e| RunDirError::Parse { path: path.join("config.toml"), line: 0, message: e.to_string() })
                    .map(|t| serde_json::to_value(t).expect("toml is json"))?,
            ),
            Err(_) => None,
        };
        let kind = if eval.is_some() {
            Kind::Eval
        } else if is_sft(&metrics) {
            Kind::Sft
        } else if !metrics.is_empty() || config.is_some() {
            Kind::Train
        } else if path.join("trajectories.jsonl").exists() {
            Kind::Rollout
        } else {
            return Err(RunDirError::Unknown(path.to_path_buf()));
        };
        Ok(RunDir { path: path.to_path_buf(), kind, config, run_info: read_json("run.json")?, metrics, eval, phases: ta_types::phases::totals(path) })
    }

    /// An SFT run's step rows (those with a training loss), in step order.
    pub fn sft_steps(&self) -> Vec<&Value> {
        self.metrics.iter().filter(|r| r.get("train_loss").is_some()).collect()
    }

    /// An SFT run's held-out loss: (step, loss) of the first and the last evaluation.
    pub fn sft_eval_loss(&self) -> Option<((u64, f64), (u64, f64))> {
        let evals: Vec<(u64, f64)> = self.metrics.iter().filter_map(|r| Some((r["step"].as_u64()?, r["eval_loss"].as_f64()?))).collect();
        Some((*evals.first()?, *evals.last()?))
    }

    /// Training step rows (those with a trainer or reward entry), in step order.
    pub fn step_rows(&self) -> Vec<&Value> {
        self.metrics.iter().filter(|r| r.get("trainer").is_some() || r.get("reward").is_some()).collect()
    }

    /// Rows holding validation metrics (`val_*`), in step order.
    pub fn validation_rows(&self) -> Vec<&Value> {
        self.metrics.iter().filter(|r| r.get("val_completion_rate").is_some()).collect()
    }

    /// `trajectories/step-N.jsonl` of a training run, by step.
    pub fn training_files(&self) -> Vec<(u64, PathBuf)> {
        step_files(&self.path.join("trajectories"))
    }

    /// `eval/step-N.jsonl` (validation) of a training run, by step.
    pub fn validation_files(&self) -> Vec<(u64, PathBuf)> {
        step_files(&self.path.join("eval"))
    }

    /// `eval/step-N.sampled.jsonl` (sampled validation, `rollout.eval_rollouts`), by step.
    pub fn sampled_validation_files(&self) -> Vec<(u64, PathBuf)> {
        step_files_ending(&self.path.join("eval"), ".sampled.jsonl")
    }

    /// The sampled validations of the first and the last validated step of a training run,
    /// labelled as in [`RunDir::evaluated`] (`init` or `base`, then `step N`); empty when the run
    /// did not sample or is no training run.
    pub fn evaluated_sampled(&self) -> Result<Vec<(String, Vec<Trajectory>)>, RunDirError> {
        if self.kind != Kind::Train {
            return Ok(Vec::new());
        }
        let files: Vec<(u64, PathBuf)> = self.sampled_validation_files().into_iter().filter(|(_, p)| std::fs::metadata(p).is_ok_and(|m| m.len() > 0)).collect();
        let mut out = Vec::new();
        for (i, (step, p)) in files.iter().enumerate() {
            if i == 0 || i + 1 == files.len() {
                let label = if *step == 0 { self.start_label() } else { format!("step {step}") };
                out.push((label, read_trajectories(p).map_err(io(p))?));
            }
        }
        Ok(out)
    }

    /// What step 0 validated: `base`, or `init` (--init-adapter).
    fn start_label(&self) -> String {
        self.validation_rows().iter().find(|r| r["step"] == 0).and_then(|r| r["val_model"].as_str()).unwrap_or("base").to_string()
    }

    /// `eval/base.jsonl` of a training run that started from an adapter, when it holds episodes.
    pub fn baseline_file(&self) -> Option<PathBuf> {
        let path = self.path.join(ta_types::trajectory::BASELINE_VALIDATION);
        std::fs::metadata(&path).is_ok_and(|m| m.len() > 0).then_some(path)
    }

    /// The trajectories of each evaluated model, labelled: for an evaluation its models (base
    /// first), for a training run the base model's baseline (`eval/base.jsonl`, written when
    /// training started from an adapter), the first validation (step 0: `base`, or `init` for the
    /// adapter) and the last (`step N`), for a rollout its one file.
    pub fn evaluated(&self) -> Result<Vec<(String, Vec<Trajectory>)>, RunDirError> {
        let read = |p: &Path| read_trajectories(p).map_err(io(p));
        match self.kind {
            Kind::Eval => {
                let eval = self.eval.as_ref().expect("eval dir has eval.json");
                eval.models.iter().map(|m| Ok((m.label.clone(), read(&eval_trajectories(&self.path, &m.label))?))).collect()
            }
            Kind::Rollout => Ok(vec![("rollout".into(), read(&self.path.join("trajectories.jsonl"))?)]),
            Kind::Sft => Ok(Vec::new()),
            Kind::Train => {
                // An empty file is a validation that has just started (`train` is running).
                let files: Vec<(u64, PathBuf)> = self.validation_files().into_iter().filter(|(_, p)| std::fs::metadata(p).is_ok_and(|m| m.len() > 0)).collect();
                let mut out = Vec::new();
                if let Some(baseline) = self.baseline_file() {
                    out.push(("base".to_string(), read(&baseline)?));
                }
                if let Some((0, p)) = files.first() {
                    // Step 0 is the model training started from: the base, or `init` (--init-adapter).
                    out.push((self.start_label(), read(p)?));
                }
                if let Some((step, p)) = files.last().filter(|(s, _)| *s > 0) {
                    out.push((format!("step {step}"), read(p)?));
                }
                Ok(out)
            }
        }
    }

    /// The last evaluated model against the one before it, per scenario, with the paired test:
    /// trained against what it started from (the last validation against step 0, which is the
    /// `init` adapter when training started from one; the trained adapter against the base model
    /// or `--baseline` in an evaluation). Comparing with the start, not the base model, is what
    /// says whether *this* training helped. `None` with fewer than two.
    pub fn comparison(evaluated: &[(String, Vec<Trajectory>)]) -> Option<(&str, &str, Comparison)> {
        match evaluated {
            [.., (a, base), (b, trained)] => Some((a.as_str(), b.as_str(), compare(base, trained))),
            _ => None,
        }
    }

    /// Seconds of training, from the step rows' `time.step_s` (an SFT run's: `step_s`).
    pub fn training_seconds(&self) -> f64 {
        match self.kind {
            Kind::Sft => self.sft_steps().iter().filter_map(|r| r["step_s"].as_f64()).sum(),
            _ => self.step_rows().iter().filter_map(|r| r["time"]["step_s"].as_f64()).sum(),
        }
    }

    /// GPU hours: training seconds times the GPUs in use, when the trainer reported CUDA memory.
    /// `None` for a CPU run.
    pub fn gpu_hours(&self) -> Option<f64> {
        let on_gpu = self.step_rows().iter().any(|r| r["trainer"]["peak_memory_kind"] == "cuda");
        let gpus = self.config.as_ref().and_then(|c| c["trainer"]["num_gpus"].as_u64()).unwrap_or(1).max(1);
        on_gpu.then(|| self.training_seconds() * gpus as f64 / 3600.0)
    }

    /// Judge spending in USD, added up from metrics rows (`judge_cost_usd` or `judge.cost_usd`);
    /// `None` when no row reports it.
    pub fn judge_cost_usd(&self) -> Option<f64> {
        let costs: Vec<f64> = self.metrics.iter().filter_map(|r| r["judge_cost_usd"].as_f64().or_else(|| r["judge"]["cost_usd"].as_f64())).collect();
        (!costs.is_empty()).then(|| costs.iter().sum())
    }

    /// The base model: from the run's config, or the evaluation's base entry.
    pub fn base_model(&self) -> Option<String> {
        if let Some(m) = self.config.as_ref().and_then(|c| c["base_model"].as_str()) {
            return Some(m.to_string());
        }
        self.eval.as_ref()?.models.iter().find(|m| m.label == "base").map(|m| m.source.clone())
    }
}

/// Where `eval` writes the trajectories of model `label`.
pub fn eval_trajectories(dir: &Path, label: &str) -> PathBuf {
    dir.join("trajectories").join(format!("{label}.jsonl"))
}

fn read_metrics(path: &Path) -> Result<Vec<Value>, RunDirError> {
    let Ok(text) = std::fs::read_to_string(path) else { return Ok(Vec::new()) };
    let mut rows = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(line) {
            Ok(v) => rows.push(v),
            Err(_) if i + 1 == lines.len() => break, // torn last line of a crashed run
            Err(e) => return Err(RunDirError::Parse { path: path.to_path_buf(), line: i + 1, message: e.to_string() }),
        }
    }
    Ok(rows)
}

fn step_files(dir: &Path) -> Vec<(u64, PathBuf)> {
    step_files_ending(dir, ".jsonl")
}

/// `step-N<ending>` files in `dir`, by step (`step-N.sampled.jsonl` is no `step-N.jsonl`: its
/// step does not parse).
fn step_files_ending(dir: &Path, ending: &str) -> Vec<(u64, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut out: Vec<(u64, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name();
            let step = name.to_str()?.strip_prefix("step-")?.strip_suffix(ending)?.parse().ok()?;
            Some((step, e.path()))
        })
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_output_that_is_a_file_or_a_run_that_is_not_there_is_said_plainly() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("scenarios.jsonl");
        std::fs::write(&file, "{}").unwrap();
        let err = RunLock::acquire(&file).err().unwrap();
        assert!(matches!(err, RunDirError::OutIsFile(_)), "{err}");
        assert!(err.to_string().contains("is a file") && std::fs::read_to_string(&file).unwrap() == "{}", "{err}");
        let err = RunDir::open(&dir.path().join("nowhere")).err().unwrap();
        assert!(matches!(err, RunDirError::Missing(_)) && err.to_string().contains("does not exist\nhint: point at"), "{err}");
        assert!(matches!(RunDir::open(dir.path()).err().unwrap(), RunDirError::Unknown(_)));
        // A lock file that cannot be opened for writing (here a directory in its place) is not
        // reported as a read failure.
        let out = dir.path().join("out");
        std::fs::create_dir_all(out.join(LOCK_FILE)).unwrap();
        let err = RunLock::acquire(&out).err().unwrap();
        assert!(matches!(err, RunDirError::Lock { .. }), "{err}");
        assert!(err.to_string().starts_with(&format!("cannot claim {}", out.join(LOCK_FILE).display())) && err.to_string().contains("hint: --out"), "{err}");
    }

    #[test]
    fn a_locked_directory_names_its_holder_and_a_released_or_stale_lock_does_not_block() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let first = RunLock::acquire(&out).unwrap();
        let err = RunLock::acquire(&out).unwrap_err();
        let pid = std::process::id();
        assert!(matches!(&err, RunDirError::Locked { holder, .. } if holder.pid == Some(pid)), "{err}");
        let message = err.to_string();
        assert!(message.contains(&format!("PID {pid}: ")) && message.contains(&format!("kill {pid}")) && message.contains("hint:"), "{message}");
        drop(first);
        // A lock file left behind (its process gone) holds no lock.
        let again = RunLock::acquire(&out).unwrap();
        drop(again);
        std::fs::write(out.join(LOCK_FILE), r#"{"pid": 999999999, "command": "train-agent rollout"}"#).unwrap();
        let _held = RunLock::acquire(&out).unwrap();
        let holder: LockHolder = serde_json::from_str(&std::fs::read_to_string(out.join(LOCK_FILE)).unwrap()).unwrap();
        assert_eq!(holder.pid, Some(pid));
    }
}
