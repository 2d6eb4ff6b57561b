//! Every hyperparameter of a training run, as plain data. A run's `config.toml` holds the
//! resolved values (file, then flags), so a run can be read, compared and resumed from it.

use serde::{Deserialize, Serialize};
use ta_reward::RewardConfig;
use ta_trainer::settings::{LoraSettings, LossSettings, OptimSettings, TrainerSettings};
pub use ta_types::kept::FinalAdapter;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
#[derive(Default)]
pub struct TrainConfig {
    /// Base model: Hugging Face id, directory, .gguf file or packaged model name.
    pub base_model: String,
    /// Start from this PEFT adapter (e.g. an SFT run's `final/`).
    pub init_adapter: Option<String>,
    pub seed: u64,
    pub rollout: RolloutSettings,
    pub curriculum: CurriculumSettings,
    pub lora: LoraSettings,
    pub optim: OptimSettings,
    pub loss: LossSettings,
    pub reward: RewardConfig,
    pub trainer: TrainerSettings,
    /// Rollout isolation for servers that change state (docs/isolation.md).
    pub isolation: ta_rollout::isolation::IsolationSettings,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct RolloutSettings {
    pub rollouts_per_scenario: u32,
    pub scenarios_per_step: usize,
    pub epochs: u32,
    /// Stop after this many steps (0: run every epoch).
    pub max_steps: u64,
    pub max_turns: u32,
    pub max_tokens: u32,
    /// Tokens the model may write over a whole episode (0: no budget): a runaway episode stops
    /// there and fails like one out of turns.
    pub max_episode_tokens: u32,
    pub temperature: f32,
    pub top_p: f32,
    pub concurrency: usize,
    pub tool_result_max_chars: usize,
    /// Validate every this many steps (0: only before and after training).
    pub eval_every: u64,
    pub eval_temperature: f32,
    /// Besides the greedy episode, sample this many episodes of each validation scenario at
    /// `temperature` (`eval/step-N.sampled.jsonl`) and report pass@1 and pass@k with 95%
    /// intervals (0: greedy only). One greedy episode per task moves by a whole task on a
    /// near-tie; the mean over k samples is what GRPO optimizes and shows smaller changes.
    pub eval_rollouts: u32,
    /// With `init_adapter`, also validate the base model before training (`eval/base.jsonl`), so
    /// the report compares base, adapter and trained.
    pub validate_base: bool,
    /// Keep the base model's validation across runs and reuse it when a run asks the same
    /// model the same tasks in the same way (`ta_train::base_cache`).
    pub reuse_base_validation: bool,
    /// Share of scenarios held out when the data set has no `split` field.
    pub validation_fraction: f64,
    /// DAPO's dynamic sampling: groups without reward variance teach nothing, so a step draws
    /// replacements for them, in rounds sized by the share with signal so far, until it has
    /// `scenarios_per_step` groups with signal (surplus ones are not trained).
    /// On by default: from an SFT adapter, 10 steps without it lowered sampled pass@1 by 5.5
    /// points and 10 steps with it raised it by 11.2, from the same adapter on the same 298
    /// held-out tasks (benches/RESULTS.md, "GRPO ablation"). It costs rollouts only when groups
    /// are flat, at most `max_oversample` times a step's.
    pub dynamic_sampling: bool,
    /// With dynamic sampling, a step draws at most this many times the groups it needs.
    pub max_oversample: f64,
    /// With dynamic sampling, a step's first round also draws the replacements the previous
    /// step's share of groups with signal predicts (sized as a replacement round is), so that at
    /// a steady flat share a step plays one round instead of two or three, each as long as its
    /// longest episode. Off by default: not yet measured on a GPU.
    pub size_first_round: bool,
    /// Asynchronous GRPO: with 1, the engine plays step n+1 with the adapter of step n-1 while
    /// the trainer trains step n, so neither waits for the other, and the trainer weighs those
    /// samples by truncated importance weights (`loss.importance_cap`); 0 is the synchronous
    /// loop (every step sampled by the adapter just trained). One engine cannot play two steps
    /// ahead any faster, so 1 is the most.
    pub staleness: u32,
    /// Which adapter `final/` holds (`crate::keep`). `best` by default: at lr 1e-4 GRPO broke an
    /// SFT adapter within 6–12 steps on two of four databases, its validation 94% → 0%, and the
    /// last step was shipped all the same (benches/RESULTS.md, "Run 20").
    pub final_adapter: FinalAdapter,
}

/// Which scenarios a step draws (see `data.rs`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum CurriculumMode {
    /// Every epoch a seeded permutation of the training split.
    Uniform,
    /// The first `ordered_epochs` easy to hard by `difficulty`, then draws weighted by each
    /// scenario's recent ground-truth pass rate.
    Adaptive,
    /// Draws weighted by the chance a scenario's group splits right from wrong, read from the
    /// recent groups of its template (the shape it was made from): a pool most of whose shapes
    /// the start adapter already solves spends its draws on the shapes it does not.
    Frontier,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct CurriculumSettings {
    pub mode: CurriculumMode,
    /// A scenario's pass rate is read over its last `window` groups.
    pub window: u32,
    /// Draw weight of a scenario every rollout solved in its last `window` groups (0: never again).
    pub retired_weight: f64,
    /// Draw weight of a scenario no rollout earned any ground truth on in its last `window`
    /// groups; back to 1 as soon as one does.
    pub unsolved_weight: f64,
    /// Epochs that visit every scenario once, easiest `difficulty` first.
    pub ordered_epochs: u32,
    /// Frontier: a template's chance to split is read over its last `template_window` groups.
    pub template_window: u32,
}

impl Default for RolloutSettings {
    fn default() -> Self {
        // One episode's settings are the agent's own defaults.
        let episode = ta_rollout::AgentConfig::DEFAULT;
        RolloutSettings {
            rollouts_per_scenario: 8,
            scenarios_per_step: 8,
            epochs: 1,
            max_steps: 0,
            max_turns: episode.max_turns,
            max_tokens: episode.max_tokens,
            max_episode_tokens: episode.max_episode_tokens,
            temperature: episode.temperature,
            top_p: episode.top_p,
            concurrency: 32,
            tool_result_max_chars: episode.tool_result_max_chars,
            eval_every: 10,
            eval_temperature: 0.0,
            eval_rollouts: 4,
            validate_base: true,
            reuse_base_validation: true,
            validation_fraction: 0.2,
            dynamic_sampling: true,
            max_oversample: 3.0,
            size_first_round: false,
            staleness: 1,
            final_adapter: FinalAdapter::Best,
        }
    }
}

impl RolloutSettings {
    /// The most episodes the run plays at once, `concurrency` at most: a step's first round of
    /// groups, or a validation of `validation` scenarios (greedy, and `eval_rollouts` samples each).
    /// An engine that holds fewer sequences plays them in waves (`ta_python::KvCapacity`).
    pub fn most_in_flight(&self, validation: usize) -> usize {
        let step = self.scenarios_per_step * self.rollouts_per_scenario as usize;
        self.concurrency.min(step.max(validation * (1 + self.eval_rollouts as usize)))
    }
}

impl Default for CurriculumSettings {
    fn default() -> Self {
        CurriculumSettings { mode: CurriculumMode::Uniform, window: 2, retired_weight: 0.1, unsolved_weight: 0.25, ordered_epochs: 1, template_window: 32 }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path}: {message}\nhint: see `train-agent train --help` and docs/training.md for every key")]
    Parse { path: String, message: String },
    #[error("invalid setting {key} = {value}: {why}")]
    Invalid { key: &'static str, value: String, why: &'static str },
    #[error(transparent)]
    Settings(#[from] ta_trainer::SettingsError),
}

impl TrainConfig {
    pub fn load(path: &std::path::Path) -> Result<TrainConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.display().to_string(), source })?;
        toml::from_str(&text).map_err(|e| ConfigError::Parse { path: path.display().to_string(), message: e.to_string() })
    }

    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).expect("config serialises")
    }

    /// Checks values whose mistakes would otherwise surface deep inside a run.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let inv = |key, value: String, why| Err(ConfigError::Invalid { key, value, why });
        if self.base_model.is_empty() {
            return inv("base_model", "\"\"".into(), "required (--base-model)");
        }
        if self.rollout.rollouts_per_scenario < 2 {
            return inv("rollout.rollouts_per_scenario", self.rollout.rollouts_per_scenario.to_string(), "GRPO compares rollouts within a group: use at least 2");
        }
        if self.rollout.scenarios_per_step == 0 {
            return inv("rollout.scenarios_per_step", "0".into(), "must be at least 1");
        }
        if self.rollout.max_oversample.is_nan() || self.rollout.max_oversample < 1.0 {
            return inv("rollout.max_oversample", self.rollout.max_oversample.to_string(), "a step draws at least the groups it needs: use 1 or more");
        }
        if self.rollout.staleness > 1 {
            return inv("rollout.staleness", self.rollout.staleness.to_string(), "0 (synchronous) or 1 (the next step's rollouts during this step's update)");
        }
        if self.curriculum.window == 0 {
            return inv("curriculum.window", "0".into(), "a pass rate needs at least 1 group");
        }
        if self.curriculum.template_window == 0 {
            return inv("curriculum.template_window", "0".into(), "a template's share of groups that split needs at least 1 group");
        }
        for (key, w) in [("curriculum.retired_weight", self.curriculum.retired_weight), ("curriculum.unsolved_weight", self.curriculum.unsolved_weight)] {
            if !(0.0..=1.0).contains(&w) {
                return inv(key, w.to_string(), "a draw weight from 0 to 1 (1: like any other scenario)");
            }
        }
        ta_trainer::settings::validate(&self.lora, &self.optim, &self.trainer)?;
        Ok(self.loss.validate()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolved_config_round_trips_through_toml() {
        let mut c = TrainConfig { base_model: "m".into(), ..Default::default() };
        c.rollout.max_steps = 3;
        let back: TrainConfig = toml::from_str(&c.to_toml()).unwrap();
        assert_eq!(back, c);
        // Judge, prices and custom rewards too.
        c.reward.judge.model = "openai/gpt-4o-mini".into();
        c.reward.judge.budget_usd = Some(2.5);
        c.reward.judge.prices.insert("my-model".into(), ta_reward::cost::Price { input: 1.0, output: 2.0 });
        c.reward.custom.push(ta_reward::CustomReward { name: "file".into(), command: Some("python3 check.py".into()), url: None, weight: 0.5, timeout_s: 30.0 });
        let text = c.to_toml();
        assert_eq!(toml::from_str::<TrainConfig>(&text).unwrap(), c, "{text}");
        let written: TrainConfig = toml::from_str("[reward]\njudge_weight = 2.0\n[reward.judge]\nmodel = \"local/base\"\nmode = \"absolute\"\n[[reward.custom]]\nname = \"x\"\nurl = \"http://127.0.0.1:9/score\"\n").unwrap();
        assert_eq!(written.reward.judge.mode, ta_reward::JudgeMode::Absolute);
        assert_eq!((written.reward.custom[0].weight, written.reward.custom[0].timeout_s), (1.0, 60.0));
    }

    #[test]
    fn the_most_episodes_in_flight_are_a_step_or_a_validation_within_the_concurrency() {
        let mut r = RolloutSettings { concurrency: 128, ..Default::default() };
        assert_eq!(r.most_in_flight(10), 64, "8 groups of 8 against 10 tasks x (greedy + 4 samples)");
        assert_eq!(r.most_in_flight(20), 100);
        assert_eq!(r.most_in_flight(64), 128, "the concurrency caps it");
        r.concurrency = 32;
        assert_eq!(r.most_in_flight(0), 32);
    }

    #[test]
    fn the_documented_defaults_are_the_defaults() {
        let doc = include_str!("../../../docs/training.md");
        let block = doc.split("```toml\n").nth(1).and_then(|b| b.split("```").next()).expect("a toml block in docs/training.md");
        assert_eq!(toml::from_str::<TrainConfig>(block).unwrap(), TrainConfig::default());
    }

    #[test]
    fn unknown_keys_and_bad_values_are_reported() {
        let e = toml::from_str::<TrainConfig>("[rollout]\nrollouts_per_scenaro = 4\n").unwrap_err().to_string();
        assert!(e.contains("rollouts_per_scenaro"), "{e}");
        let mut c = TrainConfig { base_model: "m".into(), ..Default::default() };
        c.rollout.rollouts_per_scenario = 1;
        assert!(c.validate().unwrap_err().to_string().contains("at least 2"));
        c.rollout.rollouts_per_scenario = 4;
        c.optim.lr = 0.0;
        assert!(c.validate().unwrap_err().to_string().contains("optim.lr"));
        let e = toml::from_str::<TrainConfig>("[loss]\naggregation = \"mean\"\n").unwrap_err().to_string();
        assert!(e.contains("aggregation") && e.contains("token-mean"), "{e}");
        c.optim.lr = 1e-5;
        c.curriculum.template_window = 0;
        assert!(c.validate().unwrap_err().to_string().contains("curriculum.template_window"));
    }
}
