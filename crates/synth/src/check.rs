//! Running a candidate's SQL through the server and turning its rows into the expected answer.

use serde_json::Value;
use ta_rollout::ToolHost;
use ta_types::Expected;
use ta_types::scenario::ExpectedRule;

use crate::SynthError;
use crate::candidate::{Candidate, MAX_LIST, Shape};
use crate::exec::Sql;

/// A candidate that passed: its rows and the answer they give.
#[derive(Debug, Clone, PartialEq)]
pub struct Checked {
    pub rows: Vec<Vec<Value>>,
    pub expected: Expected,
}

/// Runs `c.sql` (and its tie probe, in the same call) through the server. `Ok(Err(reason))`
/// drops the candidate; `Err` is a query error or a broken connection.
pub async fn check<T: ToolHost>(sql: &Sql<'_, T>, c: &Candidate) -> Result<Result<Checked, String>, SynthError> {
    let v = sql.json(&rows_expr(c)).await?;
    let table = |key: &str| -> Vec<Vec<Value>> { v[key].as_array().into_iter().flatten().map(|r| r.as_array().cloned().unwrap_or_default()).collect() };
    let rows = table("rows");
    if let Some(p) = &c.probe {
        let probe = table("probe");
        let metric = |i: usize| probe.get(i).and_then(|r| r.get(p.metric));
        if metric(p.index).is_none() {
            return Ok(Err("no rows".into()));
        }
        if metric(p.index + 1).is_none() {
            return Ok(Err("nothing to rank against".into()));
        }
        if metric(p.index) == metric(p.index + 1) || (p.exact_rank && p.index > 0 && metric(p.index) == metric(p.index - 1)) {
            return Ok(Err("tied with a neighbour in the ranking".into()));
        }
    }
    if c.sql.starts_with("SELECT count(") && rows == [vec![Value::from(0)]] {
        // "how many heads have more than 5 departments": nothing to count is rarely a question
        return Ok(Err("counts nothing".into()));
    }
    Ok(expected(c.answer, &rows).map(|expected| Checked { rows, expected }))
}

/// Rows read of a candidate's result: one more than a list may hold, so that "too many to
/// list" is decided at once, whatever the table's size (an unbounded list of 143k rows took
/// minutes to come back, only to be dropped).
pub const ROWS_READ: usize = MAX_LIST + 1;

/// The JSON expression that [`check`] runs: `{"rows": [...], "probe": [...]}`, each from its
/// SELECT, the rows bounded by [`ROWS_READ`]. The queries name no output columns (people's SQL
/// does not), so a common table expression names them by position.
pub fn rows_expr(c: &Candidate) -> String {
    let rows_of = |select: &str, width: usize, limit: Option<usize>| {
        let names: Vec<String> = (0..width).map(|i| format!("c{i}")).collect();
        let names = names.join(", ");
        let limit = limit.map(|n| format!(" LIMIT {n}")).unwrap_or_default();
        format!("json((WITH q({names}) AS ({select}) SELECT json_group_array(json_array({names})) FROM (SELECT * FROM q{limit})))")
    };
    let mut expr = format!("json_object('rows', {}", rows_of(&c.sql, c.width, Some(ROWS_READ)));
    if let Some(p) = &c.probe {
        expr.push_str(&format!(", 'probe', {}", rows_of(&p.sql, p.width, None)));
    }
    expr.push(')');
    expr
}

/// The expected answer from the rows, with its matcher: integers as plain numbers, other numbers
/// within 0.01 (questions ask for two decimals), text as a phrase, several rows as a set.
pub fn expected(shape: Shape, rows: &[Vec<Value>]) -> Result<Expected, String> {
    let first = |r: &Vec<Value>| r.first().cloned().unwrap_or(Value::Null);
    match (shape, rows) {
        (_, []) => Err("no rows".into()),
        (Shape::Row, [row]) => cells(row),
        (Shape::Row, _) => Err("several rows where one was asked for".into()),
        (_, [row]) => one(&first(row)),
        (Shape::One, _) => Err("several rows where one was asked for".into()),
        (Shape::List, rows) if rows.len() > MAX_LIST => Err(format!("more than {MAX_LIST} rows to list")),
        (Shape::List, rows) => {
            let values: Vec<Value> = rows.iter().map(first).collect();
            if values.iter().any(missing) {
                return Err("a NULL or empty value in the list".into());
            }
            Ok(Expected::Rule(ExpectedRule::Set(values)))
        }
    }
}

/// One row of several cells, all of them the answer: the set of its cells (a NULL or empty
/// cell drops the question, as a NULL answer does).
fn cells(row: &[Value]) -> Result<Expected, String> {
    if row.iter().any(missing) {
        return Err("a NULL or empty cell in the row".into());
    }
    Ok(Expected::Rule(ExpectedRule::Set(row.to_vec())))
}

/// NULL or blank text: no answer to ask for.
fn missing(v: &Value) -> bool {
    v.is_null() || v.as_str().is_some_and(|s| s.trim().is_empty())
}

fn one(v: &Value) -> Result<Expected, String> {
    match v {
        Value::Null => Err("the answer is NULL".into()),
        Value::Number(n) if n.is_i64() || n.is_u64() => Ok(Expected::Number(n.as_f64().unwrap_or_default())),
        Value::Number(n) => Ok(Expected::Rule(ExpectedRule::Number { number: n.as_f64().unwrap_or_default(), tolerance: 0.01 })),
        Value::String(s) if s.trim().is_empty() => Err("the answer is empty text".into()),
        Value::String(s) => Ok(Expected::Text(s.clone())),
        other => Ok(Expected::Text(other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn matchers_follow_the_values() {
        let row = |v: Value| vec![vec![v]];
        assert_eq!(expected(Shape::One, &row(json!(9))), Ok(Expected::Number(9.0)));
        assert_eq!(expected(Shape::One, &row(json!(73250.67))), Ok(Expected::Rule(ExpectedRule::Number { number: 73250.67, tolerance: 0.01 })));
        assert_eq!(expected(Shape::One, &row(json!("Boston"))), Ok(Expected::Text("Boston".into())));
        assert!(expected(Shape::One, &row(Value::Null)).is_err());
        assert!(expected(Shape::One, &[]).is_err());
        assert!(expected(Shape::One, &[vec![json!(1)], vec![json!(2)]]).is_err());
        assert_eq!(expected(Shape::List, &[vec![json!("a")], vec![json!("b")]]), Ok(Expected::Rule(ExpectedRule::Set(vec![json!("a"), json!("b")]))));
        assert_eq!(expected(Shape::List, &row(json!("a"))), Ok(Expected::Text("a".into())));
        let many: Vec<Vec<Value>> = (0..13).map(|i| vec![json!(i)]).collect();
        assert!(expected(Shape::List, &many).is_err());
    }

    #[test]
    fn a_list_over_a_big_table_reads_one_row_more_than_a_list_holds() {
        let dir = tempfile::tempdir().unwrap();
        let conn = rusqlite::Connection::open(dir.path().join("big.db")).unwrap();
        conn.execute_batch(
            "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, kind TEXT);
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200000)
             INSERT INTO items SELECT i, 'item ' || i, CASE i % 2 WHEN 0 THEN 'even' ELSE 'odd' END FROM n;",
        )
        .unwrap();
        let c = Candidate {
            template: "list_where",
            difficulty: 2,
            tables: vec!["items".into()],
            phrasings: vec!["List every item whose kind is 'even'.".into()],
            technical: None,
            sql: "SELECT name FROM items WHERE kind = 'even'".into(),
            width: 1,
            answer: Shape::List,
            probe: None,
            lookups: Vec::new(),
        };
        let expr = rows_expr(&c);
        assert!(expr.contains(&format!("AS ({}) SELECT", c.sql)) && expr.contains(&format!("FROM q LIMIT {ROWS_READ})")), "{expr}");
        let text: String = conn.query_row(&format!("SELECT {expr}"), [], |r| r.get(0)).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        let rows: Vec<Vec<Value>> = v["rows"].as_array().unwrap().iter().map(|r| r.as_array().unwrap().clone()).collect();
        assert_eq!(rows.len(), MAX_LIST + 1);
        assert_eq!(expected(Shape::List, &rows), Err(format!("more than {MAX_LIST} rows to list")));
    }
}
