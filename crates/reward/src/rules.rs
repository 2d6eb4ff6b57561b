//! Rule rewards: partial credit and penalties for how the tools were used. Defaults (all
//! configurable in the run config's `[reward.rules]`):
//!
//! | rule | default |
//! |---|---|
//! | at least one successful tool call | +0.2 |
//! | called `complete_task` | +0.2 |
//! | called `complete_task` with a tool error as the answer (instead of everything else) | the lowest score running out of turns can get, −0.1 |
//! | each failed call (malformed or tool error) | −0.05, at most −0.2 in all |
//! | failed calls never followed by a success | −0.1 |
//! | each call over `call_budget` (10) | −0.02 |
//! | ran out of turns | −0.1 |
//! | model or MCP server error, context exceeded | −0.2 |

use serde::{Deserialize, Serialize};
use ta_types::{Outcome, Trajectory};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct RuleConfig {
    pub successful_call_bonus: f64,
    pub completed_bonus: f64,
    /// How far below the lowest score of running out of turns (every error penalty taken) an
    /// answer that hands in a tool error ([`Trajectory::answered_with_error`]) scores, whatever
    /// its own calls: so that among wrong answers the rules never prefer giving up with the
    /// error over searching on. Ranked only with running out of turns at equal errors, the
    /// episode that stopped at its first error outscored the one that failed on, and one of
    /// four GRPO runs learned to hand in errors (benches/RESULTS.md, runs 24 to 26).
    pub error_answer_penalty: f64,
    pub error_penalty: f64,
    pub max_error_penalty: f64,
    pub unrecovered_penalty: f64,
    pub call_budget: u32,
    pub over_budget_penalty: f64,
    pub out_of_turns_penalty: f64,
    pub failure_penalty: f64,
}

impl Default for RuleConfig {
    fn default() -> Self {
        RuleConfig {
            successful_call_bonus: 0.2,
            completed_bonus: 0.2,
            error_answer_penalty: 0.1,
            error_penalty: 0.05,
            max_error_penalty: 0.2,
            unrecovered_penalty: 0.1,
            call_budget: 10,
            over_budget_penalty: 0.02,
            out_of_turns_penalty: 0.1,
            failure_penalty: 0.2,
        }
    }
}

/// The rules' score for one trajectory.
pub fn score(cfg: &RuleConfig, t: &Trajectory) -> f64 {
    let over_budget = cfg.over_budget_penalty * f64::from(t.tool_calls.saturating_sub(cfg.call_budget));
    if t.outcome == Outcome::Completed && t.answered_with_error {
        return -(cfg.out_of_turns_penalty + cfg.max_error_penalty + cfg.unrecovered_penalty + cfg.error_answer_penalty) - over_budget;
    }
    let mut s = 0.0;
    if t.tool_calls > t.tool_errors {
        s += cfg.successful_call_bonus;
    }
    match t.outcome {
        Outcome::Completed => s += cfg.completed_bonus,
        Outcome::RanOutOfTurns => s -= cfg.out_of_turns_penalty,
        Outcome::Error | Outcome::ContextExceeded => s -= cfg.failure_penalty,
    }
    s -= (cfg.error_penalty * f64::from(t.tool_errors)).min(cfg.max_error_penalty);
    if t.tool_errors > t.recovered_errors {
        s -= cfg.unrecovered_penalty;
    }
    s - over_budget
}

#[cfg(test)]
mod tests {
    use super::*;
    use ta_types::trajectory::GroupRef;

    fn traj(outcome: Outcome, calls: u32, errors: u32, recovered: u32) -> Trajectory {
        let mut t = Trajectory::start("s", GroupRef::default(), "m", vec![]);
        (t.outcome, t.num_turns, t.tool_calls, t.tool_errors, t.recovered_errors) = (outcome, 1, calls, errors, recovered);
        t
    }

    #[test]
    fn defaults_rank_behaviours_as_documented() {
        let c = RuleConfig::default();
        let close = |a: f64, b: f64| assert!((a - b).abs() < 1e-9, "{a} != {b}");
        close(score(&c, &traj(Outcome::Completed, 2, 0, 0)), 0.4);
        close(score(&c, &traj(Outcome::Completed, 3, 1, 1)), 0.35);
        close(score(&c, &traj(Outcome::Completed, 0, 0, 0)), 0.2);
        close(score(&c, &traj(Outcome::RanOutOfTurns, 0, 0, 0)), -0.1);
        close(score(&c, &traj(Outcome::RanOutOfTurns, 6, 6, 0)), -0.1 - 0.2 - 0.1);
        close(score(&c, &traj(Outcome::Completed, 12, 0, 0)), 0.4 - 0.04);
        close(score(&c, &traj(Outcome::Error, 1, 1, 0)), -0.2 - 0.05 - 0.1);
    }

    #[test]
    fn handing_in_a_tool_error_ranks_below_every_search_that_ran_out_of_turns() {
        let c = RuleConfig::default();
        // Up to the call budget, every mix of failed and recovered calls on either side.
        let episodes =
            |outcome| (1..=c.call_budget).flat_map(move |calls| (0..=calls).flat_map(move |errors| (0..=errors).map(move |rec| traj(outcome, calls, errors, rec))));
        for mut gave_up in episodes(Outcome::Completed) {
            gave_up.answered_with_error = true;
            let worst = score(&c, &gave_up);
            for searched_on in episodes(Outcome::RanOutOfTurns).chain(episodes(Outcome::Completed)) {
                assert!(worst < score(&c, &searched_on), "{gave_up:?} {searched_on:?}");
            }
        }
    }
}
