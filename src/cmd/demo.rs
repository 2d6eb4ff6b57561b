//! `train-agent demo`: `fit` on the bundled demo server, from a fresh machine: tasks `scenarios
//! synth` writes from the demo database, the base model's baseline, an SFT warm start on
//! reference traces of part of the train split, GRPO from that adapter on all of it, and the
//! base / SFT / SFT+GRPO table with the report. The CPU profile keeps the counting tasks (one
//! table, at most one condition); the GPU profile takes them all and evaluates the 88
//! hand-written questions as a check set.

use std::path::PathBuf;

use anyhow::Result;

use crate::cmd::fit::profile::{CPU_MAX_DIFFICULTY, DEMO_GPU_STEPS, ProfileArgs, TaskFilter};
use crate::cmd::fit::run::{CheckScenarios, CheckSet, Job, Recipe, execute};
use crate::cmd::fit::{SYNTH_N, TaskSource};

/// The demo's hand-written questions, embedded so the command works outside a checkout.
const SCENARIOS: &str = include_str!("../../scenarios/company.jsonl");
const SERVER: &str = "train-agent demo-server";

/// The CPU profile's tasks: counts over one table with at most one condition (the grammar
/// composes joins and second conditions into the same templates at higher levels).
const CPU_TEMPLATES: &[&str] = &["count_rows", "count_where"];

#[derive(clap::Args)]
pub struct Args {
    /// Where every stage writes (traces/, dataset/, sft/, grpo/); running again continues.
    #[arg(long, value_name = "DIR", alias = "output-dir", default_value = "runs/demo")]
    out: PathBuf,
    /// `small` (SmolLM2-135M-Instruct, the default without a GPU), `qwen0.5b`
    /// (Qwen2.5-Coder-0.5B-Instruct, the default with one; both come from the package registry),
    /// or any base model `train` takes (Hugging Face id, directory, .gguf file).
    #[arg(long, value_name = "small|qwen0.5b|MODEL", value_parser = crate::args::model_spec)]
    model: Option<String>,
    #[command(flatten)]
    size: ProfileArgs,
    /// Also score with an LLM judge in GRPO (key from the provider's environment variable).
    #[command(flatten)]
    judge: crate::args::JudgeArgs,
}

pub async fn run(args: Args) -> Result<()> {
    let _lock = ta_eval::rundir::RunLock::acquire(&args.out)?;
    let gpu = args.size.gpu().await?;
    let mut profile = args.size.profile(gpu, args.model.as_deref(), DEMO_GPU_STEPS);
    if !gpu {
        // What SmolLM2-135M learns from a few dozen traces on 2 cores: counts (benches/RESULTS.md,
        // "The demo and CPU training speed").
        profile.keep = TaskFilter { templates: Some(CPU_TEMPLATES), max_difficulty: Some(CPU_MAX_DIFFICULTY) };
    }
    args.judge.apply(&mut profile.grpo.reward)?;
    crate::setup::check_rewards(&profile.grpo.reward, Some(crate::args::BASE_NAME))?;
    let steps = if profile.sft_only { 0 } else { profile.grpo.rollout.max_steps };
    eprintln!("demo: {} on {}, {steps} GRPO steps, in {}", profile.model, if gpu { "GPU" } else { "CPU" }, args.out.display());
    // A distribution of its own (hand-written wording, harder joins): worth its time on a GPU,
    // it would double the CPU demo's.
    let check_set = gpu.then(|| {
        let questions = SCENARIOS.lines().count();
        // Greedy only: a sampled check of the 88 would take the demo past its 8 minutes
        // (benches/RESULTS.md, "Run 26"); `fit` and the benches sample them.
        CheckSet { scenarios: CheckScenarios::Text(SCENARIOS), questions, label: format!("the {questions} hand-written questions"), samples: 0 }
    });
    let job = Job {
        command: "demo",
        out: args.out.clone(),
        server: vec!["--server".into(), SERVER.into()],
        chooses_tools: false,
        source: TaskSource::sql("the demo server's database"),
        synth_n: SYNTH_N,
        profile,
        check_set,
        recipe: Recipe::default(),
    };
    execute(job).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_demo_keeps_the_counting_tasks() {
        let text = "{\"id\":\"a\",\"template\":\"count_rows\",\"difficulty\":1}\n{\"id\":\"b\",\"template\":\"lookup\",\"difficulty\":1}\n";
        let counts = TaskFilter { templates: Some(CPU_TEMPLATES), max_difficulty: Some(CPU_MAX_DIFFICULTY) };
        assert_eq!(counts.apply(text), "{\"id\":\"a\",\"template\":\"count_rows\",\"difficulty\":1}\n");
        assert_eq!(SCENARIOS.lines().count(), 88, "the check set's label counts them");
    }
}
