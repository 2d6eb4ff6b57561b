//! Questions about what the walk saw. Each task is an operation on one call's parsed result
//! (a field, a count, a lookup by name, an extreme, the most common value, existence, a
//! filtered list, a file's lines or title), phrased from the tools' arguments, the lists' and
//! fields' names in several frames, and answered by applying the operation; the replay applies
//! it again to a fresh server's result.

use std::collections::{BTreeMap, HashMap, HashSet};

use rand::SeedableRng;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use ta_synth::names::{human, plural, plural_of, singular, with_article, words};
use ta_types::Expected;
use ta_types::scenario::ExpectedRule;

use crate::explore::{Call, Kind, LINES, REVISION_WORDS, Walked, entry_kind, glob_extension, glob_word, label_field};
use crate::parse::{CHANGED_FILES, CURRENT, EXTENSION, Listing, MESSAGE, Parsed, ROWS, Record, TICKED, TOP_FOLDER, extension_of, is_hex_id, is_text_list, size_bytes};

/// What answers a task, given the answering call's parsed result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    /// A single field of the result.
    Field { field: String },
    /// The items of a list, or those whose `filter` field has a value.
    Count { listing: String, filter: Option<(String, Value)> },
    /// A field of the item whose `by` field is `value`.
    Lookup { listing: String, by: String, value: Value, field: String },
    /// The label of the item with the largest (or smallest) `field`.
    Extreme { listing: String, field: String, max: bool, label: String },
    /// The largest (or smallest) value of `field` itself: "the warmest temperature".
    Peak { listing: String, field: String, max: bool },
    /// The sum of a numeric `field` over the items: "the total amount".
    Total { listing: String, field: String },
    /// The value of `field` most items share, or with `max` false the fewest: "Who has the
    /// fewest commits on main?" from one log.
    Most { listing: String, field: String, max: bool },
    /// The month most items' date `field` falls in ("March 2024"): "Which month had the most
    /// commits on main?" from one log, where [`Op::Across`] reads a month at a time.
    Month { listing: String, field: String },
    /// Whether an item's `field` is `value`: "yes" or "no".
    Exists { listing: String, field: String, value: Value },
    /// The labels of every item; paths `under` a folder (a search's absolute paths) as paths
    /// inside it, as a person names them ("projects/garden-planner/src/plan.py").
    List {
        listing: String,
        label: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        under: Option<String>,
    },
    /// The labels of the items whose `filter` field has a value.
    Select { listing: String, filter: (String, Value), label: String },
    /// Lines of a text (a file's contents).
    Lines,
    /// A Markdown text's first heading.
    Heading,
    /// A listing that came back empty (a folder with nothing in it): `0` items, or "no" to "is
    /// there anything".
    Empty { count: bool },
    /// The lines a commit's diff adds (or removes).
    DiffLines { added: bool },
    /// The items whose numeric `field` lies past `bound` (above it, or below): how many there
    /// are, or with a `label`, which. "Which files in the src folder are larger than 500
    /// bytes?" The bound is a round number well clear of every value (see [`bound_between`]).
    Past { listing: String, field: String, bound: f64, above: bool, label: Option<String> },
    /// Which of several calls of one tool, differing in one argument, has the largest (or
    /// smallest) `measure`: the file of a folder modified last (`get_file_info` on each), the
    /// month with the most commits (`git_log` a month at a time). The calls are the task's
    /// [`Task::siblings`], the last `labels.len()` steps of its reference, in `labels`' order.
    Across { measure: Measure, max: bool, labels: Vec<String> },
    /// Two steps, the first's answer the second's subject: the file an [`Op::Across`] picks
    /// (`winner`), then `then` about it ("Which file in the notes folder has the most lines?
    /// How many bullet points are there in that file?"). Its results are the comparison's, then
    /// the winner's own call when it is not one of them (`own`).
    Then { pick: Box<Op>, winner: String, then: Box<Op>, own: bool },
    /// A whole history read a month at a time (`labels`, "January 2024") and found empty before
    /// the first month and after the last: what it holds in all ("How many commits are there
    /// in the repository at /srv/app?"). Its results are the months', then the two bounds'.
    History { labels: Vec<String>, of: Whole },
}

/// What an [`Op::History`] asks of the items of every month together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Whole {
    /// How many there are.
    Count,
    /// The person (a `field` value) with the most (or fewest) of them.
    Most { field: String, max: bool },
    /// A person's: their labels, or with no `label` how many.
    By { field: String, value: Value, label: Option<String> },
}

/// What [`Op::Across`] compares between its calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Measure {
    /// A field of each result.
    Field(String),
    /// The items of each result's list.
    Items,
    /// The lines of each result, a file's text: "Which note is the longest?"
    Lines,
}

impl Measure {
    pub(crate) fn of(&self, p: &Parsed) -> Option<f64> {
        match self {
            Measure::Field(k) => p.fields.get(k).and_then(order_key),
            Measure::Items => p.records("").map(|r| r.len() as f64),
            Measure::Lines => (p.line_count > 0 && !p.lines.is_empty() && p.listings.iter().all(|l| is_text_list(&l.key))).then_some(p.line_count as f64),
        }
    }
}

/// A tree's folder with nothing in it: its `children` list is empty (the tree's flattening
/// counts a list of no objects as `children.count`).
const EMPTY_FOLDER: &str = "children.count";

/// The longest working written out before an answer: ~400 tokens of names and numbers, inside
/// the 512 an episode's turn may say, with room for the call that answers.
const MAX_WORKING_CHARS: usize = 1_000;

/// How questions name everything below the folder the server serves.
const WHOLE_WORKSPACE: &str = "in the whole workspace";

/// Items of one list asked about by name (a seeded sample), so that one long list does not
/// crowd out every other question.
const LOOKUPS_PER_LIST: usize = 12;

/// Items named in an explanation at most.
const MAX_ENUMERATED: usize = 40;

/// At most this many items in a list answer.
const MAX_SELECT: usize = 8;

/// The items whose `filter` field has the value (every item without a filter).
fn matching<'a>(rs: &'a [Record], filter: Option<&(String, Value)>) -> impl Iterator<Item = &'a Record> {
    rs.iter().filter(move |r| filter.is_none_or(|(f, v)| r.get(f) == Some(v)))
}

/// The items sharing the largest (or smallest) `field`.
fn at_extreme<'a>(rs: &'a [Record], field: &str, max: bool) -> Vec<&'a Record> {
    let key = |r: &Record| r.get(field).and_then(order_key);
    let Some(best) = rs.iter().filter_map(key).max_by(|a, b| if max { a.total_cmp(b) } else { b.total_cmp(a) }) else { return Vec::new() };
    rs.iter().filter(|r| key(r) == Some(best)).collect()
}

/// The items whose `field` is past `bound`, in the listing's order; items without a number
/// there (a folder among sized files) are none of them.
fn past<'a>(rs: &'a [Record], field: &str, bound: f64, above: bool) -> impl Iterator<Item = &'a Record> {
    rs.iter().filter(move |r| r.get(field).and_then(order_key).is_some_and(|x| if above { x > bound } else { x < bound }))
}

/// The roundest number between two neighbouring values (`lo` < `hi`), a hundredth of each clear
/// of it, so that a size shown rounded (`2.77 KB` is 2,832 to 2,842 bytes) is still on one side:
/// a multiple of the largest power of ten (or half of one) that fits, nearest the middle. 480 and
/// 520 give 500, 2 and 3 give 2.5, 20.49 and 28.49 give 25. `None` when they are too close.
pub(crate) fn bound_between(lo: f64, hi: f64) -> Option<f64> {
    let (lo, hi) = (lo + lo.abs() / 100.0, hi - hi.abs() / 100.0);
    let mid = (lo + hi) / 2.0;
    (-2..=9).rev().flat_map(|k| [10f64.powi(k), 5.0 * 10f64.powi(k - 1)]).find_map(|step| {
        // Whole hundredths: 0.1 + 0.2 is not shown as 0.30000000000000004.
        let candidate = ((mid / step).round() * step * 100.0).round() / 100.0;
        (candidate > lo && candidate < hi).then_some(candidate)
    })
}

/// A bound for [`Op::Past`] on `field` of `rs`, and how many items lie above it: a seeded cut
/// between two neighbouring values that leaves one to [`MAX_SELECT`] items above, of a numeric
/// field (not a date, not an id) that every item has but folders among files.
fn threshold(rs: &[Record], field: &str, seed: u64) -> Option<(f64, usize)> {
    let values: Vec<f64> = rs.iter().filter_map(|r| r.get(field).and_then(order_key)).collect();
    let rest_folders = rs.iter().all(|r| r.get(field).and_then(order_key).is_some() || entry_kind(r) == Some(Kind::Dir));
    if values.len() < 3 || !rest_folders || is_id_like(field) || rs.iter().any(|r| r.get(field).is_some_and(is_date)) {
        return None;
    }
    let mut distinct = values.clone();
    distinct.sort_by(f64::total_cmp);
    distinct.dedup();
    let mut cuts: Vec<(f64, usize)> = (1..distinct.len())
        .filter_map(|i| {
            let above = values.iter().filter(|x| **x >= distinct[i]).count();
            ((1..=MAX_SELECT).contains(&above)).then(|| bound_between(distinct[i - 1], distinct[i]).map(|b| (b, above))).flatten()
        })
        .collect();
    cuts.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ field.len() as u64));
    cuts.first().copied()
}

/// Labels as a set answer: one to [`MAX_SELECT`] of them, each naming one item (two rows of one
/// date are not told apart by naming it).
fn set_of(labels: Vec<Value>) -> Option<Expected> {
    let distinct = labels.iter().collect::<HashSet<_>>().len() == labels.len();
    (!labels.is_empty() && labels.len() <= MAX_SELECT && distinct).then_some(Expected::Rule(ExpectedRule::Set(labels)))
}

/// Items numbered as a count writes them out: "1. a.md", "2. b.md".
fn numbered(items: impl IntoIterator<Item = String>) -> Vec<String> {
    items.into_iter().enumerate().map(|(i, h)| format!("{}. {h}", i + 1)).collect()
}

/// A number as a question writes it: `500`, `12.5`.
fn shown_number(x: f64) -> String {
    if x.fract() == 0.0 { format!("{}", x as i64) } else { x.to_string() }
}

/// How many items have each text value of `field`.
/// The one key counted the most (or the fewest) times, with its count; `None` on a tie.
fn sole<'a>(counts: impl Iterator<Item = (&'a String, usize)>, max: bool) -> Option<(&'a String, usize)> {
    let counts: Vec<(&String, usize)> = counts.collect();
    let best = counts.iter().map(|(_, n)| *n).reduce(if max { usize::max } else { usize::min })?;
    match counts.iter().filter(|(_, n)| *n == best).collect::<Vec<_>>().as_slice() {
        [one] => Some(**one),
        _ => None,
    }
}

fn tally(rs: &[Record], field: &str) -> BTreeMap<String, usize> {
    tally_of(&rs.iter().collect::<Vec<_>>(), field)
}

impl Op {
    /// The answer `p` gives; `None` when it has none (missing, tied, empty).
    pub fn answer(&self, p: &Parsed) -> Option<Expected> {
        let listing = |key: &str| p.records(key);
        match self {
            Op::Field { field } => p.fields.get(field).and_then(value_answer),
            Op::Count { listing: l, filter } => {
                let n = matching(listing(l)?, filter.as_ref()).count();
                (n > 0).then_some(Expected::Number(n as f64))
            }
            Op::Lookup { listing: l, by, value, field } => {
                let hits: Vec<&Record> = listing(l)?.iter().filter(|r| r.get(by) == Some(value)).collect();
                match hits.as_slice() {
                    [one] => one.get(field).and_then(value_answer),
                    _ => None,
                }
            }
            Op::Extreme { listing: l, field, max, label } => match at_extreme(listing(l)?, field, *max).as_slice() {
                [one] => one.get(label).and_then(value_answer),
                _ => None,
            },
            Op::Peak { listing: l, field, max } => at_extreme(listing(l)?, field, *max).first().and_then(|r| r.get(field)).and_then(value_answer),
            Op::Total { listing: l, field } => {
                let values: Vec<f64> = listing(l)?.iter().map(|r| r.get(field).and_then(Value::as_f64)).collect::<Option<_>>()?;
                let sum: f64 = values.iter().sum();
                // Cents, as money is written: the sum of 12.1 and 0.2 is 12.3, not 12.299999.
                let sum = (sum * 100.0).round() / 100.0;
                if values.len() >= 2 { value_answer(&Value::from(sum)) } else { None }
            }
            Op::Month { listing: l, field } => {
                let counts = months(listing(l)?, field)?;
                let (one, top) = sole(counts.iter().map(|(k, n)| (k, *n)), true).filter(|_| counts.len() >= 2)?;
                (top >= 2).then(|| Expected::Text(one.clone()))
            }
            Op::Most { listing: l, field, max } => {
                let counts = tally(listing(l)?, field);
                let (one, n) = sole(counts.iter().map(|(k, n)| (k, *n)), *max)?;
                // The most needs two items to say anything; the fewest, two values to compare.
                let telling = if *max { n >= 2 } else { counts.len() >= 2 };
                telling.then(|| Expected::Text(one.clone()))
            }
            Op::Exists { listing: l, field, value } => {
                let found = listing(l)?.iter().any(|r| r.get(field) == Some(value));
                Some(Expected::Rule(ExpectedRule::Exact(if found { "yes" } else { "no" }.into())))
            }
            Op::Select { listing: l, filter, label } => {
                let labels: Vec<Value> = matching(listing(l)?, Some(filter)).filter_map(|r| r.get(label).cloned()).collect();
                (labels.len() >= 2 && labels.len() <= MAX_SELECT).then_some(Expected::Rule(ExpectedRule::Set(labels)))
            }
            Op::List { listing: l, label, under } => {
                let inside = |v: &Value| match (under, v.as_str()) {
                    (Some(u), Some(path)) => path.strip_prefix(u.as_str()).and_then(|rest| rest.strip_prefix('/')).map(|rest| Value::String(rest.into())),
                    _ => Some(v.clone()),
                };
                let labels: Vec<Value> = listing(l)?.iter().map(|r| r.get(label).and_then(inside)).collect::<Option<_>>()?;
                (labels.len() >= 2 && labels.len() <= MAX_SELECT).then_some(Expected::Rule(ExpectedRule::Set(labels)))
            }
            Op::Lines => Measure::Lines.of(p).map(Expected::Number),
            Op::Heading => p.lines.iter().find_map(|l| l.strip_prefix("# ")).map(|h| Expected::Text(h.trim().to_string())),
            Op::Past { listing: l, field, bound, above, label } => {
                let rs = listing(l)?;
                // Replayed on a value at the bound, the question has no answer.
                if rs.iter().any(|r| r.get(field).and_then(order_key) == Some(*bound)) {
                    return None;
                }
                let hits: Vec<&Record> = past(rs, field, *bound, *above).collect();
                match label {
                    None => (!hits.is_empty()).then_some(Expected::Number(hits.len() as f64)),
                    Some(label) => set_of(hits.iter().filter_map(|r| r.get(label).cloned()).collect()),
                }
            }
            Op::Across { .. } | Op::Then { .. } | Op::History { .. } => None,
            Op::DiffLines { added } => p.diff_lines.map(|(a, r)| if *added { a } else { r }).filter(|n| *n > 0).map(|n| Expected::Number(n as f64)),
            Op::Empty { count } => (p.listings.is_empty() && p.fields.is_empty() && p.lines.is_empty())
                .then(|| if *count { Expected::Number(0.0) } else { Expected::Rule(ExpectedRule::Exact("no".into())) }),
        }
    }

    /// The answer of the task's answering results: the last one, or each of [`Op::Across`]'s.
    pub fn answer_all(&self, results: &[&Parsed]) -> Option<Expected> {
        match self {
            Op::Then { pick, winner, then, own } => {
                let (_, own) = then_results(pick, winner, *own, results)?;
                then.answer(own)
            }
            Op::History { labels, of } => {
                let items = history(labels.len(), results)?;
                match of {
                    Whole::Count => (!items.is_empty()).then(|| Expected::Number(items.len() as f64)),
                    Whole::Most { field, max } => {
                        let counts = tally_of(&items, field);
                        let (one, _) = sole(counts.iter().map(|(k, n)| (k, *n)), *max).filter(|_| counts.len() >= 2)?;
                        Some(Expected::Text(one.clone()))
                    }
                    Whole::By { field, value, label } => {
                        let hits: Vec<&Record> = items.into_iter().filter(|r| r.get(field) == Some(value)).collect();
                        match label {
                            None => (!hits.is_empty()).then(|| Expected::Number(hits.len() as f64)),
                            Some(label) => set_of(hits.iter().filter_map(|r| r.get(label).cloned()).collect()),
                        }
                    }
                }
            }
            Op::Across { measure, max, labels } => {
                let best = extreme_of(measure, *max, results, labels.len())?;
                Some(Expected::Text(labels[best].clone()))
            }
            op => op.answer(results.last()?),
        }
    }

    /// [`Op::explain`] over the answering results.
    pub fn explain_all(&self, results: &[&Parsed]) -> Option<String> {
        match self {
            Op::History { labels, of } => {
                let months: Vec<String> = labels.iter().zip(results).map(|(l, p)| format!("{l} {}", p.records("").map_or(0, <[Record]>::len))).collect();
                let (first, last) = (labels.first()?, labels.last()?);
                let read = format!("Reading the history a month at a time: {}; nothing before {first} or after {last}.", months.join(", "));
                let items = history(labels.len(), results)?;
                Some(match of {
                    Whole::Count => format!("{read} That makes {} in all.", items.len()),
                    Whole::Most { field, .. } => {
                        let counts: Vec<String> = tally_of(&items, field).iter().map(|(k, n)| format!("{k} {n}")).collect();
                        format!("{read} By {}: {}.", human(field), counts.join(", "))
                    }
                    Whole::By { field, value, label } => {
                        let name = label.clone().or_else(|| label_field(&items.iter().map(|r| (*r).clone()).collect::<Vec<_>>()))?;
                        let hits = numbered(items.iter().filter(|r| r.get(field) == Some(value)).filter_map(|r| r.get(&name)).map(ta_synth::names::shown));
                        format!("{read} Those by {}: {}. That makes {}.", ta_synth::names::shown(value), hits.join(", "), hits.len())
                    }
                })
            }
            Op::Then { pick, winner, then, own } => {
                let (compared, own) = then_results(pick, winner, *own, results)?;
                let first = pick.explain_all(compared)?;
                Some(match then.explain(own) {
                    Some(second) => format!("{first} In {winner}: {second}"),
                    None => first,
                })
            }
            Op::Across { measure, max, labels } => {
                let best = extreme_of(measure, *max, results, labels.len())?;
                let dates = matches!(measure, Measure::Field(k) if results.iter().all(|p| p.fields.get(k).is_some_and(is_date)));
                let shown = |p: &Parsed| match measure {
                    Measure::Field(k) => p.fields.get(k).map(|v| if dates { v.as_str().and_then(iso_day).unwrap_or_default() } else { ta_synth::names::shown(v) }),
                    Measure::Items | Measure::Lines => measure.of(p).map(|n| n.to_string()),
                };
                let each: Vec<String> = labels.iter().zip(results).map(|(l, p)| format!("{l} {}", shown(p).unwrap_or_default())).collect();
                let (what, word) = match (measure, dates, max) {
                    (Measure::Items, _, true) => ("Counting what each result lists".to_string(), "most"),
                    (Measure::Items, _, false) => ("Counting what each result lists".to_string(), "fewest"),
                    (Measure::Lines, _, true) => ("Counting the lines of each file".to_string(), "most"),
                    (Measure::Lines, _, false) => ("Counting the lines of each file".to_string(), "fewest"),
                    (Measure::Field(k), true, _) => (format!("Comparing when each was {}", human(k)), if *max { "most recent" } else { "earliest" }),
                    (Measure::Field(k), false, _) => (format!("Comparing the {} of each", human(k)), if *max { "largest" } else { "smallest" }),
                };
                Some(format!("{what}: {}. The {word} is {}.", each.join(", "), labels[best]))
            }
            op => op.explain(results.last()?),
        }
    }

    /// How the answer follows from `p`, in a sentence or two, for the answers that are worked out
    /// (a count, an extreme): the reference trace says it before answering, so that a model
    /// learns to count and compare in the open rather than to guess a number.
    pub fn explain(&self, p: &Parsed) -> Option<String> {
        let records = |key: &str| p.records(key);
        let named = |r: &Record, label: &str| r.get(label).map(ta_synth::names::shown);
        let enumerate = |names: Vec<String>| {
            let n = names.len();
            let shown: Vec<String> = names.into_iter().take(MAX_ENUMERATED).collect();
            let more = if n > MAX_ENUMERATED { format!(" and {} more", n - MAX_ENUMERATED) } else { String::new() };
            format!("{}{more}", shown.join(", "))
        };
        match self {
            Op::Count { listing, filter } => {
                let rs = records(listing)?;
                // A tree's or a search's items by the last part of their path, the name a tree
                // shows: the numbers count, and 36 paths written out ran a 0.5B model past its
                // 512 tokens a turn, repeating one of them.
                let label = if rs[0].contains_key("path") { "path".into() } else { label_field(rs)? };
                let leaf = |p: String| p.rsplit('/').next().map(String::from).unwrap_or(p);
                let hits: Vec<String> = matching(rs, filter.as_ref()).filter_map(|r| named(r, &label)).map(leaf).collect();
                let n = hits.len();
                let things = match filter {
                    Some((f, Value::String(v))) if f == "kind" => plural(&tag_noun(v)),
                    Some((f, Value::String(v))) if f == EXTENSION => files_of(v).1,
                    Some((f, _)) if f == EMPTY_FOLDER => "empty folders".into(),
                    Some((f, v)) => format!("items with {} {}", human(f), ta_synth::names::shown(v)),
                    None => "items".into(),
                };
                // Numbered before the total is said: a small model counts by writing the list
                // out, not by guessing a number first.
                Some(format!("Counting the {things} in the result: {}. That makes {n}.", enumerate(numbered(hits))))
            }
            Op::Extreme { listing, field, max, label } => {
                let rs = records(listing)?;
                let best = *at_extreme(rs, field, *max).first()?;
                let word = if *max { "largest" } else { "smallest" };
                // Each item's value written out before the pick, as a count numbers its items:
                // a small model compares what it has written, not what it skimmed.
                let id = label_field(rs).unwrap_or_else(|| label.clone());
                let each: Vec<String> = rs.iter().filter_map(|r| Some(format!("{} {}", named(r, &id)?, ta_synth::names::shown(r.get(field)?)))).collect();
                let winner = named(best, &id)?;
                let also = if *label == id { String::new() } else { format!("; its {} is {}", human(label), named(best, label)?) };
                let value = ta_synth::names::shown(&best[field.as_str()]);
                let whole = each.len() <= MAX_ENUMERATED;
                let working = format!("The {} of each: {}. The {word} is {value}, for {winner}{also}.", human(field), enumerate(each));
                // A list too long to write out in a turn (a whole history's dates) is not.
                Some(if whole && working.len() <= MAX_WORKING_CHARS { working } else { format!("The {word} {} is {value}, for {winner}{also}.", human(field)) })
            }
            Op::Peak { listing, field, max } => {
                let rs = records(listing)?;
                let values: Vec<String> = rs.iter().filter_map(|r| r.get(field)).map(ta_synth::names::shown).collect();
                let best = ta_synth::names::shown(at_extreme(rs, field, *max).first()?.get(field)?);
                Some(format!("The {} values: {}. The {} is {best}.", human(field), enumerate(values), if *max { "largest" } else { "smallest" }))
            }
            Op::Total { listing, field } => {
                let values: Vec<String> = records(listing)?.iter().filter_map(|r| r.get(field)).map(ta_synth::names::shown).collect();
                let total = match self.answer(p)? {
                    Expected::Number(x) => x,
                    Expected::Rule(ExpectedRule::Number { number, .. }) => number,
                    _ => return None,
                };
                let total = if total.fract() == 0.0 { format!("{}", total as i64) } else { total.to_string() };
                Some(format!("Adding up the {}: {} = {total}.", human(field), values.join(" + ")))
            }
            Op::Month { listing, field } => {
                let counts: Vec<String> = months(records(listing)?, field)?.iter().map(|(k, n)| format!("{k} {n}")).collect();
                Some(format!("Counting the items by the month of their {}: {}.", human(field), counts.join(", ")))
            }
            Op::Most { listing, field, .. } => {
                let counts: Vec<String> = tally(records(listing)?, field).iter().map(|(k, n)| format!("{k} {n}")).collect();
                Some(format!("Counting the items by {}: {}.", human(field), counts.join(", ")))
            }
            Op::Select { listing, filter, label } => {
                let (f, v) = filter;
                let hits: Vec<String> = matching(records(listing)?, Some(filter)).filter_map(|r| named(r, label)).collect();
                let which = if f == EMPTY_FOLDER { "empty folders".to_string() } else { format!("items with {} {}", human(f), ta_synth::names::shown(v)) };
                Some(format!("The {which}: {}.", enumerate(hits)))
            }
            Op::Past { listing, field, bound, above, label } => {
                let rs = records(listing)?;
                let name = label.clone().or_else(|| label_field(rs))?;
                let each: Vec<String> = rs.iter().filter_map(|r| Some(format!("{} {}", named(r, &name)?, ta_synth::names::shown(r.get(field)?)))).collect();
                let hits = numbered(past(rs, field, *bound, *above).filter_map(|r| named(r, &name)));
                let side = if *above { "Above" } else { "Below" };
                let tail = if label.is_some() { String::new() } else { format!(" That makes {}.", hits.len()) };
                let past = format!("{side} {}: {}.{tail}", shown_number(*bound), enumerate(hits));
                let whole = each.len() <= MAX_ENUMERATED;
                let working = format!("The {} of each: {}. {past}", human(field), enumerate(each));
                Some(if whole && working.len() <= MAX_WORKING_CHARS { working } else { past })
            }
            Op::Lines => Some(format!("Counting every line of the file, blank lines included: {}.", p.line_count)),
            Op::Empty { .. } => Some("The result lists nothing: there is nothing there.".into()),
            Op::Across { .. } | Op::Then { .. } | Op::History { .. } => None,
            Op::DiffLines { added } => {
                let (sign, n) = match (added, p.diff_lines?) {
                    (true, (a, _)) => ("+", a),
                    (false, (_, r)) => ("-", r),
                };
                Some(format!("Counting the diff's lines that start with {sign} (not the {sign}{sign}{sign} file headers): {n}."))
            }
            Op::Field { .. } | Op::Lookup { .. } | Op::Exists { .. } | Op::List { .. } | Op::Heading => None,
        }
    }

    /// How many results answer it: the last steps of its reference (one, or each call an
    /// [`Op::Across`] compares, and an [`Op::Then`]'s winner's own call).
    pub fn results(&self) -> usize {
        match self {
            Op::Across { labels, .. } => labels.len(),
            Op::Then { pick, own, .. } => pick.results() + usize::from(*own),
            Op::History { labels, .. } => labels.len() + 2,
            _ => 1,
        }
    }

    /// The template name scenarios are tagged with.
    pub fn template(&self) -> &'static str {
        match self {
            Op::Field { .. } => "field",
            Op::Count { filter: None, .. } => "count",
            Op::Count { .. } => "count_where",
            Op::Lookup { .. } => "lookup",
            Op::Extreme { .. } => "extreme",
            Op::Peak { .. } => "peak",
            Op::Total { .. } => "total",
            Op::Most { .. } => "most",
            Op::Month { .. } => "month",
            Op::Exists { .. } => "exists",
            Op::List { .. } => "list",
            Op::Select { .. } => "select",
            Op::Lines => "lines",
            Op::Heading => "heading",
            Op::Empty { .. } => "empty",
            Op::DiffLines { .. } => "diff_lines",
            Op::Past { label: None, .. } => "count_past",
            Op::Past { .. } => "select_past",
            Op::Across { .. } => "across",
            Op::Then { .. } => "chained",
            Op::History { .. } => "history",
        }
    }

    /// Whether the answer is worked out from the result rather than read off it.
    pub fn derived(&self) -> bool {
        !matches!(self, Op::Field { .. } | Op::Lookup { .. } | Op::Heading)
    }

    /// Difficulty added to the chain's length.
    fn weight(&self) -> usize {
        match self {
            Op::Field { .. } | Op::Lookup { .. } | Op::Heading => 0,
            Op::Count { filter: None, .. } | Op::Exists { .. } | Op::Lines | Op::List { .. } | Op::Empty { .. } => 1,
            Op::Count { .. } | Op::Extreme { .. } | Op::Peak { .. } | Op::Most { .. } | Op::Month { .. } | Op::Select { .. } | Op::DiffLines { .. } | Op::Past { .. } => {
                2
            }
            Op::Total { .. } | Op::Across { .. } | Op::Then { .. } | Op::History { .. } => 3,
        }
    }
}

fn value_answer(v: &Value) -> Option<Expected> {
    if let Some(day) = v.as_str().and_then(iso_day) {
        return Some(Expected::Text(day));
    }
    match v {
        Value::Number(n) => n.as_f64().map(|x| if x.fract() == 0.0 { Expected::Number(x) } else { Expected::Rule(ExpectedRule::Number { number: x, tolerance: 0.01 }) }),
        Value::String(s) if !s.trim().is_empty() => Some(Expected::Text(s.clone())),
        Value::Bool(b) => Some(Expected::Rule(ExpectedRule::Exact(if *b { "yes" } else { "no" }.into()))),
        _ => None,
    }
}

const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/// A timestamp as ISO text from the start: `2024-02-01 10:00:00+00:00` as is, JavaScript's
/// `Sun Nov 10 2024 17:39:00 GMT+0000 (…)` as `2024-11-10 17:39:00`.
fn iso(s: &str) -> Option<String> {
    let b = s.as_bytes();
    // A date alone or followed by a time; `2024-03-11-standup.md` is a file's name.
    let then_time = b.len() == 10 || b.len() > 11 && matches!(b[10], b'T' | b' ') && b[11].is_ascii_digit();
    if s.len() >= 10 && b[4] == b'-' && b[7] == b'-' && s[..4].parse::<u32>().is_ok() && then_time {
        return Some(s.to_string());
    }
    let w: Vec<&str> = s.split_whitespace().collect();
    let month = MONTHS.iter().position(|m| w.get(1) == Some(m))? + 1;
    let day: u32 = w.get(2)?.parse().ok()?;
    let year: u32 = w.get(3)?.parse().ok()?;
    let time = w.get(4).filter(|t| t.len() == 8 && t.as_bytes()[2] == b':')?;
    Some(format!("{year:04}-{month:02}-{day:02} {time}"))
}

/// The day of a timestamp, as people write it in an answer: `2024-11-10`.
fn iso_day(s: &str) -> Option<String> {
    let full = iso(s)?;
    date_key(&full)?;
    Some(full[..10].to_string())
}

/// Numbers order as numbers, sizes as their bytes (`2.77 KB`), timestamps by day and time.
pub(crate) fn order_key(v: &Value) -> Option<f64> {
    if let Some(x) = v.as_f64() {
        return Some(x);
    }
    let s = v.as_str()?;
    size_bytes(s).or_else(|| date_key(s))
}

/// A timestamp's place in time, in days: what dates order by.
fn date_key(s: &str) -> Option<f64> {
    let s = iso(s)?;
    let s = s.as_str();
    // `iso` put the dashes at 4 and 7.
    let d: Vec<f64> = [0..4, 5..7, 8..10].iter().map(|r| s.get(r.clone()).and_then(|x| x.parse().ok())).collect::<Option<_>>()?;
    let rest = s.get(11..19).map(|t| t.split(':').filter_map(|x| x.parse::<f64>().ok()).fold(0.0, |acc, x| acc * 60.0 + x)).unwrap_or(0.0);
    Some((d[0] * 12.0 + d[1]) * 31.0 + d[2] + rest / 86400.0)
}

pub(crate) fn is_date(v: &Value) -> bool {
    v.as_str().and_then(date_key).is_some()
}

/// How many items' date `field` falls in each month, by its name ("March 2024"), in time order;
/// `None` when an item has no such date.
fn months(rs: &[Record], field: &str) -> Option<Vec<(String, usize)>> {
    let mut by: BTreeMap<String, usize> = BTreeMap::new();
    for r in rs {
        let day = r.get(field)?.as_str().and_then(iso_day)?;
        *by.entry(day[..7].to_string()).or_default() += 1;
    }
    by.into_iter()
        .map(|(ym, n)| {
            let (year, month): (u32, u32) = (ym[..4].parse().ok()?, ym[5..7].parse().ok()?);
            (1..=12).contains(&month).then(|| (crate::explore::month_name(year, month), n))
        })
        .collect()
}

/// The one result of `results` with the largest (or smallest) `measure`; `None` on a tie or a
/// result without it.
/// Every item of a history's `months` results, when the two results after them (before the first
/// month, after the last) hold none: the months are then all there is.
fn history<'a>(months: usize, results: &[&'a Parsed]) -> Option<Vec<&'a Record>> {
    if results.len() != months + 2 || results[months..].iter().any(|p| p.listings.iter().any(|l| !l.records.is_empty()) || !p.fields.is_empty()) {
        return None;
    }
    let mut items = Vec::new();
    for p in &results[..months] {
        match p.records("") {
            Some(rs) => items.extend(rs),
            // A month with nothing in it.
            None if p.fields.is_empty() && p.listings.is_empty() => {}
            // A lone item reads as the result's fields: not counted as one.
            None => return None,
        }
    }
    Some(items)
}

/// [`tally`] over items gathered from several results.
fn tally_of(items: &[&Record], field: &str) -> BTreeMap<String, usize> {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for v in items.iter().filter_map(|r| r.get(field)).filter_map(Value::as_str) {
        *counts.entry(v.to_string()).or_default() += 1;
    }
    counts
}

/// An [`Op::Then`]'s results split: those its comparison reads, and the winner's own (the extra
/// last one, or the winner's among the compared); `None` when the comparison no longer picks
/// `winner`.
fn then_results<'a, 'b>(pick: &Op, winner: &str, own: bool, results: &'a [&'b Parsed]) -> Option<(&'a [&'b Parsed], &'b Parsed)> {
    let Op::Across { labels, .. } = pick else { return None };
    let n = labels.len();
    if results.len() != n + usize::from(own) {
        return None;
    }
    let compared = &results[..n];
    let at = labels.iter().position(|l| l == winner)?;
    if pick.answer_all(compared)? != Expected::Text(winner.to_string()) {
        return None;
    }
    Some((compared, if own { results[n] } else { compared[at] }))
}

fn extreme_of(measure: &Measure, max: bool, results: &[&Parsed], n: usize) -> Option<usize> {
    if results.len() != n || n < 2 {
        return None;
    }
    let values: Vec<f64> = results.iter().map(|p| measure.of(p)).collect::<Option<_>>()?;
    let best = values.iter().copied().fold(if max { f64::MIN } else { f64::MAX }, |a, b| if max { a.max(b) } else { a.min(b) });
    let at: Vec<usize> = (0..n).filter(|&i| values[i] == best).collect();
    match at.as_slice() {
        [one] => Some(*one),
        _ => None,
    }
}

/// A task about one call's result, or about several ([`Op::Across`]).
#[derive(Debug, Clone)]
pub struct Task {
    /// The answering call (the last of `siblings` when there are several).
    pub call: usize,
    /// The calls an [`Op::Across`] compares, in its labels' order; empty otherwise.
    pub siblings: Vec<usize>,
    /// The call whose result names every answering call's subject (a folder's listing for the
    /// files compared across it): the reference reaches them through it alone. Each answering
    /// call's own chain is how the walk first came upon its file, a search for an unrelated word
    /// as often as not, and a model trained on such traces makes those searches for questions
    /// they have nothing to do with.
    pub via: Option<usize>,
    pub op: Op,
    pub expected: Expected,
    pub phrasings: Vec<String>,
    pub difficulty: u8,
    /// How the answer follows from the result, for an answer worked out rather than read off.
    pub explanation: Option<String>,
}

impl Task {
    /// The calls that answer it: the answering call, or each of [`Op::Across`]'s in order.
    pub fn answering(&self) -> Vec<usize> {
        if self.siblings.is_empty() { vec![self.call] } else { self.siblings.clone() }
    }

    /// The reference's calls: what the answering calls depend on (or what [`Task::via`] does),
    /// in call order, then the answering calls themselves (the last steps, as [`Op::Across`] reads them).
    pub fn steps(&self, walked: &Walked) -> Vec<usize> {
        let answering = self.answering();
        let reached: Vec<usize> = match self.via {
            Some(via) => walked.chain(via),
            None => answering.iter().flat_map(|id| walked.chain(*id)).collect(),
        };
        let mut before: Vec<usize> = reached.into_iter().filter(|id| !answering.contains(id)).collect();
        before.sort_unstable();
        before.dedup();
        before.extend(answering);
        before
    }
}

/// How a question names what a call was about.
struct Subject {
    /// "in the docs folder", "in the repository at /srv/repo".
    place: String,
    /// "the file notes/todo.md": set when the call is about one file or item.
    thing: Option<String>,
    /// Enum arguments, read as adjectives ("local" branches).
    adjectives: Vec<String>,
    /// Whether the call reads one file (its lines and title are asked about).
    file: bool,
    /// Whether the result is the file's contents whatever the tool is called (`git_show
    /// main:setup.cfg`): its fields are values in the file ("the name in the file setup.cfg on
    /// main", not "the name of" it).
    contents: bool,
    /// What a search by pattern found, for a glob argument: "Markdown files", "files with
    /// \"chili\" in their name" (anywhere below the folder searched).
    found: Option<String>,
    /// The branch whose latest commit the listed items contain (`git_branch --contains
    /// fix/pager`): whether a branch is among them says whether fix/pager was merged into it.
    merged: Option<String>,
    /// The listed items contain a commit, or do not (a membership argument): every item is
    /// asked about, not the first few.
    membership: bool,
    /// `place` without the membership: "in the repository at /srv/repo".
    home: String,
    /// Branches the question names "on main": the checked-out one a log without a revision
    /// was read on, a branch given as a revision ("the latest commit on fix/pager"), the branch
    /// of a file as it has it ("the file setup.cfg on main").
    branches: Vec<String>,
}

fn relative<'a>(path: &'a str, roots: &[String]) -> Option<&'a str> {
    roots.iter().filter_map(|r| path.strip_prefix(r.as_str())).map(|rest| rest.trim_start_matches('/')).min_by_key(|rest| rest.len())
}

/// How a question names a folder below the top. Every other call names it by its path ("the
/// projects/weather-station/src folder"); the rest as people do, by its own name, with its
/// parent's where another folder seen has that name ("the budget-tracker folder", "the src
/// folder of weather-station"), so that the model learns to find a folder it is not given.
fn folder_named(rel: &str, walked: &Walked, id: usize) -> String {
    let Some((parent, leaf)) = rel.rsplit_once('/').filter(|_| id % 2 == 1) else { return format!("the {rel} folder") };
    let folders: HashSet<&str> = walked
        .calls
        .iter()
        .flat_map(|c| c.args.values())
        .filter_map(Value::as_str)
        .filter_map(|v| relative(v, &walked.roots))
        .filter(|r| std::path::Path::new(r).extension().is_none())
        .collect();
    let shared = folders.iter().any(|f| *f != rel && f.rsplit('/').next() == Some(leaf));
    if shared { format!("the {leaf} folder of {}", parent.rsplit('/').next().unwrap_or(parent)) } else { format!("the {leaf} folder") }
}

fn subject(call: &Call, walked: &Walked) -> Subject {
    let mut places = Vec::new();
    let mut thing = None;
    let mut adjectives = Vec::new();
    let mut file = false;
    let mut found = None;
    let (mut merged, mut membership, mut within) = (None, false, None);
    let mut contents = false;
    let mut branches = Vec::new();
    for ((name, value), (_, origin)) in call.args.iter().zip(&call.origins) {
        let pw = words(name);
        let one = value.as_array().is_none();
        let Some(v) = value.as_str().or_else(|| value.as_array().and_then(|a| a.first()).and_then(Value::as_str)) else { continue };
        // "containing the commit 'Add search'", "not containing the latest commit on fix/pager".
        if let Some(negated) = crate::explore::membership(name) {
            within = Some(format!("{} {}", if negated { "not containing" } else { "containing" }, origin.phrase));
            membership = true;
            if !negated && !is_hex_id(v) {
                merged = Some(v.to_string());
            }
            continue;
        }
        if let Some(w) = glob_word(v) {
            // A search by name finds folders too (`**/*notes*` finds `notes/`); a match without
            // an extension is taken for one.
            let folders = call.parsed.listings.iter().flat_map(|l| &l.records).any(|r| r.get("name").and_then(Value::as_str).and_then(extension_of).is_none());
            found = Some(format!("{} with \"{w}\" in their name", if folders { "files and folders" } else { "files" }));
            continue;
        }
        if let Some(e) = glob_extension(v) {
            found = Some(files_of(e).0);
            continue;
        }
        // A window of time: `explore::month_window` names it "in January 2024".
        if origin.call.is_none() && origin.phrase.starts_with("in ") && origin.phrase != v {
            if !places.contains(&origin.phrase) {
                places.push(origin.phrase.clone());
            }
            continue;
        }
        // A file as a branch has it (`main:setup.cfg`).
        if origin.call.is_some() && v.contains(':') && pw.iter().any(|w| REVISION_WORDS.contains(&w.as_str())) {
            branches.extend(v.split_once(':').map(|(b, _)| b.to_string()).filter(|b| !is_hex_id(b)));
            thing = Some(origin.phrase.clone());
            file = one;
            contents = one;
            continue;
        }
        // A branch's name given as a revision: its latest commit.
        if origin.call.is_some() && !is_hex_id(v) && !v.starts_with('/') && pw.iter().any(|w| REVISION_WORDS.contains(&w.as_str())) {
            thing = Some(format!("the latest commit on {v}"));
            branches.push(v.to_string());
            continue;
        }
        if origin.call.is_none() && origin.phrase == v && !v.starts_with('/') {
            if !["all", "any", "both", "every", "everything"].contains(&v) {
                adjectives.push(v.to_string());
            }
            continue;
        }
        if v.starts_with('/') {
            let is_file = std::path::Path::new(v).extension().is_some() || pw.iter().any(|w| w == "file");
            match relative(v, &walked.roots) {
                // The folder the server serves, as people name it on every other call: the
                // workspace ("How many Markdown files are there anywhere in the workspace?").
                Some("") => places.push(if call.id % 2 == 1 { "in the workspace" } else { "in the top folder" }.to_string()),
                Some(rel) if is_file => {
                    file = one;
                    // A file a search found by a word is named by that word ("the chili file").
                    let by_word = origin.call.is_some() && !origin.phrase.starts_with('/');
                    thing = Some(if by_word { origin.phrase.clone() } else { format!("the file {rel}") });
                }
                Some(rel) => places.push(format!("in {}", folder_named(rel, walked, call.id))),
                None => {
                    let noun: Vec<String> = pw.into_iter().filter(|w| w != "path").collect();
                    let noun = if noun.is_empty() { "folder".to_string() } else { noun.join(" ") };
                    places.push(format!("in the {noun} at {v}"));
                }
            }
        } else if origin.phrase != v {
            thing = Some(origin.phrase.clone());
        } else if call.parsed.listings.iter().any(|l| l.key == CHANGED_FILES) {
            // A diff against a branch (`git_diff target=fix/pager`): what differs between the
            // files as they are now and that branch, not what the branch changed.
            places.push(format!("between the working tree and {v}"));
        } else {
            places.push(format!("for {v}"));
        }
    }
    // A log read without a revision is the checked-out branch's history: people name the branch
    // ("How many commits are there on main in the repository at …?").
    let revision = call.args.keys().any(|k| words(k).iter().any(|w| REVISION_WORDS.contains(&w.as_str())));
    if let Some(branch) = walked.checked_out.clone().filter(|_| !revision && words(&call.tool).iter().any(|w| w == "log")) {
        places.insert(0, format!("on {branch}"));
        branches.push(branch);
    }
    let home = places.join(" ");
    let place = match within {
        Some(w) => sentence(&[&home, &w]),
        None => home.clone(),
    };
    Subject { place, thing, adjectives, file, contents, found, merged, membership, home, branches }
}

/// A listing of a folder holds only what sits directly in it, and people say so when the folder
/// has folders of its own ("the settings.json file at the top of my workspace", "files directly
/// inside notes/2024, not counting the ones in its subfolders"): unsaid, "in my workspace" or
/// "in my travel folder" means anywhere in it, as a tree or a search of it is asked ("How many
/// JSON files are there in my workspace?" was answered from the top folder's listing alone).
/// The served folder's own listing is its top whatever it holds.
pub(crate) fn directly(place: &str, holds_folders: bool) -> String {
    for (root, top) in [("in the workspace", "at the top of the workspace"), ("in the top folder", "directly in the top folder")] {
        if let Some(rest) = place.strip_prefix(root) {
            return format!("{top}{rest}");
        }
    }
    if holds_folders && place.starts_with("in the ") { format!("directly {place}") } else { place.to_string() }
}

/// The noun for a list's items: its key, the id field's name, the entries' tags, or the tool.
/// How questions name the place a call was about ("in the docs folder in January 2024").
pub(crate) fn place_of(call: &Call, walked: &Walked) -> String {
    subject(call, walked).place
}

/// How questions name the one thing a call was about ("the file notes/ideas.md", "the pancakes
/// file"), if it was about one.
pub(crate) fn thing_of(call: &Call, walked: &Walked) -> Option<String> {
    subject(call, walked).thing
}

pub(crate) fn item_noun(call: &Call, listing: &Listing) -> String {
    if is_text_list(&listing.key) {
        // "to-do items" → "to-do item", keeping the hyphen `singular` would split on.
        return listing.key.trim_end_matches('s').to_string();
    }
    if !listing.key.is_empty() {
        return singular(&listing.key);
    }
    let first = &listing.records[0];
    if entry_kind(first).is_some() {
        // A folder of files only holds "files": "Which file in the recipes folder is the
        // smallest?", as people ask it, not "the smallest item".
        let all = |kind| listing.records.iter().all(|r| entry_kind(r) == Some(kind));
        return if all(Kind::File) {
            "file"
        } else if all(Kind::Dir) {
            "folder"
        } else {
            "item"
        }
        .into();
    }
    if let Some((k, _)) = first.iter().find(|(_, v)| v.as_str().is_some_and(is_hex_id)) {
        return singular(&human(k));
    }
    // The lines of a file read as a list are its entries (a shopping list's), not "text files"
    // or "multiple files" after what the tool reads.
    if reads_contents(&call.tool) {
        return "entry".into();
    }
    let verbs = ["git", "list", "get", "show", "search", "fetch", "find", "all"];
    let w: Vec<String> = words(&call.tool).into_iter().filter(|w| !verbs.contains(&w.as_str())).collect();
    if w.is_empty() { "item".into() } else { singular(&w.join(" ")) }
}

/// Extensions of program source, whose lines are code rather than settings.
const CODE_EXTENSIONS: &[&str] =
    &["py", "js", "ts", "jsx", "tsx", "rs", "go", "java", "kt", "c", "h", "cpp", "cc", "cs", "rb", "php", "sh", "swift", "scala", "lua", "pl"];

/// Whether a path names a program's source file (`src/report.py`, `main:src/pager.py`).
fn is_code(path: &str) -> bool {
    extension_of(path).is_some_and(|e| CODE_EXTENSIONS.contains(&e.as_str()))
}

/// Whether a tool's name says it returns what a file holds (`read_file`, `view_contents`).
fn reads_contents(tool: &str) -> bool {
    words(tool).iter().any(|w| ["read", "open", "cat", "content", "contents", "view"].contains(&w.as_str()))
}

/// Whether a bullet point is an item (an ingredient, a title, a chore) rather than a sentence.
fn few_words(text: &str) -> bool {
    text.split_whitespace().count() <= 6
}

/// The noun an entry tag stands for: "file" → "file", "dir" → "folder".
fn tag_noun(tag: &str) -> String {
    match tag {
        "dir" | "directory" => "folder".into(),
        t => human(t),
    }
}

/// What people call the files of a well-known extension: "Markdown files", not ".md files".
const FILE_KINDS: &[(&str, &str)] = &[
    ("md", "Markdown"),
    ("py", "Python"),
    ("json", "JSON"),
    ("csv", "CSV"),
    ("txt", "text"),
    ("js", "JavaScript"),
    ("ts", "TypeScript"),
    ("rs", "Rust"),
    ("html", "HTML"),
    ("yml", "YAML"),
    ("yaml", "YAML"),
    ("toml", "TOML"),
    ("pdf", "PDF"),
    ("sh", "shell script"),
];

/// The files of extension `ext` as people say it ("Markdown files"), and as the extension
/// (".md files"); the same twice for an extension without a common name.
fn files_of(ext: &str) -> (String, String) {
    let dotted = format!(".{ext} files");
    let named = FILE_KINDS.iter().find(|(e, _)| e.eq_ignore_ascii_case(ext)).map_or_else(|| dotted.clone(), |(_, kind)| format!("{kind} files"));
    (named, dotted)
}

const PERSON_WORDS: &[&str] = &["author", "owner", "creator", "user", "assignee", "committer", "reporter", "by"];
const TAG_WORDS: &[&str] = &["kind", "type", "category", "status", "state", "entity"];

/// Words in a field's name that say its value is a secret.
const SECRET_FIELD_WORDS: &[&str] =
    &["token", "secret", "password", "passwd", "pwd", "apikey", "credential", "credentials", "cookie", "bearer", "signature", "auth", "session"];

/// Whether a field may be asked about: not a secret (a key, a token), not a bare preposition
/// ("the to of the relation" asks nothing a person would).
pub(crate) fn askable(field: &str) -> bool {
    let w = words(field);
    let preposition = w.len() == 1 && ["to", "from", "of", "in", "at", "by", "on"].contains(&w[0].as_str());
    // Whole words, not fragments: "author" holds "auth" and is no secret.
    let secret = w.iter().any(|x| SECRET_FIELD_WORDS.contains(&x.as_str())) || w.windows(2).any(|p| p[0] == "api" && p[1] == "key");
    !(secret || preposition || field == TOP_FOLDER)
}

/// Whether a numeric field counts or names rather than measures (an id, a year, a number):
/// adding it up asks nothing.
fn is_id_like(field: &str) -> bool {
    words(field)
        .iter()
        .any(|w| ["id", "year", "number", "no", "num", "index", "rank", "permissions", "mode", "lat", "latitude", "lon", "longitude"].contains(&w.as_str()))
}

pub(crate) fn is_person(field: &str) -> bool {
    words(field).iter().any(|w| PERSON_WORDS.contains(&w.as_str()))
}

fn is_tag(field: &str) -> bool {
    words(field).iter().any(|w| TAG_WORDS.contains(&w.as_str()))
}

/// A name as a question quotes it: in quotes when it has spaces or dots.
pub(crate) fn quoted(v: &str) -> String {
    if v.contains(' ') || v.contains('.') { format!("\"{v}\"") } else { v.to_string() }
}

pub(crate) fn sentence(parts: &[&str]) -> String {
    let s = parts.iter().filter(|p| !p.is_empty()).copied().collect::<Vec<_>>().join(" ");
    match s.strip_suffix(" ?").or_else(|| s.strip_suffix(" .")) {
        Some(head) => format!("{head}{}", &s[s.len() - 1..]),
        None => s,
    }
}

/// "What is the size of X?", "When was X modified?", "What are the permissions of X?", "Who is
/// the author of X?", best first.
fn what_is(f: &str, v: &Value, thing: &str, place: &str) -> Vec<String> {
    let last = f.rsplit(' ').next().unwrap_or(f);
    let mut frames = Vec::new();
    if let Some(who) = f.strip_suffix(" email").filter(|w| is_person(w)) {
        // "author email": the address a person used.
        return vec![
            sentence(&["What email address does the", who, "of", thing, "use", place, "?"]),
            sentence(&["What is the email address of the", who, "of", thing, place, "?"]),
        ];
    }
    if is_person(f) {
        frames.push(sentence(&["Who is the", f, "of", thing, place, "?"]));
    } else if last.ends_with("ed") && !f.contains(' ') {
        // "modified", "created": a when, never "the modified of".
        return vec![sentence(&["When was", thing, place, f, "?"]), sentence(&["On what day was", thing, place, f, "?"])];
    } else if is_date(v) {
        frames.push(sentence(&["When was", thing, place, "made?"]));
    } else if f == "size" {
        // "in bytes" only where the answer is bytes, not a rounded `2.77 KB`.
        frames.push(sentence(&["How big is", thing, place, if v.is_number() { "in bytes?" } else { "?" }]));
    } else if is_tag(f) {
        frames.push(sentence(&["What", f, "is", thing, place, "?"]));
    }
    let verb = if last.ends_with('s') && !last.ends_with("ss") { "What are the" } else { "What is the" };
    frames.push(sentence(&[verb, f, "of", thing, place, "?"]));
    frames.push(sentence(&["Tell me the", f, "of", thing, place, "."]));
    frames
}

/// Every task the walk's results offer.
pub fn tasks(walked: &Walked, seed: u64) -> Vec<Task> {
    let mut out = Vec::new();
    // Names seen in each kind of list, for questions whose answer is "no".
    let mut elsewhere: HashMap<String, Vec<Value>> = HashMap::new();
    for c in walked.calls.iter().filter(|c| !c.is_error) {
        for l in &c.parsed.listings {
            if let Some(label) = label_field(&l.records) {
                elsewhere.entry(format!("{}/{}/{label}", c.tool, l.key)).or_default().extend(l.records.iter().filter_map(|r| r.get(&label).cloned()));
            }
        }
    }
    let mut asked: HashSet<String> = HashSet::new();
    // One question per field of one thing, whichever call answers it first ("the author of the
    // commit X" from the log, not again from `show` with the e-mail address added).
    let mut about: HashSet<(String, String)> = HashSet::new();
    for c in walked.calls.iter().filter(|c| !c.is_error) {
        let unstable = walked.unstable.get(&c.tool).cloned().unwrap_or_default();
        let mut s = subject(c, walked);
        if s.thing.is_none() && c.parsed.listings.is_empty() && !s.adjectives.is_empty() {
            // A result chosen by enum arguments only ("the weather for New York").
            s.thing = Some(s.adjectives.join(" "));
        }
        let chain = walked.chain(c.id).len();
        // Places people say two ways, the second in every other phrasing (and question): the checked-out
        // branch ("on main", "on the main branch"), and the whole workspace ("in my workspace"
        // is all of it, as the top folder's own listing is "at the top of the workspace").
        let mut alternates = vec![(WHOLE_WORKSPACE.to_string(), "in the workspace".to_string())];
        for b in &s.branches {
            alternates.push((format!("on {b} "), format!("on the {b} branch ")));
        }
        let mut push = |op: Op, frames: Vec<String>| {
            let Some(expected) = op.answer(&c.parsed) else { return };
            let frames = frames
                .into_iter()
                .enumerate()
                .map(|(i, f)| if (out.len() + i) % 2 == 1 { alternates.iter().fold(f, |f, (one, other)| f.replacen(one.as_str(), other, 1)) } else { f })
                .collect::<Vec<_>>();
            // The server's own folders are found by asking it, never spelled out.
            let spelled = serde_json::to_string(&expected).unwrap_or_default();
            if walked.roots.iter().any(|r| spelled.contains(r.as_str()) || frames.iter().any(|f| f.contains(r.as_str()))) {
                return;
            }
            let mut frames: Vec<String> = frames.into_iter().filter(|f| asked.insert(ta_synth::normalize(f))).collect();
            if frames.is_empty() {
                return;
            }
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ (c.id as u64) << 16 ^ out.len() as u64);
            frames[1..].shuffle(&mut rng);
            frames.truncate(3);
            let difficulty = (chain + op.weight()).clamp(1, 5) as u8;
            let explanation = op.explain(&c.parsed);
            out.push(Task { call: c.id, siblings: Vec::new(), via: None, op, expected, phrasings: frames, difficulty, explanation });
        };
        let adj = s.adjectives.join(" ");
        let place = s.place.as_str();
        // A listing tool that showed nothing about a folder: "Is there anything in the
        // travel/iceland folder?" is a "no" people ask ("Did I put anything in it yet?").
        let lists = words(&c.tool).iter().any(|w| ["list", "tree"].contains(&w.as_str()));
        let blank = matches!(c.text.trim(), "" | "[]" | "{}");
        if lists && blank && s.thing.is_none() && place.starts_with("in the ") {
            let folder = place.trim_start_matches("in ");
            push(
                Op::Empty { count: false },
                vec![sentence(&["Is there anything", place, "?"]), sentence(&["Does", folder, "hold anything?"]), sentence(&["Has anything been put", place, "yet?"])],
            );
            push(Op::Empty { count: true }, vec![sentence(&["How many items are there", place, "?"]), sentence(&["Count the items", place, "."])]);
        }
        // Fields of a single result: "What is the size of the file notes/todo.md?"
        // A commit shown with the files it changed has fields too (its author, date, message).
        let only_changes = c.parsed.listings.iter().all(|l| l.key == CHANGED_FILES || is_text_list(&l.key));
        // A program's text is code, not `key: value` settings: `t = totals(path)` has no "t"
        // to ask about.
        let in_file = s.file && (reads_contents(&c.tool) || s.contents);
        let code = in_file && c.args.values().filter_map(Value::as_str).any(is_code);
        if only_changes
            && !code
            && let Some(thing) = &s.thing
        {
            for (k, v) in &c.parsed.fields {
                if unstable.contains(k) || !askable(k) || v.is_null() || v.is_boolean() || v.as_str().is_some_and(|x| x.len() > 80 || thing.contains(x)) {
                    continue;
                }
                let f = human(k);
                if !about.insert((thing.clone(), f.to_lowercase())) {
                    continue;
                }
                let mut frames = what_is(&f, v, thing, place);
                if in_file {
                    // A value inside a file's contents: "the currency in the file config.json".
                    frames = vec![sentence(&["What is the", &f, "in", thing, place, "?"]), sentence(&["Look up the", &f, "in", thing, place, "."])];
                }
                push(Op::Field { field: k.clone() }, frames);
            }
        }
        // A commit shown with its diff: the lines it added and removed.
        if c.parsed.fields.contains_key(MESSAGE)
            && !c.cut
            && let Some(thing) = &s.thing
        {
            for (added, verb) in [(true, "add"), (false, "remove")] {
                let done = if added { "added" } else { "removed" };
                push(
                    Op::DiffLines { added },
                    vec![sentence(&["How many lines did", thing, verb, place, "?"]), sentence(&["How many lines were", done, "in", thing, place, "?"])],
                );
            }
        }
        if c.parsed.listings.iter().all(|l| is_text_list(&l.key)) {
            // File contents: lines and title (and below, its bullet points).
            // Base64 dumped as text, or a blob the client summarized (`[resource: …, 1587
            // bytes]`): no lines or title of the file's own.
            let binary = c.text.split_whitespace().any(|w| w.len() > 200) || c.text.lines().all(ta_mcp::content::is_summary);
            if !unstable.contains(LINES)
                && s.file
                && !c.cut
                && !binary
                && let Some(thing) = &s.thing
                && !c.parsed.lines.is_empty()
            {
                push(Op::Lines, vec![sentence(&["How many lines does", thing, place, "have?"]), sentence(&["Count the lines of", thing, place, "."])]);
                push(Op::Heading, vec![sentence(&["What is the title of", thing, place, "?"]), sentence(&["What heading does", thing, place, "start with?"])]);
            }
        }
        for l in &c.parsed.listings {
            let rs = &l.records;
            if rs.is_empty() {
                continue;
            }
            let noun = item_noun(c, l);
            let items = s.found.clone().unwrap_or_else(|| plural_of(&sentence(&[&adj, &noun])));
            // Whether the model sees the whole list: not cut by a limit left at its default, nor
            // by the length of result it is shown. Counts, extremes, lists and "no" need it.
            let whole = !c.maybe_cut && !c.cut;
            // A flattened tree holds the items of every folder below: "anywhere in".
            // So does a search by pattern.
            let tree = s.found.is_some() || rs.iter().any(|r| r.get("path").and_then(Value::as_str).is_some_and(|p| p.contains('/')));
            let tree_or_entries = tree || entry_kind(&rs[0]).is_some();
            let direct = if tree { place.to_string() } else { directly(place, rs.iter().any(|r| entry_kind(r) == Some(Kind::Dir))) };
            let place = direct.as_str();
            let whole_place = match (&s.thing, tree) {
                (Some(t), _) => format!("in {t} {place}").trim().to_string(),
                (None, true) => match place.strip_prefix("in the workspace") {
                    Some(rest) => format!("{WHOLE_WORKSPACE}{rest}"),
                    // A folder's listing says "directly in", so "in the travel folder" alone is
                    // anywhere in it, as people mean it; half the trees say "anywhere" too.
                    None if c.id % 2 == 1 && !place.starts_with("in the top folder") => place.to_string(),
                    None => format!("anywhere {place}").trim().to_string(),
                },
                (None, false) => place.to_string(),
            };
            let wp = whole_place.as_str();
            // A search's results are bare paths, named by them.
            let label = if tree && rs[0].contains_key("path") { Some("path".to_string()) } else { label_field(rs) }.filter(|k| !unstable.contains(k));
            let stable = |k: &String| !unstable.contains(k);
            // What a commit changed, as people ask it.
            let changed = match (&s.thing, l.key == CHANGED_FILES) {
                (Some(t), true) => Some(t.as_str()),
                _ => None,
            };
            if whole {
                let frames = match changed {
                    Some(t) => vec![sentence(&["How many files did", t, "change", place, "?"]), sentence(&["How many files were changed in", t, place, "?"])],
                    None => vec![
                        sentence(&["How many", &items, "are there", wp, "?"]),
                        sentence(&["Count the", &items, wp, "."]),
                        sentence(&["What's the number of", &items, wp, "?"]),
                    ],
                };
                push(Op::Count { listing: l.key.clone(), filter: None }, frames);
            }
            // Folders with nothing in them anywhere below: "How many empty folders are there
            // anywhere in the projects folder?" (a tree's folder with no children).
            let empty = (EMPTY_FOLDER.to_string(), Value::from(0));
            if whole && tree && rs.iter().any(|r| entry_kind(r) == Some(Kind::Dir) && r.get(EMPTY_FOLDER) == Some(&empty.1)) {
                push(
                    Op::Count { listing: l.key.clone(), filter: Some(empty.clone()) },
                    vec![sentence(&["How many empty folders are there", wp, "?"]), sentence(&["Count the folders", wp, "with nothing in them."])],
                );
                if let Some(label) = &label {
                    push(
                        Op::Select { listing: l.key.clone(), filter: empty, label: label.clone() },
                        vec![sentence(&["Which folders", wp, "are empty?"]), sentence(&["List the empty folders", wp, "."])],
                    );
                }
            }
            // The folder holding the most files, its own subfolders counted: "Which folder in
            // the projects folder has the most files, counting its subfolders?"
            if whole && tree && s.thing.is_none() {
                push(
                    Op::Most { listing: l.key.clone(), field: TOP_FOLDER.into(), max: true },
                    vec![
                        sentence(&["Which folder", place, "has the most files, counting its subfolders?"]),
                        sentence(&["Which folder", place, "holds the most files anywhere in it?"]),
                    ],
                );
            }
            // Fields with a few values shared by several items: tags, people, states.
            // Every item's fields, not the first's alone: a tree that starts with a folder has
            // files with extensions further down.
            let mut keys: Vec<String> = Vec::new();
            for k in rs.iter().flat_map(|r| r.keys()).filter(|k| stable(k) && askable(k) && Some(*k) != label.as_ref()) {
                if !keys.contains(k) {
                    keys.push(k.clone());
                }
            }
            // A text's bullet points are read back (listed, selected) only when they are short
            // (ingredients, titles, chores), not when they are sentences, which no one asks for.
            let text_list = is_text_list(&l.key);
            let short = !text_list || rs.iter().all(|r| r.get("name").and_then(Value::as_str).is_some_and(few_words));
            for k in &keys {
                let values: Vec<&str> = rs.iter().filter_map(|r| r.get(k)).filter_map(Value::as_str).collect();
                let distinct: HashSet<&str> = values.iter().copied().collect();
                let every = values.len() == rs.len() || k == EXTENSION;
                let categorical = every && values.len() >= 3 && distinct.len() >= 2 && distinct.len() <= 8.min(rs.len() - 1) && distinct.iter().all(|v| v.len() <= 40);
                if !categorical || !whole {
                    continue;
                }
                let f = human(k);
                if tree_or_entries && is_tag(k) || k == EXTENSION || k == TICKED {
                    // "What type do most items have?" asks nothing a person would.
                } else if is_person(k) {
                    push(
                        Op::Most { listing: l.key.clone(), field: k.clone(), max: true },
                        vec![sentence(&["Who has the most", &items, wp, "?"]), sentence(&["Which", &f, "has the most", &items, wp, "?"])],
                    );
                    push(
                        Op::Most { listing: l.key.clone(), field: k.clone(), max: false },
                        vec![sentence(&["Who has the fewest", &items, wp, "?"]), sentence(&["Which", &f, "has the fewest", &items, wp, "?"])],
                    );
                } else {
                    push(
                        Op::Most { listing: l.key.clone(), field: k.clone(), max: true },
                        vec![sentence(&["Which", &f, "is the most common among the", &items, wp, "?"]), sentence(&["What", &f, "do most", &items, wp, "have?"])],
                    );
                }
                let mut distinct: Vec<&str> = distinct.into_iter().collect();
                distinct.sort_unstable();
                for v in distinct {
                    let val = Value::String(v.to_string());
                    let (count_frames, select_frames) = if k == TICKED {
                        let (done, state) = if v == "ticked" { ("are ticked off?", "ticked") } else { ("are not ticked off yet?", "unticked") };
                        (
                            vec![sentence(&["How many", &items, wp, done]), sentence(&["How many", state, &items, "are there", wp, "?"])],
                            vec![sentence(&["Which", &items, wp, done]), sentence(&["List the", state, &items, wp, "."])],
                        )
                    } else if k == EXTENSION {
                        let (named, dotted) = files_of(v);
                        (
                            vec![sentence(&["How many", &named, "are there", wp, "?"]), sentence(&["Count the", &dotted, wp, "."])],
                            vec![sentence(&["Which", &named, "are there", wp, "?"]), sentence(&["List the", &dotted, wp, "."])],
                        )
                    } else if k == "kind" || entry_kind(&rs[0]).is_some() && is_tag(k) {
                        let these = plural(&tag_noun(v));
                        (
                            vec![sentence(&["How many", &these, "are", wp, "?"]), sentence(&["Count the", &these, wp, "."])],
                            vec![sentence(&["Which", &these, "are", wp, "?"]), sentence(&["List the", &these, wp, "."])],
                        )
                    } else if is_person(k) {
                        (
                            vec![sentence(&["How many", &items, "did", v, "make", wp, "?"]), sentence(&["How many", &items, wp, "are by", v, "?"])],
                            vec![sentence(&["Which", &items, "did", v, "make", wp, "?"]), sentence(&["List the", &items, "by", v, wp, "."])],
                        )
                    } else if is_tag(k) {
                        (
                            vec![sentence(&["How many", v, &items, "are there", wp, "?"]), sentence(&["Count the", v, &items, wp, "."])],
                            vec![sentence(&["Which", &items, wp, "are", &with_article(v), "?"]), sentence(&["List the", v, &items, wp, "."])],
                        )
                    } else {
                        (vec![sentence(&["How many", &items, wp, "have", &f, &quoted(v), "?"])], vec![sentence(&["Which", &items, wp, "have", &f, &quoted(v), "?"])])
                    };
                    push(Op::Count { listing: l.key.clone(), filter: Some((k.clone(), val.clone())) }, count_frames);
                    if let Some(label) = label.as_ref().filter(|_| short) {
                        push(Op::Select { listing: l.key.clone(), filter: (k.clone(), val), label: label.clone() }, select_frames);
                    }
                }
            }
            let Some(label) = label else { continue };
            let one = singular(&items);
            let list_frames = match changed {
                Some(t) => vec![sentence(&["Which files did", t, "change", place, "?"]), sentence(&["List the files changed in", t, place, "."])],
                None => vec![sentence(&["List the", &items, wp, "."]), sentence(&["Which", &items, "are there", wp, "?"]), sentence(&["What are the", &items, wp, "?"])],
            };
            if whole && short {
                // A search's paths are absolute: listed inside the folder searched.
                let folder = c.args.values().filter_map(Value::as_str).find(|v| v.starts_with('/'));
                let under =
                    folder.filter(|f| rs.iter().all(|r| r.get(&label).and_then(Value::as_str).is_some_and(|p| p.starts_with(&format!("{f}/"))))).map(String::from);
                push(Op::List { listing: l.key.clone(), label: label.clone(), under }, list_frames);
            }
            // The item the list marks as the current one: "Which branch is checked out?"
            if l.key.is_empty() && !s.membership && c.parsed.fields.contains_key(CURRENT) {
                let bare = singular(&noun);
                push(
                    Op::Field { field: CURRENT.into() },
                    vec![sentence(&["Which", &bare, "is checked out", &s.home, "?"]), sentence(&["What is the current", &bare, &s.home, "?"])],
                );
            }
            // Extremes over numbers and dates.
            if whole {
                for k in &keys {
                    let all_ordered = rs.iter().all(|r| r.get(k).and_then(order_key).is_some());
                    // A listing with sizes shows none for its folders: its files are compared
                    // ("Which file directly in the notes folder is the biggest?" in one call,
                    // not a call per file).
                    let sized_files = rs.iter().all(|r| match entry_kind(r) {
                        Some(Kind::Dir) => !r.contains_key(k),
                        Some(Kind::File) => r.get(k).and_then(order_key).is_some(),
                        _ => false,
                    }) && rs.iter().filter(|r| entry_kind(r) == Some(Kind::File)).count() >= 2;
                    if !all_ordered && !sized_files {
                        continue;
                    }
                    let one = if all_ordered { one.clone() } else { "file".to_string() };
                    let date = rs.iter().all(|r| r.get(k).is_some_and(is_date));
                    let f = human(k);
                    for max in [true, false] {
                        let frames = if date && l.key == ROWS {
                            let a = if max { "latest" } else { "earliest" };
                            vec![sentence(&["Which", &one, wp, "has the", a, &f, "?"])]
                        } else if date {
                            let (adj1, adj2) = if max { ("most recent", "latest") } else { ("oldest", "earliest") };
                            vec![sentence(&["Which is the", adj1, &one, wp, "?"]), sentence(&["What is the", adj2, &one, wp, "?"])]
                        } else if k == "size" {
                            let (a, b) = if max { ("largest", "biggest") } else { ("smallest", "smallest") };
                            vec![sentence(&["What is the", a, &one, wp, "?"]), sentence(&["Which", &one, wp, "is the", b, "?"])]
                        } else {
                            let a = if max { "highest" } else { "lowest" };
                            vec![sentence(&["Which", &one, wp, "has the", a, &f, "?"])]
                        };
                        push(Op::Extreme { listing: l.key.clone(), field: k.clone(), max, label: label.clone() }, frames);
                        // Another cell of that row: "What is the family of the row with the
                        // highest days to harvest in the plants file?" (a lookup by extreme).
                        if l.key == ROWS && !date {
                            let a = if max { "highest" } else { "lowest" };
                            let texts = keys.iter().filter(|g| *g != k && rs.iter().all(|r| r.get(*g).and_then(Value::as_str).is_some_and(|v| date_key(v).is_none())));
                            for g in texts {
                                let frames = vec![sentence(&["What is the", &human(g), "of the", &one, "with the", a, &f, wp, "?"])];
                                push(Op::Extreme { listing: l.key.clone(), field: k.clone(), max, label: g.clone() }, frames);
                            }
                        }
                        // The value itself: "What was the highest temperature?"
                        let (a, b) = match (date, max) {
                            (true, true) => ("latest", "most recent"),
                            (true, false) => ("earliest", "first"),
                            (false, true) => ("highest", "largest"),
                            (false, false) => ("lowest", "smallest"),
                        };
                        let peak = if k == "size" {
                            let unit = if rs.iter().filter_map(|r| r.get(k)).all(Value::is_number) { "in bytes?" } else { "?" };
                            vec![sentence(&["How big is the", if max { "largest" } else { "smallest" }, &one, wp, unit])]
                        } else {
                            vec![sentence(&["What is the", a, &f, wp, "?"]), sentence(&["What's the", b, &f, "among the", &items, wp, "?"])]
                        };
                        push(Op::Peak { listing: l.key.clone(), field: k.clone(), max }, peak);
                    }
                    // The busiest month of a list of dated items, from the one list.
                    if date && l.key != ROWS {
                        push(
                            Op::Month { listing: l.key.clone(), field: k.clone() },
                            vec![sentence(&["Which month had the most", &items, wp, "?"]), sentence(&["In which month were the most", &items, "made", wp, "?"])],
                        );
                    }
                    // Totals of amounts that vary (not dates, not ids): "the total amount".
                    let numbers: Vec<f64> = rs.iter().filter_map(|r| r.get(k).and_then(Value::as_f64)).collect();
                    let varied = numbers.iter().any(|x| *x != numbers[0]);
                    if !date && varied && numbers.len() == rs.len() && rs.len() <= MAX_ENUMERATED && !is_id_like(k) {
                        let frames = vec![sentence(&["What is the total", &f, wp, "?"]), sentence(&["Add up the", &f, "of the", &items, wp, "."])];
                        push(Op::Total { listing: l.key.clone(), field: k.clone() }, frames);
                    }
                }
            }
            // Thresholds: "Which files in the src folder are larger than 500 bytes?", "How many
            // rows in the readings file have temperature above 15?"
            if whole {
                for k in &keys {
                    let Some((bound, above_n)) = threshold(rs, k, seed ^ (c.id as u64) << 8) else { continue };
                    let t = shown_number(bound);
                    let files = rs.iter().filter(|r| r.get(k).is_some()).all(|r| entry_kind(r) == Some(Kind::File));
                    let things = if k == "size" && files { "files".to_string() } else { items.clone() };
                    let f = human(k);
                    for above in [true, false] {
                        let n = if above { above_n } else { rs.iter().filter(|r| r.get(k).and_then(order_key).is_some()).count() - above_n };
                        let (count_frames, select_frames) = if k == "size" {
                            let (a, b) = if above { ("larger than", "bigger than") } else { ("smaller than", "under") };
                            (
                                vec![sentence(&["How many", &things, wp, "are", a, &t, "bytes?"]), sentence(&["Count the", &things, wp, b, &t, "bytes."])],
                                vec![sentence(&["Which", &things, wp, "are", a, &t, "bytes?"]), sentence(&["List the", &things, wp, b, &t, "bytes."])],
                            )
                        } else {
                            let (a, b) = if above { ("above", "over") } else { ("below", "under") };
                            (
                                vec![sentence(&["How many", &things, wp, "have", &f, a, &t, "?"]), sentence(&["Count the", &things, wp, "whose", &f, "is", b, &t, "."])],
                                vec![sentence(&["Which", &things, wp, "have", &f, a, &t, "?"]), sentence(&["List the", &things, wp, "whose", &f, "is", b, &t, "."])],
                            )
                        };
                        push(Op::Past { listing: l.key.clone(), field: k.clone(), bound, above, label: None }, count_frames);
                        if short && n <= MAX_SELECT {
                            push(Op::Past { listing: l.key.clone(), field: k.clone(), bound, above, label: Some(label.clone()) }, select_frames);
                        }
                    }
                }
            }
            // Lookups of one item by its label.
            let mut rows: Vec<&Record> = rs.iter().collect();
            rows.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ c.id as u64));
            for r in rows.into_iter().take(LOOKUPS_PER_LIST) {
                let Some(name) = r.get(&label).and_then(Value::as_str) else { continue };
                if rs.iter().filter(|x| x.get(&label) == r.get(&label)).count() > 1 {
                    continue;
                }
                let it = format!("the {one} {}", quoted(name));
                for k in &keys {
                    let Some(v) = r.get(k) else { continue };
                    // Whether one to-do item is ticked is asked through the lists of either kind.
                    if k == TICKED || v.as_str().is_some_and(|x| x.len() > 80 || is_hex_id(x)) || k.ends_with(".count") && v == 0 {
                        continue;
                    }
                    let f = human(k);
                    let in_label = v.as_str().is_some_and(|x| name.contains(x));
                    if tree_or_entries && is_tag(k) || in_label || v.is_boolean() || !about.insert((it.clone(), f.to_lowercase())) {
                        continue;
                    }
                    let frames = if l.key == ROWS {
                        // A table's row is named by its first cell: "the amount for 2024-03".
                        let named = quoted(name);
                        vec![sentence(&["What is the", &f, "for", &named, wp, "?"]), sentence(&["Look up the", &f, "for", &named, wp, "."])]
                    } else {
                        let mut frames = what_is(&f, v, &it, wp);
                        frames.truncate(2);
                        frames
                    };
                    push(Op::Lookup { listing: l.key.clone(), by: label.clone(), value: Value::String(name.into()), field: k.clone() }, frames);
                }
            }
            // Existence, both ways; not of a text's bullet points, which are its sentences.
            if text_list {
                continue;
            }
            let here: Vec<&Value> = rs.iter().filter_map(|r| r.get(&label)).collect();
            // A membership asks about every branch, both ways ("Has docs/install been merged
            // into main?" is a "no" about main); other lists about two items and one absent.
            let (asked, asked_absent) = if s.membership { (here.len(), usize::MAX) } else { (2, 1) };
            let absent: Vec<Value> = match elsewhere.get(&format!("{}/{}/{label}", c.tool, l.key)) {
                Some(vs) if whole => {
                    let mut out: Vec<Value> = Vec::new();
                    for v in vs.iter().filter(|v| !here.contains(v)) {
                        if out.len() < asked_absent && !out.contains(v) {
                            out.push(v.clone());
                        }
                    }
                    out
                }
                _ => Vec::new(),
            };
            for v in here.iter().take(asked).map(|v| (*v).clone()).chain(absent) {
                let Some(name) = v.as_str().map(String::from) else { continue };
                let named = quoted(&name);
                if s.merged.as_deref() == Some(name.as_str()) {
                    // "Has fix/pager been merged into fix/pager?"
                    continue;
                }
                let frames = match (changed, &s.merged) {
                    (Some(t), _) => vec![sentence(&["Did", t, "change", &named, place, "?"]), sentence(&["Was", &named, "changed in", t, place, "?"])],
                    (None, Some(b)) => {
                        vec![sentence(&["Has", b, "been merged into", &named, &s.home, "?"]), sentence(&["Is there", &with_article(&one), "named", &named, wp, "?"])]
                    }
                    (None, None) if l.key == ROWS => {
                        vec![sentence(&["Is there a row for", &named, wp, "?"]), sentence(&["Does", wp.trim_start_matches("in "), "have a row for", &named, "?"])]
                    }
                    (None, None) => {
                        vec![sentence(&["Is there", &with_article(&one), "named", &named, wp, "?"]), sentence(&["Does", &named, "appear among the", &items, wp, "?"])]
                    }
                };
                push(Op::Exists { listing: l.key.clone(), field: label.clone(), value: v }, frames);
            }
        }
    }
    crate::across::tasks(walked, seed, &mut asked, &mut out);
    crate::across::chained(walked, seed, &mut asked, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse;
    use serde_json::json;

    fn listing(rows: Value) -> Parsed {
        parse(&rows.to_string())
    }

    #[test]
    fn a_trees_items_are_counted_by_the_names_it_shows() {
        let tree = listing(json!([
            {"name": "a", "type": "directory", "children": [{"name": "x.md", "type": "file"}, {"name": "y.txt", "type": "file"}]},
            {"name": "b", "type": "directory", "children": [{"name": "x.md", "type": "file"}]},
        ]));
        let count = Op::Count { listing: String::new(), filter: Some((EXTENSION.into(), json!("md"))) };
        assert_eq!(count.answer(&tree), Some(Expected::Number(2.0)));
        assert_eq!(count.explain(&tree).as_deref(), Some("Counting the .md files in the result: 1. x.md, 2. x.md. That makes 2."));
    }

    #[test]
    fn the_busiest_month_of_dated_items() {
        let month = Op::Month { listing: String::new(), field: "date".into() };
        let p = listing(json!([{"m": "a", "date": "2024-01-05"}, {"m": "b", "date": "2024-03-02T10:00:00"}, {"m": "c", "date": "2024-03-20"}]));
        assert_eq!(month.answer(&p), Some(Expected::Text("March 2024".into())));
        assert_eq!(month.explain(&p).as_deref(), Some("Counting the items by the month of their date: January 2024 1, March 2024 2."));
        let tied =
            listing(json!([{"m": "a", "date": "2024-01-05"}, {"m": "b", "date": "2024-01-06"}, {"m": "c", "date": "2024-03-20"}, {"m": "d", "date": "2024-03-21"}]));
        assert_eq!(month.answer(&tied), None, "a tie");
        let one = listing(json!([{"m": "a", "date": "2024-01-05"}, {"m": "b", "date": "2024-01-06"}]));
        assert_eq!(month.answer(&one), None, "one month is no comparison");
    }

    #[test]
    fn a_listing_of_a_folder_with_folders_is_what_sits_directly_in_it() {
        assert_eq!(directly("in the workspace", false), "at the top of the workspace");
        assert_eq!(directly("in the top folder in January 2024", true), "directly in the top folder in January 2024");
        assert_eq!(directly("in the notes folder", true), "directly in the notes folder", "not in its subfolders");
        assert_eq!(directly("in the recipes folder", false), "in the recipes folder", "a folder of files holds them all");
    }

    #[test]
    fn operations_refuse_ties_and_out_of_range_lists() {
        let p = listing(json!([
            {"name": "a.md", "size": 10, "author": "Ann"},
            {"name": "b.md", "size": 30, "author": "Bob"},
            {"name": "c.md", "size": 30, "author": "Ann"},
        ]));
        let extreme = |max| Op::Extreme { listing: String::new(), field: "size".into(), max, label: "name".into() };
        assert_eq!(extreme(false).answer(&p), Some(Expected::Text("a.md".into())));
        assert_eq!(extreme(true).answer(&p), None, "b.md and c.md tie");
        assert_eq!(Op::Most { listing: String::new(), field: "author".into(), max: true }.answer(&p), Some(Expected::Text("Ann".into())));
        assert_eq!(Op::Most { listing: String::new(), field: "author".into(), max: false }.answer(&p), Some(Expected::Text("Bob".into())));
        let count = Op::Count { listing: String::new(), filter: Some(("author".into(), json!("Ann"))) };
        assert_eq!(count.answer(&p), Some(Expected::Number(2.0)));
        assert_eq!(count.explain(&p).as_deref(), Some("Counting the items with author Ann in the result: 1. a.md, 2. c.md. That makes 2."));
        assert_eq!(extreme(false).explain(&p).as_deref(), Some("The size of each: a.md 10, b.md 30, c.md 30. The smallest is 10, for a.md."));
        let author = Op::Extreme { listing: String::new(), field: "size".into(), max: false, label: "author".into() };
        assert_eq!(author.explain(&p).as_deref(), Some("The size of each: a.md 10, b.md 30, c.md 30. The smallest is 10, for a.md; its author is Ann."));
        let many = listing(Value::Array((0..80).map(|i| json!({"name": format!("file-{i:03}.md"), "size": 100 + i})).collect()));
        let short = extreme(true).explain(&many).unwrap();
        assert_eq!(short, "The largest size is 179, for file-079.md.", "80 values are more than a turn writes out");
        let nobody = Op::Count { listing: String::new(), filter: Some(("author".into(), json!("Cy"))) };
        assert_eq!(nobody.answer(&p), None, "a count of nothing is no question");
        let select = Op::Select { listing: String::new(), filter: ("author".into(), json!("Bob")), label: "name".into() };
        assert_eq!(select.answer(&p), None, "a list of one is a lookup, not a list");
        let exists = |v: &str| Op::Exists { listing: String::new(), field: "name".into(), value: json!(v) }.answer(&p);
        assert_eq!(exists("b.md"), Some(Expected::Rule(ExpectedRule::Exact("yes".into()))));
        assert_eq!(exists("z.md"), Some(Expected::Rule(ExpectedRule::Exact("no".into()))));
        let peak = Op::Peak { listing: String::new(), field: "size".into(), max: true };
        assert_eq!(peak.answer(&p), Some(Expected::Number(30.0)), "a tie on the value still has one value");
        let total = Op::Total { listing: String::new(), field: "size".into() };
        assert_eq!(total.answer(&p), Some(Expected::Number(70.0)));
        assert_eq!(total.explain(&p).as_deref(), Some("Adding up the size: 10 + 30 + 30 = 70."));
        let lookup = Op::Lookup { listing: String::new(), by: "name".into(), value: json!("b.md"), field: "size".into() };
        assert_eq!(lookup.answer(&p), Some(Expected::Number(30.0)));
    }

    #[test]
    fn thresholds_are_round_and_clear_of_every_value() {
        assert_eq!(bound_between(480.0, 520.0), Some(500.0));
        assert_eq!(bound_between(2.0, 3.0), Some(2.5));
        assert_eq!(bound_between(20.49, 28.49), Some(25.0));
        assert_eq!(bound_between(255.0, 269.0), Some(260.0));
        // 2.77 KB is 2,836 bytes give or take five: no bound within a hundredth of it.
        assert!(bound_between(2836.48, 2900.0).is_some_and(|b| b > 2865.0 && b < 2871.0));
        assert_eq!(bound_between(100.0, 100.5), None, "too close to tell apart");
        // A listing of files and a folder: the folder has no size and is in neither side.
        let p = parse("[FILE] a.py   389 B\n[FILE] b.json   270 B\n[DIR] tests\n[FILE] c.py   177 B\n[FILE] big.csv   4.20 KB");
        let rs = p.records("").unwrap();
        let (bound, above) = threshold(rs, "size", 7).unwrap();
        assert!((1..=MAX_SELECT).contains(&above) && [177.0, 270.0, 389.0, 4300.8].iter().all(|v| (v - bound).abs() > 1.0), "{bound}");
        let larger = |label: Option<&str>| Op::Past { listing: String::new(), field: "size".into(), bound: 200.0, above: true, label: label.map(String::from) };
        assert_eq!(larger(None).answer(&p), Some(Expected::Number(3.0)));
        assert_eq!(larger(Some("name")).answer(&p), Some(Expected::Rule(ExpectedRule::Set(vec![json!("a.py"), json!("b.json"), json!("big.csv")]))));
        assert_eq!(
            larger(None).explain(&p).as_deref(),
            Some("The size of each: a.py 389, b.json 270, c.py 177, big.csv 4.20 KB. Above 200: 1. a.py, 2. b.json, 3. big.csv. That makes 3.")
        );
        let smaller = Op::Past { listing: String::new(), field: "size".into(), bound: 100.0, above: false, label: None };
        assert_eq!(smaller.answer(&p), None, "a count of nothing is no question");
        let at = Op::Past { listing: String::new(), field: "size".into(), bound: 270.0, above: true, label: None };
        assert_eq!(at.answer(&p), None, "a value at the bound is on neither side");
        // Dates and ids are not measured against a bound.
        let dated = listing(json!([{"name": "a", "day": "2024-01-02"}, {"name": "b", "day": "2024-02-02"}, {"name": "c", "day": "2024-03-02"}]));
        assert_eq!(threshold(dated.records("").unwrap(), "day", 1), None);
    }

    #[test]
    fn dates_order_by_day_and_time() {
        let early = order_key(&json!("2024-01-31 23:00:00+00:00")).unwrap();
        let late = order_key(&json!("2024-02-01 01:00:00+00:00")).unwrap();
        assert!(early < late);
        assert!(is_date(&json!("2024-02-01")) && !is_date(&json!("Feb 1")) && !is_date(&json!(2024)));
        let js = json!("Sun Nov 10 2024 17:39:00 GMT+0000 (Coordinated Universal Time)");
        assert!(order_key(&js).unwrap() > late);
        assert_eq!(value_answer(&js), Some(Expected::Text("2024-11-10".into())));
        let text = parse("# Pancakes\n\nFlour, eggs and milk.\n");
        assert_eq!(Op::Heading.answer(&text), Some(Expected::Text("Pancakes".into())));
        assert_eq!(Op::Lines.answer(&text), Some(Expected::Number(3.0)), "the blank line counts");
        // Only a result with nothing in it is empty.
        let (none, count) = (Op::Empty { count: false }, Op::Empty { count: true });
        assert_eq!((none.answer(&parse("")), count.answer(&parse("[]"))), (Some(Expected::Rule(ExpectedRule::Exact("no".into()))), Some(Expected::Number(0.0))));
        assert_eq!(none.answer(&text), None);
        // A file named for its day is a name, not a date.
        assert!(!is_date(&json!("2024-03-11-standup.md")) && !is_date(&json!("2024-02-05 kickoff.md")));
        assert_eq!(value_answer(&json!("2024-03-11-standup.md")), Some(Expected::Text("2024-03-11-standup.md".into())));
        assert!(is_date(&json!("2024-02-01T10:00:00Z")));
        // A rounded size orders by its bytes and is answered as shown, never as a date.
        assert!(order_key(&json!("2.77 KB")).unwrap() > order_key(&json!(2000)).unwrap() && !is_date(&json!("2.77 KB")));
        assert_eq!(value_answer(&json!("2.77 KB")), Some(Expected::Text("2.77 KB".into())));
    }

    #[test]
    fn a_comparison_across_calls_names_the_one_with_the_extreme() {
        let months: Vec<Parsed> = [2, 5, 3].iter().map(|n| parse(&(0..*n).map(|i| format!("Commit: {i:07x}\nAuthor: A\n\n")).collect::<String>())).collect();
        let results: Vec<&Parsed> = months.iter().collect();
        let labels = vec!["January 2024".to_string(), "February 2024".into(), "March 2024".into()];
        let most = Op::Across { measure: Measure::Items, max: true, labels: labels.clone() };
        assert_eq!(most.answer_all(&results), Some(Expected::Text("February 2024".into())));
        assert_eq!(most.explain_all(&results).unwrap(), "Counting what each result lists: January 2024 2, February 2024 5, March 2024 3. The most is February 2024.");
        assert_eq!(Op::Across { measure: Measure::Items, max: false, labels: labels.clone() }.answer_all(&results), Some(Expected::Text("January 2024".into())));
        assert_eq!(most.answer_all(&results[..2]), None, "one result per label");
        assert_eq!(most.answer(results[0]), None, "not answered from one result");
        // A tie names no one.
        let tied: Vec<&Parsed> = vec![&months[0], &months[0]];
        assert_eq!(Op::Across { measure: Measure::Items, max: true, labels: labels[..2].to_vec() }.answer_all(&tied), None);
        let files: Vec<Parsed> = ["2024-02-18 10:22:00", "2024-08-14 11:58:00"].iter().map(|d| parse(&format!("size: 10\nmodified: {d}"))).collect();
        let last = Op::Across { measure: Measure::Field("modified".into()), max: true, labels: vec!["config.json".into(), "README.md".into()] };
        let files: Vec<&Parsed> = files.iter().collect();
        assert_eq!(last.answer_all(&files), Some(Expected::Text("README.md".into())));
        assert_eq!(last.explain_all(&files).unwrap(), "Comparing when each was modified: config.json 2024-02-18, README.md 2024-08-14. The most recent is README.md.");
        // Texts by their lines, blank ones included; a table is no text to measure.
        let texts: Vec<Parsed> = ["# Ideas\n\n- a\n- b\n", "one line\n"].iter().map(|t| parse(t)).collect();
        let texts: Vec<&Parsed> = texts.iter().collect();
        let longest = Op::Across { measure: Measure::Lines, max: true, labels: vec!["ideas.md".into(), "quick.txt".into()] };
        assert_eq!(longest.answer_all(&texts), Some(Expected::Text("ideas.md".into())));
        assert_eq!(longest.explain_all(&texts).unwrap(), "Counting the lines of each file: ideas.md 4, quick.txt 1. The most is ideas.md.");
        assert_eq!(Measure::Lines.of(&parse("day,amount\n2024-01-01,3\n2024-01-02,4\n")), None);
        // Two steps: the longest file, then its title; not answered once another file is the
        // longest.
        let then = Op::Then { pick: Box::new(longest.clone()), winner: "ideas.md".into(), then: Box::new(Op::Heading), own: false };
        assert_eq!(then.answer_all(&texts), Some(Expected::Text("Ideas".into())));
        assert_eq!(then.explain_all(&texts).unwrap(), "Counting the lines of each file: ideas.md 4, quick.txt 1. The most is ideas.md.");
        let shorter = [parse("# Ideas\n"), parse("a\nb\nc\n")];
        assert_eq!(then.answer_all(&shorter.iter().collect::<Vec<_>>()), None, "the winner changed");
        // The winner's own call after the compared ones answers the second step.
        let info = parse("size: 42\nmodified: 2024-01-01");
        let size = Op::Then { pick: Box::new(longest), winner: "ideas.md".into(), then: Box::new(Op::Field { field: "size".into() }), own: true };
        assert_eq!(size.answer_all(&[texts[0], texts[1], &info]), Some(Expected::Number(42.0)));
        assert_eq!((size.results(), then.results()), (3, 2));
    }

    #[test]
    fn a_whole_history_is_its_months_when_nothing_lies_around_them() {
        let log = |commits: &[(&str, &str)]| {
            parse(&commits.iter().enumerate().map(|(i, (a, m))| format!("Commit: {i:07x}\nAuthor: {a}\nMessage: {m}\n\n")).collect::<String>())
        };
        let (jan, feb, empty) = (log(&[("Ann", "Add a"), ("Bob", "Add b")]), log(&[("Ann", "Fix a"), ("Cy", "Fix c")]), parse("Commit history:\n"));
        let labels = vec!["January 2024".to_string(), "February 2024".into()];
        let whole = |of| Op::History { labels: labels.clone(), of };
        let all = [&jan, &feb, &empty, &empty];
        assert_eq!(whole(Whole::Count).answer_all(&all), Some(Expected::Number(4.0)));
        assert_eq!(whole(Whole::Most { field: "Author".into(), max: true }).answer_all(&all), Some(Expected::Text("Ann".into())));
        assert_eq!(whole(Whole::Most { field: "Author".into(), max: false }).answer_all(&all), None, "Bob and Cy tie");
        // An empty month counts nothing; a month of one commit reads as fields, not an item.
        assert_eq!(whole(Whole::Count).answer_all(&[&jan, &empty, &empty, &empty]), Some(Expected::Number(2.0)));
        let lone = log(&[("Ann", "Fix a")]);
        assert_eq!(whole(Whole::Count).answer_all(&[&jan, &lone, &empty, &empty]), None);
        let anns = whole(Whole::By { field: "Author".into(), value: json!("Ann"), label: Some("Message".into()) });
        assert_eq!(anns.answer_all(&all), Some(Expected::Rule(ExpectedRule::Set(vec![json!("Add a"), json!("Fix a")]))));
        assert_eq!(
            whole(Whole::Count).explain_all(&all).unwrap(),
            "Reading the history a month at a time: January 2024 2, February 2024 2; nothing before January 2024 or after February 2024. That makes 4 in all."
        );
        // A commit after the last month: the months are not the whole history.
        assert_eq!(whole(Whole::Count).answer_all(&[&jan, &feb, &empty, &feb]), None);
        assert_eq!(whole(Whole::Count).answer_all(&[&jan, &feb, &empty]), None, "both bounds are read");
        assert_eq!(whole(Whole::Count).results(), 4);
    }

    #[test]
    fn field_questions_read_as_people_ask_them() {
        let v = json!("x");
        assert_eq!(what_is("modified", &v, "the file a.md", "")[0], "When was the file a.md modified?");
        assert_eq!(
            what_is(&human("Author email"), &v, "the commit \"Fix\"", "in the repository at /r")[0],
            "What email address does the author of the commit \"Fix\" use in the repository at /r?"
        );
        assert_eq!(what_is("permissions", &v, "the file a.md", "")[0], "What are the permissions of the file a.md?");
        assert_eq!(what_is("author", &v, "the commit \"Fix\"", "in the repository at /r")[0], "Who is the author of the commit \"Fix\" in the repository at /r?");
        assert!(!askable("api_key") && !askable("accessToken") && !askable("to") && askable("size") && askable("Author"));
    }
}
