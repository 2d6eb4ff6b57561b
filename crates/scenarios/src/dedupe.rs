//! Near-duplicate detection and a leakage-free train/validation split, for any list of texts
//! (generated tasks here; synthesized ones may use it too).
//!
//! Texts are normalized (lower case, punctuation removed, white space collapsed), cut into word
//! n-gram shingles, and indexed with MinHash LSH (`gaoya`); every candidate pair the index
//! returns is confirmed with the exact Jaccard similarity of the shingle sets, so the result does
//! not depend on hash luck above the threshold.
//!
//! - [`near_duplicate_pairs`]: every pair at or above a similarity threshold;
//! - [`dedupe`]: which texts to keep (the first of each near-duplicate cluster);
//! - [`split`]: train/validation by whole connected components of near-duplicate pairs, so no
//!   pair crosses the split.

use std::collections::{BTreeSet, HashSet};

use gaoya::minhash::{MinHashIndex, MinHasher, MinHasher32, calculate_minhash_params, compute_jaccard_similarity};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use ta_types::Split;

/// Words per shingle. Short tasks (fewer words) use their words as one shingle each.
const SHINGLE_WORDS: usize = 3;
/// MinHash signature length: enough for a good LSH band layout at thresholds 0.3 to 0.9.
const NUM_HASHES: usize = 128;

/// Lower case, letters and digits only, single spaces.
pub fn normalize(text: &str) -> String {
    let cleaned: String = text.chars().map(|c| if c.is_alphanumeric() { c.to_ascii_lowercase() } else { ' ' }).collect();
    cleaned.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The word n-gram shingles of a normalized text.
fn shingles(normalized: &str) -> BTreeSet<String> {
    let words: Vec<&str> = normalized.split(' ').filter(|w| !w.is_empty()).collect();
    if words.len() < SHINGLE_WORDS {
        return words.into_iter().map(str::to_string).collect();
    }
    words.windows(SHINGLE_WORDS).map(|w| w.join(" ")).collect()
}

/// Pairs `(i, j)`, `i < j`, whose shingle Jaccard similarity is at least `threshold` (identical
/// normalized texts always count), sorted.
pub fn near_duplicate_pairs<S: AsRef<str>>(texts: &[S], threshold: f64) -> Vec<(usize, usize)> {
    let sets: Vec<BTreeSet<String>> = texts.iter().map(|t| shingles(&normalize(t.as_ref()))).collect();
    let (bands, width) = calculate_minhash_params(threshold.clamp(0.05, 0.99), NUM_HASHES);
    let hasher = MinHasher32::new(bands * width);
    let mut index = MinHashIndex::new(bands, width, 0.0);
    let signatures: Vec<Vec<u32>> = sets.iter().map(|s| hasher.create_signature(s.iter())).collect();
    for (i, sig) in signatures.iter().enumerate() {
        index.insert(i, sig.clone());
    }
    let mut pairs = HashSet::new();
    for (i, sig) in signatures.iter().enumerate() {
        for j in index.query_owned(sig) {
            if i < j && similarity(&sets[i], &sets[j]) >= threshold {
                pairs.insert((i, j));
            }
        }
    }
    let mut pairs: Vec<_> = pairs.into_iter().collect();
    pairs.sort_unstable();
    pairs
}

fn similarity(a: &BTreeSet<String>, b: &BTreeSet<String>) -> f64 {
    if a == b {
        return 1.0;
    }
    f64::from(compute_jaccard_similarity(a.iter(), b.iter()))
}

/// Indexes of the texts to keep: of each group of near-duplicates (at `threshold`), the first.
pub fn dedupe<S: AsRef<str>>(texts: &[S], threshold: f64) -> Vec<usize> {
    let mut dropped = vec![false; texts.len()];
    for (i, j) in near_duplicate_pairs(texts, threshold) {
        if !dropped[i] {
            dropped[j] = true;
        }
    }
    (0..texts.len()).filter(|&i| !dropped[i]).collect()
}

/// Union-find over `n` items.
struct Components(Vec<usize>);

impl Components {
    fn new(n: usize) -> Self {
        Components((0..n).collect())
    }

    fn find(&mut self, i: usize) -> usize {
        let mut root = i;
        while self.0[root] != root {
            root = self.0[root];
        }
        let mut k = i;
        while self.0[k] != root {
            let next = self.0[k];
            self.0[k] = root;
            k = next;
        }
        root
    }

    fn union(&mut self, a: usize, b: usize) {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra != rb {
            self.0[ra.max(rb)] = ra.min(rb);
        }
    }
}

/// A seeded split of `texts` with about `validation_fraction` of them in validation, assigning
/// whole components of near-duplicate pairs (at `threshold`) to one side, so no pair crosses.
/// With two or more components and a positive fraction, validation gets at least one.
pub fn split<S: AsRef<str>>(texts: &[S], threshold: f64, validation_fraction: f64, seed: u64) -> Vec<Split> {
    let n = texts.len();
    let mut uf = Components::new(n);
    for (i, j) in near_duplicate_pairs(texts, threshold) {
        uf.union(i, j);
    }
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut slot = vec![usize::MAX; n];
    for i in 0..n {
        let root = uf.find(i);
        if slot[root] == usize::MAX {
            slot[root] = groups.len();
            groups.push(Vec::new());
        }
        groups[slot[root]].push(i);
    }
    groups.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(seed));
    let target = (n as f64 * validation_fraction).round() as usize;
    let target = if target == 0 && groups.len() >= 2 && validation_fraction > 0.0 { 1 } else { target };
    let mut out = vec![Split::Train; n];
    let mut in_validation = 0;
    for group in &groups {
        if in_validation >= target {
            break;
        }
        // Skip a component that would overshoot by more than half its size.
        if in_validation + group.len() > target + group.len() / 2 {
            continue;
        }
        for &i in group {
            out[i] = Split::Validation;
        }
        in_validation += group.len();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TASKS: &[&str] = &[
        "How many employees work in the Engineering department?",
        "How many employees work in the engineering department ?",
        "How many employees work in the Engineering department right now?",
        "What is the average salary of employees hired after 2020?",
        "Which department has the largest budget?",
        "List the names of all projects that are over budget.",
        "Who manages the Sales department?",
        "Which employee has the highest salary in the Marketing department?",
    ];

    #[test]
    fn normalization_ignores_case_punctuation_and_spacing() {
        assert_eq!(normalize("  How MANY   employees?! "), "how many employees");
    }

    #[test]
    fn near_duplicates_are_found_and_distinct_tasks_are_not() {
        let pairs = near_duplicate_pairs(TASKS, 0.6);
        assert!(pairs.contains(&(0, 1)), "identical after normalization: {pairs:?}");
        assert!(pairs.contains(&(0, 2)) && pairs.contains(&(1, 2)), "one added word: {pairs:?}");
        assert!(pairs.iter().all(|&(i, j)| i <= 2 && j <= 2), "only the first three are related: {pairs:?}");
        assert_eq!(dedupe(TASKS, 0.6), vec![0, 3, 4, 5, 6, 7]);
        assert_eq!(dedupe(TASKS, 1.0), vec![0, 2, 3, 4, 5, 6, 7], "at 1.0 only exact normalized copies go");
    }

    #[test]
    fn no_near_duplicate_pair_crosses_the_split() {
        // Families of paraphrases: a leak-prone set, split many ways.
        let mut texts = Vec::new();
        for topic in [
            "salary of the engineers",
            "budget of every project",
            "manager of the sales team",
            "hires made in 2021",
            "offices in the north region",
            "tickets closed last week",
        ] {
            for variant in ["What is the total", "Tell me the total", "What is the total sum of the"] {
                texts.push(format!("{variant} {topic}"));
            }
        }
        let pairs = near_duplicate_pairs(&texts, 0.5);
        assert!(!pairs.is_empty());
        for seed in 0..20 {
            let s = split(&texts, 0.5, 0.3, seed);
            for &(i, j) in &pairs {
                assert_eq!(s[i], s[j], "seed {seed}: pair ({i}, {j}) crosses the split");
            }
            let val = s.iter().filter(|&&x| x == Split::Validation).count();
            assert!(val > 0 && val < texts.len(), "seed {seed}: {val} in validation");
        }
        assert_eq!(split(&texts, 0.5, 0.3, 4), split(&texts, 0.5, 0.3, 4), "seeded");
    }

    #[test]
    fn split_fraction_is_close_for_distinct_texts() {
        let texts: Vec<String> = (0..100).map(|i| format!("question number {i} about topic {}", i * 7919 % 1000)).collect();
        let s = split(&texts, 0.9, 0.2, 1);
        assert_eq!(s.iter().filter(|&&x| x == Split::Validation).count(), 20);
    }
}
