//! The judge against an HTTP server started by the test that answers in the documented shapes of
//! OpenAI's chat completions (`choices[].message.content`, `usage.prompt_tokens`/`completion_tokens`,
//! error objects) and Anthropic's Messages API (`content[].text`, `usage.input_tokens`/`output_tokens`,
//! `x-api-key` and `anthropic-version` headers): rate limits with `retry-after`, server errors,
//! timeouts, invalid JSON and its repair, skipped groups, cost and the cache.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use ta_reward::{CustomReward, JudgeConfig, JudgeMode, RewardConfig, Rewarder};
use ta_types::trajectory::GroupRef;
use ta_types::{Message, Outcome, Scenario, Trajectory};

const OPENAI_KEY: &str = "sk-openai-test-secret";
const ANTHROPIC_KEY: &str = "sk-ant-test-secret";

fn keys() {
    static ONCE: Once = Once::new();
    // SAFETY: set once, before any judge of this test binary reads the environment.
    ONCE.call_once(|| unsafe {
        std::env::set_var("OPENAI_API_KEY", OPENAI_KEY);
        std::env::set_var("ANTHROPIC_API_KEY", ANTHROPIC_KEY);
        std::env::remove_var("OPENAI_BASE_URL");
        std::env::remove_var("ANTHROPIC_BASE_URL");
        std::env::remove_var("OPENROUTER_API_KEY");
    });
}

/// What the server does with the next request.
#[derive(Clone)]
enum Step {
    /// 200 with this message text (usage: 1000 prompt/input, 200 completion/output tokens).
    Reply(String),
    /// An error status with an error object, and optionally `retry-after` seconds.
    Status(u16, Option<u32>),
    /// Wait this long, then reply.
    Slow(Duration, String),
    /// 400 with this error message.
    BadRequest(&'static str),
}

#[derive(Clone, Default)]
struct Server {
    script: Arc<Mutex<VecDeque<Step>>>,
    seen: Arc<Mutex<Vec<(String, HeaderMap, Value)>>>,
}

impl Server {
    async fn start(script: Vec<Step>) -> (Server, String) {
        let s = Server { script: Arc::new(Mutex::new(script.into())), ..Default::default() };
        let app =
            axum::Router::new().route("/v1/chat/completions", post(openai)).route("/v1/messages", post(anthropic)).route("/custom", post(custom)).with_state(s.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (s, url)
    }

    fn requests(&self) -> Vec<(String, HeaderMap, Value)> {
        self.seen.lock().unwrap().clone()
    }

    async fn next(&self, path: &str, headers: HeaderMap, body: Value) -> Result<String, Response> {
        self.seen.lock().unwrap().push((path.to_string(), headers, body));
        let step = self.script.lock().unwrap().pop_front().expect("the test scripted every request");
        match step {
            Step::Reply(text) => Ok(text),
            Step::Slow(d, text) => {
                tokio::time::sleep(d).await;
                Ok(text)
            }
            Step::BadRequest(message) => {
                let body = json!({"error": {"message": message, "type": "invalid_request_error", "param": "response_format", "code": null}});
                Err((StatusCode::BAD_REQUEST, Json(body)).into_response())
            }
            Step::Status(code, retry_after) => {
                let kind = if code == 429 { "rate_limit_error" } else { "server_error" };
                let body = Json(json!({"error": {"message": format!("scripted {code}"), "type": kind, "param": null, "code": null}}));
                let mut resp = (StatusCode::from_u16(code).unwrap(), body).into_response();
                if let Some(s) = retry_after {
                    resp.headers_mut().insert("retry-after", s.to_string().parse().unwrap());
                }
                Err(resp)
            }
        }
    }
}

async fn openai(State(s): State<Server>, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    match s.next("openai", headers, body).await {
        Err(r) => r,
        Ok(text) => Json(json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini-2024-07-18",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": null}, "logprobs": null, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1000, "completion_tokens": 200, "total_tokens": 1200,
                      "prompt_tokens_details": {"cached_tokens": 0}, "completion_tokens_details": {"reasoning_tokens": 0}}
        }))
        .into_response(),
    }
}

async fn anthropic(State(s): State<Server>, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    match s.next("anthropic", headers, body).await {
        Err(r) => r,
        Ok(text) => Json(json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-haiku-4-5",
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": null,
            "usage": {"input_tokens": 1000, "output_tokens": 200}
        }))
        .into_response(),
    }
}

async fn custom(State(s): State<Server>, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    let n = body["trajectories"].as_array().map_or(0, Vec::len);
    s.seen.lock().unwrap().push(("custom".into(), headers, body));
    Json(json!({"scores": vec![0.75; n]})).into_response()
}

fn scores(values: &[f64]) -> String {
    let items: Vec<Value> =
        values.iter().enumerate().map(|(i, s)| json!({"trajectory_id": (i + 1).to_string(), "explanation": format!("attempt {}", i + 1), "score": s})).collect();
    json!({"scores": items}).to_string()
}

fn scenario() -> Scenario {
    serde_json::from_value(json!({"id": "dept-count", "task": "How many departments does the company have?", "expected": 9})).unwrap()
}

/// A right and a wrong attempt at `scenario()`.
fn group() -> Vec<Trajectory> {
    let prefix = vec![Message::system("You are an agent."), Message::user("How many departments does the company have?")];
    let mut right = Trajectory::start("dept-count", GroupRef { step: 1, index: 0 }, "base", prefix.clone());
    right.messages.push(Message::assistant("9"));
    (right.outcome, right.final_answer) = (Outcome::Completed, Some("There are 9 departments.".into()));
    let mut wrong = Trajectory::start("dept-count", GroupRef { step: 1, index: 1 }, "base", prefix);
    wrong.messages.push(Message::assistant("12"));
    (wrong.outcome, wrong.final_answer) = (Outcome::Completed, Some("12".into()));
    vec![right, wrong]
}

fn config(model: &str, url: &str) -> RewardConfig {
    RewardConfig { judge: JudgeConfig { model: model.into(), base_url: Some(url.into()), max_retries: 2, timeout_s: 5.0, ..Default::default() }, ..Default::default() }
}

#[tokio::test]
async fn openai_group_is_scored_priced_and_cached() {
    keys();
    let (server, url) = Server::start(vec![Step::Reply(scores(&[1.0, 0.0]))]).await;
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("judge-cache.jsonl");
    let cfg = config("openai/gpt-4o-mini", &format!("{url}/v1"));
    let rewarder = Rewarder::new(&cfg, Some(&cache)).unwrap();
    let mut ts = group();
    rewarder.score(&[scenario()], &mut ts).await.unwrap();

    assert_eq!(ts[0].reward_parts.judge, Some(1.0));
    assert_eq!(ts[1].reward_parts.judge, Some(0.0));
    assert_eq!(ts[0].judge_explanation.as_deref(), Some("attempt 1"));
    assert_eq!(ts[0].reward_parts.ground_truth, Some(1.0));
    let rules = ts[0].reward_parts.rules.unwrap();
    let tie_break = ta_reward::tie_break(&cfg, rules, 0.5);
    assert!(tie_break > 0.0 && tie_break < 0.5, "{tie_break}");
    assert!((ts[0].reward.unwrap() - (1.0 + 1.0 + tie_break)).abs() < 1e-12, "judge + ground truth + the rules' tie-break");

    let stats = rewarder.judge().unwrap().stats();
    assert_eq!((stats.groups, stats.calls, stats.skipped, stats.cache_hits), (1, 1, 0, 0));
    assert_eq!((stats.usage.input_tokens, stats.usage.output_tokens), (1000, 200));
    assert!((stats.cost_usd - (1000.0 * 0.15 + 200.0 * 0.60) / 1e6).abs() < 1e-15, "{}", stats.cost_usd);

    let requests = server.requests();
    let (_, headers, body) = &requests[0];
    assert_eq!(headers["authorization"], format!("Bearer {OPENAI_KEY}"));
    assert_eq!(body["model"], "gpt-4o-mini");
    assert_eq!(body["response_format"]["type"], "json_schema");
    assert_eq!(body["response_format"]["json_schema"]["schema"]["required"], json!(["scores"]));
    assert_eq!(body["messages"][0]["role"], "system");
    let user = body["messages"][1]["content"].as_str().unwrap();
    assert!(user.contains("<trajectory id=\"2\">") && user.contains("<context>"), "{user}");

    // A new judge on the same run directory (a resumed run) answers from the cache: no request,
    // no cost.
    let again = Rewarder::new(&cfg, Some(&cache)).unwrap();
    let mut ts2 = group();
    again.score(&[scenario()], &mut ts2).await.unwrap();
    assert_eq!(ts2[1].reward_parts.judge, Some(0.0));
    let s2 = again.judge().unwrap().stats();
    assert_eq!((s2.cache_hits, s2.calls, s2.cost_usd), (1, 0, 0.0));
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn rate_limits_server_errors_and_timeouts_are_retried() {
    keys();
    let script = vec![Step::Status(429, Some(1)), Step::Status(500, None), Step::Slow(Duration::from_secs(3), scores(&[0.0, 0.0])), Step::Reply(scores(&[0.9, 0.2]))];
    let (server, url) = Server::start(script).await;
    let mut cfg = config("openai/gpt-4o-mini", &format!("{url}/v1"));
    cfg.judge.max_retries = 3;
    cfg.judge.timeout_s = 1.0;
    let rewarder = Rewarder::new(&cfg, None).unwrap();
    let mut ts = group();
    let t0 = Instant::now();
    rewarder.score(&[scenario()], &mut ts).await.unwrap();
    assert!(t0.elapsed() >= Duration::from_secs(1), "retry-after: 1 was honoured");
    assert_eq!(server.requests().len(), 4);
    assert_eq!((ts[0].reward_parts.judge, ts[1].reward_parts.judge), (Some(0.9), Some(0.2)));
    assert_eq!(rewarder.judge().unwrap().stats().skipped, 0);
}

#[tokio::test]
async fn an_invalid_reply_gets_one_repair_request() {
    keys();
    let script = vec![Step::Reply("Trajectory 1 is better.".into()), Step::Reply(scores(&[0.8, 0.1]))];
    let (server, url) = Server::start(script).await;
    let rewarder = Rewarder::new(&config("openai/gpt-4o-mini", &format!("{url}/v1")), None).unwrap();
    let mut ts = group();
    rewarder.score(&[scenario()], &mut ts).await.unwrap();
    assert_eq!(ts[0].reward_parts.judge, Some(0.8));
    let requests = server.requests();
    let messages = requests[1].2["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 4, "system, user, the invalid reply, the repair request");
    assert_eq!(messages[2]["content"], "Trajectory 1 is better.");
    assert!(messages[3]["content"].as_str().unwrap().contains("not valid"));
    let stats = rewarder.judge().unwrap().stats();
    assert_eq!((stats.calls, stats.usage.input_tokens), (2, 2000), "both calls are paid for");
}

#[tokio::test]
async fn groups_the_judge_cannot_score_are_skipped_and_counted_never_zeroed() {
    keys();
    // Invalid twice (schema violation: a score above 1), then server errors past the retries.
    let script =
        vec![Step::Reply(scores(&[1.5, 0.0])), Step::Reply("{\"scores\": []}".into()), Step::Status(500, None), Step::Status(503, None), Step::Status(502, None)];
    let (server, url) = Server::start(script).await;
    let rewarder = Rewarder::new(&config("openai/gpt-4o-mini", &format!("{url}/v1")), None).unwrap();
    let mut ts = group();
    rewarder.score(&[scenario()], &mut ts).await.unwrap();
    assert_eq!(ts[0].reward_parts.judge, None);
    assert_eq!(ts[0].judge_explanation, None);
    let without_judge = ts[0].reward_parts.ground_truth.unwrap() + ta_reward::tie_break(&RewardConfig::default(), ts[0].reward_parts.rules.unwrap(), 0.5);
    assert!((ts[0].reward.unwrap() - without_judge).abs() < 1e-12);

    let mut ts = group();
    rewarder.score(&[scenario()], &mut ts).await.unwrap();
    assert_eq!(ts[1].reward_parts.judge, None);
    assert_eq!(server.requests().len(), 5, "a request and its repair, then a request and its 2 retries");
    let stats = rewarder.judge().unwrap().stats();
    assert_eq!((stats.groups, stats.skipped), (2, 2));
}

#[tokio::test]
async fn a_rejected_key_stops_with_a_hint() {
    keys();
    let (_server, url) = Server::start(vec![Step::Status(401, None)]).await;
    let rewarder = Rewarder::new(&config("openai/gpt-4o-mini", &format!("{url}/v1")), None).unwrap();
    let err = rewarder.score(&[scenario()], &mut group()).await.unwrap_err().to_string();
    assert!(err.contains("rejected the API key") && err.contains("hint:"), "{err}");
    assert!(!err.contains(OPENAI_KEY));
}

#[tokio::test]
async fn anthropic_messages_api_with_its_headers_usage_and_retries() {
    keys();
    let script = vec![Step::Status(529, None), Step::Reply(format!("Here you go:\n{}", scores(&[0.7, 0.3])))];
    let (server, url) = Server::start(script).await;
    let mut cfg = config("anthropic/claude-haiku-4-5", &url);
    cfg.judge.max_output_tokens = 777;
    let rewarder = Rewarder::new(&cfg, None).unwrap();
    let mut ts = group();
    rewarder.score(&[scenario()], &mut ts).await.unwrap();
    assert_eq!((ts[0].reward_parts.judge, ts[1].reward_parts.judge), (Some(0.7), Some(0.3)));
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let (path, headers, body) = &requests[1];
    assert_eq!(path, "anthropic");
    assert_eq!(headers["x-api-key"], ANTHROPIC_KEY);
    assert_eq!(headers["anthropic-version"], "2023-06-01");
    assert!(headers.get("authorization").is_none());
    assert_eq!(body["model"], "claude-haiku-4-5");
    assert_eq!(body["max_tokens"], 777);
    assert!(body["system"].as_str().unwrap().contains("Grading standards"));
    assert_eq!(body["messages"][0]["role"], "user");
    let stats = rewarder.judge().unwrap().stats();
    assert!((stats.cost_usd - (1000.0 * 1.0 + 200.0 * 5.0) / 1e6).abs() < 1e-15, "{}", stats.cost_usd);
}

#[tokio::test]
async fn absolute_mode_and_http_custom_rewards() {
    keys();
    let (server, url) = Server::start(vec![Step::Reply(scores(&[1.0])), Step::Reply(scores(&[0.25]))]).await;
    let mut cfg = config("openai/gpt-4o-mini", &format!("{url}/v1"));
    cfg.judge.mode = JudgeMode::Absolute;
    cfg.judge.concurrency = 1;
    cfg.custom = vec![CustomReward { name: "http".into(), command: None, url: Some(format!("{url}/custom")), weight: 2.0, timeout_s: 5.0 }];
    let rewarder = Rewarder::new(&cfg, None).unwrap();
    let mut ts = group();
    rewarder.score(&[scenario()], &mut ts).await.unwrap();
    assert_eq!((ts[0].reward_parts.judge, ts[1].reward_parts.judge), (Some(1.0), Some(0.25)));
    assert_eq!(ts[1].reward_parts.custom["http"], 0.75);
    let p = &ts[1].reward_parts;
    let expected = p.judge.unwrap() + p.ground_truth.unwrap() + ta_reward::tie_break(&cfg, p.rules.unwrap(), 0.5) + 2.0 * 0.75;
    assert!((ts[1].reward.unwrap() - expected).abs() < 1e-12);
    let requests = server.requests();
    let judged: Vec<_> = requests.iter().filter(|r| r.0 == "openai").collect();
    assert_eq!(judged.len(), 2, "one call per trajectory");
    assert!(!judged[0].2["messages"][1]["content"].as_str().unwrap().contains("<context>"));
    let custom = requests.iter().find(|r| r.0 == "custom").unwrap();
    assert_eq!(custom.2["task"], "How many departments does the company have?");
    assert_eq!(custom.2["scenario"]["expected"], 9.0);
    assert_eq!(custom.2["trajectories"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn servers_without_structured_output_are_asked_without_it() {
    keys();
    let script = vec![
        Step::BadRequest("Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model."),
        Step::Reply(scores(&[0.6, 0.4])),
        Step::Reply(scores(&[0.6, 0.4])),
    ];
    let (server, url) = Server::start(script).await;
    let Err(missing) = Rewarder::new(&config("openrouter/some/model", &format!("{url}/v1")), None) else { panic!("no key") };
    assert!(missing.to_string().contains("OPENROUTER_API_KEY"), "{missing}");
    let rewarder = Rewarder::new(&config("openai/gpt-3.5-turbo", &format!("{url}/v1")), None).unwrap();
    let mut ts = group();
    rewarder.score(&[scenario()], &mut ts).await.unwrap();
    assert_eq!(ts[0].reward_parts.judge, Some(0.6));
    let mut ts = group();
    ts[1].messages.push(Message::user("a different group"));
    rewarder.score(&[scenario()], &mut ts).await.unwrap();
    let requests = server.requests();
    assert!(requests[0].2.get("response_format").is_some());
    assert!(requests[1].2.get("response_format").is_none() && requests[2].2.get("response_format").is_none(), "remembered");
    assert_eq!(rewarder.judge().unwrap().stats().skipped, 0);
    assert!(!rewarder.judge().unwrap().priced(), "gpt-3.5-turbo is not in the price table");
}
