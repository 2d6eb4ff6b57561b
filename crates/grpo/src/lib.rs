//! GRPO's data side: group-relative advantages, and token-level samples built from exactly what
//! the engine sampled (never re-tokenised), written as the trainer's step batches.

pub mod advantage;
pub mod samples;

pub use advantage::{GroupStats, group_advantages};
pub use samples::{Sample, StepBatch, samples_from_trajectory};
