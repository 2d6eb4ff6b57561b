//! Flag groups shared by several subcommands, and how their values read as settings. Nothing
//! here connects, starts or reads a file: that is `crate::setup` (and `crate::server`,
//! `crate::model`), so a command's flags can be read, checked and shown without side effects.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Result, bail};
use ta_chat::HttpLimits;
use ta_python::EngineOptions;
use ta_reward::{JudgeMode, RewardConfig};

/// Which model server the agent talks to: an external OpenAI-compatible endpoint, an engine
/// already running (ours or vLLM), or the embedded engine started for this command.
#[derive(clap::Args, Debug, Clone)]
pub struct ModelArgs {
    /// Start the embedded engine with this base model: a Hugging Face id, a local directory, a
    /// .gguf file, or a packaged model (`smollm2-135m-instruct`, `qwen2.5-coder-0.5b-instruct`).
    #[arg(long, value_name = "MODEL", conflicts_with = "base_url", env = "TRAIN_AGENT_BASE_MODEL", value_parser = model_spec)]
    pub base_model: Option<String>,
    /// Use an OpenAI-compatible endpoint instead, e.g. https://api.openai.com/v1 or a `vllm serve`
    /// at http://127.0.0.1:8000/v1. Needs --model.
    #[arg(long, value_name = "URL", requires = "model")]
    pub base_url: Option<String>,
    /// Model name to request from --base-url.
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// Environment variable holding the API key for --base-url (never printed or written).
    #[arg(long, value_name = "NAME", default_value = "OPENAI_API_KEY")]
    pub api_key_env: String,
    /// Ask --base-url for token ids and logprobs (vLLM and the embedded engine support it; hosted
    /// APIs reject it). Always on for the embedded engine.
    #[arg(long)]
    pub record_tokens: bool,
    #[command(flatten)]
    pub engine: EngineArgs,
    #[command(flatten)]
    pub http: HttpArgs,
}

/// How long a call to the model server may wait (defaults: `ta_chat::HttpLimits::DEFAULT`).
#[derive(clap::Args, Debug, Clone)]
pub struct HttpArgs {
    /// Seconds to establish a connection to the model server.
    #[arg(long, help_heading = HTTP_HEADING, value_name = "S", env = "TRAIN_AGENT_MODEL_CONNECT_TIMEOUT", default_value_t = HttpLimits::DEFAULT.connect.as_secs_f64())]
    pub model_connect_timeout: f64,
    /// Seconds one request may take, from sending it to the last byte of the answer.
    #[arg(long, help_heading = HTTP_HEADING, value_name = "S", env = "TRAIN_AGENT_MODEL_TIMEOUT", default_value_t = HttpLimits::DEFAULT.request.as_secs_f64())]
    pub model_timeout: f64,
    /// Seconds the answer's body may take after its headers (cuts off a server dripping bytes).
    #[arg(long, help_heading = HTTP_HEADING, value_name = "S", env = "TRAIN_AGENT_MODEL_STALL_TIMEOUT", default_value_t = HttpLimits::DEFAULT.stall.as_secs_f64())]
    pub model_stall_timeout: f64,
    /// Seconds one model call may take in all: every retry and every wait between them.
    #[arg(long, help_heading = HTTP_HEADING, value_name = "S", env = "TRAIN_AGENT_MODEL_DEADLINE", default_value_t = HttpLimits::DEFAULT.deadline.as_secs_f64())]
    pub model_deadline: f64,
    /// The longest `Retry-After` (429) honoured, in seconds; a longer one is waited this long.
    #[arg(long, help_heading = HTTP_HEADING, value_name = "S", env = "TRAIN_AGENT_MODEL_MAX_RETRY_AFTER", default_value_t = HttpLimits::DEFAULT.max_retry_after.as_secs_f64())]
    pub model_max_retry_after: f64,
    /// Retries of a failed model call (429, 5xx, timeouts, dropped connections).
    #[arg(long, help_heading = HTTP_HEADING, value_name = "N", env = "TRAIN_AGENT_MODEL_RETRIES", default_value_t = HttpLimits::DEFAULT.max_retries)]
    pub model_retries: u32,
}

const HTTP_HEADING: &str = "Model server timeouts";

impl HttpArgs {
    pub fn limits(&self) -> Result<HttpLimits> {
        let secs = |flag: &str, v: f64| -> Result<Duration> {
            if !(v.is_finite() && v > 0.0) {
                bail!("--{flag} must be a positive number of seconds, got {v}\nhint: e.g. --{flag} 30");
            }
            Ok(Duration::from_secs_f64(v))
        };
        Ok(HttpLimits {
            connect: secs("model-connect-timeout", self.model_connect_timeout)?,
            request: secs("model-timeout", self.model_timeout)?,
            stall: secs("model-stall-timeout", self.model_stall_timeout)?,
            deadline: secs("model-deadline", self.model_deadline)?,
            max_retry_after: secs("model-max-retry-after", self.model_max_retry_after)?,
            max_retries: self.model_retries,
        })
    }
}

/// Settings of the embedded engine (vLLM's flag names).
#[derive(clap::Args, Debug, Clone)]
pub struct EngineArgs {
    /// Device for the embedded engine: auto, cpu, cuda, cuda:1.
    #[arg(long, default_value = "auto")]
    pub device: String,
    /// Weights dtype: auto (bf16 on GPU and on CPUs fast at bf16, AMX or AMD with AVX512-BF16,
    /// else fp32), bfloat16, float16, float32.
    #[arg(long, default_value = "auto")]
    pub dtype: String,
    /// Longest prompt + completion the engine accepts.
    #[arg(long)]
    pub max_model_len: Option<u32>,
    /// Share of GPU memory the engine may use (leave room for the trainer; lower it to run
    /// several runs side by side on one GPU).
    #[arg(long, env = "TRAIN_AGENT_GPU_MEMORY_UTILIZATION")]
    pub gpu_memory_utilization: Option<f32>,
    /// Seconds to wait for the engine to load the model.
    #[arg(long, default_value_t = 900)]
    pub engine_timeout: u64,
}

impl EngineArgs {
    pub fn options(&self, model: &str, served_name: &str, log_path: PathBuf) -> EngineOptions {
        let mut o = EngineOptions::new(model, served_name, log_path);
        o.device = Some(self.device.clone());
        o.dtype = Some(self.dtype.clone());
        o.max_model_len = self.max_model_len;
        o.gpu_memory_utilization = self.gpu_memory_utilization;
        o.ready_timeout = Duration::from_secs(self.engine_timeout);
        o
    }

    /// What of the engine decides a base model's episodes, for `ta_train::base_cache` keys: its
    /// device, precision and context, the server it is reached at (`--engine-url`) and the model
    /// asked there, and the GPUs it sees; for the embedded engine also its code (which owns what
    /// `--dtype auto` means) and, with `auto`, the CPU that rule reads.
    pub fn identity(&self, engine_url: Option<&str>, engine_model: &str) -> serde_json::Value {
        let embedded = engine_url.is_none().then(|| (ta_python::env::package_identity(), (self.dtype == "auto").then(cpu_model)));
        serde_json::json!([
            &self.device,
            &self.dtype,
            self.max_model_len.map(|n| n.to_string()),
            engine_url,
            engine_model,
            std::env::var("CUDA_VISIBLE_DEVICES").ok(),
            embedded
        ])
    }
}

/// The CPU's vendor and model as /proc/cpuinfo names them (None where it cannot be read).
fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let field = |name: &str| info.lines().find(|l| l.starts_with(name)).and_then(|l| l.split_once(':')).map(|(_, v)| v.trim().to_string());
    Some(format!("{} {}", field("vendor_id")?, field("model name")?))
}

/// The name the embedded engine serves its base model under.
pub const BASE_NAME: &str = "base";

/// How a rerun treats the episodes an earlier run of the same command left in `--out`.
#[derive(clap::Args, Debug, Clone)]
pub struct ResumeArgs {
    /// On a rerun, play again the episodes that ended in `error` (model server or MCP server
    /// down, 401, 5xx, a crash); finished ones are kept either way. `--retry-failed=false` keeps
    /// the errored ones as they are.
    #[arg(long, value_name = "BOOL", env = "TRAIN_AGENT_RETRY_FAILED", default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub retry_failed: bool,
}

/// The scenarios a command plays: `rollout`, `collect` and `eval` (`train` takes the same
/// `--scenarios` without `--limit`, as its split is part of the run). Each command selects its
/// split itself, as their rules differ (`eval` splits unsplit data as `train` does).
#[derive(clap::Args, Debug, Clone)]
pub struct ScenarioArgs {
    /// Scenarios: a JSON array or JSONL of {"task": ..., "expected": ..., "split": ...}.
    #[arg(long, value_name = "FILE", alias = "dataset")]
    pub scenarios: PathBuf,
    /// Only the first N scenarios (after --split).
    #[arg(long)]
    pub limit: Option<usize>,
}

/// How episodes are played, shared by `rollout`, `collect`, `eval` and `train`. The defaults
/// differ by command (a rollout samples, an evaluation is greedy, `train` takes its config's), so
/// every field is optional here: a command states its defaults once, as an [`EpisodeDefaults`]
/// constant that both fills in the flags (and so `--help`) and resolves them.
#[derive(clap::Args, Debug, Clone)]
pub struct EpisodeArgs {
    /// Model turns per episode (at least 1).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_turns: Option<u32>,
    /// Tokens the model may write per turn.
    #[arg(long)]
    pub max_tokens: Option<u32>,
    /// Tokens the model may write over a whole episode (0: no budget); an episode that reaches
    /// it without an answer fails like one out of turns.
    #[arg(long)]
    pub max_episode_tokens: Option<u32>,
    /// Sampling temperature.
    #[arg(long)]
    pub temperature: Option<f32>,
    /// Nucleus sampling: draw from the smallest set of tokens whose probability reaches this.
    #[arg(long)]
    pub top_p: Option<f32>,
    /// Seed sent with each model call (mixed with the turn and the rollout's index), for
    /// repeatable sampling.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Tool results longer than this are cut (with a note to the model).
    #[arg(long)]
    pub tool_result_max_chars: Option<usize>,
    /// Episodes in flight at once.
    #[arg(long)]
    pub concurrency: Option<usize>,
    /// A minijinja template for the system prompt (variables: complete_task, instructions; use
    /// the one an adapter was trained with).
    #[arg(long, value_name = "FILE")]
    pub system_prompt: Option<PathBuf>,
}

/// One command's defaults for [`EpisodeArgs`]: `const EPISODE: EpisodeDefaults =
/// EpisodeDefaults { temperature: Some(0.7), ..EpisodeDefaults::COMMON }`, put on the flags with
/// `#[command(mut_args = |a| EPISODE.show(a))]` on the command's `Args`.
#[derive(Debug, Clone, Copy)]
pub struct EpisodeDefaults {
    pub max_turns: u32,
    pub max_tokens: u32,
    pub max_episode_tokens: u32,
    /// `None`: the command picks it when it runs (`eval`: greedy with one rollout, 1.0 with several).
    pub temperature: Option<f32>,
    pub top_p: f32,
    /// `None`: no seed is sent.
    pub seed: Option<u64>,
    pub tool_result_max_chars: usize,
    pub concurrency: usize,
}

impl EpisodeDefaults {
    /// The defaults every command shares unless it says otherwise: the agent's own
    /// (`ta_rollout::AgentConfig::DEFAULT`, also `train`'s `[rollout]`), 8 episodes at once.
    pub const COMMON: EpisodeDefaults = {
        let agent = ta_rollout::AgentConfig::DEFAULT;
        EpisodeDefaults {
            max_turns: agent.max_turns,
            max_tokens: agent.max_tokens,
            max_episode_tokens: agent.max_episode_tokens,
            temperature: None,
            top_p: agent.top_p,
            seed: agent.seed,
            tool_result_max_chars: agent.tool_result_max_chars,
            concurrency: 8,
        }
    };

    /// `arg` with this command's default, when it is one of [`EpisodeArgs`]'s flags and has one:
    /// clap then fills it in and `--help` shows it.
    pub fn show(&self, arg: clap::Arg) -> clap::Arg {
        let default = match arg.get_id().as_str() {
            "max_turns" => Some(self.max_turns.to_string()),
            "max_tokens" => Some(self.max_tokens.to_string()),
            "max_episode_tokens" => Some(self.max_episode_tokens.to_string()),
            "temperature" => self.temperature.map(|t| t.to_string()),
            "top_p" => Some(self.top_p.to_string()),
            "seed" => self.seed.map(|s| s.to_string()),
            "tool_result_max_chars" => Some(self.tool_result_max_chars.to_string()),
            "concurrency" => Some(self.concurrency.to_string()),
            _ => None,
        };
        match default {
            Some(value) => arg.default_value(value),
            None => arg,
        }
    }
}

impl EpisodeArgs {
    /// The agent's settings: each flag given, else the command's default. `defaults` must hold a
    /// temperature by now (`eval` sets its own from `--rollouts`).
    pub fn agent_config(&self, defaults: &EpisodeDefaults, record_tokens: bool) -> ta_rollout::AgentConfig {
        ta_rollout::AgentConfig {
            max_turns: self.max_turns.unwrap_or(defaults.max_turns),
            max_tokens: self.max_tokens.unwrap_or(defaults.max_tokens),
            max_episode_tokens: self.max_episode_tokens.unwrap_or(defaults.max_episode_tokens),
            temperature: self.temperature.or(defaults.temperature).expect("every command's EpisodeDefaults give a temperature before it plays"),
            top_p: self.top_p.unwrap_or(defaults.top_p),
            tool_result_max_chars: self.tool_result_max_chars.unwrap_or(defaults.tool_result_max_chars),
            record_tokens,
            seed: self.seed.or(defaults.seed),
        }
    }

    /// `--concurrency`, else the command's default.
    pub fn concurrency(&self, defaults: &EpisodeDefaults) -> usize {
        self.concurrency.unwrap_or(defaults.concurrency)
    }
}

/// The values a setting's enum allows, as help text lists them ("constant or cosine"): read from
/// the enum itself (`ta_trainer::settings::allowed_values`), so the list is written once.
pub fn one_of<T: serde::de::DeserializeOwned>() -> String {
    match ta_trainer::settings::allowed_values::<T>() {
        [rest @ .., last] if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        values => values.join(""),
    }
}

/// A base model that names a local file or directory (a `.gguf` file, or a path) must exist: said
/// when the flags are read, not by the engine or the trainer after the tasks are made. A Hugging
/// Face id or a packaged name is checked where it is fetched.
pub fn model_spec(s: &str) -> Result<String, String> {
    let local = s.ends_with(".gguf") || s.starts_with('/') || s.starts_with("./") || s.starts_with("../");
    if local && !std::path::Path::new(s).exists() {
        return Err(format!(
            "no file or directory {s}: give a .gguf file, a model or adapter directory that exists, a Hugging Face id (HuggingFaceTB/SmolLM2-135M-Instruct) or a packaged model (smollm2-135m-instruct, qwen2.5-coder-0.5b-instruct)"
        ));
    }
    Ok(s.to_string())
}

/// A model named by its provider (`--judge-model`): PROVIDER/MODEL with a provider this tool
/// speaks; keys and URLs are checked where the command starts.
pub fn model_of_provider(s: &str) -> Result<String, String> {
    ta_reward::judge::Provider::of_spec(s).map(|_| s.to_string()).map_err(|e| e.to_string())
}

/// A teacher or solver: PROVIDER/MODEL with a provider this tool speaks, and for `local/MODEL`
/// (the embedded engine serves it) MODEL checked as a base model is ([`model_spec`]). Keys are
/// checked where the command starts (`fit`) or calls the teacher.
pub fn teacher_spec(s: &str) -> Result<String, String> {
    model_of_provider(s)?;
    match s.strip_prefix("local/") {
        Some(model) => model_spec(model).map(|_| s.to_string()),
        None => Ok(s.to_string()),
    }
}

/// A number of things the command needs at least one of (tasks to write, to train or validate on).
pub fn at_least_one(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("{s:?} is not a count: give a whole number, 1 or more")),
    }
}

/// `scenarios synth --join-mix`: three weights, for questions whose SQL joins no table, one, and
/// two or more; none negative, one at least above 0.
pub fn join_mix(s: &str) -> Result<[f64; 3], String> {
    let bad = || format!("{s:?} is not a join mix: give three weights for no join, one and two or more, e.g. 4,2,1 (none negative, one above 0)");
    let weights: Vec<f64> = s.split(',').map(|w| w.trim().parse::<f64>()).collect::<Result<_, _>>().map_err(|_| bad())?;
    match weights[..] {
        [a, b, c] if [a, b, c].iter().all(|w| w.is_finite() && *w >= 0.0) && a + b + c > 0.0 => Ok([a, b, c]),
        _ => Err(bad()),
    }
}

/// A share that must hold something (`fit --sft-share`: SFT needs traces): above 0, at most 1.
pub fn positive_share(s: &str) -> Result<f64, String> {
    share(s).ok().filter(|&x| x > 0.0).ok_or_else(|| format!("{s:?} is not a share above 0: give a number over 0 and at most 1 (0.25 for a quarter)"))
}

/// A share of something, parsed from the command line: a number from 0 to 1.
pub fn share(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if (0.0..=1.0).contains(&x) => Ok(x),
        _ => Err(format!("{s:?} is not a share: give a number from 0 to 1 (0.25 for a quarter)")),
    }
}

/// Which MCP server to use and how to reach it.
#[derive(clap::Args, Debug, Clone)]
pub struct ServerArgs {
    /// MCP server: a URL (streamable HTTP; legacy SSE when the path ends in /sse) or a command
    /// line for a stdio server, e.g. "npx -y @modelcontextprotocol/server-everything". Falls back
    /// to --mcp-config, then $MCP_URL.
    #[arg(long, value_name = "URL|COMMAND")]
    pub server: Option<String>,
    /// A JSON file in the common `mcpServers` format (Claude Desktop, Cursor, ...).
    #[arg(long, value_name = "FILE")]
    pub mcp_config: Option<PathBuf>,
    /// Which entry of --mcp-config to use (optional when it has one).
    #[arg(long, value_name = "NAME", requires = "mcp_config")]
    pub server_name: Option<String>,
    /// Environment variable holding a bearer token for HTTP servers (never printed or written).
    #[arg(long, value_name = "NAME", default_value = DEFAULT_BEARER_TOKEN_ENV)]
    pub bearer_token_env: String,
    /// Seconds one MCP tool call may take, and starting the server through `initialize`. A
    /// stdio server that does not answer in time is stopped.
    #[arg(long, default_value_t = DEFAULT_MCP_TIMEOUT)]
    pub mcp_timeout: u64,
    /// Offer the model only these tools of the server (comma-separated or repeated). Default: the
    /// tools the scenarios name (`tools`, written by the synthesizers), else all. When all of
    /// them declare readOnlyHint, or the synthesizer found they only read, episodes need no
    /// isolation.
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    pub tools: Vec<String>,
    /// Offer every tool of the server but these (comma-separated or repeated).
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    pub exclude_tools: Vec<String>,
}

const DEFAULT_BEARER_TOKEN_ENV: &str = "MCP_BEARER_TOKEN";
const DEFAULT_MCP_TIMEOUT: u64 = 60;

impl ServerArgs {
    /// The flags that name this server to another command (`fit` and `demo` print and run each
    /// stage with them); defaults are left out.
    pub fn argv(&self) -> Vec<String> {
        let mut argv = Vec::new();
        let mut flag = |name: &str, value: String| argv.extend([format!("--{name}"), value]);
        if let Some(s) = &self.server {
            flag("server", s.clone());
        }
        if let Some(p) = &self.mcp_config {
            flag("mcp-config", p.display().to_string());
        }
        if let Some(n) = &self.server_name {
            flag("server-name", n.clone());
        }
        if self.bearer_token_env != DEFAULT_BEARER_TOKEN_ENV {
            flag("bearer-token-env", self.bearer_token_env.clone());
        }
        if self.mcp_timeout != DEFAULT_MCP_TIMEOUT {
            flag("mcp-timeout", self.mcp_timeout.to_string());
        }
        if !self.tools.is_empty() {
            flag("tools", self.tools.join(","));
        }
        if !self.exclude_tools.is_empty() {
            flag("exclude-tools", self.exclude_tools.join(","));
        }
        argv
    }

    /// Whether the user chose the tools (`--tools`, `--exclude-tools`).
    pub fn chooses_tools(&self) -> bool {
        !self.tools.is_empty() || !self.exclude_tools.is_empty()
    }
}

/// Rollout isolation for servers that change state (docs/isolation.md). Unset flags keep the
/// run config's `[isolation]` values, whose defaults are in `IsolationSettings`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct IsolationArgs {
    /// What each rollout gets of its own: `episode` (a server process on a fresh copy of the
    /// state), `group` (one copy per group, a process per rollout) or `none` (one shared server).
    /// Default: `episode` when some tool does not declare readOnlyHint, else `none`.
    #[arg(long, help_heading = ISOLATION_HEADING, value_name = "MODE", value_parser = clap::builder::ValueParser::new(|s: &str| s.parse::<ta_rollout::isolation::Isolate>()))]
    pub isolate: Option<ta_rollout::isolation::Isolate>,
    /// A file or directory copied (reflinked where possible) for each episode to {workdir}, which
    /// the server command names, e.g. --server "mcp-server-sqlite --db-path {workdir}/shop.db".
    #[arg(long, help_heading = ISOLATION_HEADING, value_name = "PATH")]
    pub server_state: Option<PathBuf>,
    /// A shell command run in {workdir} after each episode; its output is stored with the
    /// trajectory (`captured_state`) and checked against the scenario's `expected_state`.
    #[arg(long, help_heading = ISOLATION_HEADING, value_name = "CMD")]
    pub capture_state: Option<String>,
    /// A shell command that resets an HTTP server before each episode (or group).
    #[arg(long, help_heading = ISOLATION_HEADING, value_name = "CMD", conflicts_with = "reset_url")]
    pub reset_command: Option<String>,
    /// A URL POSTed to before each episode (or group) to reset an HTTP server.
    #[arg(long, help_heading = ISOLATION_HEADING, value_name = "URL")]
    pub reset_url: Option<String>,
    /// Servers started ahead of the episodes that need them (`episode` isolation).
    #[arg(long, help_heading = ISOLATION_HEADING, value_name = "N")]
    pub pool: Option<usize>,
}

const ISOLATION_HEADING: &str = "Rollout isolation";

impl IsolationArgs {
    /// Lays the flags given over `settings` (a run config's section, or the defaults).
    pub fn apply(&self, settings: &mut ta_rollout::isolation::IsolationSettings) {
        if self.isolate.is_some() {
            settings.isolate = self.isolate;
        }
        for (flag, value) in
            [(&self.capture_state, &mut settings.capture_state), (&self.reset_command, &mut settings.reset_command), (&self.reset_url, &mut settings.reset_url)]
        {
            if flag.is_some() {
                value.clone_from(flag);
            }
        }
        if self.server_state.is_some() {
            settings.server_state.clone_from(&self.server_state);
        }
        if let Some(n) = self.pool {
            settings.pool = n;
        }
    }

    /// The settings these flags alone give (commands without a run config).
    pub fn settings(&self) -> ta_rollout::isolation::IsolationSettings {
        let mut s = ta_rollout::isolation::IsolationSettings::default();
        self.apply(&mut s);
        s
    }
}

/// Judge flags shared by `train`, `rollout`, `demo` and `score`; they override the run config's
/// `[reward.judge]`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct JudgeArgs {
    /// LLM judge: openai/MODEL, openrouter/VENDOR/MODEL, anthropic/MODEL, or local/NAME (an
    /// OpenAI-compatible server at --judge-base-url; in `train` and `rollout` it defaults to the
    /// embedded engine). Keys come from OPENAI_API_KEY, OPENROUTER_API_KEY, ANTHROPIC_API_KEY.
    #[arg(long, value_name = "PROVIDER/MODEL", value_parser = model_of_provider)]
    pub judge_model: Option<String>,
    /// The judge's API root, e.g. http://127.0.0.1:8000/v1 (overrides OPENAI_BASE_URL and
    /// ANTHROPIC_BASE_URL).
    #[arg(long, value_name = "URL")]
    pub judge_base_url: Option<String>,
    /// A minijinja template (blocks `system` and `user`) replacing the default rubric.
    #[arg(long, value_name = "FILE")]
    pub judge_prompt: Option<PathBuf>,
    /// `group` (all rollouts of a scenario compared in one call) or `absolute` (one call each).
    #[arg(long, value_name = "MODE", value_parser = ["group", "absolute"])]
    pub judge_mode: Option<String>,
    /// Weight of the judge's score in the reward.
    #[arg(long, value_name = "W")]
    pub judge_weight: Option<f64>,
    /// Judge calls in flight at once.
    #[arg(long, value_name = "N")]
    pub judge_concurrency: Option<usize>,
    /// Longest judge reply in tokens (sent to Anthropic and local servers).
    #[arg(long, value_name = "N")]
    pub judge_max_tokens: Option<u32>,
    /// Stop (cleanly, at a checkpoint) once the judge has cost this many US dollars.
    #[arg(long, value_name = "USD")]
    pub judge_budget: Option<f64>,
}

impl JudgeArgs {
    pub fn apply(&self, r: &mut RewardConfig) -> Result<()> {
        let j = &mut r.judge;
        if let Some(m) = &self.judge_model {
            j.model = m.clone();
        }
        if let Some(u) = &self.judge_base_url {
            j.base_url = Some(u.clone());
        }
        if let Some(p) = &self.judge_prompt {
            j.prompt_file = Some(p.clone());
        }
        if let Some(m) = &self.judge_mode {
            j.mode = if m == "absolute" { JudgeMode::Absolute } else { JudgeMode::Group };
        }
        if let Some(n) = self.judge_concurrency {
            j.concurrency = n;
        }
        if let Some(n) = self.judge_max_tokens {
            j.max_output_tokens = n;
        }
        if let Some(b) = self.judge_budget {
            if !(b.is_finite() && b > 0.0) {
                bail!("--judge-budget {b}: must be a positive number of US dollars");
            }
            j.budget_usd = Some(b);
        }
        if let Some(w) = self.judge_weight {
            r.judge_weight = w;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use clap::{Args, CommandFactory, FromArgMatches, Parser};

    use super::{EpisodeArgs, EpisodeDefaults, at_least_one, model_of_provider, model_spec, one_of, positive_share, share, teacher_spec};

    const SOME: EpisodeDefaults = EpisodeDefaults { temperature: Some(0.5), seed: Some(3), ..EpisodeDefaults::COMMON };

    #[derive(Parser)]
    #[command(mut_args = |a| SOME.show(a))]
    struct Cmd {
        #[command(flatten)]
        episode: EpisodeArgs,
    }

    #[derive(Parser)]
    struct ServerCmd {
        #[command(flatten)]
        server: super::ServerArgs,
    }

    #[derive(Parser)]
    struct EngineCmd {
        #[command(flatten)]
        engine: super::EngineArgs,
    }

    /// A base-model validation cached under one engine's identity is not another's: the embedded
    /// engine's key names its code, and with `--dtype auto` the CPU the rule reads (a cache moved
    /// to another CPU, or kept across a change of the rule, once handed float32 episodes to a bf16
    /// run); a server at `--engine-url` is named by its URL alone.
    #[test]
    fn the_embedded_engines_identity_names_its_code_and_the_cpu_auto_resolves_on() {
        let auto = EngineCmd::parse_from(["cmd"]).engine;
        let fixed = EngineCmd::parse_from(["cmd", "--dtype", "float32"]).engine;
        let embedded = auto.identity(None, "base");
        let [code, cpu] = [&embedded[6][0], &embedded[6][1]];
        assert_eq!(code.as_str(), Some(ta_python::env::package_identity().as_str()), "{embedded}");
        if std::path::Path::new("/proc/cpuinfo").exists() {
            assert!(cpu.as_str().is_some_and(|c| c.split_whitespace().count() >= 2), "vendor and model: {embedded}");
        }
        assert!(fixed.identity(None, "base")[6][1].is_null(), "a fixed dtype does not depend on the CPU");
        assert!(auto.identity(Some("http://127.0.0.1:8000/v1"), "m")[6].is_null(), "vLLM's numerics are its own");
    }

    /// The flags `fit` passes on name the same server, with the same options.
    #[test]
    fn server_flags_round_trip() {
        let given = ["cmd", "--server", "mcp-server-sqlite --db-path a b.db", "--bearer-token-env", "TOK", "--mcp-timeout", "9", "--tools", "read_query,list_tables"];
        let parsed = ServerCmd::parse_from(given).server;
        let argv = parsed.argv();
        assert_eq!(argv, &given[1..], "defaults left out, the rest kept in order");
        let again = ServerCmd::parse_from(std::iter::once("cmd".to_string()).chain(argv.clone())).server;
        assert_eq!(again.argv(), argv);
        assert!(parsed.chooses_tools());
        let plain = ServerCmd::parse_from(["cmd", "--server", "x"]).server;
        assert_eq!(plain.argv(), ["--server", "x"]);
        assert!(!plain.chooses_tools());
    }

    /// Every flag of the group with a default shows it in `--help`, and it is the value used.
    #[test]
    fn defaults_are_shown_and_used() {
        let cmd = Cmd::command();
        let without: Vec<_> = cmd.get_arguments().filter(|a| a.get_id() != "help" && a.get_default_values().is_empty()).map(|a| a.get_id().to_string()).collect();
        assert_eq!(without, ["system_prompt"], "flags without a default");
        let parsed = Cmd::parse_from(["cmd"]).episode.agent_config(&SOME, true);
        let resolved = EpisodeArgs::augment_args(clap::Command::new("bare"));
        let bare = EpisodeArgs::from_arg_matches(&resolved.get_matches_from(["bare"])).expect("parses").agent_config(&SOME, true);
        assert_eq!(format!("{parsed:?}"), format!("{bare:?}"), "clap's defaults and the resolved ones differ");
        assert_eq!((parsed.temperature, parsed.seed, parsed.max_tokens), (0.5, Some(3), 512));
    }

    /// A flag given wins over the command's default.
    #[test]
    fn flags_override_defaults() {
        let c = Cmd::parse_from(["cmd", "--temperature", "0", "--max-tokens", "7"]).episode.agent_config(&SOME, false);
        assert_eq!((c.temperature, c.max_tokens, c.record_tokens), (0.0, 7, false));
    }

    #[test]
    fn a_share_is_a_number_from_0_to_1() {
        assert_eq!((share("0"), share("0.25"), share("1")), (Ok(0.0), Ok(0.25), Ok(1.0)));
        for bad in ["1.5", "-0.1", "a quarter", "NaN", ""] {
            assert!(share(bad).unwrap_err().contains("from 0 to 1"), "{bad}");
        }
    }

    #[test]
    fn a_positive_share_is_above_0_and_at_most_1() {
        assert_eq!((positive_share("0.1"), positive_share("1")), (Ok(0.1), Ok(1.0)));
        for bad in ["0", "1.5", "-0.1", "NaN", ""] {
            assert!(positive_share(bad).unwrap_err().contains("above 0"), "{bad}");
        }
    }

    #[test]
    fn a_count_is_one_or_more() {
        assert_eq!((at_least_one("1"), at_least_one("125")), (Ok(1), Ok(125)));
        for bad in ["0", "-1", "2.5", "all", ""] {
            assert!(at_least_one(bad).unwrap_err().contains("1 or more"), "{bad}");
        }
    }

    /// A path must exist; a hub id or a packaged name is left to where it is fetched.
    #[test]
    fn a_local_base_model_must_exist() {
        let dir = tempfile::tempdir().unwrap();
        let gguf = dir.path().join("m.gguf");
        std::fs::write(&gguf, b"GGUF").unwrap();
        let present = [gguf.to_str().unwrap(), dir.path().to_str().unwrap(), "smollm2-135m-instruct", "HuggingFaceTB/SmolLM2-135M-Instruct"];
        for ok in present {
            assert_eq!(model_spec(ok).as_deref(), Ok(ok));
        }
        let missing = dir.path().join("gone.gguf");
        for bad in [missing.to_str().unwrap(), "gone.gguf", "./gone", "../gone", "/no/such/model"] {
            let e = model_spec(bad).unwrap_err();
            assert!(e.contains(bad) && e.contains("packaged model"), "{bad}: {e}");
        }
    }

    /// Only a local teacher names a file here; any teacher names a provider.
    #[test]
    fn a_local_teacher_must_exist() {
        assert!(teacher_spec("local/gone.gguf").unwrap_err().contains("no file or directory gone.gguf"));
        for bad in ["gpt-4o-mini", "cohere/command", "openai/"] {
            assert!(teacher_spec(bad).unwrap_err().contains("names no model this tool can call"), "{bad}");
            assert!(model_of_provider(bad).is_err(), "{bad}");
        }
        assert_eq!(model_of_provider("local/base").as_deref(), Ok("local/base"), "a judge's local name is served, not a file");
        for ok in ["local/smollm2-135m-instruct", "openai/gpt-4o-mini", "anthropic/x.gguf"] {
            assert_eq!(teacher_spec(ok).as_deref(), Ok(ok));
        }
    }

    /// A flag's list of allowed values is the enum's.
    #[test]
    fn one_of_lists_the_enum() {
        assert_eq!(one_of::<ta_trainer::Schedule>(), "constant or cosine");
        assert_eq!(one_of::<ta_types::Split>(), "train or validation");
    }
}
