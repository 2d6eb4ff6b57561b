//! Which scenarios each step trains on.
//!
//! - **uniform**: every epoch is a seeded permutation of the training split, and step `s` takes
//!   the next `scenarios_per_step` of them.
//! - **adaptive**: the first `ordered_epochs` epochs go easy to hard by `difficulty` (ties in the
//!   seeded order); after that a step draws, seeded, weighted by each scenario's ground-truth pass
//!   rate over its last `window` groups: a scenario every rollout solved is retired (weight
//!   `retired_weight`), one no rollout earned any credit on is down-weighted (`unsolved_weight`)
//!   until one does, and the rest, unseen ones included, weigh 1.
//! - **frontier**: every step draws, seeded, weighted by the chance a scenario's group splits
//!   right from wrong, the share of its template's last `template_window` groups that did
//!   (Laplace-smoothed: (split + 1) / (groups + 2), so a template never seen weighs 1/2 and one
//!   that never split still gets drawn now and then), times the adaptive weight of the
//!   scenario's own groups. In a pool drawn about once per scenario, as `fit`'s GPU profile
//!   draws its train split, a scenario's own history rarely fills; its template's does within a
//!   few steps.
//!
//! Dynamic sampling's replacements for flat groups are drawn the same way, among the scenarios the
//! step has not drawn yet. Every draw follows from the seed, the step, the round and the history,
//! and the history is rebuilt from the finished steps' trajectory files, so a resumed run draws
//! exactly what the interrupted one would have.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use ta_types::{Difficulty, Scenario, Trajectory};

use crate::config::{CurriculumMode, CurriculumSettings};

/// One group's ground truth, as the curriculum remembers it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct GroupRecord {
    /// Every rollout got full credit.
    all_solved: bool,
    /// No rollout got any credit.
    none_credited: bool,
}

/// How the curriculum currently sees the training split.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct CurriculumCounts {
    /// Scenarios solved by every rollout of their last `window` groups.
    pub retired: usize,
    /// Scenarios no rollout earned ground truth on in their last `window` groups.
    pub unsolved: usize,
}

pub struct Curriculum {
    scenarios: Vec<Scenario>,
    per_step: usize,
    epochs: u32,
    seed: u64,
    settings: CurriculumSettings,
    /// The last `window` groups of each scenario, oldest first.
    history: BTreeMap<String, VecDeque<GroupRecord>>,
    /// Each scenario's template, for those that have one.
    template_of: HashMap<String, String>,
    /// Whether each of a template's last `template_window` groups split right from wrong.
    splits: HashMap<String, VecDeque<bool>>,
}

/// Appends `item`, dropping the oldest beyond the last `window`.
fn push_within<T>(h: &mut VecDeque<T>, item: T, window: usize) {
    h.push_back(item);
    while h.len() > window {
        h.pop_front();
    }
}

/// Where a difficulty sits on the easy-to-hard order: its level, or for the labels generators
/// use, easy 1, medium 3, hard 5; anything else (the demo's `join`) in the middle, with the
/// scenarios that have none.
fn rank(d: Option<&Difficulty>) -> u8 {
    match d {
        Some(Difficulty::Level(l)) => *l,
        Some(Difficulty::Label(l)) if l.eq_ignore_ascii_case("easy") => 1,
        Some(Difficulty::Label(l)) if l.eq_ignore_ascii_case("hard") => 5,
        _ => 3,
    }
}

impl Curriculum {
    pub fn new(scenarios: Vec<Scenario>, per_step: usize, epochs: u32, seed: u64, settings: CurriculumSettings) -> Self {
        let template_of = scenarios.iter().filter_map(|s| Some((s.id.clone(), s.template()?.to_string()))).collect();
        Curriculum { scenarios, per_step: per_step.max(1), epochs: epochs.max(1), seed, settings, history: BTreeMap::new(), template_of, splits: HashMap::new() }
    }

    /// Steps needed to see every epoch (the last step of an epoch may be short).
    pub fn total_steps(&self) -> u64 {
        let n = self.scenarios.len() as u64 * u64::from(self.epochs);
        n.div_ceil(self.per_step as u64)
    }

    fn order(&self, epoch: u32) -> Vec<usize> {
        let mut idx: Vec<usize> = (0..self.scenarios.len()).collect();
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed ^ (u64::from(epoch) << 32));
        idx.shuffle(&mut rng);
        if self.settings.mode == CurriculumMode::Adaptive {
            idx.sort_by_key(|&i| rank(self.scenarios[i].difficulty.as_ref()));
        }
        idx
    }

    /// The generator of round `round` of step `step`: nothing else feeds it.
    fn rng(&self, step: u64, round: u32) -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(self.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (step << 8) ^ u64::from(round))
    }

    /// The scenarios step `step` (1-based) needs.
    pub fn step(&self, step: u64) -> Vec<Scenario> {
        let n = self.scenarios.len();
        let start = (step.saturating_sub(1) as usize) * self.per_step;
        let ordered = match self.settings.mode {
            CurriculumMode::Uniform => self.epochs,
            CurriculumMode::Adaptive => self.settings.ordered_epochs.min(self.epochs),
            CurriculumMode::Frontier => 0,
        };
        if start < n * ordered as usize {
            let total = n * self.epochs as usize;
            return (start..(start + self.per_step).min(total))
                .map(|p| {
                    let order = self.order((p / n) as u32);
                    self.scenarios[order[p % n]].clone()
                })
                .collect();
        }
        // Past the ordered epochs, the last step of the run may be short like an epoch's.
        let left = n * self.epochs as usize - start.min(n * self.epochs as usize);
        self.draw(step, 0, &HashSet::new(), self.per_step.min(left))
    }

    /// Up to `count` scenarios for round `round` (1 on) of step `step`, none of them in `drawn`;
    /// round 0 adds to the step's own scenarios (`rollout.size_first_round`).
    pub fn replacements(&self, step: u64, round: u32, drawn: &HashSet<String>, count: usize) -> Vec<Scenario> {
        self.draw(step, round, drawn, count)
    }

    /// `count` scenarios outside `exclude`, without replacement, weighted by [`Curriculum::weight`]
    /// (Efraimidis–Spirakis keys `u^(1/w)`; weight 0 is never drawn).
    fn draw(&self, step: u64, round: u32, exclude: &HashSet<String>, count: usize) -> Vec<Scenario> {
        let mut rng = self.rng(step, round);
        let mut keyed: Vec<(f64, usize)> = Vec::new();
        for (i, s) in self.scenarios.iter().enumerate() {
            let u: f64 = rng.random();
            let w = self.weight(&s.id);
            if !exclude.contains(&s.id) && w > 0.0 {
                keyed.push((u.powf(1.0 / w), i));
            }
        }
        keyed.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        keyed.into_iter().take(count).map(|(_, i)| self.scenarios[i].clone()).collect()
    }

    /// A scenario's draw weight: 1 under the uniform curriculum; under the adaptive one its own
    /// groups' ([`Curriculum::own_weight`]); under the frontier one that times its template's
    /// chance to split ([`Curriculum::split_chance`]).
    pub fn weight(&self, id: &str) -> f64 {
        match self.settings.mode {
            CurriculumMode::Uniform => 1.0,
            CurriculumMode::Adaptive => self.own_weight(id),
            CurriculumMode::Frontier => self.own_weight(id) * self.split_chance(id),
        }
    }

    /// The share of the last `template_window` groups of the scenario's template that split right
    /// from wrong, Laplace-smoothed; 1/2 for a template not drawn yet or a scenario without one.
    pub fn split_chance(&self, id: &str) -> f64 {
        let seen = self.template_of.get(id).and_then(|t| self.splits.get(t));
        let (split, groups) = seen.map_or((0, 0), |h| (h.iter().filter(|&&s| s).count(), h.len()));
        (split as f64 + 1.0) / (groups as f64 + 2.0)
    }

    /// After `window` groups of the scenario, `retired_weight` when every rollout of them was
    /// solved and `unsolved_weight` when none earned any credit; 1 otherwise.
    fn own_weight(&self, id: &str) -> f64 {
        let Some(h) = self.history.get(id).filter(|h| h.len() >= self.settings.window as usize) else { return 1.0 };
        if h.iter().all(|g| g.all_solved) {
            self.settings.retired_weight
        } else if h.iter().all(|g| g.none_credited) {
            self.settings.unsolved_weight
        } else {
            1.0
        }
    }

    /// Remembers the groups of one finished step (scored trajectories); call once per step, in
    /// step order, both live and when rebuilding the history on resume. Groups without ground
    /// truth say nothing about pass rates and are left out.
    pub fn record(&mut self, trajectories: &[Trajectory]) {
        let mut groups: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        let mut no_truth: HashSet<&str> = HashSet::new();
        for t in trajectories {
            match t.reward_parts.ground_truth {
                Some(gt) => groups.entry(t.scenario_id.as_str()).or_default().push(gt),
                None => {
                    no_truth.insert(t.scenario_id.as_str());
                }
            }
        }
        let window = self.settings.window.max(1) as usize;
        let template_window = self.settings.template_window.max(1) as usize;
        for (id, gts) in groups.into_iter().filter(|(id, _)| !no_truth.contains(id)) {
            if let Some(template) = self.template_of.get(id) {
                let split = gts.iter().any(|&g| (g - gts[0]).abs() > 1e-9);
                push_within(self.splits.entry(template.clone()).or_default(), split, template_window);
            }
            let record = GroupRecord { all_solved: gts.iter().all(|&g| g >= 1.0 - 1e-9), none_credited: gts.iter().all(|&g| g <= 1e-9) };
            push_within(self.history.entry(id.to_string()).or_default(), record, window);
        }
    }

    /// Retired and down-weighted scenarios now, by their own groups (both 0 under the uniform
    /// curriculum).
    pub fn counts(&self) -> CurriculumCounts {
        let mut c = CurriculumCounts::default();
        for s in &self.scenarios {
            if self.settings.mode == CurriculumMode::Uniform || self.own_weight(&s.id) == 1.0 {
                continue;
            }
            let h = &self.history[&s.id];
            if h.iter().all(|g| g.all_solved) {
                c.retired += 1;
            } else {
                c.unsolved += 1;
            }
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ta_types::trajectory::GroupRef;

    fn scenarios(n: usize) -> Vec<Scenario> {
        let text: String = (0..n).map(|i| format!("{{\"id\": \"s{i}\", \"task\": \"t\", \"difficulty\": {}}}\n", 5 - i % 5)).collect();
        ta_types::scenario::parse_scenarios(&text, "x").unwrap()
    }

    fn uniform() -> CurriculumSettings {
        CurriculumSettings::default()
    }

    fn adaptive() -> CurriculumSettings {
        CurriculumSettings { mode: CurriculumMode::Adaptive, ..Default::default() }
    }

    /// A scored group of `n` rollouts of `id`, `solved` of them with full ground truth.
    fn group(id: &str, n: u32, solved: u32) -> Vec<Trajectory> {
        (0..n)
            .map(|i| {
                let mut t = Trajectory::start(id, GroupRef { step: 1, index: i }, "m", vec![]);
                t.reward_parts.ground_truth = Some(if i < solved { 1.0 } else { 0.0 });
                t
            })
            .collect()
    }

    fn ids(s: &[Scenario]) -> Vec<String> {
        s.iter().map(|s| s.id.clone()).collect()
    }

    #[test]
    fn each_epoch_visits_every_scenario_once_in_a_seeded_order() {
        let c = Curriculum::new(scenarios(5), 2, 2, 7, uniform());
        assert_eq!(c.total_steps(), 5);
        let ids: Vec<String> = (1..=5).flat_map(|s| c.step(s)).map(|s| s.id).collect();
        assert_eq!(ids.len(), 10);
        let mut first: Vec<_> = ids[..5].to_vec();
        first.sort();
        assert_eq!(first, vec!["s0", "s1", "s2", "s3", "s4"]);
        let again = Curriculum::new(scenarios(5), 2, 2, 7, uniform());
        assert_eq!(again.step(3), c.step(3), "a step's scenarios depend on the step number only");
        assert_ne!(Curriculum::new(scenarios(5), 5, 1, 8, uniform()).step(1), Curriculum::new(scenarios(5), 5, 1, 7, uniform()).step(1));
    }

    #[test]
    fn the_adaptive_first_epoch_goes_easy_to_hard() {
        let c = Curriculum::new(scenarios(10), 2, 3, 7, adaptive());
        let levels: Vec<u8> = (1..=5).flat_map(|s| c.step(s)).map(|s| rank(s.difficulty.as_ref())).collect();
        assert_eq!(levels, vec![1, 1, 2, 2, 3, 3, 4, 4, 5, 5]);
        let mut seen = ids(&(1..=5).flat_map(|s| c.step(s)).collect::<Vec<_>>());
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 10, "every scenario once");
        assert_eq!(c.step(6).len(), 2, "then weighted draws of a step's size");
        assert_eq!(c.total_steps(), 15);
    }

    #[test]
    fn solved_scenarios_retire_and_unsolved_ones_wait_until_one_rollout_gets_credit() {
        let settings = CurriculumSettings { retired_weight: 0.0, unsolved_weight: 0.0, ordered_epochs: 0, ..adaptive() };
        let mut c = Curriculum::new(scenarios(6), 4, 50, 1, settings);
        // s0 solved twice by all 8: retired. s1 never credited twice: down-weighted. s2 solved
        // by all once only: not yet. s3 half solved.
        for _ in 0..2 {
            c.record(&[group("s0", 8, 8), group("s1", 8, 0), group("s3", 8, 4)].concat());
        }
        c.record(&group("s2", 8, 8));
        assert_eq!((c.weight("s0"), c.weight("s1"), c.weight("s2"), c.weight("s3"), c.weight("s5")), (0.0, 0.0, 1.0, 1.0, 1.0));
        assert_eq!(c.counts(), CurriculumCounts { retired: 1, unsolved: 1 });
        for step in 1..=40 {
            let drawn = ids(&c.step(step));
            assert_eq!(drawn.len(), 4);
            assert!(!drawn.contains(&"s0".to_string()) && !drawn.contains(&"s1".to_string()), "step {step}: {drawn:?}");
        }
        // One rollout of s1 gets credit: it is back.
        c.record(&group("s1", 8, 1));
        assert_eq!(c.weight("s1"), 1.0);
        // The uniform curriculum keeps no favourites.
        let mut u = Curriculum::new(scenarios(6), 4, 1, 1, uniform());
        u.record(&[group("s0", 8, 8), group("s0", 8, 8)].concat());
        assert_eq!((u.weight("s0"), u.counts()), (1.0, CurriculumCounts::default()));
    }

    #[test]
    fn down_weighted_scenarios_are_drawn_rarely_not_never() {
        let settings = CurriculumSettings { ordered_epochs: 0, window: 1, ..adaptive() };
        let mut c = Curriculum::new(scenarios(10), 1, 5000, 3, settings);
        c.record(&[group("s0", 4, 4), group("s1", 4, 0)].concat());
        let mut hits: BTreeMap<String, usize> = BTreeMap::new();
        for step in 1..=4000 {
            *hits.entry(c.step(step)[0].id.clone()).or_default() += 1;
        }
        // Expected shares: 0.1 / 8.35, 0.25 / 8.35 and 1 / 8.35 of 4000 draws.
        let (retired, unsolved, plain) = (hits["s0"], hits["s1"], hits["s5"]);
        assert!((20..=90).contains(&retired), "{hits:?}");
        assert!((70..=190).contains(&unsolved), "{hits:?}");
        assert!((380..=580).contains(&plain), "{hits:?}");
    }

    /// `n` scenarios, the first half of template `solved`, the rest of `split`, the last without one.
    fn shaped(n: usize) -> Vec<Scenario> {
        let text: String = (0..n)
            .map(|i| match i {
                _ if i + 1 == n => format!("{{\"id\": \"s{i}\", \"task\": \"t\"}}\n"),
                _ if i < n / 2 => format!("{{\"id\": \"s{i}\", \"task\": \"t\", \"template\": \"solved\"}}\n"),
                _ => format!("{{\"id\": \"s{i}\", \"task\": \"t\", \"template\": \"split\"}}\n"),
            })
            .collect();
        ta_types::scenario::parse_scenarios(&text, "x").unwrap()
    }

    #[test]
    fn the_frontier_curriculum_draws_the_templates_whose_groups_split() {
        let settings = CurriculumSettings { mode: CurriculumMode::Frontier, template_window: 4, ..Default::default() };
        // Six groups of each template: the solved ones all right (flat), the split ones half
        // right, one all wrong (flat too), on different scenarios each (none reaches its own window).
        let history = |c: &mut Curriculum| {
            for i in 0..6 {
                let split = group(&format!("s{}", 10 + i), 8, if i == 3 { 0 } else { 4 });
                c.record(&[group(&format!("s{i}"), 8, 8), split].concat());
            }
        };
        let mut c = Curriculum::new(shaped(21), 1, 5000, 5, settings.clone());
        assert_eq!((c.split_chance("s0"), c.split_chance("s10"), c.split_chance("s20")), (0.5, 0.5, 0.5), "nothing seen yet");
        history(&mut c);
        // Only the last four groups count: none of `solved` split, three of `split`'s four.
        assert_eq!(c.split_chance("s9"), 1.0 / 6.0);
        assert_eq!(c.split_chance("s19"), 4.0 / 6.0);
        assert_eq!(c.split_chance("s20"), 0.5, "no template: the prior");
        assert_eq!(c.weight("s3"), c.split_chance("s3"), "its own groups are fewer than its window: the template alone");
        let mut hits: BTreeMap<bool, usize> = BTreeMap::new();
        for step in 1..=3000 {
            let id = c.step(step)[0].id.clone();
            *hits.entry(c.template_of.get(&id).is_some_and(|t| t == "split")).or_default() += 1;
        }
        // Expected share: 10 × 4/6 against 10 × 1/6 + 1/2 (the one without a template), 75% of
        // 3,000 draws; uniform draws would give 48%.
        assert!((2100..=2400).contains(&hits[&true]), "{hits:?}");
        // Replayed from the same history, the same draws.
        let mut again = Curriculum::new(shaped(21), 1, 5000, 5, settings);
        history(&mut again);
        assert_eq!(again.step(7), c.step(7));
        // The other curricula leave templates out of it.
        let mut adaptive = Curriculum::new(shaped(21), 1, 50, 5, CurriculumSettings { ordered_epochs: 0, ..adaptive() });
        adaptive.record(&[group("s0", 8, 8), group("s1", 8, 8)].concat());
        assert_eq!((adaptive.weight("s2"), adaptive.counts()), (1.0, CurriculumCounts::default()));
    }

    #[test]
    fn draws_follow_from_seed_step_round_and_history_alone() {
        let settings = CurriculumSettings { ordered_epochs: 0, ..adaptive() };
        let history = [group("s0", 8, 8), group("s1", 8, 0), group("s2", 8, 3)].concat();
        let build = || {
            let mut c = Curriculum::new(scenarios(8), 3, 10, 11, settings.clone());
            c.record(&history);
            c.record(&history);
            c
        };
        let (a, b) = (build(), build());
        let drawn: HashSet<String> = ids(&a.step(4)).into_iter().collect();
        assert_eq!(a.step(4), b.step(4));
        assert_eq!(a.replacements(4, 1, &drawn, 2), b.replacements(4, 1, &drawn, 2), "a resumed step draws the same replacements");
        let rounds: HashSet<Vec<String>> = (1..=6).map(|r| ids(&a.replacements(4, r, &drawn, 5))).collect();
        assert!(rounds.len() > 1, "each round draws anew (in its own order): {rounds:?}");
        let replaced = a.replacements(4, 1, &drawn, 10);
        assert_eq!(replaced.len(), 5, "every scenario the step has not drawn, down-weighted ones included");
        assert!(replaced.iter().all(|s| !drawn.contains(&s.id)));
    }
}
