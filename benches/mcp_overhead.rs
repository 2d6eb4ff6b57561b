//! Per-call latency of a cheap MCP tool call through `ta_mcp::McpClient`, per transport.
//!
//! Rollouts make thousands of tool calls per training step; this measures what the client and
//! transport add (plus the server's own work for a trivial tool). Servers: the reference
//! `@modelcontextprotocol/server-everything` (`echo`) over stdio, streamable HTTP and legacy
//! SSE (skipped when `npx` is missing), and the project's demo server (`list_tables`) over
//! streamable HTTP, in process.
//!
//! Run: `cargo bench --bench mcp_overhead` (MCP_BENCH_CALLS=2000 by default, after 200 warm-up calls).

use std::net::TcpListener as StdListener;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use ta_mcp::{ClientOptions, McpClient, ServerSpec};

const EVERYTHING: &str = "npx -y @modelcontextprotocol/server-everything";
const WARMUP: usize = 200;

struct Row {
    name: String,
    samples: Vec<Duration>,
}

fn have_npx() -> bool {
    std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("npx").is_file()))
}

fn free_port() -> u16 {
    StdListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// server-everything over HTTP; its process group is killed on drop.
struct HttpServer(Child);

impl HttpServer {
    fn start(mode: &str, port: u16) -> Self {
        let child = Command::new("npx")
            .args(["-y", "@modelcontextprotocol/server-everything", mode])
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("spawn npx");
        let deadline = Instant::now() + Duration::from_secs(90);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "server-everything {mode} did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        HttpServer(child)
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-KILL", "--", &format!("-{}", self.0.id())]).status();
        let _ = self.0.wait();
    }
}

async fn measure(name: &str, spec: ServerSpec, tool: &str, args: Value, calls: usize) -> Row {
    let client = McpClient::connect(spec, ClientOptions::default()).await.expect("connect");
    for _ in 0..WARMUP {
        client.call_tool(tool, args.clone()).await.expect("warm-up call");
    }
    let mut samples = Vec::with_capacity(calls);
    for _ in 0..calls {
        let start = Instant::now();
        let out = client.call_tool(tool, args.clone()).await.expect("call");
        samples.push(start.elapsed());
        assert!(!out.is_error, "{name}: {}", out.text);
    }
    client.close().await;
    Row { name: name.to_string(), samples }
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx]
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1e3)
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this too: keep that quick.
    let quick = std::env::args().all(|a| a != "--bench");
    let calls: usize = std::env::var("MCP_BENCH_CALLS").ok().and_then(|v| v.parse().ok()).unwrap_or(if quick { 20 } else { 2000 });
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let rows = rt.block_on(async {
        let mut rows = Vec::new();
        let echo = json!({"message": "ping"});
        if have_npx() {
            rows.push(measure("server-everything echo, stdio", ServerSpec::parse(EVERYTHING).unwrap(), "echo", echo.clone(), calls).await);
            let port = free_port();
            let _server = HttpServer::start("streamableHttp", port);
            let spec = ServerSpec::parse(&format!("http://127.0.0.1:{port}/mcp")).unwrap();
            rows.push(measure("server-everything echo, streamable HTTP", spec, "echo", echo.clone(), calls).await);
            let port = free_port();
            let _server = HttpServer::start("sse", port);
            let spec = ServerSpec::parse(&format!("http://127.0.0.1:{port}/sse")).unwrap();
            rows.push(measure("server-everything echo, legacy SSE", spec, "echo", echo.clone(), calls).await);
        } else {
            eprintln!("npx not on PATH: skipping the server-everything rows");
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(ta_demo_server::serve_http(ta_demo_server::Database::demo(), listener, None));
        let spec = ServerSpec::parse(&format!("http://127.0.0.1:{port}/mcp")).unwrap();
        rows.push(measure("demo server list_tables, streamable HTTP (in-process)", spec, "list_tables", json!({}), calls).await);
        server.abort();
        rows
    });

    println!("\nMCP call overhead: {calls} sequential calls per row after {WARMUP} warm-up calls (ms)\n");
    println!("| server, transport | p50 | p90 | p99 | max | calls/s |");
    println!("|---|---:|---:|---:|---:|---:|");
    for row in rows {
        let mut s = row.samples.clone();
        s.sort();
        let total: Duration = s.iter().sum();
        println!(
            "| {} | {} | {} | {} | {} | {:.0} |",
            row.name,
            ms(pct(&s, 0.50)),
            ms(pct(&s, 0.90)),
            ms(pct(&s, 0.99)),
            ms(*s.last().unwrap()),
            s.len() as f64 / total.as_secs_f64()
        );
    }
}
