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

use indicatif::{MultiProgress, ProgressBar};
use ta_python::Trainer;
use ta_reward::{JudgeStats, RewardMix, Rewarder};
use ta_rollout::ToolHost;
use ta_rollout::job::Job;
use ta_rollout::runner::{Summary, group_jobs, play_resumable};
use ta_trainer::checkpoint::{checkpoint_dir, copy_dir, last_complete_step, write_state};
use ta_trainer::config::RunSpec;
use ta_trainer::samples_from_trajectory;
use ta_trainer::{LossConfig, StepFile, StepReport, TrainerConfig, metrics};
use ta_types::Trajectory;
use ta_types::phases::{self, PhaseLog};

use crate::advantage::{GroupStats, group_advantages};
use crate::collapse::CollapseWatch;
use crate::config::TrainConfig;
pub use crate::context::Context;
use crate::data::{Curriculum, CurriculumCounts};
pub use crate::error::RunError;
use crate::error::io;
use crate::keep;
use crate::progress::{self, say};
use crate::row::{self, JudgeMetrics, RolloutMetrics, StepRow, StepTimes, TrainerMetrics, ValidationMetrics, ValidationRow, mean};
use crate::validation;

/// How the run ended.
#[derive(Debug, PartialEq)]
pub enum Finished {
    /// Every step ran; `final/` holds the adapter `[rollout] final_adapter` chose (`final.json`).
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
    metrics::rows(metrics).iter().rev().find_map(|v| v["judge_cost_total_usd"].as_f64()).unwrap_or(0.0)
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
    let multi = MultiProgress::new();
    let steps_bar = progress::steps_bar(&multi, total, resume);
    let phases = PhaseLog::new(ctx.out);
    let t0 = Instant::now();
    let mut current_model = starting_model(ctx, resume, &multi).await?;
    let mut trainer = Trainer::start(ctx.python, ctx.out, &trainer_config(cfg, ctx.out, resume, total), resume, &ctx.trainer_env)?;
    phases.since(phases::TRAINER_START, t0);
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
    // a finished validation holds one trajectory per scenario
    let mut base_due = wants_baseline && ta_types::trajectory::count_trajectories(&baseline) != ctx.validation.len();
    if let Some(cache) = ctx.base_cache.as_ref().filter(|c| base_due && c.restore(&baseline, ctx.validation.len())) {
        say(&multi, format!("validation of the base model: the same setting's from an earlier run ({}), not played again", cache.path().display()));
        base_due = false;
    }
    let start_due = resume == 0 && !ctx.validation.is_empty() && !validation::done(&metrics_path, 0);
    if base_due || start_due {
        // Both at once: the engine serves the base model and the adapter in the same batches, so
        // the base model's long episodes do not run alone at the end of their own batch.
        let t0 = Instant::now();
        let base = async {
            if base_due {
                validation::validate_into(ctx, &rewarder, ctx.base_name, 0, "of the base model", &baseline, None, &multi).await?;
                if let Some(cache) = &ctx.base_cache {
                    cache.store(&baseline);
                }
            }
            Ok::<_, RunError>(())
        };
        let start = async { if start_due { validation::validate(ctx, &rewarder, &current_model, 0, &multi).await.map(Some) } else { Ok(None) } };
        let both = async {
            let (base, start) = tokio::join!(base, start);
            base.and(start)
        };
        let Some(start) = select_or_stop(both, &mut shutdown).await? else { return interrupted(0) };
        if let Some(v) = start {
            record_validation(&trainer, &metrics_path, 0, v, &rewarder, &mut reported)?;
        }
        let phase = match (base_due, start_due) {
            (true, true) => phases::BASE_AND_START_VALIDATION.to_string(),
            (true, false) => phases::validation(None),
            _ => phases::validation(Some(0)),
        };
        phases.since(&phase, t0);
    }
    if let Some(stop) = budget_reached(resume) {
        trainer.stop().await?;
        return Ok(stop);
    }

    // With staleness 1, the engine plays step n+1 while the trainer trains step n: `ahead` holds
    // what it played. A step's draw sees the pass rates of the steps up to `staleness` + 1 back
    // (the curriculum catches up from the steps it has not seen), so an interrupted and resumed
    // run draws as an uninterrupted one would.
    let staleness = u64::from(cfg.rollout.staleness);
    let mut seen_by_curriculum = Recorded::default();
    let mut ahead: Option<(Played, CurriculumCounts)> = None;
    let mut collapse = CollapseWatch::default();
    for step in resume + 1..=total {
        let step_start = Instant::now();

        // 1-2. Rollouts (reusing those an interrupted attempt of this step finished) and rewards,
        // in rounds when dynamic sampling replaces flat groups; played ahead with staleness 1.
        let (played, seen) = match ahead.take() {
            Some(played) => played,
            None => {
                seen_by_curriculum.catch_up(&mut curriculum, ctx.out, step.saturating_sub(1 + staleness))?;
                let seen = curriculum.counts();
                let Some(played) = play_step(ctx, &rewarder, &curriculum, &current_model, step, &multi, &mut shutdown).await? else {
                    return interrupted(step - 1);
                };
                phases.record(phases::ROLLOUT, played.rollout_s);
                phases.record(phases::SCORE, played.reward_s);
                (played, seen)
            }
        };
        let (mut batch, counts) = build_batch(&played.trajectories, step, played.needed, cfg)?;
        let rollout = rollout_metrics(ctx, step, &played, &batch, counts, seen);
        if let Some(warning) = collapse.check(&rollout) {
            say(&multi, warning);
        }

        // 3. One trainer step (skipped when every group was flat: nothing to learn) and, with
        // staleness 1, the next step's rollouts by the current adapter at the same time.
        let play_ahead = staleness > 0 && step < total;
        if play_ahead {
            seen_by_curriculum.catch_up(&mut curriculum, ctx.out, step - 1)?;
        }
        let seen_ahead = curriculum.counts();
        let t0 = Instant::now();
        let train = async {
            let t0 = Instant::now();
            let trained = if batch.samples.is_empty() {
                TrainerMetrics::FLAT
            } else {
                // The step's rollout metrics ride along in the step file: the trainer logs them
                // beside its own, so one TensorBoard / W&B run holds both.
                batch.rollout = Some(rollout.for_trainer(played.rollout_s, played.reward_s));
                TrainerMetrics::Trained(Box::new(train_step(ctx, &mut trainer, &batch, total, &multi).await?))
            };
            Ok::<_, RunError>((trained, t0.elapsed().as_secs_f64()))
        };
        let next = async {
            if !play_ahead {
                return Ok::<_, RunError>(Some(None));
            }
            Ok(play_step(ctx, &rewarder, &curriculum, &current_model, step + 1, &multi, &mut shutdown).await?.map(Some))
        };
        let (trained, next) = tokio::join!(train, next);
        let (trained, train_s) = trained?;
        // A failed rollout ahead (the engine gone) stops the run before this step is marked
        // complete: `--resume` redoes its update; its episodes and the next step's finished ones
        // are kept in their files.
        let next = next?;
        phases.since(if play_ahead { phases::TRAIN_AND_NEXT_ROLLOUT } else { phases::TRAIN }, t0);

        // 4. Hot-load the new adapter, then mark the step complete.
        let t0 = Instant::now();
        if batch.samples.is_empty() {
            // No update: the step's checkpoint is the previous adapter, so resume stays exact.
            copy_previous_checkpoint(ctx.out, step, cfg.init_adapter.as_deref())?;
        }
        current_model = hot_load(ctx, step, current_model).await?;
        let reload_s = t0.elapsed().as_secs_f64();
        phases.record(phases::RELOAD, reload_s);

        let time = StepTimes { rollout_s: played.rollout_s, reward_s: played.reward_s, train_s, reload_s, step_s: 0.0 };
        let mut row = StepRow { rollout, trainer: trained, time, validation: None, judge: None };
        if cfg.rollout.eval_every > 0 && step % cfg.rollout.eval_every == 0 && step != total && !ctx.validation.is_empty() {
            let t0 = Instant::now();
            let Some(v) = select_or_stop(validation::validate(ctx, &rewarder, &current_model, step, &multi), &mut shutdown).await? else {
                return interrupted(step - 1);
            };
            validation::send(&trainer, step, &v)?;
            row.validation = Some(v);
            phases.since(&phases::validation(Some(step)), t0);
        }
        row.judge = JudgeMetrics::since(&rewarder, &mut reported);
        row.time.step_s = step_start.elapsed().as_secs_f64();
        // The row first, then the checkpoint's state.json that marks the step complete.
        row::append(&metrics_path, &row)?;
        let ckpt = checkpoint_dir(ctx.out, step);
        write_state(ctx.out, step, &serde_json::json!({"step": step, "model": current_model})).map_err(io(&ckpt))?;
        steps_bar.inc(1);
        say(&multi, row.line());
        seen_by_curriculum.last = Some((step, played.trajectories));
        // The step played ahead, or `None` when Ctrl-C stopped it: its finished episodes are
        // in its file.
        match next {
            Some(Some(next)) => ahead = Some((next, seen_ahead)),
            Some(None) => {}
            None => return interrupted(step),
        }
        if let Some(stop) = budget_reached(step) {
            say(&multi, format!("judge budget reached after step {step}: stopping at its checkpoint"));
            trainer.stop().await?;
            steps_bar.abandon();
            return Ok(stop);
        }
    }

    // Final validation and the final adapter.
    if !ctx.validation.is_empty() && total > 0 && !validation::done(&metrics_path, total) {
        let t0 = Instant::now();
        let Some(v) = select_or_stop(validation::validate(ctx, &rewarder, &current_model, total, &multi), &mut shutdown).await? else {
            return interrupted(total);
        };
        record_validation(&trainer, &metrics_path, total, v, &rewarder, &mut reported)?;
        phases.since(&phases::validation(Some(total)), t0);
    }
    trainer.stop().await?;
    // The engine as it was found: one shared with the next command (`fit`'s `eval`) keeps its
    // LoRA slots for that command's adapters.
    if current_model != ctx.base_name {
        ctx.engine.unload_adapter(&current_model).await.ok();
    }
    let last = checkpoint_dir(ctx.out, total).join("adapter");
    if total > 0 && last.exists() {
        let kept = keep::choose(ctx.out, cfg.rollout.final_adapter, cfg.init_adapter.as_deref(), total, &keep::validations(&metrics_path));
        let final_dir = ctx.out.join("final");
        keep::write(ctx.out, &kept).map_err(io(&final_dir))?;
        say(&multi, kept.line());
    } else {
        say(&multi, "no step trained: every group had equal rewards, so final/ is not written\nhint: GRPO needs reward differences within a group: more rollouts per scenario, a higher temperature, partial-credit rules, or an SFT warm start (--init-adapter)".into());
    }
    steps_bar.finish();
    Ok(Finished::Done { steps: total })
}

/// Loads the adapter the run continues from into the engine: the checkpoint of step `resume`,
/// else the initial adapter; returns the model the first step samples.
async fn starting_model<T: ToolHost>(ctx: &Context<'_, T>, resume: u64, multi: &MultiProgress) -> Result<String, RunError> {
    let mut model = ctx.base_name.to_string();
    if resume > 0 {
        // A checkpoint without an adapter: no step had trained yet and there was no initial one.
        let adapter = checkpoint_dir(ctx.out, resume).join("adapter");
        if adapter.exists() {
            ctx.engine.load_adapter(&adapter_name(resume), &adapter).await?;
            model = adapter_name(resume);
        }
        say(multi, format!("resuming after step {resume}"));
    } else if let Some(init) = &ctx.cfg.init_adapter {
        ctx.engine.load_adapter("init", Path::new(init)).await?;
        model = "init".into();
    }
    Ok(model)
}

/// What step `step` played and batched, for its row. `groups` counts the kinds of the groups it
/// drew; `seen` is the curriculum before the step.
fn rollout_metrics<T: ToolHost>(ctx: &Context<'_, T>, step: u64, played: &Played, batch: &StepFile, groups: SignalCounts, seen: CurriculumCounts) -> RolloutMetrics {
    let ts = &played.trajectories;
    let summary = Summary::of(ts);
    RolloutMetrics {
        step,
        epoch: ((step - 1) * ctx.cfg.rollout.scenarios_per_step as u64) / ctx.train.len() as u64,
        reward: summary.mean_reward,
        reward_std: row::std_dev(ts.iter().filter_map(|t| t.reward)),
        completion_rate: summary.completion_rate,
        ground_truth: mean(ts.iter().filter_map(|t| t.reward_parts.ground_truth)),
        rules: mean(ts.iter().filter_map(|t| t.reward_parts.rules)),
        judge: mean(ts.iter().filter_map(|t| t.reward_parts.judge)),
        custom: row::custom_means(ts),
        mean_turns: summary.mean_turns,
        mean_tool_calls: summary.mean_tool_calls,
        tool_errors: summary.tool_errors,
        groups: groups.flat + groups.tie_break + groups.correctness,
        groups_zero_variance: groups.flat,
        groups_tie_break: groups.tie_break,
        groups_kept: played.kept,
        sampling_rounds: played.rounds,
        flat_share_before: played.first_round_flat as f64 / played.first_round.max(1) as f64,
        flat_share_after: 1.0 - played.kept as f64 / played.needed.max(1) as f64,
        curriculum_retired: seen.retired,
        curriculum_unsolved: seen.unsolved,
        samples: batch.samples.len(),
        sample_tokens: batch.tokens(),
        completion_tokens: ts.iter().map(Trajectory::completion_tokens).sum::<u64>(),
        policy_lag: batch.policy_lag,
    }
}

/// Loads step `step`'s adapter (when its checkpoint has one) into the engine in place of
/// `current`; returns the model the next step samples.
async fn hot_load<T: ToolHost>(ctx: &Context<'_, T>, step: u64, current: String) -> Result<String, RunError> {
    let adapter = checkpoint_dir(ctx.out, step).join("adapter");
    if !adapter.exists() {
        return Ok(current);
    }
    ctx.engine.load_adapter(&adapter_name(step), &adapter).await?;
    if current != ctx.base_name {
        ctx.engine.unload_adapter(&current).await.ok();
    }
    Ok(adapter_name(step))
}

/// A validation outside a step (before the first, after the last): its row, with the judge's
/// cost so far, to the trainer's loggers and to `metrics.jsonl`.
fn record_validation(
    trainer: &Trainer,
    metrics_path: &Path,
    step: u64,
    validation: ValidationMetrics,
    rewarder: &Rewarder,
    reported: &mut JudgeStats,
) -> Result<(), RunError> {
    let row = ValidationRow { step, validation, judge: JudgeMetrics::since(rewarder, reported) };
    validation::send(trainer, step, &row)?;
    row::append(metrics_path, &row)
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
    let cfg = ctx.agent_config(ctx.cfg.rollout.temperature, ctx.cfg.seed.wrapping_add(step << 20));
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
    multi: &MultiProgress,
    shutdown: &mut std::pin::Pin<&mut impl Future<Output = ()>>,
) -> Result<Option<Played>, RunError> {
    let cfg = ctx.cfg;
    let path = &step_trajectories(ctx.out, step);
    let mut scenarios = curriculum.step(step);
    let needed = scenarios.len();
    let cap = (if cfg.rollout.dynamic_sampling { (needed as f64 * cfg.rollout.max_oversample).floor() as usize } else { needed }).max(needed);
    if cfg.rollout.dynamic_sampling && cfg.rollout.size_first_round && step > 1 {
        // The previous step's file is whole (played and scored before this step starts, also
        // when resuming), so a resumed step draws the same first round.
        let previous = step_trajectories(ctx.out, step - 1);
        let extra = first_round_extra(&ta_types::trajectory::read_trajectories(&previous).map_err(io(&previous))?, needed, cfg).min(cap - needed);
        if extra > 0 {
            let ids: HashSet<String> = scenarios.iter().map(|s| s.id.clone()).collect();
            scenarios.extend(curriculum.replacements(step, 0, &ids, extra));
        }
    }
    let mut drawn: HashSet<String> = HashSet::new();
    let mut all: Vec<Trajectory> = Vec::new();
    let mut p = Played { trajectories: Vec::new(), needed, kept: 0, first_round: 0, first_round_flat: 0, rounds: 0, rollout_s: 0.0, reward_s: 0.0 };
    let (mut drawn_groups, mut counts) = (0, SignalCounts::default());
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

        let round_counts = SignalCounts::of(&groups_of(&all[start..]), cfg);
        if p.rounds == 0 {
            (p.first_round, p.first_round_flat) = (scenarios.len(), round_counts.flat);
        }
        p.rounds += 1;
        drawn_groups += scenarios.len();
        counts.add(round_counts);
        // A step trains the first `needed` groups with signal (`build_batch`); more are surplus.
        p.kept = counts.trained(needed);
        let useful = counts.useful();
        let draw = replacement_draw(needed - useful.min(needed), useful, drawn_groups).min(cap.saturating_sub(drawn_groups));
        scenarios = if draw == 0 { Vec::new() } else { curriculum.replacements(step, p.rounds, &drawn, draw) };
    }
    p.trajectories = all;
    Ok(Some(p))
}

/// How many replacement groups to draw for the `missing` groups with signal a step still needs,
/// when `informative` of the `drawn` groups so far had signal: `missing` divided by that share
/// (with one of each added, so a first round without signal does not divide by zero), so the
/// round is expected to bring them all. Drawing only `missing` took 2-10 rounds a step at a 50%
/// flat share, each as long as its longest episode (benches/RESULTS.md, "Replacement draws").
fn replacement_draw(missing: usize, informative: usize, drawn: usize) -> usize {
    if missing == 0 {
        return 0;
    }
    (missing as f64 * (drawn + 2) as f64 / (informative + 1) as f64).ceil() as usize
}

/// The groups beyond the `needed` a step's first round draws with `size_first_round`: the
/// replacements a round after the previous step's (its `previous` scored trajectories, every
/// round of it) would draw for all `needed` ([`replacement_draw`]); none without them.
fn first_round_extra(previous: &[Trajectory], needed: usize, cfg: &TrainConfig) -> usize {
    let groups = groups_of(previous);
    if groups.is_empty() {
        return 0;
    }
    replacement_draw(needed, SignalCounts::of(&groups, cfg).useful(), groups.len()).saturating_sub(needed)
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
    let rewards = rewards_of(group);
    if !cfg.loss.scale_advantages {
        return group_advantages(&rewards, None);
    }
    group_advantages(&rewards, Some(ground_truths(group, cfg).as_deref().unwrap_or(&rewards)))
}

fn rewards_of(group: &[&Trajectory]) -> Vec<f64> {
    group.iter().map(|t| t.reward.unwrap_or(0.0)).collect()
}

/// Each episode's ground truth under the correctness-first reward, when every one has it.
fn ground_truths(group: &[&Trajectory], cfg: &TrainConfig) -> Option<Vec<f64>> {
    if cfg.reward.mix != RewardMix::CorrectnessFirst {
        return None;
    }
    group.iter().map(|t| t.reward_parts.ground_truth).collect()
}

/// What a group can teach. Under the correctness-first reward, a group whose episodes all have
/// one ground truth (all right, or all wrong) but different rewards differs only by the rules'
/// tie-break: it teaches tool habits, and when every answer is wrong it ranks an early wrong
/// answer above one still searching (benches/RESULTS.md, run 24), not which answer is right.
/// DAPO's dynamic sampling keeps only groups whose accuracy is neither 0 nor 1; here such groups
/// are drawn past and trained last, filling the places of a step that found too few groups that
/// tell right from wrong (from a cold start, where nothing is right yet, they are all it has).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Signal {
    /// Every reward equal: nothing to learn.
    Flat,
    /// Rewards differ within one ground-truth level.
    TieBreak,
    /// Right and wrong answers, or rewards without ground truth to split them by.
    Correctness,
}

fn signal(group: &[&Trajectory], cfg: &TrainConfig) -> Signal {
    if group_advantages(&rewards_of(group), None) == GroupStats::ZeroVariance {
        return Signal::Flat;
    }
    match ground_truths(group, cfg) {
        Some(truth) if truth.iter().all(|&x| (x - truth[0]).abs() < 1e-9) => Signal::TieBreak,
        _ => Signal::Correctness,
    }
}

/// The groups of each kind among `groups`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct SignalCounts {
    flat: usize,
    tie_break: usize,
    correctness: usize,
}

impl SignalCounts {
    fn of(groups: &[Vec<&Trajectory>], cfg: &TrainConfig) -> SignalCounts {
        SignalCounts::count(groups.iter().map(|g| signal(g, cfg)))
    }

    fn count(kinds: impl IntoIterator<Item = Signal>) -> SignalCounts {
        let mut c = SignalCounts::default();
        for kind in kinds {
            match kind {
                Signal::Flat => c.flat += 1,
                Signal::TieBreak => c.tie_break += 1,
                Signal::Correctness => c.correctness += 1,
            }
        }
        c
    }

    fn add(&mut self, other: SignalCounts) {
        (self.flat, self.tie_break, self.correctness) = (self.flat + other.flat, self.tie_break + other.tie_break, self.correctness + other.correctness);
    }

    /// The groups dynamic sampling counts as signal: those that tell right from wrong once any
    /// has, and the tie-break's before that (a cold start).
    fn useful(&self) -> usize {
        if self.correctness > 0 { self.correctness } else { self.tie_break }
    }

    /// The groups a step of `needed` trains ([`build_batch`]).
    fn trained(&self, needed: usize) -> usize {
        (self.correctness + self.tie_break).min(needed)
    }
}

/// Advantages per group and the step's samples, with the counts of the groups' kinds: the
/// first `needed` groups that tell right from wrong in draw order, then tie-break groups in draw
/// order to fill the step. Surplus groups (a replacement round brought more than the step needs)
/// are kept in the step's file, not trained: every step trains at most `needed`.
fn build_batch(trajectories: &[Trajectory], step: u64, needed: usize, cfg: &TrainConfig) -> Result<(StepFile, SignalCounts), RunError> {
    let groups = groups_of(trajectories);
    let kinds: Vec<Signal> = groups.iter().map(|g| signal(g, cfg)).collect();
    let mut samples = Vec::new();
    let mut trained = 0;
    for kind in [Signal::Correctness, Signal::TieBreak] {
        for (gid, group) in groups.iter().enumerate().filter(|(i, _)| kinds[*i] == kind) {
            if trained == needed {
                break;
            }
            let GroupStats::Trained(adv) = group_stats(group, cfg) else { unreachable!("a group with reward variance has advantages") };
            trained += 1;
            for (t, a) in group.iter().zip(adv) {
                samples.extend(samples_from_trajectory(t, a, gid as u64)?);
            }
        }
    }
    let mut file = StepFile::new(step, samples);
    file.policy_lag = policy_lag(trajectories, step);
    Ok((file, SignalCounts::count(kinds)))
}

/// How many steps behind the trainer (which holds the adapter of step `step` - 1) the oldest
/// policy that played `trajectories` is: the adapter of step k is `step-k` (`adapter_name`),
/// anything else (the base model, the initial adapter) the policy before step 1.
fn policy_lag(trajectories: &[Trajectory], step: u64) -> u64 {
    let sampled_by = |model: &str| model.strip_prefix("step-").and_then(|k| k.parse::<u64>().ok()).unwrap_or(0);
    trajectories.iter().map(|t| (step - 1).saturating_sub(sampled_by(&t.model))).max().unwrap_or(0)
}

/// The steps the curriculum has seen: all up to `through`. The last finished step's scored
/// trajectories are held here, so a running loop hands them over from memory; a resumed run
/// reads the earlier steps back from their files.
#[derive(Default)]
struct Recorded {
    through: u64,
    last: Option<(u64, Vec<Trajectory>)>,
}

impl Recorded {
    /// Lets the curriculum see every step up to `upto` it has not seen yet.
    fn catch_up(&mut self, curriculum: &mut Curriculum, out: &Path, upto: u64) -> Result<(), RunError> {
        while self.through < upto {
            self.through += 1;
            match self.last.take_if(|(step, _)| *step == self.through) {
                Some((_, trajectories)) => curriculum.record(&trajectories),
                None => {
                    let path = step_trajectories(out, self.through);
                    curriculum.record(&ta_types::trajectory::read_trajectories(&path).map_err(io(&path))?);
                }
            }
        }
        Ok(())
    }
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
    fn a_replacement_round_draws_the_missing_groups_over_the_share_with_signal() {
        assert_eq!(replacement_draw(0, 3, 8), 0, "nothing missing, nothing drawn");
        assert_eq!(replacement_draw(4, 4, 8), 8, "half had signal: twice the missing");
        assert_eq!(replacement_draw(1, 7, 8), 2);
        assert_eq!(replacement_draw(8, 0, 8), 80, "none had signal: as many as the cap allows");
        assert!(replacement_draw(3, 8, 8) >= 3, "never fewer than the missing ones");
    }

    #[test]
    fn a_step_trains_the_first_groups_with_signal_it_needs_and_keeps_the_surplus_untrained() {
        let cfg = TrainConfig::default();
        // Groups a, b (flat), c, d in draw order; a, c and d have signal.
        let trajectories = groups_in_order(&cfg, &[("a", ("8", 2, 0)), ("b", ("7", 2, 0)), ("c", ("8", 2, 0)), ("d", ("8", 2, 0))]);
        let (file, counts) = build_batch(&trajectories, 1, 2, &cfg).unwrap();
        assert_eq!(counts, SignalCounts { flat: 1, tie_break: 0, correctness: 3 });
        let trained: std::collections::BTreeSet<u64> = file.samples.iter().map(|s| s.group_id).collect();
        assert_eq!(trained, [0, 2].into(), "a and c, not the surplus d");
        let (all, _) = build_batch(&trajectories, 1, 8, &cfg).unwrap();
        assert_eq!(all.samples.len(), 24, "three groups of eight when the step needs them all");
    }

    /// Groups of [`scored_group`] in draw order, each named and given one trainable turn.
    fn groups_in_order(cfg: &TrainConfig, groups: &[(&str, (&str, u32, u32))]) -> Vec<Trajectory> {
        let turn =
            ta_types::trajectory::Turn { prompt_token_ids: vec![1, 2], completion_token_ids: vec![3], logprobs: vec![-0.1], completion_tokens: 1, ..Default::default() };
        let mut trajectories = Vec::new();
        for &(id, last) in groups {
            for mut t in scored_group(cfg, last) {
                t.scenario_id = id.into();
                t.turns = vec![turn.clone()];
                trajectories.push(t);
            }
        }
        trajectories
    }

    /// Groups in draw order: a and e all right but one with a recovered tool error (the
    /// tie-break alone), b and d with a wrong answer, c all right and clean (flat).
    fn mixed_groups(cfg: &TrainConfig) -> Vec<Trajectory> {
        groups_in_order(cfg, &[("a", ("7", 3, 1)), ("b", ("8", 2, 0)), ("c", ("7", 2, 0)), ("d", ("8", 2, 0)), ("e", ("7", 3, 1))])
    }

    #[test]
    fn groups_that_tell_right_from_wrong_are_trained_before_tie_break_groups() {
        let cfg = TrainConfig::default();
        let trajectories = mixed_groups(&cfg);
        let groups = groups_of(&trajectories);
        let kinds: Vec<Signal> = groups.iter().map(|g| signal(g, &cfg)).collect();
        assert_eq!(kinds, [Signal::TieBreak, Signal::Correctness, Signal::Flat, Signal::Correctness, Signal::TieBreak]);
        let trained = |needed| {
            let (file, counts) = build_batch(&trajectories, 1, needed, &cfg).unwrap();
            assert_eq!(counts, SignalCounts { flat: 1, tie_break: 2, correctness: 2 });
            file.samples.iter().map(|s| s.group_id).collect::<std::collections::BTreeSet<u64>>()
        };
        assert_eq!(trained(2), [1, 3].into(), "b and d, though a was drawn first");
        assert_eq!(trained(3), [0, 1, 3].into(), "then the first tie-break group fills the step");
        assert_eq!(trained(8), [0, 1, 3, 4].into());
        // Without ground truth the rewards are the signal: every group with variance counts.
        let mut weighted = TrainConfig::default();
        weighted.reward.mix = RewardMix::WeightedSum;
        assert_eq!(signal(&groups[0], &weighted), Signal::Correctness);
    }

    #[test]
    fn dynamic_sampling_counts_tie_break_groups_only_until_a_group_tells_right_from_wrong() {
        let cold = SignalCounts { flat: 2, tie_break: 6, correctness: 0 };
        assert_eq!(cold.useful(), 6, "a cold start: the tie-break is all the signal there is");
        let warm = SignalCounts { flat: 2, tie_break: 4, correctness: 2 };
        assert_eq!(warm.useful(), 2, "once any group splits right from wrong, only those count");
        assert_eq!((warm.trained(8), warm.trained(4)), (6, 4), "tie-break groups still fill the step");
        // A step of 8 that drew a, b, c, d and e has 2 of the groups it wants: it draws more.
        let cfg = TrainConfig::default();
        let trajectories = mixed_groups(&cfg);
        assert_eq!(first_round_extra(&trajectories, 2, &cfg), replacement_draw(2, 2, 5) - 2);
    }

    #[test]
    fn the_first_round_adds_what_the_previous_steps_flat_share_predicts() {
        let cfg = TrainConfig::default();
        // A previous step of `flat` flat groups (all eight right) and `signal` with one wrong.
        let previous = |flat: usize, signal: usize| -> Vec<Trajectory> {
            let groups = (0..flat).map(|_| ("7", 2, 0)).chain((0..signal).map(|_| ("8", 2, 0)));
            groups
                .enumerate()
                .flat_map(|(g, last)| {
                    scored_group(&cfg, last).into_iter().map(move |mut t| {
                        t.scenario_id = format!("s{g}");
                        t
                    })
                })
                .collect()
        };
        // Half flat (8 of 16): the 8 needed, plus 8 to replace the half expected flat.
        assert_eq!(first_round_extra(&previous(8, 8), 8, &cfg), 8);
        // None flat: one more, as a replacement round's smoothing asks.
        assert_eq!(first_round_extra(&previous(0, 8), 8, &cfg), 1);
        // Mostly flat: many (the step caps them at `max_oversample`).
        assert_eq!(first_round_extra(&previous(14, 2), 8, &cfg), 40);
        assert_eq!(first_round_extra(&[], 8, &cfg), 0, "no previous step: the step's own draw");
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
    fn the_policy_lag_counts_steps_from_the_oldest_sampler_to_the_trainer() {
        let played_by = |models: &[&str]| -> Vec<Trajectory> {
            models.iter().enumerate().map(|(i, m)| Trajectory::start("s", ta_types::trajectory::GroupRef { step: 3, index: i as u32 }, *m, vec![])).collect()
        };
        // Step 3 trains on the adapter of step 2: sampled by it, on-policy.
        assert_eq!(policy_lag(&played_by(&[&adapter_name(2), &adapter_name(2)]), 3), 0);
        // Played ahead by step 1's adapter while step 2 trained; a resumed attempt mixes both.
        assert_eq!(policy_lag(&played_by(&[&adapter_name(1), &adapter_name(2)]), 3), 1);
        // The base model and the initial adapter are the policy before step 1.
        assert_eq!(policy_lag(&played_by(&["init"]), 1), 0);
        assert_eq!(policy_lag(&played_by(&["init", "Qwen/Qwen2.5-0.5B"]), 2), 1);
    }

    #[test]
    fn judge_cost_before_a_resume_is_the_last_recorded_total() {
        let dir = tempfile::tempdir().unwrap();
        let m = dir.path().join("metrics.jsonl");
        assert_eq!(prior_judge_cost(&m), 0.0);
        std::fs::write(&m, "{\"step\": 1, \"judge_cost_total_usd\": 0.5}\n{\"step\": 2, \"judge_cost_total_usd\": 1.25}\n{\"step\": 2, \"val_reward\": 1}\n").unwrap();
        assert_eq!(prior_judge_cost(&m), 1.25);
    }
}
