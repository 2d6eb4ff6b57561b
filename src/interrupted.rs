//! How a command stopped by Ctrl-C ends.

/// Ctrl-C stopped the command after it saved what was finished; the process exits with 130 (the
/// shell's code for SIGINT) so scripts see that the work is not done.
#[derive(Debug, thiserror::Error)]
#[error("interrupted: {kept} finished {what} kept\nhint: run the same command again to continue")]
pub struct Interrupted {
    kept: usize,
    what: &'static str,
}

impl Interrupted {
    /// A command that plays episodes (`rollout`, `collect`, `eval`).
    pub fn episodes(kept: usize) -> Interrupted {
        Interrupted { kept, what: "episodes" }
    }

    /// A command that asks a teacher task by task (`scenarios paraphrase`).
    pub fn tasks(kept: usize) -> Interrupted {
        Interrupted { kept, what: "tasks" }
    }
}
