//! Dataset export in the shapes the ecosystem reads: one JSON object per conversation with
//! `messages` and `tools` in OpenAI format (what OpenAI fine-tuning, Hugging Face `datasets` and
//! TRL's conversational SFT take), plus `id`, `scenario_id` and `source` columns; optionally the
//! unrolled form (one row per assistant turn with every earlier message as context), and Parquet
//! copies written by the Python environment's pyarrow with an explicit schema.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use ta_types::{Message, Role, ToolSpec};

use crate::SftError;
use ta_types::trace::{Trace, write_jsonl};

/// File names in an exported dataset directory.
pub const TRAIN_FILE: &str = "train.jsonl";
pub const UNROLLED_FILE: &str = "train_unrolled.jsonl";

/// One dataset row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSpec>,
    pub id: String,
    pub scenario_id: String,
    pub source: String,
}

/// One row per trace.
pub fn rows(traces: &[Trace]) -> Vec<Row> {
    traces
        .iter()
        .map(|t| Row { messages: t.messages.clone(), tools: t.tools.clone(), id: t.id.clone(), scenario_id: t.scenario_id.clone(), source: t.source.clone() })
        .collect()
}

/// One row per trained assistant turn (not those of `weight` 0): the conversation up to and
/// including that turn.
pub fn unrolled_rows(traces: &[Trace]) -> Vec<Row> {
    let mut out = Vec::new();
    for t in traces {
        let mut k = 0;
        for (i, m) in t.messages.iter().enumerate() {
            if m.role == Role::Assistant && m.weight != Some(0) {
                out.push(Row {
                    messages: t.messages[..=i].to_vec(),
                    tools: t.tools.clone(),
                    id: format!("{}/{k}", t.id),
                    scenario_id: t.scenario_id.clone(),
                    source: t.source.clone(),
                });
                k += 1;
            }
        }
    }
    out
}

/// What to write.
#[derive(Debug, Clone, Default)]
pub struct ExportOptions {
    pub unroll: bool,
    /// Also write `.parquet` next to each `.jsonl` (needs the Python environment).
    pub parquet: bool,
}

/// Writes `dir/train.jsonl` (and `train_unrolled.jsonl`, and Parquet copies); returns the paths.
pub async fn export(traces: &[Trace], dir: &Path, o: &ExportOptions) -> Result<Vec<PathBuf>, SftError> {
    let mut written = Vec::new();
    let train = dir.join(TRAIN_FILE);
    write_jsonl(&train, &rows(traces)).map_err(|e| SftError::io(&train, e))?;
    written.push(train);
    if o.unroll {
        let path = dir.join(UNROLLED_FILE);
        write_jsonl(&path, &unrolled_rows(traces)).map_err(|e| SftError::io(&path, e))?;
        written.push(path);
    }
    if o.parquet {
        let env = ta_python::PythonEnv::ensure()?;
        let jsonl: Vec<PathBuf> = written.clone();
        for src in jsonl {
            let dst = src.with_extension("parquet");
            let out = env.module_command(ta_python::SFT_DATA_MODULE).arg("parquet").arg(&src).arg(&dst).output().await.map_err(|e| SftError::io(&dst, e))?;
            if !out.status.success() {
                return Err(SftError::Python(format!("writing {} failed:\n{}", dst.display(), String::from_utf8_lossy(&out.stderr).trim())));
            }
            written.push(dst);
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ta_types::{Outcome, ToolCall};

    #[test]
    fn unrolling_gives_one_row_per_assistant_turn_with_its_context() {
        let mut call = Message::assistant("");
        call.tool_calls.push(ToolCall::new("c0", "list_tables", "{}"));
        let messages = vec![Message::system("s"), Message::user("q"), call, Message::tool("c0", "list_tables", "t1"), Message::assistant("done")];
        let t = Trace {
            id: "q#0".into(),
            scenario_id: "q".into(),
            split: None,
            source: "reference".into(),
            model: "reference".into(),
            messages: messages.clone(),
            tools: vec![],
            outcome: Outcome::Completed,
            num_turns: 2,
            tool_calls: 1,
            tool_errors: 0,
            malformed_calls: 0,
            truncated_turns: 0,
            final_answer: None,
            reward: None,
            reward_parts: Default::default(),
            error: None,
        };
        let rows = unrolled_rows(std::slice::from_ref(&t));
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].messages, messages[..3].to_vec());
        assert_eq!(rows[1].messages, messages);
        assert_eq!(rows[1].id, "q#0/1");
        let v = serde_json::to_value(&super::rows(std::slice::from_ref(&t))[0]).unwrap();
        assert_eq!(v["messages"][2]["tool_calls"][0]["function"]["arguments"], "{}");
        assert!(v.get("tools").is_some() && v.get("source").is_some());
        assert!(v["messages"][2].get("weight").is_none(), "no weight written where none is set");

        // a slip (weight 0) is context for the turns after it, never a row's trained turn
        let mut slipped = t.clone();
        slipped.messages[2].weight = Some(0);
        let rows = unrolled_rows(&[slipped]);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].messages[2].weight, Some(0));
        assert_eq!(serde_json::to_value(&rows[0]).unwrap()["messages"][2]["weight"], 0);
    }
}
