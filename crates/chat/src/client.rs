//! The HTTP side: one `reqwest` client, retries with exponential backoff and jitter on rate
//! limits, server errors and dropped connections, and errors that say what the server said.

use std::time::Duration;

use rand::Rng;

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
}

impl ChatError {
    /// Worth trying again: rate limits, server errors, timeouts and dropped connections.
    pub fn retryable(&self) -> bool {
        match self {
            ChatError::Status { status, .. } => *status == 429 || *status >= 500,
            ChatError::Unreachable { .. } => true,
            _ => false,
        }
    }
}

/// A client for one OpenAI-compatible server.
#[derive(Clone)]
pub struct ChatClient {
    http: reqwest::Client,
    url: String,
    api_key: Option<String>,
    max_retries: u32,
}

impl std::fmt::Debug for ChatClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the key.
        f.debug_struct("ChatClient").field("url", &self.url).field("api_key", &self.api_key.as_ref().map(|_| "<redacted>")).finish()
    }
}

impl ChatClient {
    /// `base_url` is the API root, e.g. `http://127.0.0.1:8000/v1`; a bare host gets `/v1`.
    pub fn new(base_url: &str, api_key: Option<String>, timeout: Duration) -> Self {
        let http = reqwest::Client::builder().timeout(timeout).build().expect("reqwest client");
        ChatClient { http, url: format!("{}/chat/completions", api_root(base_url)), api_key, max_retries: 4 }
    }

    pub fn with_max_retries(mut self, n: u32) -> Self {
        self.max_retries = n;
        self
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, ChatError> {
        let auth: Vec<(&str, String)> = self.api_key.iter().map(|k| ("authorization", format!("Bearer {k}"))).collect();
        let body = post_json(&self.http, &self.url, &auth, request, self.max_retries).await?;
        serde_json::from_str(&body).map_err(|e| ChatError::Decode { url: self.url.clone(), message: e.to_string() })
    }
}

/// POSTs `body` as JSON to `url` with `headers` and returns the response body of a 2xx answer.
/// Rate limits (429, honouring `retry-after`), server errors (5xx), timeouts and dropped
/// connections are retried up to `max_retries` times with exponential backoff and jitter. Shared
/// by [`ChatClient`] and other JSON APIs (the reward judge's Anthropic Messages client).
pub async fn post_json(
    http: &reqwest::Client,
    url: &str,
    headers: &[(&str, String)],
    body: &impl serde::Serialize,
    max_retries: u32,
) -> Result<String, ChatError> {
    let mut attempt = 0;
    loop {
        match post_once(http, url, headers, body).await {
            Err((e, retry_after)) if e.retryable() && attempt < max_retries => {
                let backoff = retry_after.map(|d| d.min(MAX_RETRY_AFTER)).unwrap_or_else(|| {
                    let base = 0.5 * 2f64.powi(attempt as i32);
                    Duration::from_secs_f64(base + rand::rng().random_range(0.0..base))
                });
                tracing::warn!(attempt, ?backoff, "request to {url} failed, retrying: {e}");
                tokio::time::sleep(backoff).await;
                attempt += 1;
            }
            other => return other.map_err(|(e, _)| e),
        }
    }
}

/// The longest `retry-after` honoured: a server asking for more is retried sooner (and fails
/// again if it meant it) rather than stalling a run for hours.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(120);

async fn post_once(http: &reqwest::Client, url: &str, headers: &[(&str, String)], body: &impl serde::Serialize) -> Result<String, (ChatError, Option<Duration>)> {
    let mut req = http.post(url).json(body);
    for (name, value) in headers {
        req = req.header(*name, value);
    }
    let unreachable = |e: reqwest::Error| (ChatError::Unreachable { url: url.to_string(), message: e.to_string() }, None);
    let resp = req.send().await.map_err(unreachable)?;
    let status = resp.status();
    let retry_after = resp
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64);
    let text = resp.text().await.map_err(unreachable)?;
    if !status.is_success() {
        let message = error_message(&text);
        if status.as_u16() == 400 && is_context_error(&message) {
            return Err((ChatError::ContextExceeded(message), None));
        }
        return Err((ChatError::Status { url: url.to_string(), status: status.as_u16(), message }, retry_after));
    }
    Ok(text)
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
        let c = ChatClient::new("http://x", Some("sk-secret".into()), Duration::from_secs(1));
        assert!(!format!("{c:?}").contains("sk-secret"));
    }
}
