//! The Python side, seen from Rust: the virtual environment (created on first use from pinned
//! requirements embedded in the binary), the engine process (an OpenAI-compatible server, ours or
//! vLLM) and the client that hot-loads LoRA adapters into it.
//!
//! The Python package itself is embedded too, so an installed `train-agent` binary needs nothing
//! but a `python3` to bootstrap from.

pub mod engine;
pub mod env;
pub mod trainer;

pub use engine::{AdapterError, Engine, EngineClient, EngineError, EngineOptions, EngineSource, ServedEngine, adapter_config, adapter_rank};
pub use env::{ENGINE_MODULE, EnvError, PythonEnv, SFT_DATA_MODULE, TRAINER_MODULE};
pub use trainer::{Trainer, TrainerError};

/// Makes a child process receive SIGKILL when this process dies, even by SIGKILL, so an engine or
/// trainer never outlives a killed run (Linux; elsewhere `kill_on_drop` covers normal exits).
/// SIGKILL, not SIGTERM: Lightning turns SIGTERM into an exception raised at the next batch, so an
/// orphaned trainer lived on, took the resumed run's next step file from the shared inbox and then
/// failed it. Nothing is lost: checkpoints and reports are written atomically.
pub(crate) fn die_with_parent(cmd: &mut tokio::process::Command) {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cmd;
}
