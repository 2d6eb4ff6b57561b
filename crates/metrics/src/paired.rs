//! Paired tests: did model B do better than model A *on the same tasks*?
//!
//! Two models evaluated on one scenario set are paired data: a task both solve, or both fail,
//! says nothing about which is better, and a hard task drags both down alike. Comparing the two
//! success rates as if they were independent samples throws that away and needs far more tasks to
//! see the same difference. So comparisons go task by task:
//!
//! - [`mcnemar_exact`]: the exact McNemar test, a two-sided binomial test on the discordant tasks
//!   (B succeeded more often than A, or less). With one episode per task these are exactly
//!   McNemar's discordant pairs; with several, it is the sign test on per-task success rates.
//! - [`paired_bootstrap`]: the mean per-task difference in success rate, with a 95% percentile
//!   interval and a two-sided p-value from resampling tasks (seeded, so a report is reproducible).
//!   It uses every task, and with several episodes per task it counts a 3/4 → 4/4 as a quarter.
//!
//! [`bootstrap_mean`] is the same resampling for one model (intervals of pass@1 and pass@k, whose
//! samples are clustered by task so that a binomial interval would be too narrow).

use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

/// Resamples of every bootstrap: the percentiles of the 95% interval move by under half a point
/// between seeds at this count, and 200 tasks resample in a few milliseconds.
pub const RESAMPLES: usize = 10_000;
/// The seed reports use, so the same run directory always renders the same numbers.
pub const SEED: u64 = 0;

/// The two-sided exact McNemar p-value for `b` tasks where B beat A and `c` where A beat B:
/// `min(1, 2·P(X ≤ min(b, c)))` with `X ~ Binomial(b + c, 1/2)`, as statsmodels'
/// `mcnemar(exact=True)` and scipy's `binomtest(b, b + c, 0.5)` compute it. 1 when nothing is
/// discordant. Summed in log space, so thousands of tasks neither overflow nor underflow.
pub fn mcnemar_exact(b: usize, c: usize) -> f64 {
    let n = b + c;
    let k = b.min(c);
    if n == 0 {
        return 1.0;
    }
    // ln C(n, i) - n ln 2, for i = 0..=k, built up term by term.
    let mut log_terms = Vec::with_capacity(k + 1);
    let mut log_c = 0.0_f64;
    for i in 0..=k {
        if i > 0 {
            log_c += ((n - i + 1) as f64).ln() - (i as f64).ln();
        }
        log_terms.push(log_c - n as f64 * std::f64::consts::LN_2);
    }
    let max = log_terms.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let tail = max.exp() * log_terms.iter().map(|t| (t - max).exp()).sum::<f64>();
    (2.0 * tail).min(1.0)
}

/// A bootstrap estimate of a mean.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BootstrapMean {
    pub mean: f64,
    /// 95% percentile interval, `[low, high]`.
    pub ci95: [f64; 2],
}

/// The mean of `values` with a 95% percentile bootstrap interval (`resamples` resamples of the
/// values with replacement, seeded). `None` for no values.
pub fn bootstrap_mean(values: &[f64], resamples: usize, seed: u64) -> Option<BootstrapMean> {
    let (mean, means) = resampled_means(values, resamples, seed)?;
    Some(BootstrapMean { mean, ci95: percentile_interval(&means) })
}

/// Model B against model A over the same tasks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Paired {
    /// Tasks where B's success rate was higher / lower than A's (the discordant ones).
    pub better: usize,
    pub worse: usize,
    pub tasks: usize,
    /// Exact McNemar p-value on `better` against `worse`.
    pub mcnemar_p: f64,
    /// Mean per-task success rate of B minus A, with its paired bootstrap interval.
    pub diff: f64,
    pub diff_ci95: [f64; 2],
    /// Two-sided bootstrap p-value: twice the share of resampled mean differences on the far
    /// side of 0 (capped at 1).
    pub bootstrap_p: f64,
}

/// The paired comparison of per-task success rates `(a, b)`, one pair per task. `None` for no
/// tasks.
pub fn paired_bootstrap(pairs: &[(f64, f64)], resamples: usize, seed: u64) -> Option<Paired> {
    let diffs: Vec<f64> = pairs.iter().map(|(a, b)| b - a).collect();
    let (diff, means) = resampled_means(&diffs, resamples, seed)?;
    let better = diffs.iter().filter(|&&d| d > 0.0).count();
    let worse = diffs.iter().filter(|&&d| d < 0.0).count();
    let share = |f: &dyn Fn(f64) -> bool| means.iter().filter(|&&m| f(m)).count() as f64 / means.len() as f64;
    let bootstrap_p = if better == 0 && worse == 0 { 1.0 } else { (2.0 * share(&|m| m <= 0.0).min(share(&|m| m >= 0.0))).min(1.0) };
    Some(Paired { better, worse, tasks: pairs.len(), mcnemar_p: mcnemar_exact(better, worse), diff, diff_ci95: percentile_interval(&means), bootstrap_p })
}

/// The mean of `values` and `resamples` means of resamples with replacement.
fn resampled_means(values: &[f64], resamples: usize, seed: u64) -> Option<(f64, Vec<f64>)> {
    if values.is_empty() {
        return None;
    }
    let n = values.len();
    let mean = values.iter().sum::<f64>() / n as f64;
    // ChaCha8 is specified bit for bit, so a seed gives the same resamples on every build.
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let means = (0..resamples.max(1)).map(|_| (0..n).map(|_| values[rng.random_range(0..n)]).sum::<f64>() / n as f64).collect();
    Some((mean, means))
}

/// The 2.5th and 97.5th percentiles (nearest rank).
fn percentile_interval(samples: &[f64]) -> [f64; 2] {
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    let at = |q: f64| s[((q * s.len() as f64).ceil() as usize).clamp(1, s.len()) - 1];
    [at(0.025), at(0.975)]
}

impl Paired {
    /// One line: `B better on 3, worse on 1 of 20 tasks (exact McNemar p = 0.625); success
    /// +10.0 points [-5.0, +25.0] (paired bootstrap p = 0.21)`, with `a` and `b` naming the models.
    pub fn line(&self, a: &str, b: &str) -> String {
        format!(
            "paired, {b} vs {a}: better on {}, worse on {} of {} tasks (exact McNemar p = {}); success {:+.1} points, 95% CI [{:+.1}, {:+.1}] (paired bootstrap p {})",
            self.better,
            self.worse,
            self.tasks,
            fmt_p(self.mcnemar_p),
            100.0 * self.diff,
            100.0 * self.diff_ci95[0],
            100.0 * self.diff_ci95[1],
            // 0 of the resamples crossed 0: below the resolution, not 0.
            if self.bootstrap_p == 0.0 { format!("< {}", 1.0 / RESAMPLES as f64) } else { format!("= {}", fmt_p(self.bootstrap_p)) },
        )
    }
}

/// A p-value as people read them: 3 significant digits, scientific below 0.001.
pub fn fmt_p(p: f64) -> String {
    if p < 1e-3 { format!("{p:.2e}") } else { format!("{p:.3}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel_close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1e-300)
    }

    #[test]
    fn mcnemar_matches_statsmodels() {
        // statsmodels 0.15.0 `mcnemar([[0, b], [c, 0]], exact=True).pvalue`, equal to scipy 1.17.1
        // `binomtest(b, b + c, 0.5).pvalue` for every case here.
        let cases: [(usize, usize, f64); 7] = [
            (25, 1, 8.046627044677734e-07),
            (181, 0, 6.525304467998525e-55),
            (9, 9, 1.0),
            (7, 2, 0.1796875),
            (0, 0, 1.0),
            (12, 5, 0.143463134765625),
            (600, 540, 0.08051743870793819),
        ];
        for (b, c, p) in cases {
            assert!(rel_close(mcnemar_exact(b, c), p), "b={b} c={c}: {} vs statsmodels {p}", mcnemar_exact(b, c));
            assert_eq!(mcnemar_exact(b, c), mcnemar_exact(c, b), "two-sided: symmetric");
        }
        // 5,000 discordant tasks: 0.5^5000 underflows, the log-space sum does not.
        let p = mcnemar_exact(2600, 2400);
        assert!(p > 0.0 && p < 0.01, "{p}");
    }

    #[test]
    fn bootstrap_interval_matches_scipy() {
        // 30 tasks better, 10 worse, 60 ties. scipy 1.17.1 `bootstrap((d,), np.mean,
        // n_resamples=100000, method='percentile', random_state=0)`: [0.08, 0.32], standard error
        // 0.0601 (analytically sd/sqrt(n) = 0.6/10).
        let pairs: Vec<(f64, f64)> = [(0.0, 1.0); 30].into_iter().chain([(1.0, 0.0); 10]).chain([(1.0, 1.0); 60]).collect();
        let p = paired_bootstrap(&pairs, RESAMPLES, SEED).unwrap();
        assert_eq!((p.better, p.worse, p.tasks), (30, 10, 100));
        assert!((p.diff - 0.2).abs() < 1e-12);
        assert!((p.diff_ci95[0] - 0.08).abs() <= 0.015 && (p.diff_ci95[1] - 0.32).abs() <= 0.015, "{:?}", p.diff_ci95);
        assert!(p.bootstrap_p < 0.01, "{}", p.bootstrap_p);
        assert!(rel_close(p.mcnemar_p, mcnemar_exact(30, 10)));
        // 3 better, 1 worse, 6 ties: scipy gives [-0.2, 0.6]; 21.2% of resampled means are <= 0.
        let small: Vec<(f64, f64)> = [(0.0, 1.0); 3].into_iter().chain([(1.0, 0.0); 1]).chain([(0.0, 0.0); 6]).collect();
        let p = paired_bootstrap(&small, RESAMPLES, SEED).unwrap();
        assert!((p.diff_ci95[0] + 0.2).abs() < 1e-9 && (p.diff_ci95[1] - 0.6).abs() < 1e-9, "{:?}", p.diff_ci95);
        assert!((p.bootstrap_p - 2.0 * 0.212).abs() < 0.03, "{}", p.bootstrap_p);
    }

    #[test]
    fn bootstrap_is_seeded_and_degenerate_cases_are_exact() {
        let pairs = [(0.25, 0.5), (1.0, 0.75), (0.0, 1.0), (0.5, 0.5)];
        assert_eq!(paired_bootstrap(&pairs, 500, 7), paired_bootstrap(&pairs, 500, 7), "same seed, same numbers");
        let ties = paired_bootstrap(&[(0.5, 0.5), (1.0, 1.0)], 500, 0).unwrap();
        assert_eq!((ties.diff, ties.diff_ci95, ties.bootstrap_p, ties.mcnemar_p), (0.0, [0.0, 0.0], 1.0, 1.0));
        let all_better = paired_bootstrap(&[(0.0, 1.0); 8], 500, 0).unwrap();
        assert_eq!((all_better.diff_ci95, all_better.bootstrap_p), ([1.0, 1.0], 0.0));
        assert!(rel_close(all_better.mcnemar_p, 2.0 / 256.0));
        assert_eq!(paired_bootstrap(&[], 500, 0), None);
        let m = bootstrap_mean(&[1.0, 0.0, 0.5, 0.5], RESAMPLES, SEED).unwrap();
        assert!((m.mean - 0.5).abs() < 1e-12 && m.ci95[0] >= 0.0 && m.ci95[0] < 0.5 && m.ci95[1] > 0.5 && m.ci95[1] <= 1.0, "{m:?}");
        assert_eq!(bootstrap_mean(&[], 10, 0), None);
    }

    #[test]
    fn the_line_reads_as_a_sentence() {
        let p = Paired { better: 3, worse: 1, tasks: 20, mcnemar_p: 0.625, diff: 0.1, diff_ci95: [-0.05, 0.25], bootstrap_p: 0.21 };
        assert_eq!(
            p.line("init", "trained"),
            "paired, trained vs init: better on 3, worse on 1 of 20 tasks (exact McNemar p = 0.625); success +10.0 points, 95% CI [-5.0, +25.0] (paired bootstrap p = 0.210)"
        );
        assert_eq!(fmt_p(6.5e-55), "6.50e-55");
        let sure = Paired { bootstrap_p: 0.0, ..p };
        assert!(sure.line("a", "b").ends_with("(paired bootstrap p < 0.0001)"), "{}", sure.line("a", "b"));
    }
}
