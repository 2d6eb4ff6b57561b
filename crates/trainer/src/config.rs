//! The JSON config the trainer process reads (`trainer/config.json`, see
//! `python/train_agent/trainer/`). Every key the trainer knows is sent, so the trainer keeps no
//! defaults of its own and a value is decided in one place: here or in [`crate::settings`].
//! The Python side refuses a missing or an unknown key, and the contract test
//! (`crates/trainer/tests/contract.rs`) has it load what this module writes.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::settings::{Aggregation, LoraSettings, LossSettings, OptimSettings, Packing, TrainerSettings};

/// AdamW's moment decays and epsilon: PyTorch's defaults, not a user setting.
const BETAS: [f64; 2] = [0.9, 0.999];
const EPS: f64 = 1e-8;
/// The temperature of the trainer's logprobs. The engine reports raw logprobs (of
/// `softmax(logits)`, its default `logprobs_mode`), whatever the sampling temperature, so the
/// trainer's must be of the same distribution: 1. Only an engine in `processed_logprobs` mode
/// would call for the rollouts' temperature here.
const LOGPROBS_TEMPERATURE: f64 = 1.0;
/// How often an idle trainer looks at its inbox, in seconds.
const POLL_INTERVAL_S: f64 = 0.05;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TrainerConfig {
    pub model: String,
    pub output_dir: PathBuf,
    pub lora: LoraConfig,
    pub optim: OptimConfig,
    pub loss: LossConfig,
    pub micro_batch_tokens: u64,
    pub gradient_checkpointing: bool,
    pub packing: Packing,
    pub precision: String,
    pub strategy: String,
    /// Lightning's accelerator; `auto` picks the GPU when there is one.
    pub accelerator: String,
    pub devices: serde_json::Value,
    pub num_nodes: u32,
    pub loggers: Loggers,
    pub seed: u64,
    /// A checkpoint directory holding `trainer_state.pt` to continue from.
    pub resume_from: Option<PathBuf>,
    pub poll_interval_s: f64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LoraConfig {
    #[serde(flatten)]
    pub settings: LoraSettings,
    /// A PEFT adapter to start from instead of a fresh one.
    pub init_adapter: Option<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct OptimConfig {
    #[serde(flatten)]
    pub settings: OptimSettings,
    pub betas: [f64; 2],
    pub eps: f64,
    /// Steps of the whole run: the cosine schedule ends there.
    pub total_steps: u64,
    /// The cosine schedule decays to `lr * min_lr_ratio`.
    pub min_lr_ratio: f64,
}

/// Which loss the trainer computes. `Deserialize` only lends its names to
/// [`crate::settings::allowed_values`]: the trainer reads this, Rust only writes it.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LossKind {
    Grpo,
    Sft,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LossConfig {
    pub kind: LossKind,
    pub epsilon_low: f64,
    pub epsilon_high: f64,
    pub beta: f64,
    pub aggregation: Aggregation,
    /// Dr. GRPO's constant (the generation budget), used by `seq-mean-token-sum-norm`.
    pub max_len_norm: Option<u64>,
    /// Logits are divided by this before the softmax ([`LOGPROBS_TEMPERATURE`]).
    pub temperature: f64,
    /// The truncation of importance weights of samples an older policy drew (`LossSettings`).
    pub importance_cap: f64,
}

impl LossConfig {
    /// GRPO's clipped policy loss; `max_len_norm` is the episode's token budget.
    pub fn grpo(loss: &LossSettings, max_len_norm: u64) -> LossConfig {
        LossConfig {
            kind: LossKind::Grpo,
            epsilon_low: loss.epsilon_low,
            epsilon_high: loss.epsilon_high,
            beta: loss.beta,
            aggregation: loss.aggregation,
            max_len_norm: Some(max_len_norm),
            temperature: LOGPROBS_TEMPERATURE,
            importance_cap: loss.importance_cap,
        }
    }

    /// Cross-entropy on the masked tokens, a mean over them; the clip and KL settings are unused.
    pub fn sft() -> LossConfig {
        let d = LossSettings::default();
        LossConfig {
            kind: LossKind::Sft,
            epsilon_low: d.epsilon_low,
            epsilon_high: d.epsilon_high,
            beta: 0.0,
            aggregation: Aggregation::TokenMean,
            max_len_norm: None,
            temperature: LOGPROBS_TEMPERATURE,
            importance_cap: d.importance_cap,
        }
    }
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Loggers {
    pub csv: bool,
    pub tensorboard: bool,
    pub wandb_project: Option<String>,
}

/// What a run decides about its trainer beyond the settings tables.
#[derive(Debug, Clone)]
pub struct RunSpec {
    pub model: String,
    pub output_dir: PathBuf,
    pub seed: u64,
    pub init_adapter: Option<String>,
    pub total_steps: u64,
    pub resume_from: Option<PathBuf>,
}

impl TrainerConfig {
    pub fn new(run: RunSpec, lora: &LoraSettings, optim: &OptimSettings, loss: LossConfig, trainer: &TrainerSettings) -> TrainerConfig {
        TrainerConfig {
            model: run.model,
            output_dir: run.output_dir,
            lora: LoraConfig { settings: lora.clone(), init_adapter: run.init_adapter },
            optim: OptimConfig { settings: optim.clone(), betas: BETAS, eps: EPS, total_steps: run.total_steps.max(1), min_lr_ratio: 0.0 },
            loss,
            micro_batch_tokens: trainer.micro_batch_tokens,
            gradient_checkpointing: trainer.gradient_checkpointing,
            packing: trainer.packing,
            precision: trainer.precision.clone(),
            strategy: trainer.strategy.clone(),
            accelerator: "auto".into(),
            devices: trainer.devices.clone(),
            num_nodes: trainer.num_nodes,
            loggers: Loggers { csv: true, tensorboard: trainer.tensorboard, wandb_project: trainer.wandb_project.clone() },
            seed: run.seed,
            resume_from: run.resume_from,
            poll_interval_s: POLL_INTERVAL_S,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> RunSpec {
        RunSpec { model: "m".into(), output_dir: "/runs/x".into(), seed: 3, init_adapter: None, total_steps: 0, resume_from: None }
    }

    #[test]
    fn the_json_holds_the_keys_the_trainer_reads() {
        let c = TrainerConfig::new(
            spec(),
            &LoraSettings::default(),
            &OptimSettings::default(),
            LossConfig::grpo(&LossSettings::default(), 4096),
            &TrainerSettings::default(),
        );
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(v["lora"]["r"], 16);
        assert_eq!(v["lora"]["init_adapter"], serde_json::Value::Null);
        assert_eq!(v["optim"]["schedule"], "constant");
        assert_eq!(v["optim"]["total_steps"], 1, "at least one step, so a schedule is defined");
        assert_eq!(v["loss"]["aggregation"], "token-mean");
        assert_eq!(v["loss"]["kind"], "grpo");
        assert_eq!(v["micro_batch_tokens"], 8192);
        assert_eq!(v["loggers"]["csv"], true);
        let sft = serde_json::to_value(LossConfig::sft()).unwrap();
        assert_eq!((sft["kind"].as_str(), sft["max_len_norm"].is_null()), (Some("sft"), true));
    }
}
