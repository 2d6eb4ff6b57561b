//! What the database holds, learnt through the query tool: tables, columns, types, keys and
//! sample values. SQLite only: the catalogue is read from `sqlite_master` and the table-valued
//! pragmas (`pragma_table_info`, `pragma_foreign_key_list`) through plain SELECTs, with one query
//! for the structure and one per table for the statistics. Keys that are not declared are
//! inferred from `*_id` names and checked against the values.

use serde::Serialize;
use serde_json::Value;
use ta_rollout::ToolHost;

use crate::SynthError;
use crate::exec::Sql;

/// How a column's values are used in questions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Integer,
    Real,
    /// `YYYY-MM-DD...` text.
    Date,
    Text,
    Other,
}

#[derive(Debug, Clone, Serialize)]
pub struct Column {
    pub name: String,
    pub decl_type: String,
    pub pk: bool,
    pub kind: Kind,
    pub nulls: u64,
    pub distinct: u64,
    /// Up to [`SAMPLE_VALUES`] distinct non-NULL, non-blank values, in order (numbers for
    /// [`Column::numeric_text`]).
    pub values: Vec<Value>,
    /// Numbers stored as text (a CSV import without types): compared and aggregated through
    /// [`Column::sql`]'s cast, or `'998' > '1000'` would order them as words.
    pub numeric_text: bool,
    /// Some values are blank text, which people read as missing: [`Column::sql`] makes them NULL.
    pub blanks: bool,
}

#[cfg(test)]
impl Column {
    /// A text column with no statistics, for tests that build a schema by hand.
    pub(crate) fn text(name: &str, pk: bool) -> Column {
        Column { name: name.into(), decl_type: String::new(), pk, kind: Kind::Text, nulls: 0, distinct: 0, values: vec![], numeric_text: false, blanks: false }
    }
}

/// A reference from `table.from` to `parent.to`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ForeignKey {
    pub from: String,
    pub parent: String,
    pub to: String,
    /// Declared in the schema (else inferred from the name and checked on the data).
    pub declared: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Table {
    pub name: String,
    pub rows: u64,
    pub columns: Vec<Column>,
    pub keys: Vec<ForeignKey>,
    /// Labels (see [`Table::label`]) that name exactly one row, up to [`SAMPLE_LABELS`].
    pub labels: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Schema {
    pub sqlite_version: String,
    pub tables: Vec<Table>,
}

/// Row labels kept per table (the entities questions name).
pub const SAMPLE_LABELS: usize = 60;

/// Distinct values kept per column (the categories questions filter on).
pub const SAMPLE_VALUES: usize = 40;

/// SQLite's keywords (<https://sqlite.org/lang_keywords.html>): a name among them is quoted.
const KEYWORDS: &[&str] = &[
    "ABORT",
    "ACTION",
    "ADD",
    "AFTER",
    "ALL",
    "ALTER",
    "ALWAYS",
    "ANALYZE",
    "AND",
    "AS",
    "ASC",
    "ATTACH",
    "AUTOINCREMENT",
    "BEFORE",
    "BEGIN",
    "BETWEEN",
    "BY",
    "CASCADE",
    "CASE",
    "CAST",
    "CHECK",
    "COLLATE",
    "COLUMN",
    "COMMIT",
    "CONFLICT",
    "CONSTRAINT",
    "CREATE",
    "CROSS",
    "CURRENT",
    "CURRENT_DATE",
    "CURRENT_TIME",
    "CURRENT_TIMESTAMP",
    "DATABASE",
    "DEFAULT",
    "DEFERRABLE",
    "DEFERRED",
    "DELETE",
    "DESC",
    "DETACH",
    "DISTINCT",
    "DO",
    "DROP",
    "EACH",
    "ELSE",
    "END",
    "ESCAPE",
    "EXCEPT",
    "EXCLUDE",
    "EXCLUSIVE",
    "EXISTS",
    "EXPLAIN",
    "FAIL",
    "FILTER",
    "FIRST",
    "FOLLOWING",
    "FOR",
    "FOREIGN",
    "FROM",
    "FULL",
    "GENERATED",
    "GLOB",
    "GROUP",
    "GROUPS",
    "HAVING",
    "IF",
    "IGNORE",
    "IMMEDIATE",
    "IN",
    "INDEX",
    "INDEXED",
    "INITIALLY",
    "INNER",
    "INSERT",
    "INSTEAD",
    "INTERSECT",
    "INTO",
    "IS",
    "ISNULL",
    "JOIN",
    "KEY",
    "LAST",
    "LEFT",
    "LIKE",
    "LIMIT",
    "MATCH",
    "MATERIALIZED",
    "NATURAL",
    "NO",
    "NOT",
    "NOTHING",
    "NOTNULL",
    "NULL",
    "NULLS",
    "OF",
    "OFFSET",
    "ON",
    "OR",
    "ORDER",
    "OTHERS",
    "OUTER",
    "OVER",
    "PARTITION",
    "PLAN",
    "PRAGMA",
    "PRECEDING",
    "PRIMARY",
    "QUERY",
    "RAISE",
    "RANGE",
    "RECURSIVE",
    "REFERENCES",
    "REGEXP",
    "REINDEX",
    "RELEASE",
    "RENAME",
    "REPLACE",
    "RESTRICT",
    "RETURNING",
    "RIGHT",
    "ROLLBACK",
    "ROW",
    "ROWS",
    "SAVEPOINT",
    "SELECT",
    "SET",
    "TABLE",
    "TEMP",
    "TEMPORARY",
    "THEN",
    "TIES",
    "TO",
    "TRANSACTION",
    "TRIGGER",
    "UNBOUNDED",
    "UNION",
    "UNIQUE",
    "UPDATE",
    "USING",
    "VACUUM",
    "VALUES",
    "VIEW",
    "VIRTUAL",
    "WHEN",
    "WHERE",
    "WINDOW",
    "WITH",
    "WITHOUT",
];

/// `name` as a SQL identifier: as is when it is a plain name, the way people write SQL (and
/// the way a model learns to), quoted when it is a keyword (`order`, `group`, `table`) or
/// holds anything else, since an unquoted keyword breaks the query.
pub fn ident(name: &str) -> String {
    let plain = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_') && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain && !KEYWORDS.iter().any(|k| k.eq_ignore_ascii_case(name)) { name.to_string() } else { format!("\"{}\"", name.replace('"', "\"\"")) }
}

/// `text` as a SQL string literal.
pub fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// A JSON value as a SQL literal.
pub fn value_literal(v: &Value) -> String {
    match v {
        Value::String(s) => literal(s),
        Value::Null => "NULL".into(),
        other => other.to_string(),
    }
}

pub(crate) const USER_TABLES: &str = "m.type = 'table' AND m.name NOT LIKE 'sqlite_%'";

impl Column {
    /// The column as a value in a query, prefixed by `alias.`: numbers stored as text as
    /// numbers, blank dates as NULL (else the blank is the earliest date). Blank categories need
    /// nothing: they are never asked about.
    pub fn sql(&self, alias: &str) -> String {
        let c = format!("{alias}.{}", ident(&self.name));
        if self.numeric_text {
            format!("CAST(NULLIF({c}, '') AS REAL)")
        } else if self.blanks && self.kind == Kind::Date {
            format!("NULLIF({c}, '')")
        } else {
            c
        }
    }
}

impl Table {
    pub fn column(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|c| c.name == name)
    }

    /// The primary key column when there is exactly one.
    pub fn pk(&self) -> Option<&Column> {
        let pks: Vec<&Column> = self.columns.iter().filter(|c| c.pk).collect();
        if let [one] = pks.as_slice() { Some(one) } else { None }
    }

    /// Whether a column is a key (primary or foreign, or named like one): not a quantity to
    /// aggregate nor a category to ask about.
    pub fn is_key(&self, c: &Column) -> bool {
        c.pk || self.keys.iter().any(|k| k.from == c.name) || c.name.eq_ignore_ascii_case("id") || c.name.to_ascii_lowercase().ends_with("_id")
    }

    /// Whether a row is a person: its label is a first and a last name ("who" questions).
    pub fn is_person(&self) -> bool {
        self.column("first_name").is_some() && self.column("last_name").is_some()
    }

    /// The SQL expression naming one row for a person (`first_name || ' ' || last_name`, or a
    /// unique `name`/`title` column), with columns prefixed by `alias.` when given.
    pub fn label(&self, alias: Option<&str>) -> Option<String> {
        let q = |c: &str| match alias {
            Some(a) => format!("{a}.{}", ident(c)),
            None => ident(c),
        };
        if self.is_person() {
            return Some(format!("{} || ' ' || {}", q("first_name"), q("last_name")));
        }
        let unique_text = |c: &&Column| c.kind == Kind::Text && c.nulls == 0 && c.distinct == self.rows && !self.is_key(c);
        let named = self.columns.iter().filter(unique_text).find(|c| {
            let n = c.name.to_ascii_lowercase();
            n == "name" || n == "title" || n.ends_with("_name") || n.ends_with("name") || n.ends_with("_title")
        });
        // A text primary key (a case number, a code) names its row when nothing else does.
        let text_pk = || self.pk().filter(|c| c.kind == Kind::Text);
        named.or_else(|| self.columns.iter().find(unique_text)).or_else(text_pk).map(|c| q(&c.name))
    }
}

/// Learns the schema and statistics of every table through `sql`.
pub async fn introspect<T: ToolHost>(sql: &Sql<'_, T>) -> Result<Schema, SynthError> {
    let version = match sql.json("json_quote(sqlite_version())").await {
        Ok(Value::String(v)) => v,
        Ok(other) => return Err(SynthError::Dialect(format!("sqlite_version() returned {other}"))),
        Err(e) => return Err(SynthError::Dialect(e.to_string())),
    };
    let columns = sql
        .json(&format!(
            "(SELECT json_group_array(json_object('t', m.name, 'c', p.name, 'type', p.type, 'pk', p.pk)) FROM sqlite_master m, pragma_table_info(m.name) p WHERE {USER_TABLES})"
        ))
        .await
        .map_err(|e| SynthError::Introspection(format!("reading the columns through pragma_table_info failed: {e}")))?;
    let fks = sql
        .json(&format!(
            "(SELECT json_group_array(json_object('t', m.name, 'from', f.\"from\", 'parent', f.\"table\", 'to', f.\"to\")) FROM sqlite_master m, pragma_foreign_key_list(m.name) f WHERE {USER_TABLES})"
        ))
        .await
        .map_err(|e| SynthError::Introspection(format!("reading the foreign keys through pragma_foreign_key_list failed: {e}")))?;
    let mut tables: Vec<Table> = Vec::new();
    for c in columns.as_array().into_iter().flatten() {
        let t = str_of(c, "t");
        let column = Column {
            name: str_of(c, "c"),
            decl_type: str_of(c, "type"),
            pk: c.get("pk").and_then(Value::as_i64).unwrap_or(0) > 0,
            kind: Kind::Other,
            nulls: 0,
            distinct: 0,
            values: Vec::new(),
            numeric_text: false,
            blanks: false,
        };
        match tables.iter_mut().find(|x| x.name == t) {
            Some(table) => table.columns.push(column),
            None => tables.push(Table { name: t, rows: 0, columns: vec![column], keys: Vec::new(), labels: Vec::new() }),
        }
    }
    if tables.is_empty() {
        return Err(SynthError::Introspection("the database has no tables".into()));
    }
    for f in fks.as_array().into_iter().flatten() {
        let t = str_of(f, "t");
        let parent = str_of(f, "parent");
        let to = match f.get("to") {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            _ => tables.iter().find(|x| x.name == parent).and_then(Table::pk).map(|c| c.name.clone()).unwrap_or_default(),
        };
        if let Some(table) = tables.iter_mut().find(|x| x.name == t)
            && !to.is_empty()
        {
            table.keys.push(ForeignKey { from: str_of(f, "from"), parent, to, declared: true });
        }
    }
    for table in &mut tables {
        stats(sql, table).await?;
    }
    infer_keys(sql, &mut tables).await?;
    for table in &mut tables {
        if let Some(label) = table.label(None) {
            let v = sql
                .json(&format!(
                    "(SELECT json_group_array(l) FROM (SELECT {label} AS l FROM {} GROUP BY l HAVING count(*) = 1 AND l IS NOT NULL ORDER BY l LIMIT {SAMPLE_LABELS}))",
                    ident(&table.name)
                ))
                .await?;
            table.labels = v.as_array().into_iter().flatten().filter_map(|l| l.as_str().map(String::from)).collect();
        }
    }
    Ok(Schema { sqlite_version: version, tables })
}

fn str_of(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or_default().to_string()
}

/// Row count and per-column statistics of one table, in one query.
async fn stats<T: ToolHost>(sql: &Sql<'_, T>, table: &mut Table) -> Result<(), SynthError> {
    let t = ident(&table.name);
    let cols: Vec<String> = table
        .columns
        .iter()
        .map(|c| {
            let c = ident(&c.name);
            format!(
                "json_object('nulls', (SELECT count(*) FROM {t} WHERE {c} IS NULL), 'blanks', (SELECT count(*) FROM {t} WHERE typeof({c}) = 'text' AND trim({c}) = ''), \
                 'words', (SELECT count(*) FROM {t} WHERE typeof({c}) = 'text' AND trim({c}) GLOB '*[^0-9.eE+-]*'), 'distinct', (SELECT count(DISTINCT {c}) FROM {t}), \
                 'types', json((SELECT json_group_array(DISTINCT typeof({c})) FROM {t} WHERE {c} IS NOT NULL)), \
                 'values', json((SELECT json_group_array(v) FROM (SELECT DISTINCT {c} AS v FROM {t} WHERE {c} IS NOT NULL ORDER BY v LIMIT {SAMPLE_VALUES}))))"
            )
        })
        .collect();
    let v = sql
        .json(&format!("json_object('rows', (SELECT count(*) FROM {t}), 'cols', json_array({}))", cols.join(", ")))
        .await
        .map_err(|e| SynthError::Introspection(format!("statistics of table {}: {e}", table.name)))?;
    table.rows = v["rows"].as_u64().unwrap_or(0);
    for (c, s) in table.columns.iter_mut().zip(v["cols"].as_array().into_iter().flatten()) {
        c.nulls = s["nulls"].as_u64().unwrap_or(0);
        c.distinct = s["distinct"].as_u64().unwrap_or(0);
        let values = s["values"].as_array().cloned().unwrap_or_default();
        let blank = |v: &Value| v.as_str().is_some_and(|s| s.trim().is_empty());
        let blanks = s["blanks"].as_u64().unwrap_or(0);
        c.blanks = blanks > 0;
        c.nulls += blanks;
        c.distinct -= u64::from(values.iter().any(blank));
        c.values = values.into_iter().filter(|v| !blank(v)).collect();
        let types: Vec<&str> = s["types"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        c.kind = kind(&c.decl_type, &types, &c.values);
        let number = |v: &Value| v.as_str().and_then(|s| s.trim().parse::<f64>().ok());
        if c.kind == Kind::Text && s["words"].as_u64() == Some(0) && !c.values.is_empty() && c.values.iter().all(|v| number(v).is_some()) {
            c.numeric_text = true;
            c.kind = Kind::Real;
            let mut numbers: Vec<f64> = c.values.iter().filter_map(number).collect();
            numbers.sort_by(f64::total_cmp);
            c.values = numbers.into_iter().map(|x| if x.fract() == 0.0 { Value::from(x as i64) } else { Value::from(x) }).collect();
        }
    }
    Ok(())
}

fn kind(decl: &str, types: &[&str], values: &[Value]) -> Kind {
    let d = decl.to_ascii_uppercase();
    let only = |allowed: &[&str]| !types.is_empty() && types.iter().all(|t| allowed.contains(t));
    if only(&["integer"]) {
        Kind::Integer
    } else if only(&["integer", "real"]) {
        Kind::Real
    } else if only(&["text"]) {
        let date = regex::Regex::new(r"^\d{4}-\d{2}-\d{2}").expect("valid regex");
        if values.iter().all(|v| v.as_str().is_some_and(|s| date.is_match(s))) { Kind::Date } else { Kind::Text }
    } else if types.is_empty() && d.contains("INT") {
        Kind::Integer
    } else {
        Kind::Other
    }
}

/// Keys for `*_id` columns that the schema does not declare: the parent is the table whose
/// primary key has the same name (or `id` in a table named like the prefix), and every value
/// must be found there.
async fn infer_keys<T: ToolHost>(sql: &Sql<'_, T>, tables: &mut [Table]) -> Result<(), SynthError> {
    let mut found = Vec::new();
    for (i, table) in tables.iter().enumerate() {
        for c in &table.columns {
            let lower = c.name.to_ascii_lowercase();
            if c.pk || table.keys.iter().any(|k| k.from == c.name) || !lower.ends_with("_id") || !matches!(c.kind, Kind::Integer | Kind::Text) {
                continue;
            }
            let prefix = &lower[..lower.len() - 3];
            let parent = tables.iter().filter(|p| p.name != table.name || lower != "id").find_map(|p| {
                let pk = p.pk()?;
                let pname = p.name.to_ascii_lowercase();
                let by_name = pk.name.eq_ignore_ascii_case(&c.name) && p.name != table.name;
                let by_table = pk.name.eq_ignore_ascii_case("id") && [prefix.to_string(), format!("{prefix}s"), format!("{prefix}es")].contains(&pname);
                (by_name || by_table).then(|| (p.name.clone(), pk.name.clone()))
            });
            if let Some((parent, to)) = parent {
                found.push((i, c.name.clone(), parent, to));
            }
        }
    }
    // A column named like a unique column of another table (`state_code` and a lookup table's
    // `State_Code`): a key when every value is found there.
    for (i, table) in tables.iter().enumerate() {
        for c in &table.columns {
            if c.pk
                || table.keys.iter().any(|k| k.from == c.name)
                || found.iter().any(|f| f.0 == i && f.1 == c.name)
                || c.distinct >= table.rows
                || !matches!(c.kind, Kind::Integer | Kind::Text)
            {
                continue;
            }
            let unique = |p: &Table| {
                p.columns.iter().find(|pc| pc.name.eq_ignore_ascii_case(&c.name) && pc.nulls == 0 && pc.distinct == p.rows && p.rows > 1).map(|pc| pc.name.clone())
            };
            if let Some((parent, to)) = tables.iter().filter(|p| p.name != table.name && p.rows < table.rows).find_map(|p| Some((p.name.clone(), unique(p)?))) {
                found.push((i, c.name.clone(), parent, to));
            }
        }
    }
    for (i, from, parent, to) in found {
        let orphans = sql
            .json(&format!(
                "(SELECT count(*) FROM {} WHERE {f} IS NOT NULL AND {f} NOT IN (SELECT {} FROM {}))",
                ident(&tables[i].name),
                ident(&to),
                ident(&parent),
                f = ident(&from)
            ))
            .await?;
        if orphans.as_u64() == Some(0) {
            tables[i].keys.push(ForeignKey { from, parent, to, declared: false });
        }
    }
    Ok(())
}
