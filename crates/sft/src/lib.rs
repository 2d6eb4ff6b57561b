//! Supervised fine-tuning from agent traces, the warm start before GRPO:
//!
//! 1. [`collect`]: play scenarios with a teacher (or the model itself at high `n`: rejection
//!    sampling) through the agent loop and keep full traces (`messages` + `tools`, reward parts);
//!    [`reference`]: turn scenarios' reference SQL into ideal traces through the real MCP server;
//! 2. [`curate`]: keep the successful, non-duplicate, untruncated traces and say why the rest went;
//! 3. [`export`]: JSONL / Parquet of `{messages, tools}` (and the unrolled form);
//! 4. [`sft`]: drive the trainer with a supervised loss on assistant tokens only (the loss mask is
//!    built from the chat template in Python, `train_agent.trainer.sft_data`), with eval loss, epochs,
//!    checkpoints and resume; `final/` is a PEFT adapter that `train --init-adapter` starts from.
//!
//! Every step is a library function so that a pipeline (`demo`) can chain them.

pub mod collect;
pub mod curate;
pub mod export;
pub mod reference;
pub mod sft;

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum SftError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("reference traces: {0}")]
    Reference(String),
    #[error(transparent)]
    Env(#[from] ta_python::EnvError),
    #[error(transparent)]
    Trainer(#[from] ta_python::TrainerError),
    #[error(transparent)]
    Settings(#[from] ta_trainer::SettingsError),
    #[error("{0}")]
    Python(String),
    #[error("{0}")]
    Data(String),
}

impl SftError {
    pub fn io(path: &Path, source: std::io::Error) -> SftError {
        SftError::Io { path: path.to_path_buf(), source }
    }
}
