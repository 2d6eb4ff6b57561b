//! `train-agent`: the command-line edge. It parses flags, sets up logging and Ctrl-C handling,
//! and wires the crates together; the work itself lives in `crates/`.

mod args;
mod cmd;

use clap::{Parser, Subcommand};

/// Turn a generic language model into a specialist for one MCP server.
///
/// Typical flow: look at the server's tools (`tools`), play episodes with a model (`rollout`),
/// serve a model with LoRA hot-loading (`serve`). Every command takes `--help`.
#[derive(Parser)]
#[command(name = "train-agent", version, about, long_about = None, after_help = EXAMPLES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log filter (also RUST_LOG), e.g. `debug` or `train_agent=debug,ta_mcp=trace`.
    #[arg(long, global = true, env = "TRAIN_AGENT_LOG", default_value = "info")]
    log: String,
}

const EXAMPLES: &str = "\
Examples:
  train-agent demo
  train-agent tools --server \"train-agent demo-server\"
  train-agent tools --server \"npx -y @modelcontextprotocol/server-everything\" --json
  train-agent rollout --server \"train-agent demo-server\" --scenarios scenarios/company.jsonl \\
      --base-model smollm2-135m-instruct --rollouts-per-scenario 2 --out runs/first
  train-agent serve --base-model smollm2-135m-instruct --port 8000
  train-agent eval --server \"train-agent demo-server\" --model runs/first/final \\
      --dataset scenarios/company.jsonl --compare-base --out runs/first-eval
  train-agent stats runs/first
  train-agent report runs/first";

#[derive(Subcommand)]
enum Command {
    /// The whole product on the bundled demo server: base baseline, SFT warm start, GRPO, and the
    /// base / SFT / SFT+GRPO table with a report. Runs on CPU (SmolLM2-135M) or GPU (Qwen 0.5B).
    Demo(cmd::demo::Args),
    /// List an MCP server's tools as the model will see them (OpenAI `tools` format with --json).
    Tools(cmd::tools::Args),
    /// Play episodes of scenarios against an MCP server with a model and write trajectories.
    Rollout(cmd::rollout::Args),
    /// Run the demo MCP server (a read-only company database in SQLite) over stdio or HTTP.
    DemoServer(cmd::demo_server::Args),
    /// Serve a model through the embedded OpenAI-compatible engine (LoRA hot-loading, vLLM API).
    Serve(cmd::serve::Args),
    /// Train a LoRA adapter with GRPO on an MCP server's scenarios.
    Train(cmd::train::Args),
    /// Collect traces (messages + tools) for supervised fine-tuning: from a teacher model, the
    /// model itself (rejection sampling) or the scenarios' reference solutions (--reference).
    Collect(cmd::collect::Args),
    /// Keep the successful, non-duplicate traces and export them as a dataset (JSONL, Parquet).
    Curate(cmd::curate::Args),
    /// Supervised fine-tuning of a LoRA adapter on a curated dataset (loss on assistant tokens).
    Sft(cmd::sft::Args),
    /// Rescore trajectories offline with an LLM judge; report its agreement with ground truth.
    Score(cmd::score::Args),
    /// Evaluate an adapter (or a base model) on held-out scenarios; --compare-base runs the base
    /// model beside it and shows wins and losses per scenario.
    Eval(cmd::eval::Args),
    /// Print the summary table of a run, evaluation or rollout directory.
    Stats(cmd::stats::Args),
    /// Write a directory's report.html: one self-contained file with curves, tables and trajectories.
    Report(cmd::report::Args),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    init_logging(&cli.log);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Tools(a) => cmd::tools::run(a).await,
            Command::Rollout(a) => cmd::rollout::run(a).await,
            Command::DemoServer(a) => cmd::demo_server::run(a).await,
            Command::Serve(a) => cmd::serve::run(a).await,
            Command::Train(a) => cmd::train::run(a).await.map(drop),
            Command::Demo(a) => cmd::demo::run(a).await,
            Command::Collect(a) => cmd::collect::run(a).await,
            Command::Curate(a) => cmd::curate::run(a).await,
            Command::Sft(a) => cmd::sft::run(a).await,
            Command::Score(a) => cmd::score::run(a).await,
            Command::Eval(a) => cmd::eval::run(a).await,
            Command::Stats(a) => cmd::stats::run(a).await,
            Command::Report(a) => cmd::report::run(a).await,
        }
    });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Logs go to stderr: stdout belongs to results (and to the MCP protocol in `demo-server`).
fn init_logging(filter: &str) {
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| {
        if filter == "info" { "warn,train_agent=info,ta_rollout=info,ta_python=info,ta_mcp=warn".to_string() } else { filter.to_string() }
    });
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        .with_target(false)
        .compact()
        .init();
}
