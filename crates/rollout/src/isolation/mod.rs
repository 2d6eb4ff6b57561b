//! Rollout isolation for servers that change state.
//!
//! When every episode of a run shares one server, an episode that deletes a file or inserts a row
//! changes the task for every episode after it: GRPO compares rollouts that faced different
//! worlds and rewards depend on the order episodes ran in. Isolation gives each episode (or each
//! group) its own world:
//!
//! - `episode`: every episode gets its own stdio server process, started from the server command
//!   with `{workdir}` (a fresh copy of `--server-state`) and `{episode_id}` filled in, taken from
//!   a warm [`pool`] so that the start costs little wall time. An HTTP server, which we cannot
//!   start, is reset (`--reset-command`/`--reset-url`) before each episode instead, and a lock
//!   keeps the episodes that share it from overlapping.
//! - `group`: the rollouts of one group share one copy of the state, each with its own process
//!   (an HTTP server is reset once per group). For servers whose state copy is expensive.
//! - `none`: one server for everything, as without isolation.
//!
//! After each episode `--capture-state` runs in the episode's `{workdir}` and its output is stored
//! with the trajectory (`captured_state`), where rewards check it.

pub mod pool;
pub mod workdir;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use ta_mcp::{ClientOptions, Discovery, McpClient, McpError, Placeholders, ServerSpec};
use ta_types::Trajectory;

use crate::job::Job;
pub use pool::Pool;
pub use workdir::{CopyStats, Workdir};

/// How much of a rollout's world is its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Isolate {
    Episode,
    Group,
    None,
}

impl std::str::FromStr for Isolate {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "episode" => Ok(Isolate::Episode),
            "group" => Ok(Isolate::Group),
            "none" => Ok(Isolate::None),
            other => Err(format!("unknown isolation `{other}`: expected episode, group or none")),
        }
    }
}

impl std::fmt::Display for Isolate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Isolate::Episode => "episode",
            Isolate::Group => "group",
            Isolate::None => "none",
        })
    }
}

/// The `[isolation]` section of a run config, and the flags of `rollout`, `eval` and `collect`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IsolationSettings {
    /// Unset: `episode` when some tool does not declare `readOnlyHint`, else `none`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub isolate: Option<Isolate>,
    /// A file or directory copied to `{workdir}` for each episode (or group).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_state: Option<PathBuf>,
    /// A shell command run in `{workdir}` after each episode; its stdout is the captured state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capture_state: Option<String>,
    /// A shell command that resets an HTTP server before each episode (or group).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reset_command: Option<String>,
    /// A URL POSTed to (`{"episode_id": ...}`) to reset an HTTP server before each episode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reset_url: Option<String>,
    /// Servers kept started ahead of the episodes (`episode` isolation of a stdio server); 0
    /// starts each episode's server when the episode begins. More than the rollout concurrency
    /// buys nothing.
    pub pool: usize,
    /// Tools known to only read though they declare no `readOnlyHint`: the synthesizer of the
    /// run's scenarios found so (`tools_read_only`). Set by the command from its scenarios, never
    /// from a config file.
    #[serde(skip)]
    pub read_only_tools: Vec<String>,
}

impl Default for IsolationSettings {
    fn default() -> Self {
        IsolationSettings { isolate: None, server_state: None, capture_state: None, reset_command: None, reset_url: None, pool: 4, read_only_tools: Vec::new() }
    }
}

/// Longest captured state kept (characters); the rest is cut with a note.
pub const CAPTURE_MAX_CHARS: usize = 200_000;

/// Longest a capture or reset command may run.
const HOOK_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug, thiserror::Error)]
pub enum IsolationError {
    #[error(transparent)]
    Mcp(#[from] McpError),
    #[error("cannot copy the server state: {0}\nhint: --server-state names a file or directory that is copied to {{workdir}} for every episode")]
    State(std::io::Error),
    #[error(
        "--server-state is copied to {{workdir}} for every episode, but the server command never mentions {{workdir}}\nhint: put {{workdir}} where the server takes its state, e.g. --server \"mcp-server-sqlite --db-path {{workdir}}/shop.db\" --server-state shop.db"
    )]
    StateUnused,
    #[error("--isolate {mode} needs a way to reset the HTTP server {server}\nhint: pass --reset-command CMD or --reset-url URL, or --isolate none to share its state")]
    HttpNeedsReset { mode: Isolate, server: String },
    #[error(
        "--reset-command and --reset-url are for HTTP servers; {server} is started by train-agent for each episode\nhint: drop them, or use --server-state to give each episode a fresh copy of the state"
    )]
    ResetForStdio { server: String },
    #[error("give --reset-command or --reset-url, not both")]
    TwoResets,
    #[error("{what} `{command}` failed: {reason}")]
    Hook { what: &'static str, command: String, reason: String },
    #[error("the isolation pool is shut down")]
    Closed,
}

/// Which isolation a run uses, and why (logged at the start of every run).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub mode: Isolate,
    pub reason: String,
}

/// Picks the isolation: the one asked for, else from the tools' `readOnlyHint` annotations and
/// the tools the scenarios' synthesizer found to only read (`read_only`).
pub fn choose(requested: Option<Isolate>, spec: &ServerSpec, discovery: &Discovery, read_only: &[String], has_reset: bool) -> Result<Choice, IsolationError> {
    if let Some(mode) = requested {
        if mode != Isolate::None && !spec.is_stdio() && !has_reset {
            return Err(IsolationError::HttpNeedsReset { mode, server: spec.describe() });
        }
        return Ok(Choice { mode, reason: format!("--isolate {mode} was given") });
    }
    let undeclared = ta_mcp::writing_tools(&discovery.tools);
    // A synthesizer's finding stands in for a missing hint, never against a declared writer.
    let declared_writer = |name: &str| discovery.tools.iter().any(|t| t.name == name && t.annotations.as_ref().and_then(|a| a.read_only_hint) == Some(false));
    let (found, writers): (Vec<&str>, Vec<&str>) = undeclared.iter().map(|w| w.as_ref()).partition(|w| read_only.iter().any(|r| r == w) && !declared_writer(w));
    if writers.is_empty() {
        let reason = if found.is_empty() {
            "every tool declares readOnlyHint, so episodes cannot change the server's state".to_string()
        } else {
            let found: Vec<String> = found.iter().map(|w| ta_types::terminal::terminal_safe(w).into_owned()).collect();
            format!(
                "every tool offered only reads ({} declare no readOnlyHint, but the scenarios' synthesizer found they only read), so episodes cannot change the server's state",
                found.join(", ")
            )
        };
        return Ok(Choice { mode: Isolate::None, reason });
    }
    // The reason is logged and printed, and the server chose these names.
    let writers: Vec<String> = writers.iter().map(|w| ta_types::terminal::terminal_safe(w).into_owned()).collect();
    let shown = if writers.len() > 5 { format!("{} and {} more", writers[..5].join(", "), writers.len() - 5) } else { writers.join(", ") };
    let why = format!("tools that do not declare readOnlyHint may change state: {shown}");
    if spec.is_stdio() || has_reset {
        Ok(Choice { mode: Isolate::Episode, reason: why })
    } else {
        Ok(Choice {
            mode: Isolate::None,
            reason: format!("{why}; but an HTTP server cannot be isolated without --reset-command or --reset-url, so episodes share its state"),
        })
    }
}

/// How to start one server for an episode: the command with placeholders, and its state.
pub struct Template {
    pub spec: ServerSpec,
    pub options: ClientOptions,
    pub state: Option<PathBuf>,
}

impl Template {
    /// Starts the server on `workdir` and completes `initialize`.
    pub async fn start(&self, workdir: &Workdir, episode_id: &str) -> Result<McpClient, McpError> {
        let spec = self.spec.instantiate(&Placeholders { workdir: workdir.path(), episode_id });
        McpClient::connect(spec, self.options.clone()).await
    }
}

/// The reset hook of an HTTP server.
#[derive(Debug, Clone)]
enum Reset {
    Command(String),
    Url(String),
}

/// The world one episode plays in: its server connection, its state directory and (for a shared
/// HTTP server) its turn on it.
pub struct EpisodeWorld {
    pub client: Arc<McpClient>,
    /// The process is this episode's own, stopped when the episode ends.
    own_process: bool,
    workdir: Option<Arc<Workdir>>,
    episode_id: String,
    /// Held for the whole episode on a shared HTTP server.
    _turn: Option<tokio::sync::OwnedMutexGuard<Option<(String, u64)>>>,
    /// Time spent getting the world ready (waiting for a pool server, copying, resetting).
    setup: Duration,
}

/// Every episode's world, from one place. Share it with `Arc`.
pub struct Isolation {
    mode: Isolate,
    reason: String,
    template: Arc<Template>,
    shared: Arc<McpClient>,
    shared_workdir: Option<Arc<Workdir>>,
    capture: Option<String>,
    reset: Option<Reset>,
    pool: Option<Pool>,
    groups: std::sync::Mutex<HashMap<(String, u64), Weak<Workdir>>>,
    /// The group whose reset the shared HTTP server holds; locked for a whole episode.
    http_turn: Arc<tokio::sync::Mutex<Option<(String, u64)>>>,
    counter: Arc<AtomicU64>,
}

impl std::fmt::Debug for Isolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Isolation").field("mode", &self.mode).field("server", &self.template.spec.describe()).finish_non_exhaustive()
    }
}

impl Isolation {
    /// Connects the shared server (on its own copy of the state when the command has
    /// placeholders), discovers its tools, chooses the isolation and starts the warm pool.
    pub async fn connect(settings: &IsolationSettings, spec: ServerSpec, options: ClientOptions) -> Result<(Isolation, Discovery), IsolationError> {
        let reset = match (&settings.reset_command, &settings.reset_url) {
            (Some(_), Some(_)) => return Err(IsolationError::TwoResets),
            (Some(c), None) => Some(Reset::Command(c.clone())),
            (None, Some(u)) => Some(Reset::Url(u.clone())),
            (None, None) => None,
        };
        if reset.is_some() && spec.is_stdio() {
            return Err(IsolationError::ResetForStdio { server: spec.describe() });
        }
        if settings.server_state.is_some() && !spec.has_placeholders() {
            return Err(IsolationError::StateUnused);
        }
        let counter = Arc::new(AtomicU64::new(0));
        let template = Arc::new(Template { spec, options, state: settings.server_state.clone() });
        let (shared, shared_workdir) = if template.spec.has_placeholders() {
            let slot = pool::prepare(&template, "shared".into()).await?;
            (slot.client, Some(slot.workdir))
        } else {
            (McpClient::connect(template.spec.clone(), template.options.clone()).await?, None)
        };
        let discovery = shared.discover().await?;
        let Choice { mode, reason } = choose(settings.isolate, &template.spec, &discovery, &settings.read_only_tools, reset.is_some())?;
        tracing::info!(isolate = %mode, %reason, "rollout isolation");
        let pool = (mode == Isolate::Episode && template.spec.is_stdio() && settings.pool > 0).then(|| Pool::start(template.clone(), settings.pool, counter.clone()));
        let iso = Isolation {
            mode,
            reason,
            template,
            shared: Arc::new(shared),
            shared_workdir,
            capture: settings.capture_state.clone(),
            reset,
            pool,
            groups: Default::default(),
            http_turn: Default::default(),
            counter,
        };
        Ok((iso, discovery))
    }

    pub fn mode(&self) -> Isolate {
        self.mode
    }

    /// Why this mode was chosen.
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// The connection used for discovery, for `none`, and for the episodes of an HTTP server.
    pub fn shared_client(&self) -> &Arc<McpClient> {
        &self.shared
    }

    /// Readies the world for one episode.
    pub async fn begin(&self, job: &Job) -> Result<EpisodeWorld, IsolationError> {
        let t0 = Instant::now();
        let key = (job.scenario.id.clone(), job.group.step);
        let shared_world = |turn, setup| EpisodeWorld {
            client: self.shared.clone(),
            own_process: false,
            workdir: self.shared_workdir.clone(),
            episode_id: "shared".into(),
            _turn: turn,
            setup,
        };
        if self.mode == Isolate::None {
            return Ok(shared_world(None, t0.elapsed()));
        }
        if !self.template.spec.is_stdio() {
            let mut turn = self.http_turn.clone().lock_owned().await;
            if self.mode == Isolate::Episode || turn.as_ref() != Some(&key) {
                let id = format!("e{:06}", self.counter.fetch_add(1, Ordering::Relaxed));
                self.reset(&id).await?;
                *turn = Some(key);
            }
            return Ok(shared_world(Some(turn), t0.elapsed()));
        }
        let slot = match (&self.pool, self.mode) {
            (Some(pool), _) => pool.take().await?,
            (None, Isolate::Group) => {
                let workdir = self.group_workdir(key)?;
                let id = format!("e{:06}", self.counter.fetch_add(1, Ordering::Relaxed));
                let client = self.template.start(&workdir, &id).await?;
                return Ok(EpisodeWorld { client: Arc::new(client), own_process: true, workdir: Some(workdir), episode_id: id, _turn: None, setup: t0.elapsed() });
            }
            // `--pool 0`: started now, on the episode's time.
            (None, _) => pool::prepare(&self.template, format!("e{:06}", self.counter.fetch_add(1, Ordering::Relaxed))).await?,
        };
        Ok(EpisodeWorld { client: Arc::new(slot.client), own_process: true, workdir: Some(slot.workdir), episode_id: slot.episode_id, _turn: None, setup: t0.elapsed() })
    }

    /// The state copy of a group: made by its first episode, shared while any of its episodes
    /// runs.
    fn group_workdir(&self, key: (String, u64)) -> Result<Arc<Workdir>, IsolationError> {
        let mut groups = self.groups.lock().expect("groups lock");
        groups.retain(|_, w| w.strong_count() > 0);
        if let Some(w) = groups.get(&key).and_then(Weak::upgrade) {
            return Ok(w);
        }
        let w = Arc::new(Workdir::create(self.template.state.as_deref(), &format!("g{}", self.counter.fetch_add(1, Ordering::Relaxed))).map_err(IsolationError::State)?);
        groups.insert(key, Arc::downgrade(&w));
        Ok(w)
    }

    /// Ends an episode: stops its own server (so that it has written everything), captures the
    /// state into `t.captured_state`, and releases the world.
    pub async fn finish(&self, world: EpisodeWorld, t: &mut Trajectory) {
        let t0 = Instant::now();
        if world.own_process {
            world.client.close().await;
        }
        if let Some(command) = &self.capture {
            match self.capture(command, &world).await {
                Ok(state) => t.captured_state = Some(state),
                Err(e) => tracing::warn!(scenario = %t.scenario_id, error = %e, "capturing the state failed; the episode has no captured state"),
            }
        }
        t.timings.isolation_ms = (world.setup + t0.elapsed()).as_millis() as u64;
    }

    async fn capture(&self, command: &str, world: &EpisodeWorld) -> Result<String, IsolationError> {
        let out = self.hook("--capture-state", command, world.workdir.as_deref(), &world.episode_id).await?;
        Ok(ta_types::redact::redact_urls_in(&truncate_capture(out)))
    }

    async fn reset(&self, episode_id: &str) -> Result<(), IsolationError> {
        match &self.reset {
            Some(Reset::Command(c)) => self.hook("--reset-command", c, None, episode_id).await.map(drop),
            Some(Reset::Url(url)) => {
                let limits = ta_chat::HttpLimits { max_retries: 2, ..ta_chat::HttpLimits::DEFAULT.with_request(HOOK_TIMEOUT) };
                let body = serde_json::json!({"episode_id": episode_id});
                ta_chat::post_json(&limits.http_client(), url, &[], &body, &limits).await.map(drop).map_err(|e| IsolationError::Hook {
                    what: "--reset-url",
                    command: ta_types::redact::redact_url(url),
                    reason: e.to_string(),
                })
            }
            None => Ok(()),
        }
    }

    /// Runs `command` with `sh -c` in `workdir` (or here), placeholders filled in; its stdout.
    async fn hook(&self, what: &'static str, command: &str, workdir: Option<&Workdir>, episode_id: &str) -> Result<String, IsolationError> {
        let dir = workdir.map(Workdir::path).unwrap_or(Path::new("."));
        let command_line = Placeholders { workdir: dir, episode_id }.fill(command);
        let err = |reason: String| IsolationError::Hook { what, command: command.to_string(), reason };
        let child = tokio::process::Command::new("sh").arg("-c").arg(&command_line).current_dir(dir).stdin(std::process::Stdio::null()).kill_on_drop(true).output();
        let out = tokio::time::timeout(HOOK_TIMEOUT, child)
            .await
            .map_err(|_| err(format!("did not finish within {} s", HOOK_TIMEOUT.as_secs())))?
            .map_err(|e| err(e.to_string()))?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            return Err(err(format!("{}: {}", out.status, stderr.trim())));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Stops the warm pool and the shared server.
    pub async fn shutdown(&self) {
        if let Some(pool) = &self.pool {
            pool.shutdown().await;
        }
        self.shared.close().await;
    }
}

fn truncate_capture(mut s: String) -> String {
    let total = s.chars().count();
    if total > CAPTURE_MAX_CHARS {
        s = s.chars().take(CAPTURE_MAX_CHARS).collect();
        s.push_str(&format!("\n[truncated: showing the first {CAPTURE_MAX_CHARS} of {total} characters]"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use ta_mcp::Tool;

    fn tools(read_only: &[(&str, Option<bool>)]) -> Discovery {
        let tools = read_only
            .iter()
            .map(|(name, ro)| {
                let mut t = Tool::new(name.to_string(), "", Arc::new(serde_json::Map::new()));
                if let Some(ro) = ro {
                    t.annotations = Some(rmcp_annotations(*ro));
                }
                t
            })
            .collect();
        Discovery { tools, ..Default::default() }
    }

    fn rmcp_annotations(read_only: bool) -> ta_mcp::ToolAnnotations {
        ta_mcp::ToolAnnotations::new().read_only(read_only)
    }

    #[test]
    fn the_default_follows_read_only_hints() {
        let stdio = ServerSpec::parse("srv").unwrap();
        let http = ServerSpec::parse("http://h/mcp").unwrap();
        let ro = tools(&[("a", Some(true)), ("b", Some(true))]);
        let c = choose(None, &stdio, &ro, &[], false).unwrap();
        assert_eq!(c.mode, Isolate::None);
        assert!(c.reason.contains("every tool declares readOnlyHint"), "{}", c.reason);

        let rw = tools(&[("read", Some(true)), ("write", Some(false)), ("unannotated", None)]);
        let c = choose(None, &stdio, &rw, &[], false).unwrap();
        assert_eq!(c.mode, Isolate::Episode);
        assert!(c.reason.ends_with("write, unannotated"), "{}", c.reason);
        // An HTTP server can only be isolated with a reset hook.
        assert_eq!(choose(None, &http, &rw, &[], false).unwrap().mode, Isolate::None);
        assert_eq!(choose(None, &http, &rw, &[], true).unwrap().mode, Isolate::Episode);
        let err = choose(Some(Isolate::Group), &http, &rw, &[], false).unwrap_err().to_string();
        assert!(err.contains("--reset-command") && err.contains("hint:"), "{err}");
        assert_eq!(choose(Some(Isolate::None), &stdio, &rw, &[], false).unwrap().reason, "--isolate none was given");

        // mcp-server-sqlite's read tools declare nothing; the synthesizer found they only read.
        let sqlite = tools(&[("list_tables", None), ("read_query", None)]);
        let found = ["list_tables".to_string(), "read_query".to_string()];
        let c = choose(None, &stdio, &sqlite, &found, false).unwrap();
        assert_eq!(c.mode, Isolate::None);
        assert!(c.reason.contains("list_tables, read_query declare no readOnlyHint, but the scenarios' synthesizer found they only read"), "{}", c.reason);
        let c = choose(None, &stdio, &tools(&[("read_query", None), ("write_query", None)]), &found, false).unwrap();
        assert_eq!(c.mode, Isolate::Episode, "a tool nobody found read-only still isolates");
        assert!(c.reason.ends_with("write_query"), "{}", c.reason);
        let c = choose(None, &stdio, &tools(&[("read_query", Some(false))]), &found, false).unwrap();
        assert_eq!(c.mode, Isolate::Episode, "a declared writer stays one whatever a synthesizer found");
    }

    #[test]
    fn modes_parse_and_print() {
        for m in [Isolate::Episode, Isolate::Group, Isolate::None] {
            assert_eq!(m.to_string().parse::<Isolate>().unwrap(), m);
        }
        assert!("process".parse::<Isolate>().unwrap_err().contains("episode, group or none"));
    }

    #[test]
    fn long_captures_are_cut_with_a_note() {
        let s = truncate_capture("x".repeat(CAPTURE_MAX_CHARS + 5));
        assert!(s.ends_with(&format!("[truncated: showing the first {CAPTURE_MAX_CHARS} of {} characters]", CAPTURE_MAX_CHARS + 5)));
    }
}
