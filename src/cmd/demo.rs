//! `train-agent demo`: the whole product on the bundled demo server, from a fresh machine: the
//! base model's baseline, an SFT warm start on reference traces of the train split, GRPO from that
//! adapter, and the base / SFT / SFT+GRPO table with the report.
//!
//! Each stage is one of the ordinary subcommands, run with the flags it prints (so every stage
//! can be repeated or tuned by hand), in its own directory under `--output-dir`. A stage whose
//! output is complete is skipped, so running the same command again after a Ctrl-C or a crash
//! continues where it stopped.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Parser;
use ta_eval::metrics::{Metrics, metrics_table};
use ta_eval::rundir::RunDir;
use ta_python::PythonEnv;
use ta_sft::sft::SftConfig;
use ta_train::TrainConfig;
use ta_train::run::last_complete_step;

use crate::cmd::{collect, curate, sft, train};

/// The demo's scenarios, embedded so the command works outside a checkout.
const SCENARIOS: &str = include_str!("../../scenarios/company.jsonl");
const SERVER: &str = "train-agent demo-server";

#[derive(clap::Args)]
pub struct Args {
    /// Where every stage writes (traces/, dataset/, sft/, grpo/); running again continues.
    #[arg(long, value_name = "DIR", default_value = "runs/demo")]
    output_dir: PathBuf,
    /// GRPO steps (default: 10 with a GPU, 2 on CPU).
    #[arg(long)]
    steps: Option<u64>,
    /// `small` (SmolLM2-135M-Instruct, the default without a GPU), `qwen0.5b`
    /// (Qwen2.5-Coder-0.5B-Instruct, the default with one; both come from the package registry),
    /// or any base model `train` takes (Hugging Face id, directory, .gguf file).
    #[arg(long, value_name = "small|qwen0.5b|MODEL")]
    model: Option<String>,
    /// Settings for `cpu` or `gpu` (default: `gpu` when PyTorch sees CUDA).
    #[arg(long, value_parser = ["cpu", "gpu"])]
    profile: Option<String>,
    /// Use only the first N train scenarios (SFT traces and GRPO). Default: all 68 with a GPU, 32
    /// on CPU.
    #[arg(long, value_name = "N")]
    train_limit: Option<usize>,
    /// Validate on only the first N validation scenarios. Default: all 20 with a GPU, 10 on CPU.
    #[arg(long, value_name = "N")]
    validation_limit: Option<usize>,
    /// Also score with an LLM judge in GRPO (key from the provider's environment variable).
    #[command(flatten)]
    judge: crate::cmd::score::JudgeArgs,
}

/// One stage's subcommand parsed from the flags it is shown with.
#[derive(Parser)]
struct Stage<T: clap::Args> {
    #[command(flatten)]
    args: T,
}

fn stage<T: clap::Args>(n: usize, name: &str, what: &str, argv: &[String]) -> Result<T> {
    eprintln!("\n[{n}/4] {what}\n      train-agent {name} {}", shell_words(argv));
    let parsed = Stage::<T>::try_parse_from(std::iter::once(name.to_string()).chain(argv.iter().cloned()))
        .with_context(|| format!("the demo built bad flags for `{name}` (a bug)"))?;
    Ok(parsed.args)
}

fn shell_words(argv: &[String]) -> String {
    let quote = |a: &String| if a.contains([' ', '"', '\'']) { format!("{a:?}") } else { a.clone() };
    argv.iter().map(quote).collect::<Vec<_>>().join(" ")
}

/// Settings of one profile: what fits 15 minutes of a 2-core CPU, or what shows the full effect on
/// a GPU (measured: `benches/RESULTS.md`, "The demo").
struct Profile {
    model: String,
    /// First N scenarios of each split (`None`: all).
    train_limit: Option<usize>,
    validation_limit: Option<usize>,
    sft: SftConfig,
    grpo: TrainConfig,
}

fn profile(gpu: bool, model: &str, steps: Option<u64>, train_limit: Option<usize>, validation_limit: Option<usize>) -> Profile {
    let model = match model {
        "small" => "smollm2-135m-instruct",
        "qwen0.5b" => "qwen2.5-coder-0.5b-instruct",
        other => other,
    };
    let mut sft = SftConfig { base_model: model.into(), ..SftConfig::default() };
    let mut grpo = TrainConfig { base_model: model.into(), ..TrainConfig::default() };
    grpo.rollout.eval_every = 0;
    let (mut train_limit, mut validation_limit) = (train_limit, validation_limit);
    if gpu {
        sft.epochs = 6;
        sft.optim.lr = 2e-4;
        grpo.rollout.max_steps = steps.unwrap_or(10);
        grpo.rollout.scenarios_per_step = 8;
        grpo.rollout.rollouts_per_scenario = 8;
        grpo.optim.lr = 2e-5;
    } else {
        // Measured on a 2-core CPU (benches/RESULTS.md): the SFT'd model learns the tool-calling
        // workflow from 32 traces in one epoch; a GRPO step of 3 x 4 episodes takes ~2.5 minutes.
        sft.epochs = 1;
        sft.batch_size = 4;
        sft.optim.lr = 5e-4;
        sft.lora.r = 16;
        sft.max_seq_len = 3072;
        train_limit = train_limit.or(Some(32));
        validation_limit = validation_limit.or(Some(10));
        // Half the default: a micro-batch's activations stay near 6 GiB on a small CPU machine.
        sft.trainer.micro_batch_tokens = 4096;
        grpo.trainer.micro_batch_tokens = 4096;
        grpo.rollout.max_steps = steps.unwrap_or(2);
        grpo.rollout.scenarios_per_step = 3;
        grpo.rollout.rollouts_per_scenario = 4;
        grpo.rollout.max_turns = 6;
        grpo.rollout.max_tokens = 128;
        grpo.rollout.tool_result_max_chars = 1500;
        grpo.rollout.concurrency = 16;
        grpo.optim.lr = 5e-5;
    }
    Profile { model: model.into(), train_limit, validation_limit, sft, grpo }
}

pub async fn run(args: Args) -> Result<()> {
    let out = &args.output_dir;
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let python = PythonEnv::ensure()?;
    let gpu = match args.profile.as_deref() {
        Some(p) => p == "gpu",
        None => python.has_cuda().await,
    };
    let model = args.model.clone().unwrap_or_else(|| if gpu { "qwen0.5b" } else { "small" }.into());
    let Profile { model, train_limit, validation_limit, mut sft, mut grpo } = profile(gpu, &model, args.steps, args.train_limit, args.validation_limit);
    args.judge.apply(&mut grpo.reward)?;
    eprintln!("demo: {model} on {}, {} GRPO steps, in {}", if gpu { "GPU" } else { "CPU" }, grpo.rollout.max_steps, out.display());

    let scenarios = out.join("scenarios.jsonl");
    std::fs::write(&scenarios, demo_scenarios(train_limit, validation_limit))?;
    let path = |p: PathBuf| p.display().to_string();
    let (traces, dataset, sft_dir, grpo_dir) = (out.join("traces"), out.join("dataset"), out.join("sft"), out.join("grpo"));

    // 1. Reference traces of the train split: the validation split stays unseen.
    if !traces.join(ta_sft::trace::TRACES_FILE).exists() {
        let argv = ["--server", SERVER, "--scenarios", &path(scenarios.clone()), "--reference", "--split", "train", "--out", &path(traces.clone())].map(String::from);
        collect::run(stage(1, "collect", "reference solutions of the train split, checked by ground truth", &argv)?).await?;
    }
    if !dataset.join("train.jsonl").exists() {
        let argv = [path(traces.clone()), "--dedupe".into(), "--no-parquet".into(), "--out".into(), path(dataset.clone())];
        curate::run(stage(2, "curate", "keep the successful, distinct traces", &argv)?).await?;
    }

    // 3. SFT warm start: base models of this size make no tool call, so GRPO alone has nothing to
    // learn from (every group scores 0).
    let sft_final = sft_dir.join("final");
    let sft_done = || sft_final.join("adapter_config.json").exists();
    if !sft_done() {
        sft.dataset = path(dataset.clone());
        let config = out.join("sft.toml");
        std::fs::write(&config, sft.to_toml())?;
        let mut argv = vec!["--config".into(), path(config), "--output-dir".into(), path(sft_dir.clone())];
        if last_complete_step(&sft_dir) > 0 {
            argv.push("--resume".into());
        }
        sft::run(stage(3, "sft", "supervised fine-tuning on the traces (LoRA)", &argv)?).await?;
        if !sft_done() {
            return interrupted();
        }
    }

    // 4. GRPO from the SFT adapter; its validation covers the base, the SFT adapter and the result.
    if !finished(&grpo_dir) {
        grpo.init_adapter = Some(path(std::path::absolute(&sft_final)?));
        let config = out.join("grpo.toml");
        std::fs::write(&config, grpo.to_toml())?;
        let mut argv = vec![
            "--server".into(),
            SERVER.into(),
            "--dataset".into(),
            path(scenarios.clone()),
            "--config".into(),
            path(config),
            "--output-dir".into(),
            path(grpo_dir.clone()),
        ];
        if grpo_dir.join("config.toml").exists() {
            argv.push("--resume".into());
        }
        if !gpu {
            // Short contexts keep the CPU's prompt processing (the bulk of its time) small.
            argv.extend(["--max-model-len".into(), "4096".into()]);
        }
        let finished_as = train::run(stage(4, "train", "GRPO from the SFT adapter, validating base, SFT and the result", &argv)?).await?;
        if !matches!(finished_as, ta_train::run::Finished::Done { .. }) {
            return interrupted();
        }
    }
    print_table(&grpo_dir)
}

/// The embedded scenarios, keeping the first `train` train and `validation` validation ones.
fn demo_scenarios(train: Option<usize>, validation: Option<usize>) -> String {
    let (mut n_train, mut n_val) = (0, 0);
    let mut out = String::new();
    for line in SCENARIOS.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line).expect("the embedded scenarios are JSON lines");
        let (seen, limit) = if v["split"] == "validation" { (&mut n_val, validation) } else { (&mut n_train, train) };
        *seen += 1;
        if limit.is_none_or(|l| *seen <= l) {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// Whether the GRPO run in `dir` has finished: its last completed step has been validated (the
/// final validation; the demo validates nowhere in between). The curriculum may end before
/// `--steps` (one epoch of the train split), so the step count itself is not the test.
fn finished(dir: &Path) -> bool {
    let Ok(run) = RunDir::open(dir) else { return false };
    let last = last_complete_step(dir);
    last > 0 && run.validation_rows().iter().any(|r| r["step"] == last)
}

fn interrupted() -> Result<()> {
    eprintln!("\ndemo interrupted: every finished stage and step is kept; run the same command again to continue");
    Ok(())
}

/// The base / SFT / SFT+GRPO table from the GRPO run's validations.
fn print_table(grpo_dir: &Path) -> Result<()> {
    let run = RunDir::open(grpo_dir)?;
    let evaluated = run.evaluated()?;
    let labels = ["base", "SFT", "SFT+GRPO"];
    let metrics: Vec<Metrics> = evaluated.iter().map(|(_, ts)| Metrics::of(ts)).collect();
    let columns: Vec<(&str, &Metrics)> = labels.iter().copied().zip(&metrics).collect();
    println!("\nvalidation split, one greedy episode per scenario:\n{}", metrics_table(&columns));
    let report = ta_eval::write_report(grpo_dir)?;
    println!("\nreport: {}", report.display());
    Ok(())
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
        assert_eq!(splits(&demo_scenarios(None, None)), (68, 20));
        let some = demo_scenarios(Some(3), Some(2));
        assert_eq!(splits(&some), (3, 2));
        let first = SCENARIOS.lines().next().unwrap();
        assert!(some.starts_with(first), "the order is kept");
        assert_eq!(splits(&demo_scenarios(Some(100), Some(0))), (68, 0));
    }

    #[test]
    fn profiles_pick_the_model_and_size_the_work() {
        let cpu = profile(false, "small", None, None, None);
        assert_eq!(cpu.model, "smollm2-135m-instruct");
        assert_eq!((cpu.grpo.rollout.max_steps, cpu.sft.epochs), (2, 1));
        assert_eq!((cpu.train_limit, cpu.validation_limit), (Some(32), Some(10)));
        assert_eq!(profile(false, "small", None, Some(6), Some(2)).validation_limit, Some(2), "--validation-limit wins");
        let gpu = profile(true, "qwen0.5b", Some(3), None, None);
        assert_eq!(gpu.model, "qwen2.5-coder-0.5b-instruct");
        assert_eq!(gpu.grpo.rollout.max_steps, 3, "--steps wins");
        assert_eq!((gpu.train_limit, gpu.validation_limit), (None, None), "all scenarios on a GPU");
        assert_eq!(profile(true, "/models/x.gguf", None, None, None).grpo.base_model, "/models/x.gguf");
        for p in [cpu, gpu] {
            assert_eq!(p.sft.base_model, p.grpo.base_model);
            assert_eq!(p.grpo.rollout.eval_every, 0, "validation only before and after: it is the table");
        }
    }
}
