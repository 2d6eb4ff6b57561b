//! The `train-agent` binary end to end: `tools` on the demo server, and `rollout` against a
//! replaying model server, including continuing an earlier run.

mod common;

use std::process::{Command, Stdio};

use common::{Replay, bin, text, tool_calls};

#[test]
fn tools_lists_the_demo_servers_three_tools_and_complete_task() {
    let out = Command::new(bin()).args(["tools", "--server", "train-agent demo-server"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let table = &stdout[stdout.find("TOOL").unwrap()..];
    insta::assert_snapshot!(table);

    let out = Command::new(bin()).args(["tools", "--server", "train-agent demo-server", "--json"]).output().unwrap();
    let tools: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = tools.as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["describe_table", "list_tables", "run_query", "complete_task"]);
    assert_eq!(tools[2]["function"]["parameters"]["required"], serde_json::json!(["sql"]));
}

/// `train-agent tools ... | head -1`: a reader that closes stdout before the command prints ends
/// the command quietly with exit 0, as a closed pipe does for `ls` or `rg`; it used to be a
/// "failed printing to stdout: Broken pipe" panic with exit 101. `stats` on a `fit` directory
/// too, which shows each stage in turn: the closed pipe is not a stage with nothing to show.
#[test]
fn a_reader_that_closes_stdout_early_ends_the_command_quietly() {
    let fit = tempfile::tempdir().unwrap();
    std::fs::write(fit.path().join("fit.json"), "[]").unwrap();
    std::fs::create_dir(fit.path().join("sft")).unwrap();
    std::fs::write(fit.path().join("sft/metrics.jsonl"), "{\"step\": 1, \"train_loss\": 1.5, \"step_s\": 2.0}\n").unwrap();
    let fit = fit.path().to_str().unwrap();
    let commands: [&[&str]; 3] = [&["tools", "--server", "train-agent demo-server"], &["tools", "--server", "train-agent demo-server", "--json"], &["stats", fit]];
    for command in commands {
        let mut child = Command::new(bin()).args(command).env("RUST_BACKTRACE", "1").stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        // The read end closes before the child has connected to its server, let alone printed.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{command:?}: {}\n{err}", out.status);
        assert!(!err.contains("panicked") && !err.contains("error") && !err.contains("nothing to show"), "{command:?}: {err}");
    }
}

#[test]
fn demo_server_serves_a_sqlite_file_given_with_db() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plants.sqlite");
    rusqlite::Connection::open(&file).unwrap().execute_batch("CREATE TABLE plants (name TEXT, megawatts INTEGER); INSERT INTO plants VALUES ('A', 900);").unwrap();
    let server = format!("train-agent demo-server --db '{}'", file.display());
    let out = Command::new(bin()).args(["tools", "--server", &server, "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let tools: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = tools.as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["describe_table", "list_tables", "run_query", "complete_task"]);
    assert!(!tools.to_string().contains("company database"), "{tools}");

    // A wrong path fails before serving, naming the file.
    let missing = dir.path().join("missing.sqlite");
    let out = Command::new(bin()).args(["demo-server", "--db"]).arg(&missing).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&missing.display().to_string()), "{err}");
}

#[test]
fn bad_server_and_scenarios_give_actionable_errors() {
    let out = Command::new(bin()).args(["tools", "--server", "no-such-binary-xyz"]).env_remove("MCP_URL").output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no-such-binary-xyz") && err.contains("hint:"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("s.jsonl");
    std::fs::write(&bad, "{\"task\": \"ok\"}\n{\"question\": \"no task\"}\n").unwrap();
    let out = Command::new(bin())
        .args(["rollout", "--server", "train-agent demo-server", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--out"])
        .arg(dir.path().join("o"))
        .arg("--scenarios")
        .arg(&bad)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("s.jsonl:2: invalid scenario: missing field `task`"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn rollout_writes_scored_trajectories_and_continues_a_stopped_run() {
    let dir = tempfile::tempdir().unwrap();
    let scenarios = dir.path().join("s.jsonl");
    std::fs::write(&scenarios, "{\"id\": \"deps\", \"task\": \"How many departments are there?\", \"expected\": 9}\n{\"id\": \"other\", \"task\": \"Say hi\"}\n")
        .unwrap();
    let script = vec![
        tool_calls(&[("run_query", r#"{"sql": "SELECT COUNT(*) FROM departments"}"#)]),
        tool_calls(&[("complete_task", r#"{"summary": "9"}"#)]),
        text("hi"),
        text("hi"),
    ];
    let replay = Replay::new(script);
    let (url, _server) = replay.serve().await;
    let out_dir = dir.path().join("run");
    let first = rollout(&url, &scenarios, &out_dir, &["--concurrency", "1", "--limit", "1"]).await;
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let stdout = String::from_utf8_lossy(&first.stdout);
    assert!(stdout.contains("completion rate   100.0%"), "{stdout}");

    let trajectories = ta_types::trajectory::read_trajectories(&out_dir.join("trajectories.jsonl")).unwrap();
    assert_eq!(trajectories.len(), 1);
    let t = &trajectories[0];
    assert_eq!(t.reward_parts.ground_truth, Some(1.0));
    assert!(t.reward.unwrap() > 1.0, "ground truth plus rule bonuses: {:?}", t.reward);
    let summary: serde_json::Value = serde_json::from_slice(&std::fs::read(out_dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["trajectories"], 1);
    assert_eq!(summary["completion_rate"], 1.0);

    // A second run over both scenarios plays only the missing one.
    let second = rollout(&url, &scenarios, &out_dir, &[]).await;
    assert!(second.status.success(), "{}", String::from_utf8_lossy(&second.stderr));
    assert!(String::from_utf8_lossy(&second.stderr).contains("1 finished episodes kept"));
    let all = ta_types::trajectory::read_trajectories(&out_dir.join("trajectories.jsonl")).unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!(replay.requests().len(), 4, "the finished episode was not replayed");
    assert_eq!(all[1].outcome, ta_types::Outcome::RanOutOfTurns);

    // The API key reached the server as a header and nowhere on disk.
    for entry in walk(&out_dir) {
        let text = std::fs::read_to_string(&entry).unwrap_or_default();
        assert!(!text.contains("sk-test-secret-123"), "secret leaked into {}", entry.display());
    }
}

async fn rollout(url: &str, scenarios: &std::path::Path, out: &std::path::Path, extra: &[&str]) -> std::process::Output {
    tokio::process::Command::new(bin())
        .args(["rollout", "--server", "train-agent demo-server", "--base-url", url, "--model", "m", "--max-turns", "2"])
        .args(extra)
        .arg("--scenarios")
        .arg(scenarios)
        .arg("--out")
        .arg(out)
        .env("OPENAI_API_KEY", "sk-test-secret-123")
        .output()
        .await
        .unwrap()
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() { out.extend(walk(&p)) } else { out.push(p) }
    }
    out
}
