//! `train-agent demo-server`: the demo MCP server, stdio by default.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, Result};

#[derive(clap::Args)]
pub struct Args {
    /// Serve this SQLite file, read-only, instead of the company database (same tools and guards).
    #[arg(long, value_name = "FILE")]
    db: Option<PathBuf>,
    /// Serve streamable HTTP on this address (path /mcp) instead of stdio, e.g. 127.0.0.1:8765.
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// Require `Authorization: Bearer <token>` (HTTP only), the token read from this variable.
    #[arg(long, value_name = "NAME", requires = "http")]
    bearer_token_env: Option<String>,
}

pub async fn run(args: Args) -> Result<()> {
    // Opened before serving, so a wrong path fails here rather than at the first tool call.
    let db = match &args.db {
        Some(path) => ta_demo_server::Database::open(path)?,
        None => ta_demo_server::Database::demo(),
    };
    let Some(addr) = args.http else {
        return Ok(ta_demo_server::serve_stdio(db).await?);
    };
    let token = match &args.bearer_token_env {
        Some(name) => {
            Some(std::env::var(name).with_context(|| format!("--bearer-token-env names `{name}`, but that variable is not set\nhint: export {name}=<token> first"))?)
        }
        None => None,
    };
    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("cannot listen on {addr}"))?;
    eprintln!("demo MCP server on http://{}{}{}", listener.local_addr()?, ta_demo_server::MCP_PATH, if token.is_some() { " (bearer token required)" } else { "" });
    tokio::select! {
        r = ta_demo_server::serve_http(db, listener, token) => Ok(r?),
        _ = crate::interrupted::ctrl_c() => Ok(()),
    }
}
