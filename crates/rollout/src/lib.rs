//! Rollouts: the multi-turn agent loop against an OpenAI-compatible model server and an MCP
//! server, and the runner that plays many episodes concurrently and writes their trajectories.

pub mod agent;
pub mod isolation;
pub mod job;
pub mod mcp_host;
pub mod prompt;
pub mod runner;
pub mod tools;

pub use agent::{AgentConfig, run_episode};
pub use mcp_host::McpTools;
pub use tools::{ToolHost, ToolResult};
