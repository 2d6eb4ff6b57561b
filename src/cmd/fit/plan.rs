//! Where a run's tasks come from, picked from what the server offers: SQL synthesis when it has
//! a SQL query tool, the tool walk when it does not; a teacher, when one is given, adds
//! paraphrases of the synthesized questions or tasks of its own seeded with the walk's calls.

use std::fmt;

use ta_types::ToolSpec;

/// The synthesizer that writes a run's checked tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Synthesizer {
    /// `scenarios synth`: SQL queries through the server's query tool.
    Sql,
    /// `scenarios walk`: questions about what the server's read tools return.
    Walk,
}

/// A run's task source, and why it was picked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskSource {
    pub synthesizer: Synthesizer,
    /// Paraphrases (`scenarios paraphrase`, after SQL synthesis) or teacher-written tasks seeded
    /// with the walk's calls (`scenarios generate --walk`).
    pub teacher: Option<String>,
    pub reason: String,
    /// The tools the tasks will name, when known before they are written (SQL synthesis), and
    /// whether they only read.
    pub tools: Option<(Vec<String>, bool)>,
}

impl TaskSource {
    /// The source for a server offering `specs`.
    pub fn pick(specs: &[ToolSpec], teacher: Option<&str>) -> TaskSource {
        let (synthesizer, reason, tools) = match ta_synth::tools::SqlTools::detect(specs, None) {
            Ok(sql) => (Synthesizer::Sql, format!("the server has a SQL query tool ({})", sql.query.name), Some((sql.names(), sql.query_reads_only))),
            Err(_) => (Synthesizer::Walk, "the server has no SQL query tool: questions about what its read-only tools return".to_string(), None),
        };
        TaskSource { synthesizer, teacher: teacher.map(String::from), reason, tools }
    }

    /// SQL synthesis on a server known to have a query tool (`why` names it).
    pub fn sql(why: &str) -> TaskSource {
        TaskSource { synthesizer: Synthesizer::Sql, teacher: None, reason: why.to_string(), tools: None }
    }

    /// The subcommands that write the tasks, in order.
    pub fn commands(&self) -> Vec<&'static str> {
        let mut c = vec![match self.synthesizer {
            Synthesizer::Sql => "scenarios synth",
            Synthesizer::Walk => "scenarios walk",
        }];
        if self.teacher.is_some() {
            c.push(match self.synthesizer {
                Synthesizer::Sql => "scenarios paraphrase",
                Synthesizer::Walk => "scenarios generate",
            });
        }
        c
    }
}

impl fmt::Display for TaskSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.commands().join(" + "), self.reason)?;
        if let Some(t) = &self.teacher {
            write!(f, "; teacher {t}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tool(name: &str, desc: &str, arg: Option<&str>) -> ToolSpec {
        let params = match arg {
            Some(a) => json!({"type": "object", "properties": {a: {"type": "string"}}, "required": [a]}),
            None => json!({"type": "object", "properties": {}}),
        };
        ToolSpec::new(name, Some(desc.into()), params)
    }

    #[test]
    fn a_sql_server_gets_synthesis_any_other_the_walk() {
        let sqlite = [tool("read_query", "Execute a SELECT query on the SQLite database", Some("query")), tool("list_tables", "List all tables", None)];
        let s = TaskSource::pick(&sqlite, None);
        assert_eq!((s.synthesizer, s.commands()), (Synthesizer::Sql, vec!["scenarios synth"]));
        assert!(s.to_string().contains("read_query"), "{s}");
        assert_eq!(s.tools, Some((vec!["list_tables".to_string(), "read_query".to_string()], true)), "known before synthesis, and read-only");
        let fs = [tool("read_text_file", "Read a file", Some("path")), tool("list_directory", "List a directory", Some("path"))];
        let w = TaskSource::pick(&fs, None);
        assert_eq!((w.synthesizer, w.commands()), (Synthesizer::Walk, vec!["scenarios walk"]));
        assert_eq!(w.tools, None, "the walk finds its tools as it goes");
        assert_eq!(TaskSource::pick(&sqlite, Some("local/q")).commands(), ["scenarios synth", "scenarios paraphrase"]);
        assert_eq!(TaskSource::pick(&fs, Some("local/q")).commands(), ["scenarios walk", "scenarios generate"]);
    }
}
