//! What `list_tables` and `describe_table` say about the schema.
//!
//! The database never changes while it is served, so the descriptions are computed once per
//! database from a connection where PRAGMAs are allowed, instead of on every call through the
//! guarded connection (where they are refused). Table and column names come from the schema and
//! may need quoting (spaces, keywords), so every identifier put into SQL goes through [`quoted`].

use std::fmt::Write as _;

use rusqlite::Connection;
use rusqlite::types::Value;

use crate::query::{QueryOutput, format_cell, format_table};

/// Low-cardinality text columns list their values when they have at most this many.
const MAX_LISTED_VALUES: usize = 6;

/// The precomputed descriptions.
#[derive(Debug)]
pub struct Catalog {
    list: String,
    tables: Vec<(String, String)>,
}

impl Catalog {
    /// Describes `tables` (name, and a one-line purpose where one is known) under `heading`.
    pub fn build(conn: &Connection, heading: &str, tables: &[(String, Option<&str>)]) -> rusqlite::Result<Self> {
        let mut list = format!("{heading}\n");
        let names: Vec<&str> = tables.iter().map(|(name, _)| name.as_str()).collect();
        let mut described = Vec::new();
        for (name, purpose) in tables {
            let rows: i64 = conn.query_row(&format!("SELECT count(*) FROM {}", quoted(name)), [], |r| r.get(0))?;
            let _ = write!(list, "- {name} ({rows} rows)");
            if let Some(purpose) = purpose {
                let _ = write!(list, ": {purpose}");
            }
            list.push('\n');
            described.push((name.clone(), describe(conn, name, *purpose, rows, &names)?));
        }
        list.push_str("Call describe_table(table_name) to see a table's columns before writing a query.");
        Ok(Self { list, tables: described })
    }

    /// The text of `list_tables`.
    pub fn list_tables(&self) -> &str {
        &self.list
    }

    /// The text of `describe_table`, or an error message naming the tables that exist.
    /// Matching ignores case and surrounding quotes, since agents often write `"Employees"`.
    pub fn describe_table(&self, table_name: &str) -> Result<&str, String> {
        let wanted = table_name.trim().trim_matches(|c| c == '"' || c == '\'' || c == '`');
        if let Some((_, text)) = self.tables.iter().find(|(n, _)| n.eq_ignore_ascii_case(wanted)) {
            return Ok(text);
        }
        let names: Vec<&str> = self.tables.iter().map(|(n, _)| n.as_str()).collect();
        let mut msg = format!("unknown table '{table_name}'. The tables are: {}.", names.join(", "));
        if let Some(close) = closest(wanted, &names) {
            let _ = write!(msg, " Did you mean '{close}'?");
        }
        Err(msg)
    }
}

/// `name` as an SQL identifier: in double quotes, inner double quotes doubled.
fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Whether a declared column type gives SQLite's text affinity (`TEXT`, `VARCHAR(20)`, `CLOB`).
fn has_text_affinity(declared: &str) -> bool {
    let ty = declared.to_ascii_uppercase();
    !ty.contains("INT") && ["CHAR", "CLOB", "TEXT"].iter().any(|t| ty.contains(t))
}

/// One table's description; `all_tables` are searched for foreign keys pointing at it.
fn describe(conn: &Connection, table: &str, purpose: Option<&str>, rows: i64, all_tables: &[&str]) -> rusqlite::Result<String> {
    let mut out = format!("Table {table} ({rows} rows)");
    if let Some(purpose) = purpose {
        let _ = write!(out, ": {purpose}");
    }
    out.push_str("\nColumns:\n");
    let q_table = quoted(table);
    let fks = foreign_keys(conn, table)?;
    let mut stmt = conn.prepare("SELECT name, type, \"notnull\", pk FROM pragma_table_info(?1)")?;
    let columns: Vec<(String, String, bool, i64)> =
        stmt.query_map([table], |r| Ok((r.get(0)?, r.get(1)?, r.get::<_, i64>(2)? != 0, r.get(3)?)))?.collect::<Result<_, _>>()?;
    for (name, ty, not_null, pk) in &columns {
        let q_name = quoted(name);
        // Columns declared without a type (`CREATE TABLE t (a, b)`) show just their name.
        let _ = write!(out, "  {name}");
        if !ty.is_empty() {
            let _ = write!(out, " {ty}");
        }
        if *pk > 0 {
            out.push_str(" PRIMARY KEY");
        }
        if *not_null || *pk > 0 {
            out.push_str(" NOT NULL");
        } else {
            let nulls: i64 = conn.query_row(&format!("SELECT count(*) FROM {q_table} WHERE {q_name} IS NULL"), [], |r| r.get(0))?;
            let _ = write!(out, " NULL allowed ({nulls} rows are NULL)");
        }
        if let Some((_, target, target_col)) = fks.iter().find(|(from, ..)| from == name) {
            match target_col {
                Some(col) => {
                    let _ = write!(out, ", references {target}.{col}");
                }
                // `REFERENCES t` without a column means t's primary key.
                None => {
                    let _ = write!(out, ", references {target}");
                }
            }
        }
        // A column without a declared type (a CSV import) holds what was inserted: its values
        // are listed when they are all text, blanks left out.
        let untyped = ty.trim().is_empty();
        if has_text_affinity(ty) || untyped {
            let blank = if untyped { format!(" AND trim({q_name}) <> ''") } else { String::new() };
            let values: Vec<Value> = conn
                .prepare(&format!("SELECT DISTINCT {q_name} FROM {q_table} WHERE {q_name} IS NOT NULL{blank} ORDER BY 1 LIMIT {}", MAX_LISTED_VALUES + 1))?
                .query_map([], |r| r.get(0))?
                .collect::<Result<_, _>>()?;
            let listable = !untyped || values.iter().all(|v| matches!(v, Value::Text(_)));
            if listable && values.len() <= MAX_LISTED_VALUES && rows > 2 * values.len() as i64 {
                let listed: Vec<String> = values.iter().map(|v| if matches!(v, Value::Text(_)) { format!("'{}'", format_cell(v)) } else { format_cell(v) }).collect();
                let _ = write!(out, "; values: {}", listed.join(", "));
            }
        }
        out.push('\n');
    }
    let referenced_by = referenced_by(conn, table, all_tables)?;
    if !referenced_by.is_empty() {
        let _ = writeln!(out, "Referenced by: {}", referenced_by.join(", "));
    }
    let mut stmt = conn.prepare(&format!("SELECT * FROM {q_table} LIMIT 3"))?;
    let names: Vec<String> = stmt.column_names().map(String::from).collect();
    let n = names.len();
    let sample: Vec<Vec<Value>> = stmt.query_map([], |r| (0..n).map(|i| r.get(i)).collect())?.collect::<Result<_, _>>()?;
    let total_rows = sample.len();
    out.push_str("Sample rows:\n");
    out.push_str(&format_table(&QueryOutput { columns: names, rows: sample, total_rows }));
    Ok(out)
}

/// (column, referenced table, referenced column if named) for each foreign key of `table`.
fn foreign_keys(conn: &Connection, table: &str) -> rusqlite::Result<Vec<(String, String, Option<String>)>> {
    conn.prepare("SELECT \"from\", \"table\", \"to\" FROM pragma_foreign_key_list(?1)")?.query_map([table], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect()
}

/// `other_table.column` for every foreign key in `all_tables` that points at `table`.
fn referenced_by(conn: &Connection, table: &str, all_tables: &[&str]) -> rusqlite::Result<Vec<String>> {
    let mut out = Vec::new();
    for other in all_tables {
        for (from, target, _) in foreign_keys(conn, other)? {
            if target.eq_ignore_ascii_case(table) {
                out.push(format!("{other}.{from}"));
            }
        }
    }
    Ok(out)
}

/// The table name most like `wanted` (singular/plural slips, typos), if any is close.
fn closest<'a>(wanted: &str, names: &[&'a str]) -> Option<&'a str> {
    let wanted = wanted.to_ascii_lowercase();
    names
        .iter()
        .map(|n| (edit_distance(&wanted, n), *n))
        .filter(|(d, n)| *d <= 3 || n.contains(wanted.as_str()) || (wanted.len() > 3 && wanted.contains(*n)))
        .min_by_key(|(d, _)| *d)
        .map(|(_, n)| n)
        .or_else(|| names.iter().copied().find(|n| wanted.len() >= 4 && n.contains(&wanted[..4])))
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            cur.push((prev[j] + usize::from(ca != *cb)).min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, OnceLock};

    use crate::Database;
    use crate::db::TABLES;

    fn catalog() -> &'static Catalog {
        static DB: OnceLock<Arc<Database>> = OnceLock::new();
        DB.get_or_init(Database::demo).catalog()
    }

    #[test]
    fn list_names_every_table_with_row_counts() {
        let text = catalog().list_tables();
        for (name, _) in TABLES {
            assert!(text.contains(&format!("- {name} (")), "{text}");
        }
    }

    #[test]
    fn description_has_types_nullability_keys_values_and_samples() {
        let text = catalog().describe_table("employees").unwrap();
        assert!(text.contains("employee_id INTEGER PRIMARY KEY NOT NULL"), "{text}");
        assert!(text.contains("manager_id INTEGER NULL allowed"), "{text}");
        assert!(text.contains("references departments.department_id"), "{text}");
        assert!(text.contains("values: 'active', 'on_leave', 'terminated'"), "{text}");
        assert!(text.contains("Referenced by: "), "{text}");
        assert!(text.contains("Sample rows:\nemployee_id | first_name"), "{text}");
        assert!(text.ends_with("(3 rows)"), "{text}");
    }

    #[test]
    fn lookup_forgives_case_and_quotes_and_suggests_names() {
        assert!(catalog().describe_table("\"Projects\"").is_ok());
        let err = catalog().describe_table("employee").unwrap_err();
        assert!(err.contains("Did you mean 'employees'?"), "{err}");
        let err = catalog().describe_table("assignments").unwrap_err();
        assert!(err.contains("Did you mean 'project_assignments'?"), "{err}");
        let err = catalog().describe_table("xyz").unwrap_err();
        assert!(err.starts_with("unknown table 'xyz'. The tables are: departments, employees"), "{err}");
    }
}
