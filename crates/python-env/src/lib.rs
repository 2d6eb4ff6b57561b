//! The Python side, seen from Rust: the virtual environment (created on first use from pinned
//! requirements embedded in the binary), the engine process (an OpenAI-compatible server, ours or
//! vLLM) and the client that hot-loads LoRA adapters into it.
//!
//! The Python package itself is embedded too, so an installed `train-agent` binary needs nothing
//! but a `python3` to bootstrap from.

pub mod engine;
pub mod env;

pub use engine::{Engine, EngineClient, EngineError, EngineOptions};
pub use env::{EnvError, PythonEnv};
