//! Traces: one finished conversation kept for supervised fine-tuning, in the open format the
//! workshop notes describe (`messages` + `tools`, OpenAI chat format), plus what curation needs to
//! decide (outcome, reward parts, truncation) and where it came from (`source`).
//!
//! A trace is a [`Trajectory`] without the token-level record (SFT re-renders the conversation
//! through the chat template) and with the tools as the model saw them.

use std::io::BufRead;
use std::path::Path;

use crate::trajectory::RewardParts;
use crate::{Message, Outcome, Scenario, Split, ToolSpec, Trajectory};
use serde::{Deserialize, Serialize};

/// `source` of traces built from the scenarios' reference solutions.
pub const SOURCE_REFERENCE: &str = "reference";
/// `source` of traces the trained model itself sampled, kept where the ground truth passes.
pub const SOURCE_REJECTION_SAMPLING: &str = "rejection-sampling";

/// The file a collection directory keeps its traces in.
pub const TRACES_FILE: &str = "traces.jsonl";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    /// `{scenario_id}#{index}` (index in the scenario's group of samples).
    pub id: String,
    pub scenario_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split: Option<Split>,
    /// A teacher model's name, `rejection-sampling` or `reference`.
    pub source: String,
    /// The model name that was asked (for `reference`, `reference`).
    pub model: String,
    pub messages: Vec<Message>,
    /// The tools offered, in OpenAI `tools` format, `complete_task` included.
    pub tools: Vec<ToolSpec>,
    pub outcome: Outcome,
    pub num_turns: u32,
    pub tool_calls: u32,
    pub tool_errors: u32,
    #[serde(default)]
    pub malformed_calls: u32,
    /// Model turns cut by the token budget (`finish_reason: "length"`).
    #[serde(default)]
    pub truncated_turns: u32,
    #[serde(default)]
    pub final_answer: Option<String>,
    #[serde(default)]
    pub reward: Option<f64>,
    #[serde(default)]
    pub reward_parts: RewardParts,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Trace {
    /// The trace of a scored trajectory of `scenario` played with `tools`.
    pub fn from_trajectory(t: &Trajectory, scenario: Option<&Scenario>, tools: &[ToolSpec], source: &str) -> Trace {
        Trace {
            id: format!("{}#{}", t.scenario_id, t.group.index),
            scenario_id: t.scenario_id.clone(),
            split: scenario.and_then(|s| s.split),
            source: source.to_string(),
            model: t.model.clone(),
            messages: t.messages.clone(),
            tools: tools.to_vec(),
            outcome: t.outcome,
            num_turns: t.num_turns,
            tool_calls: t.tool_calls,
            tool_errors: t.tool_errors,
            malformed_calls: t.malformed_calls,
            truncated_turns: t.turns.iter().filter(|u| u.finish_reason.as_deref() == Some("length")).count() as u32,
            final_answer: t.final_answer.clone(),
            reward: t.reward,
            reward_parts: t.reward_parts.clone(),
            error: t.error.clone(),
        }
    }
}

/// Writes `traces` to `path` atomically (temporary file, then rename).
pub fn write_traces(path: &Path, traces: &[Trace]) -> std::io::Result<()> {
    write_jsonl(path, traces)
}

/// Writes serialisable rows as JSONL, atomically.
pub fn write_jsonl<T: Serialize>(path: &Path, rows: &[T]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    crate::atomic::write_atomic(path, |w| crate::jsonl::write_rows(w, rows))
}

/// Reads a traces file; errors name the file and line.
pub fn read_traces(path: &Path) -> std::io::Result<Vec<Trace>> {
    let file = std::fs::File::open(path)?;
    let mut out = Vec::new();
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line?;
        let line = if i == 0 { crate::jsonl::strip_bom(&line) } else { &line };
        if line.trim().is_empty() {
            continue;
        }
        let t =
            serde_json::from_str(line).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{}:{}: invalid trace: {e}", path.display(), i + 1)))?;
        out.push(t);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trajectory::{GroupRef, Turn};

    #[test]
    fn trace_keeps_messages_tools_and_counts_truncated_turns() {
        let mut t = Trajectory::start("q1", GroupRef { step: 0, index: 2 }, "teacher", vec![Message::user("hi")]);
        t.turns = vec![Turn { finish_reason: Some("length".into()), ..Default::default() }, Turn { finish_reason: Some("tool_calls".into()), ..Default::default() }];
        let tools = vec![ToolSpec::new("list_tables", None, serde_json::json!({"type": "object"}))];
        let trace = Trace::from_trajectory(&t, None, &tools, "teacher");
        assert_eq!(trace.id, "q1#2");
        assert_eq!(trace.truncated_turns, 1);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        write_traces(&path, std::slice::from_ref(&trace)).unwrap();
        assert_eq!(read_traces(&path).unwrap(), vec![trace.clone()]);
        let text = std::fs::read_to_string(&path).unwrap();
        let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(v["tools"][0]["function"]["name"], "list_tables");
        assert_eq!(v["source"], "teacher");
        // A copy saved by an editor that starts files with a byte-order mark reads the same.
        std::fs::write(&path, format!("\u{feff}{text}")).unwrap();
        assert_eq!(read_traces(&path).unwrap(), vec![trace]);
    }
}
