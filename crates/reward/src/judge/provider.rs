//! Where the judge runs, chosen by `--judge-model PROVIDER/MODEL`:
//!
//! | provider | API | key | base URL |
//! |---|---|---|---|
//! | `openai/<model>` | chat completions | `OPENAI_API_KEY` | `https://api.openai.com/v1`, or `OPENAI_BASE_URL` |
//! | `openrouter/<vendor>/<model>` | chat completions | `OPENROUTER_API_KEY` | `https://openrouter.ai/api/v1` |
//! | `anthropic/<model>` | Messages | `ANTHROPIC_API_KEY` | `https://api.anthropic.com`, or `ANTHROPIC_BASE_URL` |
//! | `local/<name>` | chat completions | none | `--judge-base-url` (the project's engine, vLLM, ...) |
//!
//! `--judge-base-url` overrides the base URL of any provider. Keys are read from the environment
//! when the judge starts and live only in request headers: never in configs, logs or files.
//! Teachers and solvers (`scenarios paraphrase`, `generate`) name their models the same way.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use ta_chat::{ChatClient, ChatError, ChatRequest, HttpLimits, post_json};
use ta_types::Message;

use crate::cost::{Price, Usage, price_of};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    OpenAi,
    OpenRouter,
    Anthropic,
    Local,
}

/// The Anthropic Messages API version this client speaks.
const ANTHROPIC_VERSION: &str = "2023-06-01";

#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    #[error(
        "`{0}` names no model this tool can call\nhint: give PROVIDER/MODEL with PROVIDER one of openai, openrouter, anthropic, local, e.g. openai/gpt-4o-mini or local/base"
    )]
    Unknown(String),
    #[error("{model} needs ${var}, which is not set\nhint: export {var}=... (it is read from the environment only, never written anywhere)")]
    MissingKey { model: String, var: &'static str },
    #[error("the local judge {model} needs a server URL\nhint: pass --judge-base-url http://127.0.0.1:8000/v1 (e.g. `train-agent serve` or `vllm serve`)")]
    MissingUrl { model: String },
}

/// A judge endpoint ready to call.
pub struct Endpoint {
    pub provider: Provider,
    /// The model name sent to the API (`gpt-4o-mini`, `claude-haiku-4-5`, `base`).
    pub model: String,
    client: Client,
}

enum Client {
    /// `schema_off` is set once the server rejected `response_format` (some OpenRouter routes
    /// and older servers do); the reply is validated all the same.
    OpenAi {
        chat: ChatClient,
        schema_off: std::sync::atomic::AtomicBool,
    },
    Anthropic {
        http: reqwest::Client,
        url: String,
        key: String,
        limits: HttpLimits,
    },
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the key.
        f.debug_struct("Endpoint").field("provider", &self.provider).field("model", &self.model).finish_non_exhaustive()
    }
}

/// What one call returned.
#[derive(Debug, Clone)]
pub struct Reply {
    pub text: String,
    pub usage: Usage,
}

impl Provider {
    /// The provider and model of `spec` (`openai/gpt-4o-mini`, ...), without keys or URLs: what
    /// a flag naming a model is checked against when it is read.
    pub fn of_spec(spec: &str) -> Result<(Provider, &str), ProviderError> {
        let unknown = || ProviderError::Unknown(spec.to_string());
        let (provider, model) = spec.split_once('/').ok_or_else(unknown)?;
        let provider = match provider {
            "openai" => Provider::OpenAi,
            "openrouter" => Provider::OpenRouter,
            "anthropic" => Provider::Anthropic,
            "local" => Provider::Local,
            _ => return Err(unknown()),
        };
        if model.is_empty() {
            return Err(unknown());
        }
        Ok((provider, model))
    }
}

impl Endpoint {
    /// Resolves `spec` (`openai/gpt-4o-mini`, ...) with keys from the environment. `base_url`
    /// overrides the provider's default URL.
    pub fn resolve(spec: &str, base_url: Option<&str>, limits: HttpLimits) -> Result<Endpoint, ProviderError> {
        let (provider, model) = Provider::of_spec(spec)?;
        let env = |var: &str| std::env::var(var).ok().filter(|v| !v.trim().is_empty());
        let key = |var: &'static str| env(var).ok_or(ProviderError::MissingKey { model: spec.to_string(), var });
        let url = |var: &str, default: &str| base_url.map(str::to_string).or_else(|| env(var)).unwrap_or_else(|| default.to_string());
        let chat = |url: String, key: Option<String>| Client::OpenAi { chat: ChatClient::new(&url, key, limits), schema_off: std::sync::atomic::AtomicBool::new(false) };
        let client = match provider {
            Provider::OpenAi => chat(url("OPENAI_BASE_URL", "https://api.openai.com/v1"), Some(key("OPENAI_API_KEY")?)),
            Provider::OpenRouter => chat(url("OPENROUTER_BASE_URL", "https://openrouter.ai/api/v1"), Some(key("OPENROUTER_API_KEY")?)),
            Provider::Local => {
                let url = base_url.ok_or_else(|| ProviderError::MissingUrl { model: spec.to_string() })?;
                chat(url.to_string(), None)
            }
            Provider::Anthropic => {
                let root = url("ANTHROPIC_BASE_URL", "https://api.anthropic.com");
                let root = root.trim_end_matches('/').trim_end_matches("/v1");
                Client::Anthropic { http: limits.http_client(), url: format!("{root}/v1/messages"), key: key("ANTHROPIC_API_KEY")?, limits }
            }
        };
        Ok(Endpoint { provider, model: model.to_string(), client })
    }

    /// What this endpoint costs per million tokens: `overrides` first, then the built-in table;
    /// local models are free. `None` when the model is unknown (its cost cannot be counted).
    pub fn price(&self, overrides: &BTreeMap<String, Price>) -> Option<Price> {
        match self.provider {
            Provider::Local => Some(Price { input: 0.0, output: 0.0 }),
            _ => price_of(&self.model, overrides),
        }
    }

    /// The OpenAI-compatible client behind this endpoint (`None` for Anthropic's Messages API),
    /// for callers that need tool calls, such as an agent loop.
    pub fn chat(&self) -> Option<&ChatClient> {
        match &self.client {
            Client::OpenAi { chat, .. } => Some(chat),
            Client::Anthropic { .. } => None,
        }
    }

    /// Sends the conversation (`system`, then alternating user/assistant `turns`) and returns the
    /// reply's text and token usage. `schema` (a name and a JSON schema) is sent as OpenAI's
    /// `response_format` (honoured by OpenAI, vLLM and the engine; dropped once a server rejects
    /// it); the caller validates the reply either way. Retries on 429 (honouring `retry-after`),
    /// 5xx and timeouts happen inside; what comes back as an error has exhausted them.
    pub async fn call(&self, system: &str, turns: &[Message], max_tokens: u32, temperature: Option<f32>, schema: (&str, &Value)) -> Result<Reply, ChatError> {
        match &self.client {
            Client::OpenAi { chat, schema_off } => {
                use std::sync::atomic::Ordering::Relaxed;
                let mut messages = vec![Message::system(system)];
                messages.extend_from_slice(turns);
                let mut request = ChatRequest {
                    model: self.model.clone(),
                    messages,
                    temperature,
                    // OpenAI's reasoning models reject `max_tokens`; hosted judges stop on their own.
                    max_tokens: (self.provider == Provider::Local).then_some(max_tokens),
                    response_format: Some(json!({
                        "type": "json_schema",
                        "json_schema": {"name": schema.0, "strict": true, "schema": schema.1},
                    })),
                    ..Default::default()
                };
                if schema_off.load(Relaxed) {
                    request.response_format = None;
                }
                let response = match chat.complete(&request).await {
                    Err(ChatError::Status { status: 400, message, .. }) if request.response_format.is_some() && rejects_schema(&message) => {
                        tracing::warn!("the {} server rejects response_format ({message}); asking without it", self.model);
                        schema_off.store(true, Relaxed);
                        request.response_format = None;
                        chat.complete(&request).await?
                    }
                    other => other?,
                };
                let text = response.choices.into_iter().next().and_then(|c| c.message.content).unwrap_or_default();
                let usage = response.usage.map(|u| Usage { input_tokens: u.prompt_tokens, output_tokens: u.completion_tokens }).unwrap_or_default();
                Ok(Reply { text, usage })
            }
            Client::Anthropic { http, url, key, limits } => {
                let mut body = json!({
                    "model": self.model,
                    "max_tokens": max_tokens,
                    "system": system,
                    "messages": turns.iter().map(|m| json!({
                        "role": if m.role == ta_types::Role::Assistant { "assistant" } else { "user" },
                        "content": m.content.clone().unwrap_or_default(),
                    })).collect::<Vec<_>>(),
                });
                if let Some(t) = temperature {
                    body["temperature"] = json!(t);
                }
                let headers = [("x-api-key", key.clone()), ("anthropic-version", ANTHROPIC_VERSION.to_string())];
                let text = post_json(http, url, &headers, &body, limits).await?;
                parse_anthropic(&text).map_err(|message| ChatError::Decode { url: url.clone(), message })
            }
        }
    }
}

/// Whether a 400 error is about structured output rather than the request as a whole.
fn rejects_schema(message: &str) -> bool {
    let m = message.to_lowercase();
    m.contains("response_format") || m.contains("json_schema") || m.contains("structured output")
}

/// The text blocks and usage of an Anthropic Messages response.
fn parse_anthropic(body: &str) -> Result<Reply, String> {
    let v: Value = serde_json::from_str(body).map_err(|e| e.to_string())?;
    let blocks = v["content"].as_array().ok_or("no `content` array")?;
    let text: String = blocks.iter().filter(|b| b["type"] == "text").filter_map(|b| b["text"].as_str()).collect();
    let usage = Usage {
        input_tokens: v["usage"]["input_tokens"].as_u64().unwrap_or(0)
            + v["usage"]["cache_creation_input_tokens"].as_u64().unwrap_or(0)
            + v["usage"]["cache_read_input_tokens"].as_u64().unwrap_or(0),
        output_tokens: v["usage"]["output_tokens"].as_u64().unwrap_or(0),
    };
    Ok(Reply { text, usage })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_resolve_to_providers_with_actionable_errors() {
        let t = HttpLimits::DEFAULT;
        let local = Endpoint::resolve("local/base", Some("http://127.0.0.1:9/v1"), t).unwrap();
        assert_eq!((local.provider, local.model.as_str()), (Provider::Local, "base"));
        let e = Endpoint::resolve("local/base", None, t).unwrap_err().to_string();
        assert!(e.contains("--judge-base-url"), "{e}");
        let e = Endpoint::resolve("gpt-4o-mini", None, t).unwrap_err().to_string();
        assert!(e.contains("`gpt-4o-mini` names no model this tool can call") && e.contains("hint:"), "{e}");
        assert!(Endpoint::resolve("cohere/x", None, t).is_err());
        assert_eq!(Provider::of_spec("openrouter/meta/llama").unwrap(), (Provider::OpenRouter, "meta/llama"));
        for bad in ["cohere/x", "openai/", "gpt-4o-mini"] {
            assert!(matches!(Provider::of_spec(bad), Err(ProviderError::Unknown(_))), "{bad}");
        }
    }

    #[test]
    fn anthropic_responses_give_text_and_usage() {
        let body = r#"{"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-haiku-4-5",
            "content": [{"type": "text", "text": "{\"scores\": []}"}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 120, "output_tokens": 30, "cache_read_input_tokens": 5}}"#;
        let r = parse_anthropic(body).unwrap();
        assert_eq!(r.text, r#"{"scores": []}"#);
        assert_eq!(r.usage, Usage { input_tokens: 125, output_tokens: 30 });
        assert!(parse_anthropic(r#"{"type": "error"}"#).is_err());
    }
}
