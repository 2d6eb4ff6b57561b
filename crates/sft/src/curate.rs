//! Curation: keep the traces worth imitating (completed, not cut by the token budget, few enough
//! turns, good enough reward and ground truth, not a copy of one already kept) and say why each
//! other one was dropped.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;

use serde::Serialize;
use serde_json::Value;
use ta_types::{Message, Outcome, Split};

use ta_types::trace::Trace;

/// What to keep. The defaults keep completed, untruncated training-split traces whose ground
/// truth (when the scenario has one) passes.
#[derive(Debug, Clone)]
pub struct CurateOptions {
    /// Minimum total reward (traces without a reward are dropped when set).
    pub min_reward: Option<f64>,
    /// Minimum ground-truth score for traces whose scenario has a ground truth.
    pub min_ground_truth: f64,
    /// Drop traces with more model turns than this.
    pub max_turns: Option<u32>,
    /// Drop traces with more failed tool calls than this.
    pub max_tool_errors: Option<u32>,
    /// Drop later copies of a conversation already kept (same messages, call ids ignored).
    pub dedupe: bool,
    /// Keep validation-split traces too (off: they would leak the evaluation into training).
    pub include_validation: bool,
}

impl Default for CurateOptions {
    fn default() -> Self {
        CurateOptions { min_reward: None, min_ground_truth: 1.0, max_turns: None, max_tool_errors: None, dedupe: false, include_validation: false }
    }
}

/// The kept traces and the count of each reason for dropping.
#[derive(Debug, Clone, Serialize)]
pub struct Curated {
    #[serde(skip)]
    pub kept: Vec<Trace>,
    /// source -> (traces seen, kept)
    pub by_source: BTreeMap<String, (usize, usize)>,
    pub dropped: BTreeMap<String, usize>,
}

/// Why `t` must go, if it must (the first reason that applies).
fn drop_reason(t: &Trace, o: &CurateOptions) -> Option<String> {
    if t.split == Some(Split::Validation) && !o.include_validation {
        return Some("validation split".into());
    }
    if t.outcome != Outcome::Completed {
        let outcome = serde_json::to_value(t.outcome).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
        return Some(format!("outcome {outcome}"));
    }
    if t.truncated_turns > 0 {
        return Some("a turn hit the token limit".into());
    }
    if o.max_turns.is_some_and(|m| t.num_turns > m) {
        return Some(format!("more than {} turns", o.max_turns.unwrap_or_default()));
    }
    if o.max_tool_errors.is_some_and(|m| t.tool_errors > m) {
        return Some(format!("more than {} tool errors", o.max_tool_errors.unwrap_or_default()));
    }
    if let Some(min) = o.min_reward {
        match t.reward {
            None => return Some("not scored".into()),
            Some(r) if r < min => return Some(format!("reward below {min}")),
            _ => {}
        }
    }
    if t.reward_parts.ground_truth.is_some_and(|g| g < o.min_ground_truth) {
        return Some("ground truth failed".into());
    }
    None
}

/// The conversation with tool-call ids left out and arguments parsed, so two traces that say the
/// same things compare equal.
fn dedupe_key(messages: &[Message]) -> String {
    let canon: Vec<Value> = messages
        .iter()
        .map(|m| {
            let calls: Vec<Value> = m
                .tool_calls
                .iter()
                .map(|c| {
                    let args = serde_json::from_str::<Value>(&c.function.arguments).unwrap_or_else(|_| Value::String(c.function.arguments.clone()));
                    serde_json::json!([c.function.name, args])
                })
                .collect();
            serde_json::json!([m.role, m.content.as_deref().unwrap_or("").trim(), calls, m.name])
        })
        .collect();
    Value::Array(canon).to_string()
}

/// Applies `o` to `traces` (in order: the first of duplicates is kept).
pub fn curate(traces: Vec<Trace>, o: &CurateOptions) -> Curated {
    let mut seen = HashSet::new();
    let mut out = Curated { kept: Vec::new(), by_source: BTreeMap::new(), dropped: BTreeMap::new() };
    for t in traces {
        let entry = out.by_source.entry(t.source.clone()).or_insert((0, 0));
        entry.0 += 1;
        let reason = drop_reason(&t, o).or_else(|| (o.dedupe && !seen.insert(dedupe_key(&t.messages))).then(|| "duplicate".into()));
        match reason {
            Some(r) => *out.dropped.entry(r).or_insert(0) += 1,
            None => {
                entry.1 += 1;
                out.kept.push(t);
            }
        }
    }
    out
}

impl std::fmt::Display for Curated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut s = format!("{:<28} {:>7} {:>7}\n", "source", "traces", "kept");
        for (source, (n, k)) in &self.by_source {
            let _ = writeln!(s, "{source:<28} {n:>7} {k:>7}");
        }
        let total: usize = self.by_source.values().map(|v| v.0).sum();
        let _ = writeln!(s, "{:<28} {total:>7} {:>7}", "all", self.kept.len());
        if !self.dropped.is_empty() {
            let _ = write!(s, "\n{:<36} {:>7}", "dropped because", "traces");
            for (reason, n) in &self.dropped {
                let _ = write!(s, "\n{reason:<36} {n:>7}");
            }
        }
        f.write_str(s.trim_end())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ta_types::ToolCall;
    use ta_types::trajectory::RewardParts;

    fn trace(id: &str, outcome: Outcome, gt: Option<f64>, call_id: &str) -> Trace {
        let mut a = Message::assistant("");
        a.content = None;
        a.tool_calls.push(ToolCall::new(call_id, "run_query", r#"{"sql": "SELECT 1"}"#));
        Trace {
            id: id.into(),
            scenario_id: id.into(),
            split: Some(Split::Train),
            source: "teacher".into(),
            model: "m".into(),
            messages: vec![Message::user("q"), a],
            tools: vec![],
            outcome,
            num_turns: 1,
            tool_calls: 1,
            tool_errors: 0,
            malformed_calls: 0,
            truncated_turns: 0,
            final_answer: None,
            reward: Some(1.0),
            reward_parts: RewardParts { ground_truth: gt, ..Default::default() },
            error: None,
        }
    }

    #[test]
    fn keeps_successes_and_names_every_drop() {
        let mut truncated = trace("d", Outcome::Completed, Some(1.0), "x");
        truncated.truncated_turns = 1;
        let mut val = trace("e", Outcome::Completed, Some(1.0), "y");
        val.split = Some(Split::Validation);
        let mut long = trace("f", Outcome::Completed, None, "z");
        long.num_turns = 9;
        long.messages[0] = Message::user("other");
        let traces = vec![
            trace("a", Outcome::Completed, Some(1.0), "c1"),
            trace("b", Outcome::Completed, Some(1.0), "c2"), // same conversation, other call id
            trace("c", Outcome::RanOutOfTurns, None, "c3"),
            trace("g", Outcome::Completed, Some(0.0), "c4"),
            truncated,
            val,
            long,
        ];
        let c = curate(traces, &CurateOptions { dedupe: true, max_turns: Some(8), ..Default::default() });
        assert_eq!(c.kept.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(), vec!["a"]);
        let want: BTreeMap<String, usize> = [
            ("duplicate", 1),
            ("outcome ran_out_of_turns", 1),
            ("ground truth failed", 1),
            ("a turn hit the token limit", 1),
            ("validation split", 1),
            ("more than 8 turns", 1),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        assert_eq!(c.dropped, want);
        assert_eq!(c.by_source["teacher"], (7, 1));
        let table = c.to_string();
        assert!(table.contains("duplicate") && table.contains("teacher"), "{table}");
    }

    #[test]
    fn min_reward_drops_unscored_and_low_traces() {
        let mut low = trace("a", Outcome::Completed, None, "c");
        low.reward = Some(0.2);
        let mut unscored = trace("b", Outcome::Completed, None, "d");
        unscored.reward = None;
        let c = curate(vec![low, unscored], &CurateOptions { min_reward: Some(0.5), ..Default::default() });
        assert!(c.kept.is_empty());
        assert_eq!(c.dropped["reward below 0.5"], 1);
        assert_eq!(c.dropped["not scored"], 1);
    }
}
