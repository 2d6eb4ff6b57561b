//! Argument validation: the messages a model sees when its call is wrong.

use serde_json::{Value, json};
use ta_mcp::{CallError, Tool, ToolCatalog, tools_to_openai};

fn catalog() -> ToolCatalog {
    let tools: Vec<Tool> = serde_json::from_value(json!([
        {"name": "run_sql", "inputSchema": {"type": "object",
            "properties": {"sql": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}},
            "required": ["sql"], "additionalProperties": false}},
        {"name": "search", "inputSchema": {"type": "object",
            "properties": {"filter": {"$ref": "#/$defs/Filter"}, "order": {"enum": ["asc", "desc"]}},
            "$defs": {"Filter": {"type": "object", "properties": {"column": {"type": "string"}}, "required": ["column"]}}}},
        {"name": "ping", "inputSchema": {"type": "object"}}
    ]))
    .unwrap();
    ToolCatalog::from_specs(tools_to_openai(&tools))
}

fn err(name: &str, args: Value) -> String {
    catalog().validate(name, &args).unwrap_err().to_string()
}

#[test]
fn valid_calls_pass() {
    let c = catalog();
    c.validate("run_sql", &json!({"sql": "select 1"})).unwrap();
    c.validate("run_sql", &json!({"sql": "select 1", "limit": 5})).unwrap();
    c.validate("search", &json!({"filter": {"column": "name"}, "order": "asc"})).unwrap();
    c.validate("ping", &json!({})).unwrap();
    c.validate("complete_task", &json!({"summary": "42"})).unwrap();
    assert_eq!(c.names().collect::<Vec<_>>(), ["run_sql", "search", "ping", "complete_task"]);
}

#[test]
fn unknown_tool_lists_known_names() {
    assert_eq!(err("run_query", json!({})), "unknown tool `run_query`; available tools: run_sql, search, ping, complete_task");
}

#[test]
fn arguments_must_be_an_object() {
    assert_eq!(err("run_sql", json!("select 1")), "the arguments of `run_sql` must be a JSON object, got a string");
    assert!(matches!(catalog().validate("ping", &json!([1])), Err(CallError::NotAnObject { .. })));
}

#[test]
fn missing_required_argument() {
    assert_eq!(err("run_sql", json!({})), "invalid arguments for `run_sql`: missing required argument `sql`");
    assert_eq!(err("complete_task", json!({})), "invalid arguments for `complete_task`: missing required argument `summary`");
    assert_eq!(err("search", json!({"filter": {}})), "invalid arguments for `search`: missing required field `column` in `filter`");
}

#[test]
fn wrong_types_enums_and_extras() {
    let e = err("run_sql", json!({"sql": 1}));
    assert!(e.starts_with("invalid arguments for `run_sql`: argument `sql`: "), "{e}");
    assert!(e.contains("string"), "{e}");
    let e = err("run_sql", json!({"sql": "x", "limit": 0}));
    assert!(e.contains("argument `limit`"), "{e}");
    let e = err("run_sql", json!({"sql": "x", "table": "t"}));
    assert_eq!(e, "invalid arguments for `run_sql`: unknown argument `table` (expected: sql, limit)");
    let e = err("search", json!({"order": "up"}));
    assert!(e.contains("argument `order`"), "{e}");
}

#[test]
fn huge_values_are_not_echoed() {
    let big = "x".repeat(10_000);
    let e = err("run_sql", json!({"sql": 1, "limit": big}));
    assert!(e.len() < 400, "{e}");
}

#[test]
fn raw_arguments_are_parsed() {
    let c = catalog();
    assert_eq!(c.parse_arguments("ping", "").unwrap(), json!({}));
    assert_eq!(c.parse_arguments("ping", r#"{"a":1}"#).unwrap(), json!({"a": 1}));
    let e = c.parse_arguments("ping", "{a:1}").unwrap_err().to_string();
    assert!(e.starts_with("the arguments of `ping` are not valid JSON"), "{e}");
}
