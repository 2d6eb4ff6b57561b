//! The stdio transport: a server process in its own process group, and the pipe between its
//! stdout and rmcp.
//!
//! We do not use rmcp's `TokioChildProcess`, for two reasons found by probing the release
//! binary (issue 29):
//! - It stops the child from a task it spawns on drop. When a command fails and `main` returns,
//!   the runtime shuts down before that task runs, and the server (with the `npx` wrapper's
//!   grandchildren) lives on, reparented to PID 1. [`StdioProcess`] kills the whole group
//!   synchronously in `Drop`, so no exit path can leave it running.
//! - rmcp drops an incoming line over its 16 MiB limit with only a log line, so the request it
//!   answered waits out the whole call timeout and the model is told the server "did not
//!   answer". [`pump`] stands between the child's stdout and rmcp: a line over
//!   [`MAX_MESSAGE_BYTES`] is dropped here and, when it is an answer, replaced by a JSON-RPC
//!   error for the same request id, so the call fails at once with [`crate::McpError::TooLarge`].

use std::process::Stdio;
use std::time::Duration;

use process_wrap::tokio::{ChildWrapper, CommandWrap, ProcessGroup};
use rmcp::RoleClient;
use rmcp::transport::async_rw::AsyncRwTransport;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader, DuplexStream};
use tokio::process::ChildStdin;

/// The most one message from a stdio server may hold, its newline included (rmcp's own default,
/// and the streamable HTTP client's limit). A tool result this large would not fit a model's
/// context anyway.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// The key, in the `data` of the JSON-RPC error [`pump`] puts in place of an oversized answer,
/// whose value is the limit in bytes. [`crate::McpError::TooLarge`] is made from it.
pub(crate) const TOO_LARGE_DATA_KEY: &str = "train_agent_message_limit_bytes";

/// How long [`StdioProcess::stop`] waits after closing stdin, and again after SIGTERM.
const GRACE: Duration = Duration::from_secs(3);

/// The transport rmcp serves on: our filtered copy of the child's stdout, and its stdin.
pub(crate) type StdioTransport = AsyncRwTransport<RoleClient, DuplexStream, ChildStdin>;

/// A running stdio server: the leader of its own process group. Dropping it kills the group
/// with SIGKILL at once (no task, no await), so a failed command, a timed-out call or a
/// panicking task never leaves the server behind.
pub(crate) struct StdioProcess {
    child: Box<dyn ChildWrapper>,
    /// Set once [`StdioProcess::stop`] saw the group end, so `Drop` signals no group id the
    /// system may have handed out again.
    stopped: bool,
}

impl StdioProcess {
    /// Starts `cmd` in a new process group with piped stdin/stdout and `stderr`, and the pump
    /// from its stdout.
    pub(crate) fn spawn(cmd: tokio::process::Command, stderr: Stdio) -> std::io::Result<(StdioProcess, StdioTransport)> {
        let mut wrapped = CommandWrap::from(cmd);
        // Own process group: `npx`/`uvx` wrappers spawn the real server as a grandchild, and
        // killing the group is the only way to stop both.
        wrapped.wrap(ProcessGroup::leader());
        wrapped.command_mut().stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(stderr);
        let mut child = wrapped.spawn()?;
        let stdin = child.stdin().take();
        let stdout = child.stdout().take();
        // From here on a failure drops `process`, which kills the group.
        let process = StdioProcess { child, stopped: false };
        let (Some(stdin), Some(stdout)) = (stdin, stdout) else { return Err(std::io::Error::other("the child's stdin or stdout was not piped")) };
        let (to_rmcp, from_pump) = tokio::io::duplex(64 * 1024);
        tokio::spawn(pump(stdout, to_rmcp, MAX_MESSAGE_BYTES));
        Ok((process, AsyncRwTransport::new_client(from_pump, stdin).with_max_line_length(MAX_MESSAGE_BYTES)))
    }

    /// Waits up to `limit` for the server to exit (so what it writes as it goes is all written).
    pub(crate) async fn wait_exit(&mut self, limit: Duration) {
        let _ = tokio::time::timeout(limit, self.child.wait()).await;
    }

    /// The process id, which is also the process group id.
    pub(crate) fn id(&self) -> Option<u32> {
        self.child.id()
    }

    /// The MCP stdio shutdown: stdin is already closed (the caller closed the session); wait
    /// for the server to exit, then SIGTERM the group, then SIGKILL it. Whatever the server
    /// left in its group (a wrapper's child) is killed last.
    pub(crate) async fn stop(mut self) {
        if tokio::time::timeout(GRACE, self.child.wait()).await.is_err() {
            tracing::debug!(pid = ?self.child.id(), "MCP server still running after stdin closed; sending SIGTERM");
            let _ = self.child.signal(libc::SIGTERM);
            if tokio::time::timeout(GRACE, self.child.wait()).await.is_err() {
                tracing::warn!(pid = ?self.child.id(), "MCP server ignored SIGTERM; killing it");
            }
        }
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(GRACE, self.child.wait()).await;
        self.stopped = true;
    }
}

impl Drop for StdioProcess {
    fn drop(&mut self) {
        if !self.stopped {
            // SIGKILL to the group; reaping is left to tokio's orphan reaper.
            let _ = self.child.start_kill();
        }
    }
}

/// Copies the child's stdout to rmcp line by line, replacing each line over `limit` (see the
/// module docs). Ends when the child closes stdout or rmcp drops its end.
async fn pump(stdout: impl AsyncRead + Unpin, mut to_rmcp: DuplexStream, limit: usize) {
    let mut read = BufReader::with_capacity(64 * 1024, stdout);
    let mut line = Vec::new();
    loop {
        let result = match read_line(&mut read, &mut line, limit).await {
            Ok(Some(Line::Whole)) => to_rmcp.write_all(&line).await,
            Ok(Some(Line::TooLong)) => {
                let head = scan_head(&line);
                let reply = match head {
                    Head { id: Some(id), is_request: false } => {
                        tracing::warn!(limit, ?id, "an MCP answer exceeded the message size limit; the call fails");
                        too_large_error(id, limit)
                    }
                    Head { is_request: true, .. } => {
                        tracing::warn!(limit, "dropped a request or notification from the MCP server over the message size limit");
                        Vec::new()
                    }
                    Head { id: None, .. } => {
                        // No id within the first `limit` bytes: which call it answered is
                        // unknown, and closing the connection is the only way to fail it now.
                        tracing::error!(limit, "an MCP message exceeded the message size limit and names no request id; closing the connection");
                        return;
                    }
                };
                match skip_line(&mut read).await {
                    Ok(_) => to_rmcp.write_all(&reply).await,
                    Err(e) => Err(e),
                }
            }
            Ok(None) => return,
            Err(e) => Err(e),
        };
        line.clear();
        if let Err(e) = result {
            tracing::debug!(error = %e, "MCP stdout pump stopped");
            return;
        }
    }
}

enum Line {
    /// A whole line, newline included, is in the buffer.
    Whole,
    /// The line is longer than the limit; the buffer holds its first `limit` bytes.
    TooLong,
}

/// Reads one line into `line` without letting it grow past `limit`. `None` at end of stream
/// (a last line without newline is dropped, as rmcp does).
async fn read_line(read: &mut BufReader<impl AsyncRead + Unpin>, line: &mut Vec<u8>, limit: usize) -> std::io::Result<Option<Line>> {
    loop {
        let available = read.fill_buf().await?;
        if available.is_empty() {
            return Ok(None);
        }
        let newline = available.iter().position(|b| *b == b'\n');
        let take = newline.map_or(available.len(), |i| i + 1);
        if line.len() + take > limit {
            let fits = limit - line.len();
            line.extend_from_slice(&available[..fits]);
            read.consume(fits);
            return Ok(Some(Line::TooLong));
        }
        line.extend_from_slice(&available[..take]);
        read.consume(take);
        if newline.is_some() {
            return Ok(Some(Line::Whole));
        }
    }
}

/// Skips to just past the next newline; `false` when the stream ended first.
async fn skip_line(read: &mut BufReader<impl AsyncRead + Unpin>) -> std::io::Result<bool> {
    loop {
        let available = read.fill_buf().await?;
        if available.is_empty() {
            return Ok(false);
        }
        let newline = available.iter().position(|b| *b == b'\n');
        let take = newline.map_or(available.len(), |i| i + 1);
        read.consume(take);
        if newline.is_some() {
            return Ok(true);
        }
    }
}

/// The JSON-RPC error line that answers request `id` in place of an oversized answer.
fn too_large_error(id: Value, limit: usize) -> Vec<u8> {
    let message = format!("the answer is larger than {}, the most one MCP message may hold, and was dropped", human_bytes(limit));
    let error = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": -32603, "message": message, "data": {TOO_LARGE_DATA_KEY: limit}},
    });
    let mut bytes = serde_json::to_vec(&error).expect("a JSON value serializes");
    bytes.push(b'\n');
    bytes
}

/// `16 MiB`, `512 KiB`, `100 bytes`.
pub fn human_bytes(n: usize) -> String {
    const KIB: usize = 1024;
    const MIB: usize = 1024 * KIB;
    if n >= MIB && n.is_multiple_of(MIB) {
        format!("{} MiB", n / MIB)
    } else if n >= MIB {
        format!("{:.1} MiB", n as f64 / MIB as f64)
    } else if n >= KIB {
        format!("{:.0} KiB", n as f64 / KIB as f64)
    } else {
        format!("{n} bytes")
    }
}

/// What the first bytes of a message say about it.
#[derive(Debug, PartialEq)]
struct Head {
    /// The top-level `"id"`, when it is complete within the bytes at hand.
    id: Option<Value>,
    /// It has a top-level `"method"`: a request or notification from the server, not an answer.
    is_request: bool,
}

/// Finds the top-level `"id"` and `"method"` keys of a JSON object of which only a prefix is
/// at hand (an oversized message cut at the limit), without parsing the rest.
fn scan_head(bytes: &[u8]) -> Head {
    let mut head = Head { id: None, is_request: false };
    let Some(open) = bytes.iter().position(|b| !b.is_ascii_whitespace()).filter(|&p| bytes[p] == b'{') else { return head };
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    let (mut string_start, mut expecting_key) = (0, false);
    let mut key: &[u8] = b"";
    let mut value_start: Option<usize> = None;
    for (i, &b) in bytes.iter().enumerate().skip(open) {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
                if depth == 1 && expecting_key {
                    key = &bytes[string_start..i];
                    expecting_key = false;
                    head.is_request |= key == b"method";
                }
            }
            continue;
        }
        let mut value_end = false;
        match b {
            b'"' => {
                in_string = true;
                string_start = i + 1;
            }
            b'{' | b'[' => {
                depth += 1;
                expecting_key = depth == 1;
            }
            b'}' | b']' => {
                value_end = depth == 1;
                depth = depth.saturating_sub(1);
            }
            b',' if depth == 1 => {
                value_end = true;
                expecting_key = true;
            }
            b':' if depth == 1 => value_start = Some(i + 1),
            _ => {}
        }
        if value_end
            && let Some(start) = value_start.take()
            && key == b"id"
        {
            head.id = serde_json::from_slice(&bytes[start..i]).ok();
        }
        if depth == 0 {
            break;
        }
    }
    head
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tokio::io::AsyncReadExt;

    #[test]
    fn the_head_of_a_cut_message_names_its_id() {
        let cases: [(&[u8], Option<Value>, bool); 7] = [
            (br#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"aaaa"#, Some(json!(7)), false),
            (br#" { "id" : "req-1" , "result": {"#, Some(json!("req-1")), false),
            (br#"{"result":{"text":"\"id\":9, {"},"id":3}"#, Some(json!(3)), false),
            (br#"{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"xxxx"#, None, true),
            (br#"{"jsonrpc":"2.0","result":{"content":"xxxx"#, None, false),
            (br#"[{"id":1}]"#, None, false),
            (br#"{"jsonrpc":"2.0","id":12"#, None, false),
        ];
        for (bytes, id, is_request) in cases {
            assert_eq!(scan_head(bytes), Head { id, is_request }, "{}", String::from_utf8_lossy(bytes));
        }
    }

    /// Runs the pump over `input` with `limit`; returns what rmcp would read.
    async fn pumped(input: Vec<u8>, limit: usize) -> String {
        let (to_rmcp, mut from_pump) = tokio::io::duplex(1024);
        let task = tokio::spawn(pump(std::io::Cursor::new(input), to_rmcp, limit));
        let mut out = String::new();
        from_pump.read_to_string(&mut out).await.unwrap();
        task.await.unwrap();
        out
    }

    #[tokio::test]
    async fn an_oversized_answer_becomes_an_error_for_its_id_and_the_stream_goes_on() {
        let big = format!("{{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{{\"text\":\"{}\"}}}}\n", "x".repeat(300));
        let input = format!("{{\"id\":1}}\n{big}{{\"id\":6}}\n");
        let out = pumped(input.into_bytes(), 100).await;
        let lines: Vec<Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 3, "{out}");
        assert_eq!(lines[0], json!({"id": 1}));
        assert_eq!(lines[1]["id"], json!(5));
        assert_eq!(lines[1]["error"]["data"][TOO_LARGE_DATA_KEY], json!(100));
        assert!(lines[1]["error"]["message"].as_str().unwrap().contains("100 bytes"), "{}", lines[1]);
        assert_eq!(lines[2], json!({"id": 6}));
    }

    #[tokio::test]
    async fn oversized_server_requests_are_dropped_and_an_answer_without_id_ends_the_stream() {
        let note = format!("{{\"method\":\"notifications/message\",\"params\":\"{}\"}}\n", "x".repeat(300));
        assert_eq!(pumped(format!("{note}{{\"id\":2}}\n").into_bytes(), 100).await, "{\"id\":2}\n");
        let anonymous = format!("{{\"result\":\"{}\"}}\n", "x".repeat(300));
        assert_eq!(pumped(format!("{{\"id\":1}}\n{anonymous}{{\"id\":2}}\n").into_bytes(), 100).await, "{\"id\":1}\n");
    }

    #[tokio::test]
    async fn a_line_of_exactly_the_limit_passes() {
        let line = format!("{{\"id\":1,\"p\":\"{}\"}}\n", "x".repeat(80));
        let limit = line.len();
        assert_eq!(pumped(line.clone().into_bytes(), limit).await, line);
        assert!(pumped(line.clone().into_bytes(), limit - 1).await.contains("\"error\""));
    }

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(human_bytes(MAX_MESSAGE_BYTES), "16 MiB");
        assert_eq!(human_bytes(17 * 1024 * 1024 + 1), "17.0 MiB");
        assert_eq!(human_bytes(2048), "2 KiB");
        assert_eq!(human_bytes(100), "100 bytes");
    }
}
