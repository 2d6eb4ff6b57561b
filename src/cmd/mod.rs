//! One module per subcommand: its flags (`Args`) and its `run`.

pub mod collect;
pub mod curate;
pub mod demo_server;
pub mod rollout;
pub mod score;
pub mod serve;
pub mod sft;
pub mod tools;
pub mod train;
