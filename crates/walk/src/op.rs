//! What a question asks of a result, and its answer: an operation (a field, a count, a lookup
//! by name, an extreme, the most common value, existence, a filtered list, a file's lines or
//! title, a comparison across calls) applied to parsed results, with the working a small model
//! writes out before it answers. `ask` phrases the questions; the replay applies the same
//! operation to a fresh server's results.

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use ta_synth::names::{human, plural};
use ta_types::Expected;
use ta_types::scenario::ExpectedRule;

use crate::ask::{files_of, tag_noun};
use crate::explore::label_field;
use crate::parse::{EXTENSION, Parsed, Record, is_text_list, size_bytes};

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
    /// [`crate::ask::Task::siblings`], the last `labels.len()` steps of its reference, in `labels`' order.
    Across { measure: Measure, max: bool, labels: Vec<String> },
    /// Two steps, the first's answer the second's subject: the file an [`Op::Across`] picks
    /// (`winner`), or the folder an [`Op::Most`] picks from a tree, then `then` about it ("Which
    /// file in the notes folder has the most lines? How many bullet points are there in that
    /// file?"). Its results are the pick's, then the winner's own call when it is not one of
    /// them (`own`).
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
pub(crate) const EMPTY_FOLDER: &str = "children.count";

/// The longest working written out before an answer: ~400 tokens of names and numbers, inside
/// the 512 an episode's turn may say, with room for the call that answers.
const MAX_WORKING_CHARS: usize = 1_000;

/// `working` when a turn can say it (`items` written out, at most [`MAX_ENUMERATED`], in at most
/// [`MAX_WORKING_CHARS`]), else `short`, the answer alone: a list too long to write out in a turn
/// (a whole history's dates) is not.
fn written_out(working: String, items: usize, short: String) -> String {
    if items <= MAX_ENUMERATED && working.len() <= MAX_WORKING_CHARS { working } else { short }
}

/// Items named in an explanation at most.
pub(crate) const MAX_ENUMERATED: usize = 40;
/// Characters of a diff's line a working writes out.
const MAX_LINE_CHARS: usize = 24;

/// At most this many items in a list answer.
pub(crate) const MAX_SELECT: usize = 8;

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
pub(crate) fn shown_number(x: f64) -> String {
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
            Op::DiffLines { added } => p.diff_lines.as_ref().map(|(a, r)| if *added { a.len() } else { r.len() }).filter(|n| *n > 0).map(|n| Expected::Number(n as f64)),
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
                let items = each.len();
                let working = format!("The {} of each: {}. The {word} is {value}, for {winner}{also}.", human(field), enumerate(each));
                Some(written_out(working, items, format!("The {word} {} is {value}, for {winner}{also}.", human(field))))
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
                let items = each.len();
                let working = format!("The {} of each: {}. {past}", human(field), enumerate(each));
                Some(written_out(working, items, past))
            }
            Op::Lines => Some(format!("Counting every line of the file, blank lines included: {}.", p.line_count)),
            Op::Empty { .. } => Some("The result lists nothing: there is nothing there.".into()),
            Op::Across { .. } | Op::Then { .. } | Op::History { .. } => None,
            Op::DiffLines { added } => {
                let (a, r) = p.diff_lines.as_ref()?;
                let (sign, lines) = if *added { ("+", a) } else { ("-", r) };
                let n = lines.len();
                let short = format!("Counting the diff's lines that start with {sign} (not the {sign}{sign}{sign} file headers): {n}.");
                // Each line numbered before the total, as a count's items are (a line cut to
                // its first words: the number is what counts).
                let each = numbered(lines.iter().map(|l| {
                    let l = l.trim();
                    let cut: String = l.chars().take(MAX_LINE_CHARS).collect();
                    if l.is_empty() {
                        "(blank)".to_string()
                    } else if cut.len() < l.len() {
                        format!("{cut}…")
                    } else {
                        cut
                    }
                }));
                let working = format!("The diff's lines that start with {sign} (not the {sign}{sign}{sign} file headers): {}. That makes {n}.", each.join(", "));
                Some(written_out(working, n, short))
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
    pub(crate) fn weight(&self) -> usize {
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
pub(crate) fn date_key(s: &str) -> Option<f64> {
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
    let Op::Across { labels, .. } = pick else {
        // A pick from one result (the folder a tree shows with the most files), then the
        // winner's own call.
        let [picked, second] = results else { return None };
        return (own && pick.answer(picked)? == Expected::Text(winner.to_string())).then_some((&results[..1], *second));
    };
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
    fn a_diffs_lines_are_numbered_before_they_are_counted() {
        let show = "commit 2e75\nAuthor: Bob <b@x>\n\n    Add export\n\n--- /dev/null\n+++ b/export.py\n@@ -0,0 +1,3 @@\n+import csv\n+\n+def export(rows, path, delimiter=\",\"):\n--- a/old.py\n+++ b/old.py\n@@ -1 +0,0 @@\n-x = 1\n";
        let p = parse(show);
        let added = Op::DiffLines { added: true };
        assert_eq!(added.answer(&p), Some(Expected::Number(3.0)));
        assert_eq!(
            added.explain(&p).as_deref(),
            Some("The diff's lines that start with + (not the +++ file headers): 1. import csv, 2. (blank), 3. def export(rows, path, d…. That makes 3.")
        );
        assert_eq!(Op::DiffLines { added: false }.explain(&p).as_deref(), Some("The diff's lines that start with - (not the --- file headers): 1. x = 1. That makes 1."));
        // Too many to write out in a turn: the count alone.
        let long = format!("commit 1\n\n--- /dev/null\n+++ b/big.txt\n@@ -0,0 +1,50 @@\n{}", (0..50).map(|i| format!("+line {i}\n")).collect::<String>());
        assert_eq!(added.explain(&parse(&long)).as_deref(), Some("Counting the diff's lines that start with + (not the +++ file headers): 50."));
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
        // A pick from one result (the author with most items), then the winner's own result; not
        // answered once the pick names another, nor without the winner's own call.
        let by = listing(json!([{"name": "a.md", "author": "Ann"}, {"name": "b.md", "author": "Bob"}, {"name": "c.md", "author": "Ann"}]));
        let most = Op::Most { listing: String::new(), field: "author".into(), max: true };
        let then = Op::Then { pick: Box::new(most), winner: "Ann".into(), then: Box::new(Op::Field { field: "size".into() }), own: true };
        assert_eq!(then.answer_all(&[&by, &info]), Some(Expected::Number(42.0)));
        assert_eq!(then.results(), 2);
        let other = listing(json!([{"name": "a.md", "author": "Bob"}, {"name": "b.md", "author": "Bob"}]));
        assert_eq!(then.answer_all(&[&other, &info]), None, "the winner changed");
        assert_eq!(then.answer_all(&[&by]), None);
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
}
