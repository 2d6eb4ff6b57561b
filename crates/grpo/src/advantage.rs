//! Group-relative advantages: each rollout's reward minus its group's mean, optionally divided by
//! the group's standard deviation (GRPO; Dr. GRPO drops the division). A group whose rewards are
//! all equal carries no signal and is skipped, and counted, rather than trained on with zeros.

/// What happened to one group.
#[derive(Debug, Clone, PartialEq)]
pub enum GroupStats {
    /// Advantages, one per rollout, in the group's order.
    Trained(Vec<f64>),
    /// All rewards equal (within 1e-9): nothing to learn.
    ZeroVariance,
}

pub fn group_advantages(rewards: &[f64], scale_by_std: bool) -> GroupStats {
    let n = rewards.len() as f64;
    if rewards.len() < 2 {
        return GroupStats::ZeroVariance;
    }
    let mean = rewards.iter().sum::<f64>() / n;
    let var = rewards.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let std = var.sqrt();
    if std < 1e-9 {
        return GroupStats::ZeroVariance;
    }
    let scale = if scale_by_std { std + 1e-6 } else { 1.0 };
    GroupStats::Trained(rewards.iter().map(|r| (r - mean) / scale).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_centred_with_and_without_std() {
        let GroupStats::Trained(a) = group_advantages(&[1.0, 0.0, 0.0, 1.0], false) else { panic!() };
        assert_eq!(a, vec![0.5, -0.5, -0.5, 0.5]);
        let GroupStats::Trained(a) = group_advantages(&[1.0, 0.0, 0.0, 1.0], true) else { panic!() };
        // sample std of [1,0,0,1] = sqrt(1/3)
        let s = (1.0f64 / 3.0).sqrt() + 1e-6;
        assert!((a[0] - 0.5 / s).abs() < 1e-12 && (a[1] + 0.5 / s).abs() < 1e-12);
        assert!((a.iter().sum::<f64>()).abs() < 1e-12);
    }

    #[test]
    fn flat_or_single_groups_are_skipped() {
        assert_eq!(group_advantages(&[0.3, 0.3, 0.3], true), GroupStats::ZeroVariance);
        assert_eq!(group_advantages(&[1.0], false), GroupStats::ZeroVariance);
    }
}
