//! Scenarios: the tasks an agent is trained and evaluated on.
//!
//! The spec's minimal form `[{"task": "..."}]` works; everything else is optional. Files may be a
//! JSON array or JSONL. Unknown fields (for example a demo scenario's `reference_sql`) are kept in
//! `extra` so that tools further down (SFT reference traces) can use them.

use std::path::Path;

use rand::SeedableRng;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Which part of the data set a scenario belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Split {
    Train,
    Validation,
}

impl std::fmt::Display for Split {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Split::Train => "train",
            Split::Validation => "validation",
        })
    }
}

impl std::str::FromStr for Split {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "train" => Ok(Split::Train),
            "validation" => Ok(Split::Validation),
            other => Err(format!("unknown split `{other}`: expected train or validation")),
        }
    }
}

/// `extra.derived`: the answer is worked out from the reference's last result (a count, an
/// extreme, a date written as a day) rather than shown in it, so `collect --reference` does not
/// look for it there. Written by `scenarios walk`.
pub const EXTRA_DERIVED: &str = "derived";

/// `extra.template`: the shape a synthesizer or the walk made the task from (`count_where`,
/// `percentage`, a walked lookup's kind): what `fit`'s CPU profile filters on, `scenarios
/// frontier` counts by, and the frontier curriculum estimates a group's chance to split by.
pub const EXTRA_TEMPLATE: &str = "template";

/// `extra.explanation`: how the answer follows from the reference's last result, said before
/// answering in the reference trace. Written by `scenarios walk`.
pub const EXTRA_EXPLANATION: &str = "explanation";

/// The tools a run of `scenarios` offers when no flag says otherwise: the union of their
/// `tools` (in first-seen order), when every one names them; and whether all of those were
/// found to only read.
pub fn tools_needed(scenarios: &[Scenario]) -> Option<(Vec<String>, bool)> {
    if scenarios.is_empty() || scenarios.iter().any(|s| s.tools.is_empty()) {
        return None;
    }
    let mut union: Vec<String> = Vec::new();
    for t in scenarios.iter().flat_map(|s| &s.tools) {
        if !union.contains(t) {
            union.push(t.clone());
        }
    }
    Some((union, scenarios.iter().all(|s| s.tools_read_only)))
}

/// Ground truth for a scenario: a plain string or number, or a rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Expected {
    Number(f64),
    Text(String),
    Rule(ExpectedRule),
}

/// A ground-truth rule. Exactly one of the matchers is given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExpectedRule {
    /// The answer equals this text (case and surrounding white space ignored).
    Exact(String),
    /// The answer contains this text (case ignored).
    Contains(String),
    /// The answer matches this regular expression.
    Regex(String),
    /// The answer mentions every one of these values.
    Set(Vec<Value>),
    /// The answer mentions this number, within `tolerance` (absolute).
    #[serde(untagged)]
    Number {
        number: f64,
        #[serde(default)]
        tolerance: f64,
    },
}

/// What the state must look like after an episode, checked against the output of
/// `--capture-state` (stored in the trajectory as `captured_state`): this is how a task that is
/// *about* changing state ("add a tag to every open ticket") is rewarded for the change itself
/// rather than for the agent's claim that it made it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ExpectedState {
    /// A program that reads the captured state on stdin and exits 0 when it is right.
    Command(StateCommand),
    /// The ground-truth matchers of `expected` (a phrase, a number, `exact`, `contains`, `regex`,
    /// `set`), applied to the captured state instead of the final answer.
    Match(Expected),
}

/// `{"command": "python3 check_state.py"}`: split like a shell would, no shell features.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateCommand {
    pub command: String,
}

impl ExpectedState {
    /// Why this check cannot tell a right state from a wrong one, if it cannot (see
    /// [`Expected::defect`]).
    pub fn defect(&self) -> Option<String> {
        match self {
            ExpectedState::Command(c) if c.command.trim().is_empty() => Some("{\"command\": \"\"} names no program".into()),
            ExpectedState::Command(_) => None,
            ExpectedState::Match(e) => e.defect(),
        }
    }
}

/// How hard a scenario is: a level 1 (easiest) to 5 as synthesized and generated tasks carry, or
/// a free label such as the demo's `join`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Difficulty {
    Level(u8),
    Label(String),
}

impl Expected {
    /// Why this ground truth cannot tell a right answer from a wrong one (it matches every answer,
    /// "I do not know" included, or none), if it cannot. Checked when scenarios are loaded, so a
    /// typo costs an error at once rather than a run trained on a reward that means nothing.
    pub fn defect(&self) -> Option<String> {
        let blank = |s: &str| s.trim().is_empty();
        match self {
            Expected::Text(s) if blank(s) => Some("\"expected\" is an empty string, which every answer mentions".into()),
            Expected::Number(x) if !x.is_finite() => Some(format!("\"expected\" is {x}, which no answer mentions")),
            Expected::Rule(rule) => match rule {
                ExpectedRule::Contains(s) if s.is_empty() => Some("{\"contains\": \"\"} matches every answer".into()),
                ExpectedRule::Exact(s) if blank(s) => Some("{\"exact\": \"\"} matches only an empty answer".into()),
                ExpectedRule::Regex(r) => match regex::Regex::new(r) {
                    Err(e) => Some(format!("{{\"regex\": {r:?}}} is not a valid regular expression, so it never matches: {e}")),
                    Ok(re) if re.is_match("") => Some(format!("{{\"regex\": {r:?}}} matches an empty answer, so it matches any answer")),
                    Ok(_) => None,
                },
                ExpectedRule::Set(values) if values.is_empty() => Some("{\"set\": []} gives full credit to every answer".into()),
                ExpectedRule::Set(values) => values
                    .iter()
                    .position(|v| v.as_str().is_some_and(blank))
                    .map(|i| format!("{{\"set\": [...]}} holds an empty string (item {}), which every answer mentions", i + 1)),
                ExpectedRule::Number { number, tolerance } if !number.is_finite() || !tolerance.is_finite() || *tolerance < 0.0 => {
                    Some(format!("{{\"number\": {number}, \"tolerance\": {tolerance}}} needs a finite number and a tolerance >= 0"))
                }
                _ => None,
            },
            _ => None,
        }
    }
}

impl Difficulty {
    /// The numeric level, when the scenario has one.
    pub fn level(&self) -> Option<u8> {
        match self {
            Difficulty::Level(l) => Some(*l),
            Difficulty::Label(_) => None,
        }
    }
}

impl std::fmt::Display for Difficulty {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Difficulty::Level(l) => write!(f, "{l}"),
            Difficulty::Label(s) => f.write_str(s),
        }
    }
}

/// One step of a reference demonstration: a tool and its arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReferenceStep {
    pub tool: String,
    #[serde(default)]
    pub arguments: Map<String, Value>,
    /// Made in the same assistant turn as the step before: neither call needs the other's
    /// result (one file's details after another's, each named by the listing before them), so
    /// a model may ask for both at once, and an episode's turns go further.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub with_previous: bool,
}

/// One task for the agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scenario {
    /// Stable identifier; generated from the position in the file when absent.
    #[serde(default)]
    pub id: String,
    pub task: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<Expected>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split: Option<Split>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub difficulty: Option<Difficulty>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// A demonstration that works on any server: tool calls replayed through the real server to
    /// build an SFT trace, ending with `complete_task` carrying the checked answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reference: Vec<ReferenceStep>,
    /// Where the scenario came from: `hand`, `synth`, or the teacher model's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Whether `expected` was checked by running it through the server (synthesized SQL, or
    /// solver agreement); `false` marks unverified tasks kept for judge-only rewards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked: Option<bool>,
    /// The state expected after the episode, checked against the captured state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_state: Option<ExpectedState>,
    /// The server's tools this task needs (a synthesizer writes the ones its reference calls).
    /// When every scenario of a run names its tools, the run offers the model only their union
    /// unless `--tools`/`--exclude-tools` say otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// Whether the writer of `tools` found every one of them to only read (a synthesizer's
    /// choice, for servers that declare no `readOnlyHint`): episodes offered only these tools
    /// need no isolation.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tools_read_only: bool,
    /// Fields this crate does not interpret, kept verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Scenario {
    /// The shape it was made from (`extra.template`), when a synthesizer or the walk wrote it.
    pub fn template(&self) -> Option<&str> {
        self.extra.get(EXTRA_TEMPLATE).and_then(Value::as_str)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("cannot read scenarios from {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error(
        "{origin}:{line}: invalid scenario: {message}\nhint: each scenario is a JSON object with at least a \"task\" string, e.g. {{\"task\": \"How many employees are there?\"}}"
    )]
    Invalid { origin: String, line: usize, message: String },
    #[error(
        "{origin}:{line}: ground truth that cannot tell right from wrong: {message}\nhint: state what a correct answer must contain, e.g. \"expected\": \"Engineering\", \"expected\": 42, {{\"set\": [\"Sales\", \"Legal\"]}} or {{\"regex\": \"\\\\b(12|twelve)\\\\b\"}}; or leave \"expected\" out to score without ground truth"
    )]
    Expected { origin: String, line: usize, message: String },
    #[error("{origin}: no scenarios found\nhint: the file must hold a JSON array of objects or one JSON object per line")]
    Empty { origin: String },
    #[error("{origin}: scenario id {id:?} appears twice (lines {first} and {second})\nhint: ids must be unique; drop the \"id\" fields to have them generated")]
    DuplicateId { origin: String, id: String, first: usize, second: usize },
}

/// Reads scenarios from a JSON array or JSONL file.
pub fn load_scenarios(path: &Path) -> Result<Vec<Scenario>, ScenarioError> {
    let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read { path: path.display().to_string(), source })?;
    parse_scenarios(&text, &path.display().to_string())
}

/// Parses scenarios; `origin` names the source in error messages.
pub fn parse_scenarios(text: &str, origin: &str) -> Result<Vec<Scenario>, ScenarioError> {
    let text = crate::jsonl::strip_bom(text);
    let invalid = |line: usize, message: String| ScenarioError::Invalid { origin: origin.to_string(), line, message };
    let mut rows: Vec<(usize, Value)> = Vec::new();
    if text.trim_start().starts_with('[') {
        let values: Vec<Value> = serde_json::from_str(text).map_err(|e| invalid(e.line(), e.to_string()))?;
        rows.extend(values.into_iter().map(|v| (1, v)));
    } else {
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let v = serde_json::from_str(line).map_err(|e| invalid(i + 1, e.to_string()))?;
            rows.push((i + 1, v));
        }
    }
    if rows.is_empty() {
        return Err(ScenarioError::Empty { origin: origin.to_string() });
    }
    let mut out = Vec::with_capacity(rows.len());
    let mut seen = std::collections::HashMap::new();
    for (index, (line, value)) in rows.into_iter().enumerate() {
        let mut s: Scenario = serde_json::from_value(value).map_err(|e| invalid(line, e.to_string()))?;
        if s.task.trim().is_empty() {
            return Err(invalid(line, "\"task\" is empty".into()));
        }
        if s.max_turns == Some(0) {
            return Err(invalid(line, "\"max_turns\" is 0, so the model would never be asked; give at least 1 or drop the field".into()));
        }
        if let Some(message) = s.expected.as_ref().and_then(Expected::defect) {
            return Err(ScenarioError::Expected { origin: origin.to_string(), line, message });
        }
        if let Some(message) = s.expected_state.as_ref().and_then(ExpectedState::defect) {
            return Err(ScenarioError::Expected { origin: origin.to_string(), line, message: format!("\"expected_state\": {message}") });
        }
        if s.id.is_empty() {
            s.id = format!("s{index:04}");
        }
        if let Some(first) = seen.insert(s.id.clone(), line) {
            return Err(ScenarioError::DuplicateId { origin: origin.to_string(), id: s.id, first, second: line });
        }
        out.push(s);
    }
    Ok(out)
}

/// Gives every scenario without a split one, seeded: a `validation_fraction` share (at least one
/// scenario when there are two or more) goes to validation. Scenarios that already name a split
/// keep it.
pub fn assign_splits(scenarios: &mut [Scenario], validation_fraction: f64, seed: u64) {
    let mut unassigned: Vec<usize> = (0..scenarios.len()).filter(|&i| scenarios[i].split.is_none()).collect();
    if unassigned.is_empty() {
        return;
    }
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    unassigned.shuffle(&mut rng);
    let mut n_val = (unassigned.len() as f64 * validation_fraction).round() as usize;
    if n_val == 0 && unassigned.len() >= 2 && validation_fraction > 0.0 {
        n_val = 1;
    }
    for (k, &i) in unassigned.iter().enumerate() {
        scenarios[i].split = Some(if k < n_val { Split::Validation } else { Split::Train });
    }
}

/// The scenarios of one split, in file order.
pub fn of_split(scenarios: &[Scenario], split: Split) -> Vec<Scenario> {
    scenarios.iter().filter(|s| s.split == Some(split)).cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimal_spec_form_parses_and_gets_ids() {
        let s = parse_scenarios(r#"[{"task": "a"}, {"task": "b"}]"#, "x").unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[1].id, "s0001");
        assert!(s[0].expected.is_none());
    }

    #[test]
    fn jsonl_with_every_expected_form() {
        let text = r#"{"id": "a", "task": "t", "expected": "Engineering"}
{"id": "b", "task": "t", "expected": 42}

{"id": "c", "task": "t", "expected": {"contains": "x"}}
{"id": "d", "task": "t", "expected": {"regex": "^\\d+$"}}
{"id": "e", "task": "t", "expected": {"number": 3.5, "tolerance": 0.1}, "split": "validation", "reference_sql": "SELECT 1"}
{"id": "f", "task": "t", "expected": {"set": ["a", 2]}}"#;
        let s = parse_scenarios(text, "f.jsonl").unwrap();
        assert_eq!(s[0].expected, Some(Expected::Text("Engineering".into())));
        assert_eq!(s[1].expected, Some(Expected::Number(42.0)));
        assert_eq!(s[2].expected, Some(Expected::Rule(ExpectedRule::Contains("x".into()))));
        assert_eq!(s[4].expected, Some(Expected::Rule(ExpectedRule::Number { number: 3.5, tolerance: 0.1 })));
        assert_eq!(s[4].split, Some(Split::Validation));
        assert_eq!(s[4].extra["reference_sql"], "SELECT 1");
        assert_eq!(s[5].expected, Some(Expected::Rule(ExpectedRule::Set(vec!["a".into(), 2.into()]))));
    }

    #[test]
    fn a_run_needs_the_union_of_its_scenarios_tools_when_all_name_them() {
        let text = r#"{"task": "a", "tools": ["list_tables", "read_query"], "tools_read_only": true}
{"task": "b", "tools": ["describe_table", "read_query"], "tools_read_only": true}"#;
        let s = parse_scenarios(text, "x").unwrap();
        assert_eq!(tools_needed(&s), Some((vec!["list_tables".into(), "read_query".into(), "describe_table".into()], true)));
        let mut one_unsure = s.clone();
        one_unsure[1].tools_read_only = false;
        assert_eq!(tools_needed(&one_unsure).map(|t| t.1), Some(false), "read-only only when every writer said so");
        let mixed = parse_scenarios(&format!("{text}\n{{\"task\": \"c\"}}"), "x").unwrap();
        assert_eq!(tools_needed(&mixed), None, "a scenario without tools may need any of them");
        assert_eq!(tools_needed(&[]), None);
        let line = serde_json::to_string(&s[0]).unwrap();
        assert!(line.contains(r#""tools":["list_tables","read_query"],"tools_read_only":true"#), "{line}");
        assert!(!serde_json::to_string(&mixed[2]).unwrap().contains("tools"), "absent when unknown");
    }

    #[test]
    fn generated_scenario_fields_round_trip() {
        let text = r#"[{"id": "g", "task": "t", "difficulty": 3, "source": "synth", "checked": true,
            "reference": [{"tool": "run_query", "arguments": {"sql": "SELECT 1"}}], "expected_state": {"set": ["a.txt", "b.txt"]}}]"#;
        let s = &parse_scenarios(text, "x").unwrap()[0];
        assert_eq!(s.difficulty.as_ref().and_then(Difficulty::level), Some(3));
        assert_eq!(s.reference[0].tool, "run_query");
        assert_eq!(s.reference[0].arguments["sql"], "SELECT 1");
        assert_eq!((s.source.as_deref(), s.checked), (Some("synth"), Some(true)));
        assert!(s.extra.is_empty(), "known fields are not kept as extra: {:?}", s.extra);
        let again: Scenario = serde_json::from_value(serde_json::to_value(s).unwrap()).unwrap();
        assert_eq!(&again, s);
        let label = &parse_scenarios(r#"{"task": "t", "difficulty": "join"}"#, "x").unwrap()[0];
        assert_eq!(label.difficulty, Some(Difficulty::Label("join".into())));
    }

    #[test]
    fn zero_max_turns_is_rejected() {
        let err = parse_scenarios("{\"task\": \"a\"}\n{\"task\": \"b\", \"max_turns\": 0}\n", "s.jsonl").unwrap_err().to_string();
        assert!(err.starts_with("s.jsonl:2: invalid scenario: \"max_turns\" is 0"), "{err}");
        assert_eq!(parse_scenarios("{\"task\": \"b\", \"max_turns\": 1}", "s").unwrap()[0].max_turns, Some(1));
    }

    #[test]
    fn a_file_beginning_with_a_byte_order_mark_is_read() {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in [("s.jsonl", "\u{feff}{\"task\": \"a\"}\n{\"task\": \"b\"}\n"), ("s.json", "\u{feff}[{\"task\": \"a\"}, {\"task\": \"b\"}]")] {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            let tasks: Vec<String> = load_scenarios(&path).unwrap().into_iter().map(|s| s.task).collect();
            assert_eq!(tasks, ["a", "b"], "{name}");
        }
    }

    #[test]
    fn errors_name_the_line_and_the_fix() {
        let err = parse_scenarios("{\"task\": \"ok\"}\n{\"tsk\": \"typo\"}\n", "data.jsonl").unwrap_err().to_string();
        assert!(err.starts_with("data.jsonl:2: invalid scenario: missing field `task`"), "{err}");
        assert!(err.contains("hint:"), "{err}");
        let dup = parse_scenarios("{\"id\":\"a\",\"task\":\"x\"}\n{\"id\":\"a\",\"task\":\"y\"}", "d").unwrap_err();
        assert!(matches!(dup, ScenarioError::DuplicateId { first: 1, second: 2, .. }));
        assert!(matches!(parse_scenarios("  \n", "e"), Err(ScenarioError::Empty { .. })));
    }

    #[test]
    fn ground_truth_that_matches_everything_or_nothing_is_rejected_with_its_line() {
        for (expected, says) in [
            (r#""""#, "empty string"),
            (r#""  ""#, "empty string"),
            (r#"{"contains": ""}"#, "matches every answer"),
            (r#"{"exact": " "}"#, "only an empty answer"),
            (r#"{"regex": "("}"#, "not a valid regular expression"),
            (r#"{"regex": ".*"}"#, "matches an empty answer"),
            (r#"{"regex": "x?"}"#, "matches an empty answer"),
            (r#"{"set": []}"#, "full credit to every answer"),
            (r#"{"set": ["Sales", ""]}"#, "item 2"),
            (r#"{"number": 3, "tolerance": -1}"#, "tolerance >= 0"),
        ] {
            let text = format!("{{\"task\": \"ok\"}}\n{{\"task\": \"t\", \"expected\": {expected}}}\n");
            let err = parse_scenarios(&text, "d.jsonl").unwrap_err();
            assert!(matches!(err, ScenarioError::Expected { line: 2, .. }), "{expected}: {err:?}");
            let msg = err.to_string();
            assert!(msg.starts_with("d.jsonl:2: ground truth") && msg.contains(says) && msg.contains("\nhint: "), "{expected}: {msg}");
        }
        // Ordinary forms still load.
        let ok = r#"{"task": "t", "expected": {"regex": "^\\d+$"}}
{"task": "t", "expected": {"set": ["Sales", 0]}}
{"task": "t", "expected": 0}
{"task": "t", "expected": {"number": 0, "tolerance": 0}}"#;
        assert_eq!(parse_scenarios(ok, "x").unwrap().len(), 4);
    }

    #[test]
    fn expected_state_is_a_command_or_matchers() {
        let text = r#"{"task": "t", "expected_state": {"command": "python3 check.py"}}
{"task": "t", "expected_state": {"contains": "Alice"}}
{"task": "t", "expected_state": "Alice"}"#;
        let s = parse_scenarios(text, "x").unwrap();
        assert_eq!(s[0].expected_state, Some(ExpectedState::Command(StateCommand { command: "python3 check.py".into() })));
        assert_eq!(s[1].expected_state, Some(ExpectedState::Match(Expected::Rule(ExpectedRule::Contains("Alice".into())))));
        assert_eq!(s[2].expected_state, Some(ExpectedState::Match(Expected::Text("Alice".into()))));
        for bad in [r#"{"command": " "}"#, r#"{"contains": ""}"#] {
            let err = parse_scenarios(&format!("{{\"task\": \"t\", \"expected_state\": {bad}}}"), "d").unwrap_err().to_string();
            assert!(err.contains("\"expected_state\"") && err.contains("hint:"), "{bad}: {err}");
        }
        let err = parse_scenarios(r#"{"task": "t", "expected_state": {"files": ["a"]}}"#, "d").unwrap_err().to_string();
        assert!(err.starts_with("d:1: invalid scenario"), "an unknown form is an error, not ignored: {err}");
    }

    #[test]
    fn seeded_split_is_reproducible_and_respects_given_splits() {
        let text: String = (0..20).map(|i| format!("{{\"task\": \"t{i}\"}}\n")).collect();
        let mut a = parse_scenarios(&text, "x").unwrap();
        a[0].split = Some(Split::Train);
        let mut b = a.clone();
        assign_splits(&mut a, 0.25, 7);
        assign_splits(&mut b, 0.25, 7);
        assert_eq!(a, b);
        assert_eq!(a[0].split, Some(Split::Train));
        assert_eq!(of_split(&a, Split::Validation).len(), 5);
        assert_eq!(of_split(&a, Split::Train).len(), 15);
    }
}
