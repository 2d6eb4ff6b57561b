//! Scenario supply for any MCP server, from the server alone (issue #14, `scenarios generate`):
//!
//! 1. [`discover`]: tools, resources (a sample read), resource templates and prompts;
//! 2. [`prompt`] and [`generate`]: a teacher model writes tasks from a minijinja prompt, each
//!    reply validated against a JSON schema and repaired once;
//! 3. [`dedupe`]: near-duplicates dropped (MinHash over word shingles), and a train/validation
//!    split that keeps near-duplicate components on one side;
//! 4. [`solve`] and [`agree`]: a solver attempts each task k times through the real server; a
//!    task is kept when m answers agree, and the agreed answer becomes `expected`;
//! 5. [`replay`]: an agreed task's calls made again on a fresh server must return what the
//!    solver was shown, and an answer naming things must name what they show; the calls become
//!    the task's `reference`;
//! 6. [`pipeline`]: the stages in order, resumable, with counts and cost.
//!
//! [`paraphrase`] asks a teacher for other wordings of checked tasks (`scenarios paraphrase`).

pub mod agree;
pub mod dedupe;
pub mod discover;
pub mod generate;
pub mod paraphrase;
pub mod pipeline;
pub mod prompt;
pub mod replay;
pub mod solve;

pub use discover::{DiscoverOptions, Surface};
pub use generate::{GenerateOptions, Teacher};
pub use pipeline::{PipelineOptions, Report, run};
pub use solve::SolveOptions;
