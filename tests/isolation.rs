//! Rollout isolation against third-party servers that change state: npm's
//! `@modelcontextprotocol/server-memory` (a knowledge graph in the JSONL file `MEMORY_FILE_PATH`)
//! and PyPI's `mcp-server-sqlite` (`write_query` on `--db-path`), with a model server that
//! answers in OpenAI's documented format from a script chosen by the episode's task.
//!
//! Every claim is also shown failing where it should: `--isolate none` leaks one episode's writes
//! into another and makes rewards depend on the order episodes ran in.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::routing::post;
use common::{Reply, bin, text, tool_calls};
use indicatif::ProgressBar;
use serde_json::Value;
use ta_chat::{ChatClient, HttpLimits};
use ta_mcp::{ClientOptions, ServerSpec, ToolCatalog};
use ta_rollout::isolation::{Isolate, Isolation, IsolationSettings};
use ta_rollout::job::Job;
use ta_rollout::runner::run_jobs;
use ta_rollout::{AgentConfig, McpTools};
use ta_types::trajectory::{GroupRef, TrajectoryWriter};
use ta_types::{Outcome, Role, Scenario, Trajectory};

/// A model server whose reply to a request is `scripts[task][n]`: `task` is the request's first
/// user message and `n` the number of assistant messages in it. With `lockstep`, the reply for
/// turn `n` waits until every scripted task has asked for its turn `n` (at most 10 s), so that
/// concurrent episodes interleave: every episode's first call runs before anyone's second.
#[derive(Clone)]
struct ByTask {
    scripts: Arc<HashMap<String, Vec<Reply>>>,
    lockstep: bool,
    reached: Arc<Mutex<HashMap<String, usize>>>,
}

impl ByTask {
    fn new(scripts: Vec<(&str, Vec<Reply>)>, lockstep: bool) -> Self {
        let scripts = scripts.into_iter().map(|(t, s)| (t.to_string(), s)).collect();
        ByTask { scripts: Arc::new(scripts), lockstep, reached: Default::default() }
    }

    async fn serve(&self) -> String {
        let app = axum::Router::new().route("/v1/chat/completions", post(answer)).with_state(self.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        url
    }
}

async fn answer(State(m): State<ByTask>, Json(body): Json<Value>) -> Json<Value> {
    let messages = body["messages"].as_array().unwrap();
    let task = messages.iter().find(|x| x["role"] == "user").and_then(|x| x["content"].as_str()).unwrap().to_string();
    let turn = messages.iter().filter(|x| x["role"] == "assistant").count();
    m.reached.lock().unwrap().insert(task.clone(), turn);
    if m.lockstep {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            let reached = m.reached.lock().unwrap().clone();
            if m.scripts.keys().all(|t| reached.get(t).is_some_and(|&n| n >= turn)) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    let reply = m.scripts.get(&task).and_then(|s| s.get(turn)).cloned().unwrap_or_else(|| text("(script exhausted)"));
    Json(reply.1)
}

const ADMIN: &str = "Record in memory that Alice is an admin.";
const VIEWER: &str = "Record in memory that Alice is a viewer.";

/// Creates Alice with `role`, reads the whole graph back, and finishes.
fn record_alice(role: &str) -> Vec<Reply> {
    let entity = format!(r#"{{"entities": [{{"name": "Alice", "entityType": "person", "observations": ["role: {role}"]}}]}}"#);
    vec![
        tool_calls(&[("create_entities", &entity)]),
        tool_calls(&[("read_graph", "{}")]),
        tool_calls(&[("complete_task", &format!(r#"{{"summary": "Alice is recorded as {role}."}}"#))]),
    ]
}

fn scenarios() -> Vec<Scenario> {
    let text = format!(
        r#"[{{"id": "admin", "task": "{ADMIN}", "expected_state": {{"contains": "role: admin"}}}},
            {{"id": "viewer", "task": "{VIEWER}", "expected_state": {{"contains": "role: viewer"}}}}]"#
    );
    ta_types::scenario::parse_scenarios(&text, "t").unwrap()
}

/// server-memory's program, installed on first use into the test cache (`None`: skipped).
fn memory_program(test: &str) -> Option<PathBuf> {
    ta_testkit::SERVER_MEMORY.path(test)
}

/// server-memory at `program` with its graph in `{workdir}`; `mark` tags the processes (see
/// [`marked`]).
fn memory_server(program: &Path, mark: &str) -> ServerSpec {
    ServerSpec::parse(&format!("env TA_ISOLATION_MARK={mark} MEMORY_FILE_PATH={{workdir}}/memory.jsonl {}", program.display())).unwrap()
}

fn settings(isolate: Isolate, pool: usize) -> IsolationSettings {
    IsolationSettings { isolate: Some(isolate), capture_state: Some("cat memory.jsonl 2>/dev/null || true".into()), pool, ..Default::default() }
}

/// Plays `jobs` in that order against server-memory isolated by `isolate`.
async fn play(memory: &Path, isolate: Isolate, jobs: Vec<Job>, concurrency: usize, lockstep: bool) -> Vec<Trajectory> {
    let model = ByTask::new(vec![(ADMIN, record_alice("admin")), (VIEWER, record_alice("viewer"))], lockstep);
    let url = model.serve().await;
    let chat = ChatClient::new(&url, None, HttpLimits::DEFAULT.with_request(Duration::from_secs(30)));
    let (iso, discovery) = Isolation::connect(&settings(isolate, 2), memory_server(memory, "play"), ClientOptions::default()).await.unwrap();
    assert_eq!(iso.mode(), isolate);
    let iso = Arc::new(iso);
    let tools = McpTools::isolated(iso.clone(), ToolCatalog::from_discovery(&discovery));
    let dir = tempfile::tempdir().unwrap();
    let mut writer = TrajectoryWriter::append(&dir.path().join("t.jsonl")).unwrap();
    let cfg = AgentConfig { max_turns: 5, record_tokens: false, ..Default::default() };
    let result = run_jobs(&chat, "m", &tools, "S", jobs, &cfg, concurrency, &mut writer, &ProgressBar::hidden(), std::future::pending()).await.unwrap();
    iso.shutdown().await;
    let mut out = result.trajectories;
    for t in &out {
        assert_eq!(t.outcome, Outcome::Completed, "{:?}", t.error);
    }
    ta_reward::score_all(&ta_reward::RewardConfig::default(), &scenarios(), &mut out);
    out.sort_by(|a, b| a.scenario_id.cmp(&b.scenario_id));
    out
}

fn jobs(ids: &[&str]) -> Vec<Job> {
    let all = scenarios();
    ids.iter().enumerate().map(|(i, id)| Job { scenario: all.iter().find(|s| s.id == *id).unwrap().clone(), group: GroupRef { step: 0, index: i as u32 } }).collect()
}

/// What `read_graph` returned in `t`.
fn graph_seen(t: &Trajectory) -> &str {
    t.messages.iter().find(|m| m.role == Role::Tool && m.name.as_deref() == Some("read_graph")).and_then(|m| m.content.as_deref()).unwrap()
}

fn own_and_other(t: &Trajectory) -> (&'static str, &'static str) {
    if t.scenario_id == "admin" { ("role: admin", "role: viewer") } else { ("role: viewer", "role: admin") }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_episodes_never_see_each_others_writes_and_none_shows_the_leak() {
    let Some(memory) = memory_program("concurrent_episodes_never_see_each_others_writes") else { return };
    // Both episodes create Alice (with conflicting roles) before either reads the graph.
    let isolated = play(&memory, Isolate::Episode, jobs(&["admin", "viewer"]), 2, true).await;
    for t in &isolated {
        let (own, other) = own_and_other(t);
        assert!(graph_seen(t).contains(own) && !graph_seen(t).contains(other), "{}: {}", t.scenario_id, graph_seen(t));
        let state = t.captured_state.as_deref().unwrap();
        assert!(state.contains(own) && !state.contains(other), "{}: {state}", t.scenario_id);
        assert_eq!(t.reward_parts.state, Some(1.0));
    }

    let shared = play(&memory, Isolate::None, jobs(&["admin", "viewer"]), 2, true).await;
    // One server: server-memory keeps the first Alice and ignores the second (or, when the two
    // writes race, keeps both), so some episode reads the other's write.
    let seen: Vec<&str> = shared.iter().map(graph_seen).collect();
    assert!(shared.iter().any(|t| graph_seen(t).contains(own_and_other(t).1)), "no leak without isolation? {seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_order_of_episodes_changes_no_reward_unless_they_share_the_server() {
    let Some(memory) = memory_program("the_order_of_episodes_changes_no_reward") else { return };
    let rewards = |ts: &[Trajectory]| ts.iter().map(|t| (t.scenario_id.clone(), t.reward.unwrap())).collect::<Vec<_>>();
    let forward = play(&memory, Isolate::Episode, jobs(&["admin", "viewer"]), 1, false).await;
    let backward = play(&memory, Isolate::Episode, jobs(&["viewer", "admin"]), 1, false).await;
    assert_eq!(rewards(&forward), rewards(&backward));
    assert!(forward.iter().all(|t| t.reward_parts.state == Some(1.0)));

    let forward = play(&memory, Isolate::None, jobs(&["admin", "viewer"]), 1, false).await;
    let backward = play(&memory, Isolate::None, jobs(&["viewer", "admin"]), 1, false).await;
    assert_ne!(rewards(&forward), rewards(&backward), "sharing one server makes the rewards depend on the order");
    let state = |ts: &[Trajectory], id: &str| ts.iter().find(|t| t.scenario_id == id).unwrap().reward_parts.state;
    assert_eq!((state(&forward, "admin"), state(&forward, "viewer")), (Some(1.0), Some(0.0)), "the first to write wins");
    assert_eq!((state(&backward, "admin"), state(&backward, "viewer")), (Some(0.0), Some(1.0)));
}

/// Pids of live processes whose environment holds `TA_ISOLATION_MARK=mark`.
fn marked(mark: &str) -> Vec<u32> {
    let needle = format!("TA_ISOLATION_MARK={mark}");
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let zombie = stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z'));
            !zombie && std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| env.split(|&b| b == 0).any(|kv| kv == needle.as_bytes()))
        })
        .collect()
}

async fn wait_for(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_warm_pool_is_bounded_and_leaves_no_process_behind() {
    let Some(memory) = memory_program("the_warm_pool_is_bounded_and_leaves_no_process_behind") else { return };
    for how in ["shutdown", "drop"] {
        let mark = format!("pool-{how}-{}", std::process::id());
        let (iso, _) = Isolation::connect(&settings(Isolate::Episode, 3), memory_server(&memory, &mark), ClientOptions::default()).await.unwrap();
        // The shared server plus a full pool of 3, and no more.
        wait_for("the pool to fill", Duration::from_secs(60), || marked(&mark).len() == 4).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(marked(&mark).len(), 4, "the pool holds at most 3 servers");
        match how {
            "shutdown" => iso.shutdown().await,
            _ => drop(iso),
        }
        wait_for(&format!("every server to stop after {how}"), Duration::from_secs(15), || marked(&mark).is_empty()).await;
    }
}

const SEED_DB: &str = "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL); INSERT INTO customers (name) VALUES ('Alice'), ('Bob');";
const ADD_CAROL: &str = "Add a customer named Carol.";

/// Prints the customers' names in `shop.db`, one a line: the state the reward is checked against
/// (Python's `sqlite3` module, so no `sqlite3` shell is needed).
const CAPTURE_NAMES: &str =
    "python3 -c \"import sqlite3; print(*(r[0] for r in sqlite3.connect('shop.db').execute('SELECT name FROM customers ORDER BY name')), sep=chr(10))\"";

/// `train-agent rollout` on mcp-server-sqlite (`server`), each episode on its own copy of
/// `shop.db`, the reward from `expected_state` against the names in it. Returns the trajectory.
async fn rollout_add_carol(server: &Path, script: Vec<Reply>) -> Trajectory {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shop.db");
    rusqlite::Connection::open(&db).unwrap().execute_batch(SEED_DB).unwrap();
    let scenarios = dir.path().join("s.jsonl");
    std::fs::write(&scenarios, format!(r#"{{"id": "carol", "task": "{ADD_CAROL}", "expected_state": {{"regex": "(?m)^Carol$"}}}}"#)).unwrap();
    let model = ByTask::new(vec![(ADD_CAROL, script)], false);
    let url = model.serve().await;
    let out = dir.path().join("out");
    let run = tokio::process::Command::new(bin())
        .args(["rollout", "--server", &format!("{} --db-path {{workdir}}/shop.db", server.display()), "--server-state"])
        .arg(&db)
        .args(["--capture-state", CAPTURE_NAMES, "--base-url", &url, "--model", "m", "--scenarios"])
        .arg(&scenarios)
        .arg("--out")
        .arg(&out)
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert!(
        stderr.contains("isolation: episode (tools that do not declare readOnlyHint may change state: read_query, write_query"),
        "the choice and its reason are logged: {stderr}"
    );
    let seed: i64 = rusqlite::Connection::open(&db).unwrap().query_row("SELECT count(*) FROM customers", [], |r| r.get(0)).unwrap();
    assert_eq!(seed, 2, "the episode wrote to its copy, never to --server-state");
    ta_types::trajectory::read_trajectories(&out.join("trajectories.jsonl")).unwrap().remove(0)
}

#[tokio::test]
async fn a_state_changing_task_is_rewarded_for_the_change_not_the_claim() {
    let Some(server) = ta_testkit::MCP_SERVER_SQLITE.path("a_state_changing_task_is_rewarded_for_the_change_not_the_claim") else { return };
    let worker = rollout_add_carol(
        &server,
        vec![
            tool_calls(&[("write_query", r#"{"query": "INSERT INTO customers (name) VALUES ('Carol')"}"#)]),
            tool_calls(&[("complete_task", r#"{"summary": "Added Carol."}"#)]),
        ],
    )
    .await;
    let claimer = rollout_add_carol(&server, vec![tool_calls(&[("complete_task", r#"{"summary": "Added Carol."}"#)])]).await;

    assert_eq!(worker.captured_state.as_deref(), Some("Alice\nBob\nCarol\n"));
    assert_eq!(claimer.captured_state.as_deref(), Some("Alice\nBob\n"));
    assert_eq!((worker.reward_parts.state, claimer.reward_parts.state), (Some(1.0), Some(0.0)));
    assert_eq!(worker.final_answer, claimer.final_answer, "both claim the same");
    assert!(worker.reward.unwrap() > claimer.reward.unwrap() + 0.9, "{:?} vs {:?}", worker.reward, claimer.reward);
}

#[tokio::test]
async fn expected_state_without_a_capture_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let scenarios = dir.path().join("s.jsonl");
    std::fs::write(&scenarios, r#"{"id": "x", "task": "t", "expected_state": "Carol"}"#).unwrap();
    let run = std::process::Command::new(bin())
        .args(["rollout", "--server", "mcp-server-sqlite --db-path /nonexistent", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--scenarios"])
        .arg(&scenarios)
        .arg("--out")
        .arg(dir.path().join("out"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success());
    assert!(stderr.contains("has expected_state, but no --capture-state was given") && stderr.contains("hint:"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_server_is_reset_before_each_episode_and_held_by_one_at_a_time() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(ta_demo_server::serve_http(ta_demo_server::Database::demo(), listener, None));
    let spec = ServerSpec::parse(&format!("http://{addr}{}", ta_demo_server::MCP_PATH)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("hooks.log");
    let list_then_finish = || vec![tool_calls(&[("list_tables", "{}")]), tool_calls(&[("complete_task", r#"{"summary": "done"}"#)])];
    for (isolate, order, resets) in [(Isolate::Episode, ["a", "a", "b", "b"], 4), (Isolate::Group, ["a", "a", "b", "b"], 2)] {
        std::fs::write(&log, "").unwrap();
        let settings = IsolationSettings {
            isolate: Some(isolate),
            reset_command: Some(format!("echo reset {{episode_id}} >> {}", log.display())),
            capture_state: Some(format!("echo captured >> {}; echo ok", log.display())),
            ..Default::default()
        };
        let (iso, discovery) = Isolation::connect(&settings, spec.clone(), ClientOptions::default()).await.unwrap();
        let iso = Arc::new(iso);
        let tools = McpTools::isolated(iso.clone(), ToolCatalog::from_discovery(&discovery));
        let model = ByTask::new(vec![("task a", list_then_finish()), ("task b", list_then_finish())], false);
        let chat = ChatClient::new(&model.serve().await, None, HttpLimits::DEFAULT.with_request(Duration::from_secs(30)));
        let scenario = |id: &str| ta_types::scenario::parse_scenarios(&format!(r#"[{{"id": "{id}", "task": "task {id}"}}]"#), "t").unwrap().remove(0);
        let jobs = order.iter().enumerate().map(|(i, id)| Job { scenario: scenario(id), group: GroupRef { step: 0, index: i as u32 } }).collect();
        let mut writer = TrajectoryWriter::append(&dir.path().join(format!("{isolate}.jsonl"))).unwrap();
        let cfg = AgentConfig { max_turns: 3, record_tokens: false, ..Default::default() };
        // All four in flight at once: only the lock keeps them apart.
        let result = run_jobs(&chat, "m", &tools, "S", jobs, &cfg, 4, &mut writer, &ProgressBar::hidden(), std::future::pending()).await.unwrap();
        iso.shutdown().await;
        assert!(result.trajectories.iter().all(|t| t.outcome == Outcome::Completed && t.captured_state.as_deref() == Some("ok\n")));
        let lines: Vec<String> = std::fs::read_to_string(&log).unwrap().lines().map(|l| l.split(' ').next().unwrap().to_string()).collect();
        assert_eq!(lines.iter().filter(|l| *l == "reset").count(), resets, "{isolate}: {lines:?}");
        assert_eq!(lines.iter().filter(|l| *l == "captured").count(), 4, "{isolate}: {lines:?}");
        if isolate == Isolate::Episode {
            // Never two episodes on the server at once: reset, episode, capture, then the next.
            assert_eq!(lines, ["reset", "captured"].repeat(4), "{lines:?}");
        }
    }
}
