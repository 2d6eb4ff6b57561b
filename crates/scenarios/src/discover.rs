//! What a server offers, gathered for the teacher's prompt: tools with their schemas, resources
//! (with a sample of their contents read through the server), resource templates, and prompts.
//!
//! Everything but the tools is optional: a server that advertises resources or prompts but fails
//! to list or read them still gets scenarios, from its tools (the failure is logged).

use serde::Serialize;
use serde_json::Value;
use ta_mcp::{Discovery, McpClient};

/// One tool as the prompt shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolInfo {
    pub name: String,
    pub description: String,
    /// The input schema, compact JSON.
    pub input_schema: String,
}

/// One resource, with the start of its contents when it was read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResourceInfo {
    pub uri: String,
    pub name: String,
    pub description: String,
    pub mime_type: Option<String>,
    /// The first characters of its contents (`None`: not in the sample, or reading failed).
    pub sample: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TemplateInfo {
    pub uri_template: String,
    pub name: String,
    pub description: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PromptInfo {
    pub name: String,
    pub description: String,
    /// Argument names, `?` after optional ones.
    pub arguments: Vec<String>,
}

/// Everything the teacher is told about the server.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Surface {
    pub server_name: Option<String>,
    pub instructions: Option<String>,
    pub tools: Vec<ToolInfo>,
    pub resources: Vec<ResourceInfo>,
    pub resource_templates: Vec<TemplateInfo>,
    pub prompts: Vec<PromptInfo>,
    /// Calls of the read tools and what they returned (from `scenarios walk`): the server's
    /// real state, so that the teacher's tasks name records that exist.
    pub observed: Vec<Observed>,
}

/// One recorded call of a read tool and the start of its result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Observed {
    pub tool: String,
    /// The arguments as JSON.
    pub arguments: String,
    pub result: String,
}

/// Calls shown to the teacher at most, and characters of each result.
pub const OBSERVED_CALLS: usize = 24;
pub const OBSERVED_CHARS: usize = 600;

impl Observed {
    /// Up to [`OBSERVED_CALLS`] successful calls of `calls.jsonl` (`scenarios walk`'s record,
    /// one `{tool, args, is_error, text}` object per line), taken from each tool in turn so
    /// that every read tool is shown, results cut to [`OBSERVED_CHARS`].
    pub fn from_walk(calls_jsonl: &str) -> Result<Vec<Observed>, String> {
        let mut by_tool: Vec<(String, Vec<Observed>)> = Vec::new();
        for (i, line) in calls_jsonl.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let v: serde_json::Value = serde_json::from_str(line).map_err(|e| format!("line {}: {e}", i + 1))?;
            if v["is_error"].as_bool().unwrap_or(true) {
                continue;
            }
            let (Some(tool), Some(text)) = (v["tool"].as_str(), v["text"].as_str()) else {
                return Err(format!("line {}: no `tool` and `text` (is this a `scenarios walk` calls.jsonl?)", i + 1));
            };
            let o = Observed { tool: tool.into(), arguments: v["args"].to_string(), result: text.chars().take(OBSERVED_CHARS).collect() };
            match by_tool.iter_mut().find(|(t, _)| t == tool) {
                Some((_, list)) => list.push(o),
                None => by_tool.push((tool.into(), vec![o])),
            }
        }
        let mut out = Vec::new();
        for round in 0.. {
            let before = out.len();
            out.extend(by_tool.iter().filter_map(|(_, list)| list.get(round).cloned()).take(OBSERVED_CALLS - out.len()));
            if out.len() == before || out.len() >= OBSERVED_CALLS {
                break;
            }
        }
        Ok(out)
    }
}

/// How much of the server to show.
#[derive(Debug, Clone, Copy)]
pub struct DiscoverOptions {
    /// Resources whose contents are read (the first ones listed).
    pub sample_resources: usize,
    /// Characters kept of each resource read.
    pub sample_chars: usize,
    /// Resources listed at most (large servers list thousands).
    pub max_resources: usize,
}

impl Default for DiscoverOptions {
    fn default() -> Self {
        DiscoverOptions { sample_resources: 5, sample_chars: 600, max_resources: 50 }
    }
}

impl Surface {
    /// The tools and resources of `discovery` (already listed by the client), plus resource
    /// templates and prompts, and samples of the first resources read through `client`.
    pub async fn gather(client: &McpClient, discovery: &Discovery, opts: &DiscoverOptions) -> Surface {
        let tools = discovery
            .tools
            .iter()
            .map(|t| ToolInfo {
                name: t.name.to_string(),
                description: t.description.as_deref().unwrap_or("").trim().to_string(),
                input_schema: Value::Object((*t.input_schema).clone()).to_string(),
            })
            .collect();
        let mut resources = Vec::new();
        for (i, r) in discovery.resources.iter().take(opts.max_resources).enumerate() {
            let sample = if i < opts.sample_resources {
                match client.read_resource(&r.uri).await {
                    Ok(text) => Some(cut(&text, opts.sample_chars)),
                    Err(e) => {
                        tracing::warn!(uri = %r.uri, error = %e, "reading a resource sample failed; listing it without contents");
                        None
                    }
                }
            } else {
                None
            };
            resources.push(ResourceInfo {
                uri: r.uri.clone(),
                name: r.name.clone(),
                description: r.description.clone().unwrap_or_default(),
                mime_type: r.mime_type.clone(),
                sample,
            });
        }
        let capabilities = client.server_info().await.ok().flatten().map(|i| i.capabilities);
        let has_resources = capabilities.as_ref().is_some_and(|c| c.resources.is_some());
        let has_prompts = capabilities.as_ref().is_some_and(|c| c.prompts.is_some());
        let resource_templates = if has_resources {
            match client.list_resource_templates().await {
                Ok(ts) => ts.into_iter().map(|t| TemplateInfo { uri_template: t.uri_template, name: t.name, description: t.description.unwrap_or_default() }).collect(),
                Err(e) => {
                    tracing::warn!(error = %e, "listing resource templates failed; continuing without");
                    Vec::new()
                }
            }
        } else {
            Vec::new()
        };
        let prompts = if has_prompts {
            match client.list_prompts().await {
                Ok(ps) => ps
                    .into_iter()
                    .map(|p| PromptInfo {
                        name: p.name,
                        description: p.description.unwrap_or_default(),
                        arguments: p.arguments.unwrap_or_default().into_iter().map(|a| if a.required == Some(true) { a.name } else { format!("{}?", a.name) }).collect(),
                    })
                    .collect(),
                Err(e) => {
                    tracing::warn!(error = %e, "listing prompts failed; continuing without");
                    Vec::new()
                }
            }
        } else {
            Vec::new()
        };
        Surface {
            observed: Vec::new(),
            server_name: discovery.server_name.clone(),
            instructions: discovery.instructions.clone(),
            tools,
            resources,
            resource_templates,
            prompts,
        }
    }

    pub fn tool_names(&self) -> Vec<String> {
        self.tools.iter().map(|t| t.name.clone()).collect()
    }
}

/// The first `max` characters, with a note when cut.
fn cut(text: &str, max: usize) -> String {
    let total = text.chars().count();
    if total <= max {
        return text.to_string();
    }
    format!("{}\n[... {} more characters]", text.chars().take(max).collect::<String>(), total - max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observed_calls_come_from_every_tool_in_turn_and_skip_errors() {
        let line = |tool: &str, err: bool, text: &str| serde_json::json!({"id": 0, "tool": tool, "args": {"path": "/r"}, "is_error": err, "text": text}).to_string();
        let mut lines: Vec<String> = (0..30).map(|i| line("read_file", false, &format!("file {i}"))).collect();
        lines.insert(3, line("git_log", false, &"x".repeat(2000)));
        lines.insert(4, line("list_directory", true, "ENOTDIR"));
        let got = Observed::from_walk(&lines.join("\n")).unwrap();
        assert_eq!(got.len(), OBSERVED_CALLS);
        assert_eq!((got[0].tool.as_str(), got[1].tool.as_str(), got[2].tool.as_str()), ("read_file", "git_log", "read_file"));
        assert_eq!(got[1].result.chars().count(), OBSERVED_CHARS);
        assert!(got.iter().all(|o| o.tool != "list_directory"));
        assert!(Observed::from_walk("{\"x\": 1, \"is_error\": false}").unwrap_err().contains("scenarios walk"));
    }
}
