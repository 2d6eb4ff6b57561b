//! Evaluation and observability: `train-agent eval` itself (`evaluate`: the target, the engine,
//! resumable play of each model, `eval.json`), the metrics people compare between a base model
//! and a trained adapter (`metrics`), paired tests of two models on the same tasks (`paired`),
//! reading run and evaluation directories (`rundir`), their terminal summary (`stats`), and the
//! single-file HTML report (`report`).

pub mod evaluate;
pub mod metrics;
pub mod paired;
pub mod report;
pub mod rundir;
pub mod stats;

pub use metrics::{Comparison, Metrics, Verdict, compare, is_success};
pub use report::write_report;
pub use rundir::{EvalModel, EvalSummary, RunDir};
