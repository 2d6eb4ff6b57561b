//! `scenarios walk`: checked question/answer tasks for any MCP server, written offline with no
//! model, for servers without a SQL query tool (files, git, knowledge graphs, tickets...).
//!
//! 1. [`access`]: only tools that read are ever called (declared `readOnlyHint`, or names and
//!    descriptions that say so and nothing that says they write); the user's allow/deny lists
//!    come first;
//! 2. [`explore`]: call them breadth-first with arguments from their schemas and from values
//!    earlier results showed, within a budget; every call is recorded with where its arguments
//!    came from; fields that change between two identical calls are set aside;
//! 3. [`parse`]: read each result as data (JSON, `Key: value` blocks, tagged or bare lines);
//! 4. [`ask`]: ask about what came back (lookups, chained lookups, counts, extremes, the most
//!    common value, existence, filtered lists, a file's lines and title), phrased in people's
//!    words; each question's answer is an [`op`]eration on the results, with its working;
//! 5. [`replay`]: replay each task's chain of calls on a fresh server and keep it only when the
//!    answer comes out the same. The chain is the task's `reference`, so `collect --reference`
//!    needs no model either.

pub mod access;
mod across;
pub mod ask;
pub mod explore;
pub mod op;
pub mod parse;
pub mod replay;

use std::collections::{BTreeMap, HashSet};
use std::time::Instant;

use serde::Serialize;
use serde_json::{Map, Value};
use ta_rollout::ToolHost;
use ta_types::{Difficulty, ReferenceStep, Scenario, Split};

pub use access::{Overrides, Verdict, check_overrides, classify};
pub use explore::{Budget, Walked};

/// `source` of walked scenarios.
pub const SOURCE_WALK: &str = "walk";

#[derive(Debug, thiserror::Error)]
pub enum WalkError {
    #[error("no tool of this server may be called by the walk: {0}\nhint: the walk only calls tools that read; name a tool you know only reads with --allow-tool NAME")]
    NothingToRead(String),
    #[error("{0}\nhint: --allow-tool and --deny-tool take names from `train-agent tools`")]
    Overrides(String),
    #[error("the MCP connection failed: {0}")]
    Connection(String),
}

#[derive(Debug, Clone)]
pub struct WalkOptions {
    pub n: usize,
    pub overrides: Overrides,
    /// Values to start from (the server's command-line paths, `--seed-value`).
    pub seeds: Vec<String>,
    pub budget: Budget,
    pub validation_fraction: f64,
    pub seed: u64,
}

/// What a walk did and produced.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Every tool and whether the walk could call it, with why.
    pub tools: Vec<Verdict>,
    pub calls: usize,
    pub calls_per_tool: BTreeMap<String, usize>,
    pub failed_calls: usize,
    /// Calls whose result is longer than the model is shown: read only up to the cut.
    pub cut_calls: usize,
    /// Whether the budget stopped the walk before it ran out of calls to make.
    pub stopped_by_budget: bool,
    /// Fields whose value changed between two identical calls (never asked about), by tool.
    pub unstable: BTreeMap<String, Vec<String>>,
    /// Questions the results offered.
    pub candidates: usize,
    /// Questions kept (each with one to three phrasings, every phrasing a scenario).
    pub questions: usize,
    /// Why candidates were dropped by the replay, with counts.
    pub dropped: BTreeMap<String, usize>,
    pub scenarios: usize,
    pub train: usize,
    pub validation: usize,
    pub per_template: BTreeMap<String, usize>,
    pub per_difficulty: BTreeMap<u8, usize>,
    pub per_tool: BTreeMap<String, usize>,
    pub walk_seconds: f64,
    pub replay_seconds: f64,
}

/// What [`synthesize`] produced: the scenarios, the summary, and the walk's record.
pub struct Synthesized {
    pub scenarios: Vec<Scenario>,
    pub summary: Summary,
    pub walked: Walked,
}

/// The read tools of `tools` (MCP's discovery) and every verdict.
pub fn readable(tools: &[ta_mcp::Tool], overrides: &Overrides) -> Result<(Vec<String>, Vec<Verdict>), WalkError> {
    access::check_overrides(tools, overrides).map_err(WalkError::Overrides)?;
    let verdicts: Vec<Verdict> = tools.iter().map(|t| classify(t, overrides)).collect();
    for v in &verdicts {
        tracing::info!(tool = %v.tool, call = v.read, reason = %v.reason, "walk access");
    }
    let read: Vec<String> = verdicts.iter().filter(|v| v.read).map(|v| v.tool.clone()).collect();
    if read.is_empty() {
        let why: Vec<String> = verdicts.iter().map(|v| format!("{} ({})", v.tool, v.reason)).collect();
        return Err(WalkError::NothingToRead(why.join(", ")));
    }
    Ok((read, verdicts))
}

/// The first stage: walk `host` and ask about what it showed (tasks not yet replayed).
pub async fn explore<T: ToolHost>(host: &T, tools: &[ta_mcp::Tool], opts: &WalkOptions) -> Result<(Walked, Vec<ask::Task>, Vec<Verdict>), WalkError> {
    let (read, verdicts) = readable(tools, &opts.overrides)?;
    let walked = explore::walk(host, &read, &opts.seeds, &opts.budget).await?;
    let tasks = ask::tasks(&walked, opts.seed);
    Ok((walked, tasks, verdicts))
}

/// The [`Summary::dropped`] reason of a task whose reference takes every turn of an episode.
pub const TOO_LONG: &str = "its calls leave an episode no turn to answer";

/// Walks `host`, asks, and keeps what a replay on `fresh` (a second server started the same
/// way) reproduces.
pub async fn synthesize<T: ToolHost, F: ToolHost>(host: &T, fresh: &F, tools: &[ta_mcp::Tool], opts: &WalkOptions) -> Result<Synthesized, WalkError> {
    let started = Instant::now();
    let (walked, tasks, verdicts) = explore(host, tools, opts).await?;
    let walk_seconds = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let candidates = tasks.len();
    let (tasks, too_long): (Vec<ask::Task>, Vec<ask::Task>) = tasks.into_iter().partition(|t| t.turns(&walked) < opts.budget.turns);
    let (kept, mut dropped) = replay::replay(fresh, &walked, tasks, &opts.budget).await?;
    if !too_long.is_empty() {
        dropped.insert(TOO_LONG.into(), too_long.len());
    }
    let replay_seconds = started.elapsed().as_secs_f64();

    // Templates in alphabetical order, then each template's questions in turn.
    let mut kept = kept;
    kept.sort_by_key(|t| t.op.template());
    let kept = ta_synth::interleave(kept, |t| t.op.template(), opts.seed);
    let phrasings: Vec<Vec<&str>> = kept.iter().map(|t| t.phrasings.iter().map(String::as_str).collect()).collect();
    let (picked, _) = ta_synth::first_phrasings_first(&phrasings, opts.n);
    let mut scenarios = Vec::new();
    let mut group_of = Vec::new();
    for (g, text) in picked {
        scenarios.push(scenario(&walked, &kept[g], text, scenarios.len()));
        group_of.push(g);
    }
    ta_synth::split_by_group(&mut scenarios, &group_of, opts.validation_fraction, opts.seed);

    let mut summary = Summary {
        tools: verdicts,
        calls: walked.calls.len(),
        calls_per_tool: BTreeMap::new(),
        failed_calls: walked.calls.iter().filter(|c| c.is_error).count(),
        cut_calls: walked.calls.iter().filter(|c| c.cut).count(),
        stopped_by_budget: walked.stopped_by_budget,
        unstable: walked.unstable.iter().map(|(k, v)| (k.clone(), v.iter().cloned().collect::<std::collections::BTreeSet<_>>().into_iter().collect())).collect(),
        candidates,
        questions: group_of.iter().collect::<HashSet<_>>().len(),
        dropped,
        scenarios: scenarios.len(),
        train: scenarios.iter().filter(|s| s.split == Some(Split::Train)).count(),
        validation: scenarios.iter().filter(|s| s.split == Some(Split::Validation)).count(),
        per_template: BTreeMap::new(),
        per_difficulty: BTreeMap::new(),
        per_tool: BTreeMap::new(),
        walk_seconds,
        replay_seconds,
    };
    for c in &walked.calls {
        *summary.calls_per_tool.entry(c.tool.clone()).or_default() += 1;
    }
    for &g in &group_of {
        let t = &kept[g];
        *summary.per_template.entry(t.op.template().to_string()).or_default() += 1;
        *summary.per_difficulty.entry(t.difficulty).or_default() += 1;
        *summary.per_tool.entry(walked.calls[t.call].tool.clone()).or_default() += 1;
    }
    Ok(Synthesized { scenarios, summary, walked })
}

fn scenario(walked: &Walked, t: &ask::Task, text: &str, index: usize) -> Scenario {
    let mut extra = Map::new();
    extra.insert(ta_types::scenario::EXTRA_TEMPLATE.into(), t.op.template().into());
    extra.insert("phrasing".into(), ta_synth::PHRASING_NATURAL.into());
    let answering = &walked.calls[t.call];
    // A date written as a day: not in the last result as the answer says it.
    let shown = match &t.expected {
        ta_types::Expected::Text(s) => answering.text.contains(s.as_str()),
        _ => true,
    };
    extra.insert(ta_types::scenario::EXTRA_DERIVED.into(), (t.op.derived() || !shown).into());
    extra.insert("op".into(), serde_json::to_value(&t.op).unwrap_or(Value::Null));
    if let Some(e) = &t.explanation {
        extra.insert(ta_types::scenario::EXTRA_EXPLANATION.into(), e.clone().into());
    }
    let together = t.together();
    let reference: Vec<ReferenceStep> = t
        .steps(walked)
        .into_iter()
        .map(|c| ReferenceStep { tool: walked.calls[c].tool.clone(), arguments: walked.calls[c].args.clone(), with_previous: together.iter().skip(1).any(|t| *t == c) })
        .collect();
    let mut tools: Vec<String> = Vec::new();
    for step in &reference {
        if !tools.contains(&step.tool) {
            tools.push(step.tool.clone());
        }
    }
    Scenario {
        id: format!("walk-{index:05}"),
        task: text.to_string(),
        expected: Some(t.expected.clone()),
        split: None,
        difficulty: Some(Difficulty::Level(t.difficulty)),
        tags: vec![t.op.template().to_string(), answering.tool.clone()],
        max_turns: None,
        reference,
        source: Some(SOURCE_WALK.into()),
        checked: Some(true),
        expected_state: None,
        // The walk called only tools its read-only guard let through (`access`).
        tools,
        tools_read_only: true,
        extra,
    }
}
