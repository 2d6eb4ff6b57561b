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

/// Whether two SELECTs give the same rows, as sets (order and repeats aside): each side's rows
/// the other lacks are counted with `EXCEPT` in one query. A different number of columns is a
/// query error (SQLite refuses the `EXCEPT`), as is anything but one statement.
pub async fn same_rows<T: ToolHost>(sql: &Sql<'_, T>, a: &str, b: &str) -> Result<bool, SynthError> {
    let (a, b) = (a.trim().trim_end_matches(';'), b.trim().trim_end_matches(';'));
    let missing = |x: &str, y: &str| format!("(SELECT count(*) FROM (SELECT * FROM ({x}) EXCEPT SELECT * FROM ({y})))");
    let v = sql.json(&format!("json_array({}, {})", missing(a, b), missing(b, a))).await?;
    Ok(v == Value::from(vec![0, 0]))
}
