//! How well the judge agrees with ground truth, on trajectories that have both: the share where
//! "judge ≥ 0.5" and "ground truth ≥ 0.5" agree, and the Pearson correlation of the two scores.
//! A judge that disagrees often with verifiable answers should not be trusted where there are none.

use serde::Serialize;
use ta_types::Trajectory;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Agreement {
    /// Trajectories with both a judge score and a ground-truth score.
    pub compared: usize,
    pub agree: usize,
    /// `agree / compared`.
    pub rate: Option<f64>,
    /// Pearson correlation; `None` when either score is constant.
    pub correlation: Option<f64>,
    /// Judge passes, ground truth fails (the judge is too lenient).
    pub judge_only: usize,
    /// Ground truth passes, judge fails (the judge is too strict).
    pub ground_truth_only: usize,
}

pub fn agreement(trajectories: &[Trajectory]) -> Agreement {
    let pairs: Vec<(f64, f64)> = trajectories.iter().filter_map(|t| Some((t.reward_parts.judge?, t.reward_parts.ground_truth?))).collect();
    let pass = |x: f64| x >= 0.5;
    let agree = pairs.iter().filter(|(j, g)| pass(*j) == pass(*g)).count();
    Agreement {
        compared: pairs.len(),
        agree,
        rate: (!pairs.is_empty()).then(|| agree as f64 / pairs.len() as f64),
        correlation: pearson(&pairs),
        judge_only: pairs.iter().filter(|(j, g)| pass(*j) && !pass(*g)).count(),
        ground_truth_only: pairs.iter().filter(|(j, g)| !pass(*j) && pass(*g)).count(),
    }
}

fn pearson(pairs: &[(f64, f64)]) -> Option<f64> {
    let n = pairs.len() as f64;
    if pairs.len() < 2 {
        return None;
    }
    let (mx, my) = (pairs.iter().map(|p| p.0).sum::<f64>() / n, pairs.iter().map(|p| p.1).sum::<f64>() / n);
    let cov: f64 = pairs.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    let vx: f64 = pairs.iter().map(|(x, _)| (x - mx).powi(2)).sum();
    let vy: f64 = pairs.iter().map(|(_, y)| (y - my).powi(2)).sum();
    (vx > 0.0 && vy > 0.0).then(|| cov / (vx * vy).sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ta_types::trajectory::GroupRef;

    fn t(judge: Option<f64>, gt: Option<f64>) -> Trajectory {
        let mut t = Trajectory::start("s", GroupRef::default(), "m", vec![]);
        (t.reward_parts.judge, t.reward_parts.ground_truth) = (judge, gt);
        t
    }

    #[test]
    fn agreement_counts_pass_fail_matches_and_correlation() {
        let ts = [t(Some(0.9), Some(1.0)), t(Some(0.1), Some(0.0)), t(Some(0.8), Some(0.0)), t(Some(0.2), Some(1.0)), t(None, Some(1.0)), t(Some(1.0), None)];
        let a = agreement(&ts);
        assert_eq!((a.compared, a.agree, a.judge_only, a.ground_truth_only), (4, 2, 1, 1));
        assert_eq!(a.rate, Some(0.5));
        let r = a.correlation.unwrap();
        assert!((r - 0.1 / 0.5f64.sqrt()).abs() < 1e-9, "{r}");
        let perfect = agreement(&[t(Some(1.0), Some(1.0)), t(Some(0.0), Some(0.0))]);
        assert_eq!((perfect.rate, perfect.correlation), (Some(1.0), Some(1.0)));
        assert_eq!(agreement(&[]).rate, None);
    }
}
