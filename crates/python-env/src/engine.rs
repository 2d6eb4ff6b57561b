//! The inference engine as a child process, and a client for the parts of its API that are not
//! chat: health and LoRA hot-loading. The API is vLLM's, so `--engine-url` can point at a
//! `vllm serve ... --enable-lora` server instead (with `VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::env::PythonEnv;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("cannot start the engine: {0}")]
    Spawn(std::io::Error),
    #[error("the engine exited before it was ready ({status}); last lines of {log}:\n{tail}")]
    Died { status: String, log: PathBuf, tail: String },
    #[error("the engine did not become healthy within {0:?} (log: {1})\nhint: loading a large model on CPU is slow; raise --engine-timeout or use a smaller model")]
    Timeout(Duration, PathBuf),
    #[error("engine at {url}: {message}")]
    Request { url: String, message: String },
}

/// How to start the embedded engine. Field names follow vLLM's flags.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// A Hugging Face id, a local directory, a `.gguf` file, or a packaged model name.
    pub model: String,
    pub served_model_name: String,
    pub port: Option<u16>,
    pub device: Option<String>,
    pub dtype: Option<String>,
    pub max_model_len: Option<u32>,
    pub gpu_memory_utilization: Option<f32>,
    pub max_num_seqs: Option<u32>,
    pub enable_lora: bool,
    /// Adapters loaded at once. Training needs 2: the next adapter is loaded before the previous
    /// one is unloaded, so requests never see a missing model.
    pub max_loras: Option<u32>,
    pub max_lora_rank: Option<u32>,
    pub seed: Option<u64>,
    /// Where the engine's stdout and stderr go.
    pub log_path: PathBuf,
    pub ready_timeout: Duration,
    /// Extra environment, e.g. `CUDA_VISIBLE_DEVICES`.
    pub env: Vec<(String, String)>,
}

impl EngineOptions {
    pub fn new(model: impl Into<String>, served_model_name: impl Into<String>, log_path: PathBuf) -> Self {
        EngineOptions {
            model: model.into(),
            served_model_name: served_model_name.into(),
            port: None,
            device: None,
            dtype: None,
            max_model_len: None,
            gpu_memory_utilization: None,
            max_num_seqs: None,
            enable_lora: true,
            max_loras: None,
            max_lora_rank: None,
            seed: None,
            log_path,
            ready_timeout: Duration::from_secs(900),
            env: Vec::new(),
        }
    }

    fn args(&self, port: u16) -> Vec<String> {
        let mut a = vec![
            "--model".into(),
            self.model.clone(),
            "--served-model-name".into(),
            self.served_model_name.clone(),
            "--host".into(),
            "127.0.0.1".into(),
            "--port".into(),
            port.to_string(),
        ];
        let mut opt = |flag: &str, v: Option<String>| {
            if let Some(v) = v {
                a.push(flag.into());
                a.push(v);
            }
        };
        opt("--device", self.device.clone());
        opt("--dtype", self.dtype.clone());
        opt("--max-model-len", self.max_model_len.map(|v| v.to_string()));
        opt("--gpu-memory-utilization", self.gpu_memory_utilization.map(|v| v.to_string()));
        opt("--max-num-seqs", self.max_num_seqs.map(|v| v.to_string()));
        opt("--max-loras", self.max_loras.map(|v| v.to_string()));
        opt("--max-lora-rank", self.max_lora_rank.map(|v| v.to_string()));
        opt("--seed", self.seed.map(|v| v.to_string()));
        if self.enable_lora {
            a.push("--enable-lora".into());
        }
        a
    }

    /// The engine's command line and environment. The engine reads `VLLM_API_KEY` as `vllm serve`
    /// does; one in the user's environment (meant for another server) would lock out the clients
    /// of this engine, which send no key, so it is removed (`env` may still set one).
    fn command(&self, python: &PythonEnv, port: u16) -> tokio::process::Command {
        let mut cmd = python.module_command(crate::env::ENGINE_MODULE);
        cmd.args(self.args(port)).env_remove("VLLM_API_KEY").envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        cmd
    }
}

/// A running engine child process; killed when dropped.
pub struct Engine {
    child: tokio::process::Child,
    client: EngineClient,
    log_path: PathBuf,
}

impl Engine {
    /// Starts the engine and waits until `/health` answers.
    pub async fn start(env: &PythonEnv, opts: &EngineOptions) -> Result<Engine, EngineError> {
        let port = match opts.port {
            Some(p) => p,
            None => free_port().map_err(EngineError::Spawn)?,
        };
        if let Some(dir) = opts.log_path.parent() {
            std::fs::create_dir_all(dir).map_err(EngineError::Spawn)?;
        }
        let log = std::fs::File::create(&opts.log_path).map_err(EngineError::Spawn)?;
        let mut cmd = opts.command(env, port);
        cmd.stdin(Stdio::null()).stdout(log.try_clone().map_err(EngineError::Spawn)?).stderr(log).kill_on_drop(true);
        crate::die_with_parent(&mut cmd);
        let child = cmd.spawn().map_err(EngineError::Spawn)?;
        let mut engine = Engine { child, client: EngineClient::new(&format!("http://127.0.0.1:{port}")), log_path: opts.log_path.clone() };
        engine.wait_ready(opts.ready_timeout).await?;
        Ok(engine)
    }

    async fn wait_ready(&mut self, timeout: Duration) -> Result<(), EngineError> {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().map_err(EngineError::Spawn)? {
                return Err(EngineError::Died { status: status.to_string(), log: self.log_path.clone(), tail: log_tail(&self.log_path, 20) });
            }
            if self.client.healthy().await {
                return Ok(());
            }
            if start.elapsed() > timeout {
                return Err(EngineError::Timeout(timeout, self.log_path.clone()));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    pub fn client(&self) -> &EngineClient {
        &self.client
    }

    /// Waits until the process exits (for `serve`, which runs in the foreground).
    pub async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        self.child.wait().await
    }

    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// Stops the process and waits for it.
    pub async fn shutdown(mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }
}

/// Which engine a command talks to: one already running, or the embedded one it starts.
pub enum EngineSource {
    /// An engine already running at `url` (ours or `vllm serve --enable-lora`), serving the base
    /// model as `base_name`.
    Running { url: String, base_name: String },
    /// The embedded engine, started with `options` in `python` and stopped with the command.
    Start { python: PythonEnv, options: Box<EngineOptions> },
}

/// The engine a command uses: how to reach it, the name of its base model, and the process when
/// the command started it (it dies with [`ServedEngine::shutdown`], or when dropped).
pub struct ServedEngine {
    pub client: EngineClient,
    /// The name the engine serves the base model under.
    pub base_name: String,
    pub process: Option<Engine>,
}

impl EngineSource {
    /// Reaches the running engine, or starts the embedded one and waits until it is healthy.
    /// One place for every command (`rollout`, `collect`, `eval`, `train`, `scenarios generate`),
    /// so they start it alike and say alike where its log is.
    pub async fn open(self) -> Result<ServedEngine, EngineError> {
        match self {
            EngineSource::Running { url, base_name } => Ok(ServedEngine { client: EngineClient::new(&url), base_name, process: None }),
            EngineSource::Start { python, options } => {
                tracing::info!("starting the engine with {} (log: {})", options.model, options.log_path.display());
                let engine = Engine::start(&python, &options).await?;
                Ok(ServedEngine { client: engine.client().clone(), base_name: options.served_model_name, process: Some(engine) })
            }
        }
    }
}

impl ServedEngine {
    /// Warns when the engine's KV cache holds fewer whole-context sequences than a command keeps
    /// in `in_flight` episodes: the rest wait for a free sequence, and a step or an evaluation
    /// plays in waves, silently many times slower (benches/RESULTS.md, "Run 23"). Says nothing
    /// when the engine does not tell its cache's size.
    pub async fn warn_if_crowded(&self, in_flight: usize) {
        if let Some(warning) = self.client.kv_capacity().await.and_then(|c| c.warning(in_flight)) {
            tracing::warn!("{warning}");
        }
    }

    /// Stops the engine when this command started it; one already running is left alone.
    pub async fn shutdown(self) {
        if let Some(engine) = self.process {
            engine.shutdown().await;
        }
    }
}

/// An engine's KV cache, as vLLM's metrics give it (the embedded engine writes the same).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvCapacity {
    /// Tokens the cache holds: `block_size` × `num_gpu_blocks` of `vllm:cache_config_info`.
    pub tokens: u64,
    /// The served context, `max_model_len` of `/v1/models`.
    pub max_model_len: u64,
}

impl KvCapacity {
    /// Sequences of the whole context that fit at once: exactly the embedded engine's, whose
    /// slots are rows of the whole context; at least vLLM's, whose paged cache holds more of
    /// shorter ones.
    pub fn sequences(&self) -> u64 {
        self.tokens / self.max_model_len.max(1)
    }

    /// What to say when `in_flight` episodes at once are more than fit, or None.
    pub fn warning(&self, in_flight: usize) -> Option<String> {
        let fit = self.sequences();
        (in_flight as u64 > fit).then(|| {
            format!(
                "the engine's KV cache holds {fit} sequences of {} tokens at once, and this run keeps up to {in_flight} episodes in flight: \
                 the rest wait for a free sequence, so they play in about {} waves; give the engine more memory \
                 (`--gpu-memory-utilization`) or a shorter context (`--max-model-len`)",
                self.max_model_len,
                (in_flight as u64).div_ceil(fit.max(1)),
            )
        })
    }
}

/// The tokens of `vllm:cache_config_info` in a Prometheus text exposition (vLLM writes every
/// field of its cache config as a label, the value 1).
fn kv_cache_tokens(metrics: &str) -> Option<u64> {
    let line = metrics.lines().find(|l| l.starts_with("vllm:cache_config_info{"))?;
    let labels = &line[line.find('{')? + 1..line.rfind('}')?];
    let label = |name: &str| {
        labels.split(',').find_map(|pair| {
            let (key, value) = pair.split_once('=')?;
            (key.trim() == name).then(|| value.trim().trim_matches('"').parse::<u64>().ok())?
        })
    };
    Some(label("block_size")? * label("num_gpu_blocks")?)
}

/// An adapter's `adapter_config.json` could not be read.
#[derive(Debug, thiserror::Error)]
pub enum AdapterError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path} is not JSON: {source}")]
    NotJson { path: PathBuf, source: serde_json::Error },
}

/// The `adapter_config.json` of the PEFT adapter in `dir`: its rank `r` sizes the engine's LoRA
/// slots (`EngineOptions::max_lora_rank`), and `base_model_name_or_path` names its base model.
pub fn adapter_config(dir: &Path) -> Result<serde_json::Value, AdapterError> {
    let path = dir.join("adapter_config.json");
    let bytes = std::fs::read(&path).map_err(|source| AdapterError::Read { path: path.clone(), source })?;
    serde_json::from_slice(&bytes).map_err(|source| AdapterError::NotJson { path, source })
}

/// The LoRA rank in an adapter's config (`r`).
pub fn adapter_rank(config: &serde_json::Value) -> Option<u32> {
    config["r"].as_u64().map(|r| r as u32)
}

fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// The last `n` lines of a log file, for error messages.
pub fn log_tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Health and adapter management of an engine (ours or vLLM) at `root` (`http://host:port`).
#[derive(Debug, Clone)]
pub struct EngineClient {
    http: reqwest::Client,
    root: String,
}

impl EngineClient {
    pub fn new(url: &str) -> Self {
        let root = url.trim_end_matches('/').trim_end_matches("/v1").to_string();
        EngineClient { http: ta_chat::http_builder().timeout(Duration::from_secs(600)).build().expect("reqwest client"), root }
    }

    /// The OpenAI API root for chat clients.
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.root)
    }

    /// The KV cache's size, when the engine tells it (vLLM's `/metrics` and `/v1/models`); None
    /// when either is missing or unreadable, since what it serves is advice.
    pub async fn kv_capacity(&self) -> Option<KvCapacity> {
        let get = async |path: &str| {
            let resp = self.http.get(format!("{}{path}", self.root)).timeout(Duration::from_secs(10)).send().await.ok()?;
            resp.error_for_status().ok()
        };
        let tokens = kv_cache_tokens(&get("/metrics").await?.text().await.ok()?)?;
        let models: serde_json::Value = get("/v1/models").await?.json().await.ok()?;
        let max_model_len = models["data"].as_array()?.iter().find_map(|m| m["max_model_len"].as_u64())?;
        Some(KvCapacity { tokens, max_model_len })
    }

    pub async fn healthy(&self) -> bool {
        let req = self.http.get(format!("{}/health", self.root)).timeout(Duration::from_secs(2));
        req.send().await.is_ok_and(|r| r.status().is_success())
    }

    /// Loads (or replaces) the PEFT adapter in `path` under `name`.
    pub async fn load_adapter(&self, name: &str, path: &Path) -> Result<(), EngineError> {
        self.post("/v1/load_lora_adapter", json!({"lora_name": name, "lora_path": path})).await
    }

    pub async fn unload_adapter(&self, name: &str) -> Result<(), EngineError> {
        self.post("/v1/unload_lora_adapter", json!({"lora_name": name})).await
    }

    async fn post(&self, path: &str, body: serde_json::Value) -> Result<(), EngineError> {
        let url = format!("{}{path}", self.root);
        let err = |message: String| EngineError::Request { url: url.clone(), message };
        let resp = self.http.post(&url).json(&body).send().await.map_err(|e| err(e.to_string()))?;
        if resp.status().is_success() {
            return Ok(());
        }
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        Err(err(format!("{status}: {text}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An engine already running is reached, never started, and never stopped.
    #[tokio::test]
    async fn a_running_engine_is_only_reached() {
        let served = EngineSource::Running { url: "http://127.0.0.1:9/v1/".into(), base_name: "served".into() }.open().await.unwrap();
        assert_eq!((served.client.base_url().as_str(), served.base_name.as_str()), ("http://127.0.0.1:9/v1", "served"));
        assert!(served.process.is_none());
        served.shutdown().await;
    }

    /// The engine reads `VLLM_API_KEY`: one exported for another server must not reach it, or it
    /// refuses (401) every request of this process's clients, which send no key.
    #[test]
    fn the_engine_never_inherits_a_vllm_api_key() {
        let python = PythonEnv { python: "python3".into(), package_root: "/pkg".into() };
        let mut opts = EngineOptions::new("m", "m", "engine.log".into());
        let removed = |opts: &EngineOptions| opts.command(&python, 8000).as_std().get_envs().any(|(k, v)| k == "VLLM_API_KEY" && v.is_none());
        assert!(removed(&opts));
        opts.env.push(("VLLM_API_KEY".into(), "chosen".into()));
        assert!(!removed(&opts));
    }

    /// vLLM's line (every cache-config field a label) and the embedded engine's (two of them);
    /// the warning only when more episodes are in flight than whole-context sequences fit.
    #[test]
    fn the_kv_cache_size_is_read_from_vllms_metrics() {
        let vllm = "# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{block_size=\"16\",cache_dtype=\"auto\",enable_prefix_caching=\"True\",gpu_memory_utilization=\"0.82\",num_cpu_blocks=\"1024\",num_gpu_blocks=\"573\",sliding_window=\"None\"} 1.0\n";
        assert_eq!(kv_cache_tokens(vllm), Some(16 * 573));
        // what the Python suite's test_metrics_route_and_the_flags asserts the engine writes
        let ours = "vllm:prefix_cache_hits_total{model_name=\"tiny\"} 3\nvllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"33\"} 1.0\n";
        assert_eq!(kv_cache_tokens(ours), Some(528));
        assert_eq!(kv_cache_tokens("vllm:cache_config_info{block_size=\"16\"} 1.0"), None);
        assert_eq!(kv_cache_tokens(""), None);
        let two = KvCapacity { tokens: 528, max_model_len: 256 };
        assert_eq!(two.sequences(), 2);
        assert_eq!(two.warning(2), None);
        let warning = two.warning(9).unwrap();
        assert!(warning.contains("holds 2 sequences of 256 tokens") && warning.contains("up to 9 episodes") && warning.contains("about 5 waves"), "{warning}");
        assert!(KvCapacity { tokens: 100, max_model_len: 256 }.warning(1).unwrap().contains("holds 0 sequences"));
    }

    #[test]
    fn an_adapter_config_gives_its_rank_or_says_what_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(adapter_config(dir.path()), Err(AdapterError::Read { .. })));
        std::fs::write(dir.path().join("adapter_config.json"), "{").unwrap();
        assert!(matches!(adapter_config(dir.path()), Err(AdapterError::NotJson { .. })));
        std::fs::write(dir.path().join("adapter_config.json"), r#"{"r": 16, "base_model_name_or_path": "m"}"#).unwrap();
        assert_eq!(adapter_rank(&adapter_config(dir.path()).unwrap()), Some(16));
        assert_eq!(adapter_rank(&serde_json::json!({})), None);
    }
}
