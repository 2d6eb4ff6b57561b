//! What the agent loop needs from an MCP server: the tools to offer, a check of each call before
//! it is sent, and the call itself. A trait keeps the loop independent of the transport.

use std::future::Future;

use serde_json::Value;
use ta_types::ToolSpec;

/// The result of a tool call that reached the server. `is_error` marks an MCP tool error, which
/// the model sees and can recover from.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    pub text: String,
    pub is_error: bool,
}

pub trait ToolHost: Send + Sync {
    /// Tools offered to the model, `complete_task` included.
    fn specs(&self) -> &[ToolSpec];
    /// Checks a call before it is sent: unknown tool, arguments not an object, schema violation.
    /// The message is shown to the model.
    fn check(&self, name: &str, args: &Value) -> Result<(), String>;
    /// Calls a server tool. `Err` is a failure of the connection itself, which ends the rollout.
    fn call(&self, name: &str, args: Value) -> impl Future<Output = Result<ToolResult, String>> + Send;
}
