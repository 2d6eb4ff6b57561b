//! `metrics.csv`: the rows of `metrics.jsonl` as a table, nested keys flattened with dots
//! (`trainer.loss`, `time.rollout_s`). Rewritten whole after every row, because validation rows
//! bring columns that step rows lack and a CSV header cannot grow; the file stays small (one row
//! per step).

use std::path::Path;

use serde_json::Value;

/// Rewrites `csv` from every row of `jsonl`; columns in the order they first appear.
pub(crate) fn write_csv(jsonl: &Path, csv: &Path) -> std::io::Result<()> {
    let rows: Vec<Vec<(String, String)>> = std::fs::read_to_string(jsonl)?
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|v| {
            let mut cells = Vec::new();
            flatten("", &v, &mut cells);
            cells
        })
        .collect();
    let mut columns: Vec<String> = Vec::new();
    for r in &rows {
        for (k, _) in r {
            if !columns.contains(k) {
                columns.push(k.clone());
            }
        }
    }
    ta_types::atomic::write_atomic(csv, |out| {
        let mut w = csv::Writer::from_writer(out);
        w.write_record(&columns).map_err(std::io::Error::other)?;
        for r in &rows {
            let record = columns.iter().map(|c| r.iter().find(|(k, _)| k == c).map_or("", |(_, v)| v.as_str()));
            w.write_record(record).map_err(std::io::Error::other)?;
        }
        w.flush()
    })
}

fn flatten(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                flatten(&key, v, out);
            }
        }
        Value::Null => out.push((prefix.to_string(), String::new())),
        Value::String(s) => out.push((prefix.to_string(), s.clone())),
        other => out.push((prefix.to_string(), other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_with_different_keys_share_one_header() {
        let dir = tempfile::tempdir().unwrap();
        let jsonl = dir.path().join("metrics.jsonl");
        std::fs::write(
            &jsonl,
            concat!(
                r#"{"step": 0, "val_completion_rate": 0.25, "val_model": "base"}"#,
                "\n",
                r#"{"step": 1, "reward": 0.5, "trainer": {"loss": -0.1, "kl": null}, "time": {"rollout_s": 3.5}}"#,
                "\n",
                r#"{"step": 2, "reward": 0.75, "trainer": {"skipped": "every group had equal rewards, really"}, "time": {"rollout_s": 2}}"#,
                "\n",
            ),
        )
        .unwrap();
        let csv = dir.path().join("metrics.csv");
        write_csv(&jsonl, &csv).unwrap();
        let text = std::fs::read_to_string(&csv).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "step,val_completion_rate,val_model,reward,trainer.loss,trainer.kl,time.rollout_s,trainer.skipped");
        assert_eq!(lines[1], "0,0.25,base,,,,,");
        assert_eq!(lines[2], "1,,,0.5,-0.1,,3.5,");
        assert_eq!(lines[3], "2,,,0.75,,,2,\"every group had equal rewards, really\"");
        assert!(!dir.path().join("metrics.csv.tmp").exists());
    }
}
