//! Which of a server's tools play the SQL roles: the query tool (one SQL string in), and, where
//! the server has them, a tool listing the tables and one describing a table. Detection reads the
//! tool schemas only, so it works on servers that name their tools differently (`run_query`,
//! `read_query`, `query`, `execute_sql`...). Tools that look like writes are never chosen.

use serde_json::Value;
use ta_types::ToolSpec;

use crate::SynthError;

/// A tool and the name of the one string argument it takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgTool {
    pub name: String,
    pub arg: String,
}

/// The SQL roles found on a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqlTools {
    pub query: ArgTool,
    /// Lists the tables; takes no required argument.
    pub list: Option<String>,
    /// Describes one table; takes the table name.
    pub describe: Option<ArgTool>,
    /// Whether the query tool says it only reads (its name: `read_query`, `select`; or its
    /// description: "read-only", "a SELECT query"). The list and describe tools read by their
    /// names, so tasks offered only these tools need no isolation even where the server declares
    /// no `readOnlyHint` (PyPI's `mcp-server-sqlite`). A raw `query` tool may write: not this.
    pub query_reads_only: bool,
}

/// Words in a tool name that mark it as changing data: such a tool is never called.
const WRITE_WORDS: [&str; 10] = ["write", "insert", "update", "delete", "create", "drop", "alter", "append", "remove", "modify"];

fn words(name: &str) -> Vec<String> {
    name.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_ascii_lowercase).collect()
}

fn is_write(name: &str) -> bool {
    let camel_split: String = name.chars().flat_map(|c| if c.is_ascii_uppercase() { vec!['_', c] } else { vec![c] }).collect();
    words(&camel_split).iter().any(|w| WRITE_WORDS.contains(&w.as_str()))
}

/// The properties of a tool's parameters and which of them are required.
pub fn params(spec: &ToolSpec) -> (Vec<(String, Value)>, Vec<String>) {
    let p = &spec.function.parameters;
    let props = p.get("properties").and_then(Value::as_object).map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()).unwrap_or_default();
    let required = p.get("required").and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_str).map(String::from).collect()).unwrap_or_default();
    (props, required)
}

fn is_string(schema: &Value) -> bool {
    match schema.get("type") {
        Some(Value::String(t)) => t == "string",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "string"),
        _ => false,
    }
}

/// The single required string argument of a tool (or its only string property).
fn single_string_arg(spec: &ToolSpec) -> Option<String> {
    let (props, required) = params(spec);
    let strings: Vec<&String> = props.iter().filter(|(_, s)| is_string(s)).map(|(k, _)| k).collect();
    match required.as_slice() {
        [one] if strings.contains(&one) => Some(one.clone()),
        [] if strings.len() == 1 => Some(strings[0].clone()),
        _ => None,
    }
}

/// Whether a query tool's name or description says it only reads (see [`SqlTools::query_reads_only`]).
fn says_it_only_reads(spec: &ToolSpec) -> bool {
    let desc = spec.function.description.as_deref().unwrap_or("").to_ascii_lowercase();
    let names_writes = ["insert", "update", "delete"].iter().any(|w| desc.contains(w));
    words(spec.name()).iter().any(|w| w == "read" || w == "select")
        || desc.contains("read-only")
        || desc.contains("read only")
        || (!names_writes && (desc.contains("select query") || desc.contains("select statement")))
}

/// How much a tool looks like a read-only SQL query tool; `None` when it is not one.
fn query_score(spec: &ToolSpec) -> Option<(i32, String)> {
    if is_write(spec.name()) {
        return None;
    }
    let arg = single_string_arg(spec)?;
    let (props, _) = params(spec);
    let arg_desc = props.iter().find(|(k, _)| *k == arg).and_then(|(_, s)| s.get("description")).and_then(Value::as_str).unwrap_or("");
    let name = words(spec.name());
    let desc = format!("{} {arg_desc}", spec.function.description.as_deref().unwrap_or("")).to_ascii_lowercase();
    let arg_l = arg.to_ascii_lowercase();
    let mut score = 0;
    if arg_l == "sql" || arg_l == "query" || arg_l.contains("sql") {
        score += 3;
    }
    if name.iter().any(|w| w == "query" || w == "sql" || w == "select") {
        score += 2;
    }
    if name.iter().any(|w| w == "read" || w == "select") || desc.contains("read-only") || desc.contains("read only") {
        score += 2;
    }
    if desc.contains("select") || desc.contains("sql") {
        score += 1;
    }
    (score >= 3).then_some((score, arg))
}

impl SqlTools {
    /// Finds the roles among `specs` (`complete_task` is ignored). `forced` names the query tool.
    pub fn detect(specs: &[ToolSpec], forced: Option<&str>) -> Result<SqlTools, SynthError> {
        let names = || specs.iter().map(|s| s.name()).collect::<Vec<_>>().join(", ");
        let query = match forced {
            Some(name) => {
                let spec = specs
                    .iter()
                    .find(|s| s.name() == name)
                    .ok_or_else(|| SynthError::Tools(format!("--query-tool {name}: the server has no such tool (it offers: {})", names())))?;
                let arg = single_string_arg(spec)
                    .ok_or_else(|| SynthError::Tools(format!("--query-tool {name} does not take one string argument (its schema: {})", spec.function.parameters)))?;
                ArgTool { name: name.to_string(), arg }
            }
            None => {
                let best = specs
                    .iter()
                    .filter_map(|s| query_score(s).map(|(score, arg)| (score, s.name(), arg)))
                    .max_by_key(|(score, name, _)| (*score, std::cmp::Reverse(name.len())));
                let (_, name, arg) = best.ok_or_else(|| SynthError::Tools(format!("no SQL query tool found among: {}\nhint: a query tool takes one SQL string, e.g. run_query(sql); name it with --query-tool NAME if the server's schema does not say so; a server without SQL gets its tasks from `scenarios walk`", names())))?;
                ArgTool { name: name.to_string(), arg }
            }
        };
        let others = || specs.iter().filter(|s| s.name() != query.name && !is_write(s.name()) && s.name() != ta_mcp::COMPLETE_TASK);
        let list = others()
            .filter(|s| params(s).1.is_empty())
            .filter(|s| {
                let w = words(s.name());
                w.iter().any(|x| x == "list" || x == "show") && w.iter().any(|x| x.starts_with("table"))
            })
            .map(|s| s.name().to_string())
            .next();
        let describe = others()
            .filter_map(|s| single_string_arg(s).map(|arg| (s, arg)))
            .filter(|(s, arg)| {
                let w = words(s.name());
                let about_table = arg.to_ascii_lowercase().contains("table") || w.iter().any(|x| x.starts_with("table"));
                about_table && w.iter().any(|x| ["describe", "schema", "info", "columns", "get"].contains(&x.as_str()))
            })
            .map(|(s, arg)| ArgTool { name: s.name().to_string(), arg })
            .next();
        let query_reads_only = specs.iter().find(|s| s.name() == query.name).is_some_and(says_it_only_reads);
        Ok(SqlTools { query, list, describe, query_reads_only })
    }

    /// The names of the tools a task's reference calls, in the order it calls them.
    pub fn names(&self) -> Vec<String> {
        self.list.iter().cloned().chain(self.describe.iter().map(|d| d.name.clone())).chain([self.query.name.clone()]).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, desc: &str, params: Value) -> ToolSpec {
        ToolSpec::new(name, Some(desc.into()), params)
    }

    fn one(arg: &str) -> Value {
        json!({"type": "object", "properties": {arg: {"type": "string"}}, "required": [arg]})
    }

    #[test]
    fn finds_roles_under_different_names_and_never_a_write_tool() {
        let none = json!({"type": "object", "properties": {}});
        // mcp-server-sqlite (PyPI)
        let pypi = vec![
            tool("write_query", "Execute an INSERT, UPDATE, or DELETE query", one("query")),
            tool("read_query", "Execute a SELECT query on the SQLite database", one("query")),
            tool("create_table", "Create a new table", one("query")),
            tool("list_tables", "List all tables", none.clone()),
            tool("describe_table", "Get the schema information for a specific table", one("table_name")),
        ];
        let t = SqlTools::detect(&pypi, None).unwrap();
        assert_eq!(t.query, ArgTool { name: "read_query".into(), arg: "query".into() });
        assert_eq!(t.list.as_deref(), Some("list_tables"));
        assert_eq!(t.describe, Some(ArgTool { name: "describe_table".into(), arg: "table_name".into() }));
        assert!(t.query_reads_only, "read_query says it reads");
        assert_eq!(t.names(), ["list_tables", "describe_table", "read_query"]);
        // mcp-sqlite (npm): camelCase argument, optional bind values
        let npm = vec![
            tool("db_info", "Get information about the database", none.clone()),
            tool(
                "query",
                "Execute a raw SQL query",
                json!({"type": "object", "properties": {"sql": {"type": "string"}, "values": {"type": "array"}}, "required": ["sql"]}),
            ),
            tool("list_tables", "List all tables", none.clone()),
            tool("get_table_schema", "Get a table's schema", one("tableName")),
            tool("deleteRecords", "Delete records", one("table")),
        ];
        let t = SqlTools::detect(&npm, None).unwrap();
        assert_eq!(t.query.name, "query");
        assert_eq!(t.describe.unwrap().name, "get_table_schema");
        assert!(!t.query_reads_only, "a raw query tool may write");
        let demo = tool("run_query", "Run one read-only SQLite SELECT statement; INSERT, UPDATE are refused.", one("sql"));
        assert!(SqlTools::detect(&[demo], None).unwrap().query_reads_only);
        let plain = tool("sql", "Run a SELECT statement", one("sql"));
        assert!(SqlTools::detect(&[plain], None).unwrap().query_reads_only);
        let any = tool("sql", "Run a SELECT statement or an INSERT", one("sql"));
        assert!(!SqlTools::detect(&[any], None).unwrap().query_reads_only);
        assert!(is_write("deleteRecords") && is_write("write_query") && !is_write("read_query"));
        let err = SqlTools::detect(&[tool("echo", "Echoes", one("message"))], None).unwrap_err().to_string();
        assert!(err.contains("echo") && err.contains("--query-tool"), "{err}");
        assert_eq!(SqlTools::detect(&[tool("echo", "Echoes", one("message"))], Some("echo")).unwrap().query.arg, "message");
        assert!(SqlTools::detect(&pypi, Some("nope")).is_err());
    }
}
