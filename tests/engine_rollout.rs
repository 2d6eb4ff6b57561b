//! The embedded engine started by `train-agent` itself (real SmolLM2-135M-Instruct GGUF from the
//! package registry, on CPU), driven by the agent loop against the demo MCP server: the engine's
//! exact tokens and logprobs land in the trajectories that training consumes.

mod common;

#[tokio::test(flavor = "multi_thread")]
async fn rollout_through_the_embedded_engine_records_tokens_and_logprobs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let status = tokio::process::Command::new(common::bin())
        .args(["rollout", "--server", "train-agent demo-server", "--base-model", "smollm2-135m-instruct"])
        .args(["--scenarios", concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/company.jsonl")])
        .args(["--split", "validation", "--limit", "2", "--max-turns", "2", "--max-tokens", "32", "--seed", "1"])
        .arg("--out")
        .arg(&out)
        .output()
        .await
        .unwrap();
    assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
    let trajectories = ta_types::trajectory::read_trajectories(&out.join("trajectories.jsonl")).unwrap();
    assert_eq!(trajectories.len(), 2);
    for t in &trajectories {
        assert!(t.outcome != ta_types::Outcome::Error, "{:?}", t.error);
        assert!(!t.turns.is_empty());
        for turn in &t.turns {
            assert!(!turn.prompt_token_ids.is_empty());
            assert_eq!(turn.completion_token_ids.len(), turn.logprobs.len());
            assert_eq!(turn.completion_token_ids.len() as u64, turn.completion_tokens);
            assert!(turn.logprobs.iter().all(|&lp| lp <= 0.0 && lp.is_finite()));
        }
        // Token-level samples can be built from what was recorded.
        let samples = ta_trainer::samples_from_trajectory(t, 1.0, 0).unwrap();
        assert!(!samples.is_empty());
    }
    assert!(out.join("logs/engine.log").exists());
}
