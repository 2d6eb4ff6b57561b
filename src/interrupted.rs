//! How a command stopped by Ctrl-C ends.

/// Ctrl-C stopped the command after it saved what was finished; the process exits with 130 (the
/// shell's code for SIGINT) so scripts see that the work is not done.
#[derive(Debug, thiserror::Error)]
#[error("interrupted: {kept} finished episodes kept\nhint: run the same command again to continue")]
pub struct Interrupted {
    pub kept: usize,
}
