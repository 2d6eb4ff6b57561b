//! Whether another query answers a task the way its own SQL does, decided on the server: what
//! `scenarios paraphrase --solve` asks of a rewording (a solver writes SQL for the rewording
//! alone; the rewording is kept only if that SQL gives the task's rows).

use serde_json::Value;
use ta_rollout::ToolHost;

use crate::SynthError;
use crate::exec::Sql;
use crate::schema::{Column, Kind, Schema, USER_TABLES, literal};

/// The `CREATE TABLE` statements of the database's tables, by name.
pub async fn create_statements<T: ToolHost>(sql: &Sql<'_, T>) -> Result<Vec<(String, String)>, SynthError> {
    let v = sql.json(&format!("(SELECT json_group_array(json_array(m.name, m.sql)) FROM sqlite_master m WHERE {USER_TABLES} AND m.sql IS NOT NULL)")).await?;
    Ok(v.as_array().into_iter().flatten().filter_map(|r| Some((r.get(0)?.as_str()?.to_string(), r.get(1)?.as_str()?.to_string()))).collect())
}

/// A category's values are shown to a solver when the column has at most this many.
pub const CATEGORY_VALUES: u64 = 12;

/// What a solver is shown of the tables `query` reads (their names as words of it, case aside),
/// and no more: each `CREATE TABLE` statement, then a comment line for each text column with at
/// most [`CATEGORY_VALUES`] values that repeat (a category), naming them (what a
/// `describe_table` shows an agent), so a rewording that says "former employees" can be solved
/// as `status = 'terminated'`.
pub fn shown_tables(statements: &[(String, String)], schema: &Schema, query: &str) -> Vec<String> {
    let words: Vec<String> = query.split(|c: char| !(c.is_alphanumeric() || c == '_')).map(str::to_lowercase).collect();
    statements
        .iter()
        .filter(|(name, _)| words.contains(&name.to_lowercase()))
        .map(|(name, statement)| {
            let mut shown = statement.clone();
            let table = schema.tables.iter().find(|t| &t.name == name);
            let (columns, rows) = table.map_or((&[][..], 0), |t| (t.columns.as_slice(), t.rows));
            // A category's values repeat; a column of distinct values names its rows.
            let category =
                |c: &&Column| c.kind == Kind::Text && c.distinct > 0 && c.distinct <= CATEGORY_VALUES && c.distinct < rows && c.values.len() as u64 == c.distinct;
            for c in columns.iter().filter(category) {
                let values: Vec<String> = c.values.iter().map(|v| literal(v.as_str().unwrap_or_default())).collect();
                shown.push_str(&format!("\n-- {}: {}", c.name, values.join(", ")));
            }
            shown
        })
        .collect()
}

/// How another query's rows compare with a task's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rows {
    /// The same rows, as sets.
    Same,
    /// Rows either side lacks.
    Other,
    /// Another number of columns (SQLite refuses the `EXCEPT`).
    OtherColumns,
    /// The other query does not run on its own (or is not one statement).
    Fails,
}

/// Whether `b` gives `a`'s rows, as sets (order and repeats aside): each side's rows the other
/// lacks are counted with `EXCEPT` in one query. With a `tolerance` (the task's answer is
/// `{"number", "tolerance"}`), a single numeric cell within it of `a`'s also counts as the same,
/// since the task's matcher accepts it: a rewording that leaves out "(one decimal)" is still
/// right when the unrounded value is close enough. Only when the comparison fails is `b` run
/// alone, to tell a query that fails from one of another shape. `a` is a checked task's SQL: it
/// runs.
pub async fn same_rows<T: ToolHost>(sql: &Sql<'_, T>, a: &str, b: &str, tolerance: Option<f64>) -> Result<Rows, SynthError> {
    let (a, b) = (a.trim().trim_end_matches(';'), b.trim().trim_end_matches(';'));
    let missing = |x: &str, y: &str| format!("(SELECT count(*) FROM (SELECT * FROM ({x}) EXCEPT SELECT * FROM ({y})))");
    match sql.json(&format!("json_array({}, {})", missing(a, b), missing(b, a))).await {
        Ok(v) if v == Value::from(vec![0, 0]) => Ok(Rows::Same),
        Ok(_) => match tolerance.filter(|t| t.is_finite() && *t >= 0.0) {
            Some(t) => match sql.json(&within(a, b, t)).await {
                Ok(v) => Ok(if v == 1 { Rows::Same } else { Rows::Other }),
                // Several columns make the scalar subqueries a query error: not one cell, not the same.
                Err(SynthError::Query { .. }) => Ok(Rows::Other),
                Err(e) => Err(e),
            },
            None => Ok(Rows::Other),
        },
        Err(SynthError::Query { .. }) => match sql.json(&format!("(SELECT count(*) FROM ({b}))")).await {
            Ok(_) => Ok(Rows::OtherColumns),
            Err(SynthError::Query { .. }) => Ok(Rows::Fails),
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    }
}

/// An expression that is 1 when `a` and `b` each give one row of one numeric cell, at most `t`
/// apart.
fn within(a: &str, b: &str, t: f64) -> String {
    let one = |x: &str| format!("(SELECT count(*) FROM ({x})) = 1 AND typeof((SELECT * FROM ({x}))) IN ('integer', 'real')");
    format!("({} AND {} AND abs((SELECT * FROM ({a})) - (SELECT * FROM ({b}))) <= {t:?})", one(a), one(b))
}
