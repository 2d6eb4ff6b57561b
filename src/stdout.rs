//! A command's results on stdout, for people and pipes. `println!` panics when stdout is closed
//! ("failed printing to stdout: Broken pipe"): `train-agent stats DIR | head -1` did. [`outln!`]
//! and [`out!`] write the same text and return the write's error instead, and `main` ends the
//! command quietly with exit 0 when that error is a closed pipe ([`closed_by_reader`]), as
//! ripgrep does. SIGPIPE stays ignored: a pipe to an MCP server that died is an error, not the
//! end of train-agent.

use std::io::Write;

/// Writing a command's results to stdout failed.
#[derive(Debug, thiserror::Error)]
#[error("cannot write to stdout: {0}")]
pub struct StdoutError(#[source] std::io::Error);

/// `print!`, returning the write's error.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::stdout::write(format_args!($($arg)*))
    };
}

/// `println!`, returning the write's error.
macro_rules! outln {
    () => {
        $crate::stdout::write(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::stdout::write(format_args!("{}\n", format_args!($($arg)*)))
    };
}

pub(crate) use {out, outln};

/// Writes `args` to stdout under one lock, as `print!` does.
pub fn write(args: std::fmt::Arguments<'_>) -> Result<(), StdoutError> {
    std::io::stdout().lock().write_fmt(args).map_err(StdoutError)
}

/// The failed write to stdout in `e`'s chain, if that is what `e` is.
fn stdout_error(e: &anyhow::Error) -> Option<&StdoutError> {
    e.chain().find_map(|cause| cause.downcast_ref::<StdoutError>())
}

/// Whether `e` is a failed write of results to stdout: what ends a command, never a warning
/// (`each_stage` goes on past a stage with nothing to show, not past a stdout that is gone).
pub fn writing_failed(e: &anyhow::Error) -> bool {
    stdout_error(e).is_some()
}

/// Whether `e` is stdout closed by its reader (`| head`): the one rule for a quiet end. Only
/// stdout's own broken pipe counts; one to an MCP server, a child or a socket stays an error.
pub fn closed_by_reader(e: &anyhow::Error) -> bool {
    stdout_error(e).is_some_and(|s| s.0.kind() == std::io::ErrorKind::BrokenPipe)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_stdouts_broken_pipe_is_a_quiet_end() {
        let pipe = || std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        assert!(closed_by_reader(&StdoutError(pipe()).into()));
        assert!(closed_by_reader(&anyhow::Error::new(StdoutError(pipe())).context("stage sft").context("fit")), "under context");
        // Other write errors on stdout are errors (a full disk under `> file`).
        assert!(!closed_by_reader(&StdoutError(std::io::Error::from(std::io::ErrorKind::StorageFull)).into()));
        // A broken pipe elsewhere (an MCP server or trainer that died mid-write) is not a quiet end.
        assert!(!closed_by_reader(&anyhow::Error::new(pipe()).context("writing to the MCP server")));
        assert!(!closed_by_reader(&anyhow::anyhow!("no pipe at all")));
        // Any failed write to stdout is one, whatever its kind; other errors are not.
        assert!(writing_failed(&StdoutError(std::io::Error::from(std::io::ErrorKind::StorageFull)).into()));
        assert!(!writing_failed(&anyhow::Error::new(pipe())));
    }
}
