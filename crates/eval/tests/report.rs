//! The report's data and page, `stats` and the evaluation summary, on hand-made directories
//! (`tests/fixtures/run`: a 3-step training run with validation at steps 0 and 3;
//! `tests/fixtures/eval`: base and trained trajectories, 2 rollouts per scenario).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use ta_eval::report::{collect, data_json, render, write_report};
use ta_eval::{EvalModel, EvalSummary};
use ta_metrics::Verdict;
use ta_types::trajectory::read_trajectories;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

/// A copy of fixture `name` in a temporary directory, as `<tmp>/<name>`.
fn copy(name: &str) -> (tempfile::TempDir, PathBuf) {
    fn rec(src: &Path, dst: &Path) {
        std::fs::create_dir_all(dst).unwrap();
        for e in std::fs::read_dir(src).unwrap() {
            let e = e.unwrap();
            if e.path().is_dir() { rec(&e.path(), &dst.join(e.file_name())) } else { std::fs::copy(e.path(), dst.join(e.file_name())).map(|_| ()).unwrap() }
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let dst = tmp.path().join(name);
    rec(&fixture(name), &dst);
    (tmp, dst)
}

/// Writes `eval.json` into an eval fixture copy, as `train-agent eval --compare-base` does.
fn with_eval_json(dir: &Path) {
    let ts: Vec<_> = ["base", "trained"].iter().map(|l| read_trajectories(&dir.join(format!("trajectories/{l}.jsonl"))).unwrap()).collect();
    let models = vec![EvalModel { label: "base".into(), source: "smollm2-135m-instruct".into() }, EvalModel { label: "trained".into(), source: "runs/x/final".into() }];
    let s = EvalSummary::new(
        models,
        &ts,
        "stdio: train-agent demo-server".into(),
        "scenarios/company.jsonl".into(),
        Some("validation".into()),
        2,
        json!({"temperature": 1.0, "max_turns": 4}),
        61.0,
    );
    std::fs::write(dir.join("eval.json"), serde_json::to_vec_pretty(&s).unwrap()).unwrap();
}

/// The report data with each trajectory cut to what identifies it (the full data of one is
/// snapshotted separately), so the snapshot stays readable.
fn compact(mut v: Value) -> Value {
    for t in v["trajectories"].as_array_mut().unwrap() {
        let keep: serde_json::Map<String, Value> =
            ["source", "step", "group", "index", "scenario_id", "model", "outcome", "success", "reward"].iter().map(|k| (k.to_string(), t[*k].clone())).collect();
        *t = Value::Object(keep);
    }
    v
}

#[test]
fn training_run_report_data() {
    let (_tmp, dir) = copy("run");
    let data = collect(&dir).unwrap();
    let v: Value = serde_json::from_str(&data_json(&data)).unwrap();
    let mut snap = compact(v.clone());
    snap["generated_by"] = "[version]".into();
    insta::assert_json_snapshot!("training_run_data", snap);
    // One trajectory in full: the one that recovered from a failed call at the last validation.
    let recovered = v["trajectories"].as_array().unwrap().iter().find(|t| t["source"] == "validation" && t["tool_errors"] == 1).unwrap();
    insta::assert_json_snapshot!("recovered_trajectory_view", recovered);

    // What the data says, checked by hand against the fixture.
    let charts: Vec<&str> = data.charts.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(charts, ["reward", "completion", "loss", "kl", "grad_norm", "lr", "tokens_per_s", "entropy", "groups", "flat_share", "step_time"]);
    let step_time = data.charts.last().unwrap();
    assert!(step_time.stacked);
    let other = &step_time.series.last().unwrap();
    assert_eq!(other.label, "other (validation, checkpoint)");
    assert!((other.points[2][1] - 8.09).abs() < 1e-6, "the 8 s of validation at step 3 show as `other`: {:?}", other.points);
    let eval = data.eval.as_ref().unwrap();
    assert_eq!(eval.models.iter().map(|m| m.label.as_str()).collect::<Vec<_>>(), ["base", "step 3"]);
    let c = eval.comparison.as_ref().unwrap();
    assert_eq!((c.wins, c.losses, c.ties), (2, 0, 0));
    assert_eq!(data.trajectories.len(), 4 + 12);
    assert!(data.system_prompt.as_deref().unwrap().starts_with("You are an agent"));
    assert!(data.trajectories.iter().all(|t| t.messages.iter().all(|m| m.role != ta_types::Role::System)), "the system prompt is shown once");
}

#[test]
fn page_is_self_contained_and_escapes_what_it_embeds() {
    let (_tmp, dir) = copy("run");
    let path = write_report(&dir).unwrap();
    let html = std::fs::read_to_string(&path).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("Chart.js v4.6.1"), "Chart.js is embedded");
    for remote in ["src=\"http", "href=\"http", "@import", "url(http"] {
        assert!(!html.contains(remote), "the page fetches nothing: found {remote}");
    }
    // The tool result `error: no such table: dept <hint: ...>` must not open a tag anywhere.
    assert!(!html.contains("<hint"), "data text is escaped");
    let start = html.find("<script id=\"report-data\" type=\"application/json\">").unwrap();
    let json_text = &html[start..][html[start..].find('>').unwrap() + 1..];
    let json_text = &json_text[..json_text.find("</script>").unwrap()];
    let back: Value = serde_json::from_str(json_text).unwrap();
    assert_eq!(back["trajectories"].as_array().unwrap().len(), 16);
    assert!(back.to_string().contains("<hint: call list_tables>"), "escaping is lossless");
    // The server-rendered tables.
    assert!(html.contains("<td>task completion</td><td class=\"num\">0.0%</td><td class=\"num\">100.0%</td>"), "base vs trained table");
    assert!(html.contains("none (CPU run)"));
}

#[test]
fn stats_of_a_training_run() {
    let (_tmp, dir) = copy("run");
    let text = ta_eval::stats::render(&dir).unwrap();
    insta::assert_snapshot!("training_run_stats", text.replace(&dir.display().to_string(), "[dir]"));
}

#[test]
fn a_run_from_an_adapter_compares_base_adapter_and_trained() {
    let (_tmp, dir) = copy("run");
    // `train --init-adapter` validates the base model first; here the step-0 episodes stand in for it.
    let mut base = read_trajectories(&dir.join("eval/step-000000.jsonl")).unwrap();
    base.iter_mut().for_each(|t| t.reward = Some(-0.5));
    ta_types::trajectory::write_trajectories(&dir.join(ta_types::trajectory::BASELINE_VALIDATION), &base).unwrap();
    let run = ta_eval::rundir::RunDir::open(&dir).unwrap();
    let labels: Vec<String> = run.evaluated().unwrap().into_iter().map(|(l, _)| l).collect();
    assert_eq!(labels, ["base", "base", "step 3"], "baseline, step 0 (this fixture started from the base), the last step");
    let data = collect(&dir).unwrap();
    let eval = data.eval.as_ref().unwrap();
    assert_eq!(eval.models.len(), 3);
    let c = eval.comparison.as_ref().unwrap();
    assert!(c.rows.iter().all(|r| r.base.mean_reward != Some(-0.5)), "wins and losses compare the last step with the start (step 0), not the baseline");
    assert_eq!(eval.compared, Some(["base".to_string(), "step 3".to_string()]));
    assert!(c.paired.is_some());
    assert_eq!(data.trajectories.iter().filter(|t| t.source == "validation").count(), 3 * base.len());
    let stats = ta_eval::stats::render(&dir).unwrap();
    assert!(stats.contains("step 3") && stats.matches("base").count() >= 2, "{stats}");
}

#[test]
fn the_summary_says_which_adapter_final_holds() {
    let (_tmp, dir) = copy("run");
    let final_row = |dir: &Path| collect(dir).unwrap().summary.into_iter().find(|r| r.label == "Final adapter").unwrap().value;
    assert_eq!(final_row(&dir), "not written yet");
    std::fs::create_dir_all(dir.join("final")).unwrap();
    std::fs::write(dir.join("final/adapter_config.json"), "{}").unwrap();
    assert_eq!(final_row(&dir), "final/", "a run from before final.json");
    // The run kept step 1's adapter: step 3, the last, validated lower.
    let v = |step, success| ta_types::kept::Validated { step, success, pass1: None, ground_truth: Some(success) };
    let kept = ta_types::kept::Kept {
        rule: ta_types::kept::FinalAdapter::Best,
        step: 1,
        source: dir.join("checkpoints/step-000001/adapter"),
        validation: Some(v(1, 0.75)),
        last_step: 3,
        last_validation: Some(v(3, 0.25)),
    };
    std::fs::write(dir.join(ta_types::kept::RECORD), serde_json::to_vec(&kept).unwrap()).unwrap();
    assert_eq!(final_row(&dir), "final/: the adapter of step 1, the best validated (75.0% validation success; the last step, 3: 25.0% validation success)");
}

#[test]
fn sampled_validation_files_are_read_apart_from_the_greedy_ones() {
    let (_tmp, dir) = copy("run");
    // `train` with eval_rollouts = 2 writes eval/step-N.sampled.jsonl beside each validation.
    for step in [0, 3] {
        let greedy = read_trajectories(&dir.join(format!("eval/step-{step:06}.jsonl"))).unwrap();
        let sampled: Vec<_> = greedy
            .iter()
            .flat_map(|t| {
                (0..2).map(move |i| {
                    let mut t = t.clone();
                    t.group.index = i;
                    t
                })
            })
            .collect();
        ta_types::trajectory::write_trajectories(&dir.join(format!("eval/step-{step:06}.sampled.jsonl")), &sampled).unwrap();
    }
    let run = ta_eval::rundir::RunDir::open(&dir).unwrap();
    assert_eq!(run.validation_files().iter().map(|(s, _)| *s).collect::<Vec<_>>(), [0, 3], "sampled files are not greedy validations");
    let sampled = run.evaluated_sampled().unwrap();
    assert_eq!(sampled.iter().map(|(l, ts)| (l.as_str(), ts.len())).collect::<Vec<_>>(), [("base", 4), ("step 3", 4)]);
    let stats = ta_eval::stats::render(&dir).unwrap();
    let tail = &stats[stats.find("sampled validation").expect("a sampled table")..];
    assert!(tail.contains("pass@2") && tail.contains("paired, step 3 vs base: better on 2, worse on 0 of 2 tasks"), "{tail}");
}

#[test]
fn evaluation_with_compare_base() {
    let (_tmp, dir) = copy("eval");
    with_eval_json(&dir);
    let summary: EvalSummary = serde_json::from_slice(&std::fs::read(dir.join("eval.json")).unwrap()).unwrap();
    let c = summary.comparison.as_ref().unwrap();
    // atlas-lead: base 0/2, trained 2/2; dept-count: 1/2 both; on-leave-count: 2/2 then 1/2.
    let verdicts: Vec<(&str, Verdict)> = c.rows.iter().map(|r| (r.scenario_id.as_str(), r.verdict)).collect();
    assert_eq!(verdicts, [("atlas-lead", Verdict::Win), ("dept-count", Verdict::Tie), ("on-leave-count", Verdict::Loss)]);
    let trained = &summary.metrics[1];
    assert_eq!(trained.pass_at_k.len(), 2);
    assert!((trained.pass_at_k[&1] - 4.0 / 6.0).abs() < 1e-9);
    assert!((trained.pass_at_k[&2] - 1.0).abs() < 1e-9);
    assert_eq!(trained.error_recovery_rate, Some(1.0));

    let text = ta_eval::stats::render(&dir).unwrap();
    insta::assert_snapshot!("evaluation_stats", text);
    let data = collect(&dir).unwrap();
    assert_eq!(data.charts.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), ["pass_at_k"]);
    assert!(data.trajectories.iter().all(|t| t.group.starts_with("eval/")), "base and trained of a scenario form one group");
    let html = render(&data).unwrap();
    assert!(html.contains("class=\"loss\">loss</td>") && html.contains("class=\"win\">win</td>"));
}

#[test]
fn unknown_directory_gets_a_hint() {
    let tmp = tempfile::tempdir().unwrap();
    let err = collect(tmp.path()).unwrap_err().to_string();
    assert!(err.contains("holds no run") && err.contains("hint:"), "{err}");
}

/// Asynchronous GRPO: a step played ahead was rolled out during the step before, so the step-time
/// chart leaves its rollout and reward out of its own bar, and what it waited for beyond the
/// update shows as `other`.
#[test]
fn a_step_played_ahead_shows_only_its_own_wall_time() {
    let (_tmp, dir) = copy("run");
    let metrics = dir.join("metrics.jsonl");
    let rows: Vec<String> = std::fs::read_to_string(&metrics)
        .unwrap()
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            if v.get("reward").is_some() && v["step"].as_u64() > Some(1) {
                v["policy_lag"] = json!(1);
            }
            v.to_string()
        })
        .collect();
    std::fs::write(&metrics, rows.join("\n") + "\n").unwrap();
    let data = collect(&dir).unwrap();
    let step_time = data.charts.iter().find(|c| c.id == "step_time").unwrap();
    let steps_of = |label: &str| step_time.series.iter().find(|s| s.label == label).map(|s| s.points.iter().map(|p| p[0] as u64).collect::<Vec<_>>());
    assert_eq!(steps_of("rollout"), Some(vec![1]), "only step 1 was rolled out in its own window");
    assert_eq!(steps_of("train").map(|s| s.len()), Some(3));
    let other = step_time.series.last().unwrap();
    assert!(other.label.contains("the next step's rollout"), "{}", other.label);
    // Every bar adds up to its step's wall time (the fixture's steps spent more than their parts).
    for row in rows.iter().map(|l| serde_json::from_str::<Value>(l).unwrap()).filter(|r| r.get("reward").is_some()) {
        let step = row["step"].as_u64().unwrap();
        let bar: f64 = step_time.series.iter().flat_map(|s| s.points.iter().filter(|p| p[0] as u64 == step).map(|p| p[1])).sum();
        let wall = row["time"]["step_s"].as_f64().unwrap();
        assert!((bar - wall).abs() < 1e-6, "step {step}: bar {bar} vs step_s {wall}");
    }
}

/// An SFT run (`train-agent sft --out`): its losses in `stats` and as the report's curves, no
/// episodes; read as an SFT run, not as a GRPO run with no steps.
#[test]
fn an_sft_run_shows_its_losses() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sft");
    std::fs::create_dir_all(dir.join("final")).unwrap();
    std::fs::write(dir.join("final/adapter_config.json"), "{}").unwrap();
    std::fs::write(dir.join("config.toml"), "base_model = \"smollm2-135m-instruct\"\ndataset = \"runs/demo/dataset\"\nepochs = 2\n").unwrap();
    let rows = [
        json!({"step": 0, "epoch": 0, "eval_loss": 0.87, "eval_tokens": 147}),
        json!({"step": 1, "epoch": 1.0, "train_loss": 0.9, "lr": 5e-4, "grad_norm": 3.9, "tokens_per_s": 240.0, "step_s": 13.0}),
        json!({"step": 2, "epoch": 2.0, "train_loss": 0.5, "eval_loss": 0.46, "lr": 5e-4, "grad_norm": 2.1, "tokens_per_s": 250.0, "step_s": 12.0}),
    ];
    std::fs::write(dir.join("metrics.jsonl"), rows.iter().map(|r| format!("{r}\n")).collect::<String>()).unwrap();

    let text = ta_eval::stats::render(&dir).unwrap();
    assert!(text.contains("SFT run") && text.contains("2 steps, 25 s of training"), "{text}");
    assert!(text.contains("held-out loss 0.8700 (step 0) -> 0.4600 (step 2)"), "{text}");
    assert!(text.contains("0.9000") && text.contains("0.5000"), "each step's training loss: {text}");

    let data = serde_json::to_value(collect(&dir).unwrap()).unwrap();
    assert_eq!(data["kind"], "sft");
    assert!(data["title"].as_str().unwrap().ends_with("SFT run"), "{}", data["title"]);
    let summary: Vec<(String, String)> =
        data["summary"].as_array().unwrap().iter().map(|r| (r["label"].as_str().unwrap().to_string(), r["value"].as_str().unwrap().to_string())).collect();
    let value = |label: &str| summary.iter().find(|(l, _)| l == label).map(|(_, v)| v.clone()).unwrap_or_else(|| panic!("no {label} in {summary:?}"));
    assert_eq!(value("Held-out loss"), "0.8700 (step 0) → 0.4600 (step 2)");
    assert_eq!(value("Training loss (first → last step)"), "0.9000 → 0.5000");
    assert_eq!(value("Final adapter"), "final/");
    let loss = data["charts"].as_array().unwrap().iter().find(|c| c["id"] == "loss").unwrap();
    let labels: Vec<&str> = loss["series"].as_array().unwrap().iter().map(|s| s["label"].as_str().unwrap()).collect();
    assert_eq!(labels, ["training loss", "held-out loss"]);
    assert_eq!(loss["series"][1]["points"], json!([[0.0, 0.87], [2.0, 0.46]]));
    assert!(data["eval"].is_null() && data["trajectories"].as_array().unwrap().is_empty());
    assert!(write_report(&dir).unwrap().exists());
}
