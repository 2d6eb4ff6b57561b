//! `train-agent train` end to end on CPU with real parts: the demo MCP server, the embedded engine
//! and the Lightning/PEFT trainer, on the tiny random byte-level model the test suites share
//! (python/tests/tiny_model.py). The task is one such a model can learn in a few minutes: the
//! ground truth rewards answers that contain a digit, which its random policy writes in about a
//! quarter of its 8-byte samples, so groups have variance and GRPO has something to push. Seeded:
//! the same rewards come out on every 2-core run of the pinned torch.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The byte-level tiny model's directory, built on first use.
fn tiny_model() -> PathBuf {
    common::tiny_model(true)
}

/// Scenarios whose ground truth is "the answer holds a digit", and a config for short steps.
/// Dynamic sampling is off: these tests count plain steps (it has its own test below).
fn setup(dir: &Path, max_steps: u32) -> (PathBuf, PathBuf) {
    setup_with(dir, max_steps, 8, "dynamic_sampling = false", "")
}

/// [`setup`] with `rollouts` per scenario, `rollout` lines added to `[rollout]` and `tail`
/// appended to the config.
fn setup_with(dir: &Path, max_steps: u32, rollouts: u32, rollout: &str, tail: &str) -> (PathBuf, PathBuf) {
    let scenarios = dir.join("scenarios.jsonl");
    let lines: Vec<String> = (0..6)
        .map(|i| {
            let split = if i < 4 { "train" } else { "validation" };
            format!(r#"{{"id": "digit-{i}", "task": "Reply with a number (task {i}).", "expected": {{"regex": "[0-9]"}}, "split": "{split}"}}"#)
        })
        .collect();
    std::fs::write(&scenarios, lines.join("\n")).unwrap();
    let config = dir.join("train.toml");
    std::fs::write(
        &config,
        format!(
            r#"seed = 3
[rollout]
rollouts_per_scenario = {rollouts}
scenarios_per_step = 2
max_steps = {max_steps}
epochs = 100
max_turns = 1
max_tokens = 8
temperature = 1.0
concurrency = 16
eval_every = 0
{rollout}
[lora]
r = 8
alpha = 16.0
[optim]
lr = 0.02
[loss]
aggregation = "seq-mean-token-mean"
[trainer]
precision = "32-true"
[reward]
ground_truth_weight = 2.0
rules_weight = 0.0
{tail}"#
        ),
    )
    .unwrap();
    (scenarios, config)
}

/// `train` on the tiny model. The engine's dtype is fixed as the trainer's precision is
/// (`precision = "32-true"`): `auto` picks bf16 on some CPUs, where two runs' sampling logprobs
/// differ by more than the comparisons here allow (docs/reliability.md, "Test suite portability").
fn train_command(scenarios: &Path, config: &Path, model: &Path, out: &Path) -> Command {
    let mut cmd = Command::new(common::bin());
    cmd.args(["train", "--dtype", "float32", "--server", "train-agent demo-server", "--scenarios"])
        .arg(scenarios)
        .arg("--config")
        .arg(config)
        .arg("--base-model")
        .arg(model)
        .arg("--out")
        .arg(out);
    cmd
}

fn metrics(out: &Path) -> Vec<Value> {
    std::fs::read_to_string(out.join("metrics.jsonl")).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn step_rows(rows: &[Value]) -> Vec<&Value> {
    rows.iter().filter(|r| r.get("reward").is_some()).collect()
}

fn check(out: &Output) {
    assert!(out.status.success(), "train failed:\n{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}

/// Steps of the learning test. Training is pinned to fp32 so that CPUs with and without native bf16
/// train alike.
const STEPS: u64 = 14;

#[test]
fn grpo_raises_the_mean_reward_of_a_tiny_model() {
    let model = tiny_model();
    let dir = tempfile::tempdir().unwrap();
    let (scenarios, config) = setup(dir.path(), STEPS as u32);
    let out = dir.path().join("run");
    check(&train_command(&scenarios, &config, &model, &out).output().unwrap());

    let rows = metrics(&out);
    let steps = step_rows(&rows);
    assert_eq!(steps.len(), STEPS as usize, "one row per step");
    let rewards: Vec<f64> = steps.iter().map(|r| r["reward"].as_f64().unwrap()).collect();
    let first = rewards[..4].iter().sum::<f64>() / 4.0;
    let last = rewards[rewards.len() - 4..].iter().sum::<f64>() / 4.0;
    eprintln!("rewards per step: {rewards:.3?}");
    assert!(last > first + 0.1, "mean reward did not rise: first 4 steps {first:.3}, last 4 steps {last:.3} ({rewards:.3?})");
    // Groups had variance, so steps trained.
    assert!(steps.iter().filter(|r| r["samples"].as_u64().unwrap() > 0).count() >= 10);
    // Greedy validation runs before and after and does not get worse. It is not the learning claim
    // (the sampled reward above is): two greedy episodes flip on near-ties, and the same run gave
    // 0/2 -> 1/2 with a bf16 output head and 0/2 -> 0/2 with the fp32 head on an AMD EPYC.
    let val = |step: u64| rows.iter().find(|r| r["step"] == step && r.get("val_ground_truth").is_some()).map(|r| r["val_ground_truth"].as_f64().unwrap());
    let (before, after) = (val(0).expect("validation at step 0"), val(STEPS).expect("validation at the last step"));
    assert!(after >= before, "validation ground truth fell: {before} -> {after}");
    assert!(out.join("final/adapter_config.json").exists() && out.join("final/adapter_model.safetensors").exists());
}

/// Dynamic sampling and the adaptive curriculum on the tiny model. Groups of two rollouts at a
/// digit rate near a quarter come out flat more often than not, so steps draw replacements.
#[test]
fn dynamic_sampling_replaces_flat_groups_within_the_cap_and_counts_them() {
    let model = tiny_model();
    let dir = tempfile::tempdir().unwrap();
    let (scenarios, config) = setup_with(dir.path(), 3, 2, "dynamic_sampling = true\nmax_oversample = 2.0", "[curriculum]\nmode = \"adaptive\"");
    let out = dir.path().join("run");
    check(&train_command(&scenarios, &config, &model, &out).output().unwrap());

    let rows = metrics(&out);
    let steps = step_rows(&rows);
    assert_eq!(steps.len(), 3);
    let u = |r: &Value, k: &str| r[k].as_u64().unwrap_or_else(|| panic!("{k} missing in {r}"));
    for (i, r) in steps.iter().enumerate() {
        let (drawn, flat, kept) = (u(r, "groups"), u(r, "groups_zero_variance"), u(r, "groups_kept"));
        assert!((2..=4).contains(&drawn), "the cap is 2 x 2 groups: {r}");
        assert_eq!(kept, (drawn - flat).min(2), "groups with signal beyond the step's two are surplus: {r}");
        assert!(kept <= 2, "never more groups with signal than the step needs: {r}");
        assert!(flat + u(r, "groups_tie_break") <= drawn, "{r}");
        assert!(kept == 2 || drawn == 4, "a step stops short only at the cap: {r}");
        let (before, after) = (r["flat_share_before"].as_f64().unwrap(), r["flat_share_after"].as_f64().unwrap());
        assert!((0.0..=1.0).contains(&before) && (after - (1.0 - kept as f64 / 2.0)).abs() < 1e-9, "{r}");
        assert!(u(r, "sampling_rounds") >= 1);
        // Every drawn group is in the step's file, each scenario once.
        let file = std::fs::read_to_string(out.join(format!("trajectories/step-{:06}.jsonl", i + 1))).unwrap();
        let ids: Vec<String> = file.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()["scenario_id"].as_str().unwrap().to_string()).collect();
        assert_eq!(ids.len() as u64, 2 * drawn, "{r}");
        let mut distinct = ids.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len() as u64, drawn, "a scenario is drawn once per step: {ids:?}");
    }
    assert!(steps.iter().any(|r| u(r, "sampling_rounds") > 1), "some step replaced a flat group: {steps:?}");
    let csv = std::fs::read_to_string(out.join("metrics.csv")).unwrap();
    for column in ["groups_kept", "sampling_rounds", "flat_share_before", "flat_share_after", "curriculum_retired"] {
        assert!(csv.lines().next().unwrap().split(',').any(|c| c == column), "{column} not in metrics.csv");
    }
}

/// `size_first_round`: from the second step on, a step's first round also draws the replacements
/// the previous step's flat share predicts (within the cap), so a step whose first round brings
/// enough groups with signal plays that one round.
#[test]
fn the_first_round_is_sized_by_the_previous_steps_flat_share() {
    let model = tiny_model();
    let dir = tempfile::tempdir().unwrap();
    let (scenarios, config) = setup_with(dir.path(), 3, 2, "dynamic_sampling = true\nmax_oversample = 2.0\nsize_first_round = true", "");
    let out = dir.path().join("run");
    check(&train_command(&scenarios, &config, &model, &out).output().unwrap());

    let rows = metrics(&out);
    let steps = step_rows(&rows);
    assert_eq!(steps.len(), 3);
    let u = |r: &Value, k: &str| r[k].as_u64().unwrap_or_else(|| panic!("{k} missing in {r}")) as usize;
    let (needed, cap) = (2, 4);
    let mut grown = 0;
    for pair in steps.windows(2) {
        let (prev, r) = (&pair[0], &pair[1]);
        // Groups with signal: those that tell right from wrong, or, where none did, the tie-break's.
        let (drawn, tie_break) = (u(prev, "groups"), u(prev, "groups_tie_break"));
        let correctness = drawn - u(prev, "groups_zero_variance") - tie_break;
        let informative = if correctness > 0 { correctness } else { tie_break };
        // As a replacement round after the previous step would be sized: needed x (drawn + 2) / (informative + 1).
        let first = (((needed * (drawn + 2)) as f64 / (informative + 1) as f64).ceil() as usize).clamp(needed, cap);
        assert!(u(r, "groups") >= first, "the first round alone draws {first}: {r}");
        if u(r, "sampling_rounds") == 1 {
            assert_eq!(u(r, "groups"), first, "one round: exactly the sized first round: {r}");
        }
        if first == cap {
            assert_eq!(u(r, "sampling_rounds"), 1, "a first round at the cap leaves no replacement to draw: {r}");
        }
        grown += usize::from(first > needed);
    }
    assert!(grown > 0, "no step followed one with flat groups, so nothing was sized: {steps:?}");
}

/// Sampled validation (`--eval-rollouts`): beside the greedy episode, k episodes per validation
/// scenario at the rollout temperature in their own files, pass@1 and pass@k with 95% intervals in
/// the validation rows, the CSV and the report; resuming a finished run validates nothing again.
#[test]
fn validation_samples_k_episodes_and_reports_pass_at_k_with_intervals() {
    let model = tiny_model();
    let dir = tempfile::tempdir().unwrap();
    let (scenarios, config) = setup(dir.path(), 1);
    let out = dir.path().join("run");
    check(&train_command(&scenarios, &config, &model, &out).args(["--eval-rollouts", "2"]).output().unwrap());

    let rows = metrics(&out);
    let val: Vec<&Value> = rows.iter().filter(|r| r.get("val_completion_rate").is_some()).collect();
    assert_eq!(val.iter().map(|r| r["step"].as_u64().unwrap()).collect::<Vec<_>>(), [0, 1], "{rows:?}");
    let f = |r: &Value, k: &str| r[k].as_f64().unwrap_or_else(|| panic!("{k} missing from {r}"));
    for r in &val {
        assert_eq!(r["val_sampled_k"], 2, "{r}");
        for key in ["val_pass1", "val_pass_k", "val_success"] {
            let (x, lo, hi) = (f(r, key), f(r, &format!("{key}_low")), f(r, &format!("{key}_high")));
            assert!((0.0..=1.0).contains(&lo) && lo <= x && x <= hi && hi <= 1.0, "{key}: {lo} <= {x} <= {hi}");
        }
        assert!(f(r, "val_pass_k") >= f(r, "val_pass1"), "pass@2 is at least pass@1: {r}");
    }
    for step in [0, 1] {
        let greedy = ta_types::trajectory::read_trajectories(&out.join(format!("eval/step-{step:06}.jsonl"))).unwrap();
        let sampled = ta_types::trajectory::read_trajectories(&out.join(format!("eval/step-{step:06}.sampled.jsonl"))).unwrap();
        assert_eq!(greedy.len(), 2, "one greedy episode per validation scenario");
        assert_eq!(sampled.len(), 2 * 2, "two sampled episodes per validation scenario");
        assert!(sampled.iter().all(|t| t.reward.is_some() && t.scenario_id.starts_with("digit-") && t.group.index < 2));
        let p1 = sampled.iter().filter(|t| ta_metrics::is_success(t)).count() as f64 / 4.0;
        assert!((f(val[step], "val_pass1") - p1).abs() < 1e-9, "pass@1 is the mean over samples");
    }
    let csv = std::fs::read_to_string(out.join("metrics.csv")).unwrap();
    assert!(csv.lines().next().unwrap().contains("val_pass_k_high"), "{csv}");
    let report = ta_eval::report::collect(&out).unwrap();
    let chart = report.charts.iter().find(|c| c.id == "validation_sampled").expect("the sampled validation chart");
    assert!(chart.series.iter().any(|s| s.label == "sampled pass@2" && s.points.len() == 2), "{chart:?}");
    let run = ta_eval::RunDir::open(&out).unwrap();
    assert_eq!(run.evaluated().unwrap().len(), 2, "greedy: step 0 and step 1; the sampled files are not validations of their own");
    assert_eq!(run.evaluated_sampled().unwrap().iter().map(|(l, ts)| (l.clone(), ts.len())).collect::<Vec<_>>(), [("base".to_string(), 4), ("step 1".to_string(), 4)]);

    // final/ is the best validated adapter (the base model at step 0 is not one): step 1's, copied
    // byte for byte, and final.json says so with both validations.
    let kept: Value = serde_json::from_str(&std::fs::read_to_string(out.join("final.json")).unwrap()).unwrap();
    assert_eq!((kept["rule"].as_str(), kept["step"].as_u64(), kept["last_step"].as_u64()), (Some("best"), Some(1), Some(1)), "{kept}");
    assert_eq!(kept["validation"]["success"].as_f64(), Some(f(val[1], "val_success")), "{kept}");
    let bytes = |p: &str| std::fs::read(out.join(p)).unwrap();
    assert_eq!(bytes("final/adapter_model.safetensors"), bytes("checkpoints/step-000001/adapter/adapter_model.safetensors"));

    // Resuming the finished run plays no validation again.
    let sampled_at = |step: u64| std::fs::metadata(out.join(format!("eval/step-{step:06}.sampled.jsonl"))).unwrap().modified().unwrap();
    let before = (sampled_at(0), sampled_at(1));
    check(&train_command(&scenarios, &config, &model, &out).args(["--resume"]).output().unwrap());
    assert_eq!((sampled_at(0), sampled_at(1)), before, "finished validations are kept");
    assert_eq!(metrics(&out).len(), rows.len(), "no new rows");
}

#[test]
fn a_run_killed_mid_step_resumes_without_losing_a_finished_step_or_trajectory() {
    let model = tiny_model();
    let dir = tempfile::tempdir().unwrap();
    let (scenarios, config) = setup(dir.path(), 5);
    let out = dir.path().join("run");

    // Start, wait for step 2's checkpoint, let step 3 begin, then kill -9.
    let mut child = train_command(&scenarios, &config, &model, &out).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn().unwrap();
    let done2 = out.join("checkpoints/step-000002/state.json");
    let started = Instant::now();
    while !done2.exists() {
        assert!(child.try_wait().unwrap().is_none(), "train exited before step 2 finished");
        assert!(started.elapsed() < Duration::from_secs(900), "step 2 did not finish in 15 minutes");
        std::thread::sleep(Duration::from_millis(50));
    }
    let traj3 = out.join("trajectories/step-000003.jsonl");
    while !traj3.exists() && child.try_wait().unwrap().is_none() {
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL: no chance to clean up
    child.wait().unwrap();
    assert!(!out.join("checkpoints/step-000005/state.json").exists(), "the run finished before it was killed");

    let before = metrics(&out);
    let finished: Vec<u64> = std::fs::read_dir(out.join("checkpoints"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("state.json").exists())
        .map(|e| e.file_name().to_str().unwrap()[5..].parse().unwrap())
        .collect();
    let last = *finished.iter().max().unwrap();
    let saved: Vec<(u64, String)> = (1..=last).map(|s| (s, std::fs::read_to_string(out.join(format!("trajectories/step-{s:06}.jsonl"))).unwrap())).collect();

    // Resume: the same command plus --resume.
    let resumed = train_command(&scenarios, &config, &model, &out).arg("--resume").output().unwrap();
    check(&resumed);
    assert!(String::from_utf8_lossy(&resumed.stderr).contains(&format!("resuming after step {last}")));

    // Finished steps' trajectories are untouched, every step has exactly one metrics row, and the
    // rows written before the kill are kept as they were.
    for (s, text) in saved {
        assert_eq!(std::fs::read_to_string(out.join(format!("trajectories/step-{s:06}.jsonl"))).unwrap(), text, "step {s} trajectories changed");
    }
    let after = metrics(&out);
    let steps: Vec<u64> = step_rows(&after).iter().map(|r| r["step"].as_u64().unwrap()).collect();
    assert_eq!(steps, vec![1, 2, 3, 4, 5]);
    for row in before.iter().filter(|r| r["step"].as_u64().unwrap() <= last) {
        assert!(after.contains(row), "row lost or changed on resume: {row}");
    }
    assert_eq!(after.iter().filter(|r| r["step"] == 0).count(), 1, "base validation ran once");
    for s in 1..=5u64 {
        let n = std::fs::read_to_string(out.join(format!("trajectories/step-{s:06}.jsonl"))).unwrap().lines().count();
        assert_eq!(n, 16, "step {s}: 2 scenarios x 8 rollouts");
    }
    assert!(out.join("final/adapter_model.safetensors").exists());
}

/// The child process of `parent` running `python -m MODULE`, once there is one.
fn python_child(parent: u32, module: &str) -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok()).find(|pid| {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // pid (comm) state ppid ...: the comm may hold spaces, so read after its closing parenthesis.
        let ppid = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok());
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        ppid == Some(parent) && String::from_utf8_lossy(&cmdline).contains(module)
    })
}

/// Starts a 4-step run, waits until step 1 is complete, then SIGKILLs the run's `module` process
/// alone (the run itself lives on). Returns the run's output.
fn kill_child_after_step_1(module: &str, scenarios: &Path, config: &Path, model: &Path, out: &Path) -> Output {
    let mut child = train_command(scenarios, config, model, out).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let done1 = out.join("checkpoints/step-000001/state.json");
    let started = Instant::now();
    while !done1.exists() {
        assert!(child.try_wait().unwrap().is_none(), "train exited before step 1 finished");
        assert!(started.elapsed() < Duration::from_secs(900), "step 1 did not finish in 15 minutes");
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = python_child(child.id(), module).unwrap_or_else(|| panic!("no {module} process under the run"));
    assert!(Command::new("kill").args(["-9", &pid.to_string()]).status().unwrap().success());
    child.wait_with_output().unwrap()
}

#[test]
fn a_trainer_killed_alone_is_restarted_and_the_step_redone() {
    let model = tiny_model();
    let dir = tempfile::tempdir().unwrap();
    let (scenarios, config) = setup(dir.path(), 4);
    let out = dir.path().join("run");
    let run = kill_child_after_step_1("train_agent.trainer", &scenarios, &config, &model, &out);
    check(&run);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("the trainer process exited during step ") && stderr.contains("restarting it from step "), "{stderr}");
    let steps: Vec<u64> = step_rows(&metrics(&out)).iter().map(|r| r["step"].as_u64().unwrap()).collect();
    assert_eq!(steps, vec![1, 2, 3, 4], "every step ran once, the redone one included");
    assert!(out.join("final/adapter_model.safetensors").exists());
}

#[test]
fn an_engine_killed_alone_stops_the_run_with_a_resume_hint_and_resume_finishes_it() {
    let model = tiny_model();
    let dir = tempfile::tempdir().unwrap();
    let (scenarios, config) = setup(dir.path(), 4);
    let out = dir.path().join("run");
    let run = kill_child_after_step_1("train_agent.engine", &scenarios, &config, &model, &out);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success(), "a run whose engine died must fail:\n{stderr}");
    assert!(stderr.contains("the engine stopped answering during step ") && stderr.contains("--resume"), "{stderr}");
    // Nothing errored is kept as a result: the step files hold only finished episodes.
    for s in 2..=4u64 {
        let text = std::fs::read_to_string(out.join(format!("trajectories/step-{s:06}.jsonl"))).unwrap_or_default();
        assert!(text.lines().all(|l| serde_json::from_str::<Value>(l).unwrap()["error"].is_null()), "step {s}: {text}");
    }
    let step1 = std::fs::read_to_string(out.join("trajectories/step-000001.jsonl")).unwrap();

    let resumed = train_command(&scenarios, &config, &model, &out).arg("--resume").output().unwrap();
    check(&resumed);
    assert_eq!(std::fs::read_to_string(out.join("trajectories/step-000001.jsonl")).unwrap(), step1, "step 1 is kept as it was");
    let steps: Vec<u64> = step_rows(&metrics(&out)).iter().map(|r| r["step"].as_u64().unwrap()).collect();
    assert_eq!(steps, vec![1, 2, 3, 4]);
    for s in 1..=4u64 {
        let text = std::fs::read_to_string(out.join(format!("trajectories/step-{s:06}.jsonl"))).unwrap();
        assert_eq!(text.lines().count(), 16, "step {s}: 2 scenarios x 8 rollouts");
        assert!(text.lines().all(|l| serde_json::from_str::<Value>(l).unwrap()["error"].is_null()), "step {s} kept an errored episode");
    }
}

/// The model that played each episode of step `step`.
fn players(out: &Path, step: u64) -> std::collections::BTreeSet<String> {
    let text = std::fs::read_to_string(out.join(format!("trajectories/step-{step:06}.jsonl"))).unwrap();
    text.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()["model"].as_str().unwrap().to_string()).collect()
}

/// Staleness 0 is the synchronous loop: every step is played by the adapter trained just before
/// it, its step file is on-policy (no `policy_lag`, today's loss; the trainer's tests check that
/// loss is unchanged) and the trainer reports no importance weights. Staleness 1 plays step n+1
/// with the adapter of step n-1 while step n trains, and the trainer weighs those samples by
/// truncated importance weights. Step 1 is on-policy in both, so its update is the same.
#[test]
fn staleness_1_plays_the_next_step_during_the_update_and_staleness_0_is_the_synchronous_loop() {
    let model = tiny_model();
    let dir = tempfile::tempdir().unwrap();
    let run = |staleness: u32| {
        let sub = dir.path().join(format!("staleness-{staleness}"));
        std::fs::create_dir_all(&sub).unwrap();
        let (scenarios, config) = setup_with(&sub, 4, 8, &format!("dynamic_sampling = false\nstaleness = {staleness}"), "");
        let out = sub.join("run");
        check(&train_command(&scenarios, &config, &model, &out).output().unwrap());
        out
    };
    let (sync, asynchronous) = (run(0), run(1));
    let lags = |out: &Path| step_rows(&metrics(out)).iter().map(|r| r["policy_lag"].as_u64().unwrap()).collect::<Vec<_>>();
    assert_eq!(lags(&sync), vec![0, 0, 0, 0]);
    assert_eq!(lags(&asynchronous), vec![0, 1, 1, 1]);
    // Step k is played by the adapter of step k - 1 - staleness (a flat step's checkpoint keeps
    // the adapter before it; before any adapter, the base model).
    let base = players(&sync, 1);
    for (out, staleness) in [(&sync, 0), (&asynchronous, 1)] {
        for step in 1..=4u64 {
            let j = step.saturating_sub(1 + staleness);
            let by = format!("step-{j:06}");
            let expected = if j > 0 && out.join(format!("checkpoints/{by}/adapter")).exists() { [by].into() } else { base.clone() };
            assert_eq!(players(out, step), expected, "staleness {staleness}, step {step}");
        }
    }
    for out in [&sync, &asynchronous] {
        let rows = metrics(out);
        // A flat step trains nothing (no step file, no report): the others are checked.
        let trained: Vec<_> = step_rows(&rows).into_iter().filter(|r| r["trainer"].get("skipped").is_none()).collect();
        let lagging = trained.iter().filter(|r| r["policy_lag"] == 1).count();
        assert!(out == &sync || lagging > 0, "no step trained on samples played ahead");
        for row in trained {
            let lag = row["policy_lag"].as_u64().unwrap();
            let weight = &row["trainer"]["importance_weight_mean"];
            assert_eq!(weight.is_number(), lag > 0, "step {}: {weight}", row["step"]);
            let file: Value =
                serde_json::from_str(&std::fs::read_to_string(out.join(format!("trainer/inbox/step-{:06}.json", row["step"].as_u64().unwrap()))).unwrap()).unwrap();
            assert_eq!(file.get("policy_lag").map(|l| l.as_u64().unwrap()), (lag > 0).then_some(lag), "step {}'s file names its lag only when it has one", row["step"]);
        }
    }
    // Step 1 was played and trained alike: the same samples (logprobs up to the engine's batch
    // arithmetic), the same loss.
    let step_1 = |out: &Path| -> Value { serde_json::from_str(&std::fs::read_to_string(out.join("trainer/inbox/step-000001.json")).unwrap_or("null".into())).unwrap() };
    let (a, b) = (step_1(&sync), step_1(&asynchronous));
    for (x, y) in a["samples"].as_array().into_iter().flatten().zip(b["samples"].as_array().into_iter().flatten()) {
        assert!(x["input_ids"] == y["input_ids"] && x["loss_mask"] == y["loss_mask"] && x["advantage"] == y["advantage"], "step 1 was sampled differently");
        let close =
            x["logprobs"].as_array().unwrap().iter().zip(y["logprobs"].as_array().unwrap()).all(|(p, q)| (p.as_f64().unwrap() - q.as_f64().unwrap()).abs() < 1e-4);
        assert!(close, "step 1's sampling logprobs differ");
    }
    assert_eq!(a["samples"].as_array().map(Vec::len), b["samples"].as_array().map(Vec::len));
    let loss = |out: &Path| step_rows(&metrics(out))[0]["trainer"]["loss"].as_f64();
    if let (Some(x), Some(y)) = (loss(&sync), loss(&asynchronous)) {
        assert!((x - y).abs() <= 1e-6 + 1e-3 * x.abs(), "step 1's loss: {x} vs {y}");
    }
    // The overlapped window is one phase, so the phases still add up to the run's wall time.
    let phases = std::fs::read_to_string(asynchronous.join("phases.jsonl")).unwrap();
    assert_eq!(phases.matches("GRPO train + next rollout").count(), 3, "{phases}");
    assert_eq!(phases.matches("\"GRPO rollout\"").count(), 1, "only step 1 is played alone: {phases}");
}
