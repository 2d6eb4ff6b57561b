//! The model server a command talks to, from its flags: an endpoint to connect to, or the
//! embedded engine to start.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use ta_python::{Engine, EngineOptions, EngineSource, PythonEnv};

use crate::args::{BASE_NAME, ModelArgs};

/// A chat endpoint ready to use; holds the engine process (if any) so it lives as long as this.
pub struct ModelEndpoint {
    pub chat: ta_chat::ChatClient,
    pub model: String,
    pub record_tokens: bool,
    pub engine: Option<Engine>,
}

impl ModelEndpoint {
    /// Connects to `--base-url`, or starts the embedded engine (its log at `engine_log`).
    pub async fn connect(args: &ModelArgs, engine_log: PathBuf) -> Result<ModelEndpoint> {
        let limits = args.http.limits()?;
        if let Some(url) = &args.base_url {
            let key = std::env::var(&args.api_key_env).ok();
            return Ok(ModelEndpoint {
                chat: ta_chat::ChatClient::new(url, key, limits),
                model: args.model.clone().expect("clap requires --model with --base-url"),
                record_tokens: args.record_tokens,
                engine: None,
            });
        }
        let Some(base_model) = &args.base_model else {
            bail!("no model given\nhint: pass --base-model smollm2-135m-instruct to start the embedded engine, or --base-url URL --model NAME for an existing server");
        };
        let options = args.engine.options(base_model, BASE_NAME, engine_log);
        let served = EngineSource::Start { python: PythonEnv::ensure()?, options: Box::new(options) }.open().await.context("the embedded engine did not start")?;
        Ok(ModelEndpoint {
            chat: ta_chat::ChatClient::new(&served.client.base_url(), None, limits),
            model: served.base_name,
            record_tokens: true,
            engine: served.process,
        })
    }
}

/// The engine of a command that loads adapters (`eval`, `train`): the one at `--engine-url`,
/// which serves the base model as `engine_model`, else the embedded engine that `start` gives
/// the Python environment and options of (called only then, as it may install Python).
pub fn engine_source(engine_url: Option<&str>, engine_model: &str, start: impl FnOnce() -> Result<(PythonEnv, EngineOptions)>) -> Result<EngineSource> {
    Ok(match engine_url {
        Some(url) => EngineSource::Running { url: url.to_string(), base_name: engine_model.to_string() },
        None => {
            let (python, options) = start()?;
            EngineSource::Start { python, options: Box::new(options) }
        }
    })
}
