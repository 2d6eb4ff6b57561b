//! The learnable frontier: the tasks a model solves sometimes but not always. GRPO learns only
//! from groups whose rollouts disagree (a group that is all right or all wrong has zero
//! advantage everywhere), so training on tasks the start model always or never solves spends
//! rollouts on nothing. `eval --rollouts K --temperature 1.0` measures each task's pass count;
//! the frontier is the tasks with `0 < pass < K`.

use std::collections::BTreeMap;

use serde::Serialize;
use ta_metrics::is_success;
use ta_types::Trajectory;

/// The least weight a group keeps in [`FrontierSummary::weights`]: a template solved every
/// time is still rehearsed, at a twentieth of an unsolved one's share.
pub const MIN_WEIGHT: f64 = 0.05;

/// One task's sampled episodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PassCount {
    pub passed: usize,
    pub episodes: usize,
}

impl PassCount {
    /// Solved sometimes, not always.
    pub fn on_frontier(self) -> bool {
        self.passed > 0 && self.passed < self.episodes
    }
}

/// Successes and episodes per scenario id.
pub fn pass_counts(trajectories: &[Trajectory]) -> BTreeMap<String, PassCount> {
    let mut out: BTreeMap<String, PassCount> = BTreeMap::new();
    for t in trajectories {
        let c = out.entry(t.scenario_id.clone()).or_insert(PassCount { passed: 0, episodes: 0 });
        c.episodes += 1;
        c.passed += usize::from(is_success(t));
    }
    out
}

/// How the measured tasks split.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FrontierSummary {
    pub tasks: usize,
    pub always: usize,
    pub never: usize,
    pub frontier: usize,
    /// Per group key (a scenario's template, say): (tasks, frontier tasks, mean pass rate).
    pub per_group: BTreeMap<String, (usize, usize, f64)>,
}

impl FrontierSummary {
    /// Tallies `counts`, grouped by `group_of(id)`.
    pub fn of(counts: &BTreeMap<String, PassCount>, group_of: impl Fn(&str) -> String) -> Self {
        let mut s = FrontierSummary { tasks: counts.len(), ..Default::default() };
        let mut rates: BTreeMap<String, (usize, usize, f64)> = BTreeMap::new();
        for (id, c) in counts {
            match c.passed {
                0 => s.never += 1,
                p if p == c.episodes => s.always += 1,
                _ => s.frontier += 1,
            }
            let g = rates.entry(group_of(id)).or_default();
            g.0 += 1;
            g.1 += usize::from(c.on_frontier());
            g.2 += c.passed as f64 / c.episodes.max(1) as f64;
        }
        s.per_group = rates.into_iter().map(|(k, (n, f, sum))| (k, (n, f, sum / n.max(1) as f64))).collect();
        s
    }

    /// Each group's share of failed episodes (1 − its mean pass rate, at least [`MIN_WEIGHT`]):
    /// the weights `scenarios synth --template-weights` draws templates by, so that a new task set
    /// holds more of the shapes the model gets wrong (adaptive synthesis).
    pub fn weights(&self) -> BTreeMap<String, f64> {
        self.per_group.iter().map(|(k, &(_, _, rate))| (k.clone(), (1.0 - rate).max(MIN_WEIGHT))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(pairs: &[(&str, usize, usize)]) -> BTreeMap<String, PassCount> {
        pairs.iter().map(|(id, passed, episodes)| (id.to_string(), PassCount { passed: *passed, episodes: *episodes })).collect()
    }

    #[test]
    fn the_frontier_is_the_tasks_solved_sometimes() {
        let c = counts(&[("a", 0, 8), ("b", 3, 8), ("c", 8, 8), ("d", 1, 8), ("e", 7, 8)]);
        let frontier: Vec<&str> = c.iter().filter(|(_, c)| c.on_frontier()).map(|(id, _)| id.as_str()).collect();
        assert_eq!(frontier, ["b", "d", "e"]);
        let s = FrontierSummary::of(&c, |id| if id < "c" { "low".into() } else { "high".into() });
        assert_eq!((s.tasks, s.always, s.never, s.frontier), (5, 1, 1, 3));
        assert_eq!(s.per_group["low"], (2, 1, 3.0 / 16.0));
        assert_eq!(s.per_group["high"].1, 2);
    }

    #[test]
    fn a_single_episode_is_never_on_the_frontier() {
        assert!(!PassCount { passed: 1, episodes: 1 }.on_frontier());
        assert!(!PassCount { passed: 0, episodes: 1 }.on_frontier());
    }

    #[test]
    fn weights_follow_the_failures_and_never_vanish() {
        let c = counts(&[("a1", 0, 4), ("a2", 2, 4), ("b1", 4, 4), ("b2", 4, 4), ("c1", 3, 4)]);
        let w = FrontierSummary::of(&c, |id| id[..1].to_string()).weights();
        assert_eq!(w["a"], 0.75, "a1 failed every episode, a2 half of them");
        assert_eq!(w["b"], MIN_WEIGHT, "always solved: still drawn, rarely");
        assert_eq!(w["c"], 0.25);
    }
}
