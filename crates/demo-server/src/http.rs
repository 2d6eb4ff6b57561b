//! Streamable HTTP transport at `/mcp`, optionally behind a bearer token.
//!
//! Each MCP session gets its own [`DemoServer`] (and so its own read-only connection), which lets
//! many rollouts query in parallel. The token check runs before rmcp sees the request, so an
//! unauthenticated client learns nothing about the server beyond the 401.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use crate::{Database, DemoServer, DemoServerError};

/// The path the MCP endpoint is served at.
pub const MCP_PATH: &str = "/mcp";

/// Serves MCP on `db` over streamable HTTP on `listener` at [`MCP_PATH`] until the future is dropped
/// (task aborted) or Ctrl-C. With `bearer_token`, every request must carry
/// `Authorization: Bearer <token>`; others get 401 with a JSON error body.
pub async fn serve_http(db: Arc<Database>, listener: tokio::net::TcpListener, bearer_token: Option<String>) -> Result<(), DemoServerError> {
    let addr = listener.local_addr().map_err(DemoServerError::Io)?;
    // Dropping this future (an aborted task) cancels the token, which ends all MCP sessions.
    let cancel = CancellationToken::new();
    let _cancel_on_drop = cancel.clone().drop_guard();
    if bearer_token.is_none() && !addr.ip().is_loopback() {
        tracing::warn!(%addr, "demo server listens beyond loopback without a bearer token");
    }
    tracing::info!(%addr, path = MCP_PATH, auth = bearer_token.is_some(), "demo MCP server listening");
    let app = router(db, addr, bearer_token, cancel.child_token());
    let shutdown = {
        let cancel = cancel.clone();
        async move {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => tracing::info!("Ctrl-C: stopping the demo server"),
                _ = cancel.cancelled() => {}
            }
            cancel.cancel();
        }
    };
    axum::serve(listener, app).with_graceful_shutdown(shutdown).await.map_err(DemoServerError::Io)
}

/// The axum router: the MCP service on `db` at [`MCP_PATH`], wrapped in the bearer check when a token
/// is given. `addr` is the bound address: on loopback rmcp's DNS-rebinding protection (Host
/// must be a loopback name) stays on; a deliberate non-loopback bind accepts any Host.
pub fn router(db: Arc<Database>, addr: SocketAddr, bearer_token: Option<String>, cancel: CancellationToken) -> Router {
    let mut config = StreamableHttpServerConfig::default().with_cancellation_token(cancel);
    if !addr.ip().is_loopback() {
        config = config.disable_allowed_hosts();
    }
    let service = StreamableHttpService::new(
        move || DemoServer::new(Arc::clone(&db)).map_err(|e| std::io::Error::other(e.to_string())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let router = Router::new().nest_service(MCP_PATH, service);
    match bearer_token {
        Some(token) => router.layer(middleware::from_fn_with_state(Arc::new(token), require_bearer)),
        None => router,
    }
}

async fn require_bearer(State(token): State<Arc<String>>, request: Request, next: Next) -> Response {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .map(str::trim);
    match presented {
        Some(given) if constant_time_eq(given.as_bytes(), token.as_bytes()) => next.run(request).await,
        other => {
            let reason = if other.is_some() { "invalid bearer token" } else { "missing bearer token" };
            tracing::debug!(reason, "refused an HTTP request");
            let body = serde_json::json!({
                "error": "unauthorized",
                "error_description": format!("{reason}; send the header 'Authorization: Bearer <token>'"),
            });
            let mut response = (StatusCode::UNAUTHORIZED, axum::Json(body)).into_response();
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"train-agent-demo\""));
            response
        }
    }
}

/// Compares without an early exit, so response timing does not reveal a token prefix.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::constant_time_eq;

    #[test]
    fn token_comparison() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"x"));
    }
}
