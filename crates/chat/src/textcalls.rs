//! Tool calls written as text. Small models often ignore the `tools` channel and write calls in
//! the content: Hermes `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks, a bare
//! JSON object, or the same JSON inside a ```json fence. The agent loop accepts all of them (as
//! vLLM's Hermes parser does for the first), so that training can reward the call and the engine's
//! own output format stays the one that is learned.

use serde_json::Value;
use ta_types::ToolCall;

/// A call found in text: well-formed, or a `<tool_call>` block whose JSON could not be read.
#[derive(Debug, Clone, PartialEq)]
pub enum TextCall {
    Call(ToolCall),
    Malformed { raw: String, reason: String },
}

/// Calls found in `content` and the content left once they are removed (trimmed).
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    pub calls: Vec<TextCall>,
    pub rest: String,
}

const OPEN: &str = "<tool_call>";
const CLOSE: &str = "</tool_call>";

/// Finds tool calls in `content`. `id_prefix` makes ids unique within a conversation.
pub fn parse(content: &str, id_prefix: &str) -> Parsed {
    let mut calls = Vec::new();
    let mut rest = String::new();
    if content.contains(OPEN) {
        let mut tail = content;
        while let Some(start) = tail.find(OPEN) {
            rest.push_str(&tail[..start]);
            let after = &tail[start + OPEN.len()..];
            let (body, next) = match after.find(CLOSE) {
                Some(end) => (&after[..end], &after[end + CLOSE.len()..]),
                None => (after, ""),
            };
            calls.push(from_json_text(body.trim()));
            tail = next;
        }
        rest.push_str(tail);
    } else if let Some((call_text, before, after)) = fenced_or_bare_json(content)
        && let Ok(v) = serde_json::from_str::<Value>(call_text)
    {
        let found: Vec<TextCall> = match &v {
            Value::Array(items) => items.iter().filter_map(call_from_value).map(TextCall::Call).collect(),
            _ => call_from_value(&v).map(TextCall::Call).into_iter().collect(),
        };
        if !found.is_empty() {
            calls = found;
            rest = format!("{before}{after}");
        }
    }
    if calls.is_empty() {
        rest = content.to_string();
    }
    for (i, c) in calls.iter_mut().enumerate() {
        if let TextCall::Call(call) = c {
            call.id = format!("{id_prefix}{i}");
        }
    }
    Parsed { calls, rest: rest.trim().to_string() }
}

fn from_json_text(body: &str) -> TextCall {
    match serde_json::from_str::<Value>(body) {
        Ok(v) => match call_from_value(&v) {
            Some(call) => TextCall::Call(call),
            None => TextCall::Malformed { raw: body.to_string(), reason: "expected a JSON object with \"name\" and \"arguments\"".into() },
        },
        Err(e) => TextCall::Malformed { raw: body.to_string(), reason: format!("invalid JSON: {e}") },
    }
}

/// `{"name": .., "arguments": {..} | "..."}` (also `parameters`, as some models write).
fn call_from_value(v: &Value) -> Option<ToolCall> {
    let name = v.get("name")?.as_str()?;
    let args = v.get("arguments").or_else(|| v.get("parameters")).cloned().unwrap_or(Value::Object(Default::default()));
    let arguments = match args {
        Value::String(s) => s,
        other => other.to_string(),
    };
    Some(ToolCall::new(String::new(), name, arguments))
}

/// The JSON text of a call written in a ```json fence or as the whole content, with the text
/// before and after it.
fn fenced_or_bare_json(content: &str) -> Option<(&str, &str, &str)> {
    if let Some(start) = content.find("```") {
        let after_ticks = &content[start + 3..];
        let body_start = after_ticks.find('\n').map(|i| i + 1).unwrap_or(0);
        let lang = after_ticks[..body_start].trim();
        if lang.is_empty() || lang.eq_ignore_ascii_case("json") {
            let body = &after_ticks[body_start..];
            let end = body.find("```")?;
            let before = &content[..start];
            let after = &body[end + 3..];
            return Some((body[..end].trim(), before, after));
        }
        return None;
    }
    let t = content.trim();
    (t.starts_with('{') || t.starts_with('[')).then_some((t, "", ""))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, args: &str) -> TextCall {
        TextCall::Call(ToolCall::new("", name, args))
    }

    fn ids_cleared(mut p: Parsed) -> Parsed {
        for c in &mut p.calls {
            if let TextCall::Call(c) = c {
                c.id.clear();
            }
        }
        p
    }

    #[test]
    fn hermes_blocks_several_and_surrounding_text() {
        let p = parse(
            "Let me look.\n<tool_call>\n{\"name\": \"list_tables\", \"arguments\": {}}\n</tool_call>\n<tool_call>{\"name\": \"run_query\", \"arguments\": {\"sql\": \"SELECT 1\"}}</tool_call>",
            "c",
        );
        assert_eq!(p.rest, "Let me look.");
        assert!(matches!(&p.calls[1], TextCall::Call(c) if c.id == "c1"));
        assert_eq!(ids_cleared(p).calls, vec![call("list_tables", "{}"), call("run_query", r#"{"sql":"SELECT 1"}"#)]);
    }

    #[test]
    fn malformed_hermes_block_is_reported_not_dropped() {
        let p = parse("<tool_call>{\"name\": \"run_query\", \"arguments\": {\"sql\": </tool_call>", "c");
        assert!(matches!(&p.calls[0], TextCall::Malformed { reason, .. } if reason.starts_with("invalid JSON")));
        let p = parse("<tool_call>{\"tool\": \"x\"}</tool_call>", "c");
        assert!(matches!(&p.calls[0], TextCall::Malformed { .. }));
        let p = parse("<tool_call>{\"name\": \"x\", \"arguments\": {}}", "c");
        assert_eq!(ids_cleared(p).calls, vec![call("x", "{}")], "unclosed final block still counts");
    }

    #[test]
    fn bare_and_fenced_json_calls() {
        let p = ids_cleared(parse(r#"{"name": "describe_table", "arguments": {"table_name": "employees"}}"#, "c"));
        assert_eq!(p.calls, vec![call("describe_table", r#"{"table_name":"employees"}"#)]);
        assert_eq!(p.rest, "");
        let p = ids_cleared(parse("I will run:\n```json\n{\"name\": \"run_query\", \"parameters\": {\"sql\": \"SELECT 2\"}}\n```\nDone.", "c"));
        assert_eq!(p.calls, vec![call("run_query", r#"{"sql":"SELECT 2"}"#)]);
        assert_eq!(p.rest, "I will run:\n\nDone.");
        let p = ids_cleared(parse(r#"[{"name": "a", "arguments": "{\"x\": 1}"}, {"name": "b"}]"#, "c"));
        assert_eq!(p.calls, vec![call("a", r#"{"x": 1}"#), call("b", "{}")]);
    }

    #[test]
    fn prose_and_other_json_are_not_calls() {
        for text in ["The answer is 42.", r#"{"answer": 42}"#, "```python\nprint(1)\n```", "```json\n{\"rows\": []}\n```"] {
            let p = parse(text, "c");
            assert!(p.calls.is_empty(), "{text}");
            assert_eq!(p.rest, text.trim());
        }
    }
}
