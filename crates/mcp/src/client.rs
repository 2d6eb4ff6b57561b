//! The MCP client the agent loop calls: connect (stdio, streamable HTTP, legacy SSE), discover,
//! call tools with a timeout, survive one server crash per call, shut down cleanly.
//!
//! Rollouts run for hours and call tools thousands of times, so the client is shared (`&self`
//! everywhere, put it in an `Arc`) and self-healing: when the transport dies (a stdio server
//! crashed, an HTTP session dropped) a call reconnects once, re-initializes and retries, instead
//! of failing the whole training step.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, Prompt, ReadResourceRequestParams, Resource, ResourceTemplate, ServerPeerInfo, Tool,
};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{Peer, RoleClient, ServiceError, ServiceExt};
use tokio::sync::RwLock;

use crate::content::{ToolOutput, render_resource_contents, render_result};
use crate::discovery::Discovery;
use crate::secret::Secret;
use crate::spec::{HttpTransport, ServerSpec};
use crate::sse::SseClientTransport;
use crate::stdio::{StdioProcess, TOO_LARGE_DATA_KEY, human_bytes};

/// How to connect and how long to wait.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Limit for one `tools/call` (and one discovery request). Default 60 s. A stdio server
    /// that does not answer in time is killed; the next call starts it again.
    pub call_timeout: Duration,
    /// Limit for starting the server and finishing `initialize`. Default 60 s (a first `npx`
    /// run may download the package).
    pub connect_timeout: Duration,
    /// Sent as `Authorization: Bearer ...` to HTTP and SSE servers; ignored for stdio. Refused
    /// together with `user:password@` in the URL, which would take the same header.
    pub bearer_token: Option<Secret>,
    /// Where a stdio server's stderr is appended (e.g. `RUN/logs/mcp-stderr.log`). `None`
    /// discards it: it must never reach our stdout, which may carry progress or JSON.
    pub stderr_log: Option<PathBuf>,
    /// The `clientInfo` name sent in `initialize`.
    pub client_name: String,
    /// Which of the server's tools this client offers (`--tools`, `--exclude-tools`).
    pub tools: ToolFilter,
}

/// The tools a run offers the model and lets it call: all of the server's, only some
/// (`--tools`), or all but some (`--exclude-tools`). Applied where tools are discovered, so the
/// model's tool list, the system prompt, the check of every call and the isolation default
/// (which looks for tools that may write) all see the same tools.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolFilter {
    /// Only these, when given.
    pub only: Option<Vec<String>>,
    pub exclude: Vec<String>,
}

impl ToolFilter {
    pub fn is_all(&self) -> bool {
        self.only.is_none() && self.exclude.is_empty()
    }

    pub fn keeps(&self, name: &str) -> bool {
        self.only.as_ref().is_none_or(|only| only.iter().any(|n| n == name)) && !self.exclude.iter().any(|n| n == name)
    }

    /// `tools` without the ones left out; a name the server does not have is an error (a typo
    /// would otherwise leave a write tool in, or every tool out).
    pub fn apply(&self, tools: Vec<Tool>, server: &str) -> Result<Vec<Tool>, McpError> {
        let named = self.only.iter().flatten().chain(&self.exclude);
        if let Some(unknown) = named.into_iter().find(|n| !tools.iter().any(|t| t.name == n.as_str())) {
            let offered: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
            return Err(McpError::UnknownTool { server: server.to_string(), name: unknown.clone(), offered: offered.join(", ") });
        }
        let kept: Vec<Tool> = tools.into_iter().filter(|t| self.keeps(&t.name)).collect();
        if kept.is_empty() {
            return Err(McpError::NoToolLeft { server: server.to_string() });
        }
        Ok(kept)
    }
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            call_timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(60),
            bearer_token: None,
            stderr_log: None,
            client_name: "train-agent".to_string(),
            tools: ToolFilter::default(),
        }
    }
}

/// Transport and protocol failures. A tool that ran and failed is not an `McpError`: it is a
/// [`ToolOutput`] with `is_error: true`.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error("cannot start MCP server `{command}`: {source}\nhint: {}", spawn_hint(command, source))]
    Spawn { command: String, source: std::io::Error },
    #[error("the working directory {} of MCP server `{command}` does not exist\nhint: fix \"cwd\" in the --mcp-config entry (a relative path is relative to where train-agent runs)", cwd.display())]
    MissingCwd { command: String, cwd: std::path::PathBuf },
    #[error("cannot open MCP stderr log {path}: {source}\nhint: check that the run directory is writable")]
    StderrLog { path: PathBuf, source: std::io::Error },
    #[error("cannot create a temporary file in {dir} for the MCP server's stderr: {source}\nhint: set TMPDIR to a writable directory")]
    StderrTemp { dir: PathBuf, source: std::io::Error },
    #[error("invalid header `{name}` for MCP server {server}\nhint: header names are ASCII tokens, values printable ASCII")]
    BadHeader { server: String, name: String },
    #[error("cannot connect to MCP server {server}: {reason}\nhint: {hint}")]
    Connect { server: String, reason: String, hint: String },
    /// `said`: a stdio server's stderr so far, as [`StderrSink::said`] puts it (empty otherwise).
    #[error(
        "MCP server {server} did not finish `initialize` within {after:?}\nhint: check that it is an MCP server and that the transport is right (stdio command, /mcp for streamable HTTP, /sse for legacy SSE){said}"
    )]
    ConnectTimeout { server: String, after: Duration, said: String },
    #[error("{what} on MCP server {server} did not answer within {after:?}")]
    Timeout { server: String, what: String, after: Duration },
    /// The answer was over the size limit of one message and was dropped; the connection is
    /// fine. The agent loop shows this to the model, which may ask for less.
    #[error("the answer to {what} from MCP server {server} was too large: over {}, the most one MCP message may hold\nhint: ask for less (a narrower query, a LIMIT, fewer fields)", human_bytes(*limit))]
    TooLarge { server: String, what: String, limit: usize },
    #[error(
        "MCP server {server} has `user:password@` in its URL and a bearer token is set; both go in the one Authorization header, so the server would get only one of them\nhint: use one: remove `user:password@` from the URL, or unset the bearer token variable (the one --bearer-token-env names, MCP_BEARER_TOKEN by default)"
    )]
    TwoAuthorizations { server: String },
    #[error("lost the connection to MCP server {server} during {what}: {reason}")]
    Transport { server: String, what: String, reason: String },
    /// The server answered with a JSON-RPC error (e.g. -32602 invalid params, unknown tool).
    /// The connection is fine; the agent loop may show `message` to the model.
    #[error("MCP server {server} rejected {what}: {message} (JSON-RPC error {code})")]
    Protocol { server: String, what: String, code: i32, message: String },
    #[error("tool arguments must be a JSON object, got {got}")]
    ArgumentsNotObject { got: String },
    #[error(
        "--tools/--exclude-tools name `{name}`, which MCP server {server} does not have (it offers: {offered})\nhint: `train-agent tools --server ...` lists its tools"
    )]
    UnknownTool { server: String, name: String, offered: String },
    #[error("--tools/--exclude-tools leave no tool of MCP server {server}\nhint: --tools names the tools to keep, --exclude-tools the ones to leave out")]
    NoToolLeft { server: String },
    #[error("the MCP client for {server} is closed")]
    Closed { server: String },
}

/// What went in the `Authorization` header of an HTTP server's requests, so that the hint for
/// a 401 names what the server actually refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SentAuth {
    Nothing,
    Bearer,
    /// `user:password@` in the URL, which reqwest sends as Basic auth.
    UrlUserinfo,
    /// An `Authorization` header from the `--mcp-config` entry.
    ConfigHeader,
}

impl SentAuth {
    /// The bearer token wins over a config header ([`header_map`]); it and URL userinfo
    /// together are refused before anything is sent ([`McpError::TwoAuthorizations`]).
    fn of(url: &str, headers: &BTreeMap<String, Secret>, options: &ClientOptions) -> SentAuth {
        if options.bearer_token.is_some() {
            SentAuth::Bearer
        } else if ta_types::redact::has_userinfo(url) {
            SentAuth::UrlUserinfo
        } else if headers.keys().any(|k| k.eq_ignore_ascii_case("authorization")) {
            SentAuth::ConfigHeader
        } else {
            SentAuth::Nothing
        }
    }

    /// What to do about a server that refused what was sent (or wants something).
    fn hint(self) -> &'static str {
        match self {
            SentAuth::Bearer => "the server refused the bearer token; check the variable --bearer-token-env names (default MCP_BEARER_TOKEN)",
            SentAuth::UrlUserinfo => {
                "the server refused the `user:password@` of the URL (sent as HTTP Basic auth); check them, or if the server wants a bearer token, remove them from the URL and export MCP_BEARER_TOKEN=<token>"
            }
            SentAuth::ConfigHeader => {
                "the server refused the Authorization header of the --mcp-config entry; check its value (or export MCP_BEARER_TOKEN=<token>, which replaces that header)"
            }
            SentAuth::Nothing => "the server wants a bearer token: export MCP_BEARER_TOKEN=<token> (or name another variable with --bearer-token-env)",
        }
    }
}

/// An rmcp error as a person reads it: without the Rust type names rmcp puts in transport
/// errors (`Transport [rmcp::transport::...<reqwest::...>] error: `) and with URL credentials
/// masked.
fn plain_reason(e: &impl std::fmt::Display) -> String {
    let mut text = e.to_string();
    while let Some(start) = text.find("Transport [") {
        let Some(end) = text[start..].find("] error: ") else { break };
        text.replace_range(start..start + end + "] error: ".len(), "");
    }
    // rmcp quotes what the server sent (an HTTP error body, a bad message).
    ta_types::terminal::terminal_safe(&ta_types::redact::redact_urls_in(&text)).into_owned()
}

fn spawn_hint(command: &str, source: &std::io::Error) -> String {
    if source.kind() == std::io::ErrorKind::NotFound {
        format!("`{command}` was not found on PATH; install it or give its full path")
    } else {
        "check the command and its permissions".to_string()
    }
}

/// One live connection; replaced wholesale on reconnect. Dropping it kills a stdio server
/// ([`StdioProcess`]); [`shutdown`] stops it gracefully.
struct Conn {
    service: RunningService<RoleClient, ClientConfig>,
    process: Option<StdioProcess>,
    generation: u64,
}

/// A connection to one MCP server. Share it with `Arc`; every method takes `&self`.
pub struct McpClient {
    spec: ServerSpec,
    options: ClientOptions,
    conn: RwLock<Option<Conn>>,
    closed: AtomicBool,
    generation: AtomicU64,
    restarts: AtomicU64,
}

impl std::fmt::Debug for McpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpClient").field("server", &self.spec.describe()).finish_non_exhaustive()
    }
}

impl McpClient {
    /// Starts or reaches the server and completes the MCP `initialize` handshake.
    pub async fn connect(spec: ServerSpec, options: ClientOptions) -> Result<Self, McpError> {
        let conn = open(&spec, &options, 0).await?;
        Ok(McpClient { spec, options, conn: RwLock::new(Some(conn)), closed: AtomicBool::new(false), generation: AtomicU64::new(0), restarts: AtomicU64::new(0) })
    }

    pub fn spec(&self) -> &ServerSpec {
        &self.spec
    }

    pub fn options(&self) -> &ClientOptions {
        &self.options
    }

    /// How many times the connection was re-established after a transport failure.
    pub fn restarts(&self) -> u64 {
        self.restarts.load(Ordering::Relaxed)
    }

    /// The stdio server's process id (also its process group id), if any.
    pub async fn child_pid(&self) -> Option<u32> {
        self.conn.read().await.as_ref().and_then(|c| c.process.as_ref()?.id())
    }

    /// What the server said about itself in `initialize`.
    pub async fn server_info(&self) -> Result<Option<ServerPeerInfo>, McpError> {
        let (peer, _) = self.peer().await?;
        Ok(peer.peer_info().map(|i| (*i).clone()))
    }

    /// Lists every tool and resource and reads the server's instructions.
    pub async fn discover(&self) -> Result<Discovery, McpError> {
        let info = self.server_info().await?;
        let tools = self.options.tools.apply(self.list_tools().await?, &self.spec.describe())?;
        let has_resources = info.as_ref().is_some_and(|i| i.capabilities.resources.is_some());
        let resources = if has_resources {
            // Resources only enrich prompts: a server that advertises them but fails to list
            // them should not stop a run.
            match self.list_resources().await {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(server = %self.spec, error = %e, "listing MCP resources failed; continuing without");
                    Vec::new()
                }
            }
        } else {
            Vec::new()
        };
        let (server_name, server_version) = match info.as_ref().and_then(|i| i.server_info.as_ref()) {
            Some(imp) => (Some(imp.name.clone()), Some(imp.version.clone())),
            None => (None, None),
        };
        Ok(Discovery { server_name, server_version, instructions: info.and_then(|i| i.instructions).filter(|s| !s.trim().is_empty()), tools, resources })
    }

    /// Every tool, following `nextCursor` to the last page.
    pub async fn list_tools(&self) -> Result<Vec<Tool>, McpError> {
        self.with_retry("tools/list", |peer| async move { peer.list_all_tools().await }).await
    }

    /// Every resource, following `nextCursor` to the last page.
    pub async fn list_resources(&self) -> Result<Vec<Resource>, McpError> {
        self.with_retry("resources/list", |peer| async move { peer.list_all_resources().await }).await
    }

    /// Every resource template (`resources/templates/list`), following `nextCursor`.
    pub async fn list_resource_templates(&self) -> Result<Vec<ResourceTemplate>, McpError> {
        self.with_retry("resources/templates/list", |peer| async move { peer.list_all_resource_templates().await }).await
    }

    /// Every prompt (`prompts/list`), following `nextCursor`.
    pub async fn list_prompts(&self) -> Result<Vec<Prompt>, McpError> {
        self.with_retry("prompts/list", |peer| async move { peer.list_all_prompts().await }).await
    }

    /// Reads one resource: text contents joined, binary contents summarized.
    pub async fn read_resource(&self, uri: &str) -> Result<String, McpError> {
        let what = format!("resources/read `{uri}`");
        let uri = uri.to_string();
        let result = self
            .with_retry(&what, |peer| {
                let uri = uri.clone();
                async move { peer.read_resource(ReadResourceRequestParams::new(uri)).await }
            })
            .await?;
        let parts: Vec<String> = result.contents.iter().map(render_resource_contents).collect();
        Ok(parts.join("\n"))
    }

    /// Calls tool `name`. `args` must be a JSON object (or `null` for none). A tool-level error
    /// comes back as `Ok(ToolOutput { is_error: true, .. })`.
    pub async fn call_tool(&self, name: &str, args: serde_json::Value) -> Result<ToolOutput, McpError> {
        let arguments = match args {
            serde_json::Value::Object(map) => Some(map),
            serde_json::Value::Null => None,
            other => return Err(McpError::ArgumentsNotObject { got: crate::catalog::json_type_name(&other).into() }),
        };
        let mut params = CallToolRequestParams::new(name.to_string());
        params.arguments = arguments;
        let what = format!("tools/call `{name}`");
        let result = self
            .with_retry(&what, |peer| {
                let params = params.clone();
                async move { peer.call_tool(params).await }
            })
            .await?;
        Ok(render_result(&result))
    }

    /// Closes the session and stops a stdio server (stdin closed, then SIGTERM, then SIGKILL to
    /// its process group). Later calls fail with [`McpError::Closed`].
    pub async fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        if let Some(conn) = self.conn.write().await.take() {
            shutdown(conn).await;
        }
    }

    /// The current peer, connecting first if an earlier reconnect failed.
    async fn peer(&self) -> Result<(Peer<RoleClient>, u64), McpError> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(self.closed_error());
        }
        if let Some(conn) = self.conn.read().await.as_ref() {
            return Ok((conn.service.peer().clone(), conn.generation));
        }
        self.reconnect(None).await?;
        let guard = self.conn.read().await;
        let conn = guard.as_ref().ok_or_else(|| self.closed_error())?;
        Ok((conn.service.peer().clone(), conn.generation))
    }

    /// Runs one request with the call timeout; on a transport failure, reconnects once and
    /// retries. The retry may repeat a call the dead server had already started: acceptable for
    /// the tool calls of a training rollout, and what every MCP host does.
    async fn with_retry<T, F, Fut>(&self, what: &str, request: F) -> Result<T, McpError>
    where
        F: Fn(Peer<RoleClient>) -> Fut,
        Fut: Future<Output = Result<T, ServiceError>>,
    {
        let mut retried = false;
        loop {
            let (peer, generation) = self.peer().await?;
            let err = match tokio::time::timeout(self.options.call_timeout, request(peer)).await {
                Err(_) => {
                    self.kill_hung(generation, what).await;
                    return Err(McpError::Timeout { server: self.spec.describe(), what: what.to_string(), after: self.options.call_timeout });
                }
                Ok(Ok(value)) => return Ok(value),
                Ok(Err(err)) => err,
            };
            let transport_failed = matches!(err, ServiceError::TransportClosed | ServiceError::TransportSend(_));
            if !transport_failed || retried || self.closed.load(Ordering::SeqCst) {
                return Err(self.service_error(what, err));
            }
            tracing::warn!(server = %self.spec, %what, error = %plain_reason(&err), "MCP transport failed; reconnecting once and retrying");
            self.reconnect(Some(generation)).await?;
            retried = true;
        }
    }

    /// Replaces the connection, unless another task already replaced generation `failed`.
    async fn reconnect(&self, failed: Option<u64>) -> Result<(), McpError> {
        let mut guard = self.conn.write().await;
        if self.closed.load(Ordering::SeqCst) {
            return Err(self.closed_error());
        }
        match (guard.as_ref(), failed) {
            (Some(conn), Some(g)) if conn.generation != g => return Ok(()),
            (Some(_), None) => return Ok(()),
            _ => {}
        }
        if let Some(old) = guard.take() {
            tokio::spawn(shutdown(old));
        }
        let generation = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
        let conn = open(&self.spec, &self.options, generation).await?;
        self.restarts.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(server = %self.spec, restarts = self.restarts(), "MCP server reconnected");
        *guard = Some(conn);
        Ok(())
    }

    /// Kills a stdio server that let a request time out: it is stuck, and would otherwise hold
    /// its process (and whatever it spawned) until the run ends. The next call starts it again.
    /// An HTTP server is not ours to stop; its connection stays.
    async fn kill_hung(&self, generation: u64, what: &str) {
        let mut guard = self.conn.write().await;
        if guard.as_ref().is_some_and(|c| c.generation == generation && c.process.is_some()) {
            tracing::warn!(server = %self.spec, %what, "MCP server did not answer in time; killing it (the next call starts it again)");
            drop(guard.take());
        }
    }

    fn closed_error(&self) -> McpError {
        McpError::Closed { server: self.spec.describe() }
    }

    fn service_error(&self, what: &str, err: ServiceError) -> McpError {
        let server = self.spec.describe();
        let what = what.to_string();
        match err {
            ServiceError::McpError(e) => match e.data.as_ref().and_then(|d| d.get(TOO_LARGE_DATA_KEY)).and_then(|v| v.as_u64()) {
                Some(limit) => McpError::TooLarge { server, what, limit: limit as usize },
                // The server's words: they reach the terminal, logs and the model.
                None => McpError::Protocol { server, what, code: e.code.0, message: ta_types::terminal::terminal_safe(&e.message).into_owned() },
            },
            ServiceError::Timeout { timeout } => McpError::Timeout { server, what, after: timeout },
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => McpError::Transport { server, what, reason: plain_reason(&err) },
            other => McpError::Protocol { server, what, code: 0, message: plain_reason(&other) },
        }
    }
}

/// Closes the session (for stdio: closes the server's stdin), then stops a stdio server.
async fn shutdown(mut conn: Conn) {
    match conn.service.close_with_timeout(Duration::from_secs(10)).await {
        Ok(Some(_)) => {}
        Ok(None) => tracing::warn!("MCP session did not close within 10 s"),
        Err(e) => tracing::warn!(error = %e, "MCP session task failed while closing"),
    }
    if let Some(process) = conn.process.take() {
        process.stop().await;
    }
}

fn client_info(options: &ClientOptions) -> ClientConfig {
    ClientConfig::new(ClientCapabilities::default(), Implementation::new(options.client_name.clone(), env!("CARGO_PKG_VERSION")))
}

/// Starts or reaches the server and runs `initialize`.
async fn open(spec: &ServerSpec, options: &ClientOptions, generation: u64) -> Result<Conn, McpError> {
    let server = spec.describe();
    let info = client_info(options);
    let timeout = options.connect_timeout;
    let timed_out = || McpError::ConnectTimeout { server: server.clone(), after: timeout, said: String::new() };
    let init_failed =
        |e: rmcp::service::ClientInitializeError, hint: &str| McpError::Connect { server: server.clone(), reason: plain_reason(&e), hint: hint.to_string() };
    match spec {
        ServerSpec::Stdio { command, args, env, cwd } => {
            let mut cmd = tokio::process::Command::new(command);
            cmd.args(args);
            for (k, v) in env {
                cmd.env(k, v.expose());
            }
            if let Some(dir) = cwd {
                // Spawning in a missing directory fails with NotFound, which reads as a missing binary.
                if !dir.is_dir() {
                    return Err(McpError::MissingCwd { command: command.clone(), cwd: dir.clone() });
                }
                cmd.current_dir(dir);
            }
            let stderr = StderrSink::open(options.stderr_log.as_deref(), &std::env::temp_dir())?;
            let stdio = stderr.stdio().map_err(|source| McpError::Spawn { command: command.clone(), source })?;
            // On every early return below, dropping `process` kills the server.
            let (mut process, transport) = StdioProcess::spawn(cmd, stdio).map_err(|source| McpError::Spawn { command: command.clone(), source })?;
            let secrets = || env.values().map(Secret::expose);
            match tokio::time::timeout(timeout, info.serve(transport)).await {
                Ok(Ok(service)) => Ok(Conn { service, process: Some(process), generation }),
                Ok(Err(e)) => {
                    // A server that exits at start says why on stderr; let it finish saying it.
                    process.wait_exit(STDERR_SETTLE).await;
                    Err(init_failed(e, &format!("the process exited or wrote something other than JSON-RPC to stdout{}", stderr.said(secrets()))))
                }
                // What a server that hangs printed (waiting for a database, a prompt) says why.
                Err(_) => Err(McpError::ConnectTimeout { server: server.clone(), after: timeout, said: stderr.said(secrets()) }),
            }
        }
        ServerSpec::Http { url, .. } if options.bearer_token.is_some() && ta_types::redact::has_userinfo(url) => {
            Err(McpError::TwoAuthorizations { server: server.clone() })
        }
        ServerSpec::Http { url, transport: HttpTransport::StreamableHttp, headers } => {
            let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                .reinit_on_expired_session(true)
                .custom_headers(header_map(&server, headers, options.bearer_token.is_some())?.into_iter().filter_map(|(k, v)| Some((k?, v))).collect());
            if let Some(token) = &options.bearer_token {
                config = config.auth_header(token.expose());
            }
            // rmcp builds its own reqwest client (no idle pool, same-origin redirects).
            ta_chat::install_tls_provider();
            let transport = StreamableHttpClientTransport::from_config(config);
            let service = tokio::time::timeout(timeout, info.serve(transport)).await.map_err(|_| timed_out())?.map_err(|e| {
                if e.is_authorization_required() || e.auth_challenge().is_some() {
                    let hint = SentAuth::of(url, headers, options).hint();
                    McpError::Connect { server: server.clone(), reason: "the server requires authorization (HTTP 401/403)".into(), hint: hint.into() }
                } else {
                    init_failed(e, "check the URL (streamable HTTP servers usually listen on /mcp; legacy SSE ones on /sse)")
                }
            })?;
            Ok(Conn { service, process: None, generation })
        }
        ServerSpec::Http { url, transport: HttpTransport::Sse, headers: headers_given } => {
            let http = ta_chat::http_builder().build().map_err(|e| McpError::Connect {
                server: server.clone(),
                reason: e.to_string(),
                hint: "the TLS backend failed to initialize".into(),
            })?;
            let headers = header_map(&server, headers_given, options.bearer_token.is_some())?;
            let transport = SseClientTransport::connect(http, url, options.bearer_token.clone(), headers, timeout).await.map_err(|e| {
                let unauthorized = matches!(&e, crate::sse::SseError::ConnectStatus { status, .. }
                        if *status == reqwest::StatusCode::UNAUTHORIZED || *status == reqwest::StatusCode::FORBIDDEN);
                let hint = if unauthorized {
                    SentAuth::of(url, headers_given, options).hint()
                } else {
                    "legacy SSE servers stream events from GET /sse; for streamable HTTP use the /mcp URL"
                };
                McpError::Connect { server: server.clone(), reason: plain_reason(&e), hint: hint.into() }
            })?;
            let service = tokio::time::timeout(timeout, info.serve(transport))
                .await
                .map_err(|_| timed_out())?
                .map_err(|e| init_failed(e, "the SSE session opened but initialize failed"))?;
            Ok(Conn { service, process: None, generation })
        }
    }
}

/// Config-file headers as a header map. When a bearer token is given it wins over a config
/// `Authorization` header.
fn header_map(server: &str, headers: &BTreeMap<String, Secret>, has_bearer: bool) -> Result<HeaderMap, McpError> {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        let bad = || McpError::BadHeader { server: server.to_string(), name: name.clone() };
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad())?;
        if has_bearer && name == AUTHORIZATION {
            continue;
        }
        let mut value = HeaderValue::from_str(value.expose()).map_err(|_| bad())?;
        value.set_sensitive(true);
        map.insert(name, value);
    }
    Ok(map)
}

/// How long a stdio server that failed `initialize` gets to exit before its stderr is read.
const STDERR_SETTLE: Duration = Duration::from_secs(1);

/// The most of a failed server's stderr an error quotes: its last lines, up to this many bytes.
const STDERR_QUOTE_BYTES: usize = 2000;

/// Where a stdio server's stderr goes: the run's log (appended to) or, without one, an unnamed
/// temporary file in `temp_dir`. Either way it is kept, so a server that fails to start is quoted in the
/// error instead of pointing at a log the user may not have.
struct StderrSink {
    file: std::fs::File,
    /// Where this server's output starts in `file` (a log holds earlier runs' too).
    start: u64,
    log: Option<PathBuf>,
}

impl StderrSink {
    fn open(log: Option<&Path>, temp_dir: &Path) -> Result<Self, McpError> {
        let Some(path) = log else {
            let file = tempfile::tempfile_in(temp_dir).map_err(|source| McpError::StderrTemp { dir: temp_dir.to_path_buf(), source })?;
            return Ok(StderrSink { file, start: 0, log: None });
        };
        let err = |source| McpError::StderrLog { path: path.to_path_buf(), source };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(err)?;
        }
        let file = std::fs::OpenOptions::new().create(true).append(true).read(true).open(path).map_err(err)?;
        let start = file.metadata().map_err(err)?.len();
        Ok(StderrSink { file, start, log: Some(path.to_path_buf()) })
    }

    fn stdio(&self) -> std::io::Result<Stdio> {
        Ok(Stdio::from(self.file.try_clone()?))
    }

    /// What the server said, for the end of a failed start's hint: "; its stderr ends:" and its
    /// last lines (the values in `secrets` masked: they were handed to it and it may print them),
    /// or that it said nothing; then where the whole of it is.
    fn said<'a>(&self, secrets: impl Iterator<Item = &'a str>) -> String {
        let whole = self.log.as_ref().map(|p| format!("; all of its stderr is in {}", p.display())).unwrap_or_default();
        match self.tail().map(|text| mask(text, secrets)) {
            Some(said) => format!("; its stderr ends:\n{}{whole}", indent(&said)),
            None => format!("; it said nothing on stderr{whole}"),
        }
    }

    /// The last lines the server wrote, at most [`STDERR_QUOTE_BYTES`], made safe for a terminal;
    /// `None` when it wrote nothing.
    fn tail(&self) -> Option<String> {
        use std::io::{Read, Seek, SeekFrom};
        let mut file = self.file.try_clone().ok()?;
        let end = file.seek(SeekFrom::End(0)).ok()?;
        let from = end.saturating_sub(STDERR_QUOTE_BYTES as u64).max(self.start);
        file.seek(SeekFrom::Start(from)).ok()?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).ok()?;
        let text = String::from_utf8_lossy(&bytes);
        // A cut line at the front is dropped, unless it is all there is.
        let text = if from > self.start { text.split_once('\n').map_or(&*text, |(_, rest)| rest) } else { &text };
        let text = text.trim();
        (!text.is_empty()).then(|| ta_types::terminal::terminal_safe(text).into_owned())
    }
}

/// `text` with every non-empty value of `secrets` replaced by [`ta_types::redact::MASK`].
fn mask<'a>(mut text: String, secrets: impl Iterator<Item = &'a str>) -> String {
    for secret in secrets.filter(|s| !s.is_empty()) {
        text = text.replace(secret, ta_types::redact::MASK);
    }
    text
}

fn indent(text: &str) -> String {
    text.lines().map(|line| format!("  {line}")).collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_stderr_is_quoted_by_its_last_whole_lines() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("mcp-stderr.log");
        std::fs::write(&log, "before this start\n").unwrap();
        let sink = StderrSink::open(Some(&log), dir.path()).unwrap();
        let mut out = sink.file.try_clone().unwrap();
        for i in 0..200 {
            writeln!(out, "line {i:03} of the server's complaint").unwrap();
        }
        let tail = sink.tail().unwrap();
        assert!(tail.len() <= STDERR_QUOTE_BYTES, "{}", tail.len());
        assert!(tail.starts_with("line ") && tail.ends_with("line 199 of the server's complaint"), "{tail}");
        assert!(!tail.contains("before this start"));
        assert_eq!(mask("key=abc, again abc".into(), ["abc", ""].into_iter()), "key=***, again ***");
    }

    /// Without a run log the stderr goes to a temporary file: a temp directory that cannot hold
    /// one is named as such, not as the run's log.
    #[test]
    fn a_stderr_sink_names_the_place_it_could_not_write() {
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("no-such-tmp");
        let err = StderrSink::open(None, &gone).err().unwrap().to_string();
        assert!(err.contains(&format!("temporary file in {}", gone.display())) && err.contains("TMPDIR"), "{err}");
        assert!(StderrSink::open(None, dir.path()).is_ok());
        let blocked = dir.path().join("file");
        std::fs::write(&blocked, "").unwrap();
        let err = StderrSink::open(Some(&blocked.join("mcp-stderr.log")), dir.path()).err().unwrap().to_string();
        assert!(err.contains("cannot open MCP stderr log") && err.contains("run directory is writable"), "{err}");
    }

    #[test]
    fn a_tool_filter_keeps_only_or_all_but() {
        let all = ToolFilter::default();
        assert!(all.is_all() && all.keeps("write_query"));
        let only = ToolFilter { only: Some(vec!["read_query".into(), "list_tables".into()]), exclude: vec!["list_tables".into()] };
        assert!(!only.is_all() && only.keeps("read_query"));
        assert!(!only.keeps("list_tables") && !only.keeps("write_query"), "exclusion wins, and what is not named is out");
    }
}
