//! `train-agent report` on a hand-made training run, opened in headless Chromium
//! (tests/browser/check_report.mjs, playwright-core driving the system's /usr/bin/chromium): no
//! console errors or network requests, charts drawn with data, the trajectory viewer works. The
//! screenshot is kept under target/report-screenshots/ (a CI artefact).
//!
//! Skips, loudly, when Chromium is not installed, unless TRAIN_AGENT_REQUIRE_BROWSER is set (as
//! `.ci/run` does after installing it), so CI always runs it.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        if e.path().is_dir() {
            copy_dir(&e.path(), &dst.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
        }
    }
}

#[test]
fn report_renders_in_headless_chromium() {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    if !Path::new(&chromium).exists() {
        assert!(
            std::env::var_os("TRAIN_AGENT_REQUIRE_BROWSER").is_none(),
            "TRAIN_AGENT_REQUIRE_BROWSER is set but {chromium} does not exist (apt-get install -y chromium)"
        );
        eprintln!(
            "\n{}\nSKIPPED report_renders_in_headless_chromium: {chromium} not found.\nInstall it with `apt-get install -y chromium` (.ci/run does) to check the report in a browser.\n{}\n",
            "!".repeat(78),
            "!".repeat(78)
        );
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let browser_dir = root.join("tests/browser");
    if !browser_dir.join("node_modules/playwright-core").exists() {
        let status = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(&browser_dir)
            .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
            .status()
            .expect("npm runs");
        assert!(status.success(), "npm ci in tests/browser failed");
    }

    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    copy_dir(&root.join("crates/eval/tests/fixtures/run"), &run);
    let out = Command::new(common::bin()).arg("report").arg(&run).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report = run.join("report.html");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), report.display().to_string());

    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"));
    let shots = target.join("report-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let shot = shots.join("training-run-report.png");
    let _ = std::fs::remove_file(&shot);
    let out = Command::new("node").arg(browser_dir.join("check_report.mjs")).arg(&report).arg(&shot).arg(&chromium).output().expect("node runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "the report failed in Chromium:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let findings: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(findings["failures"], serde_json::json!([]));
    assert!(findings["charts"].as_array().unwrap().len() >= 8, "{findings}");
    assert!(findings["sideBySide"].as_u64().unwrap() >= 2, "a group side by side: {findings}");
    assert!(findings["filtered"].as_u64().unwrap() < findings["rows"].as_u64().unwrap(), "the outcome filter narrowed the list: {findings}");
    assert!(std::fs::metadata(&shot).unwrap().len() > 10_000, "a real screenshot");
    println!("report screenshot: {}", shot.display());
}
