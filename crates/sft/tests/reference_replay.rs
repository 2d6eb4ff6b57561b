//! Reference demonstrations replayed on a server that has nothing to do with SQL: the reference
//! MCP server `@modelcontextprotocol/server-everything` (installed on first use into the test cache).

use std::sync::Arc;
use std::time::Duration;

use ta_mcp::{ClientOptions, McpClient, ServerSpec, ToolCatalog};
use ta_rollout::McpTools;
use ta_sft::reference::{ReferenceOptions, reference_traces};
use ta_types::scenario::parse_scenarios;

const SCENARIOS: &str = r#"
{"id": "sum", "task": "What is 17 plus 25?", "expected": 42, "reference": [{"tool": "get-sum", "arguments": {"a": 17, "b": 25}}]}
{"id": "echo", "task": "Have the server echo 'bonjour', twice.", "expected": {"contains": "bonjour"}, "reference": [{"tool": "echo", "arguments": {"message": "hi"}}, {"tool": "echo", "arguments": {"message": "bonjour"}}]}
{"id": "both", "task": "Add 1 and 2, and 3 and 4.", "expected": 7, "reference": [{"tool": "get-sum", "arguments": {"a": 1, "b": 2}}, {"tool": "get-sum", "arguments": {"a": 3, "b": 4}, "with_previous": true}]}
{"id": "wrong", "task": "What is 17 plus 25?", "expected": 41, "reference": [{"tool": "get-sum", "arguments": {"a": 17, "b": 25}}]}
{"id": "bad-args", "task": "Add x and 1.", "expected": 1, "reference": [{"tool": "get-sum", "arguments": {"a": "x", "b": 1}}]}
{"id": "sql", "task": "How many rows?", "expected": 3, "reference_sql": "SELECT count(*) FROM t"}
{"id": "none", "task": "Say hi", "expected": "hi"}
"#;

#[tokio::test(flavor = "multi_thread")]
async fn reference_steps_replay_on_a_non_sql_server() {
    let options = ClientOptions { call_timeout: Duration::from_secs(30), connect_timeout: Duration::from_secs(90), ..Default::default() };
    let Some(program) = ta_testkit::SERVER_EVERYTHING.path("reference_steps_replay_on_a_non_sql_server") else { return };
    let client = McpClient::connect(ServerSpec::parse(&program.display().to_string()).unwrap(), options).await.unwrap();
    let discovery = client.discover().await.unwrap();
    let tools = McpTools::new(Arc::new(client), ToolCatalog::from_discovery(&discovery));
    let scenarios = parse_scenarios(SCENARIOS, "inline").unwrap();
    let opts = ReferenceOptions { tool_result_max_chars: 4000, reward: Default::default(), recovery_share: 1.0, seed: 0 };
    let (traces, skipped) = reference_traces(&tools, "You are an agent.", &scenarios, &opts).await.unwrap();
    tools.client().close().await;

    let ids: Vec<&str> = traces.iter().map(|t| t.scenario_id.as_str()).collect();
    assert_eq!(ids, ["sum", "echo", "both"]);
    let sum = &traces[0];
    assert_eq!((sum.source.as_str(), sum.final_answer.as_deref(), sum.reward_parts.ground_truth), ("reference", Some("42"), Some(1.0)));
    let roles: Vec<String> = sum.messages.iter().map(|m| format!("{:?}", m.role).to_lowercase()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "assistant"]);
    assert!(sum.messages[3].content.as_deref().unwrap().contains("42"), "the server's real result: {:?}", sum.messages[3].content);
    let last = &sum.messages[4].tool_calls[0].function;
    assert_eq!((last.name.as_str(), last.arguments.as_str()), ("complete_task", r#"{"summary":"42"}"#));
    assert_eq!(traces[1].tool_calls, 2, "no exploration steps on a server without SQL tools");
    assert_eq!(traces[1].final_answer.as_deref(), Some("bonjour"));
    // Steps made `with_previous` are one assistant turn calling both, then both results in order.
    let both = &traces[2];
    let roles: Vec<String> = both.messages.iter().map(|m| format!("{:?}", m.role).to_lowercase()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "tool", "assistant"]);
    let calls: Vec<(&str, &str)> = both.messages[2].tool_calls.iter().map(|c| (c.id.as_str(), c.function.arguments.as_str())).collect();
    assert_eq!(calls, [("call_ref_0", r#"{"a":1,"b":2}"#), ("call_ref_0_1", r#"{"a":3,"b":4}"#)]);
    let results: Vec<(&str, &str)> = both.messages[3..5].iter().map(|m| (m.tool_call_id.as_deref().unwrap(), m.content.as_deref().unwrap())).collect();
    assert!(results[0].0 == "call_ref_0" && results[0].1.contains('3') && results[1].0 == "call_ref_0_1" && results[1].1.contains('7'), "{results:?}");
    assert_eq!((both.tool_calls, both.num_turns), (2, 2), "two calls in one turn, then the answer");

    let reasons: Vec<(&str, &str)> = skipped.iter().map(|s| (s.scenario_id.as_str(), s.reason.as_str())).collect();
    assert_eq!(reasons.len(), 4, "{reasons:?}");
    assert!(reasons[0].0 == "wrong" && reasons[0].1.contains("does not show the expected answer"), "{reasons:?}");
    assert!(reasons[1].0 == "bad-args" && reasons[1].1.starts_with("step 1 (get-sum) failed"), "{reasons:?}");
    assert!(reasons[2].0 == "sql" && reasons[2].1.contains("no SQL query tool"), "{reasons:?}");
    assert_eq!(reasons[3], ("none", "no reference steps or reference_sql"));
}
