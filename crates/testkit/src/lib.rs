//! Third-party programs the tests need, installed on first use into the cache, as the Python
//! environment is (`ta_python::env::cache_root`, so one `TRAIN_AGENT_CACHE` holds both).
//!
//! Why: the README promises that `cargo test --workspace` passes on a fresh clone with only Rust,
//! Python and Node. Tests against real third-party MCP servers therefore cannot expect them on
//! `PATH`; each one asks for its program here by a pinned [`ThirdParty`] and gets a path into
//! `<cache>/third-party/`. npm packages go into an `npm install --prefix` folder, PyPI packages
//! into a venv of their own (their pins, e.g. `mcp<2`, never meet the main environment's).
//!
//! A test skips only when the registry cannot be reached, and says so in a banner; with
//! `TRAIN_AGENT_REQUIRE_THIRD_PARTY` set (CI sets it) that skip is a failure. Any other install
//! failure fails the test with the installer's log.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

/// Set by CI: a program that cannot be installed fails the test instead of skipping it.
pub const REQUIRE_VAR: &str = "TRAIN_AGENT_REQUIRE_THIRD_PARTY";

/// Where a program comes from.
#[derive(Debug, Clone, Copy)]
pub enum Source {
    /// An npm package at a pinned version; `allow_scripts` names the packages whose install
    /// scripts may run (a native module built from source).
    Npm { package: &'static str, version: &'static str, allow_scripts: &'static [&'static str] },
    /// PyPI requirements installed into a venv of their own.
    PyPi { requirements: &'static [&'static str] },
}

/// A program from a package registry, by the name of its executable.
#[derive(Debug, Clone, Copy)]
pub struct ThirdParty {
    pub bin: &'static str,
    pub source: Source,
}

/// `@modelcontextprotocol/server-everything`: the reference server (every MCP feature, stdio,
/// SSE and streamable HTTP).
pub const SERVER_EVERYTHING: ThirdParty =
    ThirdParty { bin: "mcp-server-everything", source: Source::Npm { package: "@modelcontextprotocol/server-everything", version: "2026.8.31", allow_scripts: &[] } };

/// `@modelcontextprotocol/server-memory`: a knowledge graph in the file `MEMORY_FILE_PATH`,
/// a server whose tools change state.
pub const SERVER_MEMORY: ThirdParty =
    ThirdParty { bin: "mcp-server-memory", source: Source::Npm { package: "@modelcontextprotocol/server-memory", version: "2026.8.31", allow_scripts: &[] } };

/// `@modelcontextprotocol/server-filesystem`: files under the directories given as arguments
/// (tools `read_text_file`, `list_directory`, `search_files`, `get_file_info`, ...).
pub const SERVER_FILESYSTEM: ThirdParty =
    ThirdParty { bin: "mcp-server-filesystem", source: Source::Npm { package: "@modelcontextprotocol/server-filesystem", version: "2026.8.31", allow_scripts: &[] } };

/// PyPI's `mcp-server-git` (tools `git_log`, `git_show`, `git_branch`, ..., each taking
/// `repo_path`), on the 2.x MCP SDK and GitPython it depends on.
pub const MCP_SERVER_GIT: ThirdParty = ThirdParty { bin: "mcp-server-git", source: Source::PyPi { requirements: &["mcp-server-git==2026.10.19"] } };

/// npm's `mcp-sqlite` (tool `query`); its `sqlite3` dependency builds from source offline.
pub const MCP_SQLITE: ThirdParty =
    ThirdParty { bin: "mcp-sqlite-server", source: Source::Npm { package: "mcp-sqlite", version: "1.0.9", allow_scripts: &["mcp-sqlite", "sqlite3"] } };

/// PyPI's `mcp-server-sqlite` (tools `read_query`, `write_query`, ...), on the 1.x MCP SDK it
/// was written for.
pub const MCP_SERVER_SQLITE: ThirdParty =
    ThirdParty { bin: "mcp-server-sqlite", source: Source::PyPi { requirements: &["mcp-server-sqlite==2025.4.25", "mcp==1.30.0"] } };

/// uv, to build a venv as uv users get it: the pin the product installs when `PATH` has none.
pub const UV: ThirdParty = ThirdParty { bin: "uv", source: Source::PyPi { requirements: &[ta_python::env::UV_PIN] } };

impl ThirdParty {
    /// The program's path, installed first if the cache lacks it. `None` when the registry cannot
    /// be reached: a banner says why `test` is skipped (a panic instead under [`REQUIRE_VAR`]).
    /// Panics with the installer's log on any other failure.
    pub fn path(&self, test: &str) -> Option<PathBuf> {
        match self.install(&ta_python::env::cache_root().join("third-party")) {
            Ok(path) => Some(path),
            Err(Failure::Unreachable(log)) => {
                let why = format!("{} could not be installed: its registry cannot be reached\n{log}", self.bin);
                assert!(std::env::var_os(REQUIRE_VAR).is_none(), "{REQUIRE_VAR} is set and {why}");
                eprintln!("\n{}\nSKIPPED {test}: {why}\n{}\n", "=".repeat(72), "=".repeat(72));
                None
            }
            Err(Failure::Other(log)) => panic!("installing {} for {test} failed:\n{log}", self.bin),
        }
    }

    /// The install folder, keyed by everything that decides its contents.
    fn dir(&self, root: &Path) -> PathBuf {
        let key = match self.source {
            Source::Npm { package, version, allow_scripts } => format!("{package}@{version} {allow_scripts:?}"),
            Source::PyPi { requirements } => requirements.join(" "),
        };
        let hash: String = Sha256::digest(key.as_bytes()).iter().take(6).map(|b| format!("{b:02x}")).collect();
        root.join(format!("{}-{hash}", self.bin))
    }

    fn executable(&self, dir: &Path) -> PathBuf {
        match self.source {
            Source::Npm { .. } => dir.join("node_modules/.bin").join(self.bin),
            Source::PyPi { .. } => dir.join("venv/bin").join(self.bin),
        }
    }

    /// Installs into [`Self::dir`] once, under a file lock (test binaries and their threads may
    /// ask at the same time); `.complete` marks a finished install.
    fn install(&self, root: &Path) -> Result<PathBuf, Failure> {
        let dir = self.dir(root);
        let exe = self.executable(&dir);
        let done = dir.join(".complete");
        if done.exists() {
            return Ok(exe);
        }
        std::fs::create_dir_all(&dir).map_err(|e| Failure::Other(format!("{}: {e}", dir.display())))?;
        let lock = File::create(dir.with_extension("lock")).and_then(|f| f.lock().map(|()| f));
        let _lock = lock.map_err(|e| Failure::Other(format!("locking {}: {e}", dir.display())))?;
        if done.exists() {
            return Ok(exe);
        }
        eprintln!("installing {} into {} (first use only)", self.bin, dir.display());
        if let Source::Npm { allow_scripts, .. } = self.source {
            // npm takes install-script approvals for a project from its package.json
            // (`allowScripts`), never from `--allow-scripts`, which it refuses there.
            let allowed: Vec<String> = allow_scripts.iter().map(|p| format!("\"{p}\": true")).collect();
            let manifest = format!("{{\"private\": true, \"allowScripts\": {{{}}}}}\n", allowed.join(", "));
            std::fs::write(dir.join("package.json"), manifest).map_err(|e| Failure::Other(format!("{}: {e}", dir.display())))?;
        }
        for mut step in self.commands(&dir) {
            let out = step.output().map_err(|e| Failure::Other(format!("{step:?}: {e}")))?;
            if !out.status.success() {
                let log = format!("{step:?} exited with {}\n{}{}", out.status, String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
                return Err(if unreachable(&log) { Failure::Unreachable(log) } else { Failure::Other(log) });
            }
        }
        if !exe.is_file() {
            return Err(Failure::Other(format!("the install finished but {} does not exist", exe.display())));
        }
        std::fs::write(&done, b"").map_err(|e| Failure::Other(format!("{}: {e}", done.display())))?;
        Ok(exe)
    }

    fn commands(&self, dir: &Path) -> Vec<Command> {
        match self.source {
            Source::Npm { package, version, .. } => {
                let mut npm = Command::new("npm");
                npm.args(["install", "--no-audit", "--no-fund", "--no-save", "--prefix"]).arg(dir).arg(format!("{package}@{version}"));
                vec![npm]
            }
            Source::PyPi { requirements } => {
                let venv = dir.join("venv");
                let mut create = Command::new("python3");
                create.args(["-m", "venv", "--clear"]).arg(&venv);
                let mut pip = Command::new(venv.join("bin/python"));
                pip.args(["-m", "pip", "install", "-q", "--disable-pip-version-check"]).args(requirements);
                vec![create, pip]
            }
        }
    }
}

enum Failure {
    /// The registry could not be reached (no network, DNS, refused, timed out).
    Unreachable(String),
    Other(String),
}

/// Whether an installer's log says the registry could not be reached, as npm and pip word it.
fn unreachable(log: &str) -> bool {
    const MARKS: &[&str] = &[
        // npm
        "ENOTFOUND",
        "EAI_AGAIN",
        "ECONNREFUSED",
        "ECONNRESET",
        "ETIMEDOUT",
        "ENETUNREACH",
        // pip (urllib3)
        "NewConnectionError",
        "Temporary failure in name resolution",
        "Network is unreachable",
        "Max retries exceeded",
        "ReadTimeoutError",
    ];
    MARKS.iter().any(|m| log.contains(m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn network_failures_are_told_from_other_failures() {
        assert!(unreachable("npm error code ENOTFOUND\nnpm error network request to https://registry.npmjs.org/x failed"));
        assert!(unreachable("WARNING: Retrying ... NewConnectionError('Failed to establish a new connection')"));
        assert!(!unreachable("npm error code E404\nnpm error 404 Not Found - GET https://registry.npmjs.org/nope"));
        assert!(!unreachable("ERROR: No matching distribution found for nope==9"));
    }

    #[test]
    fn the_install_folder_changes_with_every_pin() {
        let root = Path::new("/c");
        let other = ThirdParty { bin: "uv", source: Source::PyPi { requirements: &["uv==0.0.1"] } };
        assert_ne!(UV.dir(root), other.dir(root));
        assert!(UV.dir(root).starts_with(root));
        assert_eq!(UV.executable(&UV.dir(root)), UV.dir(root).join("venv/bin/uv"));
    }

    /// A package that does not exist is a failure, never a skip: only an unreachable registry
    /// may skip.
    #[test]
    fn a_missing_package_fails_with_the_installer_log() {
        let missing = ThirdParty { bin: "nope", source: Source::PyPi { requirements: &["train-agent-no-such-package==0.0.0"] } };
        let root = tempfile::tempdir().unwrap();
        match missing.install(root.path()) {
            Err(Failure::Other(log)) => assert!(log.contains("train-agent-no-such-package"), "{log}"),
            Err(Failure::Unreachable(log)) => eprintln!("registry unreachable, the distinction is untested here:\n{log}"),
            Ok(path) => panic!("a package that does not exist installed at {}", path.display()),
        }
    }

    /// The real install, once per cache: uv (a single wheel) runs after it.
    #[test]
    fn a_pypi_program_installs_and_runs() {
        let Some(uv) = UV.path("a_pypi_program_installs_and_runs") else { return };
        let out = Command::new(&uv).arg("--version").output().unwrap();
        assert!(String::from_utf8_lossy(&out.stdout).starts_with("uv 0.13.9"), "{out:?}");
        assert_eq!(UV.path("again"), Some(uv), "a second call finds the install");
    }
}
