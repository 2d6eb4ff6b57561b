//! Serving a user's SQLite file (`train-agent demo-server --db FILE`): its own schema in the
//! descriptions, awkward names and untyped columns, the same guards, and clear errors for a
//! wrong path.

use std::path::Path;

use serde_json::{Value, json};
use ta_demo_server::{Database, DemoServer, DemoServerError, ToolReply};

/// A file with an untyped table, a table whose name and columns need quoting, and a foreign key.
fn sample_file(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("plants.sqlite");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        r#"
        CREATE TABLE loose (a, b);
        INSERT INTO loose VALUES (1, 'x'), (2, NULL), ('three', 3.5);
        CREATE TABLE "power plants" ("plant #" INTEGER PRIMARY KEY, "select" TEXT NOT NULL, "odd""name" varchar(10));
        INSERT INTO "power plants" VALUES (1, 'Alpha', 'nuclear'), (2, 'Beta', 'nuclear'), (3, 'Gamma', 'coal'), (4, 'Delta', 'coal'), (5, 'Eps', NULL);
        CREATE TABLE outages (id INTEGER PRIMARY KEY, plant INTEGER REFERENCES "power plants"("plant #"), days REAL);
        INSERT INTO outages VALUES (1, 1, 2.5), (2, 3, 10);
        "#,
    )
    .unwrap();
    path
}

fn call(server: &DemoServer, name: &str, args: Value) -> ToolReply {
    server.call(name, args.as_object().unwrap())
}

#[test]
fn a_file_is_served_with_its_own_schema() {
    let dir = tempfile::tempdir().unwrap();
    let server = DemoServer::new(Database::open(&sample_file(dir.path())).unwrap()).unwrap();

    let r = call(&server, "list_tables", json!({}));
    assert!(!r.is_error, "{}", r.text);
    assert_eq!(
        r.text,
        "Tables in the database:\n- loose (3 rows)\n- power plants (5 rows)\n- outages (2 rows)\n\
         Call describe_table(table_name) to see a table's columns before writing a query."
    );

    let r = call(&server, "describe_table", json!({"table_name": "loose"}));
    assert!(!r.is_error, "{}", r.text);
    assert!(r.text.starts_with("Table loose (3 rows)\nColumns:\n  a NULL allowed (0 rows are NULL)\n  b NULL allowed (1 rows are NULL)\n"), "{}", r.text);
    assert!(r.text.ends_with("a | b\n1 | x\n2 | NULL\nthree | 3.5\n(3 rows)"), "{}", r.text);

    let r = call(&server, "describe_table", json!({"table_name": "\"Power Plants\""}));
    assert!(!r.is_error, "{}", r.text);
    assert!(r.text.contains("  plant # INTEGER PRIMARY KEY NOT NULL\n"), "{}", r.text);
    assert!(r.text.contains("  select TEXT NOT NULL\n"), "{}", r.text);
    assert!(r.text.contains("  odd\"name varchar(10) NULL allowed (1 rows are NULL); values: 'coal', 'nuclear'\n"), "{}", r.text);
    assert!(r.text.contains("Referenced by: outages.plant\n"), "{}", r.text);

    let r = call(&server, "describe_table", json!({"table_name": "outages"}));
    assert!(r.text.contains("  plant INTEGER NULL allowed (0 rows are NULL), references power plants.plant #\n"), "{}", r.text);

    let r = call(&server, "run_query", json!({"sql": r#"SELECT p."select", o.days FROM outages o JOIN "power plants" p ON p."plant #" = o.plant ORDER BY o.days"#}));
    assert_eq!(r, ToolReply { text: "select | days\nAlpha | 2.5\nGamma | 10.0\n(2 rows)".into(), is_error: false });
}

#[test]
fn writes_are_refused_and_the_file_is_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let path = sample_file(dir.path());
    let before = std::fs::read(&path).unwrap();
    let server = DemoServer::new(Database::open(&path).unwrap()).unwrap();
    for sql in ["DELETE FROM loose", r#"UPDATE "power plants" SET "select" = 'x'"#, "DROP TABLE outages", "ATTACH DATABASE 'other.db' AS o"] {
        let r = call(&server, "run_query", json!({ "sql": sql }));
        assert!(r.is_error && r.text.starts_with("refused:"), "{sql}: {}", r.text);
    }
    assert_eq!(call(&server, "run_query", json!({"sql": "SELECT count(*) AS n FROM loose"})).text, "n\n3\n(1 row)");
    drop(server);
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[test]
fn a_wal_mode_file_is_served() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wal.sqlite");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t (x); INSERT INTO t VALUES (42);").unwrap();
    let server = DemoServer::new(Database::open(&path).unwrap()).unwrap();
    assert_eq!(call(&server, "run_query", json!({"sql": "SELECT x FROM t"})).text, "x\n42\n(1 row)");
}

#[test]
fn a_missing_or_foreign_file_is_an_error_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.sqlite");
    let err = Database::open(&missing).unwrap_err();
    assert!(matches!(err, DemoServerError::Unreadable { .. }), "{err}");
    assert!(err.to_string().contains(&missing.display().to_string()), "{err}");

    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "this is not a database, just some text").unwrap();
    let err = Database::open(&text).unwrap_err();
    assert!(matches!(err, DemoServerError::NotSqlite(_)), "{err}");
    assert!(err.to_string().contains(&text.display().to_string()) && err.to_string().contains("not a SQLite database"), "{err}");

    let empty = dir.path().join("empty.sqlite");
    rusqlite::Connection::open(&empty).unwrap().execute_batch("PRAGMA user_version = 1").unwrap();
    let err = Database::open(&empty).unwrap_err();
    assert!(matches!(err, DemoServerError::NoTables(_)), "{err}");
    assert!(err.to_string().contains(&empty.display().to_string()), "{err}");
}

/// A CSV import declares no types: its text columns still list their few values (blanks left
/// out), so a model can see that `Status` holds 'Shutdown' before it filters on it.
#[test]
fn an_untyped_text_column_lists_its_values_without_blanks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("csv.sqlite");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("CREATE TABLE plants (Name, Status, Capacity); INSERT INTO plants VALUES ('A', 'Operational', '998'), ('B', 'Shutdown', ''), ('C', 'Operational', '12'), ('D', '', '40'), ('E', 'Shutdown', '7');").unwrap();
    drop(conn);
    let server = DemoServer::new(Database::open(&path).unwrap()).unwrap();
    let r = call(&server, "describe_table", json!({"table_name": "plants"}));
    assert!(r.text.contains("  Status NULL allowed (0 rows are NULL); values: 'Operational', 'Shutdown'\n"), "{}", r.text);
    assert!(r.text.contains("  Name NULL allowed (0 rows are NULL)\n"), "{}", r.text);
}
