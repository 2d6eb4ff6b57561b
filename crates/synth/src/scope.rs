//! The parts a question is built from (`crate::grammar`): a scope (one table's rows and the
//! columns its keys lead to, each with a role), the filters on it, and the joins they need.

use serde_json::Value;

use crate::names::{date_verb, human, is_place, plural, relation, shown, singular, with_article, words};
use crate::schema::{Column, Kind, Schema, Table, ident, literal, value_literal};

/// Categories with more values than this are not filtered or grouped on.
pub(crate) const MAX_CATEGORIES: u64 = 25;
/// Values of one category used as filters.
pub(crate) const VALUES_PER_CATEGORY: usize = 8;
/// Values of one category whose complement ("not terminated") is a filter too.
pub(crate) const NEGATED_VALUES: usize = 2;
/// Entities named per scope in lookups and parent filters.
pub(crate) const MAX_ENTITIES: usize = 24;

/// What an attribute is for.
#[derive(Debug, Clone)]
pub(crate) enum Role {
    /// A few distinct values: filtered on and grouped by.
    Category(Vec<Value>),
    /// Numbers to aggregate and rank by; `values` sorted.
    Quantity(Vec<Value>),
    /// `YYYY-MM-DD` text: earliest/latest and years.
    Date(Vec<Value>),
    /// The column naming a row for a person, with names that name one row each.
    Label(Vec<String>),
    /// Free text with frequent words (for `LIKE`).
    Text(Vec<String>),
}

/// A column of the scope's table or of a table its keys lead to.
#[derive(Debug, Clone)]
pub(crate) struct Attr {
    pub(crate) expr: String,
    /// "status", "department location"; a parent's label is the relation's name ("department").
    pub(crate) phrase: String,
    /// The schema's own name (`table.column`), for technical phrasings.
    pub(crate) raw: String,
    /// The joins it needs: a prefix of one of the scope's join chains.
    pub(crate) path: Vec<usize>,
    pub(crate) role: Role,
    /// Some rows have no value (a filter can ask for those).
    pub(crate) nullable: bool,
    /// For a parent's label: the condition on the scope's own key that the row has no parent
    /// (`lead_employee_id IS NULL`), when some rows have none.
    pub(crate) missing: Option<String>,
    /// The rows it names are people (first and last names): asked about with "who".
    pub(crate) person: bool,
    /// For a category (whose every distinct value was sampled): what a question naming one of
    /// them loosely needs ([`mention`]).
    pub(crate) values_of: Option<ValueList>,
}

/// A category column's stored values and the query that lists them, which the reference of a
/// question naming one value loosely runs before its answer, as a careful asker would: the list
/// shows the stored spelling whatever the question's words (a case, a part, another word).
#[derive(Debug, Clone)]
pub(crate) struct ValueList {
    pub(crate) query: String,
    /// Every distinct value: a loose name must fit one of them and no other.
    pub(crate) values: Vec<Value>,
}

impl Attr {
    /// A parent's column by its own name ("salary" of the employee's salary), or None for a
    /// column of another table.
    pub(crate) fn name_under(&self, parent: &Attr) -> Option<&str> {
        self.phrase.strip_prefix(&parent.phrase)?.strip_prefix("'s ")
    }
}

/// One table's rows and everything reachable from them along keys.
pub(crate) struct Scope<'a> {
    pub(crate) table: &'a Table,
    pub(crate) plural: String,
    pub(crate) singular: String,
    /// `JOIN ...` clauses, by index; a path lists the ones an attribute needs, in order.
    pub(crate) joins: Vec<(String, String)>,
    pub(crate) attrs: Vec<Attr>,
    /// The index of the table's own label among `attrs`.
    pub(crate) label: Option<usize>,
    /// The table's alias in queries with joins.
    pub(crate) alias: String,
}

/// A relation's name from its key, as people say it of a person: `lead_employee_id` to an
/// employees table is the project's "lead", `head_employee_id` the department's "head"; other
/// keys keep their name (`home_team_id` stays "home team").
pub(crate) fn person_relation(key: &str, parent: &Table) -> String {
    let rel = relation(key);
    let noun = singular(&parent.name);
    match rel.strip_suffix(&format!(" {noun}")) {
        Some(role) if parent.is_person() => role.to_string(),
        _ => rel,
    }
}

/// A short alias from a table's initials (`project_assignments` → `pa`), unique among `used`
/// and never a keyword.
pub(crate) fn initials(table: &str, used: &mut Vec<String>) -> String {
    let stem: String = words(table).iter().filter_map(|w| w.chars().next()).filter(char::is_ascii_alphabetic).collect();
    let stem = if stem.is_empty() { "t".to_string() } else { stem };
    let mut alias = stem.clone();
    let mut n = 1;
    while used.contains(&alias) || ident(&alias) != alias {
        n += 1;
        alias = format!("{stem}{n}");
    }
    used.push(alias.clone());
    alias
}

/// The scope table's alias while a query is built: [`Scope::finish`] drops it from a query
/// without joins (`SELECT count(*) FROM plants`, as people write it) and names it otherwise.
pub(crate) const BASE: &str = "\u{1}";

impl<'a> Scope<'a> {
    pub(crate) fn new(schema: &'a Schema, table: &'a Table) -> Self {
        let mut used = Vec::new();
        let alias = initials(&table.name, &mut used);
        let mut s = Scope { table, alias, plural: plural(&table.name), singular: singular(&table.name), joins: Vec::new(), attrs: Vec::new(), label: None };
        s.add_attrs(table, BASE, &[], None);
        s.label = s.attrs.iter().position(|a| a.path.is_empty() && matches!(a.role, Role::Label(_)));
        for fk in &table.keys {
            let Some(parent) = schema.tables.iter().find(|p| p.name == fk.parent) else { continue };
            let j = s.joins.len();
            let rel = person_relation(&fk.from, parent);
            // a key to the table itself (an employee's manager) joins a second copy, named after
            // the relation (`m`), so that the two copies read apart
            let alias = if parent.name == table.name { initials(&rel, &mut used) } else { initials(&parent.name, &mut used) };
            s.joins.push((format!("JOIN {} {alias} ON {BASE}.{} = {alias}.{}", ident(&parent.name), ident(&fk.from), ident(&fk.to)), parent.name.clone()));
            let before = s.attrs.len();
            s.add_attrs(parent, &alias, &[j], Some(&rel));
            // rows without a parent ("projects with no lead"): the key is NULL, asked without the join
            if let Some(label) = s.attrs.get_mut(before).filter(|a| matches!(a.role, Role::Label(_)))
                && table.column(&fk.from).is_some_and(|c| c.nulls > 0)
            {
                label.missing = Some(format!("{BASE}.{} IS NULL", ident(&fk.from)));
            }
            // a second hop from a second copy of the table (the manager's department) reads as
            // its own kind of question, rarely asked
            for fk2 in parent.keys.iter().filter(|_| parent.name != table.name) {
                let Some(top) = schema.tables.iter().find(|p| p.name == fk2.parent && p.name != parent.name && p.name != table.name) else { continue };
                let k = s.joins.len();
                let alias2 = initials(&top.name, &mut used);
                s.joins.push((format!("JOIN {} {alias2} ON {alias}.{} = {alias2}.{}", ident(&top.name), ident(&fk2.from), ident(&fk2.to)), top.name.clone()));
                let rel2 = format!("{rel}'s {}", person_relation(&fk2.from, top));
                s.add_attrs(top, &alias2, &[j, k], Some(&rel2));
            }
        }
        s
    }

    /// The attributes of `t` (aliased `alias`), reached through `path`; `rel` names the
    /// relation for a joined table (its label becomes "the department", its columns "the
    /// department's location").
    pub(crate) fn add_attrs(&mut self, t: &Table, alias: &str, path: &[usize], rel: Option<&str>) {
        let phrase = |c: &Column| match rel {
            Some(r) => format!("{r}'s {}", human(&c.name)),
            None => human(&c.name),
        };
        let raw = |c: &Column| format!("{}.{}", t.name, c.name);
        if let Some(l) = t.label(Some(alias))
            && !t.labels.is_empty()
        {
            let (phrase, raw) = match rel {
                Some(r) => (r.to_string(), format!("{}'s label", t.name)),
                None => (self.singular.clone(), format!("{} label", t.name)),
            };
            self.attrs.push(Attr {
                expr: l,
                phrase,
                raw,
                path: path.to_vec(),
                role: Role::Label(t.labels.iter().take(MAX_ENTITIES).cloned().collect()),
                nullable: false,
                missing: None,
                person: t.is_person(),
                values_of: None,
            });
        }
        for c in &t.columns {
            if t.is_key(c) || c.nulls >= t.rows {
                continue;
            }
            let role = if c.kind == Kind::Date {
                Role::Date(c.values.clone())
            } else if is_category(t, c) {
                Role::Category(c.values.iter().take(VALUES_PER_CATEGORY).cloned().collect())
            } else if is_quantity(t, c) {
                Role::Quantity(c.values.clone())
            } else if c.kind == Kind::Text && rel.is_none() && c.distinct > MAX_CATEGORIES {
                Role::Text(frequent_words(&c.values))
            } else {
                continue;
            };
            let values_of = matches!(role, Role::Category(_))
                .then(|| ValueList { query: format!("SELECT DISTINCT {} FROM {}", ident(&c.name), ident(&t.name)), values: c.values.clone() });
            self.attrs.push(Attr {
                expr: c.sql(alias),
                phrase: phrase(c),
                raw: raw(c),
                path: path.to_vec(),
                role,
                nullable: c.nulls > 0,
                missing: None,
                person: false,
                values_of,
            });
        }
    }

    /// A built query as it is asked: the scope's alias named where there are joins, dropped
    /// where there are none.
    pub(crate) fn finish(&self, sql: &str) -> String {
        if sql.contains(" JOIN ") { sql.replace(BASE, &self.alias) } else { sql.replace(&format!("{BASE}."), "").replace(&format!(" {BASE}"), "") }
    }

    /// FROM with the joins of the longest of `paths` (they are prefixes of one chain).
    pub(crate) fn from(&self, paths: &[&[usize]]) -> String {
        self.joined(longest(paths))
    }

    /// FROM with the given joins, in order: a chain, or first hops side by side (the two parents
    /// of a linking table).
    pub(crate) fn joined(&self, joins: &[usize]) -> String {
        let mut from = format!("FROM {} {BASE}", ident(&self.table.name));
        for &j in joins {
            from.push(' ');
            from.push_str(&self.joins[j].0);
        }
        from
    }

    pub(crate) fn tables(&self, paths: &[&[usize]]) -> Vec<String> {
        let mut t: Vec<String> = longest(paths).iter().rev().map(|&j| self.joins[j].1.clone()).collect();
        t.push(self.table.name.clone());
        // a table joined to itself (an employee's manager) is explored once
        let mut seen = std::collections::HashSet::new();
        t.retain(|name| seen.insert(name.clone()));
        t
    }
}

/// The longest of compatible join paths: the joins a query over all of them needs.
pub(crate) fn longest<'p>(paths: &[&'p [usize]]) -> &'p [usize] {
    paths.iter().max_by_key(|p| p.len()).copied().unwrap_or(&[])
}

/// Whether two join paths can share one FROM (one is a prefix of the other).
pub(crate) fn compatible(a: &[usize], b: &[usize]) -> bool {
    a.iter().zip(b).all(|(x, y)| x == y)
}

pub(crate) fn is_category(t: &Table, c: &Column) -> bool {
    matches!(c.kind, Kind::Text | Kind::Integer) && c.distinct >= 2 && c.distinct <= MAX_CATEGORIES && c.distinct < t.rows && c.values.len() as u64 == c.distinct
}

pub(crate) fn is_quantity(t: &Table, c: &Column) -> bool {
    matches!(c.kind, Kind::Integer | Kind::Real) && c.distinct > MAX_CATEGORIES.min(t.rows / 2).max(3)
}

/// Words of 4+ letters shared by several sampled values: what a person searches text for.
pub(crate) fn frequent_words(values: &[Value]) -> Vec<String> {
    let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
    for v in values.iter().filter_map(Value::as_str) {
        let mut seen = std::collections::HashSet::new();
        for w in v.split(|c: char| !c.is_alphanumeric()).filter(|w| w.len() >= 4 && w.chars().all(char::is_alphabetic)) {
            if seen.insert(w.to_string()) {
                *counts.entry(w.to_string()).or_default() += 1;
            }
        }
    }
    let mut words: Vec<(String, usize)> = counts.into_iter().filter(|(_, n)| *n >= 2).collect();
    words.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    words.into_iter().take(4).map(|(w, _)| w).collect()
}

/// A condition on the scope's rows.
#[derive(Debug, Clone)]
pub(crate) struct Filter {
    pub(crate) sql: String,
    /// Words that follow the rows' noun: "with status Operational", "in France".
    pub(crate) post: Vec<String>,
    pub(crate) raw: String,
    pub(crate) path: Vec<usize>,
    /// The attribute it constrains (not grouped by nor asked about).
    pub(crate) attr: usize,
    /// The join whose row it says is missing ("with no manager"): nothing that needs that join
    /// can go with it, as the join drops exactly those rows.
    pub(crate) absent: Option<usize>,
    /// The query that lists the stored values a loose mention ([`mention`]) picks from: the
    /// reference runs it before its answer, as a careful asker would.
    pub(crate) lookup: Option<String>,
}

impl Filter {
    /// Whether the filter can share a query with parts that need the joins of `path`.
    pub(crate) fn agrees(&self, path: &[usize]) -> bool {
        compatible(&self.path, path) && self.absent.is_none_or(|j| path.first() != Some(&j))
    }
}

/// The filters of a scope's attributes; with `loose`, also each category value named loosely
/// ([`mention`]) beside its exact wording, with the lookup that finds it.
pub(crate) fn filters(s: &Scope, loose: bool) -> Vec<Filter> {
    let mut out = Vec::new();
    for (i, a) in s.attrs.iter().enumerate() {
        let f = |sql: String, post: Vec<String>, raw: String| Filter { sql, post, raw, path: a.path.clone(), attr: i, absent: None, lookup: None };
        let p = &a.phrase;
        if a.nullable && a.path.is_empty() {
            out.push(f(format!("{} IS NULL", a.expr), vec![format!("with no {p} recorded"), format!("whose {p} is missing")], format!("{} IS NULL", a.raw)));
            out.push(f(format!("{} IS NOT NULL", a.expr), vec![format!("with a {p} recorded"), format!("whose {p} is known")], format!("{} IS NOT NULL", a.raw)));
        }
        if let Some(missing) = &a.missing {
            // no join: the rows without a parent are the ones a join would drop
            out.push(Filter {
                sql: missing.clone(),
                post: vec![format!("with no {p}"), format!("without a {p}"), format!("that have no {p}")],
                raw: format!("{} IS NULL", a.raw),
                path: Vec::new(),
                attr: i,
                absent: a.path.first().copied(),
                lookup: None,
            });
        }
        match &a.role {
            Role::Category(values) => {
                for (k, v) in values.iter().enumerate() {
                    let (vs, vl) = (shown(v), value_literal(v));
                    if vs.trim().is_empty() {
                        continue;
                    }
                    let mut post = vec![format!("with {p} {vs}"), format!("whose {p} is {vs}")];
                    if is_place(p) && v.is_string() {
                        post.push(format!("in {vs}"));
                    }
                    out.push(f(format!("{} = {vl}", a.expr), post, format!("{} = {vl}", a.raw)));
                    if let Some(list) = a.values_of.as_ref().filter(|_| loose) {
                        let looked_up =
                            |post: Vec<String>| Filter { lookup: Some(list.query.clone()), ..f(format!("{} = {vl}", a.expr), post, format!("{} = {vl}", a.raw)) };
                        let loosely = mention(v, &list.values);
                        if let Some(m) = &loosely {
                            out.push(looked_up(vec![format!("with {p} {m}"), format!("whose {p} is {m}")]));
                        }
                        // "employees currently on leave", "the project marked cancelled": a state
                        // of the rows themselves named by its value alone, as people ask (words
                        // that read after a noun in the singular and the plural); only where no
                        // other category of the table has a value so named (else ambiguous)
                        if let Some(name) = loosely.or_else(|| v.as_str().map(str::to_string)).filter(|_| a.path.is_empty() && is_state(p))
                            && !s.attrs.iter().enumerate().any(|(j, b)| j != i && b.path.is_empty() && names_value(b, &name))
                        {
                            // "currently" reads before a short state ("on hold"), not before part
                            // of a phrase ("Formal action is not in the public interest")
                            let mut post = vec![format!("marked {name}")];
                            if vs.split([' ', '_']).count() <= 2 {
                                post.insert(0, format!("currently {name}"));
                            }
                            out.push(looked_up(post));
                        }
                    }
                    // "not terminated": the complement of a value, where no row lacks one (NULLs
                    // would be neither)
                    if k < NEGATED_VALUES && values.len() > 2 && !a.nullable {
                        out.push(f(
                            format!("{} <> {vl}", a.expr),
                            vec![format!("whose {p} is not {vs}"), format!("with a {p} other than {vs}")],
                            format!("{} <> {vl}", a.raw),
                        ));
                    }
                }
            }
            Role::Label(names) if !a.path.is_empty() => {
                for who in names.iter().take(6) {
                    let mut post = vec![format!("whose {p} is {who}"), format!("of the {p} {who}")];
                    if is_place(p) {
                        post.push(format!("in {who}"));
                    }
                    out.push(f(format!("{} = {}", a.expr, literal(who)), post, format!("{} = {}", a.raw, literal(who))));
                }
            }
            Role::Quantity(values) => {
                if let Some(mid) = values.get(values.len() / 2).filter(|v| v.is_number()) {
                    out.push(f(
                        format!("{} > {mid}", a.expr),
                        vec![format!("with {} above {mid}", with_article(p)), format!("whose {p} is more than {mid}")],
                        format!("{} > {mid}", a.raw),
                    ));
                    out.push(f(
                        format!("{} < {mid}", a.expr),
                        vec![format!("with {} below {mid}", with_article(p)), format!("whose {p} is less than {mid}")],
                        format!("{} < {mid}", a.raw),
                    ));
                }
            }
            Role::Date(values) => {
                let verb = date_verb(p);
                for y in years(values).into_iter().take(6) {
                    // "hired in 2021" where the date names its event, else "with a hire date in 2021".
                    let first = match &verb {
                        Some(v) => format!("{v} in {y}"),
                        None => format!("with {} in {y}", with_article(p)),
                    };
                    out.push(f(format!("strftime('%Y', {}) = '{y}'", a.expr), vec![first, format!("whose {p} falls in {y}")], format!("year({}) = {y}", a.raw)));
                }
            }
            Role::Text(words) => {
                for w in words {
                    out.push(f(
                        format!("{} LIKE {}", a.expr, literal(&format!("%{w}%"))),
                        vec![format!("whose {p} contains \"{w}\""), format!("with \"{w}\" in their {p}")],
                        format!("{} LIKE '%{w}%'", a.raw),
                    ));
                }
            }
            Role::Label(_) => {}
        }
    }
    out
}

/// Last words of a column's phrase that name a state of its rows ("status", "outcome"): a row
/// is "active" or "under investigation" without naming the column.
const STATE_WORDS: [&str; 6] = ["status", "state", "stage", "outcome", "condition", "phase"];

fn is_state(phrase: &str) -> bool {
    phrase.rsplit(' ').next().is_some_and(|w| STATE_WORDS.contains(&w))
}

/// Whether a category column holds a value that `name` (a value as people write it) would name.
fn names_value(a: &Attr, name: &str) -> bool {
    let Role::Category(values) = &a.role else { return false };
    values.iter().filter_map(Value::as_str).any(|v| as_written(v) == name.to_lowercase())
}

/// A stored text as people write it, before a loose name is picked from it: lower case, a
/// code's underscores as spaces (`on_leave` → "on leave").
fn as_written(stored: &str) -> String {
    stored.to_lowercase().replace('_', " ")
}

/// Words that do not name a value on their own ("and", "of", "not").
const GLUE: [&str; 23] =
    ["a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "has", "have", "in", "is", "no", "not", "of", "on", "or", "the", "to", "was", "with"];

/// How people name a stored text value without knowing how it is stored: a long value by two
/// of its words in a row that no other value of the column contains, neither of them glue and
/// one of four letters or more ("awaiting trial" for "Awaiting trial outcome"), else the value in
/// lower case when that differs from it ("engineering" for "Engineering", "san francisco").
/// Such a question is answered by listing the column's values first and picking the one meant,
/// not by copying the question's words into `=`: what people's questions need and the exact
/// wordings never teach. None for a value that is not ASCII text (its lower case is not always
/// one people would write), reads the same, or has no such name.
pub(crate) fn mention(v: &Value, values: &[Value]) -> Option<String> {
    let text = v.as_str().filter(|t| t.is_ascii())?;
    let lower = as_written(text);
    let others: Vec<String> = values.iter().filter_map(Value::as_str).filter(|o| *o != text).map(as_written).collect();
    let unique = |m: &str| !others.iter().any(|o| o.contains(m));
    let words: Vec<&str> = lower.split_whitespace().map(|w| w.trim_matches(|c: char| !c.is_alphanumeric())).filter(|w| !w.is_empty()).collect();
    if words.len() > 2 {
        let named = words
            .windows(2)
            .map(|p| (p, p.join(" ")))
            .find(|(p, span)| p.iter().all(|w| !GLUE.contains(w)) && p.iter().any(|w| w.len() >= 4) && lower.contains(span.as_str()) && unique(span));
        if let Some((_, span)) = named {
            return Some(span);
        }
    }
    (lower != text && unique(&lower)).then_some(lower)
}

pub(crate) fn years(values: &[Value]) -> Vec<i32> {
    let year = |v: &Value| v.as_str().and_then(|s| s.get(..4)).and_then(|y| y.parse::<i32>().ok());
    let mut y: Vec<i32> = values.iter().filter_map(year).collect();
    y.dedup();
    y
}

/// Filters applied together: their SQL, their words, their joins.
#[derive(Debug, Clone, Default)]
pub(crate) struct Where {
    pub(crate) parts: Vec<Filter>,
}

impl Where {
    pub(crate) fn sql(&self) -> String {
        if self.parts.is_empty() { String::new() } else { format!(" WHERE {}", self.parts.iter().map(|f| f.sql.as_str()).collect::<Vec<_>>().join(" AND ")) }
    }

    /// "AND ..." to add to an existing WHERE.
    pub(crate) fn and(&self) -> String {
        self.parts.iter().map(|f| format!(" AND {}", f.sql)).collect()
    }

    /// The filters' words in the `k`-th variant (" with status Operational in France").
    pub(crate) fn post(&self, k: usize) -> String {
        self.parts.iter().enumerate().map(|(i, f)| format!(" {}", f.post[(k + i) % f.post.len()])).collect::<Vec<_>>().join(" and").replace(" and in ", " in ")
    }

    pub(crate) fn raw(&self) -> String {
        if self.parts.is_empty() { String::new() } else { format!(" where {}", self.parts.iter().map(|f| f.raw.as_str()).collect::<Vec<_>>().join(" and ")) }
    }

    pub(crate) fn paths(&self) -> Vec<&[usize]> {
        self.parts.iter().map(|f| f.path.as_slice()).collect()
    }

    pub(crate) fn touches(&self, attr: usize) -> bool {
        self.parts.iter().any(|f| f.attr == attr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(name: &str, columns: &[&str]) -> Table {
        Table { name: name.into(), rows: 0, columns: columns.iter().map(|c| Column::text(c, false)).collect(), keys: vec![], labels: vec![] }
    }

    #[test]
    fn a_key_to_people_is_named_by_the_role_and_others_keep_their_name() {
        let people = table("employees", &["employee_id", "first_name", "last_name"]);
        let teams = table("teams", &["team_id", "name"]);
        assert_eq!(person_relation("lead_employee_id", &people), "lead");
        assert_eq!(person_relation("manager_id", &people), "manager");
        assert_eq!(person_relation("employee_id", &people), "employee");
        assert_eq!(person_relation("home_team_id", &teams), "home team");
    }

    #[test]
    fn a_missing_parent_never_goes_with_the_join_that_drops_it() {
        let filter = |path: Vec<usize>, absent: Option<usize>| Filter { sql: String::new(), post: vec![], raw: String::new(), path, attr: 0, absent, lookup: None };
        let no_manager = filter(vec![], Some(1));
        assert!(no_manager.agrees(&[]));
        assert!(no_manager.agrees(&[0, 2]), "another join is fine");
        assert!(!no_manager.agrees(&[1]) && !no_manager.agrees(&[1, 3]));
        assert!(filter(vec![1], None).agrees(&[1, 3]));
        assert!(!filter(vec![1], None).agrees(&[0]));
    }

    #[test]
    fn a_value_is_named_by_two_words_no_other_value_holds_or_in_lower_case() {
        let values: Vec<Value> =
            ["Awaiting trial outcome", "Trial outcome unknown", "Notice of the formal kind", "Engineering", "San Francisco", "done", "Caf\u{e9} Nord"]
                .into_iter()
                .map(Value::from)
                .collect();
        let m = |v: &str| mention(&Value::from(v), &values);
        // "trial outcome" is in another value; "awaiting trial" is its own
        assert_eq!(m("Awaiting trial outcome").as_deref(), Some("awaiting trial"));
        assert_eq!(m("Trial outcome unknown").as_deref(), Some("outcome unknown"));
        assert_eq!(m("Notice of the formal kind").as_deref(), Some("formal kind"), "no glue word (of, the)");
        assert_eq!(m("Engineering").as_deref(), Some("engineering"), "a short value: in lower case");
        assert_eq!(m("San Francisco").as_deref(), Some("san francisco"));
        assert_eq!(m("done"), None, "already as people write it");
        assert_eq!(m("Caf\u{e9} Nord"), None, "not ASCII: no lower case is assumed");
        assert_eq!(mention(&Value::from(3), &values), None);
        // no span of its own and the lower case inside another value: no loose name
        let close: Vec<Value> = ["Road works", "Road works ahead"].into_iter().map(Value::from).collect();
        assert_eq!(mention(&close[0], &close), None);
        assert_eq!(mention(&close[1], &close).as_deref(), Some("works ahead"));
        // words joined by punctuation are not a span the stored text holds
        let punct: Vec<Value> = ["Closed; no suspect found"].into_iter().map(Value::from).collect();
        assert_eq!(mention(&punct[0], &punct).as_deref(), Some("suspect found"));
        let verbs: Vec<Value> = ["Action to be taken later"].into_iter().map(Value::from).collect();
        assert_eq!(mention(&verbs[0], &verbs).as_deref(), Some("taken later"), "not \"be taken\"");
        // a stored code's underscores are spaces as people write it
        let codes: Vec<Value> = ["on_leave", "active", "full_time"].into_iter().map(Value::from).collect();
        assert_eq!(mention(&codes[0], &codes).as_deref(), Some("on leave"));
        assert_eq!(mention(&codes[2], &codes).as_deref(), Some("full time"));
    }

    #[test]
    fn a_state_is_a_column_whose_phrase_ends_in_a_state_word_and_a_value_names_it_once() {
        assert!(is_state("status") && is_state("project status") && is_state("outcome"));
        assert!(!is_state("employment type") && !is_state("statuses") && !is_state("location"));
        let category = |values: &[&str]| Attr {
            expr: "x".into(),
            phrase: "x".into(),
            raw: "t.x".into(),
            path: vec![],
            role: Role::Category(values.iter().map(|v| Value::from(*v)).collect()),
            nullable: false,
            missing: None,
            person: false,
            values_of: None,
        };
        // "currently on leave" would name a value of this column too: not by its value alone
        assert!(names_value(&category(&["On_Leave", "hired"]), "on leave"));
        assert!(!names_value(&category(&["leave", "hired"]), "on leave"));
        assert!(!names_value(&Attr { role: Role::Quantity(vec![Value::from(3)]), ..category(&[]) }, "3"));
    }
}
