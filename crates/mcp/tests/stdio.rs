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

/// A stdio server that writes `stderr` (`TOKEN` in it replaced by that variable's value) and
/// exits with status 3 before `initialize`, with `TOKEN=s3cret` in its environment.
fn failing(stderr: &str) -> ServerSpec {
    ServerSpec::Stdio {
        command: "python3".into(),
        args: vec!["-c".into(), format!("import os, sys; sys.stderr.write({stderr:?}.replace('TOKEN', os.environ['TOKEN'])); sys.exit(3)")],
        env: std::collections::BTreeMap::from([("TOKEN".to_string(), ta_mcp::Secret::new("s3cret"))]),
        cwd: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_fails_to_start_is_quoted_in_the_error() {
    // No log: what it said is still shown, its secrets masked.
    let err = McpClient::connect(failing("loading\nno database at /x.db (token TOKEN)\n"), options(Duration::from_secs(10))).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, McpError::Connect { .. }), "{text}");
    assert!(text.contains("its stderr ends:\n  loading\n  no database at /x.db (token ***)"), "{text}");
    assert!(!text.contains("s3cret"), "{text}");

    // A run's log: only this start's lines are quoted, and the error says where the rest is.
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("logs/mcp-stderr.log");
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    std::fs::write(&log, "an earlier run's line\n").unwrap();
    let with_log = ClientOptions { stderr_log: Some(log.clone()), ..options(Duration::from_secs(10)) };
    let text = McpClient::connect(failing("cannot open the store\n"), with_log.clone()).await.unwrap_err().to_string();
    assert!(text.contains("its stderr ends:\n  cannot open the store; all of its stderr is in"), "{text}");
    assert!(text.contains(&log.display().to_string()) && !text.contains("earlier run"), "{text}");

    // Silence is said as such.
    let text = McpClient::connect(failing(""), with_log).await.unwrap_err().to_string();
    assert!(text.contains("said nothing on stderr; all of its stderr is in"), "{text}");

    // One that hangs in `initialize` is quoted too: what it printed while it waited.
    let hangs = ServerSpec::Stdio {
        command: "python3".into(),
        args: vec!["-c".into(), "import sys, time; sys.stderr.write('waiting for the database\\n'); sys.stderr.flush(); time.sleep(60)".into()],
        env: Default::default(),
        cwd: None,
    };
    let err = McpClient::connect(hangs, options(Duration::from_secs(2))).await.unwrap_err();
    assert!(matches!(err, McpError::ConnectTimeout { .. }), "{err}");
    assert!(err.to_string().ends_with("; its stderr ends:\n  waiting for the database"), "{err}");
}
