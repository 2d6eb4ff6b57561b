//! Which scenarios each step trains on: every epoch is a seeded permutation of the training
//! split, and step `s` takes the next `scenarios_per_step` of them. The order follows from the
//! step number alone, so a resumed run continues exactly where it stopped.

use rand::SeedableRng;
use rand::seq::SliceRandom;
use ta_types::Scenario;

pub struct Curriculum {
    scenarios: Vec<Scenario>,
    per_step: usize,
    epochs: u32,
    seed: u64,
}

impl Curriculum {
    pub fn new(scenarios: Vec<Scenario>, per_step: usize, epochs: u32, seed: u64) -> Self {
        Curriculum { scenarios, per_step: per_step.max(1), epochs: epochs.max(1), seed }
    }

    /// Steps needed to see every epoch (the last step of an epoch may be short).
    pub fn total_steps(&self) -> u64 {
        let n = self.scenarios.len() as u64 * u64::from(self.epochs);
        n.div_ceil(self.per_step as u64)
    }

    fn order(&self, epoch: u32) -> Vec<usize> {
        let mut idx: Vec<usize> = (0..self.scenarios.len()).collect();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(self.seed ^ (u64::from(epoch) << 32));
        idx.shuffle(&mut rng);
        idx
    }

    /// The scenarios of step `step` (1-based).
    pub fn step(&self, step: u64) -> Vec<Scenario> {
        let n = self.scenarios.len();
        let total = n * self.epochs as usize;
        let start = (step.saturating_sub(1) as usize) * self.per_step;
        (start..(start + self.per_step).min(total))
            .map(|p| {
                let order = self.order((p / n) as u32);
                self.scenarios[order[p % n]].clone()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenarios(n: usize) -> Vec<Scenario> {
        let text: String = (0..n).map(|i| format!("{{\"id\": \"s{i}\", \"task\": \"t\"}}\n")).collect();
        ta_types::scenario::parse_scenarios(&text, "x").unwrap()
    }

    #[test]
    fn each_epoch_visits_every_scenario_once_in_a_seeded_order() {
        let c = Curriculum::new(scenarios(5), 2, 2, 7);
        assert_eq!(c.total_steps(), 5);
        let ids: Vec<String> = (1..=5).flat_map(|s| c.step(s)).map(|s| s.id).collect();
        assert_eq!(ids.len(), 10);
        let mut first: Vec<_> = ids[..5].to_vec();
        first.sort();
        assert_eq!(first, vec!["s0", "s1", "s2", "s3", "s4"]);
        let again = Curriculum::new(scenarios(5), 2, 2, 7);
        assert_eq!(again.step(3), c.step(3), "a step's scenarios depend on the step number only");
        assert_ne!(Curriculum::new(scenarios(5), 5, 1, 8).step(1), Curriculum::new(scenarios(5), 5, 1, 7).step(1));
    }
}
