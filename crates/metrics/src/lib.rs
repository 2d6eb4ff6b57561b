//! The numbers that say whether training worked, computed from trajectories alone.
//!
//! **Success** (what "task completion rate" counts) is decided per trajectory, by the strongest
//! evidence it carries:
//! 1. ground truth, when the scenario has `expected` (the trajectory has a `ground_truth` reward
//!    part): success means full credit, which the ground-truth scorer only gives to a rollout that
//!    called `complete_task` with a matching answer;
//! 2. else the judge's score, when a judge scored it: success means `judge >= 0.5`;
//! 3. else the agent finished: it called `complete_task` (outcome `completed`).
//!
//! [`Basis`] counts how many trajectories each rule decided, so a report can say how much of the
//! rate rests on ground truth.

pub mod paired;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use ta_types::{Outcome, Trajectory};

use crate::paired::{BootstrapMean, Paired, bootstrap_mean, paired_bootstrap};

/// z for a two-sided 95% interval.
const Z95: f64 = 1.959_963_984_540_054;

/// Whether `t` accomplished its task (see the module docs for the rule).
pub fn is_success(t: &Trajectory) -> bool {
    match (t.reward_parts.ground_truth, t.reward_parts.judge) {
        (Some(gt), _) => gt >= 1.0 - 1e-9,
        (None, Some(judge)) => judge >= 0.5,
        (None, None) => t.outcome == Outcome::Completed,
    }
}

/// How many trajectories each success rule decided.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Basis {
    pub ground_truth: usize,
    pub judge: usize,
    pub completion: usize,
}

/// A 95% Wilson score interval for a proportion `successes / n`; `None` when `n` is 0. Unlike the
/// normal approximation it stays inside [0, 1] and is honest for small `n` and rates near 0 or 1.
pub fn wilson_interval(successes: usize, n: usize) -> Option<(f64, f64)> {
    if n == 0 {
        return None;
    }
    let (s, n) = (successes as f64, n as f64);
    let p = s / n;
    let z2 = Z95 * Z95;
    let denom = 1.0 + z2 / n;
    let center = (p + z2 / (2.0 * n)) / denom;
    let half = Z95 * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denom;
    Some(((center - half).max(0.0), (center + half).min(1.0)))
}

/// The unbiased pass@k estimator (Chen et al. 2021, "Evaluating Large Language Models Trained on
/// Code"): the chance that at least one of `k` samples drawn without replacement from `n`
/// samples, `c` of them correct, is correct: `1 - C(n-c, k) / C(n, k)`, computed as a product so
/// it never overflows.
pub fn pass_at_k(n: usize, c: usize, k: usize) -> f64 {
    assert!(k >= 1 && k <= n && c <= n, "pass@k needs 1 <= k <= n and c <= n (n={n}, c={c}, k={k})");
    if n - c < k {
        return 1.0;
    }
    1.0 - ((n - c + 1)..=n).map(|i| 1.0 - k as f64 / i as f64).product::<f64>()
}

/// Metrics of one set of trajectories (one model on one data set). Per-task values are means over
/// trajectories (one trajectory is one attempt at one task); rates are `None` for an empty set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    pub trajectories: usize,
    pub scenarios: usize,
    pub successes: usize,
    /// Task completion rate: the share of successful trajectories.
    pub success_rate: Option<f64>,
    /// 95% Wilson interval of `success_rate`, `[low, high]`.
    pub success_ci95: Option<[f64; 2]>,
    pub basis: Basis,
    /// pass@k for k = 1..=K, where K is the fewest samples any scenario has; empty when K = 1.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pass_at_k: BTreeMap<u32, f64>,
    pub tool_calls_per_task: Option<f64>,
    pub turns_per_task: Option<f64>,
    /// Trajectories with at least one failed tool call.
    pub with_tool_errors: usize,
    /// Of those, the share that still succeeded; `None` when no call failed.
    pub error_recovery_rate: Option<f64>,
    pub ran_out_of_turns_rate: Option<f64>,
    /// The share that called `complete_task` with a tool error as the answer
    /// ([`Trajectory::answered_with_error`]); absent in evaluations written before it was kept.
    #[serde(default)]
    pub answered_with_error_rate: Option<f64>,
    /// Prompt plus completion tokens per trajectory (every turn's prompt counts).
    pub tokens_per_task: Option<f64>,
    pub completion_tokens_per_task: Option<f64>,
    pub mean_reward: Option<f64>,
    /// Wall-clock seconds per trajectory (model and tools).
    pub seconds_per_task: Option<f64>,
    /// Wall-clock seconds of all trajectories added up (more than elapsed time when they overlap).
    pub total_seconds: f64,
    /// Trajectories per outcome (`completed`, `ran_out_of_turns`, `error`, `context_exceeded`).
    pub outcomes: BTreeMap<String, usize>,
}

impl Metrics {
    pub fn of(trajectories: &[Trajectory]) -> Metrics {
        let n = trajectories.len();
        let mean = |f: &dyn Fn(&Trajectory) -> f64| (n > 0).then(|| trajectories.iter().map(f).sum::<f64>() / n as f64);
        let successes = trajectories.iter().filter(|t| is_success(t)).count();
        let mut basis = Basis::default();
        let mut outcomes = BTreeMap::new();
        for t in trajectories {
            match (t.reward_parts.ground_truth, t.reward_parts.judge) {
                (Some(_), _) => basis.ground_truth += 1,
                (None, Some(_)) => basis.judge += 1,
                (None, None) => basis.completion += 1,
            }
            *outcomes.entry(outcome_name(t.outcome).to_string()).or_insert(0) += 1;
        }
        let with_errors: Vec<&Trajectory> = trajectories.iter().filter(|t| t.tool_errors > 0).collect();
        let recovered = with_errors.iter().filter(|t| is_success(t)).count();
        let rewards: Vec<f64> = trajectories.iter().filter_map(|t| t.reward).collect();
        let total_seconds = trajectories.iter().map(|t| t.timings.total_ms as f64 / 1000.0).sum::<f64>();
        let per_scenario = per_scenario_counts(trajectories);
        Metrics {
            trajectories: n,
            scenarios: per_scenario.len(),
            successes,
            success_rate: (n > 0).then(|| successes as f64 / n as f64),
            success_ci95: wilson_interval(successes, n).map(|(lo, hi)| [lo, hi]),
            basis,
            pass_at_k: pass_at_k_table(&per_scenario),
            tool_calls_per_task: mean(&|t| f64::from(t.tool_calls)),
            turns_per_task: mean(&|t| f64::from(t.num_turns)),
            with_tool_errors: with_errors.len(),
            error_recovery_rate: (!with_errors.is_empty()).then(|| recovered as f64 / with_errors.len() as f64),
            ran_out_of_turns_rate: mean(&|t| f64::from(u8::from(t.outcome == Outcome::RanOutOfTurns))),
            answered_with_error_rate: mean(&|t| f64::from(u8::from(t.answered_with_error))),
            tokens_per_task: mean(&|t| (t.prompt_tokens() + t.completion_tokens()) as f64),
            completion_tokens_per_task: mean(&|t| t.completion_tokens() as f64),
            mean_reward: (!rewards.is_empty()).then(|| rewards.iter().sum::<f64>() / rewards.len() as f64),
            seconds_per_task: (n > 0).then(|| total_seconds / n as f64),
            total_seconds,
            outcomes,
        }
    }
}

/// The snake_case name of an outcome, as in trajectory files.
pub fn outcome_name(o: Outcome) -> &'static str {
    match o {
        Outcome::Completed => "completed",
        Outcome::RanOutOfTurns => "ran_out_of_turns",
        Outcome::Error => "error",
        Outcome::ContextExceeded => "context_exceeded",
    }
}

/// (samples, successes) per scenario id, in id order.
fn per_scenario_counts(trajectories: &[Trajectory]) -> BTreeMap<&str, (usize, usize)> {
    let mut m: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for t in trajectories {
        let e = m.entry(t.scenario_id.as_str()).or_default();
        e.0 += 1;
        e.1 += usize::from(is_success(t));
    }
    m
}

fn pass_at_k_table(per_scenario: &BTreeMap<&str, (usize, usize)>) -> BTreeMap<u32, f64> {
    let k_max = per_scenario.values().map(|&(n, _)| n).min().unwrap_or(0);
    if k_max < 2 {
        return BTreeMap::new();
    }
    (1..=k_max)
        .map(|k| {
            let sum: f64 = per_scenario.values().map(|&(n, c)| pass_at_k(n, c, k)).sum();
            (k as u32, sum / per_scenario.len() as f64)
        })
        .collect()
}

/// pass@1 and pass@k of `k` sampled episodes per task, each with a 95% interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampledPass {
    /// Episodes per task (the fewest any task has).
    pub k: usize,
    pub tasks: usize,
    /// The mean over tasks of the share of successful samples.
    pub pass1: BootstrapMean,
    /// The mean over tasks of the unbiased pass@k.
    pub pass_at_k: BootstrapMean,
}

/// [`SampledPass`] of `trajectories` (several per scenario). The intervals come from resampling
/// tasks, not episodes: a task's samples succeed or fail together more often than independent
/// draws would, so a binomial interval over all episodes would be too narrow. `None` for no
/// trajectories.
pub fn sampled_pass(trajectories: &[Trajectory]) -> Option<SampledPass> {
    let per_scenario = per_scenario_counts(trajectories);
    let k = per_scenario.values().map(|&(n, _)| n).min()?;
    let pass1: Vec<f64> = per_scenario.values().map(|&(n, c)| c as f64 / n as f64).collect();
    let pass_k: Vec<f64> = per_scenario.values().map(|&(n, c)| pass_at_k(n, c, k)).collect();
    let boot = |v: &[f64]| bootstrap_mean(v, crate::paired::RESAMPLES, crate::paired::SEED);
    Some(SampledPass { k, tasks: per_scenario.len(), pass1: boot(&pass1)?, pass_at_k: boot(&pass_k)? })
}

/// How a scenario went for the trained model compared with the base model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// The trained model succeeded more often.
    Win,
    Loss,
    Tie,
}

/// One model's results on one scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    pub samples: usize,
    pub successes: usize,
    pub success_rate: f64,
    pub mean_reward: Option<f64>,
}

/// One scenario, base against trained.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioRow {
    pub scenario_id: String,
    pub base: Cell,
    pub trained: Cell,
    pub verdict: Verdict,
}

/// The per-scenario table of two models on the same scenarios (`base` the one compared against:
/// the base model, or the adapter training started from), with the paired test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub rows: Vec<ScenarioRow>,
    pub wins: usize,
    pub losses: usize,
    pub ties: usize,
    /// The paired test on per-scenario success; `None` without shared scenarios (and in
    /// `eval.json` files written before it existed).
    #[serde(default)]
    pub paired: Option<Paired>,
}

fn cells(trajectories: &[Trajectory]) -> BTreeMap<String, Cell> {
    let mut by: BTreeMap<String, Vec<&Trajectory>> = BTreeMap::new();
    for t in trajectories {
        by.entry(t.scenario_id.clone()).or_default().push(t);
    }
    by.into_iter()
        .map(|(id, ts)| {
            let successes = ts.iter().filter(|t| is_success(t)).count();
            let rewards: Vec<f64> = ts.iter().filter_map(|t| t.reward).collect();
            let cell = Cell {
                samples: ts.len(),
                successes,
                success_rate: successes as f64 / ts.len() as f64,
                mean_reward: (!rewards.is_empty()).then(|| rewards.iter().sum::<f64>() / rewards.len() as f64),
            };
            (id, cell)
        })
        .collect()
}

/// Compares scenario by scenario (those both sets hold): a win when the trained model's success
/// rate is higher, a loss when lower, a tie when equal.
pub fn compare(base: &[Trajectory], trained: &[Trajectory]) -> Comparison {
    let base = cells(base);
    let mut rows = Vec::new();
    for (id, t) in cells(trained) {
        let Some(b) = base.get(&id) else { continue };
        let verdict = match t.success_rate.partial_cmp(&b.success_rate) {
            Some(std::cmp::Ordering::Greater) => Verdict::Win,
            Some(std::cmp::Ordering::Less) => Verdict::Loss,
            _ => Verdict::Tie,
        };
        rows.push(ScenarioRow { scenario_id: id, base: b.clone(), trained: t, verdict });
    }
    let count = |v| rows.iter().filter(|r| r.verdict == v).count();
    let pairs: Vec<(f64, f64)> = rows.iter().map(|r| (r.base.success_rate, r.trained.success_rate)).collect();
    let paired = paired_bootstrap(&pairs, crate::paired::RESAMPLES, crate::paired::SEED);
    Comparison { wins: count(Verdict::Win), losses: count(Verdict::Loss), ties: count(Verdict::Tie), rows, paired }
}

fn pct(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{:.1}%", 100.0 * v))
}

fn num(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{v:.2}"))
}

/// A terminal table with one column per model, e.g. `[("base", &m0), ("trained", &m1)]`.
pub fn metrics_table(columns: &[(&str, &Metrics)]) -> String {
    let header: Vec<String> = columns.iter().map(|(name, _)| name.to_string()).collect();
    render_table("", &header, &metric_rows(columns))
}

/// The rows of [`metrics_table`]: a metric's name, then its value for each model, formatted.
pub fn metric_rows(columns: &[(&str, &Metrics)]) -> Vec<(String, Vec<String>)> {
    let mut rows: Vec<(String, Vec<String>)> = vec![
        ("trajectories".into(), columns.iter().map(|(_, m)| format!("{} ({} scenarios)", m.trajectories, m.scenarios)).collect()),
        ("task completion".into(), columns.iter().map(|(_, m)| pct(m.success_rate)).collect()),
        ("  95% CI".into(), columns.iter().map(|(_, m)| m.success_ci95.map_or("-".into(), |[lo, hi]| format!("{:.1}-{:.1}%", 100.0 * lo, 100.0 * hi))).collect()),
    ];
    let ks: std::collections::BTreeSet<u32> = columns.iter().flat_map(|(_, m)| m.pass_at_k.keys().copied()).collect();
    for k in ks.iter().filter(|&&k| k == 1 || Some(&k) == ks.last()) {
        rows.push((format!("pass@{k}"), columns.iter().map(|(_, m)| pct(m.pass_at_k.get(k).copied())).collect()));
    }
    type Format = fn(&Metrics) -> String;
    let more: [(&str, Format); 9] = [
        ("mean reward", |m| m.mean_reward.map_or("-".into(), |v| format!("{v:.3}"))),
        ("tool calls / task", |m| num(m.tool_calls_per_task)),
        ("turns / task", |m| num(m.turns_per_task)),
        ("error recovery", |m| format!("{} of {}", pct(m.error_recovery_rate), m.with_tool_errors)),
        ("ran out of turns", |m| pct(m.ran_out_of_turns_rate)),
        ("error as answer", |m| pct(m.answered_with_error_rate)),
        ("tokens / task", |m| m.tokens_per_task.map_or("-".into(), |v| format!("{v:.0}"))),
        ("seconds / task", |m| num(m.seconds_per_task)),
        ("success judged by", |m| format!("gt {} judge {} done {}", m.basis.ground_truth, m.basis.judge, m.basis.completion)),
    ];
    rows.extend(more.iter().map(|(name, f)| (name.to_string(), columns.iter().map(|(_, m)| f(m)).collect())));
    rows
}

impl Comparison {
    /// The per-scenario table: success counts of each model (`base`, `trained` name the columns)
    /// and the verdict.
    pub fn table(&self, base: &str, trained: &str) -> String {
        let header = vec![base.to_string(), trained.to_string(), "".to_string()];
        let rows: Vec<(String, Vec<String>)> = self
            .rows
            .iter()
            .map(|r| {
                let cell = |c: &Cell| format!("{}/{}", c.successes, c.samples);
                let verdict = match r.verdict {
                    Verdict::Win => "win",
                    Verdict::Loss => "LOSS",
                    Verdict::Tie => "tie",
                };
                (r.scenario_id.clone(), vec![cell(&r.base), cell(&r.trained), verdict.to_string()])
            })
            .collect();
        let paired = self.paired.as_ref().map(|p| format!("\n{}", p.line(base, trained))).unwrap_or_default();
        format!("{}\n{} wins, {} losses, {} ties{paired}", render_table("scenario", &header, &rows), self.wins, self.losses, self.ties)
    }
}

/// Left-aligned columns separated by two spaces.
fn render_table(corner: &str, header: &[String], rows: &[(String, Vec<String>)]) -> String {
    let w0 = rows.iter().map(|(n, _)| n.chars().count()).chain([corner.len()]).max().unwrap_or(0);
    let widths: Vec<usize> = (0..header.len()).map(|i| rows.iter().map(|(_, c)| c[i].chars().count()).chain([header[i].chars().count()]).max().unwrap_or(0)).collect();
    let line = |first: &str, cells: &[String]| {
        let mut s = format!("{first:<w0$}");
        for (c, w) in cells.iter().zip(&widths) {
            s.push_str(&format!("  {c:<w$}"));
        }
        s.trim_end().to_string()
    };
    let mut out = vec![line(corner, header)];
    out.extend(rows.iter().map(|(n, c)| line(n, c)));
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use ta_types::trajectory::{GroupRef, Timings, Turn};

    /// A trajectory of `scenario` with the given outcome, tool calls and failed calls.
    fn traj(scenario: &str, outcome: Outcome, calls: u32, errors: u32, gt: Option<f64>) -> Trajectory {
        let mut t = Trajectory::start(scenario, GroupRef::default(), "m", vec![]);
        t.outcome = outcome;
        t.tool_calls = calls;
        t.tool_errors = errors;
        t.num_turns = calls + 1;
        t.reward_parts.ground_truth = gt;
        t.reward = gt;
        t.turns = vec![Turn { prompt_tokens: 100, completion_tokens: 20, ..Default::default() }; t.num_turns as usize];
        t.timings = Timings { total_ms: 1500, model_ms: 1000, tools_ms: 500, isolation_ms: 0 };
        t
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-4
    }

    #[test]
    fn wilson_interval_matches_published_values() {
        // 8 of 10: (0.4902, 0.9433) as in Wilson (1927) tables / statsmodels proportion_confint(method="wilson").
        let (lo, hi) = wilson_interval(8, 10).unwrap();
        assert!(close(lo, 0.4902) && close(hi, 0.9433), "{lo} {hi}");
        let (lo, hi) = wilson_interval(0, 5).unwrap();
        assert!(lo == 0.0 && close(hi, 0.4345), "{hi}");
        let (lo, hi) = wilson_interval(5, 5).unwrap();
        assert!(close(lo, 0.5655) && hi == 1.0, "{lo}");
        assert_eq!(wilson_interval(0, 0), None);
    }

    #[test]
    fn pass_at_k_is_the_unbiased_estimator() {
        // n=5, c=2, k=2: 1 - C(3,2)/C(5,2) = 1 - 3/10.
        assert!(close(pass_at_k(5, 2, 2), 0.7));
        assert!(close(pass_at_k(5, 2, 1), 0.4), "pass@1 is c/n");
        assert_eq!(pass_at_k(4, 0, 4), 0.0);
        assert_eq!(pass_at_k(4, 1, 4), 1.0, "n-c < k: some sample is always correct");
        // Large n stays finite (a factorial would overflow).
        let p = pass_at_k(1000, 10, 100);
        assert!(p > 0.0 && p < 1.0);
    }

    #[test]
    fn empty_set_has_no_rates() {
        let m = Metrics::of(&[]);
        assert_eq!(m.trajectories, 0);
        assert_eq!(m.success_rate, None);
        assert_eq!(m.success_ci95, None);
        assert_eq!(m.error_recovery_rate, None);
        assert_eq!(m.tokens_per_task, None);
        assert!(m.pass_at_k.is_empty());
        assert!(metrics_table(&[("empty", &m)]).contains("task completion    -"));
    }

    #[test]
    fn no_tool_calls_means_no_recovery_rate_and_completion_counts_without_ground_truth() {
        let ts = vec![traj("a", Outcome::Completed, 0, 0, None), traj("b", Outcome::RanOutOfTurns, 0, 0, None)];
        let m = Metrics::of(&ts);
        assert_eq!(m.tool_calls_per_task, Some(0.0));
        assert_eq!(m.with_tool_errors, 0);
        assert_eq!(m.error_recovery_rate, None);
        assert_eq!(m.successes, 1, "no ground truth, no judge: success is calling complete_task");
        assert_eq!(m.basis, Basis { ground_truth: 0, judge: 0, completion: 2 });
        assert_eq!(m.ran_out_of_turns_rate, Some(0.5));
        assert_eq!(m.answered_with_error_rate, Some(0.0));
        assert_eq!(m.tokens_per_task, Some(120.0));
        assert_eq!(m.turns_per_task, Some(1.0));
    }

    #[test]
    fn all_failures() {
        let ts: Vec<_> = (0..4).map(|i| traj(&format!("s{}", i % 2), Outcome::RanOutOfTurns, 3, 3, Some(0.0))).collect();
        let m = Metrics::of(&ts);
        assert_eq!(m.success_rate, Some(0.0));
        let [lo, hi] = m.success_ci95.unwrap();
        assert!(lo == 0.0 && close(hi, 0.4899), "{hi}");
        assert_eq!(m.error_recovery_rate, Some(0.0));
        assert_eq!(m.ran_out_of_turns_rate, Some(1.0));
        assert_eq!(m.pass_at_k, BTreeMap::from([(1, 0.0), (2, 0.0)]));
        assert_eq!(m.outcomes, BTreeMap::from([("ran_out_of_turns".to_string(), 4)]));
        assert!(close(m.total_seconds, 6.0));
    }

    #[test]
    fn errors_then_recovery() {
        let recovered = {
            let mut t = traj("q", Outcome::Completed, 3, 1, Some(1.0));
            t.recovered_errors = 1;
            t
        };
        let mut gave_up = traj("q", Outcome::Completed, 2, 2, Some(0.0));
        gave_up.answered_with_error = true;
        let clean = traj("r", Outcome::Completed, 1, 0, Some(1.0));
        let m = Metrics::of(&[recovered, gave_up, clean]);
        assert_eq!(m.with_tool_errors, 2);
        assert_eq!(m.answered_with_error_rate, Some(1.0 / 3.0), "one handed its error in as the answer");
        let rows = metric_rows(&[("m", &m)]);
        assert!(rows.contains(&("error as answer".to_string(), vec!["33.3%".to_string()])), "{rows:?}");
        assert_eq!(m.error_recovery_rate, Some(0.5), "one of the two with a failed call still succeeded");
        assert_eq!(m.successes, 2);
        assert!(m.pass_at_k.is_empty(), "scenario r has one sample: no pass@k");
    }

    #[test]
    fn ground_truth_outranks_judge_and_partial_credit_is_not_success() {
        let mut judged = traj("j", Outcome::Completed, 1, 0, None);
        judged.reward_parts.judge = Some(0.7);
        let mut judged_low = judged.clone();
        judged_low.reward_parts.judge = Some(0.3);
        let mut both = traj("g", Outcome::Completed, 1, 0, Some(0.0));
        both.reward_parts.judge = Some(1.0);
        let half = traj("h", Outcome::RanOutOfTurns, 1, 0, Some(0.5));
        assert!(is_success(&judged));
        assert!(!is_success(&judged_low));
        assert!(!is_success(&both), "ground truth decides when present");
        assert!(!is_success(&half), "the right answer without complete_task is half credit, not success");
        let m = Metrics::of(&[judged, judged_low, both, half]);
        assert_eq!(m.basis, Basis { ground_truth: 2, judge: 2, completion: 0 });
    }

    #[test]
    fn sampled_pass_counts_tasks_not_episodes() {
        let ok = |s: &str| traj(s, Outcome::Completed, 1, 0, Some(1.0));
        let bad = |s: &str| traj(s, Outcome::Completed, 1, 0, Some(0.0));
        // a: 2/2, b: 1/2, c: 0/2 (and a third sample of c, which k = 2 does not see in pass@k).
        let ts = vec![ok("a"), ok("a"), ok("b"), bad("b"), bad("c"), bad("c"), bad("c")];
        let s = sampled_pass(&ts).unwrap();
        assert_eq!((s.k, s.tasks), (2, 3));
        assert!(close(s.pass1.mean, 0.5) && close(s.pass_at_k.mean, 2.0 / 3.0), "{s:?}");
        assert!(s.pass1.ci95[0] < 0.5 && s.pass1.ci95[1] > 0.5 && s.pass_at_k.ci95[1] <= 1.0, "{s:?}");
        assert_eq!(sampled_pass(&[]), None);
    }

    #[test]
    fn pass_at_k_over_scenarios_and_per_scenario_comparison() {
        let ok = |s: &str| traj(s, Outcome::Completed, 1, 0, Some(1.0));
        let bad = |s: &str| traj(s, Outcome::Completed, 1, 0, Some(0.0));
        let trained = vec![ok("a"), ok("a"), ok("b"), bad("b"), bad("c"), bad("c")];
        let base = vec![bad("a"), bad("a"), ok("b"), bad("b"), ok("c"), bad("c"), ok("only-base"), ok("only-base")];
        let m = Metrics::of(&trained);
        // pass@1 = mean(1, 0.5, 0); pass@2 = mean(1, 1, 0).
        assert!(close(m.pass_at_k[&1], 0.5) && close(m.pass_at_k[&2], 2.0 / 3.0), "{:?}", m.pass_at_k);
        let c = compare(&base, &trained);
        assert_eq!(c.rows.len(), 3, "only scenarios both models played");
        assert_eq!((c.wins, c.losses, c.ties), (1, 1, 1));
        assert_eq!(c.rows[0].verdict, Verdict::Win);
        assert_eq!(c.rows[2].verdict, Verdict::Loss);
        let table = c.table("base", "trained");
        assert!(table.contains("a         0/2   2/2      win"), "{table}");
        assert!(table.contains("\n1 wins, 1 losses, 1 ties\n"), "{table}");
        let p = c.paired.as_ref().unwrap();
        assert_eq!((p.better, p.worse, p.tasks, p.mcnemar_p), (1, 1, 3, 1.0));
        assert!(close(p.diff, 0.5 / 3.0), "a: +1, b: 0, c: -0.5 -> mean {}", p.diff);
        assert!(table.ends_with(&p.line("base", "trained")), "{table}");
    }
}
