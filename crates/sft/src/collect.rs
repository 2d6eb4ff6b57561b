//! Collecting traces with a model: a teacher behind an OpenAI-compatible API, or the model being
//! trained sampling at high `n` and temperature (rejection sampling; curation keeps the episodes
//! whose ground truth passes). The episodes are the agent loop's, played by the rollout runner
//! into `trajectories.jsonl` (so an interrupted collection continues), scored, and turned into
//! `traces.jsonl`.

use std::future::Future;
use std::path::Path;

use indicatif::ProgressBar;
use ta_chat::ChatClient;
use ta_reward::RewardConfig;
use ta_rollout::runner::{AllFailed, Summary, check_not_all_failed, group_jobs, play_resumable};
use ta_rollout::{AgentConfig, ToolHost};
use ta_types::Scenario;

use crate::SftError;
use ta_types::trace::{TRACES_FILE, Trace, write_traces};

/// How to collect.
#[derive(Debug, Clone)]
pub struct CollectOptions {
    pub agent: AgentConfig,
    /// Episodes per scenario.
    pub n: u32,
    pub concurrency: usize,
    /// Play an earlier run's errored episodes again.
    pub retry_failed: bool,
    /// Written into every trace: the teacher's name or `rejection-sampling`.
    pub source: String,
    pub reward: RewardConfig,
}

/// What a collection produced.
#[derive(Debug)]
pub struct Collected {
    pub traces: Vec<Trace>,
    pub summary: Summary,
    /// Episodes kept from an earlier, interrupted collection in the same directory.
    pub kept: usize,
    pub interrupted: bool,
    /// Set when every episode errored (the model or MCP server failed).
    pub all_failed: Option<AllFailed>,
}

/// Plays `opts.n` episodes of every scenario with `model` and writes `out/trajectories.jsonl`
/// (raw, resumable), `out/traces.jsonl` and `out/summary.json`.
#[allow(clippy::too_many_arguments)]
pub async fn collect<T: ToolHost>(
    chat: &ChatClient,
    model: &str,
    tools: &T,
    system_prompt: &str,
    scenarios: &[Scenario],
    opts: &CollectOptions,
    out: &Path,
    progress: &ProgressBar,
    shutdown: impl Future<Output = ()>,
) -> Result<Collected, SftError> {
    let io = |e| SftError::io(out, e);
    std::fs::create_dir_all(out).map_err(io)?;
    let path = out.join("trajectories.jsonl");
    let jobs = group_jobs(scenarios, opts.n, 0);
    let played =
        play_resumable(chat, model, tools, system_prompt, jobs, &opts.agent, opts.concurrency, &path, opts.retry_failed, progress, shutdown).await.map_err(io)?;
    let mut trajectories = played.trajectories;
    ta_reward::score_all(&opts.reward, scenarios, &mut trajectories);
    ta_types::trajectory::write_trajectories(&path, &trajectories).map_err(io)?;
    let by_id: std::collections::HashMap<&str, &Scenario> = scenarios.iter().map(|s| (s.id.as_str(), s)).collect();
    let traces: Vec<Trace> = trajectories.iter().map(|t| Trace::from_trajectory(t, by_id.get(t.scenario_id.as_str()).copied(), tools.specs(), &opts.source)).collect();
    write_traces(&out.join(TRACES_FILE), &traces).map_err(io)?;
    let summary = Summary::of(&trajectories);
    std::fs::write(out.join("summary.json"), serde_json::to_vec_pretty(&summary).expect("summary serialises")).map_err(io)?;
    let all_failed = check_not_all_failed(&trajectories).err();
    Ok(Collected { traces, summary, kept: played.kept, interrupted: played.interrupted, all_failed })
}
