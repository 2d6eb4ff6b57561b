//! `scenarios generate` end to end on the CPU: a scripted teacher that follows OpenAI's
//! chat-completions API writes tasks (its first reply is malformed and gets repaired) and solves
//! them through the real demo server, answering from the tool results the server returned; one
//! task's solver disagrees with itself. Checks the counts per stage, the agreed `expected`
//! values, the traces, the split, the cost, and that re-running with `--keep-unverified` reuses
//! every paid call.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::State;
use axum::routing::post;
use serde_json::{Value, json};
use ta_types::scenario::{ExpectedRule, load_scenarios};
use ta_types::{Expected, Split};

const DEPARTMENTS: &str = "How many departments does the company have?";
const DEPARTMENTS_AGAIN: &str = "How many departments does the company have ?";
const FIRST_NAMES: &str = "Which are the first three department names in alphabetical order?";
const MAX_SALARY: &str = "What is the highest salary paid to any employee?";
const NEXT_HIRE: &str = "Which department should get the next new hire?";
// The replay's tasks: the solver agrees on each, but only the first answer comes from the server.
const CAPITAL: &str = "What is the capital of France?";
const BIGGEST_TABLE: &str = "Which table of the company database has the most rows?";
// On the memory server: a task whose solution writes.
const REMEMBER: &str = "Add Ada Lovelace to the knowledge graph as a person, then tell me whom you added.";

#[derive(Clone, Default)]
struct Teacher {
    generation_calls: Arc<AtomicUsize>,
    requests: Arc<Mutex<Vec<Value>>>,
    /// Write the replay's tasks instead.
    replay: bool,
    /// Write the memory server's task instead.
    memory: bool,
    /// Bodies of `/v1/load_lora_adapter` requests.
    loads: Arc<Mutex<Vec<Value>>>,
    /// Milliseconds each solver turn waits before its reply.
    solver_delay_ms: u64,
}

fn tasks(items: &[(&str, &str, u8)]) -> String {
    let tasks: Vec<Value> = items.iter().map(|(t, tool, d)| json!({"task": t, "tools": [tool], "difficulty": d, "changes_state": false})).collect();
    json!({ "tasks": tasks }).to_string()
}

fn call(name: &str, args: Value) -> Json<Value> {
    Json(common::tool_calls(&[(name, &args.to_string())]).1)
}

fn first_number(text: &str) -> String {
    text.split(|c: char| !c.is_ascii_digit() && c != '.').find(|s| !s.is_empty() && s.chars().next().unwrap().is_ascii_digit()).unwrap().to_string()
}

async fn chat(State(t): State<Teacher>, Json(body): Json<Value>) -> Json<Value> {
    t.requests.lock().unwrap().push(body.clone());
    let messages = body["messages"].as_array().unwrap();
    if body["response_format"]["json_schema"]["name"] == "scenario_tasks" {
        let last = messages.last().unwrap()["content"].as_str().unwrap();
        if t.memory {
            return Json(common::text(&tasks(&[(REMEMBER, "create_entities", 2)])).1);
        }
        if t.replay {
            return Json(common::text(&tasks(&[(DEPARTMENTS, "run_query", 1), (CAPITAL, "run_query", 1), (BIGGEST_TABLE, "list_tables", 2)])).1);
        }
        if last.starts_with("Your reply is not valid") {
            return Json(common::text(&tasks(&[(DEPARTMENTS, "run_query", 1), (DEPARTMENTS_AGAIN, "run_query", 1), (NEXT_HIRE, "list_tables", 3)])).1);
        }
        return Json(
            common::text(&match t.generation_calls.fetch_add(1, Ordering::SeqCst) {
                // Not the schema: an unknown tool and a difficulty out of range.
                0 => "Sure! {\"tasks\": [{\"task\": \"Count the departments\", \"tools\": [\"drop_database\"], \"difficulty\": 9}]}".to_string(),
                _ => tasks(&[(FIRST_NAMES, "list_tables", 2), (MAX_SALARY, "run_query", 2)]),
            })
            .1,
        );
    }
    // The solver: query the server, then answer from what it returned.
    tokio::time::sleep(std::time::Duration::from_millis(t.solver_delay_ms)).await;
    let task = messages[1]["content"].as_str().unwrap();
    let attempt = body["seed"].as_u64().unwrap() >> 16;
    let result = messages.iter().rev().find(|m| m["role"] == "tool").and_then(|m| m["content"].as_str());
    let sql = match task {
        DEPARTMENTS => "SELECT COUNT(*) AS n FROM departments",
        FIRST_NAMES => "SELECT name FROM departments ORDER BY name LIMIT 3",
        MAX_SALARY => "SELECT MAX(salary) AS top FROM employees",
        NEXT_HIRE => {
            let answer = ["Engineering", "Sales"][attempt as usize % 2];
            return call("complete_task", json!({ "summary": answer }));
        }
        // From memory, every time.
        CAPITAL => return call("complete_task", json!({ "summary": "Paris" })),
        // A look at the tables, then a name they do not show, every time.
        BIGGEST_TABLE if result.is_none() => return call("list_tables", json!({})),
        BIGGEST_TABLE => return call("complete_task", json!({ "summary": "payroll_history" })),
        REMEMBER if result.is_none() => {
            return call("create_entities", json!({"entities": [{"name": "Ada Lovelace", "entityType": "person", "observations": ["wrote the first program"]}]}));
        }
        REMEMBER => return call("complete_task", json!({ "summary": "Ada Lovelace" })),
        other => panic!("unexpected task {other:?}"),
    };
    let Some(result) = result else { return call("run_query", json!({"sql": sql})) };
    let rows: Vec<&str> = result.lines().skip(1).filter(|l| !l.starts_with('(')).collect();
    let answer = match task {
        FIRST_NAMES => rows.join(", "),
        _ => format!("The answer is {}.", first_number(rows[0])),
    };
    call("complete_task", json!({"summary": answer}))
}

/// vLLM's runtime LoRA loading (`VLLM_ALLOW_RUNTIME_LORA_UPDATING`): 200 and a line of text.
async fn load_adapter(State(t): State<Teacher>, Json(body): Json<Value>) -> String {
    let name = body["lora_name"].as_str().unwrap_or_default().to_string();
    t.loads.lock().unwrap().push(body);
    format!("Success: LoRA adapter '{name}' added successfully.")
}

async fn serve(t: Teacher) -> String {
    let app = axum::Router::new().route("/v1/chat/completions", post(chat)).route("/v1/load_lora_adapter", post(load_adapter)).with_state(t);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

/// `scenarios generate` on `server` with `teacher` at `url`, writing to `out` (a test key for
/// the provider); the caller adds its own flags.
fn generate_command(server: &str, teacher: &str, url: &str, out: &std::path::Path) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(common::bin());
    command
        .args(["scenarios", "generate", "--server", server, "--teacher", teacher, "--teacher-base-url", url, "--out"])
        .arg(out)
        .env("OPENAI_API_KEY", "sk-test-not-a-secret");
    command
}

async fn generate(url: &str, out: &std::path::Path, extra: &[&str]) -> (String, String) {
    let run = generate_command("train-agent demo-server", "openai/gpt-4o-mini", url, out)
        .args(["--n", "5", "--batch", "3", "--validation-fraction", "0.34", "--seed", "1"])
        .args(extra)
        .output()
        .await
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&run.stdout).to_string(), String::from_utf8_lossy(&run.stderr).to_string());
    assert!(run.status.success(), "{stdout}\n{stderr}");
    (stdout, stderr)
}

#[tokio::test(flavor = "multi_thread")]
async fn generated_tasks_are_checked_by_running_them() {
    let teacher = Teacher::default();
    let url = serve(teacher.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("gen");
    let (stdout, stderr) = generate(&url, &out, &[]).await;

    let summary: Value = serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let c = &summary["counts"];
    let count = |k: &str| c[k].as_u64().unwrap();
    assert_eq!((count("generated"), count("schema_valid"), count("repaired")), (5, 5, 3), "{c}");
    assert_eq!((count("invalid_replies"), count("dropped_replies")), (1, 0));
    assert_eq!(count("deduped"), 4, "the punctuation variant is a duplicate");
    assert_eq!((count("solved"), count("agreed"), count("kept"), count("unverified")), (4, 3, 3, 0), "{c}");
    assert_eq!(count("train") + count("validation"), 3);
    assert_eq!(count("validation"), 1);
    assert_eq!(count("traces"), 12, "4 agreeing attempts for each of 3 tasks");
    for line in ["generated         5 tasks", "deduped           4", "agreed            3", "kept              3", "split             2 train, 1 validation"] {
        assert!(stderr.contains(line), "no {line:?} in\n{stderr}");
    }

    // Teacher spend: 3 generation calls plus every solver turn, at gpt-4o-mini's list price.
    let requests = teacher.requests.lock().unwrap().len() as u64;
    assert_eq!(summary["teacher_spend"]["calls"].as_u64().unwrap(), requests, "{summary}");
    let cost = summary["total_cost_usd"].as_f64().unwrap();
    assert!((cost - requests as f64 * (11.0 * 0.15 + 7.0 * 0.60) / 1e6).abs() < 1e-12, "{cost}");
    assert!(stdout.contains("cost              $0.0"), "{stdout}");
    assert!(stdout.contains("tools covered     2 of 3 (none for: describe_table)"), "{stdout}");

    let scenarios = load_scenarios(&out.join("scenarios.jsonl")).unwrap();
    let by_task = |t: &str| scenarios.iter().find(|s| s.task == t).unwrap_or_else(|| panic!("{t} not kept"));
    assert_eq!(by_task(DEPARTMENTS).expected, Some(Expected::Rule(ExpectedRule::Number { number: 9.0, tolerance: 0.0 })), "9 departments in the demo database");
    let Some(Expected::Rule(ExpectedRule::Set(names))) = &by_task(FIRST_NAMES).expected else { panic!("{:?}", by_task(FIRST_NAMES).expected) };
    assert_eq!(names.len(), 3);
    assert!(matches!(by_task(MAX_SALARY).expected, Some(Expected::Rule(ExpectedRule::Number { .. }))));
    assert!(scenarios.iter().all(|s| s.task != NEXT_HIRE), "2 of 4 agreeing is not enough");
    for s in &scenarios {
        assert_eq!((s.checked, s.source.as_deref()), (Some(true), Some("openai/gpt-4o-mini")));
        assert!(s.difficulty.as_ref().and_then(|d| d.level()).is_some());
        assert!(s.split.is_some());
    }

    let traces = ta_types::trace::read_traces(&out.join("traces.jsonl")).unwrap();
    for t in &traces {
        assert_eq!(t.source, "teacher");
        assert_eq!(t.reward_parts.ground_truth, Some(1.0), "an agreeing episode passes its own expected");
        let s = scenarios.iter().find(|s| s.id == t.scenario_id).unwrap();
        assert_eq!(t.split, s.split);
        assert!(t.tools.iter().any(|x| x.function.name == "run_query"));
    }
    assert!(traces.iter().any(|t| t.split == Some(Split::Validation)) || scenarios.iter().all(|s| s.split == Some(Split::Train)));

    // Again in the same directory, keeping unverified tasks: nothing is asked twice.
    let before = teacher.requests.lock().unwrap().len();
    let (_, stderr) = generate(&url, &out, &["--keep-unverified"]).await;
    assert_eq!(teacher.requests.lock().unwrap().len(), before, "drafts and solver episodes are reused");
    assert!(stderr.contains("tasks             5 from an earlier run"), "{stderr}");
    let scenarios = load_scenarios(&out.join("scenarios.jsonl")).unwrap();
    assert_eq!(scenarios.len(), 4);
    let unverified = scenarios.iter().find(|s| s.task == NEXT_HIRE).unwrap();
    assert_eq!((unverified.checked, &unverified.expected), (Some(false), &None));
}

/// Ctrl-C while the solver plays: the command exits 130 and says so, the summary it leaves says
/// the run was interrupted (so `fit` does not take the stage as finished), and the same command
/// continues with the episodes already played.
#[tokio::test(flavor = "multi_thread")]
async fn ctrl_c_while_solving_exits_130_and_a_rerun_continues() {
    let teacher = Teacher { solver_delay_ms: 300, ..Teacher::default() };
    let url = serve(teacher.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("gen");
    let flags = ["--n", "5", "--batch", "3", "--validation-fraction", "0.34", "--seed", "1", "--concurrency", "1"];
    let child = generate_command("train-agent demo-server", "openai/gpt-4o-mini", &url, &out)
        .args(flags)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let solver_turns = || teacher.requests.lock().unwrap().iter().filter(|b| b["response_format"]["json_schema"]["name"] != "scenario_tasks").count();
    let started = std::time::Instant::now();
    while solver_turns() < 4 {
        assert!(started.elapsed() < std::time::Duration::from_secs(60), "the solver never started");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let stopped = common::interrupt(child).await;
    let stderr = String::from_utf8_lossy(&stopped.stderr);
    assert_eq!(stopped.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("finished episodes kept") && stderr.contains("run the same command again"), "{stderr}");
    let summary = |name: &str| -> Value { serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap_or_else(|e| panic!("{name}: {e}")) };
    let first = summary("first run");
    assert_eq!(first["interrupted"], true, "{first}");

    let again = generate_command("train-agent demo-server", "openai/gpt-4o-mini", &url, &out).args(flags).output().await.unwrap();
    assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
    let done = summary("rerun");
    assert_eq!(done["interrupted"], false, "{done}");
    assert!(done["episodes"].as_u64().unwrap() > first["episodes"].as_u64().unwrap(), "{first}\n{done}");
}

/// `--walk DIR`: the read calls `scenarios walk` recorded, and what they returned, reach the
/// teacher's prompt, so that its tasks name records the server really holds.
#[tokio::test(flavor = "multi_thread")]
async fn a_walk_shows_the_teacher_the_servers_state() {
    let teacher = Teacher::default();
    let url = serve(teacher.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let walk = dir.path().join("walk");
    let run = std::process::Command::new(common::bin())
        .args(["scenarios", "walk", "--server", "train-agent demo-server", "--max-calls", "40", "--out"])
        .arg(&walk)
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let (_, stderr) = generate(&url, &dir.path().join("gen"), &["--walk", walk.to_str().unwrap()]).await;
    assert!(stderr.contains("showing the teacher") && stderr.contains("recorded calls"), "{stderr}");
    let requests = teacher.requests.lock().unwrap();
    let prompt = requests.iter().find(|r| r["response_format"]["json_schema"]["name"] == "scenario_tasks").unwrap().to_string();
    assert!(prompt.contains("What the read tools returned") && prompt.contains("list_tables({})") && prompt.contains("departments"), "{prompt}");
}

/// The replay check (by default): of three tasks the solver agrees on, the one answered from
/// memory and the one whose answer names a table no result shows are dropped; the one answered
/// from the server keeps its calls as its `reference`, which `collect --reference` replays with
/// no model. `--no-replay` keeps all three on agreement alone.
#[tokio::test(flavor = "multi_thread")]
async fn agreed_tasks_are_kept_when_a_fresh_server_replays_their_calls() {
    let teacher = Teacher { replay: true, ..Default::default() };
    let url = serve(teacher.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("gen");
    let (_, stderr) = generate(&url, &out, &[]).await;
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let c = &summary["counts"];
    assert_eq!((c["agreed"].as_u64(), c["replayed"].as_u64(), c["not_replayed"].as_u64(), c["kept"].as_u64()), (Some(3), Some(1), Some(0), Some(1)), "{c}");
    assert_eq!(c["replay_dropped"], json!({"answered without a successful tool call": 1, "its answer names what no result shows": 1}), "{c}");
    assert!(stderr.contains("replayed          1 reproduced on a fresh server"), "{stderr}");

    let scenarios = load_scenarios(&out.join("scenarios.jsonl")).unwrap();
    assert_eq!(scenarios.iter().map(|s| s.task.as_str()).collect::<Vec<_>>(), [DEPARTMENTS]);
    let kept = &scenarios[0];
    assert_eq!(kept.reference.len(), 1);
    assert_eq!((kept.reference[0].tool.as_str(), &kept.reference[0].arguments["sql"]), ("run_query", &json!("SELECT COUNT(*) AS n FROM departments")));
    assert_eq!(kept.extra["derived"], false, "the count is shown in the query's result");
    let traces = ta_types::trace::read_traces(&out.join("traces.jsonl")).unwrap();
    assert!(!traces.is_empty() && traces.iter().all(|t| t.scenario_id == kept.id), "only the kept task's episodes are traces");

    // Its reference is a demonstration without a model.
    let collected = dir.path().join("collect");
    let run = std::process::Command::new(common::bin())
        .args(["collect", "--reference", "--server", "train-agent demo-server", "--all-splits", "--scenarios"])
        .arg(out.join("scenarios.jsonl"))
        .arg("--out")
        .arg(&collected)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success() && stdout.contains("reference traces  1 of 1"), "{stdout}\n{}", String::from_utf8_lossy(&run.stderr));

    // Without the replay the same drafts and episodes keep all three.
    let before = teacher.requests.lock().unwrap().len();
    generate(&url, &out, &["--no-replay"]).await;
    assert_eq!(teacher.requests.lock().unwrap().len(), before, "drafts and solver episodes are reused");
    let scenarios = load_scenarios(&out.join("scenarios.jsonl")).unwrap();
    assert_eq!(scenarios.len(), 3);
    assert!(scenarios.iter().all(|s| s.reference.is_empty()));
}

/// A teacher whose context cannot hold the prompt and the reply's room answers 400 as vLLM does;
/// generate stops with what to change.
#[tokio::test(flavor = "multi_thread")]
async fn a_prompt_too_long_for_the_teacher_says_what_to_lower() {
    async fn too_long() -> (axum::http::StatusCode, Json<Value>) {
        let message = "'max_tokens' or 'max_completion_tokens' is too large: 4096. This model's maximum context length is 8192 tokens and your request has 4682 input tokens (4096 > 8192 - 4682).";
        (axum::http::StatusCode::BAD_REQUEST, Json(json!({"error": {"message": message, "type": "BadRequestError", "code": 400}})))
    }
    let app = axum::Router::new().route("/v1/chat/completions", post(too_long));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let dir = tempfile::tempdir().unwrap();
    let run = generate_command("train-agent demo-server", "openai/gpt-4o-mini", &url, &dir.path().join("gen")).output().await.unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success(), "{stderr}");
    assert!(stderr.contains("cannot take this prompt") && stderr.contains("hint: lower --teacher-max-tokens"), "{stderr}");
}

/// A task whose episode calls a tool that may write (the memory server's `create_entities`,
/// `readOnlyHint: false`) is not replayed: it is kept on agreement alone, as before, and counted.
#[tokio::test(flavor = "multi_thread")]
async fn a_task_that_writes_is_kept_on_agreement_without_a_replay() {
    let Some(exe) = ta_testkit::SERVER_MEMORY.path("a_task_that_writes_is_kept_on_agreement_without_a_replay") else { return };
    let teacher = Teacher { memory: true, ..Default::default() };
    let url = serve(teacher.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let server = format!("env MEMORY_FILE_PATH={} {}", dir.path().join("memory.jsonl").display(), exe.display());
    let out = dir.path().join("gen");
    let run = generate_command(&server, "openai/gpt-4o-mini", &url, &out).args(["--n", "1"]).output().await.unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let c = &summary["counts"];
    assert_eq!((c["agreed"].as_u64(), c["replayed"].as_u64(), c["not_replayed"].as_u64(), c["kept"].as_u64()), (Some(1), Some(0), Some(1), Some(1)), "{c}");
    assert!(stderr.contains("0 reproduced on a fresh server, 1 kept on agreement alone"), "{stderr}");
    let scenarios = load_scenarios(&out.join("scenarios.jsonl")).unwrap();
    assert_eq!((scenarios[0].task.as_str(), scenarios[0].reference.len()), (REMEMBER, 0), "no reference: its calls write");
}

/// `--solver-adapter`: the adapter is loaded into the local teacher's engine (vLLM's
/// `/v1/load_lora_adapter`, under "solver") and every solver episode asks for it by that name,
/// while the teacher's calls keep its base model; the agreed task is kept as without it. A
/// teacher that is not local/ and a directory without an adapter are refused before any call.
#[tokio::test(flavor = "multi_thread")]
async fn an_adapter_of_the_teacher_solves_in_its_engine() {
    let teacher = Teacher { replay: true, ..Default::default() };
    let url = serve(teacher.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let adapter = dir.path().join("sft-final");
    std::fs::create_dir_all(&adapter).unwrap();
    std::fs::write(adapter.join("adapter_config.json"), r#"{"r": 16, "lora_alpha": 32, "base_model_name_or_path": "tiny"}"#).unwrap();
    let command = |teacher_spec: &str, adapter: &std::path::Path, out: &std::path::Path| {
        let mut command = generate_command("train-agent demo-server", teacher_spec, &url, out);
        command.args(["--n", "3", "--batch", "3", "--seed", "1", "--solver-adapter"]).arg(adapter);
        command
    };
    let out = dir.path().join("gen");
    let done = command("local/tiny", &adapter, &out).output().await.unwrap();
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "{}\n{stderr}", String::from_utf8_lossy(&done.stdout));

    let loads = teacher.loads.lock().unwrap().clone();
    assert_eq!(loads, [json!({"lora_name": "solver", "lora_path": adapter.canonicalize().unwrap()})]);
    let requests = teacher.requests.lock().unwrap().clone();
    let (writing, solving): (Vec<&Value>, Vec<&Value>) = requests.iter().partition(|r| r["response_format"]["json_schema"]["name"] == "scenario_tasks");
    assert!(!writing.is_empty() && writing.iter().all(|r| r["model"] == "tiny"), "the teacher writes with the base model");
    assert!(!solving.is_empty() && solving.iter().all(|r| r["model"] == "solver"), "every solver turn asks for the adapter");
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["counts"]["kept"], 1, "{summary}");
    assert_eq!(summary["solver"], format!("local/tiny + {}", adapter.canonicalize().unwrap().display()));

    // Refused before any call: a teacher of an API, and a directory that holds no adapter.
    let before = teacher.requests.lock().unwrap().len();
    let api = command("openai/gpt-4o-mini", &adapter, &dir.path().join("api")).output().await.unwrap();
    let api_err = String::from_utf8_lossy(&api.stderr);
    assert!(!api.status.success() && api_err.contains("the teacher openai/gpt-4o-mini is not local/") && api_err.contains("hint:"), "{api_err}");
    let empty = command("local/tiny", dir.path(), &dir.path().join("empty")).output().await.unwrap();
    let empty_err = String::from_utf8_lossy(&empty.stderr);
    assert!(!empty.status.success() && empty_err.contains("is not a PEFT adapter") && empty_err.contains("hint: pass an `sft` run's final/"), "{empty_err}");
    assert_eq!(teacher.requests.lock().unwrap().len(), before);
    assert_eq!(teacher.loads.lock().unwrap().len(), 1);
}
