//! `scenarios synth`: SQL question/answer scenarios written offline, with no model, through a
//! server's own SQL query tool.
//!
//! 1. [`tools`]: find the query tool (and the list/describe tools) from the schemas;
//! 2. [`schema`]: learn tables, columns, keys and sample values with a few SELECTs;
//! 3. [`grammar`]: compose questions from parts (a scope with its joins, up to two filters, a
//!    target: counts, aggregates, lookups, lists, arg-max of rows and groups, top k, HAVING,
//!    set operations, percentages, comparisons with the average and between columns), each
//!    with its SQL and phrased in people's words ([`names`]);
//! 4. [`check`]: run every kept question's SQL through the server and turn its rows into the
//!    expected answer with the right matcher, dropping empty, NULL, oversized and tied results;
//! 5. dedupe by normalized text and split train/validation by SQL, so that paraphrases of one
//!    query never cross the split.
//!
//! Only SELECT statements are sent; tools that look like writes are never called.

pub mod candidate;
pub mod check;
pub mod compare;
pub mod exec;
pub mod grammar;
pub mod meta;
pub mod mistake;
pub mod names;
pub mod schema;
mod scope;
pub mod tools;

use std::collections::{BTreeMap, HashMap, HashSet};

use futures::StreamExt;
use rand::SeedableRng;
use rand::seq::SliceRandom;
use serde::Serialize;
use serde_json::{Map, Value, json};
use ta_rollout::ToolHost;
use ta_types::{Difficulty, ReferenceStep, Scenario, Split};

pub use candidate::Candidate;
pub use check::Checked;
pub use schema::Schema;
pub use tools::SqlTools;

/// `source` of synthesized scenarios.
pub const SOURCE_SYNTH: &str = "synth";

/// `phrasing` of a scenario in people's words, and of one naming the schema's tables and columns.
pub const PHRASING_NATURAL: &str = "natural";
pub const PHRASING_TECHNICAL: &str = "technical";
/// A question about the schema itself ([`meta`]), which names tables and columns as they are
/// named, as people asking about a schema do.
pub const PHRASING_SCHEMA: &str = "schema";

/// The [`Summary::dropped`] reason of candidates whose query the server answered with an error.
pub const QUERY_FAILED: &str = "the query failed on the server";

#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    #[error("{0}")]
    Tools(String),
    #[error(
        "the database does not answer like SQLite ({0})\nhint: `scenarios synth` reads the schema through sqlite_master and pragma_table_info, which only SQLite has; for other databases use `scenarios generate`"
    )]
    Dialect(String),
    #[error("learning the schema failed: {0}\nhint: the query tool must accept SELECTs on sqlite_master and the pragma_table_info/pragma_foreign_key_list functions")]
    Introspection(String),
    #[error("the query failed: {message}\n  SQL: {sql}")]
    Query { sql: String, message: String },
    #[error("the MCP connection failed: {0}")]
    Connection(String),
    #[error("no question of this database has the template {0}\nhint: its templates: {1}")]
    UnknownTemplate(String, String),
}

#[derive(Debug, Clone)]
pub struct SynthOptions {
    /// Scenarios wanted (the output has at most this many).
    pub n: usize,
    /// The query tool's name when detection should not choose.
    pub query_tool: Option<String>,
    pub validation_fraction: f64,
    pub seed: u64,
    /// Queries in flight at once.
    pub concurrency: usize,
    /// Only questions of these templates (`None`: every template).
    pub templates: Option<Vec<String>>,
    /// Only questions up to this difficulty level (`None`: every level).
    pub max_difficulty: Option<u8>,
    /// How often each template is drawn relative to the others (`None`: all alike); a template
    /// not named gets the mean weight. `scenarios frontier --weights` writes them from a
    /// model's failures.
    pub template_weights: Option<BTreeMap<String, f64>>,
    /// Also name category values loosely ("awaiting trial" for "Awaiting trial outcome"), with a
    /// list of the column's stored values in the reference before its query (`scenarios synth
    /// --value-lookups`).
    pub value_lookups: bool,
    /// How often, within each template, a question is drawn whose SQL joins no table, one, or two
    /// or more, relative to each other (`None`: as the grammar offers them). The grammar offers
    /// more joined scopes than one-table ones, where people's questions mostly read one table
    /// (benches/RESULTS.md, "Run 33").
    pub join_mix: Option<[f64; 3]>,
}

/// What a synthesis produced and how.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub query_tool: String,
    pub list_tool: Option<String>,
    pub describe_tool: Option<String>,
    pub sqlite_version: String,
    pub tables: Vec<String>,
    /// Questions the templates offered (one SQL each).
    pub candidates: usize,
    /// Candidate SQL queries run through the server.
    pub checked: usize,
    /// Why checked candidates were dropped, with counts.
    pub dropped: BTreeMap<String, usize>,
    /// Phrasings dropped as duplicates of an earlier one (normalized text).
    pub duplicates: usize,
    pub scenarios: usize,
    pub train: usize,
    pub validation: usize,
    pub per_template: BTreeMap<String, usize>,
    pub per_difficulty: BTreeMap<u8, usize>,
    pub per_table: BTreeMap<String, usize>,
    /// Scenarios by the joins of their SQL ("0", "1", "2+").
    pub per_joins: BTreeMap<String, usize>,
    /// Scenarios whose reference looks up a value the question names loosely.
    pub value_lookups: usize,
}

pub struct Synthesized {
    pub scenarios: Vec<Scenario>,
    pub schema: Schema,
    pub summary: Summary,
}

/// Synthesizes up to `opts.n` checked scenarios through `host`'s SQL query tool.
pub async fn synthesize<T: ToolHost>(host: &T, opts: &SynthOptions) -> Result<Synthesized, SynthError> {
    let tools = SqlTools::detect(host.specs(), opts.query_tool.as_deref())?;
    let sql = exec::Sql { host, tool: &tools.query };
    let schema = schema::introspect(&sql).await?;
    let mut all = grammar::candidates(&schema, opts.seed, opts.templates.is_some(), opts.value_lookups);
    all.extend(meta::candidates(&schema));
    select(&mut all, opts)?;
    let ordered = match (&opts.template_weights, &opts.join_mix) {
        (weights, Some(mix)) => interleave_joins(all.clone(), |c| c.template, |c| &c.sql, opts.seed, weights.as_ref(), mix),
        (Some(w), None) => interleave_weighted(all.clone(), |c| c.template, opts.seed, w),
        (None, None) => interleave(all.clone(), |c| c.template, opts.seed),
    };

    let mut kept: Vec<(Candidate, Checked)> = Vec::new();
    let mut dropped: BTreeMap<String, usize> = BTreeMap::new();
    let mut checked = 0;
    let mut seen: HashSet<String> = HashSet::new();
    let mut tasks = 0;
    let mut stream = futures::stream::iter(ordered)
        .map(|c| async {
            let r = check::check(&sql, &c).await;
            (c, r)
        })
        .buffered(opts.concurrency.max(1));
    while let Some((c, result)) = stream.next().await {
        checked += 1;
        match result {
            Ok(Ok(ok)) => {
                tasks += c.all_phrasings().filter(|p| seen.insert(normalize(p))).count();
                kept.push((c, ok));
            }
            Ok(Err(reason)) => *dropped.entry(reason).or_default() += 1,
            Err(SynthError::Query { message, .. }) => {
                let failed = dropped.entry(QUERY_FAILED.into()).or_default();
                // The first failure is shown: a server that refuses every candidate says why.
                if *failed == 0 {
                    tracing::warn!(sql = %c.sql, "a candidate query failed on the server (the others are logged at debug level): {message}");
                } else {
                    tracing::debug!(sql = %c.sql, %message, "candidate query failed");
                }
                *failed += 1;
            }
            Err(e) => return Err(e),
        }
        if tasks >= opts.n {
            break;
        }
    }
    drop(stream);

    let phrasings: Vec<Vec<&str>> = kept.iter().map(|(c, _)| c.all_phrasings().map(String::as_str).collect()).collect();
    let (picked, duplicates) = first_phrasings_first(&phrasings, opts.n);
    let mut scenarios = Vec::new();
    let mut group_of: Vec<usize> = Vec::new();
    for (g, phrasing) in picked {
        let (c, ok) = &kept[g];
        scenarios.push(scenario(&tools, c, ok, phrasing, scenarios.len()));
        group_of.push(g);
    }
    split_by_group(&mut scenarios, &group_of, opts.validation_fraction, opts.seed);

    let mut summary = Summary {
        query_tool: tools.query.name.clone(),
        list_tool: tools.list.clone(),
        describe_tool: tools.describe.as_ref().map(|d| d.name.clone()),
        sqlite_version: schema.sqlite_version.clone(),
        tables: schema.tables.iter().map(|t| t.name.clone()).collect(),
        candidates: all.len(),
        checked,
        dropped,
        duplicates,
        scenarios: scenarios.len(),
        train: scenarios.iter().filter(|s| s.split == Some(Split::Train)).count(),
        validation: scenarios.iter().filter(|s| s.split == Some(Split::Validation)).count(),
        per_template: BTreeMap::new(),
        per_difficulty: BTreeMap::new(),
        per_table: BTreeMap::new(),
        per_joins: BTreeMap::new(),
        value_lookups: group_of.iter().filter(|&&g| !kept[g].0.lookups.is_empty()).count(),
    };
    for &g in &group_of {
        let c = &kept[g].0;
        *summary.per_template.entry(c.template.to_string()).or_default() += 1;
        *summary.per_difficulty.entry(c.difficulty).or_default() += 1;
        *summary.per_joins.entry(JOIN_CLASSES[join_class(&c.sql)].to_string()).or_default() += 1;
        for t in &c.tables {
            *summary.per_table.entry(t.clone()).or_default() += 1;
        }
    }
    Ok(Synthesized { scenarios, schema, summary })
}

/// Keeps the candidates of the chosen templates and levels, before any is run: a profile that
/// wants one-table counts gets all of them, not the few a capped mix of every template holds.
fn select(all: &mut Vec<Candidate>, opts: &SynthOptions) -> Result<(), SynthError> {
    if let Some(templates) = &opts.templates {
        let known: std::collections::BTreeSet<&str> = all.iter().map(|c| c.template).collect();
        if let Some(unknown) = templates.iter().find(|t| !known.contains(t.as_str())) {
            return Err(SynthError::UnknownTemplate(unknown.clone(), known.into_iter().collect::<Vec<_>>().join(", ")));
        }
        all.retain(|c| templates.iter().any(|t| t == c.template));
    }
    if let Some(max) = opts.max_difficulty {
        all.retain(|c| c.difficulty <= max);
    }
    Ok(())
}

/// Items shuffled (seeded) within each template (`template` of an item), then taken one
/// template at a time in turn, templates in the order they first appear, so that a small `n`
/// still covers every template and table. `scenarios synth` and `scenarios walk` both order
/// their questions so.
pub fn interleave<T>(items: Vec<T>, template: impl Fn(&T) -> &str, seed: u64) -> Vec<T> {
    let mut by_template = shuffled_by_template(items, template, seed);
    let mut out = Vec::new();
    while by_template.iter().any(|(_, v)| !v.is_empty()) {
        for (_, v) in &mut by_template {
            if let Some(item) = v.pop() {
                out.push(item);
            }
        }
    }
    out
}

/// The items grouped by template, templates in the order they first appear, each group shuffled
/// (seeded) and reversed: the interleaves pop them from the end.
fn shuffled_by_template<T>(items: Vec<T>, template: impl Fn(&T) -> &str, seed: u64) -> Vec<(String, Vec<T>)> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut by_template: Vec<(String, Vec<T>)> = Vec::new();
    for item in items {
        let t = template(&item).to_string();
        match by_template.iter_mut().find(|(name, _)| *name == t) {
            Some((_, v)) => v.push(item),
            None => by_template.push((t, vec![item])),
        }
    }
    for (_, v) in &mut by_template {
        v.shuffle(&mut rng);
        v.reverse();
    }
    by_template
}

/// [`interleave`] with templates drawn in proportion to `weights` (smooth weighted round-robin:
/// each turn every template with items left gains its weight, and the one with the most takes a
/// turn and pays the total), so a template of weight 3 comes three times as often as one of
/// weight 1 for as long as both have items. A template `weights` does not name gets their mean
/// (1 when they are all 0); one of weight 0 is left out.
pub fn interleave_weighted<T>(items: Vec<T>, template: impl Fn(&T) -> &str, seed: u64, weights: &BTreeMap<String, f64>) -> Vec<T> {
    let mean = unnamed_weight(weights);
    // (weight, credit, items popped from the end)
    let mut by_template: Vec<(f64, f64, Vec<T>)> =
        shuffled_by_template(items, template, seed).into_iter().map(|(t, v)| (weights.get(&t).copied().unwrap_or(mean).max(0.0), 0.0, v)).collect();
    let mut out = Vec::new();
    loop {
        let live: Vec<usize> = (0..by_template.len()).filter(|&k| !by_template[k].2.is_empty() && by_template[k].0 > 0.0).collect();
        let Some(&first) = live.first() else { break };
        let total: f64 = live.iter().map(|&k| by_template[k].0).sum();
        for &k in &live {
            by_template[k].1 += by_template[k].0;
        }
        let best = live.iter().copied().fold(first, |b, k| if by_template[k].1 > by_template[b].1 { k } else { b });
        by_template[best].1 -= total;
        out.extend(by_template[best].2.pop());
    }
    out
}

/// The weight of a template that `weights` does not name: their mean (1 when they are all 0).
fn unnamed_weight(weights: &BTreeMap<String, f64>) -> f64 {
    let sum: f64 = weights.values().sum();
    if sum > 0.0 { sum / weights.len() as f64 } else { 1.0 }
}

/// The classes of [`SynthOptions::join_mix`], by the joins of a question's SQL.
pub const JOIN_CLASSES: [&str; 3] = ["0", "1", "2+"];

/// A question's class in [`JOIN_CLASSES`]: the JOINs its SQL makes, subqueries' included.
fn join_class(sql: &str) -> usize {
    sql.split(|c: char| !c.is_ascii_alphanumeric() && c != '_').filter(|w| w.eq_ignore_ascii_case("join")).count().min(2)
}

/// [`interleave_weighted`] over each template's join classes: a template's turns go to its
/// classes in proportion to `mix` (among the classes it has; a template with none of weight
/// above 0 is left out), templates weighted by `weights` as there (all alike without). A class
/// that runs out leaves its template fewer turns, which a pool of thousands of candidates for a
/// `--n` of hundreds seldom meets.
fn interleave_joins<T>(
    items: Vec<T>,
    template: impl Fn(&T) -> &str,
    sql: impl Fn(&T) -> &str,
    seed: u64,
    weights: Option<&BTreeMap<String, f64>>,
    mix: &[f64; 3],
) -> Vec<T> {
    let key = |t: &str, class: usize| format!("{t}|{}", JOIN_CLASSES[class]);
    // Each item's template and class, found once.
    let classed: Vec<(String, usize, T)> = items.into_iter().map(|x| (template(&x).to_string(), join_class(sql(&x)), x)).collect();
    let mut classes: BTreeMap<&str, [bool; 3]> = BTreeMap::new();
    for (t, class, _) in &classed {
        classes.entry(t.as_str()).or_default()[*class] = true;
    }
    let mean = weights.map_or(1.0, unnamed_weight);
    let mut keyed: BTreeMap<String, f64> = BTreeMap::new();
    for (t, has) in &classes {
        let of_template = weights.and_then(|w| w.get(*t).copied()).unwrap_or(mean).max(0.0);
        let present: f64 = (0..3).filter(|&k| has[k]).map(|k| mix[k]).sum();
        for k in (0..3).filter(|&k| has[k]) {
            let share = if present > 0.0 { mix[k] / present } else { 0.0 };
            keyed.insert(key(t, k), of_template * share);
        }
    }
    let keyed_items: Vec<(String, T)> = classed.into_iter().map(|(t, class, x)| (key(&t, class), x)).collect();
    interleave_weighted(keyed_items, |x| x.0.as_str(), seed, &keyed).into_iter().map(|(_, x)| x).collect()
}

/// Which phrasings become scenarios, as `(question, phrasing)` indices: the first phrasing of
/// every question before any second one, so that a consumer taking the first k tasks
/// (`collect --limit`) gets as many distinct questions as it can; at most `n`; a phrasing whose
/// normalized text came earlier is left out. Also the number left out so.
pub fn first_phrasings_first<'a>(questions: &[Vec<&'a str>], n: usize) -> (Vec<(usize, &'a str)>, usize) {
    let mut picked = Vec::new();
    let mut texts: HashSet<String> = HashSet::new();
    let mut duplicates = 0;
    let rounds = questions.iter().map(Vec::len).max().unwrap_or(0);
    'rounds: for round in 0..rounds {
        for (q, phrasings) in questions.iter().enumerate() {
            let Some(&text) = phrasings.get(round) else { continue };
            if picked.len() >= n {
                break 'rounds;
            }
            if texts.insert(normalize(text)) {
                picked.push((q, text));
            } else {
                duplicates += 1;
            }
        }
    }
    (picked, duplicates)
}

/// Lower case, letters and digits only, single spaces: paraphrases that differ only in
/// punctuation or case count as one.
pub fn normalize(text: &str) -> String {
    text.to_lowercase().split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect::<Vec<_>>().join(" ")
}

/// Exploration steps, where the server has the tools: list the tables, describe each of `tables`.
pub fn exploration_steps(tools: &SqlTools, tables: &[String]) -> Vec<ReferenceStep> {
    let mut steps = Vec::new();
    if let Some(list) = &tools.list {
        steps.push(step(list, json!({})));
    }
    if let Some(d) = &tools.describe {
        steps.extend(tables.iter().map(|t| step(&d.name, json!({ &d.arg: t }))));
    }
    steps
}

/// The query tool's call running `sql`.
pub fn query_step(tools: &SqlTools, sql: &str) -> ReferenceStep {
    step(&tools.query.name, json!({ &tools.query.arg: sql }))
}

fn step(tool: &str, arguments: Value) -> ReferenceStep {
    ReferenceStep { tool: tool.to_string(), arguments: arguments.as_object().cloned().unwrap_or_default(), with_previous: false }
}

fn scenario(tools: &SqlTools, c: &Candidate, ok: &Checked, task: &str, index: usize) -> Scenario {
    let mut extra = Map::new();
    extra.insert("sql".into(), c.sql.clone().into());
    extra.insert(ta_types::scenario::EXTRA_TEMPLATE.into(), c.template.into());
    let technical = c.technical.as_deref() == Some(task);
    let phrasing = if meta::TEMPLATES.contains(&c.template) {
        PHRASING_SCHEMA
    } else if technical {
        PHRASING_TECHNICAL
    } else {
        PHRASING_NATURAL
    };
    extra.insert("phrasing".into(), phrasing.into());
    let mut tags = vec![c.template.to_string()];
    tags.extend(c.tables.iter().cloned());
    Scenario {
        id: format!("synth-{index:05}"),
        task: task.to_string(),
        expected: Some(ok.expected.clone()),
        split: None,
        difficulty: Some(Difficulty::Level(c.difficulty)),
        tags,
        max_turns: None,
        reference: exploration_steps(tools, &c.tables).into_iter().chain(c.lookups.iter().map(|l| query_step(tools, l))).chain([query_step(tools, &c.sql)]).collect(),
        source: Some(SOURCE_SYNTH.into()),
        checked: Some(true),
        expected_state: None,
        tools: tools.names(),
        tools_read_only: tools.query_reads_only,
        extra,
    }
}

/// Seeded train/validation split of whole groups (the paraphrases of one SQL query): a
/// `fraction` share of the groups (at least one when there are two or more) goes to validation.
pub fn split_by_group(scenarios: &mut [Scenario], group_of: &[usize], fraction: f64, seed: u64) {
    let mut groups: Vec<usize> = group_of.iter().copied().collect::<HashSet<_>>().into_iter().collect();
    groups.sort_unstable();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    groups.shuffle(&mut rng);
    let mut n_val = (groups.len() as f64 * fraction).round() as usize;
    if n_val == 0 && groups.len() >= 2 && fraction > 0.0 {
        n_val = 1;
    }
    let validation: HashMap<usize, bool> = groups.iter().enumerate().map(|(k, &g)| (g, k < n_val)).collect();
    for (s, g) in scenarios.iter_mut().zip(group_of) {
        s.split = Some(if validation[g] { Split::Validation } else { Split::Train });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weighted_templates_come_in_proportion_until_one_runs_out() {
        let items: Vec<(&str, usize)> = (0..20).map(|i| ("a", i)).chain((0..20).map(|i| ("b", i))).chain((0..2).map(|i| ("c", i))).collect();
        let weights = BTreeMap::from([("a".to_string(), 3.0), ("b".to_string(), 1.0)]);
        let out = interleave_weighted(items.clone(), |x| x.0, 7, &weights);
        assert_eq!(out.len(), items.len(), "every item once");
        let count = |from: usize, to: usize, t: &str| out[from..to].iter().filter(|x| x.0 == t).count();
        // c is not named: it gets the mean weight, 2, until its two items are gone; then a and b
        // go on three to one
        assert_eq!((count(0, 6, "a"), count(0, 6, "b"), count(0, 6, "c")), (3, 1, 2));
        assert_eq!((count(6, 14, "a"), count(6, 14, "b")), (6, 2));
        let left_out = interleave_weighted(items, |x| x.0, 7, &BTreeMap::from([("c".to_string(), 0.0)]));
        assert!(left_out.iter().all(|x| x.0 != "c") && left_out.len() == 40);
    }

    #[test]
    fn a_join_mix_draws_each_templates_join_classes_in_proportion() {
        assert_eq!(
            ["SELECT 1 FROM a", "SELECT 1 FROM a JOIN b ON x", "SELECT 1 FROM a join b ON x LEFT JOIN c ON y", "SELECT joined FROM a_join"].map(join_class),
            [0, 1, 2, 0]
        );
        // template a: 30 one-table, 30 one-join, 30 two-join questions; b: joined ones only
        let sql = ["SELECT 1 FROM t", "SELECT 1 FROM t JOIN u", "SELECT 1 FROM t JOIN u JOIN v"];
        let items: Vec<(&str, &str)> = (0..90).map(|i| ("a", sql[i % 3])).chain((0..40).map(|i| ("b", sql[1 + i % 2]))).collect();
        let out = interleave_joins(items.clone(), |x| x.0, |x| x.1, 5, None, &[4.0, 2.0, 1.0]);
        assert_eq!(out.len(), items.len(), "every item once");
        let first = &out[..28];
        let of = |t: &str, k: usize| first.iter().filter(|x| x.0 == t && join_class(x.1) == k).count();
        // the templates take turns alike; within a, 4 : 2 : 1; within b (no one-table question), 2 : 1
        assert_eq!((of("a", 0), of("a", 1), of("a", 2)), (8, 4, 2));
        assert_eq!((of("b", 0), of("b", 1), of("b", 2)), (0, 9, 5));
        // a weight of 0 leaves the class out, and a template with only such classes
        let one_table = interleave_joins(items.clone(), |x| x.0, |x| x.1, 5, None, &[1.0, 0.0, 0.0]);
        assert!(one_table.len() == 30 && one_table.iter().all(|x| x.0 == "a" && join_class(x.1) == 0));
        // template weights still weigh the templates
        let weighted = interleave_joins(items, |x| x.0, |x| x.1, 5, Some(&BTreeMap::from([("a".to_string(), 3.0), ("b".to_string(), 1.0)])), &[1.0, 1.0, 1.0]);
        assert_eq!(weighted[..20].iter().filter(|x| x.0 == "a").count(), 15);
    }
}
