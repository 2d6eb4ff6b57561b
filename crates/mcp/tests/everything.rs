//! The client against the real reference server, `@modelcontextprotocol/server-everything`, over
//! all three transports. Skipped (with a message) only when `npx` is missing.

mod common;

use std::time::Duration;

use common::{HttpEverything, everything};
use serde_json::json;
use ta_mcp::{ClientOptions, HttpTransport, McpClient, McpError, ServerSpec, ToolCatalog, enrichment_text};

fn options() -> ClientOptions {
    ClientOptions { call_timeout: Duration::from_secs(30), connect_timeout: Duration::from_secs(90), ..Default::default() }
}

/// What every transport must do: discover all tools, echo, summarize an image, report a bad call.
async fn exercise(client: &McpClient) {
    let discovery = client.discover().await.unwrap();
    let names: Vec<&str> = discovery.tools.iter().map(|t| t.name.as_ref()).collect();
    assert!(names.len() >= 10, "expected server-everything's tools, got {names:?}");
    assert!(names.contains(&"echo") && names.contains(&"get-tiny-image"), "{names:?}");
    assert!(!discovery.resources.is_empty(), "server-everything has resources");
    assert!(discovery.instructions.as_deref().is_some_and(|i| !i.is_empty()), "server-everything sends instructions");
    let enrichment = enrichment_text(&discovery);
    assert!(enrichment.contains("Resources on this server:"), "{enrichment}");

    let catalog = ToolCatalog::from_discovery(&discovery);
    assert!(catalog.validate("echo", &json!({"message": "hi"})).is_ok());
    let err = catalog.validate("echo", &json!({})).unwrap_err().to_string();
    assert_eq!(err, "invalid arguments for `echo`: missing required argument `message`");

    let out = client.call_tool("echo", json!({"message": "hello there"})).await.unwrap();
    assert!(!out.is_error);
    assert!(out.text.contains("hello there"), "{out:?}");

    let out = client.call_tool("get-tiny-image", json!({})).await.unwrap();
    assert!(out.text.contains("[image: image/png, "), "{out:?}");

    // An invalid call: the server reports it either as a tool error or as a JSON-RPC error;
    // both must be clean, per-call failures that leave the connection usable.
    match client.call_tool("echo", json!({"message": 42})).await {
        Ok(out) => assert!(out.is_error, "{out:?}"),
        Err(McpError::Protocol { message, .. }) => assert!(!message.is_empty()),
        Err(other) => panic!("unexpected error kind: {other}"),
    }
    match client.call_tool("no-such-tool", json!({})).await {
        Ok(out) => assert!(out.is_error, "{out:?}"),
        Err(McpError::Protocol { .. }) => {}
        Err(other) => panic!("unexpected error kind: {other}"),
    }
    let out = client.call_tool("echo", json!({"message": "still alive"})).await.unwrap();
    assert!(out.text.contains("still alive"));
    assert_eq!(client.restarts(), 0);

    // One client serves many rollouts at once.
    let calls = (0..8).map(|i| client.call_tool("echo", json!({"message": format!("concurrent {i}")})));
    for (i, out) in futures::future::join_all(calls).await.into_iter().enumerate() {
        assert!(out.unwrap().text.contains(&format!("concurrent {i}")));
    }

    let first = &discovery.resources[0];
    let text = client.read_resource(&first.uri).await.unwrap();
    assert!(!text.is_empty(), "resource {} is empty", first.uri);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_everything() {
    let Some(program) = everything("stdio_everything") else { return };
    let log = tempfile::NamedTempFile::new().unwrap();
    let opts = ClientOptions { stderr_log: Some(log.path().to_path_buf()), ..options() };
    let client = McpClient::connect(ServerSpec::parse(&program.display().to_string()).unwrap(), opts).await.unwrap();
    let pid = client.child_pid().await.expect("stdio child has a pid");
    exercise(&client).await;
    client.close().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!common::process_alive(pid), "child {pid} survived close()");
    let err = client.call_tool("echo", json!({"message": "x"})).await.unwrap_err();
    assert!(matches!(err, McpError::Closed { .. }), "{err}");
    let stderr = std::fs::read_to_string(log.path()).unwrap();
    assert!(!stderr.is_empty(), "the server's stderr goes to the log file");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamable_http_everything() {
    let Some(program) = everything("streamable_http_everything") else { return };
    let server = HttpEverything::start(&program, "streamableHttp");
    let spec = ServerSpec::parse(&server.url("/mcp")).unwrap();
    assert!(matches!(spec, ServerSpec::Http { transport: HttpTransport::StreamableHttp, .. }));
    let client = McpClient::connect(spec, options()).await.unwrap();
    exercise(&client).await;
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_sse_everything() {
    let Some(program) = everything("legacy_sse_everything") else { return };
    let server = HttpEverything::start(&program, "sse");
    let spec = ServerSpec::parse(&server.url("/sse")).unwrap();
    assert!(matches!(spec, ServerSpec::Http { transport: HttpTransport::Sse, .. }));
    let client = McpClient::connect(spec, options()).await.unwrap();
    exercise(&client).await;
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_server_crash_is_restarted_once() {
    let Some(program) = everything("stdio_server_crash_is_restarted_once") else { return };
    let client = McpClient::connect(ServerSpec::parse(&program.display().to_string()).unwrap(), options()).await.unwrap();
    let pid = client.child_pid().await.unwrap();
    assert!(client.call_tool("echo", json!({"message": "before"})).await.unwrap().text.contains("before"));
    common::kill_group(pid);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let out = client.call_tool("echo", json!({"message": "after"})).await.unwrap();
    assert!(out.text.contains("after"), "{out:?}");
    assert_eq!(client.restarts(), 1);
    let new_pid = client.child_pid().await.unwrap();
    assert_ne!(pid, new_pid);
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_timeout_is_enforced() {
    let Some(program) = everything("call_timeout_is_enforced") else { return };
    let opts = ClientOptions { call_timeout: Duration::from_millis(300), ..options() };
    let client = McpClient::connect(ServerSpec::parse(&program.display().to_string()).unwrap(), opts).await.unwrap();
    let tools = client.list_tools().await.unwrap();
    let slow = tools.iter().find(|t| t.name.contains("long-running")).map(|t| t.name.to_string());
    let Some(slow) = slow else {
        eprintln!("no long-running tool in this server-everything version; tools: {:?}", tools.iter().map(|t| &t.name).collect::<Vec<_>>());
        return;
    };
    let err = client.call_tool(&slow, json!({"duration": 5, "steps": 2})).await.unwrap_err();
    assert!(matches!(err, McpError::Timeout { .. }), "{err}");
    assert!(err.to_string().contains("did not answer within"), "{err}");
    // A timed-out call kills the stuck server; the next call starts it again.
    assert!(client.call_tool("echo", json!({"message": "ok"})).await.unwrap().text.contains("ok"));
    assert_eq!(client.restarts(), 1);
    client.close().await;
}

/// Regenerates `tests/fixtures/everything-tools.json` (the input of the schema snapshot test)
/// when `TA_MCP_UPDATE_FIXTURES=1`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capture_everything_tools_fixture() {
    if std::env::var("TA_MCP_UPDATE_FIXTURES").as_deref() != Ok("1") {
        return;
    }
    let Some(program) = everything("capture_everything_tools_fixture") else { return };
    let client = McpClient::connect(ServerSpec::parse(&program.display().to_string()).unwrap(), options()).await.unwrap();
    let tools = client.list_tools().await.unwrap();
    client.close().await;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/everything-tools.json");
    std::fs::write(&path, serde_json::to_string_pretty(&tools).unwrap() + "\n").unwrap();
}
