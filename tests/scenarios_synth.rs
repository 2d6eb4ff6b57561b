//! `scenarios synth` on the demo server, then `collect --reference` replaying the synthesized
//! scenarios' reference steps through the same server.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::process::Command;

use common::bin;
use serde_json::Value;

fn jsonl(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn synth_on_the_demo_server_then_reference_traces() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("synth");
    let out =
        Command::new(bin()).args(["scenarios", "synth", "--server", "train-agent demo-server", "--n", "400", "--seed", "1", "--out"]).arg(&out_dir).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("query tool        run_query (list: list_tables, describe: describe_table)"), "{stdout}");
    assert!(stdout.contains("per difficulty") && stdout.contains("per table"), "{stdout}");
    assert!(!stdout.contains(ta_synth::QUERY_FAILED), "every composed query is valid SQL on the demo's several join paths: {stdout}");

    let scenarios = jsonl(&out_dir.join("scenarios.jsonl"));
    assert_eq!(scenarios.len(), 400);
    let tables: BTreeSet<&str> = scenarios.iter().flat_map(|s| s["tags"].as_array().unwrap().iter().filter_map(Value::as_str)).collect();
    for t in ["departments", "employees", "projects", "project_assignments"] {
        assert!(tables.contains(t), "no scenario touches {t}");
    }
    let levels: BTreeSet<u64> = scenarios.iter().map(|s| s["difficulty"].as_u64().unwrap()).collect();
    assert_eq!(levels, (1..=5).collect());
    let mut split_of_sql: HashMap<&str, &str> = HashMap::new();
    for s in &scenarios {
        assert_eq!((s["source"].as_str(), s["checked"].as_bool()), (Some("synth"), Some(true)));
        let steps: Vec<&str> = s["reference"].as_array().unwrap().iter().map(|r| r["tool"].as_str().unwrap()).collect();
        assert_eq!((steps[0], steps[steps.len() - 1]), ("list_tables", "run_query"), "{s}");
        let (sql, split) = (s["sql"].as_str().unwrap(), s["split"].as_str().unwrap());
        for table in s["tags"].as_array().unwrap().iter().skip(1).filter_map(Value::as_str) {
            // a question about the schema reads the catalogue about its table
            let read = if s["phrasing"] == ta_synth::PHRASING_SCHEMA {
                sql.contains(&format!("'{table}'"))
            } else {
                sql.contains(&format!("FROM {table}")) || sql.contains(&format!("JOIN {table}"))
            };
            assert!(read, "{table} is not read by {sql}");
        }
        assert_eq!(*split_of_sql.entry(sql).or_insert(split), split, "paraphrases of {sql} cross the split");
    }
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(out_dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["scenarios"], 400);

    // `--recovery-share 0.25`: a quarter of the traces first write their query with a slip the
    // server rejects (shown, weight 0), then the right query; 0 (the default): none.
    let collect = |name: &str, share: &str| {
        let traces_dir = dir.path().join(name);
        let out = Command::new(bin())
            .args(["collect", "--reference", "--server", "train-agent demo-server", "--limit", "40", "--recovery-share", share, "--scenarios"])
            .arg(out_dir.join("scenarios.jsonl"))
            .arg("--out")
            .arg(&traces_dir)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success() && stdout.contains("reference traces  40 of 40"), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
        jsonl(&traces_dir.join("traces.jsonl"))
    };
    let by_id: HashMap<&str, &Value> = scenarios.iter().map(|s| (s["id"].as_str().unwrap(), s)).collect();
    for (name, share) in [("traces", "0.25"), ("direct", "0")] {
        let mut slipped = 0;
        for t in &collect(name, share) {
            let s = by_id[t["scenario_id"].as_str().unwrap()];
            assert_eq!(t["reward_parts"]["ground_truth"], 1.0);
            let messages = t["messages"].as_array().unwrap();
            let steps: Vec<&Value> = s["reference"].as_array().unwrap().iter().collect();
            let turns: Vec<(usize, &Value)> = messages.iter().enumerate().filter(|(_, m)| m["role"] == "assistant").collect();
            let mut calls: Vec<&Value> = Vec::new();
            let mut skip = 0;
            for (i, turn) in &turns {
                let call = &turn["tool_calls"][0]["function"];
                if skip > 0 {
                    skip -= 1;
                } else if turn.get("weight").is_some() {
                    // the slip: a query the server rejected, not trained; then the look-up of
                    // the misnamed name, then the right query
                    slipped += 1;
                    assert_eq!((turn["weight"].as_u64(), call["name"].as_str()), (Some(0), Some("run_query")), "{turn}");
                    let error = messages[i + 1]["content"].as_str().unwrap();
                    assert!(error.starts_with("Error: "), "the server's error: {error}");
                    let look = &messages[i + 2]["tool_calls"][0]["function"];
                    let shown = messages[i + 3]["content"].as_str().unwrap();
                    let right = &messages[i + 4]["tool_calls"][0]["function"];
                    assert_eq!(right["name"], "run_query");
                    assert_ne!(right["arguments"], call["arguments"], "repaired");
                    // the look-up shows the name the slip got wrong: a table's columns, or the tables
                    match look["name"].as_str().unwrap() {
                        "describe_table" => assert!(error.contains("no such column"), "{error}"),
                        "list_tables" => assert!(error.contains("no such table"), "{error}"),
                        other => panic!("looked up with {other}"),
                    }
                    let right_sql: Value = serde_json::from_str(right["arguments"].as_str().unwrap()).unwrap();
                    let wrong_sql: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
                    let words =
                        |v: &Value| -> BTreeSet<String> { v["sql"].as_str().unwrap().split(|c: char| !c.is_alphanumeric() && c != '_').map(str::to_lowercase).collect() };
                    let fixed: Vec<String> = words(&right_sql).difference(&words(&wrong_sql)).cloned().collect();
                    assert!(!fixed.is_empty() && fixed.iter().all(|w| shown.to_lowercase().contains(w.as_str())), "{fixed:?} not shown by the look-up: {shown}");
                    assert_eq!((t["tool_errors"].as_u64(), t["outcome"].as_str()), (Some(1), Some("completed")));
                    skip = 1;
                } else {
                    calls.push(call);
                }
            }
            let names: Vec<&str> = calls.iter().map(|c| c["name"].as_str().unwrap()).collect();
            assert_eq!(names[..names.len() - 1], steps.iter().map(|r| r["tool"].as_str().unwrap()).collect::<Vec<_>>()[..], "the reference steps, replayed");
            let sql: Value = serde_json::from_str(calls[calls.len() - 2]["arguments"].as_str().unwrap()).unwrap();
            assert_eq!(sql["sql"], steps[steps.len() - 1]["arguments"]["sql"], "the right query is the reference's");
            assert_eq!(names.last(), Some(&"complete_task"));
            assert!(
                messages[messages.len() - 2]["content"].as_str().unwrap().ends_with("row)")
                    || messages[messages.len() - 2]["content"].as_str().unwrap().contains("rows)"),
                "the query's real result is in the trace"
            );
        }
        match share {
            "0" => assert_eq!(slipped, 0),
            _ => assert!((5..=15).contains(&slipped), "about a quarter of 40 traces slip: {slipped}"),
        }
    }
}

#[test]
fn templates_levels_and_weights_are_chosen_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let synth = |out: &std::path::Path, extra: &[&str]| {
        Command::new(bin()).args(["scenarios", "synth", "--server", "train-agent demo-server", "--seed", "1", "--out"]).arg(out).args(extra).output().unwrap()
    };
    let chosen = dir.path().join("chosen");
    let out = synth(&chosen, &["--templates", "count_rows,count_where", "--max-difficulty", "2"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let scenarios = jsonl(&chosen.join("scenarios.jsonl"));
    assert!(scenarios.iter().all(|s| ["count_rows", "count_where"].contains(&s["template"].as_str().unwrap()) && s["difficulty"].as_u64() <= Some(2)));
    // every condition on a table's own columns is asked about: each status of a project
    let statuses: BTreeSet<&str> =
        scenarios.iter().filter_map(|s| s["sql"].as_str()?.strip_prefix("SELECT count(*) FROM projects WHERE status = '")?.strip_suffix('\'')).collect();
    assert_eq!(statuses, BTreeSet::from(["active", "cancelled", "completed", "on_hold", "planned"]));
    // the whole mix, capped at as many tasks, holds fewer of these
    let mixed = dir.path().join("mixed");
    let n = scenarios.len().to_string();
    assert!(synth(&mixed, &["--n", &n]).status.success());
    let counts = jsonl(&mixed.join("scenarios.jsonl")).iter().filter(|s| s["template"] == "count_where" && s["difficulty"].as_u64() <= Some(2)).count();
    assert!(counts * 2 < scenarios.len(), "{counts} of {} in the mix", scenarios.len());

    // weights draw templates in proportion (one not named at their mean, here 2): lookups twice
    // as often as the others, no count_rows
    let weights = dir.path().join("weights.json");
    std::fs::write(&weights, r#"{"lookup": 4, "count_rows": 0}"#).unwrap();
    let weighted = dir.path().join("weighted");
    assert!(synth(&weighted, &["--n", "300", "--template-weights", weights.to_str().unwrap()]).status.success());
    let even = dir.path().join("even");
    assert!(synth(&even, &["--n", "300"]).status.success());
    let of = |d: &std::path::Path, t: &str| jsonl(&d.join("scenarios.jsonl")).iter().filter(|s| s["template"] == t).count();
    assert_eq!(of(&weighted, "count_rows"), 0);
    assert!(of(&even, "count_rows") > 0);
    assert!(2 * of(&weighted, "lookup") > 3 * of(&even, "lookup"), "{} vs {}", of(&weighted, "lookup"), of(&even, "lookup"));

    // a join mix draws each template's questions by the joins of their SQL: mostly one-table
    // at 8,1,1 where the grammar's own mix joins more often than not; none joined at 1,0,0
    let joins = |s: &Value| s["sql"].as_str().unwrap().split_whitespace().filter(|w| w.eq_ignore_ascii_case("join")).count();
    let joined = |d: &std::path::Path| jsonl(&d.join("scenarios.jsonl")).iter().filter(|s| joins(s) > 0).count();
    let leaning = dir.path().join("leaning");
    let out = synth(&leaning, &["--n", "300", "--join-mix", "8,1,1"]);
    assert!(out.status.success() && String::from_utf8_lossy(&out.stdout).contains("per joins"), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(2 * joined(&even) > 300 && 3 * joined(&leaning) < 300, "joined: {} of the grammar's mix, {} at 8,1,1", joined(&even), joined(&leaning));
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(leaning.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["per_joins"]["0"].as_u64().unwrap() as usize, 300 - joined(&leaning), "{summary}");
    let one_table = dir.path().join("one-table");
    assert!(synth(&one_table, &["--n", "100", "--join-mix", "1,0,0"]).status.success());
    assert!(joined(&one_table) == 0 && jsonl(&one_table.join("scenarios.jsonl")).len() == 100);
    for bad in ["1,2", "1,-1,0", "0,0,0", "a,b,c"] {
        let out = synth(&dir.path().join("bad-mix"), &["--join-mix", bad]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains("is not a join mix: give three weights"), "{bad}: {stderr}");
    }

    std::fs::write(&weights, r#"{"lookup": -1}"#).unwrap();
    let out = synth(&dir.path().join("negative"), &["--template-weights", weights.to_str().unwrap()]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("lookup has the weight -1"));

    let out = synth(&dir.path().join("bad"), &["--templates", "count_rowz"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("count_rowz") && stderr.contains("count_rows, count_where"), "{stderr}");
    assert!(!dir.path().join("bad").join("scenarios.jsonl").exists());
}
