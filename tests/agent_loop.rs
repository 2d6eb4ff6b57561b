//! The agent loop against the real demo MCP server (the `train-agent demo-server` binary over
//! stdio) and a model server that replays responses in OpenAI's documented format.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Replay, bin, die, error, text, tool_calls};
use ta_chat::{ChatClient, HttpLimits};
use ta_rollout::{AgentConfig, McpTools, run_episode};
use ta_types::trajectory::GroupRef;
use ta_types::{Outcome, Role, Scenario};

async fn demo_tools() -> McpTools {
    let spec = ta_mcp::ServerSpec::parse(&format!("{} demo-server", bin())).unwrap();
    let client = ta_mcp::McpClient::connect(spec, ta_mcp::ClientOptions::default()).await.unwrap();
    let discovery = client.discover().await.unwrap();
    McpTools::new(Arc::new(client), ta_mcp::ToolCatalog::from_discovery(&discovery))
}

fn scenario() -> Scenario {
    ta_types::scenario::parse_scenarios(r#"[{"id": "q", "task": "How many departments are there?", "expected": 9}]"#, "t").unwrap().remove(0)
}

fn cfg() -> AgentConfig {
    AgentConfig { max_turns: 10, record_tokens: false, ..Default::default() }
}

#[tokio::test]
async fn every_kind_of_call_is_handled_and_counted() {
    let replay = Replay::new(vec![
        tool_calls(&[("list_tables", "{}")]),
        // A Hermes text call, as small models write them.
        text("<tool_call>\n{\"name\": \"describe_table\", \"arguments\": {\"table_name\": \"departments\"}}\n</tool_call>"),
        // Bad JSON arguments, an unknown tool, a schema violation: three malformed calls.
        tool_calls(&[("run_query", "{\"sql\": "), ("drop_everything", "{}"), ("run_query", "{\"query\": \"SELECT 1\"}")]),
        // A tool error from the server (unknown column), then a recovery.
        tool_calls(&[("run_query", r#"{"sql": "SELECT nme FROM departments"}"#)]),
        tool_calls(&[("run_query", r#"{"sql": "SELECT COUNT(*) AS n FROM departments"}"#)]),
        text("```json\n{\"name\": \"complete_task\", \"arguments\": {\"summary\": \"There are 9 departments.\"}}\n```"),
    ]);
    let (url, _server) = replay.serve().await;
    let chat = ChatClient::new(&url, None, HttpLimits::DEFAULT.with_request(Duration::from_secs(10)));
    let tools = demo_tools().await;
    let t = run_episode(&chat, "m", &tools, "SYSTEM", &scenario(), GroupRef { step: 0, index: 3 }, &cfg()).await;

    assert_eq!(t.outcome, Outcome::Completed, "{:?}", t.error);
    assert_eq!(t.final_answer.as_deref(), Some("There are 9 departments."));
    assert_eq!(t.num_turns, 6);
    assert_eq!(t.tool_calls, 7, "complete_task is not counted");
    assert_eq!((t.tool_errors, t.malformed_calls, t.recovered_errors), (4, 3, 4));
    assert_eq!(t.group.index, 3);
    assert_eq!(t.prompt_tokens(), 66, "usage is recorded per turn");

    let tool_msgs: Vec<&str> = t.messages.iter().filter(|m| m.role == Role::Tool).map(|m| m.content.as_deref().unwrap()).collect();
    assert!(tool_msgs[0].contains("employees"), "list_tables result: {}", tool_msgs[0]);
    assert!(tool_msgs[2].contains("not valid JSON"), "{}", tool_msgs[2]);
    assert!(tool_msgs[3].contains("drop_everything"), "{}", tool_msgs[3]);
    assert!(tool_msgs[4].contains("sql"), "schema violation names the argument: {}", tool_msgs[4]);
    assert!(tool_msgs[5].starts_with("Error:") && tool_msgs[5].contains("nme"), "{}", tool_msgs[5]);
    assert!(tool_msgs[6].contains('9'), "{}", tool_msgs[6]);

    // The text call became a structured call in the conversation sent back to the model.
    let requests = replay.requests();
    assert_eq!(requests.len(), 6);
    let third = &requests[2]["messages"];
    let assistant = third.as_array().unwrap().iter().rev().find(|m| m["role"] == "assistant").unwrap();
    assert_eq!(assistant["tool_calls"][0]["function"]["name"], "describe_table");
    assert_eq!(requests[0]["tools"].as_array().unwrap().len(), 4, "3 server tools + complete_task");
    assert!(requests[0].get("return_token_ids").is_none(), "not asked of servers that may reject it");
}

/// An agent that copies the server's SQL error into `complete_task` (what GRPO taught two runs'
/// adapters, benches/RESULTS.md run 25), or its tail, is marked, and the rules score it below
/// running out of turns; an episode that recovers and answers from a query that worked is not
/// marked.
#[tokio::test]
async fn an_answer_that_repeats_the_servers_error_is_marked() {
    let tools = demo_tools().await;
    let play = async |script: Vec<common::Reply>, max_turns: u32| {
        let replay = Replay::new(script);
        let (url, _server) = replay.serve().await;
        let chat = ChatClient::new(&url, None, HttpLimits::DEFAULT.with_request(Duration::from_secs(10)));
        run_episode(&chat, "m", &tools, "S", &scenario(), GroupRef::default(), &AgentConfig { max_turns, ..cfg() }).await
    };
    let bad = || tool_calls(&[("run_query", r#"{"sql": "SELECT nme FROM departments"}"#)]);
    let complete = |summary: &str| tool_calls(&[("complete_task", &serde_json::json!({ "summary": summary }).to_string())]);
    // The error text the server returns, handed back verbatim as the answer.
    let probe = play(vec![bad()], 1).await;
    let reply = probe.messages.iter().find(|m| m.role == Role::Tool).unwrap().content.clone().unwrap();
    let error = reply.strip_prefix("Error: ").expect("a server error reply").to_string();

    let gave_up = play(vec![bad(), complete(&error)], 10).await;
    assert_eq!(gave_up.outcome, Outcome::Completed);
    assert!(gave_up.answered_with_error, "{:?}", gave_up.final_answer);
    // Its tail, the head dropped (what GRPO taught run 30's StudentMathScore adapter), too.
    let tail = error.split_once("no such column: ").expect("the demo server names the column").1;
    let dodged = play(vec![bad(), complete(tail)], 10).await;
    assert!(dodged.answered_with_error, "{:?}", dodged.final_answer);
    let good = tool_calls(&[("run_query", r#"{"sql": "SELECT COUNT(*) AS n FROM departments"}"#)]);
    let answered = play(vec![bad(), good, complete("There are 9 departments.")], 10).await;
    assert_eq!((answered.outcome, answered.answered_with_error), (Outcome::Completed, false), "{:?}", answered.final_answer);

    let rules = ta_reward::RuleConfig::default();
    let mut out_of_turns = gave_up.clone();
    (out_of_turns.outcome, out_of_turns.answered_with_error) = (Outcome::RanOutOfTurns, false);
    let score = |t| ta_reward::rules::score(&rules, t);
    assert!(score(&gave_up) < score(&out_of_turns) && score(&out_of_turns) < score(&answered));
}

#[tokio::test]
async fn long_results_are_truncated_with_a_note() {
    let replay = Replay::new(vec![tool_calls(&[("run_query", r#"{"sql": "SELECT * FROM employees"}"#)]), text("I give up.")]);
    let (url, _server) = replay.serve().await;
    let chat = ChatClient::new(&url, None, HttpLimits::DEFAULT.with_request(Duration::from_secs(10)));
    let tools = demo_tools().await;
    let cfg = AgentConfig { max_turns: 2, tool_result_max_chars: 200, ..cfg() };
    let t = run_episode(&chat, "m", &tools, "S", &scenario(), GroupRef::default(), &cfg).await;
    assert_eq!(t.outcome, Outcome::RanOutOfTurns);
    let result = t.messages.iter().find(|m| m.role == Role::Tool).unwrap().content.clone().unwrap();
    assert!(result.contains("[truncated: showing the first 200 of"), "{result}");
    assert_eq!(t.final_answer.as_deref(), Some("I give up."), "last text kept as the answer");
    assert!(t.messages.last().unwrap().content.as_deref().unwrap().contains("did not call a tool"));
}

#[tokio::test]
async fn a_model_server_that_dies_mid_rollout_ends_it_with_an_error() {
    let replay = Replay::new(vec![tool_calls(&[("list_tables", "{}")]), die()]);
    let (url, _server) = replay.serve().await;
    let chat = ChatClient::new(&url, None, HttpLimits { max_retries: 1, ..HttpLimits::DEFAULT.with_request(Duration::from_secs(2)) });
    let tools = demo_tools().await;
    let t = run_episode(&chat, "m", &tools, "S", &scenario(), GroupRef::default(), &cfg()).await;
    assert!(matches!(t.outcome, Outcome::Error), "{:?}", t.outcome);
    assert!(t.error.as_deref().unwrap().contains("cannot reach"), "{:?}", t.error);
    assert_eq!(t.num_turns, 1, "the finished turn is kept");
    assert_eq!(t.tool_calls, 1);
}

#[tokio::test]
async fn retries_server_errors_and_reports_context_overflow() {
    let replay = Replay::new(vec![
        error(500, "engine hiccup"),
        tool_calls(&[("list_tables", "{}")]),
        error(400, "This model's maximum context length is 2048 tokens. However, you requested 4000 tokens."),
    ]);
    let (url, _server) = replay.serve().await;
    let chat = ChatClient::new(&url, None, HttpLimits::DEFAULT.with_request(Duration::from_secs(10)));
    let tools = demo_tools().await;
    let t = run_episode(&chat, "m", &tools, "S", &scenario(), GroupRef::default(), &cfg()).await;
    assert_eq!(t.outcome, Outcome::ContextExceeded);
    assert!(t.error.as_deref().unwrap().contains("maximum context length"));
    assert_eq!(replay.requests().len(), 3, "the 500 was retried once");
}

/// A model that writes turn after turn without finishing stops at the episode's token budget
/// (7 tokens a turn here: 3 turns reach 20) and fails like one out of turns; without a budget it
/// plays every turn.
#[tokio::test]
async fn a_runaway_episode_stops_at_its_token_budget_and_fails() {
    let talk = || (0..6).map(|i| text(&format!("Let me think about it ({i})."))).collect::<Vec<_>>();
    let tools = demo_tools().await;
    for (budget, turns) in [(20, 3), (0, 6)] {
        let replay = Replay::new(talk());
        let (url, _server) = replay.serve().await;
        let chat = ChatClient::new(&url, None, HttpLimits::DEFAULT.with_request(Duration::from_secs(10)));
        let cfg = AgentConfig { max_turns: 6, max_episode_tokens: budget, ..cfg() };
        let t = run_episode(&chat, "m", &tools, "S", &scenario(), GroupRef::default(), &cfg).await;
        assert_eq!((t.outcome, t.num_turns), (Outcome::RanOutOfTurns, turns), "budget {budget}");
        assert_eq!(replay.requests().len(), turns as usize);
    }
}
