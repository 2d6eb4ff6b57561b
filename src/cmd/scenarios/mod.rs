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

use std::path::Path;

use anyhow::{Context, Result};

use crate::stdout::outln;

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

/// The train/validation split of a synthesizer's output (`synth`, `walk`).
#[derive(clap::Args)]
pub struct SplitArgs {
    /// Share of the questions (whole groups of phrasings of one question) put in validation.
    #[arg(long, default_value_t = 0.2)]
    pub validation_fraction: f64,
    /// Seed of the question order, the phrasings and the split.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

impl SplitArgs {
    pub fn check(&self) -> Result<()> {
        anyhow::ensure!(
            (0.0..1.0).contains(&self.validation_fraction),
            "--validation-fraction {} is outside [0, 1)\nhint: e.g. 0.2 puts a fifth of the questions in validation",
            self.validation_fraction
        );
        Ok(())
    }
}

/// Writes `rows` to `path` as JSON lines, whole or not at all.
pub fn write_jsonl<T: serde::Serialize>(path: &Path, rows: &[T]) -> Result<()> {
    ta_types::atomic::write_atomic(path, |w| ta_types::jsonl::write_rows(w, rows)).with_context(|| format!("cannot write {}", path.display()))
}

/// A titled table of counts, as the synthesizers print their summaries.
pub fn print_counts<'a>(title: &str, items: impl IntoIterator<Item = (String, &'a usize)>) -> Result<()> {
    outln!("{title}")?;
    for (k, n) in items {
        outln!("  {:<24} {n}", ta_types::terminal::terminal_safe(&k))?;
    }
    Ok(())
}
