//! Reliability under faults, with the fault-injection kit (`common::faults`): model servers that
//! hang, drip, rate-limit, fail or answer in unusual shapes; MCP servers that die, stall or talk
//! garbage; torn files; URL credentials; interrupted and failed runs. Each test keeps its waits
//! to seconds with short timeouts. docs/reliability.md lists what each one shows.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::faults::{
    Fault, FaultServer, Gate, McpFault, ScriptedMcp, arguments_object, content_parts, mcp_fault_command, pids_alive, scripted_mcp_command, tool_calls_null,
};
use common::{bin, text, tool_calls};
use serde_json::json;
use ta_chat::{ChatClient, ChatError, ChatRequest, HttpLimits};
use ta_types::{Message, Outcome, Role, Trajectory};

/// Short limits so a fault costs seconds.
fn limits() -> HttpLimits {
    HttpLimits {
        connect: Duration::from_secs(2),
        request: Duration::from_secs(2),
        stall: Duration::from_millis(500),
        deadline: Duration::from_secs(4),
        max_retry_after: Duration::from_millis(200),
        max_retries: 2,
    }
}

fn request() -> ChatRequest {
    ChatRequest { model: "m".into(), messages: vec![Message::user("hi")], ..Default::default() }
}

// ---- item 1: bounded waits --------------------------------------------------------------------

#[tokio::test]
async fn a_server_that_never_answers_costs_one_deadline_not_retries_times_the_timeout() {
    let server = FaultServer::start(vec![Fault::Hang]).await;
    let chat = ChatClient::new(&server.url(), None, HttpLimits { request: Duration::from_secs(60), deadline: Duration::from_secs(2), max_retries: 10, ..limits() });
    let t0 = Instant::now();
    let err = chat.complete(&request()).await.unwrap_err();
    assert!(matches!(err, ChatError::Deadline { .. }), "{err}");
    assert!(err.to_string().contains("within the 2 s deadline") && err.to_string().contains("hint:"), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(20), "the deadline bounds the call: {:?}", t0.elapsed());

    // A per-request timeout shorter than the deadline makes room for retries.
    let chat = ChatClient::new(&server.url(), None, HttpLimits { request: Duration::from_millis(300), deadline: Duration::from_secs(3), ..limits() });
    let before = server.requests().len();
    chat.complete(&request()).await.unwrap_err();
    assert!(server.requests().len() - before >= 2, "timed-out attempts are retried");
}

#[tokio::test]
async fn a_body_dripping_one_byte_every_5_s_is_cut_off_and_retried() {
    let (_, body) = text("dripped");
    let server = FaultServer::start(vec![Fault::Drip { body, every: Duration::from_secs(5) }, Fault::ok(text("whole"))]).await;
    let chat = ChatClient::new(&server.url(), None, HttpLimits { request: Duration::from_secs(600), deadline: Duration::from_secs(600), ..limits() });
    let t0 = Instant::now();
    let r = chat.complete(&request()).await.unwrap();
    assert_eq!(r.choices[0].message.content.as_deref(), Some("whole"));
    assert_eq!(server.requests().len(), 2);
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
}

#[tokio::test]
async fn retry_after_is_honoured_up_to_its_cap() {
    // A day's Retry-After is waited for the cap (200 ms), twice, then the call succeeds.
    let server = FaultServer::start(vec![Fault::rate_limited("100000"), Fault::rate_limited("100000"), Fault::ok(text("ok"))]).await;
    let chat = ChatClient::new(&server.url(), None, HttpLimits { deadline: Duration::from_secs(60), ..limits() });
    let t0 = Instant::now();
    chat.complete(&request()).await.unwrap();
    assert_eq!(server.requests().len(), 3);
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());

    // Below the cap it is honoured.
    let server = FaultServer::start(vec![Fault::rate_limited("1"), Fault::ok(text("ok"))]).await;
    let chat = ChatClient::new(&server.url(), None, HttpLimits { max_retry_after: Duration::from_secs(30), ..limits() });
    let t0 = Instant::now();
    chat.complete(&request()).await.unwrap();
    assert!(t0.elapsed() >= Duration::from_millis(950), "waited {:?} of Retry-After: 1", t0.elapsed());

    // A wait that would pass the deadline ends the call at once.
    let server = FaultServer::start(vec![Fault::rate_limited("30")]).await;
    let chat = ChatClient::new(&server.url(), None, HttpLimits { max_retry_after: Duration::from_secs(30), deadline: Duration::from_secs(5), ..limits() });
    let err = chat.complete(&request()).await.unwrap_err();
    assert!(matches!(err, ChatError::Deadline { .. }) && err.to_string().contains("429"), "{err}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn server_errors_and_dropped_connections_are_retried_but_401_is_not() {
    let server = FaultServer::start(vec![Fault::status(500, "hiccup"), Fault::Close, Fault::ok(text("ok"))]).await;
    ChatClient::new(&server.url(), None, limits()).complete(&request()).await.unwrap();
    assert_eq!(server.requests().len(), 3);

    let server = FaultServer::start(vec![Fault::status(401, "Incorrect API key provided")]).await;
    let err = ChatClient::new(&server.url(), None, limits()).complete(&request()).await.unwrap_err();
    assert!(matches!(err, ChatError::Status { status: 401, .. }) && err.to_string().contains("Incorrect API key"), "{err}");
    assert_eq!(server.requests().len(), 1);
}

// ---- item 4: tolerant parsing -----------------------------------------------------------------

#[tokio::test]
async fn unusual_but_legal_response_shapes_are_read() {
    let server = FaultServer::start(vec![tool_calls_null("plain"), content_parts(&["a", "b"]), arguments_object("run_query", json!({"sql": "SELECT 1"}))]).await;
    let chat = ChatClient::new(&server.url(), None, limits());
    let m = |r: ta_chat::ChatResponse| r.choices.into_iter().next().unwrap().message;
    let plain = m(chat.complete(&request()).await.unwrap());
    assert_eq!((plain.content.as_deref(), plain.tool_calls.len()), (Some("plain"), 0));
    assert_eq!(m(chat.complete(&request()).await.unwrap()).content.as_deref(), Some("ab"));
    let call = m(chat.complete(&request()).await.unwrap());
    assert_eq!(call.tool_calls[0].function.arguments, r#"{"sql":"SELECT 1"}"#);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_episode_completes_through_unusual_shapes() {
    let dir = tempfile::tempdir().unwrap();
    let server = FaultServer::start(vec![
        tool_calls_null("Let me look."),
        arguments_object("run_query", json!({"sql": "SELECT COUNT(*) AS n FROM departments"})),
        content_parts(&["<tool_call>{\"name\": \"complete_task\", ", "\"arguments\": {\"summary\": \"9\"}}</tool_call>"]),
    ])
    .await;
    let out = rollout(&server.url(), DEMO, &scenarios(&dir, 1), &dir.path().join("o"), &[]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let t = &trajectories(&dir.path().join("o"))[0];
    assert_eq!(t.outcome, Outcome::Completed, "{:?}", t.error);
    assert_eq!(t.final_answer.as_deref(), Some("9"));
    assert_eq!(t.tool_errors, 0);
}

#[tokio::test]
async fn a_600_mb_chunked_reply_is_cut_off_at_the_cap_and_not_retried() {
    let server = FaultServer::start(vec![Fault::Chunked { bytes: 600 << 20 }]).await;
    let chat = ChatClient::new(
        &server.url(),
        None,
        HttpLimits { request: Duration::from_secs(60), stall: Duration::from_secs(60), deadline: Duration::from_secs(60), ..limits() },
    );
    let err = chat.complete(&request()).await.unwrap_err();
    assert!(matches!(err, ChatError::TooLarge { .. }), "{err}");
    assert!(err.to_string().contains(&format!("a response body over {} MiB; reading stopped there", ta_chat::MAX_BODY_BYTES >> 20)), "{err}");
    assert!(err.to_string().contains("hint:"), "{err}");
    assert_eq!(server.requests().len(), 1, "a body over the cap is not asked for again");
}

// ---- item 2: failed episodes, exit codes ------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn a_run_whose_every_episode_failed_exits_nonzero_and_a_rerun_replays_them() {
    let dir = tempfile::tempdir().unwrap();
    let (s, out_dir) = (scenarios(&dir, 3), dir.path().join("o"));
    let down = FaultServer::start(vec![Fault::Close]).await;
    let first = rollout(&down.url(), DEMO, &s, &out_dir, &["--model-retries", "0"]).await;
    assert!(!first.status.success());
    let err = stderr(&first);
    assert!(err.contains("every episode failed (3 of 3)") && err.contains("cannot reach") && err.contains("hint:"), "{err}");
    assert!(trajectories(&out_dir).iter().all(|t| t.outcome == Outcome::Error));

    // --retry-failed=false keeps them: nothing is asked, and the run still counts as failed.
    let up = FaultServer::start(vec![Fault::ok(complete())]).await;
    let kept = rollout(&up.url(), DEMO, &s, &out_dir, &["--retry-failed=false"]).await;
    assert!(!kept.status.success(), "{}", stderr(&kept));
    assert_eq!(up.requests().len(), 0);

    // By default they are played again, and replace the errored lines.
    let second = rollout(&up.url(), DEMO, &s, &out_dir, &[]).await;
    assert!(second.status.success(), "{}", stderr(&second));
    assert!(stderr(&second).contains("3 errored episodes of an earlier run played again"), "{}", stderr(&second));
    assert_eq!(up.requests().len(), 3);
    let all = trajectories(&out_dir);
    assert_eq!(all.len(), 3);
    assert!(all.iter().all(|t| t.outcome == Outcome::Completed), "{all:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn cli_timeout_flags_bound_a_hanging_model_server() {
    let dir = tempfile::tempdir().unwrap();
    let hang = FaultServer::start(vec![Fault::Hang]).await;
    let args = ["--model-timeout", "0.3", "--model-deadline", "1", "--model-retries", "50"];
    let out = tokio::time::timeout(Duration::from_secs(60), rollout(&hang.url(), DEMO, &scenarios(&dir, 1), &dir.path().join("o"), &args))
        .await
        .expect("the flags bound the run");
    assert!(!out.status.success());
    assert!(stderr(&out).contains("within the 1 s deadline"), "{}", stderr(&out));

    let bad = rollout(&hang.url(), DEMO, &scenarios(&dir, 1), &dir.path().join("o2"), &["--model-deadline", "0"]).await;
    assert!(stderr(&bad).contains("--model-deadline must be a positive number"), "{}", stderr(&bad));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_interrupted_rollout_exits_130() {
    let dir = tempfile::tempdir().unwrap();
    let hang = FaultServer::start(vec![Fault::Hang]).await;
    let child = rollout_command(&hang.url(), DEMO, &scenarios(&dir, 1), &dir.path().join("o"), &[]).spawn().unwrap();
    wait_until(|| !hang.requests().is_empty()).await;
    let out = common::interrupt(child).await;
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert!(stderr(&out).contains("run the same command again"), "{}", stderr(&out));
}

/// `sft` stopped by Ctrl-C mid-run exits 130 and says to continue with --resume (it used to exit
/// 0, so `sft ... && next` went on without an adapter).
#[tokio::test(flavor = "multi_thread")]
async fn an_interrupted_sft_exits_130_and_says_how_to_continue() {
    let dir = tempfile::tempdir().unwrap();
    let dataset = dir.path().join("traces.jsonl");
    let row = |i: usize| {
        json!({"id": format!("t{i}"), "messages": [
            {"role": "system", "content": "You answer questions about the company."},
            {"role": "user", "content": format!("How many departments are there? ({i})")},
            {"role": "assistant", "content": "There are 9 departments."},
        ], "tools": []})
        .to_string()
    };
    std::fs::write(&dataset, (0..8).map(|i| row(i) + "\n").collect::<String>()).unwrap();
    let model = common::tiny_model(false);
    let out = dir.path().join("sft");
    let child = tokio::process::Command::new(bin())
        .args(["sft", "--base-model", model.to_str().unwrap(), "--dataset", dataset.to_str().unwrap(), "--epochs", "100000", "--batch-size", "1"])
        .args(["--eval-fraction", "0", "--save-every", "1", "--out", out.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let metrics = out.join("metrics.jsonl");
    // The Python environment and the trainer start first: minutes on a slow machine.
    let started = Instant::now();
    while !std::fs::read_to_string(&metrics).is_ok_and(|t| t.contains("train_loss")) {
        assert!(started.elapsed() < Duration::from_secs(600), "no SFT step in 10 minutes");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let stopped = common::interrupt(child).await;
    let err = stderr(&stopped);
    assert_eq!(stopped.status.code(), Some(130), "{err}");
    assert!(err.contains("interrupted: the last checkpoint is step") && err.contains("plus --resume"), "{err}");
}

// ---- item 3: torn tails -----------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn a_torn_last_line_is_cut_before_the_next_run_appends() {
    let dir = tempfile::tempdir().unwrap();
    let (s, out_dir) = (scenarios(&dir, 3), dir.path().join("o"));
    let up = FaultServer::start(vec![Fault::ok(complete())]).await;
    let first = rollout(&up.url(), DEMO, &s, &out_dir, &["--limit", "1"]).await;
    assert!(first.status.success(), "{}", stderr(&first));
    // A SIGKILL mid-write leaves half a line.
    let path = out_dir.join("trajectories.jsonl");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(b"{\"scenario_id\": \"s1\", \"group\": {\"st");
    std::fs::write(&path, bytes).unwrap();

    for _ in 0..2 {
        let again = rollout(&up.url(), DEMO, &s, &out_dir, &[]).await;
        assert!(again.status.success(), "{}", stderr(&again));
    }
    let text = std::fs::read_to_string(&path).unwrap();
    for (i, line) in text.lines().enumerate() {
        serde_json::from_str::<Trajectory>(line).unwrap_or_else(|e| panic!("line {}: {e}: {line}", i + 1));
    }
    assert_eq!(text.lines().count(), 3);
}

// ---- two runs into one directory ---------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn a_second_run_into_a_busy_out_fails_at_once_naming_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let (s, out_dir) = (scenarios(&dir, 3), dir.path().join("o"));
    let gate = Gate::default();
    let model = FaultServer::start(vec![Fault::Gated(gate.clone(), Box::new(Fault::ok(complete())))]).await;
    let first = rollout_command(&model.url(), DEMO, &s, &out_dir, &[]).spawn().unwrap();
    let first_pid = first.id().unwrap();
    wait_until(|| !model.requests().is_empty()).await;

    let second = tokio::time::timeout(Duration::from_secs(30), rollout(&model.url(), DEMO, &s, &out_dir, &[])).await.expect("the second run fails at once");
    assert!(!second.status.success());
    let err = stderr(&second);
    assert!(err.contains(&format!("is being written by another train-agent process (PID {first_pid}: ")), "{err}");
    assert!(err.contains(&format!("kill {first_pid}")) && err.contains("hint:"), "{err}");
    assert_eq!(model.requests().len(), 1, "the second run asked the model nothing");

    gate.open();
    let first = tokio::time::timeout(Duration::from_secs(60), first.wait_with_output()).await.unwrap().unwrap();
    assert!(first.status.success(), "{}", stderr(&first));
    let all = trajectories(&out_dir);
    assert_eq!(all.len(), 3, "no trajectory lost");
    assert!(all.iter().all(|t| t.outcome == Outcome::Completed), "{all:?}");
    // The first run's lock ended with it.
    let again = rollout(&model.url(), DEMO, &s, &out_dir, &[]).await;
    assert!(again.status.success(), "{}", stderr(&again));
}

// ---- MCP servers that fail ---------------------------------------------------------------------

/// The demo server answers `initialize` and `tools/list` before the first tool call.
const DISCOVERY_MESSAGES: usize = 2;

#[tokio::test(flavor = "multi_thread")]
async fn an_mcp_server_killed_mid_episode_is_restarted_once() {
    let dir = tempfile::tempdir().unwrap();
    let model = list_then_complete().await;
    let killed = mcp_fault_command(McpFault::Kill { after: DISCOVERY_MESSAGES });
    let out = rollout(&model.url(), &killed, &scenarios(&dir, 1), &dir.path().join("o"), &["--mcp-timeout", "5"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("reconnecting once"), "{}", stderr(&out));
    let t = &trajectories(&dir.path().join("o"))[0];
    assert_eq!(t.outcome, Outcome::Completed, "{:?}", t.error);
    let tool = t.messages.iter().find(|m| m.role == Role::Tool).unwrap().content.clone().unwrap();
    assert!(tool.contains("employees"), "the retried call answered: {tool}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_mcp_server_that_stays_down_errors_the_episode_and_a_rerun_replays_it() {
    let dir = tempfile::tempdir().unwrap();
    let (s, out_dir) = (scenarios(&dir, 1), dir.path().join("o"));
    let model = list_then_complete().await;
    let crashed = mcp_fault_command(McpFault::Crash { after: DISCOVERY_MESSAGES });
    let first = rollout(&model.url(), &crashed, &s, &out_dir, &["--mcp-timeout", "5"]).await;
    assert!(!first.status.success(), "{}", stderr(&first));
    assert!(stderr(&first).contains("every episode failed"), "{}", stderr(&first));
    let t = &trajectories(&out_dir)[0];
    assert_eq!(t.outcome, Outcome::Error);
    assert!(t.error.as_deref().unwrap().contains("MCP server failed during `list_tables`"), "{:?}", t.error);

    let second = rollout(&model.url(), DEMO, &s, &out_dir, &[]).await;
    assert!(second.status.success(), "{}", stderr(&second));
    assert_eq!(trajectories(&out_dir)[0].outcome, Outcome::Completed);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stalled_mcp_server_times_out_the_call_and_the_model_sees_it() {
    let dir = tempfile::tempdir().unwrap();
    let model = list_then_complete().await;
    let stalled = mcp_fault_command(McpFault::Stall { after: DISCOVERY_MESSAGES });
    let out = rollout(&model.url(), &stalled, &scenarios(&dir, 1), &dir.path().join("o"), &["--mcp-timeout", "1"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let t = &trajectories(&dir.path().join("o"))[0];
    assert_eq!(t.outcome, Outcome::Completed, "{:?}", t.error);
    let tool = t.messages.iter().find(|m| m.role == Role::Tool).unwrap().content.clone().unwrap();
    assert!(tool.contains("did not answer within"), "{tool}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_mcp_server_writing_garbage_ends_the_episode_with_an_error_not_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    let model = list_then_complete().await;
    let corrupt = mcp_fault_command(McpFault::Corrupt { after: DISCOVERY_MESSAGES });
    let run = rollout_command(&model.url(), &corrupt, &scenarios(&dir, 1), &dir.path().join("o"), &["--mcp-timeout", "2"]).output();
    let out = tokio::time::timeout(Duration::from_secs(60), run).await.expect("no hang").unwrap();
    let t = &trajectories(&dir.path().join("o"))[0];
    // The garbage replaced the answer: the call fails (a timeout the model sees, or a lost
    // connection that ends the episode), and the run says so.
    let tool_error = t.messages.iter().any(|m| m.role == Role::Tool && m.content.as_deref().is_some_and(|c| c.starts_with("Error:")));
    assert!(tool_error || t.outcome == Outcome::Error, "{t:?}\n{}", stderr(&out));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hanging_mcp_server_is_bounded_by_the_mcp_timeout_and_does_not_outlive_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let model = FaultServer::start(vec![Fault::ok(complete())]).await;
    let cases = [
        (ScriptedMcp::HangToolsList, "tools", "tools/list on MCP server"),
        (ScriptedMcp::HangInitialize, "tools", "did not finish `initialize` within 2s"),
        (ScriptedMcp::HangToolsList, "rollout", "tools/list on MCP server"),
        (ScriptedMcp::HangInitialize, "rollout", "did not finish `initialize` within 2s"),
    ];
    for (i, (mode, command, says)) in cases.into_iter().enumerate() {
        let pids = dir.path().join(format!("pids-{i}"));
        let server = scripted_mcp_command(mode, &pids);
        let mut cmd = if command == "tools" {
            let mut c = tokio::process::Command::new(bin());
            c.args(["tools", "--server", &server, "--mcp-timeout", "2"]).kill_on_drop(true);
            c
        } else {
            rollout_command(&model.url(), &server, &scenarios(&dir, 1), &dir.path().join(format!("o-{i}")), &["--mcp-timeout", "2"])
        };
        let t0 = Instant::now();
        let out = tokio::time::timeout(Duration::from_secs(40), cmd.output()).await.unwrap_or_else(|_| panic!("{command} {mode:?} ran past 40 s")).unwrap();
        let err = stderr(&out);
        assert!(!out.status.success(), "{command} {mode:?}: {err}");
        assert!(t0.elapsed() < Duration::from_secs(20), "{command} {mode:?} took {:?}", t0.elapsed());
        assert!(err.contains(says) && err.contains("within 2s"), "{command} {mode:?}: {err}");
        let deadline = Instant::now() + Duration::from_secs(3);
        while !pids_alive(&pids).is_empty() {
            assert!(Instant::now() < deadline, "{command} {mode:?}: server processes {:?} outlived the command", pids_alive(&pids));
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_result_over_the_message_limit_is_a_tool_error_at_once_not_a_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let model = FaultServer::start(vec![Fault::ok(tool_calls(&[("fetch_all", "{}")])), Fault::ok(complete())]).await;
    let server = scripted_mcp_command(ScriptedMcp::BigResult { bytes: 17 * 1024 * 1024 }, &pids);
    let t0 = Instant::now();
    let out = rollout(&model.url(), &server, &scenarios(&dir, 1), &dir.path().join("o"), &["--mcp-timeout", "40"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(t0.elapsed() < Duration::from_secs(30), "the call waited for the timeout: {:?}", t0.elapsed());
    let t = &trajectories(&dir.path().join("o"))[0];
    assert_eq!(t.outcome, Outcome::Completed, "{:?}", t.error);
    let tool = t.messages.iter().find(|m| m.role == Role::Tool).unwrap().content.clone().unwrap();
    assert!(tool.contains("too large") && tool.contains("16 MiB"), "{tool}");
}

// ---- server text on the terminal ---------------------------------------------------------------

/// Escape sequences in what a server sends (its name, tool names and descriptions, error
/// messages) reach the terminal neutralised: in `tools`, in errors and in the isolation line.
#[tokio::test(flavor = "multi_thread")]
async fn server_text_reaches_the_terminal_without_escape_sequences() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let raw = |text: &str| text.contains('\u{1b}') || text.contains('\u{7}');
    let escapes = scripted_mcp_command(ScriptedMcp::Escapes, &pids);
    let out = tokio::process::Command::new(bin()).args(["tools", "--server", &escapes]).output().await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout.contains("scripted\u{fffd}") && stdout.contains("fetch_all\u{fffd}") && stdout.contains("\u{fffd}Fetches everything."), "{stdout}");
    assert!(!raw(&stdout) && !raw(&stderr(&out)), "{stdout:?}");

    let failing = scripted_mcp_command(ScriptedMcp::EscapesInError, &pids);
    let out = tokio::process::Command::new(bin()).args(["tools", "--server", &failing]).output().await.unwrap();
    let err = stderr(&out);
    assert!(!out.status.success() && err.contains("listing failed\u{fffd}\u{fffd}"), "{err}");
    assert!(!raw(&err), "{err:?}");

    let model = FaultServer::start(vec![Fault::ok(complete())]).await;
    let out = rollout(&model.url(), &escapes, &scenarios(&dir, 1), &dir.path().join("o"), &[]).await;
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("isolation: episode") && err.contains("fetch_all\u{fffd}"), "{err}");
    assert!(!raw(&err) && !raw(&String::from_utf8_lossy(&out.stdout)), "{err:?}");
}

// ---- item 7: credentials in URLs -------------------------------------------------------------

const SECRET: &str = "s3cret-value-42";

#[tokio::test(flavor = "multi_thread")]
async fn url_credentials_never_reach_output_logs_or_trajectories() {
    // `tools` on an HTTP server whose URL carries a key.
    let (addr, server) = demo_http().await;
    let url = format!("http://{addr}/mcp?api_key={SECRET}&team=a");
    let out = tokio::process::Command::new(bin()).args(["tools", "--server", &url]).output().await.unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("api_key=***&team=a") && !stdout.contains(SECRET), "{stdout}");
    server.abort();

    // A model URL with userinfo that cannot be reached: stderr and trajectories.
    let dir = tempfile::tempdir().unwrap();
    let down = FaultServer::start(vec![Fault::Close]).await;
    let model_url = down.url().replace("http://", &format!("http://user:{SECRET}@"));
    let out = rollout(&model_url, DEMO, &scenarios(&dir, 1), &dir.path().join("o"), &["--model-retries", "0"]).await;
    assert!(stderr(&out).contains("***@127.0.0.1"), "{}", stderr(&out));
    assert_no_secret(&out, &dir.path().join("o"));

    // An MCP server with a token in its URL that goes away mid-run: the tool error the model
    // sees, the trajectory and the logs name it without the token.
    let (out, seen) = rollout_while_the_mcp_server_goes_away(&dir, &format!("?token={SECRET}")).await;
    assert!(seen.contains("token=***"), "the failure names the server: {seen}");
    assert_no_secret(&out, &dir.path().join("m"));
}

/// A `rollout` (into `DIR/m`) against the demo server over HTTP at `/mcp{query}`, which goes
/// away after the model's first request: the command's output, and the failed episode's error
/// and messages as one text.
async fn rollout_while_the_mcp_server_goes_away(dir: &tempfile::TempDir, query: &str) -> (std::process::Output, String) {
    let (addr, server) = demo_http().await;
    let gate = Gate::default();
    let model = FaultServer::start(vec![Fault::Gated(gate.clone(), Box::new(Fault::ok(tool_calls(&[("list_tables", "{}")])))), Fault::ok(complete())]).await;
    let mcp_url = format!("http://{addr}/mcp{query}");
    let run = tokio::spawn(rollout_command(&model.url(), &mcp_url, &scenarios(dir, 1), &dir.path().join("m"), &["--mcp-timeout", "3"]).output());
    wait_until(|| !model.requests().is_empty()).await;
    server.abort();
    gate.open();
    let out = run.await.unwrap().unwrap();
    let t = &trajectories(&dir.path().join("m"))[0];
    (out, format!("{:?} {:?}", t.error, t.messages))
}

/// Credentials under other names than `token` (`passwd`, `jwt`, `bearer`, `hmac`, an OAuth
/// fragment) in an MCP URL whose server goes away mid-run.
#[tokio::test(flavor = "multi_thread")]
async fn url_credentials_by_any_name_never_reach_output_logs_or_trajectories() {
    let dir = tempfile::tempdir().unwrap();
    let query = format!("?passwd=P{SECRET}&jwt=J{SECRET}&bearer=B{SECRET}&hmac=H{SECRET}&page=2#token=T{SECRET}&id_token=I{SECRET}");
    let (out, seen) = rollout_while_the_mcp_server_goes_away(&dir, &query).await;
    assert!(seen.contains("passwd=***&jwt=***&bearer=***&hmac=***&page=2#token=***&id_token=***"), "the failure names the server: {seen}");
    assert_no_secret(&out, &dir.path().join("m"));
    let report = tokio::process::Command::new(bin()).arg("report").arg(dir.path().join("m")).output().await.unwrap();
    assert!(report.status.success(), "{}", stderr(&report));
    assert_no_secret(&report, &dir.path().join("m"));
}

#[tokio::test(flavor = "multi_thread")]
async fn mcp_connection_errors_are_plain_and_actionable() {
    // Nothing listens: no rmcp type names, no secret.
    let out = tokio::process::Command::new(bin()).args(["tools", "--server", &format!("http://127.0.0.1:9/mcp?key={SECRET}")]).output().await.unwrap();
    let err = stderr(&out);
    assert!(!out.status.success());
    assert!(!err.contains("rmcp::") && !err.contains("Transport [") && !err.contains("reqwest::") && !err.contains(SECRET), "{err}");
    assert!(!err.contains(" ERROR "), "the plain error alone, no transport's log line beside it: {err}");
    assert!(err.contains("key=***") && err.contains("hint:"), "{err}");

    // A server that wants a token: the hint names a flag that exists.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(ta_demo_server::serve_http(ta_demo_server::Database::demo(), listener, Some("tok".into())));
    let out = tokio::process::Command::new(bin()).args(["tools", "--server", &format!("http://{addr}/mcp")]).env_remove("MCP_BEARER_TOKEN").output().await.unwrap();
    let err = stderr(&out);
    assert!(err.contains("--bearer-token-env") && !err.contains("pass --bearer-token"), "{err}");
    server.abort();

    // A missing working directory is named as such.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("mcp.json");
    let missing = dir.path().join("no-such-dir");
    std::fs::write(&config, json!({"mcpServers": {"demo": {"command": bin(), "args": ["demo-server"], "cwd": missing}}}).to_string()).unwrap();
    let out = tokio::process::Command::new(bin()).arg("tools").arg("--mcp-config").arg(&config).output().await.unwrap();
    let err = stderr(&out);
    assert!(err.contains("working directory") && err.contains("no-such-dir") && !err.contains("not found on PATH"), "{err}");
}

// ---- minor items -----------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn colours_only_on_a_terminal_and_zero_max_turns_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    // A 500 then success logs a retry warning; stderr is a pipe here, not a terminal.
    let server = FaultServer::start(vec![Fault::status(500, "hiccup"), Fault::ok(complete())]).await;
    let out = rollout(&server.url(), DEMO, &scenarios(&dir, 1), &dir.path().join("o"), &[]).await;
    let err = stderr(&out);
    assert!(out.status.success() && err.contains("retrying"), "{err}");
    assert!(!err.contains('\u{1b}'), "ANSI codes in redirected stderr: {err:?}");

    let out = rollout(&server.url(), DEMO, &scenarios(&dir, 1), &dir.path().join("z"), &["--max-turns", "0"]).await;
    assert!(!out.status.success() && stderr(&out).contains("--max-turns"), "{}", stderr(&out));
    let zero = dir.path().join("zero.jsonl");
    std::fs::write(&zero, "{\"task\": \"t\", \"max_turns\": 0}\n").unwrap();
    let out = rollout(&server.url(), DEMO, &zero, &dir.path().join("z"), &[]).await;
    assert!(stderr(&out).contains("zero.jsonl:1: invalid scenario: \"max_turns\" is 0"), "{}", stderr(&out));
}

#[tokio::test(flavor = "multi_thread")]
async fn missing_inputs_are_named_once_and_plainly() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-dataset");
    let out = tokio::process::Command::new(bin())
        .args(["sft", "--base-model", "smollm2-135m-instruct", "--dataset", missing.to_str().unwrap(), "--out"])
        .arg(dir.path().join("s"))
        .output()
        .await
        .unwrap();
    let err = stderr(&out);
    assert!(!out.status.success() && err.contains(&format!("no dataset at {}", missing.display())) && err.contains("hint:"), "{err}");
    assert!(!err.contains("Traceback"), "said before the trainer starts: {err}");

    let out = tokio::process::Command::new(bin())
        .args(["train", "--server", DEMO, "--base-model", "smollm2-135m-instruct", "--scenarios", "no-such.jsonl", "--out"])
        .arg(dir.path().join("t"))
        .output()
        .await
        .unwrap();
    let err = stderr(&out);
    assert!(!out.status.success() && err.contains("cannot read scenarios from no-such.jsonl"), "{err}");
    assert_eq!(err.matches("os error 2").count(), 1, "the cause once, not again after the message that quotes it: {err}");

    // An adapter to evaluate that is not there, and a synthesis of no tasks: refused as flags.
    let gone = dir.path().join("run/final");
    let out = tokio::process::Command::new(bin())
        .args(["eval", "--server", DEMO, "--model", gone.to_str().unwrap(), "--scenarios", "s.jsonl", "--out", "e"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains(&format!("no file or directory {}", gone.display())), "{}", stderr(&out));
    // The walk wrote an empty file for `--n 0`; generate asked the teacher for nothing.
    for (command, teacher) in [("synth", None), ("walk", None), ("generate", Some("local/smollm2-135m-instruct"))] {
        let written = dir.path().join(command);
        let mut cmd = tokio::process::Command::new(bin());
        cmd.args(["scenarios", command, "--server", DEMO, "--n", "0", "--out"]).arg(&written);
        if let Some(t) = teacher {
            cmd.args(["--teacher", t]);
        }
        let out = cmd.output().await.unwrap();
        assert_eq!(out.status.code(), Some(2), "{command}: {}", stderr(&out));
        assert!(stderr(&out).contains("--n") && stderr(&out).contains("1 or more") && !written.exists(), "{command}: {}", stderr(&out));
    }
}

// ---- helpers ---------------------------------------------------------------------------------

/// A model that calls `list_tables`, then completes with "9" (and repeats that).
async fn list_then_complete() -> FaultServer {
    FaultServer::start(vec![Fault::ok(tool_calls(&[("list_tables", "{}")])), Fault::ok(complete())]).await
}

fn complete() -> common::Reply {
    tool_calls(&[("complete_task", r#"{"summary": "9"}"#)])
}

const DEMO: &str = "train-agent demo-server";

fn scenarios(dir: &tempfile::TempDir, n: usize) -> PathBuf {
    let path = dir.path().join(format!("s{n}.jsonl"));
    let lines: String = (0..n).map(|i| format!("{{\"id\": \"s{i}\", \"task\": \"How many departments are there?\", \"expected\": 9}}\n")).collect();
    std::fs::write(&path, lines).unwrap();
    path
}

fn rollout_command(url: &str, server: &str, scenarios: &Path, out: &Path, extra: &[&str]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(bin());
    cmd.args(["rollout", "--server", server, "--base-url", url, "--model", "m", "--max-turns", "3", "--concurrency", "1"])
        .args(extra)
        // Short limits through the environment, so a test's flags can override them.
        .env("TRAIN_AGENT_MODEL_TIMEOUT", "5")
        .env("TRAIN_AGENT_MODEL_DEADLINE", "10")
        .arg("--scenarios")
        .arg(scenarios)
        .arg("--out")
        .arg(out)
        .env_remove("NO_COLOR")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    cmd
}

async fn rollout(url: &str, server: &str, scenarios: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    rollout_command(url, server, scenarios, out, extra).output().await.unwrap()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn trajectories(out: &Path) -> Vec<Trajectory> {
    ta_types::trajectory::read_trajectories(&out.join("trajectories.jsonl")).unwrap()
}

/// The demo server over streamable HTTP, in this process; abort the task to take it down.
async fn demo_http() -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    (addr, tokio::spawn(async move { ta_demo_server::serve_http(ta_demo_server::Database::demo(), listener, None).await.unwrap() }))
}

async fn wait_until(cond: impl Fn() -> bool) {
    for _ in 0..300 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("condition not met within 30 s");
}

fn assert_no_secret(out: &std::process::Output, dir: &Path) {
    assert!(!stderr(out).contains(SECRET) && !String::from_utf8_lossy(&out.stdout).contains(SECRET), "secret on the terminal: {}", stderr(out));
    for entry in walk(dir) {
        let text = std::fs::read_to_string(&entry).unwrap_or_default();
        assert!(!text.contains(SECRET), "secret leaked into {}", entry.display());
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten() {
        let p = e.unwrap().path();
        if p.is_dir() { out.extend(walk(&p)) } else { out.push(p) }
    }
    out
}
