//! MCP tool schemas to OpenAI `tools`, plus the synthetic `complete_task` tool and the prompt
//! text describing the server.
//!
//! MCP input schemas are full JSON Schema; what chat templates and vLLM's tool parsers expect is
//! a self-contained `{"type": "object", "properties": ...}`. So local `$ref`s are inlined (a
//! model cannot follow a pointer), a recursive ref becomes a permissive object that says what it
//! stands for, and `$schema`/`$defs` go. Everything a model uses to fill arguments in is kept:
//! types, enums, nesting, `required`, descriptions, defaults.

use serde_json::{Map, Value, json};
use ta_types::ToolSpec;

use crate::discovery::Discovery;
use rmcp::model::Tool;

/// The name of the synthetic tool a model calls to end an episode.
pub const COMPLETE_TASK: &str = "complete_task";

/// How many resources [`enrichment_text`] lists before summarizing the rest.
const MAX_LISTED_RESOURCES: usize = 50;

/// The synthetic tool the agent calls to finish: one required string, `summary`.
pub fn complete_task_tool() -> ToolSpec {
    ToolSpec::new(
        COMPLETE_TASK,
        Some("Call when the task is done, with the final answer.".to_string()),
        json!({
            "type": "object",
            "properties": {
                "summary": {"type": "string", "description": "The final answer to the task, with a short account of how it was found."}
            },
            "required": ["summary"]
        }),
    )
}

/// Converts MCP tools to OpenAI tools and appends [`complete_task_tool`]. A server tool that is
/// itself named `complete_task` is dropped (with a warning): the name is reserved for ending
/// the episode.
pub fn tools_to_openai(tools: &[Tool]) -> Vec<ToolSpec> {
    let mut out: Vec<ToolSpec> = Vec::with_capacity(tools.len() + 1);
    for tool in tools {
        if tool.name == COMPLETE_TASK {
            tracing::warn!("the MCP server has its own `{COMPLETE_TASK}` tool; it is hidden behind the synthetic one");
            continue;
        }
        let description = tool.description.as_ref().map(|d| d.to_string()).or_else(|| tool.title.clone()).filter(|d| !d.trim().is_empty());
        out.push(ToolSpec::new(tool.name.to_string(), description, convert_schema(&tool.input_schema)));
    }
    out.push(complete_task_tool());
    out
}

/// Converts one MCP input schema to OpenAI function `parameters` (see the module docs).
pub fn convert_schema(input: &Map<String, Value>) -> Value {
    let root = Value::Object(input.clone());
    let mut out = inline_refs(&root, &root, &mut Vec::new());
    let obj = match out.as_object_mut() {
        Some(obj) => obj,
        None => return json!({"type": "object", "properties": {}}),
    };
    obj.remove("$schema");
    obj.remove("$defs");
    obj.remove("definitions");
    if obj.get("type").and_then(Value::as_str) != Some("object") {
        obj.insert("type".into(), json!("object"));
    }
    if !obj.get("properties").is_some_and(Value::is_object) {
        obj.insert("properties".into(), json!({}));
    }
    // Keep `type` first: small models read the schema as text.
    let mut ordered = Map::new();
    for key in ["type", "properties"] {
        if let Some(v) = obj.remove(key) {
            ordered.insert(key.into(), v);
        }
    }
    ordered.append(obj);
    Value::Object(ordered)
}

/// Keywords whose values are data, not schemas: never rewrite a `$ref` found inside them.
const DATA_KEYWORDS: &[&str] = &["enum", "const", "default", "examples", "example"];

fn inline_refs(value: &Value, root: &Value, stack: &mut Vec<String>) -> Value {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(reference)) = map.get("$ref") {
                return inline_one(reference, map, root, stack);
            }
            let mut out = Map::with_capacity(map.len());
            for (k, v) in map {
                let v = if DATA_KEYWORDS.contains(&k.as_str()) { v.clone() } else { inline_refs(v, root, stack) };
                out.insert(k.clone(), v);
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| inline_refs(v, root, stack)).collect()),
        other => other.clone(),
    }
}

/// Replaces `{"$ref": ..., siblings}` by the referenced schema with the siblings on top (a
/// description next to a `$ref` is the more specific one).
fn inline_one(reference: &str, map: &Map<String, Value>, root: &Value, stack: &mut Vec<String>) -> Value {
    let siblings: Map<String, Value> = map.iter().filter(|(k, _)| k.as_str() != "$ref").map(|(k, v)| (k.clone(), inline_refs(v, root, stack))).collect();
    let target = reference.strip_prefix('#').map(|pointer| {
        let decoded = percent_decode(pointer);
        if decoded.is_empty() { Some(root) } else { root.pointer(&decoded) }
    });
    let mut resolved = match target {
        Some(Some(target)) if !stack.iter().any(|r| r == reference) && reference != "#" => {
            stack.push(reference.to_string());
            let inlined = inline_refs(target, root, stack);
            stack.pop();
            inlined
        }
        Some(Some(target)) => {
            // Recursive: a model cannot expand an infinite type, so say what belongs here.
            let name = reference.rsplit('/').next().unwrap_or(reference);
            let what = target.get("description").and_then(Value::as_str).map(|d| format!(": {d}")).unwrap_or_default();
            json!({"type": "object", "description": format!("A nested `{name}` object (recursive){what}")})
        }
        Some(None) => {
            tracing::warn!(%reference, "dangling $ref in MCP tool schema; leaving it open");
            json!({})
        }
        None => {
            // Remote refs are not fetched: a training run must not depend on other hosts.
            json!({"description": format!("Value described by the external schema {reference}")})
        }
    };
    if let Value::Object(obj) = &mut resolved {
        for (k, v) in siblings {
            obj.insert(k, v);
        }
    }
    resolved
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(b) = u8::from_str_radix(std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("zz"), 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Text about the server for the system prompt: its instructions and its resources.
/// Empty when the server offers neither.
pub fn enrichment_text(discovery: &Discovery) -> String {
    let mut out = String::new();
    if let Some(instructions) = discovery.instructions.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        let name = discovery.server_name.as_deref().unwrap_or("the MCP server");
        out.push_str(&format!("Instructions from {name}:\n{instructions}\n"));
    }
    if !discovery.resources.is_empty() {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str("Resources on this server:\n");
        for r in discovery.resources.iter().take(MAX_LISTED_RESOURCES) {
            out.push_str(&format!("- {} <{}>", r.title.as_deref().unwrap_or(&r.name), r.uri));
            if let Some(mime) = &r.mime_type {
                out.push_str(&format!(" ({mime})"));
            }
            if let Some(desc) = r.description.as_deref().map(str::trim).filter(|d| !d.is_empty()) {
                out.push_str(&format!(": {desc}"));
            }
            out.push('\n');
        }
        if discovery.resources.len() > MAX_LISTED_RESOURCES {
            out.push_str(&format!("- ... and {} more\n", discovery.resources.len() - MAX_LISTED_RESOURCES));
        }
    }
    out
}
