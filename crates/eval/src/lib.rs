//! Evaluation and observability: `train-agent eval` itself (`evaluate`: the target, the engine,
//! resumable play of each model, `eval.json`), reading run and evaluation directories and the lock
//! a writer holds on one (`rundir`), their terminal summary (`stats`), and the single-file HTML
//! report (`report`). The numbers themselves (success, intervals, pass@k, paired tests) are
//! `ta-metrics`', which training reads too.

pub mod evaluate;
pub mod frontier;
pub mod report;
pub mod rundir;
pub mod stats;

pub use report::write_report;
pub use rundir::{EvalModel, EvalSummary, RunDir};
