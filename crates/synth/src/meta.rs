//! Questions about the database itself: how many tables, a table's columns, its primary key,
//! the columns that may be NULL, which column links one table to another and which tables
//! point at a table. People new to a database ask these first, and the answers come from the
//! tools that describe it (`list_tables`, `describe_table`) as much as from a query; the SQL
//! that checks them reads SQLite's catalogue (`sqlite_master`, `pragma_table_info`,
//! `pragma_foreign_key_list`) through the server's query tool, as the schema itself was learnt.

use crate::candidate::{Candidate, Shape};
use crate::names::{human, plural};
use crate::schema::{Schema, USER_TABLES, literal};

/// The templates of this module: their phrasings name tables and columns as the schema does,
/// which is how people ask about a schema (`scenario.phrasing` = "schema").
pub const TEMPLATES: &[&str] = &["table_count", "column_count", "primary_key", "nullable_columns", "key_column", "referenced_by", "column_of"];

/// Columns per table asked for by what they hold ("the column that holds a department's budget").
const COLUMNS_ASKED: usize = 4;

/// Every question about the schema's structure.
pub fn candidates(schema: &Schema) -> Vec<Candidate> {
    let mut out = vec![question(
        "table_count",
        1,
        &[],
        vec!["How many tables are in the database?".into(), "How many tables does the database have?".into(), "Count the tables in the database.".into()],
        format!("SELECT count(*) FROM sqlite_master m WHERE {USER_TABLES}"),
        Shape::One,
    )];
    for t in &schema.tables {
        let (name, lit) = (&t.name, literal(&t.name));
        // people name a table as it is named, or in words
        let spoken = plural(name);
        let tables = [name.clone()];
        out.push(question(
            "column_count",
            1,
            &tables,
            vec![
                format!("How many columns does the {name} table have?"),
                format!("What is the number of columns in the {name} table?"),
                format!("How many fields does a record of {spoken} have?"),
            ],
            format!("SELECT count(*) FROM pragma_table_info({lit})"),
            Shape::One,
        ));
        out.push(question(
            "primary_key",
            1,
            &tables,
            vec![
                format!("What is the primary key of the {name} table?"),
                format!("Which column is the primary key of {name}?"),
                format!("Which column identifies each row of the {spoken}?"),
            ],
            format!("SELECT name FROM pragma_table_info({lit}) WHERE pk > 0"),
            Shape::List,
        ));
        out.push(question(
            "nullable_columns",
            2,
            &tables,
            vec![
                format!("Which columns of the {name} table are allowed to be NULL?"),
                format!("Which columns of {name} may be left empty (NULL)?"),
                format!("List the nullable columns of the {name} table."),
            ],
            format!("SELECT name FROM pragma_table_info({lit}) WHERE \"notnull\" = 0 AND pk = 0"),
            Shape::List,
        ));
        out.push(question(
            "referenced_by",
            2,
            &tables,
            vec![
                format!("Which other tables have a foreign key that references the {name} table?"),
                format!("Which tables point to {name}?"),
                format!("Which tables refer to the {spoken}?"),
            ],
            format!("SELECT DISTINCT m.name FROM sqlite_master m, pragma_foreign_key_list(m.name) f WHERE {USER_TABLES} AND f.\"table\" = {lit} AND m.name <> {lit}"),
            Shape::List,
        ));
        for parent in t.keys.iter().filter(|k| k.declared).map(|k| &k.parent) {
            let plit = literal(parent);
            out.push(question(
                "key_column",
                2,
                &tables,
                vec![
                    format!("Which column of the {name} table links a row to the {parent} table?"),
                    format!("Which column of {name} references {parent}?"),
                    format!("What is the foreign key column in {name} that points to {parent}?"),
                ],
                format!("SELECT \"from\" FROM pragma_foreign_key_list({lit}) WHERE \"table\" = {plit}"),
                Shape::List,
            ));
        }
        for c in t.columns.iter().filter(|c| human(&c.name) != c.name && !t.is_key(c)).take(COLUMNS_ASKED) {
            let what = human(&c.name);
            out.push(question(
                "column_of",
                1,
                &tables,
                vec![format!("What is the name of the column of the {name} table that holds the {what}?"), format!("Which column of {name} has the {what}?")],
                format!("SELECT name FROM pragma_table_info({lit}) WHERE name = {}", literal(&c.name)),
                Shape::One,
            ));
        }
    }
    out
}

fn question(template: &'static str, difficulty: u8, tables: &[String], phrasings: Vec<String>, sql: String, answer: Shape) -> Candidate {
    Candidate { template, difficulty, tables: tables.to_vec(), phrasings, technical: None, sql, width: 1, answer, probe: None, lookups: Vec::new() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Column, ForeignKey, Table};

    #[test]
    fn every_table_gets_its_questions_and_their_templates_are_listed() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE teams (team_id INTEGER PRIMARY KEY, team_name TEXT NOT NULL);
             CREATE TABLE players (player_id INTEGER PRIMARY KEY, team_id INTEGER REFERENCES teams(team_id), nick TEXT);",
        )
        .unwrap();
        let column = Column::text;
        let table = |name: &str, columns: Vec<Column>, keys: Vec<ForeignKey>| Table { name: name.into(), rows: 0, columns, keys, labels: vec![] };
        let key = ForeignKey { from: "team_id".into(), parent: "teams".into(), to: "team_id".into(), declared: true };
        let schema = Schema {
            sqlite_version: String::new(),
            tables: vec![
                table("teams", vec![column("team_id", true), column("team_name", false)], vec![]),
                table("players", vec![column("player_id", true), column("team_id", false), column("nick", false)], vec![key]),
            ],
        };
        let all = candidates(&schema);
        assert!(all.iter().all(|c| TEMPLATES.contains(&c.template)));
        let answers = |template: &str| -> Vec<Vec<String>> {
            all.iter()
                .filter(|c| c.template == template)
                .map(|c| {
                    let mut stmt = conn.prepare(&c.sql).unwrap();
                    stmt.query_map([], |r| r.get::<_, rusqlite::types::Value>(0)).unwrap().map(|v| format!("{:?}", v.unwrap())).collect()
                })
                .collect()
        };
        assert_eq!(answers("table_count"), [["Integer(2)"]]);
        assert_eq!(answers("column_count"), [["Integer(2)"], ["Integer(3)"]]);
        assert_eq!(answers("primary_key"), [[r#"Text("team_id")"#], [r#"Text("player_id")"#]]);
        assert_eq!(answers("nullable_columns"), [vec![], vec![r#"Text("team_id")"#.to_string(), r#"Text("nick")"#.to_string()]]);
        assert_eq!(answers("key_column"), [[r#"Text("team_id")"#]]);
        assert_eq!(answers("referenced_by"), [vec![r#"Text("players")"#.to_string()], vec![]]);
        // the column that holds the "team name"; keys and `nick` (read as itself) are not asked
        assert_eq!(answers("column_of"), [[r#"Text("team_name")"#]]);
    }
}
