//! A tool's text result read as data. Servers answer in JSON, in `Key: value` blocks (one block
//! per item, as `git_log` prints commits), in tagged lines (`[FILE] notes.md  1.2 KB`) or in bare
//! lines (branch names, paths); anything else is prose, kept as lines. One reader for all of
//! them, so the walk asks the same kinds of questions of every server.

use std::collections::HashSet;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Number, Value};

/// One item of a list: its scalar fields by name (JSON paths joined with `.`).
pub type Record = Map<String, Value>;

/// The field a file entry gets from its name's extension (`md` for `notes.md`): people ask
/// for "the Markdown files", "the CSVs".
pub const EXTENSION: &str = "extension";

/// The field a tree's file gets from the folder at the tree's top that holds it (`weather-station`
/// for `weather-station/src/read_sensor.py`): "Which project has the most files, counting its
/// subfolders?" tallies by it. Never asked about itself ([`crate::ask::askable`]).
pub const TOP_FOLDER: &str = "top_folder";

fn add_extension(r: &mut Record) {
    if let Some(ext) = r.get("name").and_then(Value::as_str).and_then(extension_of) {
        r.insert(EXTENSION.into(), Value::String(ext));
    }
}

/// The extension of a file name or path's last part, lower case (`md` for `notes/Todo.MD`).
pub fn extension_of(name: &str) -> Option<String> {
    let leaf = name.rsplit('/').next().unwrap_or(name);
    let (stem, ext) = leaf.rsplit_once('.')?;
    (!stem.is_empty() && !ext.is_empty() && ext.len() <= 5 && ext.chars().all(|c| c.is_ascii_alphanumeric())).then(|| ext.to_ascii_lowercase())
}

/// The [`Listing::key`] of the files a diff changes.
pub const CHANGED_FILES: &str = "changed files";

/// The field an indented paragraph after a `Key: value` block becomes (a commit's message).
pub const MESSAGE: &str = "message";

/// The field naming the item a list of bare names marks with `* ` (`git branch`'s checked-out
/// branch).
pub const CURRENT: &str = "current";

/// The [`Listing::key`] of a CSV text's rows.
pub const ROWS: &str = "rows";

/// The [`Listing::key`] of a text's bullet points (`- eggs`), and of its to-do items (`- [ ]
/// eggs`, `- [x] milk`), whose [`TICKED`] field says which are done. People count and list them
/// ("How many things on my to-do list haven't I ticked off yet?"); the text's lines stay
/// [`Parsed::lines`] as well.
pub const BULLETS: &str = "bullet points";
pub const TODOS: &str = "to-do items";
/// A to-do item's field: `ticked` or `unticked`.
pub const TICKED: &str = "ticked";

/// Whether a listing holds the items of a text's own lists ([`BULLETS`], [`TODOS`]) rather than
/// what a tool lists: the text's lines and title are still asked about.
pub fn is_text_list(key: &str) -> bool {
    key == BULLETS || key == TODOS || key == SECTIONS
}

/// The [`Listing::key`] of a Markdown text's sections (its `## ` headings), when it has two or
/// more: "List the sections of the file CHANGELOG.md on main" (its releases).
pub const SECTIONS: &str = "sections";

/// The lines a diff adds and removes, without their signs.
pub type DiffLines = (Vec<String>, Vec<String>);

/// A list of items in a result; `key` names it where the result holds several (`entities`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Listing {
    pub key: String,
    pub records: Vec<Record>,
}

/// What a result holds.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Parsed {
    /// Single values: `key: value` lines of one block, a JSON object's scalar fields.
    pub fields: Record,
    pub listings: Vec<Listing>,
    /// Lines of prose or file contents (headers and item lists excluded).
    pub lines: Vec<String>,
    /// Every line of the text as a person counts them, blank ones included (`wc -l`, or one
    /// more when the last line has no newline); 0 for JSON. [`Parsed::lines`] leaves out blank
    /// lines, headers and `key: value` pairs, so it is no answer to "how many lines".
    pub line_count: usize,
    /// The lines a unified diff adds and removes (`x` of `+x`, `y` of `-y`; the `+++`/`---`
    /// headers are none), when the result holds one: "How many lines did the commit … add?"
    pub diff_lines: Option<DiffLines>,
}

impl Parsed {
    /// The items of the list named `key` (`""` for the result's main list).
    pub fn records(&self, key: &str) -> Option<&[Record]> {
        self.listings.iter().find(|l| l.key == key).map(|l| l.records.as_slice())
    }

    /// The fields whose values differ between `self` and `other` (single fields, and the fields
    /// of items at the same place in lists at the same place), with [`LINES`] when the prose
    /// lines differ: for two results of one call, what moves by itself (an access time).
    pub fn changed(&self, other: &Parsed) -> HashSet<String> {
        let mut out: HashSet<String> = HashSet::new();
        let differ = |a: &Record, b: &Record, out: &mut HashSet<String>| {
            out.extend(a.iter().filter(|(k, v)| b.get(*k) != Some(*v)).map(|(k, _)| k.clone()));
            out.extend(b.keys().filter(|k| !a.contains_key(*k)).cloned());
        };
        differ(&self.fields, &other.fields, &mut out);
        for (a, b) in self.listings.iter().zip(&other.listings) {
            for (ra, rb) in a.records.iter().zip(&b.records) {
                differ(ra, rb, &mut out);
            }
        }
        if self.lines != other.lines {
            out.insert(LINES.into());
        }
        out
    }

    /// Whether `self` holds the same data as `other` but for the `volatile` fields: the same
    /// lists with as many items, and every other field, line and count equal.
    pub fn same_but(&self, other: &Parsed, volatile: &HashSet<String>) -> bool {
        let shape = |p: &Parsed| p.listings.iter().map(|l| (l.key.clone(), l.records.len())).collect::<Vec<_>>();
        shape(self) == shape(other)
            && (self.line_count == other.line_count || volatile.contains(LINES))
            && self.diff_lines == other.diff_lines
            && self.changed(other).is_subset(volatile)
    }
}

/// The name [`Parsed::changed`] gives a result's prose lines.
pub const LINES: &str = "(lines)";

/// Whether a result the model was shown, `seen`, still holds on a server started afresh: `fresh`
/// and `again` are two results of the same call there, and what differs between them (an access
/// time, a request id) may differ from `seen` too; nothing else may.
pub fn same_data(seen: &str, fresh: &str, again: &str) -> bool {
    if seen == fresh {
        return true;
    }
    let (fresh, again) = (parse(fresh), parse(again));
    parse(seen).same_but(&fresh, &fresh.changed(&again))
}

static TAGGED: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^\[([A-Za-z]+)\]\s+(.+?)(?:\s{2,}(\S.*))?$").expect("valid"));
/// `Key: value`, and `key = value` as configuration files write it (`version = 0.3.0`).
static KEY_VALUE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^([A-Za-z][A-Za-z0-9 _-]{0,40}?)\s*(?::|\s=)(?:\s+(.*))?$").expect("valid"));
/// A Markdown bullet, with or without a check box: `- eggs`, `* [x] milk`.
static BULLET: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^[-*+]\s+(?:\[([ xX])\]\s+)?(\S.*)$").expect("valid"));
/// `Name <address>`, as git writes an author.
static NAME_EMAIL: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^(\S.*?)\s+<([^<>@\s]+@[^<>@\s]+)>$").expect("valid"));
static SIZE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^(\d+(?:\.\d+)?)\s*(B|KB|MB|GB|TB)$").expect("valid"));

/// Reads `text` as data.
pub fn parse(text: &str) -> Parsed {
    let trimmed = text.trim();
    if let Ok(v) = serde_json::from_str::<Value>(trimmed)
        && (v.is_object() || v.is_array())
    {
        return from_json(&v);
    }
    Parsed { line_count: text.lines().count(), ..from_text(trimmed) }
}

/// What a model is shown of `text`, read as data, when tool results are cut at `view`
/// characters (the rollouts' `tool_result_max_chars`), and whether it was cut. The walk asks
/// about this and takes values from it, never from what lies beyond the cut: a question whose
/// answer the model cannot see teaches it to guess. A cut text gives what its whole items hold:
/// read up to its last complete block (items of several `Key: value` lines) or up to its last
/// complete line (items of one line), whichever shows more items. A JSON text gives what closed
/// before the cut ([`json_prefix`]).
pub fn seen(text: &str, view: usize) -> (Parsed, bool) {
    if text.chars().count() <= view {
        return (parse(text), false);
    }
    let shown: String = text.chars().take(view).collect();
    if serde_json::from_str::<Value>(text.trim()).is_ok_and(|v| v.is_object() || v.is_array()) {
        return (json_prefix(&shown).map(|v| from_json(&v)).unwrap_or_default(), true);
    }
    let upto = |sep: &str| parse(shown.rsplit_once(sep).map_or("", |(head, _)| head));
    let items = |p: &Parsed| p.listings.iter().map(|l| l.records.len()).sum::<usize>();
    let (blocks, lines) = (upto("\n\n"), upto("\n"));
    (if items(&blocks) >= items(&lines) { blocks } else { lines }, true)
}

/// The JSON a cut JSON text still shows whole: everything up to the last object or array that
/// closed inside an outer one, with the outer ones closed after it (`{"entities": [{...}, {..`
/// gives `{"entities": [{...}]}`). `None` when no inner value closed before the cut.
fn json_prefix(shown: &str) -> Option<Value> {
    let mut open: Vec<char> = Vec::new();
    let (mut in_string, mut escaped) = (false, false);
    // Where the last inner value closed, and the closers still open there.
    let mut last: Option<(usize, Vec<char>)> = None;
    for (i, ch) in shown.char_indices() {
        if in_string {
            match (escaped, ch) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match ch {
            '"' => in_string = true,
            '{' => open.push('}'),
            '[' => open.push(']'),
            '}' | ']' => {
                open.pop();
                if !open.is_empty() {
                    last = Some((i + 1, open.clone()));
                }
            }
            _ => {}
        }
    }
    let (end, closers) = last?;
    let closed: String = shown[..end].chars().chain(closers.into_iter().rev()).collect();
    serde_json::from_str(&closed).ok()
}

/// Whether a text looks like a generated id (a commit hash, a UUID without dashes): seven or
/// more hexadecimal digits and nothing else. Such values fill id arguments, name nothing a
/// person would ask about, and mark the field that names a list's items.
pub fn is_hex_id(s: &str) -> bool {
    s.len() >= 7 && s.chars().all(|c| c.is_ascii_hexdigit())
}

/// A size with a unit (`14 B`, `2.77 KB`) in bytes. Above bytes it is rounded as shown
/// (`2.77 KB` is 2,832 to 2,842 bytes), which orders sizes but answers no "how many bytes".
pub fn size_bytes(s: &str) -> Option<f64> {
    let c = SIZE.captures(s.trim())?;
    let x: f64 = c[1].parse().ok()?;
    let unit = ["B", "KB", "MB", "GB", "TB"].iter().position(|u| *u == &c[2])? as i32;
    Some(x * 1024f64.powi(unit))
}

/// A text value as the JSON it stands for: numbers, booleans, sizes in bytes (`14 B`) as
/// numbers. A size in a larger unit stays the text it is (`2.77 KB`): the bytes it stands for
/// are not known to the byte, and people answer it as shown.
pub fn scalar(s: &str) -> Value {
    let s = s.trim();
    if let Ok(i) = s.parse::<i64>() {
        return Value::from(i);
    }
    if let Some(n) = s.parse::<f64>().ok().filter(|x| x.is_finite()).and_then(Number::from_f64) {
        return Value::Number(n);
    }
    if let Some(c) = SIZE.captures(s)
        && &c[2] == "B"
        && let Ok(bytes) = c[1].parse::<i64>()
    {
        return Value::from(bytes);
    }
    match s {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        _ => Value::String(s.to_string()),
    }
}

/// A `key: value` pair as fields: `Author: Ann Lee <ann@x.org>` is the author `Ann Lee` and the
/// `Author email` `ann@x.org`, asked about apart ("Who wrote …?", "What email address does …
/// use?").
fn person(k: String, v: &str) -> Vec<(String, Value)> {
    match NAME_EMAIL.captures(v) {
        Some(c) => vec![(format!("{k} email"), Value::String(c[2].to_string())), (k, Value::String(c[1].to_string()))],
        None => vec![(k, scalar(v))],
    }
}

/// The text before a unified diff (`diff --git`, `--- a/`/`+++ b/` headers), the files the
/// diff changes, each once, in order, and the lines it adds and removes.
fn split_diff(text: &str) -> (String, Vec<Record>, Option<DiffLines>) {
    let start = text.lines().position(|l| l.starts_with("diff --git ") || l.starts_with("--- a/") || l.starts_with("--- /dev/null"));
    let Some(start) = start else { return (text.to_string(), Vec::new(), None) };
    let (mut added, mut removed) = (Vec::new(), Vec::new());
    let mut files: Vec<String> = Vec::new();
    let mut old: Option<&str> = None;
    for l in text.lines().skip(start) {
        if let Some(p) = l.strip_prefix("--- ") {
            old = p.strip_prefix("a/");
        } else if let Some(p) = l.strip_prefix("+++ ") {
            let file = p.strip_prefix("b/").or(old);
            if let Some(f) = file.filter(|f| !files.iter().any(|x| x == f)) {
                files.push(f.to_string());
            }
        } else if let Some(line) = l.strip_prefix('+') {
            added.push(line.to_string());
        } else if let Some(line) = l.strip_prefix('-') {
            removed.push(line.to_string());
        }
    }
    let head = text.lines().take(start).collect::<Vec<_>>().join("\n");
    (head, files.into_iter().map(|f| Record::from_iter([("file".to_string(), Value::String(f))])).collect(), Some((added, removed)))
}

/// A CSV or TSV text (a header and at least two rows, every line with the header's number of
/// cells) as its rows.
fn table(text: &str) -> Option<Vec<Record>> {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.len() < 3 {
        return None;
    }
    let sep = ['\t', ','].into_iter().find(|c| lines[0].contains(*c))?;
    let header: Vec<&str> = lines[0].split(sep).map(str::trim).collect();
    let unique: std::collections::HashSet<&&str> = header.iter().collect();
    if header.len() < 2 || unique.len() != header.len() || header.iter().any(|h| h.is_empty() || h.parse::<f64>().is_ok()) {
        return None;
    }
    lines[1..]
        .iter()
        .map(|l| {
            let cells: Vec<&str> = l.split(sep).collect();
            (cells.len() == header.len()).then(|| header.iter().zip(cells).map(|(h, c)| (h.to_string(), scalar(c))).collect())
        })
        .collect()
}

fn from_text(text: &str) -> Parsed {
    let mut out = Parsed::default();
    if let Some(rows) = table(text) {
        out.listings.push(Listing { key: ROWS.into(), records: rows });
        return out;
    }
    let (text, files, diff_lines) = split_diff(text);
    out.diff_lines = diff_lines;
    if !files.is_empty() {
        out.listings.push(Listing { key: CHANGED_FILES.into(), records: files });
    }
    let text = text.as_str();
    let mut blocks: Vec<Record> = Vec::new();
    let mut items: Vec<Record> = Vec::new();
    let mut bare: Vec<String> = Vec::new();
    let mut starred: Vec<String> = Vec::new();
    for raw in text.split("\n\n") {
        let block = raw.trim();
        if block.is_empty() {
            continue;
        }
        let lines: Vec<&str> = block.lines().map(str::trim_end).filter(|l| !l.trim().is_empty()).collect();
        // An indented paragraph right after a lone `Key: value` block is its message, as `git
        // show` prints a commit.
        let indented = raw.trim_matches('\n').lines().all(|l| l.starts_with("    ") || l.trim().is_empty());
        if indented && blocks.len() == 1 && items.is_empty() && !blocks[0].contains_key(MESSAGE) {
            let message: Vec<&str> = lines.iter().map(|l| l.trim()).collect();
            blocks[0].insert(MESSAGE.into(), Value::String(message.join(" ")));
            continue;
        }
        let tagged: Vec<_> = lines.iter().filter_map(|l| TAGGED.captures(l.trim())).collect();
        if tagged.len() == lines.len() {
            for c in tagged {
                let mut r = Record::new();
                r.insert("kind".into(), Value::String(c[1].to_lowercase()));
                r.insert("name".into(), Value::String(c[2].trim().to_string()));
                if c[1].eq_ignore_ascii_case("file") {
                    add_extension(&mut r);
                }
                if let Some(rest) = c.get(3) {
                    r.insert("size".into(), scalar(rest.as_str()));
                }
                items.push(r);
            }
            continue;
        }
        let pairs: Vec<(String, String)> = lines
            .iter()
            .filter_map(|l| KEY_VALUE.captures(l.trim()))
            .filter_map(|c| c.get(2).map(|v| (c[1].trim().to_string(), v.as_str().trim().to_string())))
            .filter(|(_, v)| !v.is_empty())
            .collect();
        let headers = lines.iter().filter(|l| l.trim_end().ends_with(':')).count();
        if pairs.len() >= 2 && pairs.len() * 3 >= (lines.len() - headers) * 2 {
            blocks.push(pairs.into_iter().flat_map(|(k, v)| person(k, &v)).collect());
            continue;
        }
        for l in lines.iter().filter(|l| !l.trim_end().ends_with(':')) {
            let t = l.trim();
            out.lines.push(t.to_string());
            if let Some(name) = t.strip_prefix("* ") {
                starred.push(name.to_string());
            }
            bare.push(t.trim_start_matches("* ").to_string());
        }
    }
    // Blocks with the same keys are the items of a list; a lone block is the result's fields.
    let same_keys = blocks.len() >= 2 && blocks.iter().all(|b| b.keys().eq(blocks[0].keys()));
    if same_keys {
        items.extend(blocks);
    } else {
        blocks.into_iter().for_each(|b| out.fields.extend(b));
    }
    // Bare lines without spaces (names, ids) or absolute paths (which may hold spaces) are a
    // list too, when nothing else is.
    // A line that says something about a path (`/w/iceland: Error - EISDIR: …`) is no path.
    let item = |l: &String| l.len() <= 200 && (l.starts_with('/') && !l.contains(": ") || !l.contains(char::is_whitespace) && !l.contains(','));
    if items.is_empty() && !bare.is_empty() && bare.iter().all(item) {
        items = bare.into_iter().map(|l| Record::from_iter([("name".to_string(), Value::String(l))])).collect();
        out.lines.clear();
        if let [one] = starred.as_slice()
            && items.len() >= 2
        {
            out.fields.insert(CURRENT.into(), Value::String(one.clone()));
        }
    }
    if !items.is_empty() {
        out.listings.push(Listing { key: String::new(), records: items });
    }
    out.listings.extend(bullets(&out.lines));
    let sections: Vec<Record> =
        out.lines.iter().filter_map(|l| l.strip_prefix("## ")).map(|h| Record::from_iter([("name".to_string(), Value::String(h.trim().to_string()))])).collect();
    if sections.len() >= 2 {
        out.listings.push(Listing { key: SECTIONS.into(), records: sections });
    }
    out
}

/// The bullet points of a text's lines, when it has two or more: to-do items when every one has a
/// check box.
fn bullets(lines: &[String]) -> Option<Listing> {
    let found: Vec<_> = lines.iter().filter_map(|l| BULLET.captures(l)).collect();
    if found.len() < 2 {
        return None;
    }
    let todo = found.iter().all(|c| c.get(1).is_some());
    let records = found
        .iter()
        .map(|c| {
            let mut r = Record::from_iter([("name".to_string(), Value::String(c[2].trim().to_string()))]);
            if todo {
                r.insert(TICKED.into(), Value::String(if &c[1] == " " { "unticked" } else { "ticked" }.into()));
            }
            r
        })
        .collect();
    Some(Listing { key: if todo { TODOS } else { BULLETS }.into(), records })
}

fn from_json(v: &Value) -> Parsed {
    let mut out = Parsed::default();
    match v {
        Value::Array(a) => {
            if let Some(records) = records_of(a) {
                out.listings.push(Listing { key: String::new(), records });
            }
        }
        Value::Object(o) => object_into(o, "", &mut out),
        _ => {}
    }
    out
}

fn object_into(o: &Map<String, Value>, prefix: &str, out: &mut Parsed) {
    for (k, v) in o {
        let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
        match v {
            Value::Object(inner) => object_into(inner, &key, out),
            Value::Array(a) => {
                if let Some(records) = records_of(a) {
                    out.listings.push(Listing { key, records });
                }
            }
            scalar => {
                out.fields.insert(key, scalar.clone());
            }
        }
    }
}

/// The records of a JSON array: objects (trees flattened, each node with its `path`), or bare
/// strings and numbers as `name`s. `None` for an empty or mixed array.
fn records_of(a: &[Value]) -> Option<Vec<Record>> {
    if a.is_empty() {
        return None;
    }
    if a.iter().all(Value::is_object) {
        let mut out = Vec::new();
        flatten(a, "", &mut out);
        return Some(out);
    }
    if a.iter().all(|x| x.is_string() || x.is_number()) {
        return Some(a.iter().map(|x| Record::from_iter([("name".to_string(), x.clone())])).collect());
    }
    None
}

/// A node's field that holds its children: a non-empty array of objects.
fn children_in(v: &Value) -> Option<&Vec<Value>> {
    v.as_array().filter(|c| !c.is_empty() && c.iter().all(Value::is_object))
}

/// Nodes of a tree (objects whose array field holds objects like them) as one list.
fn flatten(nodes: &[Value], parent: &str, out: &mut Vec<Record>) {
    // Every item of a tree has its path, those at its top too (their name): a list of a tree's
    // files names each by path, as two folders may hold files of one name.
    let is_tree = !parent.is_empty() || nodes.iter().filter_map(Value::as_object).any(|n| n.values().any(|v| children_in(v).is_some()));
    for node in nodes.iter().filter_map(Value::as_object) {
        let mut r = Record::new();
        let mut children: Option<&Vec<Value>> = None;
        for (k, v) in node {
            match (v, children_in(v)) {
                (_, Some(c)) => children = Some(c),
                (Value::Object(_) | Value::Array(_), None) => {}
                (scalar, None) => {
                    r.insert(k.clone(), scalar.clone());
                }
            }
            if let Value::Array(items) = v
                && items.iter().all(|x| !x.is_object())
            {
                r.insert(format!("{k}.count"), Value::from(items.len()));
            }
        }
        let name = r.get("name").and_then(Value::as_str).map(String::from);
        let path = match (&name, parent) {
            (Some(n), "") => n.clone(),
            (Some(n), p) => format!("{p}/{n}"),
            (None, p) => p.to_string(),
        };
        if r.get("type").and_then(Value::as_str) == Some("file") {
            add_extension(&mut r);
            if let Some((top, _)) = path.split_once('/') {
                r.insert(TOP_FOLDER.into(), Value::String(top.into()));
            }
        }
        if is_tree && name.is_some() {
            r.insert("path".into(), Value::String(path.clone()));
        }
        out.push(r);
        if let Some(c) = children {
            flatten(c, &path, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_result_holds_on_a_fresh_server_when_only_what_moves_by_itself_differs() {
        let info = |size: u32, accessed: &str| format!("size: {size}\ncreated: 2024-03-01\naccessed: {accessed}\n");
        let seen = info(120, "Mon 10:00:01");
        // An access time moves between the fresh server's two calls: it may differ from the seen one.
        assert!(same_data(&seen, &info(120, "Mon 10:05:07"), &info(120, "Mon 10:05:09")));
        // A size that changed is a different state, whatever the access time does.
        assert!(!same_data(&seen, &info(121, "Mon 10:05:07"), &info(121, "Mon 10:05:09")));
        // Without a second opinion nothing may differ.
        assert!(!same_data(&seen, &info(120, "Mon 10:05:07"), &info(120, "Mon 10:05:07")));
        // A list with one item more is another state although every shared item agrees.
        let list = |items: &[&str]| json!({ "entries": items.iter().map(|n| json!({"name": n, "id": format!("{n}-{}", n.len())})).collect::<Vec<_>>() }).to_string();
        assert!(same_data(&list(&["a", "b"]), &list(&["a", "b"]), &list(&["a", "b"])));
        assert!(!same_data(&list(&["a", "b"]), &list(&["a", "b", "c"]), &list(&["a", "b", "c"])));
        assert!(!same_data("Paris is the capital.\n", "Lyon is the capital.\n", "Lyon is the capital.\n"));
    }

    #[test]
    fn a_texts_bullet_points_and_to_do_items_are_lists_beside_its_lines() {
        let notes = parse("# March\n\n- Bought a bike\n- Fixed the sink\n\nA quiet month.\n");
        assert_eq!(notes.listings.len(), 1);
        assert_eq!(notes.listings[0].key, BULLETS);
        assert_eq!(notes.listings[0].records[1]["name"], json!("Fixed the sink"));
        assert_eq!(notes.lines.len(), 4, "the lines stay: {:?}", notes.lines);
        let todo = parse("# To do\n\n- [x] Pay the bill\n- [ ] Sort photos\n* [X] Call Jonas\n");
        assert_eq!(todo.listings[0].key, TODOS);
        let ticked: Vec<&Value> = todo.listings[0].records.iter().map(|r| &r[TICKED]).collect();
        assert_eq!(ticked, [&json!("ticked"), &json!("unticked"), &json!("ticked")]);
        assert_eq!(todo.listings[0].records[1]["name"], json!("Sort photos"));
        assert!(parse("# One\n\n- only one bullet\n").listings.is_empty(), "one bullet is no list");
        assert_eq!(parse("- [ ] a\n- b\n").listings[0].key, BULLETS, "mixed: bullet points, none ticked or not");
        assert!(is_text_list(BULLETS) && is_text_list(TODOS) && !is_text_list(ROWS));
    }

    #[test]
    fn reads_key_value_blocks_as_items_and_a_lone_block_as_fields() {
        let log = "Commit history:\nCommit: 2e75\nAuthor: Bob\nDate: 2024-02-01 10:00:00+00:00\nMessage: Change b 2\n\n\nCommit: 03b8\nAuthor: Ann\nDate: 2024-01-01 10:00:00+00:00\nMessage: init\n\n";
        let p = parse(log);
        assert_eq!(p.listings.len(), 1);
        assert_eq!(p.listings[0].records[1]["Author"], json!("Ann"));
        assert_eq!(p.listings[0].records[0]["Date"], json!("2024-02-01 10:00:00+00:00"));
        let info = "size: 14\ncreated: Thu Nov 26 2026\nisDirectory: false\npermissions: 644";
        let p = parse(info);
        assert!(p.listings.is_empty());
        assert_eq!(p.fields["size"], json!(14));
        assert_eq!(p.fields["isDirectory"], json!(false));
        let cfg = parse("[metadata]\nname = csvpeek\nversion = 0.3.0.dev0");
        assert_eq!((cfg.fields["name"].clone(), cfg.fields["version"].clone()), (json!("csvpeek"), json!("0.3.0.dev0")));
    }

    #[test]
    fn a_cut_result_gives_only_what_the_model_sees() {
        let log: String = (0..6).map(|i| format!("Commit: {i:07x}\nAuthor: A{i}\nMessage: change {i}\n\n")).collect();
        assert_eq!(seen(&log, log.len()), (parse(&log), false));
        // The cut falls inside the fourth commit: the three before it are shown.
        let view = log.find("Commit: 0000003").unwrap() + 20;
        let (p, cut) = seen(&log, view);
        assert!(cut);
        let shown: Vec<&Value> = p.listings[0].records.iter().map(|r| &r["Author"]).collect();
        assert_eq!(shown, [&json!("A0"), &json!("A1"), &json!("A2")]);
        let tree = json!([{"name": "a.md", "type": "file"}, {"name": "docs", "type": "directory", "children": []}]).to_string();
        assert_eq!(seen(&tree, 10), (Parsed::default(), true), "no item closed before the cut");
        // Cut inside the second item: the first is shown whole.
        let (p, cut) = seen(&tree, tree.find("docs").unwrap());
        assert!(cut);
        assert_eq!(p.listings[0].records.len(), 1);
        assert_eq!(p.listings[0].records[0]["name"], json!("a.md"));
        let graph = json!({"entities": [{"name": "Ann, \"A\" [x]", "observations": ["a]b"]}, {"name": "Bob"}]}).to_string();
        let (p, _) = seen(&graph, graph.find("Bob").unwrap());
        assert_eq!(p.records("entities").map(<[Record]>::len), Some(1), "brackets inside strings are text: {p:?}");
        let listing = "[FILE] a.md\n[FILE] b.md\n[DIR] docs\n";
        let (p, _) = seen(listing, listing.find("docs").unwrap());
        assert_eq!(p.listings[0].records.len(), 2, "one-line items up to the last whole line");
    }

    #[test]
    fn reads_tagged_lines_with_sizes_and_bare_lines() {
        let p =
            parse("[FILE] readme.md                            14 B\n[DIR] docs\n[FILE] big data.csv   1.5 KB\n\nTotal: 2 files, 1 directories\nCombined size: 1.51 KB");
        let r = &p.listings[0].records;
        assert_eq!(r.len(), 3);
        assert_eq!((r[0]["kind"].clone(), r[0]["name"].clone(), r[0]["size"].clone()), (json!("file"), json!("readme.md"), json!(14)));
        assert_eq!(r[2]["name"], json!("big data.csv"));
        assert_eq!((r[2]["extension"].clone(), r[1].get("extension")), (json!("csv"), None));
        assert_eq!(r[2]["size"], json!("1.5 KB"), "a rounded size stays as shown");
        assert_eq!(size_bytes("1.5 KB"), Some(1536.0));
        assert_eq!(size_bytes("14 B"), Some(14.0));
        assert_eq!(p.fields["Total"], json!("2 files, 1 directories"));
        let p = parse("  feature/x\n* main");
        assert_eq!(p.listings[0].records.iter().map(|r| r["name"].clone()).collect::<Vec<_>>(), vec![json!("feature/x"), json!("main")]);
        assert_eq!(p.fields[CURRENT], json!("main"), "the starred one is checked out");
        let p = parse("Allowed directories:\n/tmp/root");
        assert_eq!(p.listings[0].records[0]["name"], json!("/tmp/root"));
        let csv = parse("date,amount,payee\n2024-01-02,12.5,Bakery\n2024-01-03,40,Garage\n");
        assert_eq!(csv.listings[0].key, ROWS);
        assert_eq!(csv.listings[0].records[1]["amount"], json!(40));
        let prose = parse("# Title\nSome words here.\n");
        assert!(prose.listings.is_empty());
        let changelog = parse("# Changelog\n\n## 0.2.0\n\n- Export\n\n## 0.1.0\n\n- Reader\n");
        let releases: Vec<&Value> = changelog.records(SECTIONS).unwrap().iter().map(|r| &r["name"]).collect();
        assert_eq!(releases, [&json!("0.2.0"), &json!("0.1.0")], "a text's `## ` headings are its sections");
        assert_eq!(prose.lines, vec!["# Title", "Some words here."]);
    }

    #[test]
    fn counts_every_line_and_takes_no_error_for_a_path() {
        let script = "import sys\n\n\ndef main():\n    return 0\n";
        let p = parse(script);
        assert_eq!(p.line_count, 5, "blank lines and `def …:` lines count");
        assert!(p.lines.len() < p.line_count);
        assert_eq!(parse("{\"a\": 1}").line_count, 0);
        // `read_multiple_files` on a folder: an error about a path, not a file in a list.
        let p = parse("/w/travel/iceland: Error - EISDIR: illegal operation on a directory, read");
        assert!(p.listings.is_empty(), "{p:?}");
        let p = parse("/w/notes/a.md\n/w/notes/b c.md");
        assert_eq!(p.listings[0].records.len(), 2, "absolute paths, spaces and all");
    }

    #[test]
    fn reads_the_files_a_diff_changes() {
        let show = "commit 2e75\nAuthor: Bob <b@x>\nDate:   2024-02-01 10:00:00 +0000\n\n    Change b\n\n--- a/b\n+++ b/b\n@@ -1 +1,2 @@\n 1\n+2\n--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n";
        let p = parse(show);
        let files: Vec<_> = p.listings[0].records.iter().map(|r| r["file"].clone()).collect();
        assert_eq!((p.listings[0].key.as_str(), files), (CHANGED_FILES, vec![json!("b"), json!("gone.txt")]));
        assert_eq!(p.diff_lines, Some((vec!["2".to_string()], vec!["x".to_string()])), "`+2` added, `-x` removed; `+++`/`---` headers are no lines");
        assert_eq!((p.fields["Author"].clone(), p.fields["Author email"].clone()), (json!("Bob"), json!("b@x")), "a person and their address apart");
        assert_eq!(p.fields[MESSAGE], json!("Change b"), "the indented paragraph after the header");
    }

    #[test]
    fn flattens_json_trees_and_keeps_named_lists() {
        let tree = json!([{"name": "a", "type": "directory", "children": [{"name": "x.txt", "type": "file"}]}, {"name": "b.md", "type": "file"}]);
        let p = parse(&tree.to_string());
        let paths: Vec<_> = p.listings[0].records.iter().map(|r| r.get("path").cloned()).collect();
        assert_eq!(paths, vec![Some(json!("a")), Some(json!("a/x.txt")), Some(json!("b.md"))]);
        let tops: Vec<_> = p.listings[0].records.iter().map(|r| r.get(TOP_FOLDER).cloned()).collect();
        assert_eq!(tops, vec![None, Some(json!("a")), None], "a file below the top, by the folder at the top that holds it");
        let graph = json!({"entities": [{"name": "Ann", "entityType": "person", "observations": ["x", "y"]}], "relations": [{"from": "Ann", "to": "Acme", "relationType": "works_at"}], "meta": {"n": 2}});
        let p = parse(&graph.to_string());
        assert_eq!(p.listings.iter().map(|l| l.key.as_str()).collect::<Vec<_>>(), vec!["entities", "relations"]);
        assert_eq!(p.listings[0].records[0]["observations.count"], json!(2));
        assert_eq!(p.fields["meta.n"], json!(2));
    }
}
