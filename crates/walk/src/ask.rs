//! Questions about what the walk saw, phrased in people's words. Each task is an operation
//! ([`crate::op::Op`]) on one call's parsed result (a field, a count, a lookup by name, an
//! extreme, the most common value, existence, a filtered list, a file's lines or title), phrased
//! from the tools' arguments, the lists' and fields' names in several frames; the operation
//! gives the answer, and the replay applies it again to a fresh server's result.

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use rand::SeedableRng;
use rand::seq::SliceRandom;
use regex::Regex;
use serde_json::Value;
use ta_synth::names::{human, plural, plural_of, singular, with_article, words};
use ta_types::Expected;

use crate::explore::{Call, Kind, REVISION_WORDS, Walked, entry_kind, glob_extension, glob_word, label_field};
use crate::op::{EMPTY_FOLDER, MAX_ENUMERATED, MAX_SELECT, Op, bound_between, date_key, is_date, order_key, shown_number};
use crate::parse::{CHANGED_FILES, CURRENT, EXTENSION, LINES, Listing, MESSAGE, ROWS, Record, TICKED, TOP_FOLDER, extension_of, is_hex_id, is_text_list};

/// How questions name everything below the folder the server serves.
const WHOLE_WORKSPACE: &str = "in the whole workspace";

/// Items of one list asked about by name (a seeded sample), so that one long list does not
/// crowd out every other question.
const LOOKUPS_PER_LIST: usize = 12;

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

    /// The calls one turn makes together: [`Op::Across`]'s compared calls, none of which needs
    /// another's result (each names a file or a month that the listing before them shows), so
    /// an episode spends one turn on them and a folder of eight files fits its turns. The
    /// second call of an [`Op::Then`] of its own depends on the pick, so it comes a turn later.
    pub fn together(&self) -> &[usize] {
        match (&self.op, self.siblings.split_last()) {
            (Op::Then { own: true, .. }, Some((_, picked))) => picked,
            _ => &self.siblings,
        }
    }

    /// The turns of its reference before the answer: a turn a step, the calls made
    /// [`Task::together`] in one.
    pub fn turns(&self, walked: &Walked) -> usize {
        self.steps(walked).len() - self.together().len().saturating_sub(1)
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
    /// of a file as it has it ("the file setup.cfg on main"), the one asked whether it was
    /// merged ("Has fix/pager been merged into main?").
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
                branches.push(v.to_string());
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

/// People ask about their own files in the first person ("List all the CSV files in my travel
/// folder", "How many folders in my workspace are empty?"); the walk's places say "the". The
/// workspace and the folders `place` names, said as "my" (the served folder's other name, "the
/// top folder", stays: nobody says "my top folder").
fn first_person(place: &str) -> Vec<(String, String)> {
    static OWNED: LazyLock<Regex> = LazyLock::new(|| Regex::new(r#"\bthe ((?:whole )?workspace|[^\s"]+ folder)\b"#).expect("valid"));
    let mut out: Vec<(String, String)> = OWNED.captures_iter(place).filter(|c| &c[1] != "top folder").map(|c| (c[0].to_string(), format!("my {}", &c[1]))).collect();
    if place.contains("the whole workspace") {
        // Said "in the workspace" by the other alternation.
        out.push(("the workspace".into(), "my workspace".into()));
    }
    out
}

/// A count about the asker's own folder, said as they would, half the time ("How many CSV files
/// do I have in my recipes folder?").
fn owned(question: String, have: bool) -> String {
    if have && question.starts_with("How many ") && question.contains(" my ") { unquoted_replace(&question, " are there ", " do I have ") } else { question }
}

/// `text` with the first `one` outside double quotes said as `other`: a commit quoted by its
/// message ("Fix the pager on main for wide screens") keeps its words.
fn unquoted_replace(text: &str, one: &str, other: &str) -> String {
    let at = text.match_indices(one).map(|(at, _)| at).find(|at| text[..*at].matches('"').count().is_multiple_of(2));
    match at {
        Some(at) => format!("{}{other}{}", &text[..at], &text[at + one.len()..]),
        None => text.to_string(),
    }
}

/// A listing of a folder holds only what sits directly in it, and people say so when the folder
/// has folders of its own ("the settings.json file at the top of my workspace", "files directly
/// inside notes/2024, not counting the ones in its subfolders"): unsaid, "in my workspace" or
/// "in my travel folder" means anywhere in it, as a tree or a search of it is asked ("How many
/// JSON files are there in my workspace?" was answered from the top folder's listing alone).
/// The served folder's own listing is its top whatever it holds.
pub(crate) fn directly(place: &str, entries: &[Record]) -> String {
    for (root, top) in [("in the workspace", "at the top of the workspace"), ("in the top folder", "directly in the top folder")] {
        if let Some(rest) = place.strip_prefix(root) {
            return format!("{top}{rest}");
        }
    }
    let holds_folders = entries.iter().any(|r| entry_kind(r) == Some(Kind::Dir));
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
pub(crate) fn tag_noun(tag: &str) -> String {
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
pub(crate) fn files_of(ext: &str) -> (String, String) {
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
            alternates.push((format!("Has {b} been"), format!("Has the {b} branch been")));
        }
        let mine = first_person(&s.place);
        let mut push = |op: Op, frames: Vec<String>| {
            let Some(expected) = op.answer(&c.parsed) else { return };
            let say = |f: String, said: &[(String, String)]| said.iter().fold(f, |f, (one, other)| unquoted_replace(&f, one, other));
            let frames: Vec<String> = frames.into_iter().enumerate().map(|(i, f)| if (out.len() + i) % 2 == 1 { say(f, &alternates) } else { f }).collect();
            // The server's own folders are found by asking it, never spelled out.
            let spelled = serde_json::to_string(&expected).unwrap_or_default();
            if walked.roots.iter().any(|r| spelled.contains(r.as_str()) || frames.iter().any(|f| f.contains(r.as_str()))) {
                return;
            }
            // A question asked once whoever's folder it names: each is known by its wording
            // before "my", which comes on a phase of its own, so that it meets both ways of the
            // other places.
            let mut frames: Vec<String> = frames
                .into_iter()
                .enumerate()
                .filter(|(_, f)| asked.insert(ta_synth::normalize(f)))
                .map(|(i, f)| if (out.len() / 2 + i) % 2 == 1 { owned(say(f, &mine), out.len() / 4 % 2 == 1) } else { f })
                .collect();
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
            let direct = if tree { place.to_string() } else { directly(place, rs) };
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
                // An absent name seen elsewhere as a file is asked as one, even among folders.
                let one = if one == "folder" && extension_of(&name).is_some() { "file".to_string() } else { one.clone() };
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
    crate::across::in_that_folder(walked, seed, &mut asked, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse;
    use serde_json::json;
    use ta_types::scenario::ExpectedRule;

    #[test]
    fn the_compared_calls_share_a_turn_and_a_second_call_of_its_own_comes_after() {
        let task = |op: Op, siblings: Vec<usize>| Task {
            call: *siblings.last().unwrap(),
            siblings,
            via: None,
            op,
            expected: Expected::Number(1.0),
            phrasings: Vec::new(),
            difficulty: 5,
            explanation: None,
        };
        let across = Op::Across { measure: crate::op::Measure::Lines, max: true, labels: vec!["a.md".into(), "b.md".into(), "c.md".into()] };
        assert_eq!(task(across.clone(), vec![4, 5, 6]).together(), [4, 5, 6]);
        let then = |own| Op::Then { pick: Box::new(across.clone()), winner: "b.md".into(), then: Box::new(Op::Heading), own };
        assert_eq!(task(then(true), vec![4, 5, 6, 9]).together(), [4, 5, 6], "the second call needs the pick");
        assert_eq!(task(then(false), vec![4, 5, 6]).together(), [4, 5, 6], "answered from a compared call");
        assert!(task(Op::Heading, vec![7]).together().len() <= 1, "one call is a turn of its own");
    }

    #[test]
    fn the_workspace_and_its_folders_are_said_as_their_owner_says_them() {
        let mine = |place: &str, q: &str| first_person(place).iter().fold(q.to_string(), |f, (one, other)| unquoted_replace(&f, one, other));
        assert_eq!(mine("directly in the travel folder", "List the CSV files directly in the travel folder."), "List the CSV files directly in my travel folder.");
        assert_eq!(mine("in the whole workspace", "How many folders in the whole workspace are empty?"), "How many folders in my whole workspace are empty?");
        assert_eq!(mine("in the whole workspace", "How many folders in the workspace are empty?"), "How many folders in my workspace are empty?");
        assert_eq!(mine("in the src folder of weather-station", "What is in the src folder of weather-station?"), "What is in my src folder of weather-station?");
        // The top folder is nobody's, and a name in quotes is the file's own.
        assert_eq!(mine("directly in the top folder", "What is directly in the top folder?"), "What is directly in the top folder?");
        assert_eq!(
            mine("in the notes folder", "Which files named \"the notes folder\" are in the notes folder?"),
            "Which files named \"the notes folder\" are in my notes folder?"
        );
        // A count about one's own folder, as its owner asks it half the time.
        let q = mine("in the recipes folder", "How many CSV files are there in the recipes folder?");
        assert_eq!(owned(q.clone(), true), "How many CSV files do I have in my recipes folder?");
        assert_eq!(owned(q, false), "How many CSV files are there in my recipes folder?");
        assert_eq!(owned("How many CSV files are there in the top folder?".into(), true), "How many CSV files are there in the top folder?");
    }

    #[test]
    fn a_place_said_another_way_leaves_quoted_words_alone() {
        let q = "Who wrote \"Fix the pager on main screens\" on main in the repository at /srv/app?";
        assert_eq!(
            unquoted_replace(q, "on main ", "on the main branch "),
            "Who wrote \"Fix the pager on main screens\" on the main branch in the repository at /srv/app?"
        );
        assert_eq!(unquoted_replace("\"on main \"", "on main ", "x"), "\"on main \"", "only inside quotes");
    }

    #[test]
    fn a_listing_of_a_folder_with_folders_is_what_sits_directly_in_it() {
        let entries = |kinds: &[&str]| -> Vec<Record> { kinds.iter().map(|k| json!({"name": "x", "type": k}).as_object().unwrap().clone()).collect() };
        let (files, mixed) = (entries(&["file", "file"]), entries(&["file", "directory"]));
        assert_eq!(directly("in the workspace", &files), "at the top of the workspace");
        assert_eq!(directly("in the top folder in January 2024", &mixed), "directly in the top folder in January 2024");
        assert_eq!(directly("in the notes folder", &mixed), "directly in the notes folder", "not in its subfolders");
        assert_eq!(directly("in the recipes folder", &files), "in the recipes folder", "a folder of files holds them all");
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
        let dated = parse(&json!([{"name": "a", "day": "2024-01-02"}, {"name": "b", "day": "2024-02-02"}, {"name": "c", "day": "2024-03-02"}]).to_string());
        assert_eq!(threshold(dated.records("").unwrap(), "day", 1), None);
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
