//! Trajectories: everything one rollout did, in the shape of the trajectory contract (`docs/architecture.md`), one JSON object per
//! line in `trajectories/*.jsonl`.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::chat::Message;

/// How a rollout ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The agent called `complete_task`.
    Completed,
    /// `max_turns` model calls, or `max_episode_tokens` written tokens, went by without
    /// `complete_task`.
    RanOutOfTurns,
    /// The model server or MCP server failed in a way the agent cannot recover from.
    Error,
    /// The conversation no longer fits the model's context window.
    ContextExceeded,
}

/// Where a trajectory sits in training: the step that sampled it and its index in its group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct GroupRef {
    pub step: u64,
    pub index: u32,
}

/// One model call, with the exact tokens when the server returned them (`return_token_ids`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Turn {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prompt_token_ids: Vec<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub completion_token_ids: Vec<u32>,
    /// Sampling log-probability of each completion token.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub logprobs: Vec<f32>,
    #[serde(default)]
    pub finish_reason: Option<String>,
    #[serde(default)]
    pub prompt_tokens: u64,
    #[serde(default)]
    pub completion_tokens: u64,
    #[serde(default)]
    pub latency_ms: u64,
}

/// Wall-clock time spent, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct Timings {
    pub total_ms: u64,
    pub model_ms: u64,
    pub tools_ms: u64,
    /// Getting the episode's own world ready and capturing its state afterwards (waiting for a
    /// pool server, copying state, resets, `--capture-state`); 0 without isolation.
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub isolation_ms: u64,
}

/// Reward components before weighting; absent parts were not configured or not available.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct RewardParts {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ground_truth: Option<f64>,
    /// The scenario's `expected_state` against the episode's captured state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<f64>,
    /// Rewards from user commands or endpoints, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub custom: BTreeMap<String, f64>,
}

/// One rollout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trajectory {
    pub scenario_id: String,
    #[serde(default)]
    pub group: GroupRef,
    pub messages: Vec<Message>,
    #[serde(default)]
    pub turns: Vec<Turn>,
    pub outcome: Outcome,
    /// The `complete_task` summary, or the last assistant text when the agent never called it.
    #[serde(default)]
    pub final_answer: Option<String>,
    pub num_turns: u32,
    /// Tool calls the agent made, `complete_task` excluded.
    pub tool_calls: u32,
    /// Calls that failed: malformed (bad JSON, unknown tool, schema violation) or an MCP error.
    pub tool_errors: u32,
    /// Of those, calls that were malformed before reaching the server.
    #[serde(default)]
    pub malformed_calls: u32,
    /// Failed calls followed later by a successful call.
    pub recovered_errors: u32,
    /// The `complete_task` answer repeats a tool error the server returned in the episode: the
    /// agent handed in the error instead of an answer (the rules score it below any episode that
    /// ran out of turns: `ta_reward::rules::score`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub answered_with_error: bool,
    #[serde(default)]
    pub reward: Option<f64>,
    #[serde(default)]
    pub reward_parts: RewardParts,
    #[serde(default)]
    pub judge_explanation: Option<String>,
    #[serde(default)]
    pub timings: Timings,
    /// The model name requested: the base model or an adapter such as `step-000042`.
    pub model: String,
    /// Why the rollout stopped with `error`, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What `--capture-state` printed after the episode (e.g. a file listing with hashes, an
    /// `sqlite3 .dump`): the state the episode left, which rewards check instead of the
    /// agent's word.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub captured_state: Option<String>,
}

impl Trajectory {
    /// A trajectory that has not played a turn yet: no calls, no reward, outcome `ran_out_of_turns`
    /// until something else happens.
    pub fn start(scenario_id: impl Into<String>, group: GroupRef, model: impl Into<String>, messages: Vec<Message>) -> Self {
        Trajectory {
            scenario_id: scenario_id.into(),
            group,
            messages,
            turns: Vec::new(),
            outcome: Outcome::RanOutOfTurns,
            final_answer: None,
            num_turns: 0,
            tool_calls: 0,
            tool_errors: 0,
            malformed_calls: 0,
            recovered_errors: 0,
            answered_with_error: false,
            reward: None,
            reward_parts: RewardParts::default(),
            judge_explanation: None,
            timings: Timings::default(),
            model: model.into(),
            error: None,
            captured_state: None,
        }
    }

    pub fn prompt_tokens(&self) -> u64 {
        self.turns.iter().map(|t| t.prompt_tokens).sum()
    }

    pub fn completion_tokens(&self) -> u64 {
        self.turns.iter().map(|t| t.completion_tokens).sum()
    }
}

/// Appends trajectories to a JSONL file, one flushed line each, so a crash loses at most the
/// line being written.
pub struct TrajectoryWriter {
    file: std::fs::File,
}

impl TrajectoryWriter {
    /// Opens `path` for appending; a torn last line left by a crash is cut first.
    pub fn append(path: &Path) -> std::io::Result<Self> {
        Ok(TrajectoryWriter { file: crate::jsonl::open_append(path)? })
    }

    pub fn write(&mut self, t: &Trajectory) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(t).map_err(std::io::Error::other)?;
        line.push(b'\n');
        self.file.write_all(&line)?;
        self.file.flush()
    }
}

/// A training run's validation of the base model, beside its `eval/step-N.jsonl`, when training
/// started from an adapter (so base -> adapter -> trained can be compared on the same scenarios).
pub const BASELINE_VALIDATION: &str = "eval/base.jsonl";

/// Trajectories in a JSONL file, counted by its lines without parsing them (0 when it cannot be
/// read).
pub fn count_trajectories(path: &Path) -> usize {
    std::fs::read(path).map(|b| b.iter().filter(|&&c| c == b'\n').count()).unwrap_or(0)
}

/// Replaces `path` with `trajectories` atomically (a temporary file, then rename), so a crash
/// leaves either the old file or the new one.
pub fn write_trajectories(path: &Path, trajectories: &[Trajectory]) -> std::io::Result<()> {
    crate::atomic::write_atomic(path, |w| crate::jsonl::write_rows(w, trajectories))
}

/// Reads a trajectories file. A torn last line (a crash mid-write) is skipped; any other bad line
/// is an error naming the file and line.
pub fn read_trajectories(path: &Path) -> std::io::Result<Vec<Trajectory>> {
    let file = std::fs::File::open(path)?;
    let lines: Vec<String> = std::io::BufReader::new(file).lines().collect::<Result<_, _>>()?;
    let mut out = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(line) {
            Ok(t) => out.push(t),
            Err(_) if i + 1 == lines.len() => break,
            Err(e) => {
                return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{}:{}: invalid trajectory: {e}", path.display(), i + 1)));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Trajectory {
        let mut t = Trajectory::start("q1", GroupRef { step: 3, index: 1 }, "base", vec![Message::user("hi")]);
        t.turns = vec![Turn { completion_token_ids: vec![1, 2], logprobs: vec![-0.5, -0.1], ..Default::default() }];
        t.outcome = Outcome::Completed;
        t.final_answer = Some("42".into());
        t.num_turns = 1;
        t
    }

    #[test]
    fn writer_appends_and_reader_skips_a_torn_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t/step-000001.jsonl");
        let mut w = TrajectoryWriter::append(&path).unwrap();
        w.write(&sample()).unwrap();
        w.write(&sample()).unwrap();
        drop(w);
        std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(b"{\"scenario_id\": \"tor").unwrap();
        let back = read_trajectories(&path).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back[0], sample());
        let v = serde_json::to_value(sample()).unwrap();
        assert_eq!(v["outcome"], "completed");
        assert_eq!(v["group"]["step"], 3);
    }
}
