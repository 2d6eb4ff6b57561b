//! `train-agent stats`: a run's, evaluation's or rollout's summary table in the terminal.

use std::path::PathBuf;

use anyhow::Result;

#[derive(clap::Args)]
pub struct Args {
    /// A `train --out`, an `eval --out` or a `rollout --out` directory.
    #[arg(value_name = "DIR")]
    dir: PathBuf,
}

pub async fn run(args: Args) -> Result<()> {
    println!("{}", ta_eval::stats::render(&args.dir)?);
    Ok(())
}
