//! Plays many episodes concurrently (bounded), shows progress, and writes each trajectory the
//! moment it finishes, so an interruption keeps every finished one.

use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::path::Path;

use futures::StreamExt;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use ta_chat::ChatClient;
use ta_types::trajectory::{GroupRef, TrajectoryWriter, read_trajectories, write_trajectories};
use ta_types::{Message, Outcome, Scenario, Trajectory};

use crate::agent::{AgentConfig, run_episode};
use crate::job::Job;
use crate::tools::ToolHost;

/// `rollouts_per_scenario` jobs for each scenario, for training step `step`.
pub fn group_jobs(scenarios: &[Scenario], rollouts_per_scenario: u32, step: u64) -> Vec<Job> {
    scenarios.iter().flat_map(|s| (0..rollouts_per_scenario).map(move |index| Job { scenario: s.clone(), group: GroupRef { step, index } })).collect()
}

/// How a batch of rollouts ended.
pub struct RunResult {
    pub trajectories: Vec<Trajectory>,
    /// True when `shutdown` fired before every job finished.
    pub interrupted: bool,
}

/// Runs `jobs` with at most `concurrency` in flight, appending each finished trajectory to
/// `writer`. When `shutdown` completes (Ctrl-C), unfinished episodes are dropped and the
/// finished ones are returned.
#[allow(clippy::too_many_arguments)]
pub async fn run_jobs<T: ToolHost>(
    chat: &ChatClient,
    model: &str,
    tools: &T,
    system_prompt: &str,
    jobs: Vec<Job>,
    cfg: &AgentConfig,
    concurrency: usize,
    writer: &mut TrajectoryWriter,
    progress: &ProgressBar,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<RunResult> {
    progress.set_length(jobs.len() as u64);
    progress.set_style(ProgressStyle::with_template("{prefix:>10} [{bar:30}] {pos}/{len} {msg} ({elapsed}, eta {eta})").expect("valid template").progress_chars("=> "));
    let mut stream = futures::stream::iter(jobs).map(|job| async move { play(chat, model, tools, system_prompt, &job, cfg).await }).buffer_unordered(concurrency.max(1));
    let mut out = Vec::new();
    let mut completed = 0usize;
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            next = stream.next() => match next {
                Some(t) => {
                    writer.write(&t)?;
                    completed += usize::from(t.outcome == Outcome::Completed);
                    progress.inc(1);
                    progress.set_message(format!("completed {completed}/{}", out.len() + 1));
                    out.push(t);
                }
                None => return Ok(RunResult { trajectories: out, interrupted: false }),
            },
            _ = &mut shutdown => return Ok(RunResult { trajectories: out, interrupted: true }),
        }
    }
}

/// Plays one job in the world the host readies for it (see [`ToolHost::begin`]).
async fn play<T: ToolHost>(chat: &ChatClient, model: &str, tools: &T, system_prompt: &str, job: &Job, cfg: &AgentConfig) -> Trajectory {
    match tools.begin(job).await {
        Ok(None) => run_episode(chat, model, tools, system_prompt, &job.scenario, job.group, cfg).await,
        Ok(Some(own)) => {
            let mut t = run_episode(chat, model, &own, system_prompt, &job.scenario, job.group, cfg).await;
            own.finish(&mut t).await;
            t
        }
        Err(e) => {
            let messages = vec![Message::system(system_prompt), Message::user(&job.scenario.task)];
            let mut t = Trajectory::start(&job.scenario.id, job.group, model, messages);
            t.outcome = Outcome::Error;
            t.error = Some(format!("the episode's MCP server could not be readied: {e}"));
            t
        }
    }
}

/// What [`play_resumable`] found and played.
pub struct Resumed {
    /// Every trajectory in the file: those kept from an earlier run, then the new ones.
    pub trajectories: Vec<Trajectory>,
    /// How many were kept from an earlier run (their jobs were skipped).
    pub kept: usize,
    /// Errored episodes of an earlier run that were played again.
    pub replayed: usize,
    pub interrupted: bool,
}

/// How to continue a trajectories file an earlier run left: which episodes to keep and which
/// jobs are left to play. One owner of the rule for `rollout`, `eval`, `collect` and training.
pub struct ResumePlan {
    /// Finished episodes kept from the file.
    pub kept: Vec<Trajectory>,
    /// Jobs not covered by a kept episode.
    pub jobs: Vec<Job>,
    /// Errored episodes dropped from the file to be played again (`retry_failed`).
    pub replayed: usize,
    /// The first kept episode that none of the jobs asked for (see [`ResumePlan::foreign`]).
    foreign: Option<usize>,
}

impl ResumePlan {
    /// Reads `path` (absent: nothing kept). With `retry_failed`, episodes whose outcome is
    /// `error` (the model server or MCP server failed, not the model) are not kept, so their
    /// jobs are played again; without it every earlier episode counts as finished.
    pub fn read(path: &Path, jobs: Vec<Job>, retry_failed: bool) -> std::io::Result<ResumePlan> {
        let earlier = if path.exists() { read_trajectories(path)? } else { Vec::new() };
        let (kept, failed): (Vec<Trajectory>, Vec<Trajectory>) = earlier.into_iter().partition(|t| !(retry_failed && t.outcome == Outcome::Error));
        let wanted: HashSet<(&str, u32)> = jobs.iter().map(|j| (j.scenario.id.as_str(), j.group.index)).collect();
        let foreign = kept.iter().position(|t| !wanted.contains(&(t.scenario_id.as_str(), t.group.index)));
        let done: HashSet<(&str, u32)> = kept.iter().map(|t| (t.scenario_id.as_str(), t.group.index)).collect();
        let jobs = jobs.into_iter().filter(|j| !done.contains(&(j.scenario.id.as_str(), j.group.index))).collect();
        Ok(ResumePlan { replayed: failed.len(), kept, jobs, foreign })
    }

    /// A kept episode that none of the jobs asked for: the file was written by a run with other
    /// scenarios or rollouts. `rollout` keeps such episodes; `eval` refuses the file, as one
    /// evaluation's numbers must come from its own scenarios only.
    pub fn foreign(&self) -> Option<&Trajectory> {
        self.foreign.map(|i| &self.kept[i])
    }

    /// Opens `path` for appending the new episodes; when errored ones are to be replayed, the
    /// file is first rewritten (atomically) without them.
    pub fn writer(&self, path: &Path) -> std::io::Result<TrajectoryWriter> {
        if self.replayed > 0 {
            write_trajectories(path, &self.kept)?;
        }
        TrajectoryWriter::append(path)
    }

    /// Plays the jobs left into `path` (see [`ResumePlan::writer`]), after the kept episodes:
    /// the one way every command continues a trajectories file. A caller that checks the plan
    /// first ([`ResumePlan::foreign`]) or reports it before playing reads it, then calls this.
    #[allow(clippy::too_many_arguments)]
    pub async fn play<T: ToolHost>(
        self,
        chat: &ChatClient,
        model: &str,
        tools: &T,
        system_prompt: &str,
        cfg: &AgentConfig,
        concurrency: usize,
        path: &Path,
        progress: &ProgressBar,
        shutdown: impl Future<Output = ()>,
    ) -> std::io::Result<Resumed> {
        let mut writer = self.writer(path)?;
        let ResumePlan { kept: mut trajectories, jobs, replayed, .. } = self;
        let kept = trajectories.len();
        let result = run_jobs(chat, model, tools, system_prompt, jobs, cfg, concurrency, &mut writer, progress, shutdown).await?;
        trajectories.extend(result.trajectories);
        Ok(Resumed { trajectories, kept, replayed, interrupted: result.interrupted })
    }
}

/// Plays `jobs` into the JSONL file at `path`, keeping the trajectories an earlier (interrupted)
/// run left there and skipping their jobs, so running the same command again continues; with
/// `retry_failed`, the earlier run's errored episodes are played again.
#[allow(clippy::too_many_arguments)]
pub async fn play_resumable<T: ToolHost>(
    chat: &ChatClient,
    model: &str,
    tools: &T,
    system_prompt: &str,
    jobs: Vec<Job>,
    cfg: &AgentConfig,
    concurrency: usize,
    path: &Path,
    retry_failed: bool,
    progress: &ProgressBar,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<Resumed> {
    ResumePlan::read(path, jobs, retry_failed)?.play(chat, model, tools, system_prompt, cfg, concurrency, path, progress, shutdown).await
}

/// Every episode of a run failed (the model server or MCP server, not the model): the run
/// produced nothing worth keeping, so the command fails.
#[derive(Debug, thiserror::Error)]
#[error(
    "every episode failed ({count} of {count}); the first error: {first}\nhint: fix the cause (is the model server up and --base-url right? does the MCP server start?), then run the same command again: failed episodes are replayed (--retry-failed)"
)]
pub struct AllFailed {
    pub count: usize,
    pub first: String,
}

/// `Err` when `trajectories` is not empty and every one of them errored.
pub fn check_not_all_failed(trajectories: &[Trajectory]) -> Result<(), AllFailed> {
    if trajectories.is_empty() || trajectories.iter().any(|t| t.outcome != Outcome::Error) {
        return Ok(());
    }
    let first = trajectories.iter().find_map(|t| t.error.clone()).unwrap_or_else(|| "(no message recorded)".into());
    Err(AllFailed { count: trajectories.len(), first })
}

/// The numbers people compare between runs.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Summary {
    pub trajectories: usize,
    pub completion_rate: f64,
    pub mean_turns: f64,
    pub mean_tool_calls: f64,
    pub tool_errors: u64,
    pub malformed_calls: u64,
    pub recovered_errors: u64,
    pub mean_reward: Option<f64>,
    pub outcomes: BTreeMap<String, usize>,
}

impl Summary {
    pub fn of(trajectories: &[Trajectory]) -> Summary {
        let n = trajectories.len();
        let mean = |f: &dyn Fn(&Trajectory) -> f64| if n == 0 { 0.0 } else { trajectories.iter().map(f).sum::<f64>() / n as f64 };
        let rewards: Vec<f64> = trajectories.iter().filter_map(|t| t.reward).collect();
        let mut outcomes = BTreeMap::new();
        for t in trajectories {
            let key = serde_json::to_value(t.outcome).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
            *outcomes.entry(key).or_insert(0) += 1;
        }
        Summary {
            trajectories: n,
            completion_rate: mean(&|t| f64::from(u8::from(t.outcome == Outcome::Completed))),
            mean_turns: mean(&|t| f64::from(t.num_turns)),
            mean_tool_calls: mean(&|t| f64::from(t.tool_calls)),
            tool_errors: trajectories.iter().map(|t| u64::from(t.tool_errors)).sum(),
            malformed_calls: trajectories.iter().map(|t| u64::from(t.malformed_calls)).sum(),
            recovered_errors: trajectories.iter().map(|t| u64::from(t.recovered_errors)).sum(),
            mean_reward: (!rewards.is_empty()).then(|| rewards.iter().sum::<f64>() / rewards.len() as f64),
            outcomes,
        }
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "trajectories      {}", self.trajectories)?;
        writeln!(f, "completion rate   {:.1}%", 100.0 * self.completion_rate)?;
        writeln!(f, "mean turns        {:.2}", self.mean_turns)?;
        writeln!(f, "mean tool calls   {:.2}", self.mean_tool_calls)?;
        writeln!(f, "tool errors       {} ({} malformed, {} recovered)", self.tool_errors, self.malformed_calls, self.recovered_errors)?;
        if let Some(r) = self.mean_reward {
            writeln!(f, "mean reward       {r:.3}")?;
        }
        let outcomes: Vec<String> = self.outcomes.iter().map(|(k, v)| format!("{k} {v}")).collect();
        write!(f, "outcomes          {}", outcomes.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenarios(ids: &[&str]) -> Vec<Scenario> {
        ids.iter().map(|id| serde_json::from_value(serde_json::json!({"id": id, "task": "t"})).expect("scenario")).collect()
    }

    fn episode(id: &str, index: u32, outcome: Outcome) -> Trajectory {
        let mut t = Trajectory::start(id, GroupRef { step: 0, index }, "m", Vec::new());
        t.outcome = outcome;
        t
    }

    /// Kept episodes skip their jobs; with `retry_failed` errored ones are dropped and replayed.
    #[test]
    fn a_plan_keeps_finished_episodes_and_replays_errored_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        write_trajectories(&path, &[episode("a", 0, Outcome::Completed), episode("a", 1, Outcome::Error)]).unwrap();
        let plan = ResumePlan::read(&path, group_jobs(&scenarios(&["a", "b"]), 2, 0), true).unwrap();
        let left: Vec<_> = plan.jobs.iter().map(|j| (j.scenario.id.as_str(), j.group.index)).collect();
        assert_eq!((plan.kept.len(), plan.replayed), (1, 1));
        assert_eq!(left, [("a", 1), ("b", 0), ("b", 1)]);
        assert!(plan.foreign().is_none());

        let plan = ResumePlan::read(&path, group_jobs(&scenarios(&["a"]), 2, 0), false).unwrap();
        assert_eq!((plan.kept.len(), plan.replayed, plan.jobs.len()), (2, 0, 0), "without retry_failed an error counts as finished");
    }

    /// An episode no job asked for (another scenario, a higher rollout index) is reported.
    #[test]
    fn a_plan_names_episodes_of_another_run() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        write_trajectories(&path, &[episode("a", 0, Outcome::Completed), episode("a", 1, Outcome::Completed)]).unwrap();
        let plan = ResumePlan::read(&path, group_jobs(&scenarios(&["a"]), 1, 0), true).unwrap();
        assert_eq!(plan.foreign().map(|t| (t.scenario_id.as_str(), t.group.index)), Some(("a", 1)));
        assert!(ResumePlan::read(&dir.path().join("absent.jsonl"), Vec::new(), true).unwrap().foreign().is_none());
    }
}
