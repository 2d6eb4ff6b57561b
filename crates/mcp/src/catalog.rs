//! Checking a model's tool call before it reaches the server.
//!
//! Models make small mistakes: a misspelled tool, a missing argument, a string for a number.
//! Catching them here gives the model a short, precise message to recover from (and the
//! reward code a clean "invalid call" signal) without a round trip or a server stack trace.

use std::collections::BTreeMap;

use jsonschema::error::ValidationErrorKind;
use serde_json::Value;
use ta_types::ToolSpec;

use crate::discovery::Discovery;
use crate::schema::tools_to_openai;

/// Most schema problems reported for one call; the first few are what a model can act on.
const MAX_PROBLEMS: usize = 3;

/// Why a tool call was rejected before it was sent. Messages are written for the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    #[error("unknown tool `{name}`; available tools: {}", known.join(", "))]
    UnknownTool { name: String, known: Vec<String> },
    #[error("the arguments of `{tool}` are not valid JSON ({reason}); send a JSON object")]
    MalformedJson { tool: String, reason: String },
    #[error("the arguments of `{tool}` must be a JSON object, got {got}")]
    NotAnObject { tool: String, got: String },
    #[error("invalid arguments for `{tool}`: {}", problems.join("; "))]
    InvalidArguments { tool: String, problems: Vec<String> },
}

struct Entry {
    spec: ToolSpec,
    /// `None` when the server's schema could not be compiled: then only objecthood is checked.
    validator: Option<jsonschema::Validator>,
}

/// The tools offered to the model (server tools + `complete_task`), in OpenAI format, with a
/// compiled validator per tool.
pub struct ToolCatalog {
    specs: Vec<ToolSpec>,
    entries: BTreeMap<String, Entry>,
}

impl std::fmt::Debug for ToolCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolCatalog").field("tools", &self.names().collect::<Vec<_>>()).finish()
    }
}

impl ToolCatalog {
    pub fn from_discovery(discovery: &Discovery) -> Self {
        Self::from_specs(tools_to_openai(&discovery.tools))
    }

    /// From OpenAI tool specs (already converted). Validates against the converted schemas,
    /// which are exactly what the model was shown.
    pub fn from_specs(specs: Vec<ToolSpec>) -> Self {
        let mut entries = BTreeMap::new();
        for spec in &specs {
            let validator = match jsonschema::validator_for(&spec.function.parameters) {
                Ok(v) => Some(v),
                Err(e) => {
                    tracing::warn!(tool = spec.name(), error = %e, "tool schema does not compile; only checking that arguments are an object");
                    None
                }
            };
            entries.insert(spec.name().to_string(), Entry { spec: spec.clone(), validator });
        }
        ToolCatalog { specs, entries }
    }

    /// The tools in OpenAI `tools` format, `complete_task` last.
    pub fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.specs.iter().map(|s| s.name())
    }

    pub fn get(&self, name: &str) -> Option<&ToolSpec> {
        self.entries.get(name).map(|e| &e.spec)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.entries.contains_key(name)
    }

    /// Parses the raw `arguments` string of an OpenAI tool call. An empty string means `{}`.
    pub fn parse_arguments(&self, tool: &str, raw: &str) -> Result<Value, CallError> {
        if raw.trim().is_empty() {
            return Ok(Value::Object(Default::default()));
        }
        serde_json::from_str(raw).map_err(|e| CallError::MalformedJson { tool: tool.to_string(), reason: e.to_string() })
    }

    /// Checks that `name` is a known tool and `args` satisfy its schema.
    pub fn validate(&self, name: &str, args: &Value) -> Result<(), CallError> {
        let Some(entry) = self.entries.get(name) else {
            return Err(CallError::UnknownTool { name: name.to_string(), known: self.names().map(String::from).collect() });
        };
        if !args.is_object() {
            return Err(CallError::NotAnObject { tool: name.to_string(), got: json_type_name(args).to_string() });
        }
        let Some(validator) = &entry.validator else { return Ok(()) };
        let mut problems: Vec<String> = Vec::new();
        for error in validator.iter_errors(args) {
            let message = describe(&error, &entry.spec.function.parameters);
            if !problems.contains(&message) {
                problems.push(message);
            }
            if problems.len() == MAX_PROBLEMS {
                break;
            }
        }
        if problems.is_empty() { Ok(()) } else { Err(CallError::InvalidArguments { tool: name.to_string(), problems }) }
    }
}

/// One validation error as a short sentence naming the argument.
fn describe(error: &jsonschema::ValidationError<'_>, schema: &Value) -> String {
    let path = error.instance_path().as_str().trim_start_matches('/').replace('/', ".");
    match error.kind() {
        ValidationErrorKind::Required { property } => {
            let property = property.as_str().map(str::to_string).unwrap_or_else(|| property.to_string());
            if path.is_empty() { format!("missing required argument `{property}`") } else { format!("missing required field `{property}` in `{path}`") }
        }
        ValidationErrorKind::AdditionalProperties { unexpected } => {
            let names: Vec<String> = unexpected.iter().map(|u| format!("`{u}`")).collect();
            let mut msg = if path.is_empty() { format!("unknown argument {}", names.join(", ")) } else { format!("unknown field {} in `{path}`", names.join(", ")) };
            if path.is_empty()
                && let Some(props) = schema.get("properties").and_then(Value::as_object)
            {
                let allowed: Vec<&str> = props.keys().map(String::as_str).collect();
                msg.push_str(&format!(" (expected: {})", allowed.join(", ")));
            }
            msg
        }
        _ => {
            // `masked` leaves the offending value out: it can be huge, and the model wrote it.
            let detail = error.masked().to_string();
            if path.is_empty() { format!("arguments: {detail}") } else { format!("argument `{path}`: {detail}") }
        }
    }
}

/// The tools that may change the server's state: those that do not declare MCP's
/// `readOnlyHint: true`. The annotation is a hint from the server, but it is the only signal the
/// protocol gives, and a tool that does not claim to be read-only must be assumed to write.
pub fn writing_tools(tools: &[rmcp::model::Tool]) -> Vec<String> {
    tools.iter().filter(|t| !t.annotations.as_ref().and_then(|a| a.read_only_hint).unwrap_or(false)).map(|t| t.name.to_string()).collect()
}

pub(crate) fn json_type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
