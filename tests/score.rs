//! Rewards end to end on real demo-scenario trajectories: `rollout` plays five validation
//! scenarios of the demo company database (real MCP server, real tool results) with a scripted
//! model, scores them with ground truth, rules and an `openai/` judge (the replaying server, in
//! OpenAI's documented format); `score` then rescores them offline from the judge cache and reports
//! the judge's agreement with ground truth. The API key never reaches the run directory.

mod common;

use common::{Replay, bin, text, tool_calls};
use serde_json::{Value, json};

const KEY: &str = "sk-judge-test-secret-456";
const IDS: [&str; 5] = ["former-count", "contractor-count", "newest-dept", "donna-gonzalez-projects", "total-dept-budget"];

fn demo_scenarios(dir: &std::path::Path) -> std::path::PathBuf {
    let all = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/company.jsonl")).unwrap();
    let by_id: Vec<String> = IDS.iter().map(|id| all.lines().find(|l| serde_json::from_str::<Value>(l).unwrap()["id"] == *id).unwrap().to_string()).collect();
    let path = dir.join("scenarios.jsonl");
    std::fs::write(&path, by_id.join("\n") + "\n").unwrap();
    path
}

fn judge_reply(score: f64, why: &str) -> common::Reply {
    text(&json!({"scores": [{"trajectory_id": "1", "explanation": why, "score": score}]}).to_string())
}

#[tokio::test(flavor = "multi_thread")]
async fn demo_trajectories_get_ground_truth_rules_and_judge_scores_then_rescoring_is_free() {
    let dir = tempfile::tempdir().unwrap();
    let scenarios = demo_scenarios(dir.path());
    let complete = |summary: &str| tool_calls(&[("complete_task", &json!({"summary": summary}).to_string())]);
    let query = |sql: &str| tool_calls(&[("run_query", &json!({"sql": sql}).to_string())]);
    let budget = "The combined budget is $15,070,000.";
    let script = vec![
        // former-count: queries, answers right.
        query("SELECT count(*) FROM employees WHERE status = 'terminated'"),
        complete("There are 44 former employees."),
        // contractor-count: answers without looking (wrong).
        complete("There are 20 contractors."),
        // newest-dept: a failing query, fixed, then the right answer.
        query("SELECT name FROM departmnts ORDER BY founded_date DESC LIMIT 1"),
        query("SELECT name FROM departments ORDER BY founded_date DESC LIMIT 1"),
        complete("Operations"),
        // donna-gonzalez-projects: half of the set.
        query(
            "SELECT p.name FROM project_assignments a JOIN employees e ON e.employee_id = a.employee_id JOIN projects p ON p.project_id = a.project_id WHERE e.first_name = 'Donna' AND e.last_name = 'Gonzalez'",
        ),
        complete("Website Redesign and GDPR Compliance Audit"),
        // total-dept-budget: the right number in prose, never completes.
        text(budget),
        text(budget),
        text(budget),
        // The judge, one call per scenario (one rollout each), in order.
        judge_reply(1.0, "Queried the table and reported 44."),
        judge_reply(0.9, "Confident answer."),
        judge_reply(0.8, "Recovered from a typo in the table name."),
        judge_reply(0.4, "Only two projects."),
        judge_reply(0.2, "Never called complete_task."),
    ];
    let replay = Replay::new(script);
    let (url, _server) = replay.serve().await;
    let out = dir.path().join("run");
    let rollout = tokio::process::Command::new(bin())
        .args(["rollout", "--server", "train-agent demo-server", "--base-url", &url, "--model", "m", "--max-turns", "3", "--concurrency", "1"])
        .args(["--judge-model", "openai/gpt-4o-mini", "--judge-concurrency", "1"])
        .arg("--scenarios")
        .arg(&scenarios)
        .arg("--out")
        .arg(&out)
        .env("OPENAI_API_KEY", KEY)
        .env("OPENAI_BASE_URL", &url)
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&rollout.stderr);
    assert!(rollout.status.success(), "{stderr}");
    assert!(stderr.contains("judge openai/gpt-4o-mini: 5 groups (0 skipped, 0 from cache), 55 + 35 tokens"), "{stderr}");

    let summary: Value = serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["judge"]["stats"]["groups"], 5);
    assert!((summary["judge"]["stats"]["cost_usd"].as_f64().unwrap() - 5.0 * (11.0 * 0.15 + 7.0 * 0.60) / 1e6).abs() < 1e-12);

    let trajectories = ta_types::trajectory::read_trajectories(&out.join("trajectories.jsonl")).unwrap();
    let rows: Vec<Value> = trajectories
        .iter()
        .map(|t| {
            json!({
                "scenario": t.scenario_id, "outcome": t.outcome, "final_answer": t.final_answer,
                "tool_calls": t.tool_calls, "tool_errors": t.tool_errors, "recovered_errors": t.recovered_errors,
                "ground_truth": t.reward_parts.ground_truth, "rules": t.reward_parts.rules.map(|r| (r * 1e6).round() / 1e6),
                "judge": t.reward_parts.judge, "judge_explanation": t.judge_explanation,
                "reward": t.reward.map(|r| (r * 1e6).round() / 1e6),
            })
        })
        .collect();
    insta::assert_yaml_snapshot!(rows);

    // The judge was asked in OpenAI's format, with the reply schema, and the key as a header.
    let judge_requests: Vec<Value> = replay.requests().into_iter().filter(|r| r.get("response_format").is_some()).collect();
    assert_eq!(judge_requests.len(), 5);
    assert_eq!(judge_requests[0]["model"], "gpt-4o-mini");
    assert!(judge_requests[0]["messages"][1]["content"].as_str().unwrap().contains("How many former employees"));

    // Rescoring offline: every group comes from the cache the rollout left, so no request and
    // no cost; the agreement with ground truth is reported.
    let before = replay.requests().len();
    let score = tokio::process::Command::new(bin())
        .args(["score", "--judge-model", "openai/gpt-4o-mini"])
        .arg("--trajectories")
        .arg(out.join("trajectories.jsonl"))
        .arg("--scenarios")
        .arg(&scenarios)
        .env("OPENAI_API_KEY", KEY)
        .env("OPENAI_BASE_URL", &url)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&score.stdout);
    assert!(score.status.success(), "{}", String::from_utf8_lossy(&score.stderr));
    assert_eq!(replay.requests().len(), before, "rescoring the same groups with the same judge is free");
    assert!(stdout.contains("groups              5 judged, 0 skipped, 5 from cache"), "{stdout}");
    // Ground truth passes (>= 0.5): former, newest, donna (half the set), budget (right number,
    // unfinished: 0.5). The judge passes former, contractor (fooled), newest.
    assert!(stdout.contains("agreement           2 of 5 (40.0%) with ground truth at 0.5; judge-only passes 1, ground-truth-only passes 2"), "{stdout}");
    let rescored = ta_types::trajectory::read_trajectories(&out.join("trajectories.judge-openai-gpt-4o-mini.jsonl")).unwrap();
    assert_eq!(rescored.len(), 5);
    assert_eq!(rescored[1].judge_explanation.as_deref(), Some("Confident answer."));
    let summary: Value = serde_json::from_slice(&std::fs::read(out.join("judge-openai-gpt-4o-mini.summary.json")).unwrap()).unwrap();
    assert_eq!(summary["agreement"]["compared"], 5);
    assert!(summary["agreement"]["correlation"].as_f64().unwrap() > 0.0);

    // A custom reward in Python (examples/custom_reward.py: numbers in the answer must come
    // from tool results), weighted in a run config, next to the (cached) judge.
    let config = dir.path().join("reward.toml");
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/custom_reward.py");
    std::fs::write(&config, format!("[reward]\njudge_weight = 1.0\n[[reward.custom]]\nname = \"grounded\"\ncommand = \"python3 {example}\"\nweight = 0.5\n")).unwrap();
    let custom = tokio::process::Command::new(bin())
        .args(["score", "--judge-model", "openai/gpt-4o-mini", "--config"])
        .arg(&config)
        .arg("--trajectories")
        .arg(out.join("trajectories.jsonl"))
        .arg("--scenarios")
        .arg(&scenarios)
        .env("OPENAI_API_KEY", KEY)
        .env("OPENAI_BASE_URL", &url)
        .output()
        .await
        .unwrap();
    assert!(custom.status.success(), "{}", String::from_utf8_lossy(&custom.stderr));
    let rescored = ta_types::trajectory::read_trajectories(&out.join("trajectories.judge-openai-gpt-4o-mini.jsonl")).unwrap();
    let grounded: Vec<f64> = rescored.iter().map(|t| t.reward_parts.custom["grounded"]).collect();
    assert_eq!(grounded, [1.0, 0.0, 0.5, 0.5, 0.0], "44 came from a tool result; 20 and 15,070,000 did not; no numbers: 0.5");
    let p = &rescored[0].reward_parts;
    let expected = p.judge.unwrap() + p.ground_truth.unwrap() + ta_reward::tie_break(&ta_reward::RewardConfig::default(), p.rules.unwrap(), 0.5) + 0.5 * 1.0;
    assert!((rescored[0].reward.unwrap() - expected).abs() < 1e-12);

    // The key reached the servers as a header and nowhere on disk.
    for file in walk(&out) {
        let content = std::fs::read_to_string(&file).unwrap_or_default();
        assert!(!content.contains(KEY), "the API key leaked into {}", file.display());
    }
    assert!(!String::from_utf8_lossy(&score.stderr).contains(KEY) && !stderr.contains(KEY));
}

#[test]
fn a_judge_without_its_key_fails_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t.jsonl");
    std::fs::write(&t, "").unwrap();
    let out = std::process::Command::new(bin())
        .args(["score", "--judge-model", "anthropic/claude-haiku-4-5", "--trajectories"])
        .arg(&t)
        .env_remove("ANTHROPIC_API_KEY")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("needs $ANTHROPIC_API_KEY") && err.contains("hint:"), "{err}");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() { out.extend(walk(&p)) } else { out.push(p) }
    }
    out
}
