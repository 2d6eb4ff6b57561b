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
use serde::Serialize;
use ta_python::{EngineSource, PythonEnv};
use ta_rollout::ToolHost;
use ta_scenarios::Teacher;
use ta_scenarios::generate::GenerateError;
use ta_scenarios::paraphrase::{self, Rejected};
use ta_synth::SynthError;
use ta_synth::compare;
use ta_synth::exec::Sql;
use ta_synth::schema::Schema;
use ta_synth::tools::{ArgTool, SqlTools};
use ta_types::Scenario;

use crate::args::EngineArgs;

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
    /// Only the first N scenarios (natural phrasings first, as synth writes them).
    #[arg(long)]
    limit: Option<usize>,
    /// Tokens the teacher may write per reply.
    #[arg(long, default_value_t = 512)]
    teacher_max_tokens: u32,
    /// The teacher's sampling temperature (unset: the provider's default).
    #[arg(long)]
    teacher_temperature: Option<f32>,
    /// Teacher calls in flight at once.
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
    /// rejected.jsonl (the others: why, and the solver's SQL) and summary.json.
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
    rejected: BTreeMap<&'static str, usize>,
    failed_calls: usize,
}

pub async fn run(args: Args) -> Result<()> {
    let _lock = ta_eval::rundir::RunLock::acquire(&args.out)?;
    let logs = args.out.join("logs");
    std::fs::create_dir_all(&logs).with_context(|| format!("cannot create {}", logs.display()))?;
    let mut scenarios = ta_types::scenario::load_scenarios(&args.scenarios)?;
    if let Some(n) = args.limit {
        scenarios.truncate(n);
    }
    let sql_of = |s: &Scenario| s.extra.get("sql").and_then(|v| v.as_str()).map(String::from);
    anyhow::ensure!(
        scenarios.iter().any(|s| sql_of(s).is_some()),
        "{} has no scenario with a `sql` field\nhint: paraphrase checks a rewording against its task's SQL; `scenarios synth` writes it",
        args.scenarios.display()
    );
    let mut engine = None;
    let url = match (&args.teacher_base_url, args.teacher.strip_prefix("local/")) {
        (None, Some(model)) => {
            let options = args.engine.options(model, model, logs.join("engine.log"));
            let served = EngineSource::Start { python: PythonEnv::ensure()?, options: Box::new(options) }.open().await.context("the embedded engine did not start")?;
            engine = served.process;
            Some(served.client.base_url())
        }
        (url, _) => url.clone(),
    };
    let teacher = Teacher::new(&args.teacher, url.as_deref(), &BTreeMap::new(), args.http.limits()?).context("--teacher")?;
    let solver = if args.solve { Some(Solver::connect(&args.server, &logs).await?) } else { None };

    let mut summary = Summary { tasks: scenarios.len(), ..Default::default() };
    let asked: Vec<(usize, String, String)> = scenarios.iter().enumerate().filter_map(|(i, s)| Some((i, s.task.clone(), sql_of(s)?))).collect();
    summary.asked = asked.len();
    let (teacher, solver_ref) = (&teacher, solver.as_ref());
    let progress = indicatif::ProgressBar::new(asked.len() as u64);
    let mut replies = futures::stream::iter(asked)
        .map(|(i, task, sql)| async move {
            let texts = paraphrase::ask(teacher, &task, args.per_task, args.teacher_max_tokens, args.teacher_temperature, args.solve).await?;
            // Each rewording and whether it is kept (its normalized text, for the duplicates).
            let mut verdicts = Vec::new();
            let mut seen: Vec<String> = Vec::new();
            for text in texts {
                let mut verdict = paraphrase::check(&task, &sql, &text, &seen, solver_ref.is_some());
                let mut solved = None;
                if let (Ok(_), Some(solver)) = (&verdict, solver_ref) {
                    let (agrees, query) = solver.agrees(teacher, &sql, &text, args.teacher_max_tokens).await?;
                    solved = query;
                    if let Err(why) = agrees {
                        verdict = Err(why);
                    }
                }
                if let Ok(n) = &verdict {
                    seen.push(n.clone());
                }
                verdicts.push((text, verdict, solved));
            }
            anyhow::Ok((i, verdicts))
        })
        .buffered(args.concurrency.max(1));
    // Each original's kept paraphrases, by its place in the file; the others, with why, to read.
    let mut kept: BTreeMap<usize, Vec<Scenario>> = BTreeMap::new();
    let rejected_path = args.out.join("rejected.jsonl");
    let mut rejected = std::io::BufWriter::new(std::fs::File::create(&rejected_path).with_context(|| format!("cannot write {}", rejected_path.display()))?);
    while let Some(reply) = replies.next().await {
        progress.inc(1);
        let (i, verdicts) = match reply {
            Ok(r) => r,
            Err(e) if e.downcast_ref::<GenerateError>().is_some() => {
                tracing::warn!("a teacher call failed: {e}");
                summary.failed_calls += 1;
                continue;
            }
            Err(e) => return Err(e),
        };
        summary.returned += verdicts.len();
        for (k, (text, verdict, solver_sql)) in verdicts.into_iter().enumerate() {
            match verdict {
                Ok(_) => {
                    let mut p = scenarios[i].clone();
                    p.id = format!("{}-p{k}", scenarios[i].id);
                    p.task = text.trim().to_string();
                    p.extra.insert("paraphrase_of".into(), scenarios[i].id.clone().into());
                    p.extra.insert("phrasing".into(), "paraphrase".into());
                    kept.entry(i).or_default().push(p);
                }
                Err(why) => {
                    *summary.rejected.entry(why.reason()).or_default() += 1;
                    let line = serde_json::json!({"paraphrase_of": scenarios[i].id, "text": text, "reason": why.reason(), "solver_sql": solver_sql});
                    writeln!(rejected, "{line}")?;
                }
            }
        }
    }
    progress.finish_and_clear();
    rejected.flush()?;
    drop(replies);
    if let Some(solver) = solver {
        solver.server.client.close().await;
    }
    drop(engine);
    summary.kept = kept.values().map(Vec::len).sum();

    let path = args.out.join("scenarios.jsonl");
    let mut file = std::io::BufWriter::new(std::fs::File::create(&path).with_context(|| format!("cannot write {}", path.display()))?);
    // Each original followed by its paraphrases: the first N tasks a `collect --limit N` takes
    // hold both.
    let ordered = scenarios.iter().enumerate().flat_map(|(i, s)| std::iter::once(s).chain(kept.get(&i).into_iter().flatten()));
    for s in ordered {
        serde_json::to_writer(&mut file, s)?;
        file.write_all(b"\n")?;
    }
    file.flush()?;
    std::fs::write(args.out.join("summary.json"), serde_json::to_vec_pretty(&summary)?)?;
    println!("tasks             {} ({} with their SQL asked about)", summary.tasks, summary.asked);
    println!("paraphrases       {} returned, {} kept", summary.returned, summary.kept);
    for (reason, n) in &summary.rejected {
        println!("  rejected {n:>5}  {reason}");
    }
    if summary.failed_calls > 0 {
        println!("  failed calls {:>3}", summary.failed_calls);
    }
    println!("scenarios: {} ({} originals + {} paraphrases)", path.display(), scenarios.len(), summary.kept);
    Ok(())
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

    /// Whether the teacher's SQL for `text` gives the rows of the task's `sql` (`Err(why)` when
    /// not), and that SQL; `Err` when the teacher or the server fails.
    async fn agrees(&self, teacher: &Teacher, sql: &str, text: &str, max_tokens: u32) -> Result<(Result<(), Rejected>, Option<String>)> {
        let tables = compare::shown_tables(&self.statements, &self.schema, sql);
        let Some(query) = paraphrase::solve(teacher, &tables, text, max_tokens).await? else { return Ok((Err(Rejected::NoQuery), None)) };
        let agrees = match compare::same_rows(&Sql { host: &self.tools, tool: &self.query }, sql, &query).await {
            Ok(true) => Ok(()),
            Ok(false) | Err(SynthError::Query { .. }) => Err(Rejected::OtherRows),
            Err(e) => return Err(e.into()),
        };
        Ok((agrees, Some(query)))
    }
}
