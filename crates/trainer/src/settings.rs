//! The trainer's user-facing settings: the `[lora]`, `[optim]`, `[loss]` and `[trainer]` tables
//! of a GRPO or SFT run's `config.toml`. Each default and each list of allowed values is defined
//! here once (GRPO's and SFT's defaults differ on purpose and sit side by side), and
//! [`validate`](OptimSettings::validate) rejects values the trainer would only trip over mid-run.

use serde::{Deserialize, Serialize};

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SettingsError {
    #[error("invalid setting {key} = {value}: {why}\nhint: {hint}")]
    Invalid { key: &'static str, value: String, why: &'static str, hint: String },
}

/// The error for `key = value`; `hint` names the default from the `Default` impl, never a copy.
fn invalid(key: &'static str, value: impl ToString, why: &'static str, hint: impl Into<String>) -> Result<(), SettingsError> {
    Err(SettingsError::Invalid { key, value: value.to_string(), why, hint: hint.into() })
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct LoraSettings {
    pub r: u32,
    pub alpha: f64,
    pub dropout: f64,
    pub target_modules: serde_json::Value,
    pub use_rslora: bool,
}

impl Default for LoraSettings {
    /// GRPO's adapter.
    fn default() -> Self {
        LoraSettings { r: 16, alpha: 32.0, dropout: 0.0, target_modules: "all-linear".into(), use_rslora: false }
    }
}

impl LoraSettings {
    /// SFT's adapter: the workshop's LoRA (rank 32, rsLoRA, attention + MLP: every linear layer).
    pub fn sft() -> Self {
        LoraSettings { r: 32, use_rslora: true, ..Default::default() }
    }

    pub fn validate(&self) -> Result<(), SettingsError> {
        if self.r == 0 {
            return invalid("lora.r", 0, "a LoRA rank is at least 1", "16 or 32 are usual");
        }
        if !(self.alpha.is_finite() && self.alpha > 0.0) {
            return invalid("lora.alpha", self.alpha, "must be a positive number", "twice lora.r is usual");
        }
        if !(0.0..1.0).contains(&self.dropout) {
            return invalid("lora.dropout", self.dropout, "a probability in [0, 1)", format!("{} is the default", LoraSettings::default().dropout));
        }
        Ok(())
    }
}

/// The names serde reads for the enum `T`: the very list its derived `Deserialize` checks
/// against, so the allowed values of a setting are written once, as the enum. The contract test
/// hands them to the Python trainer's tests, which check that its dispatch covers exactly these.
pub fn allowed_values<T: serde::de::DeserializeOwned>() -> &'static [&'static str] {
    use serde::de::{Error, Visitor, value};

    /// A deserializer that only records the variant names a derived enum passes to it.
    struct Names<'a>(&'a mut &'static [&'static str]);

    impl<'de> serde::Deserializer<'de> for Names<'_> {
        type Error = value::Error;

        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, value::Error> {
            Err(value::Error::custom("not an enum"))
        }

        fn deserialize_enum<V: Visitor<'de>>(self, _: &'static str, variants: &'static [&'static str], _: V) -> Result<V::Value, value::Error> {
            *self.0 = variants;
            Err(value::Error::custom("names recorded"))
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option
            unit unit_struct newtype_struct seq tuple tuple_struct map struct identifier ignored_any
        }
    }

    let mut names: &'static [&'static str] = &[];
    let _ = T::deserialize(Names(&mut names));
    names
}

/// How the learning rate moves after warmup.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Schedule {
    Constant,
    Cosine,
}

/// For command-line flags (`--schedule cosine`): the names serde reads, so they are listed once.
impl std::str::FromStr for Schedule {
    type Err = String;

    fn from_str(s: &str) -> Result<Schedule, String> {
        serde_json::from_value(serde_json::Value::String(s.into())).map_err(|e| e.to_string())
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct OptimSettings {
    pub lr: f64,
    pub weight_decay: f64,
    pub warmup_steps: u64,
    pub schedule: Schedule,
    pub max_grad_norm: f64,
}

impl Default for OptimSettings {
    /// GRPO's optimizer.
    fn default() -> Self {
        OptimSettings { lr: 5e-5, weight_decay: 0.0, warmup_steps: 0, schedule: Schedule::Constant, max_grad_norm: 1.0 }
    }
}

impl OptimSettings {
    /// SFT's optimizer: a supervised loss takes a higher rate, decayed over the epochs.
    pub fn sft() -> Self {
        OptimSettings { lr: 1e-4, schedule: Schedule::Cosine, ..Default::default() }
    }

    pub fn validate(&self) -> Result<(), SettingsError> {
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return invalid(
                "optim.lr",
                self.lr,
                "a learning rate must be a positive number",
                format!("GRPO's default is {:e}, SFT's {:e}", OptimSettings::default().lr, OptimSettings::sft().lr),
            );
        }
        if !(self.weight_decay.is_finite() && self.weight_decay >= 0.0) {
            return invalid("optim.weight_decay", self.weight_decay, "must be 0 or more", format!("{} is the default", OptimSettings::default().weight_decay));
        }
        if !(self.max_grad_norm.is_finite() && self.max_grad_norm >= 0.0) {
            return invalid(
                "optim.max_grad_norm",
                self.max_grad_norm,
                "must be 0 (no clipping) or more",
                format!("{} is the default", OptimSettings::default().max_grad_norm),
            );
        }
        Ok(())
    }
}

/// How the policy loss averages over tokens and sequences.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Aggregation {
    /// DAPO: every trained token of the batch weighs the same.
    TokenMean,
    /// Dr. GRPO: each sequence's token sum divided by a constant (the generation budget).
    SeqMeanTokenSumNorm,
    /// GRPO: the mean over sequences of each sequence's token mean.
    SeqMeanTokenMean,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct LossSettings {
    pub epsilon_low: f64,
    pub epsilon_high: f64,
    /// KL coefficient against the start policy: the init adapter when the run has one (an SFT
    /// warm start), else the base model (adapter disabled).
    pub beta: f64,
    pub aggregation: Aggregation,
    /// Divide advantages by the group's standard deviation (GRPO); off is Dr. GRPO.
    pub scale_advantages: bool,
    /// Samples an older policy drew (`rollout.staleness` 1) are weighted by the importance ratio
    /// of the trainer's policy to the sampler's, truncated at this (TIS), so a token the trainer
    /// now finds much likelier than the sampler did cannot dominate the step.
    pub importance_cap: f64,
}

impl Default for LossSettings {
    fn default() -> Self {
        LossSettings { epsilon_low: 0.2, epsilon_high: 0.28, beta: 0.0, aggregation: Aggregation::TokenMean, scale_advantages: true, importance_cap: 2.0 }
    }
}

impl LossSettings {
    pub fn validate(&self) -> Result<(), SettingsError> {
        for (key, x) in [("loss.epsilon_low", self.epsilon_low), ("loss.epsilon_high", self.epsilon_high)] {
            if !(x.is_finite() && x >= 0.0) {
                return invalid(key, x, "a clip range must be 0 or more", {
                    let d = LossSettings::default();
                    format!("DAPO's {} (low) and {} (high) are the defaults", d.epsilon_low, d.epsilon_high)
                });
            }
        }
        if !(self.beta.is_finite() && self.beta >= 0.0) {
            return invalid("loss.beta", self.beta, "a KL coefficient must be 0 or more", format!("{} (no KL term) is the default", LossSettings::default().beta));
        }
        if !(self.importance_cap.is_finite() && self.importance_cap >= 1.0) {
            return invalid(
                "loss.importance_cap",
                self.importance_cap,
                "a cap on importance weights must be 1 or more (below 1 it would shrink every on-policy token too)",
                format!("{} (as in the TIS paper) is the default", LossSettings::default().importance_cap),
            );
        }
        Ok(())
    }
}

/// How a step's samples become forward passes.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Packing {
    /// Right-padded rows, one per sample: batched kernels, but a shared prompt is recomputed
    /// for every sample and padding costs as much as tokens.
    #[default]
    Rows,
    /// A micro-batch is a radix tree of its samples: every distinct prefix runs once and its
    /// KV cache serves the branches below it, so a group's system prompt and task, and the turns
    /// an episode split into several samples shares, are computed once, with no padding. Exact
    /// (gradients flow through the shared prefix once per branch, as in rows), but one forward
    /// per tree node: a win for a real model on a CPU, where a forward's cost follows its
    /// tokens, and a loss on a GPU and for tiny models, whose forwards are all overhead
    /// (measured: benches/RESULTS.md, "Prefix-tree packing in the trainer"). Not with gradient
    /// checkpointing, which drops the KV cache the branches continue.
    PrefixTree,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct TrainerSettings {
    /// The budget of one forward and backward: padded tokens (`rows`) or distinct tokens
    /// (`prefix-tree`).
    pub micro_batch_tokens: u64,
    pub gradient_checkpointing: bool,
    pub packing: Packing,
    pub precision: String,
    pub strategy: String,
    pub devices: serde_json::Value,
    pub num_nodes: u32,
    /// GPUs in all: with more than one, the engine takes the first and the trainer the rest.
    pub num_gpus: u32,
    pub tensorboard: bool,
    pub wandb_project: Option<String>,
}

impl Default for TrainerSettings {
    fn default() -> Self {
        TrainerSettings {
            micro_batch_tokens: 8192,
            gradient_checkpointing: false,
            packing: Packing::Rows,
            precision: "auto".into(),
            strategy: "auto".into(),
            devices: 1.into(),
            num_nodes: 1,
            num_gpus: 1,
            tensorboard: false,
            wandb_project: None,
        }
    }
}

impl TrainerSettings {
    pub fn validate(&self) -> Result<(), SettingsError> {
        if self.micro_batch_tokens == 0 {
            return invalid(
                "trainer.micro_batch_tokens",
                0,
                "a micro-batch holds at least one token",
                format!("{} is the default; lower it when memory runs out", TrainerSettings::default().micro_batch_tokens),
            );
        }
        Ok(())
    }
}

/// Validates the four tables a trainer reads.
pub fn validate(lora: &LoraSettings, optim: &OptimSettings, trainer: &TrainerSettings) -> Result<(), SettingsError> {
    lora.validate()?;
    optim.validate()?;
    trainer.validate()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enums_read_the_names_users_write() {
        let o: OptimSettings = toml::from_str("schedule = \"cosine\"").unwrap();
        assert_eq!(o.schedule, Schedule::Cosine);
        assert_eq!("constant".parse::<Schedule>(), Ok(Schedule::Constant));
        assert!("linear".parse::<Schedule>().unwrap_err().contains("cosine"));
        for (name, a) in [
            ("token-mean", Aggregation::TokenMean),
            ("seq-mean-token-sum-norm", Aggregation::SeqMeanTokenSumNorm),
            ("seq-mean-token-mean", Aggregation::SeqMeanTokenMean),
        ] {
            assert_eq!(toml::from_str::<LossSettings>(&format!("aggregation = \"{name}\"")).unwrap().aggregation, a);
        }
        let e = toml::from_str::<LossSettings>("aggregation = \"mean\"").unwrap_err().to_string();
        assert!(e.contains("token-mean"), "the error lists the allowed values: {e}");
    }

    #[test]
    fn allowed_values_are_the_names_serde_reads() {
        assert_eq!(allowed_values::<Schedule>(), ["constant", "cosine"]);
        assert_eq!(allowed_values::<Aggregation>(), ["token-mean", "seq-mean-token-sum-norm", "seq-mean-token-mean"]);
        assert_eq!(allowed_values::<Packing>(), ["rows", "prefix-tree"]);
        for name in allowed_values::<Aggregation>() {
            serde_json::from_value::<Aggregation>(serde_json::json!(name)).unwrap();
        }
        assert!(allowed_values::<u32>().is_empty(), "not an enum: no names");
    }

    #[test]
    fn defaults_are_valid() {
        validate(&LoraSettings::default(), &OptimSettings::default(), &TrainerSettings::default()).unwrap();
        validate(&LoraSettings::sft(), &OptimSettings::sft(), &TrainerSettings::default()).unwrap();
        LossSettings::default().validate().unwrap();
    }

    #[test]
    fn a_learning_rate_must_be_positive_and_finite() {
        for lr in [0.0, -1e-5, f64::NAN, f64::INFINITY] {
            let e = OptimSettings { lr, ..Default::default() }.validate().unwrap_err().to_string();
            assert!(e.contains("optim.lr") && e.contains("\nhint: "), "{e}");
        }
        let e = TrainerSettings { micro_batch_tokens: 0, ..Default::default() }.validate().unwrap_err().to_string();
        assert!(e.contains("trainer.micro_batch_tokens") && e.contains("hint:"), "{e}");
        assert!(LoraSettings { r: 0, ..Default::default() }.validate().is_err());
        assert!(LossSettings { beta: -1.0, ..Default::default() }.validate().is_err());
    }
}
