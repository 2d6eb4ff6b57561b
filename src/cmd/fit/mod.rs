//! `train-agent fit`: from an MCP server to a better adapter and its evidence, in one command.
//! It picks the task source from the server's tools (SQL synthesis or the tool walk, and a
//! teacher's paraphrases or tasks when `--teacher` is given), sizes the run for the hardware,
//! and runs the stages `demo` runs on the bundled server: reference traces, SFT, GRPO from the
//! SFT adapter with validation of base, SFT and the result, and the user's own check set.

mod engine;
mod plan;
pub mod profile;
pub mod run;

use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::args::{JudgeArgs, ServerArgs};
use crate::server::Server;
use crate::stdout::outln;
pub use plan::TaskSource;
use profile::{GPU_STEPS, ProfileArgs, Rates, about};
use run::{CheckScenarios, CheckSet, Job, Recipe};
use ta_sft::reference::DEFAULT_RECOVERY_SHARE;

/// Tasks `scenarios synth` writes: more than a database's distinct questions usually give, so
/// the split sizes come from the database (the demo's gives >= 1,000 train and >= 200
/// validation tasks).
pub const SYNTH_N: usize = 1500;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    server: ServerArgs,
    /// The base model to specialize: `small` (SmolLM2-135M-Instruct, the default without a GPU),
    /// `qwen0.5b` (Qwen2.5-Coder-0.5B-Instruct, the default with one), a Hugging Face id, a
    /// directory or a .gguf file.
    #[arg(long, value_name = "MODEL", env = "TRAIN_AGENT_BASE_MODEL", value_parser = crate::args::model_spec)]
    base_model: Option<String>,
    /// Your own questions about the server's data, evaluated at the end on base, SFT and
    /// SFT+GRPO (never trained on): JSONL or a JSON array of {"task": ..., "expected": ...}.
    #[arg(long, value_name = "FILE")]
    check_set: Option<PathBuf>,
    /// Also play each check-set question N times at temperature 1.0 with SFT and SFT+GRPO and
    /// compare them paired, pass@1 over the N (0: greedy only). Default: as many as the profile
    /// samples each validation task (4 with a GPU, none on CPU).
    #[arg(long, value_name = "N", requires = "check_set")]
    check_samples: Option<u32>,
    /// A teacher for more tasks: paraphrases of the synthesized questions (SQL servers) or tasks
    /// of its own seeded with the walk's calls (other servers). `openai/MODEL`,
    /// `anthropic/MODEL`, `local/MODEL`... as `scenarios paraphrase` and `generate` take it.
    #[arg(long, value_name = "MODEL", value_parser = crate::args::teacher_spec)]
    teacher: Option<String>,
    /// The share of SFT's reference traces that first write their query with a slip the server
    /// rejects, then look the name up and write the right one (`collect --recovery-share`; SQL
    /// servers only; off by default: benches/RESULTS.md, "Run 28", "Run 37").
    #[arg(long, value_name = "SHARE", default_value_t = DEFAULT_RECOVERY_SHARE, value_parser = crate::args::share)]
    recovery_share: f64,
    /// SQL servers: also name text values as people do, a state by its value alone, and look
    /// the stored value up in the reference (`scenarios synth --value-lookups`; off by default:
    /// no gain on people's questions, benches/RESULTS.md, "Run 29").
    #[arg(long)]
    value_lookups: bool,
    /// SQL servers: how often to draw tasks whose SQL joins no table, one, and two or more,
    /// relative to each other within each template (`scenarios synth --join-mix`, e.g. 4,2,1:
    /// half as many at each join; default: as the grammar offers them, more joined than people
    /// ask). Measured once at 4,2,1: no gain past noise (benches/RESULTS.md, "Run 34").
    #[arg(long, value_name = "W0,W1,W2", value_parser = crate::args::join_mix)]
    join_mix: Option<[f64; 3]>,
    /// Where every stage writes; running the same command again continues.
    #[arg(long, value_name = "DIR", default_value = "runs/fit")]
    out: PathBuf,
    #[command(flatten)]
    size: ProfileArgs,
    /// Print the plan (task source, profile, stages and their estimates) and stop.
    #[arg(long)]
    plan: bool,
    /// Also score with an LLM judge in GRPO (key from the provider's environment variable).
    #[command(flatten)]
    judge: JudgeArgs,
}

pub async fn run(args: Args) -> Result<()> {
    let check_set = match &args.check_set {
        Some(file) => Some(check_set(file)?),
        None => None,
    };
    let server = Server::connect(&args.server, None).await?;
    let specs = ta_mcp::ToolCatalog::from_discovery(&server.discovery).specs().to_vec();
    server.close().await;
    let source = TaskSource::pick(&specs, args.teacher.as_deref());
    let gpu = args.size.gpu().await?;
    let mut profile = args.size.profile(gpu, args.base_model.as_deref(), GPU_STEPS);
    args.judge.apply(&mut profile.grpo.reward)?;
    crate::setup::check_rewards(&profile.grpo.reward, Some(crate::args::BASE_NAME))?;
    if let Some(teacher) = &args.teacher {
        check_teacher(teacher)?;
    }
    let check_set = check_set.map(|c| CheckSet { samples: args.check_samples.unwrap_or(profile.grpo.rollout.eval_rollouts), ..c });
    let job = Job {
        command: "fit",
        out: args.out.clone(),
        server: args.server.argv(),
        chooses_tools: args.server.chooses_tools(),
        source,
        synth_n: SYNTH_N,
        profile,
        check_set,
        recipe: Recipe { recovery_share: args.recovery_share, value_lookups: args.value_lookups, join_mix: args.join_mix },
    };
    outln!("{}", plan_text(&job, &server.description))?;
    if args.plan {
        return Ok(());
    }
    let _lock = ta_eval::rundir::RunLock::acquire(&args.out)?;
    run::execute(job).await
}

/// A remote teacher's key, checked before anything runs: the teacher is first called after
/// synthesis or the walk. A `local/` teacher is the embedded engine's, its file checked when
/// the flag was read.
fn check_teacher(teacher: &str) -> Result<()> {
    use ta_reward::judge::{Endpoint, Provider};
    if Provider::of_spec(teacher)?.0 != Provider::Local {
        Endpoint::resolve(teacher, None, ta_chat::HttpLimits::DEFAULT).context("--teacher")?;
    }
    Ok(())
}

/// The user's check set, read and checked before anything runs: every question needs the
/// answer it is scored against.
fn check_set(file: &std::path::Path) -> Result<CheckSet> {
    let questions = ta_types::scenario::load_scenarios(file).with_context(|| format!("--check-set {}", file.display()))?;
    anyhow::ensure!(!questions.is_empty(), "--check-set {} holds no question", file.display());
    if let Some(q) = questions.iter().find(|q| q.expected.is_none()) {
        anyhow::bail!(
            "--check-set {}: question `{}` has no `expected` answer\nhint: each line is {{\"task\": \"...\", \"expected\": ...}}; the answer scores the three models",
            file.display(),
            q.id
        );
    }
    let label = format!("{} questions of {}", questions.len(), file.display());
    Ok(CheckSet { scenarios: CheckScenarios::File(std::path::absolute(file)?), questions: questions.len(), label, samples: 0 })
}

/// Which tools the model will be offered, and whether episodes share one server.
fn tools_text(job: &Job) -> String {
    if job.chooses_tools {
        return "those --tools/--exclude-tools leave (isolation from their readOnlyHint)".into();
    }
    match &job.source.tools {
        Some((tools, true)) => format!("{}: the tasks' own, which only read (episodes share one server)", tools.join(", ")),
        Some((tools, false)) => format!("{}: the tasks' own (isolation from their readOnlyHint)", tools.join(", ")),
        None => "the read tools the tasks call (named in each task; no isolation)".into(),
    }
}

/// What the run will do, printed before it starts (and alone with `--plan`).
fn plan_text(job: &Job, server: &str) -> String {
    let p = &job.profile;
    let g = &p.grpo.rollout;
    let rates = Rates::of(p.gpu);
    let grpo =
        if p.sft_only { "no GRPO (--steps 0)".to_string() } else { format!("GRPO {} steps of {} x {}", g.max_steps, g.scenarios_per_step, g.rollouts_per_scenario) };
    let mut lines = vec![
        format!("server:   {}", ta_types::terminal::terminal_safe(server)),
        format!("tasks:    {}", job.source),
        format!("tools:    {}", tools_text(job)),
        format!(
            "profile:  {} ({}): SFT {} epoch(s) on {:.0}% of the train split, {grpo}{}",
            if p.gpu { "gpu" } else { "cpu" },
            p.model,
            p.sft.epochs,
            p.sft_share * 100.0,
            p.validation_limit.map(|n| format!(", validation on {n} tasks")).unwrap_or_default()
        ),
        format!(
            "check set: {}",
            job.check_set.as_ref().map_or("none (--check-set FILE adds your own questions)".to_string(), |c| match c.samples {
                0 => c.label.clone(),
                n => format!("{}, greedy and {n} sampled episodes a question", c.label),
            })
        ),
        format!("stages:   {}", run::commands(job).join(" → ")),
    ];
    if !p.sft_only {
        lines.push(format!("GRPO:     {} a step", about(rates.grpo_step)));
    }
    lines.push(format!("out:      {}", job.out.display()));
    lines.join("\n")
}
