//! `train-agent curate`: keep the traces worth imitating and export them as a dataset.

use std::path::PathBuf;

use anyhow::{Context, Result};
use ta_sft::curate::{CurateOptions, curate};
use ta_sft::export::{ExportOptions, export};
use ta_types::trace::{TRACES_FILE, read_traces};

use crate::stdout::outln;

#[derive(clap::Args)]
pub struct Args {
    /// Trace directories written by `collect` (or traces.jsonl files); earlier ones win duplicates.
    #[arg(required = true, value_name = "DIR")]
    inputs: Vec<PathBuf>,
    /// Keep only traces whose total reward is at least this.
    #[arg(long, value_name = "R")]
    min_reward: Option<f64>,
    /// Ground-truth score a trace must reach when its scenario has one.
    #[arg(long, default_value_t = 1.0, value_name = "G")]
    min_ground_truth: f64,
    /// Drop traces with more model turns than this.
    #[arg(long, value_name = "T")]
    max_turns: Option<u32>,
    /// Drop traces with more failed tool calls than this.
    #[arg(long, value_name = "N")]
    max_tool_errors: Option<u32>,
    /// Drop conversations identical to one already kept (tool-call ids ignored).
    #[arg(long)]
    dedupe: bool,
    /// Keep validation-split traces too.
    #[arg(long)]
    include_validation: bool,
    /// Also write train_unrolled.jsonl: one row per assistant turn, earlier messages as context.
    #[arg(long)]
    unroll: bool,
    /// Write JSONL only (Parquet needs the Python environment).
    #[arg(long)]
    no_parquet: bool,
    /// Dataset directory: train.jsonl (+ .parquet), curate.json.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

pub async fn run(args: Args) -> Result<()> {
    let mut traces = Vec::new();
    for input in &args.inputs {
        let file = if input.is_dir() { input.join(TRACES_FILE) } else { input.clone() };
        let read = read_traces(&file)
            .with_context(|| format!("cannot read traces from {}\nhint: pass a directory written by `train-agent collect` or its traces.jsonl", file.display()))?;
        traces.extend(read);
    }
    let opts = CurateOptions {
        min_reward: args.min_reward,
        min_ground_truth: args.min_ground_truth,
        max_turns: args.max_turns,
        max_tool_errors: args.max_tool_errors,
        dedupe: args.dedupe,
        include_validation: args.include_validation,
    };
    let curated = curate(traces, &opts);
    outln!("{curated}")?;
    anyhow::ensure!(!curated.kept.is_empty(), "no trace was kept\nhint: look at the reasons above; collect more (higher --n) or relax --min-reward/--min-ground-truth");
    let _lock = ta_eval::rundir::RunLock::acquire(&args.out)?;
    std::fs::write(args.out.join("curate.json"), serde_json::to_vec_pretty(&curated)?)?;
    let written = export(&curated.kept, &args.out, &ExportOptions { unroll: args.unroll, parquet: !args.no_parquet }).await?;
    for p in written {
        outln!("wrote {}", p.display())?;
    }
    Ok(())
}
