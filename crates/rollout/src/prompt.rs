//! The system prompt, rendered from a minijinja template so users can replace it
//! (`--system-prompt FILE`) without touching code.

use minijinja::{Environment, context};

/// The default template: task success first, honest tool use, and a clear way to finish.
pub const DEFAULT_TEMPLATE: &str = include_str!("system_prompt.j2");

#[derive(Debug, thiserror::Error)]
#[error("system prompt template {origin}: {source}\nhint: templates use minijinja syntax; available variables: complete_task, instructions")]
pub struct TemplateError {
    origin: String,
    source: minijinja::Error,
}

/// Renders the system prompt. `instructions` is the server's own guidance plus any schema
/// enrichment (resources), empty when there is none.
pub fn render_system_prompt(template: &str, origin: &str, instructions: &str) -> Result<String, TemplateError> {
    let env = Environment::new();
    let err = |source| TemplateError { origin: origin.to_string(), source };
    let tmpl = env.template_from_str(template).map_err(err)?;
    let out = tmpl.render(context! { complete_task => ta_mcp::COMPLETE_TASK, instructions => instructions.trim() }).map_err(err)?;
    Ok(out.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_prompt_without_instructions() {
        insta::assert_snapshot!(render_system_prompt(DEFAULT_TEMPLATE, "default", "").unwrap());
    }

    #[test]
    fn default_prompt_with_instructions() {
        insta::assert_snapshot!(render_system_prompt(DEFAULT_TEMPLATE, "default", "Tables: employees, departments.\n").unwrap());
    }

    #[test]
    fn broken_template_names_its_origin() {
        let e = render_system_prompt("{% if %}", "my.j2", "").unwrap_err().to_string();
        assert!(e.starts_with("system prompt template my.j2:"), "{e}");
        assert!(e.contains("hint:"));
    }
}
