//! `train-agent demo`, shortened (a few scenarios, one GRPO step) but end to end on CPU with the
//! CPU profile's settings: every stage's outputs are there, the adapter loads in PEFT, the report
//! renders, and a second run finds everything done. Not a learning claim (see benches/RESULTS.md
//! for the measured demo).
//!
//! The model is the tiny random Llama with SmolLM2's tokenizer and chat template
//! (python/tests/tiny_model.py), given as `--model DIR`: what this test checks is the demo's
//! plumbing, which does not depend on the model's size, and SmolLM2-135M itself made it take
//! 26 minutes on a 2-core CPU without AMX. The real SmolLM2 is still run end to end through the
//! engine by tests/engine_rollout.rs and tests/eval_cli.rs.

mod common;

use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn bin() -> &'static str {
    common::bin()
}

fn jsonl(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn demo(model: &Path, out: &Path) -> std::process::Output {
    Command::new(bin())
        .args(["demo", "--profile", "cpu", "--steps", "1", "--train-limit", "6", "--validation-limit", "2", "--model"])
        .arg(model)
        .arg("--out")
        .arg(out)
        .env("TRAIN_AGENT_PYTHONPATH", Path::new(env!("CARGO_MANIFEST_DIR")).join("python"))
        .output()
        .unwrap()
}

#[test]
fn shortened_demo_runs_every_stage_and_continues_when_run_again() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("demo");
    let model = common::tiny_model(false);
    let run = demo(&model, &out);
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stdout}\n{stderr}");

    // Each stage is shown with the command that repeats it.
    let stages =
        ["[1/5]", "train-agent scenarios synth", "[2/5]", "train-agent collect", "[3/5]", "train-agent curate", "[4/5]", "train-agent sft", "[5/5]", "train-agent train"];
    for stage in stages {
        assert!(stderr.contains(stage), "{stage} missing from:\n{stderr}");
    }
    // The CPU profile's tasks: synthesized counting tasks, the first 6 train and 2 validation ones.
    let tasks = jsonl(&out.join("scenarios.jsonl"));
    assert_eq!(tasks.len(), 8);
    assert!(tasks.iter().all(|t| t["template"].as_str().is_some_and(|n| n.starts_with("count_"))), "{tasks:?}");
    // Traces of the first 45% of the train split only (3 of 6), checked by ground truth.
    let traces = jsonl(&out.join("traces/traces.jsonl"));
    assert_eq!(traces.len(), 3);
    assert!(traces.iter().all(|t| t["split"] == "train" && t["reward_parts"]["ground_truth"] == 1.0));
    assert_eq!(jsonl(&out.join("dataset/train.jsonl")).len(), 3);

    // SFT: an eval loss before and after, and a PEFT adapter.
    let sft_rows = jsonl(&out.join("sft/metrics.jsonl"));
    assert!(sft_rows.iter().any(|r| r["train_loss"].is_f64()), "no SFT step row: {sft_rows:?}");
    assert!(out.join("sft/final/adapter_config.json").exists());

    // GRPO from that adapter: base baseline, step-0 (SFT) and step-1 validations, one step row.
    let grpo = out.join("grpo");
    let config = std::fs::read_to_string(grpo.join("config.toml")).unwrap();
    assert!(config.contains("sft/final"), "GRPO must start from the SFT adapter:\n{config}");
    let rows = jsonl(&grpo.join("metrics.jsonl"));
    let val_steps: Vec<&Value> = rows.iter().filter(|r| r.get("val_completion_rate").is_some()).map(|r| &r["step"]).collect();
    assert_eq!(val_steps, [&Value::from(0), &Value::from(1)], "{rows:?}");
    assert_eq!(rows.iter().filter(|r| r.get("reward").is_some()).count(), 1, "one step row: {rows:?}");
    assert_eq!(jsonl(&grpo.join("eval/base.jsonl")).len(), 2, "the base model's baseline on the 2 validation scenarios");
    assert!(jsonl(&grpo.join("eval/base.jsonl")).iter().all(|t| t["model"] == "base"));
    assert_eq!(jsonl(&grpo.join("eval/step-000000.jsonl")).len(), 2);
    // The CPU profile's step: 3 scenarios x 4 rollouts.
    let step1 = jsonl(&grpo.join("trajectories/step-000001.jsonl"));
    assert_eq!(step1.len(), 12);
    assert!(step1.iter().all(|t| t["model"] == "init" && t["reward"].is_f64()), "rollouts of step 1 use the SFT adapter and are scored");

    // The table and the report.
    for label in ["base", "SFT", "SFT+GRPO", "task completion"] {
        assert!(stdout.contains(label), "{label} missing from the table:\n{stdout}");
    }
    let html = std::fs::read_to_string(grpo.join("report.html")).unwrap();
    assert!(html.contains("<th>base</th><th>init</th><th>step 1</th>"), "the report compares base, SFT and the trained adapter");

    // The adapter the demo trained loads in PEFT, onto the base model.
    let adapter = if grpo.join("final").exists() { grpo.join("final") } else { out.join("sft/final") };
    let python = ta_python::PythonEnv::ensure().unwrap();
    let check = "import sys, torch; from peft import PeftModel; from train_agent.models import ModelSource, load_model; \
                 base = load_model(ModelSource.parse(sys.argv[2]), 'cpu', torch.float32); \
                 m = PeftModel.from_pretrained(base, sys.argv[1]); \
                 print('lora parameters', sum(p.numel() for k, p in m.named_parameters() if 'lora_' in k))";
    let loaded = Command::new(&python.python)
        .args(["-c", check])
        .arg(&adapter)
        .arg(&model)
        .env("PYTHONPATH", Path::new(env!("CARGO_MANIFEST_DIR")).join("python"))
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&loaded.stdout);
    let count: u64 = printed.trim().strip_prefix("lora parameters ").and_then(|n| n.parse().ok()).unwrap_or(0);
    assert!(loaded.status.success() && count > 0, "{printed}\n{}", String::from_utf8_lossy(&loaded.stderr));

    // Run again: every stage is found complete, the table is printed again.
    let again = demo(&model, &out);
    let stderr2 = String::from_utf8_lossy(&again.stderr);
    assert!(again.status.success(), "{stderr2}");
    assert!(!stderr2.contains("[4/5]") && !stderr2.contains("[5/5]"), "finished stages are not run again:\n{stderr2}");
    assert!(String::from_utf8_lossy(&again.stdout).contains("SFT+GRPO"));
}
