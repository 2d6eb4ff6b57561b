//! Request and response bodies of `/v1/chat/completions`, as documented by OpenAI, plus vLLM's
//! `return_token_ids` extension.

use serde::{Deserialize, Serialize};
use ta_types::{Message, ToolSpec};

#[derive(Debug, Clone, Serialize, Default)]
pub struct ChatRequest {
    pub model: String,
    pub messages: Vec<Message>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub n: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub logprobs: bool,
    /// vLLM extension: return `prompt_token_ids` and each choice's `token_ids`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub return_token_ids: bool,
    /// Structured output, e.g. `{"type": "json_schema", "json_schema": {...}}` (OpenAI, vLLM).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_format: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ChatResponse {
    #[serde(default)]
    pub id: String,
    pub choices: Vec<Choice>,
    #[serde(default)]
    pub usage: Option<Usage>,
    #[serde(default)]
    pub prompt_token_ids: Option<Vec<u32>>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Choice {
    #[serde(default)]
    pub index: u32,
    pub message: Message,
    #[serde(default)]
    pub finish_reason: Option<String>,
    #[serde(default)]
    pub logprobs: Option<ChoiceLogprobs>,
    #[serde(default)]
    pub token_ids: Option<Vec<u32>>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ChoiceLogprobs {
    #[serde(default)]
    pub content: Option<Vec<TokenLogprob>>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct TokenLogprob {
    pub token: String,
    pub logprob: f32,
}

#[derive(Debug, Clone, Copy, Deserialize, Default)]
pub struct Usage {
    #[serde(default)]
    pub prompt_tokens: u64,
    #[serde(default)]
    pub completion_tokens: u64,
}

impl Choice {
    /// Per-token sampling logprobs, when the server returned them.
    pub fn token_logprobs(&self) -> Vec<f32> {
        self.logprobs.as_ref().and_then(|l| l.content.as_ref()).map(|c| c.iter().map(|t| t.logprob).collect()).unwrap_or_default()
    }
}
