//! The stdio transport against a scripted server (`tests/common/mcp_scripted_server.py` of the
//! workspace): a server never outlives its client, whichever way the client goes, and an answer
//! over the message size limit fails its call at once instead of timing out.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use ta_mcp::{ClientOptions, McpClient, McpError, ServerSpec};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/common/mcp_scripted_server.py");

fn spec(mode: &str, pid_file: &Path, bytes: usize) -> ServerSpec {
    ServerSpec::parse(&format!("python3 {SCRIPT} {mode} {} {bytes}", pid_file.display())).unwrap()
}

fn options(timeout: Duration) -> ClientOptions {
    ClientOptions { call_timeout: timeout, connect_timeout: timeout, ..Default::default() }
}

/// The scripted server's PIDs (its own and its child's) that still run.
fn alive(pid_file: &Path) -> Vec<u32> {
    let text = std::fs::read_to_string(pid_file).unwrap();
    let pids: Vec<u32> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
    assert_eq!(pids.len(), 2, "{text}");
    pids.into_iter().filter(|pid| std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))).collect()
}

/// Waits up to 2 s for every PID in `pid_file` to be gone.
async fn assert_gone(pid_file: &Path, after: &str) {
    let deadline = Instant::now() + Duration::from_secs(2);
    while !alive(pid_file).is_empty() {
        assert!(Instant::now() < deadline, "server processes {:?} outlived {after}", alive(pid_file));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_client_kills_its_server_and_the_servers_children() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let client = McpClient::connect(spec("hang-tools-list", &pids, 0), options(Duration::from_secs(10))).await.unwrap();
    assert_eq!(alive(&pids).len(), 2);
    drop(client);
    assert_gone(&pids, "the dropped client").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_request_kills_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let client = McpClient::connect(spec("hang-tools-list", &pids, 0), options(Duration::from_secs(1))).await.unwrap();
    let err = client.list_tools().await.unwrap_err();
    assert!(matches!(err, McpError::Timeout { .. }), "{err}");
    assert_gone(&pids, "the timed-out tools/list").await;
    // The next request starts it again (and this one hangs as well).
    assert!(matches!(client.list_tools().await.unwrap_err(), McpError::Timeout { .. }));
    assert_eq!(client.restarts(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_honours_the_connect_timeout_and_kills_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let t0 = Instant::now();
    let err = McpClient::connect(spec("hang-initialize", &pids, 0), options(Duration::from_secs(1))).await.unwrap_err();
    assert!(matches!(err, McpError::ConnectTimeout { .. }), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    assert_gone(&pids, "the failed initialize").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_over_the_size_limit_fails_at_once_and_the_connection_stays() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let client = McpClient::connect(spec("big-result", &pids, 17 * 1024 * 1024), options(Duration::from_secs(60))).await.unwrap();
    let pid = client.child_pid().await;
    let t0 = Instant::now();
    let err = client.call_tool("fetch_all", json!({})).await.unwrap_err();
    assert!(t0.elapsed() < Duration::from_secs(30), "waited {:?}", t0.elapsed());
    assert!(matches!(err, McpError::TooLarge { limit, .. } if limit == ta_mcp::stdio::MAX_MESSAGE_BYTES), "{err}");
    assert!(err.to_string().contains("too large: over 16 MiB"), "{err}");
    // The server is fine and stays connected.
    assert!(client.list_tools().await.unwrap().iter().any(|t| t.name == "fetch_all"));
    assert_eq!((client.restarts(), client.child_pid().await), (0, pid));
    client.close().await;
    assert_gone(&pids, "close()").await;
}
