//! Where a run's wall time goes, by phase: the engine's and the trainer's start, each
//! validation, and each step's rollout, scoring, training and adapter reload. Every phase is
//! appended to `phases.jsonl` as it ends, so an interrupted and resumed run keeps what each
//! attempt spent; [`totals`] sums them for the report and `fit`'s table. Written by `ta-train`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};

/// The run directory's phase log.
pub const PHASES_FILE: &str = "phases.jsonl";

/// Starting the embedded engine (the model's weights, CUDA graphs).
pub const ENGINE_START: &str = "engine start-up";
/// Starting the trainer and loading the adapter the run continues from.
pub const TRAINER_START: &str = "trainer start-up";
pub const ROLLOUT: &str = "GRPO rollout";
pub const SCORE: &str = "GRPO score";
pub const TRAIN: &str = "GRPO train";
/// Asynchronous GRPO: a step's training with the next step's rollout and scoring beside it.
pub const TRAIN_AND_NEXT_ROLLOUT: &str = "GRPO train + next rollout";
pub const RELOAD: &str = "GRPO reload";

/// Validating the base model and the starting adapter together, in the same engine batches.
pub const BASE_AND_START_VALIDATION: &str = "validation of the base model and at step 0";

/// The phase of validating the base model, or the adapter at `step`.
pub fn validation(step: Option<u64>) -> String {
    match step {
        None => "validation of the base model".into(),
        Some(s) => format!("validation at step {s}"),
    }
}

/// One phase as it ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Phase {
    pub phase: String,
    pub seconds: f64,
}

/// A phase's total over the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseTotal {
    pub phase: String,
    pub seconds: f64,
    /// How many times it ran (steps, for the GRPO phases; attempts, for the start-ups).
    pub count: usize,
}

impl PhaseTotal {
    /// " (16 times)" after a phase that ran more than once, else nothing.
    pub fn times(&self) -> String {
        if self.count > 1 { format!(" ({} times)", self.count) } else { String::new() }
    }
}

/// Appends phases to a run's `phases.jsonl`.
#[derive(Debug, Clone)]
pub struct PhaseLog {
    path: PathBuf,
}

impl PhaseLog {
    pub fn new(run_dir: &Path) -> PhaseLog {
        PhaseLog { path: run_dir.join(PHASES_FILE) }
    }

    /// Records `phase`, which took `seconds`. A failure to write is logged, never fatal: the
    /// accounting must not stop a run.
    pub fn record(&self, phase: &str, seconds: f64) {
        let line = serde_json::to_string(&Phase { phase: phase.to_string(), seconds }).unwrap_or_default();
        let written = std::fs::OpenOptions::new().create(true).append(true).open(&self.path).and_then(|mut f| writeln!(f, "{line}"));
        if let Err(e) = written {
            tracing::warn!("cannot record the phase `{phase}` in {}: {e}", self.path.display());
        }
    }

    /// Records `phase` from `since` to now.
    pub fn since(&self, phase: &str, since: Instant) {
        self.record(phase, since.elapsed().as_secs_f64());
    }
}

/// The phases of the run in `run_dir`, summed by name in the order they first ran (empty when
/// none was recorded).
pub fn totals(run_dir: &Path) -> Vec<PhaseTotal> {
    let text = std::fs::read_to_string(run_dir.join(PHASES_FILE)).unwrap_or_default();
    let mut totals: Vec<PhaseTotal> = Vec::new();
    for p in text.lines().filter_map(|l| serde_json::from_str::<Phase>(l).ok()) {
        match totals.iter_mut().find(|t| t.phase == p.phase) {
            Some(t) => {
                t.seconds += p.seconds;
                t.count += 1;
            }
            None => totals.push(PhaseTotal { phase: p.phase, seconds: p.seconds, count: 1 }),
        }
    }
    totals
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_are_summed_by_name_in_the_order_they_first_ran() {
        let dir = tempfile::tempdir().unwrap();
        assert!(totals(dir.path()).is_empty());
        let log = PhaseLog::new(dir.path());
        for (phase, s) in [(ENGINE_START, 30.0), (TRAINER_START, 5.0), (ROLLOUT, 10.0), (TRAIN, 3.0), (ROLLOUT, 12.0), (TRAIN, 2.5)] {
            log.record(phase, s);
        }
        log.record(&validation(Some(2)), 40.0);
        // A resumed attempt starts again.
        log.record(ENGINE_START, 28.0);
        std::fs::OpenOptions::new().append(true).open(dir.path().join(PHASES_FILE)).unwrap().write_all(b"{\"phase\": \"torn").unwrap();
        let t = totals(dir.path());
        let named: Vec<(&str, f64, usize)> = t.iter().map(|p| (p.phase.as_str(), p.seconds, p.count)).collect();
        assert_eq!(
            named,
            [(ENGINE_START, 58.0, 2), (TRAINER_START, 5.0, 1), (ROLLOUT, 22.0, 2), (TRAIN, 5.5, 2), ("validation at step 2", 40.0, 1)],
            "a torn last line (a kill mid-write) is skipped"
        );
        assert_eq!(validation(None), "validation of the base model");
        assert_eq!((t[0].times(), t[1].times()), (" (2 times)".to_string(), String::new()));
    }
}
