//! Plausible slips in a query, for SFT traces that show a mistake and its repair. A model trained
//! only on reference traces never sees a tool error, so after its first one it hands the error in
//! as the answer or explores again and again (benches/RESULTS.md, "Run 27"). A slip here is the
//! kind a model makes: a column or table named the way the question or another naming convention
//! would name it (`hire_date` as `HireDate`, `ConstructionStartAt` as `StartAt`, `employees` as
//! `employee`). Whether it really fails is the server's to say: the caller runs it and keeps only
//! one the server answers with an error.

use crate::names::{plural, plural_of, singular, words};

/// SQL words that are never a column, whatever a tool's text shows.
const KEYWORDS: &[&str] = &[
    "all",
    "and",
    "as",
    "asc",
    "between",
    "by",
    "case",
    "cast",
    "collate",
    "cross",
    "desc",
    "distinct",
    "else",
    "end",
    "escape",
    "except",
    "exists",
    "false",
    "from",
    "glob",
    "group",
    "having",
    "in",
    "inner",
    "integer",
    "intersect",
    "is",
    "join",
    "left",
    "like",
    "limit",
    "natural",
    "nocase",
    "not",
    "null",
    "numeric",
    "offset",
    "on",
    "or",
    "order",
    "outer",
    "real",
    "right",
    "select",
    "text",
    "then",
    "true",
    "union",
    "using",
    "when",
    "where",
    "with",
];

/// What a slip renames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Named {
    Column,
    Table,
}

/// One identifier of a query: its byte range, and whether a `.` follows (a table or alias
/// qualifying a column) or a `(` (a function).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Ident {
    start: usize,
    end: usize,
    qualifier: bool,
    call: bool,
}

/// The bare identifiers of `sql`, outside string literals and quoted names.
fn idents(sql: &str) -> Vec<Ident> {
    let b = sql.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            q @ (b'\'' | b'"' | b'`') => {
                // A quote closes at the next unescaped one ('' and "" escape themselves).
                i += 1;
                while i < b.len() {
                    if b[i] == q && b.get(i + 1) == Some(&q) {
                        i += 2;
                    } else if b[i] == q {
                        break;
                    } else {
                        i += 1;
                    }
                }
                i += 1;
            }
            b'[' => i = b[i..].iter().position(|&c| c == b']').map_or(b.len(), |p| i + p + 1),
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                let next = b[i..].iter().find(|c| !c.is_ascii_whitespace());
                out.push(Ident { start, end: i, qualifier: next == Some(&b'.'), call: next == Some(&b'(') });
            }
            c if c.is_ascii_digit() => {
                // A number (`1e3`, `12abc` is not SQL): its letters are not an identifier.
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.') {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    out
}

/// Other names for `name` that a model might write for it, in order of how often such slips
/// come (another naming convention, a word dropped, the other number, a `name` suffix); none equal
/// to `name` whatever the case (SQLite's names are not case-sensitive), each written in `name`'s
/// convention (`snake_case`, or `PascalCase` when it has capitals and no underscore).
pub fn wrong_names(name: &str, named: Named) -> Vec<String> {
    let w = words(name);
    let snake = name.contains('_') || !name.chars().any(|c| c.is_uppercase());
    let pascal = |ws: &[String]| ws.iter().map(|x| capitalized(x)).collect::<String>();
    let join = |ws: &[String]| if snake { ws.join("_") } else { pascal(ws) };
    let phrase = |p: String| join(&p.split(' ').map(String::from).collect::<Vec<_>>());
    let mut out = Vec::new();
    if w.len() > 1 {
        out.push(if snake { pascal(&w) } else { w.join("_") });
        out.push(join(&w[1..]));
        out.push(join(&w[..w.len() - 1]));
    }
    match named {
        Named::Table => out.extend([phrase(singular(name)), phrase(plural(name))]),
        Named::Column if w.len() == 1 => {
            out.push(phrase(plural_of(&w[0])));
            if !matches!(w[0].as_str(), "name" | "id") {
                out.push(join(&[w[0].clone(), "name".into()]));
            }
        }
        Named::Column => {}
    }
    let mut seen = vec![name.to_lowercase()];
    out.retain(|n| {
        let fresh = !n.is_empty() && !seen.contains(&n.to_lowercase());
        seen.push(n.to_lowercase());
        fresh
    });
    out
}

fn capitalized(word: &str) -> String {
    let mut c = word.chars();
    c.next().map_or_else(String::new, |f| f.to_uppercase().chain(c).collect())
}

/// A query with one slip, and what it misnamed.
#[derive(Debug, Clone, PartialEq)]
pub struct Misnamed {
    pub sql: String,
    /// The right name, as the query writes it.
    pub name: String,
    pub named: Named,
}

/// Queries that differ from `sql` by one slip each: every use of one column (an identifier
/// `kind_of` calls a column) or one table renamed to one of its [`wrong_names`]. Columns come
/// first, in the order the query uses them; `kind_of` says what a name is (`None`: neither, an
/// alias or a word the caller does not know).
pub fn slips(sql: &str, kind_of: impl Fn(&str) -> Option<Named>) -> Vec<Misnamed> {
    let ids = idents(sql);
    let mut names: Vec<(&str, Named)> = Vec::new();
    for id in &ids {
        let name = &sql[id.start..id.end];
        if id.call || KEYWORDS.contains(&name.to_lowercase().as_str()) || names.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)) {
            continue;
        }
        if let Some(kind) = kind_of(name).filter(|k| !id.qualifier || *k == Named::Table) {
            names.push((name, kind));
        }
    }
    names.sort_by_key(|(_, k)| *k == Named::Table);
    let mut out = Vec::new();
    for (name, kind) in names {
        for wrong in wrong_names(name, kind) {
            let mut s = String::with_capacity(sql.len() + 8);
            let mut at = 0;
            for id in ids.iter().filter(|id| sql[id.start..id.end].eq_ignore_ascii_case(name) && !id.call) {
                s.push_str(&sql[at..id.start]);
                s.push_str(&wrong);
                at = id.end;
            }
            s.push_str(&sql[at..]);
            out.push(Misnamed { sql: s, name: name.to_string(), named: kind });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(name: &str) -> Option<Named> {
        match name {
            "employees" | "departments" => Some(Named::Table),
            "hire_date" | "name" | "department_id" | "id" | "Status" | "ConstructionStartAt" => Some(Named::Column),
            _ => None,
        }
    }

    #[test]
    fn identifiers_skip_literals_quoted_names_and_numbers() {
        let sql = r#"SELECT "first name", e.name FROM employees e WHERE note = 'it''s name' AND x > 1e3 AND [odd col] = 2"#;
        let found: Vec<&str> = idents(sql).iter().map(|i| &sql[i.start..i.end]).collect();
        assert_eq!(found, ["SELECT", "e", "name", "FROM", "employees", "e", "WHERE", "note", "AND", "x", "AND"]);
        let e = idents(sql)[1];
        assert!(e.qualifier && !e.call);
        assert!(idents("SELECT count (*) FROM t")[1].call);
    }

    #[test]
    fn wrong_names_follow_the_name_s_convention_and_never_equal_it() {
        assert_eq!(wrong_names("hire_date", Named::Column), ["HireDate", "date", "hire"]);
        assert_eq!(wrong_names("ConstructionStartAt", Named::Column), ["construction_start_at", "StartAt", "ConstructionStart"]);
        assert_eq!(wrong_names("Status", Named::Column), ["Statuses", "StatusName"]);
        assert_eq!(wrong_names("name", Named::Column), ["names"]);
        assert_eq!(wrong_names("employees", Named::Table), ["employee"]);
        assert_eq!(wrong_names("nuclear_power_plants", Named::Table), ["NuclearPowerPlants", "power_plants", "nuclear_power", "nuclear_power_plant"]);
        for n in ["id", "Name", "role", "x_y", "A"] {
            assert!(wrong_names(n, Named::Column).iter().all(|w| !w.eq_ignore_ascii_case(n) && !w.is_empty()), "{n}");
        }
    }

    #[test]
    fn a_slip_renames_every_use_of_one_name_and_nothing_else() {
        let sql = "SELECT e.name, count(*) FROM employees e JOIN departments d ON e.department_id = d.id WHERE e.hire_date > '2019 name' GROUP BY e.name";
        let found = slips(sql, kind);
        let all: Vec<&str> = found.iter().map(|m| m.sql.as_str()).collect();
        assert_eq!((found[0].name.as_str(), found[0].named), ("name", Named::Column));
        assert_eq!(
            all[0], "SELECT e.names, count(*) FROM employees e JOIN departments d ON e.department_id = d.id WHERE e.hire_date > '2019 name' GROUP BY e.names",
            "both uses renamed, the literal not"
        );
        assert!(all.iter().any(|s| s.contains("FROM employee e") && s.contains("e.name")), "a table slip: {all:#?}");
        assert!(all.iter().all(|s| s.contains("count(*)") && s.contains("'2019 name'")));
        let tables_from = all.iter().position(|s| s.contains("FROM employee ")).unwrap();
        assert_eq!((found[tables_from].name.as_str(), found[tables_from].named), ("employees", Named::Table));
        assert!(all[..tables_from].iter().all(|s| s.contains("FROM employees")), "columns before tables");
        assert!(slips("SELECT count(*) FROM t", kind).is_empty(), "nothing the caller knows: no slip");
    }
}
