//! `train-agent scenarios walk`: checked scenarios for any MCP server, offline and without a
//! model: the read tools walked, questions asked about their results, each kept only when a
//! replay on a second, fresh server reproduces its answer. The logic lives in `ta_walk`; this
//! parses flags, starts the two servers and writes the files.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use ta_walk::{Budget, Overrides, WalkOptions};

use crate::args::ServerArgs;
use crate::stdout::outln;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    server: ServerArgs,
    /// Scenarios to write (at most).
    #[arg(long, default_value_t = 2000, value_parser = crate::args::at_least_one)]
    n: usize,
    /// Output directory: scenarios.jsonl, summary.json (tools called and why, drops, counts) and
    /// calls.jsonl (every call of the walk and its result).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// A tool the walk may call although nothing declares it read-only (repeatable).
    #[arg(long = "allow-tool", value_name = "NAME")]
    allow: Vec<String>,
    /// A tool the walk must never call (repeatable; wins over --allow-tool).
    #[arg(long = "deny-tool", value_name = "NAME")]
    deny: Vec<String>,
    /// A value to start from, besides the absolute paths on the server's command line (a
    /// repository path, a project id; repeatable).
    #[arg(long = "seed-value", value_name = "VALUE")]
    seed_values: Vec<String>,
    /// Tool calls the walk may make.
    #[arg(long, default_value_t = 1500)]
    max_calls: usize,
    /// Calls of one tool at most.
    #[arg(long, default_value_t = 300)]
    max_calls_per_tool: usize,
    /// Seconds the walk may take (the replay comes after).
    #[arg(long, default_value_t = 40)]
    max_seconds: u64,
    #[command(flatten)]
    split: super::SplitArgs,
    /// Calls in flight at once.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// Characters of a tool result the model will be shown (as `collect`, `train` and `eval`
    /// cut them): questions are asked, and values for later calls taken, only from that much of
    /// each result.
    #[arg(long, default_value_t = ta_rollout::AgentConfig::DEFAULT.tool_result_max_chars)]
    tool_result_max_chars: usize,
    /// Turns of an episode (as `collect`, `train` and `eval` play them): a question whose calls
    /// leave no turn for the answer is not asked.
    #[arg(long, default_value_t = ta_rollout::AgentConfig::DEFAULT.max_turns)]
    max_turns: u32,
}

/// The absolute paths on a stdio server's command line that exist: where the server's data is
/// (a repository, the folders it may read).
fn command_paths(args: &ServerArgs) -> Vec<String> {
    match ta_mcp::ServerSpec::resolve(args.server.as_deref(), args.mcp_config.as_deref(), args.server_name.as_deref()) {
        Ok(ta_mcp::ServerSpec::Stdio { args, .. }) => {
            args.into_iter().flat_map(|a| a.split('=').map(String::from).collect::<Vec<_>>()).filter(|a| a.starts_with('/') && std::path::Path::new(a).exists()).collect()
        }
        _ => Vec::new(),
    }
}

pub async fn run(args: Args) -> Result<()> {
    args.split.check()?;
    let started = Instant::now();
    let _lock = ta_eval::rundir::RunLock::acquire(&args.out)?;
    let logs = args.out.join("logs");
    std::fs::create_dir_all(&logs).with_context(|| format!("cannot create {}", logs.display()))?;
    let mut seeds = command_paths(&args.server);
    seeds.extend(args.seed_values.iter().cloned());
    let opts = WalkOptions {
        n: args.n,
        overrides: Overrides { allow: args.allow.clone(), deny: args.deny.clone() },
        seeds,
        budget: Budget {
            max_calls: args.max_calls,
            max_per_tool: args.max_calls_per_tool,
            time: Duration::from_secs(args.max_seconds),
            concurrency: args.concurrency,
            view: args.tool_result_max_chars,
            turns: args.max_turns as usize,
        },
        validation_fraction: args.split.validation_fraction,
        seed: args.split.seed,
    };
    let server = crate::server::Server::connect(&args.server, Some(&logs)).await?;
    // The replay's server: started the same way, after the walk's, so nothing the walk's server
    // holds in memory reaches it.
    let fresh = crate::server::Server::connect(&args.server, Some(&logs)).await?;
    eprintln!("walking the read tools of {} (at most {} calls, {} s) ...", server.description, args.max_calls, args.max_seconds);
    let result = ta_walk::synthesize(&server.tools(), &fresh.tools(), &server.discovery.tools, &opts).await;
    server.close().await;
    fresh.close().await;
    let ta_walk::Synthesized { scenarios, summary, walked } = result?;
    super::write_jsonl(&args.out.join("calls.jsonl"), &walked.calls)?;
    let path = args.out.join("scenarios.jsonl");
    super::write_jsonl(&path, &scenarios)?;
    std::fs::write(args.out.join("summary.json"), serde_json::to_vec_pretty(&summary)?)?;

    let safe = |t: &str| ta_types::terminal::terminal_safe(t).into_owned();
    outln!("tools")?;
    for v in &summary.tools {
        outln!("  {:<28} {:<6} {}", safe(&v.tool), if v.read { "call" } else { "never" }, v.reason)?;
    }
    outln!(
        "calls             {} ({} failed, {} read only up to the {} characters the model is shown){}",
        summary.calls,
        summary.failed_calls,
        summary.cut_calls,
        args.tool_result_max_chars,
        if summary.stopped_by_budget { ", stopped by the budget" } else { "" }
    )?;
    for (tool, fields) in &summary.unstable {
        outln!("  unstable        {}: {} (never asked about)", safe(tool), safe(&fields.join(", ")))?;
    }
    outln!("candidates        {}", summary.candidates)?;
    for (reason, n) in &summary.dropped {
        outln!("  dropped {n:>5}   {reason}")?;
    }
    outln!("scenarios         {} phrasings of {} questions (train {}, validation {})", summary.scenarios, summary.questions, summary.train, summary.validation)?;
    super::print_counts("per template", summary.per_template.iter().map(|(k, n)| (k.clone(), n)))?;
    super::print_counts("per difficulty", summary.per_difficulty.iter().map(|(k, n)| (format!("level {k}"), n)))?;
    super::print_counts("per tool", summary.per_tool.iter().map(|(k, n)| (k.clone(), n)))?;
    outln!("time              {:.1} s (walk {:.1} s, replay {:.1} s)", started.elapsed().as_secs_f64(), summary.walk_seconds, summary.replay_seconds)?;
    outln!("scenarios: {}", path.display())?;
    Ok(())
}
