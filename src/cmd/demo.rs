//! `train-agent demo`: the whole product on the bundled demo server, from a fresh machine: tasks
//! `scenarios synth` writes from the demo database, the base model's baseline, an SFT warm start
//! on reference traces of part of the train split, GRPO from that adapter on all of it, and the
//! base / SFT / SFT+GRPO table with the report. The CPU profile keeps the counting tasks (one
//! table, at most one condition); the GPU profile takes them all and evaluates the 88
//! hand-written questions as a separate check set.
//!
//! Each stage is one of the ordinary subcommands, run with the flags it prints (so every stage
//! can be repeated or tuned by hand), in its own directory under `--out`. A stage whose
//! output is complete is skipped, so running the same command again after a Ctrl-C or a crash
//! continues where it stopped.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Parser;
use ta_eval::rundir::RunDir;
use ta_metrics::{Comparison, Metrics, metrics_table};
use ta_python::PythonEnv;
use ta_sft::sft::SftConfig;
use ta_train::TrainConfig;
use ta_trainer::Packing;
use ta_trainer::checkpoint::last_complete_step;

use crate::cmd::{collect, curate, eval, scenarios, sft, train};

/// The demo's scenarios, embedded so the command works outside a checkout.
const SCENARIOS: &str = include_str!("../../scenarios/company.jsonl");
const SERVER: &str = "train-agent demo-server";

#[derive(clap::Args)]
pub struct Args {
    /// Where every stage writes (traces/, dataset/, sft/, grpo/); running again continues.
    #[arg(long, value_name = "DIR", alias = "output-dir", default_value = "runs/demo")]
    out: PathBuf,
    /// GRPO steps (default: 16 with a GPU, 2 on CPU). Runs as many epochs of the train split as
    /// the steps need.
    #[arg(long)]
    steps: Option<u64>,
    /// Share of the train split whose reference traces go to SFT (GRPO trains on all of it).
    /// Default: the profile's (see docs/demo.md).
    #[arg(long, value_name = "SHARE")]
    sft_share: Option<f64>,
    /// `small` (SmolLM2-135M-Instruct, the default without a GPU), `qwen0.5b`
    /// (Qwen2.5-Coder-0.5B-Instruct, the default with one; both come from the package registry),
    /// or any base model `train` takes (Hugging Face id, directory, .gguf file).
    #[arg(long, value_name = "small|qwen0.5b|MODEL")]
    model: Option<String>,
    /// Settings for `cpu` or `gpu` (default: `gpu` when PyTorch sees CUDA).
    #[arg(long, value_parser = ["cpu", "gpu"])]
    profile: Option<String>,
    /// Use only the first N train scenarios (SFT traces and GRPO). Default: all.
    #[arg(long, value_name = "N")]
    train_limit: Option<usize>,
    /// Validate on only the first N validation scenarios. Default: all with a GPU, 20 on CPU.
    #[arg(long, value_name = "N")]
    validation_limit: Option<usize>,
    /// Also score with an LLM judge in GRPO (key from the provider's environment variable).
    #[command(flatten)]
    judge: crate::args::JudgeArgs,
}

/// One stage's subcommand parsed from the flags it is shown with.
#[derive(Parser)]
struct Stage<T: clap::Args> {
    #[command(flatten)]
    args: T,
}

fn stage<T: clap::Args>((n, of): (usize, usize), name: &str, what: &str, argv: &[String]) -> Result<T> {
    eprintln!("\n[{n}/{of}] {what}\n      train-agent {name} {}", shell_words(argv));
    let parsed = Stage::<T>::try_parse_from(std::iter::once(name.to_string()).chain(argv.iter().cloned()))
        .with_context(|| format!("the demo built bad flags for `{name}` (a bug)"))?;
    Ok(parsed.args)
}

fn shell_words(argv: &[String]) -> String {
    let quote = |a: &String| if a.contains([' ', '"', '\'']) { format!("{a:?}") } else { a.clone() };
    argv.iter().map(quote).collect::<Vec<_>>().join(" ")
}

/// Settings of one profile: what fits 15 minutes of a 2-core CPU, or what shows the full effect on
/// a GPU (measured: `benches/RESULTS.md`, "The demo and CPU training speed").
struct Profile {
    model: String,
    /// The training and validation tasks (`scenarios synth` on the demo database) keep only those
    /// of these templates (`None`: all).
    templates: Option<&'static [&'static str]>,
    /// Tasks `scenarios synth` writes before that filter.
    synth_n: usize,
    /// Evaluate base, SFT and SFT+GRPO on the 88 hand-written questions, a check set from another
    /// distribution (hand-written wording, harder joins).
    check_set: bool,
    /// First N scenarios of each split (`None`: all).
    train_limit: Option<usize>,
    validation_limit: Option<usize>,
    /// The first this share of the train split gives SFT its reference traces; GRPO samples all
    /// of it. SFT on every train task saturates them (benches/RESULTS.md, "Synthesized tasks"),
    /// leaving GRPO groups without reward variance; tasks SFT never saw keep GRPO's groups
    /// informative.
    sft_share: f64,
    sft: SftConfig,
    grpo: TrainConfig,
}

/// 1,500 tasks give >= 1,000 train and >= 200 validation tasks on the demo database.
const SYNTH_N: usize = 1500;
/// The CPU profile's synthesis: the grammar spreads tasks over ~20 shapes, so the one-table
/// counts the CPU profile keeps need more of them (8,000 give 125 train and 33 validation; a
/// few seconds).
const CPU_SYNTH_N: usize = 8000;
const SYNTH_SEED: u64 = 1;
/// The CPU profile's tasks: counts over one table with at most one condition (templates
/// [`CPU_TEMPLATES`] up to difficulty [`CPU_MAX_DIFFICULTY`]; the grammar composes joins and
/// second conditions into the same templates at higher levels). After one epoch on 96 difficulty-1
/// traces SmolLM2-135M answered 5 of 18 held-out counts and none of the one-row lookups of the
/// same level (benches/RESULTS.md, "The demo and CPU training speed").
const CPU_TEMPLATES: &[&str] = &["count_rows", "count_distinct", "count_where"];
/// One table and at most one condition: a count is level 1, each condition and each join adds one.
const CPU_MAX_DIFFICULTY: u64 = 2;
/// The CPU profile's SFT share: the traces of 56 of the 125 train tasks, what one epoch on 2
/// cores affords.
const CPU_SFT_SHARE: f64 = 0.45;

fn profile(gpu: bool, model: &str, steps: Option<u64>, train_limit: Option<usize>, mut validation_limit: Option<usize>, sft_share: Option<f64>) -> Profile {
    let model = match model {
        "small" => "smollm2-135m-instruct",
        "qwen0.5b" => "qwen2.5-coder-0.5b-instruct",
        other => other,
    };
    let mut sft = SftConfig { base_model: model.into(), ..SftConfig::default() };
    let mut grpo = TrainConfig { base_model: model.into(), ..TrainConfig::default() };
    grpo.rollout.eval_every = 0;
    let (templates, default_share);
    if gpu {
        templates = None;
        // About 120 traces: enough to learn the tool-calling workflow, few enough to leave most
        // train tasks unsolved at GRPO's start. To be tuned by measurement (docs/demo.md).
        default_share = 0.1;
        // Four samples per validation task: pass@1 with an interval tight enough to see GRPO's
        // gain, at 5x the greedy validation's episodes.
        grpo.rollout.eval_rollouts = 4;
        sft.epochs = 6;
        sft.optim.lr = 2e-4;
        // 16 steps of 8 x 8 with dynamic sampling: enough steps for GRPO to move its SFT start
        // (benches/RESULTS.md, "Base → SFT → SFT + GRPO on the demo server").
        grpo.rollout.max_steps = steps.unwrap_or(16);
        grpo.rollout.scenarios_per_step = 8;
        grpo.rollout.rollouts_per_scenario = 8;
        grpo.optim.lr = 2e-5;
        // Uniform task order (the default curriculum): from the same SFT adapter it gained more
        // than the adaptive curriculum, whose easy-first epoch makes most first-round groups flat
        // (benches/RESULTS.md, "GRPO ablation"). Dynamic sampling, on by default, replaces the
        // flat groups.
    } else {
        // Counting tasks: what SmolLM2-135M learns from a few dozen traces on 2 cores, so the
        // table can show a rise in correct answers rather than only in reward.
        templates = Some(CPU_TEMPLATES);
        default_share = CPU_SFT_SHARE;
        validation_limit = validation_limit.or(Some(20));
        // Sampled validation would multiply the CPU's slowest phase; the greedy table is the
        // CPU demo's claim.
        grpo.rollout.eval_rollouts = 0;
        sft.epochs = 1;
        // Eight traces a step share one system prompt: as a prefix tree (below) a step's forward
        // runs it once, so larger steps cost fewer tokens per trace.
        sft.batch_size = 8;
        sft.optim.lr = 5e-4;
        sft.lora.r = 16;
        sft.max_seq_len = 3072;
        // A real model on a CPU: prefix trees (docs/training.md, "Packing") of up to 4,096
        // distinct tokens. In float32 a tree's activations grow with its tokens: at 8,192 a GRPO
        // step's one tree was killed for memory beside the engine on a 24 GB VM, and a step takes
        // the same time either way (benches/RESULTS.md, "The demo and CPU training speed").
        sft.trainer.packing = Packing::PrefixTree;
        grpo.trainer.packing = Packing::PrefixTree;
        sft.trainer.micro_batch_tokens = 4096;
        grpo.trainer.micro_batch_tokens = 4096;
        grpo.rollout.max_steps = steps.unwrap_or(2);
        grpo.rollout.scenarios_per_step = 3;
        grpo.rollout.rollouts_per_scenario = 4;
        // The workflow takes four turns (list, describe, query, answer) of at most ~40 tokens; one
        // spare turn, and no more, for the base model to spend.
        grpo.rollout.max_turns = 5;
        grpo.rollout.max_tokens = 96;
        grpo.rollout.tool_result_max_chars = 1500;
        grpo.rollout.concurrency = 16;
        // Replacing flat groups would multiply the CPU's slowest phase by up to
        // `max_oversample`, and two steps are no learning claim to protect.
        grpo.rollout.dynamic_sampling = false;
        grpo.optim.lr = 5e-5;
    }
    let synth_n = if gpu { SYNTH_N } else { CPU_SYNTH_N };
    Profile { model: model.into(), templates, synth_n, check_set: gpu, train_limit, validation_limit, sft_share: sft_share.unwrap_or(default_share), sft, grpo }
}

/// Epochs of `train` scenarios that `steps` steps of `per_step` scenarios need, so `--steps`
/// is what runs (one epoch would stop a 10-step run on 68 scenarios after 9).
fn epochs_for(steps: u64, per_step: usize, train: usize) -> u32 {
    let needed = steps * per_step as u64;
    u32::try_from(needed.div_ceil(train.max(1) as u64)).unwrap_or(u32::MAX).max(1)
}

pub async fn run(args: Args) -> Result<()> {
    let out = &args.out;
    let _lock = ta_eval::rundir::RunLock::acquire(out)?;
    let python = PythonEnv::ensure()?;
    let gpu = match args.profile.as_deref() {
        Some(p) => p == "gpu",
        None => python.has_cuda().await,
    };
    let model = args.model.clone().unwrap_or_else(|| if gpu { "qwen0.5b" } else { "small" }.into());
    let Profile { model, templates, synth_n, check_set, train_limit, validation_limit, sft_share, mut sft, mut grpo } =
        profile(gpu, &model, args.steps, args.train_limit, args.validation_limit, args.sft_share);
    anyhow::ensure!(
        sft_share > 0.0 && sft_share <= 1.0,
        "--sft-share {sft_share} is outside (0, 1]\nhint: e.g. 0.25 gives SFT the traces of a quarter of the train split"
    );
    args.judge.apply(&mut grpo.reward)?;
    eprintln!("demo: {model} on {}, {} GRPO steps, in {}", if gpu { "GPU" } else { "CPU" }, grpo.rollout.max_steps, out.display());

    let path = |p: PathBuf| p.display().to_string();
    let (traces, dataset, sft_dir, grpo_dir) = (out.join("traces"), out.join("dataset"), out.join("sft"), out.join("grpo"));
    let (synth_dir, check_dir) = (out.join("synth"), out.join("check"));
    let of = if check_set { 6 } else { 5 };
    let mut next = 0;
    let mut n = || {
        next += 1;
        (next, of)
    };

    // 0. The training and validation tasks, synthesized from the demo database.
    let written = synth_dir.join("scenarios.jsonl");
    let stage_n = n();
    if !synth_dir.join("summary.json").exists() {
        let argv = ["--server", SERVER, "--n", &synth_n.to_string(), "--seed", &SYNTH_SEED.to_string(), "--out", &path(synth_dir.clone())].map(String::from);
        scenarios::synth::run(stage(stage_n, "scenarios synth", "tasks with checked answers, written from the demo database", &argv)?).await?;
    }
    let source = std::fs::read_to_string(&written).with_context(|| format!("cannot read {}", written.display()))?;
    let source = of_templates(&source, templates);
    let scenarios = out.join("scenarios.jsonl");
    let kept = limit_splits(&source, train_limit, validation_limit);
    std::fs::write(&scenarios, &kept)?;
    let n_train = kept.lines().filter(|l| is_train(l)).count();
    grpo.rollout.epochs = epochs_for(grpo.rollout.max_steps, grpo.rollout.scenarios_per_step, n_train);
    let sft_scenarios = out.join("sft-scenarios.jsonl");
    std::fs::write(&sft_scenarios, sft_part(&kept, sft_share))?;

    // 1. Reference traces of the SFT part of the train split: the validation split stays unseen.
    let stage_n = n();
    if !traces.join(ta_types::trace::TRACES_FILE).exists() {
        let argv = ["--server", SERVER, "--scenarios", &path(sft_scenarios.clone()), "--reference", "--split", "train", "--out", &path(traces.clone())].map(String::from);
        collect::run(stage(stage_n, "collect", "reference solutions of part of the train split, checked by ground truth", &argv)?).await?;
    }
    let stage_n = n();
    if !dataset.join("train.jsonl").exists() {
        let argv = [path(traces.clone()), "--dedupe".into(), "--no-parquet".into(), "--out".into(), path(dataset.clone())];
        curate::run(stage(stage_n, "curate", "keep the successful, distinct traces", &argv)?).await?;
    }

    // 3. SFT warm start: base models of this size make no tool call, so GRPO alone has nothing to
    // learn from (every group scores 0).
    let sft_final = sft_dir.join("final");
    let sft_done = || sft_final.join("adapter_config.json").exists();
    let stage_n = n();
    if !sft_done() {
        sft.dataset = path(dataset.clone());
        let config = out.join("sft.toml");
        std::fs::write(&config, sft.to_toml())?;
        let mut argv = vec!["--config".into(), path(config), "--out".into(), path(sft_dir.clone())];
        if last_complete_step(&sft_dir) > 0 {
            argv.push("--resume".into());
        }
        sft::run(stage(stage_n, "sft", "supervised fine-tuning on the traces (LoRA)", &argv)?).await?;
        if !sft_done() {
            return interrupted();
        }
    }

    // 4. GRPO from the SFT adapter on the whole train split; its validation covers the base, the
    // SFT adapter and the result.
    let stage_n = n();
    if !finished(&grpo_dir) {
        grpo.init_adapter = Some(path(std::path::absolute(&sft_final)?));
        let config = out.join("grpo.toml");
        std::fs::write(&config, grpo.to_toml())?;
        let mut argv = vec![
            "--server".into(),
            SERVER.into(),
            "--scenarios".into(),
            path(scenarios.clone()),
            "--config".into(),
            path(config),
            "--out".into(),
            path(grpo_dir.clone()),
        ];
        if grpo_dir.join("config.toml").exists() {
            argv.push("--resume".into());
        }
        if !gpu {
            // Short contexts keep the CPU's prompt processing (the bulk of its time) small.
            argv.extend(["--max-model-len".into(), "4096".into()]);
        }
        let finished_as = train::run(stage(stage_n, "train", "GRPO from the SFT adapter, validating base, SFT and the result", &argv)?).await?;
        if !matches!(finished_as, ta_train::run::Finished::Done { .. }) {
            return interrupted();
        }
    }

    // 5. The hand-written questions, which training never saw, as a check set.
    if check_set && !check_dir.join("eval.json").exists() {
        let check = out.join("check-scenarios.jsonl");
        std::fs::write(&check, SCENARIOS)?;
        // No step trained (every group flat): GRPO's result is the SFT adapter itself.
        let trained = if grpo_dir.join("final").exists() { grpo_dir.join("final") } else { sft_final.clone() };
        let argv = [
            "--server".into(),
            SERVER.into(),
            "--scenarios".into(),
            path(check),
            "--split".into(),
            "all".into(),
            "--model".into(),
            path(std::path::absolute(&trained)?),
            "--baseline".into(),
            path(std::path::absolute(&sft_final)?),
            "--compare-base".into(),
            "--max-turns".into(),
            grpo.rollout.max_turns.to_string(),
            "--max-tokens".into(),
            grpo.rollout.max_tokens.to_string(),
            "--out".into(),
            path(check_dir.clone()),
        ];
        eval::run(stage(n(), "eval", "the 88 hand-written questions as a check set: base, SFT, SFT+GRPO", &argv)?).await?;
    }
    print_tables(&grpo_dir, check_set.then_some(check_dir.as_path()))
}

/// The scenarios of `text` (JSON lines) whose `template` is one of `templates`, up to
/// [`CPU_MAX_DIFFICULTY`] (all when `None`).
fn of_templates(text: &str, templates: Option<&[&str]>) -> String {
    let Some(templates) = templates else { return text.to_string() };
    let kept = |l: &&str| {
        serde_json::from_str::<serde_json::Value>(l)
            .is_ok_and(|v| v["template"].as_str().is_some_and(|t| templates.contains(&t)) && v["difficulty"].as_u64().is_some_and(|d| d <= CPU_MAX_DIFFICULTY))
    };
    text.lines().filter(kept).map(|l| format!("{l}\n")).collect()
}

fn is_train(line: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(line).is_ok_and(|v| v["split"] != "validation")
}

/// The scenarios of `text` (JSON lines), keeping the first `train` train and `validation`
/// validation ones.
fn limit_splits(text: &str, train: Option<usize>, validation: Option<usize>) -> String {
    let (mut n_train, mut n_val) = (0, 0);
    let mut out = String::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let (seen, limit) = if is_train(line) { (&mut n_train, train) } else { (&mut n_val, validation) };
        *seen += 1;
        if limit.is_none_or(|l| *seen <= l) {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The first `share` of the train scenarios of `text` (at least one), for SFT.
fn sft_part(text: &str, share: f64) -> String {
    let train: Vec<&str> = text.lines().filter(|l| is_train(l)).collect();
    let n = ((share * train.len() as f64).round() as usize).clamp(1.min(train.len()), train.len());
    train[..n].iter().map(|l| format!("{l}\n")).collect()
}

/// Whether the GRPO run in `dir` has finished: its last completed step has been validated (the
/// final validation; the demo validates nowhere in between).
fn finished(dir: &Path) -> bool {
    let Ok(run) = RunDir::open(dir) else { return false };
    let last = last_complete_step(dir);
    last > 0 && run.validation_rows().iter().any(|r| r["step"] == last)
}

fn interrupted() -> Result<()> {
    eprintln!("\ndemo interrupted: every finished stage and step is kept; run the same command again to continue");
    Ok(())
}

/// The base / SFT / SFT+GRPO tables: the GRPO run's validations (greedy, and sampled when it
/// sampled), each with the paired test of SFT+GRPO against SFT, and the check set's evaluation.
fn print_tables(grpo_dir: &Path, check_dir: Option<&Path>) -> Result<()> {
    let labels = ["base", "SFT", "SFT+GRPO"];
    let run = RunDir::open(grpo_dir)?;
    let evaluated = run.evaluated()?;
    // Without a baseline (validate_base off) the columns start at the SFT adapter.
    let shown = &labels[labels.len() - evaluated.len().min(labels.len())..];
    println!("\nvalidation split, one greedy episode per task:");
    print_models(shown, &evaluated);
    let sampled = run.evaluated_sampled()?;
    if let [(_, first), ..] = sampled.as_slice() {
        let k = first.len() / first.iter().map(|t| &t.scenario_id).collect::<std::collections::HashSet<_>>().len().max(1);
        println!("\nvalidation split, {k} episodes per task at the rollout temperature:");
        print_models(&labels[1..], &sampled);
    }
    if let Some(dir) = check_dir {
        let check = RunDir::open(dir)?;
        println!("\nthe 88 hand-written questions (a check set training never saw), one greedy episode each:");
        print_models(&labels, &check.evaluated()?);
    }
    let report = ta_eval::write_report(grpo_dir)?;
    println!("\nreport: {}", report.display());
    Ok(())
}

/// The metrics table of `evaluated` under `labels`, and the paired test of the last two.
fn print_models(labels: &[&str], evaluated: &[(String, Vec<ta_types::Trajectory>)]) {
    let metrics: Vec<Metrics> = evaluated.iter().map(|(_, ts)| Metrics::of(ts)).collect();
    let columns: Vec<(&str, &Metrics)> = labels.iter().copied().zip(&metrics).collect();
    println!("{}", metrics_table(&columns));
    if let (Some((_, _, Comparison { paired: Some(p), .. })), [.., a, b]) = (RunDir::comparison(evaluated), labels) {
        println!("{}", p.line(a, b));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn splits(text: &str) -> (usize, usize) {
        let vals: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let n_val = vals.iter().filter(|v| v["split"] == "validation").count();
        (vals.len() - n_val, n_val)
    }

    #[test]
    fn limits_keep_the_first_scenarios_of_each_split() {
        assert_eq!(splits(&limit_splits(SCENARIOS, None, None)), (68, 20));
        let some = limit_splits(SCENARIOS, Some(3), Some(2));
        assert_eq!(splits(&some), (3, 2));
        let first = SCENARIOS.lines().next().unwrap();
        assert!(some.starts_with(first), "the order is kept");
        assert_eq!(splits(&limit_splits(SCENARIOS, Some(100), Some(0))), (68, 0));
    }

    #[test]
    fn sft_gets_the_first_share_of_the_train_split_only() {
        let all = limit_splits(SCENARIOS, None, None);
        assert_eq!(splits(&sft_part(&all, 1.0)), (68, 0), "no validation task reaches SFT");
        let quarter = sft_part(&all, 0.25);
        assert_eq!(splits(&quarter), (17, 0));
        assert!(quarter.starts_with(SCENARIOS.lines().next().unwrap()));
        assert_eq!(splits(&sft_part(&all, 0.001)), (1, 0), "at least one trace");
        assert_eq!(sft_part("", 0.5), "");
    }

    #[test]
    fn the_template_filter_keeps_those_tasks_in_order() {
        let text = "{\"id\":\"a\",\"template\":\"count_rows\",\"difficulty\":1}\n{\"id\":\"b\",\"template\":\"lookup\",\"difficulty\":1}\n\
                    {\"id\":\"c\",\"template\":\"count_where\",\"difficulty\":2}\n{\"id\":\"e\",\"template\":\"count_where\",\"difficulty\":3}\n{\"id\":\"d\"}\n";
        assert_eq!(
            of_templates(text, Some(CPU_TEMPLATES)),
            "{\"id\":\"a\",\"template\":\"count_rows\",\"difficulty\":1}\n{\"id\":\"c\",\"template\":\"count_where\",\"difficulty\":2}\n"
        );
        assert_eq!(of_templates(text, None), text);
    }

    #[test]
    fn steps_set_the_epochs() {
        // The GPU profile on the 68 hand-written train questions: 10 steps of 8 need 2 epochs
        // (one epoch stopped the run after 9 steps).
        assert_eq!(epochs_for(10, 8, 68), 2);
        assert_eq!(epochs_for(2, 3, 32), 1);
        assert_eq!(epochs_for(30, 8, 1200), 1);
        assert_eq!(epochs_for(0, 8, 10), 1);
        assert_eq!(epochs_for(5, 8, 0), 40, "no train scenarios: train reports that itself");
    }

    #[test]
    fn profiles_pick_the_model_and_size_the_work() {
        let cpu = profile(false, "small", None, None, None, None);
        assert_eq!(cpu.model, "smollm2-135m-instruct");
        assert_eq!((cpu.grpo.rollout.max_steps, cpu.sft.epochs), (2, 1));
        assert_eq!((cpu.train_limit, cpu.validation_limit), (None, Some(20)));
        assert_eq!(cpu.templates, Some(CPU_TEMPLATES), "the CPU demo keeps the counting tasks");
        assert!(!cpu.check_set, "no check set on CPU: it would double the demo's time");
        assert_eq!((cpu.sft.trainer.packing, cpu.grpo.trainer.packing), (Packing::PrefixTree, Packing::PrefixTree));
        assert_eq!((cpu.sft_share, cpu.grpo.rollout.eval_rollouts), (CPU_SFT_SHARE, 0));
        assert!(!cpu.grpo.rollout.dynamic_sampling, "the CPU demo does not oversample its slowest phase");
        assert_eq!(profile(false, "small", None, Some(6), Some(2), None).validation_limit, Some(2), "--validation-limit wins");
        let gpu = profile(true, "qwen0.5b", Some(3), None, None, None);
        assert_eq!(gpu.model, "qwen2.5-coder-0.5b-instruct");
        assert_eq!(gpu.grpo.rollout.max_steps, 3, "--steps wins");
        assert_eq!((gpu.train_limit, gpu.validation_limit), (None, None), "all scenarios on a GPU");
        assert_eq!(gpu.templates, None, "the GPU demo trains on all synthesized tasks");
        assert!(gpu.check_set);
        assert_eq!(gpu.grpo.trainer.packing, Packing::Rows, "batched rows on a GPU");
        assert!(gpu.sft_share < 0.5, "SFT on a part of the train split: {}", gpu.sft_share);
        assert!(gpu.grpo.rollout.eval_rollouts >= 2, "sampled validation gives pass@1 with an interval");
        assert!(gpu.grpo.rollout.dynamic_sampling, "from an SFT start most first-round groups are flat");
        assert_eq!(profile(true, "qwen0.5b", None, None, None, Some(0.5)).sft_share, 0.5, "--sft-share wins");
        assert_eq!(profile(true, "/models/x.gguf", None, None, None, None).grpo.base_model, "/models/x.gguf");
        for p in [cpu, gpu] {
            assert_eq!(p.sft.base_model, p.grpo.base_model);
            assert_eq!(p.grpo.rollout.eval_every, 0, "validation only before and after: it is the table");
        }
    }
}
