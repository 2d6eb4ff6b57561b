//! End to end over real transports: streamable HTTP (with and without a bearer token) through
//! rmcp's own client, and stdio-style byte streams through `tokio::io::duplex`.

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;
use ta_demo_server::{Database, TOOL_NAMES, serve_http, serve_io};

async fn start(token: Option<&str>) -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let token = token.map(str::to_string);
    let task = tokio::spawn(async move { serve_http(Database::demo(), listener, token).await.unwrap() });
    (url, task)
}

async fn connect(url: &str, token: Option<&str>) -> Result<RunningService<RoleClient, ()>, String> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_string());
    if let Some(token) = token {
        config = config.auth_header(token.to_string());
    }
    ta_chat::install_tls_provider();
    ().serve(StreamableHttpClientTransport::from_config(config)).await.map_err(|e| e.to_string())
}

fn text(result: &CallToolResult) -> String {
    result.content.iter().filter_map(|c| c.as_text()).map(|t| t.text.clone()).collect()
}

async fn exercise(client: &RunningService<RoleClient, ()>) {
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names.len(), 3, "{names:?}");
    for name in TOOL_NAMES {
        assert!(names.contains(&name), "{names:?}");
    }
    let run_query = tools.iter().find(|t| t.name == "run_query").unwrap();
    assert!(run_query.description.as_deref().unwrap_or("").contains("SELECT"));

    let ok = client
        .call_tool(
            CallToolRequestParams::new("run_query").with_arguments(json!({"sql": "SELECT name FROM departments WHERE department_id = 1"}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert_eq!(ok.is_error, Some(false));
    assert_eq!(text(&ok), "name\nEngineering\n(1 row)");

    let refused =
        client.call_tool(CallToolRequestParams::new("run_query").with_arguments(json!({"sql": "DELETE FROM employees"}).as_object().unwrap().clone())).await.unwrap();
    assert_eq!(refused.is_error, Some(true));
    assert!(text(&refused).starts_with("refused:"), "{}", text(&refused));

    let unknown =
        client.call_tool(CallToolRequestParams::new("describe_table").with_arguments(json!({"table_name": "employee"}).as_object().unwrap().clone())).await.unwrap();
    assert_eq!(unknown.is_error, Some(true));
    assert!(text(&unknown).contains("Did you mean 'employees'?"));
}

#[tokio::test]
async fn streamable_http_without_token() {
    let (url, server) = start(None).await;
    let client = connect(&url, None).await.unwrap();
    exercise(&client).await;
    client.cancel().await.unwrap();
    server.abort();
}

#[tokio::test]
async fn streamable_http_requires_the_bearer_token() {
    let (url, server) = start(Some("s3cret-token")).await;

    // Plain HTTP: missing and wrong tokens get 401 with a JSON body, before any MCP handling.
    let http = ta_chat::http_builder().build().unwrap();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
    for auth in [None, Some("Bearer wrong"), Some("Basic czNjcmV0LXRva2Vu"), Some("Bearer s3cret-token-x")] {
        let mut request = http.post(&url).header("Accept", "application/json, text/event-stream").header("Content-Type", "application/json").body(init.to_string());
        if let Some(auth) = auth {
            request = request.header("Authorization", auth);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status().as_u16(), 401, "{auth:?}");
        assert!(response.headers().contains_key("www-authenticate"));
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(body["error"], "unauthorized");
        assert!(!body.to_string().contains("s3cret-token"), "the token must not be echoed");
    }

    // rmcp client: no token and a wrong token fail to connect; the right token works.
    assert!(connect(&url, None).await.is_err());
    assert!(connect(&url, Some("wrong")).await.is_err());
    let client = connect(&url, Some("s3cret-token")).await.unwrap();
    exercise(&client).await;
    client.cancel().await.unwrap();
    server.abort();
}

#[tokio::test]
async fn stdio_style_byte_streams() {
    let (client_side, server_side) = tokio::io::duplex(64 * 1024);
    let (read, write) = tokio::io::split(server_side);
    let server = tokio::spawn(serve_io(Database::demo(), read, write));
    let client = ().serve(client_side).await.unwrap();
    exercise(&client).await;
    client.cancel().await.unwrap();
    // The client closing its end is EOF for the server, which then returns cleanly.
    tokio::time::timeout(std::time::Duration::from_secs(10), server).await.unwrap().unwrap().unwrap();
}
