//! Running one guarded SELECT and rendering its result as a compact text table.
//!
//! The output is read by a small language model, so it is plain and short: a header line of
//! column names, one line per row with cells separated by ` | `, `NULL` spelled out, and a
//! footer that says how many rows there were and whether the listing was cut.

use rusqlite::types::{Value, ValueRef};

use crate::guard::{GuardError, GuardedConnection, MAX_RESULT_BYTES};

/// Rows shown by `run_query`; the rest are counted, not shown.
pub const MAX_ROWS: usize = 100;

/// Longest cell shown, in characters.
const MAX_CELL_CHARS: usize = 200;

/// A query's result: the first rows and how many there were in all.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryOutput {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Value>>,
    pub total_rows: usize,
}

/// Runs `sql` (one read-only SELECT) and keeps at most `max_rows` rows.
pub fn run(conn: &GuardedConnection, sql: &str, max_rows: usize) -> Result<QueryOutput, GuardError> {
    let mut stmt = conn.prepare_select(sql)?;
    let columns: Vec<String> = stmt.column_names().map(String::from).collect();
    let n = columns.len();
    let mut rows = Vec::new();
    let mut total_rows = 0;
    let mut bytes = 0;
    let mut cursor = stmt.query([]).map_err(|e| conn.step_error(e))?;
    while let Some(row) = cursor.next().map_err(|e| conn.step_error(e))? {
        conn.check_deadline()?;
        total_rows += 1;
        if rows.len() < max_rows {
            let mut cells = Vec::with_capacity(n);
            for i in 0..n {
                let cell = row.get_ref(i)?;
                bytes += cell.as_bytes().map_or(8, <[u8]>::len);
                if bytes > MAX_RESULT_BYTES {
                    return Err(GuardError::TooLarge);
                }
                cells.push(shown(cell));
            }
            rows.push(cells);
        }
    }
    Ok(QueryOutput { columns, rows, total_rows })
}

/// A cell as kept for display: text cut just past [`MAX_CELL_CHARS`] (so [`format_cell`] still
/// marks the cut), blobs as is (they show as their size only, and the result cap bounds them).
fn shown(cell: ValueRef<'_>) -> Value {
    match cell {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::Integer(i),
        ValueRef::Real(f) => Value::Real(f),
        ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).chars().take(MAX_CELL_CHARS + 1).collect()),
        ValueRef::Blob(b) => Value::Blob(b.to_vec()),
    }
}

/// Renders a result as the text the agent sees.
pub fn format_table(out: &QueryOutput) -> String {
    let mut text = out.columns.join(" | ");
    text.push('\n');
    for row in &out.rows {
        let cells: Vec<String> = row.iter().map(format_cell).collect();
        text.push_str(&cells.join(" | "));
        text.push('\n');
    }
    if out.total_rows == 0 {
        text.push_str("(0 rows)");
    } else if out.rows.len() < out.total_rows {
        text.push_str(&format!("(showing {} of {} rows; use WHERE, LIMIT or an aggregate such as COUNT(*) to narrow the result)", out.rows.len(), out.total_rows));
    } else if out.total_rows == 1 {
        text.push_str("(1 row)");
    } else {
        text.push_str(&format!("({} rows)", out.total_rows));
    }
    text
}

/// One cell: integers as is, reals with at most 4 decimals, text on one line.
pub fn format_cell(value: &Value) -> String {
    match value {
        Value::Null => "NULL".into(),
        Value::Integer(i) => i.to_string(),
        Value::Real(f) => format_real(*f),
        Value::Text(s) => {
            let one_line = s.replace(['\n', '\r'], " ");
            if one_line.chars().count() > MAX_CELL_CHARS {
                let cut: String = one_line.chars().take(MAX_CELL_CHARS).collect();
                format!("{cut}…")
            } else {
                one_line
            }
        }
        Value::Blob(b) => format!("<blob of {} bytes>", b.len()),
    }
}

fn format_real(f: f64) -> String {
    if !f.is_finite() {
        return f.to_string();
    }
    let s = format!("{f:.4}");
    let s = s.trim_end_matches('0');
    if let Some(stripped) = s.strip_suffix('.') { format!("{stripped}.0") } else { s.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guarded() -> GuardedConnection {
        GuardedConnection::open(crate::Database::demo().image()).unwrap()
    }

    #[test]
    fn renders_header_rows_and_footer() {
        let out = run(&guarded(), "SELECT 1 AS a, 'x' AS b, NULL AS c, 2.5 AS d", MAX_ROWS).unwrap();
        assert_eq!(format_table(&out), "a | b | c | d\n1 | x | NULL | 2.5\n(1 row)");
    }

    #[test]
    fn truncates_long_results_and_says_so() {
        let out = run(&guarded(), "SELECT employee_id FROM employees", MAX_ROWS).unwrap();
        assert_eq!(out.rows.len(), MAX_ROWS);
        assert!(out.total_rows > MAX_ROWS);
        let text = format_table(&out);
        assert!(text.contains(&format!("(showing 100 of {} rows", out.total_rows)), "{text}");
    }

    #[test]
    fn empty_results_are_explicit() {
        let out = run(&guarded(), "SELECT name FROM departments WHERE 0", MAX_ROWS).unwrap();
        assert_eq!(format_table(&out), "name\n(0 rows)");
    }

    #[test]
    fn huge_results_are_refused_with_a_tool_error_not_an_abort() {
        // The fault report's query: 60 columns of ~1 MB strings over 100 rows (6 GB if kept).
        let cols: Vec<String> = (0..60).map(|i| format!("printf('%.999990c', 'a') AS c{i}")).collect();
        let sql = format!("SELECT {} FROM employees LIMIT 100", cols.join(", "));
        let err = run(&guarded(), &sql, MAX_ROWS).unwrap_err();
        assert!(matches!(err, GuardError::TooLarge), "{err}");
        assert!(err.to_string().starts_with("refused: the result is too large"), "{err}");
        // Long cells within the cap are kept cut, not whole.
        let out = run(&guarded(), "SELECT printf('%.50000c', 'a') AS c FROM employees LIMIT 3", MAX_ROWS).unwrap();
        assert!(out.rows.iter().all(|r| matches!(&r[0], Value::Text(t) if t.len() == MAX_CELL_CHARS + 1)));
        assert!(format_table(&out).lines().nth(1).unwrap().ends_with('…'));
    }

    #[test]
    fn reals_are_short() {
        assert_eq!(format_real(85000.0), "85000.0");
        assert_eq!(format_real(2.0 / 3.0), "0.6667");
        assert_eq!(format_real(-1.5), "-1.5");
    }
}
