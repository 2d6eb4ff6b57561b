//! `train-agent eval` as a whole: what `--model` names (an adapter, with its base model, or a
//! base model), the engine serving every model compared (the base, `--baseline`, the adapter),
//! the resumable play of each, the paired comparison, and `eval.json`, the trajectories and
//! `report.html`. The binary only turns flags into [`EvalOptions`] and prints the result.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Instant;

use indicatif::{MultiProgress, ProgressBar};
use serde_json::json;
use ta_chat::{ChatClient, HttpLimits};
use ta_python::{AdapterError, EngineError, EngineSource, adapter_config, adapter_rank};
use ta_rollout::runner::{AllFailed, ResumePlan, check_not_all_failed, group_jobs};
use ta_rollout::{AgentConfig, ToolHost};
use ta_types::trajectory::write_trajectories;
use ta_types::{Scenario, Trajectory};

use crate::report::ReportError;
use crate::rundir::{EvalModel, EvalSummary, eval_trajectories};

/// The base model's label (its trajectories: `trajectories/base.jsonl`).
pub const BASE: &str = "base";
/// The name the adapter under evaluation is loaded under.
const TRAINED: &str = "trained";
/// The name `--baseline` is loaded under.
const BASELINE: &str = "baseline";

#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("{flag} needs an adapter, but {model} holds no adapter_config.json\nhint: pass a run's final/ directory (or checkpoints/step-N/adapter) as --model")]
    NeedsAdapter { flag: &'static str, model: String },
    #[error("{0} looks like a run directory without final/ (training did not finish)\nhint: pass one of its checkpoints/step-N/adapter directories as --model")]
    UnfinishedRun(String),
    #[error("cannot resolve {path}")]
    Resolve { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Adapter(#[from] AdapterError),
    #[error("cannot tell the base model of the adapter in {0}\nhint: pass --base-model")]
    NoBaseModel(PathBuf),
    #[error("--baseline {0} holds no adapter_config.json\nhint: pass an adapter directory, e.g. the SFT run's final/")]
    NoBaseline(PathBuf),
    #[error("the embedded engine did not start")]
    EngineStart(#[source] EngineError),
    #[error("cannot load the adapter {path}")]
    LoadAdapter { path: PathBuf, source: EngineError },
    #[error(
        "{path} holds episodes of another evaluation (scenario {scenario} #{index} is not part of this one)\nhint: choose a new --out, or repeat the earlier --scenarios/--split/--limit/--rollouts to continue it"
    )]
    AnotherEvaluation { path: PathBuf, scenario: String, index: u32 },
    #[error(transparent)]
    AllFailed(#[from] AllFailed),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error(transparent)]
    Report(#[from] ReportError),
}

/// What `--model` names, resolved before anything starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub base_model: String,
    /// The adapter under evaluation; `None` evaluates the base model.
    pub adapter: Option<PathBuf>,
    /// `--baseline`, resolved.
    pub baseline: Option<PathBuf>,
    /// The largest LoRA rank the engine must serve.
    pub lora_rank: Option<u32>,
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

fn canonical(path: &Path) -> Result<PathBuf, EvalError> {
    std::fs::canonicalize(path).map_err(|source| EvalError::Resolve { path: path.to_path_buf(), source })
}

impl Target {
    /// `model`: an adapter directory (or a run directory with `final/`) or a base model.
    /// An adapter's base model is `base_model` when given, else the run's `config.toml` (when
    /// the adapter sits in a run directory), else its `base_model_name_or_path`.
    pub fn resolve(model: &str, base_model: Option<&str>, compare_base: bool, baseline: Option<&Path>) -> Result<Target, EvalError> {
        let path = Path::new(model);
        let Some(adapter) = adapter_dir(path) else {
            for (flag, given) in [("--compare-base", compare_base), ("--baseline", baseline.is_some())] {
                if given {
                    return Err(EvalError::NeedsAdapter { flag, model: model.to_string() });
                }
            }
            if path.is_dir() && path.join("config.toml").exists() {
                return Err(EvalError::UnfinishedRun(model.to_string()));
            }
            return Ok(Target { base_model: base_model.unwrap_or(model).to_string(), adapter: None, baseline: None, lora_rank: None });
        };
        let adapter = canonical(&adapter)?;
        let cfg = adapter_config(&adapter)?;
        let from_run = adapter.ancestors().skip(1).take(3).find_map(|dir| {
            let text = std::fs::read_to_string(dir.join("config.toml")).ok()?;
            Some(text.parse::<toml::Table>().ok()?.get("base_model")?.as_str()?.to_string())
        });
        let base_model = base_model
            .map(str::to_string)
            .or(from_run)
            .or_else(|| cfg["base_model_name_or_path"].as_str().map(str::to_string))
            .ok_or_else(|| EvalError::NoBaseModel(adapter.clone()))?;
        let baseline = match baseline {
            Some(dir) => Some(canonical(&adapter_dir(dir).ok_or_else(|| EvalError::NoBaseline(dir.to_path_buf()))?)?),
            None => None,
        };
        // The engine sizes its LoRA slots for the larger of the two adapters.
        let baseline_rank = baseline.as_deref().map(adapter_config).transpose()?.as_ref().and_then(adapter_rank);
        let lora_rank = adapter_rank(&cfg).max(baseline_rank);
        Ok(Target { base_model, adapter: Some(adapter), baseline, lora_rank })
    }
}

/// How the evaluation plays and what `eval.json` records of it.
pub struct EvalOptions<'a> {
    pub scenarios: &'a [Scenario],
    /// Episodes per scenario (pass@k for k = 1..rollouts).
    pub rollouts: u32,
    pub agent: AgentConfig,
    /// Episodes each model plays at once.
    pub concurrency: usize,
    pub retry_failed: bool,
    pub http: HttpLimits,
    /// The output directory (an earlier evaluation there is continued).
    pub out: &'a Path,
    /// The server's description, the scenarios file and the split, as `eval.json` shows them.
    pub server: String,
    pub dataset: String,
    pub split: Option<String>,
    /// When the command started (`eval.json`'s wall time).
    pub started: Instant,
}

/// How an evaluation ended.
pub enum Evaluated {
    /// Every model played every episode: `eval.json` and the report are written.
    Done { summary: Box<EvalSummary>, report: PathBuf },
    /// `shutdown` fired: `kept` finished episodes are saved, and running again continues.
    Interrupted { kept: usize },
}

/// Evaluates `target` (and with `compare_base` the base model, with a baseline that adapter)
/// on `opts.scenarios` in one engine, each model `opts.concurrency` episodes at once.
pub async fn evaluate<T: ToolHost>(
    target: &Target,
    compare_base: bool,
    engine: EngineSource,
    tools: &T,
    system_prompt: &str,
    opts: &EvalOptions<'_>,
    shutdown: impl Future<Output = ()>,
) -> Result<Evaluated, EvalError> {
    let engine = match engine {
        EngineSource::Start { python, mut options } => {
            options.max_lora_rank = target.lora_rank;
            // The adapter under test and `--baseline` are resident together (the engine, like
            // vLLM, refuses a load beyond --max-loras).
            if target.baseline.is_some() {
                options.max_loras = Some(2);
            }
            EngineSource::Start { python, options }
        }
        running => running,
    };
    let engine = engine.open().await.map_err(EvalError::EngineStart)?;
    let client = &engine.client;
    let load = async |name: &str, path: &Path| client.load_adapter(name, path).await.map_err(|source| EvalError::LoadAdapter { path: path.to_path_buf(), source });
    // Labels in table order: base, the baseline adapter, then the one under test (compared with
    // the model before it).
    let base = (EvalModel { label: BASE.into(), source: target.base_model.clone() }, engine.base_name.clone());
    let mut models: Vec<(EvalModel, String)> = Vec::new();
    if let Some(adapter) = &target.adapter {
        load(TRAINED, adapter).await?;
        if compare_base {
            models.push(base);
        }
        if let Some(baseline) = &target.baseline {
            load(BASELINE, baseline).await?;
            models.push((EvalModel { label: BASELINE.into(), source: baseline.display().to_string() }, BASELINE.into()));
        }
        models.push((EvalModel { label: TRAINED.into(), source: adapter.display().to_string() }, TRAINED.into()));
    } else {
        models.push(base);
    }

    // every model plays its episodes at once, side by side
    let per_model = opts.concurrency.min(opts.scenarios.len() * opts.rollouts as usize);
    engine.warn_if_crowded(per_model * models.len()).await;
    let chat = ChatClient::new(&client.base_url(), None, opts.http);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let multi = MultiProgress::new();
    let runs = models.iter().map(|(m, served)| {
        let mut stop = stop_rx.clone();
        let stop = async move {
            let _ = stop.wait_for(|s| *s).await;
        };
        play_model(&m.label, served, &chat, tools, system_prompt, opts, &multi, stop)
    });
    // Ctrl-C stops every model's play; each keeps what it finished.
    let notify = async move {
        shutdown.await;
        let _ = stop_tx.send(true);
        std::future::pending::<()>().await
    };
    let results = tokio::select! {
        results = futures::future::try_join_all(runs) => results,
        () = notify => unreachable!("notify never ends"),
    };
    engine.shutdown().await;
    let results: Vec<(Vec<Trajectory>, bool)> = results?;
    if results.iter().any(|(_, interrupted)| *interrupted) {
        return Ok(Evaluated::Interrupted { kept: results.iter().map(|(ts, _)| ts.len()).sum() });
    }
    for (ts, _) in &results {
        check_not_all_failed(ts)?;
    }

    let trajectories: Vec<Vec<Trajectory>> = results.into_iter().map(|(ts, _)| ts).collect();
    let cfg = &opts.agent;
    let settings = json!({
        "temperature": cfg.temperature, "top_p": cfg.top_p, "max_turns": cfg.max_turns, "max_tokens": cfg.max_tokens,
        "max_episode_tokens": cfg.max_episode_tokens, "seed": cfg.seed, "tool_result_max_chars": cfg.tool_result_max_chars, "scenarios": opts.scenarios.len(),
    });
    let summary = EvalSummary::new(
        models.into_iter().map(|(m, _)| m).collect(),
        &trajectories,
        opts.server.clone(),
        opts.dataset.clone(),
        opts.split.clone(),
        opts.rollouts,
        settings,
        opts.started.elapsed().as_secs_f64(),
    );
    std::fs::write(opts.out.join("eval.json"), serde_json::to_vec_pretty(&summary)?)?;
    let report = crate::write_report(opts.out)?;
    Ok(Evaluated::Done { summary: Box::new(summary), report })
}

/// One model's episodes, continued from `trajectories/<label>.jsonl`, scored and written back
/// in scenario order. Returns them and whether `stop` cut the play short.
#[allow(clippy::too_many_arguments)]
async fn play_model<T: ToolHost>(
    label: &str,
    served: &str,
    chat: &ChatClient,
    tools: &T,
    system_prompt: &str,
    opts: &EvalOptions<'_>,
    multi: &MultiProgress,
    stop: impl Future<Output = ()>,
) -> Result<(Vec<Trajectory>, bool), EvalError> {
    let path = eval_trajectories(opts.out, label);
    let plan = ResumePlan::read(&path, group_jobs(opts.scenarios, opts.rollouts, 0), opts.retry_failed)?;
    if let Some(t) = plan.foreign() {
        return Err(EvalError::AnotherEvaluation { path, scenario: t.scenario_id.clone(), index: t.group.index });
    }
    if !plan.kept.is_empty() || plan.replayed > 0 {
        let line =
            format!("{label}: {} finished episodes kept from an earlier run ({} errored ones played again); {} to play", plan.kept.len(), plan.replayed, plan.jobs.len());
        // Above the progress bars, or plainly when they are hidden (not a terminal).
        if multi.is_hidden() {
            eprintln!("{line}")
        } else {
            multi.println(line).ok();
        }
    }
    let bar = multi.add(ProgressBar::new(0));
    bar.set_prefix(label.to_string());
    let played = plan.play(chat, served, tools, system_prompt, &opts.agent, opts.concurrency, &path, &bar, stop).await?;
    bar.finish();
    let mut done = played.trajectories;
    ta_reward::score_all(&ta_reward::RewardConfig::default(), opts.scenarios, &mut done);
    done.sort_by(|a, b| (&a.scenario_id, a.group.index).cmp(&(&b.scenario_id, b.group.index)));
    write_trajectories(&path, &done)?;
    Ok((done, played.interrupted))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adapter(dir: &Path, config: &str) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("adapter_config.json"), config).unwrap();
    }

    /// A base model is evaluated as it is; the flags that need an adapter say so.
    #[test]
    fn a_base_model_is_its_own_target() {
        let t = Target::resolve("smollm2-135m-instruct", None, false, None).unwrap();
        assert_eq!((t.base_model.as_str(), t.adapter, t.lora_rank), ("smollm2-135m-instruct", None, None));
        let err = Target::resolve("smollm2-135m-instruct", None, true, None).unwrap_err();
        assert!(err.to_string().starts_with("--compare-base needs an adapter"), "{err}");
        let run = tempfile::tempdir().unwrap();
        std::fs::write(run.path().join("config.toml"), "base_model = \"m\"\n").unwrap();
        let err = Target::resolve(&run.path().display().to_string(), None, false, None).unwrap_err();
        assert!(matches!(err, EvalError::UnfinishedRun(_)), "{err}");
    }

    /// A run directory's `final/` is found, its base model comes from the run's config.toml
    /// (then --base-model, then the adapter's own config), and the engine's rank fits both.
    #[test]
    fn an_adapter_finds_its_base_model_and_the_widest_rank() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        adapter(&run.join("final"), r#"{"r": 8, "base_model_name_or_path": "from-adapter"}"#);
        std::fs::write(run.join("config.toml"), "base_model = \"from-run\"\n").unwrap();
        let sft = dir.path().join("sft");
        adapter(&sft, r#"{"r": 32}"#);
        let model = run.display().to_string();
        let t = Target::resolve(&model, None, true, Some(&sft)).unwrap();
        assert_eq!(t.base_model, "from-run");
        assert_eq!(t.adapter, Some(run.join("final").canonicalize().unwrap()));
        assert_eq!((t.baseline, t.lora_rank), (Some(sft.canonicalize().unwrap()), Some(32)));
        assert_eq!(Target::resolve(&model, Some("flag"), false, None).unwrap().base_model, "flag");
        let lone = dir.path().join("lone");
        adapter(&lone, r#"{"r": 4, "base_model_name_or_path": "from-adapter"}"#);
        assert_eq!(Target::resolve(&lone.display().to_string(), None, false, None).unwrap().base_model, "from-adapter");
        let err = Target::resolve(&model, None, false, Some(&dir.path().join("none"))).unwrap_err();
        assert!(matches!(err, EvalError::NoBaseline(_)), "{err}");
    }
}
