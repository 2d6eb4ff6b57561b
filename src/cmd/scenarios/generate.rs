//! `train-agent scenarios generate`: a teacher model writes tasks from the server's tools,
//! resources and prompts; a solver attempts each task several times through the real server and
//! the tasks whose answers agree are kept, with `expected` set to the agreed answer. The logic
//! is in `ta-scenarios`; this file parses flags and wires the parts.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, Result};
use indicatif::ProgressBar;
use ta_python::{Engine, EngineSource, PythonEnv};
use ta_rollout::AgentConfig;
use ta_scenarios::generate::Spend;
use ta_scenarios::{DiscoverOptions, GenerateOptions, PipelineOptions, SolveOptions, Surface, Teacher};

use crate::args::{EngineArgs, ServerArgs};
use crate::interrupted::Interrupted;
use crate::stdout::outln;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    server: ServerArgs,
    /// The model that writes tasks: openai/MODEL, openrouter/VENDOR/MODEL, anthropic/MODEL, or
    /// local/MODEL (the embedded engine serving MODEL, a Hugging Face id, directory, .gguf or a
    /// packaged model such as qwen2.5-coder-0.5b-instruct, on this machine; no key needed).
    #[arg(long, value_name = "MODEL")]
    teacher: String,
    /// API root for the teacher instead of the provider's default (for local/: an engine or
    /// `vllm serve` already running, e.g. http://127.0.0.1:8000/v1, instead of starting one).
    #[arg(long, value_name = "URL")]
    teacher_base_url: Option<String>,
    /// The model that attempts each task (default: the teacher). It must speak OpenAI's chat
    /// completions with tool calls: openai/, openrouter/ or local/.
    #[arg(long, value_name = "MODEL")]
    solver: Option<String>,
    /// API root for --solver.
    #[arg(long, value_name = "URL", requires = "solver")]
    solver_base_url: Option<String>,
    /// A PEFT adapter of the teacher's model that attempts each task instead of the teacher,
    /// loaded into the teacher's engine: e.g. the SFT adapter trained on this server's walk,
    /// which finishes the episodes a small base model runs out of turns on, so its answers can
    /// agree. Needs a local/ teacher (the embedded engine, or --teacher-base-url naming an engine
    /// that loads adapters: ours or `vllm serve --enable-lora`).
    #[arg(long, value_name = "DIR", conflicts_with = "solver")]
    solver_adapter: Option<PathBuf>,
    /// Tasks to ask the teacher for (before validation, dedupe and agreement).
    #[arg(long, default_value_t = 50, value_parser = crate::args::at_least_one)]
    n: usize,
    /// Tasks asked for per teacher call.
    #[arg(long, default_value_t = 10)]
    batch: usize,
    /// Attempts per task (k).
    #[arg(long, default_value_t = 4)]
    attempts: u32,
    /// Agreeing final answers needed to keep a task (m of k).
    #[arg(long, default_value_t = 3)]
    agree: usize,
    /// Keep tasks without agreement too, with `checked: false` and no `expected` (for judge-only
    /// rewards).
    #[arg(long)]
    keep_unverified: bool,
    /// Share of kept tasks in the validation split (whole groups of similar tasks move together).
    #[arg(long, default_value_t = 0.2)]
    validation_fraction: f64,
    /// Seed of the teacher's and the solver's sampling and of the split.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Drop a task at least this similar to an earlier one (Jaccard of word 3-gram shingles).
    #[arg(long, default_value_t = 0.8)]
    dedupe_threshold: f64,
    /// Tasks at least this similar stay on the same side of the train/validation split.
    #[arg(long, default_value_t = 0.5)]
    split_threshold: f64,
    /// A minijinja template (blocks `system` and `user`) replacing the default task prompt.
    #[arg(long, value_name = "FILE")]
    prompt_template: Option<PathBuf>,
    /// A minijinja template for the solver's system prompt (variables: complete_task, instructions).
    #[arg(long, value_name = "FILE")]
    system_prompt: Option<PathBuf>,
    /// Stop generating and solving once teacher and solver have cost this much (USD, list prices
    /// of the judge's table; local models cost nothing).
    #[arg(long, value_name = "USD")]
    budget_usd: Option<f64>,
    /// Tokens the teacher may write per reply.
    #[arg(long, default_value_t = 4096)]
    teacher_max_tokens: u32,
    /// The teacher's sampling temperature (unset: the provider's default).
    #[arg(long)]
    teacher_temperature: Option<f32>,
    /// The solver's sampling temperature (some spread makes agreement meaningful).
    #[arg(long, default_value_t = 0.7)]
    solver_temperature: f32,
    /// Model turns per solver episode.
    #[arg(long, default_value_t = 8)]
    max_turns: u32,
    /// Tokens the solver may write per turn.
    #[arg(long, default_value_t = 1024)]
    max_tokens: u32,
    /// Solver episodes in flight at once.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// Resources whose contents are read and shown to the teacher.
    #[arg(long, default_value_t = 5)]
    sample_resources: usize,
    /// A `scenarios walk` output directory: its recorded calls of the read tools and their
    /// results are shown to the teacher, so that its tasks name records the server really holds.
    #[arg(long, value_name = "DIR")]
    walk: Option<PathBuf>,
    /// Keep agreed tasks without replaying them. By default the calls of each agreed task's first
    /// agreeing episode are made again on a second server started the same way, and the task is
    /// kept only when they return what the solver was shown (tools that may write are not
    /// replayed) and an answer naming things names what they show; the calls become its
    /// `reference`.
    #[arg(long)]
    no_replay: bool,
    #[command(flatten)]
    http: crate::args::HttpArgs,
    #[command(flatten)]
    resume: crate::args::ResumeArgs,
    #[command(flatten)]
    engine: EngineArgs,
    /// Output directory: scenarios.jsonl, traces.jsonl, summary.json (and drafts.json,
    /// solver-trajectories.jsonl, logs/). Re-running continues where it stopped.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

pub async fn run(args: Args) -> Result<()> {
    if args.teacher_base_url.is_none() {
        crate::args::teacher_spec(&args.teacher).map_err(anyhow::Error::msg).context("--teacher")?;
    }
    if let (Some(solver), None) = (&args.solver, &args.solver_base_url) {
        crate::args::teacher_spec(solver).map_err(anyhow::Error::msg).context("--solver")?;
    }
    anyhow::ensure!(
        args.agree >= 1 && args.agree as u32 <= args.attempts,
        "--agree {} must be between 1 and --attempts {}\nhint: the default keeps a task when 3 of 4 answers agree",
        args.agree,
        args.attempts
    );
    anyhow::ensure!((0.0..1.0).contains(&args.validation_fraction), "--validation-fraction {} must be at least 0 and below 1", args.validation_fraction);
    let adapter = args.solver_adapter.as_deref().map(|dir| solver_adapter(dir, &args.teacher)).transpose()?;
    let _lock = ta_eval::rundir::RunLock::acquire(&args.out)?;
    let logs = args.out.join("logs");
    std::fs::create_dir_all(&logs).with_context(|| format!("cannot create {}", logs.display()))?;
    let (template, template_origin) = match &args.prompt_template {
        Some(p) => (std::fs::read_to_string(p).with_context(|| format!("cannot read --prompt-template {}", p.display()))?, p.display().to_string()),
        None => (ta_scenarios::prompt::DEFAULT_TEMPLATE.to_string(), "default".to_string()),
    };

    let server = crate::server::Server::connect(&args.server, Some(&logs)).await?;
    let mut surface = Surface::gather(&server.client, &server.discovery, &DiscoverOptions { sample_resources: args.sample_resources, ..Default::default() }).await;
    if let Some(dir) = &args.walk {
        let path = dir.join("calls.jsonl");
        let text =
            std::fs::read_to_string(&path).with_context(|| format!("cannot read {}\nhint: --walk takes the --out directory of `scenarios walk`", path.display()))?;
        surface.observed = ta_scenarios::discover::Observed::from_walk(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        eprintln!("showing the teacher {} recorded calls from {}", surface.observed.len(), path.display());
    }
    eprintln!(
        "server {}: {} tools, {} resources, {} resource templates, {} prompts",
        server.description,
        surface.tools.len(),
        surface.resources.len(),
        surface.resource_templates.len(),
        surface.prompts.len()
    );

    // One embedded engine at most: for a local/ teacher without a URL, and for a local/ solver
    // naming the same model.
    let mut engine: Option<Engine> = None;
    let limits = args.http.limits()?;
    let prices = BTreeMap::new();
    let teacher_url = match (&args.teacher_base_url, args.teacher.strip_prefix("local/")) {
        (None, Some(model)) => Some(start_engine(&mut engine, &args.engine, model, adapter.as_ref().and_then(|a| a.rank), &logs).await?),
        (url, _) => url.clone(),
    };
    let teacher = Teacher::new(&args.teacher, teacher_url.as_deref(), &prices, limits).context("--teacher")?;
    let solver = match (&args.solver, &adapter) {
        (Some(spec), _) => {
            let url = match (&args.solver_base_url, spec.strip_prefix("local/")) {
                // The teacher's own engine (or URL) solves when the solver names the same model.
                (None, Some(_)) if spec == &args.teacher => teacher_url.clone(),
                (None, Some(model)) => Some(start_engine(&mut engine, &args.engine, model, None, &logs).await?),
                (url, _) => url.clone(),
            };
            Some(Teacher::new(spec, url.as_deref(), &prices, limits).context("--solver")?)
        }
        (None, Some(adapter)) => {
            // A local/ teacher always has a URL here: its engine's, or --teacher-base-url.
            let url = teacher_url.as_deref().context("--solver-adapter needs the teacher's engine")?;
            ta_python::EngineClient::new(url)
                .load_adapter(SOLVER_ADAPTER, &adapter.dir)
                .await
                .with_context(|| format!("cannot load --solver-adapter {} into the teacher's engine at {url}", adapter.dir.display()))?;
            let mut solver = Teacher::new(&format!("local/{SOLVER_ADAPTER}"), Some(url), &prices, limits).context("--solver-adapter")?;
            solver.name = format!("{} + {}", args.teacher, adapter.dir.display());
            Some(solver)
        }
        (None, None) => None,
    };
    let solving = solver.as_ref().unwrap_or(&teacher);
    let chat = solving.endpoint.chat().cloned().ok_or_else(|| {
        anyhow::anyhow!(
            "the solver {} speaks Anthropic's Messages API, but solving needs OpenAI-style tool calls\nhint: pass --solver openai/MODEL, openrouter/VENDOR/MODEL or local/MODEL",
            solving.name
        )
    })?;

    let opts = PipelineOptions {
        generate: GenerateOptions {
            n: args.n,
            batch: args.batch,
            max_tokens: args.teacher_max_tokens,
            temperature: args.teacher_temperature,
            budget_usd: args.budget_usd,
        },
        solve: SolveOptions {
            agent: AgentConfig {
                max_turns: args.max_turns,
                max_tokens: args.max_tokens,
                temperature: args.solver_temperature,
                top_p: 1.0,
                record_tokens: false,
                seed: Some(args.seed),
                ..Default::default()
            },
            attempts: args.attempts,
            concurrency: args.concurrency,
            budget_usd: args.budget_usd,
            retry_failed: args.resume.retry_failed,
        },
        agree: args.agree,
        keep_unverified: args.keep_unverified,
        dedupe_threshold: args.dedupe_threshold,
        split_threshold: args.split_threshold,
        validation_fraction: args.validation_fraction,
        seed: args.seed,
        template,
        template_origin,
        replay: (!args.no_replay).then(|| ta_scenarios::pipeline::ReplayOptions {
            // A server with no tool that reads gets every agreed task kept on agreement alone.
            reads: ta_walk::readable(&server.discovery.tools, &ta_walk::Overrides::default()).map(|(read, _)| read.into_iter().collect()).unwrap_or_default(),
            view: AgentConfig::DEFAULT.tool_result_max_chars,
        }),
    };
    let tools = server.tools();
    // The replay's server: started the same way, so nothing the solver's episodes left in the
    // first one's memory reaches it.
    let fresh = match opts.replay {
        Some(_) => Some(crate::server::Server::connect(&args.server, Some(&logs)).await.context("starting the replay's second server (--no-replay goes without it)")?),
        None => None,
    };
    let system_prompt = server.system_prompt(args.system_prompt.as_deref())?;
    let bar = ProgressBar::new(0);
    let shutdown = crate::interrupted::ctrl_c();
    let say = |line: String| bar.suspend(|| eprintln!("{line}"));
    // Without the replay the pipeline never calls it: the solver's server stands in.
    let fresh_tools = fresh.as_ref().map(|f| f.tools());
    let replay_host = fresh_tools.as_ref().unwrap_or(&tools);
    let result = ta_scenarios::run(&teacher, solver.as_ref(), &chat, &tools, replay_host, &system_prompt, &surface, &opts, &args.out, &bar, say, shutdown).await;
    bar.finish_and_clear();
    if let Some(f) = fresh {
        f.close().await;
    }
    if let Some(engine) = engine {
        engine.shutdown().await;
    }
    server.client.close().await;
    let report = result?;

    let cost = |name: &str, s: &Spend| format!("{name}: {} calls, {} + {} tokens, ${:.4}", s.calls, s.usage.input_tokens, s.usage.output_tokens, s.cost_usd);
    outln!("{}", cost(&report.teacher, &report.teacher_spend))?;
    if let (Some(name), Some(spend)) = (&report.solver, &report.solver_spend) {
        outln!("{}", cost(name, spend))?;
    }
    let budget = report.budget_usd.map_or("no budget".to_string(), |b| format!("budget ${b:.2}{}", if report.budget_reached { ", reached: stopped early" } else { "" }));
    outln!("cost              ${:.4}{} ({budget})", report.total_cost_usd, if report.cost_complete { "" } else { " + unpriced calls" })?;
    let levels: Vec<String> = report.difficulty.iter().map(|(l, n)| format!("{l}: {n}")).collect();
    outln!("difficulty        {}", levels.join(", "))?;
    outln!(
        "tools covered     {} of {}{}",
        report.tools_covered.len(),
        report.tools_covered.len() + report.tools_uncovered.len(),
        if report.tools_uncovered.is_empty() { String::new() } else { format!(" (none for: {})", report.tools_uncovered.join(", ")) }
    )?;
    outln!("scenarios: {}", args.out.join(ta_scenarios::pipeline::SCENARIOS_FILE).display())?;
    outln!("traces: {}", args.out.join(ta_types::trace::TRACES_FILE).display())?;
    if report.interrupted {
        return Err(Interrupted::episodes(report.episodes).into());
    }
    Ok(())
}

/// The name `--solver-adapter` is loaded under in the teacher's engine.
const SOLVER_ADAPTER: &str = "solver";

/// `--solver-adapter`: the adapter's directory and its LoRA rank (which sizes the engine's slots).
struct SolverAdapter {
    dir: PathBuf,
    rank: Option<u32>,
}

/// Checks `--solver-adapter DIR` before any engine starts: a PEFT adapter, for a local/ teacher.
fn solver_adapter(dir: &std::path::Path, teacher: &str) -> Result<SolverAdapter> {
    anyhow::ensure!(
        teacher.starts_with("local/"),
        "--solver-adapter is loaded into the teacher's engine, but the teacher {teacher} is not local/\nhint: pass --teacher local/MODEL with the adapter's base model, or serve the adapter yourself and pass --solver local/NAME --solver-base-url URL"
    );
    let config = ta_python::adapter_config(dir)
        .map_err(|e| anyhow::anyhow!("--solver-adapter {} is not a PEFT adapter ({e})\nhint: pass an `sft` run's final/ directory", dir.display()))?;
    let dir = dir.canonicalize().with_context(|| format!("cannot resolve --solver-adapter {}", dir.display()))?;
    Ok(SolverAdapter { dir, rank: ta_python::adapter_rank(&config) })
}

/// Starts the embedded engine serving `model` under its own name (once), with LoRA slots of
/// `lora_rank` when an adapter will be loaded, and returns its URL.
async fn start_engine(engine: &mut Option<Engine>, args: &EngineArgs, model: &str, lora_rank: Option<u32>, logs: &std::path::Path) -> Result<String> {
    if let Some(e) = engine {
        anyhow::bail!(
            "the embedded engine already serves {} for this command\nhint: pass --solver-base-url (or --teacher-base-url) pointing at a second server, e.g. `train-agent serve`",
            e.client().base_url()
        );
    }
    let mut options = args.options(model, model, logs.join("engine.log"));
    options.max_lora_rank = lora_rank;
    let served = EngineSource::Start { python: PythonEnv::ensure()?, options: Box::new(options) }.open().await.context("the embedded engine did not start")?;
    *engine = served.process;
    Ok(served.client.base_url())
}
