//! The walk itself: call the read tools breadth-first with arguments built from their schemas
//! (enums, defaults) and from values earlier results showed (paths, ids, names), within a budget
//! of calls and time. Every call is recorded with where each argument came from, so a question
//! about a result can be answered by replaying the chain of calls that led to it.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde::Serialize;
use serde_json::{Map, Value};
use ta_rollout::ToolHost;
use ta_synth::names::{singular, words};
use ta_synth::tools::params;
use ta_types::ToolSpec;

use crate::WalkError;
use crate::parse::{Parsed, Record, is_hex_id, is_text_list, seen};

/// Bounds of a walk.
#[derive(Debug, Clone)]
pub struct Budget {
    pub max_calls: usize,
    /// Calls of one tool at most, so that one tool with many possible arguments does not use
    /// the whole budget.
    pub max_per_tool: usize,
    pub time: Duration,
    /// Calls in flight at once.
    pub concurrency: usize,
    /// Characters of a result the model will be shown (the rollouts' `tool_result_max_chars`):
    /// results are read only that far ([`crate::parse::seen`]).
    pub view: usize,
    /// Turns of an episode (the rollouts' `max_turns`), one call each in a reference trace: a
    /// task whose calls leave no turn for the answer is not asked, since no episode could
    /// finish it and its trace would teach chains that run out of turns.
    pub turns: usize,
}

/// Where an argument's value came from, and how a question names it.
#[derive(Debug, Clone, PartialEq)]
pub struct Origin {
    /// The call whose result showed the value; `None` for a seed, an enum value or a default.
    pub call: Option<usize>,
    /// "the docs folder", "the commit \"Fix pager\"", "/srv/repo".
    pub phrase: String,
}

/// One recorded call (`calls.jsonl` holds its id, tool, arguments, text, error flag and
/// `maybe_cut`).
#[derive(Debug, Clone, Serialize)]
pub struct Call {
    pub id: usize,
    pub tool: String,
    pub args: Map<String, Value>,
    pub text: String,
    pub is_error: bool,
    #[serde(skip)]
    pub parsed: Parsed,
    /// Each argument's origin, in the order of the arguments.
    #[serde(skip)]
    pub origins: Vec<(String, Origin)>,
    /// Whether a limit argument was left at its default and the result has exactly that many
    /// items: the list may be cut, so nothing is counted over it.
    pub maybe_cut: bool,
    /// Whether the result is longer than the model will be shown: `parsed` holds only the
    /// whole items before the cut, so nothing is counted over it and no list is complete.
    pub cut: bool,
}

/// What a value is, as far as filling an argument goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File,
    /// A long hexadecimal id (a commit hash).
    Id,
    Name,
}

/// A value seen in a result (or given as a seed), ready to fill an argument.
#[derive(Debug, Clone)]
struct Known {
    value: String,
    /// Words of the field (and list) it came from: `name`, `commit`, `path`...
    key: Vec<String>,
    kind: Kind,
    origin: Origin,
}

/// The walk's record.
#[derive(Debug, Default)]
pub struct Walked {
    pub calls: Vec<Call>,
    /// Folders the server showed without being asked about one (`list_allowed_directories`):
    /// paths under them are named relative to them in questions.
    pub roots: Vec<String>,
    /// Fields whose value changed between two identical calls, by tool.
    pub unstable: HashMap<String, HashSet<String>>,
    /// Whether the budget stopped the walk before it ran out of calls to make.
    pub stopped_by_budget: bool,
    /// The branch checked out, when every result that shows one shows the same.
    pub checked_out: Option<String>,
}

impl Walked {
    /// The calls `id` depends on and `id` itself, in call order.
    pub fn chain(&self, id: usize) -> Vec<usize> {
        let mut out = Vec::new();
        let mut todo = vec![id];
        while let Some(c) = todo.pop() {
            if out.contains(&c) {
                continue;
            }
            out.push(c);
            todo.extend(self.calls[c].origins.iter().filter_map(|(_, o)| o.call));
        }
        out.sort_unstable();
        out
    }
}

/// Words in an argument's name that say it takes a commit (a hash, or a branch's name).
pub const REVISION_WORDS: &[&str] = &["revision", "commit", "sha", "hash", "ref", "id", "rev"];

const LIMIT_WORDS: &[&str] = &["max", "limit", "count", "top", "n", "size", "per", "page"];
/// The value given to a limit argument, to see a whole list.
const WHOLE: i64 = 1000;

fn param_words(name: &str) -> Vec<String> {
    let mut w = words(name);
    let singulars: Vec<String> = w.iter().map(|x| singular(x)).collect();
    w.extend(singulars);
    w
}

fn is_pathish(w: &[String]) -> bool {
    w.iter().any(|x| ["path", "directory", "folder", "file", "repository", "root"].contains(&x.as_str()))
}

fn schema_type(schema: &Value) -> &str {
    match schema.get("type") {
        Some(Value::String(t)) => t,
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).find(|t| *t != "null").unwrap_or(""),
        _ => "",
    }
}

/// Whether an argument takes a glob pattern (`search_files`' `pattern`: "glob-style patterns
/// ... like '*.ext'"): its name says pattern or glob and its schema or the tool's description
/// says glob.
fn takes_glob(name: &str, schema: &Value, tool_description: &str) -> bool {
    let pw = param_words(name);
    let said = |t: &str| t.to_ascii_lowercase().contains("glob");
    pw.iter().any(|w| w == "pattern" || w == "glob") && (said(tool_description) || schema.get("description").and_then(Value::as_str).is_some_and(said))
}

/// Glob patterns from the files seen so far: every extension (`**/*.md`), and every word of
/// four or more letters in a file's name (`**/*pancakes*`), so that a file is found by a word
/// as people name it ("my pancakes recipe").
fn globs(pool: &[Known]) -> Vec<(Value, Origin)> {
    let mut out: Vec<String> = Vec::new();
    let mut add = |g: String| {
        if !out.contains(&g) {
            out.push(g);
        }
    };
    let names: Vec<&str> = pool.iter().filter(|k| k.kind == Kind::File).filter_map(|k| k.value.rsplit('/').next()).collect();
    for n in &names {
        if let Some((stem, ext)) = n.rsplit_once('.').filter(|(stem, e)| !stem.is_empty() && (1..=5).contains(&e.len()) && e.chars().all(|c| c.is_ascii_alphanumeric())) {
            add(format!("**/*.{}", ext.to_ascii_lowercase()));
            for w in stem.split(|c: char| !c.is_ascii_alphabetic()).filter(|w| w.len() >= 4) {
                add(format!("**/*{}*", w.to_ascii_lowercase()));
            }
        }
    }
    out.into_iter().map(|g| (Value::String(g.clone()), Origin { call: None, phrase: g })).collect()
}

/// The values an argument may take, best first.
fn candidates(tool: &str, name: &str, schema: &Value, pool: &[Known], required: bool) -> Vec<(Value, Origin)> {
    let literal = |v: &Value| (v.clone(), Origin { call: None, phrase: ta_synth::names::shown(v) });
    if let Some(e) = schema.get("enum").and_then(Value::as_array) {
        return if required { e.iter().map(literal).collect() } else { Vec::new() };
    }
    if required && let Some(examples) = examples(schema) {
        return examples.iter().map(literal).collect();
    }
    let pw = param_words(name);
    let ty = schema_type(schema);
    match ty {
        "integer" | "number" => {
            if !required && pw.iter().any(|w| LIMIT_WORDS.contains(&w.as_str())) {
                return vec![(Value::from(WHOLE), Origin { call: None, phrase: WHOLE.to_string() })];
            }
            if required && let Some(d) = schema.get("default") {
                return vec![literal(d)];
            }
            return Vec::new();
        }
        "string" | "array" => {}
        _ => return Vec::new(),
    }
    if !required {
        return Vec::new();
    }
    // A `path` says nothing of what it wants; the tool's name does: `list_directory` and
    // `directory_tree` take a folder, `read_file` a file (`search_files` searches a folder for
    // files, and `get_file_info` takes either).
    let tw = words(tool);
    let wants_dir = pw.iter().chain(&tw).any(|w| ["directory", "folder", "repository", "root", "tree"].contains(&w.as_str()));
    let wants_file = pw.iter().any(|w| w == "file") || !wants_dir && tw.iter().any(|w| w == "read");
    let fits = |k: &Known| -> bool {
        if is_pathish(&pw) {
            return match k.kind {
                Kind::Dir => !wants_file || wants_dir,
                Kind::File => !wants_dir,
                _ => false,
            };
        }
        match k.kind {
            Kind::Dir | Kind::File => false,
            Kind::Id => pw.iter().any(|w| REVISION_WORDS.contains(&w.as_str())),
            // A branch or tag name is a revision too ("the latest commit on fix/pager").
            Kind::Name => {
                k.key.iter().any(|w| pw.contains(w)) || k.key.iter().any(|w| w == "branch" || w == "tag") && pw.iter().any(|w| REVISION_WORDS.contains(&w.as_str()))
            }
        }
    };
    if let Some(d) = schema.get("default") {
        return vec![literal(d)];
    }
    let mut out: Vec<&Known> = pool.iter().filter(|k| fits(k)).collect();
    if out.is_empty() && !is_pathish(&pw) {
        // A free text argument (a search query, a message): the names results showed.
        out = pool.iter().filter(|k| k.kind == Kind::Name && k.key.iter().any(|w| w == "name")).collect();
    }
    let wrap = |v: &str| if ty == "array" { Value::Array(vec![Value::String(v.into())]) } else { Value::String(v.into()) };
    out.into_iter().map(|k| (wrap(&k.value), k.origin.clone())).collect()
}

/// The values a schema offers as examples: `examples`, or a few short 'quoted' words in its
/// description ("Whether to list local branches ('local') or all branches ('all')").
fn examples(schema: &Value) -> Option<Vec<Value>> {
    if let Some(e) = schema.get("examples").and_then(Value::as_array).filter(|e| !e.is_empty()) {
        return Some(e.clone());
    }
    static QUOTED: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| regex::Regex::new(r"'([A-Za-z0-9_./-]{1,30})'").expect("valid"));
    let description = schema.get("description").and_then(Value::as_str)?;
    let found: Vec<Value> = QUOTED.captures_iter(description).map(|c| Value::String(c[1].to_string())).collect();
    (!found.is_empty() && found.len() <= 6).then_some(found)
}

/// Argument sets for `spec` from the values known so far (about `cap` of them at most).
fn argument_sets(spec: &ToolSpec, pool: &[Known], roots: &[String], cap: usize) -> Vec<Vec<(String, Value, Origin)>> {
    let (props, required) = params(spec);
    let description = spec.function.description.as_deref().unwrap_or("");
    let globbed: Vec<&String> = props.iter().filter(|(name, schema)| required.contains(name) && takes_glob(name, schema, description)).map(|(name, _)| name).collect();
    // A search by pattern looks everywhere below the folders the server shows: from those only,
    // every pattern once.
    let roots_only: Vec<Known> = if !globbed.is_empty() { pool.iter().filter(|k| roots.contains(&k.value)).cloned().collect() } else { Vec::new() };
    let all = pool;
    let pool = if !globbed.is_empty() { roots_only.as_slice() } else { pool };
    let mut sets: Vec<Vec<(String, Value, Origin)>> = vec![Vec::new()];
    let mut limit_variant: Option<(String, Value, Origin)> = None;
    for (name, schema) in &props {
        let is_required = required.contains(name);
        let mut values = if globbed.contains(&name) { globs(all) } else { candidates(&spec.function.name, name, schema, pool, is_required) };
        if is_required && description.contains(":<path>") && param_words(name).iter().any(|w| REVISION_WORDS.contains(&w.as_str())) {
            values.extend(files_on_branches(all));
        }
        if !is_required {
            if let Some((v, o)) = values.into_iter().next() {
                limit_variant = Some((name.clone(), v, o));
            }
            continue;
        }
        if values.is_empty() {
            return Vec::new();
        }
        let mut next = Vec::new();
        for set in &sets {
            for (v, o) in &values {
                let mut s = set.clone();
                s.push((name.clone(), v.clone(), o.clone()));
                next.push(s);
                if next.len() >= cap * 4 {
                    break;
                }
            }
        }
        sets = next;
    }
    // Branches that contain a commit: one call per revision seen, from the first argument set
    // alone (the others list remote or all branches again). Not the negated argument: "which
    // branches do not contain …" is seldom asked, and would double these calls.
    let member_sets: Vec<Vec<(String, Value, Origin)>> = props
        .iter()
        .filter(|(name, schema)| !required.contains(name) && membership(name) == Some(false) && names_a_commit(schema))
        .flat_map(|(name, _)| revisions(all).into_iter().map(move |(v, o)| (name.clone(), v, o)))
        .filter_map(|arg| sets.first().map(|s| s.iter().cloned().chain([arg]).collect()))
        .collect();
    let windows: Vec<Vec<(String, Value, Origin)>> = match window_params(&props, &required) {
        Some((start, end)) => history_windows(&months(all))
            .into_iter()
            .flat_map(|(from, to, phrase)| {
                let origin = Origin { call: None, phrase };
                let bounds = [(start.clone(), Value::String(from), origin.clone()), (end.clone(), Value::String(to), origin)];
                sets.iter().map(move |s| s.iter().cloned().chain(bounds.clone()).collect::<Vec<_>>())
            })
            .map(|s| s.into_iter().chain(limit_variant.clone()).collect())
            .collect(),
        None => Vec::new(),
    };
    if let Some(l) = limit_variant {
        let with: Vec<_> = sets.iter().map(|s| s.iter().cloned().chain([l.clone()]).collect()).collect();
        sets.extend(with);
    }
    sets.extend(windows);
    sets.extend(member_sets);
    sets
}

/// Whether an argument keeps only the items that contain a commit (`git_branch`'s `contains`):
/// `Some(true)` for the one that keeps those that do not (`not_contains`). People ask this as
/// "which branches contain …" and "has fix/pager been merged into main".
pub fn membership(name: &str) -> Option<bool> {
    let w = param_words(name);
    w.iter().any(|x| ["contains", "contain", "containing"].contains(&x.as_str())).then(|| w.iter().any(|x| ["not", "no", "without"].contains(&x.as_str())))
}

fn names_a_commit(schema: &Value) -> bool {
    let said = schema.get("description").and_then(Value::as_str).unwrap_or("").to_ascii_lowercase();
    said.contains("commit") || said.contains("sha")
}

/// Commits to ask about by membership: each branch's latest, and the commits a log showed
/// with their message (at most [`MEMBERSHIP_COMMITS`]).
fn revisions(pool: &[Known]) -> Vec<(Value, Origin)> {
    let branches = pool
        .iter()
        .filter(|k| k.kind == Kind::Name && k.key.iter().any(|w| w == "branch") && !k.value.contains(':') && !k.value.starts_with('/'))
        .map(|k| (Value::String(k.value.clone()), Origin { call: k.origin.call, phrase: format!("the latest commit on {}", k.value) }));
    let commits = pool.iter().filter(|k| k.kind == Kind::Id && k.origin.phrase.starts_with("the commit ")).take(MEMBERSHIP_COMMITS);
    let mut out: Vec<(Value, Origin)> = branches.collect();
    out.extend(commits.map(|k| (Value::String(k.value.clone()), k.origin.clone())));
    out
}

/// Commits asked about by which branches contain them.
const MEMBERSHIP_COMMITS: usize = 12;

/// `branch:path` revisions (a file as a branch has it) for a tool that shows files given as
/// `<revision>:<path>` (`git_show`): every branch seen with every file a change named. The
/// question names the file, so the chain needs only the call that showed the branch.
fn files_on_branches(pool: &[Known]) -> Vec<(Value, Origin)> {
    let branches = pool.iter().filter(|k| k.kind == Kind::Name && k.key.iter().any(|w| w == "branch"));
    let files: Vec<&str> = {
        let mut f: Vec<&str> = pool
            .iter()
            .filter(|k| {
                k.kind == Kind::Name && k.key.iter().any(|w| w == "file") && !k.value.starts_with('/') && !k.value.contains(char::is_whitespace) && k.value.contains('.')
            })
            .map(|k| k.value.as_str())
            .collect();
        f.sort_unstable();
        f.dedup();
        f
    };
    branches
        .flat_map(|b| {
            files.iter().map(move |f| (Value::String(format!("{}:{f}", b.value)), Origin { call: b.origin.call, phrase: format!("the file {f} on {}", b.value) }))
        })
        .collect()
}

/// The optional arguments that bound a time window (`start_timestamp` and `end_timestamp`,
/// `since` and `until`), when a tool has both: a long history is then read a month at a time,
/// as a model shown only the first few thousand characters of a result must read it.
fn window_params(props: &[(String, Value)], required: &[String]) -> Option<(String, String)> {
    let timed = |name: &str, schema: &Value| {
        let said = schema.get("description").and_then(Value::as_str).unwrap_or("").to_ascii_lowercase();
        let w = param_words(name);
        w.iter().any(|x| ["date", "time", "timestamp", "since", "until"].contains(&x.as_str())) || said.contains("date") || said.contains("timestamp")
    };
    let find = |starts: &[&str]| {
        props
            .iter()
            .find(|(name, schema)| !required.contains(name) && timed(name, schema) && param_words(name).iter().any(|w| starts.contains(&w.as_str())))
            .map(|(n, _)| n.clone())
    };
    Some((find(&["start", "since", "after", "from"])?, find(&["end", "until", "before"])?))
}

/// The months (year, month) of the dates seen so far, in order.
fn months(pool: &[Known]) -> Vec<(u32, u32)> {
    let mut out: Vec<(u32, u32)> = pool
        .iter()
        .filter_map(|k| {
            let b = k.value.as_bytes();
            let dated = b.len() >= 10 && b[4] == b'-' && b[7] == b'-';
            dated.then(|| Some((k.value[..4].parse().ok()?, k.value[5..7].parse().ok()?))).flatten()
        })
        .filter(|(_, m)| (1..=12).contains(m))
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The windows a history is read in: every month from the first seen to the last (a month
/// between them with no date seen may still hold some), then everything before the first and
/// after the last, which a whole-history question needs to find empty ("before January 2024").
fn history_windows(seen: &[(u32, u32)]) -> Vec<(String, String, String)> {
    let (Some(&first), Some(&last)) = (seen.first(), seen.last()) else { return Vec::new() };
    // A span longer than this is read in the months seen only (no whole-history questions).
    let span = (last.0 * 12 + last.1).saturating_sub(first.0 * 12 + first.1) + 1;
    if span as usize > MAX_HISTORY_MONTHS {
        return seen.iter().map(|&(y, m)| month_window(y, m)).collect();
    }
    let next = |(y, m): (u32, u32)| if m == 12 { (y + 1, 1) } else { (y, m + 1) };
    let prev = |(y, m): (u32, u32)| if m == 1 { (y - 1, 12) } else { (y, m - 1) };
    let mut out = Vec::new();
    let mut at = first;
    while at <= last {
        out.push(month_window(at.0, at.1));
        at = next(at);
    }
    let (first_phrase, last_phrase) = (out[0].2.clone(), out[out.len() - 1].2.clone());
    let (before, after) = (prev(first), next(last));
    out.push((EPOCH_START.to_string(), month_window(before.0, before.1).1, first_phrase.replacen("in ", "before ", 1)));
    out.push((month_window(after.0, after.1).0, FAR_END.to_string(), last_phrase.replacen("in ", "after ", 1)));
    out
}

/// Months a history may span and still be read whole, a window each.
pub const MAX_HISTORY_MONTHS: usize = 8;
/// The bounds of the windows before the first month and after the last.
const EPOCH_START: &str = "1970-01-01T00:00:00";
const FAR_END: &str = "2999-12-31T23:59:59";

/// The months as questions name them.
pub const MONTH_NAMES: [&str; 12] = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];

/// A month's first and last second, as ISO 8601 (a date alone would be read by `git --until` as
/// that day at the current time of day), and how a question says it: "in January 2024".
fn month_window(year: u32, month: u32) -> (String, String, String) {
    let leap = year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400));
    let last = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    (format!("{year:04}-{month:02}-01T00:00:00"), format!("{year:04}-{month:02}-{last:02}T23:59:59"), format!("in {}", month_name(year, month)))
}

/// A month as questions and answers name it: "January 2024" (`month` from 1).
pub(crate) fn month_name(year: u32, month: u32) -> String {
    format!("{} {year}", MONTH_NAMES[month as usize - 1])
}

/// A call about to be made: tool, arguments, their origins, and the default of a limit argument
/// left out.
type Planned = (String, Map<String, Value>, Vec<(String, Origin)>, Option<usize>);

/// Walks the tools named in `readable` (the others are never called).
pub async fn walk<T: ToolHost>(host: &T, readable: &[String], seeds: &[String], budget: &Budget) -> Result<Walked, WalkError> {
    let started = Instant::now();
    let specs: Vec<&ToolSpec> = host.specs().iter().filter(|s| readable.iter().any(|r| r == s.name())).collect();
    let mut walked = Walked::default();
    // The seeds join after the tools that take no argument had their turn: a folder a server
    // lists itself is then found by asking it, and only what no tool shows is spelled out.
    let mut seeds: Vec<Known> = seeds
        .iter()
        .map(|s| {
            let kind = if std::path::Path::new(s).is_file() { Kind::File } else { Kind::Dir };
            Known { value: s.clone(), key: vec!["path".into()], kind, origin: Origin { call: None, phrase: s.clone() } }
        })
        .collect();
    let mut pool: Vec<Known> = Vec::new();
    let mut done: HashSet<(String, String, Vec<Option<usize>>)> = HashSet::new();
    let mut per_tool: HashMap<String, usize> = HashMap::new();
    loop {
        let mut wave: Vec<Planned> = Vec::new();
        for spec in &specs {
            let cap = budget.max_per_tool.saturating_sub(per_tool.get(spec.name()).copied().unwrap_or(0));
            for set in argument_sets(spec, &pool, &walked.roots, cap) {
                let args: Map<String, Value> = set.iter().map(|(k, v, _)| (k.clone(), v.clone())).collect();
                // The same arguments reached another way (a file found by a search after it was
                // reached folder by folder) make another call: its chain is another question.
                let via: Vec<Option<usize>> = set.iter().map(|(_, _, o)| o.call).collect();
                let key = (spec.name().to_string(), Value::Object(args.clone()).to_string(), via);
                let used = per_tool.entry(spec.name().to_string()).or_default();
                if *used >= budget.max_per_tool || done.contains(&key) {
                    continue;
                }
                done.insert(key);
                *used += 1;
                let limit_default = limit_default(spec, &args);
                wave.push((spec.name().to_string(), args, set.into_iter().map(|(k, _, o)| (k, o)).collect(), limit_default));
            }
        }
        if wave.is_empty() && !seeds.is_empty() {
            for k in seeds.drain(..) {
                if !pool.iter().any(|p| p.value == k.value) {
                    pool.push(k);
                }
            }
            continue;
        }
        if wave.is_empty() {
            break;
        }
        let room = budget.max_calls.saturating_sub(walked.calls.len());
        let out_of_time = started.elapsed() > budget.time;
        if wave.len() > room || out_of_time {
            walked.stopped_by_budget = true;
            wave.truncate(if out_of_time { 0 } else { room });
        }
        if wave.is_empty() {
            break;
        }
        let results: Vec<_> = futures::stream::iter(wave)
            .map(|(tool, args, origins, limit)| async move {
                let r = host.call(&tool, Value::Object(args.clone())).await;
                (tool, args, origins, limit, r)
            })
            .buffered(budget.concurrency.max(1))
            .collect()
            .await;
        for (tool, args, origins, limit, r) in results {
            let r = r.map_err(WalkError::Connection)?;
            let id = walked.calls.len();
            let (parsed, cut) = if r.is_error { (Parsed::default(), false) } else { seen(&r.text, budget.view) };
            let maybe_cut = limit.is_some_and(|n| parsed.listings.iter().any(|l| l.records.len() == n));
            let call = Call { id, tool, args, text: r.text, is_error: r.is_error, parsed, origins, maybe_cut, cut };
            if !call.is_error {
                learn(&call, &mut pool, &mut walked.roots);
            }
            walked.calls.push(call);
        }
    }
    walked.unstable = unstable(host, &walked, budget).await?;
    // Some fields change only now and then (a file's access time moves on its first read after a
    // day): their names say so.
    for c in &walked.calls {
        let keys = c.parsed.fields.keys().chain(c.parsed.listings.iter().flat_map(|l| l.records.iter().flat_map(|r| r.keys())));
        let volatile: Vec<String> = keys.filter(|k| is_volatile(k)).cloned().collect();
        if !volatile.is_empty() {
            walked.unstable.entry(c.tool.clone()).or_default().extend(volatile);
        }
    }
    walked.checked_out = checked_out(&walked.calls);
    tracing::info!(calls = walked.calls.len(), values = pool.len(), seconds = started.elapsed().as_secs_f64(), "walk done");
    Ok(walked)
}

/// The branch a repository has checked out, as a list of branches marks it ("* main",
/// [`crate::parse::CURRENT`]): what a log read without a revision is the history of. `None` when
/// no result marks one, or two mark different ones (several repositories).
fn checked_out(calls: &[Call]) -> Option<String> {
    let mut seen: Vec<&str> = calls.iter().filter(|c| !c.is_error).filter_map(|c| c.parsed.fields.get(crate::parse::CURRENT)?.as_str()).collect();
    seen.sort_unstable();
    seen.dedup();
    match seen.as_slice() {
        [one] => Some(one.to_string()),
        _ => None,
    }
}

/// The default of a limit argument `args` leaves out, if the tool has one.
fn limit_default(spec: &ToolSpec, args: &Map<String, Value>) -> Option<usize> {
    let (props, _) = params(spec);
    props
        .iter()
        .filter(|(k, _)| !args.contains_key(k) && param_words(k).iter().any(|w| LIMIT_WORDS.contains(&w.as_str())))
        .find_map(|(_, s)| s.get("default").and_then(Value::as_u64).map(|d| d as usize))
}

/// Adds what `call`'s result shows to the pool of values.
fn learn(call: &Call, pool: &mut Vec<Known>, roots: &mut Vec<String>) {
    let dir_arg = call.args.iter().find_map(|(k, v)| v.as_str().filter(|path| is_pathish(&param_words(k)) && path.starts_with('/')));
    // A value the server shows is found by asking it: it replaces the same value given as a
    // seed, so that chains start from the call that shows it, not from a path the model cannot
    // know.
    let add = |pool: &mut Vec<Known>, k: Known| match pool.iter_mut().find(|p| p.value == k.value && p.kind == k.kind) {
        Some(p) if p.origin.call.is_none() && k.origin.call.is_some() => p.origin = k.origin,
        Some(_) => {}
        None => pool.push(k),
    };
    // A text's own bullet points name nothing a tool takes.
    for listing in call.parsed.listings.iter().filter(|l| !is_text_list(&l.key)) {
        // Items of a result's only list are named by the tool ("git_branch": branches).
        let noun: Vec<String> = words(if listing.key.is_empty() { &call.tool } else { &listing.key });
        let label = label_field(&listing.records);
        for r in &listing.records {
            let name = r.get("name").and_then(Value::as_str);
            // A path of the server's own, shown without asking about one: a root.
            if call.args.is_empty()
                && let Some(p) = name.filter(|p| p.starts_with('/'))
            {
                roots.push(p.to_string());
                add(pool, Known { value: p.into(), key: vec!["path".into()], kind: Kind::Dir, origin: Origin { call: Some(call.id), phrase: p.into() } });
                continue;
            }
            // A path a search found: the file it names, called by the word searched for when
            // the search found only it ("the pancakes file").
            if let Some(p) = name.filter(|p| roots.iter().any(|root| p.starts_with(root.as_str())) && !call.args.is_empty()) {
                let leaf = p.rsplit('/').next().unwrap_or(p);
                let kind = if leaf.contains('.') { Kind::File } else { Kind::Dir };
                // The word searched for names the file only when it is a whole word of its name:
                // `**/*read*` finds reading-list.md, which no one calls "the read file".
                let word = call.args.values().filter_map(Value::as_str).find_map(glob_word).filter(|w| names_word(leaf, w));
                // Among several matches, one is told apart by its folder ("the itinerary file in
                // the lisbon folder").
                let parent = |path: &str| path.rsplit('/').nth(1).map(String::from);
                let matches: Vec<&str> = listing.records.iter().filter_map(|r| r.get("name").and_then(Value::as_str)).collect();
                let alone_in_folder = matches.iter().filter(|m| parent(m) == parent(p)).count() == 1;
                // A month is written as people write it ("the April file"), while the pattern
                // that finds it keeps the name's case (`**/*april*`).
                let word = word.map(|w| MONTH_NAMES.iter().find(|m| m.eq_ignore_ascii_case(w)).map_or(w.to_string(), |m| m.to_string()));
                let phrase = match (word, parent(p)) {
                    (Some(w), _) if matches.len() == 1 && kind == Kind::File => format!("the {w} file"),
                    (Some(w), Some(folder)) if alone_in_folder && kind == Kind::File && !roots.iter().any(|r| r.ends_with(&format!("/{folder}"))) => {
                        format!("the {w} file in the {folder} folder")
                    }
                    _ => p.to_string(),
                };
                let found = Known { value: p.into(), key: vec!["path".into()], kind, origin: Origin { call: Some(call.id), phrase } };
                // A file found by name is asked about as found from now on; the calls made
                // before reached it folder by folder, so traces show both ways to a file.
                let by_name = found.origin.phrase != p;
                match pool.iter_mut().find(|k| k.value == p && k.kind == kind) {
                    Some(k) if by_name => *k = found,
                    Some(_) => {}
                    None => pool.push(found),
                }
                continue;
            }
            if let (Some(dir), Some(kind)) = (dir_arg, entry_kind(r)) {
                let rel = r.get("path").and_then(Value::as_str).or(name);
                if let Some(rel) = rel {
                    let path = format!("{}/{rel}", dir.trim_end_matches('/'));
                    add(pool, Known { value: path.clone(), key: vec!["path".into()], kind, origin: Origin { call: Some(call.id), phrase: path } });
                }
                continue;
            }
            for (k, v) in r {
                let Some(s) = v.as_str() else { continue };
                let is_id = is_hex_id(s) && s.len() <= 64;
                let kind = if is_id { Kind::Id } else { Kind::Name };
                if kind == Kind::Name && (s.len() > 80 || s.contains('\n')) {
                    continue;
                }
                let phrase = match (kind, label.as_ref().and_then(|l| r.get(l)).and_then(Value::as_str)) {
                    (Kind::Id, Some(l)) if l != s => format!("the {} {}", singular(&ta_synth::names::human(k)), crate::ask::quoted(l)),
                    _ => s.to_string(),
                };
                let mut key = words(k);
                key.extend(noun.iter().cloned());
                add(pool, Known { value: s.to_string(), key, kind, origin: Origin { call: Some(call.id), phrase } });
            }
        }
    }
}

/// The word a glob pattern looks for in names: `**/*pancakes*` → `pancakes`.
pub fn glob_word(pattern: &str) -> Option<&str> {
    let w = pattern.strip_prefix("**/*")?.strip_suffix('*')?;
    (!w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric())).then_some(w)
}

/// Whether `word` is a whole word of the file name `leaf`: "pancakes" of `pancakes.md` and
/// "bread" of `banana-bread.md`, not "read" of `reading-list.md`.
fn names_word(leaf: &str, word: &str) -> bool {
    let stem = leaf.rsplit_once('.').map_or(leaf, |(stem, _)| stem);
    stem.split(|c: char| !c.is_ascii_alphabetic()).any(|w| w.eq_ignore_ascii_case(word))
}

/// The extension a glob pattern looks for: `**/*.md` → `md`.
pub fn glob_extension(pattern: &str) -> Option<&str> {
    let e = pattern.strip_prefix("**/*.")?;
    (!e.is_empty() && e.chars().all(|c| c.is_ascii_alphanumeric())).then_some(e)
}

/// Whether a record is a file or a folder entry, from its `kind`/`type` tag.
pub fn entry_kind(r: &Record) -> Option<Kind> {
    let tag = r.get("kind").or_else(|| r.get("type")).and_then(Value::as_str)?.to_ascii_lowercase();
    match tag.as_str() {
        "dir" | "directory" | "folder" => Some(Kind::Dir),
        "file" => Some(Kind::File),
        _ => None,
    }
}

/// The field that names an item the way a person recognises it: a name, title or message,
/// else a path, else the first text field.
pub fn label_field(records: &[Record]) -> Option<String> {
    let first = records.first()?;
    let text_keys: Vec<&String> = first.keys().filter(|k| records.iter().all(|r| r.get(*k).is_some_and(Value::is_string))).collect();
    for want in ["name", "title", "message", "subject", "summary", "path", "label"] {
        if let Some(k) = text_keys.iter().find(|k| k.eq_ignore_ascii_case(want)) {
            return Some((*k).clone());
        }
    }
    text_keys.first().map(|k| (*k).clone())
}

/// Fields that change between two identical calls: the first two calls of each tool are made
/// again and their results compared.
async fn unstable<T: ToolHost>(host: &T, walked: &Walked, budget: &Budget) -> Result<HashMap<String, HashSet<String>>, WalkError> {
    let mut picked: Vec<&Call> = Vec::new();
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for c in walked.calls.iter().filter(|c| !c.is_error) {
        let n = seen.entry(c.tool.as_str()).or_default();
        if *n < 2 {
            *n += 1;
            picked.push(c);
        }
    }
    let again: Vec<_> = futures::stream::iter(picked)
        .map(|c| async move { (c, host.call(&c.tool, Value::Object(c.args.clone())).await) })
        .buffered(budget.concurrency.max(1))
        .collect()
        .await;
    let mut out: HashMap<String, HashSet<String>> = HashMap::new();
    for (c, r) in again {
        let r = r.map_err(WalkError::Connection)?;
        let (p, _) = crate::parse::seen(&r.text, budget.view);
        out.entry(c.tool.clone()).or_default().extend(c.parsed.changed(&p));
    }
    out.retain(|_, s| !s.is_empty());
    Ok(out)
}

/// Words in a field's name that say its value moves on by itself: access times, the time now,
/// request ids, random values.
const VOLATILE_WORDS: &[&str] = &["accessed", "access", "atime", "now", "uptime", "elapsed", "request", "nonce", "random", "uuid"];

fn is_volatile(field: &str) -> bool {
    words(field).iter().any(|w| VOLATILE_WORDS.contains(&w.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn known(value: &str, key: &[&str], kind: Kind, call: usize) -> Known {
        Known { value: value.into(), key: key.iter().map(|k| k.to_string()).collect(), kind, origin: Origin { call: Some(call), phrase: value.into() } }
    }

    #[test]
    fn the_checked_out_branch_is_the_one_every_branch_list_marks() {
        let call = |id: usize, text: &str| Call {
            id,
            tool: "git_branch".into(),
            args: Map::new(),
            text: text.into(),
            is_error: false,
            parsed: crate::parse::parse(text),
            origins: Vec::new(),
            maybe_cut: false,
            cut: false,
        };
        let one = call(0, "  fix/pager\n* main");
        assert_eq!(checked_out(&[one.clone(), call(1, "* main\n  docs")]), Some("main".into()));
        assert_eq!(checked_out(&[one.clone(), call(1, "* dev\n  main")]), None, "two repositories");
        assert_eq!(checked_out(&[call(0, "fix/pager\nmain")]), None, "no mark");
    }

    #[test]
    fn a_history_is_read_in_every_month_between_and_around_the_dates_seen() {
        let w = history_windows(&[(2023, 12), (2024, 2)]);
        let phrases: Vec<&str> = w.iter().map(|(_, _, p)| p.as_str()).collect();
        assert_eq!(phrases, ["in December 2023", "in January 2024", "in February 2024", "before December 2023", "after February 2024"]);
        assert_eq!((w[3].0.as_str(), w[3].1.as_str()), (EPOCH_START, "2023-11-30T23:59:59"));
        assert_eq!((w[4].0.as_str(), w[4].1.as_str()), ("2024-03-01T00:00:00", FAR_END));
        // Too long a span: the months seen only, and no windows around them.
        let long = history_windows(&[(2020, 1), (2024, 2)]);
        assert_eq!(long.iter().map(|(_, _, p)| p.as_str()).collect::<Vec<_>>(), ["in January 2020", "in February 2024"]);
        assert!(history_windows(&[]).is_empty());
    }

    #[test]
    fn glob_patterns_come_from_the_files_seen() {
        let pool = [
            known("/w/recipes/pancakes.md", &["path"], Kind::File, 1),
            known("/w/notes/2024 kickoff.md", &["path"], Kind::File, 1),
            known("/w/notes", &["path"], Kind::Dir, 1),
        ];
        let patterns: Vec<Value> = globs(&pool).into_iter().map(|(v, _)| v).collect();
        assert_eq!(patterns, [json!("**/*.md"), json!("**/*pancakes*"), json!("**/*kickoff*")], "folders and short words give none");
        assert_eq!((glob_word("**/*pancakes*"), glob_extension("**/*.md")), (Some("pancakes"), Some("md")));
        assert_eq!((glob_word("**/*.md"), glob_extension("*.md")), (None, None));
        assert!(names_word("banana-bread.md", "bread") && names_word("pancakes.md", "Pancakes") && names_word("README", "readme"));
        assert!(!names_word("reading-list.md", "read") && !names_word("readings-april.csv", "reading"), "a word of the name, not a part of one");
        assert!(takes_glob("pattern", &json!({"type": "string"}), "Use glob-style patterns like '*.ext'"));
        assert!(!takes_glob("pattern", &json!({"type": "string"}), "A regular expression"));
    }

    #[test]
    fn a_history_is_read_a_month_at_a_time() {
        let log = json!({"start_timestamp": {"anyOf": [{"type": "string"}, {"type": "null"}], "description": "Start timestamp for filtering commits"},
                         "end_timestamp": {"anyOf": [{"type": "string"}, {"type": "null"}], "description": "End timestamp for filtering commits"},
                         "max_count": {"type": "integer", "default": 10}});
        let props: Vec<(String, Value)> = log.as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(window_params(&props, &[]), Some(("start_timestamp".into(), "end_timestamp".into())));
        assert_eq!(window_params(&props, &["start_timestamp".into()]), None, "a required bound is not a window");
        let pool =
            [known("2024-02-10 09:00:00+00:00", &["date"], Kind::Name, 0), known("2024-02-01", &["date"], Kind::Name, 0), known("2023-12-31", &["date"], Kind::Name, 0)];
        assert_eq!(months(&pool), [(2023, 12), (2024, 2)]);
        assert_eq!(month_window(2024, 2), ("2024-02-01T00:00:00".into(), "2024-02-29T23:59:59".into(), "in February 2024".into()));
        assert_eq!(month_window(2023, 2).1, "2023-02-28T23:59:59");
    }

    #[test]
    fn branches_are_asked_which_commits_they_contain() {
        assert_eq!((membership("contains"), membership("not_contains"), membership("repo_path")), (Some(false), Some(true), None));
        let pool = [
            known("fix/pager", &["name", "git", "branch"], Kind::Name, 2),
            Known { value: "0881e64e".into(), key: vec!["commit".into()], kind: Kind::Id, origin: Origin { call: Some(4), phrase: "the commit \"Add search\"".into() } },
            known("0badcafe", &["commit"], Kind::Id, 5),
        ];
        let got: Vec<(Value, Origin)> = revisions(&pool);
        assert_eq!(
            got,
            [
                (json!("fix/pager"), Origin { call: Some(2), phrase: "the latest commit on fix/pager".into() }),
                (json!("0881e64e"), Origin { call: Some(4), phrase: "the commit \"Add search\"".into() }),
            ],
            "a commit is asked about by its message, never by its bare hash"
        );
    }

    #[test]
    fn files_as_each_branch_has_them() {
        let pool = [
            known("main", &["name", "git", "branch"], Kind::Name, 3),
            known("setup.cfg", &["file", "changed", "files"], Kind::Name, 5),
            known("Alice Moreau", &["author"], Kind::Name, 1),
        ];
        let got: Vec<(Value, Origin)> = files_on_branches(&pool);
        assert_eq!(got, [(json!("main:setup.cfg"), Origin { call: Some(3), phrase: "the file setup.cfg on main".into() })], "the branch's call is the chain");
    }
}
