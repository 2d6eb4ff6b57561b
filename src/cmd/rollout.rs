//! `train-agent rollout`: play scenarios against an MCP server and write scored trajectories.

use std::path::PathBuf;

use anyhow::Result;
use indicatif::ProgressBar;
use ta_rollout::runner::{Summary, check_not_all_failed, group_jobs, play_resumable};

use crate::args::{EpisodeArgs, EpisodeDefaults, IsolationArgs, ModelArgs, ResumeArgs, ScenarioArgs, ServerArgs};
use crate::interrupted::Interrupted;
use crate::setup::{RunSetup, check_rewards, load_scenarios};
use crate::stdout::outln;

/// A rollout samples (0.7) rather than playing greedily, to show what the model can do.
const EPISODE: EpisodeDefaults = EpisodeDefaults { temperature: Some(0.7), ..EpisodeDefaults::COMMON };

#[derive(clap::Args)]
#[command(mut_args = |a| EPISODE.show(a))]
pub struct Args {
    #[command(flatten)]
    server: ServerArgs,
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    scenarios: ScenarioArgs,
    /// Only scenarios of this split (train or validation).
    #[arg(long, value_parser = clap::builder::ValueParser::new(|s: &str| s.parse::<ta_types::Split>()))]
    split: Option<ta_types::Split>,
    /// Episodes played per scenario.
    #[arg(long, alias = "rollouts-per-scenario", default_value_t = 1)]
    rollouts: u32,
    /// Output directory: trajectories.jsonl, summary.json, logs/. Re-running continues: finished
    /// episodes are kept and skipped, errored ones played again (see --retry-failed).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    #[command(flatten)]
    episode: EpisodeArgs,
    #[command(flatten)]
    resume: ResumeArgs,
    #[command(flatten)]
    judge: crate::args::JudgeArgs,
    #[command(flatten)]
    isolation: IsolationArgs,
}

pub async fn run(args: Args) -> Result<()> {
    let scenarios = load_scenarios(&args.scenarios, |all| {
        if let Some(split) = args.split {
            all.retain(|s| s.split == Some(split));
        }
    })?;
    anyhow::ensure!(!scenarios.is_empty(), "no scenarios left in {} after --split/--limit", args.scenarios.scenarios.display());
    let mut reward = ta_reward::RewardConfig::default();
    args.judge.apply(&mut reward)?;
    check_rewards(&reward, args.model.base_url.is_none().then_some(crate::args::BASE_NAME))?;
    if reward.judge.model.starts_with("local/") && reward.judge.base_url.is_none() && args.model.base_url.is_some() {
        anyhow::bail!("the local judge {} needs --judge-base-url when the model is not the embedded engine", reward.judge.model);
    }
    let _lock = ta_eval::rundir::RunLock::acquire(&args.out)?;

    let setup = RunSetup::start(&args.out, &args.server, &args.isolation.settings(), &scenarios, args.episode.system_prompt.as_deref()).await?;
    let endpoint = setup.model(&args.model).await?;

    let path = args.out.join("trajectories.jsonl");
    let jobs = group_jobs(&scenarios, args.rollouts, 0);
    let cfg = args.episode.agent_config(&EPISODE, endpoint.record_tokens);
    let bar = ProgressBar::new(0);
    bar.set_prefix("rollout");
    let shutdown = crate::interrupted::ctrl_c();
    let result = play_resumable(
        &endpoint.chat,
        &endpoint.model,
        &setup.tools,
        &setup.system_prompt,
        jobs,
        &cfg,
        args.episode.concurrency(&EPISODE),
        &path,
        args.resume.retry_failed,
        &bar,
        shutdown,
    )
    .await?;
    bar.finish();
    if result.kept > 0 {
        eprintln!("{} finished episodes kept from an earlier run", result.kept);
    }
    if result.replayed > 0 {
        eprintln!("{} errored episodes of an earlier run played again (--retry-failed)", result.replayed);
    }
    let mut finished = result.trajectories;

    if reward.judge.model.starts_with("local/") && reward.judge.base_url.is_none() {
        // A local judge without a URL is the engine this command started.
        reward.judge.base_url = endpoint.engine.as_ref().map(|e| e.client().base_url());
    }
    let rewarder = ta_reward::Rewarder::new(&reward, Some(&args.out.join("judge-cache.jsonl")))?;
    rewarder.score(&scenarios, &mut finished).await?;
    ta_types::trajectory::write_trajectories(&path, &finished)?;
    if let Some(judge) = rewarder.judge() {
        let s = judge.stats();
        eprintln!(
            "judge {}: {} groups ({} skipped, {} from cache), {} + {} tokens, ${:.4}",
            reward.judge.model, s.groups, s.skipped, s.cache_hits, s.usage.input_tokens, s.usage.output_tokens, s.cost_usd
        );
    }

    let summary = Summary::of(&finished);
    let mut summary_json = serde_json::to_value(&summary)?;
    if let Some(judge) = rewarder.judge() {
        summary_json["judge"] = serde_json::json!({"model": reward.judge.model, "stats": judge.stats()});
    }
    std::fs::write(args.out.join("summary.json"), serde_json::to_vec_pretty(&summary_json)?)?;
    // Printed before the engine and servers stop, said after: a closed stdout stops nothing early.
    let printed = outln!("{summary}").and_then(|()| outln!("trajectories: {}", path.display()));
    if let Some(engine) = endpoint.engine {
        engine.shutdown().await;
    }
    setup.close().await;
    if result.interrupted {
        return Err(Interrupted::episodes(finished.len()).into());
    }
    check_not_all_failed(&finished)?;
    Ok(printed?)
}
