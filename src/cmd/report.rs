//! `train-agent report`: write a directory's `report.html` (one self-contained file).

use std::path::PathBuf;

use anyhow::Result;

#[derive(clap::Args)]
pub struct Args {
    /// A `train --out`, an `eval --out` or a `rollout --out` directory.
    #[arg(value_name = "DIR")]
    dir: PathBuf,
}

pub async fn run(args: Args) -> Result<()> {
    let path = ta_eval::write_report(&args.dir)?;
    println!("{}", path.display());
    Ok(())
}
