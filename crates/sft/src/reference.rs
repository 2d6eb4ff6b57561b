//! Reference demonstrations: a scenario's `reference` steps (tool calls) replayed on any server
//! through the agent loop's tool host, ending with `complete_task` carrying the scenario's checked
//! answer. A demo scenario's `reference_sql` is sugar for the same form: it becomes a call of the
//! server's SQL query tool. Where the server offers them and the steps lack them, exploration
//! steps come first (list the tables, describe each table the SQL reads), as a careful agent
//! would.
//!
//! Every tool call really goes to the MCP server, so the tool results are exactly what a model
//! would see. A trace is kept only when every step succeeds, the last result shows the expected
//! answer (unless the scenario says the answer is derived from it: a walked count or extreme),
//! and the final answer passes the scenario's ground truth; otherwise the scenario is
//! skipped with the reason.

use std::time::Instant;

use rand::Rng;
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use regex::Regex;
use serde_json::{Value, json};
use ta_reward::RewardConfig;
use ta_rollout::ToolHost;
use ta_rollout::agent::truncate;
use ta_synth::SqlTools;
use ta_synth::mistake::{Misnamed, Named};
use ta_types::scenario::ExpectedRule;
use ta_types::trajectory::GroupRef;
use ta_types::{Expected, Message, Outcome, ReferenceStep, Role, Scenario, ToolCall, Trajectory};

use crate::SftError;
use ta_types::trace::{SOURCE_REFERENCE, Trace};

/// The share of SQL reference traces that show a slip and its repair (`collect
/// --recovery-share`, `fit --recovery-share`): none by default, because a quarter of them, with
/// the repair straight to the right query, made SFT worse on people's questions: the adapter
/// stopped handing errors in, and instead repeated its failing query word for word until it ran
/// out of turns (benches/RESULTS.md, "Run 28"). The repair through a look-up is not measured.
pub const DEFAULT_RECOVERY_SHARE: f64 = 0.0;

#[derive(Debug, Clone)]
pub struct ReferenceOptions {
    pub tool_result_max_chars: usize,
    pub reward: RewardConfig,
    /// The share of traces whose query is first written with a slip (a column or table misnamed,
    /// [`ta_synth::mistake`]) that the server rejects, then written right: the slip's turn has
    /// `weight` 0 (shown, not trained), so SFT teaches the repair after an error and not the slip.
    /// Only where the server has a SQL query tool; 0 turns it off.
    pub recovery_share: f64,
    /// Which traces get a slip, and which slip.
    pub seed: u64,
}

/// A scenario that got no trace, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Skipped {
    pub scenario_id: String,
    pub reason: String,
}

/// Builds the reference trace of every scenario with `reference` steps or a `reference_sql`.
/// Fails only when the connection breaks, or when every scenario needs a SQL query tool the
/// server does not have; scenario-level problems are `Skipped`.
pub async fn reference_traces<T: ToolHost>(
    tools: &T,
    system_prompt: &str,
    scenarios: &[Scenario],
    opts: &ReferenceOptions,
) -> Result<(Vec<Trace>, Vec<Skipped>), SftError> {
    let sql_tools = SqlTools::detect(tools.specs(), None);
    if let Err(e) = &sql_tools
        && scenarios.iter().all(|s| s.reference.is_empty())
        && scenarios.iter().any(|s| s.extra.contains_key("reference_sql"))
    {
        return Err(SftError::Reference(format!("the scenarios give reference_sql, but {e}")));
    }
    let sql_tools = sql_tools.ok();
    let listing = match sql_tools.as_ref().and_then(|t| t.list.as_ref()) {
        Some(list) => tools.call(list, json!({})).await.map_err(|e| SftError::Reference(format!("the MCP server failed during {list}: {e}")))?.text,
        None => String::new(),
    };
    let mut traces = Vec::new();
    let mut skipped = Vec::new();
    let mut rng = ChaCha8Rng::seed_from_u64(opts.seed);
    for s in scenarios {
        let skip = |reason: String| Skipped { scenario_id: s.id.clone(), reason };
        let steps = match steps_of(s, sql_tools.as_ref(), &listing) {
            Ok(steps) => steps,
            Err(reason) => {
                skipped.push(skip(reason));
                continue;
            }
        };
        let Some(expected) = &s.expected else {
            skipped.push(skip("no expected answer to check the reference against".into()));
            continue;
        };
        let Some(answer) = answer_of(expected) else {
            skipped.push(skip("a regex ground truth cannot be written as the answer".into()));
            continue;
        };
        let slip = sql_tools.as_ref().filter(|_| rng.random::<f64>() < opts.recovery_share).map(|t| Slip { tools: t, listing: &listing, rng: &mut rng });
        match episode(tools, system_prompt, s, &steps, &answer, opts, slip).await? {
            Ok(t) => {
                if t.reward_parts.ground_truth.unwrap_or(0.0) < 1.0 {
                    skipped.push(skip(format!("the answer {answer:?} fails the ground truth")));
                } else {
                    traces.push(Trace::from_trajectory(&t, Some(s), tools.specs(), SOURCE_REFERENCE));
                }
            }
            Err(reason) => skipped.push(skip(reason)),
        }
    }
    Ok((traces, skipped))
}

/// The steps to replay: the scenario's own, or its `reference_sql` as a query-tool call, with
/// the server's exploration steps in front where the steps run SQL without exploring first.
fn steps_of(s: &Scenario, sql_tools: Option<&SqlTools>, listing: &str) -> Result<Vec<ReferenceStep>, String> {
    let mut steps = s.reference.clone();
    if steps.is_empty() {
        let Some(sql) = s.extra.get("reference_sql").and_then(Value::as_str) else {
            return Err("no reference steps or reference_sql".into());
        };
        let t = sql_tools.ok_or("reference_sql, but the server has no SQL query tool")?;
        steps.push(ta_synth::query_step(t, sql));
    }
    let Some(t) = sql_tools else { return Ok(steps) };
    let sql = steps.iter().find(|st| st.tool == t.query.name).and_then(|st| st.arguments.get(&t.query.arg)).and_then(Value::as_str);
    let explores = steps.iter().any(|st| Some(&st.tool) == t.list.as_ref() || Some(&st.tool) == t.describe.as_ref().map(|d| &d.name));
    match sql {
        Some(sql) if !explores => Ok(ta_synth::exploration_steps(t, &tables_of(sql, listing)).into_iter().chain(steps).collect()),
        _ => Ok(steps),
    }
}

/// The answer text a scenario's ground truth asks for; `None` for a regular expression.
fn answer_of(expected: &Expected) -> Option<String> {
    let number = |x: f64| if x.fract() == 0.0 && x.abs() < 1e15 { format!("{}", x as i64) } else { format!("{x}") };
    let value = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.as_f64().map(number).unwrap_or_else(|| n.to_string()),
        other => other.to_string(),
    };
    Some(match expected {
        Expected::Number(x) => number(*x),
        Expected::Text(s) => s.clone(),
        Expected::Rule(ExpectedRule::Exact(s) | ExpectedRule::Contains(s)) => s.clone(),
        Expected::Rule(ExpectedRule::Number { number: x, .. }) => number(*x),
        Expected::Rule(ExpectedRule::Set(values)) => values.iter().map(value).collect::<Vec<_>>().join(", "),
        Expected::Rule(ExpectedRule::Regex(_)) => return None,
    })
}

/// One reference episode; `Ok(Err(reason))` when the scenario cannot be turned into one.
async fn episode<T: ToolHost>(
    tools: &T,
    system_prompt: &str,
    s: &Scenario,
    steps: &[ReferenceStep],
    answer: &str,
    opts: &ReferenceOptions,
    mut slip: Option<Slip<'_>>,
) -> Result<Result<Trajectory, String>, SftError> {
    let started = Instant::now();
    let mut t = Trajectory::start(&s.id, GroupRef::default(), SOURCE_REFERENCE, vec![Message::system(system_prompt), Message::user(&s.task)]);
    let mut last = String::new();
    for (i, step) in steps.iter().enumerate() {
        // One slip a trace, before its first query.
        if slip.as_ref().is_some_and(|sl| sl.tools.query.name == step.tool && !step.with_previous)
            && let Some(mut slip) = slip.take()
        {
            slip.before(tools, &mut t, step, opts).await?;
        }
        match call(tools, &mut t, step, opts).await? {
            Ok(text) => last = text,
            Err(e) => return Ok(Err(format!("step {} ({}) failed: {}", i + 1, step.tool, truncate(&e, 300)))),
        }
    }
    let expected = s.expected.as_ref().expect("checked by the caller");
    // A count or an extreme is worked out from the last result, not shown in it; the walk's
    // replay checked it already.
    let derived = s.extra.get(ta_types::scenario::EXTRA_DERIVED).and_then(Value::as_bool).unwrap_or(false);
    if !derived && !ta_reward::ground_truth::shows(expected, &last) {
        return Ok(Err(format!("the last tool result does not show the expected answer {answer:?}")));
    }
    let args = json!({"summary": answer});
    let mut answer_turn = assistant_call(t.num_turns, ta_mcp::COMPLETE_TASK, &args);
    // A worked-out answer (a count, an extreme) is worked out in the open first.
    answer_turn.content = s.extra.get(ta_types::scenario::EXTRA_EXPLANATION).and_then(Value::as_str).map(String::from);
    t.messages.push(answer_turn);
    t.num_turns += 1;
    t.final_answer = Some(answer.to_string());
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

/// One assistant turn calling the step's tool (or, for a step made `with_previous`, one more
/// call of the turn before, whose results it follows), and its result as the agent loop would
/// show it. The inner `Err` is a tool error or a call the tool host refuses (the text the model
/// would see); the outer one a broken connection.
async fn call<T: ToolHost>(tools: &T, t: &mut Trajectory, step: &ReferenceStep, opts: &ReferenceOptions) -> Result<Result<String, String>, SftError> {
    let (name, args) = (step.tool.as_str(), Value::Object(step.arguments.clone()));
    if let Err(e) = tools.check(name, &args) {
        return Ok(Err(e));
    }
    let id = match t.messages.iter_mut().rev().find(|m| m.role == Role::Assistant).filter(|_| step.with_previous) {
        Some(turn) => {
            let id = format!("call_ref_{}_{}", t.num_turns - 1, turn.tool_calls.len());
            turn.tool_calls.push(ToolCall::new(id.clone(), name, args.to_string()));
            id
        }
        None => {
            let msg = assistant_call(t.num_turns, name, &args);
            let id = msg.tool_calls[0].id.clone();
            t.messages.push(msg);
            t.num_turns += 1;
            id
        }
    };
    t.tool_calls += 1;
    let t0 = Instant::now();
    let result = tools.call(name, args).await.map_err(|e| SftError::Reference(format!("the MCP server failed during {name}: {e}")))?;
    t.timings.tools_ms += t0.elapsed().as_millis() as u64;
    let text = truncate(&result.text, opts.tool_result_max_chars);
    t.messages.push(Message::tool(id, name, if result.is_error { format!("Error: {text}") } else { text.clone() }));
    Ok(if result.is_error { Err(text) } else { Ok(text) })
}

/// A slip to make before a trace's query, and what it needs to make one.
struct Slip<'a> {
    tools: &'a SqlTools,
    listing: &'a str,
    rng: &'a mut ChaCha8Rng,
}

/// How many slips are tried on the server before a trace goes without one (a slip the server
/// answers without an error named a real column).
const SLIP_TRIES: usize = 3;

impl Slip<'_> {
    /// Calls the query tool with `step`'s SQL misnamed, kept only when the server answers with an
    /// error: its turn gets `weight` 0. The repair then looks the name up where the server shows
    /// it, as the error's hint says ([`Slip::look_up`]: the column's table described, or the
    /// tables listed), and the trace's next turn is the right query. Why the look:
    /// a repair straight to the right query taught the model to query again after an error, and
    /// greedy decoding wrote the failing query again word for word (benches/RESULTS.md, "Run 28").
    /// A column is a name the results so far show (the describe calls); a table one the query
    /// reads from. Nothing is added when no slip fails.
    async fn before<T: ToolHost>(&mut self, tools: &T, t: &mut Trajectory, step: &ReferenceStep, opts: &ReferenceOptions) -> Result<(), SftError> {
        let Some(sql) = step.arguments.get(&self.tools.query.arg).and_then(Value::as_str) else { return Ok(()) };
        let tables = tables_of(sql, self.listing);
        let shown: Vec<&str> = t.messages.iter().filter(|m| m.role == Role::Tool).filter_map(|m| m.content.as_deref()).collect();
        let kind_of = |name: &str| {
            let word = whole_word(name);
            if tables.iter().any(|x| x.eq_ignore_ascii_case(name)) { Some(Named::Table) } else { shown.iter().any(|text| word.is_match(text)).then_some(Named::Column) }
        };
        let mut slips = ta_synth::mistake::slips(sql, kind_of);
        slips.shuffle(self.rng);
        let (messages, turns, calls, errors, recovered) = (t.messages.len(), t.num_turns, t.tool_calls, t.tool_errors, t.recovered_errors);
        for wrong in slips.into_iter().take(SLIP_TRIES) {
            let look = self.look_up(t, sql, &wrong);
            let mut arguments = step.arguments.clone();
            arguments.insert(self.tools.query.arg.clone(), Value::String(wrong.sql));
            let reply = call(tools, t, &ReferenceStep { arguments, ..step.clone() }, opts).await?;
            if reply.as_ref().map_or(true, |text| reads_as_error(text)) {
                if let Some(turn) = t.messages.iter_mut().rev().find(|m| m.role == Role::Assistant) {
                    turn.weight = Some(0);
                }
                // Counted as the agent loop counts: only what the server flags.
                if reply.is_err() {
                    t.tool_errors += 1;
                    t.recovered_errors += 1;
                }
                match look {
                    None => return Ok(()),
                    Some(look) if call(tools, t, &look, opts).await?.is_ok() => return Ok(()),
                    Some(_) => {}
                }
            }
            t.messages.truncate(messages);
            (t.num_turns, t.tool_calls, t.tool_errors, t.recovered_errors) = (turns, calls, errors, recovered);
        }
        Ok(())
    }

    /// The call that shows the misnamed name as the server has it: for a column, the describe
    /// call of the table the query qualifies it with (`p.department_id`: `p` is `projects`), else
    /// of the first table whose describe result names it; for a table, the listing. `None` when
    /// the server has no such tool.
    fn look_up(&self, t: &Trajectory, sql: &str, wrong: &Misnamed) -> Option<ReferenceStep> {
        let step = |tool: &str, arguments: serde_json::Map<String, Value>| ReferenceStep { tool: tool.to_string(), arguments, with_previous: false };
        match wrong.named {
            Named::Table => self.tools.list.as_deref().map(|list| step(list, serde_json::Map::new())),
            Named::Column => {
                let describe = self.tools.describe.as_ref()?;
                if let Some(table) = qualifying_table(sql, &wrong.name) {
                    return Some(step(&describe.name, serde_json::Map::from_iter([(describe.arg.clone(), Value::String(table))])));
                }
                let word = whole_word(&wrong.name);
                let shown = |id: &str| t.messages.iter().find(|m| m.role == Role::Tool && m.tool_call_id.as_deref() == Some(id)).and_then(|m| m.content.as_deref());
                t.messages.iter().flat_map(|m| &m.tool_calls).filter(|c| c.function.name == describe.name).find_map(|c| {
                    let arguments: serde_json::Map<String, Value> = serde_json::from_str(&c.function.arguments).ok()?;
                    shown(&c.id).filter(|text| word.is_match(text))?;
                    Some(step(&describe.name, arguments))
                })
            }
        }
    }
}

/// `name` as a whole word, in any case.
fn whole_word(name: &str) -> Regex {
    Regex::new(&format!(r"(?i)\b{}\b", regex::escape(name))).expect("escaped")
}

/// The tables a query reads (after FROM or JOIN), in order of appearance, each with the alias
/// that follows it, if any (`projects p`, `projects AS p`; not a keyword: `employees JOIN ...`).
fn read_tables(sql: &str) -> Vec<(String, Option<String>)> {
    let table = Regex::new(r#"(?i)\b(?:from|join)\s+["`\[]?([A-Za-z_][A-Za-z0-9_]*)"#).expect("valid regex");
    let alias = Regex::new(r#"^["`\]]?\s+(?i:as\s+)?([A-Za-z_][A-Za-z0-9_]*)"#).expect("valid regex");
    const NOT_ALIASES: [&str; 12] = ["on", "where", "join", "left", "inner", "outer", "group", "order", "limit", "cross", "natural", "using"];
    table
        .captures_iter(sql)
        .map(|c| {
            let name = c.get(1).expect("the name's group");
            let alias = alias.captures(&sql[name.end()..]).map(|a| a[1].to_string()).filter(|a| !NOT_ALIASES.contains(&a.to_lowercase().as_str()));
            (name.as_str().to_string(), alias)
        })
        .collect()
}

/// The table whose alias (or own name) qualifies the first qualified use of `column` in `sql`.
fn qualifying_table(sql: &str, column: &str) -> Option<String> {
    let used = Regex::new(&format!(r"(?i)\b([A-Za-z_][A-Za-z0-9_]*)\.{}\b", regex::escape(column))).expect("escaped");
    let qualifier = used.captures(sql)?[1].to_string();
    read_tables(sql)
        .into_iter()
        .find_map(|(table, alias)| (alias.as_deref().unwrap_or(&table).eq_ignore_ascii_case(&qualifier) || table.eq_ignore_ascii_case(&qualifier)).then_some(table))
}

/// Whether a reply the server did not flag as an error is one: some servers print SQL errors as
/// plain text (PyPI's `mcp-server-sqlite`: "Database error: no such column: …").
fn reads_as_error(text: &str) -> bool {
    text.lines().next().is_some_and(|first| first.to_lowercase().contains("error:"))
}

/// The tables a query reads (after FROM or JOIN), in order of appearance, that the server lists
/// (all of them when there is no listing).
fn tables_of(sql: &str, listing: &str) -> Vec<String> {
    let listed = |name: &str| listing.is_empty() || whole_word(name).is_match(listing);
    let mut out: Vec<String> = Vec::new();
    for (name, _) in read_tables(sql) {
        if listed(&name) && !out.iter().any(|o| o.eq_ignore_ascii_case(&name)) {
            out.push(name);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ta_reward::ground_truth::shows;

    #[test]
    fn a_qualified_column_belongs_to_the_table_its_alias_names() {
        let sql =
            "SELECT count(*) FROM project_assignments pa JOIN projects AS p ON pa.project_id = p.project_id JOIN departments d ON p.department_id = d.department_id";
        assert_eq!(qualifying_table(sql, "department_id").as_deref(), Some("projects"), "its first qualified use");
        assert_eq!(qualifying_table(sql, "project_id").as_deref(), Some("project_assignments"));
        assert_eq!(qualifying_table("SELECT employees.name FROM employees WHERE x = 1", "name").as_deref(), Some("employees"));
        assert_eq!(qualifying_table("SELECT name FROM employees WHERE x = 1", "name"), None, "unqualified: no table from the query");
        assert_eq!(qualifying_table("SELECT e.name FROM employees WHERE 1", "name"), None, "an alias the query never gives");
        // a table without an alias does not hide the next one's
        let bare = "SELECT d.name FROM employees JOIN departments d ON employees.department_id = d.department_id";
        assert_eq!(qualifying_table(bare, "name").as_deref(), Some("departments"));
        assert_eq!(read_tables(r#"SELECT 1 FROM "employees" AS e"#), [("employees".to_string(), Some("e".to_string()))]);
    }

    #[test]
    fn an_error_printed_as_text_reads_as_one() {
        assert!(reads_as_error("Database error: no such column: nme"));
        assert!(reads_as_error("Error: SQL error: no such table: employee"));
        assert!(!reads_as_error("name\nerror: a value\n(1 row)"), "a result that shows the word further down is a result");
        assert!(!reads_as_error("[{'n': 3}]"));
    }

    #[test]
    fn tables_are_the_listed_ones_after_from_and_join() {
        let listing = "- employees (5 rows)\n- departments (2 rows)";
        let sql = "WITH x AS (SELECT * FROM employees) SELECT d.name FROM x JOIN departments d ON 1 JOIN Employees e";
        assert_eq!(tables_of(sql, listing), vec!["employees", "departments"]);
    }

    #[test]
    fn answers_are_written_from_the_ground_truth() {
        assert_eq!(answer_of(&Expected::Number(9.0)).unwrap(), "9");
        assert_eq!(answer_of(&Expected::Rule(ExpectedRule::Number { number: 73250.67, tolerance: 0.01 })).unwrap(), "73250.67");
        assert_eq!(answer_of(&Expected::Rule(ExpectedRule::Contains("Boston".into()))).unwrap(), "Boston");
        assert_eq!(answer_of(&Expected::Rule(ExpectedRule::Set(vec!["Ada".into(), 3.into()]))).unwrap(), "Ada, 3");
        assert!(answer_of(&Expected::Rule(ExpectedRule::Regex("x".into()))).is_none());
        assert!(shows(&Expected::Rule(ExpectedRule::Exact("Ada".into())), "name\nAda\n(1 row)"));
        assert!(!shows(&Expected::Number(9.0), "n\n8\n(1 row)"));
    }
}
