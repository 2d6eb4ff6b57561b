//! The MCP side of train-agent: which server ([`ServerSpec`]), talking to it ([`McpClient`] over
//! stdio, streamable HTTP or legacy SSE), what it offers ([`Discovery`]), how that looks to a
//! model ([`tools_to_openai`], [`enrichment_text`]) and whether a model's call is well-formed
//! ([`ToolCatalog`]).
//!
//! Built on the official Rust SDK, `rmcp`; the legacy SSE client is a small shim ([`sse`])
//! because rmcp no longer ships one, and the stdio transport ([`stdio`]) is ours so that a
//! server never outlives its client and an oversized answer fails its call.

pub mod catalog;
pub mod client;
pub mod content;
pub mod discovery;
pub mod schema;
pub mod secret;
pub mod spec;
pub mod sse;
pub mod stdio;
pub mod template;

pub use catalog::{CallError, ToolCatalog, writing_tools};
pub use client::{ClientOptions, McpClient, McpError, ToolFilter};
pub use content::{ToolOutput, render_result};
pub use discovery::Discovery;
pub use schema::{COMPLETE_TASK, complete_task_tool, convert_schema, enrichment_text, tools_to_openai};
pub use secret::Secret;
pub use spec::{HttpTransport, MCP_URL_ENV, ServerSpec, SpecError};
pub use template::Placeholders;

/// Re-exported so callers can name MCP types (`Tool`, `Resource`) without depending on rmcp.
pub use rmcp::model::{Prompt, PromptArgument, Resource, ResourceTemplate, Tool, ToolAnnotations};
