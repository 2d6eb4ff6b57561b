//! The bearer token reaches HTTP and SSE servers as `Authorization: Bearer ...` and never
//! appears in errors. A tiny TCP server records the request head and answers 401, so the test
//! needs no MCP server at all.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use ta_mcp::{ClientOptions, HttpTransport, McpClient, Secret, ServerSpec};

const TOKEN: &str = "tok-3f9a-very-secret";

/// Accepts connections, records each request head, answers 401.
async fn recorder() -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = heads.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else { return };
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut chunk).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                seen.lock().unwrap().push(String::from_utf8_lossy(&buf).into_owned());
                let body = r#"{"error":"unauthorized"}"#;
                let resp = format!(
                    "HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\nwww-authenticate: Bearer\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = sock.write_all(resp.as_bytes()).await;
            });
        }
    });
    (port, heads)
}

fn options() -> ClientOptions {
    ClientOptions { bearer_token: Some(Secret::new(TOKEN)), connect_timeout: Duration::from_secs(10), ..Default::default() }
}

async fn check(transport: HttpTransport, path: &str, method: &str) {
    let (port, heads) = recorder().await;
    let spec = ServerSpec::parse_with_transport(&format!("http://127.0.0.1:{port}{path}"), Some(transport)).unwrap();
    let err = McpClient::connect(spec, options()).await.unwrap_err();
    let message = err.to_string();
    assert!(!message.contains(TOKEN), "token leaked into the error: {message}");
    assert!(!format!("{err:?}").contains(TOKEN), "token leaked into Debug: {err:?}");
    let heads = heads.lock().unwrap().clone();
    let first = heads.first().unwrap_or_else(|| panic!("no request reached the server; error: {message}"));
    assert!(first.starts_with(&format!("{method} {path}")), "{first}");
    let auth = first
        .lines()
        .find_map(|l| l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("authorization")).map(|(_, v)| v.trim()))
        .unwrap_or_else(|| panic!("no Authorization header in {first}"));
    assert_eq!(auth, format!("Bearer {TOKEN}"));
}

#[tokio::test]
async fn streamable_http_sends_bearer() {
    check(HttpTransport::StreamableHttp, "/mcp", "POST").await;
}

#[tokio::test]
async fn legacy_sse_sends_bearer() {
    check(HttpTransport::Sse, "/sse", "GET").await;
}

#[tokio::test]
async fn options_debug_redacts_token() {
    let text = format!("{:?}", options());
    assert!(!text.contains(TOKEN) && text.contains("[redacted]"), "{text}");
}

/// The project's demo server behind a bearer token: the right token connects, a missing or
/// wrong one fails with a hint, and the token never shows in the error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_server_accepts_only_the_right_token() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(ta_demo_server::serve_http(ta_demo_server::Database::demo(), listener, Some(TOKEN.to_string())));
    let spec = ServerSpec::parse(&format!("http://127.0.0.1:{port}/mcp")).unwrap();

    let client = McpClient::connect(spec.clone(), options()).await.unwrap();
    let discovery = client.discover().await.unwrap();
    let names: Vec<&str> = discovery.tools.iter().map(|t| t.name.as_ref()).collect();
    assert!(names.contains(&"list_tables"), "{names:?}");
    let out = client.call_tool("list_tables", serde_json::json!({})).await.unwrap();
    assert!(!out.is_error && !out.text.is_empty(), "{out:?}");
    client.close().await;

    let no_token = ClientOptions { bearer_token: None, ..options() };
    let err = McpClient::connect(spec.clone(), no_token).await.unwrap_err().to_string();
    assert!(err.contains("requires authorization") && err.contains("hint: the server wants a bearer token"), "{err}");
    let wrong = ClientOptions { bearer_token: Some(Secret::new("wrong-token")), ..options() };
    let err = McpClient::connect(spec, wrong).await.unwrap_err().to_string();
    assert!(err.contains("refused the bearer token"), "{err}");
    assert!(!err.contains(TOKEN) && !err.contains("wrong-token"), "{err}");
    server.abort();
}

/// `user:password@` in the URL goes out as Basic auth in the same `Authorization` header as
/// the bearer token, so only one of them could reach the server: both at once are refused
/// before anything is sent, and a 401 hint names what was actually sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn url_userinfo_and_a_bearer_token_are_refused_and_a_401_names_what_was_sent() {
    const PASSWORD: &str = "pw-71c2-secret";
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(ta_demo_server::serve_http(ta_demo_server::Database::demo(), listener, Some(TOKEN.to_string())));
    let spec = ServerSpec::parse(&format!("http://user:{PASSWORD}@127.0.0.1:{port}/mcp")).unwrap();

    let err = McpClient::connect(spec.clone(), options()).await.unwrap_err();
    assert!(matches!(err, ta_mcp::McpError::TwoAuthorizations { .. }), "{err}");
    let message = err.to_string();
    assert!(message.contains("hint: use one") && message.contains("MCP_BEARER_TOKEN"), "{message}");
    assert!(!message.contains(TOKEN) && !message.contains(PASSWORD) && message.contains("***@127.0.0.1"), "{message}");

    // Only the URL's credentials: the server refuses them, and the hint says so rather than
    // asking for a bearer token as if nothing had been sent.
    let no_token = ClientOptions { bearer_token: None, ..options() };
    let message = McpClient::connect(spec, no_token).await.unwrap_err().to_string();
    assert!(message.contains("requires authorization") && message.contains("refused the `user:password@` of the URL (sent as HTTP Basic auth)"), "{message}");
    assert!(!message.contains(PASSWORD), "{message}");
    server.abort();
}
