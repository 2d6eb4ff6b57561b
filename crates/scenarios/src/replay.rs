//! The replay check of generated tasks, the walk's check (`ta_walk::replay`) for tasks a teacher
//! wrote: agreement shows that a solver gives the same answer several times, not that the answer
//! comes from the server. An agreed task is kept only when the calls of its first agreeing
//! episode, made again on a fresh server (started the same way, so nothing the solver's server
//! holds carries over), return what the solver was shown, and when an answer that names things
//! names things those results show. Its calls become the task's `reference`, so `collect
//! --reference` replays it without a model, as it does the walk's.
//!
//! Only calls to tools that read are replayed (`ta_walk::classify`); a task whose episode called
//! a tool that may write is kept on agreement alone, as before, and counted.

use std::collections::HashMap;

use serde_json::{Map, Value};
use ta_rollout::ToolHost;
use ta_rollout::agent::truncate;
use ta_types::chat::Role;
use ta_types::scenario::ExpectedRule;
use ta_types::{Expected, ReferenceStep, Trajectory};

/// Why the replay dropped a task (the keys of [`crate::pipeline::Counts::replay_dropped`]).
pub const NO_CALL: &str = "answered without a successful tool call";
pub const CHANGED: &str = "a result differs on a fresh server";
pub const NOT_SHOWN: &str = "its answer names what no result shows";

/// One successful call of an episode and the result as the solver was shown it.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub tool: String,
    pub arguments: Map<String, Value>,
    pub shown: String,
}

/// What the replay made of a task.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Every call reproduced and the answer is in what they show, or worked out from it
    /// (`derived`: a count, a sum, a yes/no).
    Kept { reference: Vec<ReferenceStep>, derived: bool },
    /// A call went to a tool that may write: not replayed, kept on agreement.
    Writes(String),
    /// Dropped, with one of the reasons above.
    Dropped(&'static str),
}

/// The episode's calls that reached the server and succeeded, in order (`complete_task`, calls
/// the loop refused and calls the server answered with an error left out: nothing was learnt
/// from them).
pub fn steps(t: &Trajectory) -> Vec<Step> {
    let replies: HashMap<&str, &str> =
        t.messages.iter().filter(|m| m.role == Role::Tool).filter_map(|m| Some((m.tool_call_id.as_deref()?, m.content.as_deref().unwrap_or("")))).collect();
    let mut out = Vec::new();
    for call in t.messages.iter().filter(|m| m.role == Role::Assistant).flat_map(|m| &m.tool_calls) {
        let Some(shown) = replies.get(call.id.as_str()) else { continue };
        let Ok(Value::Object(arguments)) = serde_json::from_str::<Value>(if call.function.arguments.trim().is_empty() { "{}" } else { &call.function.arguments }) else {
            continue;
        };
        // The loop prefixes refusals and the server's errors alike (`ta_rollout::agent`).
        if call.function.name == ta_mcp::COMPLETE_TASK || shown.starts_with("Error: ") {
            continue;
        }
        out.push(Step { tool: call.function.name.clone(), arguments, shown: shown.to_string() });
    }
    out
}

/// Replays `episode`'s calls on `fresh` and judges the task whose agreed answer is `expected`.
/// `reads` says whether a tool only reads; `view` is how much of a result the solver was shown.
/// `Err` is a broken connection to the fresh server.
pub async fn check<F: ToolHost>(fresh: &F, reads: impl Fn(&str) -> bool, episode: &Trajectory, expected: &Expected, view: usize) -> Result<Verdict, String> {
    let steps = steps(episode);
    if steps.is_empty() {
        return Ok(Verdict::Dropped(NO_CALL));
    }
    if let Some(s) = steps.iter().find(|s| !reads(&s.tool)) {
        return Ok(Verdict::Writes(s.tool.clone()));
    }
    for s in &steps {
        // What the solver would be shown now; `None` when the fresh server answers with an error.
        let call = || async {
            let r = fresh.call(&s.tool, Value::Object(s.arguments.clone())).await?;
            Ok::<_, String>((!r.is_error).then(|| truncate(&r.text, view)))
        };
        let Some(now) = call().await? else { return Ok(Verdict::Dropped(CHANGED)) };
        if now == s.shown {
            continue;
        }
        // Something differs: a second call tells what moves by itself from what changed.
        let Some(again) = call().await? else { return Ok(Verdict::Dropped(CHANGED)) };
        if !ta_walk::parse::same_data(&s.shown, &now, &again) {
            return Ok(Verdict::Dropped(CHANGED));
        }
    }
    let shown: Vec<&str> = steps.iter().map(|s| s.shown.as_str()).collect();
    if !grounded(expected, &shown) {
        return Ok(Verdict::Dropped(NOT_SHOWN));
    }
    let reference = steps.iter().map(|s| ReferenceStep { tool: s.tool.clone(), arguments: s.arguments.clone(), with_previous: false }).collect();
    Ok(Verdict::Kept { reference, derived: !ta_reward::ground_truth::shows(expected, shown.last().expect("checked non-empty above")) })
}

/// Whether an answer that names things (a short text, a list of names) names only what some
/// result shows; numbers, yes/no and long texts (`agree::infer_expected`'s `exact`) are worked
/// out and pass.
fn grounded(expected: &Expected, shown: &[&str]) -> bool {
    let items: Vec<&str> = match expected {
        Expected::Text(s) | Expected::Rule(ExpectedRule::Contains(s)) => vec![s.as_str()],
        Expected::Rule(ExpectedRule::Set(values)) => values.iter().filter_map(Value::as_str).collect(),
        _ => return true,
    };
    items.iter().all(|item| shown.iter().any(|text| text.to_lowercase().contains(&item.trim().to_lowercase())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use ta_reward::ground_truth::shows;
    use ta_types::chat::{Message, ToolCall};
    use ta_types::trajectory::GroupRef;

    fn episode(calls: &[(&str, Value, &str)], answer: &str) -> Trajectory {
        let mut t = Trajectory::start("gen-0000", GroupRef::default(), "solver", vec![Message::system("s"), Message::user("q")]);
        for (i, (tool, args, reply)) in calls.iter().enumerate() {
            let mut m = Message::assistant("");
            m.tool_calls.push(ToolCall::new(format!("c{i}"), *tool, args.to_string()));
            t.messages.push(m);
            t.messages.push(Message::tool(format!("c{i}"), *tool, reply.to_string()));
        }
        let mut m = Message::assistant("");
        m.tool_calls.push(ToolCall::new("done", ta_mcp::COMPLETE_TASK, json!({"summary": answer}).to_string()));
        t.messages.push(m);
        t
    }

    #[test]
    fn steps_are_the_calls_that_succeeded_with_what_they_showed() {
        let t = episode(
            &[("run_query", json!({"sql": "SELECT 1"}), "1"), ("run_query", json!({"sql": "bad"}), "Error: no such table"), ("list_tables", json!({}), "a\nb")],
            "1",
        );
        let s = steps(&t);
        assert_eq!(s.iter().map(|s| (s.tool.as_str(), s.shown.as_str())).collect::<Vec<_>>(), [("run_query", "1"), ("list_tables", "a\nb")]);
        assert_eq!(s[0].arguments["sql"], "SELECT 1");
    }

    #[test]
    fn an_answer_that_names_things_must_be_shown() {
        let contains = |s: &str| Expected::Rule(ExpectedRule::Contains(s.into()));
        let shown = ["departments: Sales, Engineering", "Sales has 12 people"];
        assert!(grounded(&contains("sales"), &shown) && shows(&contains("sales"), shown[1]));
        assert!(grounded(&contains("Engineering"), &shown) && !shows(&contains("Engineering"), shown[1]));
        assert!(!grounded(&contains("Marketing"), &shown));
        let set = Expected::Rule(ExpectedRule::Set(vec![json!("Sales"), json!("Engineering")]));
        assert!(grounded(&set, &shown) && !shows(&set, shown[1]));
        assert!(!grounded(&Expected::Rule(ExpectedRule::Set(vec![json!("Sales"), json!("Legal")])), &shown));
        // A number is worked out: grounded always, shown when the last result has it.
        let twelve = Expected::Rule(ExpectedRule::Number { number: 12.0, tolerance: 0.0 });
        assert!(grounded(&twelve, &["nothing"]) && shows(&twelve, shown[1]) && !shows(&twelve, shown[0]));
    }
}
