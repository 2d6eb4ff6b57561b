//! Which tools the walk may call: only those that read. A tool's own `readOnlyHint` decides
//! when the server declares one; otherwise its name and description must say it reads and
//! nothing in them may say it writes, deletes, sends or runs. The user's `--allow-tool` and
//! `--deny-tool` come first. Every verdict carries its reason, logged by the command.

use serde::Serialize;
use ta_mcp::Tool;
use ta_synth::names::words;

/// Words in a tool's name that say it reads.
const READ_WORDS: &[&str] = &[
    "list", "get", "read", "search", "show", "describe", "status", "log", "diff", "find", "view", "info", "tree", "lookup", "query", "fetch", "count", "open", "inspect",
    "browse", "stat", "stats", "history", "summary", "echo",
];

/// Words in a tool's name or description that say it changes something or acts on the world.
const WRITE_WORDS: &[&str] = &[
    "write",
    "writes",
    "edit",
    "edits",
    "create",
    "creates",
    "delete",
    "deletes",
    "remove",
    "removes",
    "move",
    "moves",
    "rename",
    "update",
    "updates",
    "insert",
    "set",
    "add",
    "adds",
    "send",
    "sends",
    "post",
    "run",
    "runs",
    "exec",
    "execute",
    "executes",
    "commit",
    "push",
    "checkout",
    "reset",
    "merge",
    "drop",
    "alter",
    "append",
    "modify",
    "modifies",
    "upload",
    "publish",
    "kill",
    "start",
    "stop",
    "restart",
    "install",
    "overwrite",
    "overwrites",
    "switch",
    "switches",
    "clear",
    "destroy",
    "apply",
    "save",
    "saves",
    "trigger",
];

/// Words in a tool's name that say its results may hold secrets (environment variables, keys):
/// nothing it returns should reach a task, a trajectory or a log.
const SECRET_WORDS: &[&str] = &["env", "environment", "secret", "secrets", "credential", "credentials", "token", "tokens", "password", "passwords", "key", "keys"];

/// Why a tool may or may not be called.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    pub tool: String,
    pub read: bool,
    pub reason: String,
}

/// The user's overrides: tool names always allowed, and always refused (refusal wins).
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub allow: Vec<String>,
    pub deny: Vec<String>,
}

/// Whether the walk may call `tool`, and why. A tool the server declares as writing
/// (`readOnlyHint: false`, `destructiveHint`) is never called, whatever the overrides say.
pub fn classify(tool: &Tool, overrides: &Overrides) -> Verdict {
    let name = tool.name.to_string();
    let verdict = |read: bool, reason: String| Verdict { tool: name.clone(), read, reason };
    if overrides.deny.contains(&name) {
        return verdict(false, "--deny-tool".into());
    }
    if let Some(why) = declared_writer(tool) {
        return verdict(false, why.into());
    }
    if overrides.allow.contains(&name) {
        return verdict(true, "--allow-tool".into());
    }
    let name_words = words(&name);
    if let Some(w) = name_words.iter().find(|w| SECRET_WORDS.contains(&w.as_str())) {
        return verdict(false, format!("it may return secrets (\"{w}\"); --allow-tool to call it anyway"));
    }
    if tool.annotations.as_ref().and_then(|a| a.read_only_hint) == Some(true) {
        return verdict(true, "declares readOnlyHint".into());
    }
    if let Some(w) = name_words.iter().find(|w| WRITE_WORDS.contains(&w.as_str())) {
        return verdict(false, format!("its name says it changes something (\"{w}\")"));
    }
    let description = tool.description.as_deref().unwrap_or("");
    if let Some(w) = words(description).iter().find(|w| WRITE_WORDS.contains(&w.as_str())) {
        return verdict(false, format!("its description says it changes something (\"{w}\")"));
    }
    match name_words.iter().find(|w| READ_WORDS.contains(&w.as_str())) {
        Some(w) => verdict(true, format!("its name says it reads (\"{w}\") and nothing says it writes")),
        None => verdict(false, "nothing says it only reads".into()),
    }
}

/// Why the server's own annotations say `tool` writes, if they do.
fn declared_writer(tool: &Tool) -> Option<&'static str> {
    let hints = tool.annotations.as_ref()?;
    if hints.read_only_hint == Some(false) {
        Some("declares readOnlyHint: false")
    } else if hints.destructive_hint == Some(true) && hints.read_only_hint != Some(true) {
        Some("declares destructiveHint")
    } else {
        None
    }
}

/// Overrides that name no tool of the server, or ask to call a tool the server says writes.
pub fn check_overrides(tools: &[Tool], overrides: &Overrides) -> Result<(), String> {
    for name in overrides.allow.iter().chain(&overrides.deny) {
        if !tools.iter().any(|t| t.name == name.as_str()) {
            let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
            return Err(format!("the server has no tool `{name}` (it offers: {})", names.join(", ")));
        }
    }
    for name in &overrides.allow {
        if let Some(why) = tools.iter().find(|t| t.name == name.as_str()).and_then(declared_writer) {
            return Err(format!("--allow-tool {name}: the server {why} for it, and the walk never calls a tool that writes"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use ta_mcp::ToolAnnotations;

    fn tool(name: &str, description: &str, read_only: Option<bool>) -> Tool {
        let schema = json!({"type": "object"}).as_object().cloned().unwrap();
        let mut t = Tool::new(name.to_string(), description.to_string(), std::sync::Arc::new(schema));
        t.annotations = read_only.map(|r| ToolAnnotations::new().read_only(r));
        t
    }

    #[test]
    fn declared_hints_decide_and_the_names_decide_otherwise() {
        let none = Overrides::default();
        // a write tool dressed as a read: its declaration wins
        assert!(!classify(&tool("get_and_reset", "Gets a value", Some(false)), &none).read);
        assert!(classify(&tool("git_log", "Shows the commit logs", Some(true)), &none).read);
        // no declaration: the name must read, and nothing may write
        assert!(classify(&tool("list_directory", "Get a detailed listing of all files", None), &none).read);
        assert!(!classify(&tool("write_file", "Create a new file", None), &none).read);
        assert!(!classify(&tool("deleteRecords", "Delete records", None), &none).read);
        assert!(!classify(&tool("get_report", "Builds the report and sends it by e-mail", None), &none).read);
        assert!(!classify(&tool("git_checkout", "Switches branches", None), &none).read);
        assert!(!classify(&tool("frobnicate", "Does a thing", None), &none).read);
        assert!(!classify(&tool("get-env", "Returns the environment variables", Some(true)), &none).read);
        let v = classify(&tool("search_nodes", "Search for nodes in the knowledge graph", None), &none);
        assert!(v.read && v.reason.contains("search"), "{v:?}");
    }

    #[test]
    fn the_users_overrides_come_first_and_deny_wins() {
        let t = tool("frobnicate", "Does a thing", None);
        let allow = Overrides { allow: vec!["frobnicate".into()], deny: vec![] };
        assert_eq!(classify(&t, &allow).reason, "--allow-tool");
        // a declared writer stays refused even when asked for
        let writer = tool("create_entities", "Create entities", Some(false));
        let asked = Overrides { allow: vec!["create_entities".into()], deny: vec![] };
        assert!(!classify(&writer, &asked).read);
        let err = check_overrides(&[writer, t.clone()], &asked).unwrap_err();
        assert!(err.contains("--allow-tool create_entities") && err.contains("readOnlyHint: false"), "{err}");
        let typo = Overrides { allow: vec![], deny: vec!["frobnicat".into()] };
        assert!(check_overrides(&[t], &typo).unwrap_err().contains("no tool `frobnicat`"));
        let both = Overrides { allow: vec!["git_log".into()], deny: vec!["git_log".into()] };
        assert!(!classify(&tool("git_log", "Shows the commit logs", Some(true)), &both).read);
    }
}
