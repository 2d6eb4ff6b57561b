//! `train-agent eval`: play held-out scenarios with a trained adapter (and, with `--compare-base`
//! and `--baseline`, the base model and another adapter in the same engine), score them, compare
//! the adapter with the model before it by a paired test, and write `eval.json`, the trajectories
//! and `report.html`.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use indicatif::{MultiProgress, ProgressBar};
use serde_json::{Value, json};
use ta_eval::metrics::{Metrics, metrics_table};
use ta_eval::rundir::eval_trajectories;
use ta_eval::{EvalModel, EvalSummary};
use ta_python::{Engine, EngineClient, PythonEnv};
use ta_rollout::runner::{ResumePlan, check_not_all_failed, group_jobs, run_jobs};
use ta_types::Trajectory;
use ta_types::scenario::assign_splits;
use ta_types::trajectory::write_trajectories;

use crate::args::{BASE_NAME, EngineArgs, EpisodeArgs, EpisodeDefaults, HttpArgs, Interrupted, IsolationArgs, ResumeArgs, ScenarioArgs, ServerArgs};

/// The name the adapter under evaluation is loaded under.
const TRAINED: &str = "trained";
/// The name `--baseline` is loaded under.
const BASELINE: &str = "baseline";

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
    #[arg(long, value_name = "ADAPTER_DIR|MODEL")]
    model: String,
    /// The adapter's base model. Default: the run's config.toml (when the adapter sits in a run
    /// directory), else `base_model_name_or_path` in adapter_config.json.
    #[arg(long, value_name = "MODEL")]
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

/// What `--model` names.
struct Target {
    base_model: String,
    adapter: Option<PathBuf>,
    /// `--baseline`, resolved.
    baseline: Option<PathBuf>,
    /// The largest LoRA rank the engine must serve.
    lora_rank: Option<u32>,
}

/// The adapter in `path`: the directory itself, or a run directory's `final/`.
fn adapter_dir(path: &Path) -> Option<PathBuf> {
    if path.join("adapter_config.json").exists() {
        Some(path.to_path_buf())
    } else if path.join("final").join("adapter_config.json").exists() {
        Some(path.join("final"))
    } else {
        None
    }
}

/// An adapter's `adapter_config.json`.
fn adapter_config(adapter: &Path) -> Result<Value> {
    let cfg_path = adapter.join("adapter_config.json");
    serde_json::from_slice(&std::fs::read(&cfg_path).with_context(|| format!("cannot read {}", cfg_path.display()))?)
        .with_context(|| format!("{} is not JSON", cfg_path.display()))
}

fn rank(cfg: &Value) -> Option<u32> {
    cfg["r"].as_u64().map(|r| r as u32)
}

fn resolve_target(args: &Args) -> Result<Target> {
    let path = Path::new(&args.model);
    let Some(adapter) = adapter_dir(path) else {
        for (flag, given) in [("--compare-base", args.compare_base), ("--baseline", args.baseline.is_some())] {
            if given {
                bail!(
                    "{flag} needs an adapter, but {} holds no adapter_config.json\nhint: pass a run's final/ directory (or checkpoints/step-N/adapter) as --model",
                    args.model
                );
            }
        }
        if path.is_dir() && path.join("config.toml").exists() {
            bail!(
                "{} looks like a run directory without final/ (training did not finish)\nhint: pass one of its checkpoints/step-N/adapter directories as --model",
                args.model
            );
        }
        return Ok(Target { base_model: args.base_model.clone().unwrap_or_else(|| args.model.clone()), adapter: None, baseline: None, lora_rank: None });
    };
    let adapter = std::fs::canonicalize(&adapter).with_context(|| format!("cannot resolve {}", adapter.display()))?;
    let cfg = adapter_config(&adapter)?;
    let from_run = adapter.ancestors().skip(1).take(3).find_map(|dir| {
        let text = std::fs::read_to_string(dir.join("config.toml")).ok()?;
        Some(text.parse::<toml::Table>().ok()?.get("base_model")?.as_str()?.to_string())
    });
    let base_model = args
        .base_model
        .clone()
        .or(from_run)
        .or_else(|| cfg["base_model_name_or_path"].as_str().map(str::to_string))
        .context(format!("cannot tell the base model of the adapter in {}\nhint: pass --base-model", adapter.display()))?;
    let baseline = match &args.baseline {
        Some(dir) => {
            let found = adapter_dir(dir)
                .with_context(|| format!("--baseline {} holds no adapter_config.json\nhint: pass an adapter directory, e.g. the SFT run's final/", dir.display()))?;
            Some(std::fs::canonicalize(&found).with_context(|| format!("cannot resolve {}", found.display()))?)
        }
        None => None,
    };
    // The engine sizes its LoRA slots for the larger of the two adapters.
    let baseline_rank = baseline.as_deref().map(adapter_config).transpose()?.as_ref().and_then(rank);
    let lora_rank = rank(&cfg).max(baseline_rank);
    Ok(Target { base_model, adapter: Some(adapter), baseline, lora_rank })
}

pub async fn run(args: Args) -> Result<()> {
    let started = Instant::now();
    let target = resolve_target(&args)?;
    let defaults = EpisodeDefaults { temperature: Some(default_temperature(args.rollouts)), ..EPISODE };
    let cfg = args.episode.agent_config(&defaults, true);
    let seed = cfg.seed.expect("eval's EPISODE has a seed");
    let split = match args.split.as_str() {
        "all" => None,
        s => Some(s.parse::<ta_types::Split>().map_err(anyhow::Error::msg)?),
    };
    let scenarios = args.scenarios.load(|all| {
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
    let logs = args.out.join("logs");
    std::fs::create_dir_all(&logs).with_context(|| format!("cannot create {}", logs.display()))?;

    let isolation = args.isolation.settings();
    crate::args::check_state_capture(&scenarios, &isolation)?;
    let server = args.server.connect_isolated(&isolation, Some(&logs)).await?;
    let tools = server.tools();
    let system_prompt = server.system_prompt(args.episode.system_prompt.as_deref())?;

    let (engine, client, base_name) = match &args.engine_url {
        Some(url) => (None, EngineClient::new(url), args.engine_model.clone()),
        None => {
            let python = PythonEnv::ensure()?;
            let mut opts = args.engine.options(&target.base_model, BASE_NAME, logs.join("engine.log"));
            opts.max_lora_rank = target.lora_rank;
            // The adapter under test and `--baseline` are resident together (the engine, like
            // vLLM, refuses a load beyond --max-loras).
            if target.baseline.is_some() {
                opts.max_loras = Some(2);
            }
            eprintln!("starting the engine with {} (log: {})", target.base_model, opts.log_path.display());
            let engine = Engine::start(&python, &opts).await.context("the embedded engine did not start")?;
            let client = engine.client().clone();
            (Some(engine), client, BASE_NAME.to_string())
        }
    };
    // Labels in table order: base, the baseline adapter, then the one under test (compared with
    // the model before it).
    let mut models: Vec<(EvalModel, String)> = Vec::new();
    if let Some(adapter) = &target.adapter {
        client.load_adapter(TRAINED, adapter).await.with_context(|| format!("cannot load the adapter {}", adapter.display()))?;
        if args.compare_base {
            models.push((EvalModel { label: "base".into(), source: target.base_model.clone() }, base_name.clone()));
        }
        if let Some(baseline) = &target.baseline {
            client.load_adapter(BASELINE, baseline).await.with_context(|| format!("cannot load the adapter {}", baseline.display()))?;
            models.push((EvalModel { label: BASELINE.into(), source: baseline.display().to_string() }, BASELINE.into()));
        }
        models.push((EvalModel { label: TRAINED.into(), source: adapter.display().to_string() }, TRAINED.into()));
    } else {
        models.push((EvalModel { label: "base".into(), source: target.base_model.clone() }, base_name.clone()));
    }

    let chat = ta_chat::ChatClient::new(&client.base_url(), None, args.http.limits()?);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            let _ = stop_tx.send(true);
        }
    });
    let concurrency = args.episode.concurrency(&EPISODE);
    let multi = MultiProgress::new();
    let runs = models.iter().map(|(m, served)| {
        let path = eval_trajectories(&args.out, &m.label);
        let (chat, tools, system_prompt, scenarios, cfg, multi) = (&chat, &tools, &system_prompt, &scenarios, &cfg, &multi);
        let mut stop = stop_rx.clone();
        async move {
            let plan = ResumePlan::read(&path, group_jobs(scenarios, args.rollouts, 0), args.resume.retry_failed)?;
            let key = |t: &Trajectory| (t.scenario_id.clone(), t.group.index);
            let wanted: HashSet<(String, u32)> = group_jobs(scenarios, args.rollouts, 0).iter().map(|j| (j.scenario.id.clone(), j.group.index)).collect();
            if let Some(t) = plan.kept.iter().find(|t| !wanted.contains(&key(t))) {
                bail!(
                    "{} holds episodes of another evaluation (scenario {} #{} is not part of this one)\nhint: choose a new --out, or repeat the earlier --scenarios/--split/--limit/--rollouts to continue it",
                    path.display(),
                    t.scenario_id,
                    t.group.index
                );
            }
            let mut writer = plan.writer(&path)?;
            let ResumePlan { kept: mut done, jobs, replayed } = plan;
            if !done.is_empty() || replayed > 0 {
                let line = format!("{}: {} finished episodes kept from an earlier run ({replayed} errored ones played again); {} to play", m.label, done.len(), jobs.len());
                // Above the progress bars, or plainly when they are hidden (not a terminal).
                if multi.is_hidden() { eprintln!("{line}") } else { multi.println(line).ok(); }
            }
            let bar = multi.add(ProgressBar::new(0));
            bar.set_prefix(m.label.clone());
            let shutdown = async move {
                let _ = stop.wait_for(|s| *s).await;
            };
            let result = run_jobs(chat, served, tools, system_prompt, jobs, cfg, concurrency, &mut writer, &bar, shutdown).await?;
            bar.finish();
            done.extend(result.trajectories);
            ta_reward::score_all(&ta_reward::RewardConfig::default(), scenarios, &mut done);
            done.sort_by(|a, b| (&a.scenario_id, a.group.index).cmp(&(&b.scenario_id, b.group.index)));
            write_trajectories(&path, &done)?;
            anyhow::Ok((done, result.interrupted))
        }
    });
    let results: Vec<(Vec<Trajectory>, bool)> = futures::future::try_join_all(runs).await?;
    if let Some(engine) = engine {
        engine.shutdown().await;
    }
    server.close().await;
    if results.iter().any(|(_, interrupted)| *interrupted) {
        return Err(Interrupted { kept: results.iter().map(|(ts, _)| ts.len()).sum() }.into());
    }
    for (ts, _) in &results {
        check_not_all_failed(ts)?;
    }

    let trajectories: Vec<Vec<Trajectory>> = results.into_iter().map(|(ts, _)| ts).collect();
    let settings = json!({
        "temperature": cfg.temperature, "top_p": cfg.top_p, "max_turns": cfg.max_turns, "max_tokens": cfg.max_tokens,
        "seed": seed, "tool_result_max_chars": cfg.tool_result_max_chars, "scenarios": scenarios.len(),
    });
    let summary = EvalSummary::new(
        models.iter().map(|(m, _)| m.clone()).collect(),
        &trajectories,
        server.description.clone(),
        args.scenarios.scenarios.display().to_string(),
        (args.split != "all").then(|| args.split.clone()),
        args.rollouts,
        settings,
        started.elapsed().as_secs_f64(),
    );
    std::fs::write(args.out.join("eval.json"), serde_json::to_vec_pretty(&summary)?)?;
    let columns: Vec<(&str, &Metrics)> = summary.models.iter().zip(&summary.metrics).map(|(m, x)| (m.label.as_str(), x)).collect();
    println!("{}", metrics_table(&columns));
    if let (Some(c), [.., (a, _), (b, _)]) = (&summary.comparison, models.as_slice()) {
        println!("\n{}", c.table(&a.label, &b.label));
    }
    let report = ta_eval::write_report(&args.out)?;
    println!("\neval: {}\nreport: {}", args.out.join("eval.json").display(), report.display());
    Ok(())
}
