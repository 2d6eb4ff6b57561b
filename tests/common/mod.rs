//! Shared pieces of the integration tests: an OpenAI-compatible server that replays scripted
//! responses (in OpenAI's documented format) and records what it was sent, and the fault
//! injection kit ([`faults`]).

#![allow(dead_code)]

pub mod faults;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::post;
use serde_json::{Value, json};

/// One scripted reply: a status and a body.
pub type Reply = (u16, Value);

#[derive(Clone, Default)]
pub struct Replay {
    script: Arc<Mutex<VecDeque<Reply>>>,
    pub requests: Arc<Mutex<Vec<Value>>>,
    server: Arc<Mutex<Option<tokio::task::AbortHandle>>>,
}

/// A scripted "reply" that kills the server instead: the listener closes and this request never
/// gets an answer, as when a model server crashes.
pub fn die() -> Reply {
    (0, Value::Null)
}

/// A chat completion whose message calls tools (`[(name, arguments JSON text)]`).
pub fn tool_calls(calls: &[(&str, &str)]) -> Reply {
    let calls: Vec<Value> =
        calls.iter().enumerate().map(|(i, (name, args))| json!({"id": format!("call_{i}"), "type": "function", "function": {"name": name, "arguments": args}})).collect();
    completion(json!({"role": "assistant", "content": null, "tool_calls": calls}), "tool_calls")
}

/// A chat completion whose message is plain text (which may hold text tool calls).
pub fn text(content: &str) -> Reply {
    completion(json!({"role": "assistant", "content": content}), "stop")
}

fn completion(message: Value, finish: &str) -> Reply {
    (
        200,
        json!({
            "id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": "replay",
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": null}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
        }),
    )
}

/// An OpenAI error object with `status`.
pub fn error(status: u16, message: &str) -> Reply {
    (status, json!({"error": {"message": message, "type": "invalid_request_error", "param": null, "code": null}}))
}

impl Replay {
    pub fn new(script: Vec<Reply>) -> Self {
        Replay { script: Arc::new(Mutex::new(script.into())), ..Default::default() }
    }

    /// Serves on a free port; returns the API root (`http://127.0.0.1:P/v1`) and the task.
    pub async fn serve(&self) -> (String, tokio::task::JoinHandle<()>) {
        let app = axum::Router::new().route("/v1/chat/completions", post(handle)).with_state(self.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        *self.server.lock().unwrap() = Some(task.abort_handle());
        (url, task)
    }

    pub fn requests(&self) -> Vec<Value> {
        self.requests.lock().unwrap().clone()
    }
}

async fn handle(State(replay): State<Replay>, Json(body): Json<Value>) -> impl IntoResponse {
    replay.requests.lock().unwrap().push(body);
    let (status, body) = replay.script.lock().unwrap().pop_front().unwrap_or_else(|| text("(script exhausted)"));
    if status == 0 {
        if let Some(server) = replay.server.lock().unwrap().take() {
            server.abort();
        }
        std::future::pending::<()>().await;
    }
    // One connection per request, so that aborting the server really cuts the client off.
    (StatusCode::from_u16(status).unwrap(), [(axum::http::header::CONNECTION, "close")], Json(body))
}

/// A tiny random model of python/tests/tiny_model.py, built on first use: with SmolLM2's tokenizer
/// and chat template (`bytes: false`), or over a byte-level vocabulary (`bytes: true`).
pub fn tiny_model(bytes: bool) -> std::path::PathBuf {
    let env = ta_python::PythonEnv::ensure().expect("the pinned Python environment");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("python/tests/tiny_model.py");
    let out = std::process::Command::new(&env.python).arg(script).args(bytes.then_some("bytes")).output().expect("python runs");
    assert!(out.status.success(), "building the tiny model failed:\n{}", String::from_utf8_lossy(&out.stderr));
    std::path::PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// Ctrl-C to a running command (SIGINT, as a terminal sends it), and what it wrote by the time it
/// exited.
pub async fn interrupt(child: tokio::process::Child) -> std::process::Output {
    std::process::Command::new("kill").args(["-INT", &child.id().unwrap().to_string()]).status().unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(120), child.wait_with_output()).await.expect("the command exits after Ctrl-C").unwrap()
}

/// The `train-agent` binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_train-agent")
}
