//! `train-agent serve`: the embedded engine in the foreground, for use by any OpenAI client.

use anyhow::{Context, Result, bail};
use ta_python::{Engine, PythonEnv};

use crate::args::EngineArgs;
use crate::stdout::outln;

#[derive(clap::Args)]
pub struct Args {
    /// Base model: a Hugging Face id, a local directory, a .gguf file, or a packaged model
    /// (`smollm2-135m-instruct`, `qwen2.5-coder-0.5b-instruct`).
    #[arg(long, value_name = "MODEL", value_parser = crate::args::model_spec)]
    base_model: String,
    /// Name clients use for the base model in `model`.
    #[arg(long, default_value = crate::args::BASE_NAME)]
    served_model_name: String,
    /// Port to listen on (127.0.0.1).
    #[arg(long, default_value_t = 8000)]
    port: u16,
    /// Engine log file.
    #[arg(long, default_value = "engine.log")]
    log_file: std::path::PathBuf,
    #[command(flatten)]
    engine: EngineArgs,
}

pub async fn run(args: Args) -> Result<()> {
    let env = PythonEnv::ensure()?;
    let mut opts = args.engine.options(&args.base_model, &args.served_model_name, args.log_file.clone());
    opts.port = Some(args.port);
    eprintln!("loading {} (log: {})", args.base_model, args.log_file.display());
    let mut engine = Engine::start(&env, &opts).await.context("the engine did not start")?;
    let url = engine.client().base_url();
    outln!("serving {} as `{}` at {url} (OpenAI API; Ctrl-C stops)", args.base_model, args.served_model_name)?;
    tokio::select! {
        status = engine.wait() => {
            let status = status?;
            bail!("the engine exited ({status}); last lines of {}:\n{}", args.log_file.display(), ta_python::engine::log_tail(&args.log_file, 20))
        }
        _ = crate::interrupted::ctrl_c() => {
            engine.shutdown().await;
            Ok(())
        }
    }
}
