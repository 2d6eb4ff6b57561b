//! A warning when GRPO seems to have broken the policy: a step whose episodes almost never answer
//! and almost never earn ground truth, after an earlier step of this run earned at least half of
//! it. At lr 1e-4 the demo's run fell so in one update and never came back (benches/RESULTS.md,
//! "Run 20"), while nothing else in the step's metrics moved; validation, which tells, may be many
//! steps away. The warning comes once, at the step, so the run can be stopped there: `final/`
//! keeps the best validated adapter either way (`crate::keep`).

use crate::row::RolloutMetrics;

/// An earlier step must have earned at least this ground truth for a fall to count.
const HEALTHY: f64 = 0.5;
/// A step counts as fallen below this share of the best earlier ground truth...
const FALLEN: f64 = 0.2;
/// ...with at most this share of its episodes completed (answered).
const ANSWERED: f64 = 0.25;

/// Watches the steps' rollout metrics in order; warns once.
#[derive(Debug, Default)]
pub(crate) struct CollapseWatch {
    best: Option<f64>,
    warned: bool,
}

impl CollapseWatch {
    /// The warning for step `m`, if its rollouts look like a broken policy for the first time.
    pub(crate) fn check(&mut self, m: &RolloutMetrics) -> Option<String> {
        let before = self.best;
        if let Some(gt) = m.ground_truth {
            self.best = Some(before.map_or(gt, |b| b.max(gt)));
        }
        let (Some(best), Some(gt)) = (before, m.ground_truth) else { return None };
        if self.warned || best < HEALTHY || gt > FALLEN * best || m.completion_rate > ANSWERED {
            return None;
        }
        self.warned = true;
        Some(format!(
            "warning: step {}: ground truth {gt:.2} with {:.0}% of the episodes answered, after {best:.2} at an earlier step: GRPO may have broken the policy\nhint: final/ keeps the best validated adapter (--eval-every validates more often); a lower --lr or a KL term to the start adapter ([loss] beta) keeps the steps smaller",
            m.step,
            100.0 * m.completion_rate
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(step: u64, ground_truth: f64, completion_rate: f64) -> RolloutMetrics {
        RolloutMetrics { ground_truth: Some(ground_truth), completion_rate, ..crate::row::tests::rollout(step) }
    }

    /// The warnings over a run's (ground truth, completion) per step.
    fn warned(run: &[(f64, f64)]) -> Vec<u64> {
        let mut watch = CollapseWatch::default();
        run.iter().zip(1..).filter_map(|(&(gt, done), s)| watch.check(&step(s, gt, done)).map(|_| s)).collect()
    }

    #[test]
    fn run_20s_falls_warn_once_and_its_dip_to_half_does_not() {
        // Training ground truth and share answered, steps 1-12, of run 20's four GRPO runs at lr
        // 1e-4 (their metrics.jsonl).
        let demo =
            [(0.82, 1.0), (0.86, 1.0), (0.73, 1.0), (0.80, 1.0), (0.84, 0.97), (0.0, 0.01), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0)];
        assert_eq!(warned(&demo), [6], "the fall in one update, warned once");
        let gmc = [
            (0.53, 1.0),
            (0.57, 1.0),
            (0.72, 1.0),
            (0.64, 1.0),
            (0.64, 1.0),
            (0.49, 1.0),
            (0.44, 0.99),
            (0.82, 1.0),
            (0.88, 1.0),
            (0.91, 0.97),
            (0.42, 0.45),
            (0.04, 0.05),
        ];
        assert_eq!(warned(&gmc), [12], "the fall over two steps, warned at the second");
        let sms = [
            (0.85, 1.0),
            (0.68, 1.0),
            (0.71, 0.98),
            (0.67, 0.84),
            (0.73, 0.78),
            (0.28, 0.30),
            (0.10, 0.11),
            (0.04, 0.05),
            (0.04, 0.11),
            (0.43, 0.62),
            (0.63, 0.97),
            (0.82, 0.99),
        ];
        assert_eq!(warned(&sms), [7], "a fall it came back from is warned too: it may not have");
        let gnd = [
            (0.72, 0.99),
            (0.75, 0.97),
            (0.79, 0.99),
            (0.73, 1.0),
            (0.78, 1.0),
            (0.76, 1.0),
            (0.74, 1.0),
            (0.53, 1.0),
            (0.50, 1.0),
            (0.82, 1.0),
            (0.81, 1.0),
            (0.80, 0.99),
        ];
        assert!(warned(&gnd).is_empty(), "a dip to 0.50 with every episode answering is no fall");
    }

    #[test]
    fn no_warning_without_a_healthy_step_before_or_while_episodes_still_answer() {
        assert!(warned(&[(0.0, 0.0), (0.0, 0.0)]).is_empty(), "a run that never learned did not break");
        assert!(warned(&[(0.3, 1.0), (0.0, 0.0)]).is_empty(), "below half at its best: not a fall from health");
        assert!(warned(&[(0.9, 1.0), (0.1, 0.9)]).is_empty(), "most episodes still answer: wrong answers, not a broken loop");
    }
}
