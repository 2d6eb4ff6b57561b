//! `train-agent scenarios paraphrase`: other wordings of checked tasks, written by a teacher
//! (any OpenAI-compatible API, Anthropic, or `local/NAME` on the embedded engine) with guided
//! JSON output. The answer stays the task's own, so a paraphrase is kept only when it keeps the
//! question's values and its operation (`ta_scenarios::paraphrase`) and, with `--solve`, when a
//! solver's SQL for it gives the task's rows on the server (`ta_synth::compare`); the output
//! holds each original followed by its kept paraphrases, on its side of the split.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use ta_python::{EngineSource, PythonEnv};
use ta_rollout::ToolHost;
use ta_scenarios::Teacher;
use ta_scenarios::generate::GenerateError;
use ta_scenarios::paraphrase::{self, Rejected};
use ta_synth::compare;
use ta_synth::exec::Sql;
use ta_synth::schema::Schema;
use ta_synth::tools::{ArgTool, SqlTools};
use ta_types::Scenario;

use crate::args::EngineArgs;
use crate::interrupted::Interrupted;
use crate::stdout::outln;

#[derive(clap::Args)]
pub struct Args {
    /// Checked scenarios to paraphrase (e.g. a synth's scenarios.jsonl); each needs its `sql`.
    #[arg(long, value_name = "FILE")]
    scenarios: PathBuf,
    /// The teacher: `openai/MODEL`, `openrouter/VENDOR/MODEL`, `anthropic/MODEL`, or
    /// `local/MODEL` (served by the embedded engine unless --teacher-base-url is given).
    #[arg(long, value_name = "MODEL")]
    teacher: String,
    /// The teacher's OpenAI-compatible base URL (a `train-agent serve` or `vllm serve`).
    #[arg(long, value_name = "URL")]
    teacher_base_url: Option<String>,
    /// Paraphrases asked for per task.
    #[arg(long, default_value_t = 2)]
    per_task: usize,
    /// Reword only the first N scenarios (natural phrasings first, as synth writes them); the
    /// rest follow them unchanged, so the output still holds every task (for a frontier or GRPO
    /// past the first N that SFT traced).
    #[arg(long)]
    limit: Option<usize>,
    /// Tokens the teacher may write per reply.
    #[arg(long, default_value_t = 512)]
    teacher_max_tokens: u32,
    /// The teacher's sampling temperature (unset: the provider's default).
    #[arg(long)]
    teacher_temperature: Option<f32>,
    /// Tasks in flight at once (each asks the teacher, then solves its rewordings one by one).
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// Also check each rewording's meaning by solving it: the teacher, greedy, writes SQL for the
    /// rewording alone (shown only the tables the task's SQL reads), run on --server; kept only
    /// if it gives the task's rows.
    #[arg(long)]
    solve: bool,
    /// The server the tasks came from (for --solve).
    #[command(flatten)]
    server: crate::args::ServerArgs,
    #[command(flatten)]
    http: crate::args::HttpArgs,
    #[command(flatten)]
    engine: EngineArgs,
    /// Output directory: scenarios.jsonl (each original followed by its kept paraphrases),
    /// rejected.jsonl (the others: why, and the solver's SQL), summary.json, and replies.jsonl
    /// (each task's replies as they come: a rerun into the same directory asks only for the rest).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

/// What a paraphrase run did.
#[derive(Debug, Default, Serialize)]
struct Summary {
    tasks: usize,
    asked: usize,
    returned: usize,
    kept: usize,
    rejected: BTreeMap<String, usize>,
    failed_calls: usize,
}

/// What decides a run's rewordings: a rerun into the same `--out` continues only with the same.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Settings {
    #[serde(flatten)]
    run: RunSettings,
    /// What the teacher is shown (a file from before it was kept reads as none: another prompt).
    #[serde(default)]
    prompt: Prompt,
}

/// The command's own settings that decide the rewordings.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct RunSettings {
    scenarios: PathBuf,
    teacher: String,
    per_task: usize,
    solve: bool,
}

/// The teacher's instructions and its request with placeholders for the task and its tables,
/// and the solver's: another version of train-agent may word them otherwise, and a rerun that
/// mixed the two prompts' rewordings would measure neither.
#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
struct Prompt {
    system: String,
    request: String,
    solver_system: Option<String>,
    solver_request: Option<String>,
}

impl Prompt {
    fn of(per_task: usize, solve: bool) -> Prompt {
        let tables = if solve { vec!["{tables}".to_string()] } else { Vec::new() };
        Prompt {
            system: paraphrase::system(solve),
            request: paraphrase::request("{task}", per_task, &tables),
            solver_system: solve.then(|| paraphrase::SOLVE_SYSTEM.to_string()),
            solver_request: solve.then(|| paraphrase::solve_request(&tables, "{rewording}")),
        }
    }
}

/// One task's rewordings as the teacher returned them, with what the checks decided: a line of
/// `replies.jsonl`, written as each task finishes, so that a rerun asks only for the rest.
#[derive(Debug, Serialize, Deserialize)]
struct Reply {
    id: String,
    rewordings: Vec<Rewording>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Rewording {
    text: String,
    /// Why it was not kept (`None`: kept).
    rejected: Option<String>,
    /// The solver's SQL for it, where one was written.
    solver_sql: Option<String>,
}

pub async fn run(args: Args) -> Result<()> {
    if args.teacher_base_url.is_none() {
        crate::args::teacher_spec(&args.teacher).map_err(anyhow::Error::msg).context("--teacher")?;
    }
    let _lock = ta_eval::rundir::RunLock::acquire(&args.out)?;
    let logs = args.out.join("logs");
    std::fs::create_dir_all(&logs).with_context(|| format!("cannot create {}", logs.display()))?;
    let scenarios = ta_types::scenario::load_scenarios(&args.scenarios)?;
    let reworded = &scenarios[..args.limit.unwrap_or(usize::MAX).min(scenarios.len())];
    let sql_of = |s: &Scenario| s.extra.get("sql").and_then(|v| v.as_str()).map(String::from);
    anyhow::ensure!(
        reworded.iter().any(|s| sql_of(s).is_some()),
        "{} has no scenario with a `sql` field\nhint: paraphrase checks a rewording against its task's SQL; `scenarios synth` writes it",
        args.scenarios.display()
    );
    let (replies_path, mut replies) = earlier_replies(&args)?;
    let mut summary = Summary { tasks: reworded.len(), ..Default::default() };
    let asked: Vec<Asked> = reworded.iter().filter_map(|s| Some(Asked { id: s.id.clone(), task: s.task.clone(), sql: sql_of(s)?, tolerance: tolerance(s) })).collect();
    summary.asked = asked.len();
    let todo: Vec<Asked> = asked.into_iter().filter(|a| !replies.contains_key(&a.id)).collect();
    if !replies.is_empty() {
        eprintln!("continuing {}: {} tasks answered earlier, {} to ask", args.out.display(), replies.len(), todo.len());
    }

    let mut engine = None;
    let mut solver = None;
    let mut interrupted = false;
    if !todo.is_empty() {
        let url = match (&args.teacher_base_url, args.teacher.strip_prefix("local/")) {
            (None, Some(model)) => {
                let options = args.engine.options(model, model, logs.join("engine.log"));
                let served =
                    EngineSource::Start { python: PythonEnv::ensure()?, options: Box::new(options) }.open().await.context("the embedded engine did not start")?;
                engine = served.process;
                Some(served.client.base_url())
            }
            (url, _) => url.clone(),
        };
        let teacher = Teacher::new(&args.teacher, url.as_deref(), &BTreeMap::new(), args.http.limits()?).context("--teacher")?;
        solver = if args.solve { Some(Solver::connect(&args.server, &logs).await?) } else { None };
        let (teacher, solver_ref) = (&teacher, solver.as_ref());
        let progress = indicatif::ProgressBar::new(todo.len() as u64);
        let mut asking = futures::stream::iter(todo)
            .map(|Asked { id, task, sql, tolerance }| async move {
                // The tables the task reads, shown to the teacher and the solver alike.
                let tables = solver_ref.map(|s| compare::shown_tables(&s.statements, &s.schema, &sql)).unwrap_or_default();
                let texts = paraphrase::ask(teacher, &task, args.per_task, &tables, args.teacher_max_tokens, args.teacher_temperature, solver_ref.is_some()).await?;
                let mut rewordings = Vec::new();
                // The normalized texts of the rewordings kept so far, for the duplicates.
                let mut seen: Vec<String> = Vec::new();
                for text in texts {
                    let mut verdict = paraphrase::check(&task, &sql, &text, &seen, solver_ref.is_some());
                    let mut solver_sql = None;
                    if let (Ok(_), Some(solver)) = (&verdict, solver_ref) {
                        let answer = Answer { sql: &sql, tolerance, tables: &tables };
                        let (agrees, query) = solver.agrees(teacher, &answer, &text, args.teacher_max_tokens).await?;
                        solver_sql = query;
                        if let Err(why) = agrees {
                            verdict = Err(why);
                        }
                    }
                    if let Ok(n) = &verdict {
                        seen.push(n.clone());
                    }
                    rewordings.push(Rewording { text, rejected: verdict.err().map(|why| why.reason().to_string()), solver_sql });
                }
                anyhow::Ok(Reply { id, rewordings })
            })
            // Unordered: a task whose rewordings take long (several solver calls) must not hold the
            // finished ones behind it and leave the teacher idle; the output follows the tasks'
            // order whatever order the replies come in.
            .buffer_unordered(args.concurrency.max(1));
        let mut file = ta_types::jsonl::open_append(&replies_path).with_context(|| format!("cannot write {}", replies_path.display()))?;
        let ctrl_c = crate::interrupted::ctrl_c();
        tokio::pin!(ctrl_c);
        loop {
            let reply = tokio::select! {
                reply = asking.next() => match reply {
                    Some(reply) => reply,
                    None => break,
                },
                // The tasks in flight are dropped; every finished one is on disk already.
                _ = &mut ctrl_c => {
                    interrupted = true;
                    break;
                }
            };
            progress.inc(1);
            match reply {
                Ok(reply) => {
                    // One line a task, flushed at once: a crash or Ctrl-C loses no finished task.
                    writeln!(file, "{}", serde_json::to_string(&reply)?)?;
                    file.flush()?;
                    replies.insert(reply.id.clone(), reply);
                }
                Err(e) if e.downcast_ref::<GenerateError>().is_some() => {
                    tracing::warn!("a teacher call failed: {e}");
                    summary.failed_calls += 1;
                }
                Err(e) => return Err(e),
            }
        }
        progress.finish_and_clear();
    }
    if let Some(solver) = solver {
        solver.server.client.close().await;
    }
    drop(engine);
    if interrupted {
        return Err(Interrupted::tasks(replies.len()).into());
    }

    // Each original followed by its kept paraphrases (so the first N tasks a `collect --limit N`
    // takes hold both), on its side of the split; the others, with why, to read.
    let mut out: Vec<Scenario> = Vec::new();
    let mut rejected: Vec<serde_json::Value> = Vec::new();
    for s in &scenarios {
        out.push(s.clone());
        let Some(reply) = replies.get(&s.id) else { continue };
        summary.returned += reply.rewordings.len();
        for (k, r) in reply.rewordings.iter().enumerate() {
            match &r.rejected {
                None => {
                    let mut p = s.clone();
                    p.id = format!("{}-p{k}", s.id);
                    p.task = r.text.trim().to_string();
                    p.extra.insert("paraphrase_of".into(), s.id.clone().into());
                    p.extra.insert("phrasing".into(), "paraphrase".into());
                    out.push(p);
                    summary.kept += 1;
                }
                Some(why) => {
                    *summary.rejected.entry(why.clone()).or_default() += 1;
                    rejected.push(serde_json::json!({"paraphrase_of": s.id, "text": r.text, "reason": why, "solver_sql": r.solver_sql}));
                }
            }
        }
    }
    let path = args.out.join("scenarios.jsonl");
    super::write_jsonl(&path, &out)?;
    super::write_jsonl(&args.out.join("rejected.jsonl"), &rejected)?;
    std::fs::write(args.out.join("summary.json"), serde_json::to_vec_pretty(&summary)?)?;
    outln!("tasks             {} ({} with their SQL asked about)", summary.tasks, summary.asked)?;
    outln!("paraphrases       {} returned, {} kept", summary.returned, summary.kept)?;
    for (reason, n) in &summary.rejected {
        outln!("  rejected {n:>5}  {reason}")?;
    }
    if summary.failed_calls > 0 {
        outln!("  failed calls {:>3} (run the same command again to ask for those tasks again)", summary.failed_calls)?;
    }
    outln!("scenarios: {} ({} originals, the first {} reworded, + {} paraphrases)", path.display(), scenarios.len(), reworded.len(), summary.kept)?;
    Ok(())
}

/// The replies of an earlier run into the same `--out`, by task id, and where they are kept;
/// an error when that run had other settings (its rewordings would not be this run's).
fn earlier_replies(args: &Args) -> Result<(PathBuf, BTreeMap<String, Reply>)> {
    let run = RunSettings { scenarios: args.scenarios.clone(), teacher: args.teacher.clone(), per_task: args.per_task, solve: args.solve };
    let settings = Settings { run, prompt: Prompt::of(args.per_task, args.solve) };
    let settings_path = args.out.join("settings.json");
    let replies_path = args.out.join("replies.jsonl");
    let mut replies = BTreeMap::new();
    if let Ok(text) = std::fs::read_to_string(&settings_path) {
        let earlier: Settings = serde_json::from_str(&text).with_context(|| format!("{} is not a paraphrase run's settings", settings_path.display()))?;
        anyhow::ensure!(
            earlier.run == settings.run,
            "{} holds a paraphrase run with other settings ({:?}, now {:?})\nhint: give another --out, or delete it to start again",
            args.out.display(),
            earlier.run,
            settings.run
        );
        anyhow::ensure!(
            earlier.prompt == settings.prompt,
            "{} holds a paraphrase run whose teacher was shown other instructions (another version of train-agent): its rewordings and this run's would mix\nhint: give another --out, or delete it to start again",
            args.out.display()
        );
        let text = std::fs::read_to_string(&replies_path).unwrap_or_default();
        // A line cut off by a crash is asked again.
        for reply in text.lines().filter_map(|l| serde_json::from_str::<Reply>(l).ok()) {
            replies.insert(reply.id.clone(), reply);
        }
    } else {
        std::fs::write(&settings_path, serde_json::to_vec_pretty(&settings)?)?;
    }
    Ok((replies_path, replies))
}

/// A task the teacher is asked to reword.
struct Asked {
    id: String,
    task: String,
    sql: String,
    /// The task's answer is a number within this (`{"number", "tolerance"}`).
    tolerance: Option<f64>,
}

/// What a rewording's SQL must give: the task's rows, from its `sql` (a number within its
/// `tolerance`), and the `tables` that SQL reads, as the solver is shown them.
struct Answer<'a> {
    sql: &'a str,
    tolerance: Option<f64>,
    tables: &'a [String],
}

/// The tolerance of a task whose answer is `{"number": x, "tolerance": t}`.
fn tolerance(s: &Scenario) -> Option<f64> {
    match &s.expected {
        Some(ta_types::Expected::Rule(ta_types::scenario::ExpectedRule::Number { tolerance, .. })) => Some(*tolerance),
        _ => None,
    }
}

/// The server's query tool and tables, for `--solve`.
struct Solver {
    server: crate::server::Server,
    tools: ta_rollout::McpTools,
    query: ArgTool,
    statements: Vec<(String, String)>,
    schema: Schema,
}

impl Solver {
    async fn connect(args: &crate::args::ServerArgs, logs: &std::path::Path) -> Result<Solver> {
        let server = crate::server::Server::connect(args, Some(logs)).await?;
        let tools = server.tools();
        let query = SqlTools::detect(tools.specs(), None).context("--solve needs the server's SQL query tool")?.query;
        let sql = Sql { host: &tools, tool: &query };
        let statements = compare::create_statements(&sql).await.context("reading the tables' CREATE statements for the solver")?;
        let schema = ta_synth::schema::introspect(&sql).await.context("reading the categories' values for the solver")?;
        Ok(Solver { server, tools, query, statements, schema })
    }

    /// Whether the teacher's SQL for `text`, shown the answer's tables, gives the answer's rows
    /// (`Err(why)` when not), and that SQL; `Err` when the teacher or the server fails.
    async fn agrees(&self, teacher: &Teacher, answer: &Answer<'_>, text: &str, max_tokens: u32) -> Result<(Result<(), Rejected>, Option<String>)> {
        let Some(query) = paraphrase::solve(teacher, answer.tables, text, max_tokens).await? else { return Ok((Err(Rejected::NoQuery), None)) };
        let agrees = match compare::same_rows(&Sql { host: &self.tools, tool: &self.query }, answer.sql, &query, answer.tolerance).await? {
            compare::Rows::Same => Ok(()),
            compare::Rows::Other => Err(Rejected::OtherRows),
            compare::Rows::OtherColumns => Err(Rejected::OtherColumns),
            compare::Rows::Fails => Err(Rejected::QueryFails),
        };
        Ok((agrees, Some(query)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only a `{"number", "tolerance"}` answer lends the solver its tolerance.
    #[test]
    fn the_tolerance_is_the_answers_own() {
        let task = |expected: &str| -> Scenario { serde_json::from_str(&format!(r#"{{"id": "t", "task": "q", "expected": {expected}}}"#)).unwrap() };
        assert_eq!(tolerance(&task(r#"{"number": 1.9, "tolerance": 0.01}"#)), Some(0.01));
        assert_eq!(tolerance(&task("1.9")), None);
        assert_eq!(tolerance(&task(r#"{"set": ["a", "b"]}"#)), None);
        assert_eq!(tolerance(&task(r#""Sales""#)), None);
    }
}
