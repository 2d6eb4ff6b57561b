//! A client for OpenAI-compatible `/v1/chat/completions` servers (the embedded engine, vLLM,
//! OpenAI, OpenRouter), with vLLM's token-level extensions (`return_token_ids`, logprobs), and a
//! parser for tool calls that models write as text instead of in `tool_calls`.
//!
//! Training needs the exact tokens the engine sampled, so responses keep `prompt_token_ids`,
//! each choice's `token_ids` and per-token logprobs when the server returns them.

mod client;
pub mod textcalls;
mod wire;

pub use client::{ChatClient, ChatError, HttpLimits, MAX_BODY_BYTES, http_builder, install_tls_provider, post_json};
pub use wire::{ChatRequest, ChatResponse, Choice, ChoiceLogprobs, TokenLogprob, Usage};
