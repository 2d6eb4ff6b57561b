//! `train-agent collect`: traces for supervised fine-tuning, from a teacher model, from the model
//! itself (rejection sampling), or from the scenarios' reference solutions.

use std::path::PathBuf;

use anyhow::Result;
use indicatif::ProgressBar;
use ta_sft::collect::{CollectOptions, collect};
use ta_sft::reference::{DEFAULT_RECOVERY_SHARE, ReferenceOptions, reference_traces};
use ta_types::Split;
use ta_types::trace::{SOURCE_REJECTION_SAMPLING, TRACES_FILE, write_traces};

use crate::args::{EpisodeArgs, EpisodeDefaults, IsolationArgs, ModelArgs, ResumeArgs, ScenarioArgs, ServerArgs};
use crate::interrupted::Interrupted;
use crate::setup::{RunSetup, load_scenarios};
use crate::stdout::outln;

/// Collecting samples (0.7) for rejection sampling, and lets a teacher write long replies (1024).
const EPISODE: EpisodeDefaults = EpisodeDefaults { temperature: Some(0.7), max_tokens: 1024, max_episode_tokens: 4096, ..EpisodeDefaults::COMMON };

#[derive(clap::Args)]
#[command(mut_args = |a| EPISODE.show(a))]
pub struct Args {
    #[command(flatten)]
    server: ServerArgs,
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    scenarios: ScenarioArgs,
    /// Build ideal traces by replaying the scenarios' `reference` steps (from `scenarios synth` or
    /// `scenarios walk`) or their `reference_sql`, instead of asking a model.
    #[arg(long, conflicts_with_all = ["base_model", "base_url"])]
    reference: bool,
    /// With --reference: the share of SQL traces that first write their query with a slip (a
    /// column or table misnamed) that the server rejects, then look the name up (describe the
    /// table, or list the tables) and write the right query: the slip is shown but not trained on
    /// (`weight` 0), so the model learns to repair an error instead of handing it in. 0 (the
    /// default) turns it off: at 0.25 SFT's adapter repeated failing queries to the turn limit
    /// instead, with the look-up and without (benches/RESULTS.md, "Run 28", "Run 37").
    #[arg(long, default_value_t = DEFAULT_RECOVERY_SHARE, value_parser = crate::args::share, requires = "reference")]
    recovery_share: f64,
    /// Only scenarios of this split (validation traces would leak the evaluation into training).
    #[arg(long, default_value = "train", value_parser = clap::builder::ValueParser::new(|s: &str| s.parse::<Split>()))]
    split: Split,
    /// Use every scenario, whatever its split.
    #[arg(long, conflicts_with = "split")]
    all_splits: bool,
    /// Episodes per scenario (rejection sampling: many rollouts, high temperature, then `curate`).
    #[arg(long, alias = "n", default_value_t = 1)]
    rollouts: u32,
    /// Name written as each trace's `source` (default: the teacher's model name, or
    /// `rejection-sampling` with --base-model, or `reference`).
    #[arg(long)]
    source: Option<String>,
    /// Output directory: traces.jsonl (plus trajectories.jsonl, summary.json and logs/ for model
    /// teachers). Re-running continues: finished episodes are kept.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    #[command(flatten)]
    episode: EpisodeArgs,
    #[command(flatten)]
    resume: ResumeArgs,
    #[command(flatten)]
    isolation: IsolationArgs,
}

pub async fn run(args: Args) -> Result<()> {
    let scenarios = load_scenarios(&args.scenarios, |all| {
        if !args.all_splits {
            all.retain(|s| s.split == Some(args.split));
        }
    })?;
    anyhow::ensure!(
        !scenarios.is_empty(),
        "no scenarios left in {} after --split/--limit\nhint: scenarios need a \"split\" field to be picked by --split; pass --all-splits to use every scenario",
        args.scenarios.scenarios.display()
    );
    let _lock = ta_eval::rundir::RunLock::acquire(&args.out)?;
    let setup = RunSetup::start(&args.out, &args.server, &args.isolation.settings(), &scenarios, args.episode.system_prompt.as_deref()).await?;
    let reward = ta_reward::RewardConfig::default();
    let path = args.out.join(TRACES_FILE);

    if args.reference {
        let opts = ReferenceOptions {
            tool_result_max_chars: args.episode.agent_config(&EPISODE, false).tool_result_max_chars,
            reward,
            recovery_share: args.recovery_share,
            seed: args.episode.seed.unwrap_or_default(),
        };
        let (mut traces, skipped) = reference_traces(&setup.tools, &setup.system_prompt, &scenarios, &opts).await?;
        if let Some(source) = &args.source {
            traces.iter_mut().for_each(|t| t.source = source.clone());
        }
        write_traces(&path, &traces)?;
        setup.close().await;
        outln!("reference traces  {} of {} scenarios", traces.len(), scenarios.len())?;
        if !skipped.is_empty() {
            outln!("skipped           {}", skipped.len())?;
            for s in &skipped {
                outln!("  {}: {}", s.scenario_id, s.reason)?;
            }
        }
        outln!("traces: {}", path.display())?;
        return Ok(());
    }

    let endpoint = setup.model(&args.model).await?;
    let source = args.source.clone().unwrap_or_else(|| match &args.model.base_url {
        Some(_) => endpoint.model.clone(),
        None => SOURCE_REJECTION_SAMPLING.to_string(),
    });
    let opts = CollectOptions {
        agent: args.episode.agent_config(&EPISODE, endpoint.record_tokens),
        n: args.rollouts,
        concurrency: args.episode.concurrency(&EPISODE),
        retry_failed: args.resume.retry_failed,
        source,
        reward,
    };
    let bar = ProgressBar::new(0);
    bar.set_prefix("collect");
    let shutdown = crate::interrupted::ctrl_c();
    let result = collect(&endpoint.chat, &endpoint.model, &setup.tools, &setup.system_prompt, &scenarios, &opts, &args.out, &bar, shutdown).await;
    bar.finish();
    if let Some(engine) = endpoint.engine {
        engine.shutdown().await;
    }
    setup.close().await;
    let collected = result?;
    if collected.kept > 0 {
        eprintln!("{} finished episodes kept from an earlier run", collected.kept);
    }
    let passed = collected.traces.iter().filter(|t| t.reward_parts.ground_truth == Some(1.0)).count();
    outln!("{}", collected.summary)?;
    outln!("ground truth pass {passed} of {}", collected.traces.len())?;
    outln!("traces: {}", path.display())?;
    if collected.interrupted {
        return Err(Interrupted::episodes(collected.traces.len()).into());
    }
    match collected.all_failed {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}
