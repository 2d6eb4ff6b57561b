//! `train-agent eval --compare-base` end to end against the demo MCP server and an engine reached
//! with `--engine-url`. The engine here stands in for `vllm serve --enable-lora` (which cannot run
//! on this machine): it answers vLLM's documented `/v1/load_lora_adapter` and OpenAI chat
//! completions, playing a base model that answers in prose and an adapter (`trained`) that queries
//! the database and completes the task. Also: resuming keeps finished episodes; `stats` and
//! `report` read the directory.

mod common;

use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::State;
use axum::routing::{get, post};
use serde_json::{Value, json};

#[derive(Clone, Default)]
struct FakeEngine {
    chats: Arc<Mutex<Vec<String>>>,
    loads: Arc<Mutex<Vec<Value>>>,
    /// The KV cache's 16-token blocks vLLM's `/metrics` states (`vllm:cache_config_info`), beside
    /// the model card's 4,096-token `max_model_len`; None: no `/metrics` route.
    kv_blocks: Option<u64>,
}

fn completion(message: Value, finish: &str) -> Json<Value> {
    Json(json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": null}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60}
    }))
}

async fn chat(State(e): State<FakeEngine>, Json(body): Json<Value>) -> Json<Value> {
    let model = body["model"].as_str().unwrap_or_default().to_string();
    e.chats.lock().unwrap().push(model.clone());
    if model != "trained" {
        return completion(json!({"role": "assistant", "content": "I believe the company has several departments."}), "stop");
    }
    let seen_result = body["messages"].as_array().unwrap().iter().any(|m| m["role"] == "tool");
    let (name, args) = if seen_result {
        ("complete_task", json!({"summary": "The company has 9 departments."}))
    } else {
        ("run_query", json!({"sql": "SELECT count(*) FROM departments"}))
    };
    let call = json!({"id": "call_0", "type": "function", "function": {"name": name, "arguments": args.to_string()}});
    completion(json!({"role": "assistant", "content": null, "tool_calls": [call]}), "tool_calls")
}

/// vLLM answers 200 with a plain-text confirmation.
async fn load(State(e): State<FakeEngine>, Json(body): Json<Value>) -> String {
    let name = body["lora_name"].as_str().unwrap_or_default().to_string();
    e.loads.lock().unwrap().push(body);
    format!("Success: LoRA adapter '{name}' added successfully.")
}

/// vLLM writes every field of its cache config as a label of one gauge.
async fn metrics(State(e): State<FakeEngine>) -> Result<String, axum::http::StatusCode> {
    let blocks = e.kv_blocks.ok_or(axum::http::StatusCode::NOT_FOUND)?;
    Ok(format!(
        "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n# TYPE vllm:cache_config_info gauge\n\
         vllm:cache_config_info{{block_size=\"16\",cache_dtype=\"auto\",enable_prefix_caching=\"True\",num_gpu_blocks=\"{blocks}\"}} 1.0\n"
    ))
}

async fn models() -> Json<Value> {
    Json(json!({"object": "list", "data": [{"id": "base", "object": "model", "owned_by": "vllm", "root": "base", "parent": null, "max_model_len": 4096}]}))
}

async fn serve(engine: FakeEngine) -> String {
    let app = axum::Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/v1/load_lora_adapter", post(load))
        .route("/metrics", get(metrics))
        .route("/v1/models", get(models))
        .with_state(engine);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

/// `eval` into `out`; the base model's kept episodes live beside it (`validation-cache/`), so tests
/// never share them.
async fn eval(url: &str, model: &std::path::Path, scenarios: &std::path::Path, out: &std::path::Path, extra: &[&str]) -> std::process::Output {
    tokio::process::Command::new(common::bin())
        .env(ta_train::base_cache::DIR_ENV, out.parent().unwrap().join("validation-cache"))
        .args(["eval", "--server", "train-agent demo-server", "--engine-url", url, "--max-turns", "3"])
        .args(extra)
        .arg("--model")
        .arg(model)
        .arg("--scenarios")
        .arg(scenarios)
        .arg("--out")
        .arg(out)
        .output()
        .await
        .unwrap()
}

/// Two validation scenarios (and a train one eval leaves out) in `dir/s.jsonl`, and a run directory
/// whose final/ adapter names a base model the run's config overrides; returns both paths.
fn fixture(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let scenarios = dir.join("s.jsonl");
    std::fs::write(
        &scenarios,
        concat!(
            "{\"id\": \"dept-count\", \"task\": \"How many departments does the company have?\", \"expected\": 9, \"split\": \"validation\"}\n",
            "{\"id\": \"research-location\", \"task\": \"In which city is the Research department located?\", \"expected\": {\"contains\": \"Boston\"}, \"split\": \"validation\"}\n",
            "{\"id\": \"train-only\", \"task\": \"Not evaluated\", \"split\": \"train\"}\n",
        ),
    )
    .unwrap();
    let run = dir.join("run");
    std::fs::create_dir_all(run.join("final")).unwrap();
    std::fs::write(run.join("config.toml"), "base_model = \"smollm2-135m-instruct\"\n").unwrap();
    std::fs::write(run.join("final/adapter_config.json"), r#"{"base_model_name_or_path": "/somewhere/else", "r": 8, "peft_type": "LORA"}"#).unwrap();
    (scenarios, run)
}

#[tokio::test(flavor = "multi_thread")]
async fn eval_compare_base_prints_wins_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let (scenarios, run) = fixture(dir.path());
    let engine = FakeEngine::default();
    let url = serve(engine.clone()).await;
    let out = dir.path().join("eval");
    let first = eval(&url, &run.join("final"), &scenarios, &out, &["--compare-base", "--rollouts", "2"]).await;
    let stdout = String::from_utf8_lossy(&first.stdout);
    assert!(first.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&first.stderr));

    // The adapter went to the engine under `trained`, by its absolute path.
    let loads = engine.loads.lock().unwrap().clone();
    assert_eq!(loads.len(), 1);
    assert_eq!(loads[0]["lora_name"], "trained");
    assert_eq!(loads[0]["lora_path"], std::fs::canonicalize(run.join("final")).unwrap().display().to_string());
    // Both models played both validation scenarios twice: trained 2 turns, base 3 (prose, nudged).
    let chats = engine.chats.lock().unwrap().clone();
    assert_eq!(chats.iter().filter(|m| *m == "trained").count(), 2 * 2 * 2);
    assert_eq!(chats.iter().filter(|m| *m == "base").count(), 2 * 2 * 3);

    // The printed tables.
    assert!(stdout.contains("task completion    0.0%"), "{stdout}");
    assert!(stdout.contains("pass@2"), "{stdout}");
    assert!(stdout.contains("dept-count         0/2   2/2      win"), "{stdout}");
    assert!(stdout.contains("research-location  0/2   0/2      tie"), "{stdout}");
    assert!(stdout.contains("1 wins, 0 losses, 1 ties"), "{stdout}");

    let summary: ta_eval::EvalSummary = serde_json::from_slice(&std::fs::read(out.join("eval.json")).unwrap()).unwrap();
    assert_eq!(summary.models[0].source, "smollm2-135m-instruct", "the run's config.toml names the base model");
    assert_eq!(summary.metrics[1].success_rate, Some(0.5));
    assert_eq!(summary.metrics[0].success_rate, Some(0.0));
    assert_eq!(summary.settings["temperature"], 1.0, "several rollouts sample at temperature 1 by default");
    assert_eq!(summary.settings["max_episode_tokens"], ta_rollout::AgentConfig::DEFAULT.max_episode_tokens, "the episode budget is a setting results are compared by");
    assert!(out.join("report.html").exists());
    let trained = ta_types::trajectory::read_trajectories(&out.join("trajectories/trained.jsonl")).unwrap();
    assert_eq!(trained.len(), 4);
    assert!(trained.iter().all(|t| t.model == "trained" && t.reward.is_some()));

    // Again: everything is kept, nothing is played.
    let again = eval(&url, &run.join("final"), &scenarios, &out, &["--compare-base", "--rollouts", "2"]).await;
    assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
    assert!(String::from_utf8_lossy(&again.stderr).contains("base: 4 finished episodes kept"));
    assert_eq!(engine.chats.lock().unwrap().len(), chats.len(), "no episode was replayed");

    // A different evaluation into the same directory is refused, not mixed in.
    let other = eval(&url, &run.join("final"), &scenarios, &out, &["--compare-base", "--rollouts", "1"]).await;
    let err = String::from_utf8_lossy(&other.stderr);
    assert!(!other.status.success() && err.contains("holds episodes of another evaluation") && err.contains("hint:"), "{err}");

    let stats = std::process::Command::new(common::bin()).arg("stats").arg(&out).output().unwrap();
    let text = String::from_utf8_lossy(&stats.stdout);
    assert!(stats.status.success() && text.contains("1 wins, 0 losses, 1 ties"), "{text}");
}

/// An engine whose KV cache holds fewer whole-context sequences than the evaluation plays at once
/// (both models, two episodes of two scenarios each: 8) is named before the episodes queue; one
/// that holds them all, or does not say, is not.
#[tokio::test(flavor = "multi_thread")]
async fn an_engine_too_small_for_the_episodes_in_flight_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let (scenarios, run) = fixture(dir.path());
    for (blocks, warned) in [(Some(256), true), (Some(8 * 256), false), (None, false)] {
        let url = serve(FakeEngine { kv_blocks: blocks, ..FakeEngine::default() }).await;
        let out = dir.path().join(format!("eval-{}", blocks.unwrap_or(0)));
        let played = eval(&url, &run.join("final"), &scenarios, &out, &["--compare-base", "--rollouts", "2", "--replay-base"]).await;
        let err = String::from_utf8_lossy(&played.stderr);
        assert!(played.status.success(), "{err}");
        assert_eq!(err.contains("KV cache holds"), warned, "{err}");
        if warned {
            assert!(err.contains("holds 1 sequences of 4096 tokens at once") && err.contains("up to 8 episodes in flight"), "{err}");
        }
    }
}

/// The base model's episodes are the same for every evaluation that asks it the same scenarios the
/// same way, so a second evaluation (another adapter, another --out) reuses them instead of playing
/// them again; `--replay-base` and any other setting play them.
#[tokio::test(flavor = "multi_thread")]
async fn a_second_evaluation_reuses_the_base_models_episodes() {
    let dir = tempfile::tempdir().unwrap();
    let (scenarios, run) = fixture(dir.path());
    let engine = FakeEngine::default();
    let url = serve(engine.clone()).await;
    let base_chats = || engine.chats.lock().unwrap().iter().filter(|m| *m == "base").count();
    let trained_chats = || engine.chats.lock().unwrap().iter().filter(|m| *m == "trained").count();
    let first = eval(&url, &run.join("final"), &scenarios, &dir.path().join("first"), &["--compare-base"]).await;
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let (base, trained) = (base_chats(), trained_chats());
    assert_eq!((base, trained), (2 * 3, 2 * 2), "both models played both scenarios");

    let second = eval(&url, &run.join("final"), &scenarios, &dir.path().join("second"), &["--compare-base"]).await;
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(second.status.success(), "{err}");
    assert!(err.contains("base: 2 episodes reused from an earlier evaluation") && err.contains("--replay-base"), "{err}");
    assert_eq!(base_chats(), base, "the base model played nothing");
    assert_eq!(trained_chats(), 2 * trained, "the adapter played again");
    let episodes = |out: &str| ta_types::trajectory::read_trajectories(&dir.path().join(out).join("trajectories/base.jsonl")).unwrap();
    assert_eq!(serde_json::to_value(episodes("second")).unwrap(), serde_json::to_value(episodes("first")).unwrap());
    let summary: ta_eval::EvalSummary = serde_json::from_slice(&std::fs::read(dir.path().join("second/eval.json")).unwrap()).unwrap();
    assert_eq!((summary.metrics[0].success_rate, summary.metrics[1].success_rate), (Some(0.0), Some(0.5)), "the reused episodes are scored and compared as played ones");

    let replayed = eval(&url, &run.join("final"), &scenarios, &dir.path().join("replayed"), &["--compare-base", "--replay-base"]).await;
    assert!(replayed.status.success(), "{}", String::from_utf8_lossy(&replayed.stderr));
    assert_eq!(base_chats(), 2 * base, "--replay-base plays the base model again");
    let reseeded = eval(&url, &run.join("final"), &scenarios, &dir.path().join("reseeded"), &["--compare-base", "--seed", "1"]).await;
    assert!(reseeded.status.success(), "{}", String::from_utf8_lossy(&reseeded.stderr));
    assert_eq!(base_chats(), 3 * base, "another seed is another validation");
}

/// `--baseline`: a second adapter (here one that answers like the base model) is played in the same
/// engine, and the adapter under test is compared with it, not with the base model, by the paired
/// test.
#[tokio::test(flavor = "multi_thread")]
async fn eval_against_a_baseline_adapter_prints_the_paired_test() {
    let dir = tempfile::tempdir().unwrap();
    let scenarios = dir.path().join("s.jsonl");
    std::fs::write(
        &scenarios,
        concat!(
            "{\"id\": \"dept-count\", \"task\": \"How many departments does the company have?\", \"expected\": 9, \"split\": \"validation\"}\n",
            "{\"id\": \"research-location\", \"task\": \"In which city is the Research department located?\", \"expected\": {\"contains\": \"Boston\"}, \"split\": \"validation\"}\n",
        ),
    )
    .unwrap();
    let adapter = |name: &str, r: u32| {
        let d = dir.path().join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("adapter_config.json"), format!(r#"{{"base_model_name_or_path": "smollm2-135m-instruct", "r": {r}, "peft_type": "LORA"}}"#)).unwrap();
        d
    };
    let (trained, sft) = (adapter("grpo-final", 8), adapter("sft-final", 32));
    let engine = FakeEngine::default();
    let url = serve(engine.clone()).await;
    let out = dir.path().join("eval");
    let run = eval(&url, &trained, &scenarios, &out, &["--compare-base", "--baseline", sft.to_str().unwrap()]).await;
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&run.stderr));

    let loads: Vec<String> = engine.loads.lock().unwrap().iter().map(|l| l["lora_name"].as_str().unwrap().to_string()).collect();
    assert_eq!(loads, ["trained", "baseline"]);
    // Three columns; the per-scenario table and the paired test compare trained with the baseline.
    assert!(stdout.contains("base") && stdout.contains("baseline") && stdout.contains("trained"), "{stdout}");
    assert!(stdout.contains("dept-count         0/1       1/1      win"), "{stdout}");
    assert!(stdout.contains("paired, trained vs baseline: better on 1, worse on 0 of 2 tasks (exact McNemar p = 1.000); success +50.0 points"), "{stdout}");
    let summary: ta_eval::EvalSummary = serde_json::from_slice(&std::fs::read(out.join("eval.json")).unwrap()).unwrap();
    assert_eq!(summary.models.iter().map(|m| m.label.as_str()).collect::<Vec<_>>(), ["base", "baseline", "trained"]);
    let paired = summary.comparison.unwrap().paired.unwrap();
    assert_eq!((paired.better, paired.worse, paired.tasks), (1, 0, 2));
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("<th>scenario</th><th>baseline</th><th>trained</th>") && html.contains("id=\"paired-test\""), "the report compares trained with the baseline");

    let missing = eval(&url, &trained, &scenarios, &dir.path().join("e2"), &["--baseline", dir.path().to_str().unwrap()]).await;
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(!missing.status.success() && err.contains("--baseline") && err.contains("hint:"), "{err}");
}

#[test]
fn compare_base_needs_an_adapter() {
    let dir = tempfile::tempdir().unwrap();
    let scenarios = dir.path().join("s.jsonl");
    std::fs::write(&scenarios, "{\"task\": \"x\"}\n").unwrap();
    let out = std::process::Command::new(common::bin())
        .args(["eval", "--server", "train-agent demo-server", "--model", "smollm2-135m-instruct", "--compare-base", "--out"])
        .arg(dir.path().join("o"))
        .arg("--scenarios")
        .arg(&scenarios)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--compare-base needs an adapter") && err.contains("hint:"), "{err}");
}
