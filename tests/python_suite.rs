//! Runs the Python package's own test suite (`python/tests`, pytest) in the project's pinned
//! environment, so `cargo test --workspace` is the one command that tests everything.
//! The environment is created on first use, as it is for users.

use std::path::Path;
use std::process::Command;

/// pytest on `args` from `dir` in the pinned environment; fails unless some test ran and all
/// passed, printing pytest's summary either way so CI logs show what ran.
fn pytest(dir: &Path, args: &[String], env: &[(&str, &str)]) {
    let python = ta_python::PythonEnv::ensure().expect("the pinned Python environment").python;
    let out =
        Command::new(&python).args(["-m", "pytest", "-q", "-p", "no:cacheprovider"]).args(args).current_dir(dir).envs(env.iter().copied()).output().expect("pytest runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    println!("{text}");
    assert!(out.status.success(), "pytest failed:\n{text}");
    assert!(text.contains(" passed"), "pytest ran no test:\n{text}");
}

#[test]
fn python_package_tests_pass() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("python");
    // The SFT test drives the binary (collect, curate, sft) as users do.
    pytest(&root, &["tests".into()], &[("PYTHONUNBUFFERED", "1"), ("TRAIN_AGENT_BIN", env!("CARGO_BIN_EXE_train-agent"))]);
}

/// The benches' helpers have tests beside them (`benches/test_*.py`: the table
/// `natural_check.py` prints); run them here too, so a table a claim rests on is tested by CI.
#[test]
fn bench_helper_tests_pass() {
    let benches = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches");
    let tests: Vec<String> = std::fs::read_dir(&benches)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("test_") && n.ends_with(".py"))
        .collect();
    assert!(!tests.is_empty(), "no benches/test_*.py");
    // The bench script's own tests drive the binary, as the bench does.
    pytest(&benches, &tests, &[("TRAIN_AGENT_BIN", env!("CARGO_BIN_EXE_train-agent"))]);
}
