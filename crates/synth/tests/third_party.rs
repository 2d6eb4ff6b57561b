//! `scenarios synth` on a hand-made SQLite database served by two real third-party MCP servers
//! with different tool names: `mcp-server-sqlite` (PyPI: read_query/list_tables/describe_table)
//! and `mcp-sqlite` (npm: query/list_tables/get_table_schema). Both are installed on first use
//! into the test cache (`ta_testkit`).
//! Every synthesized answer is recomputed directly on the file with rusqlite.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rusqlite::types::ValueRef;
use serde_json::{Value, json};
use ta_mcp::{ClientOptions, McpClient, ServerSpec, ToolCatalog};
use ta_rollout::McpTools;
use ta_synth::candidate::Shape;
use ta_synth::check::expected;
use ta_synth::{SynthOptions, normalize, synthesize};
use ta_types::scenario::ExpectedRule;
use ta_types::{Expected, Split};

const LIBRARY: &str = "
CREATE TABLE authors (author_id INTEGER PRIMARY KEY, name TEXT NOT NULL, country TEXT, born TEXT);
CREATE TABLE books (book_id INTEGER PRIMARY KEY, title TEXT NOT NULL, author_id INTEGER REFERENCES authors(author_id), year INTEGER, price REAL, genre TEXT);
CREATE TABLE loans (loan_id INTEGER PRIMARY KEY, book_id INTEGER NOT NULL, member TEXT NOT NULL, loan_date TEXT NOT NULL, returned_date TEXT);
INSERT INTO authors VALUES (1, 'Ursula Le Guin', 'USA', '1929-10-21'), (2, 'Stanislaw Lem', 'Poland', '1921-09-12'),
  (3, 'Octavia Butler', 'USA', '1947-06-22'), (4, 'Ted Chiang', 'USA', '1967-10-20'), (5, 'Anonymous', NULL, NULL);
INSERT INTO books VALUES (1, 'The Dispossessed', 1, 1974, 12.5, 'novel'), (2, 'The Left Hand of Darkness', 1, 1969, 11.0, 'novel'),
  (3, 'Solaris', 2, 1961, 9.99, 'novel'), (4, 'The Cyberiad', 2, 1965, 8.5, 'stories'), (5, 'Kindred', 3, 1979, 10.25, 'novel'),
  (6, 'Exhalation', 4, 2019, 15.0, 'stories'), (7, 'Stories of Your Life', 4, 2002, 14.0, 'stories');
INSERT INTO loans VALUES (1, 3, 'ann', '2024-01-05', '2024-01-20'), (2, 3, 'bob', '2024-02-01', NULL), (3, 6, 'ann', '2024-02-11', '2024-03-01'),
  (4, 1, 'cid', '2024-03-15', NULL), (5, 3, 'dee', '2024-04-02', '2024-04-30'), (6, 5, 'bob', '2023-12-30', '2024-01-10'),
  (7, 7, 'eve', '2024-05-05', NULL), (8, 6, 'cid', '2024-05-20', '2024-06-02');
";

fn library(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("library.db");
    rusqlite::Connection::open(&path).unwrap().execute_batch(LIBRARY).unwrap();
    path
}

async fn connect(command: &str) -> McpTools {
    let spec = ServerSpec::parse(command).unwrap();
    let options = ClientOptions { call_timeout: Duration::from_secs(30), connect_timeout: Duration::from_secs(60), ..Default::default() };
    let client = McpClient::connect(spec, options).await.unwrap_or_else(|e| panic!("{command}: {e}"));
    let discovery = client.discover().await.unwrap();
    McpTools::new(Arc::new(client), ToolCatalog::from_discovery(&discovery))
}

/// The answer of `sql` computed on the file itself, as synth would write it.
fn direct(conn: &rusqlite::Connection, sql: &str, shape: Shape) -> Expected {
    let mut stmt = conn.prepare(sql).unwrap();
    let width = stmt.column_count();
    let cell = |v: ValueRef| match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => json!(i),
        ValueRef::Real(f) => json!(f),
        ValueRef::Text(t) => json!(String::from_utf8_lossy(t)),
        ValueRef::Blob(_) => Value::Null,
    };
    let rows: Vec<Vec<Value>> = stmt.query_map([], |r| (0..width).map(|i| Ok(cell(r.get_ref(i)?))).collect()).unwrap().map(Result::unwrap).collect();
    expected(shape, &rows).unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// The shape a scenario's SQL was checked with: two-cell rows for the shapes that ask for two
/// values at once, else the first column.
fn shape(sc: &ta_types::Scenario) -> Shape {
    if ["lookup_two", "two_aggregates"].contains(&sc.extra["template"].as_str().unwrap()) { Shape::Row } else { Shape::List }
}

fn same(a: &Expected, b: &Expected) -> bool {
    match (a, b) {
        (Expected::Rule(ExpectedRule::Number { number: x, .. }), Expected::Rule(ExpectedRule::Number { number: y, .. })) => (x - y).abs() < 1e-9,
        (Expected::Rule(ExpectedRule::Set(x)), Expected::Rule(ExpectedRule::Set(y))) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| a == b || a.as_f64().zip(b.as_f64()).is_some_and(|(a, b)| (a - b).abs() < 1e-9))
        }
        _ => a == b,
    }
}

/// Options that synthesize every question a database offers (seeded, a quarter in validation).
fn every_question() -> SynthOptions {
    SynthOptions {
        n: 100_000,
        query_tool: None,
        validation_fraction: 0.25,
        seed: 3,
        concurrency: 4,
        templates: None,
        max_difficulty: None,
        template_weights: None,
        value_lookups: false,
        join_mix: None,
    }
}

/// PyPI's mcp-server-sqlite on a fresh database `file` made by `schema`, connected; None (the
/// test skips) when the server is not installed. The directory holds the database.
async fn served(test: &str, file: &str, schema: &str) -> Option<(tempfile::TempDir, std::path::PathBuf, McpTools)> {
    let server = ta_testkit::MCP_SERVER_SQLITE.path(test)?;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join(file);
    rusqlite::Connection::open(&db).unwrap().execute_batch(schema).unwrap();
    let tools = connect(&format!("{} --db-path {}", server.display(), db.display())).await;
    Some((dir, db, tools))
}

async fn synth_on(command: &str, db: &Path, query_tool: &str, describe_tool: &str) {
    let before = std::fs::read(db).unwrap();
    let tools = connect(command).await;
    let out = synthesize(&tools, &every_question()).await.unwrap();
    tools.client().close().await;
    let s = &out.summary;
    assert_eq!((s.query_tool.as_str(), s.list_tool.as_deref(), s.describe_tool.as_deref()), (query_tool, Some("list_tables"), Some(describe_tool)));
    assert_eq!(s.tables, ["authors", "books", "loans"]);
    assert!(s.scenarios >= 300, "{s:?}");
    assert!(!s.dropped.contains_key(ta_synth::QUERY_FAILED), "every composed query is valid SQL: {:?}", s.dropped);
    assert!(s.per_table.len() == 3 && s.per_difficulty.len() == 5, "{s:?}");

    // keys: declared (books.author_id) and inferred from the name and the values (loans.book_id)
    let loans = out.schema.tables.iter().find(|t| t.name == "loans").unwrap();
    assert_eq!((loans.keys[0].from.as_str(), loans.keys[0].parent.as_str(), loans.keys[0].declared), ("book_id", "books", false));
    let books = out.schema.tables.iter().find(|t| t.name == "books").unwrap();
    assert!(books.keys[0].declared && books.keys[0].parent == "authors");

    // known answers, one per shape of the grammar (shapes without filters are always asked)
    let by_sql = |sql: &str| out.scenarios.iter().find(|x| x.extra["sql"] == sql).unwrap_or_else(|| panic!("no scenario for {sql}"));
    let num = |x: f64| Some(Expected::Number(x));
    let text = |x: &str| Some(Expected::Text(x.into()));
    let set = |v: Vec<Value>| Some(Expected::Rule(ExpectedRule::Set(v)));
    const BOOKS_AUTHORS: &str = "FROM books b JOIN authors a ON b.author_id = a.author_id";
    const LOANS_AUTHORS: &str = "FROM loans l JOIN books b ON l.book_id = b.book_id JOIN authors a ON b.author_id = a.author_id";
    assert_eq!(by_sql("SELECT count(*) FROM books").expected, num(7.0));
    assert_eq!(by_sql("SELECT count(DISTINCT genre) FROM books").expected, num(2.0));
    assert_eq!(by_sql("SELECT genre, count(*) FROM books WHERE genre IS NOT NULL GROUP BY genre ORDER BY count(*) DESC, genre LIMIT 1").expected, text("novel"));
    assert_eq!(by_sql("SELECT country FROM authors WHERE country IS NOT NULL GROUP BY country HAVING count(*) = 1").expected, text("Poland"));
    assert_eq!(
        by_sql("SELECT genre, sum(price) FROM books WHERE genre IS NOT NULL AND price IS NOT NULL GROUP BY genre ORDER BY sum(price) DESC, genre LIMIT 1").expected,
        text("novel")
    );
    let pct = by_sql("SELECT round(100.0 * sum(genre = 'novel') / count(*), 1) FROM books");
    assert_eq!(pct.expected, Some(Expected::Rule(ExpectedRule::Number { number: 57.1, tolerance: 0.01 })));
    let except = format!(
        "SELECT a.name {BOOKS_AUTHORS} WHERE b.genre = 'novel' AND a.name IS NOT NULL EXCEPT SELECT a.name {BOOKS_AUTHORS} WHERE b.genre = 'stories' AND a.name IS NOT NULL"
    );
    assert_eq!(by_sql(&except).expected, set(vec![json!("Octavia Butler"), json!("Ursula Le Guin")]));
    let intersect = except.replace("EXCEPT", "INTERSECT");
    assert_eq!(by_sql(&intersect).expected, text("Stanislaw Lem"));
    assert_eq!(by_sql("SELECT count(*) FROM books WHERE price > (SELECT avg(price) FROM books)").expected, num(3.0));
    assert_eq!(by_sql("SELECT year, price FROM books WHERE title = 'Solaris'").expected, set(vec![json!(1961), json!(9.99)]));
    assert_eq!(by_sql(&format!("SELECT a.name {BOOKS_AUTHORS} WHERE b.title = 'Solaris'")).expected, text("Stanislaw Lem"));
    let top = by_sql("SELECT title, price FROM books WHERE price IS NOT NULL ORDER BY price DESC, title LIMIT 3");
    assert_eq!(top.expected, set(vec![json!("Exhalation"), json!("Stories of Your Life"), json!("The Dispossessed")]));
    let argmax = by_sql("SELECT title, price FROM books WHERE price IS NOT NULL ORDER BY price DESC, title LIMIT 1");
    assert_eq!((argmax.expected.clone(), argmax.difficulty.as_ref().and_then(|d| d.level())), (text("Exhalation"), Some(2)));
    assert_eq!(
        by_sql("SELECT b.title, count(*) FROM loans l JOIN books b ON l.book_id = b.book_id GROUP BY b.title ORDER BY count(*) DESC, b.title LIMIT 1").expected,
        text("Solaris")
    );
    // two hops: loans -> books -> authors; Lem's and Chiang's books were lent 3 times each
    assert_eq!(by_sql(&format!("SELECT count(*) FROM (SELECT a.name {LOANS_AUTHORS} GROUP BY a.name HAVING count(*) > 1)")).expected, num(2.0));
    assert_eq!(by_sql("SELECT member, loan_date FROM loans WHERE loan_date IS NOT NULL ORDER BY loan_date ASC, member LIMIT 1").expected, text("bob"));
    // the parent with the fewest rows: Butler wrote one book, the others two (a tie for the most)
    let fewest = format!("SELECT a.name, count(*) {BOOKS_AUTHORS} GROUP BY a.name ORDER BY count(*) ASC, a.name LIMIT 1");
    assert_eq!(by_sql(&fewest).expected, text("Octavia Butler"));
    assert!(!out.scenarios.iter().any(|x| x.extra["sql"] == fewest.replace("ASC", "DESC")), "three authors tie with two books");
    // rows per parent on average, over every parent: 7 books by 5 authors (one without books)
    let per_author = by_sql(&format!("SELECT round(CAST(count(*) AS REAL) / (SELECT count(*) FROM authors), 2) {BOOKS_AUTHORS}"));
    assert_eq!(per_author.expected, Some(Expected::Rule(ExpectedRule::Number { number: 1.4, tolerance: 0.01 })), "{}", per_author.task);
    // the year of a date with the most and the fewest rows: seven loans in 2024, one in 2023;
    // every author was born in a year of their own (a tie: no question)
    let loan_year = "CAST(strftime('%Y', loan_date) AS INTEGER)";
    let by_year =
        |dir: &str| format!("SELECT {loan_year}, count(*) FROM loans WHERE {loan_year} IS NOT NULL GROUP BY {loan_year} ORDER BY count(*) {dir}, {loan_year} LIMIT 1");
    assert_eq!((by_sql(&by_year("DESC")).expected.clone(), by_sql(&by_year("ASC")).expected.clone()), (num(2024.0), num(2023.0)));
    assert!(
        !out.scenarios.iter().any(|x| x.extra["template"] == "year_argmax" && x.extra["sql"].as_str().unwrap().contains("FROM authors ")),
        "authors' birth years tie"
    );
    assert!(
        !out.scenarios.iter().any(|x| x.extra["sql"] == format!("SELECT a.name, count(*) {LOANS_AUTHORS} GROUP BY a.name ORDER BY count(*) DESC, a.name LIMIT 1")),
        "Lem and Chiang tie for the most loans: the question is dropped"
    );
    // the natural share never shows a raw name
    let raw: Vec<String> = out.schema.tables.iter().flat_map(|t| t.columns.iter().map(move |c| format!("{}.{}", t.name, c.name))).collect();
    for sc in out.scenarios.iter().filter(|x| x.extra["phrasing"] == "natural") {
        assert!(!sc.task.contains('_') && !raw.iter().any(|r| sc.task.contains(r.as_str())), "{}", sc.task);
    }
    let technical = out.scenarios.iter().filter(|x| x.extra["phrasing"] == "technical").count();
    assert!(technical * 10 < out.scenarios.len(), "{technical} of {} technical", out.scenarios.len());

    // every answer equals the one computed on the file directly; the reference ends in its SQL
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut split_of_sql: HashMap<String, Split> = HashMap::new();
    let mut texts = HashSet::new();
    for sc in &out.scenarios {
        let sql = sc.extra["sql"].as_str().unwrap();
        let want = direct(&conn, sql, shape(sc));
        assert!(same(sc.expected.as_ref().unwrap(), &want), "{}: {sql}: {:?} vs {want:?}", sc.task, sc.expected);
        assert_eq!((sc.source.as_deref(), sc.checked), (Some("synth"), Some(true)));
        let last = sc.reference.last().unwrap();
        assert_eq!(last.tool, query_tool);
        assert_eq!(last.arguments.values().next().and_then(Value::as_str), Some(sql));
        assert_eq!(sc.reference[0].tool, "list_tables");
        assert!(texts.insert(normalize(&sc.task)), "duplicate task {}", sc.task);
        let split = sc.split.unwrap();
        assert_eq!(*split_of_sql.entry(sql.to_string()).or_insert(split), split, "paraphrases of {sql} cross the split");
    }
    assert!(s.validation > 0 && s.train > s.validation, "{s:?}");
    assert_eq!(std::fs::read(db).unwrap(), before, "synth only reads");
}

#[tokio::test(flavor = "multi_thread")]
async fn synth_on_pypi_mcp_server_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = library(dir.path());
    let Some(server) = ta_testkit::MCP_SERVER_SQLITE.path("synth_on_pypi_mcp_server_sqlite") else { return };
    synth_on(&format!("{} --db-path {}", server.display(), db.display()), &db, "read_query", "describe_table").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn synth_on_npm_mcp_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = library(dir.path());
    let Some(server) = ta_testkit::MCP_SQLITE.path("synth_on_npm_mcp_sqlite") else { return };
    synth_on(&format!("{} {}", server.display(), db.display()), &db, "query", "get_table_schema").await;
}

/// Names that are SQL keywords or hold quotes: each must be quoted in every query synth writes.
const ODD_NAMES: &str = r#"
CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, "order" INTEGER, "group" TEXT, price REAL);
CREATE TABLE "table" (id INTEGER PRIMARY KEY, label TEXT NOT NULL, kind TEXT);
CREATE TABLE "we""ird 'tab" (id INTEGER PRIMARY KEY, title TEXT NOT NULL, size INTEGER);
INSERT INTO items VALUES (1, 'bolt', 3, 'metal', 0.3), (2, 'nut', 1, 'metal', 0.1), (3, 'plank', 2, 'wood', 4.5),
  (4, 'dowel', 5, 'wood', 1.2), (5, 'rope', 4, 'fibre', 3.0), (6, 'glue', NULL, NULL, 6.75);
INSERT INTO "table" VALUES (1, 'oak desk', 'desk'), (2, 'pine desk', 'desk'), (3, 'round table', 'dining'), (4, 'side table', NULL);
INSERT INTO "we""ird 'tab" VALUES (1, 'first', 10), (2, 'second', 20), (3, 'third', NULL);
"#;

/// PyPI's mcp-server-sqlite prints SQL errors as plain text (no isError): a failed statistics
/// query once read as an empty table, so tables named by keywords were silently dropped.
#[tokio::test(flavor = "multi_thread")]
async fn keyword_and_quoted_names_are_quoted_and_a_server_error_in_plain_text_is_an_error() {
    let Some((_dir, db, tools)) = served("keyword_and_quoted_names_are_quoted_and_a_server_error_in_plain_text_is_an_error", "odd.db", ODD_NAMES).await else { return };

    // The error text of an unquoted keyword comes back as an error, not as "no rows".
    let query = ta_synth::tools::ArgTool { name: "read_query".into(), arg: "query".into() };
    let sql = ta_synth::exec::Sql { host: &tools, tool: &query };
    let err = sql.json("(SELECT count(*) FROM items WHERE order IS NULL)").await.unwrap_err();
    assert!(matches!(&err, ta_synth::SynthError::Query { message, .. } if message.contains("Database error")), "{err}");

    let out = synthesize(&tools, &every_question()).await.unwrap();
    tools.client().close().await;
    let s = &out.summary;
    assert_eq!(s.tables, ["items", "table", "we\"ird 'tab"]);
    assert!(!s.dropped.contains_key(ta_synth::QUERY_FAILED), "{:?}", s.dropped);
    let rows: Vec<u64> = out.schema.tables.iter().map(|t| t.rows).collect();
    assert_eq!(rows, [6, 4, 3]);
    for t in &s.tables {
        assert!(s.per_table.get(t).is_some_and(|n| *n > 0), "no scenario on {t}: {s:?}");
    }
    let by_sql = |sql: &str| out.scenarios.iter().find(|x| x.extra["sql"] == sql).unwrap_or_else(|| panic!("no scenario for {sql}"));
    assert_eq!(by_sql(r#"SELECT count(*) FROM "we""ird 'tab""#).expected, Some(Expected::Number(3.0)));
    assert_eq!(by_sql(r#"SELECT count(DISTINCT "group") FROM items"#).expected, Some(Expected::Number(3.0)));
    assert_eq!(
        by_sql(r#"SELECT round(100.0 * sum("group" = 'metal') / count(*), 1) FROM items"#).expected,
        Some(Expected::Rule(ExpectedRule::Number { number: 33.3, tolerance: 0.01 }))
    );
    let conn = rusqlite::Connection::open(&db).unwrap();
    for sc in &out.scenarios {
        let sql = sc.extra["sql"].as_str().unwrap();
        assert!(same(sc.expected.as_ref().unwrap(), &direct(&conn, sql, shape(sc))), "{}: {sql}", sc.task);
    }
}

/// 200k rows: lists of tens of thousands of rows are read 13 rows at a time (one more than a
/// list may hold) and dropped at once, instead of coming back whole.
#[tokio::test(flavor = "multi_thread")]
async fn a_big_table_is_synthesized_with_bounded_list_queries() {
    let Some(server) = ta_testkit::MCP_SERVER_SQLITE.path("a_big_table_is_synthesized_with_bounded_list_queries") else { return };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("big.db");
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch(
            "CREATE TABLE events (id INTEGER PRIMARY KEY, name TEXT NOT NULL, kind TEXT, amount INTEGER);
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200000)
             INSERT INTO events SELECT i, 'event ' || i, CASE i % 3 WHEN 0 THEN 'click' WHEN 1 THEN 'view' ELSE 'buy' END, i % 1000 FROM n;",
        )
        .unwrap();
    let tools = connect(&format!("{} --db-path {}", server.display(), db.display())).await;
    let opts = SynthOptions {
        n: 40,
        query_tool: None,
        validation_fraction: 0.25,
        seed: 3,
        concurrency: 2,
        templates: None,
        max_difficulty: None,
        template_weights: None,
        value_lookups: false,
        join_mix: None,
    };
    let out = synthesize(&tools, &opts).await.unwrap();
    tools.client().close().await;
    let s = &out.summary;
    assert_eq!(out.schema.tables[0].rows, 200_000);
    assert!(!s.dropped.contains_key(ta_synth::QUERY_FAILED), "{:?}", s.dropped);
    assert!(s.dropped.get("more than 12 rows to list").is_some_and(|n| *n > 0), "{:?}", s.dropped);
    assert_eq!(s.scenarios, 40, "{s:?}");
}

/// A CSV import: no declared types, numbers and dates stored as text, blanks for missing values,
/// and a lookup table joined by a same-named column that is declared nowhere.
const CSV_IMPORT: &str = r#"
CREATE TABLE plants (Name, Country, Capacity, Opened, state_code);
CREATE TABLE states (State_Code INTEGER, State TEXT);
INSERT INTO plants VALUES ('A-1', 'France', '998', '1980-01-02', 1), ('A-2', 'France', '1200', '', 1), ('B-1', 'Japan', '450', '1975-06-01', 2),
  ('B-2', 'Japan', '', '1990-03-04', 2), ('C-1', 'Spain', '1050', '1985-07-08', 3);
INSERT INTO states VALUES (1, 'North'), (2, 'South'), (3, 'East');
"#;

#[tokio::test(flavor = "multi_thread")]
async fn numbers_stored_as_text_are_numbers_and_blanks_are_missing() {
    let Some((_dir, db, tools)) = served("numbers_stored_as_text_are_numbers_and_blanks_are_missing", "csv.db", CSV_IMPORT).await else { return };
    let out = synthesize(&tools, &every_question()).await.unwrap();
    tools.client().close().await;
    let plants = out.schema.tables.iter().find(|t| t.name == "plants").unwrap();
    let capacity = plants.column("Capacity").unwrap();
    assert!(capacity.numeric_text && capacity.blanks && capacity.nulls == 1, "{capacity:?}");
    assert_eq!(plants.keys.iter().map(|k| (k.from.as_str(), k.parent.as_str(), k.to.as_str())).collect::<Vec<_>>(), [("state_code", "states", "State_Code")]);
    let by_sql = |sql: &str| out.scenarios.iter().find(|x| x.extra["sql"] == sql).unwrap_or_else(|| panic!("no scenario for {sql}"));
    // As text, '998' is the largest capacity; as a number it is 1200.
    let max = "SELECT max(CAST(NULLIF(Capacity, '') AS REAL)) FROM plants";
    assert_eq!(by_sql(max).expected, Some(Expected::Rule(ExpectedRule::Number { number: 1200.0, tolerance: 0.01 })));
    // A date named by its event is asked as people say it: "plants opened in 1980".
    assert!(out.scenarios.iter().any(|x| x.task.contains("opened in 19") && x.extra["sql"].as_str().unwrap().contains("strftime('%Y'")), "no 'opened in' filter");
    // The blank date is not the earliest.
    assert_eq!(by_sql("SELECT min(NULLIF(Opened, '')) FROM plants").expected, Some(Expected::Text("1975-06-01".into())));
    let state = "SELECT s.State, count(*) FROM plants p JOIN states s ON p.state_code = s.State_Code GROUP BY s.State ORDER BY count(*) DESC, s.State LIMIT 1";
    assert!(out.scenarios.iter().all(|x| x.extra["sql"] != state), "North and South tie with two plants each");
    let lookup = "SELECT s.State FROM plants p JOIN states s ON p.state_code = s.State_Code WHERE p.Name = 'A-1'";
    assert_eq!(by_sql(lookup).expected, Some(Expected::Text("North".into())));
    let conn = rusqlite::Connection::open(&db).unwrap();
    for sc in &out.scenarios {
        let sql = sc.extra["sql"].as_str().unwrap();
        assert!(same(sc.expected.as_ref().unwrap(), &direct(&conn, sql, shape(sc))), "{}: {sql}", sc.task);
    }
}

/// People with a nullable manager (a key to their own table), projects with a nullable lead (a
/// key to the people), and the assignments linking the two (no name of their own).
const STAFF: &str = "
CREATE TABLE employees (employee_id INTEGER PRIMARY KEY, first_name TEXT NOT NULL, last_name TEXT NOT NULL,
  manager_id INTEGER REFERENCES employees(employee_id), department TEXT NOT NULL, salary REAL);
CREATE TABLE projects (project_id INTEGER PRIMARY KEY, name TEXT NOT NULL, lead_employee_id INTEGER REFERENCES employees(employee_id),
  status TEXT NOT NULL);
CREATE TABLE project_assignments (project_id INTEGER NOT NULL REFERENCES projects(project_id),
  employee_id INTEGER NOT NULL REFERENCES employees(employee_id), PRIMARY KEY (project_id, employee_id));
INSERT INTO employees VALUES (1, 'Grace', 'Hopper', NULL, 'Engineering', 200), (2, 'Alan', 'Turing', 1, 'Research', 150),
  (3, 'Ada', 'Lovelace', 1, 'Engineering', 180), (4, 'Linus', 'Torvalds', 3, 'Engineering', 120), (5, 'Margaret', 'Hamilton', 3, 'Sales', 170),
  (6, 'Donald', 'Knuth', 2, 'Research', 160), (7, 'Barbara', 'Liskov', NULL, 'Sales', NULL), (8, 'Ken', 'Thompson', 2, 'Engineering', 140);
INSERT INTO projects VALUES (1, 'Apollo', 1, 'active'), (2, 'Compiler', 3, 'planned'), (3, 'Kernel', NULL, 'active'),
  (4, 'Typesetting', 6, 'done'), (5, 'Archive', NULL, 'planned');
INSERT INTO project_assignments VALUES (1, 1), (1, 3), (1, 4), (2, 3), (2, 8), (3, 4), (3, 8), (3, 7), (4, 6), (4, 2), (5, 5);
";

/// The shapes people ask of such a schema, with known answers: who a key points to (a manager, a
/// lead), who is assigned to what through the linking table, rows with no parent, the
/// complement of a value, a category's values, questions about the schema; no count of nothing.
/// Unfiltered questions are looked up by their exact SQL; filtered ones are checked where drawn.
#[tokio::test(flavor = "multi_thread")]
async fn people_managers_leads_and_assignments_get_their_questions() {
    let Some((_dir, db, tools)) = served("people_managers_leads_and_assignments_get_their_questions", "staff.db", STAFF).await else { return };
    let out = synthesize(&tools, &every_question()).await.unwrap();
    tools.client().close().await;
    let s = &out.summary;
    assert_eq!(s.tables, ["employees", "projects", "project_assignments"]);
    assert!(!s.dropped.contains_key(ta_synth::QUERY_FAILED), "{:?}", s.dropped);
    let by_sql = |sql: &str| out.scenarios.iter().find(|x| x.extra["sql"] == sql).unwrap_or_else(|| panic!("no scenario for {sql}"));
    let all_of = |sql: &str| -> Vec<&ta_types::Scenario> { out.scenarios.iter().filter(|x| x.extra["sql"] == sql).collect() };
    let template = |sc: &ta_types::Scenario| sc.extra["template"].as_str().unwrap().to_string();
    let num = |x: f64| Some(Expected::Number(x));
    let text = |x: &str| Some(Expected::Text(x.into()));
    let conn = rusqlite::Connection::open(&db).unwrap();
    // the answer's values, in any order; the values a query returns on the file
    let answer = |sc: &ta_types::Scenario| -> BTreeSet<String> {
        match sc.expected.as_ref().unwrap() {
            Expected::Text(t) => [t.clone()].into(),
            Expected::Rule(ExpectedRule::Set(v)) => v.iter().map(|x| x.as_str().map_or_else(|| x.to_string(), String::from)).collect(),
            other => panic!("{}: not a list: {other:?}", sc.task),
        }
    };
    let on_file = |sql: &str| -> BTreeSet<String> { conn.prepare(sql).unwrap().query_map([], |r| r.get::<_, String>(0)).unwrap().map(Result::unwrap).collect() };
    let names = |v: &[&str]| -> BTreeSet<String> { v.iter().map(|x| x.to_string()).collect() };
    const EMPLOYEE: &str = "e.first_name || ' ' || e.last_name";
    const MANAGER: &str = "m.first_name || ' ' || m.last_name";

    // 1. who a self-referencing key points to: the manager, by full name, asked with "who"
    const MANAGED: &str = "FROM employees e JOIN employees m ON e.manager_id = m.employee_id";
    let manager_of = |who: &str| format!("SELECT {MANAGER} {MANAGED} WHERE {EMPLOYEE} = '{who}'");
    for (who, manager) in [("Ada Lovelace", "Grace Hopper"), ("Linus Torvalds", "Ada Lovelace"), ("Ken Thompson", "Alan Turing")] {
        let asked = all_of(&manager_of(who));
        assert!(!asked.is_empty(), "no scenario for {}", manager_of(who));
        assert!(asked.iter().all(|sc| template(sc) == "lookup" && sc.expected == text(manager)), "{asked:?}");
        assert!(asked.iter().any(|sc| sc.task.starts_with("Who")), "{who}'s manager is never asked with who: {asked:?}");
    }
    assert!(all_of(&manager_of("Grace Hopper")).is_empty(), "Grace Hopper has no manager: no answer to ask for");
    // and a lead (lead_employee_id) is the project's "lead"
    let lead = all_of(&format!("SELECT {EMPLOYEE} FROM projects p JOIN employees e ON p.lead_employee_id = e.employee_id WHERE p.name = 'Apollo'"));
    assert!(!lead.is_empty() && lead.iter().all(|sc| sc.expected == text("Grace Hopper")), "{lead:?}");
    assert!(lead.iter().any(|sc| sc.task.starts_with("Who") && sc.task.contains("lead")), "{lead:?}");
    // "who" asks for people only
    for sc in out.scenarios.iter().filter(|x| x.task.starts_with("Who ")) {
        let sql = sc.extra["sql"].as_str().unwrap();
        let selected = sql.split(" FROM ").next().unwrap();
        assert!(selected.ends_with(EMPLOYEE) || selected.ends_with(MANAGER), "{}: {sql}", sc.task);
    }

    // 2. rows linked through project_assignments, which names nothing of its own
    const ASSIGNED: &str = "FROM project_assignments pa JOIN projects p ON pa.project_id = p.project_id JOIN employees e ON pa.employee_id = e.employee_id";
    const ASSIGNED_TO: &str = "FROM project_assignments pa JOIN employees e ON pa.employee_id = e.employee_id JOIN projects p ON pa.project_id = p.project_id";
    let kernel = all_of(&format!("SELECT DISTINCT {EMPLOYEE} {ASSIGNED} WHERE p.name = 'Kernel'"));
    assert!(!kernel.is_empty() && kernel.iter().all(|sc| template(sc) == "linked_list"), "{kernel:?}");
    for sc in &kernel {
        assert_eq!(answer(sc), names(&["Linus Torvalds", "Ken Thompson", "Barbara Liskov"]), "{}", sc.task);
    }
    // three of a question's phrasings are kept, drawn: some project is asked about with "who"
    let assigned = |sc: &&ta_types::Scenario| template(sc) == "linked_list" && sc.extra["sql"].as_str().unwrap().starts_with(&format!("SELECT DISTINCT {EMPLOYEE}"));
    assert!(out.scenarios.iter().filter(assigned).any(|sc| sc.task.starts_with("Who is assigned to ")));
    let linus = by_sql(&format!("SELECT DISTINCT p.name {ASSIGNED_TO} WHERE {EMPLOYEE} = 'Linus Torvalds'"));
    assert_eq!((template(linus), answer(linus)), ("linked_list".into(), names(&["Apollo", "Kernel"])));
    let apollo = by_sql(&format!("SELECT count(DISTINCT {EMPLOYEE}) {ASSIGNED} WHERE p.name = 'Apollo'"));
    assert_eq!((template(apollo), apollo.expected.clone()), ("linked_count".into(), num(3.0)));
    let ken = by_sql(&format!("SELECT count(DISTINCT p.name) {ASSIGNED_TO} WHERE {EMPLOYEE} = 'Ken Thompson'"));
    assert_eq!((template(ken), ken.expected.clone()), ("linked_count".into(), num(2.0)));
    assert!(out.scenarios.iter().any(|sc| sc.task == "How many projects is Ken Thompson assigned to?"));
    // people per project on average, over every project: 11 assignments, 5 projects
    let per_project =
        by_sql("SELECT round(CAST(count(*) AS REAL) / (SELECT count(*) FROM projects), 2) FROM project_assignments pa JOIN projects p ON pa.project_id = p.project_id");
    assert_eq!(
        (template(per_project), per_project.expected.clone()),
        ("per_parent_avg".into(), Some(Expected::Rule(ExpectedRule::Number { number: 2.2, tolerance: 0.01 })))
    );
    // the salaries of the people on a project, totalled and averaged (the unknown salary left
    // out, as the question says): the pair of keys is the table's primary key, so no one counts
    // twice
    // (a REAL column's results are matched with a tolerance)
    let about = |x: f64| Some(Expected::Rule(ExpectedRule::Number { number: x, tolerance: 0.01 }));
    let apollo_total = by_sql(&format!("SELECT sum(e.salary) {ASSIGNED} WHERE p.name = 'Apollo'"));
    assert_eq!((template(apollo_total), apollo_total.expected.clone()), ("linked_aggregate".into(), about(500.0)));
    let kernel_avg = by_sql(&format!("SELECT round(avg(e.salary), 2) {ASSIGNED} WHERE p.name = 'Kernel'"));
    assert_eq!((template(kernel_avg), kernel_avg.expected.clone()), ("linked_aggregate".into(), about(130.0)));
    assert!(
        all_of(&format!("SELECT sum(e.salary) {ASSIGNED} WHERE p.name = 'Kernel'"))
            .iter()
            .chain(&all_of(&format!("SELECT sum(e.salary) {ASSIGNED} WHERE p.name = 'Apollo'")))
            .any(|sc| sc.task.starts_with("What is the total salary of the employees assigned to ")),
        "no natural phrasing of a project's total salary"
    );
    // people of a department on projects of a status: two values of each drawn, the ones drawn
    // checked against the assignments by hand (Engineering on active projects: Grace, Ada, Linus
    // and Ken; counts of nobody are dropped)
    let on: HashMap<(&str, &str), f64> =
        [(("Engineering", "active"), 4.0), (("Sales", "active"), 1.0), (("Engineering", "planned"), 2.0), (("Sales", "planned"), 1.0), (("Research", "done"), 2.0)]
            .into();
    let filtered: Vec<&ta_types::Scenario> = out.scenarios.iter().filter(|sc| template(sc) == "linked_filtered_count").collect();
    assert!(!filtered.is_empty(), "no count of one kind of people on another kind of project");
    for sc in &filtered {
        let sql = sc.extra["sql"].as_str().unwrap();
        let pick = |col: &str| ["Engineering", "Research", "Sales", "active", "planned", "done"].into_iter().find(|v| sql.contains(&format!("{col} = '{v}'"))).unwrap();
        let key = (pick("e.department"), pick("p.status"));
        assert_eq!(sc.expected, num(*on.get(&key).unwrap_or_else(|| panic!("{key:?} counts nobody: {sql}"))), "{}: {sql}", sc.task);
    }
    assert!(out.scenarios.iter().any(|sc| template(sc).starts_with("linked_filtered") && sc.task.contains("department is ") && sc.task.contains(" assigned to ")));
    // a role (the project's lead) is no parent to average over
    assert!(!out.scenarios.iter().any(|sc| template(sc) == "per_parent_avg" && sc.extra["sql"].as_str().unwrap().contains("lead_employee_id")));

    // Filters are drawn per question (seeded): a filtered question below is checked when drawn,
    // and each kind of filter must be drawn for some of them.
    let known = |counts: &[(&str, f64)], lists: &[(&str, &[&str])]| {
        let mut found = 0;
        for (sql, n) in counts {
            for sc in all_of(sql) {
                assert_eq!((template(sc).as_str(), sc.expected.clone()), ("count_where", num(*n)), "{sql}");
                found += 1;
            }
        }
        for (sql, v) in lists {
            for sc in all_of(sql) {
                assert_eq!((template(sc).as_str(), answer(sc)), ("list_where", names(v)), "{sql}");
                assert_eq!(answer(sc), on_file(sql), "{sql}");
                found += 1;
            }
        }
        assert!(found > 0, "none of {counts:?} {lists:?}");
    };

    // 3. rows without a parent: the key IS NULL, without the join that would drop them
    known(
        &[("SELECT count(*) FROM employees WHERE manager_id IS NULL", 2.0), ("SELECT count(*) FROM projects WHERE lead_employee_id IS NULL", 2.0)],
        &[
            ("SELECT first_name || ' ' || last_name FROM employees WHERE manager_id IS NULL", &["Grace Hopper", "Barbara Liskov"]),
            ("SELECT name FROM projects WHERE lead_employee_id IS NULL", &["Kernel", "Archive"]),
        ],
    );
    for (key, words) in [("manager_id IS NULL", "manager"), ("lead_employee_id IS NULL", "lead")] {
        let missing: Vec<&ta_types::Scenario> = out.scenarios.iter().filter(|x| x.extra["sql"].as_str().unwrap().contains(key)).collect();
        assert!(!missing.is_empty(), "no question about rows with {key}");
        assert!(
            missing
                .iter()
                .filter(|sc| sc.extra["phrasing"] == "natural")
                .all(|sc| [format!("no {words}"), format!("without a {words}")].iter().any(|w| sc.task.contains(w.as_str()))),
            "{missing:?}"
        );
    }
    for sc in &out.scenarios {
        let sql = sc.extra["sql"].as_str().unwrap();
        assert!(!(sql.contains("manager_id IS NULL") && sql.contains(MANAGED)), "a missing manager joined to its manager: {sql}");
    }

    // 4. the complement of a category's value
    known(
        &[
            ("SELECT count(*) FROM employees WHERE department <> 'Research'", 6.0),
            ("SELECT count(*) FROM employees WHERE department <> 'Engineering'", 4.0),
            ("SELECT count(*) FROM employees WHERE department <> 'Sales'", 6.0),
            ("SELECT count(*) FROM projects WHERE status <> 'done'", 4.0),
            ("SELECT count(*) FROM projects WHERE status <> 'active'", 3.0),
            ("SELECT count(*) FROM projects WHERE status <> 'planned'", 3.0),
        ],
        &[
            ("SELECT name FROM projects WHERE status <> 'done'", &["Apollo", "Compiler", "Kernel", "Archive"]),
            ("SELECT name FROM projects WHERE status <> 'active'", &["Compiler", "Typesetting", "Archive"]),
            ("SELECT name FROM projects WHERE status <> 'planned'", &["Apollo", "Kernel", "Typesetting"]),
            (
                "SELECT first_name || ' ' || last_name FROM employees WHERE department <> 'Engineering'",
                &["Alan Turing", "Margaret Hamilton", "Donald Knuth", "Barbara Liskov"],
            ),
        ],
    );
    let negated: Vec<&ta_types::Scenario> = out.scenarios.iter().filter(|x| x.extra["sql"].as_str().unwrap().contains(" <> ")).collect();
    assert!(negated.len() > 10, "{} negated filters", negated.len());
    for sc in negated.iter().filter(|sc| sc.extra["phrasing"] == "natural") {
        assert!(sc.task.contains(" is not ") || sc.task.contains(" other than "), "{}", sc.task);
    }

    // 5. the values a category takes
    for (sql, values) in [
        ("SELECT DISTINCT department FROM employees WHERE department IS NOT NULL", names(&["Engineering", "Research", "Sales"])),
        ("SELECT DISTINCT status FROM projects WHERE status IS NOT NULL", names(&["active", "planned", "done"])),
    ] {
        let sc = by_sql(sql);
        assert_eq!(template(sc), "list_values");
        assert_eq!(answer(sc), values, "{sql}");
        // SELECT DISTINCT over the whole column (no NULLs in it)
        assert_eq!(answer(sc), on_file(sql.split(" WHERE").next().unwrap()), "{sql}");
    }

    // 6. questions about the schema, phrased as the schema names things
    let schema_q = |sql: &str, t: &str| {
        let sc = by_sql(sql);
        assert_eq!((template(sc).as_str(), sc.extra["phrasing"].as_str()), (t, Some("schema")), "{sql}");
        sc
    };
    let tables = schema_q("SELECT count(*) FROM sqlite_master m WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'", "table_count");
    assert_eq!(tables.expected, num(3.0));
    assert_eq!(schema_q("SELECT name FROM pragma_table_info('projects') WHERE pk > 0", "primary_key").expected, text("project_id"));
    let composite = schema_q("SELECT name FROM pragma_table_info('project_assignments') WHERE pk > 0", "primary_key");
    assert_eq!(answer(composite), names(&["project_id", "employee_id"]));
    let key = |t: &str, parent: &str| format!("SELECT \"from\" FROM pragma_foreign_key_list('{t}') WHERE \"table\" = '{parent}'");
    assert_eq!(schema_q(&key("projects", "employees"), "key_column").expected, text("lead_employee_id"));
    assert_eq!(schema_q(&key("employees", "employees"), "key_column").expected, text("manager_id"));
    assert_eq!(schema_q(&key("project_assignments", "projects"), "key_column").expected, text("project_id"));
    for sc in &out.scenarios {
        let meta = ta_synth::meta::TEMPLATES.contains(&template(sc).as_str());
        assert_eq!(meta, sc.extra["phrasing"] == "schema", "{}: {}", template(sc), sc.task);
    }

    // 7. no count of nothing
    for sc in out.scenarios.iter().filter(|x| x.extra["sql"].as_str().unwrap().starts_with("SELECT count(")) {
        assert_ne!(sc.expected, num(0.0), "{}: {}", sc.task, sc.extra["sql"]);
    }
    assert!(s.dropped.get("counts nothing").is_some_and(|n| *n > 0), "{:?}", s.dropped);

    // 8. every answer equals the one computed on the file directly
    for sc in &out.scenarios {
        let sql = sc.extra["sql"].as_str().unwrap();
        let want = direct(&conn, sql, shape(sc));
        assert!(same(sc.expected.as_ref().unwrap(), &want), "{}: {sql}: {:?} vs {want:?}", sc.task, sc.expected);
    }
}

/// Departments reached two ways: a project's own, and its lead's (or an assigned person's).
const ORG: &str = "
CREATE TABLE departments (department_id INTEGER PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE employees (employee_id INTEGER PRIMARY KEY, first_name TEXT NOT NULL, last_name TEXT NOT NULL,
  department_id INTEGER NOT NULL REFERENCES departments(department_id));
CREATE TABLE projects (project_id INTEGER PRIMARY KEY, name TEXT NOT NULL, department_id INTEGER NOT NULL REFERENCES departments(department_id),
  lead_employee_id INTEGER NOT NULL REFERENCES employees(employee_id));
CREATE TABLE project_assignments (employee_id INTEGER NOT NULL REFERENCES employees(employee_id),
  project_id INTEGER NOT NULL REFERENCES projects(project_id), PRIMARY KEY (employee_id, project_id));
INSERT INTO departments VALUES (1, 'Engineering'), (2, 'Sales'), (3, 'Research');
INSERT INTO employees VALUES (1, 'Ann', 'Lee', 1), (2, 'Bob', 'Ray', 1), (3, 'Cid', 'Moe', 2), (4, 'Dee', 'Fox', 3), (5, 'Eve', 'Kay', 2);
INSERT INTO projects VALUES (1, 'Apollo', 1, 1), (2, 'Bazaar', 2, 2), (3, 'Cosmos', 3, 4), (4, 'Delta', 1, 3);
INSERT INTO project_assignments VALUES (1, 1), (2, 1), (3, 1), (3, 2), (4, 1), (5, 3), (1, 4), (2, 2);
";

/// Rows whose related row belongs to another department than their own, with known answers:
/// projects led from outside their department (Bazaar, Delta), people assigned to another
/// department's project (Bob, Cid, Dee, Eve), and per project (Apollo: Cid and Dee).
#[tokio::test(flavor = "multi_thread")]
async fn a_parent_reached_two_ways_asks_who_is_outside() {
    let Some((_dir, db, tools)) = served("a_parent_reached_two_ways_asks_who_is_outside", "org.db", ORG).await else { return };
    let out = synthesize(&tools, &every_question()).await.unwrap();
    tools.client().close().await;
    let outside: Vec<&ta_types::Scenario> = out.scenarios.iter().filter(|x| x.extra["template"].as_str().unwrap().starts_with("outside_")).collect();
    let sql = |sc: &ta_types::Scenario| sc.extra["sql"].as_str().unwrap().to_string();
    let one = |pick: &dyn Fn(&str) -> bool| -> Vec<&ta_types::Scenario> { outside.iter().copied().filter(|sc| pick(&sql(sc))).collect() };
    let num = |x: f64| Some(Expected::Number(x));
    let check = |found: Vec<&ta_types::Scenario>, want: Option<Expected>, what: &str| {
        assert!(!found.is_empty(), "no question about {what}: {outside:?}");
        for sc in found {
            assert_eq!(sc.expected, want, "{what}: {}: {}", sc.task, sql(sc));
        }
    };
    // projects: led from outside their department, and from inside it
    let projects = |s: &str| s.starts_with("SELECT count(*) FROM projects");
    check(one(&|s| projects(s) && s.contains(" <> ")), num(2.0), "projects led from another department");
    check(one(&|s| projects(s) && s.contains(" = ")), num(2.0), "projects led from their own department");
    let listed = one(&|s| s.starts_with("SELECT p.name FROM projects"));
    check(listed, Some(Expected::Rule(ExpectedRule::Set(vec![json!("Bazaar"), json!("Delta")]))), "which projects are led from outside");
    // people assigned to another department's project: over all projects, and per project
    let people = |s: &str| s.starts_with("SELECT count(DISTINCT") && s.contains("FROM project_assignments");
    check(one(&|s| people(s) && !s.contains("p.name = ")), num(4.0), "people on another department's project");
    check(one(&|s| people(s) && s.contains("p.name = 'Apollo'")), num(2.0), "Apollo's people from elsewhere");
    check(one(&|s| people(s) && s.contains("p.name = 'Bazaar'")), num(1.0), "Bazaar's people from elsewhere");
    assert!(
        outside.iter().any(|sc| sc.task == "How many employees are assigned to a project whose department is not their own?"
            || sc.task == "How many employees are assigned to at least one project of another department than their own?"),
        "{outside:?}"
    );
    for sc in outside.iter().filter(|sc| sc.extra["phrasing"] == "natural") {
        assert!(!sc.task.contains("'s label") && !sc.task.contains('_'), "a natural phrasing shows the schema: {}", sc.task);
    }
    let conn = rusqlite::Connection::open(&db).unwrap();
    for sc in &out.scenarios {
        let s = sql(sc);
        assert!(same(sc.expected.as_ref().unwrap(), &direct(&conn, &s, shape(sc))), "{}: {s}", sc.task);
    }
}

/// The solver check of `scenarios paraphrase --solve`, on PyPI's mcp-server-sqlite: the same rows
/// in another order, under other names or with repeats are the same answer; a row more or less,
/// or another number of columns, is not; a solver is shown only the tables the task reads, with
/// the values of their categories (columns whose few values repeat), not of their names.
#[tokio::test(flavor = "multi_thread")]
async fn another_query_answers_like_the_task_only_with_the_same_rows() {
    let Some((_dir, _db, tools)) = served("another_query_answers_like_the_task_only_with_the_same_rows", "staff.db", STAFF).await else { return };
    let query = ta_synth::tools::ArgTool { name: "read_query".into(), arg: "query".into() };
    let sql = ta_synth::exec::Sql { host: &tools, tool: &query };
    use ta_synth::compare::{Rows, create_statements, same_rows, shown_tables};

    let gold = "SELECT e.first_name FROM employees e WHERE e.department = 'Engineering' ORDER BY e.first_name";
    let same = [
        "SELECT first_name AS who FROM employees WHERE department = 'Engineering' ORDER BY who DESC;",
        "SELECT e.first_name FROM project_assignments pa JOIN employees e USING (employee_id) WHERE e.department = 'Engineering'",
    ];
    for other in same {
        assert_eq!(same_rows(&sql, gold, other, None).await.unwrap(), Rows::Same, "{other}");
    }
    let different = [
        "SELECT first_name FROM employees WHERE department IN ('Engineering', 'Sales')",
        "SELECT first_name FROM employees WHERE department = 'Engineering' AND employee_id > 1",
    ];
    for other in different {
        assert_eq!(same_rows(&sql, gold, other, None).await.unwrap(), Rows::Other, "{other}");
    }
    let two_columns = same_rows(&sql, gold, "SELECT first_name, last_name FROM employees WHERE department = 'Engineering'", None).await;
    assert_eq!(two_columns.unwrap(), Rows::OtherColumns);
    for fails in ["SELECT first_name FROM employees; SELECT 1", "SELECT first_name FROM staff", "SELEC first_name FROM employees"] {
        assert_eq!(same_rows(&sql, gold, fails, None).await.unwrap(), Rows::Fails, "{fails}");
    }

    // A share to one decimal (28.6) and the unrounded one (28.571…): the same within the task's
    // tolerance of 0.05, not within 0.01 nor without one; a text or two rows never.
    let share = "SELECT round(100.0 * sum(department = 'Research') / count(salary), 1) FROM employees";
    let unrounded = "SELECT 100.0 * sum(department = 'Research') / count(salary) FROM employees";
    assert_eq!(same_rows(&sql, share, unrounded, Some(0.05)).await.unwrap(), Rows::Same);
    assert_eq!(same_rows(&sql, share, unrounded, Some(0.01)).await.unwrap(), Rows::Other);
    assert_eq!(same_rows(&sql, share, unrounded, None).await.unwrap(), Rows::Other);
    for other in ["SELECT '28.6 percent'", "SELECT 28.6 UNION ALL SELECT 28.65", "SELECT 28.6, 1"] {
        assert_ne!(same_rows(&sql, share, other, Some(0.05)).await.unwrap(), Rows::Same, "{other}");
    }

    let statements = create_statements(&sql).await.unwrap();
    let schema = ta_synth::schema::introspect(&sql).await.unwrap();
    tools.client().close().await;
    let names: Vec<&str> = statements.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["employees", "projects", "project_assignments"]);
    let led = "SELECT p.name FROM projects p JOIN employees e ON e.employee_id = p.lead_employee_id WHERE e.department = 'Engineering'";
    let shown = shown_tables(&statements, &schema, led);
    assert_eq!(shown.len(), 2, "{shown:?}");
    assert!(shown[0].starts_with("CREATE TABLE employees") && shown[0].ends_with("\n-- department: 'Engineering', 'Research', 'Sales'"), "{}", shown[0]);
    assert!(shown[1].starts_with("CREATE TABLE projects") && shown[1].ends_with("\n-- status: 'active', 'done', 'planned'"), "{}", shown[1]);
    assert!(!shown.iter().any(|t| t.contains("-- first_name") || t.contains("-- name")), "{shown:?}");
}

/// `--value-lookups`: a category value named loosely ("engineering" for the stored
/// "Engineering"), or a state named by its value alone ("projects currently active", no word of
/// the status column), with the query that lists the column's stored values in the reference
/// before the answer's; the answer is still the answer's query's, and without the option nothing
/// changes.
#[tokio::test(flavor = "multi_thread")]
async fn a_value_named_loosely_is_looked_up_in_the_reference() {
    let Some((_dir, db, tools)) = served("a_value_named_loosely_is_looked_up_in_the_reference", "staff.db", STAFF).await else { return };
    let plain = synthesize(&tools, &every_question()).await.unwrap();
    let out = synthesize(&tools, &SynthOptions { value_lookups: true, ..every_question() }).await.unwrap();
    tools.client().close().await;
    let query_steps = |sc: &ta_types::Scenario, tool: &str| -> Vec<String> {
        sc.reference.iter().filter(|st| st.tool == tool).map(|st| st.arguments["query"].as_str().unwrap().to_string()).collect()
    };
    let tool = out.summary.query_tool.clone();
    assert_eq!(plain.summary.value_lookups, 0);
    assert!(plain.scenarios.iter().all(|sc| query_steps(sc, &tool).len() == 1), "without the option every reference runs one query");

    let conn = rusqlite::Connection::open(&db).unwrap();
    let looked: Vec<&ta_types::Scenario> = out.scenarios.iter().filter(|sc| query_steps(sc, &tool).len() > 1).collect();
    assert_eq!(looked.len(), out.summary.value_lookups);
    assert!(looked.len() >= 5, "{} scenarios look a value up", looked.len());
    for sc in &looked {
        let mut queries = query_steps(sc, &tool);
        let answer = queries.pop().unwrap();
        assert_eq!(answer, sc.extra["sql"].as_str().unwrap(), "the answer's query comes last");
        let task = &sc.task;
        for lookup in &queries {
            assert!(lookup.starts_with("SELECT DISTINCT ") && !lookup.contains(" WHERE "), "{lookup}: the column's values, all of them");
            let mut stmt = conn.prepare(lookup).unwrap();
            let listed: Vec<String> = stmt.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
            // The answer filters on a listed value that the question names only loosely: in lower
            // case, or by two of its words in a row; or a status by its value alone.
            let alone = |v: &str| ["currently", "marked"].iter().any(|w| task.contains(&format!("{w} {v}"))) && !task.contains("status");
            let loose = |v: &str| {
                let words: Vec<&str> = v.split_whitespace().collect();
                v != v.to_lowercase() && task.contains(&v.to_lowercase()) || words.len() > 2 && words.windows(2).any(|w| task.contains(&w.join(" ").to_lowercase()))
            };
            let named: Vec<&String> = listed.iter().filter(|v| answer.contains(&format!("= '{v}'")) && (loose(v) || alone(v))).collect();
            assert!(!named.is_empty(), "{}: no value of {listed:?} that {answer} filters on is named loosely", sc.task);
            for v in named.into_iter().filter(|v| !alone(v)) {
                // (another filter of the question may name the same value exactly: "not Research")
                if answer.matches(&format!("'{v}'")).count() == 1 {
                    assert!(!sc.task.contains(v.as_str()), "{}: names {v} only loosely", sc.task);
                }
            }
        }
        assert!(same(sc.expected.as_ref().unwrap(), &direct(&conn, &answer, shape(sc))), "{}: {answer}", sc.task);
    }
    assert!(looked.iter().any(|sc| sc.task.contains("engineering")), "the department Engineering, named in lower case");
    let alone: Vec<&str> = looked.iter().map(|sc| sc.task.as_str()).filter(|t| t.contains("currently ") || t.contains("marked ")).collect();
    assert!(alone.iter().any(|t| t.contains("projects")), "a project's status by its value alone: {alone:?}");
    assert!(!alone.iter().any(|t| t.contains("currently engineering") || t.contains("marked engineering")), "a department is not a state: {alone:?}");
}
