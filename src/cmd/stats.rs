//! `train-agent stats`: a run's, evaluation's or rollout's summary table in the terminal.

use std::path::PathBuf;

use anyhow::Result;

use crate::cmd::fit::run::each_stage;
use crate::stdout::outln;

#[derive(clap::Args)]
pub struct Args {
    /// A `train`, `sft`, `eval` or `rollout --out` directory; a `fit` or `demo --out`
    /// shows each of its SFT, GRPO and check-set stages that ran.
    #[arg(value_name = "DIR")]
    dir: PathBuf,
}

pub async fn run(args: Args) -> Result<()> {
    let stages = each_stage(&args.dir, |stage| {
        outln!("{}:\n{}", stage.display(), ta_eval::stats::render(stage)?)?;
        Ok(())
    })?;
    if !stages {
        outln!("{}", ta_eval::stats::render(&args.dir)?)?;
    }
    Ok(())
}
