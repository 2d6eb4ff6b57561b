//! `train-agent sft`: supervised fine-tuning of a LoRA adapter on a curated dataset of traces
//! (loss on assistant tokens only), the warm start for `train --init-adapter DIR/final`.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use ta_python::PythonEnv;
use ta_sft::sft::{SftConfig, SftFinished};
use ta_trainer::checkpoint::last_complete_step;

use crate::interrupted::Interrupted;
use crate::stdout::outln;

#[derive(clap::Args)]
pub struct Args {
    /// The dataset: a directory written by `train-agent curate` (train.jsonl or train.parquet),
    /// or a JSONL/Parquet file of {"messages": [...], "tools": [...]} rows.
    #[arg(long, value_name = "DIR|FILE")]
    dataset: Option<String>,
    /// Base model: Hugging Face id, directory, .gguf file or packaged model name.
    #[arg(long, value_name = "MODEL", value_parser = crate::args::model_spec)]
    base_model: Option<String>,
    /// Run directory (config.toml, data/, metrics.jsonl, checkpoints/, final/, logs/).
    #[arg(long, value_name = "DIR", alias = "output-dir")]
    out: PathBuf,
    /// Every setting as TOML (see docs/sft.md); flags override it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Continue an interrupted run in --out from its last checkpoint (its config.toml wins).
    #[arg(long)]
    resume: bool,
    /// Passes over the dataset (overrides the config's `epochs`).
    #[arg(long)]
    epochs: Option<u32>,
    /// Conversations per optimizer step.
    #[arg(long)]
    batch_size: Option<usize>,
    /// Learning rate (overrides `[optim] lr`).
    #[arg(long)]
    lr: Option<f64>,
    #[arg(long, help = crate::args::one_of::<ta_trainer::Schedule>())]
    schedule: Option<ta_trainer::Schedule>,
    /// Steps of linear warmup (overrides `[optim] warmup_steps`).
    #[arg(long)]
    warmup_steps: Option<u64>,
    /// LoRA rank (overrides `[lora] r`).
    #[arg(long)]
    lora_rank: Option<u32>,
    /// LoRA alpha (overrides `[lora] alpha`).
    #[arg(long)]
    lora_alpha: Option<f64>,
    /// Share of scenarios held out for the eval loss.
    #[arg(long)]
    eval_fraction: Option<f64>,
    /// Evaluate every N steps (0: end of each epoch).
    #[arg(long)]
    eval_every: Option<u64>,
    /// Checkpoint every N steps (0: end of each epoch).
    #[arg(long)]
    save_every: Option<u64>,
    /// Longest conversation in tokens; longer ones are left out.
    #[arg(long)]
    max_seq_len: Option<usize>,
    /// Assistant turns that get loss: all, or last (for unrolled datasets).
    #[arg(long)]
    train_on: Option<String>,
    /// Padded tokens per forward/backward.
    #[arg(long)]
    micro_batch_tokens: Option<u64>,
    /// GPUs for the trainer (DDP when more than one).
    #[arg(long)]
    num_gpus: Option<u32>,
    /// Seed of the data order and the trainer (overrides `seed`).
    #[arg(long)]
    seed: Option<u64>,
}

fn resolve_config(args: &Args) -> Result<SftConfig> {
    let saved = args.out.join("config.toml");
    if args.resume {
        return SftConfig::load(&saved).with_context(|| format!("--resume needs {} from the earlier run", saved.display()));
    }
    if saved.exists() && last_complete_step(&args.out) > 0 {
        bail!("{} already holds an SFT run\nhint: add --resume to continue it, or choose a new --out", args.out.display());
    }
    let mut c = match &args.config {
        Some(p) => SftConfig::load(p)?,
        None => SftConfig::default(),
    };
    macro_rules! set {
        ($($flag:ident => $($field:ident).+;)*) => { $( if let Some(v) = args.$flag.clone() { c.$($field).+ = v; } )* };
    }
    set! {
        dataset => dataset;
        base_model => base_model;
        epochs => epochs;
        batch_size => batch_size;
        lr => optim.lr;
        schedule => optim.schedule;
        warmup_steps => optim.warmup_steps;
        lora_rank => lora.r;
        lora_alpha => lora.alpha;
        eval_fraction => eval_fraction;
        eval_every => eval_every;
        save_every => save_every;
        max_seq_len => max_seq_len;
        train_on => train_on;
        micro_batch_tokens => trainer.micro_batch_tokens;
        num_gpus => trainer.num_gpus;
        seed => seed;
    }
    // A relative dataset path must survive `--resume` from another directory.
    if let Ok(abs) = std::path::absolute(&c.dataset)
        && abs.exists()
    {
        c.dataset = abs.display().to_string();
    }
    c.validate()?;
    anyhow::ensure!(
        std::path::Path::new(&c.dataset).exists(),
        "no dataset at {}\nhint: pass --dataset DIR (the --out of `train-agent curate`) or a JSONL/Parquet file of traces",
        c.dataset
    );
    // A config file's base model, checked as the flag is.
    crate::args::model_spec(&c.base_model).map_err(|e| anyhow::anyhow!("base_model: {e}"))?;
    Ok(c)
}

pub async fn run(args: Args) -> Result<()> {
    let _lock = ta_eval::rundir::RunLock::acquire(&args.out)?;
    let cfg = resolve_config(&args)?;
    let out = &args.out;
    std::fs::create_dir_all(out.join("logs")).with_context(|| format!("cannot create {}", out.display()))?;
    std::fs::write(out.join("config.toml"), cfg.to_toml())?;
    let python = PythonEnv::ensure()?;
    let bar = ProgressBar::new(0);
    bar.set_style(ProgressStyle::with_template("{prefix:>10} [{bar:30}] {pos}/{len} steps {msg} ({elapsed}, eta {eta})").expect("template").progress_chars("=> "));
    bar.set_prefix("sft");
    let shutdown = crate::interrupted::ctrl_c();
    let finished = ta_sft::sft::run(&cfg, out, &python, &[], &bar, shutdown).await;
    bar.finish();
    match finished? {
        SftFinished::Interrupted { checkpointed_step } => {
            return Err(Interrupted::at_checkpoint(&format!("the last checkpoint is step {checkpointed_step}")).into());
        }
        SftFinished::Done { steps, final_dir, eval_loss_before, eval_loss_after } => {
            outln!("trained {steps} steps; adapter: {}", final_dir.display())?;
            if let (Some(b), Some(a)) = (eval_loss_before, eval_loss_after) {
                outln!("eval loss {b:.4} -> {a:.4}")?;
            }
            outln!("metrics: {}", out.join("metrics.jsonl").display())?;
            match ta_eval::write_report(out) {
                Ok(path) => outln!("report: {}", path.display())?,
                Err(e) => eprintln!("warning: no report: {e}"),
            }
            outln!("next: train-agent train --init-adapter {} ...", final_dir.display())?;
        }
    }
    Ok(())
}
