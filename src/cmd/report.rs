//! `train-agent report`: write a directory's `report.html` (one self-contained file).

use std::path::PathBuf;

use anyhow::Result;

use crate::cmd::fit::run::each_stage;
use crate::stdout::outln;

#[derive(clap::Args)]
pub struct Args {
    /// A `train`, `sft`, `eval` or `rollout --out` directory; a `fit` or `demo --out`
    /// gets one for each of its SFT, GRPO and check-set stages that ran.
    #[arg(value_name = "DIR")]
    dir: PathBuf,
}

pub async fn run(args: Args) -> Result<()> {
    let stages = each_stage(&args.dir, |stage| {
        outln!("{}", ta_eval::write_report(stage)?.display())?;
        Ok(())
    })?;
    if !stages {
        outln!("{}", ta_eval::write_report(&args.dir)?.display())?;
    }
    Ok(())
}
