//! The trainer's inbox (see `python/train_agent/trainer/batches.py`): one file per optimizer step,
//! `inbox/step-NNNNNN.json`, which GRPO and SFT send alike, and the validation metrics measured
//! at a step, `inbox/validation-NNNNNN.json`. This module is the only writer of both.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::samples::Sample;
use serde::{Deserialize, Serialize};

/// One optimizer step's data.
#[derive(Debug, Clone, Serialize)]
pub struct StepFile {
    pub step: u64,
    pub samples: Vec<Sample>,
    /// The step's rollout metrics (GRPO): the trainer logs them beside its own, so one
    /// TensorBoard / W&B run holds both.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollout: Option<serde_json::Value>,
    /// `Some(false)` asks the trainer not to checkpoint this step (SFT saves every `save_every`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<bool>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub eval: Option<EvalRequest>,
    /// How many updates the policy that drew the oldest of the samples is behind the trainer's:
    /// 0 on-policy (today's clipped loss against the sampler's logprobs), more with asynchronous
    /// GRPO (the off-policy loss with truncated importance weights).
    #[serde(skip_serializing_if = "ta_types::is_zero")]
    pub policy_lag: u64,
}

/// Held-out samples whose token-mean loss the trainer reports (SFT's eval loss).
#[derive(Debug, Clone, Serialize)]
pub struct EvalRequest {
    pub eval_samples: Vec<Sample>,
    /// Before the update (`eval_loss_before`).
    pub eval_before: bool,
    /// After the update (`eval_loss`).
    pub eval_after: bool,
}

impl StepFile {
    pub fn new(step: u64, samples: Vec<Sample>) -> StepFile {
        StepFile { step, samples, rollout: None, checkpoint: None, eval: None, policy_lag: 0 }
    }

    /// Tokens of the step's samples.
    pub fn tokens(&self) -> usize {
        self.samples.iter().map(|s| s.input_ids.len()).sum()
    }

    /// Writes `inbox/step-NNNNNN.json` (see [`write_atomic`]).
    pub fn write(&self, inbox: &Path) -> std::io::Result<PathBuf> {
        write_atomic(inbox, "step", self.step, self)
    }
}

/// The validation metrics measured at `step` (step 0: before training), for the trainer's
/// loggers: it logs them as `validation/<name>` at that step, so TensorBoard and W&B show them
/// beside the rollout and trainer metrics of the same run (`metrics.jsonl` holds them too).
///
/// A file of its own rather than a field of the next step file: validation runs after its
/// step's file was sent, the final one has no next step at all, and a resumed run would have to
/// rebuild what an interrupted one never sent. Rust writes it before `stop`, and the trainer logs
/// every one it has not logged yet after each step and when it stops, so none is lost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValidationFile {
    pub step: u64,
    /// The finite numbers of the validation row (`val_success`, `val_ground_truth`, ...).
    pub metrics: BTreeMap<String, f64>,
}

impl ValidationFile {
    /// The numbers of a `metrics.jsonl` validation row (its model name and nulls are left out).
    pub fn new(step: u64, row: &serde_json::Value) -> ValidationFile {
        let numbers = row.as_object().into_iter().flatten().filter(|(k, _)| *k != "step");
        let metrics = numbers.filter_map(|(k, v)| Some((k.clone(), v.as_f64().filter(|x| x.is_finite())?))).collect();
        ValidationFile { step, metrics }
    }

    /// Writes `inbox/validation-NNNNNN.json` (see [`write_atomic`]).
    pub fn write(&self, inbox: &Path) -> std::io::Result<PathBuf> {
        write_atomic(inbox, "validation", self.step, self)
    }
}

/// Writes `inbox/{kind}-NNNNNN.json` atomically ([`ta_types::atomic::write_atomic`]: its temporary
/// name does not end in `.json`, so the trainer ignores it), so the trainer never reads half a file.
fn write_atomic(inbox: &Path, kind: &str, step: u64, value: &impl Serialize) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(inbox)?;
    let path = inbox.join(format!("{kind}-{step:06}.json"));
    ta_types::atomic::write_atomic(&path, |w| serde_json::to_writer(w, value).map_err(std::io::Error::other))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Sample {
        Sample { input_ids: vec![1, 2], loss_mask: vec![0, 1], logprobs: vec![0.0, -0.5], advantage: 1.0, group_id: 0 }
    }

    #[test]
    fn the_write_is_atomic_and_named_by_step() {
        let dir = tempfile::tempdir().unwrap();
        let p = StepFile::new(42, vec![sample()]).write(dir.path()).unwrap();
        assert_eq!(p.file_name().unwrap(), "step-000042.json");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 1, "no temporary file left behind");
        assert_eq!(StepFile::new(42, vec![sample()]).tokens(), 2);
        let back: serde_json::Value = serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
        assert_eq!(
            back,
            serde_json::json!({"step": 42, "samples": [{"input_ids": [1, 2], "loss_mask": [0, 1], "logprobs": [0.0, -0.5], "advantage": 1.0, "group_id": 0}]})
        );
    }

    #[test]
    fn validation_files_keep_the_numbers_of_the_row() {
        let dir = tempfile::tempdir().unwrap();
        let row = serde_json::json!({"step": 3, "val_success": 0.5, "val_trajectories": 4, "val_model": "step-3", "val_judge": null});
        let file = ValidationFile::new(3, &row);
        let p = file.write(dir.path()).unwrap();
        assert_eq!(p.file_name().unwrap(), "validation-000003.json");
        let back: ValidationFile = serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
        assert_eq!(back, file);
        assert_eq!(back.metrics, BTreeMap::from([("val_success".to_string(), 0.5), ("val_trajectories".to_string(), 4.0)]));
    }

    #[test]
    fn optional_parts_appear_only_when_asked_for() {
        let mut f = StepFile::new(1, vec![]);
        f.checkpoint = Some(false);
        f.eval = Some(EvalRequest { eval_samples: vec![sample()], eval_before: true, eval_after: false });
        let v = serde_json::to_value(&f).unwrap();
        assert_eq!((v["checkpoint"].as_bool(), v["eval_before"].as_bool(), v["eval_after"].as_bool()), (Some(false), Some(true), Some(false)));
        assert_eq!(v["eval_samples"].as_array().unwrap().len(), 1);
        assert!(v.get("rollout").is_none());
        assert!(v.get("policy_lag").is_none(), "an on-policy step file is what it was before asynchronous GRPO");
        f.policy_lag = 1;
        assert_eq!(serde_json::to_value(&f).unwrap()["policy_lag"], 1);
    }
}
