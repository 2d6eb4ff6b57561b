//! What the agent loop needs from an MCP server: the tools to offer, a check of each call before
//! it is sent, and the call itself. A trait keeps the loop independent of the transport.

use std::future::Future;

use serde_json::Value;
use ta_types::{ToolSpec, Trajectory};

use crate::job::Job;

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

    /// Readies the world `job` plays in and returns the tools bound to it, or `None` to play on
    /// this host as it is (no isolation). `Err` ends the episode as an error before it starts.
    fn begin(&self, job: &Job) -> impl Future<Output = Result<Option<Self>, String>> + Send
    where
        Self: Sized,
    {
        let _ = job;
        async { Ok(None) }
    }

    /// Ends the episode played on a host from [`ToolHost::begin`]: records what it left behind
    /// (the captured state) in `t` and releases its world.
    fn finish(self, t: &mut Trajectory) -> impl Future<Output = ()> + Send
    where
        Self: Sized,
    {
        let _ = t;
        async {}
    }
}
