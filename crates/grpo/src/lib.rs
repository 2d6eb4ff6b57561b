//! GRPO's data side: group-relative advantages, and token-level samples built from exactly what
//! the engine sampled (never re-tokenised), which `ta-trainer` writes as the trainer's step files.

pub mod advantage;
pub mod samples;

pub use advantage::{GroupStats, group_advantages};
pub use samples::{Sample, samples_from_trajectory};
