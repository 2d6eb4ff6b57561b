//! The HTTP side: one `reqwest` client, retries with exponential backoff and jitter on rate
//! limits, server errors and dropped connections, and errors that say what the server said.
//! Every wait is bounded by [`HttpLimits`]: a server that never answers, drips its body or asks
//! to be retried in a day costs at most the call's deadline.

use std::time::Duration;

use rand::Rng;
use ta_types::redact::{redact_url, redact_urls_in};

use crate::wire::{ChatRequest, ChatResponse};

#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    /// The prompt no longer fits the model's context window (vLLM and OpenAI answer 400 with a
    /// message about the maximum context length).
    #[error("context too long: {0}")]
    ContextExceeded(String),
    #[error("{url} answered {status}: {message}")]
    Status { url: String, status: u16, message: String },
    #[error("cannot reach {url}: {message}\nhint: check that the server is running and --base-url points at it (e.g. http://127.0.0.1:8000/v1)")]
    Unreachable { url: String, message: String },
    #[error("{url} returned a body that is not a chat completion: {message}")]
    Decode { url: String, message: String },
    /// The response body passed [`MAX_BODY_BYTES`]; reading stopped there.
    #[error(
        "{url} sent a response body over {} MiB; reading stopped there\nhint: a chat completion is far smaller; check that --base-url points at an OpenAI-compatible server and that its replies are bounded (--max-tokens)",
        MAX_BODY_BYTES >> 20
    )]
    TooLarge { url: String },
    /// The call's overall deadline (all attempts and waits together) went by.
    #[error(
        "no answer from {url} within the {seconds:.0} s deadline for one call (retries included); last error: {last}\nhint: check that the server is up and answering; for a slow one raise the deadline (--model-deadline, and --model-timeout per attempt, for model servers)"
    )]
    Deadline { url: String, seconds: f64, last: String },
}

/// The largest response body read: a reply is read as a stream and dropped past this, so a
/// misbehaving server cannot make the client hold gigabytes (docs/reliability.md). A chat
/// completion is kilobytes; even logprobs of thousands of tokens stay far below.
pub const MAX_BODY_BYTES: usize = 64 << 20;

/// How long a call to a model server may wait, at each stage. One owner for the defaults; the
/// CLI exposes each as a flag (`--model-connect-timeout` ...).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HttpLimits {
    /// Establishing the TCP (and TLS) connection.
    pub connect: Duration,
    /// One attempt: sending the request until the whole response body is in.
    pub request: Duration,
    /// After the response headers arrive, the body must be complete within this (a non-streamed
    /// completion is ready when its headers are sent, so a server dripping bytes is cut off).
    pub stall: Duration,
    /// One call, all attempts and the waits between them together.
    pub deadline: Duration,
    /// The longest `Retry-After` honoured; a longer one is waited for this long.
    pub max_retry_after: Duration,
    /// Attempts after the first (on 429, 5xx, timeouts and dropped connections).
    pub max_retries: u32,
}

/// Installs ring as the process's TLS crypto provider, which every reqwest client needs before it
/// is built: reqwest is built without one (`rustls-no-provider`), so that the build compiles ring
/// rather than aws-lc-sys, and it panics when no provider is installed. Call it before a library
/// builds a client of its own (rmcp's streamable HTTP transport); [`http_builder`] calls it.
pub fn install_tls_provider() {
    // Err: a provider is already installed, which is all that is needed.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A reqwest client builder with the TLS provider installed, for every HTTP client of the
/// workspace (model servers, the engine's management API, MCP servers over SSE).
pub fn http_builder() -> reqwest::ClientBuilder {
    install_tls_provider();
    reqwest::Client::builder()
}

impl HttpLimits {
    pub const DEFAULT: HttpLimits = HttpLimits {
        connect: Duration::from_secs(10),
        request: Duration::from_secs(300),
        stall: Duration::from_secs(30),
        deadline: Duration::from_secs(900),
        max_retry_after: Duration::from_secs(60),
        max_retries: 4,
    };

    /// The same limits with a different per-attempt timeout (e.g. a judge's `timeout_s`).
    pub fn with_request(self, request: Duration) -> Self {
        HttpLimits { request, ..self }
    }

    /// The reqwest client these limits need (connect and per-attempt timeouts).
    pub fn http_client(&self) -> reqwest::Client {
        http_builder().connect_timeout(self.connect).timeout(self.request).build().expect("reqwest client")
    }
}

impl Default for HttpLimits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl ChatError {
    /// Worth trying again: rate limits, server errors, timeouts and dropped connections.
    pub fn retryable(&self) -> bool {
        match self {
            ChatError::Status { status, .. } => *status == 429 || *status >= 500,
            ChatError::Unreachable { .. } => true,
            ChatError::ContextExceeded(_) | ChatError::Decode { .. } | ChatError::Deadline { .. } | ChatError::TooLarge { .. } => false,
        }
    }
}

/// A client for one OpenAI-compatible server.
#[derive(Clone)]
pub struct ChatClient {
    http: reqwest::Client,
    url: String,
    api_key: Option<String>,
    limits: HttpLimits,
}

impl std::fmt::Debug for ChatClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the key.
        f.debug_struct("ChatClient").field("url", &redact_url(&self.url)).field("api_key", &self.api_key.as_ref().map(|_| "<redacted>")).finish()
    }
}

impl ChatClient {
    /// `base_url` is the API root, e.g. `http://127.0.0.1:8000/v1`; a bare host gets `/v1`.
    pub fn new(base_url: &str, api_key: Option<String>, limits: HttpLimits) -> Self {
        ChatClient { http: limits.http_client(), url: format!("{}/chat/completions", api_root(base_url)), api_key, limits }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, ChatError> {
        let auth: Vec<(&str, String)> = self.api_key.iter().map(|k| ("authorization", format!("Bearer {k}"))).collect();
        let body = post_json(&self.http, &self.url, &auth, request, &self.limits).await?;
        serde_json::from_str(&body).map_err(|e| ChatError::Decode { url: redact_url(&self.url), message: e.to_string() })
    }
}

/// POSTs `body` as JSON to `url` with `headers` and returns the response body of a 2xx answer.
/// Rate limits (429, honouring `retry-after` up to `limits.max_retry_after`), server errors
/// (5xx), timeouts and dropped connections are retried up to `limits.max_retries` times with
/// exponential backoff and jitter, all within `limits.deadline`. `http` should come from
/// [`HttpLimits::http_client`]. Shared by [`ChatClient`] and other JSON APIs (the reward judge's
/// Anthropic Messages client).
pub async fn post_json(http: &reqwest::Client, url: &str, headers: &[(&str, String)], body: &impl serde::Serialize, limits: &HttpLimits) -> Result<String, ChatError> {
    let deadline = tokio::time::Instant::now() + limits.deadline;
    let shown = redact_url(url);
    let expired = |last: String| ChatError::Deadline { url: shown.clone(), seconds: limits.deadline.as_secs_f64(), last };
    let mut attempt = 0;
    let mut last = "none (the first attempt did not finish)".to_string();
    loop {
        let result = match tokio::time::timeout_at(deadline, post_once(http, url, headers, body, limits)).await {
            Ok(r) => r,
            Err(_) => return Err(expired(last)),
        };
        match result {
            Err((e, retry_after)) if e.retryable() && attempt < limits.max_retries => {
                let backoff = retry_after.map(|d| d.min(limits.max_retry_after)).unwrap_or_else(|| {
                    let base = 0.5 * 2f64.powi(attempt as i32);
                    Duration::from_secs_f64(base + rand::rng().random_range(0.0..base))
                });
                if tokio::time::Instant::now() + backoff >= deadline {
                    return Err(expired(e.to_string()));
                }
                tracing::warn!(attempt, ?backoff, "request to {shown} failed, retrying: {e}");
                last = e.to_string();
                tokio::time::sleep(backoff).await;
                attempt += 1;
            }
            other => return other.map_err(|(e, _)| e),
        }
    }
}

async fn post_once(
    http: &reqwest::Client,
    url: &str,
    headers: &[(&str, String)],
    body: &impl serde::Serialize,
    limits: &HttpLimits,
) -> Result<String, (ChatError, Option<Duration>)> {
    let mut req = http.post(url).json(body);
    for (name, value) in headers {
        req = req.header(*name, value);
    }
    // Errors name the URL without its credentials (userinfo, `?api_key=`).
    let shown = redact_url(url);
    let unreachable = |e: reqwest::Error| (ChatError::Unreachable { url: shown.clone(), message: error_chain(&e) }, None);
    let resp = req.send().await.map_err(unreachable)?;
    let status = resp.status();
    let retry_after = resp
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(|s| Duration::from_secs_f64(s.min(1e9)));
    let text = match tokio::time::timeout(limits.stall, read_capped(resp)).await {
        Ok(Ok(Some(body))) => String::from_utf8_lossy(&body).into_owned(),
        Ok(Ok(None)) => return Err((ChatError::TooLarge { url: shown }, None)),
        Ok(Err(e)) => return Err(unreachable(e)),
        Err(_) => {
            let message = format!("the response body did not arrive within {:.1} s of its headers (--model-stall-timeout)", limits.stall.as_secs_f64());
            return Err((ChatError::Unreachable { url: shown, message }, None));
        }
    };
    if !status.is_success() {
        let message = error_message(&text);
        if status.as_u16() == 400 && is_context_error(&message) {
            return Err((ChatError::ContextExceeded(message), None));
        }
        return Err((ChatError::Status { url: shown, status: status.as_u16(), message: redact_urls_in(&message) }, retry_after));
    }
    Ok(text)
}

/// The body of `resp`, read chunk by chunk; `None` once it passes [`MAX_BODY_BYTES`] (announced
/// by `Content-Length` or not, as with a chunked body).
async fn read_capped(mut resp: reqwest::Response) -> Result<Option<Vec<u8>>, reqwest::Error> {
    if resp.content_length().is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        return Ok(None);
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await? {
        if body.len() + chunk.len() > MAX_BODY_BYTES {
            return Ok(None);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Some(body))
}

/// A reqwest error with its sources ("error sending request: ... operation timed out"), URL
/// credentials masked.
fn error_chain(e: &reqwest::Error) -> String {
    let mut out = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    redact_urls_in(&out)
}

fn api_root(base_url: &str) -> String {
    let trimmed = base_url.trim_end_matches('/');
    let has_path = trimmed.split("://").nth(1).is_some_and(|rest| rest.contains('/'));
    if has_path { trimmed.to_string() } else { format!("{trimmed}/v1") }
}

/// The `error.message` of an OpenAI error object, else the body itself (shortened).
fn error_message(body: &str) -> String {
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().or(v["message"].as_str()).map(str::to_string))
        .unwrap_or_else(|| body.chars().take(500).collect())
}

fn is_context_error(message: &str) -> bool {
    let m = message.to_lowercase();
    m.contains("maximum context length") || m.contains("context length") || m.contains("context_length_exceeded") || m.contains("too long")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// reqwest is built without a crypto provider and panics building a client without one.
    #[test]
    fn clients_build_with_the_installed_tls_provider() {
        let client = std::panic::catch_unwind(|| http_builder().build());
        assert!(client.is_ok_and(|c| c.is_ok()), "a client builds once the provider is installed");
        assert!(rustls::crypto::CryptoProvider::get_default().is_some(), "ring is the process's provider");
    }

    #[test]
    fn api_root_appends_v1_only_to_bare_hosts() {
        assert_eq!(api_root("http://127.0.0.1:8000"), "http://127.0.0.1:8000/v1");
        assert_eq!(api_root("http://127.0.0.1:8000/v1/"), "http://127.0.0.1:8000/v1");
        assert_eq!(api_root("https://openrouter.ai/api/v1"), "https://openrouter.ai/api/v1");
    }

    #[test]
    fn error_messages_come_from_openai_error_objects() {
        assert_eq!(error_message(r#"{"error": {"message": "bad", "type": "invalid_request_error"}}"#), "bad");
        assert_eq!(error_message("plain"), "plain");
        assert!(is_context_error("This model's maximum context length is 2048 tokens. However, you requested 3000 tokens"));
    }

    #[test]
    fn debug_never_shows_the_key() {
        let c = ChatClient::new("http://x", Some("sk-secret".into()), HttpLimits::DEFAULT);
        assert!(!format!("{c:?}").contains("sk-secret"));
    }
}
