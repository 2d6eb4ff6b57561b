//! Checking tasks by running them: a solver attempts each task `k` times through the real
//! server with the agent loop, into a resumable trajectories file; then the final answers of
//! each task are compared ([`crate::agree`]).

use std::future::Future;
use std::path::Path;

use indicatif::ProgressBar;
use ta_chat::ChatClient;
use ta_reward::cost::Usage;
use ta_rollout::runner::{group_jobs, play_resumable};
use ta_rollout::{AgentConfig, ToolHost};
use ta_types::{Outcome, Scenario, Trajectory};

use crate::generate::Teacher;

/// How to solve.
#[derive(Debug, Clone)]
pub struct SolveOptions {
    pub agent: AgentConfig,
    /// Attempts per task (k).
    pub attempts: u32,
    pub concurrency: usize,
    /// Stop starting new tasks once the total spend reaches this.
    pub budget_usd: Option<f64>,
    /// On a rerun, play again the episodes that ended in `error`.
    pub retry_failed: bool,
}

/// The solver's episodes, and whether solving stopped early.
pub struct Solved {
    pub trajectories: Vec<Trajectory>,
    pub interrupted: bool,
    pub budget_reached: bool,
}

/// Tasks played between two budget checks.
const CHUNK: usize = 8;

/// Plays `attempts` episodes of every scenario into `path` (kept across runs: re-running skips
/// finished episodes). The solver's token usage is charged to `solver`; `spent` gives the total
/// spend so far (teacher and solver) for the budget.
#[allow(clippy::too_many_arguments)]
pub async fn solve<T: ToolHost>(
    solver: &Teacher,
    chat: &ChatClient,
    tools: &T,
    system_prompt: &str,
    scenarios: &[Scenario],
    opts: &SolveOptions,
    path: &Path,
    progress: &ProgressBar,
    spent: impl Fn() -> f64,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<Solved> {
    tokio::pin!(shutdown);
    let mut out = Solved { trajectories: Vec::new(), interrupted: false, budget_reached: false };
    progress.set_length((scenarios.len() * opts.attempts as usize) as u64);
    for chunk in scenarios.chunks(CHUNK) {
        if opts.budget_usd.is_some_and(|b| spent() >= b) {
            out.budget_reached = true;
            break;
        }
        let jobs = group_jobs(chunk, opts.attempts, 0);
        // The runner's own bar would count one chunk; ours counts the whole job.
        let chunk_bar = ProgressBar::hidden();
        let played =
            play_resumable(chat, &solver.endpoint.model, tools, system_prompt, jobs, &opts.agent, opts.concurrency, path, opts.retry_failed, &chunk_bar, &mut shutdown)
                .await?;
        progress.inc((chunk.len() * opts.attempts as usize) as u64);
        // The file holds every chunk's episodes; this chunk's (from an earlier run too: the
        // budget covers the whole job) are charged once, here.
        let ids: std::collections::HashSet<&str> = chunk.iter().map(|s| s.id.as_str()).collect();
        let this: Vec<Trajectory> = played.trajectories.into_iter().filter(|t| ids.contains(t.scenario_id.as_str())).collect();
        for t in &this {
            solver.account(u64::from(t.num_turns), usage_of(t));
        }
        let answered = this.iter().filter(|t| completed_answer(t).is_some()).count();
        progress.set_message(format!("{answered} answers in the last {} tasks, ${:.4}", chunk.len(), spent()));
        out.trajectories.extend(this);
        if played.interrupted {
            out.interrupted = true;
            break;
        }
    }
    Ok(out)
}

/// The tokens an episode used, as the server reported them.
pub fn usage_of(t: &Trajectory) -> Usage {
    Usage { input_tokens: t.turns.iter().map(|u| u.prompt_tokens).sum(), output_tokens: t.turns.iter().map(|u| u.completion_tokens).sum() }
}

/// The final answer of an episode that completed (`complete_task`), for agreement.
pub fn completed_answer(t: &Trajectory) -> Option<&str> {
    (t.outcome == Outcome::Completed).then_some(t.final_answer.as_deref()).flatten()
}
