//! Supervised fine-tuning runs. The Python side tokenises the dataset through the engine's own
//! prompt rendering and builds the loss mask from the chat template (`train_agent.trainer.sft_data`);
//! this module owns the decisions: held-out share (by scenario, so no conversation of an eval
//! scenario is trained on), epochs, length-grouped batches, when to evaluate and checkpoint, and
//! resume. Each optimizer step is one step file in the trainer's mailbox (the GRPO trainer with
//! `loss.kind = "sft"`), so one process, DDP and multi-node work as they do for GRPO.
//!
//! Run directory: `config.toml`, `data/tokens.jsonl` + `data/summary.json` + `data/split.json`
//! (which conversations were trained on and which held out), `metrics.jsonl`
//! (`train_loss`, `eval_loss`, `lr`, `tokens_per_s` per step; step 0 holds the eval loss before
//! training; `metrics.csv` beside it), `checkpoints/step-N/` (adapter, optimizer state, `state.json` once complete),
//! `final/` (the PEFT adapter), `logs/`.

use std::future::Future;
use std::io::BufRead;
use std::path::{Path, PathBuf};

use indicatif::ProgressBar;
use rand::SeedableRng;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use ta_python::{PythonEnv, Trainer};
use ta_trainer::Sample;
use ta_trainer::checkpoint::{checkpoint_dir, copy_dir, last_complete_step, write_state};
use ta_trainer::config::RunSpec;
use ta_trainer::{EvalRequest, LoraSettings, LossConfig, OptimSettings, StepFile, StepReport, TrainerConfig, TrainerSettings, metrics};

use crate::SftError;

/// Every setting of an SFT run (the run's `config.toml`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct SftConfig {
    /// Base model: Hugging Face id, directory, .gguf file or packaged model name.
    pub base_model: String,
    /// A curated dataset: a directory holding train.jsonl (or train.parquet), or such a file.
    pub dataset: String,
    pub seed: u64,
    pub epochs: u32,
    /// Conversations per optimizer step.
    pub batch_size: usize,
    /// Share of scenarios whose conversations are held out for the eval loss.
    pub eval_fraction: f64,
    /// Evaluate every this many steps (0: at the end of each epoch only).
    pub eval_every: u64,
    /// Checkpoint every this many steps (0: at the end of each epoch only).
    pub save_every: u64,
    /// Conversations longer than this many tokens are left out (and counted).
    pub max_seq_len: usize,
    /// Which assistant turns get loss: `all`, or `last` (for unrolled datasets).
    pub train_on: String,
    pub lora: LoraSettings,
    pub optim: OptimSettings,
    pub trainer: TrainerSettings,
}

impl Default for SftConfig {
    /// SFT's adapter and optimizer (`ta_trainer::settings`).
    fn default() -> Self {
        SftConfig {
            base_model: String::new(),
            dataset: String::new(),
            seed: 0,
            epochs: 3,
            batch_size: 8,
            eval_fraction: 0.1,
            eval_every: 0,
            save_every: 0,
            // Room for a conversation that shows two whole tool results (`AgentConfig`'s
            // `tool_result_max_chars`) beside the tools' schemas.
            max_seq_len: 8192,
            train_on: "all".into(),
            lora: LoraSettings::sft(),
            optim: OptimSettings::sft(),
            trainer: TrainerSettings::default(),
        }
    }
}

impl SftConfig {
    pub fn load(path: &Path) -> Result<SftConfig, SftError> {
        let text = std::fs::read_to_string(path).map_err(|e| SftError::io(path, e))?;
        toml::from_str(&text).map_err(|e| SftError::Data(format!("{}: {e}\nhint: see docs/sft.md for every key", path.display())))
    }

    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).expect("config serialises")
    }

    pub fn validate(&self) -> Result<(), SftError> {
        let bad = |m: String| Err(SftError::Data(m));
        if self.base_model.is_empty() {
            return bad("no base model\nhint: pass --base-model, e.g. smollm2-135m-instruct".into());
        }
        if self.dataset.is_empty() {
            return bad("no dataset\nhint: pass --dataset DIR (the --out of `train-agent curate`)".into());
        }
        if self.batch_size == 0 || self.epochs == 0 {
            return bad("batch_size and epochs must be at least 1".into());
        }
        if !(0.0..1.0).contains(&self.eval_fraction) {
            return bad(format!("eval_fraction = {} must be in [0, 1)", self.eval_fraction));
        }
        if !["all", "last"].contains(&self.train_on.as_str()) {
            return bad(format!("train_on = {:?} must be \"all\" or \"last\"", self.train_on));
        }
        Ok(ta_trainer::settings::validate(&self.lora, &self.optim, &self.trainer)?)
    }
}

/// One tokenised conversation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TokenRow {
    pub id: String,
    #[serde(default)]
    pub scenario_id: String,
    pub input_ids: Vec<u32>,
    pub loss_mask: Vec<u8>,
}

/// Tokenises `cfg.dataset` into `out/data/tokens.jsonl` (once: reused on resume) and reads it.
/// Returns the rows and the tokeniser's summary (rows left out and why, token counts).
pub async fn prepare_data(cfg: &SftConfig, out: &Path, python: &PythonEnv) -> Result<(Vec<TokenRow>, Value), SftError> {
    let dir = out.join("data");
    let tokens = dir.join("tokens.jsonl");
    let summary_path = dir.join("summary.json");
    if !summary_path.exists() {
        std::fs::create_dir_all(&dir).map_err(|e| SftError::io(&dir, e))?;
        let output = python
            .module_command(ta_python::SFT_DATA_MODULE)
            .args(["tokenize", "--model", &cfg.base_model, "--dataset", &cfg.dataset, "--train-on", &cfg.train_on])
            .arg("--max-len")
            .arg(cfg.max_seq_len.to_string())
            .arg("--out")
            .arg(&tokens)
            .arg("--summary")
            .arg(&summary_path)
            .output()
            .await
            .map_err(|e| SftError::io(&tokens, e))?;
        if !output.status.success() {
            return Err(SftError::Python(format!("tokenising {} failed:\n{}", cfg.dataset, String::from_utf8_lossy(&output.stderr).trim())));
        }
    }
    let summary: Value = serde_json::from_slice(&std::fs::read(&summary_path).map_err(|e| SftError::io(&summary_path, e))?).unwrap_or_default();
    let file = std::fs::File::open(&tokens).map_err(|e| SftError::io(&tokens, e))?;
    let mut rows = Vec::new();
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| SftError::io(&tokens, e))?;
        rows.push(serde_json::from_str(&line).map_err(|e| SftError::Data(format!("{}:{}: {e}", tokens.display(), i + 1)))?);
    }
    if rows.is_empty() {
        return Err(SftError::Data(format!(
            "no conversation of {} can be trained on ({summary})\nhint: check that it holds assistant turns and that --max-seq-len fits them",
            cfg.dataset
        )));
    }
    Ok((rows, summary))
}

/// Splits row indices into (train, eval): a seeded `fraction` of the scenarios (at least one when
/// there are two or more) goes to eval with all of its conversations.
pub fn split_rows(rows: &[TokenRow], fraction: f64, seed: u64) -> (Vec<usize>, Vec<usize>) {
    let mut groups: Vec<&str> = rows.iter().map(|r| if r.scenario_id.is_empty() { r.id.as_str() } else { r.scenario_id.as_str() }).collect();
    groups.sort();
    groups.dedup();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x5f7);
    groups.shuffle(&mut rng);
    let mut n_eval = (groups.len() as f64 * fraction).round() as usize;
    if n_eval == 0 && fraction > 0.0 && groups.len() >= 2 {
        n_eval = 1;
    }
    let held: std::collections::HashSet<&str> = groups[..n_eval.min(groups.len().saturating_sub(1))].iter().copied().collect();
    (0..rows.len()).partition(|&i| {
        let r = &rows[i];
        !held.contains(if r.scenario_id.is_empty() { r.id.as_str() } else { r.scenario_id.as_str() })
    })
}

/// The batches of one epoch: a seeded shuffle, then length grouping (sort each window of 16
/// batches by length, so batches hold similar lengths and pad little), then the batches shuffled.
pub fn epoch_batches(train: &[usize], lengths: &[usize], batch_size: usize, seed: u64, epoch: u32) -> Vec<Vec<usize>> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ (u64::from(epoch) << 32) ^ 0xba7c);
    let mut order = train.to_vec();
    order.shuffle(&mut rng);
    let mut batches: Vec<Vec<usize>> = Vec::new();
    for window in order.chunks(batch_size * 16) {
        let mut w = window.to_vec();
        w.sort_by_key(|&i| std::cmp::Reverse(lengths[i]));
        batches.extend(w.chunks(batch_size).map(<[usize]>::to_vec));
    }
    batches.shuffle(&mut rng);
    batches
}

/// A conversation as a trainer sample: every masked token weighs the same (advantage 1), and
/// there are no sampling logprobs (SFT has no ratio): an empty list, which the trainer reads as
/// zeros, so the step file carries no column of them.
fn sample(row: &TokenRow, group: usize) -> Sample {
    Sample { input_ids: row.input_ids.clone(), loss_mask: row.loss_mask.clone(), logprobs: Vec::new(), advantage: 1.0, group_id: group as u64 }
}

fn trainer_config(cfg: &SftConfig, out: &Path, resume_step: u64, total_steps: u64) -> TrainerConfig {
    // Without an engine beside it, the trainer takes every GPU.
    let mut trainer = cfg.trainer.clone();
    if trainer.num_gpus > 1 {
        trainer.devices = trainer.num_gpus.into();
        if trainer.strategy == "auto" {
            trainer.strategy = "ddp".into();
        }
    }
    let run = RunSpec {
        model: cfg.base_model.clone(),
        output_dir: out.to_path_buf(),
        seed: cfg.seed,
        init_adapter: None,
        total_steps,
        resume_from: (resume_step > 0).then(|| checkpoint_dir(out, resume_step)),
    };
    TrainerConfig::new(run, &cfg.lora, &cfg.optim, LossConfig::sft(), &trainer)
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum SftFinished {
    Done {
        steps: u64,
        final_dir: PathBuf,
        eval_loss_before: Option<f64>,
        eval_loss_after: Option<f64>,
    },
    /// Ctrl-C after `checkpointed_step`; running again with resume continues from there.
    Interrupted {
        checkpointed_step: u64,
    },
}

/// Runs (or resumes, from the last complete checkpoint) an SFT run in `out`.
pub async fn run(
    cfg: &SftConfig,
    out: &Path,
    python: &PythonEnv,
    trainer_env: &[(String, String)],
    progress: &ProgressBar,
    shutdown: impl Future<Output = ()>,
) -> Result<SftFinished, SftError> {
    cfg.validate()?;
    let io = |p: &Path, e| SftError::io(p, e);
    std::fs::create_dir_all(out).map_err(|e| io(out, e))?;
    let (rows, _summary) = prepare_data(cfg, out, python).await?;
    let (train, eval) = split_rows(&rows, cfg.eval_fraction, cfg.seed);
    if train.is_empty() {
        return Err(SftError::Data("every conversation was held out for eval\nhint: lower --eval-fraction or add scenarios".into()));
    }
    let ids = |idx: &[usize]| idx.iter().map(|&i| rows[i].id.clone()).collect::<Vec<_>>();
    let split_path = out.join("data").join("split.json");
    std::fs::write(&split_path, serde_json::to_vec_pretty(&json!({"train": ids(&train), "eval": ids(&eval)})).expect("json")).map_err(|e| io(&split_path, e))?;
    let lengths: Vec<usize> = rows.iter().map(|r| r.input_ids.len()).collect();
    let per_epoch = train.len().div_ceil(cfg.batch_size) as u64;
    let total = per_epoch * u64::from(cfg.epochs);
    let eval_samples: Vec<Sample> = eval.iter().map(|&i| sample(&rows[i], i)).collect();

    let resume = last_complete_step(out);
    let metrics_path = out.join("metrics.jsonl");
    metrics::truncate(&metrics_path, resume).map_err(|e| io(&metrics_path, e))?;
    let mut trainer = Trainer::start(python, out, &trainer_config(cfg, out, resume, total), resume, trainer_env)?;
    progress.set_length(total);
    progress.set_position(resume);
    let (mut before, mut after) = (None, None);
    tokio::pin!(shutdown);
    for step in resume + 1..=total {
        let epoch = ((step - 1) / per_epoch) as u32;
        let batches = epoch_batches(&train, &lengths, cfg.batch_size, cfg.seed, epoch);
        let batch = &batches[((step - 1) % per_epoch) as usize];
        let end_of_epoch = step % per_epoch == 0;
        let evaluate = !eval.is_empty() && (end_of_epoch || (cfg.eval_every > 0 && step % cfg.eval_every == 0));
        let checkpoint = end_of_epoch || (cfg.save_every > 0 && step % cfg.save_every == 0);
        let mut file = StepFile { checkpoint: Some(checkpoint), ..StepFile::new(step, batch.iter().map(|&i| sample(&rows[i], i)).collect()) };
        let eval_before = step == 1 && !eval.is_empty();
        if evaluate || eval_before {
            file.eval = Some(EvalRequest { eval_samples: eval_samples.clone(), eval_before, eval_after: evaluate });
        }
        file.write(&trainer.inbox()).map_err(|e| io(out, e))?;
        let m: StepReport = tokio::select! {
            m = trainer.wait(step) => m?,
            _ = shutdown.as_mut() => return Ok(SftFinished::Interrupted { checkpointed_step: last_complete_step(out) }),
        };
        if let Some(b) = m.eval_loss_before {
            before = Some(b);
            append_metrics(&metrics_path, &json!({"step": 0, "epoch": 0, "eval_loss": b, "eval_tokens": m.eval_tokens}))?;
        }
        let eval_loss = if evaluate { m.eval_loss } else { None };
        if eval_loss.is_some() {
            after = eval_loss;
        }
        let row = json!({
            "step": step,
            "epoch": f64::from(epoch) + ((step - 1) % per_epoch + 1) as f64 / per_epoch as f64,
            "train_loss": m.loss, "eval_loss": eval_loss, "lr": m.lr, "grad_norm": m.grad_norm,
            "tokens_per_s": m.tokens_per_s, "tokens": m.tokens, "trained_tokens": m.trained_tokens,
            "samples": m.samples, "step_s": m.step_s, "peak_memory_gb": m.peak_memory_gb,
        });
        append_metrics(&metrics_path, &row)?;
        if checkpoint {
            write_state(out, step, &json!({"step": step})).map_err(|e| io(&checkpoint_dir(out, step), e))?;
        }
        progress.set_position(step);
        progress.set_message(format!("loss {:.4}{}", m.loss.unwrap_or(f64::NAN), eval_loss.map(|e| format!("  eval {e:.4}")).unwrap_or_default()));
    }
    trainer.stop().await?;
    let final_dir = out.join("final");
    copy_dir(&checkpoint_dir(out, total).join("adapter"), &final_dir).map_err(|e| io(&final_dir, e))?;
    if before.is_none() || after.is_none() {
        // Resumed: take what earlier attempts recorded.
        let (b, a) = recorded_eval(&metrics_path);
        before = before.or(b);
        after = after.or(a);
    }
    Ok(SftFinished::Done { steps: total, final_dir, eval_loss_before: before, eval_loss_after: after })
}

fn append_metrics(path: &Path, row: &Value) -> Result<(), SftError> {
    metrics::append(path, row).map_err(|e| SftError::io(path, e))
}

/// (eval loss at step 0, last eval loss) from a metrics file.
fn recorded_eval(path: &Path) -> (Option<f64>, Option<f64>) {
    let rows: Vec<Value> = std::fs::read_to_string(path).unwrap_or_default().lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let before = rows.iter().find(|r| r["step"] == 0).and_then(|r| r["eval_loss"].as_f64());
    let after = rows.iter().rev().filter(|r| r["step"] != 0).find_map(|r| r["eval_loss"].as_f64());
    (before, after)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, scenario: &str, len: usize) -> TokenRow {
        TokenRow { id: id.into(), scenario_id: scenario.into(), input_ids: vec![1; len], loss_mask: vec![1; len] }
    }

    #[test]
    fn held_out_share_takes_whole_scenarios() {
        let rows: Vec<TokenRow> = (0..20).flat_map(|s| (0..2).map(move |k| row(&format!("s{s}#{k}"), &format!("s{s}"), 10))).collect();
        let (train, eval) = split_rows(&rows, 0.1, 3);
        assert_eq!(eval.len(), 4, "2 of 20 scenarios, 2 conversations each");
        assert_eq!(train.len() + eval.len(), rows.len());
        let eval_scenarios: std::collections::HashSet<&str> = eval.iter().map(|&i| rows[i].scenario_id.as_str()).collect();
        assert!(train.iter().all(|&i| !eval_scenarios.contains(rows[i].scenario_id.as_str())));
        assert_eq!(split_rows(&rows, 0.1, 3), (train, eval), "seeded");
        let (t, e) = split_rows(&rows[..1], 0.5, 0);
        assert_eq!((t.len(), e.len()), (1, 0), "a single scenario is never held out");
    }

    #[test]
    fn epoch_batches_cover_every_row_once_and_group_lengths() {
        let lengths: Vec<usize> = (0..50).map(|i| (i * 37) % 101).collect();
        let train: Vec<usize> = (0..50).collect();
        let batches = epoch_batches(&train, &lengths, 4, 1, 0);
        assert_eq!(batches.len(), 13);
        let mut all: Vec<usize> = batches.concat();
        all.sort();
        assert_eq!(all, train);
        for b in &batches {
            assert!(b.windows(2).all(|w| lengths[w[0]] >= lengths[w[1]]), "sorted inside a window");
        }
        assert_ne!(epoch_batches(&train, &lengths, 4, 1, 1), batches, "each epoch reshuffles");
    }

    #[test]
    fn config_round_trips_and_rejects_typos() {
        let c = SftConfig { base_model: "m".into(), dataset: "d".into(), ..Default::default() };
        assert_eq!(toml::from_str::<SftConfig>(&c.to_toml()).unwrap(), c);
        assert!(toml::from_str::<SftConfig>("epoch = 2").is_err());
        assert!(c.validate().is_ok());
        assert!(SftConfig { train_on: "some".into(), ..c }.validate().is_err());
    }
}
