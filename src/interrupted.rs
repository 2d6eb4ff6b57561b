//! Ctrl-C: the one place that hears it ([`listen`], [`ctrl_c`], [`pressed`]) and how a command
//! it stopped ends ([`Interrupted`]).
//!
//! Once anything in the process listens for SIGINT, the signal no longer kills the process: it is
//! delivered to whoever listens then, and a Ctrl-C pressed while nobody does is lost. `fit` runs
//! stages one after another in one process, some of which listen (collect, sft, train, eval) and
//! some of which do not (synth, curate, the engine's start-up): a Ctrl-C during curate, after
//! collect had listened, was swallowed, and the run went on with the Python children (which got
//! the terminal's SIGINT) dead. So every listener here is the same one, installed once: it
//! records the press for the rest of the process, each stage that listens waits on it, and `fit`
//! checks it between stages.

use std::sync::OnceLock;

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;

/// Whether Ctrl-C was pressed since [`listen`]: set by the one listener, never unset.
static PRESSED: OnceLock<watch::Sender<bool>> = OnceLock::new();

/// Listens for Ctrl-C from now on, for the rest of the process (later calls do nothing): SIGINT
/// then no longer kills the process, it is recorded for [`pressed`] and [`ctrl_c`]. A command that
/// runs stages calls it first, so that a press between or during stages that do not listen is
/// kept for the next safe point; a command of one stage gets it from its [`ctrl_c`]. Needs a
/// Tokio runtime with signals (the binary's has them).
pub fn listen() {
    pressed_sender();
}

fn pressed_sender() -> &'static watch::Sender<bool> {
    PRESSED.get_or_init(|| {
        let (pressed, _) = watch::channel(false);
        // Registered now, not when the task first runs: a press right after `listen` is kept.
        let mut sigint = signal(SignalKind::interrupt()).expect("a SIGINT listener (Tokio's signal driver)");
        let record = pressed.clone();
        tokio::spawn(async move {
            while sigint.recv().await.is_some() {
                record.send_replace(true);
            }
        });
        pressed
    })
}

/// Whether Ctrl-C was pressed since [`listen`] (false when nothing listens).
pub fn pressed() -> bool {
    PRESSED.get().is_some_and(|p| *p.borrow())
}

/// Resolves once Ctrl-C is pressed, at once when it was pressed already (since [`listen`]). What
/// a stage that stops on Ctrl-C waits on, in place of `tokio::signal::ctrl_c`, whose listener
/// misses every press from before it was created.
pub async fn ctrl_c() {
    let mut pressed = pressed_sender().subscribe();
    // Never an error: the sender lives in a static, so this ends on a press only.
    let _ = pressed.wait_for(|p| *p).await;
}

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
