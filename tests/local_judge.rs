//! The project's own engine as a local judge (CPU, real SmolLM2-135M-Instruct from the package
//! registry): `rollout --judge-model local/base` plays a group of two episodes of a demo scenario
//! and has the engine that played them judge them. A model this small may not write valid JSON
//! even after the repair request; both outcomes are legitimate, so the test checks the invariant:
//! the group is either scored (every trajectory, in [0, 1], with an explanation) or skipped and
//! counted (no trajectory has a judge score), never half-scored and never zeroed.

mod common;

#[tokio::test(flavor = "multi_thread")]
async fn the_embedded_engine_judges_a_group_it_played() {
    let dir = tempfile::tempdir().unwrap();
    let scenarios = dir.path().join("s.jsonl");
    std::fs::write(&scenarios, "{\"id\": \"dept-count\", \"task\": \"How many departments does the company have?\", \"expected\": 9}\n").unwrap();
    let out = dir.path().join("run");
    let run = tokio::process::Command::new(common::bin())
        .args(["rollout", "--server", "train-agent demo-server", "--base-model", "smollm2-135m-instruct"])
        .args(["--rollouts", "2", "--max-turns", "1", "--max-tokens", "24", "--seed", "3"])
        .args(["--judge-model", "local/base", "--judge-max-tokens", "96"])
        .arg("--scenarios")
        .arg(&scenarios)
        .arg("--out")
        .arg(&out)
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    let line = stderr.lines().find(|l| l.starts_with("judge local/base: 1 groups (")).unwrap_or_else(|| panic!("no judge summary in {stderr}"));
    let skipped = line.contains("(1 skipped");
    let trajectories = ta_types::trajectory::read_trajectories(&out.join("trajectories.jsonl")).unwrap();
    assert_eq!(trajectories.len(), 2);
    for t in &trajectories {
        assert!(t.reward_parts.ground_truth.is_some());
        if skipped {
            assert_eq!(t.reward_parts.judge, None, "a skipped group is never zeroed");
            assert_eq!(t.judge_explanation, None);
        } else {
            let j = t.reward_parts.judge.unwrap_or_else(|| panic!("a scored group scores every trajectory: {line}"));
            assert!((0.0..=1.0).contains(&j));
            assert!(t.judge_explanation.is_some());
        }
        // Correctness first: the rules only add a tie-break inside the gap to the next level.
        let tie_break = ta_reward::tie_break(&ta_reward::RewardConfig::default(), t.reward_parts.rules.unwrap(), 0.5);
        let expected = t.reward_parts.judge.unwrap_or(0.0) + t.reward_parts.ground_truth.unwrap() + tie_break;
        assert!((t.reward.unwrap() - expected).abs() < 1e-9);
    }
    eprintln!("local judge: {line}");
}
