//! `train-agent scenarios frontier`: keep the scenarios a model solves sometimes but not always,
//! measured by a sampled `eval` of that model on them, so that GRPO's groups disagree and every
//! rollout carries a learning signal. The counting lives in `ta_eval::frontier`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use ta_eval::frontier::{FrontierSummary, pass_counts};
use ta_eval::rundir::RunDir;

use crate::stdout::outln;

#[derive(clap::Args)]
pub struct Args {
    /// The scenarios the evaluation played (e.g. a synth's scenarios.jsonl).
    #[arg(long, value_name = "FILE")]
    scenarios: PathBuf,
    /// An `eval` directory of the start model on those scenarios, with several sampled
    /// episodes per scenario: `eval --model SFT/final --split train --rollouts 8 --temperature 1.0`.
    #[arg(long, value_name = "DIR")]
    eval: PathBuf,
    /// Which of the evaluation's models (its label: `trained` for --model, `base`); default
    /// the last one evaluated.
    #[arg(long, value_name = "LABEL")]
    model: Option<String>,
    /// Where to write the frontier's scenarios (JSONL), each with its `pass_rate`.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Also write each template's weight (its share of failed episodes, at least 0.05) as JSON,
    /// for `scenarios synth --template-weights`: more of the shapes the model gets wrong.
    #[arg(long, value_name = "FILE")]
    weights: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<()> {
    let run = RunDir::open(&args.eval)?;
    let evaluated = run.evaluated()?;
    let labels: Vec<&str> = evaluated.iter().map(|(l, _)| l.as_str()).collect();
    let (label, trajectories) = match &args.model {
        Some(m) => evaluated.iter().find(|(l, _)| l == m).with_context(|| format!("{} has no model labelled {m}; it has: {}", args.eval.display(), labels.join(", ")))?,
        None => evaluated.last().with_context(|| format!("{} holds no evaluated model", args.eval.display()))?,
    };
    let counts = pass_counts(trajectories);
    if counts.values().all(|c| c.episodes < 2) {
        bail!("{} has one episode per scenario for {label}: a pass rate needs several\nhint: eval --rollouts 8 --temperature 1.0 --split train ...", args.eval.display());
    }
    let scenarios = ta_types::scenario::load_scenarios(&args.scenarios)?;
    let templates: std::collections::HashMap<&str, &str> = scenarios.iter().filter_map(|s| Some((s.id.as_str(), s.template()?))).collect();
    let template_of = |id: &str| templates.get(id).copied().unwrap_or("-").to_string();
    let summary = FrontierSummary::of(&counts, template_of);
    let mut file = std::io::BufWriter::new(std::fs::File::create(&args.out).with_context(|| format!("cannot write {}", args.out.display()))?);
    let mut kept = 0;
    for s in &scenarios {
        let Some(c) = counts.get(&s.id).filter(|c| c.on_frontier()) else { continue };
        let mut s = s.clone();
        s.extra.insert("pass_rate".into(), (c.passed as f64 / c.episodes as f64).into());
        serde_json::to_writer(&mut file, &s)?;
        file.write_all(b"\n")?;
        kept += 1;
    }
    file.flush()?;
    let share = |n: usize| 100.0 * n as f64 / summary.tasks.max(1) as f64;
    outln!("measured          {} scenarios ({label}, {} episodes)", summary.tasks, counts.values().map(|c| c.episodes).sum::<usize>())?;
    outln!("always solved     {} ({:.0}%)", summary.always, share(summary.always))?;
    outln!("never solved      {} ({:.0}%)", summary.never, share(summary.never))?;
    outln!("frontier          {} ({:.0}%): 0 < pass < episodes", summary.frontier, share(summary.frontier))?;
    outln!("per template      tasks  frontier  mean pass rate")?;
    for (t, (n, f, rate)) in &summary.per_group {
        outln!("  {:<24} {n:>5} {f:>9} {rate:>15.2}", ta_types::terminal::terminal_safe(t))?;
    }
    outln!("scenarios: {} ({kept})", args.out.display())?;
    if let Some(path) = &args.weights {
        let text = serde_json::to_string_pretty(&summary.weights())?;
        std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
        outln!("template weights: {}", path.display())?;
    }
    if kept == 0 {
        eprintln!("note: no scenario is on the frontier; GRPO on these would learn nothing (every group flat)");
    }
    Ok(())
}
