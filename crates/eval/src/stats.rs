//! `train-agent stats DIR`: the summary of a run (GRPO or SFT), evaluation or rollout directory as terminal
//! text (the same numbers as the report's summary and tables).

use std::fmt::Write;
use std::path::Path;

use serde_json::Value;

use crate::rundir::{Kind, RunDir, RunDirError};
use ta_metrics::{Metrics, metrics_table};

/// Training steps shown in the step table at most (evenly spaced, the last always).
const MAX_STEP_ROWS: usize = 20;

pub fn render(dir: &Path) -> Result<String, RunDirError> {
    let run = RunDir::open(dir)?;
    let mut out = String::new();
    match run.kind {
        Kind::Train => training_summary(&run, &mut out),
        Kind::Sft => sft_summary(&run, &mut out),
        Kind::Eval | Kind::Rollout => {}
    }
    if let Some(e) = &run.eval {
        let models: Vec<String> = e.models.iter().map(|m| format!("{} = {}", m.label, m.source)).collect();
        writeln!(
            out,
            "evaluation of {} on {} ({}), {} rollout(s) per scenario, {:.0} s",
            models.join(", "),
            e.dataset,
            e.split.as_deref().unwrap_or("all"),
            e.rollouts_per_scenario,
            e.wall_s
        )
        .ok();
    }
    let evaluated = run.evaluated()?;
    if !evaluated.is_empty() {
        if run.kind == Kind::Train {
            writeln!(out, "\nvalidation (the base model, the starting adapter when there was one, the last validated step):").ok();
        }
        let metrics: Vec<(String, Metrics)> = evaluated.iter().map(|(l, ts)| (l.clone(), Metrics::of(ts))).collect();
        let columns: Vec<(&str, &Metrics)> = metrics.iter().map(|(l, m)| (l.as_str(), m)).collect();
        writeln!(out, "{}", metrics_table(&columns)).ok();
        if let Some((a, b, c)) = RunDir::comparison(&evaluated).filter(|(_, _, c)| !c.rows.is_empty()) {
            writeln!(out, "\n{}", c.table(a, b)).ok();
        }
    }
    let sampled = run.evaluated_sampled()?;
    if !sampled.is_empty() {
        writeln!(out, "\nsampled validation (rollout.eval_rollouts episodes per task at the rollout temperature):").ok();
        let metrics: Vec<(String, Metrics)> = sampled.iter().map(|(l, ts)| (l.clone(), Metrics::of(ts))).collect();
        let columns: Vec<(&str, &Metrics)> = metrics.iter().map(|(l, m)| (l.as_str(), m)).collect();
        writeln!(out, "{}", metrics_table(&columns)).ok();
        if let Some(p) = RunDir::comparison(&sampled).and_then(|(a, b, c)| Some(c.paired?.line(a, b))) {
            writeln!(out, "{p}").ok();
        }
    }
    Ok(out.trim_end().to_string())
}

/// A metric with `d` decimals, `-` when the row has none.
fn number(v: &Value, d: usize) -> String {
    v.as_f64().map_or("-".into(), |x| format!("{x:.d$}"))
}

/// Which of `n` step rows a table shows: all, or [`MAX_STEP_ROWS`] evenly spaced ones with the
/// first and the last.
fn shown_steps(n: usize) -> Vec<usize> {
    if n <= MAX_STEP_ROWS { (0..n).collect() } else { (0..MAX_STEP_ROWS).map(|i| i * (n - 1) / (MAX_STEP_ROWS - 1)).collect() }
}

fn sft_summary(run: &RunDir, out: &mut String) {
    let steps = run.sft_steps();
    writeln!(out, "SFT run {}: {}", run.path.display(), run.base_model().unwrap_or_else(|| "?".into())).ok();
    writeln!(out, "{} steps, {:.0} s of training", steps.len(), run.training_seconds()).ok();
    if let Some(((a_step, a), (b_step, b))) = run.sft_eval_loss() {
        writeln!(out, "held-out loss {a:.4} (step {a_step}) -> {b:.4} (step {b_step})").ok();
    }
    if steps.is_empty() {
        return;
    }
    let f = number;
    writeln!(out, "\n{:>5}  {:>6}  {:>10}  {:>9}  {:>9}  {:>8}  {:>8}", "step", "epoch", "train loss", "held-out", "lr", "grad", "tok/s").ok();
    for i in shown_steps(steps.len()) {
        let r = steps[i];
        writeln!(
            out,
            "{:>5}  {:>6}  {:>10}  {:>9}  {:>9}  {:>8}  {:>8}",
            r["step"].to_string(),
            f(&r["epoch"], 2),
            f(&r["train_loss"], 4),
            f(&r["eval_loss"], 4),
            r["lr"].as_f64().map_or("-".into(), |x| format!("{x:.2e}")),
            f(&r["grad_norm"], 3),
            f(&r["tokens_per_s"], 0),
        )
        .ok();
    }
}

fn training_summary(run: &RunDir, out: &mut String) {
    let steps = run.step_rows();
    let base = run.base_model().unwrap_or_else(|| "?".into());
    let server = run.run_info.as_ref().and_then(|i| i["server"].as_str()).map(|s| format!(" on {s}")).unwrap_or_default();
    writeln!(out, "training run {}: {base}{server}", run.path.display()).ok();
    let gpu = run.gpu_hours().map_or("CPU".into(), |h| format!("{h:.2} GPU hours"));
    let judge = run.judge_cost_usd().map_or(String::new(), |c| format!(", judge ${c:.2}"));
    writeln!(out, "{} steps, {:.0} s of training ({gpu}{judge})", steps.len(), run.training_seconds()).ok();
    if steps.is_empty() {
        return;
    }
    let f = number;
    writeln!(out, "\n{:>5}  {:>7}  {:>10}  {:>5}  {:>8}  {:>8}  {:>8}  {:>7}", "step", "reward", "completion", "flat", "loss", "kl", "grad", "time_s").ok();
    for i in shown_steps(steps.len()) {
        let r = steps[i];
        writeln!(
            out,
            "{:>5}  {:>7}  {:>10}  {:>5}  {:>8}  {:>8}  {:>8}  {:>7}",
            r["step"].to_string(),
            f(&r["reward"], 3),
            f(&r["completion_rate"], 3),
            format!("{}/{}", r["groups_zero_variance"], r["groups"]),
            f(&r["trainer"]["loss"], 4),
            f(&r["trainer"]["kl"], 4),
            f(&r["trainer"]["grad_norm"], 3),
            f(&r["time"]["step_s"], 1),
        )
        .ok();
    }
}
