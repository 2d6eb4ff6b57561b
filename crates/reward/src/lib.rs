//! Rewards for trajectories, combined by weights from the run config:
//!
//! - **judge**: an LLM judge (RULER-style) scores each group's trajectories side by side
//!   ([`judge`]), with cost accounting ([`cost`]) and a content-hash cache;
//! - **ground truth**: a scenario's `expected` checked against the final answer ([`ground_truth`]);
//! - **rules**: partial credit and penalties for how the agent used the tools ([`rules`]);
//! - **custom**: user commands or HTTP endpoints, in any language ([`custom`]).
//!
//! Partial credit matters for cold starts: a base model that never completes a task gets the same
//! ground-truth score (0) in every rollout, so its GRPO groups have no variance and teach nothing;
//! the rules tell "made a valid tool call" apart from "answered in prose". But partial credit
//! must never buy correctness: under the default [`RewardMix::CorrectnessFirst`], when a scenario
//! has ground truth the rules only break ties inside one ground-truth level (see [`tie_break`]).

pub mod agreement;
pub mod cost;
pub mod custom;
pub mod ground_truth;
pub mod judge;
pub mod rules;
pub mod state;

use std::collections::HashMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use ta_types::{Role, Scenario, Trajectory};

pub use custom::{CustomError, CustomReward};
pub use judge::{Judge, JudgeConfig, JudgeError, JudgeMode, JudgeStats};
pub use rules::RuleConfig;

/// How ground truth and rules make one reward.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum RewardMix {
    /// With ground truth, `ground_truth_weight × (ground truth + tie-break)`: the rules can order
    /// answers of one correctness level but never lift one to the next (`rules_weight` then only
    /// switches them on or off). Without ground truth, the weighted sum, rules its main signal.
    CorrectnessFirst,
    /// `ground_truth_weight × ground truth + rules_weight × rules`, always: a wrong answer with
    /// tidy tool use can score level with a right one.
    WeightedSum,
}

/// Weights of the reward parts and their settings. A part whose weight is 0 is not computed;
/// the reward combines the parts present (see [`RewardMix`]), then adds judge and custom parts.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct RewardConfig {
    pub mix: RewardMix,
    /// Under the correctness-first mix, the share (0 to below 1) of the gap between two
    /// ground-truth levels that the rules' tie-break may span.
    pub rules_tie_break: f64,
    pub ground_truth_weight: f64,
    /// Weight of the state part: a scenario's `expected_state` against the episode's captured
    /// state.
    pub state_weight: f64,
    pub rules_weight: f64,
    /// Used when `[reward.judge] model` is set.
    pub judge_weight: f64,
    pub rules: RuleConfig,
    pub judge: JudgeConfig,
    /// `[[reward.custom]]` entries, each with its own weight.
    pub custom: Vec<CustomReward>,
}

impl Default for RewardConfig {
    fn default() -> Self {
        RewardConfig {
            mix: RewardMix::CorrectnessFirst,
            rules_tie_break: 0.5,
            ground_truth_weight: 1.0,
            state_weight: 1.0,
            rules_weight: 1.0,
            judge_weight: 1.0,
            rules: RuleConfig::default(),
            judge: JudgeConfig::default(),
            custom: Vec::new(),
        }
    }
}

/// Ground truth and rules for every trajectory whose scenario is in `scenarios` (matched by id),
/// synchronously, without the judge or custom rewards (see [`Rewarder`] for those).
pub fn score_all(cfg: &RewardConfig, scenarios: &[Scenario], trajectories: &mut [Trajectory]) {
    let by_id: HashMap<&str, &Scenario> = scenarios.iter().map(|s| (s.id.as_str(), s)).collect();
    for t in trajectories {
        if let Some(s) = by_id.get(t.scenario_id.as_str()) {
            score(cfg, s, t);
        }
    }
}

/// Scores `t` (a rollout of `scenario`) with ground truth and rules and writes `reward` and
/// `reward_parts`. Scenarios without `expected` get no ground-truth part.
pub fn score(cfg: &RewardConfig, scenario: &Scenario, t: &mut Trajectory) {
    verifiable_parts(cfg, Some(scenario), t);
    combine(cfg, Some(scenario), t);
}

fn verifiable_parts(cfg: &RewardConfig, scenario: Option<&Scenario>, t: &mut Trajectory) {
    if cfg.ground_truth_weight != 0.0
        && let Some(expected) = scenario.and_then(|s| s.expected.as_ref())
    {
        t.reward_parts.ground_truth = Some(ground_truth::score(expected, t.final_answer.as_deref().unwrap_or(""), t.outcome));
    }
    if cfg.state_weight != 0.0
        && let Some(s) = scenario.and_then(|s| s.expected_state.as_ref().map(|e| (s, e)))
    {
        t.reward_parts.state = state::score(s.1, t.captured_state.as_deref(), &s.0.id);
    }
    if cfg.rules_weight != 0.0 {
        t.reward_parts.rules = Some(rules::score(&cfg.rules, t));
    }
}

/// How far the rules' squash spreads them: the default rules span about −0.6 to 0.4, which this
/// maps to 0.05 to 0.88 of the tie-break band, so every rule still tells behaviours apart.
const RULES_SQUASH: f64 = 0.2;

/// The rules' share of the reward when ground truth exists: a logistic squash of `rules` into
/// `[0, rules_tie_break × gap]`, strictly increasing, where `gap` is the closest two ground-truth
/// scores can be ([`ground_truth::level_gap`]). With `rules_tie_break` below 1 the band is
/// narrower than the gap, so any higher ground truth outranks any lower one whatever the rules.
pub fn tie_break(cfg: &RewardConfig, rules: f64, gap: f64) -> f64 {
    cfg.rules_tie_break * gap / (1.0 + (-rules / RULES_SQUASH).exp())
}

/// `reward` from the parts present in `reward_parts` ([`RewardMix`]), `scenario` giving the
/// ground truth's levels (a right/wrong check's when it is not at hand); a part that is missing
/// adds nothing.
pub fn combine(cfg: &RewardConfig, scenario: Option<&Scenario>, t: &mut Trajectory) {
    let p = &t.reward_parts;
    let gap = scenario.and_then(|s| s.expected.as_ref()).map_or(0.5, ground_truth::level_gap);
    let mut total = match (cfg.mix, p.ground_truth) {
        (RewardMix::CorrectnessFirst, Some(gt)) => cfg.ground_truth_weight * (gt + p.rules.map_or(0.0, |r| tie_break(cfg, r, gap))),
        _ => cfg.ground_truth_weight * p.ground_truth.unwrap_or(0.0) + cfg.rules_weight * p.rules.unwrap_or(0.0),
    };
    total += p.state.map_or(0.0, |x| cfg.state_weight * x) + p.judge.map_or(0.0, |x| cfg.judge_weight * x);
    for c in &cfg.custom {
        total += p.custom.get(&c.name).map_or(0.0, |x| c.weight * x);
    }
    t.reward = Some(total);
}

#[derive(Debug, thiserror::Error)]
pub enum RewardError {
    #[error(transparent)]
    Judge(#[from] JudgeError),
    #[error(transparent)]
    Custom(#[from] CustomError),
    #[error(
        "invalid setting reward.rules_tie_break = {0}: use a share from 0 up to (not including) 1, so partial credit stays inside the gap between ground-truth levels"
    )]
    TieBreak(f64),
}

/// Every configured reward, ready to score groups: ground truth and rules, the judge (async,
/// one call per group) and custom rewards.
pub struct Rewarder {
    cfg: RewardConfig,
    judge: Option<Judge>,
    custom_limit: tokio::sync::Semaphore,
}

impl Rewarder {
    /// `judge_cache`: where the judge keeps verdicts (a run directory's `judge-cache.jsonl`).
    pub fn new(cfg: &RewardConfig, judge_cache: Option<&Path>) -> Result<Rewarder, RewardError> {
        if !(0.0..1.0).contains(&cfg.rules_tie_break) {
            return Err(RewardError::TieBreak(cfg.rules_tie_break));
        }
        for c in &cfg.custom {
            c.validate()?;
        }
        let judge = (cfg.judge.enabled() && cfg.judge_weight != 0.0).then(|| Judge::new(&cfg.judge, judge_cache)).transpose()?;
        Ok(Rewarder { cfg: cfg.clone(), judge, custom_limit: tokio::sync::Semaphore::new(4) })
    }

    pub fn judge(&self) -> Option<&Judge> {
        self.judge.as_ref()
    }

    /// Scores `trajectories`, grouped by scenario and step (each group judged in one call). A
    /// trajectory whose scenario is not in `scenarios` keeps its ground truth and is judged on
    /// the task of its first user message. The judge and custom parts are recomputed; a group
    /// the judge skipped keeps `reward_parts.judge = None` (counted in [`Judge::stats`]).
    pub async fn score(&self, scenarios: &[Scenario], trajectories: &mut [Trajectory]) -> Result<(), RewardError> {
        let by_id: HashMap<&str, &Scenario> = scenarios.iter().map(|s| (s.id.as_str(), s)).collect();
        for t in trajectories.iter_mut() {
            verifiable_parts(&self.cfg, by_id.get(t.scenario_id.as_str()).copied(), t);
            t.reward_parts.judge = None;
            t.reward_parts.custom.clear();
            t.judge_explanation = None;
        }
        let groups = groups(trajectories);
        let results = {
            let refs: Vec<Vec<&Trajectory>> = groups.iter().map(|g| g.iter().map(|&i| &trajectories[i]).collect()).collect();
            let work = refs.iter().map(|group| self.score_group(by_id.get(group[0].scenario_id.as_str()).copied(), group));
            futures::future::join_all(work).await
        };
        for (group, result) in groups.iter().zip(results) {
            let (verdicts, custom) = result?;
            for (k, &i) in group.iter().enumerate() {
                let t = &mut trajectories[i];
                if let Some(Some(v)) = verdicts.get(k) {
                    t.reward_parts.judge = Some(v.score);
                    t.judge_explanation = Some(v.explanation.clone());
                }
                for (name, scores) in &custom {
                    t.reward_parts.custom.insert(name.clone(), scores[k]);
                }
            }
        }
        for t in trajectories.iter_mut() {
            combine(&self.cfg, by_id.get(t.scenario_id.as_str()).copied(), t);
        }
        Ok(())
    }

    #[allow(clippy::type_complexity)]
    async fn score_group(&self, scenario: Option<&Scenario>, group: &[&Trajectory]) -> Result<(Vec<Option<judge::Verdict>>, Vec<(String, Vec<f64>)>), RewardError> {
        let task = scenario.map(|s| s.task.clone()).unwrap_or_else(|| first_user_message(group[0]));
        let verdicts = match &self.judge {
            Some(judge) => {
                let expected = scenario.and_then(|s| s.expected.as_ref()).map(|e| serde_json::to_string(e).expect("json"));
                judge.score(&task, expected, group).await?
            }
            None => Vec::new(),
        };
        let mut custom = Vec::new();
        for c in self.cfg.custom.iter().filter(|c| c.weight != 0.0) {
            let _permit = self.custom_limit.acquire().await.expect("semaphore never closed");
            custom.push((c.name.clone(), c.score(&task, scenario, group).await?));
        }
        Ok((verdicts, custom))
    }
}

/// Indexes of `trajectories` grouped by (scenario, step), in order of first appearance.
fn groups(trajectories: &[Trajectory]) -> Vec<Vec<usize>> {
    let mut index: HashMap<(&str, u64), usize> = HashMap::new();
    let mut out: Vec<Vec<usize>> = Vec::new();
    for (i, t) in trajectories.iter().enumerate() {
        let k = *index.entry((t.scenario_id.as_str(), t.group.step)).or_insert_with(|| {
            out.push(Vec::new());
            out.len() - 1
        });
        out[k].push(i);
    }
    out
}

fn first_user_message(t: &Trajectory) -> String {
    t.messages.iter().find(|m| m.role == Role::User).and_then(|m| m.content.clone()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ta_types::trajectory::GroupRef;

    #[test]
    fn reward_is_the_weighted_sum_of_the_parts_present() {
        let cfg = RewardConfig {
            mix: RewardMix::WeightedSum,
            judge_weight: 2.0,
            custom: vec![CustomReward { name: "file".into(), command: Some("true".into()), url: None, weight: 0.5, timeout_s: 1.0 }],
            ..Default::default()
        };
        let mut t = Trajectory::start("s", GroupRef::default(), "m", vec![]);
        t.reward_parts.ground_truth = Some(1.0);
        t.reward_parts.rules = Some(0.2);
        combine(&cfg, None, &mut t);
        assert!((t.reward.unwrap() - 1.2).abs() < 1e-12, "a skipped judge adds nothing, never a zero score");
        t.reward_parts.judge = Some(0.5);
        t.reward_parts.custom.insert("file".into(), 1.0);
        combine(&cfg, None, &mut t);
        assert!((t.reward.unwrap() - (1.2 + 1.0 + 0.5)).abs() < 1e-12);
    }

    fn scenario(expected: &str) -> Scenario {
        ta_types::scenario::parse_scenarios(&format!("{{\"id\": \"s\", \"task\": \"t\", \"expected\": {expected}}}"), "x").unwrap().remove(0)
    }

    fn reward(cfg: &RewardConfig, s: &Scenario, gt: Option<f64>, rules: f64) -> f64 {
        let mut t = Trajectory::start("s", GroupRef::default(), "m", vec![]);
        (t.reward_parts.ground_truth, t.reward_parts.rules) = (gt, Some(rules));
        combine(cfg, Some(s), &mut t);
        t.reward.unwrap()
    }

    /// Rules scores from far below to far above anything the rules give, tool errors included.
    fn rules_range() -> impl Iterator<Item = f64> + Clone {
        (-400..=400).map(|i| f64::from(i) / 100.0).chain([-1e6, 1e6])
    }

    #[test]
    fn under_correctness_first_no_rules_score_lifts_an_answer_to_the_next_level() {
        for ground_truth_weight in [1.0, 2.0] {
            let cfg = RewardConfig { ground_truth_weight, rules_weight: 5.0, ..Default::default() };
            for (s, levels) in
                [(scenario("7"), vec![0.0, 0.5, 1.0]), (scenario("{\"set\": [\"a\", \"b\", \"c\"]}"), vec![0.0, 1.0 / 6.0, 1.0 / 3.0, 0.5, 2.0 / 3.0, 1.0])]
            {
                for w in levels.windows(2) {
                    let lowest_above = rules_range().map(|r| reward(&cfg, &s, Some(w[1]), r)).fold(f64::INFINITY, f64::min);
                    let highest_below = rules_range().map(|r| reward(&cfg, &s, Some(w[0]), r)).fold(f64::NEG_INFINITY, f64::max);
                    assert!(
                        lowest_above > highest_below,
                        "ground truth {} with the worst rules ({lowest_above}) must outrank {} with the best ({highest_below})",
                        w[1],
                        w[0]
                    );
                }
                // Within a level, the rules still order behaviours.
                assert!(reward(&cfg, &s, Some(1.0), 0.4) > reward(&cfg, &s, Some(1.0), 0.35));
            }
        }
        // The old mix lets a wrong answer with tidy tool use pass a right one that fumbled.
        let old = RewardConfig { mix: RewardMix::WeightedSum, ..Default::default() };
        assert!(reward(&old, &scenario("7"), Some(0.5), 0.4) > reward(&old, &scenario("7"), Some(1.0), -0.4));
    }

    #[test]
    fn without_ground_truth_the_rules_are_the_signal_at_their_weight() {
        let cfg = RewardConfig { rules_weight: 0.5, ..Default::default() };
        let no_expected = ta_types::scenario::parse_scenarios("{\"id\": \"s\", \"task\": \"t\"}", "x").unwrap().remove(0);
        assert_eq!(reward(&cfg, &no_expected, None, 0.4), 0.2);
        assert!(Rewarder::new(&RewardConfig { rules_tie_break: 1.0, ..Default::default() }, None).err().unwrap().to_string().contains("rules_tie_break"));
    }

    #[test]
    fn groups_are_scenario_and_step_in_order_of_appearance() {
        let t = |s: &str, step| Trajectory::start(s, GroupRef { step, index: 0 }, "m", vec![]);
        let ts = vec![t("a", 1), t("b", 1), t("a", 1), t("a", 2)];
        assert_eq!(groups(&ts), vec![vec![0, 2], vec![1], vec![3]]);
    }
}
