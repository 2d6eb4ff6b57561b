//! GRPO training runs: the loop that samples groups with the current adapter, scores them, turns
//! them into token-level batches for the trainer, and hot-loads each new adapter into the engine;
//! with checkpoints and resume. Group-relative advantages (`advantage`) are computed here; the
//! samples they weight are the trainer contract's (`ta_trainer::samples`).

pub mod advantage;
pub mod base_cache;
mod collapse;
pub mod config;
mod context;
pub mod data;
mod error;
pub mod keep;
pub mod placement;
mod progress;
pub mod row;
pub mod run;
mod validation;

pub use config::TrainConfig;
