//! `final.json`: which adapter a finished GRPO run kept as `final/` and how it and the last step
//! validated. `ta_train::keep` chooses and writes it; the report and scripts read it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// `final.json` in the run directory.
pub const RECORD: &str = "final.json";

/// Which adapter a finished run keeps as `final/` (`[rollout] final_adapter`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum FinalAdapter {
    /// The validated adapter with the highest greedy validation success (then sampled pass@1,
    /// then ground truth, then the later step), the start adapter (step 0) included.
    Best,
    /// The last step's, however it validated.
    Last,
}

/// One validation of an adapter, as `metrics.jsonl` holds it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Validated {
    pub step: u64,
    /// Greedy task success.
    pub success: f64,
    /// Sampled pass@1, with `eval_rollouts` > 0.
    pub pass1: Option<f64>,
    pub ground_truth: Option<f64>,
}

/// What `final/` holds and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Kept {
    pub rule: FinalAdapter,
    /// The step whose adapter `final/` holds (0: the start adapter).
    pub step: u64,
    /// Where it was copied from.
    pub source: PathBuf,
    pub validation: Option<Validated>,
    pub last_step: u64,
    pub last_validation: Option<Validated>,
}

impl Kept {
    /// The record of the run in `dir`, if it finished with one.
    pub fn read(dir: &Path) -> Option<Kept> {
        serde_json::from_slice(&std::fs::read(dir.join(RECORD)).ok()?).ok()
    }

    /// What `final/` is, in a few words (the run's line and the report's row).
    pub fn summary(&self) -> String {
        let pct = |v: Option<Validated>| v.map_or("not validated".to_string(), |v| format!("{:.1}% validation success", 100.0 * v.success));
        if self.step == self.last_step {
            return format!("the adapter of step {} (the last; {})", self.step, pct(self.validation));
        }
        let which = if self.step == 0 { "the start adapter (step 0)".to_string() } else { format!("the adapter of step {}", self.step) };
        format!("{which}, the best validated ({}; the last step, {}: {})", pct(self.validation), self.last_step, pct(self.last_validation))
    }

    /// The line the run prints about `final/`.
    pub fn line(&self) -> String {
        let line = format!("final/: {}", self.summary());
        if self.step == self.last_step {
            return line;
        }
        format!("{line}\nhint: the last step's adapter is in checkpoints/; --keep-last keeps it as final/")
    }
}
