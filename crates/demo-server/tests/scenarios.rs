//! Every scenario in `scenarios/company.jsonl` is answered by its `reference_sql`, both on the
//! plain database and through the `run_query` tool, so the ground truth cannot drift from the data.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;

use rusqlite::types::Value as Sql;
use serde_json::{Value, json};
use ta_demo_server::{DemoServer, database};
use ta_types::scenario::{Expected, ExpectedRule, Scenario, Split, load_scenarios};

const DIFFICULTIES: [&str; 6] = ["single_table", "join", "aggregate", "multi_hop", "schema_exploration", "error_recovery"];

fn scenarios() -> Vec<Scenario> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/company.jsonl");
    load_scenarios(&path).expect("scenarios/company.jsonl parses")
}

fn reference_sql(s: &Scenario) -> &str {
    s.extra.get("reference_sql").and_then(Value::as_str).unwrap_or_else(|| panic!("{}: no reference_sql", s.id))
}

fn rows(conn: &rusqlite::Connection, sql: &str) -> Vec<Vec<Sql>> {
    let mut stmt = conn.prepare(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    let n = stmt.column_count();
    stmt.query_map([], |r| (0..n).map(|i| r.get::<_, Sql>(i)).collect()).unwrap().map(Result::unwrap).collect()
}

fn as_number(v: &Sql) -> Option<f64> {
    match v {
        Sql::Integer(i) => Some(*i as f64),
        Sql::Real(f) => Some(*f),
        Sql::Text(t) => t.parse().ok(),
        _ => None,
    }
}

fn as_text(v: &Sql) -> String {
    match v {
        Sql::Integer(i) => i.to_string(),
        Sql::Real(f) => f.to_string(),
        Sql::Text(t) => t.clone(),
        Sql::Null => "NULL".into(),
        Sql::Blob(_) => "<blob>".into(),
    }
}

fn json_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Checks that the reference result reproduces `expected`, per matcher kind.
fn check(s: &Scenario, result: &[Vec<Sql>]) {
    let id = &s.id;
    let first = result.first().and_then(|r| r.first()).unwrap_or_else(|| panic!("{id}: reference query returned nothing"));
    let number_matches = |x: f64, tol: f64| {
        assert_eq!(result.len(), 1, "{id}: a number answer needs exactly one row");
        let got = as_number(first).unwrap_or_else(|| panic!("{id}: {first:?} is not a number"));
        assert!((got - x).abs() <= tol + 1e-9, "{id}: reference gives {got}, expected {x} ± {tol}");
    };
    match s.expected.as_ref().unwrap_or_else(|| panic!("{id}: no expected")) {
        Expected::Number(x) => number_matches(*x, 0.0),
        Expected::Rule(ExpectedRule::Number { number, tolerance }) => number_matches(*number, *tolerance),
        Expected::Text(t) | Expected::Rule(ExpectedRule::Exact(t)) => {
            assert_eq!(result.len(), 1, "{id}");
            assert_eq!(as_text(first).trim().to_lowercase(), t.trim().to_lowercase(), "{id}");
        }
        Expected::Rule(ExpectedRule::Contains(t)) => {
            assert_eq!(result.len(), 1, "{id}: a single answer needs exactly one row");
            let cells: Vec<String> = result[0].iter().map(as_text).collect();
            assert!(cells.join(" ").to_lowercase().contains(&t.to_lowercase()), "{id}: {cells:?} lacks {t:?}");
        }
        Expected::Rule(ExpectedRule::Set(values)) => {
            let want: BTreeSet<String> = values.iter().map(json_text).collect();
            let got: BTreeSet<String> = result.iter().map(|r| as_text(&r[0])).collect();
            assert_eq!(got, want, "{id}");
            assert_eq!(result.len(), want.len(), "{id}: duplicate rows in the reference result");
        }
        Expected::Rule(ExpectedRule::Regex(_)) => panic!("{id}: regex answers are not used by the demo scenarios"),
    }
}

#[test]
fn every_expected_answer_is_reproduced_by_its_reference_sql() {
    let conn = database();
    let all = scenarios();
    for s in &all {
        check(s, &rows(&conn, reference_sql(s)));
    }
}

#[test]
fn every_reference_sql_also_runs_through_the_read_only_tool() {
    let server = DemoServer::new(ta_demo_server::Database::demo()).unwrap();
    for s in scenarios() {
        let reply = server.call("run_query", json!({ "sql": reference_sql(&s) }).as_object().unwrap());
        assert!(!reply.is_error, "{}: {}", s.id, reply.text);
        assert!(!reply.text.contains("showing"), "{}: reference result is truncated", s.id);
    }
}

#[test]
fn scenario_set_is_complete_and_balanced() {
    let all = scenarios();
    assert!(all.len() >= 80, "{} scenarios", all.len());
    let mut per: HashMap<(String, Split), usize> = HashMap::new();
    for s in &all {
        let d = s.difficulty.as_ref().map(ToString::to_string).unwrap_or_else(|| panic!("{}: no difficulty", s.id));
        assert!(DIFFICULTIES.contains(&d.as_str()), "{}: unknown difficulty {d}", s.id);
        assert!(!s.tags.is_empty(), "{}: no tags", s.id);
        *per.entry((d, s.split.unwrap_or_else(|| panic!("{}: no split", s.id)))).or_default() += 1;
    }
    for d in DIFFICULTIES {
        for split in [Split::Train, Split::Validation] {
            assert!(per.get(&(d.to_string(), split)).copied().unwrap_or(0) > 0, "no {split} scenario for {d}");
        }
    }
    let validation = all.iter().filter(|s| s.split == Some(Split::Validation)).count() as f64 / all.len() as f64;
    assert!((0.18..=0.32).contains(&validation), "validation share {validation}");
}
