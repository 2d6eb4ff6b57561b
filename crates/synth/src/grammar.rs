//! A compositional SQL task grammar over a learnt [`Schema`].
//!
//! A question is built from parts, each with its SQL and its words:
//! - a **scope**: one table's rows, with the attributes of the tables its keys lead to (up to
//!   two hops), so that "plants in France" and "employees whose department is in Boston" are
//!   the same kind of part;
//! - **filters** (zero to two): a category's value, a place ("in France"), a parent row ("whose
//!   department is Sales"), a threshold on a quantity, a year of a date, a word in a text
//!   (`LIKE`);
//! - a **target**: a count, a distinct count, an aggregate, a lookup, a list, the row or group
//!   with the most/least (by count, total or average), the year of a date with the most/fewest
//!   rows, the rows per parent on average, the top k, groups with exactly one row,
//!   rows above the average, one column against another, a percentage, groups with one value
//!   but never another (`EXCEPT`) or with both (`INTERSECT`), or two cells at once;
//! - through a table that links two others: the rows of one linked to a named row of the other,
//!   how many, the total and average of one of their quantities, and the rows of one kind
//!   linked to rows of another kind (a category's value on each side);
//! - a parent reached two ways (a project's department, and its lead's): the rows whose two
//!   differ, or agree.
//!
//! The SQL of a question is the target's SELECT over the scope's FROM (only the joins its parts
//! need) and the filters' WHERE; the phrasings put the target's frame around the filters'
//! words. A question's difficulty adds up its parts: the target's, one per filter, one per hop.
//!
//! Queries are strings built from typed parts with every identifier and literal quoted
//! ([`ident`], [`literal`]): a SQL AST crate would parse what is never parsed here and would
//! not know SQLite's functions (`strftime`, `json_*`) any better.

use rand::seq::{IndexedRandom, SliceRandom};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::Value;

use crate::candidate::{Candidate, MAX_LIST, Probe, Shape};
use crate::names::{date_verb, is_place, participle, plural_of, shown, singular, with_article};
use crate::schema::{Schema, ident, literal, value_literal};
use crate::scope::{Attr, BASE, Filter, Role, Scope, Where, compatible, filters, longest};

/// Single filters tried per target, and pairs of filters.
const SINGLE_FILTERS: usize = 10;
const FILTER_PAIRS: usize = 6;
/// Natural phrasings kept per question.
const PHRASINGS: usize = 3;
/// Named rows asked about per pair of tables a linking table joins.
const LINKED_ENTITIES: usize = 8;
/// One question in this many also gets a technical phrasing.
const TECHNICAL_EVERY: u32 = 8;

/// Every candidate the schema supports, seeded (which filters are combined, which phrasings
/// are kept).
///
/// With `every_condition`, counts ask about every condition on the table's own columns, beside
/// the sampled ones: what a set chosen by template (`SynthOptions::templates`, the demo's CPU
/// profile of one-table counts) has room for, where the full mix samples them like every other
/// target.
pub fn candidates(schema: &Schema, seed: u64, every_condition: bool, value_lookups: bool) -> Vec<Candidate> {
    let mut g = Gen { out: Vec::new(), rng: ChaCha8Rng::seed_from_u64(seed), every_condition, value_lookups };
    for t in &schema.tables {
        let scope = Scope::new(schema, t);
        g.scope(&scope);
    }
    g.out
}

/// A linking table's rows per parent as people ask it, through the other parent and the table's
/// verb: "On average, how many employees are assigned to a project?" (project assignments per
/// project: one row per employee and project).
fn linking_avg(s: &Scope, ap: &[usize], p: &str) -> Option<String> {
    if s.label.is_some() {
        return None;
    }
    let (verb, to) = participle(&s.singular)?;
    let parent = &s.joins[ap[0]].1;
    // People are assigned to a project; a project is not "assigned to" a person.
    let other = s.attrs.iter().find(|b| matches!(b.role, Role::Label(_)) && b.person && b.path.len() == 1 && s.joins[b.path[0]].1 != *parent)?;
    Some(format!("On average, how many {} are {verb} {to} {}? Round to 2 decimals.", plural_of(&other.phrase), with_article(p)))
}

/// Whether a quantity adds up to something: a total of years or of ratings means nothing.
fn summable(phrase: &str) -> bool {
    !["year", "rating", "score", "age", "latitude", "longitude", "rank", "grade"].iter().any(|w| phrase.ends_with(w))
}

struct Gen {
    out: Vec<Candidate>,
    rng: ChaCha8Rng,
    every_condition: bool,
    /// Category values are also named loosely, with a lookup in the reference ([`crate::scope::mention`]).
    value_lookups: bool,
}

/// A question before its phrasings are chosen.
struct Draft<'s> {
    template: &'static str,
    /// The target's own difficulty (1–3), before filters and hops.
    level: u8,
    sql: String,
    /// Columns of the result (the answer in the first, or in all for [`Shape::Row`]).
    width: usize,
    answer: Shape,
    probe: Option<Probe>,
    natural: Vec<String>,
    technical: String,
    wh: &'s Where,
    extra_paths: Vec<&'s [usize]>,
}

impl Gen {
    fn push(&mut self, s: &Scope, d: Draft) {
        let mut paths = d.wh.paths();
        paths.extend(d.extra_paths.iter().copied());
        let hops = longest(&paths).len();
        let difficulty = (d.level as usize + d.wh.parts.len() + hops).clamp(1, 5) as u8;
        let mut natural = d.natural;
        natural.sort();
        natural.dedup();
        natural.shuffle(&mut self.rng);
        natural.truncate(PHRASINGS);
        let mut lookups: Vec<String> = d.wh.parts.iter().filter_map(|f| f.lookup.clone()).collect();
        lookups.dedup();
        // The technical phrasing names the stored value, which a loose question is about not knowing.
        let technical = (self.rng.random_range(0..TECHNICAL_EVERY) == 0).then_some(d.technical).filter(|_| lookups.is_empty());
        self.out.push(Candidate {
            template: d.template,
            difficulty,
            tables: s.tables(&paths),
            phrasings: natural,
            technical,
            sql: s.finish(&d.sql),
            width: d.width,
            answer: d.answer,
            probe: d.probe.map(|p| Probe { sql: s.finish(&p.sql), ..p }),
            lookups,
        });
    }

    /// Filter sets for one target: none, some single filters, some pairs on different
    /// attributes, all compatible with `path` and not on `avoid`.
    fn wheres(&mut self, fs: &[Filter], path: &[usize], avoid: &[usize]) -> Vec<Where> {
        let ok: Vec<&Filter> = fs.iter().filter(|f| f.agrees(path) && !avoid.contains(&f.attr)).collect();
        let mut out = vec![Where::default()];
        let mut singles: Vec<&Filter> = ok.clone();
        singles.shuffle(&mut self.rng);
        out.extend(singles.iter().take(SINGLE_FILTERS).map(|f| Where { parts: vec![(*f).clone()] }));
        for _ in 0..FILTER_PAIRS * 4 {
            if out.len() >= 1 + SINGLE_FILTERS + FILTER_PAIRS {
                break;
            }
            let (Some(a), Some(b)) = (ok.choose(&mut self.rng), ok.choose(&mut self.rng)) else { break };
            if a.attr != b.attr && a.agrees(&b.path) && b.agrees(&a.path) {
                out.push(Where { parts: vec![(*a).clone(), (*b).clone()] });
            }
        }
        out
    }

    fn scope(&mut self, s: &Scope) {
        let fs = filters(s, self.value_lookups);
        let (n, one) = (s.plural.clone(), s.singular.clone());
        let table_raw = s.table.name.clone();
        let from = |paths: &[&[usize]]| s.from(paths);

        // Counts (with `every_condition`, under every condition on the table's own columns too).
        let mut counts = self.wheres(&fs, &[], &[]);
        for f in fs.iter().filter(|f| self.every_condition && f.path.is_empty()) {
            if !counts.iter().any(|w| matches!(w.parts.as_slice(), [only] if only.sql == f.sql)) {
                counts.push(Where { parts: vec![f.clone()] });
            }
        }
        for wh in counts {
            let post = |k| wh.post(k);
            let sql = format!("SELECT count(*) {}{}", from(&wh.paths()), wh.sql());
            let natural = vec![
                format!("How many {n}{} are there?", post(0)),
                format!("What is the number of {n}{}?", post(1)),
                format!("Count the {n}{}.", post(0)),
                format!("I need the number of {n}{}.", post(1)),
                format!("How many {n} do we have{}?", post(1)),
            ];
            let technical = format!("Count the rows of {table_raw}{}.", wh.raw());
            let level = if wh.parts.is_empty() { 0 } else { 1 };
            let template = if wh.parts.is_empty() { "count_rows" } else { "count_where" };
            self.push(s, Draft { template, level, sql, width: 1, answer: Shape::One, probe: None, natural, technical, wh: &wh, extra_paths: vec![] });
        }

        for (ai, a) in s.attrs.iter().enumerate() {
            let ap = a.path.as_slice();
            let p = &a.phrase;
            match &a.role {
                Role::Category(_) => {
                    let ps = plural_of(p);
                    for wh in self.wheres(&fs, ap, &[ai]) {
                        let paths: Vec<&[usize]> = wh.paths().into_iter().chain([ap]).collect();
                        let f = from(&paths);
                        let post = |k| wh.post(k);
                        // Distinct count.
                        self.push(
                            s,
                            Draft {
                                template: "count_distinct",
                                level: 1,
                                sql: format!("SELECT count(DISTINCT {}) {f}{}", a.expr, wh.sql()),
                                width: 1,
                                answer: Shape::One,
                                probe: None,
                                natural: vec![
                                    format!("How many different {ps} are there among the {n}{}?", post(0)),
                                    format!("How many distinct {ps} do the {n}{} have?", post(1)),
                                    format!("In how many different {ps} are there {n}{}?", post(0)),
                                ],
                                technical: format!("Count the distinct values of {} in {table_raw}{}.", a.raw, wh.raw()),
                                wh: &wh,
                                extra_paths: vec![ap],
                            },
                        );
                        // The group with the most/fewest rows.
                        for (dir, most) in [("DESC", true), ("ASC", false)] {
                            let word = if most { "most" } else { "fewest" };
                            let natural = vec![
                                format!("Which {p} has the {word} {n}{}?", post(0)),
                                format!("Which {p} has the {word} {n}{}?", post(1)),
                                format!("What is the {p} with the {word} {n}{}?", post(0)),
                                if most {
                                    format!("What is the most common {p} among the {n}{}?", post(1))
                                } else {
                                    format!("What is the least common {p} among the {n}{}?", post(1))
                                },
                            ];
                            self.ranked(
                                s,
                                "group_argmax",
                                2,
                                natural,
                                format!("Which value of {} is the {} frequent{}?", a.raw, if most { "most" } else { "least" }, wh.raw()),
                                &a.expr,
                                "count(*)",
                                &format!("{f} WHERE {} IS NOT NULL{} GROUP BY {}", a.expr, wh.and(), a.expr),
                                dir,
                                0,
                                &wh,
                                ap,
                            );
                        }
                        // Top k groups.
                        for k in [3, 5] {
                            let natural = vec![
                                format!("What are the top {k} {ps} with the most {n}{}?", post(0)),
                                format!("List the {k} {ps} that have the most {n}{}.", post(1)),
                                format!("Which {k} {ps} have the largest number of {n}{}?", post(0)),
                            ];
                            self.top(
                                s,
                                "top_groups",
                                natural,
                                format!("The {k} most frequent values of {}{}.", a.raw, wh.raw()),
                                &a.expr,
                                "count(*)",
                                &format!("{f} WHERE {} IS NOT NULL{} GROUP BY {}", a.expr, wh.and(), a.expr),
                                k,
                                &wh,
                                ap,
                            );
                        }
                        // Groups with exactly one row.
                        self.push(
                            s,
                            Draft {
                                template: "having_one",
                                level: 2,
                                sql: format!("SELECT {} {f} WHERE {} IS NOT NULL{} GROUP BY {} HAVING count(*) = 1", a.expr, a.expr, wh.and(), a.expr),
                                width: 1,
                                answer: Shape::List,
                                probe: None,
                                natural: vec![format!("Which {ps} have only one {one}{}?", post(0)), format!("List the {ps} with exactly one {one}{}.", post(1))],
                                technical: format!("Values of {} that occur in exactly one row{}.", a.raw, wh.raw()),
                                wh: &wh,
                                extra_paths: vec![ap],
                            },
                        );
                        // Aggregates of each quantity per group.
                        for (qi, q) in s.attrs.iter().enumerate() {
                            if qi == ai
                                || !matches!(q.role, Role::Quantity(_))
                                || !compatible(&q.path, ap)
                                || wh.touches(qi)
                                || !wh.parts.iter().all(|f| f.agrees(&q.path))
                            {
                                continue;
                            }
                            let qp = &q.phrase;
                            for (agg, word, dir, sup) in [("sum", "total", "DESC", "highest"), ("sum", "total", "ASC", "lowest"), ("avg", "average", "DESC", "highest")] {
                                if agg == "sum" && !summable(qp) {
                                    continue;
                                }
                                let metric = if agg == "avg" { format!("round(avg({}), 2)", q.expr) } else { format!("sum({})", q.expr) };
                                let paths2: Vec<&[usize]> = paths.iter().copied().chain([q.path.as_slice()]).collect();
                                let f2 = from(&paths2);
                                let natural = if wh.parts.is_empty() {
                                    vec![
                                        format!("Which {p} has the {sup} {word} {qp}?"),
                                        format!("Which {p} has the {sup} {word} {qp} among the {n}?"),
                                        format!("Grouping the {n} by {p}, which has the {sup} {word} {qp}?"),
                                    ]
                                } else {
                                    vec![
                                        format!("Which {p} has the {sup} {word} {qp} among the {n}{}?", post(1)),
                                        format!("Among the {n}{}, which {p} has the {sup} {word} {qp}?", post(0)),
                                    ]
                                };
                                self.ranked(
                                    s,
                                    "group_aggregate_argmax",
                                    2,
                                    natural,
                                    format!("Group {table_raw} by {} and order by the {agg} of {} {dir}{}: the first group.", a.raw, q.raw, wh.raw()),
                                    &a.expr,
                                    &metric,
                                    &format!("{f2} WHERE {} IS NOT NULL AND {} IS NOT NULL{} GROUP BY {}", a.expr, q.expr, wh.and(), a.expr),
                                    dir,
                                    0,
                                    &wh,
                                    longest(&[&q.path, ap]),
                                );
                            }
                        }
                    }
                    // The values a category takes, and set operations and percentages on them.
                    if let Role::Category(values) = &a.role {
                        if a.path.is_empty() {
                            self.values(s, a, &fs, ai);
                        }
                        self.set_ops(s, ai, a, values);
                        for v in values.iter().take(if a.path.is_empty() { 4 } else { 0 }) {
                            let (vs, vl) = (shown(v), value_literal(v));
                            let wh = Where::default();
                            self.push(
                                s,
                                Draft {
                                    template: "percentage",
                                    level: 2,
                                    sql: format!("SELECT round(100.0 * sum({} = {vl}) / count(*), 1) {}", a.expr, from(&[ap])),
                                    width: 1,
                                    answer: Shape::One,
                                    probe: None,
                                    natural: vec![
                                        format!("What percentage of the {n} have {p} {vs}? Round to one decimal."),
                                        format!("What share of {n} have a {p} of {vs}, in percent (one decimal)?"),
                                        format!("Out of all {n}, how many percent have {p} {vs}? Give one decimal."),
                                    ],
                                    technical: format!("Percentage of {table_raw} rows with {} = {vl}, one decimal.", a.raw),
                                    wh: &wh,
                                    extra_paths: vec![ap],
                                },
                            );
                        }
                    }
                }
                Role::Quantity(_) => {
                    for wh in self.wheres(&fs, ap, &[ai]) {
                        let paths: Vec<&[usize]> = wh.paths().into_iter().chain([ap]).collect();
                        let f = from(&paths);
                        let post = |k| wh.post(k);
                        for (agg, words) in
                            [("sum", ["total", "combined"]), ("avg", ["average", "mean"]), ("max", ["highest", "largest"]), ("min", ["lowest", "smallest"])]
                        {
                            if agg == "sum" && !summable(p) {
                                continue;
                            }
                            let (expr, round) =
                                if agg == "avg" { (format!("round(avg({}), 2)", a.expr), " Round to 2 decimals.") } else { (format!("{agg}({})", a.expr), "") };
                            self.push(
                                s,
                                Draft {
                                    template: "aggregate",
                                    level: 1,
                                    sql: format!("SELECT {expr} {f}{}", wh.sql()),
                                    width: 1,
                                    answer: Shape::One,
                                    probe: None,
                                    natural: vec![
                                        format!("What is the {} {p} of the {n}{}?{round}", words[0], post(0)),
                                        format!("What is the {} {p} of the {n}{}?{round}", words[1], post(1)),
                                        format!("Give me the {} {p} across all {n}{}.{round}", words[0], post(1)),
                                    ],
                                    technical: format!("Compute the {agg} of {}{}.{round}", a.raw, wh.raw()),
                                    wh: &wh,
                                    extra_paths: vec![ap],
                                },
                            );
                        }
                        // The row with the highest/lowest value: its label, or another of its columns.
                        let answers: Vec<(usize, &Attr)> =
                            s.attrs.iter().enumerate().filter(|(bi, b)| *bi != ai && b.path.is_empty() && matches!(b.role, Role::Label(_) | Role::Category(_))).collect();
                        for (dir, sup) in [("DESC", "highest"), ("ASC", "lowest")] {
                            for &(bi, b) in answers.iter().take(3) {
                                if wh.touches(bi) {
                                    continue;
                                }
                                let natural = if Some(bi) == s.label {
                                    vec![
                                        format!("Which {one}{} has the {sup} {p}?", post(0)),
                                        format!("Name the {one}{} with the {sup} {p}.", post(1)),
                                        format!("Which {one} has the {sup} {p}{}?", post(1)),
                                    ]
                                } else {
                                    vec![
                                        format!("What is the {} of the {one}{} with the {sup} {p}?", b.phrase, post(0)),
                                        format!("What {} does the {one} with the {sup} {p}{} have?", b.phrase, post(1)),
                                    ]
                                };
                                self.extreme_row(s, "argmax_row", natural, a, b, &wh, &f, dir, sup, ap);
                            }
                        }
                        // Top k rows, when the rows have names.
                        if let Some(li) = s.label {
                            let l = &s.attrs[li];
                            for k in [3, 5] {
                                let natural = vec![
                                    format!("List the {k} {n}{} with the highest {p}.", post(0)),
                                    format!("What are the top {k} {n} by {p}{}?", post(1)),
                                    format!("Which {k} {n}{} have the largest {p}?", post(1)),
                                ];
                                self.top(
                                    s,
                                    "top_rows",
                                    natural,
                                    format!("The {k} {table_raw} rows with the highest {}{}.", a.raw, wh.raw()),
                                    &l.expr,
                                    &a.expr,
                                    &format!("{f} WHERE {} IS NOT NULL{}", a.expr, wh.and()),
                                    k,
                                    &wh,
                                    ap,
                                );
                            }
                        }
                    }
                    if !a.path.is_empty() {
                        continue;
                    }
                    let none = Where::default();
                    // Rows above the average.
                    self.push(
                        s,
                        Draft {
                            template: "above_average",
                            level: 2,
                            sql: format!(
                                "SELECT count(*) FROM {} {BASE} WHERE {} > (SELECT avg({}) FROM {})",
                                ident(&s.table.name),
                                a.expr,
                                a.expr.replacen(&format!("{BASE}."), "", 1),
                                ident(&s.table.name)
                            ),
                            width: 1,
                            answer: Shape::One,
                            probe: None,
                            natural: vec![
                                format!("How many {n} have {} above the average?", with_article(p)),
                                format!("How many {n} have a higher {p} than average?"),
                                format!("Count the {n} whose {p} is above the mean {p}."),
                            ],
                            technical: format!("Count the {table_raw} rows whose {} exceeds avg({}).", a.raw, a.raw),
                            wh: &none,
                            extra_paths: vec![],
                        },
                    );
                    if let Some(li) = s.label {
                        let l = &s.attrs[li];
                        self.push(
                            s,
                            Draft {
                                template: "above_average",
                                level: 3,
                                sql: format!(
                                    "SELECT {} FROM {} {BASE} WHERE {} > (SELECT avg({}) FROM {})",
                                    l.expr,
                                    ident(&s.table.name),
                                    a.expr,
                                    a.expr.replacen(&format!("{BASE}."), "", 1),
                                    ident(&s.table.name)
                                ),
                                width: 1,
                                answer: Shape::List,
                                probe: None,
                                natural: vec![
                                    format!("Which {n} have {} above the average?", with_article(p)),
                                    format!("List the {n} whose {p} is higher than the average {p}."),
                                ],
                                technical: format!("{table_raw} rows whose {} exceeds avg({}).", a.raw, a.raw),
                                wh: &none,
                                extra_paths: vec![],
                            },
                        );
                    }
                    // One quantity against another, and two totals at once.
                    for (bi, b) in s.attrs.iter().enumerate() {
                        if bi <= ai || !b.path.is_empty() || !matches!(b.role, Role::Quantity(_)) || !summable(p) || !summable(&b.phrase) {
                            continue;
                        }
                        let qb = &b.phrase;
                        self.push(
                            s,
                            Draft {
                                template: "compare_columns",
                                level: 2,
                                sql: format!("SELECT count(*) FROM {} {BASE} WHERE {} > {}", ident(&s.table.name), a.expr, b.expr),
                                width: 1,
                                answer: Shape::One,
                                probe: None,
                                natural: vec![format!("How many {n} have a higher {p} than {qb}?"), format!("In how many {n} is the {p} greater than the {qb}?")],
                                technical: format!("Count the {table_raw} rows where {} > {}.", a.raw, b.raw),
                                wh: &none,
                                extra_paths: vec![],
                            },
                        );
                        for wh in self.wheres(&fs, &[], &[ai, bi]).into_iter().take(4) {
                            let post = |k| wh.post(k);
                            self.push(
                                s,
                                Draft {
                                    template: "two_aggregates",
                                    level: 2,
                                    sql: format!("SELECT sum({}), sum({}) {}{}", a.expr, b.expr, from(&wh.paths()), wh.sql()),
                                    width: 2,
                                    answer: Shape::Row,
                                    probe: None,
                                    natural: vec![
                                        format!("What are the total {p} and the total {qb} of the {n}{}?", post(0)),
                                        format!("How much {p} and how much {qb} do the {n}{} have in total, respectively?", post(1)),
                                    ],
                                    technical: format!("sum({}) and sum({}){}.", a.raw, b.raw, wh.raw()),
                                    wh: &wh,
                                    extra_paths: vec![],
                                },
                            );
                        }
                    }
                }
                Role::Date(_) => {
                    for wh in self.wheres(&fs, ap, &[ai]).into_iter().take(6) {
                        let paths: Vec<&[usize]> = wh.paths().into_iter().chain([ap]).collect();
                        let f = from(&paths);
                        let post = |k| wh.post(k);
                        // The year with the most/fewest rows: "In which year did the most
                        // employees leave?" is a group by a date's year; of the rows' own dates
                        // (a parent's date counted over its children is no one's question).
                        let year = format!("CAST(strftime('%Y', {}) AS INTEGER)", a.expr);
                        for (dir, most) in [("DESC", true), ("ASC", false)].into_iter().filter(|_| ap.is_empty()) {
                            let (word, common) = if most { ("most", "most common") } else { ("fewest", "least common") };
                            let mut natural = vec![
                                format!("Which year has the {word} {n}{}, by {p}?", post(0)),
                                format!("What is the {common} year of {p} among the {n}{}?", post(1)),
                                format!("Counting the {n}{} by the year of their {p}, which year has the {word}?", post(0)),
                            ];
                            if let Some(v) = date_verb(p) {
                                natural.insert(0, format!("In which year were the {word} {n}{} {v}?", post(0)));
                            }
                            self.ranked(
                                s,
                                "year_argmax",
                                2,
                                natural,
                                format!("The year of {} with the {} {table_raw} rows{}.", a.raw, if most { "most" } else { "fewest" }, wh.raw()),
                                &year,
                                "count(*)",
                                &format!("{f} WHERE {year} IS NOT NULL{} GROUP BY {year}", wh.and()),
                                dir,
                                0,
                                &wh,
                                ap,
                            );
                        }
                        for (dir, sup, agg) in [("ASC", "earliest", "min"), ("DESC", "latest", "max")] {
                            self.push(
                                s,
                                Draft {
                                    template: "date_extreme",
                                    level: 1,
                                    sql: format!("SELECT {agg}({}) {f}{}", a.expr, wh.sql()),
                                    width: 1,
                                    answer: Shape::One,
                                    probe: None,
                                    natural: [format!("What is the {sup} {p} among the {n}{}?", post(0)), format!("When was the {sup} {p} of the {n}{}?", post(1))]
                                        .into_iter()
                                        // "the first plant last updated" reads as nonsense: one-word verbs only.
                                        .chain(date_verb(p).filter(|v| ap.is_empty() && !v.contains(' ')).map(|v| {
                                            let nth = if dir == "ASC" { "first" } else { "last" };
                                            format!("When was the {nth} {one}{} {v}?", post(0))
                                        }))
                                        .collect(),
                                    technical: format!("{agg}({}){}.", a.raw, wh.raw()),
                                    wh: &wh,
                                    extra_paths: vec![ap],
                                },
                            );
                            for (bi, b) in s
                                .attrs
                                .iter()
                                .enumerate()
                                .filter(|(bi, b)| *bi != ai && b.path.is_empty() && matches!(b.role, Role::Label(_) | Role::Category(_)))
                                .take(3)
                            {
                                if wh.touches(bi) {
                                    continue;
                                }
                                let first = if dir == "ASC" { "first" } else { "last" };
                                let natural = vec![
                                    format!("What is the {} of the {one}{} with the {sup} {p}?", b.phrase, post(0)),
                                    format!("Which {} had the {first} {one}{}, by {p}?", b.phrase, post(1)),
                                ];
                                self.extreme_row(s, "date_argmin", natural, a, b, &wh, &f, dir, sup, ap);
                            }
                        }
                    }
                }
                Role::Label(names) => {
                    if a.path.is_empty() {
                        self.lookups(s, ai, a, names);
                        for wh in self.wheres(&fs, &[], &[ai]).into_iter().skip(1) {
                            let post = |k| wh.post(k);
                            self.push(
                                s,
                                Draft {
                                    template: "list_where",
                                    level: 1,
                                    sql: format!("SELECT {} {}{}", a.expr, from(&wh.paths()), wh.sql()),
                                    width: 1,
                                    answer: Shape::List,
                                    probe: None,
                                    natural: vec![
                                        format!("List the {n}{}.", post(0)),
                                        format!("Show me all {n}{}.", post(1)),
                                        format!("Name every {one}{}.", post(0)),
                                        format!("Which {n} are there{}?", post(1)),
                                    ],
                                    technical: format!("The {} of the {table_raw} rows{}.", a.raw, wh.raw()),
                                    wh: &wh,
                                    extra_paths: vec![],
                                },
                            );
                        }
                    } else {
                        // A parent's rows grouped over the children: "which department has the most employees".
                        let ps = plural_of(p);
                        for wh in self.wheres(&fs, ap, &[ai]).into_iter().take(6) {
                            let paths: Vec<&[usize]> = wh.paths().into_iter().chain([ap]).collect();
                            let f = from(&paths);
                            let post = |k| wh.post(k);
                            // Rows per parent on average, over every parent (a parent without
                            // rows counts): "On average, how many people are assigned to a
                            // project?". Only where the key names the parent itself: a role
                            // ("head", "lead") is held by few of the people, and per manager is
                            // over the table itself.
                            let parent = &s.joins[ap[0]].1;
                            if wh.parts.is_empty() && ap.len() == 1 && *parent != s.table.name && singular(parent) == *p {
                                self.push(
                                    s,
                                    Draft {
                                        template: "per_parent_avg",
                                        level: 2,
                                        sql: format!("SELECT round(CAST(count(*) AS REAL) / (SELECT count(*) FROM {}), 2) {f}", ident(parent)),
                                        width: 1,
                                        answer: Shape::One,
                                        probe: None,
                                        natural: linking_avg(s, ap, p)
                                            .into_iter()
                                            .chain([
                                                format!("On average, how many {n} does {} have? Round to 2 decimals.", with_article(p)),
                                                format!("What is the average number of {n} per {p}? Round to 2 decimals."),
                                                format!("How many {n} does each {p} have on average? Round to 2 decimals."),
                                            ])
                                            .collect(),
                                        technical: format!("count({table_raw}) / count({parent}), rounded to 2 decimals."),
                                        wh: &wh,
                                        extra_paths: vec![ap],
                                    },
                                );
                            }
                            // The parent with the most, and with the fewest, among those with any
                            // ("Which department has the fewest current employees?").
                            for (dir, most, large) in [("DESC", "most", "largest"), ("ASC", "fewest", "smallest")] {
                                self.ranked(
                                    s,
                                    "group_argmax",
                                    2,
                                    vec![format!("Which {p} has the {most} {n}{}?", post(0)), format!("Which {p} has the {large} number of {n}{}?", post(1))],
                                    format!("Which {} is referenced by the {most} {table_raw} rows{}?", a.raw, wh.raw()),
                                    &a.expr,
                                    "count(*)",
                                    &format!("{f}{} GROUP BY {}", wh.sql(), a.expr),
                                    dir,
                                    0,
                                    &wh,
                                    ap,
                                );
                            }
                            for k in [1, 2, 3, 5] {
                                self.push(
                                    s,
                                    Draft {
                                        template: "having_count",
                                        level: 3,
                                        sql: format!("SELECT count(*) FROM (SELECT {} {f}{} GROUP BY {} HAVING count(*) > {k})", a.expr, wh.sql(), a.expr),
                                        width: 1,
                                        answer: Shape::One,
                                        probe: None,
                                        natural: vec![
                                            format!("How many {ps} have more than {k} {n}{}?", post(0)),
                                            format!("How many {ps} are there with over {k} {n}{}?", post(1)),
                                        ],
                                        technical: format!("Count the {} values with more than {k} {table_raw} rows{}.", a.raw, wh.raw()),
                                        wh: &wh,
                                        extra_paths: vec![ap],
                                    },
                                );
                            }
                        }
                    }
                }
                Role::Text(_) => {}
            }
        }
        if s.label.is_none() {
            self.linked(s);
        }
        self.outside(s);
    }

    /// Rows whose related row belongs to another parent than their own, where the parent is
    /// reached two ways ("How many projects have a lead outside the project's department?": the
    /// project's department, and its lead's).
    fn outside(&mut self, s: &Scope) {
        let (n, one, none) = (&s.plural, &s.singular, Where::default());
        for x in s.attrs.iter().filter(|x| x.path.len() == 1 && matches!(x.role, Role::Label(_))) {
            for y in s.attrs.iter().filter(|y| y.path.len() == 2 && y.path[0] != x.path[0] && y.raw == x.raw) {
                let Some(rel) = y.phrase.strip_suffix(&format!("'s {}", x.phrase)) else { continue };
                let (p, from) = (&x.phrase, s.joined(&[x.path[0], y.path[0], y.path[1]]));
                let technical = |what: &str, op: &str| format!("{what} {} rows whose {} through {} {op} their own.", s.table.name, x.raw, s.joins[y.path[0]].1);
                let mut asks = vec![
                    (
                        "outside_count",
                        format!("SELECT count(*) {from} WHERE {} <> {}", y.expr, x.expr),
                        Shape::One,
                        vec![format!("How many {n} have a {rel} outside the {one}'s {p}?"), format!("How many {n} have a {rel} from a {p} other than the {one}'s own?")],
                        technical("Count the", "differs from"),
                    ),
                    (
                        "outside_count",
                        format!("SELECT count(*) {from} WHERE {} = {}", y.expr, x.expr),
                        Shape::One,
                        vec![format!("How many {n} have a {rel} from the {one}'s own {p}?")],
                        technical("Count the", "is"),
                    ),
                ];
                if let Some(l) = s.label {
                    asks.push((
                        "outside_list",
                        format!("SELECT {} {from} WHERE {} <> {}", s.attrs[l].expr, y.expr, x.expr),
                        Shape::List,
                        vec![format!("Which {n} have a {rel} outside the {one}'s {p}?"), format!("List the {n} whose {rel} is from another {p} than the {one}.")],
                        technical("List the", "differs from"),
                    ));
                }
                for (template, sql, answer, natural, technical) in asks {
                    self.push(s, Draft { template, level: 3, sql, width: 1, answer, probe: None, natural, technical, wh: &none, extra_paths: vec![&x.path, &y.path] });
                }
            }
        }
    }

    /// The values a category takes ("What are the possible statuses of a project?"), over all
    /// rows and under a filter or two.
    fn values(&mut self, s: &Scope, a: &Attr, fs: &[Filter], ai: usize) {
        let (n, p) = (&s.plural, &a.phrase);
        let ps = plural_of(p);
        for wh in self.wheres(fs, &[], &[ai]).into_iter().take(3) {
            let post = |k| wh.post(k);
            let natural = if wh.parts.is_empty() {
                vec![
                    format!("What are the possible values of {p} for the {n}?"),
                    format!("Which {ps} are there among the {n}?"),
                    format!("List the different {ps} of the {n}."),
                    format!("What kinds of {p} do the {n} have?"),
                ]
            } else {
                vec![format!("Which {ps} do the {n}{} have?", post(0)), format!("List the different {ps} of the {n}{}.", post(1))]
            };
            self.push(
                s,
                Draft {
                    template: "list_values",
                    level: 1,
                    sql: format!(
                        "SELECT DISTINCT {} {}{} {} IS NOT NULL",
                        a.expr,
                        s.from(&wh.paths()),
                        if wh.parts.is_empty() { " WHERE".to_string() } else { format!("{} AND", wh.sql()) },
                        a.expr
                    ),
                    width: 1,
                    answer: Shape::List,
                    probe: None,
                    natural,
                    technical: format!("The distinct values of {}{}.", a.raw, wh.raw()),
                    wh: &wh,
                    extra_paths: vec![],
                },
            );
        }
    }

    /// A table that links two others and names no rows of its own (project assignments between
    /// projects and employees): the rows of one parent linked to a named row of the other, how
    /// many, and the total and average of one of their quantities ("Who is assigned to the GDPR
    /// Compliance Audit?", "Which projects is Donna Gonzalez assigned to?", "What is the average
    /// salary of the employees assigned to the Payments Gateway?").
    fn linked(&mut self, s: &Scope) {
        let parents: Vec<&Attr> = s.attrs.iter().filter(|a| a.path.len() == 1 && matches!(a.role, Role::Label(_))).collect();
        let (n, verb) = (&s.plural, participle(&s.singular));
        let none = Where::default();
        // A pair of parents is one row only where the two keys are the table's whole primary key:
        // otherwise a person on a project twice would count twice in a total over the join.
        let pks: Vec<&str> = s.table.columns.iter().filter(|c| c.pk).map(|c| c.name.as_str()).collect();
        let pair_key = pks.len() == 2 && pks.iter().all(|c| s.table.keys.iter().any(|k| k.from == *c));
        for a in &parents {
            let Role::Label(names) = &a.role else { continue };
            for b in parents.iter().filter(|b| b.path != a.path) {
                let bs = plural_of(&b.phrase);
                let from = s.joined(&[a.path[0], b.path[0]]);
                if let (true, Some(verb)) = (b.person, &verb) {
                    self.linked_outside(s, a, b, names, verb);
                    self.linked_filtered(s, a, b, verb);
                }
                for who in names.iter().take(LINKED_ENTITIES) {
                    let lit = literal(who);
                    let mut natural = vec![format!("Which {bs} have {n} with {who}?"), format!("List the {bs} of the {n} of {who}.")];
                    let mut counting = vec![format!("How many different {bs} do the {n} of {who} have?")];
                    if let Some((v, to)) = &verb {
                        natural.push(format!("Which {bs} are {v} {to} {who}?"));
                        counting.push(format!("How many {bs} are {v} {to} {who}?"));
                        if b.person {
                            natural.push(format!("Who is {v} {to} {who}?"));
                            natural.push(format!("Who is {v} {to} {who}? List their names."));
                        }
                        if a.person {
                            natural.push(format!("Which {bs} is {who} {v} {to}?"));
                            counting.push(format!("How many {bs} is {who} {v} {to}?"));
                        }
                    }
                    let technical = |what: &str| format!("{what} {} of the {} rows whose {} is {who}.", b.raw, s.table.name, a.raw);
                    self.push(
                        s,
                        Draft {
                            template: "linked_list",
                            level: 1,
                            sql: format!("SELECT DISTINCT {} {from} WHERE {} = {lit}", b.expr, a.expr),
                            width: 1,
                            answer: Shape::List,
                            probe: None,
                            natural,
                            technical: technical("The distinct"),
                            wh: &none,
                            extra_paths: vec![&a.path, &b.path],
                        },
                    );
                    self.push(
                        s,
                        Draft {
                            template: "linked_count",
                            level: 1,
                            sql: format!("SELECT count(DISTINCT {}) {from} WHERE {} = {lit}", b.expr, a.expr),
                            width: 1,
                            answer: Shape::One,
                            probe: None,
                            natural: counting,
                            technical: technical("Count the distinct"),
                            wh: &none,
                            extra_paths: vec![&a.path, &b.path],
                        },
                    );
                    if pair_key {
                        self.linked_aggregates(s, a, b, who, verb.as_ref());
                    }
                }
            }
        }
    }

    /// People linked to rows of another parent than their own, where both parents of the linking
    /// table lead to the same kind of row ("How many employees are assigned to a project whose
    /// department is not their own?"), over all of `a`'s rows and for each named one ("How many
    /// of the employees assigned to CRM Consolidation are from another department than the
    /// project?").
    fn linked_outside(&mut self, s: &Scope, a: &Attr, b: &Attr, names: &[String], (v, to): &(String, &str)) {
        let none = Where::default();
        let (bs, one) = (plural_of(&b.phrase), &a.phrase);
        // the labels two hops away through each parent (the employee's department, the project's)
        let hop = |from: &Attr| s.attrs.iter().filter(|y| y.path.len() == 2 && y.path[0] == from.path[0] && matches!(y.role, Role::Label(_))).collect::<Vec<_>>();
        for x in hop(b) {
            for y in hop(a).into_iter().filter(|y| y.raw == x.raw) {
                let (Some(p), Some(py)) = (x.name_under(b), y.name_under(a)) else { continue };
                if p != py {
                    continue;
                }
                let from = s.joined(&[b.path[0], x.path[1], a.path[0], y.path[1]]);
                let differ = format!("{} <> {}", x.expr, y.expr);
                let technical = |named: &str| {
                    format!(
                        "Count the distinct {} of the {} rows{named} whose {} through {} differs from the one through {}.",
                        b.raw, s.table.name, x.raw, s.joins[b.path[0]].1, s.joins[a.path[0]].1
                    )
                };
                let mut asks = vec![(
                    format!("SELECT count(DISTINCT {}) {from} WHERE {differ}", b.expr),
                    vec![
                        format!("How many {bs} are {v} {to} a {one} whose {p} is not their own?"),
                        format!("How many {bs} are {v} {to} at least one {one} of another {p} than their own?"),
                    ],
                    technical(""),
                )];
                for who in names.iter().take(LINKED_ENTITIES) {
                    asks.push((
                        format!("SELECT count(DISTINCT {}) {from} WHERE {} = {} AND {differ}", b.expr, a.expr, literal(who)),
                        vec![
                            format!("How many of the {bs} {v} {to} {who} are from another {p} than the {one}?"),
                            format!("How many of the {bs} {v} {to} {who} belong to a {p} other than the {one}'s?"),
                        ],
                        technical(&format!(" for {who}")),
                    ));
                }
                for (sql, natural, technical) in asks {
                    self.push(
                        s,
                        Draft {
                            template: "outside_count",
                            level: 3,
                            sql,
                            width: 1,
                            answer: Shape::One,
                            probe: None,
                            natural,
                            technical,
                            wh: &none,
                            extra_paths: vec![&x.path, &y.path],
                        },
                    );
                }
            }
        }
    }

    /// People of one kind linked to rows of another kind ("How many employees whose status is
    /// terminated are assigned to at least one project whose status is active?"): a category of
    /// each parent, two of its values drawn.
    fn linked_filtered(&mut self, s: &Scope, a: &Attr, b: &Attr, (v, to): &(String, &str)) {
        let none = Where::default();
        let (bs, one, from) = (plural_of(&b.phrase), &a.phrase, s.joined(&[a.path[0], b.path[0]]));
        let categories = |p: &Attr| -> Vec<(&Attr, String, Vec<Value>)> {
            s.attrs
                .iter()
                .filter(|c| c.path == p.path)
                .filter_map(|c| match &c.role {
                    Role::Category(values) => c.name_under(p).map(|name| (c, name.to_string(), values.clone())),
                    _ => None,
                })
                .collect()
        };
        for (cb, nb, mut vb) in categories(b) {
            for (ca, na, mut va) in categories(a) {
                vb.shuffle(&mut self.rng);
                va.shuffle(&mut self.rng);
                for x in vb.iter().take(2) {
                    for y in va.iter().take(2) {
                        let (sx, sy) = (shown(x), shown(y));
                        let cond = format!("WHERE {} = {} AND {} = {}", cb.expr, value_literal(x), ca.expr, value_literal(y));
                        let technical = |what: &str| format!("{what} {} of the {} rows whose {} is {sx} and whose {} is {sy}.", b.raw, s.table.name, cb.raw, ca.raw);
                        for (template, select, answer, natural, technical) in [
                            (
                                "linked_filtered_count",
                                format!("count(DISTINCT {})", b.expr),
                                Shape::One,
                                vec![
                                    format!("How many {bs} whose {nb} is {sx} are {v} {to} at least one {one} whose {na} is {sy}?"),
                                    format!("How many {bs} with {nb} {sx} are {v} {to} a {one} with {na} {sy}?"),
                                ],
                                technical("Count the distinct"),
                            ),
                            (
                                "linked_filtered_list",
                                format!("DISTINCT {}", b.expr),
                                Shape::List,
                                vec![
                                    format!("Which {bs} whose {nb} is {sx} are {v} {to} a {one} whose {na} is {sy}?"),
                                    format!("Who among the {bs} with {nb} {sx} is {v} {to} a {one} with {na} {sy}?"),
                                ],
                                technical("List the distinct"),
                            ),
                        ] {
                            self.push(
                                s,
                                Draft {
                                    template,
                                    level: 2,
                                    sql: format!("SELECT {select} {from} {cond}"),
                                    width: 1,
                                    answer,
                                    probe: None,
                                    natural,
                                    technical,
                                    wh: &none,
                                    extra_paths: vec![&a.path, &b.path],
                                },
                            );
                        }
                    }
                }
            }
        }
    }

    /// The total and the average of a quantity of `b`'s rows linked to the row of `a` named
    /// `who` ("What is the total salary of the employees assigned to Apollo?"); `avg` skips the
    /// rows without a value, as people mean "ignoring anyone without a recorded salary".
    fn linked_aggregates(&mut self, s: &Scope, a: &Attr, b: &Attr, who: &str, verb: Option<&(String, &str)>) {
        let (n, none) = (&s.plural, Where::default());
        let (bs, lit, from) = (plural_of(&b.phrase), literal(who), s.joined(&[a.path[0], b.path[0]]));
        for q in s.attrs.iter().filter(|q| q.path == b.path && matches!(q.role, Role::Quantity(_))) {
            let Some(qn) = q.name_under(b) else { continue };
            for (agg, word, alt) in [("sum", "total", "combined"), ("avg", "average", "mean")] {
                if agg == "sum" && !summable(qn) {
                    continue;
                }
                let (expr, round) = if agg == "avg" { (format!("round(avg({}), 2)", q.expr), " Round to 2 decimals.") } else { (format!("sum({})", q.expr), "") };
                let natural = match verb {
                    // a person is assigned to the projects; the people are assigned to a project
                    Some((v, to)) if a.person => vec![
                        format!("What is the {word} {qn} of the {bs} {who} is {v} {to}?{round}"),
                        format!("What is the {alt} {qn} of all {bs} that {who} is {v} {to}?{round}"),
                    ],
                    Some((v, to)) => {
                        let mut natural = vec![
                            format!("What is the {word} {qn} of the {bs} {v} {to} {who}?{round}"),
                            format!("What is the {alt} {qn} of all {bs} {v} {to} {who}?{round}"),
                        ];
                        if b.person {
                            natural.push(format!("What is the {word} {qn} of the people {v} {to} {who}?{round}"));
                        }
                        natural
                    }
                    None => vec![format!("What is the {word} {qn} of the {bs} of the {n} of {who}?{round}")],
                };
                self.push(
                    s,
                    Draft {
                        template: "linked_aggregate",
                        level: 2,
                        sql: format!("SELECT {expr} {from} WHERE {} = {lit}", a.expr),
                        width: 1,
                        answer: Shape::One,
                        probe: None,
                        natural,
                        technical: format!("Compute the {agg} of {} over the {} rows whose {} is {who}.{round}", q.raw, s.table.name, a.raw),
                        wh: &none,
                        extra_paths: vec![&a.path, &b.path],
                    },
                );
            }
        }
    }

    /// Lookups of one named row's columns: one at a time, and two at once.
    fn lookups(&mut self, s: &Scope, li: usize, l: &Attr, names: &[String]) {
        let one = &s.singular;
        let cols: Vec<&Attr> = s
            .attrs
            .iter()
            .enumerate()
            .filter(|(i, a)| *i != li && a.path.len() <= 1 && !(a.path.is_empty() && matches!(a.role, Role::Label(_))))
            .map(|(_, a)| a)
            .collect();
        let none = Where::default();
        for who in names {
            let lit = literal(who);
            for (k, c) in cols.iter().enumerate() {
                let cp = &c.phrase;
                let mut natural = if c.person {
                    // a person is asked for with "who", and by name, never by the key that points to them
                    vec![format!("Who is the {cp} of {who}?"), format!("Who is {who}'s {cp}?"), format!("Name the {cp} of the {one} {who}.")]
                } else {
                    vec![format!("What is the {cp} of {who}?"), format!("What {cp} does the {one} {who} have?"), format!("Tell me the {cp} of the {one} {who}.")]
                };
                if is_place(cp) {
                    natural.push(format!("Which {cp} is {who} in?"));
                    natural.push(format!("Where is {who}? Give the {cp}."));
                }
                self.push(
                    s,
                    Draft {
                        template: "lookup",
                        level: 0,
                        sql: format!("SELECT {} {} WHERE {} = {lit}", c.expr, s.from(&[&c.path]), l.expr),
                        width: 1,
                        answer: Shape::One,
                        probe: None,
                        natural,
                        technical: format!("Look up {who} in {}: what is its {}?", s.table.name, c.raw),
                        wh: &none,
                        extra_paths: vec![&c.path],
                    },
                );
                if let Some(c2) = cols.get(k + 1).filter(|c2| c2.path.is_empty() && c.path.is_empty()) {
                    self.push(
                        s,
                        Draft {
                            template: "lookup_two",
                            level: 1,
                            sql: format!("SELECT {}, {} {} WHERE {} = {lit}", c.expr, c2.expr, s.from(&[]), l.expr),
                            width: 2,
                            answer: Shape::Row,
                            probe: None,
                            natural: vec![
                                format!("What are the {cp} and the {} of {who}?", c2.phrase),
                                format!("Give me the {cp} and {} of the {one} {who}.", c2.phrase),
                            ],
                            technical: format!("{} and {} of {who} in {}.", c.raw, c2.raw, s.table.name),
                            wh: &none,
                            extra_paths: vec![],
                        },
                    );
                }
            }
        }
    }

    /// Groups (a category `g` of the scope) that have rows with one value of another category
    /// but none with a second value (`EXCEPT`), or rows with both (`INTERSECT`).
    fn set_ops(&mut self, s: &Scope, ci: usize, c: &Attr, values: &[Value]) {
        let n = &s.plural;
        let groups: Vec<&Attr> = s
            .attrs
            .iter()
            .enumerate()
            .filter(|(gi, g)| {
                *gi != ci && compatible(&g.path, &c.path) && matches!(g.role, Role::Category(_) | Role::Label(_)) && !(g.path.is_empty() && Some(*gi) == s.label)
            })
            .map(|(_, g)| g)
            .collect();
        let none = Where::default();
        for g in groups.into_iter().take(3) {
            let f = s.from(&[&c.path, &g.path]);
            let gs = plural_of(&g.phrase);
            for pair in values.windows(2).take(3) {
                let (v1, v2) = (&pair[0], &pair[1]);
                let (s1, s2) = (shown(v1), shown(v2));
                let side = |v: &Value| format!("SELECT {} {f} WHERE {} = {} AND {} IS NOT NULL", g.expr, c.expr, value_literal(v), g.expr);
                let p = &c.phrase;
                self.push(
                    s,
                    Draft {
                        template: "except",
                        level: 3,
                        sql: format!("{} EXCEPT {}", side(v1), side(v2)),
                        width: 1,
                        answer: Shape::List,
                        probe: None,
                        natural: vec![
                            format!("Which {gs} have {n} with {p} {s1} but none with {p} {s2}?"),
                            format!("List the {gs} that have {s1} {n} but never {s2} ones (by {p})."),
                        ],
                        technical: format!("{} values with a row where {} = {s1} EXCEPT those with {} = {s2}.", g.raw, c.raw, c.raw),
                        wh: &none,
                        extra_paths: vec![&c.path, &g.path],
                    },
                );
                self.push(
                    s,
                    Draft {
                        template: "intersect",
                        level: 3,
                        sql: format!("{} INTERSECT {}", side(v1), side(v2)),
                        width: 1,
                        answer: Shape::List,
                        probe: None,
                        natural: vec![
                            format!("Which {gs} have both {n} with {p} {s1} and {n} with {p} {s2}?"),
                            format!("List the {gs} that have {s1} {n} as well as {s2} ones (by {p})."),
                        ],
                        technical: format!("{} values with rows where {} = {s1} INTERSECT {} = {s2}.", g.raw, c.raw, c.raw),
                        wh: &none,
                        extra_paths: vec![&c.path, &g.path],
                    },
                );
            }
        }
    }

    /// The `b` column of the row with the highest or lowest `a` (a quantity or a date) among
    /// the rows `wh` keeps, with its tie probe.
    #[allow(clippy::too_many_arguments)]
    fn extreme_row(&mut self, s: &Scope, template: &'static str, natural: Vec<String>, a: &Attr, b: &Attr, wh: &Where, from: &str, dir: &str, sup: &str, ap: &[usize]) {
        let technical = format!("The {} of the {} row with the {sup} {}{}.", b.raw, s.table.name, a.raw, wh.raw());
        self.ranked(s, template, 2, natural, technical, &b.expr, &a.expr, &format!("{from} WHERE {} IS NOT NULL{}", a.expr, wh.and()), dir, 0, wh, ap);
    }

    /// Adds an arg-max/arg-min question with its tie probe: `answer` and `metric` ordered by the
    /// metric (`dir`), ties broken by the answer, the answer at `index`.
    #[allow(clippy::too_many_arguments)]
    fn ranked(
        &mut self,
        s: &Scope,
        template: &'static str,
        level: u8,
        natural: Vec<String>,
        technical: String,
        answer: &str,
        metric: &str,
        rest: &str,
        dir: &str,
        index: usize,
        wh: &Where,
        path: &[usize],
    ) {
        let offset = if index > 0 { format!(" OFFSET {index}") } else { String::new() };
        let head = format!("SELECT {answer}, {metric} {rest} ORDER BY {metric} {dir}, {answer}");
        let probe = Probe { sql: format!("{head} LIMIT {}", index + 2), width: 2, metric: 1, index, exact_rank: index > 0 };
        let sql = format!("{head} LIMIT 1{offset}");
        self.push(s, Draft { template, level, sql, width: 2, answer: Shape::One, probe: Some(probe), natural, technical, wh, extra_paths: vec![path] });
    }

    /// Adds a top-`k` question: the first `k` rows by `metric`, with a probe that drops it when row
    /// `k` ties with row `k - 1`.
    #[allow(clippy::too_many_arguments)]
    fn top(
        &mut self,
        s: &Scope,
        template: &'static str,
        natural: Vec<String>,
        technical: String,
        answer: &str,
        metric: &str,
        rest: &str,
        k: usize,
        wh: &Where,
        path: &[usize],
    ) {
        debug_assert!(k < MAX_LIST);
        let head = format!("SELECT {answer}, {metric} {rest} ORDER BY {metric} DESC, {answer}");
        let probe = Probe { sql: format!("{head} LIMIT {}", k + 1), width: 2, metric: 1, index: k - 1, exact_rank: false };
        self.push(
            s,
            Draft {
                template,
                level: 3,
                sql: format!("{head} LIMIT {k}"),
                width: 2,
                answer: Shape::List,
                probe: Some(probe),
                natural,
                technical,
                wh,
                extra_paths: vec![path],
            },
        );
    }
}
