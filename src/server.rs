//! The MCP server a command uses, from its flags: connected, discovered, and (for commands that
//! play episodes) isolated per episode.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use ta_rollout::isolation::{Isolation, IsolationSettings};

use crate::args::ServerArgs;

/// A connected MCP server, discovered.
pub struct Server {
    pub client: Arc<ta_mcp::McpClient>,
    pub discovery: ta_mcp::Discovery,
    pub description: String,
    /// Each episode's own world, for commands that play episodes ([`Server::connect_isolated`]).
    pub isolation: Option<Arc<Isolation>>,
}

impl Server {
    /// Connects and discovers. A stdio server's stderr goes to `log_dir/mcp-stderr.log` when given.
    pub async fn connect(args: &ServerArgs, log_dir: Option<&Path>) -> Result<Server> {
        let (spec, options) = spec(args, log_dir)?;
        let description = spec.describe();
        let client = ta_mcp::McpClient::connect(spec, options).await?;
        let discovery = client.discover().await?;
        Ok(Server { client: Arc::new(client), discovery, description, isolation: None })
    }

    /// Like [`Server::connect`], for commands that play episodes: each episode gets the world
    /// `settings` asks for (or the default the tools' readOnlyHint gives), logged.
    pub async fn connect_isolated(args: &ServerArgs, settings: &IsolationSettings, log_dir: Option<&Path>) -> Result<Server> {
        let (spec, options) = spec(args, log_dir)?;
        let description = spec.describe();
        let filter = options.tools.clone();
        let (isolation, discovery) = Isolation::connect(settings, spec, options).await?;
        if !filter.is_all() {
            let names: Vec<String> = discovery.tools.iter().map(|t| ta_types::terminal::terminal_safe(&t.name).into_owned()).collect();
            eprintln!("tools offered: {}", names.join(", "));
        }
        eprintln!("isolation: {} ({})", isolation.mode(), isolation.reason());
        let isolation = Arc::new(isolation);
        Ok(Server { client: isolation.shared_client().clone(), discovery, description, isolation: Some(isolation) })
    }

    /// The tools as the agent loop uses them.
    pub fn tools(&self) -> ta_rollout::McpTools {
        let catalog = ta_mcp::ToolCatalog::from_discovery(&self.discovery);
        match &self.isolation {
            Some(iso) => ta_rollout::McpTools::isolated(iso.clone(), catalog),
            None => ta_rollout::McpTools::new(self.client.clone(), catalog),
        }
    }

    /// Stops the server, the warm pool and every server still waiting in it.
    pub async fn close(&self) {
        match &self.isolation {
            Some(iso) => iso.shutdown().await,
            None => self.client.close().await,
        }
    }

    /// The system prompt from `template` (the default when `None`).
    pub fn system_prompt(&self, template: Option<&Path>) -> Result<String> {
        let (text, origin) = match template {
            Some(p) => (std::fs::read_to_string(p).with_context(|| format!("cannot read --system-prompt {}", p.display()))?, p.display().to_string()),
            None => (ta_rollout::prompt::DEFAULT_TEMPLATE.to_string(), "default".to_string()),
        };
        Ok(ta_rollout::prompt::render_system_prompt(&text, &origin, &ta_mcp::enrichment_text(&self.discovery))?)
    }
}

/// The server the flags name, and how to talk to it.
fn spec(args: &ServerArgs, log_dir: Option<&Path>) -> Result<(ta_mcp::ServerSpec, ta_mcp::ClientOptions)> {
    let mut spec = ta_mcp::ServerSpec::resolve(args.server.as_deref(), args.mcp_config.as_deref(), args.server_name.as_deref())?;
    // `train-agent demo-server` works from a fresh clone, before the binary is on PATH.
    if let ta_mcp::ServerSpec::Stdio { command, .. } = &mut spec
        && command == "train-agent"
    {
        *command = std::env::current_exe()?.display().to_string();
    }
    let options = ta_mcp::ClientOptions {
        call_timeout: Duration::from_secs(args.mcp_timeout),
        connect_timeout: Duration::from_secs(args.mcp_timeout),
        bearer_token: ta_mcp::Secret::from_env(&args.bearer_token_env),
        stderr_log: log_dir.map(|d| d.join("mcp-stderr.log")),
        tools: ta_mcp::ToolFilter { only: (!args.tools.is_empty()).then(|| args.tools.clone()), exclude: args.exclude_tools.clone() },
        ..Default::default()
    };
    Ok((spec, options))
}
