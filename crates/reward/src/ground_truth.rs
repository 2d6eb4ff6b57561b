//! Ground truth: does the final answer (the `complete_task` summary, or the last assistant text)
//! agree with the scenario's `expected`?
//!
//! - a plain string: the answer mentions it as a phrase (case-insensitive, on word boundaries);
//! - a plain number: the answer mentions that number (relative tolerance 1e-6; `1,234`, `$1,234.50`
//!   and `12%` are read as numbers);
//! - `{"exact": s}`: the whole answer is `s` (case and surrounding white space ignored);
//! - `{"contains": s}`: case-insensitive substring;
//! - `{"regex": r}`: the regular expression matches somewhere;
//! - `{"number": x, "tolerance": t}`: some number in the answer is within `t` of `x`;
//! - `{"set": [..]}`: partial credit, the share of the values mentioned.
//!
//! A rollout that did not complete scores at most half, so finishing properly always pays.

use regex::Regex;
use serde_json::Value;
use ta_types::scenario::ExpectedRule;
use ta_types::{Expected, Outcome};

/// Score in [0, 1].
pub fn score(expected: &Expected, answer: &str, outcome: Outcome) -> f64 {
    let s = matches(expected, answer);
    if outcome == Outcome::Completed { s } else { 0.5 * s }
}

/// How well `answer` matches, in [0, 1], regardless of how the rollout ended.
pub fn matches(expected: &Expected, answer: &str) -> f64 {
    let b = |x: bool| if x { 1.0 } else { 0.0 };
    match expected {
        Expected::Text(s) => b(mentions_phrase(answer, s)),
        Expected::Number(x) => b(mentions_number(answer, *x, x.abs() * 1e-6 + 1e-9)),
        Expected::Rule(rule) => match rule {
            ExpectedRule::Exact(s) => b(answer.trim().eq_ignore_ascii_case(s.trim())),
            ExpectedRule::Contains(s) => b(answer.to_lowercase().contains(&s.to_lowercase())),
            ExpectedRule::Regex(r) => b(Regex::new(r).is_ok_and(|re| re.is_match(answer))),
            ExpectedRule::Number { number, tolerance } => b(mentions_number(answer, *number, tolerance.max(1e-9))),
            ExpectedRule::Set(values) => {
                if values.is_empty() {
                    return 1.0;
                }
                let hit = values
                    .iter()
                    .filter(|v| match v {
                        Value::Number(n) => n.as_f64().is_some_and(|x| mentions_number(answer, x, x.abs() * 1e-6 + 1e-9)),
                        Value::String(s) => mentions_phrase(answer, s),
                        other => mentions_phrase(answer, &other.to_string()),
                    })
                    .count();
                hit as f64 / values.len() as f64
            }
        },
    }
}

/// Whether a text (a tool result) shows the whole of an expected answer, an exact one as part
/// of it: what `collect --reference` asks of a reference's last result, and `scenarios generate`'s
/// replay of an agreed task's.
pub fn shows(expected: &Expected, text: &str) -> bool {
    let as_part = match expected {
        Expected::Rule(ExpectedRule::Exact(s)) => Expected::Rule(ExpectedRule::Contains(s.clone())),
        other => other.clone(),
    };
    matches(&as_part, text) >= 1.0
}

/// The smallest difference between two distinct scores [`score`] can give for `expected`: 0.5
/// for a right/wrong check (scores 0, 0.5 unfinished and right, 1), `1 / (2n)` for a set of `n`
/// values (shares `k / n`, halved when unfinished). The correctness-first reward mix keeps rule
/// credit strictly inside this gap, so no amount of it lifts an answer to the next level.
pub fn level_gap(expected: &Expected) -> f64 {
    match expected {
        Expected::Rule(ExpectedRule::Set(values)) if !values.is_empty() => 0.5 / values.len() as f64,
        _ => 0.5,
    }
}

fn mentions_phrase(answer: &str, phrase: &str) -> bool {
    let phrase = phrase.trim();
    if phrase.is_empty() {
        return true;
    }
    let pattern = format!(r"(?i)(^|\W){}($|\W)", regex::escape(phrase));
    Regex::new(&pattern).is_ok_and(|re| re.is_match(answer))
}

/// Numbers written in `text`, with thousands separators and currency signs removed.
pub fn numbers_in(text: &str) -> Vec<f64> {
    let re = Regex::new(r"-?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?").expect("valid regex");
    re.find_iter(text)
        .filter_map(|m| {
            let s = m.as_str().replace(',', "");
            s.parse::<f64>().ok()
        })
        .collect()
}

fn mentions_number(answer: &str, x: f64, tolerance: f64) -> bool {
    numbers_in(answer).iter().any(|n| (n - x).abs() <= tolerance)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(r: ExpectedRule) -> Expected {
        Expected::Rule(r)
    }

    #[test]
    fn plain_text_is_a_phrase_on_word_boundaries() {
        let e = Expected::Text("Engineering".into());
        assert_eq!(matches(&e, "The answer is engineering."), 1.0);
        assert_eq!(matches(&e, "ReEngineering team"), 0.0);
        assert_eq!(matches(&e, "Sales"), 0.0);
    }

    #[test]
    fn numbers_with_separators_currency_and_tolerance() {
        assert_eq!(numbers_in("Total: $1,234.50 over 12% and -3"), vec![1234.5, 12.0, -3.0]);
        assert_eq!(matches(&Expected::Number(1234.5), "It is $1,234.50."), 1.0);
        assert_eq!(matches(&Expected::Number(42.0), "41.9"), 0.0);
        let tol = rule(ExpectedRule::Number { number: 73_250.0, tolerance: 1.0 });
        assert_eq!(matches(&tol, "Average salary is 73250.67"), 1.0);
        assert_eq!(matches(&tol, "Average salary is 73252"), 0.0);
    }

    #[test]
    fn exact_contains_regex_and_sets() {
        assert_eq!(matches(&rule(ExpectedRule::Exact("Alice Chen".into())), "  alice chen "), 1.0);
        assert_eq!(matches(&rule(ExpectedRule::Exact("Alice Chen".into())), "It is Alice Chen"), 0.0);
        assert_eq!(matches(&rule(ExpectedRule::Contains("chen".into())), "Alice CHEN"), 1.0);
        assert_eq!(matches(&rule(ExpectedRule::Regex(r"^\d{3}$".into())), "123"), 1.0);
        assert_eq!(matches(&rule(ExpectedRule::Regex("(".into())), "("), 0.0, "an invalid regex never matches");
        let set = rule(ExpectedRule::Set(vec!["Sales".into(), "Engineering".into(), 3.into(), true.into()]));
        assert_eq!(matches(&set, "Sales and Engineering"), 0.5);
        assert_eq!(matches(&set, "Sales, Engineering: 3 (true)"), 1.0);
    }

    #[test]
    fn the_level_gap_is_the_closest_two_scores_can_be() {
        let set = rule(ExpectedRule::Set(vec!["a".into(), "b".into(), "c".into()]));
        let answers = ["", "a", "a b", "a b c"];
        let mut levels: Vec<f64> = answers.iter().flat_map(|a| [score(&set, a, Outcome::Completed), score(&set, a, Outcome::RanOutOfTurns)]).collect();
        levels.sort_by(f64::total_cmp);
        levels.dedup();
        let closest = levels.windows(2).map(|w| w[1] - w[0]).fold(f64::INFINITY, f64::min);
        assert!((closest - level_gap(&set)).abs() < 1e-12, "{levels:?}");
        assert_eq!(level_gap(&Expected::Number(7.0)), 0.5, "0, 0.5 and 1");
    }

    #[test]
    fn unfinished_rollouts_get_half() {
        let e = Expected::Number(7.0);
        assert_eq!(score(&e, "7", Outcome::Completed), 1.0);
        assert_eq!(score(&e, "7", Outcome::RanOutOfTurns), 0.5);
        assert_eq!(score(&e, "8", Outcome::Completed), 0.0);
    }
}
