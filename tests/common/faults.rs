//! Fault injection for the integration tests: a scripted OpenAI-compatible server that
//! misbehaves on purpose, and a wrapper that makes a real MCP server (the demo server) die,
//! stall or talk garbage mid-session.
//!
//! # The model server: [`FaultServer`]
//! A plain HTTP/1.1 server on a free port (`POST /v1/chat/completions`, one request per
//! connection, `Connection: close`). Each request takes the next [`Fault`] from the script; once
//! the script is used up, the last entry repeats, so `[Fault::Close]` is "a server that is always
//! down" and `[reply, reply, Fault::Hang]` is "a server that dies after two answers".
//!
//! ```ignore
//! let server = FaultServer::start(vec![Fault::rate_limited("100000"), Fault::ok(text("hi"))]).await;
//! let chat = ChatClient::new(&server.url(), None, limits);
//! // ... assert on what the client did, and on server.requests()
//! ```
//!
//! Faults: [`Fault::Hang`] (reads the request, never answers), [`Fault::Drip`] (headers, then
//! the body one byte per interval), [`Fault::Close`] (reads the request, closes the connection),
//! [`Fault::Chunked`] (a chunked body of any size, without `Content-Length`),
//! `Fault::Reply` with any status (429 with `Retry-After` via [`Fault::rate_limited`], 500,
//! 401 via [`Fault::status`]) and the legal-but-unusual shapes servers send
//! ([`tool_calls_null`], [`content_parts`], [`arguments_object`]). [`Fault::Gated`] holds any
//! fault until the test opens a gate (to act between two requests, e.g. kill an MCP server).
//!
//! # The MCP server: [`mcp_fault_command`]
//! A command line for `--server` that starts the real demo server behind a stdio proxy
//! (`tests/common/mcp_fault_proxy.py`) which forwards messages both ways and, after the server
//! has sent N messages, kills it ([`McpFault::Kill`], or for good: [`McpFault::Crash`]), stops forwarding its output
//! ([`McpFault::Stall`]), or writes a line that is not JSON-RPC ([`McpFault::Corrupt`]).
//!
//! # A scripted MCP server: [`scripted_mcp_command`]
//! For faults the demo server cannot be made to show: a small stdio server
//! (`tests/common/mcp_scripted_server.py`) that hangs in `initialize` or `tools/list`, puts
//! terminal escape sequences in the names and messages it sends, or answers a call with one
//! message over the size limit ([`ScriptedMcp`]). It writes its PIDs (its own and a child's,
//! as an `npx` wrapper has) to a file, so a test can check that none outlives the client
//! ([`pids_alive`]).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

use super::Reply;

/// What the server does with one request.
#[derive(Clone)]
pub enum Fault {
    /// Answer with this status and JSON body.
    Reply(u16, Value, Vec<(String, String)>),
    /// Read the request and never answer (the connection stays open).
    Hang,
    /// Send the headers of a 200 answer (with its full `Content-Length`), then the body one byte
    /// every `every`.
    Drip { body: Value, every: Duration },
    /// Read the request, then close the connection without a word.
    Close,
    /// A 200 answer of `bytes` bytes with no `Content-Length` (`Transfer-Encoding: chunked`), in
    /// 1 MiB chunks, sent until the client stops reading: a completion whose content never ends.
    Chunked { bytes: usize },
    /// Wait until the gate is opened ([`Gate::open`]), then do the inner fault.
    Gated(Gate, Box<Fault>),
}

impl Fault {
    /// A 200 (or other) answer from the helpers in `common` (`text`, `tool_calls`, `error`).
    pub fn ok(reply: Reply) -> Fault {
        Fault::Reply(reply.0, reply.1, Vec::new())
    }

    /// An OpenAI error object with `status` (401, 500, ...).
    pub fn status(status: u16, message: &str) -> Fault {
        Fault::ok(super::error(status, message))
    }

    /// 429 with `Retry-After: retry_after` (seconds, as the server wrote them).
    pub fn rate_limited(retry_after: &str) -> Fault {
        let (status, body) = super::error(429, "rate limited");
        Fault::Reply(status, body, vec![("retry-after".into(), retry_after.into())])
    }
}

/// A one-shot switch the test flips to release [`Fault::Gated`] requests.
#[derive(Clone, Default)]
pub struct Gate(Arc<(Notify, Mutex<bool>)>);

impl Gate {
    pub fn open(&self) {
        *self.0.1.lock().unwrap() = true;
        self.0.0.notify_waiters();
    }

    async fn wait(&self) {
        loop {
            let notified = self.0.0.notified();
            if *self.0.1.lock().unwrap() {
                return;
            }
            notified.await;
        }
    }
}

/// A scripted, misbehaving OpenAI-compatible server.
pub struct FaultServer {
    addr: std::net::SocketAddr,
    requests: Arc<Mutex<Vec<Value>>>,
    task: tokio::task::JoinHandle<()>,
}

impl FaultServer {
    pub async fn start(script: Vec<Fault>) -> FaultServer {
        assert!(!script.is_empty(), "a script needs at least one fault");
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(Mutex::new(VecDeque::from(script)));
        let recorded = requests.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { return };
                let (script, recorded) = (script.clone(), recorded.clone());
                tokio::spawn(async move { serve_one(stream, script, recorded).await });
            }
        });
        FaultServer { addr, requests, task }
    }

    /// The API root, `http://127.0.0.1:PORT/v1`.
    pub fn url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The request bodies received so far.
    pub fn requests(&self) -> Vec<Value> {
        self.requests.lock().unwrap().clone()
    }
}

impl Drop for FaultServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve_one(mut stream: TcpStream, script: Arc<Mutex<VecDeque<Fault>>>, recorded: Arc<Mutex<Vec<Value>>>) {
    let Some(body) = read_request(&mut stream).await else { return };
    recorded.lock().unwrap().push(serde_json::from_slice(&body).unwrap_or(Value::Null));
    let fault = {
        let mut s = script.lock().unwrap();
        if s.len() > 1 { s.pop_front().unwrap() } else { s.front().unwrap().clone() }
    };
    act(stream, fault).await;
}

fn act(mut stream: TcpStream, fault: Fault) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
    Box::pin(async move {
        match fault {
            Fault::Reply(status, body, headers) => {
                let body = body.to_string();
                let extra: String = headers.iter().map(|(k, v)| format!("{k}: {v}\r\n")).collect();
                let head = format!("HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n{extra}\r\n", body.len());
                let _ = stream.write_all(head.as_bytes()).await;
                let _ = stream.write_all(body.as_bytes()).await;
                let _ = stream.shutdown().await;
            }
            Fault::Hang => {
                // Keep the socket open until the client gives up.
                let mut sink = [0u8; 64];
                while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
            }
            Fault::Drip { body, every } => {
                let body = body.to_string();
                let head = format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n", body.len());
                if stream.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                for b in body.bytes() {
                    if stream.write_all(&[b]).await.is_err() || stream.flush().await.is_err() {
                        return;
                    }
                    tokio::time::sleep(every).await;
                }
            }
            Fault::Close => drop(stream),
            Fault::Chunked { bytes } => {
                let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n";
                if stream.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                let opening = br#"{"id": "chatcmpl-fault", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": ""#;
                let mut chunk = opening.to_vec();
                chunk.resize(1 << 20, b'a');
                let mut sent = 0;
                while sent < bytes {
                    let part = &chunk[..chunk.len().min(bytes - sent)];
                    let framed = [format!("{:x}\r\n", part.len()).as_bytes(), part, b"\r\n"].concat();
                    if stream.write_all(&framed).await.is_err() {
                        return;
                    }
                    sent += part.len();
                    chunk[..opening.len()].fill(b'a');
                }
                let _ = stream.write_all(b"0\r\n\r\n").await;
            }
            Fault::Gated(gate, inner) => {
                gate.wait().await;
                act(stream, *inner).await;
            }
        }
    })
}

/// Reads one HTTP/1.1 request (headers, then `Content-Length` bytes of body).
async fn read_request(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let header_end = loop {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).to_ascii_lowercase();
    let len: usize = head.lines().find_map(|l| l.strip_prefix("content-length:")).and_then(|v| v.trim().parse().ok()).unwrap_or(0);
    while buf.len() < header_end + len {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Some(buf[header_end..header_end + len].to_vec())
}

fn completion(message: Value) -> Fault {
    Fault::Reply(
        200,
        json!({
            "id": "chatcmpl-fault", "object": "chat.completion", "created": 0, "model": "fault",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        }),
        Vec::new(),
    )
}

/// A text answer with `"tool_calls": null` (as OpenAI's SDKs serialise "no calls").
pub fn tool_calls_null(text: &str) -> Fault {
    completion(json!({"role": "assistant", "content": text, "tool_calls": null, "refusal": null}))
}

/// A text answer whose `content` is a list of text parts.
pub fn content_parts(parts: &[&str]) -> Fault {
    let parts: Vec<Value> = parts.iter().map(|t| json!({"type": "text", "text": t})).collect();
    completion(json!({"role": "assistant", "content": parts}))
}

/// One tool call whose `arguments` is a JSON object instead of a string.
pub fn arguments_object(name: &str, arguments: Value) -> Fault {
    completion(json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": "call_obj", "type": "function", "function": {"name": name, "arguments": arguments}}
    ]}))
}

/// What the MCP proxy does once the server has sent `after` messages.
#[derive(Debug, Clone, Copy)]
pub enum McpFault {
    /// Kill the server (SIGKILL) and exit: the client sees the connection close. A restarted
    /// command works again.
    Kill { after: usize },
    /// Like `Kill`, but the server stays down: every later start of the command exits at once.
    Crash { after: usize },
    /// Keep the server running but forward nothing more from it.
    Stall { after: usize },
    /// Write a line that is not JSON-RPC in place of the next message.
    Corrupt { after: usize },
}

/// A `--server` command line: the demo server (this build's binary) behind the fault proxy.
pub fn mcp_fault_command(fault: McpFault) -> String {
    let (mode, after) = match fault {
        McpFault::Kill { after } => ("kill", after),
        McpFault::Crash { after } => ("crash", after),
        McpFault::Stall { after } => ("stall", after),
        McpFault::Corrupt { after } => ("corrupt", after),
    };
    let proxy = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/common/mcp_fault_proxy.py");
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let marker = std::env::temp_dir().join(format!("mcp-fault-{}-{n}", std::process::id()));
    let _ = std::fs::remove_file(&marker);
    format!("python3 {proxy} {mode} {after} {} {} demo-server", marker.display(), super::bin())
}

/// How the scripted MCP server misbehaves.
#[derive(Debug, Clone, Copy)]
pub enum ScriptedMcp {
    /// Never answers `initialize`.
    HangInitialize,
    /// Answers `initialize`, never `tools/list`.
    HangToolsList,
    /// Escape sequences (clear screen, set title) in its name, its tool's name and description.
    Escapes,
    /// Answers `tools/list` with a JSON-RPC error whose message holds escape sequences.
    EscapesInError,
    /// Its one tool, `fetch_all`, returns a text of `bytes` bytes.
    BigResult { bytes: usize },
}

/// A `--server` command line for the scripted server; it writes its PIDs to `pid_file`.
pub fn scripted_mcp_command(mode: ScriptedMcp, pid_file: &std::path::Path) -> String {
    let (mode, bytes) = match mode {
        ScriptedMcp::HangInitialize => ("hang-initialize", 0),
        ScriptedMcp::HangToolsList => ("hang-tools-list", 0),
        ScriptedMcp::Escapes => ("escapes", 0),
        ScriptedMcp::EscapesInError => ("escapes-error", 0),
        ScriptedMcp::BigResult { bytes } => ("big-result", bytes),
    };
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/common/mcp_scripted_server.py");
    format!("python3 {script} {mode} {} {bytes}", pid_file.display())
}

/// The PIDs the scripted server wrote that still run (zombies count as gone).
pub fn pids_alive(pid_file: &std::path::Path) -> Vec<u32> {
    let text = std::fs::read_to_string(pid_file).unwrap_or_else(|e| panic!("{}: {e}", pid_file.display()));
    text.lines()
        .filter_map(|l| l.trim().parse().ok())
        .filter(|pid: &u32| std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z ")))
        .collect()
}
