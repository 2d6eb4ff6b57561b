//! Paraphrase by a teacher (`scenarios paraphrase`): a checked task asked the way other people
//! would ask it. The answer stays the task's own (its SQL's), so a paraphrase is kept only if it
//! still asks the same thing, which two cheap checks decide without a model:
//! - **values**: every value the question names (the SQL's string literals and the numbers that
//!   appear in the question) appears in the paraphrase, verbatim (case aside): "Who wrote
//!   Solaris?" must still say Solaris;
//! - **operation**: the words that carry the query's operation survive: a count still asks "how
//!   many" (or "number", "count"), an arg-max still says "most"/"highest"/"top", an average
//!   "average"/"mean", a percentage "percent"/"share", `EXCEPT` "never"/"not"/"no", `INTERSECT`
//!   "both"/"as well". Only the cues the original question itself carries are required, so a
//!   task phrased without one is not held to it;
//! - **nothing added**: no number and no capitalised name (a word capitalised inside a sentence)
//!   the question does not have ("Paris" where it asked about Chicago and Denver, "1999-2011"
//!   for "2011"), no letters of another script (a small teacher at temperature 1 drifts into
//!   Hebrew or Chinese), no more questions than the original asks and at most twice its words
//!   plus five (a teacher that rambles on asks something else);
//! - **finished**: at least three words, not ending on "the" or "and", nor on "have" or "of"
//!   without a closing mark ("…plants have", "or (": replies cut off);
//! - **order where it matters**: under `EXCEPT` ("in Chicago but none in Denver") the values keep
//!   their order, since swapped they ask the opposite question.
//!
//! All of these were seen on Qwen2.5-Coder-0.5B as its own teacher (docs/scenarios.md).
//!
//! What they cannot see is a rewording that keeps every value and cue and asks something else
//! ("How many saves does the project have?" for "I need the number of projects"). With
//! `--solve` a solver (the teacher, greedy) writes SQL for the rewording alone, shown only the
//! tables the task's SQL reads and their categories' values; the rewording is kept only if that
//! SQL gives the task's rows on the server (`ta_synth::compare`). A paraphrase the solver cannot
//! answer is lost with the wrong ones: the check trades recall for meaning.

use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use ta_types::Message;

use crate::generate::{GenerateError, Teacher};
use crate::prompt::json_body;

/// The JSON schema name of a paraphrase reply.
pub const SCHEMA_NAME: &str = "paraphrases";

/// Why a paraphrase was not kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rejected {
    Empty,
    SameAsOriginal,
    Duplicate,
    LostValue,
    LostOperation,
    AddedValue,
    OtherScript,
    Rambling,
    SwappedValues,
    Unfinished,
    NoQuery,
    OtherRows,
    OtherColumns,
    QueryFails,
}

impl Rejected {
    pub fn reason(self) -> &'static str {
        match self {
            Rejected::Empty => "empty",
            Rejected::SameAsOriginal => "the original question again",
            Rejected::Duplicate => "a duplicate of another paraphrase",
            Rejected::LostValue => "a value of the question is missing",
            Rejected::LostOperation => "the question's operation is missing",
            Rejected::AddedValue => "a number or name the question does not have",
            Rejected::OtherScript => "letters of a script the question does not use",
            Rejected::Rambling => "more questions or far more words than the question",
            Rejected::SwappedValues => "the values in another order under EXCEPT",
            Rejected::Unfinished => "cut off mid-sentence",
            Rejected::NoQuery => "the solver wrote no single SELECT for it",
            Rejected::OtherRows => "the solver's query for it gives other rows",
            Rejected::OtherColumns => "the solver's query for it gives another number of columns",
            Rejected::QueryFails => "the solver's query for it fails on the server",
        }
    }
}

/// Operation cue groups: a SQL feature and the words that ask for it.
const CUES: &[(&str, &[&str])] = &[
    ("count(", &["how many", "number", "count", "total"]),
    ("avg(", &["average", "mean"]),
    ("sum(", &["total", "sum", "combined", "altogether", "in all", "how much"]),
    ("100.0 *", &["percent", "percentage", "%", "share", "proportion", "fraction"]),
    ("max(", &["most", "highest", "largest", "max", "maximum", "biggest", "greatest", "latest", "last", "top", "newest", "oldest"]),
    ("min(", &["least", "lowest", "fewest", "smallest", "min", "minimum", "first", "earliest", "oldest", "newest"]),
    (" EXCEPT ", &["never", "not", "no", "none", "without", "but"]),
    (" INTERSECT ", &["both", "as well", "also", "and"]),
    (" DESC", &["most", "highest", "largest", "top", "max", "biggest", "greatest", "latest", "last", "best", "lead"]),
    (" ASC", &["least", "lowest", "fewest", "smallest", "min", "first", "earliest", "bottom", "worst"]),
];

static LITERAL: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"'((?:[^']|'')*)'").expect("valid regex"));
static NUMBER: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\d+(?:\.\d+)?").expect("valid regex"));

/// The values a paraphrase of `task` must keep: the SQL's string literals that the task names
/// (a `LIKE` pattern's text without its `%`), and the task's numbers.
pub fn values(task: &str, sql: &str) -> Vec<String> {
    let lower = task.to_lowercase();
    let mut out: Vec<String> = LITERAL.captures_iter(sql).filter_map(|c| named_literal(&lower, &c[1].replace("''", "'"))).collect();
    out.extend(NUMBER.find_iter(task).map(|m| m.as_str().to_string()));
    out.sort();
    out.dedup();
    out
}

/// The text of a SQL literal that a question (lower-cased) names: the literal itself, or a `LIKE`
/// pattern's text between its `%`s when the question has it as a word (not a format like `%Y`).
fn named_literal(question: &str, literal: &str) -> Option<String> {
    let v = literal.trim();
    if v.is_empty() {
        return None;
    }
    if !v.contains('%') {
        return question.contains(&v.to_lowercase()).then(|| literal.to_string());
    }
    let inner = v.trim_matches('%');
    (inner.chars().count() >= 2 && !inner.contains('%') && says(question, &inner.to_lowercase())).then(|| inner.to_string())
}

/// Whether `text` says `cue`: as whole words ("count" is not in "country"), or as is for a sign.
fn says(text: &str, cue: &str) -> bool {
    if cue.chars().all(|c| c.is_alphanumeric() || c == ' ') { format!(" {} ", normalized(text)).contains(&format!(" {cue} ")) } else { text.contains(cue) }
}

/// The cue groups `sql` asks for that `task` carries.
fn cues<'a>(task: &str, sql: &str) -> Vec<&'a [&'a str]> {
    CUES.iter().filter(|(feature, words)| sql.contains(feature) && words.iter().any(|w| says(task, w))).map(|(_, words)| *words).collect()
}

/// Lower case, letters and digits, single spaces.
fn normalized(text: &str) -> String {
    text.to_lowercase().split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect::<Vec<_>>().join(" ")
}

/// The words of `text` written capitalised inside a sentence (not its first word, not "I"):
/// names, as people write them.
fn names(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut sentence_start = true;
    for word in text.split_whitespace() {
        let core = word.trim_matches(|c: char| !c.is_alphanumeric());
        if !sentence_start && core != "I" && core.chars().next().is_some_and(char::is_uppercase) {
            out.push(core.to_lowercase());
        }
        // A quote or bracket opening a word does not end a sentence; a colon, a full stop, a
        // question or exclamation mark closing one does.
        sentence_start = core.is_empty() && sentence_start || word.ends_with(['.', '?', '!', ':']);
    }
    out
}

/// Whether `values` appear in `paraphrase` in the order they have in `task` (each found by its
/// first place, case aside).
fn same_order(task: &str, paraphrase: &str, values: &[String]) -> bool {
    let (t, p) = (task.to_lowercase(), paraphrase.to_lowercase());
    let mut placed: Vec<(usize, usize)> = values.iter().filter_map(|v| Some((t.find(&v.to_lowercase())?, p.find(&v.to_lowercase())?))).collect();
    placed.sort_unstable();
    placed.windows(2).all(|w| w[0].1 <= w[1].1)
}

/// Words no finished sentence ends on.
const NEVER_LAST: &[&str] = &["a", "an", "the", "and", "or", "whose", "than"];
/// Words a question may end on ("What city is it in?", "How many do we have?") but a sentence cut
/// off without its closing mark usually does: a reply stopped by the teacher's token limit or its
/// own stop ("How many nuclear power plants have").
const OPEN_ENDED: &[&str] = &["have", "has", "is", "are", "do", "does", "in", "of", "with", "to", "for", "by", "that", "which", "where", "who"];

/// Whether a paraphrase stops before its question does: under three words, its last word one no
/// sentence ends on, or one a cut-off sentence ends on with no closing mark after it.
fn unfinished(paraphrase: &str) -> bool {
    let words: Vec<String> = normalized(paraphrase).split(' ').map(String::from).collect();
    let closed = paraphrase.trim_end().ends_with(['?', '.', '!', ')', '"']);
    words.len() < 3 || words.last().is_some_and(|w| NEVER_LAST.contains(&w.as_str()) || (!closed && OPEN_ENDED.contains(&w.as_str())))
}

/// What a paraphrase adds that its question lacks, if anything.
fn added(task: &str, paraphrase: &str) -> Option<Rejected> {
    let words = |t: &str| t.split_whitespace().count();
    if paraphrase.matches('?').count() > task.matches('?').count().max(1) || words(paraphrase) > 2 * words(task) + 5 {
        return Some(Rejected::Rambling);
    }
    if paraphrase.chars().any(|c| c.is_alphabetic() && !c.is_ascii() && !task.contains(c)) {
        return Some(Rejected::OtherScript);
    }
    let numbers = |t: &str| NUMBER.find_iter(t).map(|m| m.as_str().to_string()).collect::<Vec<_>>();
    let (lower, task_numbers) = (task.to_lowercase(), numbers(task));
    if numbers(paraphrase).iter().any(|n| !task_numbers.contains(n)) || names(paraphrase).iter().any(|n| !lower.contains(n.as_str())) {
        return Some(Rejected::AddedValue);
    }
    None
}

/// Whether `paraphrase` still asks `task` (whose SQL is `sql`); `seen` holds the normalized
/// texts of the paraphrases kept so far. A kept paraphrase's normalized text comes back, for
/// `seen`. With `solver` (a solver's SQL for the paraphrase will have to give the task's rows),
/// the task's text values may be said in other words ("former employees" for status
/// `terminated`): the solver decides whether they still mean the same; its numbers stay.
pub fn check(task: &str, sql: &str, paraphrase: &str, seen: &[String], solver: bool) -> Result<String, Rejected> {
    let p = paraphrase.trim();
    if p.is_empty() {
        return Err(Rejected::Empty);
    }
    let n = normalized(p);
    if n == normalized(task) {
        return Err(Rejected::SameAsOriginal);
    }
    if seen.contains(&n) {
        return Err(Rejected::Duplicate);
    }
    if unfinished(p) {
        return Err(Rejected::Unfinished);
    }
    let lower = p.to_lowercase();
    let values = values(task, sql);
    let required = |v: &&String| !solver || NUMBER.find(v).is_some_and(|m| m.len() == v.len());
    if !values.iter().filter(required).all(|v| lower.contains(&v.to_lowercase())) {
        return Err(Rejected::LostValue);
    }
    if !cues(task, sql).iter().all(|words| words.iter().any(|w| says(p, w))) {
        return Err(Rejected::LostOperation);
    }
    if let Some(why) = added(task, p) {
        return Err(why);
    }
    if sql.contains(" EXCEPT ") && !same_order(task, p, &values) {
        return Err(Rejected::SwappedValues);
    }
    Ok(n)
}

/// The reply's JSON schema: `{"paraphrases": [string, ...]}`.
pub fn reply_schema(k: usize) -> Value {
    json!({
        "type": "object",
        "properties": {"paraphrases": {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1, "maxItems": k.max(1)}},
        "required": ["paraphrases"],
        "additionalProperties": false
    })
}

/// The teacher's instructions. With `solver` (a solver will check the rewordings) a status or
/// category may be said as people say it, since the solver's rows, not the words, decide.
pub fn system(solver: bool) -> String {
    let keep = if solver {
        "Keep every name and number exactly as written; a status, type or category may be said in everyday words \
         (\"former employees\" for employees whose status is terminated)."
    } else {
        "Keep every name, value and number exactly as written."
    };
    format!(
        "You rewrite questions about a database the way different people would ask them: casual, terse, polite, as a request or \
         as a question. {keep} Ask for exactly the same thing: do not add, drop or change any condition. Reply with only the JSON object."
    )
}

/// The user message asking for `k` paraphrases of `task`, shown the `tables` it reads (their
/// `CREATE` statements and category values, as the solver sees them; none without a solver).
pub fn request(task: &str, k: usize, tables: &[String]) -> String {
    // The tables ground a question whose names are cryptic ("finrev federals", "c 14"), which a
    // small teacher otherwise guesses at ("carbon-14 fossils").
    let tables = if tables.is_empty() { String::new() } else { format!("Tables it is about:\n{}\n\n", tables.join("\n")) };
    format!("{tables}Question: {task}\n\nWrite {k} different ways a person could ask exactly this question. Reply with {{\"paraphrases\": [...]}}.")
}

/// The paraphrases in a reply (an empty list when it is not the schema's object), each without
/// the list or quote marks a teacher puts before it ("> How many projects…", "- …", "1. …").
pub fn parse(text: &str) -> Vec<String> {
    #[derive(Deserialize)]
    struct Reply {
        paraphrases: Vec<String>,
    }
    let bare = |p: String| {
        let p = p.trim();
        let p = p.strip_prefix(|c: char| c.is_ascii_digit()).and_then(|r| r.strip_prefix(['.', ')'])).unwrap_or(p);
        p.trim_start_matches(['>', '-', '*', '•', ' ']).trim().to_string()
    };
    json_body(text).and_then(|b| serde_json::from_str::<Reply>(b).ok()).map(|r| r.paraphrases.into_iter().map(bare).collect()).unwrap_or_default()
}

/// Asks `teacher` for `k` paraphrases of `task` (`solver`: a solver will check them, see
/// [`system`]).
pub async fn ask(
    teacher: &Teacher,
    task: &str,
    k: usize,
    tables: &[String],
    max_tokens: u32,
    temperature: Option<f32>,
    solver: bool,
) -> Result<Vec<String>, GenerateError> {
    let text = teacher.complete(&system(solver), &[Message::user(request(task, k, tables))], max_tokens, temperature, SCHEMA_NAME, &reply_schema(k)).await?;
    Ok(parse(&text))
}

/// The JSON schema name of a solver's reply.
pub const SOLVE_SCHEMA_NAME: &str = "query";

pub const SOLVE_SYSTEM: &str = "You write one SQLite SELECT query that answers a question about a database. \
Use only the tables and columns given. Reply with only the JSON object.";

/// The user message asking a solver for the SQL of `question`, shown `tables` (their `CREATE`
/// statements and category values) and nothing of the task it rewords.
pub fn solve_request(tables: &[String], question: &str) -> String {
    format!("Tables:\n{}\n\nQuestion: {question}\n\nReply with {{\"sql\": \"...\"}}.", tables.join("\n"))
}

/// The solver's reply schema: `{"sql": string}`.
pub fn solve_schema() -> Value {
    json!({"type": "object", "properties": {"sql": {"type": "string", "minLength": 1}}, "required": ["sql"], "additionalProperties": false})
}

/// The query in a solver's reply, when it is one `SELECT` (or `WITH … SELECT`) statement: it
/// runs on the user's server, so nothing else is ever sent.
pub fn parse_query(text: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Reply {
        sql: String,
    }
    let sql = json_body(text).and_then(|b| serde_json::from_str::<Reply>(b).ok())?.sql;
    let sql = sql.trim().trim_end_matches(';').trim();
    let first = sql.split_whitespace().next()?.to_ascii_uppercase();
    ((first == "SELECT" || first == "WITH") && !sql.contains(';')).then(|| sql.to_string())
}

/// Asks `teacher`, greedy, for the SQL of `question` over `tables`; `None` when the reply holds
/// no single SELECT.
pub async fn solve(teacher: &Teacher, tables: &[String], question: &str, max_tokens: u32) -> Result<Option<String>, GenerateError> {
    let text = teacher.complete(SOLVE_SYSTEM, &[Message::user(solve_request(tables, question))], max_tokens, Some(0.0), SOLVE_SCHEMA_NAME, &solve_schema()).await?;
    Ok(parse_query(&text))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The teacher's and the solver's prompts, as sent.
    #[test]
    fn prompts() {
        let solver_tables = ["CREATE TABLE employees (employee_id INTEGER PRIMARY KEY, name TEXT, status TEXT)\n-- status: 'active', 'terminated'".to_string()];
        insta::assert_snapshot!(format!(
            "--- system ---\n{}\n--- system, with a solver ---\n{}\n--- user ---\n{}\n--- user, with a solver ---\n{}\n--- solver system ---\n{SOLVE_SYSTEM}\n--- solver user ---\n{}\n--- reply schemas ---\n{}\n{}",
            system(false),
            system(true),
            request(TASK, 2, &[]),
            request("How many former employees are there?", 2, &solver_tables),
            solve_request(&solver_tables, "How many former employees are there?"),
            reply_schema(2),
            solve_schema()
        ));
    }

    const SQL: &str = "SELECT country, count(*) FROM authors WHERE status = 'Out Of Print' GROUP BY country ORDER BY count(*) DESC, country LIMIT 1";
    const TASK: &str = "Which country has the most authors with status Out Of Print?";

    #[test]
    fn a_paraphrase_keeps_the_values_and_the_operation() {
        assert_eq!(values(TASK, SQL), ["Out Of Print"]);
        assert_eq!(check(TASK, SQL, "Which nation has the most writers right now (status Out Of Print)?", &[], false).map(|_| ()), Ok(()));
        assert_eq!(check(TASK, SQL, "Which country has the most authors whose books are gone?", &[], false), Err(Rejected::LostValue));
        assert_eq!(check(TASK, SQL, "Which country has authors with status Out Of Print?", &[], false), Err(Rejected::LostOperation));
        assert_eq!(check(TASK, SQL, "  which COUNTRY has the most authors with status out of print ", &[], false), Err(Rejected::SameAsOriginal));
        let seen = vec![normalized("Top country for Out Of Print authors?")];
        assert_eq!(check(TASK, SQL, "Top country for Out Of Print authors?", &seen, false), Err(Rejected::Duplicate));
        assert_eq!(check(TASK, SQL, " ", &[], false), Err(Rejected::Empty));
    }

    #[test]
    fn numbers_and_quoted_values_must_survive() {
        let sql = "SELECT name, budget FROM projects WHERE budget IS NOT NULL AND status = 'on_hold' ORDER BY budget DESC, name LIMIT 3";
        let task = "What are the top 3 projects by budget whose status is on_hold?";
        assert_eq!(values(task, sql), ["3", "on_hold"]);
        assert_eq!(check(task, sql, "Show me the 3 biggest on_hold projects by budget.", &[], false).map(|_| ()), Ok(()));
        assert_eq!(check(task, sql, "Show me the five biggest on_hold projects by budget.", &[], false), Err(Rejected::LostValue));
        // A LIKE pattern's text is required when the question names it, a format never.
        assert_eq!(values("How many crimes mention Street?", "SELECT count(*) FROM c WHERE Location LIKE '%Street%'"), ["Street"]);
        assert!(values("How many crimes in 2017?", "SELECT count(*) FROM c WHERE strftime('%Y', ts) = '2017'").iter().all(|v| v != "Y"));
    }

    #[test]
    fn only_the_cues_the_original_carries_are_required() {
        let sql = "SELECT count(*) FROM employees WHERE status = 'active'";
        // The original says "how many": a paraphrase must ask for a number too ("country" is no count).
        assert_eq!(check("How many employees are active?", sql, "Which country are the active employees in?", &[], false), Err(Rejected::LostOperation));
        assert_eq!(check("How many employees are active?", sql, "List the active employees.", &[], false), Err(Rejected::LostOperation));
        assert_eq!(check("How many employees are active?", sql, "What's the number of active staff?", &[], false).map(|_| ()), Ok(()));
        assert_eq!(parse("Sure: {\"paraphrases\": [\"a\", \"b\"]}"), ["a", "b"]);
        // What Qwen2.5-Coder-1.5B put before its rewordings, and list marks.
        assert_eq!(
            parse("{\"paraphrases\": [\"> How many projects are there?\", \"- Count the projects.\", \"2. How many projects?\", \"3 projects or more?\"]}"),
            ["How many projects are there?", "Count the projects.", "How many projects?", "3 projects or more?"]
        );
        assert!(parse("no json").is_empty());
    }

    /// What Qwen2.5-Coder-0.5B wrote as its own teacher (temperature 1, on CPU) for the demo
    /// database's tasks: each kept by the values and the operation, each asking something else.
    #[test]
    fn a_rewording_that_adds_swaps_or_drifts_is_not_kept() {
        let except = "SELECT head FROM departments WHERE location = 'Chicago' EXCEPT SELECT head FROM departments WHERE location = 'Denver'";
        let task = "Which heads have departments with location Chicago but none with location Denver?";
        assert_eq!(check(task, except, "Which heads have departments with location Denver but none with location Chicago?", &[], false), Err(Rejected::SwappedValues));
        assert_eq!(check(task, except, "Which heads have locations Paris but none with locations Denver and Chicago?", &[], false), Err(Rejected::AddedValue));
        assert_eq!(check(task, except, "Who heads a department in Chicago but none in Denver?", &[], false).map(|_| ()), Ok(()));
        assert_eq!(
            check(task, except, "Which heads have departments in Chicago but none in Denver? Where is a department located where a head is?", &[], false),
            Err(Rejected::Rambling)
        );

        let year = "SELECT name FROM departments WHERE strftime('%Y', founded) = '2011'";
        let task = "Name every department founded in 2011.";
        assert_eq!(check(task, year, "Which departments were founded in 1999-2011?", &[], false), Err(Rejected::AddedValue));
        assert_eq!(check(task, year, "מה שם כל חלקים מגדירים כ-2011?", &[], false), Err(Rejected::OtherScript));
        assert_eq!(check(task, year, "Could you list the departments set up in 2011?", &[], false).map(|_| ()), Ok(()));

        let share = "SELECT round(100.0 * sum(status = 'terminated') / count(*), 1) FROM employees";
        let task = "Out of all employees, how many percent have status terminated? Give one decimal.";
        assert_eq!(check(task, share, "Out of all employees, how many percent have status terminated?现有的百分之不多", &[], false), Err(Rejected::OtherScript));

        let avg = "SELECT count(*) FROM employees WHERE salary > (SELECT avg(salary) FROM employees)";
        let task = "Count the employees whose salary is above the mean salary.";
        let long = "What is the current mean salary and how does it compare to a larger number of employees, and is there a reason for the difference in salary or an exception in the count?";
        assert_eq!(check(task, avg, long, &[], false), Err(Rejected::Rambling));
    }

    /// More of the 0.5B teacher's kept rewordings (KaggleDBQA's GeoNuclearData, on a GPU): cut
    /// off, a `LIKE` value dropped, the lowest turned into the most, a percentage into a count.
    #[test]
    fn a_cut_off_or_inverted_rewording_is_not_kept() {
        let like = "SELECT count(*) FROM nuclear_power_plants WHERE Name LIKE '%Balakovo%'";
        let task = "How many nuclear power plants whose name contains \"Balakovo\" are there?";
        assert_eq!(check(task, like, "How many nuclear power plants have", &[], false), Err(Rejected::Unfinished));
        assert_eq!(check(task, like, "How many nuclear power plants are there in all?", &[], false), Err(Rejected::LostValue));
        assert_eq!(check(task, like, "How many plants have Balakovo in their name?", &[], false).map(|_| ()), Ok(()));
        assert_eq!(check("What is the earliest update among the plants?", "SELECT min(LastUpdatedAt) FROM p", "or (", &[], false), Err(Rejected::Unfinished));

        let min = "SELECT min(Latitude) FROM nuclear_power_plants WHERE ReactorType IS NOT NULL";
        let task = "Give me the lowest latitude across all nuclear power plants with a reactor type recorded.";
        assert_eq!(check(task, min, "What is the type of reactor used in most nuclear power plants?", &[], false), Err(Rejected::LostOperation));
        assert_eq!(check(task, min, "What's the minimum latitude of the plants whose reactor type is known?", &[], false).map(|_| ()), Ok(()));

        let pct = "SELECT round(100.0 * sum(ReactorType = 'ABWR') / count(*), 1) FROM nuclear_power_plants";
        let task = "What percentage of the nuclear power plants have reactor type ABWR? Round to one decimal.";
        assert_eq!(check(task, pct, "How many nuclear power plants are there with reactor type ABWR?", &[], false), Err(Rejected::LostOperation));
        assert_eq!(check(task, pct, "What share of the plants use the ABWR reactor type?", &[], false).map(|_| ()), Ok(()));
    }

    /// With a solver to decide, a category value may be said as people say it; a number may not
    /// be dropped, and nothing may be added.
    #[test]
    fn with_a_solver_a_category_may_be_reworded() {
        let sql = "SELECT count(DISTINCT e.employee_id) FROM project_assignments a JOIN employees e ON e.employee_id = a.employee_id JOIN projects p ON p.project_id = a.project_id WHERE e.status = 'terminated' AND p.status = 'active'";
        let task = "How many employees whose status is terminated are assigned to at least one project whose status is active?";
        let former = "How many former employees are still on an active project?";
        assert_eq!(check(task, sql, former, &[], false), Err(Rejected::LostValue));
        assert_eq!(check(task, sql, former, &[], true).map(|_| ()), Ok(()));
        assert_eq!(check(task, sql, "How many former employees are still on an active project in Paris?", &[], true), Err(Rejected::AddedValue));
        let top = "SELECT name FROM projects ORDER BY budget DESC, name LIMIT 3";
        assert_eq!(check("What are the top 3 projects by budget?", top, "Which projects have the biggest budgets?", &[], true), Err(Rejected::LostValue));
    }

    #[test]
    fn a_solver_reply_is_one_select_or_nothing() {
        assert_eq!(parse_query("{\"sql\": \"SELECT count(*) FROM projects;\"}").as_deref(), Some("SELECT count(*) FROM projects"));
        assert_eq!(parse_query("Here: {\"sql\": \"with t AS (SELECT 1) SELECT * FROM t\"}").as_deref(), Some("with t AS (SELECT 1) SELECT * FROM t"));
        assert_eq!(parse_query("{\"sql\": \"DELETE FROM projects\"}"), None);
        assert_eq!(parse_query("{\"sql\": \"SELECT 1; DROP TABLE projects\"}"), None);
        assert_eq!(parse_query("SELECT 1"), None);
        assert!(
            solve_request(&["CREATE TABLE projects (name TEXT)".to_string()], "How many projects?")
                .starts_with("Tables:\nCREATE TABLE projects (name TEXT)\n\nQuestion: How many projects?")
        );
    }

    #[test]
    fn names_are_words_capitalised_inside_a_sentence() {
        assert_eq!(names("Could you tell me this: How many staff work in Boston? Show the \"Sales\" ones. I need it."), ["boston", "sales"]);
        // A name the question has, in another case, is no addition.
        assert_eq!(added("Which employees have an email containing \"anthony\"?", "Which staff have an email with Anthony in it?"), None);
    }
}
