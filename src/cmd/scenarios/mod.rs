//! `train-agent scenarios`: task supply for any MCP server. `generate` asks a teacher model for
//! tasks and checks their answers by running them; `synth` writes SQL tasks offline from the
//! server's own schema and data; `walk` writes tasks offline for any server from what its read
//! tools return; `paraphrase` rewords checked tasks with a teacher; `frontier`
//! keeps the tasks a model solves sometimes.

pub mod frontier;
pub mod generate;
pub mod paraphrase;
pub mod synth;
pub mod walk;

use anyhow::Result;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Generate scenarios with a teacher model from the server's tools, resources and prompts;
    /// keep those whose answer a solver reproduces through the real server.
    Generate(Box<generate::Args>),
    /// Synthesize SQL question/answer scenarios offline (no model) through a server's SQL query tool.
    Synth(synth::Args),
    /// Write checked scenarios offline (no model) for any server: walk its read-only tools, ask
    /// about what they return, keep what a replay on a fresh server reproduces.
    Walk(walk::Args),
    /// Keep the scenarios a model solves sometimes but not always (0 < pass < K in a sampled
    /// `eval`): the learnable frontier, where GRPO's groups carry a signal.
    Frontier(frontier::Args),
    /// Other wordings of checked tasks by a teacher model, kept only when they keep the
    /// question's values and operation; the answers stay the tasks' own.
    Paraphrase(Box<paraphrase::Args>),
}

pub async fn run(command: Command) -> Result<()> {
    match command {
        Command::Generate(a) => generate::run(*a).await,
        Command::Synth(a) => synth::run(a).await,
        Command::Walk(a) => walk::run(a).await,
        Command::Frontier(a) => frontier::run(a),
        Command::Paraphrase(a) => paraphrase::run(*a).await,
    }
}
