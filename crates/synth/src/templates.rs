//! Question templates over a learnt [`Schema`]. Each [`Candidate`] is one SQL query (the ground
//! truth, run later through the server) with several phrasings of the same question, a
//! difficulty level and, for arg-max and ranking questions, a tie probe: the same ordering with
//! one more row, so that a result tied with its neighbour is dropped rather than asked.
//!
//! Levels: 1 one table, one condition; 2 aggregates, NULLs, dates, lists; 3 arg-max over rows or
//! groups, and joins along one key; 4 grouping across a join, ranks, two-hop joins; 5 grouping
//! across two hops, HAVING, and filters on the joined table.

use serde_json::Value;

use crate::schema::{Column, ForeignKey, Kind, Schema, Table, ident, literal, value_literal};

/// One question (in several phrasings) and the SQL that answers it.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub template: &'static str,
    pub difficulty: u8,
    /// Tables the SQL reads, in the order a person would explore them.
    pub tables: Vec<String>,
    pub phrasings: Vec<String>,
    pub sql: String,
    /// The output columns of `sql` (all aliased), the answer in the first.
    pub columns: Vec<String>,
    pub answer: Shape,
    pub probe: Option<Probe>,
}

/// How the rows become the expected answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Exactly one row: its first cell.
    One,
    /// One to [`MAX_LIST`] rows: the set of first cells.
    List,
}

/// The largest list a question asks for.
pub const MAX_LIST: usize = 12;

/// A tie check: `sql` yields the ordered rows around the answer (`columns`, the ordering metric
/// in `metric`); the answer is row `index`, and a neighbour with the same metric means a tie.
#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    pub sql: String,
    pub columns: Vec<String>,
    pub metric: usize,
    pub index: usize,
}

/// Categories with more values than this are not filtered on.
const MAX_CATEGORIES: u64 = 25;
/// Entities named per table and template.
const MAX_ENTITIES: usize = 40;

pub fn human(name: &str) -> String {
    name.replace('_', " ").to_lowercase()
}

pub fn singular(name: &str) -> String {
    let h = human(name);
    if let Some(stem) = h.strip_suffix("ies") {
        format!("{stem}y")
    } else if h.ends_with("ses") || h.ends_with("xes") {
        h[..h.len() - 2].to_string()
    } else if h.ends_with('s') && !h.ends_with("ss") {
        h[..h.len() - 1].to_string()
    } else {
        h
    }
}

/// A value as the question shows it.
fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => format!("'{s}'"),
        other => other.to_string(),
    }
}

fn is_category(t: &Table, c: &Column) -> bool {
    matches!(c.kind, Kind::Text | Kind::Integer)
        && !t.is_key(c)
        && c.distinct >= 2
        && c.distinct <= MAX_CATEGORIES
        && c.distinct < t.rows
        && c.values.len() as u64 == c.distinct
}

fn is_quantity(t: &Table, c: &Column) -> bool {
    matches!(c.kind, Kind::Integer | Kind::Real) && !t.is_key(c) && c.distinct > MAX_CATEGORIES.min(t.rows / 2).max(3)
}

/// The name of a relation from its key column: `department_id` → `department`.
fn relation(fk: &ForeignKey) -> String {
    let h = human(&fk.from);
    h.strip_suffix(" id").unwrap_or(&h).to_string()
}

struct Gen {
    out: Vec<Candidate>,
}

impl Gen {
    #[allow(clippy::too_many_arguments)]
    fn add(
        &mut self,
        template: &'static str,
        difficulty: u8,
        tables: &[&str],
        phrasings: Vec<String>,
        sql: String,
        columns: &[&str],
        answer: Shape,
        probe: Option<Probe>,
    ) {
        self.out.push(Candidate {
            template,
            difficulty,
            tables: tables.iter().map(|t| t.to_string()).collect(),
            phrasings,
            sql,
            columns: columns.iter().map(|c| c.to_string()).collect(),
            answer,
            probe,
        });
    }

    /// An arg-max/arg-min/rank question: `select` and `order` (the metric descending or
    /// ascending, ties broken by the label), answer at `index`.
    #[allow(clippy::too_many_arguments)]
    fn ranked(&mut self, template: &'static str, difficulty: u8, tables: &[&str], phrasings: Vec<String>, select: &str, rest: &str, order: &str, index: usize) {
        let sql = format!("SELECT {select} {rest} ORDER BY {order} LIMIT 1{}", if index > 0 { format!(" OFFSET {index}") } else { String::new() });
        let probe_sql = format!("SELECT {select} {rest} ORDER BY {order} LIMIT {}", index + 2);
        let probe = Probe { sql: probe_sql, columns: vec!["answer".into(), "metric".into()], metric: 1, index };
        self.add(template, difficulty, tables, phrasings, sql, &["answer", "metric"], Shape::One, Some(probe));
    }
}

/// Every candidate the schema supports, in a fixed order.
pub fn candidates(schema: &Schema) -> Vec<Candidate> {
    let mut g = Gen { out: Vec::new() };
    for t in &schema.tables {
        single_table(&mut g, t);
    }
    for child in &schema.tables {
        for fk in &child.keys {
            let Some(parent) = schema.tables.iter().find(|p| p.name == fk.parent) else { continue };
            one_hop(&mut g, child, fk, parent);
            for fk2 in &parent.keys {
                if let Some(top) = schema.tables.iter().find(|p| p.name == fk2.parent)
                    && top.name != parent.name
                    && top.name != child.name
                {
                    two_hops(&mut g, child, fk, parent, fk2, top);
                }
            }
        }
    }
    g.out
}

fn single_table(g: &mut Gen, t: &Table) {
    let tn = ident(&t.name);
    let (plural, sing, th) = (human(&t.name), singular(&t.name), t.name.as_str());
    g.add(
        "count_rows",
        1,
        &[th],
        vec![
            format!("How many {plural} are there?"),
            format!("Count the rows of the {th} table."),
            format!("What is the total number of {plural} recorded in the database?"),
        ],
        format!("SELECT count(*) AS n FROM {tn}"),
        &["n"],
        Shape::One,
        None,
    );
    let label = t.label(None);
    for c in &t.columns {
        let (cn, ch) = (ident(&c.name), human(&c.name));
        if is_category(t, c) {
            g.add(
                "count_distinct",
                1,
                &[th],
                vec![format!("How many different {ch} values do the {plural} have?"), format!("Count the distinct values of {} in the {th} table.", c.name)],
                format!("SELECT count(DISTINCT {cn}) AS n FROM {tn}"),
                &["n"],
                Shape::One,
                None,
            );
            g.ranked(
                "group_count_argmax",
                3,
                &[th],
                vec![format!("Which {ch} is the most common among the {plural}?"), format!("Among the {plural}, which value of {} occurs most often?", c.name)],
                &format!("{cn} AS answer, count(*) AS metric"),
                &format!("FROM {tn} WHERE {cn} IS NOT NULL GROUP BY {cn}"),
                "metric DESC, answer",
                0,
            );
            for v in &c.values {
                let (vl, vs) = (value_literal(v), shown(v));
                g.add(
                    "count_where",
                    1,
                    &[th],
                    vec![
                        format!("How many {plural} have {ch} {vs}?"),
                        format!("Count the {plural} whose {} is {vs}.", c.name),
                        format!("In the {th} table, how many rows have {} = {vs}?", c.name),
                    ],
                    format!("SELECT count(*) AS n FROM {tn} WHERE {cn} = {vl}"),
                    &["n"],
                    Shape::One,
                    None,
                );
                if let Some(l) = &label {
                    g.add(
                        "list_where",
                        2,
                        &[th],
                        vec![format!("List every {sing} whose {ch} is {vs}."), format!("Which {plural} have {} = {vs}? Name them all.", c.name)],
                        format!("SELECT {l} AS answer FROM {tn} WHERE {cn} = {vl} ORDER BY answer"),
                        &["answer"],
                        Shape::List,
                        None,
                    );
                }
                for q in t.columns.iter().filter(|q| is_quantity(t, q)) {
                    let (qn, qh) = (ident(&q.name), human(&q.name));
                    g.add(
                        "aggregate_where",
                        2,
                        &[th],
                        vec![
                            format!("What is the average {qh} of the {plural} whose {ch} is {vs}? Round to 2 decimals."),
                            format!("Among {plural} with {} = {vs}, what is the mean {} (rounded to two decimal places)?", c.name, q.name),
                        ],
                        format!("SELECT round(avg({qn}), 2) AS answer FROM {tn} WHERE {cn} = {vl}"),
                        &["answer"],
                        Shape::One,
                        None,
                    );
                    g.add(
                        "aggregate_where",
                        2,
                        &[th],
                        vec![
                            format!("What is the total {qh} of the {plural} whose {ch} is {vs}?"),
                            format!("Add up the {} of every {sing} with {} = {vs}.", q.name, c.name),
                        ],
                        format!("SELECT sum({qn}) AS answer FROM {tn} WHERE {cn} = {vl}"),
                        &["answer"],
                        Shape::One,
                        None,
                    );
                }
            }
            for q in t.columns.iter().filter(|q| is_quantity(t, q)) {
                let (qn, qh) = (ident(&q.name), human(&q.name));
                g.ranked(
                    "group_avg_argmax",
                    3,
                    &[th],
                    vec![
                        format!("Which {ch} has the highest average {qh} among the {plural}?"),
                        format!("Group the {plural} by {}: which group has the largest mean {}?", c.name, q.name),
                    ],
                    &format!("{cn} AS answer, round(avg({qn}), 2) AS metric"),
                    &format!("FROM {tn} WHERE {cn} IS NOT NULL AND {qn} IS NOT NULL GROUP BY {cn}"),
                    "metric DESC, answer",
                    0,
                );
            }
        }
        if c.nulls > 0 && c.nulls < t.rows && !c.pk {
            g.add(
                "null_count",
                2,
                &[th],
                vec![format!("How many {plural} have no {ch} recorded?"), format!("Count the {plural} whose {} is missing (NULL).", c.name)],
                format!("SELECT count(*) AS n FROM {tn} WHERE {cn} IS NULL"),
                &["n"],
                Shape::One,
                None,
            );
            g.add(
                "null_count",
                2,
                &[th],
                vec![format!("How many {plural} have a {ch} recorded?"), format!("Count the {plural} whose {} is not NULL.", c.name)],
                format!("SELECT count(*) AS n FROM {tn} WHERE {cn} IS NOT NULL"),
                &["n"],
                Shape::One,
                None,
            );
        }
        if is_quantity(t, c) {
            for (f, words) in [("sum", "total"), ("avg", "average"), ("min", "smallest"), ("max", "largest")] {
                let expr = if f == "avg" { format!("round(avg({cn}), 2)") } else { format!("{f}({cn})") };
                let round = if f == "avg" { " Round to 2 decimals." } else { "" };
                g.add(
                    "aggregate",
                    2,
                    &[th],
                    vec![format!("What is the {words} {ch} across all {plural}?{round}"), format!("Compute the {f} of {} over the {th} table.{round}", c.name)],
                    format!("SELECT {expr} AS answer FROM {tn}"),
                    &["answer"],
                    Shape::One,
                    None,
                );
            }
            if let Some(mid) = c.values.get(c.values.len() / 2) {
                g.add(
                    "threshold_count",
                    2,
                    &[th],
                    vec![format!("How many {plural} have a {ch} greater than {mid}?"), format!("Count the {plural} with {} above {mid}.", c.name)],
                    format!("SELECT count(*) AS n FROM {tn} WHERE {cn} > {mid}"),
                    &["n"],
                    Shape::One,
                    None,
                );
            }
            if let Some(l) = &label {
                for (dir, word, rank) in [("DESC", "highest", 0), ("ASC", "lowest", 0), ("DESC", "second highest", 1), ("DESC", "third highest", 2)] {
                    let (template, level) = if rank == 0 { ("argmax_row", 3) } else { ("rank", 4) };
                    g.ranked(
                        template,
                        level,
                        &[th],
                        vec![format!("Which {sing} has the {word} {ch}?"), format!("Name the {sing} with the {word} value of {}.", c.name)],
                        &format!("{l} AS answer, {cn} AS metric"),
                        &format!("FROM {tn} WHERE {cn} IS NOT NULL"),
                        &format!("metric {dir}, answer"),
                        rank,
                    );
                }
            }
        }
        if c.kind == Kind::Date {
            g.add(
                "date_extreme",
                2,
                &[th],
                vec![format!("What is the earliest {ch} among the {plural}?"), format!("Give the first (oldest) {} in the {th} table.", c.name)],
                format!("SELECT min({cn}) AS answer FROM {tn}"),
                &["answer"],
                Shape::One,
                None,
            );
            g.add(
                "date_extreme",
                2,
                &[th],
                vec![format!("What is the most recent {ch} among the {plural}?"), format!("Give the latest {} in the {th} table.", c.name)],
                format!("SELECT max({cn}) AS answer FROM {tn}"),
                &["answer"],
                Shape::One,
                None,
            );
            let years = |v: Option<&Value>| v.and_then(Value::as_str).and_then(|s| s.get(..4)).and_then(|y| y.parse::<i32>().ok());
            if let (Some(lo), Some(hi)) = (years(c.values.first()), years(c.values.last())) {
                for y in (lo..=hi).take(15) {
                    g.add(
                        "date_year",
                        2,
                        &[th],
                        vec![format!("How many {plural} have a {ch} in {y}?"), format!("Count the {plural} whose {} falls in the year {y}.", c.name)],
                        format!("SELECT count(*) AS n FROM {tn} WHERE strftime('%Y', {cn}) = '{y}'"),
                        &["n"],
                        Shape::One,
                        None,
                    );
                }
            }
            if let Some(l) = &label {
                g.ranked(
                    "date_argmin",
                    3,
                    &[th],
                    vec![format!("Which {sing} has the earliest {ch}?"), format!("Name the {sing} whose {} comes first.", c.name)],
                    &format!("{l} AS answer, {cn} AS metric"),
                    &format!("FROM {tn} WHERE {cn} IS NOT NULL"),
                    "metric ASC, answer",
                    0,
                );
            }
        }
    }
    if let Some(l) = &label {
        for who in t.labels.iter().take(MAX_ENTITIES) {
            for c in t.columns.iter().filter(|c| !t.is_key(c) && c.nulls < t.rows && !l.contains(&ident(&c.name))) {
                g.add(
                    "lookup",
                    1,
                    &[th],
                    vec![format!("What is the {} of the {sing} {who}?", human(&c.name)), format!("Look up {who} in the {th} table: what is their {}?", c.name)],
                    format!("SELECT {} AS answer FROM {tn} WHERE {l} = {}", ident(&c.name), literal(who)),
                    &["answer"],
                    Shape::One,
                    None,
                );
            }
        }
    }
}

fn one_hop(g: &mut Gen, child: &Table, fk: &ForeignKey, parent: &Table) {
    let (cn, pn) = (ident(&child.name), ident(&parent.name));
    let on = format!("c.{} = p.{}", ident(&fk.from), ident(&fk.to));
    let from = format!("FROM {cn} c JOIN {pn} p ON {on}");
    let (cp, ps, rel) = (human(&child.name), singular(&parent.name), relation(fk));
    let tables = [parent.name.as_str(), child.name.as_str()];
    let (Some(pl), cl) = (parent.label(Some("p")), child.label(Some("c"))) else { return };
    for who in parent.labels.iter().take(MAX_ENTITIES) {
        g.add(
            "join_count",
            3,
            &tables,
            vec![format!("How many {cp} have {who} as their {rel}?"), format!("Count the rows of {} whose {} points to the {ps} {who}.", child.name, fk.from)],
            format!("SELECT count(*) AS n {from} WHERE {pl} = {}", literal(who)),
            &["n"],
            Shape::One,
            None,
        );
        if let Some(cl) = &cl {
            g.add(
                "join_list",
                3,
                &tables,
                vec![format!("List the {cp} whose {rel} is {who}."), format!("Which {cp} have {who} as {rel}? Name them all.")],
                format!("SELECT {cl} AS answer {from} WHERE {pl} = {} ORDER BY answer", literal(who)),
                &["answer"],
                Shape::List,
                None,
            );
        }
        for q in child.columns.iter().filter(|q| is_quantity(child, q)) {
            g.add(
                "join_aggregate",
                4,
                &tables,
                vec![
                    format!("What is the total {} of the {cp} whose {rel} is {who}?", human(&q.name)),
                    format!("Sum {}.{} over the rows linked to the {ps} {who}.", child.name, q.name),
                ],
                format!("SELECT sum(c.{}) AS answer {from} WHERE {pl} = {}", ident(&q.name), literal(who)),
                &["answer"],
                Shape::One,
                None,
            );
        }
    }
    if let Some(cl) = &cl {
        for who in child.labels.iter().take(MAX_ENTITIES) {
            for a in parent.columns.iter().filter(|a| !parent.is_key(a) && a.nulls < parent.rows).take(4) {
                g.add(
                    "join_lookup",
                    3,
                    &tables,
                    vec![
                        format!("What is the {} of the {rel} of the {} {who}?", human(&a.name), singular(&child.name)),
                        format!("For {who} in {}, follow {} to {} and give its {}.", child.name, fk.from, parent.name, a.name),
                    ],
                    format!("SELECT p.{} AS answer {from} WHERE {cl} = {}", ident(&a.name), literal(who)),
                    &["answer"],
                    Shape::One,
                    None,
                );
            }
        }
    }
    g.ranked(
        "join_group_argmax",
        4,
        &tables,
        vec![format!("Which {ps} is the {rel} of the most {cp}?"), format!("Counting the {} rows per {}, which {ps} has the most?", child.name, fk.from)],
        &format!("{pl} AS answer, count(*) AS metric"),
        &format!("{from} GROUP BY p.{}", ident(&fk.to)),
        "metric DESC, answer",
        0,
    );
    for k in [1, 2, 3, 5] {
        g.add(
            "having_count",
            5,
            &tables,
            vec![
                format!("How many {} are the {rel} of more than {k} {cp}?", human(&parent.name)),
                format!("Count the {} rows referenced by more than {k} rows of {} (through {}).", parent.name, child.name, fk.from),
            ],
            format!("SELECT count(*) AS n FROM (SELECT p.{} {from} GROUP BY p.{} HAVING count(*) > {k})", ident(&fk.to), ident(&fk.to)),
            &["n"],
            Shape::One,
            None,
        );
    }
    for c in parent.columns.iter().filter(|c| is_category(parent, c)) {
        for v in &c.values {
            g.add(
                "join_filter_count",
                4,
                &tables,
                vec![
                    format!("How many {cp} have a {rel} whose {} is {}?", human(&c.name), shown(v)),
                    format!("Count the {} rows whose {} has {} = {}.", child.name, rel, c.name, shown(v)),
                ],
                format!("SELECT count(*) AS n {from} WHERE p.{} = {}", ident(&c.name), value_literal(v)),
                &["n"],
                Shape::One,
                None,
            );
            for q in child.columns.iter().filter(|q| is_quantity(child, q)) {
                g.add(
                    "join_filter_avg",
                    5,
                    &tables,
                    vec![
                        format!("What is the average {} of the {cp} whose {rel} has {} {}? Round to 2 decimals.", human(&q.name), human(&c.name), shown(v)),
                        format!("Average {}.{} over rows whose {} has {} = {} (two decimals).", child.name, q.name, rel, c.name, shown(v)),
                    ],
                    format!("SELECT round(avg(c.{}), 2) AS answer {from} WHERE p.{} = {}", ident(&q.name), ident(&c.name), value_literal(v)),
                    &["answer"],
                    Shape::One,
                    None,
                );
            }
        }
    }
}

fn two_hops(g: &mut Gen, child: &Table, fk: &ForeignKey, mid: &Table, fk2: &ForeignKey, top: &Table) {
    let from = format!(
        "FROM {} c JOIN {} m ON c.{} = m.{} JOIN {} t ON m.{} = t.{}",
        ident(&child.name),
        ident(&mid.name),
        ident(&fk.from),
        ident(&fk.to),
        ident(&top.name),
        ident(&fk2.from),
        ident(&fk2.to)
    );
    let (cp, ts, rel, rel2) = (human(&child.name), singular(&top.name), relation(fk), relation(fk2));
    let tables = [top.name.as_str(), mid.name.as_str(), child.name.as_str()];
    let Some(tl) = top.label(Some("t")) else { return };
    for who in top.labels.iter().take(MAX_ENTITIES) {
        g.add(
            "multi_hop_count",
            4,
            &tables,
            vec![
                format!("How many {cp} have a {rel} whose {rel2} is {who}?"),
                format!("Follow {}.{} to {} and then {} to {}: how many {} rows lead to {who}?", child.name, fk.from, mid.name, fk2.from, top.name, child.name),
            ],
            format!("SELECT count(*) AS n {from} WHERE {tl} = {}", literal(who)),
            &["n"],
            Shape::One,
            None,
        );
    }
    g.ranked(
        "multi_hop_argmax",
        5,
        &tables,
        vec![
            format!("Which {ts} is the {rel2} of the {rel}s of the most {cp}?"),
            format!("Going from {} through {} to {}, which {ts} is reached by the most {} rows?", child.name, mid.name, top.name, child.name),
        ],
        &format!("{tl} AS answer, count(*) AS metric"),
        &format!("{from} GROUP BY t.{}", ident(&fk2.to)),
        "metric DESC, answer",
        0,
    );
    for q in child.columns.iter().filter(|q| is_quantity(child, q)) {
        g.ranked(
            "multi_hop_argmax",
            5,
            &tables,
            vec![
                format!("Which {ts} has the highest total {} over the {cp} linked to it through their {rel}?", human(&q.name)),
                format!("Sum {}.{} per {} (via {}): which {ts} has the largest total?", child.name, q.name, top.name, mid.name),
            ],
            &format!("{tl} AS answer, sum(c.{}) AS metric", ident(&q.name)),
            &format!("{from} WHERE c.{} IS NOT NULL GROUP BY t.{}", ident(&q.name), ident(&fk2.to)),
            "metric DESC, answer",
            0,
        );
    }
}
