//! The data shared by every part of train-agent: scenarios (what to ask), chat messages and tool
//! specs (the OpenAI wire format the agent loop speaks), and trajectories (what happened).
//!
//! These types are the contracts between the parts (`docs/architecture.md`). They live in one small crate so that the MCP
//! client, the agent loop, rewards, training and reports depend on the same definitions and on
//! nothing else.
//!
//! ```
//! let scenarios = ta_types::scenario::parse_scenarios(r#"[{"task": "How many tables?"}]"#, "inline").unwrap();
//! assert_eq!(scenarios[0].task, "How many tables?");
//! ```

pub mod atomic;
pub mod chat;
pub mod jsonl;
pub mod kept;
pub mod phases;
pub mod redact;
pub mod scenario;
pub mod terminal;
pub mod trace;
pub mod trajectory;

pub use chat::{FunctionCall, Message, Role, ToolCall, ToolSpec};

/// For `#[serde(skip_serializing_if = "ta_types::is_zero")]`: a count left out of a file while it
/// is 0, so files written before it existed and files without it read the same.
pub fn is_zero(x: &u64) -> bool {
    *x == 0
}
pub use scenario::{Difficulty, Expected, ExpectedState, ReferenceStep, Scenario, Split};
pub use trajectory::{Outcome, Trajectory, Turn};
