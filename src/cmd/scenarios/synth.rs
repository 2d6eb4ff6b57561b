//! `train-agent scenarios synth` (being built: see issue #14).

use anyhow::Result;

#[derive(clap::Args)]
pub struct Args {}

pub async fn run(_args: Args) -> Result<()> {
    anyhow::bail!("`scenarios synth` is not built yet")
}
