//! One module per subcommand: its flags (`Args`) and its `run`.

pub mod demo_server;
pub mod eval;
pub mod report;
pub mod rollout;
pub mod serve;
pub mod stats;
pub mod tools;
pub mod train;
