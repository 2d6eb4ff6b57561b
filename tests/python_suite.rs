//! Runs the Python package's own test suite (`python/tests`, pytest) in the project's pinned
//! environment, so `cargo test --workspace` is the one command that tests everything.
//! The environment is created on first use, as it is for users.

use std::process::Command;

#[test]
fn python_package_tests_pass() {
    let env = ta_python::PythonEnv::ensure().expect("the pinned Python environment");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("python");
    let out = Command::new(&env.python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"])
        .current_dir(&root)
        .env("PYTHONUNBUFFERED", "1")
        // The SFT test drives the binary (collect, curate, sft) as users do.
        .env("TRAIN_AGENT_BIN", env!("CARGO_BIN_EXE_train-agent"))
        .output()
        .expect("pytest runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    // Print pytest's summary either way so CI logs show what ran.
    println!("{text}");
    assert!(out.status.success(), "pytest failed:\n{text}");
    assert!(text.contains(" passed"), "pytest ran no test:\n{text}");
}

/// The benches' helpers have tests beside them (`benches/test_*.py`: the table
/// `natural_check.py` prints); run them here too, so a table a claim rests on is tested by CI.
#[test]
fn bench_helper_tests_pass() {
    let env = ta_python::PythonEnv::ensure().expect("the pinned Python environment");
    let benches = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("benches");
    let out = Command::new(&env.python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .args(
            std::fs::read_dir(&benches).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).filter(|n| n.starts_with("test_") && n.ends_with(".py")),
        )
        .current_dir(&benches)
        .output()
        .expect("pytest runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    println!("{text}");
    assert!(out.status.success(), "pytest failed:\n{text}");
    assert!(text.contains(" passed"), "pytest ran no test:\n{text}");
}
