//! What the teacher is asked and what it must answer: the prompt, rendered from a minijinja
//! template (blocks `system` and `user`; `--prompt-template` replaces the default), and the
//! reply's JSON schema, sent as `response_format` and checked on every reply.

use minijinja::context;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::discover::Surface;

/// The default prompt: answerable tasks with one checkable answer, tool coverage, difficulty
/// 1 to 5, and a flag for tasks that change state.
pub const DEFAULT_TEMPLATE: &str = include_str!("generate_prompt.j2");

/// The name the reply schema is sent under in `response_format`.
pub const SCHEMA_NAME: &str = "scenario_tasks";

#[derive(Debug, thiserror::Error)]
#[error(
    "scenario prompt template {origin}: {source}\nhint: the template is minijinja with blocks `system` and `user`; variables: n, batch, server_name, instructions, tools, resources, resource_templates, prompts, observed, avoid"
)]
pub struct TemplateError {
    origin: String,
    source: minijinja::Error,
}

pub use ta_reward::judge::Prompt;

/// Renders the prompt asking for `n` tasks; `avoid` lists tasks already written.
pub fn render(template: &str, origin: &str, surface: &Surface, n: usize, batch: usize, avoid: &[String]) -> Result<Prompt, TemplateError> {
    let err = |source| TemplateError { origin: origin.to_string(), source };
    let ctx = context! {
        n => n,
        batch => batch,
        server_name => surface.server_name.clone(),
        instructions => surface.instructions.clone(),
        tools => minijinja::value::Serde(&surface.tools),
        resources => minijinja::value::Serde(&surface.resources),
        resource_templates => minijinja::value::Serde(&surface.resource_templates),
        prompts => minijinja::value::Serde(&surface.prompts),
        observed => minijinja::value::Serde(&surface.observed),
        avoid => avoid.to_vec(),
    };
    ta_reward::judge::prompt::render_blocks(template, ctx).map_err(err)
}

/// One task as the teacher writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Draft {
    pub task: String,
    pub tools: Vec<String>,
    pub difficulty: u8,
    pub changes_state: bool,
}

/// The reply's schema. `tools` items are limited to the server's tool names (guided decoding
/// then cannot invent one); strict mode's rules hold (every property required, no others).
pub fn reply_schema(tool_names: &[String]) -> Value {
    json!({
        "type": "object",
        "properties": {
            "tasks": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "properties": {
                        "task": {"type": "string", "minLength": 10},
                        "tools": {"type": "array", "items": {"type": "string", "enum": tool_names}},
                        "difficulty": {"type": "integer", "minimum": 1, "maximum": 5},
                        "changes_state": {"type": "boolean"},
                    },
                    "required": ["task", "tools", "difficulty", "changes_state"],
                    "additionalProperties": false,
                },
            },
        },
        "required": ["tasks"],
        "additionalProperties": false,
    })
}

/// The tasks of a reply, or what is wrong with it (said so that the teacher can fix it). A JSON
/// object inside a ```json fence or surrounded by prose is accepted.
pub fn parse_reply(text: &str, validator: &jsonschema::Validator) -> Result<Vec<Draft>, String> {
    let body = json_body(text).ok_or_else(|| "the reply contains no JSON object".to_string())?;
    let value: Value = serde_json::from_str(body).map_err(|e| format!("the reply is not valid JSON ({e})"))?;
    let errors: Vec<String> = validator.iter_errors(&value).take(3).map(|e| format!("at `{}`: {e}", e.instance_path())).collect();
    if !errors.is_empty() {
        return Err(format!("the reply does not match the schema: {}", errors.join("; ")));
    }
    #[derive(Deserialize)]
    struct Reply {
        tasks: Vec<Draft>,
    }
    let reply: Reply = serde_json::from_value(value).map_err(|e| format!("the reply does not match the schema: {e}"))?;
    Ok(reply.tasks)
}

/// From the first `{` to the last `}`.
pub(crate) fn json_body(text: &str) -> Option<&str> {
    let start = text.find('{')?;
    let end = text.rfind('}')?;
    (end > start).then(|| &text[start..=end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discover::{Observed, PromptInfo, ResourceInfo, TemplateInfo, ToolInfo};

    fn surface() -> Surface {
        Surface {
            server_name: Some("company-db".into()),
            instructions: Some("A read-only company database.".into()),
            tools: vec![
                ToolInfo { name: "list_tables".into(), description: "List the tables.".into(), input_schema: r#"{"type":"object"}"#.into() },
                ToolInfo {
                    name: "run_query".into(),
                    description: "Run one SELECT.".into(),
                    input_schema: r#"{"type":"object","properties":{"sql":{"type":"string"}},"required":["sql"]}"#.into(),
                },
            ],
            resources: vec![ResourceInfo {
                uri: "schema://employees".into(),
                name: "employees".into(),
                description: "The employees table.".into(),
                mime_type: Some("text/plain".into()),
                sample: Some("id INTEGER, name TEXT,\nsalary REAL".into()),
            }],
            resource_templates: vec![TemplateInfo { uri_template: "schema://{table}".into(), name: "table".into(), description: "One table's columns.".into() }],
            prompts: vec![PromptInfo { name: "monthly_report".into(), description: "Summarize a month.".into(), arguments: vec!["month".into(), "team?".into()] }],
            observed: vec![Observed { tool: "list_tables".into(), arguments: "{}".into(), result: "departments\nemployees".into() }],
        }
    }

    #[test]
    fn default_prompt() {
        let p = render(DEFAULT_TEMPLATE, "default", &surface(), 5, 1, &["How many employees are there?".into()]).unwrap();
        insta::assert_snapshot!(format!("--- system ---\n{}\n--- user ---\n{}", p.system, p.user));
    }

    #[test]
    fn reply_schema_snapshot() {
        insta::assert_json_snapshot!(reply_schema(&["list_tables".into(), "run_query".into()]));
    }

    #[test]
    fn replies_are_validated_with_reasons_the_teacher_can_act_on() {
        let v = jsonschema::validator_for(&reply_schema(&["run_query".into()])).unwrap();
        let ok = "Here you go:\n```json\n{\"tasks\": [{\"task\": \"How many employees are there?\", \"tools\": [\"run_query\"], \"difficulty\": 1, \"changes_state\": false}]}\n```";
        assert_eq!(parse_reply(ok, &v).unwrap()[0].difficulty, 1);
        assert!(parse_reply("I cannot do that.", &v).unwrap_err().contains("no JSON object"));
        assert!(parse_reply("{\"tasks\": [}", &v).unwrap_err().contains("not valid JSON"));
        let bad = r#"{"tasks": [{"task": "How many employees are there?", "tools": ["drop_db"], "difficulty": 7, "changes_state": false}]}"#;
        let e = parse_reply(bad, &v).unwrap_err();
        assert!(e.contains("/tasks/0/tools/0") && e.contains("/tasks/0/difficulty"), "{e}");
    }

    #[test]
    fn broken_template_names_its_origin() {
        let e = render("{% block system %}{% if %}{% endblock %}", "mine.j2", &surface(), 1, 0, &[]).unwrap_err().to_string();
        assert!(e.starts_with("scenario prompt template mine.j2:") && e.contains("hint:"), "{e}");
    }
}
