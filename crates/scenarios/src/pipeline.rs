//! The whole of `scenarios generate`: ask the teacher for tasks, dedupe them, have the solver
//! attempt each `k` times through the real server, keep the tasks whose answers agree (their
//! agreeing episodes become SFT traces) and whose calls a fresh server replays
//! ([`crate::replay`]), split train/validation without near-duplicate leakage,
//! and write `scenarios.jsonl`, `traces.jsonl` and `summary.json`.
//!
//! Interrupting is safe: the teacher's tasks are kept in `drafts.json` and the solver's episodes
//! in `solver-trajectories.jsonl`, so running the same command again pays for neither twice.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::path::{Path, PathBuf};

use indicatif::ProgressBar;
use serde::{Deserialize, Serialize};
use ta_chat::ChatClient;
use ta_reward::RewardConfig;
use ta_rollout::ToolHost;
use ta_types::trace::{TRACES_FILE, Trace, write_jsonl, write_traces};
use ta_types::{Difficulty, Scenario, Split, Trajectory};

use crate::agree::{agree, infer_expected};
use crate::discover::Surface;
use crate::generate::{GenerateCounts, GenerateError, GenerateOptions, Spend, Teacher, generate};
use crate::prompt::Draft;
use crate::replay::{self, Verdict};
use crate::solve::{SolveOptions, completed_answer, solve};
use crate::{dedupe, prompt};

/// `source` of the SFT traces built from the solver's agreeing episodes.
pub const SOURCE_TEACHER: &str = "teacher";
/// The scenarios file a generation directory writes.
pub const SCENARIOS_FILE: &str = "scenarios.jsonl";
const DRAFTS_FILE: &str = "drafts.json";
const SOLVER_FILE: &str = "solver-trajectories.jsonl";
/// Tag of tasks whose solution changes the server's state.
pub const TAG_CHANGES_STATE: &str = "changes_state";

#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error(transparent)]
    Generate(#[from] GenerateError),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: {message}\nhint: it was written by an earlier run in the same --out; delete it to generate new tasks")]
    Drafts { path: PathBuf, message: String },
    #[error("the replay's server failed: {0}\nhint: --no-replay keeps agreed tasks without replaying them")]
    Replay(String),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> PipelineError + '_ {
    move |source| PipelineError::Io { path: path.to_path_buf(), source }
}

/// Everything `scenarios generate` decides.
#[derive(Debug, Clone)]
pub struct PipelineOptions {
    pub generate: GenerateOptions,
    pub solve: SolveOptions,
    /// Agreeing answers needed (m of k).
    pub agree: usize,
    pub keep_unverified: bool,
    /// Tasks at least this similar (shingle Jaccard) to an earlier one are dropped.
    pub dedupe_threshold: f64,
    /// Tasks at least this similar stay on the same side of the split.
    pub split_threshold: f64,
    pub validation_fraction: f64,
    pub seed: u64,
    /// The prompt template and where it came from (`default` or a path).
    pub template: String,
    pub template_origin: String,
    /// The replay check ([`crate::replay`]); `None` keeps agreed tasks on agreement alone.
    pub replay: Option<ReplayOptions>,
}

/// What the replay check needs to know about the server.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    /// The tools that only read (`ta_walk::readable`): the only ones replayed.
    pub reads: HashSet<String>,
    /// Characters of a result the solver was shown (its `tool_result_max_chars`).
    pub view: usize,
}

/// How many tasks survived each stage.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Counts {
    pub generated: usize,
    pub schema_valid: usize,
    pub repaired: usize,
    pub invalid_replies: usize,
    pub dropped_replies: usize,
    pub deduped: usize,
    /// Tasks with at least one attempt that completed with an answer.
    pub solved: usize,
    /// Tasks whose answers agreed (m of k).
    pub agreed: usize,
    /// Unverified tasks kept (`--keep-unverified`).
    pub unverified: usize,
    /// Agreed tasks whose calls a fresh server reproduced ([`crate::replay`]).
    #[serde(default)]
    pub replayed: usize,
    /// Agreed tasks kept on agreement alone: a call went to a tool that may write.
    #[serde(default)]
    pub not_replayed: usize,
    /// Agreed tasks the replay dropped, by reason.
    #[serde(default)]
    pub replay_dropped: BTreeMap<String, usize>,
    pub kept: usize,
    pub train: usize,
    pub validation: usize,
    pub traces: usize,
}

/// What a generation run produced and cost.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub counts: Counts,
    pub teacher: String,
    pub teacher_spend: Spend,
    /// When a separate solver was used.
    pub solver: Option<String>,
    pub solver_spend: Option<Spend>,
    pub total_cost_usd: f64,
    /// Whether every cost was counted (models without a known price are not).
    pub cost_complete: bool,
    pub budget_usd: Option<f64>,
    pub budget_reached: bool,
    /// Ctrl-C stopped the solving: what is written covers the episodes played, and a rerun
    /// continues (a caller that skips a finished stage must not skip this one).
    pub interrupted: bool,
    /// The solver's episodes on disk (this run's and an earlier one's).
    pub episodes: usize,
    /// Kept tasks per difficulty level.
    pub difficulty: BTreeMap<u8, usize>,
    /// Server tools named by at least one kept task, and those named by none.
    pub tools_covered: Vec<String>,
    pub tools_uncovered: Vec<String>,
}

#[derive(Serialize, Deserialize)]
struct DraftsFile {
    teacher: String,
    counts: GenerateCounts,
    drafts: Vec<Draft>,
}

/// Runs the pipeline into `out`. `solver` is `None` when the teacher solves; `solver_chat` is the
/// OpenAI-compatible client the agent loop calls; `fresh` is a second server started the same
/// way, for the replay check. `say` receives one line per finished stage.
#[allow(clippy::too_many_arguments)]
pub async fn run<T: ToolHost, F: ToolHost>(
    teacher: &Teacher,
    solver: Option<&Teacher>,
    solver_chat: &ChatClient,
    tools: &T,
    fresh: &F,
    system_prompt: &str,
    surface: &Surface,
    opts: &PipelineOptions,
    out: &Path,
    progress: &ProgressBar,
    say: impl Fn(String),
    shutdown: impl Future<Output = ()>,
) -> Result<Report, PipelineError> {
    std::fs::create_dir_all(out).map_err(io(out))?;
    progress.set_style(indicatif::ProgressStyle::with_template("{prefix:>10} [{bar:30}] {pos}/{len} {msg} ({elapsed})").expect("valid template").progress_chars("=> "));
    let solving = solver.unwrap_or(teacher);
    let spent = || teacher.spend().cost_usd + solver.map_or(0.0, |s| s.spend().cost_usd);

    // 1. Tasks from the teacher (or from an earlier run's drafts.json).
    let drafts_path = out.join(DRAFTS_FILE);
    let (drafts, gen_counts) = if drafts_path.exists() {
        let text = std::fs::read_to_string(&drafts_path).map_err(io(&drafts_path))?;
        let file: DraftsFile = serde_json::from_str(&text).map_err(|e| PipelineError::Drafts { path: drafts_path.clone(), message: e.to_string() })?;
        say(format!("tasks             {} from an earlier run ({})", file.drafts.len(), drafts_path.display()));
        (file.drafts, file.counts)
    } else {
        progress.set_prefix("generate");
        let (drafts, counts) = generate(teacher, &opts.template, &opts.template_origin, surface, &opts.generate, progress).await?;
        let file = DraftsFile { teacher: teacher.name.clone(), counts, drafts };
        std::fs::write(&drafts_path, serde_json::to_vec_pretty(&file).expect("drafts serialise")).map_err(io(&drafts_path))?;
        (file.drafts, file.counts)
    };
    let mut counts = Counts {
        generated: gen_counts.generated,
        schema_valid: gen_counts.schema_valid,
        repaired: gen_counts.repaired,
        invalid_replies: gen_counts.invalid_replies,
        dropped_replies: gen_counts.dropped_replies,
        ..Default::default()
    };
    say(format!(
        "generated         {} tasks in {} replies; {} schema-valid ({} after a repair), {} replies invalid, {} dropped",
        counts.generated, gen_counts.replies, counts.schema_valid, counts.repaired, counts.invalid_replies, counts.dropped_replies
    ));

    // 2. Near-duplicates out, before paying for solving them.
    let texts: Vec<&str> = drafts.iter().map(|d| d.task.as_str()).collect();
    let unique = dedupe::dedupe(&texts, opts.dedupe_threshold);
    counts.deduped = unique.len();
    say(format!("deduped           {} ({} near-duplicates dropped)", counts.deduped, drafts.len() - unique.len()));
    let scenarios: Vec<Scenario> = unique.iter().map(|&i| draft_scenario(i, &drafts[i], &teacher.name)).collect();

    // 3. The solver attempts each task k times through the server.
    progress.set_prefix("solve");
    progress.set_position(0);
    let solved = solve(solving, solver_chat, tools, system_prompt, &scenarios, &opts.solve, &out.join(SOLVER_FILE), progress, spent, shutdown)
        .await
        .map_err(io(&out.join(SOLVER_FILE)))?;
    let mut by_scenario: HashMap<&str, Vec<&Trajectory>> = HashMap::new();
    for t in solved.trajectories.iter().filter(|t| t.group.index < opts.solve.attempts) {
        by_scenario.entry(t.scenario_id.as_str()).or_default().push(t);
    }

    // 4. Agreement: m of k answers; the agreed answer becomes `expected`.
    let mut kept: Vec<Scenario> = Vec::new();
    let mut agreeing: HashMap<String, Vec<&Trajectory>> = HashMap::new();
    for mut s in scenarios {
        let Some(mut episodes) = by_scenario.remove(s.id.as_str()) else { continue };
        episodes.sort_by_key(|t| t.group.index);
        let answers: Vec<Option<&str>> = episodes.iter().map(|t| completed_answer(t)).collect();
        counts.solved += usize::from(answers.iter().any(Option::is_some));
        match agree(&answers, opts.agree) {
            Some(a) => {
                let members: Vec<&str> = a.members.iter().filter_map(|&i| answers[i]).collect();
                s.expected = Some(infer_expected(answers[a.representative].expect("the representative has an answer"), &members));
                s.checked = Some(true);
                counts.agreed += 1;
                agreeing.insert(s.id.clone(), a.members.iter().map(|&i| episodes[i]).collect());
                kept.push(s);
            }
            None if opts.keep_unverified => {
                s.checked = Some(false);
                counts.unverified += 1;
                kept.push(s);
            }
            None => {}
        }
    }
    let k = opts.solve.attempts;
    say(format!("solved            {} of {} tasks had a completed attempt ({} attempts each)", counts.solved, counts.deduped, k));
    say(format!("agreed            {} ({} of {k} answers agree)", counts.agreed, opts.agree));

    // 5. The replay: an agreed task's calls made again on a fresh server.
    if let Some(r) = &opts.replay {
        progress.set_prefix("replay");
        progress.set_position(0);
        progress.set_length(counts.agreed as u64);
        let mut checked = Vec::with_capacity(kept.len());
        for mut s in kept {
            let Some(episode) = agreeing.get(&s.id).and_then(|e| e.first()) else {
                checked.push(s);
                continue;
            };
            let expected = s.expected.as_ref().expect("an agreed task has its answer");
            match replay::check(fresh, |t| r.reads.contains(t), episode, expected, r.view).await.map_err(PipelineError::Replay)? {
                Verdict::Kept { reference, derived } => {
                    s.reference = reference;
                    s.extra.insert(ta_types::scenario::EXTRA_DERIVED.into(), derived.into());
                    counts.replayed += 1;
                    checked.push(s);
                }
                Verdict::Writes(tool) => {
                    tracing::info!(task = %s.id, %tool, "not replayed: the tool may write");
                    counts.not_replayed += 1;
                    checked.push(s);
                }
                Verdict::Dropped(why) => {
                    *counts.replay_dropped.entry(why.to_string()).or_default() += 1;
                    agreeing.remove(&s.id);
                }
            }
            progress.inc(1);
        }
        kept = checked;
        let dropped: Vec<String> = counts.replay_dropped.iter().map(|(why, n)| format!("{n} {why}")).collect();
        say(format!(
            "replayed          {} reproduced on a fresh server, {} kept on agreement alone (a tool that may write){}",
            counts.replayed,
            counts.not_replayed,
            if dropped.is_empty() { String::new() } else { format!("; dropped: {}", dropped.join(", ")) }
        ));
    }
    counts.kept = kept.len();
    say(format!(
        "kept              {}{}",
        counts.kept,
        if opts.keep_unverified { format!(" ({} unverified, checked: false)", counts.unverified) } else { String::new() }
    ));

    // 6. Split by whole near-duplicate components.
    let texts: Vec<&str> = kept.iter().map(|s| s.task.as_str()).collect();
    let splits = dedupe::split(&texts, opts.split_threshold, opts.validation_fraction, opts.seed);
    for (s, split) in kept.iter_mut().zip(&splits) {
        s.split = Some(*split);
    }
    counts.train = splits.iter().filter(|&&s| s == Split::Train).count();
    counts.validation = counts.kept - counts.train;
    say(format!("split             {} train, {} validation", counts.train, counts.validation));

    // 7. The agreeing episodes become SFT traces.
    let reward = RewardConfig::default();
    let mut traces = Vec::new();
    for s in &kept {
        for t in agreeing.get(&s.id).into_iter().flatten() {
            let mut t = (*t).clone();
            ta_reward::score(&reward, s, &mut t);
            traces.push(Trace::from_trajectory(&t, Some(s), tools.specs(), SOURCE_TEACHER));
        }
    }
    counts.traces = traces.len();
    let scenarios_path = out.join(SCENARIOS_FILE);
    write_jsonl(&scenarios_path, &kept).map_err(io(&scenarios_path))?;
    let traces_path = out.join(TRACES_FILE);
    write_traces(&traces_path, &traces).map_err(io(&traces_path))?;

    let mut difficulty = BTreeMap::new();
    for s in &kept {
        if let Some(l) = s.difficulty.as_ref().and_then(Difficulty::level) {
            *difficulty.entry(l).or_insert(0) += 1;
        }
    }
    let named: std::collections::HashSet<&str> = kept.iter().flat_map(|s| s.tags.iter()).filter_map(|t| t.strip_prefix("tool:")).collect();
    let (tools_covered, tools_uncovered): (Vec<String>, Vec<String>) = surface.tool_names().into_iter().partition(|n| named.contains(n.as_str()));
    let report = Report {
        counts,
        teacher: teacher.name.clone(),
        teacher_spend: teacher.spend(),
        solver: solver.map(|s| s.name.clone()),
        solver_spend: solver.map(Teacher::spend),
        total_cost_usd: spent(),
        cost_complete: teacher.priced() && solver.is_none_or(Teacher::priced),
        budget_usd: opts.generate.budget_usd,
        budget_reached: gen_counts.budget_reached || solved.budget_reached,
        interrupted: solved.interrupted,
        episodes: solved.trajectories.len(),
        difficulty,
        tools_covered,
        tools_uncovered,
    };
    let summary_path = out.join("summary.json");
    std::fs::write(&summary_path, serde_json::to_vec_pretty(&report).expect("report serialises")).map_err(io(&summary_path))?;
    Ok(report)
}

/// A teacher's task as a scenario: a stable id from its position among the drafts, its level,
/// and tags for the tools it names and whether it changes state.
fn draft_scenario(index: usize, d: &Draft, teacher: &str) -> Scenario {
    let mut tags: Vec<String> = d.tools.iter().map(|t| format!("tool:{t}")).collect();
    tags.sort();
    tags.dedup();
    if d.changes_state {
        tags.push(TAG_CHANGES_STATE.to_string());
    }
    Scenario {
        id: format!("gen-{index:04}"),
        task: d.task.trim().to_string(),
        expected: None,
        split: None,
        difficulty: Some(Difficulty::Level(d.difficulty)),
        tags,
        max_turns: None,
        reference: Vec::new(),
        source: Some(teacher.to_string()),
        checked: None,
        expected_state: None,
        tools: Vec::new(),
        tools_read_only: false,
        extra: Default::default(),
    }
}

/// The prompt the teacher would get for a first batch (for `--print-prompt`).
pub fn first_prompt(surface: &Surface, opts: &PipelineOptions) -> Result<prompt::Prompt, prompt::TemplateError> {
    prompt::render(&opts.template, &opts.template_origin, surface, opts.generate.batch.min(opts.generate.n), 0, &[])
}
