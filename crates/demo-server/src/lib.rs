//! The demo MCP server of `train-agent`: a deterministic company database (departments,
//! employees, projects, assignments) in SQLite, exposed read-only through three tools,
//! `list_tables`, `describe_table` and `run_query`, over stdio or streamable HTTP.
//!
//! It exists so that training can be tried end to end without any external server, and so that
//! the scenarios in `scenarios/company.jsonl` have exact reference answers. The same tools and
//! guards can serve any SQLite file instead ([`Database::open`]), so real databases can be
//! queried without a separate MCP server.
//!
//! Logging goes through `tracing` only: in stdio mode stdout carries the protocol.

mod catalog;
mod database;
mod db;
mod guard;
mod http;
mod query;
mod tools;

use std::path::PathBuf;
use std::sync::Arc;

use rmcp::ServiceExt;
use tokio::io::{AsyncRead, AsyncWrite};

pub use database::{Database, Source};
pub use db::{TABLES, database};
pub use guard::{QUERY_TIME_LIMIT, REFUSED};
pub use http::{MCP_PATH, router, serve_http};
pub use query::MAX_ROWS;
pub use tools::{DemoServer, TOOL_NAMES, ToolReply};

/// Why the demo server could not start or stopped abnormally.
#[derive(Debug, thiserror::Error)]
pub enum DemoServerError {
    #[error("cannot open a read-only connection on the database image: {0}")]
    Database(#[source] rusqlite::Error),
    #[error("cannot read {}: {source}; check the path of the SQLite file", .path.display())]
    Unreadable { path: PathBuf, source: std::io::Error },
    #[error("{} is not a SQLite database (it does not start with the SQLite header); pass a SQLite 3 database file", .0.display())]
    NotSqlite(PathBuf),
    #[error("cannot read the SQLite database {}: {source}", .path.display())]
    File { path: PathBuf, source: rusqlite::Error },
    #[error("the SQLite database {} has no tables, so there is nothing to query; check the path", .0.display())]
    NoTables(PathBuf),
    #[error("demo server I/O error: {0}")]
    Io(#[source] std::io::Error),
    #[error("MCP session failed: {0}")]
    Mcp(String),
}

/// Serves MCP on `db` over stdin/stdout until the client closes stdin.
pub async fn serve_stdio(db: Arc<Database>) -> Result<(), DemoServerError> {
    let (stdin, stdout) = rmcp::transport::stdio();
    serve_io(db, stdin, stdout).await
}

/// Serves one MCP session on `db` over any byte stream pair (stdio, a pipe, `tokio::io::duplex`) until
/// the reader reaches EOF.
pub async fn serve_io<R, W>(db: Arc<Database>, reader: R, writer: W) -> Result<(), DemoServerError>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let running = DemoServer::new(db)?.serve((reader, writer)).await.map_err(|e| DemoServerError::Mcp(e.to_string()))?;
    let reason = running.waiting().await.map_err(|e| DemoServerError::Mcp(e.to_string()))?;
    tracing::debug!(?reason, "MCP session ended");
    Ok(())
}
