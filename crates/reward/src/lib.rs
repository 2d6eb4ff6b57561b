//! Rewards for trajectories: ground truth (a scenario's `expected` checked against the final
//! answer) and rules (partial credit and penalties for how the agent used the tools), combined
//! by weights from the run config.
//!
//! Partial credit matters for cold starts: a base model that never completes a task gets the same
//! ground-truth score (0) in every rollout, so its GRPO groups have no variance and teach nothing;
//! the rules tell "made a valid tool call" apart from "answered in prose".

pub mod ground_truth;
pub mod rules;

use serde::{Deserialize, Serialize};
use ta_types::{Scenario, Trajectory};

pub use rules::RuleConfig;

/// Weights of the reward parts. A part whose weight is 0 is not computed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct RewardConfig {
    pub ground_truth_weight: f64,
    pub rules_weight: f64,
    pub rules: RuleConfig,
}

impl Default for RewardConfig {
    fn default() -> Self {
        RewardConfig { ground_truth_weight: 1.0, rules_weight: 1.0, rules: RuleConfig::default() }
    }
}

/// Scores every trajectory whose scenario is in `scenarios` (matched by id).
pub fn score_all(cfg: &RewardConfig, scenarios: &[Scenario], trajectories: &mut [Trajectory]) {
    let by_id: std::collections::HashMap<&str, &Scenario> = scenarios.iter().map(|s| (s.id.as_str(), s)).collect();
    for t in trajectories {
        if let Some(s) = by_id.get(t.scenario_id.as_str()) {
            score(cfg, s, t);
        }
    }
}

/// Scores `t` (a rollout of `scenario`) and writes `reward` and `reward_parts`. Scenarios without
/// `expected` get no ground-truth part, and the reward is the weighted sum of the parts present.
pub fn score(cfg: &RewardConfig, scenario: &Scenario, t: &mut Trajectory) {
    let mut total = 0.0;
    if cfg.ground_truth_weight != 0.0
        && let Some(expected) = &scenario.expected {
            let gt = ground_truth::score(expected, t.final_answer.as_deref().unwrap_or(""), t.outcome);
            t.reward_parts.ground_truth = Some(gt);
            total += cfg.ground_truth_weight * gt;
        }
    if cfg.rules_weight != 0.0 {
        let r = rules::score(&cfg.rules, t);
        t.reward_parts.rules = Some(r);
        total += cfg.rules_weight * r;
    }
    t.reward = Some(total);
}
