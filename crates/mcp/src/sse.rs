//! Legacy HTTP+SSE client transport (MCP 2024-11-05), as a shim on rmcp's [`Transport`] trait.
//!
//! rmcp dropped its SSE client, but many deployed servers still speak only this protocol:
//! GET the SSE URL, wait for the `endpoint` event naming where to POST, POST each JSON-RPC
//! message there (the server answers `202 Accepted`), and read responses as `message` events
//! on the open stream. The POST endpoint must share the SSE URL's origin, so that the bearer
//! token is never sent to another host.

use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use reqwest::header::{ACCEPT, HeaderMap};
use reqwest::{StatusCode, Url};
use rmcp::RoleClient;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use sse_stream::{Sse, SseStream};

use crate::secret::Secret;

/// Failures of the SSE shim; the messages say what was being done and to which URL.
#[derive(Debug, thiserror::Error)]
pub enum SseError {
    #[error("GET {url} failed: {source}")]
    Connect { url: String, source: reqwest::Error },
    #[error("GET {url} returned HTTP {status}{}", auth_hint(*status))]
    ConnectStatus { url: String, status: StatusCode },
    #[error("{url} did not send an `endpoint` event within {after:?} (is this a legacy SSE MCP server? for streamable HTTP, use the /mcp URL)")]
    NoEndpoint { url: String, after: Duration },
    #[error("{url} closed the event stream before sending an `endpoint` event")]
    ClosedBeforeEndpoint { url: String },
    #[error("the `endpoint` event `{endpoint}` is not a valid URL relative to {url}")]
    BadEndpoint { url: String, endpoint: String },
    #[error("the `endpoint` event points to another origin ({endpoint}); refusing to send requests there")]
    CrossOrigin { endpoint: String },
    #[error("POST {endpoint} failed: {source}")]
    Post { endpoint: String, source: reqwest::Error },
    #[error("POST {endpoint} returned HTTP {status}: {body}{}", auth_hint(*status))]
    PostStatus { endpoint: String, status: StatusCode, body: String },
}

fn auth_hint(status: StatusCode) -> &'static str {
    if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN { " (check the bearer token)" } else { "" }
}

/// A connected legacy SSE session: the event stream and the POST endpoint it announced.
pub struct SseClientTransport {
    http: reqwest::Client,
    endpoint: Url,
    bearer: Option<Secret>,
    headers: HeaderMap,
    events: BoxStream<'static, Result<Sse, sse_stream::Error>>,
}

impl SseClientTransport {
    /// Opens the event stream at `url` and waits up to `timeout` for the `endpoint` event.
    pub async fn connect(http: reqwest::Client, url: &str, bearer: Option<Secret>, headers: HeaderMap, timeout: Duration) -> Result<Self, SseError> {
        let base = Url::parse(url).map_err(|_| SseError::BadEndpoint { url: url.into(), endpoint: url.into() })?;
        let mut req = http.get(base.clone()).header(ACCEPT, "text/event-stream").headers(headers.clone());
        if let Some(token) = &bearer {
            req = req.bearer_auth(token.expose());
        }
        let handshake = async {
            let resp = req.send().await.map_err(|source| SseError::Connect { url: url.into(), source })?;
            if !resp.status().is_success() {
                return Err(SseError::ConnectStatus { url: url.into(), status: resp.status() });
            }
            let mut events = SseStream::from_bytes_stream(resp.bytes_stream()).boxed();
            while let Some(event) = events.next().await {
                let Ok(event) = event else { break };
                if event.event.as_deref() == Some("endpoint") {
                    let data = event.data.unwrap_or_default();
                    let endpoint = base.join(data.trim()).map_err(|_| SseError::BadEndpoint { url: url.into(), endpoint: data.clone() })?;
                    if endpoint.origin() != base.origin() {
                        return Err(SseError::CrossOrigin { endpoint: endpoint.to_string() });
                    }
                    return Ok((endpoint, events));
                }
            }
            Err(SseError::ClosedBeforeEndpoint { url: url.into() })
        };
        let (endpoint, events) = tokio::time::timeout(timeout, handshake).await.map_err(|_| SseError::NoEndpoint { url: url.into(), after: timeout })??;
        tracing::debug!(%endpoint, "legacy SSE session open");
        Ok(SseClientTransport { http, endpoint, bearer, headers, events })
    }

    /// Where requests are POSTed (from the `endpoint` event).
    pub fn endpoint(&self) -> &Url {
        &self.endpoint
    }
}

impl Transport<RoleClient> for SseClientTransport {
    type Error = SseError;

    fn send(&mut self, item: ClientJsonRpcMessage) -> impl Future<Output = Result<(), SseError>> + Send + 'static {
        let mut req = self.http.post(self.endpoint.clone()).headers(self.headers.clone()).json(&item);
        if let Some(token) = &self.bearer {
            req = req.bearer_auth(token.expose());
        }
        let endpoint = self.endpoint.to_string();
        async move {
            let resp = req.send().await.map_err(|source| SseError::Post { endpoint: endpoint.clone(), source })?;
            let status = resp.status();
            if status.is_success() {
                return Ok(());
            }
            let body: String = resp.text().await.unwrap_or_default().chars().take(500).collect();
            Err(SseError::PostStatus { endpoint, status, body })
        }
    }

    async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
        loop {
            match self.events.next().await? {
                Err(e) => {
                    tracing::warn!(error = %e, "legacy SSE stream failed");
                    return None;
                }
                Ok(event) => {
                    // Unnamed events are `message` events by the SSE spec.
                    if !matches!(event.event.as_deref(), None | Some("message")) {
                        continue;
                    }
                    let Some(data) = event.data else { continue };
                    match serde_json::from_str::<ServerJsonRpcMessage>(&data) {
                        Ok(msg) => return Some(msg),
                        Err(e) => tracing::warn!(error = %e, "ignoring unparsable SSE message"),
                    }
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), SseError> {
        // Dropping the response body closes the GET, which ends the session on the server.
        self.events = futures::stream::empty().boxed();
        Ok(())
    }
}
