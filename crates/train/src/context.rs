//! What a run is given: its config and the parts already running or loaded.

use std::path::Path;

use ta_chat::ChatClient;
use ta_python::{EngineClient, PythonEnv};
use ta_rollout::{AgentConfig, ToolHost};
use ta_types::Scenario;

use crate::config::TrainConfig;

/// Everything a run needs that is already running or loaded.
pub struct Context<'a, T: ToolHost> {
    pub cfg: &'a TrainConfig,
    pub out: &'a Path,
    pub tools: &'a T,
    pub system_prompt: &'a str,
    pub chat: &'a ChatClient,
    pub engine: &'a EngineClient,
    /// The name the engine serves the base model under.
    pub base_name: &'a str,
    pub python: &'a PythonEnv,
    pub train: Vec<Scenario>,
    pub validation: Vec<Scenario>,
    /// Where the base model's validation of this setting is kept across runs (`None`: not kept).
    pub base_cache: Option<crate::base_cache::BaseCache>,
    /// Environment for the trainer process (e.g. `CUDA_VISIBLE_DEVICES`).
    pub trainer_env: Vec<(String, String)>,
}

impl<T: ToolHost> Context<'_, T> {
    /// The agent's settings for the run's episodes, at `temperature` with `seed`.
    pub(crate) fn agent_config(&self, temperature: f32, seed: u64) -> AgentConfig {
        let r = &self.cfg.rollout;
        AgentConfig {
            max_turns: r.max_turns,
            max_tokens: r.max_tokens,
            max_episode_tokens: r.max_episode_tokens,
            temperature,
            top_p: r.top_p,
            tool_result_max_chars: r.tool_result_max_chars,
            record_tokens: true,
            seed: Some(seed),
        }
    }
}
