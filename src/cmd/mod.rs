//! One module per subcommand: its flags (`Args`) and its `run`.

pub mod collect;
pub mod curate;
pub mod demo;
pub mod demo_server;
pub mod eval;
pub mod fit;
pub mod report;
pub mod rollout;
pub mod scenarios;
pub mod score;
pub mod serve;
pub mod sft;
pub mod stats;
pub mod tools;
pub mod train;
