//! What a server offers. A plain data type of its own, so that the modules reading it (the
//! catalog, the schema conversion) do not depend on the client that fills it.

use rmcp::model::{Resource, Tool};

/// What a server offers, gathered once at the start of a run.
#[derive(Debug, Clone, Default)]
pub struct Discovery {
    pub server_name: Option<String>,
    pub server_version: Option<String>,
    /// The `instructions` from `initialize`: the server's own advice on using its tools.
    pub instructions: Option<String>,
    /// Every tool, all pages.
    pub tools: Vec<Tool>,
    /// Every resource, all pages (empty when the server has no resources capability).
    pub resources: Vec<Resource>,
}
