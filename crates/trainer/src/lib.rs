//! The one owner of the contract between Rust and the Python trainer (`python/train_agent/trainer/`).
//! GRPO (`ta-train`) and SFT (`ta-sft`) drive the same trainer process; before this crate each
//! built the trainer's config by hand, kept its own defaults and its own copies of the run
//! directory helpers, and the copies drifted. Here each of them is defined once:
//!
//! - [`settings`]: the user-facing `[lora]`, `[optim]`, `[loss]`, `[trainer]` tables, their
//!   defaults, allowed values and validation;
//! - [`config`]: the JSON config the trainer reads (every key sent, none defaulted in Python);
//! - [`samples`]: the token-level samples a step file carries, built from exactly what the engine
//!   sampled (never re-tokenised);
//! - [`step_file`]: the trainer's inbox: step files and validation metrics;
//! - [`report`]: the trainer's outbox, one report per step;
//! - [`checkpoint`]: the checkpoint layout (`checkpoints/step-N/`, `state.json`, the adapter);
//! - [`metrics`]: `metrics.jsonl` and its `metrics.csv` table.

pub mod checkpoint;
pub mod config;
pub mod metrics;
mod metrics_csv;
pub mod report;
pub mod samples;
pub mod settings;
pub mod step_file;

pub use config::{LossConfig, TrainerConfig};
pub use report::StepReport;
pub use samples::{Sample, samples_from_trajectory};
pub use settings::{Aggregation, LoraSettings, LossSettings, OptimSettings, Packing, Schedule, SettingsError, TrainerSettings};
pub use step_file::{EvalRequest, StepFile, ValidationFile};
