//! OpenAI chat-completions message and tool types, kept to the documented wire format so that
//! trajectories can be fed back to any OpenAI-compatible server or Hugging Face chat template.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

/// One chat message in OpenAI format. `content` is `null` for an assistant message that only
/// calls tools.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    /// Text; a list of content parts (`[{"type": "text", "text": ...}]`) is read as their text.
    #[serde(default, deserialize_with = "tolerant::content")]
    pub content: Option<String>,
    /// Reasoning the model produced in a `<think>` block (vLLM's `reasoning_content`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// Absent, `null` (OpenAI's SDKs and several servers send it) and `[]` all mean none.
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "tolerant::null_as_empty")]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// OpenAI fine-tuning's per-message `weight`: `0` on an assistant turn that SFT shows as
    /// context but does not train on (a reference trace's deliberate mistake, so that the model
    /// learns the recovery that follows it and not the mistake); absent or `1` trains it. Never
    /// set on what a model played.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<u8>,
}

impl Message {
    fn text(role: Role, content: impl Into<String>) -> Self {
        Message { role, content: Some(content.into()), reasoning_content: None, tool_calls: Vec::new(), tool_call_id: None, name: None, weight: None }
    }

    pub fn system(content: impl Into<String>) -> Self {
        Self::text(Role::System, content)
    }

    pub fn user(content: impl Into<String>) -> Self {
        Self::text(Role::User, content)
    }

    pub fn assistant(content: impl Into<String>) -> Self {
        Self::text(Role::Assistant, content)
    }

    /// A tool result answering the call with id `call_id`.
    pub fn tool(call_id: impl Into<String>, name: impl Into<String>, content: impl Into<String>) -> Self {
        Message { tool_call_id: Some(call_id.into()), name: Some(name.into()), ..Self::text(Role::Tool, content) }
    }
}

/// A tool call as OpenAI returns it: `arguments` is a JSON *string*, exactly as the model wrote
/// it, so that a malformed call can be recorded and reported instead of lost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    #[serde(rename = "type", default = "function_type")]
    pub kind: String,
    pub function: FunctionCall,
}

fn function_type() -> String {
    "function".to_string()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionCall {
    pub name: String,
    /// A JSON object sent in place of the string (Ollama and some proxies do) is kept as its
    /// JSON text, so the loop sees one shape.
    #[serde(default, deserialize_with = "tolerant::arguments")]
    pub arguments: String,
}

/// Readers for the shapes OpenAI-compatible servers send beside the documented ones.
mod tolerant {
    use serde::{Deserialize, Deserializer};
    use serde_json::Value;

    pub fn null_as_empty<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
        Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
    }

    pub fn content<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        match Value::deserialize(d)? {
            Value::Null => Ok(None),
            Value::String(s) => Ok(Some(s)),
            Value::Array(parts) => {
                let mut text = String::new();
                for part in &parts {
                    match part {
                        Value::String(s) => text.push_str(s),
                        // Text parts carry `text`; other kinds (images, refusals) have none to keep.
                        Value::Object(o) => match o.get("text") {
                            Some(Value::String(s)) => text.push_str(s),
                            Some(Value::Object(t)) => text.push_str(t.get("value").and_then(Value::as_str).unwrap_or_default()),
                            _ => {}
                        },
                        _ => return Err(serde::de::Error::custom(format!("unexpected content part {part}"))),
                    }
                }
                Ok(Some(text))
            }
            other => Err(serde::de::Error::custom(format!("content must be a string, null or a list of parts, got {other}"))),
        }
    }

    pub fn arguments<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        match Value::deserialize(d)? {
            Value::Null => Ok(String::new()),
            Value::String(s) => Ok(s),
            other => Ok(other.to_string()),
        }
    }
}

impl ToolCall {
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: impl Into<String>) -> Self {
        ToolCall { id: id.into(), kind: function_type(), function: FunctionCall { name: name.into(), arguments: arguments.into() } }
    }
}

/// A tool in OpenAI `tools` format: `{"type": "function", "function": {name, description, parameters}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    #[serde(rename = "type", default = "function_type")]
    pub kind: String,
    pub function: FunctionSpec,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionSpec {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// A JSON Schema object describing the arguments.
    pub parameters: Value,
}

impl ToolSpec {
    pub fn new(name: impl Into<String>, description: Option<String>, parameters: Value) -> Self {
        ToolSpec { kind: function_type(), function: FunctionSpec { name: name.into(), description, parameters } }
    }

    pub fn name(&self) -> &str {
        &self.function.name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assistant_tool_call_round_trips_in_openai_shape() {
        let mut m = Message::assistant("");
        m.content = None;
        m.tool_calls.push(ToolCall::new("call_1", "list_tables", "{}"));
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "list_tables", "arguments": "{}"}}
            ]})
        );
        let back: Message = serde_json::from_value(v).unwrap();
        assert_eq!(back, m);
    }

    #[test]
    fn tool_message_carries_call_id() {
        let v = serde_json::to_value(Message::tool("c1", "run_query", "ok")).unwrap();
        assert_eq!(v["role"], "tool");
        assert_eq!(v["tool_call_id"], "c1");
    }

    #[test]
    fn servers_shapes_beside_the_documented_ones_are_read() {
        let m: Message = serde_json::from_str(r#"{"role": "assistant", "content": "hi", "tool_calls": null}"#).unwrap();
        assert_eq!((m.content.as_deref(), m.tool_calls.len()), (Some("hi"), 0));
        let m: Message = serde_json::from_str(r#"{"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}"#).unwrap();
        assert_eq!(m.content.as_deref(), Some("ab"));
        let m: Message = serde_json::from_str(
            r#"{"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": {"sql": "SELECT 1"}}}]}"#,
        )
        .unwrap();
        assert_eq!(m.tool_calls[0].function.arguments, r#"{"sql":"SELECT 1"}"#);
        assert!(serde_json::from_str::<Message>(r#"{"role": "assistant", "content": 3}"#).is_err());
    }
}
