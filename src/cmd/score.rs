//! `train-agent score`: rescore existing trajectories offline with an LLM judge (and ground
//! truth, rules and custom rewards), write the scores and explanations next to them, and report
//! how well the judge agrees with ground truth. Handy to compare judges before paying for one in
//! a training run.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use ta_reward::agreement::agreement;
use ta_reward::{JudgeStats, RewardConfig, Rewarder};

use crate::args::JudgeArgs;
use crate::stdout::outln;
use ta_types::trajectory::{read_trajectories, write_trajectories};

#[derive(clap::Args)]
pub struct Args {
    /// A trajectories JSONL file, or a directory of them (e.g. a run's eval/ or trajectories/).
    #[arg(long, value_name = "FILE|DIR")]
    trajectories: PathBuf,
    /// Scenarios (JSON array or JSONL) to recompute ground truth from; without them, the ground
    /// truth already in the trajectories is kept.
    #[arg(long, value_name = "FILE")]
    scenarios: Option<PathBuf>,
    /// A run config (TOML, e.g. a run's config.toml) whose [reward] section to use: weights,
    /// rules, custom rewards, judge settings. Flags override it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(flatten)]
    judge: JudgeArgs,
}

pub async fn run(args: Args) -> Result<()> {
    let mut reward = match &args.config {
        Some(p) => ta_train::TrainConfig::load(p)?.reward,
        None => RewardConfig::default(),
    };
    args.judge.apply(&mut reward)?;
    if !reward.judge.enabled() {
        bail!("no judge to score with\nhint: pass --judge-model, e.g. openai/gpt-4o-mini or local/base --judge-base-url http://127.0.0.1:8000/v1");
    }
    let scenarios = match &args.scenarios {
        Some(p) => ta_types::scenario::load_scenarios(p)?,
        None => Vec::new(),
    };
    let files = input_files(&args.trajectories)?;
    let slug: String = reward.judge.model.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' { c } else { '-' }).collect();
    let dir = files[0].parent().unwrap_or(Path::new(".")).to_path_buf();
    let rewarder = Rewarder::new(&reward, Some(&dir.join("judge-cache.jsonl")))?;
    let judge = rewarder.judge().expect("a judge is configured");
    if !judge.priced() {
        eprintln!("warning: no price known for {}; add it under [reward.judge.prices] in --config to count its cost", reward.judge.model);
    }

    let mut all = Vec::new();
    let mut before = JudgeStats::default();
    for file in &files {
        let mut trajectories = read_trajectories(file).with_context(|| format!("cannot read trajectories from {}", file.display()))?;
        if trajectories.is_empty() {
            continue;
        }
        rewarder.score(&scenarios, &mut trajectories).await?;
        let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("trajectories");
        let out = file.with_file_name(format!("{stem}.judge-{slug}.jsonl"));
        write_trajectories(&out, &trajectories).with_context(|| format!("cannot write {}", out.display()))?;
        let now = judge.stats();
        let d = now.since(&before);
        before = now;
        outln!(
            "{}: {} trajectories, {} groups judged ({} skipped, {} from cache), ${:.4} -> {}",
            file.display(),
            trajectories.len(),
            d.groups,
            d.skipped,
            d.cache_hits,
            d.cost_usd,
            out.display()
        )?;
        all.extend(trajectories);
    }
    let stats = judge.stats();
    let a = agreement(&all);
    let pct = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{:.1}%", 100.0 * v));
    outln!("judge               {}", reward.judge.model)?;
    outln!("trajectories        {}", all.len())?;
    outln!("groups              {} judged, {} skipped, {} from cache", stats.groups, stats.skipped, stats.cache_hits)?;
    outln!("tokens              {} in, {} out", stats.usage.input_tokens, stats.usage.output_tokens)?;
    outln!("cost                ${:.4}", stats.cost_usd)?;
    if a.compared == 0 {
        outln!("agreement           - (no trajectory has both a judge score and ground truth; pass --scenarios with `expected` answers)")?;
    } else {
        outln!(
            "agreement           {} of {} ({}) with ground truth at 0.5; judge-only passes {}, ground-truth-only passes {}",
            a.agree,
            a.compared,
            pct(a.rate),
            a.judge_only,
            a.ground_truth_only
        )?;
        outln!("correlation         {}", a.correlation.map_or("- (a constant score)".to_string(), |r| format!("{r:.3}")))?;
    }
    let summary = dir.join(format!("judge-{slug}.summary.json"));
    let body = serde_json::json!({"judge": reward.judge.model, "files": files, "trajectories": all.len(), "stats": stats, "agreement": a});
    std::fs::write(&summary, serde_json::to_vec_pretty(&body)?).with_context(|| format!("cannot write {}", summary.display()))?;
    outln!("summary             {}", summary.display())?;
    Ok(())
}

/// The file itself, or the `*.jsonl` files of a directory (not earlier `score` outputs).
fn input_files(path: &Path) -> Result<Vec<PathBuf>> {
    if !path.is_dir() {
        anyhow::ensure!(path.exists(), "{} does not exist\nhint: pass a trajectories .jsonl file or a directory of them", path.display());
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)
        .with_context(|| format!("cannot list {}", path.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl") && !p.to_string_lossy().contains(".judge-") && !p.ends_with("judge-cache.jsonl"))
        .collect();
    files.sort();
    anyhow::ensure!(!files.is_empty(), "no .jsonl trajectories in {}", path.display());
    Ok(files)
}
