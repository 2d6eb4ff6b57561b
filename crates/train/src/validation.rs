//! Validation during a run: one greedy episode of each validation scenario (and, with
//! `rollout.eval_rollouts` > 0, k sampled ones for pass@1 and pass@k), scored, written under
//! `eval/`, and measured as the `val_*` metrics that `metrics.jsonl` and the trainer's loggers get.

use std::path::Path;

use indicatif::{MultiProgress, ProgressBar};
use ta_python::Trainer;
use ta_reward::Rewarder;
use ta_rollout::ToolHost;
use ta_rollout::runner::{Summary, group_jobs, run_jobs};
use ta_trainer::ValidationFile;
use ta_types::Trajectory;
use ta_types::trajectory::TrajectoryWriter;

use crate::context::Context;
use crate::error::{RunError, io};
use crate::progress::say;
use crate::row::{SampledMetrics, ValidationMetrics, json_of, mean};

/// Validates `model` at `step`: greedy into `eval/step-N.jsonl`, sampled into
/// `eval/step-N.sampled.jsonl`.
pub(crate) async fn validate<T: ToolHost>(
    ctx: &Context<'_, T>,
    rewarder: &Rewarder,
    model: &str,
    step: u64,
    multi: &MultiProgress,
) -> Result<ValidationMetrics, RunError> {
    let dir = ctx.out.join("eval");
    let sampled = dir.join(format!("step-{step:06}.sampled.jsonl"));
    validate_into(ctx, rewarder, model, step, &format!("at step {step}"), &dir.join(format!("step-{step:06}.jsonl")), Some(&sampled), multi).await
}

/// Validates `model` into `path` (greedy, at `eval_temperature`) and, when `sampled` names a file
/// and `eval_rollouts` > 0, k episodes per scenario at the rollout temperature into it; `what`
/// names the model in the printed line.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn validate_into<T: ToolHost>(
    ctx: &Context<'_, T>,
    rewarder: &Rewarder,
    model: &str,
    step: u64,
    what: &str,
    path: &Path,
    sampled: Option<&Path>,
    multi: &MultiProgress,
) -> Result<ValidationMetrics, RunError> {
    let greedy = play(ctx, rewarder, model, step, 1, ctx.cfg.rollout.eval_temperature, path, multi).await?;
    let s = Summary::of(&greedy);
    let successes = greedy.iter().filter(|t| ta_metrics::is_success(t)).count();
    let wilson = ta_metrics::wilson_interval(successes, greedy.len());
    let mut metrics = ValidationMetrics {
        val_completion_rate: s.completion_rate,
        val_reward: s.mean_reward,
        val_ground_truth: mean(greedy.iter().filter_map(|t| t.reward_parts.ground_truth)),
        val_judge: mean(greedy.iter().filter_map(|t| t.reward_parts.judge)),
        val_success: (!greedy.is_empty()).then(|| successes as f64 / greedy.len() as f64),
        val_success_low: wilson.map(|w| w.0),
        val_success_high: wilson.map(|w| w.1),
        val_mean_turns: s.mean_turns,
        val_trajectories: s.trajectories,
        val_model: model.to_string(),
        sampled: None,
    };
    let k = ctx.cfg.rollout.eval_rollouts;
    if let Some(sampled) = sampled.filter(|_| k > 0) {
        let ts = play(ctx, rewarder, model, step, k, ctx.cfg.rollout.temperature, sampled, multi).await?;
        metrics.sampled = ta_metrics::sampled_pass(&ts).map(|p| SampledMetrics {
            val_sampled_k: p.k,
            val_pass1: p.pass1.mean,
            val_pass1_low: p.pass1.ci95[0],
            val_pass1_high: p.pass1.ci95[1],
            val_pass_k: p.pass_at_k.mean,
            val_pass_k_low: p.pass_at_k.ci95[0],
            val_pass_k_high: p.pass_at_k.ci95[1],
        });
    }
    say(multi, metrics.line(what));
    Ok(metrics)
}

/// Plays `rollouts` episodes of each validation scenario with `model` into `path` (replacing it)
/// and scores them.
#[allow(clippy::too_many_arguments)]
async fn play<T: ToolHost>(
    ctx: &Context<'_, T>,
    rewarder: &Rewarder,
    model: &str,
    step: u64,
    rollouts: u32,
    temperature: f32,
    path: &Path,
    multi: &MultiProgress,
) -> Result<Vec<Trajectory>, RunError> {
    let _ = std::fs::remove_file(path);
    let jobs = group_jobs(&ctx.validation, rollouts, step);
    let mut writer = TrajectoryWriter::append(path).map_err(io(path))?;
    let bar = multi.add(ProgressBar::new(jobs.len() as u64));
    bar.set_prefix(if rollouts > 1 { "validate (sampled)" } else { "validate" });
    let cfg = ctx.agent_config(temperature, ctx.cfg.seed);
    let mut result = run_jobs(ctx.chat, model, ctx.tools, ctx.system_prompt, jobs, &cfg, ctx.cfg.rollout.concurrency, &mut writer, &bar, std::future::pending())
        .await
        .map_err(io(path))?;
    bar.finish_and_clear();
    multi.remove(&bar);
    rewarder.score(&ctx.validation, &mut result.trajectories).await?;
    result.trajectories.sort_by(|a, b| (&a.scenario_id, a.group.index).cmp(&(&b.scenario_id, b.group.index)));
    ta_types::trajectory::write_trajectories(path, &result.trajectories).map_err(io(path))?;
    Ok(result.trajectories)
}

/// Hands the numbers of `row` (the `val_*` metrics measured at `step`, and the judge's when the
/// row has them) to the trainer, which logs them to TensorBoard and W&B beside the rollout and
/// trainer metrics (`metrics.jsonl` gets them from the caller).
pub(crate) fn send(trainer: &Trainer, step: u64, row: &impl serde::Serialize) -> Result<(), RunError> {
    let inbox = trainer.inbox();
    ValidationFile::new(step, &json_of(row)).write(&inbox).map_err(io(&inbox))?;
    Ok(())
}

/// Whether `metrics.jsonl` already holds the validation of `step` (a resumed run skips it).
pub(crate) fn done(metrics: &Path, step: u64) -> bool {
    ta_trainer::metrics::rows(metrics).iter().any(|v| v["step"] == step && v.get("val_completion_rate").is_some())
}
