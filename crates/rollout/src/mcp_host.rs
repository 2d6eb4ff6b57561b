//! The agent loop's tools, served by a real MCP connection.

use std::sync::Arc;

use serde_json::Value;
use ta_mcp::{McpClient, McpError, ToolCatalog};
use ta_types::ToolSpec;
use ta_types::redact::redact_urls_in;

use crate::tools::{ToolHost, ToolResult};

/// An MCP server's tools (plus `complete_task`) as the agent loop sees them.
pub struct McpTools {
    client: Arc<McpClient>,
    catalog: ToolCatalog,
}

impl McpTools {
    pub fn new(client: Arc<McpClient>, catalog: ToolCatalog) -> Self {
        McpTools { client, catalog }
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
            // A timeout of one call is the model's problem to route around, not the run's.
            Err(e @ McpError::Timeout { .. }) => Ok(ToolResult { text: redact_urls_in(&e.to_string()), is_error: true }),
            Err(e) => Err(redact_urls_in(&e.to_string())),
        }
    }
}
