//! `train-agent scenarios`: task supply for any MCP server. `generate` asks a teacher model for
//! tasks and checks their answers by running them; `synth` writes SQL tasks offline from the
//! server's own schema and data.

pub mod generate;
pub mod synth;

use anyhow::Result;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Generate scenarios with a teacher model from the server's tools, resources and prompts;
    /// keep those whose answer a solver reproduces through the real server.
    Generate(Box<generate::Args>),
    /// Synthesize SQL question/answer scenarios offline (no model) through a server's SQL query tool.
    Synth(synth::Args),
}

pub async fn run(command: Command) -> Result<()> {
    match command {
        Command::Generate(a) => generate::run(*a).await,
        Command::Synth(a) => synth::run(a).await,
    }
}
