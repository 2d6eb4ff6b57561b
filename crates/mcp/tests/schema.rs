//! Schema conversion: snapshots of server-everything's real tools (captured in
//! `fixtures/everything-tools.json`, so no node is needed) and hand-written schemas for the
//! hard cases: `$ref`/`$defs`, recursion, enums, nesting, optional fields.

use serde_json::{Value, json};
use ta_mcp::{COMPLETE_TASK, Discovery, Resource, Tool, convert_schema, enrichment_text, tools_to_openai};

fn tool(name: &str, schema: Value) -> Tool {
    serde_json::from_value(json!({"name": name, "description": format!("The {name} tool."), "inputSchema": schema})).unwrap()
}

fn convert(schema: Value) -> Value {
    convert_schema(schema.as_object().unwrap())
}

#[test]
fn everything_tools_snapshot() {
    let text = include_str!("fixtures/everything-tools.json");
    let tools: Vec<Tool> = serde_json::from_str(text).unwrap();
    let specs = tools_to_openai(&tools);
    assert_eq!(specs.len(), tools.len() + 1);
    assert_eq!(specs.last().unwrap().name(), COMPLETE_TASK);
    for spec in &specs {
        let params = &spec.function.parameters;
        assert_eq!(params["type"], "object", "{}", spec.name());
        assert!(params["properties"].is_object(), "{}", spec.name());
        assert!(params.get("$schema").is_none(), "{}", spec.name());
    }
    insta::assert_json_snapshot!("everything_openai_tools", specs);
}

#[test]
fn defs_are_inlined_and_dropped() {
    let out = convert(json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {
            "home": {"$ref": "#/$defs/Address", "description": "Where they live"},
            "work": {"$ref": "#/definitions/Address"},
            "tags": {"type": "array", "items": {"$ref": "#/$defs/Tag"}}
        },
        "required": ["home"],
        "$defs": {
            "Address": {"type": "object", "description": "A postal address",
                        "properties": {"street": {"type": "string"}, "zip": {"type": "string", "default": "00000"}},
                        "required": ["street"]},
            "Tag": {"type": "string", "enum": ["a", "b"]}
        },
        "definitions": {"Address": {"$ref": "#/$defs/Address"}}
    }));
    insta::assert_json_snapshot!("defs_inlined", out);
    let text = out.to_string();
    assert!(!text.contains("$ref") && !text.contains("$defs") && !text.contains("$schema"), "{text}");
}

#[test]
fn recursive_refs_become_permissive_objects() {
    let out = convert(json!({
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/Node"}},
        "$defs": {"Node": {"type": "object", "description": "A tree node",
                           "properties": {"value": {"type": "integer"},
                                          "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}}}
    }));
    insta::assert_json_snapshot!("recursive_ref", out);
    assert_eq!(out["properties"]["root"]["properties"]["children"]["items"]["type"], "object");
    assert!(out.to_string().contains("recursive"));
}

#[test]
fn self_reference_to_root_is_guarded() {
    let out = convert(json!({"type": "object", "properties": {"next": {"$ref": "#"}}}));
    assert_eq!(out["properties"]["next"]["type"], "object");
}

#[test]
fn enums_nesting_and_optional_fields_survive() {
    let out = convert(json!({
        "type": "object",
        "properties": {
            "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast", "description": "Speed"},
            "filter": {"type": "object", "properties": {"column": {"type": "string"}, "op": {"enum": ["=", "<", ">"]}},
                       "required": ["column"], "additionalProperties": false},
            "limit": {"type": ["integer", "null"], "minimum": 1},
            "literal": {"const": {"$ref": "#/not/a/schema"}}
        },
        "required": ["filter"]
    }));
    insta::assert_json_snapshot!("enums_nesting_optional", out);
    assert_eq!(out["properties"]["literal"]["const"]["$ref"], "#/not/a/schema", "data keywords are left alone");
}

#[test]
fn missing_properties_and_odd_roots_become_objects() {
    assert_eq!(convert(json!({"type": "object"})), json!({"type": "object", "properties": {}}));
    assert_eq!(convert(json!({})), json!({"type": "object", "properties": {}}));
    let out = convert(json!({"$schema": "x", "additionalProperties": false}));
    assert_eq!(out, json!({"type": "object", "properties": {}, "additionalProperties": false}));
}

#[test]
fn dangling_and_remote_refs_are_left_open() {
    let out = convert(json!({"type": "object", "properties": {
        "a": {"$ref": "#/$defs/Missing"},
        "b": {"$ref": "https://example.com/schema.json", "description": "Remote"}
    }}));
    assert_eq!(out["properties"]["a"], json!({}));
    assert_eq!(out["properties"]["b"]["description"], "Remote");
}

#[test]
fn server_complete_task_is_replaced() {
    let tools = vec![tool("complete_task", json!({"type": "object"})), tool("query", json!({"type": "object"}))];
    let specs = tools_to_openai(&tools);
    let names: Vec<&str> = specs.iter().map(|s| s.name()).collect();
    assert_eq!(names, ["query", "complete_task"]);
    insta::assert_json_snapshot!("complete_task", specs[1]);
}

#[test]
fn enrichment_lists_instructions_and_resources() {
    assert_eq!(enrichment_text(&Discovery::default()), "");
    let resources: Vec<Resource> = serde_json::from_value(json!([
        {"uri": "db://tables", "name": "tables", "description": "All tables", "mimeType": "text/plain"},
        {"uri": "db://schema", "name": "schema", "title": "Schema"}
    ]))
    .unwrap();
    let discovery = Discovery { server_name: Some("demo".into()), instructions: Some("Use describe_table first.".into()), resources, ..Default::default() };
    insta::assert_snapshot!("enrichment", enrichment_text(&discovery));
}
