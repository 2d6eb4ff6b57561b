//! The rows of `metrics.jsonl`, typed: one owner of their keys and their order, which the report,
//! `stats`, the CSV beside the file and scripts read. A step's row is its rollout metrics, the
//! trainer's report, the timings, then the validation (when the step validated) and the judge's
//! cost (when there is a judge); a validation row outside a step (before the first step, after
//! the last) is its step, the validation and the judge's cost.

use std::path::Path;

use serde::Serialize;
use ta_reward::{JudgeStats, Rewarder};
use ta_trainer::{StepReport, metrics};
use ta_types::Trajectory;

use crate::error::{RunError, io};

/// One training step's row.
#[derive(Debug, Clone, Serialize)]
pub struct StepRow {
    #[serde(flatten)]
    pub rollout: RolloutMetrics,
    pub trainer: TrainerMetrics,
    pub time: StepTimes,
    #[serde(flatten)]
    pub validation: Option<ValidationMetrics>,
    #[serde(flatten)]
    pub judge: Option<JudgeMetrics>,
}

/// What a step's episodes and its batch measured (also handed to the trainer in the step file,
/// with the rollout and reward times, so TensorBoard and W&B show them beside its own).
#[derive(Debug, Clone, Serialize)]
pub struct RolloutMetrics {
    pub step: u64,
    pub epoch: u64,
    pub reward: Option<f64>,
    pub reward_std: Option<f64>,
    pub completion_rate: f64,
    pub ground_truth: Option<f64>,
    pub rules: Option<f64>,
    pub judge: Option<f64>,
    /// Mean of each custom reward over the trajectories that have it, by name.
    pub custom: std::collections::BTreeMap<String, f64>,
    pub mean_turns: f64,
    pub mean_tool_calls: f64,
    pub tool_errors: u64,
    pub groups: usize,
    pub groups_zero_variance: usize,
    /// Groups whose episodes all had one ground truth, told apart by the rules' tie-break alone:
    /// trained only to fill the places the groups that tell right from wrong leave.
    pub groups_tie_break: usize,
    pub groups_kept: usize,
    pub sampling_rounds: u32,
    /// What a step without dynamic sampling would have trained: its first round's flat share.
    pub flat_share_before: f64,
    /// The step's group slots left without signal once dynamic sampling is done.
    pub flat_share_after: f64,
    pub curriculum_retired: usize,
    pub curriculum_unsolved: usize,
    pub samples: usize,
    pub sample_tokens: usize,
    pub completion_tokens: u64,
    /// Steps between the adapter that played the step and the one it trains (1: played ahead,
    /// asynchronous GRPO).
    pub policy_lag: u64,
}

/// The step file's `rollout`: [`RolloutMetrics`] and the times known before the trainer runs.
#[derive(Serialize)]
struct StepFileRollout<'a> {
    #[serde(flatten)]
    metrics: &'a RolloutMetrics,
    rollout_s: f64,
    reward_s: f64,
}

impl RolloutMetrics {
    /// What the step file carries to the trainer.
    pub(crate) fn for_trainer(&self, rollout_s: f64, reward_s: f64) -> serde_json::Value {
        json_of(&StepFileRollout { metrics: self, rollout_s, reward_s })
    }
}

/// The trainer's report of the step, or why no trainer step ran.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum TrainerMetrics {
    Trained(Box<StepReport>),
    Skipped { skipped: &'static str },
}

impl TrainerMetrics {
    /// Every group had equal rewards: nothing to learn.
    pub const FLAT: TrainerMetrics = TrainerMetrics::Skipped { skipped: "every group had equal rewards" };

    fn report(&self) -> Option<&StepReport> {
        match self {
            TrainerMetrics::Trained(r) => Some(r.as_ref()),
            TrainerMetrics::Skipped { .. } => None,
        }
    }
}

/// Where a step's time went, in seconds.
#[derive(Debug, Clone, Default, Serialize)]
pub struct StepTimes {
    pub rollout_s: f64,
    pub reward_s: f64,
    pub train_s: f64,
    pub reload_s: f64,
    /// The whole step, validation included.
    pub step_s: f64,
}

/// A validation row outside a step: before the first step (step 0) and after the last.
#[derive(Debug, Clone, Serialize)]
pub struct ValidationRow {
    pub step: u64,
    #[serde(flatten)]
    pub validation: ValidationMetrics,
    #[serde(flatten)]
    pub judge: Option<JudgeMetrics>,
}

/// What a validation measured (`crate::validation`).
#[derive(Debug, Clone, Serialize)]
pub struct ValidationMetrics {
    pub val_completion_rate: f64,
    pub val_reward: Option<f64>,
    pub val_ground_truth: Option<f64>,
    pub val_judge: Option<f64>,
    pub val_success: Option<f64>,
    /// The success rate's Wilson interval.
    pub val_success_low: Option<f64>,
    pub val_success_high: Option<f64>,
    pub val_mean_turns: f64,
    pub val_trajectories: usize,
    pub val_model: String,
    /// With `eval_rollouts` > 0.
    #[serde(flatten)]
    pub sampled: Option<SampledMetrics>,
}

/// Pass@1 and pass@k of the sampled validation episodes, with 95% intervals.
#[derive(Debug, Clone, Serialize)]
pub struct SampledMetrics {
    pub val_sampled_k: usize,
    pub val_pass1: f64,
    pub val_pass1_low: f64,
    pub val_pass1_high: f64,
    pub val_pass_k: f64,
    pub val_pass_k_low: f64,
    pub val_pass_k_high: f64,
}

/// The judge's work since the previous row, and its cost so far (read back on `--resume`).
#[derive(Debug, Clone, Serialize)]
pub struct JudgeMetrics {
    pub judge_groups: u64,
    pub judge_groups_skipped: u64,
    pub judge_cache_hits: u64,
    pub judge_calls: u64,
    pub judge_input_tokens: u64,
    pub judge_output_tokens: u64,
    pub judge_cost_usd: f64,
    pub judge_cost_total_usd: f64,
}

impl JudgeMetrics {
    /// The judge's metrics since `last` (then moved to now); `None` without a judge.
    pub(crate) fn since(rewarder: &Rewarder, last: &mut JudgeStats) -> Option<JudgeMetrics> {
        let judge = rewarder.judge()?;
        let now = judge.stats();
        let d = now.since(last);
        *last = now;
        Some(JudgeMetrics {
            judge_groups: d.groups,
            judge_groups_skipped: d.skipped,
            judge_cache_hits: d.cache_hits,
            judge_calls: d.calls,
            judge_input_tokens: d.usage.input_tokens,
            judge_output_tokens: d.usage.output_tokens,
            judge_cost_usd: d.cost_usd,
            judge_cost_total_usd: now.cost_usd,
        })
    }
}

impl ValidationMetrics {
    /// The line printed after a validation; `what` names the model.
    pub fn line(&self, what: &str) -> String {
        let mut line = format!("validation {what}: completion {:.1}%, ground truth {}", 100.0 * self.val_completion_rate, fmt_opt(self.val_ground_truth));
        if let Some(p) = &self.sampled {
            let pct = |x: f64| 100.0 * x;
            line.push_str(&format!(
                "; sampled pass@1 {:.1}% [{:.1}, {:.1}], pass@{} {:.1}% [{:.1}, {:.1}]",
                pct(p.val_pass1),
                pct(p.val_pass1_low),
                pct(p.val_pass1_high),
                p.val_sampled_k,
                pct(p.val_pass_k),
                pct(p.val_pass_k_low),
                pct(p.val_pass_k_high)
            ));
        }
        line
    }
}

impl StepRow {
    /// The compact line printed after each step.
    pub fn line(&self) -> String {
        let r = &self.rollout;
        let trainer = |f: fn(&StepReport) -> Option<f64>| fmt_opt(self.trainer.report().and_then(f));
        let judge = match &self.judge {
            Some(j) => format!("  judge {} (${:.4}, total ${:.4}, {} skipped)", fmt_opt(r.judge), j.judge_cost_usd, j.judge_cost_total_usd, j.judge_groups_skipped),
            None => String::new(),
        };
        // The step number unpadded, as it always printed.
        format!(
            "step {}  reward {}  completion {}  groups {}/{} flat  loss {}  grad {}  kl {}{judge}  {:.1}s",
            r.step,
            fmt_opt(r.reward),
            fmt_opt(Some(r.completion_rate)),
            r.groups_zero_variance,
            r.groups,
            trainer(|t| t.loss),
            trainer(|t| t.grad_norm),
            trainer(|t| t.kl),
            self.time.step_s,
        )
    }
}

/// Appends `row` to `metrics.jsonl` (and its CSV).
pub(crate) fn append(path: &Path, row: &impl Serialize) -> Result<(), RunError> {
    metrics::append(path, &json_of(row)).map_err(io(path))
}

/// A row as JSON (non-finite numbers become null, as they always were).
pub(crate) fn json_of(row: &impl Serialize) -> serde_json::Value {
    serde_json::to_value(row).expect("metrics rows have string keys and plain values")
}

pub(crate) fn mean(xs: impl Iterator<Item = f64>) -> Option<f64> {
    let v: Vec<f64> = xs.collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

pub(crate) fn std_dev(xs: impl Iterator<Item = f64>) -> Option<f64> {
    let v: Vec<f64> = xs.collect();
    let m = mean(v.iter().copied())?;
    Some((v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / v.len() as f64).sqrt())
}

/// Mean of each custom reward over the trajectories that have it.
pub(crate) fn custom_means(trajectories: &[Trajectory]) -> std::collections::BTreeMap<String, f64> {
    let mut sums: std::collections::BTreeMap<&str, (f64, usize)> = std::collections::BTreeMap::new();
    for (name, x) in trajectories.iter().flat_map(|t| t.reward_parts.custom.iter()) {
        let e = sums.entry(name).or_default();
        (e.0, e.1) = (e.0 + x, e.1 + 1);
    }
    sums.into_iter().map(|(k, (s, n))| (k.to_string(), s / n as f64)).collect()
}

fn fmt_opt(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{v:.3}"))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A step's rollout metrics with every field set (also the other modules' tests').
    pub(crate) fn rollout(step: u64) -> RolloutMetrics {
        RolloutMetrics {
            step,
            epoch: 0,
            reward: Some(0.5),
            reward_std: None,
            completion_rate: 1.0,
            ground_truth: None,
            rules: None,
            judge: Some(0.4),
            custom: [("len".to_string(), 0.25)].into(),
            mean_turns: 2.0,
            mean_tool_calls: 1.0,
            tool_errors: 0,
            groups: 2,
            groups_zero_variance: 1,
            groups_tie_break: 0,
            groups_kept: 1,
            sampling_rounds: 1,
            flat_share_before: 0.5,
            flat_share_after: 0.5,
            curriculum_retired: 0,
            curriculum_unsolved: 0,
            samples: 4,
            sample_tokens: 100,
            completion_tokens: 40,
            policy_lag: 1,
        }
    }

    fn validation(sampled: bool) -> ValidationMetrics {
        ValidationMetrics {
            val_completion_rate: 1.0,
            val_reward: Some(1.0),
            val_ground_truth: Some(1.0),
            val_judge: None,
            val_success: Some(1.0),
            val_success_low: Some(0.5),
            val_success_high: Some(1.0),
            val_mean_turns: 2.0,
            val_trajectories: 3,
            val_model: "step-000001".into(),
            sampled: sampled.then_some(SampledMetrics {
                val_sampled_k: 4,
                val_pass1: 0.5,
                val_pass1_low: 0.25,
                val_pass1_high: 0.75,
                val_pass_k: 1.0,
                val_pass_k_low: 1.0,
                val_pass_k_high: 1.0,
            }),
        }
    }

    fn judge() -> JudgeMetrics {
        JudgeMetrics {
            judge_groups: 2,
            judge_groups_skipped: 1,
            judge_cache_hits: 0,
            judge_calls: 1,
            judge_input_tokens: 10,
            judge_output_tokens: 5,
            judge_cost_usd: 0.01,
            judge_cost_total_usd: 0.03,
        }
    }

    fn keys(row: &impl Serialize) -> Vec<String> {
        json_of(row).as_object().unwrap().keys().cloned().collect()
    }

    const ROLLOUT_KEYS: &str = "step epoch reward reward_std completion_rate ground_truth rules judge custom mean_turns mean_tool_calls tool_errors groups \
         groups_zero_variance groups_tie_break groups_kept sampling_rounds flat_share_before flat_share_after curriculum_retired curriculum_unsolved samples sample_tokens \
         completion_tokens policy_lag";
    const VALIDATION_KEYS: &str = "val_completion_rate val_reward val_ground_truth val_judge val_success val_success_low val_success_high val_mean_turns \
         val_trajectories val_model";
    const SAMPLED_KEYS: &str = "val_sampled_k val_pass1 val_pass1_low val_pass1_high val_pass_k val_pass_k_low val_pass_k_high";
    const JUDGE_KEYS: &str = "judge_groups judge_groups_skipped judge_cache_hits judge_calls judge_input_tokens judge_output_tokens judge_cost_usd judge_cost_total_usd";

    fn words(parts: &[&str]) -> Vec<String> {
        parts.iter().flat_map(|p| p.split_whitespace()).map(String::from).collect()
    }

    /// metrics.jsonl keeps the keys, and their order, it had when the rows were built as JSON.
    #[test]
    fn rows_keep_their_keys_in_order() {
        let mut row = StepRow { rollout: rollout(1), trainer: TrainerMetrics::FLAT, time: StepTimes::default(), validation: None, judge: None };
        assert_eq!(keys(&row), words(&[ROLLOUT_KEYS, "trainer time"]));
        let j = json_of(&row);
        assert_eq!(j["trainer"], serde_json::json!({"skipped": "every group had equal rewards"}));
        assert_eq!(j["time"].as_object().unwrap().keys().collect::<Vec<_>>(), ["rollout_s", "reward_s", "train_s", "reload_s", "step_s"]);
        assert_eq!(j["custom"], serde_json::json!({"len": 0.25}));
        (row.validation, row.judge) = (Some(validation(true)), Some(judge()));
        assert_eq!(keys(&row), words(&[ROLLOUT_KEYS, "trainer time", VALIDATION_KEYS, SAMPLED_KEYS, JUDGE_KEYS]));
        row.trainer = TrainerMetrics::Trained(Box::default());
        assert_eq!(json_of(&row)["trainer"], json_of(&StepReport::default()));

        let v = ValidationRow { step: 0, validation: validation(false), judge: None };
        assert_eq!(keys(&v), words(&["step", VALIDATION_KEYS]));
        let v = ValidationRow { step: 0, validation: validation(true), judge: Some(judge()) };
        assert_eq!(keys(&v), words(&["step", VALIDATION_KEYS, SAMPLED_KEYS, JUDGE_KEYS]));
        assert_eq!(keys(&StepFileRollout { metrics: &rollout(1), rollout_s: 1.0, reward_s: 2.0 }), words(&[ROLLOUT_KEYS, "rollout_s reward_s"]));
    }

    #[test]
    fn step_lines_show_judge_cost_when_there_is_a_judge() {
        let mut row =
            StepRow { rollout: rollout(3), trainer: TrainerMetrics::FLAT, time: StepTimes { step_s: 2.0, ..StepTimes::default() }, validation: None, judge: None };
        assert!(!row.line().contains("judge"), "{}", row.line());
        row.judge = Some(judge());
        let line = row.line();
        assert!(line.contains("judge 0.400 ($0.0100, total $0.0300, 1 skipped)"), "{line}");
        assert!(line.starts_with("step 3  reward 0.500"), "{line}");
    }
}
