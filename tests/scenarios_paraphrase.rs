//! `scenarios paraphrase` end to end: tasks synthesized from the real demo server, reworded by
//! a scripted teacher that follows OpenAI's chat-completions API (guided JSON output). Each
//! reply holds a good rewording, the original again, a duplicate of the first and one that
//! drops the question's values; only the good one is kept, with its original's answer, split
//! and SQL, in the tasks' order though the replies come in another.

mod common;

use std::collections::HashMap;

use axum::Json;
use axum::routing::post;
use serde_json::{Value, json};
use ta_types::scenario::load_scenarios;

async fn chat(Json(body): Json<Value>) -> Json<Value> {
    assert_eq!(body["response_format"]["json_schema"]["name"], "paraphrases", "{body}");
    let user = body["messages"].as_array().unwrap().iter().rev().find(|m| m["role"] == "user").unwrap()["content"].as_str().unwrap().to_string();
    let question = user.strip_prefix("Question: ").unwrap().split("\n\n").next().unwrap().to_string();
    // Replies that take longer for some questions than others, so the tasks in flight finish out
    // of their order: the output keeps the tasks' order anyway.
    tokio::time::sleep(std::time::Duration::from_millis(20 * (question.len() % 7) as u64)).await;
    let reply = json!({"paraphrases": [
        format!("Could you tell me this: {question}"),
        question.clone(),
        format!("could you tell me this {question}"),
        "Tell me about that one thing.",
    ]});
    Json(common::text(&reply.to_string()).1)
}

/// 40 tasks synthesized from the demo server (seed 2) into `dir/synth`.
fn synth_demo(dir: &std::path::Path) -> std::path::PathBuf {
    let synth = dir.join("synth");
    let run = std::process::Command::new(common::bin())
        .args(["scenarios", "synth", "--server", "train-agent demo-server", "--n", "40", "--seed", "2", "--out"])
        .arg(&synth)
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    synth
}

/// `app` on a free local port; its OpenAI-style base URL.
async fn serve(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

/// `scenarios paraphrase` of `synth`'s tasks into `out`, the teacher at `url`, with `flags`; its
/// standard output, after it succeeded.
async fn paraphrase(url: &str, synth: &std::path::Path, out: &std::path::Path, flags: &[&str]) -> String {
    let run = paraphrase_run(url, synth, out, flags).await;
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    assert!(run.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&run.stderr));
    stdout
}

/// `scenarios paraphrase` of `synth`'s tasks into `out`, the teacher at `url`, with `flags` (a
/// test key for the provider), not started.
fn paraphrase_command(url: &str, synth: &std::path::Path, out: &std::path::Path, flags: &[&str]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(common::bin());
    command
        .args(["scenarios", "paraphrase", "--teacher", "openai/gpt-4o-mini", "--teacher-base-url", url])
        .args(flags)
        .arg("--scenarios")
        .arg(synth.join("scenarios.jsonl"))
        .arg("--out")
        .arg(out)
        .env("OPENAI_API_KEY", "sk-test-not-a-secret");
    command
}

/// `scenarios paraphrase` with `flags`, whatever its outcome.
async fn paraphrase_run(url: &str, synth: &std::path::Path, out: &std::path::Path, flags: &[&str]) -> std::process::Output {
    paraphrase_command(url, synth, out, flags).output().await.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn paraphrases_keep_the_answer_and_only_rewordings_that_keep_the_question() {
    let dir = tempfile::tempdir().unwrap();
    let synth = synth_demo(dir.path());

    let url = serve(axum::Router::new().route("/v1/chat/completions", post(chat))).await;

    let out = dir.path().join("para");
    let stdout = paraphrase(&url, &synth, &out, &["--per-task", "4", "--limit", "12"]).await;

    let all = load_scenarios(&out.join("scenarios.jsonl")).unwrap();
    let originals: HashMap<&str, &ta_types::Scenario> = all.iter().filter(|s| !s.extra.contains_key("paraphrase_of")).map(|s| (s.id.as_str(), s)).collect();
    let paraphrases: Vec<&ta_types::Scenario> = all.iter().filter(|s| s.extra.contains_key("paraphrase_of")).collect();
    // Every task stays, in its order; only the first 12 were reworded.
    let tasks = load_scenarios(&synth.join("scenarios.jsonl")).unwrap();
    let kept_in_order: Vec<&str> = all.iter().filter(|s| !s.extra.contains_key("paraphrase_of")).map(|s| s.id.as_str()).collect();
    assert_eq!(kept_in_order, tasks.iter().map(|s| s.id.as_str()).collect::<Vec<_>>());
    let reworded: std::collections::HashSet<&str> = tasks.iter().take(12).map(|s| s.id.as_str()).collect();
    assert!(paraphrases.iter().all(|p| reworded.contains(p.extra["paraphrase_of"].as_str().unwrap())), "only the first 12 are reworded");
    assert_eq!(all.len(), tasks.len() + paraphrases.len());
    // One good rewording per task; "Tell me about that one thing." keeps neither values nor an
    // operation, so it is kept only for a task that names neither.
    let plain = paraphrases.iter().filter(|p| p.task.starts_with("Could you tell me this: ")).count();
    assert_eq!(plain, 12, "{stdout}");
    for p in &paraphrases {
        let o = originals[p.extra["paraphrase_of"].as_str().unwrap()];
        assert_eq!((&p.expected, p.split, &p.extra["sql"], &p.reference), (&o.expected, o.split, &o.extra["sql"], &o.reference), "a paraphrase never changes the answer");
        assert_eq!(p.extra["phrasing"], "paraphrase");
        assert_ne!(p.task, o.task);
    }
    // Each original is followed by its own paraphrases, so `collect --limit N` takes both.
    let mut current = "";
    for s in &all {
        match s.extra.get("paraphrase_of").and_then(Value::as_str) {
            Some(of) => assert_eq!(of, current, "{} is not next to its original", s.id),
            None => current = s.id.as_str(),
        }
    }
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!((summary["asked"].as_u64(), summary["returned"].as_u64()), (Some(12), Some(48)), "{summary}");
    assert_eq!(summary["rejected"]["the original question again"], 12, "{summary}");
    assert_eq!(summary["rejected"]["a duplicate of another paraphrase"], 12, "{summary}");
    let vague = summary["rejected"]["a value of the question is missing"].as_u64().unwrap_or(0)
        + summary["rejected"]["the question's operation is missing"].as_u64().unwrap_or(0);
    assert!(vague >= 6, "most synthesized questions name a value or an operation: {summary}");
    assert_eq!(summary["kept"].as_u64().unwrap() as usize, paraphrases.len());
    let rejected = std::fs::read_to_string(out.join("rejected.jsonl")).unwrap();
    assert_eq!(rejected.lines().count(), 48 - paraphrases.len(), "every rewording is kept or written to rejected.jsonl");
}

/// The scripted solver of [`a_solver_keeps_only_rewordings_whose_sql_gives_the_task_rows`]: the
/// synthesized tasks' SQL by question, in the order in which they come, with the number of a
/// `{"number", "tolerance"}` answer.
type Solutions = std::sync::Arc<Vec<(String, String, Option<f64>)>>;

/// One rewording per task; as the solver, the task's own SQL for every third task (for a
/// number with a tolerance, that number off by less than the tolerance, as an unrounded share
/// is), and for the others in turn a query with none of its rows, a write, six columns and a
/// missing table. Each solver request shows `CREATE` statements of the tables the task's SQL
/// reads, and never the original question.
async fn solver_chat(axum::extract::State(solutions): axum::extract::State<Solutions>, Json(body): Json<Value>) -> Json<Value> {
    let user = body["messages"].as_array().unwrap().iter().rev().find(|m| m["role"] == "user").unwrap()["content"].as_str().unwrap().to_string();
    let reply = if body["response_format"]["json_schema"]["name"] == "paraphrases" {
        let system = body["messages"][0]["content"].as_str().unwrap();
        assert!(system.contains("everyday words"), "with a solver, a category may be reworded: {system}");
        // With a solver, the teacher is shown the tables the task reads, as the solver is.
        let (tables, question) = user.split_once("\n\nQuestion: ").expect("the task's tables come first");
        assert!(tables.starts_with("Tables it is about:\nCREATE TABLE"), "{tables}");
        let question = question.split("\n\n").next().unwrap();
        json!({"paraphrases": [format!("Could you tell me this: {question}")]})
    } else {
        assert_eq!(body["response_format"]["json_schema"]["name"], "query", "{body}");
        assert_eq!(body["temperature"], 0.0, "the solver is greedy: {body}");
        let (tables, question) = user.split_once("\n\nQuestion: ").unwrap();
        let question = question.split("\n\nReply").next().unwrap().strip_prefix("Could you tell me this: ").expect("the rewording, not the original");
        let i = solutions.iter().position(|(q, _, _)| q == question).unwrap();
        let (sql, number) = (&solutions[i].1, solutions[i].2);
        assert!(tables.starts_with("Tables:\nCREATE TABLE"), "{tables}");
        for t in ["departments", "employees", "projects", "project_assignments"] {
            let named = sql.split(|c: char| !(c.is_alphanumeric() || c == '_')).any(|w| w == t);
            assert_eq!(tables.contains(&format!("CREATE TABLE {t} ")), named, "{t} shown iff the task's SQL reads it:\n{tables}\n{sql}");
        }
        // The employees' statuses are a category: the solver sees its values, as describe_table shows them.
        if tables.contains("CREATE TABLE employees ") {
            assert!(tables.contains("\n-- status: 'active', 'on_leave', 'terminated'"), "{tables}");
        }
        let answer = match i % 6 {
            0 | 3 => number.map_or_else(|| format!("{sql};"), |x| format!("SELECT {}", x + 0.004)),
            1 => format!("SELECT * FROM ({sql}) LIMIT 0"),
            2 => "DELETE FROM employees".to_string(),
            4 => "SELECT 1, 2, 3, 4, 5, 6".to_string(),
            _ => "SELECT name FROM no_such_table".to_string(),
        };
        json!({"sql": answer})
    };
    Json(common::text(&reply.to_string()).1)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_solver_keeps_only_rewordings_whose_sql_gives_the_task_rows() {
    let dir = tempfile::tempdir().unwrap();
    let synth = synth_demo(dir.path());
    let tasks = load_scenarios(&synth.join("scenarios.jsonl")).unwrap();
    let number = |s: &ta_types::Scenario| match &s.expected {
        Some(ta_types::Expected::Rule(ta_types::scenario::ExpectedRule::Number { number, .. })) => Some(*number),
        _ => None,
    };
    let solutions: Solutions = std::sync::Arc::new(tasks.iter().take(12).map(|s| (s.task.clone(), s.extra["sql"].as_str().unwrap().to_string(), number(s))).collect());
    // Seed 2 draws a share to one decimal sixth: its solver's unrounded number is kept only
    // because the task's tolerance allows it.
    assert!(number(&tasks[6]).is_some(), "{}", tasks[6].task);

    let url = serve(axum::Router::new().route("/v1/chat/completions", post(solver_chat)).with_state(solutions.clone())).await;

    let out = dir.path().join("para");
    let stdout = paraphrase(&url, &synth, &out, &["--per-task", "1", "--limit", "12", "--solve", "--server", "train-agent demo-server"]).await;

    let kept: Vec<String> =
        load_scenarios(&out.join("scenarios.jsonl")).unwrap().into_iter().filter_map(|s| Some(s.extra.get("paraphrase_of")?.as_str()?.to_string())).collect();
    let solved: Vec<String> = tasks.iter().take(12).step_by(3).map(|s| s.id.clone()).collect();
    assert_eq!(kept, solved, "kept exactly the rewordings whose solver SQL gives the task's rows\n{stdout}");
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    for reason in [
        "the solver's query for it gives other rows",
        "the solver's query for it gives another number of columns",
        "the solver's query for it fails on the server",
        "the solver wrote no single SELECT for it",
    ] {
        assert_eq!(summary["rejected"][reason], 2, "{reason}: {summary}");
    }
    // The rejected ones can be read, with the solver's SQL where it wrote one.
    let rejected: Vec<Value> = std::fs::read_to_string(out.join("rejected.jsonl")).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rejected.len(), 8);
    for r in &rejected {
        let solver_sql = r["solver_sql"].as_str().unwrap_or_default();
        let wrote = match r["reason"].as_str().unwrap() {
            "the solver's query for it gives other rows" => solver_sql.ends_with(") LIMIT 0"),
            "the solver's query for it gives another number of columns" => solver_sql == "SELECT 1, 2, 3, 4, 5, 6",
            "the solver's query for it fails on the server" => solver_sql == "SELECT name FROM no_such_table",
            _ => r["solver_sql"].is_null(),
        };
        assert!(wrote, "{r}");
        assert!(r["text"].as_str().unwrap().starts_with("Could you tell me this: "), "{r}");
    }
}

/// One rewording per task, counting the requests.
async fn counted_chat(axum::extract::State(asked): axum::extract::State<std::sync::Arc<std::sync::atomic::AtomicUsize>>, body: Json<Value>) -> Json<Value> {
    asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    chat(body).await
}

/// A rerun into the same directory asks the teacher only for the tasks it has no reply for (a
/// line cut off by a crash counts as none), and keeps what the first run kept; a rerun with other
/// settings is refused.
#[tokio::test(flavor = "multi_thread")]
async fn a_rerun_asks_only_for_the_tasks_not_answered() {
    let dir = tempfile::tempdir().unwrap();
    let synth = synth_demo(dir.path());
    let asked = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let url = serve(axum::Router::new().route("/v1/chat/completions", post(counted_chat)).with_state(asked.clone())).await;
    let count = || asked.load(std::sync::atomic::Ordering::SeqCst);
    let out = dir.path().join("para");

    paraphrase(&url, &synth, &out, &["--per-task", "4", "--limit", "6"]).await;
    assert_eq!(count(), 6);
    let first = std::fs::read_to_string(out.join("scenarios.jsonl")).unwrap();
    // A crash while the seventh task's reply was being written.
    let mut replies = std::fs::OpenOptions::new().append(true).open(out.join("replies.jsonl")).unwrap();
    std::io::Write::write_all(&mut replies, b"{\"id\": \"cut-off").unwrap();

    let stdout = paraphrase(&url, &synth, &out, &["--per-task", "4", "--limit", "12"]).await;
    assert_eq!(count(), 12, "only the six new tasks were asked for\n{stdout}");
    // The torn line was cut before appending: every line of the replies reads.
    let replies = std::fs::read_to_string(out.join("replies.jsonl")).unwrap();
    assert_eq!(replies.lines().filter(|l| serde_json::from_str::<Value>(l).is_ok()).count(), 12, "{replies}");
    // The first run's six tasks and their paraphrases come first, unchanged (then its
    // unreworded rest, which the rerun rewords).
    let seventh = load_scenarios(&synth.join("scenarios.jsonl")).unwrap()[6].id.clone();
    let first_six: String = first.lines().take_while(|l| !l.contains(&format!("\"id\":\"{seventh}\""))).map(|l| format!("{l}\n")).collect();
    assert!(first_six.lines().count() > 6, "{first}");
    let all = std::fs::read_to_string(out.join("scenarios.jsonl")).unwrap();
    assert!(all.starts_with(&first_six), "the first run's tasks and paraphrases come first, unchanged");
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!((summary["asked"].as_u64(), summary["returned"].as_u64()), (Some(12), Some(48)), "{summary}");

    let other = paraphrase_run(&url, &synth, &out, &["--per-task", "2"]).await;
    let stderr = String::from_utf8_lossy(&other.stderr);
    assert!(!other.status.success() && stderr.contains("other settings") && stderr.contains("hint: give another --out"), "{stderr}");

    // The same settings, but the teacher was shown other instructions (a run of another
    // version, or one from before the prompt was kept): refused too, naming the prompt.
    let settings_path = out.join("settings.json");
    let mut settings: Value = serde_json::from_str(&std::fs::read_to_string(&settings_path).unwrap()).unwrap();
    assert!(settings["prompt"]["request"].as_str().unwrap().contains("Question: {task}"), "{settings}");
    settings["prompt"]["system"] = json!("Rewrite the question.");
    std::fs::write(&settings_path, settings.to_string()).unwrap();
    let older = paraphrase_run(&url, &synth, &out, &["--per-task", "4", "--limit", "12"]).await;
    let stderr = String::from_utf8_lossy(&older.stderr);
    assert!(!older.status.success() && stderr.contains("shown other instructions") && stderr.contains("hint: give another --out"), "{stderr}");
    assert_eq!(count(), 12);
}

/// The scripted teacher of [`chat`], half a second a reply.
async fn slow_chat(body: Json<Value>) -> Json<Value> {
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    chat(body).await
}

/// Ctrl-C while tasks are in flight: the command exits 130 saying how many tasks it kept, every
/// finished task's reply is on disk, and the same command continues from them.
#[tokio::test(flavor = "multi_thread")]
async fn ctrl_c_keeps_the_finished_tasks_and_a_rerun_continues() {
    let dir = tempfile::tempdir().unwrap();
    let synth = synth_demo(dir.path());
    let url = serve(axum::Router::new().route("/v1/chat/completions", post(slow_chat))).await;
    let out = dir.path().join("para");
    let flags = ["--per-task", "4", "--limit", "20", "--concurrency", "2"];
    let child = paraphrase_command(&url, &synth, &out, &flags).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let replies = out.join("replies.jsonl");
    let lines = || std::fs::read_to_string(&replies).map(|t| t.lines().count()).unwrap_or(0);
    let started = std::time::Instant::now();
    while lines() < 2 {
        assert!(started.elapsed() < std::time::Duration::from_secs(60), "no task finished");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let stopped = common::interrupt(child).await;
    let stderr = String::from_utf8_lossy(&stopped.stderr);
    assert_eq!(stopped.status.code(), Some(130), "{stderr}");
    let kept = lines();
    assert!((2..20).contains(&kept), "{kept} of 20 tasks answered before Ctrl-C");
    assert!(stderr.contains(&format!("interrupted: {kept} finished tasks kept")) && stderr.contains("run the same command again"), "{stderr}");
    assert!(!out.join("scenarios.jsonl").exists(), "no output from a run that did not finish");

    let run = paraphrase_run(&url, &synth, &out, &flags).await;
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success() && stderr.contains(&format!("{kept} tasks answered earlier, {} to ask", 20 - kept)), "{stderr}");
    assert_eq!(lines(), 20);
}
