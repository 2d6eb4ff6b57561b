//! `collect` with a teacher behind an OpenAI-compatible API (a replaying server), `--reference`
//! on the demo server, and `curate` over both: the traces, the reasons for dropping, the dataset.

mod common;

use std::process::Command;

use common::{Replay, bin, tool_calls};
use serde_json::Value;

fn jsonl(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn teacher_and_reference_traces_are_curated_into_a_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let scenarios = dir.path().join("s.jsonl");
    std::fs::write(
        &scenarios,
        concat!(
            "{\"id\": \"deps\", \"task\": \"How many departments are there?\", \"expected\": 9, \"split\": \"train\", \"reference_sql\": \"SELECT count(*) FROM departments\"}\n",
            "{\"id\": \"hi\", \"task\": \"Say hi\", \"expected\": \"hello\", \"split\": \"train\"}\n",
            "{\"id\": \"val\", \"task\": \"How many departments?\", \"expected\": 9, \"split\": \"validation\"}\n",
        ),
    )
    .unwrap();
    let replay = Replay::new(vec![
        tool_calls(&[("run_query", r#"{"sql": "SELECT COUNT(*) FROM departments"}"#)]),
        tool_calls(&[("complete_task", r#"{"summary": "9"}"#)]),
        tool_calls(&[("complete_task", r#"{"summary": "hi there"}"#)]),
    ]);
    let (url, _server) = replay.serve().await;
    let teacher = dir.path().join("teacher");
    let out = Command::new(bin())
        .args(["collect", "--server", "train-agent demo-server", "--base-url", &url, "--model", "teacher-x", "--concurrency", "1", "--scenarios"])
        .arg(&scenarios)
        .arg("--out")
        .arg(&teacher)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let traces = jsonl(&teacher.join("traces.jsonl"));
    assert_eq!(traces.len(), 2, "train split only by default");
    let deps = traces.iter().find(|t| t["scenario_id"] == "deps").unwrap();
    assert_eq!(deps["source"], "teacher-x");
    assert_eq!(deps["reward_parts"]["ground_truth"], 1.0);
    let tools: Vec<&str> = deps["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap()).collect();
    assert_eq!(tools, ["describe_table", "list_tables", "run_query", "complete_task"]);
    assert_eq!(deps["messages"][3]["role"], "tool", "tool results are in the trace");
    assert!(deps["messages"][3]["content"].as_str().unwrap().contains('9'));

    let reference = dir.path().join("reference");
    let out = Command::new(bin())
        .args(["collect", "--reference", "--server", "train-agent demo-server", "--scenarios"])
        .arg(&scenarios)
        .arg("--out")
        .arg(&reference)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && stdout.contains("reference traces  1 of 2") && stdout.contains("hi: no reference steps or reference_sql"), "{stdout}");

    let data = dir.path().join("data");
    let out = Command::new(bin()).arg("curate").arg(&reference).arg(&teacher).args(["--dedupe", "--unroll", "--no-parquet", "--out"]).arg(&data).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("ground truth failed") && stdout.contains("teacher-x"), "{stdout}");
    let rows = jsonl(&data.join("train.jsonl"));
    let sources: Vec<&str> = rows.iter().map(|r| r["source"].as_str().unwrap()).collect();
    assert_eq!(sources, ["reference", "teacher-x"]);
    assert!(rows.iter().all(|r| r["messages"].is_array() && r["tools"].is_array()));
    let unrolled = jsonl(&data.join("train_unrolled.jsonl"));
    let turns: usize = rows.iter().map(|r| r["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "assistant").count()).sum();
    assert_eq!(unrolled.len(), turns);
    drop(replay);
}
