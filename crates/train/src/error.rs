//! How a training run fails.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("run directory {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Trainer(#[from] ta_python::TrainerError),
    #[error(transparent)]
    Engine(#[from] ta_python::EngineError),
    #[error(transparent)]
    Samples(#[from] ta_trainer::samples::SampleError),
    #[error(transparent)]
    Reward(#[from] ta_reward::RewardError),
    #[error("{source}\nhint: every finished step and episode is kept; run the same command with --resume to continue from step {}", step - 1)]
    TrainerLost { step: u64, source: ta_python::TrainerError },
    #[error(
        "the engine stopped answering during step {step}; the episodes it finished are kept ({log})\nhint: run the same command with --resume to play the rest of step {step} and continue"
    )]
    EngineLost { step: u64, log: String },
    #[error("no training scenarios\nhint: give scenarios a \"split\": \"train\" field, or leave \"split\" out to have a share split off for validation")]
    NoTrainingData,
}

/// Maps an I/O error on `path` to [`RunError::Io`].
pub(crate) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> RunError + '_ {
    move |source| RunError::Io { path: path.to_path_buf(), source }
}
