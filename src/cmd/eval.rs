//! `train-agent eval`: play held-out scenarios with a trained adapter (and, with `--compare-base`
//! and `--baseline`, the base model and another adapter in the same engine), score them, compare
//! the adapter with the model before it by a paired test, and write `eval.json`, the trajectories
//! and `report.html`. The flags and the scenarios' selection are here; the evaluation itself is
//! `ta_eval::evaluate`.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Result;
use ta_eval::evaluate::{BASE, EvalOptions, Evaluated, Target, evaluate};
use ta_eval::rundir::eval_trajectories;
use ta_metrics::{Metrics, metrics_table};
use ta_python::{PythonEnv, ServedEngine};
use ta_train::base_cache::BaseCache;
use ta_types::scenario::assign_splits;

use crate::args::{BASE_NAME, EngineArgs, EpisodeArgs, EpisodeDefaults, HttpArgs, IsolationArgs, ResumeArgs, ScenarioArgs, ServerArgs};
use crate::interrupted::Interrupted;
use crate::setup::{RunSetup, load_scenarios};
use crate::stdout::outln;

/// An evaluation is repeatable: greedy with one rollout (see `temperature`), seed 0 (which also
/// seeds the split, as in `train`), and each model plays 16 episodes at once.
const EPISODE: EpisodeDefaults = EpisodeDefaults { seed: Some(0), concurrency: 16, ..EpisodeDefaults::COMMON };
/// The temperature without --temperature: greedy with one rollout, sampled with several (pass@k).
fn default_temperature(rollouts: u32) -> f32 {
    if rollouts > 1 { 1.0 } else { 0.0 }
}

#[derive(clap::Args)]
#[command(mut_args = |a| EPISODE.show(a))]
pub struct Args {
    #[command(flatten)]
    server: ServerArgs,
    /// What to evaluate: a PEFT adapter directory (a run's `final/`, `checkpoints/step-N/adapter`)
    /// or a base model (Hugging Face id, directory, .gguf file, packaged name).
    #[arg(long, value_name = "ADAPTER_DIR|MODEL", value_parser = crate::args::model_spec)]
    model: String,
    /// The adapter's base model. Default: the run's config.toml (when the adapter sits in a run
    /// directory), else `base_model_name_or_path` in adapter_config.json.
    #[arg(long, value_name = "MODEL", value_parser = crate::args::model_spec)]
    base_model: Option<String>,
    #[command(flatten)]
    scenarios: ScenarioArgs,
    /// Which scenarios: validation, train or all. Scenarios without a `split` field get the same
    /// seeded split as `train` (see --validation-fraction, --seed).
    #[arg(long, default_value = "validation", value_parser = ["validation", "train", "all"])]
    split: String,
    /// Also run the base model in the same engine and compare scenario by scenario (each model
    /// plays --concurrency episodes at once).
    #[arg(long)]
    compare_base: bool,
    /// Play the base model again even when an earlier evaluation asked it the same scenarios in
    /// the same way (same model file, server, tools, prompt, episode settings and engine): by
    /// default that evaluation's episodes are reused (kept in the train-agent cache's
    /// base-validation folder, or TRAIN_AGENT_VALIDATION_CACHE). The new episodes are kept instead.
    #[arg(long)]
    replay_base: bool,
    /// Also run this adapter (e.g. the SFT adapter a GRPO run started from) in the same engine,
    /// and compare --model with it scenario by scenario, with a paired test (exact McNemar and a
    /// paired bootstrap on per-scenario success). With --compare-base the base model is shown too.
    #[arg(long, value_name = "ADAPTER_DIR")]
    baseline: Option<PathBuf>,
    /// Rollouts per scenario (K). With K > 1, pass@k is reported for k = 1..K, and the default
    /// --temperature is 1.0 instead of 0 (greedy).
    #[arg(long, default_value_t = 1)]
    rollouts: u32,
    /// Output directory: eval.json, trajectories/<model>.jsonl, report.html, logs/. Re-running
    /// continues: finished episodes are kept.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Share of scenarios held out for validation when the data set has no `split` fields.
    #[arg(long, default_value_t = 0.2)]
    validation_fraction: f64,
    #[command(flatten)]
    episode: EpisodeArgs,
    /// Use an engine already running (ours or `vllm serve --enable-lora`) whose base model is
    /// served as --engine-model.
    #[arg(long, value_name = "URL")]
    engine_url: Option<String>,
    /// The model name to request from --engine-url (the base model as that server names it).
    #[arg(long, default_value = BASE_NAME, requires = "engine_url")]
    engine_model: String,
    #[command(flatten)]
    engine: EngineArgs,
    #[command(flatten)]
    http: HttpArgs,
    #[command(flatten)]
    resume: ResumeArgs,
    #[command(flatten)]
    isolation: IsolationArgs,
}

/// Where the base model's episodes of this evaluation are kept: keyed by everything that decides
/// them (`RunSetup::base_cache`, and the episodes' settings; their scores are computed again from
/// the scenarios).
fn base_cache(args: &Args, base_model: &str, setup: &RunSetup, scenarios: &[ta_types::Scenario], agent: &ta_rollout::AgentConfig) -> BaseCache {
    setup.base_cache(
        base_model,
        scenarios,
        serde_json::json!({
            "command": "eval",
            "rollouts": args.rollouts,
            "episode": [agent.max_turns, agent.max_tokens, agent.max_episode_tokens, agent.tool_result_max_chars],
            "sampling": [agent.temperature, agent.top_p, agent.seed],
            "engine": args.engine.identity(args.engine_url.as_deref(), &args.engine_model),
        }),
    )
}

/// Evaluates; `shared` is an engine the caller started (`fit`'s, which `train` used before).
pub async fn run(args: Args, shared: Option<&ServedEngine>) -> Result<()> {
    let started = Instant::now();
    let target = Target::resolve(&args.model, args.base_model.as_deref(), args.compare_base, args.baseline.as_deref())?;
    let defaults = EpisodeDefaults { temperature: Some(default_temperature(args.rollouts)), ..EPISODE };
    let agent = args.episode.agent_config(&defaults, true);
    let seed = agent.seed.expect("eval's EPISODE has a seed");
    let split = match args.split.as_str() {
        "all" => None,
        s => Some(s.parse::<ta_types::Split>().map_err(anyhow::Error::msg)?),
    };
    let scenarios = load_scenarios(&args.scenarios, |all| {
        assign_splits(all, args.validation_fraction, seed);
        if let Some(split) = split {
            all.retain(|s| s.split == Some(split));
        }
    })?;
    anyhow::ensure!(
        !scenarios.is_empty(),
        "no {} scenarios in {}\nhint: choose another --split, or give scenarios a \"split\" field",
        args.split,
        args.scenarios.scenarios.display()
    );
    anyhow::ensure!(args.rollouts >= 1, "--rollouts must be at least 1");
    let _lock = ta_eval::rundir::RunLock::acquire(&args.out)?;

    let setup = RunSetup::start(&args.out, &args.server, &args.isolation.settings(), &scenarios, args.episode.system_prompt.as_deref()).await?;
    let engine = setup
        .engine(shared, args.engine_url.as_deref(), &args.engine_model, |log| Ok((PythonEnv::ensure()?, args.engine.options(&target.base_model, BASE_NAME, log))))?;
    let opts = EvalOptions {
        scenarios: &scenarios,
        rollouts: args.rollouts,
        agent,
        concurrency: args.episode.concurrency(&EPISODE),
        retry_failed: args.resume.retry_failed,
        http: args.http.limits()?,
        out: &args.out,
        server: setup.server.description.clone(),
        dataset: args.scenarios.scenarios.display().to_string(),
        split: (args.split != "all").then(|| args.split.clone()),
        started,
    };
    // The base model's episodes are the same for every evaluation that asks it the same things
    // the same way (the check set after SFT, again after GRPO): kept once, reused after.
    let base_played = target.adapter.is_none() || args.compare_base;
    let cache = base_played.then(|| base_cache(&args, &target.base_model, &setup, &scenarios, &opts.agent));
    let base_path = eval_trajectories(&args.out, BASE);
    let episodes = scenarios.len() * args.rollouts as usize;
    let reused = match &cache {
        // Never over episodes already in --out: those are resumed, or refused as another evaluation's.
        Some(cache) if !args.replay_base && !base_path.exists() && cache.restore(&base_path, episodes) => {
            eprintln!(
                "base: {episodes} episodes reused from an earlier evaluation with the same model, scenarios and settings ({}; --replay-base plays them again)",
                cache.path().display()
            );
            true
        }
        _ => false,
    };
    let shutdown = crate::interrupted::ctrl_c();
    let evaluated = evaluate(&target, args.compare_base, engine, &setup.tools, &setup.system_prompt, &opts, shutdown).await;
    setup.close().await;
    let (summary, report) = match evaluated? {
        Evaluated::Done { summary, report } => (summary, report),
        Evaluated::Interrupted { kept } => return Err(Interrupted::episodes(kept).into()),
    };
    if let Some(cache) = cache.filter(|_| !reused) {
        cache.store(&base_path);
    }
    let columns: Vec<(&str, &Metrics)> = summary.models.iter().zip(&summary.metrics).map(|(m, x)| (m.label.as_str(), x)).collect();
    outln!("{}", metrics_table(&columns))?;
    if let (Some(c), [.., a, b]) = (&summary.comparison, summary.models.as_slice()) {
        outln!("\n{}", c.table(&a.label, &b.label))?;
    }
    outln!("\neval: {}\nreport: {}", args.out.join("eval.json").display(), report.display())?;
    Ok(())
}
