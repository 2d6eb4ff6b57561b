//! The run report: one self-contained HTML file (no network: Chart.js and the data are inside it)
//! with the run summary, training curves, the base-against-trained table and a trajectory viewer.
//!
//! [`ReportData`] is everything the page shows, as plain data (snapshot-tested); `render` puts it
//! into `report.html.j2` with minijinja.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;
use ta_types::trajectory::read_trajectories;
use ta_types::{Message, Role, Trajectory};

use crate::rundir::{Kind, RunDir, RunDirError};
use ta_metrics::{Comparison, Metrics, is_success, outcome_name};

/// Chart.js, vendored from npm (see `assets/LICENSE-chart.js.md`).
const CHART_JS: &str = include_str!("../assets/chart.umd.min.js");
const TEMPLATE: &str = include_str!("report.html.j2");

/// At most this many trajectories go into one report; training steps are thinned evenly (first
/// and last kept) beyond it, and the report says so.
pub const MAX_TRAJECTORIES: usize = 1500;
/// Message texts longer than this are cut in the viewer.
const MAX_MESSAGE_CHARS: usize = 8000;

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    RunDir(#[from] RunDirError),
    #[error("cannot write {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
    #[error("report template: {0}")]
    Template(#[from] minijinja::Error),
}

/// Everything the report shows.
#[derive(Debug, Clone, Serialize)]
pub struct ReportData {
    pub title: String,
    pub kind: Kind,
    pub generated_by: String,
    pub summary: Vec<Row>,
    pub settings: Vec<Row>,
    pub charts: Vec<Chart>,
    pub eval: Option<EvalSection>,
    /// The system prompt (the same in every trajectory, so shown once).
    pub system_prompt: Option<String>,
    pub trajectories: Vec<TrajectoryView>,
    /// What was left out or could not be shown.
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Row {
    pub label: String,
    pub value: String,
}

fn row(label: &str, value: impl Into<String>) -> Row {
    Row { label: label.into(), value: value.into() }
}

/// One chart: series of (step, value) points.
#[derive(Debug, Clone, Serialize)]
pub struct Chart {
    pub id: String,
    pub title: String,
    pub y_label: String,
    /// Stacked bars (the step-time breakdown) instead of lines.
    pub stacked: bool,
    /// Fixed y range (shares: 0 to 1); `None` fits the data.
    pub y_range: Option<[f64; 2]>,
    pub series: Vec<Series>,
    /// Why the chart is empty, when it is.
    pub empty_note: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Series {
    pub label: String,
    pub points: Vec<[f64; 2]>,
}

/// Base against trained.
#[derive(Debug, Clone, Serialize)]
pub struct EvalSection {
    /// Where the numbers come from, in words.
    pub source: String,
    pub models: Vec<EvalColumn>,
    /// The labels of the two models the per-scenario table compares (start, then trained).
    pub compared: Option<[String; 2]>,
    pub comparison: Option<Comparison>,
}

#[derive(Debug, Clone, Serialize)]
pub struct EvalColumn {
    pub label: String,
    pub metrics: Metrics,
}

/// One trajectory as the viewer shows it (no token ids: they are large and unreadable).
#[derive(Debug, Clone, Serialize)]
pub struct TrajectoryView {
    /// `train`, `validation` or `eval`.
    pub source: String,
    pub step: u64,
    /// Trajectories with the same key are shown side by side: a training group, or one validation
    /// or evaluation scenario across models.
    pub group: String,
    pub index: u32,
    pub scenario_id: String,
    pub task: String,
    pub model: String,
    pub outcome: &'static str,
    pub success: bool,
    pub reward: Option<f64>,
    pub reward_parts: ta_types::trajectory::RewardParts,
    pub judge_explanation: Option<String>,
    pub final_answer: Option<String>,
    pub error: Option<String>,
    pub num_turns: u32,
    pub tool_calls: u32,
    pub tool_errors: u32,
    pub tokens: u64,
    pub seconds: f64,
    pub messages: Vec<Message>,
}

impl TrajectoryView {
    fn of(t: &Trajectory, source: &str, group: String) -> TrajectoryView {
        let task = t.messages.iter().find(|m| m.role == Role::User).and_then(|m| m.content.clone()).unwrap_or_default();
        let messages = t
            .messages
            .iter()
            .filter(|m| m.role != Role::System)
            .map(|m| {
                let mut m = m.clone();
                if let Some(c) = &mut m.content {
                    truncate(c, MAX_MESSAGE_CHARS);
                }
                m
            })
            .collect();
        TrajectoryView {
            source: source.into(),
            step: t.group.step,
            group,
            index: t.group.index,
            scenario_id: t.scenario_id.clone(),
            task,
            model: t.model.clone(),
            outcome: outcome_name(t.outcome),
            success: is_success(t),
            reward: t.reward,
            reward_parts: t.reward_parts.clone(),
            judge_explanation: t.judge_explanation.clone(),
            final_answer: t.final_answer.clone(),
            error: t.error.clone(),
            num_turns: t.num_turns,
            tool_calls: t.tool_calls,
            tool_errors: t.tool_errors,
            tokens: t.prompt_tokens() + t.completion_tokens(),
            seconds: t.timings.total_ms as f64 / 1000.0,
            messages,
        }
    }
}

fn truncate(s: &mut String, max: usize) {
    if let Some((cut, _)) = s.char_indices().nth(max) {
        let dropped = s[cut..].chars().count();
        s.truncate(cut);
        s.push_str(&format!("\n[… {dropped} more characters not shown in the report]"));
    }
}

fn fmt_duration(s: f64) -> String {
    let s = s.round() as u64;
    format!("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)
}

/// "GRPO rollout 0:03:02 (16 times), validation at step 0 0:01:10, ...": the phases, longest
/// first.
fn phase_text(phases: &[ta_types::phases::PhaseTotal]) -> String {
    let mut sorted: Vec<&ta_types::phases::PhaseTotal> = phases.iter().collect();
    sorted.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
    let one = |p: &&ta_types::phases::PhaseTotal| format!("{} {}{}", p.phase, fmt_duration(p.seconds), p.times());
    sorted.iter().map(one).collect::<Vec<_>>().join(", ")
}

/// Flattens nested JSON objects into `a.b.c = value` rows.
fn flatten(prefix: &str, v: &Value, out: &mut Vec<Row>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                flatten(&key, v, out);
            }
        }
        Value::String(s) => out.push(row(prefix, s.clone())),
        other => out.push(row(prefix, other.to_string())),
    }
}

/// The value at `path` (`["trainer", "loss"]`) of a metrics row, when it is a number.
fn at(row: &Value, path: &[&str]) -> Option<f64> {
    path.iter().try_fold(row, |v, k| v.get(k))?.as_f64()
}

fn series(rows: &[&Value], label: &str, path: &[&str]) -> Option<Series> {
    let points: Vec<[f64; 2]> = rows.iter().filter_map(|r| Some([r["step"].as_f64()?, at(r, path)?])).collect();
    (!points.is_empty()).then(|| Series { label: label.into(), points })
}

fn training_charts(run: &RunDir) -> Vec<Chart> {
    let steps = run.step_rows();
    let val = run.validation_rows();
    // Why trainer charts can be empty.
    let trained_any = steps.iter().any(|r| r["trainer"].get("loss").is_some());
    let untrained = (!steps.is_empty() && !trained_any).then(|| "no trainer step ran yet: every group had equal rewards, so there was nothing to learn".to_string());
    let line = |id: &str, title: &str, y: &str, series: Vec<Option<Series>>| {
        let series: Vec<Series> = series.into_iter().flatten().collect();
        let empty_note = series.is_empty().then(|| match id {
            "kl" if trained_any => "KL is computed only when loss.beta > 0 (see config)".to_string(),
            _ if !["reward", "completion", "groups", "flat_share"].contains(&id) => untrained.clone().unwrap_or_else(|| "not recorded in this run".into()),
            _ => "not recorded in this run".into(),
        });
        let y_range = (id == "completion" || id == "flat_share").then_some([0.0, 1.0]);
        Chart { id: id.into(), title: title.into(), y_label: y.into(), stacked: false, y_range, series, empty_note }
    };
    let mut charts = vec![
        line(
            "reward",
            "Reward",
            "mean reward",
            vec![
                series(&steps, "train reward", &["reward"]),
                series(&steps, "train ground truth", &["ground_truth"]),
                series(&val, "validation reward", &["val_reward"]),
            ],
        ),
        line(
            "completion",
            "Task completion",
            "share",
            vec![
                series(&steps, "train completed", &["completion_rate"]),
                series(&val, "validation completed", &["val_completion_rate"]),
                series(&val, "validation ground truth", &["val_ground_truth"]),
            ],
        ),
        line("loss", "Loss", "loss", vec![series(&steps, "loss", &["trainer", "loss"]), series(&steps, "policy loss", &["trainer", "policy_loss"])]),
        line("kl", "KL to the base model", "KL (k3, token mean)", vec![series(&steps, "KL", &["trainer", "kl"])]),
        line("grad_norm", "Gradient norm", "before clipping", vec![series(&steps, "grad norm", &["trainer", "grad_norm"])]),
        line("lr", "Learning rate", "lr", vec![series(&steps, "lr", &["trainer", "lr"])]),
        line("tokens_per_s", "Trainer throughput", "tokens / s", vec![series(&steps, "tokens/s", &["trainer", "tokens_per_s"])]),
        line(
            "entropy",
            "Entropy and clipping",
            "token mean",
            vec![
                series(&steps, "entropy", &["trainer", "entropy"]),
                series(&steps, "clipped (low)", &["trainer", "clip_fraction_low"]),
                series(&steps, "clipped (high)", &["trainer", "clip_fraction_high"]),
            ],
        ),
        line(
            "groups",
            "Groups without reward variance",
            "groups",
            vec![
                series(&steps, "flat groups", &["groups_zero_variance"]),
                series(&steps, "tie-break groups", &["groups_tie_break"]),
                series(&steps, "groups", &["groups"]),
                series(&steps, "groups trained", &["groups_kept"]),
            ],
        ),
        line(
            "flat_share",
            "Flat groups before and after dynamic sampling",
            "share",
            vec![series(&steps, "first round (no dynamic sampling)", &["flat_share_before"]), series(&steps, "step slots left flat", &["flat_share_after"])],
        ),
    ];
    // Step time, stacked: the phases, and what is left of the step (validation, bookkeeping). A
    // step played ahead (asynchronous GRPO: `policy_lag` > 0) was rolled out and scored during
    // the step before, so its rollout and reward times are not part of its own wall time; what
    // its step waited for beyond the update (the next step's rollout) is in `other`.
    let phases = [("rollout", "rollout_s"), ("reward", "reward_s"), ("train", "train_s"), ("reload", "reload_s")];
    let ahead = |r: &Value| r["policy_lag"].as_u64().is_some_and(|lag| lag > 0);
    let played_before = |key: &str| matches!(key, "rollout_s" | "reward_s");
    let in_step = |r: &Value, key: &str| if ahead(r) && played_before(key) { None } else { at(r, &["time", key]) };
    let own_rollouts: Vec<&Value> = steps.iter().copied().filter(|r| !ahead(r)).collect();
    let mut stacked: Vec<Series> =
        phases.iter().filter_map(|(label, key)| series(if played_before(key) { &own_rollouts } else { &steps }, label, &["time", key])).collect();
    let other: Vec<[f64; 2]> = steps
        .iter()
        .filter_map(|r| {
            let total = at(r, &["time", "step_s"])?;
            let parts: f64 = phases.iter().filter_map(|(_, k)| in_step(r, k)).sum();
            Some([r["step"].as_f64()?, (total - parts).max(0.0)])
        })
        .collect();
    if other.iter().any(|p| p[1] > 0.5) {
        let label =
            if steps.iter().any(|r| ahead(r)) { "other (validation, checkpoint, the next step's rollout beyond the update)" } else { "other (validation, checkpoint)" };
        stacked.push(Series { label: label.into(), points: other });
    }
    let empty_note = stacked.is_empty().then(|| "not recorded in this run".to_string());
    charts.push(Chart { id: "step_time".into(), title: "Step time".into(), y_label: "seconds".into(), stacked: true, y_range: None, series: stacked, empty_note });
    // The whole run's wall time, one stacked bar of its phases (`phases.jsonl`).
    if !run.phases.is_empty() {
        let series = run.phases.iter().map(|p| Series { label: p.phase.clone(), points: vec![[1.0, p.seconds]] }).collect();
        charts.push(Chart {
            id: "phases".into(),
            title: "Where the run's time went".into(),
            y_label: "seconds".into(),
            stacked: true,
            y_range: None,
            series,
            empty_note: None,
        });
    }
    // Sampled validation (`rollout.eval_rollouts`), with its 95% intervals as their own lines.
    if val.iter().any(|r| r.get("val_pass1").is_some()) {
        let k = val.iter().find_map(|r| r["val_sampled_k"].as_u64()).unwrap_or(0);
        let lines = [
            ("sampled pass@1".to_string(), "val_pass1"),
            ("  95% low".into(), "val_pass1_low"),
            ("  95% high".into(), "val_pass1_high"),
            (format!("sampled pass@{k}"), "val_pass_k"),
            ("  95% low".into(), "val_pass_k_low"),
            ("  95% high".into(), "val_pass_k_high"),
            ("greedy success".into(), "val_success"),
        ];
        let series = lines.iter().filter_map(|(label, key)| series(&val, label, &[*key])).collect();
        let title = format!("Validation: pass@1 and pass@{k} of {k} samples per task, greedy success");
        charts.push(Chart {
            id: "validation_sampled".into(),
            title,
            y_label: "share of tasks".into(),
            stacked: false,
            y_range: Some([0.0, 1.0]),
            series,
            empty_note: None,
        });
    }
    charts
}

/// An SFT run's curves: its losses (training, and held out when it evaluated), learning rate,
/// gradient norm and throughput, by step.
fn sft_charts(run: &RunDir) -> Vec<Chart> {
    let rows: Vec<&Value> = run.metrics.iter().collect();
    let chart = |id: &str, title: &str, y: &str, series: Vec<Option<Series>>| {
        let series: Vec<Series> = series.into_iter().flatten().collect();
        let empty_note = series.is_empty().then(|| "not recorded in this run".to_string());
        Chart { id: id.into(), title: title.into(), y_label: y.into(), stacked: false, y_range: None, series, empty_note }
    };
    vec![
        chart("loss", "Loss", "token-mean NLL", vec![series(&rows, "training loss", &["train_loss"]), series(&rows, "held-out loss", &["eval_loss"])]),
        chart("lr", "Learning rate", "lr", vec![series(&rows, "lr", &["lr"])]),
        chart("grad_norm", "Gradient norm", "before clipping", vec![series(&rows, "grad norm", &["grad_norm"])]),
        chart("tokens_per_s", "Trainer throughput", "tokens / s", vec![series(&rows, "tokens/s", &["tokens_per_s"])]),
    ]
}

/// pass@k curves of an evaluation (k on the x axis), when it sampled more than once.
fn pass_at_k_chart(models: &[EvalColumn]) -> Option<Chart> {
    let series: Vec<Series> = models
        .iter()
        .filter(|m| !m.metrics.pass_at_k.is_empty())
        .map(|m| Series { label: m.label.clone(), points: m.metrics.pass_at_k.iter().map(|(k, v)| [f64::from(*k), *v]).collect() })
        .collect();
    (!series.is_empty()).then(|| Chart {
        id: "pass_at_k".into(),
        title: "pass@k".into(),
        y_label: "pass@k (x: k)".into(),
        stacked: false,
        y_range: Some([0.0, 1.0]),
        series,
        empty_note: None,
    })
}

fn read(path: &Path) -> Result<Vec<Trajectory>, RunDirError> {
    read_trajectories(path).map_err(|source| RunDirError::Io { path: path.to_path_buf(), source })
}

/// Gathers the report's data from a directory.
pub fn collect(dir: &Path) -> Result<ReportData, ReportError> {
    let run = RunDir::open(dir)?;
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| dir.display().to_string());
    let mut notes = Vec::new();
    let evaluated = run.evaluated()?;
    let models: Vec<EvalColumn> = evaluated.iter().map(|(label, ts)| EvalColumn { label: label.clone(), metrics: Metrics::of(ts) }).collect();
    let (compared, comparison) = match RunDir::comparison(&evaluated) {
        Some((a, b, c)) => (Some([a.to_string(), b.to_string()]), Some(c)),
        None => (None, None),
    };

    let mut summary = Vec::new();
    let mut settings = Vec::new();
    let mut charts = Vec::new();
    let mut views: Vec<TrajectoryView> = Vec::new();
    let mut system_prompt = None;
    let mut take_system = |ts: &[Trajectory]| {
        if system_prompt.is_none() {
            system_prompt = ts.iter().flat_map(|t| &t.messages).find(|m| m.role == Role::System).and_then(|m| m.content.clone());
        }
    };
    let info = |key: &str| run.run_info.as_ref().and_then(|i| i[key].as_str()).map(str::to_string);

    let eval_source;
    match run.kind {
        Kind::Train => {
            let steps = run.step_rows();
            let cfg = run.config.clone().unwrap_or(Value::Null);
            summary.push(row("Base model", run.base_model().unwrap_or_else(|| "-".into())));
            if let Some(init) = cfg["init_adapter"].as_str() {
                summary.push(row("Started from adapter", init));
            }
            summary.push(row("MCP server", info("server").unwrap_or_else(|| "-".into())));
            summary.push(row("Data set", info("dataset").unwrap_or_else(|| "-".into())));
            let last = steps.last().and_then(|r| r["step"].as_u64()).unwrap_or(0);
            let planned = cfg["rollout"]["max_steps"].as_u64().filter(|&m| m > 0);
            summary.push(row("Steps", planned.map_or(last.to_string(), |m| format!("{last} of {m}"))));
            summary.push(row("Rollouts per step", format!("{} scenarios x {} rollouts", cfg["rollout"]["scenarios_per_step"], cfg["rollout"]["rollouts_per_scenario"])));
            summary.push(row("Training time", fmt_duration(run.training_seconds())));
            if !run.phases.is_empty() {
                let total: f64 = run.phases.iter().map(|p| p.seconds).sum();
                summary.push(row("Wall time by phase", format!("{} in all: {}", fmt_duration(total), phase_text(&run.phases))));
            }
            summary.push(row("GPU hours", run.gpu_hours().map_or("none (CPU run)".into(), |h| format!("{h:.2} ({} GPU)", cfg["trainer"]["num_gpus"]))));
            summary.push(row("Judge cost", run.judge_cost_usd().map_or("no paid judge".into(), |c| format!("${c:.2}"))));
            let first_last = |path: &[&str]| {
                let v: Vec<f64> = steps.iter().filter_map(|r| at(r, path)).collect();
                match (v.first(), v.last()) {
                    (Some(a), Some(b)) => format!("{a:.3} → {b:.3}"),
                    _ => "-".into(),
                }
            };
            summary.push(row("Train reward (first → last step)", first_last(&["reward"])));
            summary.push(row("Train completion (first → last step)", first_last(&["completion_rate"])));
            // final.json says which step's adapter final/ is; runs from before it have only final/.
            let final_adapter = match (dir.join("final/adapter_config.json").exists(), ta_types::kept::Kept::read(dir)) {
                (false, _) => "not written yet".to_string(),
                (true, Some(k)) => format!("final/: {}", k.summary()),
                (true, None) => "final/".to_string(),
            };
            summary.push(row("Final adapter", final_adapter));
            flatten("", &cfg, &mut settings);
            charts = training_charts(&run);
            eval_source = "Validation scenarios, one rollout each at the evaluation temperature: `base` is the base model, step 0 the model training started from (the base, or `init`: --init-adapter), the last validation the trained adapter.".to_string();

            for path in run.baseline_file().into_iter().chain(run.validation_files().into_iter().map(|(_, p)| p)) {
                let ts = read(&path)?;
                take_system(&ts);
                views.extend(ts.iter().map(|t| TrajectoryView::of(t, "validation", format!("validation/{}", t.scenario_id))));
            }
            let files = run.training_files();
            let sizes: Vec<usize> = files.iter().map(|(_, p)| ta_types::trajectory::count_trajectories(p)).collect();
            let budget = MAX_TRAJECTORIES.saturating_sub(views.len());
            let keep = thin(&sizes, budget);
            if keep.len() < files.len() {
                let shown: Vec<String> = keep.iter().map(|&i| files[i].0.to_string()).collect();
                notes.push(format!(
                    "The viewer holds the training trajectories of {} of {} steps (steps {}) to keep this file small; every trajectory is in trajectories/.",
                    keep.len(),
                    files.len(),
                    shown.join(", ")
                ));
            }
            for i in keep {
                let ts = read(&files[i].1)?;
                take_system(&ts);
                views.extend(ts.iter().map(|t| TrajectoryView::of(t, "train", format!("step-{}/{}", t.group.step, t.scenario_id))));
            }
        }
        Kind::Sft => {
            let steps = run.sft_steps();
            let cfg = run.config.clone().unwrap_or(Value::Null);
            summary.push(row("Base model", run.base_model().unwrap_or_else(|| "-".into())));
            summary.push(row("Data set", cfg["dataset"].as_str().unwrap_or("-").to_string()));
            summary.push(row("Steps", format!("{} ({} epoch(s) planned)", steps.len(), cfg["epochs"])));
            summary.push(row("Training time", fmt_duration(run.training_seconds())));
            let loss = |(step, loss): (u64, f64)| format!("{loss:.4} (step {step})");
            summary.push(row("Held-out loss", run.sft_eval_loss().map_or("not evaluated".into(), |(a, b)| format!("{} → {}", loss(a), loss(b)))));
            let train_loss: Vec<f64> = steps.iter().filter_map(|r| r["train_loss"].as_f64()).collect();
            if let (Some(a), Some(b)) = (train_loss.first(), train_loss.last()) {
                summary.push(row("Training loss (first → last step)", format!("{a:.4} → {b:.4}")));
            }
            let done = dir.join("final/adapter_config.json").exists();
            summary.push(row("Final adapter", if done { "final/" } else { "not written yet" }));
            flatten("", &cfg, &mut settings);
            charts = sft_charts(&run);
            eval_source = String::new();
        }
        Kind::Eval => {
            let eval = run.eval.as_ref().expect("eval");
            for m in &eval.models {
                summary.push(row(&format!("Model `{}`", m.label), m.source.clone()));
            }
            summary.push(row("MCP server", eval.server.clone()));
            summary.push(row("Data set", format!("{} ({})", eval.dataset, eval.split.clone().unwrap_or_else(|| "all".into()))));
            summary.push(row("Rollouts per scenario", eval.rollouts_per_scenario.to_string()));
            summary.push(row("Wall time", fmt_duration(eval.wall_s)));
            flatten("", &eval.settings, &mut settings);
            eval_source = format!("`train-agent eval` on {}: {} rollout(s) per scenario.", eval.dataset, eval.rollouts_per_scenario);
            for (_, ts) in &evaluated {
                take_system(ts);
                views.extend(ts.iter().map(|t| TrajectoryView::of(t, "eval", format!("eval/{}", t.scenario_id))));
            }
        }
        Kind::Rollout => {
            summary.push(row("Trajectories", evaluated.iter().map(|(_, t)| t.len()).sum::<usize>().to_string()));
            eval_source = "All trajectories of the rollout.".to_string();
            for (_, ts) in &evaluated {
                take_system(ts);
                views.extend(ts.iter().map(|t| TrajectoryView::of(t, "rollout", format!("rollout/{}", t.scenario_id))));
            }
        }
    }
    // Alphabetical: the order of a parsed config.toml depends on the toml crate's features.
    settings.sort_by(|a, b| a.label.cmp(&b.label));
    if views.len() > MAX_TRAJECTORIES {
        notes.push(format!("The viewer holds the first {MAX_TRAJECTORIES} of {} trajectories.", views.len()));
        views.truncate(MAX_TRAJECTORIES);
    }
    if let Some(c) = pass_at_k_chart(&models) {
        charts.push(c);
    }
    if run.kind == Kind::Train && run.step_rows().is_empty() {
        notes.push("No training step has finished yet: the curves fill in as steps complete (re-run `train-agent report`).".into());
    }
    let eval = (!models.is_empty()).then_some(EvalSection { source: eval_source, models, compared, comparison });
    let kind_word = match run.kind {
        Kind::Train => "training run",
        Kind::Sft => "SFT run",
        Kind::Eval => "evaluation",
        Kind::Rollout => "rollout",
    };
    Ok(ReportData {
        title: format!("{name}: {kind_word}"),
        kind: run.kind,
        generated_by: format!("train-agent {}", env!("CARGO_PKG_VERSION")),
        summary,
        settings,
        charts,
        eval,
        system_prompt,
        trajectories: views,
        notes,
    })
}

/// Indices of files to keep so their sizes add up to at most `budget`: all when they fit, else
/// evenly spaced ones, always the first and the last.
fn thin(sizes: &[usize], budget: usize) -> Vec<usize> {
    let total: usize = sizes.iter().sum();
    if total <= budget || sizes.is_empty() {
        return (0..sizes.len()).collect();
    }
    let mean = (total / sizes.len()).max(1);
    let n = (budget / mean).clamp(2.min(sizes.len()), sizes.len());
    let mut keep: Vec<usize> = (0..n).map(|i| if n == 1 { 0 } else { i * (sizes.len() - 1) / (n - 1) }).collect();
    keep.dedup();
    keep
}

/// JSON for a `<script type="application/json">` block: `<` escaped so no text can close the tag.
pub fn data_json(data: &ReportData) -> String {
    serde_json::to_string(data).expect("report data serialises").replace('<', "\\u003c")
}

/// The HTML page.
pub fn render(data: &ReportData) -> Result<String, ReportError> {
    let mut env = minijinja::Environment::new();
    env.add_template("report.html", TEMPLATE)?;
    let columns: Vec<(&str, &Metrics)> = data.eval.iter().flat_map(|e| e.models.iter().map(|m| (m.label.as_str(), &m.metrics))).collect();
    let html = env.get_template("report.html")?.render(minijinja::context! {
        data => minijinja::Value::from(minijinja::value::Serde(data)),
        data_json => minijinja::Value::from_safe_string(data_json(data)),
        chart_js => minijinja::Value::from_safe_string(CHART_JS.to_string()),
        eval_rows => ta_metrics::metric_rows(&columns),
        paired_line => data.eval.as_ref().and_then(|e| Some(e.comparison.as_ref()?.paired.as_ref()?.line(&e.compared.as_ref()?[0], &e.compared.as_ref()?[1]))),
    })?;
    Ok(html)
}

/// Collects, renders and writes `dir/report.html` (atomically); returns its path.
pub fn write_report(dir: &Path) -> Result<PathBuf, ReportError> {
    let html = render(&collect(dir)?)?;
    let path = dir.join("report.html");
    ta_types::atomic::write_atomic(&path, |w| w.write_all(html.as_bytes())).map_err(|source| ReportError::Write { path: path.clone(), source })?;
    Ok(path)
}
