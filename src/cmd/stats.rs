//! `train-agent stats`: a run's, evaluation's or rollout's summary table in the terminal.

use std::path::PathBuf;

use anyhow::Result;

use crate::cmd::fit::run::reported_stages;

#[derive(clap::Args)]
pub struct Args {
    /// A `train`, `sft`, `eval` or `rollout --out` directory; a `fit` or `demo --out`
    /// shows each of its SFT, GRPO and check-set stages that ran.
    #[arg(value_name = "DIR")]
    dir: PathBuf,
}

pub async fn run(args: Args) -> Result<()> {
    if let Some(parts) = reported_stages(&args.dir) {
        let mut shown = 0;
        for part in parts {
            // A stage stopped before its first step has nothing to show; the others still do.
            match ta_eval::stats::render(&part) {
                Ok(table) => {
                    println!("{}:\n{table}", part.display());
                    shown += 1;
                }
                Err(e) => tracing::warn!("nothing to show for {}: {e}", part.display()),
            }
        }
        anyhow::ensure!(shown > 0, "{} is a run whose stages wrote nothing to show yet\nhint: run its command again to continue it", args.dir.display());
        return Ok(());
    }
    println!("{}", ta_eval::stats::render(&args.dir)?);
    Ok(())
}
