//! Agreement between a solver's final answers, and the ground-truth matcher the agreed answer
//! becomes.
//!
//! Each answer is read as a number (the one number in a short answer), a set (a list of two or
//! more items), or normalized text. Two answers agree when both are numbers within a relative
//! tolerance, equal sets, or equal text. A task is kept when at least `m` of its `k` answers
//! agree with one of them; that answer becomes `expected` with the matcher its form suggests,
//! checked with the same scorer training uses ([`ta_reward::ground_truth::matches`]).

use serde_json::Value;
use ta_reward::ground_truth::{matches, numbers_in};
use ta_types::Expected;
use ta_types::scenario::ExpectedRule;

/// Relative tolerance for two numeric answers to agree (rounding in prose: 3.1416 vs 3.14159).
const RELATIVE_TOLERANCE: f64 = 1e-3;
/// A numeric answer has at most this many words besides its number ("There are 9 departments.").
const MAX_WORDS_AROUND_NUMBER: usize = 6;
/// Text answers up to this many words become `contains` matchers; longer ones `exact`.
const MAX_CONTAINS_WORDS: usize = 6;

/// How an answer is compared.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Number(f64),
    Set(Vec<String>),
    Text(String),
}

/// Lower case, trimmed, inner white space collapsed, trailing punctuation removed.
fn normalize(text: &str) -> String {
    let t = text.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase();
    t.trim_end_matches(['.', '!', ';', ':']).trim().to_string()
}

impl Answer {
    pub fn read(raw: &str) -> Answer {
        let text = normalize(raw);
        let numbers = numbers_in(&text);
        let words = text.split_whitespace().count();
        if numbers.len() == 1 && words <= MAX_WORDS_AROUND_NUMBER + 1 {
            return Answer::Number(numbers[0]);
        }
        let items = list_items(&text);
        if items.len() >= 2 {
            let mut items = items;
            items.sort();
            items.dedup();
            return Answer::Set(items);
        }
        Answer::Text(text)
    }

    pub fn agrees(&self, other: &Answer) -> bool {
        match (self, other) {
            (Answer::Number(a), Answer::Number(b)) => (a - b).abs() <= RELATIVE_TOLERANCE * a.abs().max(b.abs()) + 1e-9,
            (a, b) => a == b,
        }
    }
}

/// The items of a list answer: split on commas, semicolons, new lines and a final "and".
fn list_items(text: &str) -> Vec<String> {
    let unified = text.replace(" and ", ",").replace([';', '\n'], ",");
    let items: Vec<String> = unified.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();
    // A prose sentence with one comma is not a list: every item must be short.
    if items.iter().all(|s| s.split_whitespace().count() <= 5) { items } else { Vec::new() }
}

/// The answers that agree, and the one that represents them.
#[derive(Debug, Clone, PartialEq)]
pub struct Agreement {
    /// Index (into the answers given) of the representative answer.
    pub representative: usize,
    /// Indexes of every answer agreeing with it, itself included.
    pub members: Vec<usize>,
}

/// The largest group of answers agreeing with one of them, when it has at least `m` members.
/// `None` answers (episodes that gave none) agree with nothing. Ties go to the earliest answer.
pub fn agree(answers: &[Option<&str>], m: usize) -> Option<Agreement> {
    let read: Vec<Option<Answer>> = answers.iter().map(|a| a.filter(|s| !s.trim().is_empty()).map(Answer::read)).collect();
    let mut best: Option<Agreement> = None;
    for (i, a) in read.iter().enumerate() {
        let Some(a) = a else { continue };
        let members: Vec<usize> = read.iter().enumerate().filter(|(_, b)| b.as_ref().is_some_and(|b| a.agrees(b))).map(|(j, _)| j).collect();
        if best.as_ref().is_none_or(|b| members.len() > b.members.len()) {
            best = Some(Agreement { representative: i, members });
        }
    }
    best.filter(|b| b.members.len() >= m.max(1))
}

/// The matcher for an agreed answer: a number with tolerance, a set, `exact` for yes/no and long
/// text, `contains` for short text. Every answer in `agreeing` passes it (checked; when the
/// inferred matcher would fail one, the exact text of the representative is used instead).
pub fn infer_expected(representative: &str, agreeing: &[&str]) -> Expected {
    let rule = match Answer::read(representative) {
        Answer::Number(x) => {
            let values: Vec<f64> = agreeing
                .iter()
                .filter_map(|a| match Answer::read(a) {
                    Answer::Number(v) => Some(v),
                    _ => None,
                })
                .collect();
            let spread = values.iter().map(|v| (v - x).abs()).fold(0.0, f64::max);
            let tolerance = if x.fract() == 0.0 && spread == 0.0 { 0.0 } else { spread.max(RELATIVE_TOLERANCE * x.abs()) };
            ExpectedRule::Number { number: x, tolerance }
        }
        Answer::Set(items) => ExpectedRule::Set(items.into_iter().map(Value::String).collect()),
        Answer::Text(t) => {
            let bool_like = matches!(t.as_str(), "yes" | "no" | "true" | "false");
            let cleaned = normalize(representative);
            if !bool_like && t.split_whitespace().count() <= MAX_CONTAINS_WORDS { ExpectedRule::Contains(cleaned) } else { ExpectedRule::Exact(cleaned) }
        }
    };
    let expected = Expected::Rule(rule);
    if agreeing.iter().all(|a| matches(&expected, a) >= 1.0) { expected } else { Expected::Rule(ExpectedRule::Exact(representative.trim().to_string())) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(e: Expected) -> ExpectedRule {
        match e {
            Expected::Rule(r) => r,
            other => panic!("not a rule: {other:?}"),
        }
    }

    #[test]
    fn answers_are_read_as_numbers_sets_or_text() {
        assert_eq!(Answer::read("There are 9 departments."), Answer::Number(9.0));
        assert_eq!(Answer::read("$1,234.50"), Answer::Number(1234.5));
        assert_eq!(Answer::read("Alice, Bob and Carol"), Answer::Set(vec!["alice".into(), "bob".into(), "carol".into()]));
        assert_eq!(Answer::read("Carol; alice;  Bob"), Answer::read("Alice, Bob and Carol"));
        assert_eq!(Answer::read("  Engineering. "), Answer::Text("engineering".into()));
    }

    #[test]
    fn m_of_k_agreement_with_numeric_tolerance() {
        let a = [Some("9"), Some("There are 9 departments"), None, Some("8")];
        let g = agree(&a, 2).unwrap();
        assert_eq!((g.representative, g.members.clone()), (0, vec![0, 1]));
        assert!(agree(&a, 3).is_none(), "only two of four agree");
        let close = [Some("4.56789"), Some("4.5679"), Some("about 4.56789")];
        assert_eq!(agree(&close, 3).unwrap().members, vec![0, 1, 2]);
        let sets = [Some("Bob, Alice"), Some("Alice and Bob"), Some("Alice")];
        assert_eq!(agree(&sets, 2).unwrap().members, vec![0, 1]);
        assert!(agree(&[None, Some(" "), None], 1).is_none(), "no answers, no agreement");
        let disagree = [Some("Sales"), Some("Engineering"), Some("Marketing"), Some("Sales")];
        assert!(agree(&disagree, 3).is_none());
    }

    #[test]
    fn matchers_are_inferred_from_the_answer_form() {
        assert_eq!(rule(infer_expected("9", &["9", "There are 9."])), ExpectedRule::Number { number: 9.0, tolerance: 0.0 });
        let ExpectedRule::Number { number, tolerance } = rule(infer_expected("4.5679", &["4.5679", "4.56789"])) else { panic!() };
        assert_eq!(number, 4.5679);
        assert!((0.00001..0.01).contains(&tolerance), "{tolerance}");
        assert_eq!(rule(infer_expected("Bob, Alice", &["Bob, Alice", "Alice and Bob"])), ExpectedRule::Set(vec!["alice".into(), "bob".into()]));
        assert_eq!(rule(infer_expected("Engineering.", &["Engineering.", "engineering"])), ExpectedRule::Contains("engineering".into()));
        assert_eq!(rule(infer_expected("Yes", &["Yes", "yes"])), ExpectedRule::Exact("yes".into()));
        let long = "the report was archived because the project ended early";
        assert_eq!(rule(infer_expected(long, &[long])), ExpectedRule::Exact(long.into()));
    }

    #[test]
    fn every_agreeing_answer_passes_the_inferred_matcher() {
        for group in [vec!["9", "There are 9 departments."], vec!["Bob, Alice", "alice and bob"], vec!["Engineering", "engineering."], vec!["12.5%", "12.5"]] {
            let e = infer_expected(group[0], &group);
            for a in &group {
                assert_eq!(matches(&e, a), 1.0, "{a:?} fails {e:?}");
            }
        }
    }
}
