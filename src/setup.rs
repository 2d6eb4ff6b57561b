//! What every command that plays episodes (`rollout`, `collect`, `eval`, `train`) does before the
//! first one, in one place so they cannot drift apart: the scenarios, the logs directory, the
//! MCP server connected with each episode's isolation, its tools, the system prompt, and the
//! model server (an endpoint, or the embedded engine started where the command needs one).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use ta_python::{EngineOptions, EngineSource, PythonEnv, ServedEngine};
use ta_reward::{RewardConfig, Rewarder};
use ta_rollout::isolation::IsolationSettings;
use ta_types::Scenario;

use crate::args::{ModelArgs, ScenarioArgs, ServerArgs};
use crate::model::ModelEndpoint;
use crate::server::Server;

/// The tools offered to the model (OpenAI `tools` format), written in the run's directory.
pub const TOOLS_FILE: &str = "tools.json";

/// A command's running parts for playing episodes. [`RunSetup::close`] stops the server.
pub struct RunSetup {
    /// `--out/logs`: the engine's log, the MCP server's stderr.
    pub logs: PathBuf,
    pub server: Server,
    pub tools: ta_rollout::McpTools,
    pub system_prompt: String,
}

impl RunSetup {
    /// Creates `out/logs` (a command that writes before it connects calls this first).
    pub fn logs(out: &Path) -> Result<PathBuf> {
        let logs = out.join("logs");
        std::fs::create_dir_all(&logs).with_context(|| format!("cannot create {}", logs.display()))?;
        Ok(logs)
    }

    /// Checks that `scenarios` can be scored under `isolation`, connects the server with it
    /// (offering the tools the scenarios need, see [`scenario_tools`]), and renders the system
    /// prompt (`template`, else the default) from what it offers.
    pub async fn start(out: &Path, server: &ServerArgs, isolation: &IsolationSettings, scenarios: &[Scenario], template: Option<&Path>) -> Result<RunSetup> {
        let logs = RunSetup::logs(out)?;
        check_state_capture(scenarios, isolation)?;
        let (server, isolation) = scenario_tools(server, isolation, scenarios);
        let server = Server::connect_isolated(&server, &isolation, Some(&logs)).await?;
        let tools = server.tools();
        // What the model is shown, kept beside the run: which tools it could call.
        let shown = out.join(TOOLS_FILE);
        std::fs::write(&shown, serde_json::to_vec_pretty(ta_rollout::ToolHost::specs(&tools))?).with_context(|| format!("cannot write {}", shown.display()))?;
        let system_prompt = server.system_prompt(template)?;
        Ok(RunSetup { logs, server, tools, system_prompt })
    }

    /// The model server of `rollout` and `collect`: `--base-url`, or the embedded engine.
    pub async fn model(&self, args: &ModelArgs) -> Result<ModelEndpoint> {
        ModelEndpoint::connect(args, self.engine_log()).await
    }

    /// The engine of `eval` and `train`: `shared`, one the caller started (`fit`'s), else the one
    /// their flags name (see [`crate::model::engine_source`]); `start` gets the embedded engine's
    /// log path.
    pub fn engine(
        &self,
        shared: Option<&ServedEngine>,
        engine_url: Option<&str>,
        engine_model: &str,
        start: impl FnOnce(PathBuf) -> Result<(PythonEnv, EngineOptions)>,
    ) -> Result<EngineSource> {
        if let Some(s) = shared {
            return Ok(EngineSource::Running { url: s.client.base_url(), base_name: s.base_name.clone() });
        }
        crate::model::engine_source(engine_url, engine_model, || start(self.engine_log()))
    }

    /// Where the base model's episodes on `tasks` are kept across runs (`ta_train::base_cache`):
    /// keyed by the version, the model, what this setup offers it (server, tools, system prompt),
    /// the tasks, then `settings` (an object of whatever else the command lets decide them:
    /// episode, sampling, engine), in that order.
    pub fn base_cache(&self, base_model: &str, tasks: &[Scenario], settings: serde_json::Value) -> ta_train::base_cache::BaseCache {
        let mut key = serde_json::json!({
            "version": env!("CARGO_PKG_VERSION"),
            "model": ta_train::base_cache::model_identity(base_model),
            "server": &self.server.description,
            "tools": ta_rollout::ToolHost::specs(&self.tools),
            "system_prompt": &self.system_prompt,
            "tasks": tasks,
        });
        if let (Some(key), serde_json::Value::Object(settings)) = (key.as_object_mut(), settings) {
            key.extend(settings);
        }
        ta_train::base_cache::BaseCache::new(&ta_train::base_cache::BaseCache::dir(&ta_python::env::cache_root()), &key)
    }

    fn engine_log(&self) -> PathBuf {
        self.logs.join("engine.log")
    }

    /// Stops the server (and every isolated one).
    pub async fn close(&self) {
        self.server.close().await;
    }
}

/// The server flags and isolation a run of `scenarios` uses: without `--tools` or
/// `--exclude-tools`, only the tools every scenario names (`tools`, written by the synthesizers),
/// so the model never sees a tool the tasks do not need; and those the synthesizer found to only
/// read count as read-only for the isolation default.
pub fn scenario_tools(server: &ServerArgs, isolation: &IsolationSettings, scenarios: &[Scenario]) -> (ServerArgs, IsolationSettings) {
    let (mut server, mut isolation) = (server.clone(), isolation.clone());
    if let Some((tools, read_only)) = ta_types::scenario::tools_needed(scenarios) {
        if server.tools.is_empty() && server.exclude_tools.is_empty() {
            let shown: Vec<String> = tools.iter().map(|t| ta_types::terminal::terminal_safe(t).into_owned()).collect();
            eprintln!("tools: {} (the scenarios' `tools`; --tools or --exclude-tools to choose others)", shown.join(", "));
            server.tools = tools.clone();
        }
        if read_only {
            isolation.read_only_tools = tools;
        }
    }
    (server, isolation)
}

/// The scenarios of `--scenarios` that `select` keeps (the command's split), then the first
/// `--limit`.
pub fn load_scenarios(args: &ScenarioArgs, select: impl FnOnce(&mut Vec<Scenario>)) -> Result<Vec<Scenario>> {
    let mut scenarios = ta_types::scenario::load_scenarios(&args.scenarios)?;
    select(&mut scenarios);
    if let Some(n) = args.limit {
        scenarios.truncate(n);
    }
    Ok(scenarios)
}

/// Scenarios that check the state need the state captured: without it every one of them would
/// go without its state part.
fn check_state_capture(scenarios: &[Scenario], settings: &IsolationSettings) -> Result<()> {
    if settings.capture_state.is_none()
        && let Some(s) = scenarios.iter().find(|s| s.expected_state.is_some())
    {
        bail!(
            "scenario `{}` has expected_state, but no --capture-state was given\nhint: pass --capture-state CMD (run in {{workdir}} after each episode), e.g. --capture-state \"sqlite3 shop.db .dump\"",
            s.id
        );
    }
    Ok(())
}

/// Fails fast (before any engine starts) on reward settings that cannot work: a judge without
/// its API key, an unreadable prompt file, a malformed custom reward, a `local/` judge that the
/// run's own engine does not serve. `own_engine` is the name that engine serves the base model
/// under, when the command starts one: a `local/NAME` judge without a URL is asked of it, and
/// any other NAME would fail at the first judged step, after SFT and validation have run.
pub fn check_rewards(reward: &RewardConfig, own_engine: Option<&str>) -> Result<()> {
    let mut r = reward.clone();
    if let Some(name) = r.judge.model.strip_prefix("local/")
        && r.judge.base_url.is_none()
    {
        if let Some(served) = own_engine
            && name != served
        {
            bail!(
                "the judge `local/{name}` would be asked of the run's own engine, which serves the base model as `local/{served}` and no model `{name}`\nhint: --judge-model local/{served} judges with the base model; to judge with another model, serve it (`train-agent serve --base-model MODEL --served-model-name {name}`) and pass --judge-base-url URL"
            );
        }
        // The run's own engine will serve it.
        r.judge.base_url = Some("http://127.0.0.1:1/v1".into());
    }
    Rewarder::new(&r, None)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judged(model: &str, base_url: Option<&str>) -> RewardConfig {
        let mut r = RewardConfig::default();
        r.judge.model = model.into();
        r.judge.base_url = base_url.map(Into::into);
        r
    }

    #[test]
    fn a_local_judge_must_be_a_model_the_runs_own_engine_serves() {
        assert!(check_rewards(&judged("local/base", None), Some("base")).is_ok());
        let err = check_rewards(&judged("local/qwen-judge", None), Some("base")).unwrap_err().to_string();
        assert!(err.contains("serves the base model as `local/base` and no model `qwen-judge`") && err.contains("--judge-base-url"), "{err}");
        // Served elsewhere: its own URL, or an engine the command does not start.
        assert!(check_rewards(&judged("local/qwen-judge", Some("http://127.0.0.1:8000/v1")), Some("base")).is_ok());
        assert!(check_rewards(&judged("local/qwen-judge", None), None).is_ok());
    }
}
