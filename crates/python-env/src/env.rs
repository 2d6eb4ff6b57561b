//! The Python environment: a venv under the user's cache, keyed by the hash of the pinned
//! requirements, plus the embedded `train_agent` package written next to it (keyed by the hash of
//! its sources). Creation happens once, under a file lock, with a progress message; pip's output
//! goes to a log file that the error message points to.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use include_dir::{Dir, include_dir};
use sha2::{Digest, Sha256};

static PACKAGE: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/../../python/train_agent");
const REQUIREMENTS: &str = include_str!("../../../python/requirements.txt");

#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    #[error("cannot prepare the Python environment in {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error(
        "`{python}` could not create a virtual environment (see {log})\nhint: install Python 3.10+ with the venv module (Debian: apt-get install python3-venv), or point TRAIN_AGENT_PYTHON at an interpreter that already has torch, transformers, peft and pytorch-lightning"
    )]
    Venv { python: String, log: PathBuf },
    #[error(
        "installing the pinned Python packages failed (see {log})\nhint: the packages come from PyPI; check network access, or set TRAIN_AGENT_PYTHON to an interpreter that already has them"
    )]
    Pip { log: PathBuf },
}

/// A Python interpreter that can import `train_agent`.
#[derive(Debug, Clone)]
pub struct PythonEnv {
    pub python: PathBuf,
    /// Directory holding the `train_agent` package, for `PYTHONPATH`.
    pub package_root: PathBuf,
}

/// `$TRAIN_AGENT_CACHE`, else `$XDG_CACHE_HOME/train-agent`, else `~/.cache/train-agent`.
pub fn cache_root() -> PathBuf {
    if let Some(p) = std::env::var_os("TRAIN_AGENT_CACHE") {
        return PathBuf::from(p);
    }
    let base =
        std::env::var_os("XDG_CACHE_HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| ".".into())).join(".cache"));
    base.join("train-agent")
}

fn short_hash(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    h.finalize().iter().take(6).map(|b| format!("{b:02x}")).collect()
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> EnvError + '_ {
    move |source| EnvError::Io { path: path.to_path_buf(), source }
}

impl PythonEnv {
    /// The environment to use, creating it when needed:
    /// - `TRAIN_AGENT_PYTHON` names an interpreter that already has the packages (a GPU image):
    ///   it is used as is;
    /// - otherwise a venv under the cache is created from the pinned requirements with the
    ///   `python3` on `PATH` (or `TRAIN_AGENT_BOOTSTRAP_PYTHON`).
    ///
    /// `TRAIN_AGENT_PYTHONPATH` replaces the embedded package with a source checkout (development).
    pub fn ensure() -> Result<PythonEnv, EnvError> {
        let root = cache_root();
        let package_root = match std::env::var_os("TRAIN_AGENT_PYTHONPATH") {
            Some(p) => PathBuf::from(p),
            None => write_package(&root)?,
        };
        let python = match std::env::var_os("TRAIN_AGENT_PYTHON") {
            Some(p) => PathBuf::from(p),
            None => ensure_venv(&root)?,
        };
        Ok(PythonEnv { python, package_root })
    }

    /// Whether PyTorch in this environment sees a CUDA GPU (false when it cannot tell).
    pub async fn has_cuda(&self) -> bool {
        let probe = "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)";
        tokio::process::Command::new(&self.python).args(["-c", probe]).status().await.is_ok_and(|s| s.success())
    }

    /// A command running `python -m <module>` with the package importable and unbuffered output.
    pub fn module_command(&self, module: &str) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(&self.python);
        cmd.arg("-m").arg(module);
        let mut path = self.package_root.clone().into_os_string();
        if let Some(existing) = std::env::var_os("PYTHONPATH") {
            path.push(":");
            path.push(existing);
        }
        cmd.env("PYTHONPATH", path).env("PYTHONUNBUFFERED", "1");
        cmd
    }
}

/// Writes the embedded package to `<root>/py-<hash>/train_agent` once.
fn write_package(root: &Path) -> Result<PathBuf, EnvError> {
    let mut files: Vec<(&Path, &[u8])> = Vec::new();
    collect(&PACKAGE, &mut files);
    files.sort();
    let parts: Vec<&[u8]> = files.iter().flat_map(|(p, c)| [p.as_os_str().as_encoded_bytes(), *c]).collect();
    let dir = root.join(format!("py-{}", short_hash(&parts)));
    if dir.join(".complete").exists() {
        return Ok(dir);
    }
    let pkg = dir.join("train_agent");
    for (rel, contents) in files {
        let target = pkg.join(rel);
        std::fs::create_dir_all(target.parent().expect("file has a parent")).map_err(io(&target))?;
        std::fs::write(&target, contents).map_err(io(&target))?;
    }
    std::fs::write(dir.join(".complete"), b"").map_err(io(&dir))?;
    Ok(dir)
}

fn collect<'a>(dir: &'a Dir<'a>, out: &mut Vec<(&'a Path, &'a [u8])>) {
    for f in dir.files() {
        if f.path().extension().is_some_and(|e| e == "py") {
            out.push((f.path(), f.contents()));
        }
    }
    for d in dir.dirs() {
        if d.path().file_name().is_some_and(|n| n != "__pycache__") {
            collect(d, out);
        }
    }
}

/// Creates `<root>/venv-<hash>` from the pinned requirements, once, under a lock.
fn ensure_venv(root: &Path) -> Result<PathBuf, EnvError> {
    let venv = root.join(format!("venv-{}", short_hash(&[REQUIREMENTS.as_bytes()])));
    let python = venv.join("bin").join("python");
    let done = venv.join(".complete");
    if done.exists() {
        return Ok(python);
    }
    std::fs::create_dir_all(root).map_err(io(root))?;
    let lock_path = root.join(".venv.lock");
    let lock = std::fs::File::create(&lock_path).map_err(io(&lock_path))?;
    lock.lock().map_err(io(&lock_path))?;
    if done.exists() {
        return Ok(python);
    }
    let log = venv.with_extension("log");
    let log_file = std::fs::File::create(&log).map_err(io(&log))?;
    let bootstrap = std::env::var("TRAIN_AGENT_BOOTSTRAP_PYTHON").unwrap_or_else(|_| "python3".into());
    let spinner = indicatif::ProgressBar::new_spinner();
    spinner.enable_steady_tick(Duration::from_millis(120));
    spinner.set_message(format!("creating the Python environment in {} (first run only)", venv.display()));
    let ok = Command::new(&bootstrap)
        .args(["-m", "venv", "--clear"])
        .arg(&venv)
        .stdout(log_file.try_clone().map_err(io(&log))?)
        .stderr(log_file.try_clone().map_err(io(&log))?)
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        spinner.finish_and_clear();
        return Err(EnvError::Venv { python: bootstrap, log });
    }
    let req = venv.join("requirements.txt");
    std::fs::write(&req, REQUIREMENTS).map_err(io(&req))?;
    spinner.set_message("installing torch, transformers, peft and lightning (pinned; a few minutes on first run)");
    let ok = Command::new(&python)
        .args(["-m", "pip", "install", "--disable-pip-version-check", "-r"])
        .arg(&req)
        .stdout(log_file.try_clone().map_err(io(&log))?)
        .stderr(log_file)
        .status()
        .is_ok_and(|s| s.success());
    spinner.finish_and_clear();
    if !ok {
        return Err(EnvError::Pip { log });
    }
    std::fs::write(&done, REQUIREMENTS).map_err(io(&done))?;
    tracing::info!("Python environment ready: {}", venv.display());
    Ok(python)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_package_has_the_modules_and_is_written_once() {
        let dir = tempfile::tempdir().unwrap();
        let a = write_package(dir.path()).unwrap();
        assert!(a.join("train_agent/__init__.py").exists());
        assert!(a.join("train_agent/models.py").exists());
        assert_eq!(write_package(dir.path()).unwrap(), a);
    }

    #[test]
    fn hashes_depend_on_every_part() {
        assert_ne!(short_hash(&[b"ab", b"c"]), short_hash(&[b"a", b"bc"]));
        assert_eq!(short_hash(&[b"x"]).len(), 12);
    }
}
