//! What `list_tables` and `describe_table` say about the schema.
//!
//! The database never changes after it is built, so the descriptions are computed once per
//! process from the builder connection (where PRAGMAs are allowed) instead of on every call
//! through the guarded connection (where they are refused).

use std::fmt::Write as _;
use std::sync::OnceLock;

use rusqlite::Connection;

use crate::db::{self, TABLES};
use crate::query::{QueryOutput, format_table};

/// Low-cardinality text columns list their values when they have at most this many.
const MAX_LISTED_VALUES: usize = 6;

/// The precomputed descriptions.
pub struct Catalog {
    list: String,
    tables: Vec<(String, String)>,
}

/// The process-wide catalog of the demo database.
pub fn catalog() -> &'static Catalog {
    static CATALOG: OnceLock<Catalog> = OnceLock::new();
    CATALOG.get_or_init(|| Catalog::build(&db::database()).expect("describe the demo database"))
}

impl Catalog {
    fn build(conn: &Connection) -> rusqlite::Result<Self> {
        let mut list = String::from("Tables in the company database:\n");
        let mut tables = Vec::new();
        for (name, purpose) in TABLES {
            let rows: i64 = conn.query_row(&format!("SELECT count(*) FROM {name}"), [], |r| r.get(0))?;
            let _ = writeln!(list, "- {name} ({rows} rows): {purpose}");
            tables.push((name.to_string(), describe(conn, name, purpose, rows)?));
        }
        list.push_str("Call describe_table(table_name) to see a table's columns before writing a query.");
        Ok(Self { list, tables })
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

fn describe(conn: &Connection, table: &str, purpose: &str, rows: i64) -> rusqlite::Result<String> {
    let mut out = format!("Table {table} ({rows} rows): {purpose}\nColumns:\n");
    let fks = foreign_keys(conn, table)?;
    let mut stmt = conn.prepare(&format!("PRAGMA table_info({table})"))?;
    let columns: Vec<(String, String, bool, i64)> = stmt.query_map([], |r| Ok((r.get(1)?, r.get(2)?, r.get::<_, i64>(3)? != 0, r.get(5)?)))?.collect::<Result<_, _>>()?;
    for (name, ty, not_null, pk) in &columns {
        let _ = write!(out, "  {name} {ty}");
        if *pk > 0 {
            out.push_str(" PRIMARY KEY");
        }
        if *not_null || *pk > 0 {
            out.push_str(" NOT NULL");
        } else {
            let nulls: i64 = conn.query_row(&format!("SELECT count(*) FROM {table} WHERE {name} IS NULL"), [], |r| r.get(0))?;
            let _ = write!(out, " NULL allowed ({nulls} rows are NULL)");
        }
        if let Some((_, target, target_col)) = fks.iter().find(|(from, ..)| from == name) {
            let _ = write!(out, ", references {target}.{target_col}");
        }
        if ty == "TEXT" {
            let values: Vec<String> = conn
                .prepare(&format!("SELECT DISTINCT {name} FROM {table} WHERE {name} IS NOT NULL ORDER BY 1 LIMIT {}", MAX_LISTED_VALUES + 1))?
                .query_map([], |r| r.get(0))?
                .collect::<Result<_, _>>()?;
            if values.len() <= MAX_LISTED_VALUES && rows > 2 * values.len() as i64 {
                let quoted: Vec<String> = values.iter().map(|v| format!("'{v}'")).collect();
                let _ = write!(out, "; values: {}", quoted.join(", "));
            }
        }
        out.push('\n');
    }
    let referenced_by = referenced_by(conn, table)?;
    if !referenced_by.is_empty() {
        let _ = writeln!(out, "Referenced by: {}", referenced_by.join(", "));
    }
    let mut stmt = conn.prepare(&format!("SELECT * FROM {table} LIMIT 3"))?;
    let names: Vec<String> = stmt.column_names().map(String::from).collect();
    let n = names.len();
    let sample: Vec<Vec<rusqlite::types::Value>> = stmt.query_map([], |r| (0..n).map(|i| r.get(i)).collect())?.collect::<Result<_, _>>()?;
    let total_rows = sample.len();
    out.push_str("Sample rows:\n");
    out.push_str(&format_table(&QueryOutput { columns: names, rows: sample, total_rows }));
    Ok(out)
}

/// (column, referenced table, referenced column) for each foreign key of `table`.
fn foreign_keys(conn: &Connection, table: &str) -> rusqlite::Result<Vec<(String, String, String)>> {
    conn.prepare(&format!("PRAGMA foreign_key_list({table})"))?.query_map([], |r| Ok((r.get(3)?, r.get(2)?, r.get(4)?)))?.collect()
}

/// `other_table.column` for every foreign key elsewhere that points at `table`.
fn referenced_by(conn: &Connection, table: &str) -> rusqlite::Result<Vec<String>> {
    let mut out = Vec::new();
    for (other, _) in TABLES {
        for (from, target, _) in foreign_keys(conn, other)? {
            if target == table {
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
