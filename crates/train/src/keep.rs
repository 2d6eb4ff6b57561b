//! Which adapter a finished run keeps as `final/`. GRPO can break the adapter it starts from
//! (a loop of repeated tool calls that never answers, benches/RESULTS.md "Run 20"), and then the
//! last step is the worst one the run made; the run's validations say which was best, so with
//! `[rollout] final_adapter = "best"` `final/` is that one's, the start adapter included, and
//! `final.json` says which it is and how it and the last step validated.
//!
//! The choice reads the validation split, so its numbers for the kept adapter lean optimistic
//! (the best of several noisy measurements); a claim about the kept adapter belongs to a set it
//! was not chosen on (`eval` on a check set, as `fit` and `benches/natural_check.sh` do).

use std::cmp::Ordering;
use std::path::{Path, PathBuf};

use ta_trainer::checkpoint::{checkpoint_dir, copy_dir};
use ta_types::kept::{FinalAdapter, Kept, RECORD, Validated};

/// The validations in `metrics.jsonl` (rows with `val_success`), in file order.
pub(crate) fn validations(metrics: &Path) -> Vec<Validated> {
    ta_trainer::metrics::rows(metrics)
        .into_iter()
        .filter_map(|v| {
            Some(Validated {
                step: v["step"].as_u64()?,
                success: v["val_success"].as_f64()?,
                pass1: v["val_pass1"].as_f64(),
                ground_truth: v["val_ground_truth"].as_f64(),
            })
        })
        .collect()
}

/// Greedy success first (the table's figure), then sampled pass@1 and ground truth (finer
/// measures of the same episodes' quality), then the later step (more training at equal quality).
fn rank(a: &Validated, b: &Validated) -> Ordering {
    let or_none = |x: Option<f64>| x.unwrap_or(f64::NEG_INFINITY);
    a.success
        .total_cmp(&b.success)
        .then(or_none(a.pass1).total_cmp(&or_none(b.pass1)))
        .then(or_none(a.ground_truth).total_cmp(&or_none(b.ground_truth)))
        .then(a.step.cmp(&b.step))
}

/// The adapter of `step`: the start adapter for 0 (none without one: the base model is not an
/// adapter), else the step's checkpoint; `None` when it is not on disk.
fn source(out: &Path, init_adapter: Option<&str>, step: u64) -> Option<PathBuf> {
    let dir = match step {
        0 => PathBuf::from(init_adapter?),
        s => checkpoint_dir(out, s).join("adapter"),
    };
    dir.is_dir().then_some(dir)
}

/// Chooses `final/`'s adapter among the validated ones of steps 0..=`last_step` under `rule`
/// (the last step's when it is `Last` or none of them is on disk).
pub(crate) fn choose(out: &Path, rule: FinalAdapter, init_adapter: Option<&str>, last_step: u64, validations: &[Validated]) -> Kept {
    let last_validation = validations.iter().rev().find(|v| v.step == last_step).copied();
    let best = match rule {
        FinalAdapter::Last => None,
        FinalAdapter::Best => {
            validations.iter().filter(|v| v.step <= last_step).filter_map(|v| Some((*v, source(out, init_adapter, v.step)?))).max_by(|(a, _), (b, _)| rank(a, b))
        }
    };
    let (step, source, validation) = match best {
        Some((v, dir)) => (v.step, dir, Some(v)),
        None => (last_step, checkpoint_dir(out, last_step).join("adapter"), last_validation),
    };
    Kept { rule, step, source, validation, last_step, last_validation }
}

/// Copies the chosen adapter to `final/` and writes `final.json`.
pub(crate) fn write(out: &Path, kept: &Kept) -> std::io::Result<()> {
    copy_dir(&kept.source, &out.join("final"))?;
    std::fs::write(out.join(RECORD), serde_json::to_vec_pretty(kept).map_err(std::io::Error::other)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(step: u64, success: f64, pass1: Option<f64>, ground_truth: f64) -> Validated {
        Validated { step, success, pass1, ground_truth: Some(ground_truth) }
    }

    /// A run directory with the start adapter and checkpoints of `steps`.
    fn run(steps: &[u64]) -> (tempfile::TempDir, String) {
        let dir = tempfile::tempdir().unwrap();
        let init = dir.path().join("sft-final");
        std::fs::create_dir_all(&init).unwrap();
        std::fs::write(init.join("adapter_config.json"), "{\"start\": true}").unwrap();
        for s in steps {
            let a = checkpoint_dir(dir.path(), *s).join("adapter");
            std::fs::create_dir_all(&a).unwrap();
            std::fs::write(a.join("adapter_config.json"), format!("{{\"step\": {s}}}")).unwrap();
        }
        let init = init.to_string_lossy().into_owned();
        (dir, init)
    }

    #[test]
    fn a_collapsed_last_step_keeps_the_best_validated_adapter() {
        let (dir, init) = run(&[1, 2, 3, 4]);
        let vals = [v(0, 0.9, None, 0.9), v(2, 0.95, None, 0.95), v(4, 0.0, None, 0.0)];
        let kept = choose(dir.path(), FinalAdapter::Best, Some(&init), 4, &vals);
        assert_eq!((kept.step, kept.validation, kept.last_validation), (2, Some(vals[1]), Some(vals[2])));
        write(dir.path(), &kept).unwrap();
        let copied = std::fs::read_to_string(dir.path().join("final/adapter_config.json")).unwrap();
        assert_eq!(copied, "{\"step\": 2}");
        let record: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.path().join(RECORD)).unwrap()).unwrap();
        assert_eq!((record["step"].as_u64(), record["last_step"].as_u64(), record["rule"].as_str()), (Some(2), Some(4), Some("best")));
        assert!(kept.line().contains("step 2, the best validated (95.0%") && kept.line().contains("--keep-last"), "{}", kept.line());
    }

    #[test]
    fn the_start_adapter_is_kept_when_no_step_beat_it_but_the_base_model_never_is() {
        let (dir, init) = run(&[1, 2]);
        let vals = [v(0, 0.9, None, 0.9), v(2, 0.5, None, 0.5)];
        let kept = choose(dir.path(), FinalAdapter::Best, Some(&init), 2, &vals);
        assert_eq!((kept.step, kept.source.to_string_lossy().into_owned()), (0, init.clone()));
        write(dir.path(), &kept).unwrap();
        assert_eq!(std::fs::read_to_string(dir.path().join("final/adapter_config.json")).unwrap(), "{\"start\": true}");
        // Without a start adapter, step 0 validated the base model: not an adapter to keep.
        let kept = choose(dir.path(), FinalAdapter::Best, None, 2, &vals);
        assert_eq!(kept.step, 2);
    }

    #[test]
    fn ties_go_to_finer_measures_then_to_the_later_step() {
        let (dir, init) = run(&[1, 2, 3]);
        let vals = [v(0, 0.5, Some(0.40), 0.5), v(1, 0.5, Some(0.45), 0.5), v(2, 0.5, Some(0.45), 0.6), v(3, 0.5, Some(0.45), 0.6)];
        assert_eq!(choose(dir.path(), FinalAdapter::Best, Some(&init), 3, &vals).step, 3, "equal on every measure: the later step");
        assert_eq!(choose(dir.path(), FinalAdapter::Best, Some(&init), 3, &vals[..3]).step, 2, "pass@1 ties, ground truth decides");
        assert_eq!(choose(dir.path(), FinalAdapter::Best, Some(&init), 3, &vals[..2]).step, 1, "pass@1 decides");
    }

    #[test]
    fn last_keeps_the_last_step_and_so_does_best_when_nothing_validated_is_on_disk() {
        let (dir, init) = run(&[1, 2]);
        let vals = [v(0, 0.9, None, 0.9), v(2, 0.1, None, 0.1)];
        let kept = choose(dir.path(), FinalAdapter::Last, Some(&init), 2, &vals);
        assert_eq!((kept.step, kept.validation), (2, Some(vals[1])));
        assert!(kept.line().starts_with("final/: the adapter of step 2 (the last; 10.0%"), "{}", kept.line());
        // A validated step whose checkpoint is gone, and a validation past the last step, are not
        // candidates.
        let gone = [v(1, 1.0, None, 1.0), v(3, 1.0, None, 1.0)];
        std::fs::remove_dir_all(checkpoint_dir(dir.path(), 1)).unwrap();
        assert_eq!(choose(dir.path(), FinalAdapter::Best, None, 2, &gone).step, 2);
    }

    #[test]
    fn validations_are_the_rows_with_a_validation_success() {
        let dir = tempfile::tempdir().unwrap();
        let m = dir.path().join("metrics.jsonl");
        let rows = [
            r#"{"step":0,"val_success":0.5,"val_ground_truth":0.6,"val_model":"init"}"#,
            r#"{"step":1,"reward":0.3,"trainer":{"loss":0.1}}"#,
            r#"{"step":2,"reward":0.4,"val_success":0.75,"val_pass1":0.7,"val_ground_truth":0.8}"#,
        ];
        std::fs::write(&m, rows.join("\n")).unwrap();
        assert_eq!(validations(&m), vec![v(0, 0.5, None, 0.6), v(2, 0.75, Some(0.7), 0.8)]);
        assert!(validations(&dir.path().join("missing.jsonl")).is_empty());
    }
}
