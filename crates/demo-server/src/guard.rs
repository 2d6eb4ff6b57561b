//! Read-only enforcement for the query connection.
//!
//! The agent sends arbitrary SQL, so "read-only" is enforced in depth rather than by parsing:
//! 1. the connection holds a read-only deserialized image of the database (writes fail in
//!    SQLite's pager), and `PRAGMA query_only` is on (covers the TEMP schema too);
//! 2. an authorizer refuses, at prepare time, every action except reading tables, SELECT,
//!    functions and recursive CTEs: no INSERT/UPDATE/DELETE, DDL, ATTACH/DETACH, PRAGMA,
//!    transactions or savepoints;
//! 3. [`prepare_select`] accepts exactly one statement that is read-only and returns rows;
//! 4. a progress handler (and a check between rows, for rows too few to reach it) interrupts
//!    queries that run past a deadline; `SQLITE_LIMIT_LENGTH` caps the size of a single value,
//!    SQLite's hard heap limit caps its memory, and [`crate::query::run`] caps the bytes a
//!    result may hold, so a runaway query cannot hang or exhaust the server.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::limits::Limit;
use rusqlite::{Connection, OpenFlags, Statement};

/// The message every refused write-like statement starts with.
pub const REFUSED: &str = "refused: the database is read-only; only single SELECT statements are allowed";

/// How long one query may run before it is interrupted.
pub const QUERY_TIME_LIMIT: Duration = Duration::from_secs(3);

/// Most bytes the shown rows of a result may hold, as SQLite produced them (before
/// `crate::query` cuts long cells): `crate::query::run` refuses a larger one with
/// [`GuardError::TooLarge`]. A limit like the others here, so the error that names it sits beside it.
pub const MAX_RESULT_BYTES: usize = 4 << 20;

/// Largest string or blob a query may build (bytes).
const MAX_VALUE_BYTES: i32 = 1_000_000;

/// Most memory SQLite may hold in this process (bytes): past it an allocation fails with
/// "out of memory", which the agent sees as a tool error, instead of the process growing until
/// the system kills it.
const SQLITE_HEAP_LIMIT: i64 = 256 << 20;

/// Virtual machine instructions between two looks at the deadline.
const PROGRESS_PERIOD: i32 = 1_000;

/// A connection that can only read, plus the state its hooks share with the caller.
pub struct GuardedConnection {
    conn: Connection,
    /// The action the authorizer refused last, to tell the agent what was not allowed.
    refused: Arc<Mutex<Option<String>>>,
    /// Deadline in milliseconds since `epoch`; 0 means none.
    deadline_ms: Arc<AtomicU64>,
    epoch: Instant,
}

/// Why a query was not run, worded for the agent.
#[derive(Debug, thiserror::Error)]
pub enum GuardError {
    #[error("{REFUSED} ({0})")]
    Refused(String),
    #[error("refused: only one SQL statement per call is allowed; remove everything after the first ';' and send further statements in separate calls")]
    MultipleStatements,
    #[error("the query is empty; send one SELECT statement, e.g. SELECT * FROM employees LIMIT 5")]
    Empty,
    #[error("query interrupted: it ran longer than {} seconds; narrow it with WHERE conditions, avoid cross joins, or add LIMIT", QUERY_TIME_LIMIT.as_secs())]
    TimedOut,
    #[error("refused: the result is too large (its first rows hold more than {} MB); select fewer or shorter columns, e.g. substr(notes, 1, 100), or add LIMIT", MAX_RESULT_BYTES >> 20)]
    TooLarge,
    #[error("{0}")]
    Sql(#[from] rusqlite::Error),
}

impl GuardedConnection {
    /// Opens a read-only connection on a serialized database image.
    pub fn open(image: &'static [u8]) -> rusqlite::Result<Self> {
        let mut conn = Connection::open_with_flags(":memory:", OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
        conn.deserialize_bytes(rusqlite::MAIN_DB, image)?;
        conn.execute_batch("PRAGMA query_only = ON")?;
        conn.set_limit(Limit::SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)?;
        conn.set_limit(Limit::SQLITE_LIMIT_ATTACHED, 0)?;
        // SAFETY: sets a process-wide limit (thread-safe in SQLite); a lower limit already set is kept.
        unsafe {
            let current = rusqlite::ffi::sqlite3_hard_heap_limit64(-1);
            if current == 0 || current > SQLITE_HEAP_LIMIT {
                rusqlite::ffi::sqlite3_hard_heap_limit64(SQLITE_HEAP_LIMIT);
            }
        }

        let refused = Arc::new(Mutex::new(None));
        let seen = Arc::clone(&refused);
        conn.authorizer(Some(move |ctx: AuthContext<'_>| match describe_refusal(&ctx.action) {
            None => Authorization::Allow,
            Some(what) => {
                *seen.lock().unwrap_or_else(|e| e.into_inner()) = Some(what);
                Authorization::Deny
            }
        }))?;

        let deadline_ms = Arc::new(AtomicU64::new(0));
        let epoch = Instant::now();
        let deadline = Arc::clone(&deadline_ms);
        conn.progress_handler(
            PROGRESS_PERIOD,
            Some(move || {
                let limit = deadline.load(Ordering::Relaxed);
                limit != 0 && epoch.elapsed().as_millis() as u64 > limit
            }),
        )?;
        Ok(Self { conn, refused, deadline_ms, epoch })
    }

    /// Prepares `sql` if it is a single read-only statement that returns rows, and arms the
    /// time limit for running it.
    pub fn prepare_select(&self, sql: &str) -> Result<Statement<'_>, GuardError> {
        if strip_comments(sql).trim().trim_matches(';').trim().is_empty() {
            return Err(GuardError::Empty);
        }
        *self.refused.lock().unwrap_or_else(|e| e.into_inner()) = None;
        let stmt = match self.conn.prepare(sql) {
            Ok(stmt) => stmt,
            Err(rusqlite::Error::MultipleStatement) => return Err(GuardError::MultipleStatements),
            Err(e) => {
                if let Some(what) = self.refused.lock().unwrap_or_else(|e| e.into_inner()).take() {
                    return Err(GuardError::Refused(what));
                }
                return Err(GuardError::Sql(e));
            }
        };
        if !stmt.readonly() || stmt.column_count() == 0 {
            return Err(GuardError::Refused("the statement does not return rows".into()));
        }
        let deadline = self.epoch.elapsed() + QUERY_TIME_LIMIT;
        self.deadline_ms.store(deadline.as_millis() as u64, Ordering::Relaxed);
        Ok(stmt)
    }

    /// `Err(TimedOut)` once the armed deadline has passed: checked between rows, since a query
    /// whose few rows are each expensive (huge strings) may not reach the progress handler.
    pub fn check_deadline(&self) -> Result<(), GuardError> {
        let limit = self.deadline_ms.load(Ordering::Relaxed);
        if limit != 0 && self.epoch.elapsed().as_millis() as u64 > limit { Err(GuardError::TimedOut) } else { Ok(()) }
    }

    /// Maps an error raised while stepping a statement, recognizing the time limit.
    pub fn step_error(&self, e: rusqlite::Error) -> GuardError {
        if let Some(what) = self.refused.lock().unwrap_or_else(|e| e.into_inner()).take() {
            return GuardError::Refused(what);
        }
        match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::OperationInterrupted) => GuardError::TimedOut,
            _ => GuardError::Sql(e),
        }
    }
}

/// Pragmas that only describe the schema. They are allowed (also as table-valued functions such
/// as `pragma_table_info('employees')`, which SQLite authorizes while stepping) because agents
/// and reference queries use them to explore; every other pragma is refused.
const INTROSPECTION_PRAGMAS: &[&str] = &["table_info", "table_xinfo", "foreign_key_list", "index_list", "index_info"];

/// `None` when the action is allowed, else a short description of what was refused.
fn describe_refusal(action: &AuthAction<'_>) -> Option<String> {
    Some(match action {
        AuthAction::Select | AuthAction::Read { .. } | AuthAction::Recursive => return None,
        AuthAction::Pragma { pragma_name, .. } if INTROSPECTION_PRAGMAS.contains(&pragma_name.to_ascii_lowercase().as_str()) => {
            return None;
        }
        AuthAction::Function { function_name } if !function_name.eq_ignore_ascii_case("load_extension") => return None,
        AuthAction::Function { function_name } => format!("function {function_name}() is not allowed"),
        AuthAction::Insert { table_name } => format!("INSERT into {table_name}"),
        AuthAction::Update { table_name, .. } => format!("UPDATE of {table_name}"),
        AuthAction::Delete { table_name } => format!("DELETE from {table_name}"),
        AuthAction::CreateTable { .. } | AuthAction::CreateTempTable { .. } => "CREATE TABLE".into(),
        AuthAction::CreateIndex { .. } | AuthAction::CreateTempIndex { .. } => "CREATE INDEX".into(),
        AuthAction::CreateView { .. } | AuthAction::CreateTempView { .. } => "CREATE VIEW".into(),
        AuthAction::CreateTrigger { .. } | AuthAction::CreateTempTrigger { .. } => "CREATE TRIGGER".into(),
        AuthAction::CreateVtable { .. } => "CREATE VIRTUAL TABLE".into(),
        AuthAction::DropTable { .. } | AuthAction::DropTempTable { .. } => "DROP TABLE".into(),
        AuthAction::DropIndex { .. } | AuthAction::DropTempIndex { .. } => "DROP INDEX".into(),
        AuthAction::DropView { .. } | AuthAction::DropTempView { .. } => "DROP VIEW".into(),
        AuthAction::DropTrigger { .. } | AuthAction::DropTempTrigger { .. } => "DROP TRIGGER".into(),
        AuthAction::DropVtable { .. } => "DROP VIRTUAL TABLE".into(),
        AuthAction::AlterTable { .. } => "ALTER TABLE".into(),
        AuthAction::Pragma { pragma_name, .. } => {
            format!("PRAGMA {pragma_name}; to see a table's columns call describe_table instead")
        }
        AuthAction::Attach { .. } => "ATTACH".into(),
        AuthAction::Detach { .. } => "DETACH".into(),
        AuthAction::Transaction { .. } | AuthAction::Savepoint { .. } => "transactions are not needed: each query runs on its own".into(),
        AuthAction::Reindex { .. } => "REINDEX".into(),
        AuthAction::Analyze { .. } => "ANALYZE".into(),
        _ => "this kind of statement".into(),
    })
}

/// Removes `--` and `/* */` comments (outside string literals) so that a comment-only input
/// is recognized as empty.
fn strip_comments(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        if let Some(q) = quote {
            out.push(c);
            if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '\'' | '"' | '`' => {
                quote = Some(c);
                out.push(c);
            }
            '-' if chars.peek() == Some(&'-') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
                out.push(' ');
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut prev = ' ';
                for c in chars.by_ref() {
                    if prev == '*' && c == '/' {
                        break;
                    }
                    prev = c;
                }
                out.push(' ');
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guarded() -> GuardedConnection {
        GuardedConnection::open(crate::Database::demo().image()).unwrap()
    }

    fn refused(sql: &str) -> String {
        let g = guarded();
        match g.prepare_select(sql) {
            Ok(_) => panic!("{sql:?} was accepted"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn selects_are_allowed() {
        let g = guarded();
        for sql in [
            "SELECT count(*) FROM employees",
            "select e.first_name, d.name from employees e join departments d using (department_id) -- trailing",
            "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 5) SELECT sum(x) FROM n;",
            "SELECT name FROM sqlite_master WHERE type = 'table'",
            "SELECT upper(name), round(avg(annual_budget), 2) FROM departments GROUP BY 1",
            "SELECT name, type FROM pragma_table_info('employees')",
            "PRAGMA foreign_key_list(projects)",
        ] {
            let mut stmt = g.prepare_select(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
            assert!(stmt.query([]).unwrap().next().unwrap().is_some(), "{sql}");
        }
    }

    #[test]
    fn writes_schema_changes_attach_pragma_and_transactions_are_refused() {
        for sql in [
            "INSERT INTO departments (name, location, annual_budget, founded_date) VALUES ('X', 'Y', 1, '2020-01-01')",
            "UPDATE employees SET salary = 1",
            "DELETE FROM projects",
            "DROP TABLE employees",
            "CREATE TABLE t (x)",
            "CREATE TEMP TABLE t (x)",
            "CREATE INDEX i ON employees (salary)",
            "ALTER TABLE employees ADD COLUMN x",
            "ATTACH DATABASE ':memory:' AS other",
            "DETACH DATABASE main",
            "PRAGMA query_only = OFF",
            "PRAGMA journal_mode = OFF",
            "PRAGMA user_version = 7",
            "PRAGMA user_version",
            "BEGIN",
            "COMMIT",
            "SAVEPOINT s",
            "VACUUM",
            "REINDEX",
            "ANALYZE",
            "REPLACE INTO departments (department_id, name, location, annual_budget, founded_date) VALUES (1, 'X', 'Y', 1, '2020-01-01')",
            "WITH x AS (SELECT 1) INSERT INTO departments SELECT * FROM departments",
        ] {
            let msg = refused(sql);
            assert!(msg.starts_with("refused:"), "{sql}: {msg}");
        }
    }

    #[test]
    fn multiple_statements_are_refused_even_when_harmless() {
        assert!(refused("SELECT 1; SELECT 2").contains("only one SQL statement"));
        let msg = refused("SELECT 1; DROP TABLE employees");
        assert!(msg.starts_with("refused:"), "{msg}");
        // a trailing semicolon or comment is not a second statement
        guarded().prepare_select("SELECT 1; -- done").unwrap();
    }

    #[test]
    fn empty_input_is_explained() {
        assert!(refused("  ;  ").contains("empty"));
        assert!(refused("-- nothing").contains("empty"));
    }

    #[test]
    fn runaway_queries_are_interrupted() {
        let g = guarded();
        let mut stmt = g.prepare_select("WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT count(*) FROM n").unwrap();
        let started = Instant::now();
        let err = stmt.query_row([], |r| r.get::<_, i64>(0)).unwrap_err();
        assert!(matches!(g.step_error(err), GuardError::TimedOut));
        assert!(started.elapsed() < QUERY_TIME_LIMIT + Duration::from_secs(2));
    }

    #[test]
    fn huge_values_are_capped() {
        let g = guarded();
        let mut stmt = g.prepare_select("SELECT zeroblob(100000000)").unwrap();
        assert!(stmt.query_row([], |r| r.get::<_, Vec<u8>>(0)).is_err());
    }

    #[test]
    fn comments_are_stripped_outside_strings() {
        assert_eq!(strip_comments("a -- b\nc").trim(), "a  c");
        assert_eq!(strip_comments("'--x' /* y */ z"), "'--x'   z");
    }
}
