//! The agent loop's tools, served by a real MCP connection: one shared server, or, with
//! [`Isolation`], a world of its own for every episode.

use std::sync::Arc;

use serde_json::Value;
use ta_mcp::{McpClient, McpError, ToolCatalog};
use ta_types::redact::redact_urls_in;
use ta_types::{ToolSpec, Trajectory};

use crate::isolation::{EpisodeWorld, Isolation};
use crate::job::Job;
use crate::tools::{ToolHost, ToolResult};

/// An MCP server's tools (plus `complete_task`) as the agent loop sees them.
pub struct McpTools {
    client: Arc<McpClient>,
    catalog: Arc<ToolCatalog>,
    isolation: Option<Arc<Isolation>>,
    /// Set on the host of one episode (from [`ToolHost::begin`]).
    world: Option<EpisodeWorld>,
}

impl McpTools {
    /// Every episode on `client`, sharing its state.
    pub fn new(client: Arc<McpClient>, catalog: ToolCatalog) -> Self {
        McpTools { client, catalog: Arc::new(catalog), isolation: None, world: None }
    }

    /// Every episode in the world `isolation` gives it; calls outside an episode (reference
    /// traces, synthesis) go to its shared server.
    pub fn isolated(isolation: Arc<Isolation>, catalog: ToolCatalog) -> Self {
        McpTools { client: isolation.shared_client().clone(), catalog: Arc::new(catalog), isolation: Some(isolation), world: None }
    }

    pub fn client(&self) -> &Arc<McpClient> {
        &self.client
    }
}

impl ToolHost for McpTools {
    fn specs(&self) -> &[ToolSpec] {
        self.catalog.specs()
    }

    fn check(&self, name: &str, args: &Value) -> Result<(), String> {
        self.catalog.validate(name, args).map_err(|e| e.to_string())
    }

    async fn call(&self, name: &str, args: Value) -> Result<ToolResult, String> {
        // Error texts may quote the server's URL; the model and the trajectory see it without
        // credentials.
        match self.client.call_tool(name, args).await {
            Ok(out) => Ok(ToolResult { text: out.text, is_error: out.is_error }),
            // The server refused the request (bad params, unknown tool) but the connection is
            // fine: the model sees the message and may fix its call.
            Err(McpError::Protocol { message, .. }) => Ok(ToolResult { text: redact_urls_in(&message), is_error: true }),
            // A timeout of one call, or an answer too large to take, is the model's problem to
            // route around (ask for less), not the run's.
            Err(e @ (McpError::Timeout { .. } | McpError::TooLarge { .. })) => Ok(ToolResult { text: redact_urls_in(&e.to_string()), is_error: true }),
            Err(e) => Err(redact_urls_in(&e.to_string())),
        }
    }

    async fn begin(&self, job: &Job) -> Result<Option<Self>, String> {
        let Some(iso) = &self.isolation else { return Ok(None) };
        let world = iso.begin(job).await.map_err(|e| redact_urls_in(&e.to_string()))?;
        Ok(Some(McpTools { client: world.client.clone(), catalog: self.catalog.clone(), isolation: Some(iso.clone()), world: Some(world) }))
    }

    async fn finish(self, t: &mut Trajectory) {
        if let (Some(iso), Some(world)) = (self.isolation, self.world) {
            iso.finish(world, t).await;
        }
    }
}
