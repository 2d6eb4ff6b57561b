//! How a command stopped by Ctrl-C ends.

/// Ctrl-C stopped the command after it saved what was finished; the process exits with 130 (the
/// shell's code for SIGINT) so scripts see that the work is not done. The message says what was
/// kept and how to continue.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Interrupted {
    message: String,
}

/// What continues a command whose output directory holds its finished work.
const AGAIN: &str = "hint: run the same command again to continue";

impl Interrupted {
    /// A command that plays episodes (`rollout`, `collect`, `eval`, `scenarios generate`).
    pub fn episodes(kept: usize) -> Interrupted {
        Interrupted { message: format!("interrupted: {kept} finished episodes kept\n{AGAIN}") }
    }

    /// A command that asks a teacher task by task (`scenarios paraphrase`).
    pub fn tasks(kept: usize) -> Interrupted {
        Interrupted { message: format!("interrupted: {kept} finished tasks kept\n{AGAIN}") }
    }

    /// A training command (`sft`, `train`), which continues from its last checkpoint when told to
    /// (`--resume`: without it, an output directory holding a run is refused).
    pub fn at_checkpoint(kept: &str) -> Interrupted {
        Interrupted { message: format!("interrupted: {kept}\nhint: continue with the same command plus --resume") }
    }

    /// A command of stages (`fit`, `demo`), which skips the finished ones and resumes the rest.
    pub fn stages(command: &str) -> Interrupted {
        Interrupted { message: format!("{command} interrupted: every finished stage and step is kept\n{AGAIN}") }
    }
}
