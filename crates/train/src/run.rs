//! The GRPO loop. Per step: sample `rollouts_per_scenario` episodes of each scenario the
//! curriculum draws, with the current adapter → rewards (ground truth, rules, the LLM judge per
//! group, custom) → with dynamic sampling, more rounds replacing the groups without reward
//! variance → group advantages (flat groups skipped and counted) → token-level batch → one trainer step → the
//! engine hot-loads the new adapter. Checkpoints every step; a resumed run keeps every finished
//! step and trajectory, and the judge's cache (`judge-cache.jsonl`) means no group is paid twice.
//! With a judge budget, the run stops cleanly at the checkpoint of the step that reached it.

use std::collections::HashSet;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Instant;

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use serde_json::{Value, json};
use ta_chat::ChatClient;
use ta_grpo::{GroupStats, group_advantages, samples_from_trajectory};
use ta_python::{EngineClient, PythonEnv, Trainer};
use ta_reward::{JudgeStats, RewardMix, Rewarder};
use ta_rollout::job::Job;
use ta_rollout::runner::{Summary, group_jobs, play_resumable, run_jobs};
use ta_rollout::{AgentConfig, ToolHost};
use ta_trainer::checkpoint::{checkpoint_dir, copy_dir, last_complete_step, write_state};
use ta_trainer::config::RunSpec;
use ta_trainer::{LossConfig, StepFile, StepReport, TrainerConfig, ValidationFile, metrics};
use ta_types::trajectory::TrajectoryWriter;
use ta_types::{Scenario, Trajectory};

use crate::config::{CurriculumMode, TrainConfig};
use crate::data::Curriculum;

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("run directory {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Trainer(#[from] ta_python::TrainerError),
    #[error(transparent)]
    Engine(#[from] ta_python::EngineError),
    #[error(transparent)]
    Samples(#[from] ta_grpo::samples::SampleError),
    #[error(transparent)]
    Reward(#[from] ta_reward::RewardError),
    #[error("{source}\nhint: every finished step and episode is kept; run the same command with --resume to continue from step {}", step - 1)]
    TrainerLost { step: u64, source: ta_python::TrainerError },
    #[error(
        "the engine stopped answering during step {step}; the episodes it finished are kept ({log})\nhint: run the same command with --resume to play the rest of step {step} and continue"
    )]
    EngineLost { step: u64, log: String },
    #[error("no training scenarios\nhint: give scenarios a \"split\": \"train\" field, or leave \"split\" out to have a share split off for validation")]
    NoTrainingData,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> RunError + '_ {
    move |source| RunError::Io { path: path.to_path_buf(), source }
}

/// Everything a run needs that is already running or loaded.
pub struct Context<'a, T: ToolHost> {
    pub cfg: &'a TrainConfig,
    pub out: &'a Path,
    pub tools: &'a T,
    pub system_prompt: &'a str,
    pub chat: &'a ChatClient,
    pub engine: &'a EngineClient,
    /// The name the engine serves the base model under.
    pub base_name: &'a str,
    pub python: &'a PythonEnv,
    pub train: Vec<Scenario>,
    pub validation: Vec<Scenario>,
    /// Environment for the trainer process (e.g. `CUDA_VISIBLE_DEVICES`).
    pub trainer_env: Vec<(String, String)>,
}

/// How the run ended.
#[derive(Debug, PartialEq)]
pub enum Finished {
    /// Every step ran; `final/` holds the adapter.
    Done { steps: u64 },
    /// Interrupted (Ctrl-C) after `completed_steps`; `--resume` continues.
    Interrupted { completed_steps: u64 },
    /// The judge's cost reached `[reward.judge] budget_usd` during step `completed_steps`, whose
    /// checkpoint is complete; `--resume` with a higher budget continues.
    BudgetReached { completed_steps: u64, cost_usd: f64 },
}

/// The rewards of a run: the run's config, with a `local/` judge that names no URL pointed at
/// the run's own engine, and the judge's cache in the run directory.
fn rewarder<T: ToolHost>(ctx: &Context<'_, T>) -> Result<Rewarder, RunError> {
    let mut reward = ctx.cfg.reward.clone();
    if reward.judge.model.starts_with("local/") && reward.judge.base_url.is_none() {
        reward.judge.base_url = Some(ctx.engine.base_url());
    }
    let rewarder = Rewarder::new(&reward, Some(&ctx.out.join("judge-cache.jsonl")))?;
    if let Some(judge) = rewarder.judge() {
        judge.add_prior_cost(prior_judge_cost(&ctx.out.join("metrics.jsonl")));
    }
    Ok(rewarder)
}

/// The judge's total cost recorded before a resume (the last `judge_cost_total_usd`).
fn prior_judge_cost(metrics: &Path) -> f64 {
    std::fs::read_to_string(metrics)
        .unwrap_or_default()
        .lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find_map(|v| v["judge_cost_total_usd"].as_f64())
        .unwrap_or(0.0)
}

/// Judge metrics since `last` (then moved to now), for one metrics row.
fn judge_metrics(rewarder: &Rewarder, last: &mut JudgeStats) -> Option<Value> {
    let judge = rewarder.judge()?;
    let now = judge.stats();
    let d = now.since(last);
    *last = now;
    Some(json!({
        "judge_groups": d.groups,
        "judge_groups_skipped": d.skipped,
        "judge_cache_hits": d.cache_hits,
        "judge_calls": d.calls,
        "judge_input_tokens": d.usage.input_tokens,
        "judge_output_tokens": d.usage.output_tokens,
        "judge_cost_usd": d.cost_usd,
        "judge_cost_total_usd": now.cost_usd,
    }))
}

/// A step's scored episodes, every dynamic-sampling round's included.
fn step_trajectories(out: &Path, step: u64) -> PathBuf {
    out.join("trajectories").join(format!("step-{step:06}.jsonl"))
}

fn adapter_name(step: u64) -> String {
    format!("step-{step:06}")
}

/// The trainer's config from the run config.
fn trainer_config(cfg: &TrainConfig, out: &Path, resume_step: u64, total_steps: u64) -> TrainerConfig {
    let run = RunSpec {
        model: cfg.base_model.clone(),
        output_dir: out.to_path_buf(),
        seed: cfg.seed,
        init_adapter: cfg.init_adapter.clone(),
        total_steps,
        // Only a checkpoint some step trained holds trainer state to resume.
        resume_from: Some(checkpoint_dir(out, resume_step)).filter(|c| resume_step > 0 && c.join("trainer_state.pt").exists()),
    };
    let max_len_norm = u64::from(cfg.rollout.max_tokens) * u64::from(cfg.rollout.max_turns);
    let loss = LossConfig::grpo(&cfg.loss, max_len_norm);
    TrainerConfig::new(run, &cfg.lora, &cfg.optim, loss, &cfg.trainer)
}

/// Runs (or resumes) training until every step is done or `shutdown` fires.
pub async fn train<T: ToolHost>(ctx: &Context<'_, T>, shutdown: impl Future<Output = ()>) -> Result<Finished, RunError> {
    let cfg = ctx.cfg;
    if ctx.train.is_empty() {
        return Err(RunError::NoTrainingData);
    }
    let mut curriculum = Curriculum::new(ctx.train.clone(), cfg.rollout.scenarios_per_step, cfg.rollout.epochs, cfg.seed, cfg.curriculum.clone());
    let mut total = curriculum.total_steps();
    if cfg.rollout.max_steps > 0 {
        total = total.min(cfg.rollout.max_steps);
    }
    let resume = last_complete_step(ctx.out);
    if cfg.curriculum.mode == CurriculumMode::Adaptive {
        // The pass-rate history, rebuilt from the finished steps' scored trajectories.
        for s in 1..=resume {
            let path = step_trajectories(ctx.out, s);
            curriculum.record(&ta_types::trajectory::read_trajectories(&path).map_err(io(&path))?);
        }
    }
    let multi = MultiProgress::new();
    let steps_bar = multi.add(ProgressBar::new(total));
    steps_bar.set_style(ProgressStyle::with_template("{prefix:>10} [{bar:30}] {pos}/{len} steps ({elapsed}, eta {eta})").expect("template").progress_chars("=> "));
    steps_bar.set_prefix("train");
    steps_bar.set_position(resume);

    let mut current_model = ctx.base_name.to_string();
    if resume > 0 {
        // A checkpoint without an adapter: no step had trained yet and there was no initial one.
        let adapter = checkpoint_dir(ctx.out, resume).join("adapter");
        if adapter.exists() {
            ctx.engine.load_adapter(&adapter_name(resume), &adapter).await?;
            current_model = adapter_name(resume);
        }
        say(&multi, format!("resuming after step {resume}"));
    } else if let Some(init) = &cfg.init_adapter {
        ctx.engine.load_adapter("init", Path::new(init)).await?;
        current_model = "init".into();
    }
    let mut trainer = Trainer::start(ctx.python, ctx.out, &trainer_config(cfg, ctx.out, resume, total), resume, &ctx.trainer_env)?;
    let metrics_path = ctx.out.join("metrics.jsonl");
    // Rows of steps that did not finish (a kill between the row and the checkpoint) are dropped,
    // so every step has exactly one row however often the run was interrupted, and the judge's
    // prior cost is read from finished steps only.
    metrics::truncate(&metrics_path, resume).map_err(io(&metrics_path))?;
    let rewarder = rewarder(ctx)?;
    let mut reported = rewarder.judge().map(|j| j.stats()).unwrap_or_default();
    let budget_reached = |completed_steps| {
        let judge = rewarder.judge().filter(|j| j.budget_reached())?;
        Some(Finished::BudgetReached { completed_steps, cost_usd: judge.stats().cost_usd })
    };

    tokio::pin!(shutdown);
    let interrupted = |completed_steps| Ok(Finished::Interrupted { completed_steps });

    // Starting from an adapter (an SFT warm start), step 0 validates the adapter; the base model's
    // baseline goes beside it so the report shows base -> adapter -> trained.
    let baseline = ctx.out.join(ta_types::trajectory::BASELINE_VALIDATION);
    let wants_baseline = resume == 0 && cfg.init_adapter.is_some() && cfg.rollout.validate_base && !ctx.validation.is_empty();
    if wants_baseline
        // a finished validation holds one trajectory per scenario
        && ta_types::trajectory::count_trajectories(&baseline) != ctx.validation.len()
        && select_or_stop(validate_into(ctx, &rewarder, ctx.base_name, 0, "of the base model", &baseline, None, &multi), &mut shutdown).await?.is_none()
    {
        return interrupted(0);
    }
    if resume == 0 && !ctx.validation.is_empty() && !has_validation(&metrics_path, 0) {
        let Some(mut row) = select_or_stop(validate(ctx, &rewarder, &current_model, 0, &multi), &mut shutdown).await? else { return interrupted(0) };
        if let Some(j) = judge_metrics(&rewarder, &mut reported) {
            merge(&mut row, j);
        }
        send_validation(&trainer, 0, &row)?;
        append_metrics(&metrics_path, &row)?;
    }
    if let Some(stop) = budget_reached(resume) {
        trainer.stop().await?;
        return Ok(stop);
    }

    for step in resume + 1..=total {
        let step_start = Instant::now();
        let traj_path = step_trajectories(ctx.out, step);
        let seen = curriculum.counts();

        // 1-2. Rollouts (reusing those an interrupted attempt of this step finished) and rewards,
        // in rounds when dynamic sampling replaces flat groups.
        let Some(played) = play_step(ctx, &rewarder, &curriculum, &current_model, step, &traj_path, &multi, &mut shutdown).await? else {
            return interrupted(step - 1);
        };
        let (rollout_s, reward_s) = (played.rollout_s, played.reward_s);
        let trajectories = played.trajectories;
        let (mut batch, groups, flat) = build_batch(&trajectories, step, cfg)?;

        let summary = Summary::of(&trajectories);
        let mut row = json!({
            "step": step,
            "epoch": ((step - 1) * cfg.rollout.scenarios_per_step as u64) / ctx.train.len() as u64,
            "reward": summary.mean_reward,
            "reward_std": std_dev(trajectories.iter().filter_map(|t| t.reward)),
            "completion_rate": summary.completion_rate,
            "ground_truth": mean(trajectories.iter().filter_map(|t| t.reward_parts.ground_truth)),
            "rules": mean(trajectories.iter().filter_map(|t| t.reward_parts.rules)),
            "judge": mean(trajectories.iter().filter_map(|t| t.reward_parts.judge)),
            "custom": custom_means(&trajectories),
            "mean_turns": summary.mean_turns,
            "mean_tool_calls": summary.mean_tool_calls,
            "tool_errors": summary.tool_errors,
            "groups": groups,
            "groups_zero_variance": flat,
            "groups_kept": played.kept,
            "sampling_rounds": played.rounds,
            // What a step without dynamic sampling would have trained: its first round.
            "flat_share_before": played.first_round_flat as f64 / played.first_round.max(1) as f64,
            // The step's group slots left without signal once dynamic sampling is done.
            "flat_share_after": 1.0 - played.kept as f64 / played.needed.max(1) as f64,
            "curriculum_retired": seen.retired,
            "curriculum_unsolved": seen.unsolved,
            "samples": batch.samples.len(),
            "sample_tokens": batch.tokens(),
            "completion_tokens": trajectories.iter().map(Trajectory::completion_tokens).sum::<u64>(),
        });

        // 3. One trainer step (skipped when every group was flat: nothing to learn).
        let t0 = Instant::now();
        let trainer_metrics = if batch.samples.is_empty() {
            json!({"skipped": "every group had equal rewards"})
        } else {
            // The step's rollout metrics ride along in the step file: the trainer logs them beside
            // its own, so one TensorBoard / W&B run holds both.
            let mut rollout = row.clone();
            rollout["rollout_s"] = json!(rollout_s);
            rollout["reward_s"] = json!(reward_s);
            batch.rollout = Some(rollout);
            json!(train_step(ctx, &mut trainer, &batch, total, &multi).await?)
        };
        let train_s = t0.elapsed().as_secs_f64();

        // 4. Hot-load the new adapter, then mark the step complete.
        let t0 = Instant::now();
        let ckpt = checkpoint_dir(ctx.out, step);
        if batch.samples.is_empty() {
            // No update: the step's checkpoint is the previous adapter, so resume stays exact.
            copy_previous_checkpoint(ctx.out, step, cfg.init_adapter.as_deref())?;
        }
        let adapter = ckpt.join("adapter");
        if adapter.exists() {
            ctx.engine.load_adapter(&adapter_name(step), &adapter).await?;
            if current_model != ctx.base_name {
                ctx.engine.unload_adapter(&current_model).await.ok();
            }
            current_model = adapter_name(step);
        }
        let reload_s = t0.elapsed().as_secs_f64();

        row["trainer"] = trainer_metrics;
        row["time"] = json!({"rollout_s": rollout_s, "reward_s": reward_s, "train_s": train_s, "reload_s": reload_s});
        if cfg.rollout.eval_every > 0 && step % cfg.rollout.eval_every == 0 && step != total && !ctx.validation.is_empty() {
            let Some(v) = select_or_stop(validate(ctx, &rewarder, &current_model, step, &multi), &mut shutdown).await? else {
                return interrupted(step - 1);
            };
            send_validation(&trainer, step, &v)?;
            merge(&mut row, v);
        }
        if let Some(j) = judge_metrics(&rewarder, &mut reported) {
            merge(&mut row, j);
        }
        row["time"]["step_s"] = json!(step_start.elapsed().as_secs_f64());
        // The row first, then the checkpoint's state.json that marks the step complete.
        append_metrics(&metrics_path, &row)?;
        write_state(ctx.out, step, &json!({"step": step, "model": current_model})).map_err(io(&ckpt))?;
        curriculum.record(&trajectories);
        steps_bar.inc(1);
        say(&multi, step_line(&row));
        if let Some(stop) = budget_reached(step) {
            say(&multi, format!("judge budget reached after step {step}: stopping at its checkpoint"));
            trainer.stop().await?;
            steps_bar.abandon();
            return Ok(stop);
        }
    }

    // Final validation and the final adapter.
    if !ctx.validation.is_empty() && total > 0 && !has_validation(&metrics_path, total) {
        let Some(mut v) = select_or_stop(validate(ctx, &rewarder, &current_model, total, &multi), &mut shutdown).await? else {
            return interrupted(total);
        };
        if let Some(j) = judge_metrics(&rewarder, &mut reported) {
            merge(&mut v, j);
        }
        send_validation(&trainer, total, &v)?;
        append_metrics(&metrics_path, &v)?;
    }
    trainer.stop().await?;
    let last = checkpoint_dir(ctx.out, total).join("adapter");
    if total > 0 && last.exists() {
        let final_dir = ctx.out.join("final");
        copy_dir(&last, &final_dir).map_err(io(&final_dir))?;
    } else {
        say(&multi, "no step trained: every group had equal rewards, so final/ is not written\nhint: GRPO needs reward differences within a group: more rollouts per scenario, a higher temperature, partial-credit rules, or an SFT warm start (--init-adapter)".into());
    }
    steps_bar.finish();
    Ok(Finished::Done { steps: total })
}

/// Trains the step of `file`. A trainer process that ended without reporting an error (killed
/// alone, out of memory) is started again from the previous step's checkpoint, as `--resume`
/// would, and given the step again, once; a second loss stops the run with a `--resume` hint.
async fn train_step<T: ToolHost>(ctx: &Context<'_, T>, trainer: &mut Trainer, file: &StepFile, total: u64, multi: &MultiProgress) -> Result<StepReport, RunError> {
    let step = file.step;
    file.write(&trainer.inbox()).map_err(io(ctx.out))?;
    match trainer.wait(step).await {
        Err(ta_python::TrainerError::Exited { status, .. }) => {
            say(multi, format!("the trainer process exited during step {step} ({status}): restarting it from step {}'s checkpoint to redo the step", step - 1));
            *trainer = Trainer::start(ctx.python, ctx.out, &trainer_config(ctx.cfg, ctx.out, step - 1, total), step - 1, &ctx.trainer_env)?;
            file.write(&trainer.inbox()).map_err(io(ctx.out))?;
            trainer.wait(step).await.map_err(|source| RunError::TrainerLost { step, source })
        }
        other => other.map_err(|source| RunError::TrainerLost { step, source }),
    }
}

/// Episodes that errored because the engine is gone are not results: they are dropped from the
/// step's file (so `--resume` plays them again) and the run stops. The finished ones are kept.
async fn check_engine_alive<T: ToolHost>(ctx: &Context<'_, T>, step: u64, path: &Path, trajectories: &mut Vec<Trajectory>) -> Result<(), RunError> {
    if !trajectories.iter().any(|t| t.error.is_some()) || ctx.engine.healthy().await {
        return Ok(());
    }
    trajectories.retain(|t| t.error.is_none());
    rewrite_trajectories(path, trajectories)?;
    let log = ctx.out.join("logs").join("engine.log");
    let log = if log.exists() { format!("its log: {}", log.display()) } else { format!("engine at {}", ctx.engine.base_url()) };
    Err(RunError::EngineLost { step, log })
}

/// Runs `fut` unless `shutdown` fires first (then `None`).
async fn select_or_stop<F, R>(fut: F, shutdown: &mut std::pin::Pin<&mut impl Future<Output = ()>>) -> Result<Option<R>, RunError>
where
    F: Future<Output = Result<R, RunError>>,
{
    tokio::select! {
        r = fut => r.map(Some),
        _ = shutdown.as_mut() => Ok(None),
    }
}

async fn rollouts<T: ToolHost>(ctx: &Context<'_, T>, model: &str, path: &Path, jobs: Vec<Job>, multi: &MultiProgress, step: u64) -> Result<Vec<Trajectory>, RunError> {
    let wanted: HashSet<(String, u32)> = jobs.iter().map(|j| (j.scenario.id.clone(), j.group.index)).collect();
    let bar = multi.add(ProgressBar::new(0));
    bar.set_prefix(format!("step {step}"));
    let cfg = agent_config(ctx.cfg, ctx.cfg.rollout.temperature, ctx.cfg.seed.wrapping_add(step << 20));
    // Reuses the episodes an interrupted attempt of this step finished; errored ones (a server
    // failure, not the policy's doing) are played again rather than trained on.
    let played = play_resumable(ctx.chat, model, ctx.tools, ctx.system_prompt, jobs, &cfg, ctx.cfg.rollout.concurrency, path, true, &bar, std::future::pending())
        .await
        .map_err(io(path))?;
    bar.finish_and_clear();
    multi.remove(&bar);
    let mut done = played.trajectories;
    done.retain(|t| wanted.contains(&(t.scenario_id.clone(), t.group.index)));
    // Group order: by scenario, then index, whatever order they finished in.
    done.sort_by(|a, b| (&a.scenario_id, a.group.index).cmp(&(&b.scenario_id, b.group.index)));
    Ok(done)
}

fn agent_config(cfg: &TrainConfig, temperature: f32, seed: u64) -> AgentConfig {
    AgentConfig {
        max_turns: cfg.rollout.max_turns,
        max_tokens: cfg.rollout.max_tokens,
        temperature,
        top_p: cfg.rollout.top_p,
        tool_result_max_chars: cfg.rollout.tool_result_max_chars,
        record_tokens: true,
        seed: Some(seed),
    }
}

/// One greedy rollout of each validation scenario (`eval/step-N.jsonl`), and
/// `rollout.eval_rollouts` sampled ones (`eval/step-N.sampled.jsonl`); returns the `val_*` metrics.
async fn validate<T: ToolHost>(ctx: &Context<'_, T>, rewarder: &Rewarder, model: &str, step: u64, multi: &MultiProgress) -> Result<Value, RunError> {
    let dir = ctx.out.join("eval");
    let sampled = dir.join(format!("step-{step:06}.sampled.jsonl"));
    validate_into(ctx, rewarder, model, step, &format!("at step {step}"), &dir.join(format!("step-{step:06}.jsonl")), Some(&sampled), multi).await
}

/// Plays `rollouts` episodes of each validation scenario with `model` into `path` (replacing it)
/// and scores them.
#[allow(clippy::too_many_arguments)]
async fn play_validation<T: ToolHost>(
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
    let cfg = agent_config(ctx.cfg, temperature, ctx.cfg.seed);
    let mut result = run_jobs(ctx.chat, model, ctx.tools, ctx.system_prompt, jobs, &cfg, ctx.cfg.rollout.concurrency, &mut writer, &bar, std::future::pending())
        .await
        .map_err(io(path))?;
    bar.finish_and_clear();
    multi.remove(&bar);
    rewarder.score(&ctx.validation, &mut result.trajectories).await?;
    result.trajectories.sort_by(|a, b| (&a.scenario_id, a.group.index).cmp(&(&b.scenario_id, b.group.index)));
    rewrite_trajectories(path, &result.trajectories)?;
    Ok(result.trajectories)
}

/// [`validate`] of `model` into `path` (greedy, at `eval_temperature`) and, when `sampled` names
/// a file and `eval_rollouts` > 0, k episodes per scenario at the rollout temperature into it;
/// `what` names the model in the log line.
#[allow(clippy::too_many_arguments)]
async fn validate_into<T: ToolHost>(
    ctx: &Context<'_, T>,
    rewarder: &Rewarder,
    model: &str,
    step: u64,
    what: &str,
    path: &Path,
    sampled: Option<&Path>,
    multi: &MultiProgress,
) -> Result<Value, RunError> {
    let greedy = play_validation(ctx, rewarder, model, step, 1, ctx.cfg.rollout.eval_temperature, path, multi).await?;
    let s = Summary::of(&greedy);
    let successes = greedy.iter().filter(|t| ta_eval::is_success(t)).count();
    let wilson = ta_eval::metrics::wilson_interval(successes, greedy.len());
    let mut row = json!({
        "step": step,
        "val_completion_rate": s.completion_rate,
        "val_reward": s.mean_reward,
        "val_ground_truth": mean(greedy.iter().filter_map(|t| t.reward_parts.ground_truth)),
        "val_judge": mean(greedy.iter().filter_map(|t| t.reward_parts.judge)),
        "val_success": (!greedy.is_empty()).then(|| successes as f64 / greedy.len() as f64),
        "val_success_low": wilson.map(|w| w.0),
        "val_success_high": wilson.map(|w| w.1),
        "val_mean_turns": s.mean_turns,
        "val_trajectories": s.trajectories,
        "val_model": model,
    });
    let mut line = format!("validation {what}: completion {:.1}%, ground truth {}", 100.0 * s.completion_rate, fmt_opt(row["val_ground_truth"].as_f64()));
    let k = ctx.cfg.rollout.eval_rollouts;
    if let Some(sampled) = sampled.filter(|_| k > 0) {
        let ts = play_validation(ctx, rewarder, model, step, k, ctx.cfg.rollout.temperature, sampled, multi).await?;
        if let Some(p) = ta_eval::metrics::sampled_pass(&ts) {
            merge(
                &mut row,
                json!({
                    "val_sampled_k": p.k,
                    "val_pass1": p.pass1.mean, "val_pass1_low": p.pass1.ci95[0], "val_pass1_high": p.pass1.ci95[1],
                    "val_pass_k": p.pass_at_k.mean, "val_pass_k_low": p.pass_at_k.ci95[0], "val_pass_k_high": p.pass_at_k.ci95[1],
                }),
            );
            let pct = |x: f64| 100.0 * x;
            line.push_str(&format!(
                "; sampled pass@1 {:.1}% [{:.1}, {:.1}], pass@{} {:.1}% [{:.1}, {:.1}]",
                pct(p.pass1.mean),
                pct(p.pass1.ci95[0]),
                pct(p.pass1.ci95[1]),
                p.k,
                pct(p.pass_at_k.mean),
                pct(p.pass_at_k.ci95[0]),
                pct(p.pass_at_k.ci95[1])
            ));
        }
    }
    say(multi, line);
    Ok(row)
}

/// What one step played: its scored trajectories, a group's rollouts together, and how dynamic
/// sampling went.
struct Played {
    trajectories: Vec<Trajectory>,
    /// Groups the step needs (its scenarios), and the groups with reward variance it drew.
    needed: usize,
    kept: usize,
    /// Groups of the first round, and the flat ones among them.
    first_round: usize,
    first_round_flat: usize,
    rounds: u32,
    rollout_s: f64,
    reward_s: f64,
}

/// Plays and scores step `step`: the curriculum's scenarios, then, with dynamic sampling, rounds
/// of replacements for the flat groups (never a scenario twice in a step) until the step has the
/// groups with signal it needs or has drawn `max_oversample` times them. Each round's draw follows
/// from the rounds before, whose episodes an interrupted attempt left in the step's file and
/// `rollouts` reuses, so a resumed step draws and plays what the interrupted one would have.
/// `None` when `shutdown` fired.
#[allow(clippy::too_many_arguments)]
async fn play_step<T: ToolHost>(
    ctx: &Context<'_, T>,
    rewarder: &Rewarder,
    curriculum: &Curriculum,
    model: &str,
    step: u64,
    path: &Path,
    multi: &MultiProgress,
    shutdown: &mut std::pin::Pin<&mut impl Future<Output = ()>>,
) -> Result<Option<Played>, RunError> {
    let cfg = ctx.cfg;
    let mut scenarios = curriculum.step(step);
    let needed = scenarios.len();
    let cap = (if cfg.rollout.dynamic_sampling { (needed as f64 * cfg.rollout.max_oversample).floor() as usize } else { needed }).max(needed);
    let mut drawn: HashSet<String> = HashSet::new();
    let mut all: Vec<Trajectory> = Vec::new();
    let mut p = Played { trajectories: Vec::new(), needed, kept: 0, first_round: 0, first_round_flat: 0, rounds: 0, rollout_s: 0.0, reward_s: 0.0 };
    let mut drawn_groups = 0;
    while !scenarios.is_empty() {
        drawn.extend(scenarios.iter().map(|s| s.id.clone()));
        let t0 = Instant::now();
        let jobs = group_jobs(&scenarios, cfg.rollout.rollouts_per_scenario, step);
        let Some(mut round) = select_or_stop(rollouts(ctx, model, path, jobs, multi, step), &mut *shutdown).await? else { return Ok(None) };
        let start = all.len();
        all.append(&mut round);
        // The check rewrites the step's file, so it is given every round's episodes.
        check_engine_alive(ctx, step, path, &mut all).await?;
        p.rollout_s += t0.elapsed().as_secs_f64();

        let t0 = Instant::now();
        let Some(()) = select_or_stop(async { Ok(rewarder.score(&scenarios, &mut all[start..]).await?) }, &mut *shutdown).await? else { return Ok(None) };
        // Keep the scored trajectories: rewrite the step's file in full.
        rewrite_trajectories(path, &all)?;
        p.reward_s += t0.elapsed().as_secs_f64();

        let flat = groups_of(&all[start..]).iter().filter(|g| group_stats(g, cfg) == GroupStats::ZeroVariance).count();
        if p.rounds == 0 {
            (p.first_round, p.first_round_flat) = (scenarios.len(), flat);
        }
        p.rounds += 1;
        drawn_groups += scenarios.len();
        p.kept += scenarios.len() - flat;
        let want = needed.saturating_sub(p.kept).min(cap.saturating_sub(drawn_groups));
        scenarios = if want == 0 { Vec::new() } else { curriculum.replacements(step, p.rounds, &drawn, want) };
    }
    p.trajectories = all;
    Ok(Some(p))
}

/// The groups of `trajectories`: consecutive runs of one scenario (as `rollouts` orders them).
fn groups_of(trajectories: &[Trajectory]) -> Vec<Vec<&Trajectory>> {
    let mut by_group: Vec<Vec<&Trajectory>> = Vec::new();
    for t in trajectories {
        match by_group.last_mut() {
            Some(g) if g[0].scenario_id == t.scenario_id => g.push(t),
            _ => by_group.push(vec![t]),
        }
    }
    by_group
}

/// A group's advantages. With `scale_advantages`, the spread that divides them is the ground
/// truth's under the correctness-first reward (when every rollout has one), so a tie-break never
/// weighs as much as a right answer over a wrong one; otherwise the rewards' own (GRPO).
fn group_stats(group: &[&Trajectory], cfg: &TrainConfig) -> GroupStats {
    let rewards: Vec<f64> = group.iter().map(|t| t.reward.unwrap_or(0.0)).collect();
    if !cfg.loss.scale_advantages {
        return group_advantages(&rewards, None);
    }
    let truth: Option<Vec<f64>> = if cfg.reward.mix == RewardMix::CorrectnessFirst { group.iter().map(|t| t.reward_parts.ground_truth).collect() } else { None };
    group_advantages(&rewards, Some(truth.as_deref().unwrap_or(&rewards)))
}

/// Advantages per group and the step's samples; returns (batch, groups, flat groups).
fn build_batch(trajectories: &[Trajectory], step: u64, cfg: &TrainConfig) -> Result<(StepFile, usize, usize), RunError> {
    let groups = groups_of(trajectories);
    let mut samples = Vec::new();
    let mut flat = 0;
    for (gid, group) in groups.iter().enumerate() {
        match group_stats(group, cfg) {
            GroupStats::ZeroVariance => flat += 1,
            GroupStats::Trained(adv) => {
                for (t, a) in group.iter().zip(adv) {
                    samples.extend(samples_from_trajectory(t, a, gid as u64)?);
                }
            }
        }
    }
    Ok((StepFile::new(step, samples), groups.len(), flat))
}

fn rewrite_trajectories(path: &Path, trajectories: &[Trajectory]) -> Result<(), RunError> {
    ta_types::trajectory::write_trajectories(path, trajectories).map_err(io(path))
}

/// A step without an update keeps the policy: its checkpoint is the previous step's (adapter and
/// trainer state), or the initial adapter before any step trained, or empty (the base model).
fn copy_previous_checkpoint(out: &Path, step: u64, init_adapter: Option<&str>) -> Result<(), RunError> {
    let prev = checkpoint_dir(out, step - 1);
    let dst = checkpoint_dir(out, step);
    if prev.join("adapter").exists() {
        copy_dir(&prev, &dst).map_err(io(&dst))?;
        let _ = std::fs::remove_file(dst.join("state.json"));
    } else {
        std::fs::create_dir_all(&dst).map_err(io(&dst))?;
        if let Some(init) = init_adapter {
            let adapter = dst.join("adapter");
            copy_dir(Path::new(init), &adapter).map_err(io(&adapter))?;
        }
    }
    Ok(())
}

/// Hands the `val_*` metrics measured at `step` to the trainer, which logs them to TensorBoard and
/// W&B beside the rollout and trainer metrics (`metrics.jsonl` gets them from the caller).
fn send_validation(trainer: &Trainer, step: u64, row: &Value) -> Result<(), RunError> {
    let inbox = trainer.inbox();
    ValidationFile::new(step, row).write(&inbox).map_err(io(&inbox))?;
    Ok(())
}

fn append_metrics(path: &Path, row: &Value) -> Result<(), RunError> {
    metrics::append(path, row).map_err(io(path))
}

fn has_validation(metrics: &Path, step: u64) -> bool {
    std::fs::read_to_string(metrics)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .any(|v| v["step"] == step && v.get("val_completion_rate").is_some())
}

fn merge(row: &mut Value, extra: Value) {
    if let (Some(r), Value::Object(e)) = (row.as_object_mut(), extra) {
        for (k, v) in e {
            r.entry(k).or_insert(v);
        }
    }
}

fn mean(xs: impl Iterator<Item = f64>) -> Option<f64> {
    let v: Vec<f64> = xs.collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// Mean of each custom reward over the trajectories that have it.
fn custom_means(trajectories: &[Trajectory]) -> Value {
    let mut sums: std::collections::BTreeMap<&str, (f64, usize)> = std::collections::BTreeMap::new();
    for (name, x) in trajectories.iter().flat_map(|t| t.reward_parts.custom.iter()) {
        let e = sums.entry(name).or_default();
        (e.0, e.1) = (e.0 + x, e.1 + 1);
    }
    sums.into_iter().map(|(k, (s, n))| (k.to_string(), json!(s / n as f64))).collect::<serde_json::Map<_, _>>().into()
}

fn std_dev(xs: impl Iterator<Item = f64>) -> Option<f64> {
    let v: Vec<f64> = xs.collect();
    let m = mean(v.iter().copied())?;
    Some((v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / v.len() as f64).sqrt())
}

/// Prints a line above the progress bars, or plainly when they are hidden (not a terminal).
fn say(multi: &MultiProgress, line: String) {
    if multi.is_hidden() {
        eprintln!("{line}");
    } else {
        multi.println(line).ok();
    }
}

fn fmt_opt(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{v:.3}"))
}

/// The compact line printed after each step.
fn step_line(row: &Value) -> String {
    let f = |v: &Value| fmt_opt(v.as_f64());
    let judge = match row["judge_cost_total_usd"].as_f64() {
        Some(total) => {
            format!("  judge {} (${:.4}, total ${total:.4}, {} skipped)", f(&row["judge"]), row["judge_cost_usd"].as_f64().unwrap_or(0.0), row["judge_groups_skipped"])
        }
        None => String::new(),
    };
    format!(
        "step {:>4}  reward {}  completion {}  groups {}/{} flat  loss {}  grad {}  kl {}{judge}  {:.1}s",
        row["step"],
        f(&row["reward"]),
        f(&row["completion_rate"]),
        row["groups_zero_variance"],
        row["groups"],
        f(&row["trainer"]["loss"]),
        f(&row["trainer"]["grad_norm"]),
        f(&row["trainer"]["kl"]),
        row["time"]["step_s"].as_f64().unwrap_or(0.0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Eight scored rollouts of a scenario whose answer is 7: seven right with clean tool use,
    /// and `last` as the eighth.
    fn scored_group(cfg: &TrainConfig, last: (&str, u32, u32)) -> Vec<Trajectory> {
        let scenario = ta_types::scenario::parse_scenarios(r#"{"id": "s", "task": "t", "expected": 7}"#, "x").unwrap().remove(0);
        (0..8)
            .map(|i| {
                let (answer, calls, errors) = if i == 7 { last } else { ("7", 2, 0) };
                let mut t = Trajectory::start("s", ta_types::trajectory::GroupRef { step: 1, index: i }, "m", vec![]);
                (t.outcome, t.final_answer, t.num_turns) = (ta_types::Outcome::Completed, Some(answer.into()), calls + 1);
                (t.tool_calls, t.tool_errors, t.recovered_errors) = (calls, errors, errors);
                ta_reward::score(&cfg.reward, &scenario, &mut t);
                t
            })
            .collect()
    }

    fn advantages(group: &[Trajectory], cfg: &TrainConfig) -> Vec<f64> {
        match group_stats(&group.iter().collect::<Vec<_>>(), cfg) {
            GroupStats::Trained(a) => a,
            GroupStats::ZeroVariance => panic!("flat group"),
        }
    }

    #[test]
    fn a_recovered_tool_error_is_not_trained_like_a_wrong_answer() {
        for scale_advantages in [true, false] {
            let mut cfg = TrainConfig::default();
            cfg.loss.scale_advantages = scale_advantages;
            let recovered = advantages(&scored_group(&cfg, ("7", 3, 1)), &cfg);
            let wrong = advantages(&scored_group(&cfg, ("8", 2, 0)), &cfg);
            // The tie-break still prefers clean tool use, at a fraction of a wrong answer's weight.
            assert!(recovered[7] < 0.0 && recovered[0] > 0.0, "{recovered:?}");
            assert!(recovered[7].abs() < 0.2 * wrong[7].abs(), "scale {scale_advantages}: recovered {recovered:?} vs wrong {wrong:?}");
        }
        // What the issue measured: the weighted sum with std scaling trains both groups alike.
        let mut old = TrainConfig::default();
        old.reward.mix = RewardMix::WeightedSum;
        let (recovered, wrong) = (advantages(&scored_group(&old, ("7", 3, 1)), &old), advantages(&scored_group(&old, ("8", 2, 0)), &old));
        assert!(recovered.iter().zip(&wrong).all(|(a, b)| (a - b).abs() < 1e-3), "{recovered:?} vs {wrong:?}");
    }

    #[test]
    fn judge_cost_before_a_resume_is_the_last_recorded_total() {
        let dir = tempfile::tempdir().unwrap();
        let m = dir.path().join("metrics.jsonl");
        assert_eq!(prior_judge_cost(&m), 0.0);
        std::fs::write(&m, "{\"step\": 1, \"judge_cost_total_usd\": 0.5}\n{\"step\": 2, \"judge_cost_total_usd\": 1.25}\n{\"step\": 2, \"val_reward\": 1}\n").unwrap();
        assert_eq!(prior_judge_cost(&m), 1.25);
    }

    #[test]
    fn step_lines_show_judge_cost_when_there_is_a_judge() {
        let row =
            json!({"step": 3, "reward": 0.5, "judge": 0.4, "judge_cost_usd": 0.01, "judge_cost_total_usd": 0.03, "judge_groups_skipped": 1, "time": {"step_s": 2.0}});
        let line = step_line(&row);
        assert!(line.contains("judge 0.400 ($0.0100, total $0.0300, 1 skipped)"), "{line}");
        assert!(!step_line(&json!({"step": 1, "time": {}})).contains("judge"));
    }
}
