//! What rollout isolation costs per episode (issue 16): starting a server, copying its state,
//! and the rollout phase of a demo-like GRPO step with and without the warm pool.
//!
//! - start: `McpClient::connect` (spawn + `initialize`) of a fresh stdio server, median of 10;
//! - copy: `Workdir::create` of a state file (reflink where the filesystem allows, else a copy);
//! - phase: the demo CPU profile's GRPO step shape (3 scenarios x 4 rollouts, all 12 in flight,
//!   6 model turns each with one tool call between them) through the real runner, against a
//!   model server that answers each turn after `ISOLATION_BENCH_TURN_MS` (default 1000 ms),
//!   played with `--isolate none`, `episode` without a pool, and `episode` with a warm pool
//!   (filled before the phase, as the training phase between two rollout phases refills it).
//!   Every isolated episode also runs a `--capture-state` command.
//!
//! Run: `cargo bench --bench isolation_overhead` (needs `mcp-server-memory` and
//! `mcp-server-sqlite` on PATH, as `.ci/run` installs them; rows whose server is missing are
//! skipped).

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Json;
use axum::routing::post;
use indicatif::ProgressBar;
use serde_json::{Value, json};
use ta_chat::{ChatClient, HttpLimits};
use ta_mcp::{ClientOptions, McpClient, ServerSpec, ToolCatalog};
use ta_rollout::isolation::{Isolate, Isolation, IsolationSettings, Workdir};
use ta_rollout::runner::{group_jobs, run_jobs};
use ta_rollout::{AgentConfig, McpTools};
use ta_types::trajectory::TrajectoryWriter;

const TURNS: usize = 6;
const SCENARIOS: usize = 3;
const ROLLOUTS: u32 = 4;

/// A state file copied to `{workdir}`: its name, and the function that creates it.
type StateFile = (&'static str, fn(&std::path::Path));

struct Server {
    name: &'static str,
    /// The command, with `{workdir}`.
    command: String,
    /// A file copied to `{workdir}` (its name), created by `make`.
    state: Option<StateFile>,
    /// A read-only tool to call every turn, and its arguments.
    tool: (&'static str, Value),
    capture: &'static str,
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}

fn servers() -> Vec<Server> {
    let mut out = vec![Server {
        name: "demo server (Rust, in-memory SQLite)",
        command: format!("{} demo-server", env!("CARGO_BIN_EXE_train-agent")),
        state: None,
        tool: ("list_tables", json!({})),
        capture: "true",
    }];
    if on_path("mcp-server-memory") {
        out.push(Server {
            name: "server-memory (Node, JSONL file)",
            command: "env MEMORY_FILE_PATH={workdir}/memory.jsonl mcp-server-memory".into(),
            state: Some(("memory.jsonl", |p| std::fs::write(p, "").unwrap())),
            tool: ("read_graph", json!({})),
            capture: "sha256sum memory.jsonl",
        });
    }
    if on_path("mcp-server-sqlite") && on_path("sqlite3") {
        out.push(Server {
            name: "mcp-server-sqlite (Python, SQLite file)",
            command: "mcp-server-sqlite --db-path {workdir}/shop.db".into(),
            state: Some(("shop.db", |p| {
                let ok = std::process::Command::new("sqlite3").arg(p).arg("CREATE TABLE t (x); INSERT INTO t VALUES (1);").status().unwrap();
                assert!(ok.success());
            })),
            tool: ("list_tables", json!({})),
            capture: "sqlite3 shop.db .dump",
        });
    }
    out
}

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.0}", d.as_secs_f64() * 1000.0)
}

/// A model server: turns 1..TURNS call `tool`, the last calls `complete_task`; every answer
/// comes after `delay`.
async fn model_server(tool: (&'static str, Value), delay: Duration) -> String {
    let answer = move |Json(body): Json<Value>| {
        let tool = tool.clone();
        async move {
            tokio::time::sleep(delay).await;
            let turn = body["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "assistant").count();
            let (name, args) = if turn + 1 < TURNS { (tool.0.to_string(), tool.1.to_string()) } else { ("complete_task".into(), r#"{"summary": "done"}"#.into()) };
            let call = json!({"id": format!("call_{turn}"), "type": "function", "function": {"name": name, "arguments": args}});
            Json(json!({
                "id": "x", "object": "chat.completion", "created": 0, "model": "bench",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": [call]}, "finish_reason": "tool_calls"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
            }))
        }
    };
    let app = axum::Router::new().route("/v1/chat/completions", post(answer));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

/// Wall time of one rollout phase, and the mean `timings.isolation_ms` of its episodes.
async fn phase(server: &Server, state: Option<&std::path::Path>, isolate: Isolate, pool: usize, url: &str) -> (Duration, f64) {
    let settings = IsolationSettings {
        isolate: Some(isolate),
        server_state: state.map(|p| p.to_path_buf()),
        capture_state: (isolate != Isolate::None).then(|| server.capture.to_string()),
        pool,
        ..Default::default()
    };
    let spec = ServerSpec::parse(&server.command).unwrap();
    let (iso, discovery) = Isolation::connect(&settings, spec, ClientOptions::default()).await.unwrap();
    if pool > 0 {
        // Steady state: the pool refilled while the trainer ran.
        tokio::time::sleep(Duration::from_secs(8)).await;
    }
    let iso = Arc::new(iso);
    let tools = McpTools::isolated(iso.clone(), ToolCatalog::from_discovery(&discovery));
    let scenarios: Vec<ta_types::Scenario> =
        (0..SCENARIOS).map(|i| ta_types::scenario::parse_scenarios(&format!(r#"[{{"id": "s{i}", "task": "task {i}"}}]"#), "b").unwrap().remove(0)).collect();
    let jobs = group_jobs(&scenarios, ROLLOUTS, 1);
    let n = jobs.len();
    let chat = ChatClient::new(url, None, HttpLimits::DEFAULT);
    let dir = tempfile::tempdir().unwrap();
    let mut writer = TrajectoryWriter::append(&dir.path().join("t.jsonl")).unwrap();
    let cfg = AgentConfig { max_turns: TURNS as u32, record_tokens: false, ..Default::default() };
    let t0 = Instant::now();
    let result = run_jobs(&chat, "m", &tools, "S", jobs, &cfg, n, &mut writer, &ProgressBar::hidden(), std::future::pending()).await.unwrap();
    let wall = t0.elapsed();
    for t in &result.trajectories {
        assert_eq!(t.outcome, ta_types::Outcome::Completed, "{:?}", t.error);
        assert_eq!(t.tool_calls as usize, TURNS - 1);
    }
    let iso_ms = result.trajectories.iter().map(|t| t.timings.isolation_ms as f64).sum::<f64>() / n as f64;
    iso.shutdown().await;
    (wall, iso_ms)
}

fn main() {
    let turn = Duration::from_millis(std::env::var("ISOLATION_BENCH_TURN_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(1000));
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async {
        println!("## server start (connect + initialize), median of 10\n");
        println!("| server | start ms |\n|---|---:|");
        let work = tempfile::tempdir().unwrap();
        for s in servers() {
            let state = s.state.map(|(name, make)| {
                let p = work.path().join(name);
                make(&p);
                p
            });
            let mut samples = Vec::new();
            for i in 0..10 {
                let w = Workdir::create(state.as_deref(), "bench").unwrap();
                let spec = ServerSpec::parse(&s.command).unwrap().instantiate(&ta_mcp::Placeholders { workdir: w.path(), episode_id: &format!("b{i}") });
                let t0 = Instant::now();
                let client = McpClient::connect(spec, ClientOptions::default()).await.unwrap();
                samples.push(t0.elapsed());
                client.close().await;
            }
            println!("| {} | {} |", s.name, ms(median(samples)));
        }

        println!("\n## state copy (Workdir::create), median of 5\n");
        println!("| state file | ms | how |\n|---|---:|---|");
        for mib in [1usize, 64] {
            let p = work.path().join(format!("state-{mib}.bin"));
            std::fs::write(&p, vec![7u8; mib << 20]).unwrap();
            let mut samples = Vec::new();
            let mut how = String::new();
            for _ in 0..5 {
                let t0 = Instant::now();
                let w = Workdir::create(Some(&p), "bench").unwrap();
                samples.push(t0.elapsed());
                how = if w.stats().reflinked > 0 { "reflink".into() } else { "copy".into() };
            }
            println!("| {mib} MiB | {} | {how} |", ms(median(samples)));
        }

        println!("\n## rollout phase: {} episodes in flight, {TURNS} turns of {} ms, one tool call a turn\n", SCENARIOS * ROLLOUTS as usize, turn.as_millis());
        println!("| server | isolation | phase wall s | overhead vs none | mean isolation ms per episode |\n|---|---|---:|---:|---:|");
        for s in servers() {
            let state = s.state.map(|(name, _)| work.path().join(name));
            let url = model_server(s.tool.clone(), turn).await;
            let (none, _) = phase(&s, state.as_deref(), Isolate::None, 0, &url).await;
            println!("| {} | none | {:.2} | - | - |", s.name, none.as_secs_f64());
            for (label, pool) in [("episode, no pool", 0), ("episode, warm pool of 12", 12)] {
                let (wall, iso_ms) = phase(&s, state.as_deref(), Isolate::Episode, pool, &url).await;
                let overhead = 100.0 * (wall.as_secs_f64() - none.as_secs_f64()) / none.as_secs_f64();
                println!("| {} | {label} | {:.2} | {overhead:+.1}% | {iso_ms:.0} |", s.name, wall.as_secs_f64());
            }
        }
    });
}
