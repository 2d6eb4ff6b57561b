//! The trainer's outbox: one report per trained step, `outbox/step-NNNNNN.json`, written by
//! rank 0 of `python/train_agent/trainer/` after the optimizer step and the checkpoint. GRPO
//! and SFT read it as this one type. Every key is required (null where it does not apply) and no
//! other is allowed, so a key added, renamed or dropped on one side only fails the contract test
//! (`tests/contract.rs` commits its shape, `python/tests/test_contract.py` compares a real
//! report with it) instead of reading as a silent null.

use serde::{Deserialize, Deserializer, Serialize};

/// One step's report, its keys in the order Python writes them (GRPO's `metrics.jsonl` keeps
/// the report as its row's `trainer` object). Measurements of tensors are `None` when they were
/// not finite (the trainer writes NaN and infinities as null) or do not apply.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepReport {
    pub step: u64,
    #[serde(deserialize_with = "required")]
    pub loss: Option<f64>,
    #[serde(deserialize_with = "required")]
    pub policy_loss: Option<f64>,
    /// Token mean of the k3 KL estimate; `None` when `beta` is 0 and for SFT.
    #[serde(deserialize_with = "required")]
    pub kl: Option<f64>,
    #[serde(deserialize_with = "required")]
    pub entropy: Option<f64>,
    #[serde(deserialize_with = "required")]
    pub clip_fraction_low: Option<f64>,
    #[serde(deserialize_with = "required")]
    pub clip_fraction_high: Option<f64>,
    /// `None` for SFT.
    #[serde(deserialize_with = "required")]
    pub ratio_mean: Option<f64>,
    /// Token mean of the truncated importance weights, and the share of tokens the cap cut;
    /// `None` for an on-policy step (the step file's `policy_lag` 0) and for SFT.
    #[serde(deserialize_with = "required")]
    pub importance_weight_mean: Option<f64>,
    #[serde(deserialize_with = "required")]
    pub importance_truncated: Option<f64>,
    /// Before clipping; `None` when not finite, and then `skipped_nonfinite_grad` is true.
    #[serde(deserialize_with = "required")]
    pub grad_norm: Option<f64>,
    pub skipped_nonfinite_grad: bool,
    /// The learning rate this step used.
    pub lr: f64,
    pub samples: u64,
    /// Real input tokens.
    pub tokens: u64,
    pub trained_tokens: u64,
    /// Per rank.
    pub micro_batches: u64,
    pub tokens_per_s: f64,
    /// Idle, waiting for the step file.
    pub wait_s: f64,
    pub data_s: f64,
    pub forward_backward_s: f64,
    pub optimizer_s: f64,
    pub save_s: f64,
    /// All of the step but `wait_s`.
    pub step_s: f64,
    pub peak_memory_gb: f64,
    /// `cuda` (allocated) or `cpu_rss`.
    pub peak_memory_kind: String,
    /// The checkpoint directory; `None` when the step file asked for none.
    #[serde(deserialize_with = "required")]
    pub checkpoint: Option<String>,
    /// The held-out loss after the update, when the step file asked for it (SFT).
    #[serde(deserialize_with = "required")]
    pub eval_loss: Option<f64>,
    /// The held-out loss before the update, when the step file asked for it (SFT's step 1).
    #[serde(deserialize_with = "required")]
    pub eval_loss_before: Option<f64>,
    #[serde(deserialize_with = "required")]
    pub eval_tokens: Option<u64>,
}

/// A key that must be present, null or not (serde would read a missing `Option` as `None`).
fn required<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    Option::deserialize(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_is_required_and_no_other_allowed() {
        let full = serde_json::to_value(StepReport::default()).unwrap();
        assert_eq!(serde_json::from_value::<StepReport>(full.clone()).unwrap(), StepReport::default());
        for key in ["kl", "eval_tokens", "lr"] {
            let mut missing = full.clone();
            missing.as_object_mut().unwrap().remove(key);
            let err = serde_json::from_value::<StepReport>(missing).unwrap_err().to_string();
            assert!(err.contains(&format!("missing field `{key}`")), "{key}: {err}");
        }
        let mut extra = full;
        extra["new_metric"] = 1.into();
        assert!(serde_json::from_value::<StepReport>(extra).unwrap_err().to_string().contains("unknown field `new_metric`"));
    }
}
