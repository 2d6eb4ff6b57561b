//! `train-agent train`: GRPO on an MCP server's scenarios, from the base model (or an adapter).

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use ta_python::{EngineOptions, PythonEnv, ServedEngine};
use ta_train::TrainConfig;
use ta_train::placement::Placement;
use ta_train::run::Finished;
use ta_trainer::checkpoint::last_complete_step;
use ta_types::Split;
use ta_types::scenario::{assign_splits, load_scenarios, of_split};

use crate::args::{BASE_NAME, EngineArgs, EpisodeArgs, HttpArgs, IsolationArgs, ServerArgs};
use crate::interrupted::Interrupted;
use crate::setup::{RunSetup, check_rewards};
use crate::stdout::outln;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    server: ServerArgs,
    /// Scenarios (JSON array or JSONL). Without `split` fields, a seeded share is held out.
    #[arg(long, value_name = "FILE", alias = "dataset")]
    scenarios: PathBuf,
    /// Base model: Hugging Face id, directory, .gguf file or packaged model name.
    #[arg(long, value_name = "MODEL", value_parser = crate::args::model_spec)]
    base_model: Option<String>,
    /// Run directory (config.toml, trajectories/, checkpoints/, metrics.jsonl, final/, logs/).
    #[arg(long, value_name = "DIR", alias = "output-dir")]
    out: PathBuf,
    /// Every hyperparameter as TOML (see docs/training.md); flags override it. A sampling flag
    /// sets the `[rollout]` key of its name (--max-tokens sets `[rollout] max_tokens`), --seed
    /// sets `seed` (the data order, the sampling and the trainer).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Continue an interrupted run in --out from its last checkpoint (its config.toml wins).
    #[arg(long)]
    resume: bool,
    /// Start from this PEFT adapter, e.g. an SFT run's final/.
    #[arg(long, value_name = "DIR")]
    init_adapter: Option<String>,
    /// Also write a merged 16-bit model to DIR/merged at the end.
    #[arg(long)]
    merge: bool,
    /// Use an engine already running (ours or `vllm serve --enable-lora`) at this URL; its base
    /// model must be served as --engine-model.
    #[arg(long, value_name = "URL")]
    engine_url: Option<String>,
    /// The model name to request from --engine-url (the base model as that server names it).
    #[arg(long, default_value = BASE_NAME, requires = "engine_url")]
    engine_model: String,
    /// GPUs in all: 1 shares one GPU between engine and trainer; N > 1 puts the engine on the
    /// first and the trainer (DDP) on the others.
    #[arg(long)]
    num_gpus: Option<u32>,
    /// Rollouts per group (overrides `[rollout] rollouts_per_scenario`).
    #[arg(long, alias = "rollouts-per-scenario")]
    rollouts: Option<u32>,
    /// Groups trained per step (overrides `[rollout] scenarios_per_step`).
    #[arg(long)]
    scenarios_per_step: Option<usize>,
    /// Stop after this many steps (overrides `[rollout] max_steps`; 0: every epoch).
    #[arg(long)]
    max_steps: Option<u64>,
    /// Passes over the train split (overrides `[rollout] epochs`).
    #[arg(long)]
    epochs: Option<u32>,
    /// Learning rate (overrides `[optim] lr`).
    #[arg(long)]
    lr: Option<f64>,
    /// LoRA rank of a new adapter (overrides `[lora] r`; --init-adapter keeps its own).
    #[arg(long)]
    lora_rank: Option<u32>,
    /// Validate every this many steps (overrides `[rollout] eval_every`; 0: only before and after).
    #[arg(long)]
    eval_every: Option<u64>,
    /// Keep the last step's adapter as final/ however it validated (overrides `[rollout]
    /// final_adapter`; default: the best validated adapter, the start adapter included, with
    /// final.json saying which).
    #[arg(long)]
    keep_last: bool,
    /// Sampled episodes per validation scenario besides the greedy one (pass@1 and pass@k with
    /// intervals; 0: greedy only).
    #[arg(long, value_name = "K")]
    eval_rollouts: Option<u32>,
    /// Log rollout, validation and trainer metrics to this Weights & Biases project (one run
    /// holds them all; needs `pip install wandb` in the Python environment and WANDB_API_KEY or
    /// `wandb login`).
    #[arg(long, value_name = "NAME")]
    wandb_project: Option<String>,
    /// Also log rollout, validation and trainer metrics for TensorBoard (under DIR/trainer/tensorboard; needs
    /// `pip install tensorboard` in the Python environment).
    #[arg(long)]
    tensorboard: bool,
    #[command(flatten)]
    episode: EpisodeArgs,
    #[command(flatten)]
    engine: EngineArgs,
    #[command(flatten)]
    http: HttpArgs,
    #[command(flatten)]
    judge: crate::args::JudgeArgs,
    #[command(flatten)]
    isolation: IsolationArgs,
}

fn resolve_config(args: &Args) -> Result<TrainConfig> {
    let saved = args.out.join("config.toml");
    if args.resume {
        let mut c = ta_train::config::TrainConfig::load(&saved).with_context(|| format!("--resume needs {} from the earlier run", saved.display()))?;
        // config.toml keeps URLs without their credentials: the judge's comes back from the flag.
        if args.judge.judge_base_url.is_some() {
            c.reward.judge.base_url = args.judge.judge_base_url.clone();
        }
        if let Some(url) = config_urls(&c).into_iter().find(|u| u.contains(ta_types::redact::MASK)) {
            bail!(
                "{} holds the URL {url} without its credentials (they are never written)\nhint: pass --judge-base-url with the full URL again, or start a new run with --config",
                saved.display()
            );
        }
        // A run stopped by its judge budget continues with a higher one.
        if args.judge.judge_budget.is_some() {
            let budget_only = crate::args::JudgeArgs { judge_budget: args.judge.judge_budget, ..Default::default() };
            budget_only.apply(&mut c.reward)?;
        }
        return Ok(c);
    }
    if saved.exists() && last_complete_step(&args.out) > 0 {
        bail!("{} already holds a training run\nhint: add --resume to continue it, or choose a new --out", args.out.display());
    }
    let mut c = match &args.config {
        Some(p) => TrainConfig::load(p)?,
        None => TrainConfig::default(),
    };
    macro_rules! set {
        ($($($flag:ident).+ => $($field:ident).+;)*) => { $( if let Some(v) = args.$($flag).+.clone() { c.$($field).+ = v; } )* };
    }
    set! {
        base_model => base_model;
        rollouts => rollout.rollouts_per_scenario;
        scenarios_per_step => rollout.scenarios_per_step;
        max_steps => rollout.max_steps;
        epochs => rollout.epochs;
        episode.max_turns => rollout.max_turns;
        episode.max_tokens => rollout.max_tokens;
        episode.max_episode_tokens => rollout.max_episode_tokens;
        episode.temperature => rollout.temperature;
        episode.top_p => rollout.top_p;
        episode.tool_result_max_chars => rollout.tool_result_max_chars;
        lr => optim.lr;
        lora_rank => lora.r;
        episode.concurrency => rollout.concurrency;
        eval_every => rollout.eval_every;
        eval_rollouts => rollout.eval_rollouts;
        episode.seed => seed;
        num_gpus => trainer.num_gpus;
    }
    if args.init_adapter.is_some() {
        c.init_adapter = args.init_adapter.clone();
    }
    if args.keep_last {
        c.rollout.final_adapter = ta_train::config::FinalAdapter::Last;
    }
    args.judge.apply(&mut c.reward)?;
    args.isolation.apply(&mut c.isolation);
    if args.wandb_project.is_some() {
        c.trainer.wandb_project = args.wandb_project.clone();
    }
    c.trainer.tensorboard |= args.tensorboard;
    c.validate()?;
    // A config file's base model, checked as the flag is.
    crate::args::model_spec(&c.base_model).map_err(|e| anyhow::anyhow!("base_model: {e}"))?;
    Ok(c)
}

/// Every URL in the config (the judge's, custom rewards').
fn config_urls(c: &TrainConfig) -> Vec<&str> {
    c.reward.judge.base_url.iter().chain(c.reward.custom.iter().filter_map(|r| r.url.as_ref())).chain(c.isolation.reset_url.iter()).map(String::as_str).collect()
}

/// The config as written to the run: URLs without credentials (`ta_types::redact`).
fn redacted(c: &TrainConfig) -> TrainConfig {
    let mut c = c.clone();
    let redact = ta_types::redact::redact_url;
    c.reward.judge.base_url = c.reward.judge.base_url.as_deref().map(redact);
    c.isolation.reset_url = c.isolation.reset_url.as_deref().map(redact);
    for r in &mut c.reward.custom {
        r.url = r.url.as_deref().map(redact);
    }
    c
}

/// `train-agent train`: a run Ctrl-C stopped is an error (exit 130) that says how to continue.
pub async fn command(args: Args) -> Result<()> {
    match run(args, None).await? {
        Finished::Interrupted { completed_steps } => Err(Interrupted::at_checkpoint(&format!("step {completed_steps} is the last one kept")).into()),
        _ => Ok(()),
    }
}

/// Runs training; returns how it ended (`Interrupted` and `BudgetReached` are not errors here:
/// [`command`] and `fit` each say what an interruption means for them).
/// `shared` is an engine the caller started with [`engine_options`] (`fit`'s, for `train` and
/// `eval`): the run uses it as its own, so its base validation is cached as one that started
/// its own engine would be.
pub async fn run(args: Args, shared: Option<&ServedEngine>) -> Result<Finished> {
    let _lock = ta_eval::rundir::RunLock::acquire(&args.out)?;
    let cfg = resolve_config(&args)?;
    check_rewards(&cfg.reward, args.engine_url.is_none().then_some(BASE_NAME))?;
    let out = &args.out;
    // config.toml goes in before anything connects (`RunSetup::start` creates the same directory).
    RunSetup::logs(out)?;
    std::fs::write(out.join("config.toml"), redacted(&cfg).to_toml())?;

    let mut scenarios = load_scenarios(&args.scenarios)?;
    assign_splits(&mut scenarios, cfg.rollout.validation_fraction, cfg.seed);
    let (train, validation) = (of_split(&scenarios, Split::Train), of_split(&scenarios, Split::Validation));
    for (name, part) in [("train", &train), ("validation", &validation)] {
        let dir = out.join("scenarios");
        std::fs::create_dir_all(&dir)?;
        let lines: Vec<String> = part.iter().map(|s| serde_json::to_string(s).expect("json")).collect();
        std::fs::write(dir.join(format!("{name}.jsonl")), lines.join("\n") + "\n")?;
    }
    eprintln!("{} training and {} validation scenarios", train.len(), validation.len());

    let setup = RunSetup::start(out, &args.server, &cfg.isolation, &scenarios, args.episode.system_prompt.as_deref()).await?;
    let python = PythonEnv::ensure()?;
    // What the report shows beside config.toml (no secrets: the server's description has none).
    let run_info = serde_json::json!({"server": setup.server.description, "dataset": args.scenarios.display().to_string(), "version": env!("CARGO_PKG_VERSION")});
    std::fs::write(out.join("run.json"), serde_json::to_vec_pretty(&run_info)?)?;

    let placement = Placement::of(&cfg);
    let engine = setup.engine(shared, args.engine_url.as_deref(), &args.engine_model, |log| {
        Ok((python.clone(), placement.engine_options(&cfg, args.engine.options(&cfg.base_model, BASE_NAME, log))?))
    })?;
    let started = std::time::Instant::now();
    let engine = engine.open().await.context("the embedded engine did not start")?;
    if engine.process.is_some() {
        ta_types::phases::PhaseLog::new(out).since(ta_types::phases::ENGINE_START, started);
    }
    engine.warn_if_crowded(cfg.rollout.most_in_flight(validation.len())).await;
    let chat = ta_chat::ChatClient::new(&engine.client.base_url(), None, args.http.limits()?);
    let base_cache = cfg.rollout.reuse_base_validation.then(|| base_cache(&cfg, &args, &setup, &validation));
    let ctx = ta_train::run::Context {
        cfg: &placement.trainer_cfg,
        out,
        tools: &setup.tools,
        system_prompt: &setup.system_prompt,
        chat: &chat,
        engine: &engine.client,
        base_name: &engine.base_name,
        python: &python,
        train,
        validation,
        base_cache,
        trainer_env: placement.trainer_env.clone(),
    };
    let shutdown = crate::interrupted::ctrl_c();
    let finished = ta_train::run::train(&ctx, shutdown).await;
    engine.shutdown().await;
    setup.close().await;
    let finished = finished?;
    // The report, also for an interrupted run (it shows the steps so far).
    match ta_eval::write_report(out) {
        Ok(path) => outln!("report: {}", path.display())?,
        Err(e) => eprintln!("warning: no report: {e}"),
    }
    match &finished {
        Finished::Interrupted { .. } => {}
        Finished::BudgetReached { completed_steps, cost_usd } => {
            eprintln!(
                "judge budget reached: ${cost_usd:.4} spent by step {completed_steps}, whose checkpoint is kept\nhint: continue with the same command plus --resume --judge-budget USD (a higher budget)"
            );
        }
        Finished::Done { steps } => {
            if out.join("final").exists() {
                outln!("trained {steps} steps; adapter: {}", out.join("final").display())?;
            } else {
                outln!("ran {steps} steps without an update (see the hint above)")?;
            }
            outln!("metrics: {}", out.join("metrics.jsonl").display())?;
            if args.merge {
                let merged = out.join("merged");
                let status = python
                    .module_command(ta_python::TRAINER_MODULE)
                    .args(["merge", "--model", &cfg.base_model, "--adapter"])
                    .arg(out.join("final"))
                    .arg("--out")
                    .arg(&merged)
                    .status()
                    .await?;
                anyhow::ensure!(status.success(), "merging the adapter failed ({status})");
                outln!("merged 16-bit model: {}", merged.display())?;
            }
        }
    }
    Ok(finished)
}

/// The options `run` starts its own engine with, for a caller that starts it beforehand: `fit`
/// starts it beside SFT, before the SFT adapter (`--init-adapter`, of rank `adapter_rank`)
/// exists.
pub fn engine_options(args: &Args, adapter_rank: u32, log: PathBuf) -> Result<EngineOptions> {
    let mut cfg = resolve_config(args)?;
    cfg.init_adapter = None;
    let mut options = Placement::of(&cfg).engine_options(&cfg, args.engine.options(&cfg.base_model, BASE_NAME, log))?;
    options.max_lora_rank = options.max_lora_rank.max(Some(adapter_rank));
    Ok(options)
}

/// Where the base model's validation of this run's setting is kept: keyed by everything that
/// decides its episodes and their scores (`RunSetup::base_cache`, and this run's settings).
fn base_cache(cfg: &TrainConfig, args: &Args, setup: &RunSetup, validation: &[ta_types::Scenario]) -> ta_train::base_cache::BaseCache {
    let r = &cfg.rollout;
    setup.base_cache(
        &cfg.base_model,
        validation,
        serde_json::json!({
            "episode": [r.max_turns, r.max_tokens, r.max_episode_tokens, r.tool_result_max_chars],
            "sampling": [r.eval_temperature, r.top_p, cfg.seed],
            "reward": &cfg.reward,
            "engine": args.engine.identity(args.engine_url.as_deref(), &args.engine_model),
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_toml_keeps_urls_without_credentials() {
        let mut c = TrainConfig::default();
        c.reward.judge.base_url = Some("http://u:pw@127.0.0.1:9/v1".into());
        c.reward.custom.push(ta_reward::CustomReward { name: "x".into(), command: None, url: Some("http://h/score?api_key=k1".into()), weight: 1.0, timeout_s: 1.0 });
        let text = redacted(&c).to_toml();
        assert!(text.contains("http://***@127.0.0.1:9/v1") && text.contains("api_key=***"), "{text}");
        assert!(!text.contains("pw@") && !text.contains("k1"), "{text}");
        assert_eq!(config_urls(&c).len(), 2);
    }
}
