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
//!   task phrased without one is not held to it.

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
}

impl Rejected {
    pub fn reason(self) -> &'static str {
        match self {
            Rejected::Empty => "empty",
            Rejected::SameAsOriginal => "the original question again",
            Rejected::Duplicate => "a duplicate of another paraphrase",
            Rejected::LostValue => "a value of the question is missing",
            Rejected::LostOperation => "the question's operation is missing",
        }
    }
}

/// Operation cue groups: a SQL feature and the words that ask for it.
const CUES: &[(&str, &[&str])] = &[
    ("count(", &["how many", "number", "count", "total"]),
    ("avg(", &["average", "mean"]),
    ("sum(", &["total", "sum", "combined", "altogether", "in all", "how much"]),
    ("100.0 *", &["percent", "%", "share", "proportion", "fraction"]),
    (" EXCEPT ", &["never", "not", "no", "none", "without", "but"]),
    (" INTERSECT ", &["both", "as well", "also", "and"]),
    (" DESC", &["most", "highest", "largest", "top", "max", "biggest", "greatest", "latest", "last", "best", "lead"]),
    (" ASC", &["least", "lowest", "fewest", "smallest", "min", "first", "earliest", "bottom", "worst"]),
];

static LITERAL: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"'((?:[^']|'')*)'").expect("valid regex"));
static NUMBER: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\d+(?:\.\d+)?").expect("valid regex"));

/// The values a paraphrase of `task` must keep: the SQL's string literals that the task names,
/// and the task's numbers.
pub fn values(task: &str, sql: &str) -> Vec<String> {
    let lower = task.to_lowercase();
    let mut out: Vec<String> =
        LITERAL.captures_iter(sql).map(|c| c[1].replace("''", "'")).filter(|v| !v.trim().is_empty() && !v.contains('%') && lower.contains(&v.to_lowercase())).collect();
    out.extend(NUMBER.find_iter(task).map(|m| m.as_str().to_string()));
    out.sort();
    out.dedup();
    out
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

/// Whether `paraphrase` still asks `task` (whose SQL is `sql`); `seen` holds the normalized
/// texts of the paraphrases kept so far. A kept paraphrase's normalized text comes back, for
/// `seen`.
pub fn check(task: &str, sql: &str, paraphrase: &str, seen: &[String]) -> Result<String, Rejected> {
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
    let lower = p.to_lowercase();
    if !values(task, sql).iter().all(|v| lower.contains(&v.to_lowercase())) {
        return Err(Rejected::LostValue);
    }
    if !cues(task, sql).iter().all(|words| words.iter().any(|w| says(p, w))) {
        return Err(Rejected::LostOperation);
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

pub const SYSTEM: &str = "You rewrite questions about a database the way different people would ask them: casual, terse, polite, \
as a request or as a question. Keep every name, value and number exactly as written, and ask for exactly the same thing: \
do not add, drop or change any condition. Reply with only the JSON object.";

/// The user message asking for `k` paraphrases of `task`.
pub fn request(task: &str, k: usize) -> String {
    format!("Question: {task}\n\nWrite {k} different ways a person could ask exactly this question. Reply with {{\"paraphrases\": [...]}}.")
}

/// The paraphrases in a reply (an empty list when it is not the schema's object).
pub fn parse(text: &str) -> Vec<String> {
    #[derive(Deserialize)]
    struct Reply {
        paraphrases: Vec<String>,
    }
    json_body(text).and_then(|b| serde_json::from_str::<Reply>(b).ok()).map(|r| r.paraphrases).unwrap_or_default()
}

/// Asks `teacher` for `k` paraphrases of `task`.
pub async fn ask(teacher: &Teacher, task: &str, k: usize, max_tokens: u32, temperature: Option<f32>) -> Result<Vec<String>, GenerateError> {
    let text = teacher.complete(SYSTEM, &[Message::user(request(task, k))], max_tokens, temperature, SCHEMA_NAME, &reply_schema(k)).await?;
    Ok(parse(&text))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SQL: &str = "SELECT country, count(*) FROM authors WHERE status = 'Out Of Print' GROUP BY country ORDER BY count(*) DESC, country LIMIT 1";
    const TASK: &str = "Which country has the most authors with status Out Of Print?";

    #[test]
    fn a_paraphrase_keeps_the_values_and_the_operation() {
        assert_eq!(values(TASK, SQL), ["Out Of Print"]);
        assert_eq!(check(TASK, SQL, "Which nation has the most writers right now (status Out Of Print)?", &[]).map(|_| ()), Ok(()));
        assert_eq!(check(TASK, SQL, "Which country has the most authors whose books are gone?", &[]), Err(Rejected::LostValue));
        assert_eq!(check(TASK, SQL, "Which country has authors with status Out Of Print?", &[]), Err(Rejected::LostOperation));
        assert_eq!(check(TASK, SQL, "  which COUNTRY has the most authors with status out of print ", &[]), Err(Rejected::SameAsOriginal));
        let seen = vec![normalized("Top country for Out Of Print authors?")];
        assert_eq!(check(TASK, SQL, "Top country for Out Of Print authors?", &seen), Err(Rejected::Duplicate));
        assert_eq!(check(TASK, SQL, " ", &[]), Err(Rejected::Empty));
    }

    #[test]
    fn numbers_and_quoted_values_must_survive() {
        let sql = "SELECT name, budget FROM projects WHERE budget IS NOT NULL AND status = 'on_hold' ORDER BY budget DESC, name LIMIT 3";
        let task = "What are the top 3 projects by budget whose status is on_hold?";
        assert_eq!(values(task, sql), ["3", "on_hold"]);
        assert_eq!(check(task, sql, "Show me the 3 biggest on_hold projects by budget.", &[]).map(|_| ()), Ok(()));
        assert_eq!(check(task, sql, "Show me the five biggest on_hold projects by budget.", &[]), Err(Rejected::LostValue));
        // A literal the question never names (a LIKE pattern) is not required.
        assert!(values("How many crimes mention Street?", "SELECT count(*) FROM c WHERE Location LIKE '%Street%'").iter().all(|v| v != "%Street%"));
    }

    #[test]
    fn only_the_cues_the_original_carries_are_required() {
        let sql = "SELECT count(*) FROM employees WHERE status = 'active'";
        // The original says "how many": a paraphrase must ask for a number too ("country" is no count).
        assert_eq!(check("How many employees are active?", sql, "Which country are the active employees in?", &[]), Err(Rejected::LostOperation));
        assert_eq!(check("How many employees are active?", sql, "List the active employees.", &[]), Err(Rejected::LostOperation));
        assert_eq!(check("How many employees are active?", sql, "What's the number of active staff?", &[]).map(|_| ()), Ok(()));
        assert_eq!(parse("Sure: {\"paraphrases\": [\"a\", \"b\"]}"), ["a", "b"]);
        assert!(parse("no json").is_empty());
    }
}
