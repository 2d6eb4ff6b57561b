//! The MCP handler: three tools over a read-only database, the company database by default.
//!
//! Tool descriptions are written for the model that will read them: they say what each tool
//! returns, when to call it, and what is refused. Failures the agent can fix (unknown table, SQL
//! errors, refused statements) come back as tool results with `is_error: true` and a hint,
//! never as protocol errors, so the agent sees the message and can recover.

use std::sync::{Arc, Mutex};

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{ErrorData, ServerHandler, schemars, tool, tool_handler, tool_router};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::DemoServerError;
use crate::database::{Database, Source};
use crate::guard::{GuardError, GuardedConnection};
use crate::query::{self, MAX_ROWS};

/// The names of the tools, in the order they are listed.
pub const TOOL_NAMES: [&str; 3] = ["list_tables", "describe_table", "run_query"];

const INSTRUCTIONS: &str = "A read-only SQLite database of a company: departments, employees (including former \
employees and contractors), projects and who works on them. Find the tables with list_tables, check exact column \
names with describe_table, then answer questions with run_query (one SELECT per call). Watch for NULLs and for \
former employees (status 'terminated').";

/// What `list_tables` says of itself when the database is a user's file, not the company's.
const LIST_TABLES_FILE_DESCRIPTION: &str = "List the tables of the database with their row counts. Call this first when you do not know the schema.";

/// Arguments of `describe_table`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct DescribeTableArgs {
    /// Exact table name as listed by list_tables, e.g. "employees".
    pub table_name: String,
}

/// Arguments of `run_query`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct RunQueryArgs {
    /// One SQLite SELECT statement, e.g. "SELECT name, location FROM departments ORDER BY name".
    pub sql: String,
}

/// What a tool call produced: the text the agent sees and whether it is an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolReply {
    pub text: String,
    pub is_error: bool,
}

impl ToolReply {
    fn ok(text: impl Into<String>) -> Self {
        Self { text: text.into(), is_error: false }
    }
    fn error(text: impl Into<String>) -> Self {
        Self { text: text.into(), is_error: true }
    }
}

impl From<ToolReply> for CallToolResult {
    fn from(reply: ToolReply) -> Self {
        let content = vec![ContentBlock::text(reply.text)];
        if reply.is_error { CallToolResult::error(content) } else { CallToolResult::success(content) }
    }
}

/// The demo MCP server. Each instance owns its own read-only connection, so concurrent
/// sessions (one instance each over HTTP) never wait on each other's queries.
#[derive(Clone)]
pub struct DemoServer {
    db: Arc<Database>,
    conn: Arc<Mutex<GuardedConnection>>,
    tool_router: ToolRouter<Self>,
}

impl std::fmt::Debug for DemoServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DemoServer").finish_non_exhaustive()
    }
}

impl DemoServer {
    /// Opens a read-only connection of its own on `db` ([`Database::demo`] for the company
    /// database).
    pub fn new(db: Arc<Database>) -> Result<Self, DemoServerError> {
        let conn = GuardedConnection::open(db.image()).map_err(DemoServerError::Database)?;
        let mut tool_router = Self::tool_router();
        // The generated description speaks of the company database; a user's file is not one.
        if let (Source::File(_), Some(route)) = (db.source(), tool_router.map.get_mut("list_tables")) {
            route.attr.description = Some(LIST_TABLES_FILE_DESCRIPTION.into());
        }
        Ok(Self { db, conn: Arc::new(Mutex::new(conn)), tool_router })
    }

    /// Runs one tool synchronously, exactly as an MCP `tools/call` would, and returns the text
    /// the agent would see. Useful for reference traces and tests; it blocks while a query runs.
    pub fn call(&self, name: &str, arguments: &Map<String, Value>) -> ToolReply {
        let arg = |key: &str| -> Result<String, ToolReply> {
            match arguments.get(key) {
                Some(Value::String(s)) => Ok(s.clone()),
                Some(other) => Err(ToolReply::error(format!("argument '{key}' must be a string, got {other}"))),
                None => Err(ToolReply::error(format!("missing argument '{key}'"))),
            }
        };
        let result = match name {
            "list_tables" => Ok(self.list_tables_reply()),
            "describe_table" => arg("table_name").map(|t| self.describe_table_reply(&t)),
            "run_query" => arg("sql").map(|sql| self.run_query_reply(&sql)),
            other => Err(ToolReply::error(format!("unknown tool '{other}'; the tools are: {}", TOOL_NAMES.join(", ")))),
        };
        result.unwrap_or_else(|e| e)
    }

    fn list_tables_reply(&self) -> ToolReply {
        ToolReply::ok(self.db.catalog().list_tables())
    }

    fn describe_table_reply(&self, table_name: &str) -> ToolReply {
        match self.db.catalog().describe_table(table_name) {
            Ok(text) => ToolReply::ok(text),
            Err(msg) => ToolReply::error(msg),
        }
    }

    fn run_query_reply(&self, sql: &str) -> ToolReply {
        let conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        match query::run(&conn, sql, MAX_ROWS) {
            Ok(out) => ToolReply::ok(query::format_table(&out)),
            Err(e) => {
                tracing::debug!(error = %e, "run_query failed");
                ToolReply::error(explain(&e))
            }
        }
    }
}

/// The error text plus a hint on how to recover, keyed on SQLite's message.
fn explain(e: &GuardError) -> String {
    let msg = e.to_string();
    let hint = if msg.contains("no such table") {
        " (hint: call list_tables to see the table names)"
    } else if msg.contains("no such column") {
        " (hint: call describe_table to see the exact column names; qualify columns with a table alias when joining)"
    } else if msg.contains("ambiguous column name") {
        " (hint: several joined tables have this column; prefix it with the table name or alias)"
    } else if msg.contains("syntax error") || msg.contains("incomplete input") {
        " (hint: this is SQLite; check commas, quotes ('text' for strings) and parentheses)"
    } else if msg.contains("no such function") {
        " (hint: SQLite has no such function; e.g. use strftime('%Y', date) for years, || to concatenate)"
    } else {
        ""
    };
    if matches!(e, GuardError::Sql(_)) { format!("SQL error: {msg}{hint}") } else { format!("{msg}{hint}") }
}

#[tool_router]
impl DemoServer {
    #[tool(
        description = "List the tables of the company database with their row counts and what each holds. Call this first when you do not know the schema.",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    async fn list_tables(&self) -> Result<CallToolResult, ErrorData> {
        Ok(self.list_tables_reply().into())
    }

    #[tool(
        description = "Describe one table: every column with its type, whether it can be NULL (and how many rows are NULL), which table an ID column references (for JOINs), the allowed values of status-like columns, and three sample rows. Call it before querying a table so you use the exact column names.",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    async fn describe_table(&self, Parameters(DescribeTableArgs { table_name }): Parameters<DescribeTableArgs>) -> Result<CallToolResult, ErrorData> {
        Ok(self.describe_table_reply(&table_name).into())
    }

    #[tool(
        description = "Run one read-only SQLite SELECT statement (WITH ... SELECT is fine) and get the result as a text table: a header line of column names, then one row per line with cells separated by ' | ' and NULL for missing values. At most 100 rows are shown; the last line says how many rows there were. Only a single SELECT per call: INSERT, UPDATE, DELETE, CREATE, DROP, PRAGMA, ATTACH and transactions are refused. SQLite dialect: dates are 'YYYY-MM-DD' text (use strftime or string comparison), || concatenates, LIMIT instead of TOP. If you get an error, read it, fix the query (describe_table shows column names) and try again.",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    async fn run_query(&self, Parameters(RunQueryArgs { sql }): Parameters<RunQueryArgs>) -> Result<CallToolResult, ErrorData> {
        let this = self.clone();
        let reply =
            tokio::task::spawn_blocking(move || this.run_query_reply(&sql)).await.map_err(|e| ErrorData::internal_error(format!("query task failed: {e}"), None))?;
        Ok(reply.into())
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for DemoServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("train-agent-demo", env!("CARGO_PKG_VERSION")))
            .with_instructions(match self.db.source() {
                Source::Demo => INSTRUCTIONS.to_string(),
                Source::File(path) => format!(
                    "A read-only SQLite database ({}). Find the tables with list_tables, check exact column names with \
                     describe_table, then answer questions with run_query (one SELECT per call).",
                    path.file_name().unwrap_or(path.as_os_str()).to_string_lossy()
                ),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(name: &str, args: Value) -> ToolReply {
        DemoServer::new(Database::demo()).unwrap().call(name, args.as_object().unwrap())
    }

    #[test]
    fn tools_answer_and_errors_carry_hints() {
        assert!(call("list_tables", json!({})).text.contains("project_assignments"));
        assert!(!call("describe_table", json!({"table_name": "projects"})).is_error);
        let r = call("run_query", json!({"sql": "SELECT count(*) AS n FROM departments"}));
        assert_eq!(r, ToolReply::ok("n\n9\n(1 row)"));

        let r = call("run_query", json!({"sql": "SELECT name FROM employees"}));
        assert!(r.is_error);
        assert!(r.text.starts_with("SQL error: no such column: name"), "{}", r.text);
        assert!(r.text.contains("describe_table"), "{}", r.text);

        let r = call("run_query", json!({"sql": "SELECT * FROM employee"}));
        assert!(r.is_error && r.text.contains("list_tables"), "{}", r.text);

        let r = call("describe_table", json!({"table_name": "staff"}));
        assert!(r.is_error && r.text.contains("unknown table 'staff'"), "{}", r.text);

        assert!(call("run_query", json!({})).is_error);
        assert!(call("run_query", json!({"sql": 5})).is_error);
        assert!(call("drop_everything", json!({})).is_error);
    }

    #[test]
    fn writes_through_the_tool_are_refused_and_change_nothing() {
        let server = DemoServer::new(Database::demo()).unwrap();
        let run = |sql: &str| server.call("run_query", json!({ "sql": sql }).as_object().unwrap());
        let before = run("SELECT count(*), sum(salary) FROM employees");
        for sql in [
            "DELETE FROM employees",
            "UPDATE employees SET salary = 0",
            "INSERT INTO departments (name, location, annual_budget, founded_date) VALUES ('X','Y',1,'2020-01-01')",
            "DROP TABLE employees",
            "CREATE TABLE t AS SELECT * FROM employees",
            "ALTER TABLE employees RENAME TO staff",
            "ATTACH DATABASE 'file:x?mode=memory' AS x",
            "PRAGMA writable_schema = ON",
            "BEGIN IMMEDIATE",
            "SELECT 1; DELETE FROM employees",
            "SELECT 1; SELECT 2",
        ] {
            let r = run(sql);
            assert!(r.is_error, "{sql} was accepted: {}", r.text);
            assert!(r.text.starts_with("refused:"), "{sql}: {}", r.text);
        }
        assert_eq!(run("SELECT count(*), sum(salary) FROM employees"), before);
    }
}
