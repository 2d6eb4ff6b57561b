//! `train-agent report`: write a directory's `report.html` (one self-contained file).

use std::path::PathBuf;

use anyhow::Result;

use crate::cmd::fit::run::reported_stages;

#[derive(clap::Args)]
pub struct Args {
    /// A `train`, `sft`, `eval` or `rollout --out` directory; a `fit` or `demo --out`
    /// gets one for each of its SFT, GRPO and check-set stages that ran.
    #[arg(value_name = "DIR")]
    dir: PathBuf,
}

pub async fn run(args: Args) -> Result<()> {
    if let Some(parts) = reported_stages(&args.dir) {
        let mut written = 0;
        for part in parts {
            // A stage stopped before its first step has nothing to show; the others still do.
            match ta_eval::write_report(&part) {
                Ok(path) => {
                    println!("{}", path.display());
                    written += 1;
                }
                Err(e) => tracing::warn!("no report for {}: {e}", part.display()),
            }
        }
        anyhow::ensure!(written > 0, "{} is a run whose stages wrote nothing to report yet\nhint: run its command again to continue it", args.dir.display());
        return Ok(());
    }
    let path = ta_eval::write_report(&args.dir)?;
    println!("{}", path.display());
    Ok(())
}
