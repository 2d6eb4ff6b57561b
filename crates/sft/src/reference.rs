//! Reference-solution traces: when no teacher model is reachable, a scenario's `reference_sql`
//! becomes the ideal episode on a SQL server (the demo server's tools): `list_tables`,
//! `describe_table` for each table the query reads, `run_query(reference_sql)`, then
//! `complete_task` with an answer written from the result rows. Every tool call really goes to
//! the MCP server through the agent loop's tool host, so the tool results are exactly what a model
//! would see; the answer is checked against the scenario's ground truth and the episode is dropped
//! (and reported) when it does not pass.

use std::time::Instant;

use regex::Regex;
use serde_json::{Value, json};
use ta_reward::RewardConfig;
use ta_rollout::ToolHost;
use ta_rollout::agent::truncate;
use ta_types::trajectory::GroupRef;
use ta_types::{Message, Outcome, Scenario, ToolCall, Trajectory};

use crate::SftError;
use crate::trace::{SOURCE_REFERENCE, Trace};

/// The tools a reference trace needs from the server.
pub const REQUIRED_TOOLS: [&str; 3] = ["list_tables", "describe_table", "run_query"];

#[derive(Debug, Clone)]
pub struct ReferenceOptions {
    pub tool_result_max_chars: usize,
    pub reward: RewardConfig,
}

/// A scenario that got no trace, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Skipped {
    pub scenario_id: String,
    pub reason: String,
}

/// Builds the reference trace of every scenario that has a `reference_sql`. Fails only when the
/// server lacks the tools or the connection breaks; scenario-level problems are `Skipped`.
pub async fn reference_traces<T: ToolHost>(
    tools: &T,
    system_prompt: &str,
    scenarios: &[Scenario],
    opts: &ReferenceOptions,
) -> Result<(Vec<Trace>, Vec<Skipped>), SftError> {
    let names: Vec<&str> = tools.specs().iter().map(|t| t.name()).collect();
    let missing: Vec<&str> = REQUIRED_TOOLS.iter().copied().filter(|n| !names.contains(n)).collect();
    if !missing.is_empty() {
        return Err(SftError::Reference(format!(
            "the server has no {} tool(s) (it offers: {})\nhint: reference traces need a SQL server with list_tables, describe_table and run_query, such as `train-agent demo-server`; use a teacher model (--base-url/--model) or rejection sampling (--base-model) for other servers",
            missing.join(", "),
            names.join(", ")
        )));
    }
    let mut traces = Vec::new();
    let mut skipped = Vec::new();
    for s in scenarios {
        let skip = |reason: String| Skipped { scenario_id: s.id.clone(), reason };
        let Some(sql) = s.extra.get("reference_sql").and_then(Value::as_str) else {
            skipped.push(skip("no reference_sql".into()));
            continue;
        };
        if s.expected.is_none() {
            skipped.push(skip("no expected answer to check the reference against".into()));
            continue;
        }
        match episode(tools, system_prompt, s, sql, opts).await? {
            Ok(t) => {
                let gt = t.reward_parts.ground_truth.unwrap_or(0.0);
                if gt < 1.0 {
                    skipped.push(skip(format!("the answer written from the result ({:?}) fails the ground truth", t.final_answer.as_deref().unwrap_or(""))));
                } else {
                    traces.push(Trace::from_trajectory(&t, Some(s), tools.specs(), SOURCE_REFERENCE));
                }
            }
            Err(reason) => skipped.push(skip(reason)),
        }
    }
    Ok((traces, skipped))
}

/// One reference episode; `Ok(Err(reason))` when the scenario cannot be turned into one.
async fn episode<T: ToolHost>(tools: &T, system_prompt: &str, s: &Scenario, sql: &str, opts: &ReferenceOptions) -> Result<Result<Trajectory, String>, SftError> {
    let started = Instant::now();
    let mut t = Trajectory::start(&s.id, GroupRef::default(), SOURCE_REFERENCE, vec![Message::system(system_prompt), Message::user(&s.task)]);
    let listing = match call(tools, &mut t, "list_tables", json!({}), opts).await? {
        Ok(text) => text,
        Err(e) => return Ok(Err(format!("list_tables failed: {e}"))),
    };
    for table in tables_of(sql, &listing) {
        if let Err(e) = call(tools, &mut t, "describe_table", json!({"table_name": table}), opts).await? {
            return Ok(Err(format!("describe_table({table}) failed: {e}")));
        }
    }
    let result = match call(tools, &mut t, "run_query", json!({"sql": sql}), opts).await? {
        Ok(text) => text,
        Err(e) => return Ok(Err(format!("the reference query failed: {e}"))),
    };
    let answer = match answer_from_table(&result) {
        Ok(a) => a,
        Err(e) => return Ok(Err(e)),
    };
    let args = json!({"summary": answer});
    t.messages.push(assistant_call(t.num_turns, ta_mcp::COMPLETE_TASK, &args));
    t.num_turns += 1;
    t.final_answer = Some(answer);
    t.outcome = Outcome::Completed;
    t.timings.total_ms = started.elapsed().as_millis() as u64;
    ta_reward::score(&opts.reward, s, &mut t);
    Ok(Ok(t))
}

fn assistant_call(turn: u32, name: &str, args: &Value) -> Message {
    let mut m = Message::assistant("");
    m.content = None;
    m.tool_calls.push(ToolCall::new(format!("call_ref_{turn}"), name, args.to_string()));
    m
}

/// One assistant turn calling `name`, and its result as the agent loop would show it. The inner
/// `Err` is a tool error (the text the model would see); the outer one a broken connection.
async fn call<T: ToolHost>(tools: &T, t: &mut Trajectory, name: &str, args: Value, opts: &ReferenceOptions) -> Result<Result<String, String>, SftError> {
    let msg = assistant_call(t.num_turns, name, &args);
    let id = msg.tool_calls[0].id.clone();
    t.messages.push(msg);
    t.num_turns += 1;
    t.tool_calls += 1;
    tools.check(name, &args).map_err(|e| SftError::Reference(format!("{name}: {e}")))?;
    let t0 = Instant::now();
    let result = tools.call(name, args).await.map_err(|e| SftError::Reference(format!("the MCP server failed during {name}: {e}")))?;
    t.timings.tools_ms += t0.elapsed().as_millis() as u64;
    let text = truncate(&result.text, opts.tool_result_max_chars);
    t.messages.push(Message::tool(id, name, if result.is_error { format!("Error: {text}") } else { text.clone() }));
    Ok(if result.is_error { Err(text) } else { Ok(text) })
}

/// The tables a query reads (after FROM or JOIN), in order of appearance, that the server lists.
fn tables_of(sql: &str, listing: &str) -> Vec<String> {
    let re = Regex::new(r"(?i)\b(?:from|join)\s+([A-Za-z_][A-Za-z0-9_]*)").expect("valid regex");
    let listed = |name: &str| Regex::new(&format!(r"(?i)\b{}\b", regex::escape(name))).expect("escaped").is_match(listing);
    let mut out: Vec<String> = Vec::new();
    for cap in re.captures_iter(sql) {
        let name = cap[1].to_string();
        if listed(&name) && !out.iter().any(|o| o.eq_ignore_ascii_case(&name)) {
            out.push(name);
        }
    }
    out
}

/// The answer text from `run_query`'s table (header, `a | b` rows, a `(N rows)` footer): one row
/// gives its cells joined by ", "; several rows give "first cell (other cells)" joined by ", ".
fn answer_from_table(text: &str) -> Result<String, String> {
    let lines: Vec<&str> = text.lines().collect();
    let Some((footer, body)) = lines.split_last() else { return Err("the reference query returned nothing".into()) };
    if footer.starts_with("(showing") || footer.starts_with("[truncated") {
        return Err("the reference result is longer than what the agent sees".into());
    }
    let rows: Vec<Vec<&str>> = body.iter().skip(1).map(|l| l.split(" | ").collect()).collect();
    match rows.as_slice() {
        [] => Err("the reference query returned no rows".into()),
        [row] => Ok(row.join(", ")),
        rows => Ok(rows
            .iter()
            .map(|r| match r.split_first() {
                Some((first, rest)) if !rest.is_empty() => format!("{first} ({})", rest.join(", ")),
                _ => r.join(", "),
            })
            .collect::<Vec<_>>()
            .join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_the_listed_ones_after_from_and_join() {
        let listing = "- employees (5 rows)\n- departments (2 rows)";
        let sql = "WITH x AS (SELECT * FROM employees) SELECT d.name FROM x JOIN departments d ON 1 JOIN Employees e";
        assert_eq!(tables_of(sql, listing), vec!["employees", "departments"]);
    }

    #[test]
    fn answers_come_from_the_rows() {
        assert_eq!(answer_from_table("count(*)\n9\n(1 row)").unwrap(), "9");
        assert_eq!(answer_from_table("name | n\nAda | 3\nBob | 2\n(2 rows)").unwrap(), "Ada (3), Bob (2)");
        assert_eq!(answer_from_table("name\nAda\nBob\n(2 rows)").unwrap(), "Ada, Bob");
        assert!(answer_from_table("name\n(0 rows)").is_err());
        assert!(answer_from_table("id\n1\n(showing 100 of 300 rows; use WHERE)").is_err());
    }
}
