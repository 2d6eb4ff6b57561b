//! Group-relative advantages: each rollout's reward minus its group's mean, optionally divided by
//! a standard deviation (GRPO; Dr. GRPO drops the division). A group whose rewards are all equal
//! carries no signal and is skipped, and counted, rather than trained on with zeros.
//!
//! Which spread divides matters once rewards mix correctness with a small tie-break: dividing by
//! the rewards' own std blows a tie-break difference (seven right answers and one right answer
//! with a recovered tool error) up to the size of a correctness difference (seven right and one
//! wrong). Dividing by the ground truth's std instead keeps correctness groups at GRPO's scale and
//! leaves groups whose answers are equally correct at the tie-break's own, small, size.

/// What happened to one group.
#[derive(Debug, Clone, PartialEq)]
pub enum GroupStats {
    /// Advantages, one per rollout, in the group's order.
    Trained(Vec<f64>),
    /// All rewards equal (within 1e-9): nothing to learn.
    ZeroVariance,
}

/// Sample standard deviation.
fn std_dev(xs: &[f64]) -> f64 {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
}

/// Advantages of one group. `spread`: the values (one per rollout) whose standard deviation
/// divides the centred rewards: the rewards themselves (GRPO), the ground truth (GRPO under the
/// correctness-first reward), or `None` (Dr. GRPO). A spread without variance divides by 1.
pub fn group_advantages(rewards: &[f64], spread: Option<&[f64]>) -> GroupStats {
    if rewards.len() < 2 || std_dev(rewards) < 1e-9 {
        return GroupStats::ZeroVariance;
    }
    let mean = rewards.iter().sum::<f64>() / rewards.len() as f64;
    let scale = spread.map(std_dev).filter(|s| *s >= 1e-9).map_or(1.0, |s| s + 1e-6);
    GroupStats::Trained(rewards.iter().map(|r| (r - mean) / scale).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_centred_with_and_without_std() {
        let r = [1.0, 0.0, 0.0, 1.0];
        let GroupStats::Trained(a) = group_advantages(&r, None) else { panic!() };
        assert_eq!(a, vec![0.5, -0.5, -0.5, 0.5]);
        let GroupStats::Trained(a) = group_advantages(&r, Some(&r)) else { panic!() };
        // sample std of [1,0,0,1] = sqrt(1/3)
        let s = (1.0f64 / 3.0).sqrt() + 1e-6;
        assert!((a[0] - 0.5 / s).abs() < 1e-12 && (a[1] + 0.5 / s).abs() < 1e-12);
        assert!((a.iter().sum::<f64>()).abs() < 1e-12);
    }

    #[test]
    fn a_spread_without_variance_leaves_the_advantages_unscaled() {
        let GroupStats::Trained(a) = group_advantages(&[1.1, 1.0], Some(&[1.0, 1.0])) else { panic!() };
        assert!((a[0] - 0.05).abs() < 1e-12 && (a[1] + 0.05).abs() < 1e-12);
    }

    #[test]
    fn flat_or_single_groups_are_skipped() {
        assert_eq!(group_advantages(&[0.3, 0.3, 0.3], Some(&[0.3, 0.3, 0.3])), GroupStats::ZeroVariance);
        assert_eq!(group_advantages(&[0.3, 0.3], Some(&[0.0, 1.0])), GroupStats::ZeroVariance, "the rewards decide, not the spread");
        assert_eq!(group_advantages(&[1.0], None), GroupStats::ZeroVariance);
    }
}
