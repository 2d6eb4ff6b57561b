//! The contract test between Rust and the Python trainer: the configs Rust writes for GRPO and
//! SFT are loaded by the trainer's own parser (`train_agent.trainer.load_config`), which refuses
//! any missing or unknown key, so a key added or renamed on one side only fails here. The same
//! configs are committed under `python/tests/contract/`, where the Python tests build their
//! configs from them instead of keeping defaults of their own, with the shapes of the validation
//! file Rust writes, of the step report Rust reads and the allowed values of the config's enum
//! keys, which the Python tests check their side against.

use std::path::{Path, PathBuf};
use std::process::Command;

use ta_trainer::config::{LossKind, RunSpec};
use ta_trainer::settings::{Packing, allowed_values};
use ta_trainer::{Aggregation, LoraSettings, LossConfig, LossSettings, OptimSettings, Schedule, StepReport, TrainerConfig, TrainerSettings, ValidationFile};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// GRPO's and SFT's configs with their default settings (512 tokens x 8 turns for Dr. GRPO's norm).
fn configs() -> [(&'static str, serde_json::Value); 2] {
    let spec = || RunSpec { model: "MODEL".into(), output_dir: "OUTPUT_DIR".into(), seed: 0, init_adapter: None, total_steps: 10, resume_from: None };
    let grpo =
        TrainerConfig::new(spec(), &LoraSettings::default(), &OptimSettings::default(), LossConfig::grpo(&LossSettings::default(), 512 * 8), &TrainerSettings::default());
    let sft = TrainerConfig::new(spec(), &LoraSettings::sft(), &OptimSettings::sft(), LossConfig::sft(), &TrainerSettings::default());
    [("grpo", serde_json::to_value(grpo).unwrap()), ("sft", serde_json::to_value(sft).unwrap())]
}

fn fixture(name: &str) -> PathBuf {
    repo().join("python/tests/contract").join(name)
}

/// `value` as committed in `python/tests/contract/{name}` (rewritten with TA_UPDATE_CONTRACT=1).
fn check_fixture(name: &str, value: &impl serde::Serialize) {
    let text = serde_json::to_string_pretty(value).unwrap() + "\n";
    if std::env::var_os("TA_UPDATE_CONTRACT").is_some() {
        std::fs::write(fixture(name), &text).unwrap();
    }
    let committed = std::fs::read_to_string(fixture(name)).unwrap_or_default();
    assert_eq!(committed, text, "{} is stale\nhint: run this test with TA_UPDATE_CONTRACT=1 to rewrite it", fixture(name).display());
}

#[test]
fn the_python_tests_start_from_what_rust_writes() {
    for (kind, config) in configs() {
        check_fixture(&format!("trainer_config.{kind}.json"), &config);
    }
    // The validation metrics the trainer logs (python/tests/test_trainer_loggers.py writes its
    // files from this one, and `read_validation_file` refuses any other key).
    let row = serde_json::json!({"step": 42, "val_success": 0.5, "val_ground_truth": 0.75, "val_model": "step-42"});
    check_fixture("validation_file.json", &ValidationFile::new(42, &row));
    // The keys of the trainer's per-step report, in order: python/tests/test_contract.py checks
    // that a real report has exactly these, and `StepReport` refuses any other.
    check_fixture("step_report.json", &StepReport::default());
    // The allowed values of the config's enum keys, from the enums themselves: the Python
    // trainer dispatches on these names and test_contract.py checks that it covers exactly them.
    let allowed = serde_json::json!({
        "loss.aggregation": allowed_values::<Aggregation>(),
        "loss.kind": allowed_values::<LossKind>(),
        "optim.schedule": allowed_values::<Schedule>(),
        "packing": allowed_values::<Packing>(),
    });
    check_fixture("allowed_values.json", &allowed);
}

#[test]
fn the_trainer_loads_what_rust_writes_and_refuses_drift() {
    let env = ta_python::PythonEnv::ensure().expect("the pinned Python environment");
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, v: &serde_json::Value| {
        let p = dir.path().join(name);
        std::fs::write(&p, serde_json::to_vec(v).unwrap()).unwrap();
        p
    };
    let [(_, grpo), (_, sft)] = configs();
    let mut missing = grpo.clone();
    missing["optim"].as_object_mut().unwrap().remove("lr");
    let mut unknown = sft.clone();
    unknown["loss"]["extra"] = 1.into();
    let paths = [write("grpo.json", &grpo), write("sft.json", &sft), write("missing.json", &missing), write("unknown.json", &unknown)];
    let script = "import sys\nfrom train_agent.trainer import load_config\nfor p in sys.argv[1:]:\n    try:\n        load_config(p)\n        print('ok')\n    except ValueError as e:\n        print(str(e).splitlines()[0])\n";
    let out = Command::new(&env.python).arg("-c").arg(script).args(&paths).env("PYTHONPATH", repo().join("python")).output().expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines, ["ok", "ok", "config.optim: missing key(s) lr", "config.loss: unknown key(s) extra"]);
}
