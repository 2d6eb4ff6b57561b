//! Schema names as people say them: `ReactorType` → "reactor type", `emp_cnt` → "employee count",
//! `nuclear_power_plants` → "nuclear power plants" / "nuclear power plant", and values as people
//! write them in a question.

use serde_json::Value;

/// Abbreviations common in schemas, spelled out (matched per word, lower case).
const ABBREVIATIONS: &[(&str, &str)] = &[
    ("addr", "address"),
    ("amt", "amount"),
    ("avg", "average"),
    ("cnt", "count"),
    ("desc", "description"),
    ("dept", "department"),
    ("dir", "directory"),
    ("dob", "date of birth"),
    ("dt", "date"),
    ("emp", "employee"),
    ("fed", "federal"),
    ("mgr", "manager"),
    ("num", "number"),
    ("pct", "percentage"),
    ("qty", "quantity"),
    ("repo", "repository"),
    ("rev", "revenue"),
    ("ts", "time"),
    ("yr", "year"),
];

/// The words of a name: `snake_case`, `camelCase`, `PascalCase`, `kebab-case`, spaces and
/// acronyms (`LSOAName` → "lsoa name") split, lower case, abbreviations spelled out.
pub fn words(name: &str) -> Vec<String> {
    let chars: Vec<char> = name.chars().collect();
    let mut out: Vec<String> = Vec::new();
    let mut word = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            continue;
        }
        let prev = i.checked_sub(1).map(|j| chars[j]);
        let next = chars.get(i + 1).copied();
        let boundary = match prev {
            Some(p) if p.is_alphanumeric() => {
                (p.is_lowercase() && c.is_uppercase())
                    || (p.is_uppercase() && c.is_uppercase() && next.is_some_and(char::is_lowercase))
                    || (p.is_alphabetic() && c.is_ascii_digit())
                    || (p.is_ascii_digit() && c.is_alphabetic())
            }
            _ => false,
        };
        if boundary && !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
        word.extend(c.to_lowercase());
    }
    if !word.is_empty() {
        out.push(word);
    }
    out.into_iter().map(|w| ABBREVIATIONS.iter().find(|(a, _)| *a == w).map_or(w, |(_, full)| full.to_string())).collect()
}

/// A name as a phrase ("reactor type"); an `_id`/`Id` suffix is kept as "ID".
pub fn human(name: &str) -> String {
    let w = words(name);
    if w.is_empty() {
        return name.to_string();
    }
    w.iter().map(|x| if x == "id" { "ID".to_string() } else { x.clone() }).collect::<Vec<_>>().join(" ")
}

/// The phrase naming a table's rows in the plural: "nuclear power plants", "crimes" for
/// `GreaterManchesterCrime` is not knowable, so the last word is made plural ("greater
/// manchester crimes"); trailing numbers (`FINREV_FED_17`) are dropped.
pub fn plural(table: &str) -> String {
    let mut w = words(table);
    while w.len() > 1 && w.last().is_some_and(|x| x.chars().all(|c| c.is_ascii_digit())) {
        w.pop();
    }
    if let Some(last) = w.last_mut() {
        *last = plural_word(last);
    }
    w.join(" ")
}

/// One row of a table: "nuclear power plant".
pub fn singular(table: &str) -> String {
    let mut w = words(&plural(table));
    if let Some(last) = w.last_mut() {
        *last = singular_word(last);
    }
    w.join(" ")
}

/// Nouns in `-us` whose plural is `-uses` (a final `s` otherwise reads as a plural already).
const US_NOUNS: &[&str] = &["bonus", "bus", "campus", "census", "corpus", "focus", "status", "surplus", "virus"];

fn plural_word(w: &str) -> String {
    if US_NOUNS.contains(&w) {
        format!("{w}es")
    } else if w.ends_with('s') && !w.ends_with("ss") || w.ends_with("data") || w.ends_with("info") {
        w.to_string()
    } else if w.ends_with('y') && !w.ends_with("ay") && !w.ends_with("ey") && !w.ends_with("oy") {
        format!("{}ies", &w[..w.len() - 1])
    } else if w.ends_with("ss") || w.ends_with('x') || w.ends_with("ch") || w.ends_with("sh") {
        format!("{w}es")
    } else {
        format!("{w}s")
    }
}

fn singular_word(w: &str) -> String {
    if let Some(stem) = w.strip_suffix("es").filter(|stem| US_NOUNS.contains(stem)) {
        stem.to_string()
    } else if let Some(stem) = w.strip_suffix("ies") {
        format!("{stem}y")
    } else if w.ends_with("sses") || w.ends_with("xes") || w.ends_with("ches") || w.ends_with("shes") {
        w[..w.len() - 2].to_string()
    } else if w.ends_with('s') && !w.ends_with("ss") && !w.ends_with("us") && !w.ends_with("is") {
        w[..w.len() - 1].to_string()
    } else {
        w.to_string()
    }
}

/// The plural of a column's phrase ("reactor types", "countries").
pub fn plural_of(phrase: &str) -> String {
    match phrase.rsplit_once(' ') {
        Some((head, last)) => format!("{head} {}", plural_word(last)),
        None => plural_word(phrase),
    }
}

/// The name of a relation from its key column: `department_id` → "department", `ManagerID` →
/// "manager", `state_code` → "state".
pub fn relation(key: &str) -> String {
    let mut w = words(key);
    while w.len() > 1 && w.last().is_some_and(|x| ["id", "code", "key", "no", "number", "ref"].contains(&x.as_str())) {
        w.pop();
    }
    w.join(" ")
}

/// The verb a linking table's rows stand for, with its preposition: a "project assignment" says
/// who is "assigned to" what, an "enrollment" who is "enrolled in" what. Only nouns in `-ment`
/// have a verb this plainly; other tables are asked about by their name.
pub fn participle(noun: &str) -> Option<(String, &'static str)> {
    let last = noun.rsplit(' ').next()?;
    let stem = last.strip_suffix("ment").filter(|s| s.len() >= 3)?;
    let verb = if stem.ends_with('e') { format!("{stem}d") } else { format!("{stem}ed") };
    let to = match stem {
        "enroll" | "enrol" | "involve" | "engage" => "in",
        "employ" => "by",
        _ => "to",
    };
    Some((verb, to))
}

/// What happened on a date column's day, as a participle: "hire date" → "hired", "termination
/// date" → "terminated", "created at" → "created", "opened" → "opened". People ask "How many
/// employees were hired in 2021?" more than "with a hire date in 2021". `None` for a date whose
/// event has no plain verb ("loan date", "due date") and for a parent's date ("department's
/// founded date").
pub fn date_verb(column_phrase: &str) -> Option<String> {
    const EVENTS: &[(&str, &str)] = &[
        ("hire", "hired"),
        ("termination", "terminated"),
        ("start", "started"),
        ("end", "ended"),
        ("birth", "born"),
        ("creation", "created"),
        ("completion", "completed"),
        ("publication", "published"),
        ("release", "released"),
        ("registration", "registered"),
        ("cancellation", "cancelled"),
        ("expiration", "expired"),
        ("expiry", "expired"),
        ("graduation", "graduated"),
        ("installation", "installed"),
        ("construction", "constructed"),
        ("retirement", "retired"),
        ("enrollment", "enrolled"),
        ("join", "joined"),
        ("open", "opened"),
        ("close", "closed"),
        ("order", "ordered"),
        ("delivery", "delivered"),
        ("purchase", "purchased"),
        ("payment", "paid"),
        ("approval", "approved"),
        ("submission", "submitted"),
        ("update", "updated"),
        ("modification", "modified"),
        ("review", "reviewed"),
        ("shipment", "shipped"),
    ];
    let phrase = column_phrase.to_lowercase();
    let w: Vec<&str> = phrase.split(' ').collect();
    let head = match w.as_slice() {
        [head, "date" | "at" | "on" | "time" | "day"] | [head] => *head,
        // "last updated at": an adverb and a participle.
        [adverb @ ("last" | "first"), verb, "date" | "at" | "on"] if verb.len() > 4 && verb.ends_with("ed") => return Some(format!("{adverb} {verb}")),
        _ => return None,
    };
    if let Some((_, verb)) = EVENTS.iter().find(|(noun, _)| *noun == head) {
        return Some(verb.to_string());
    }
    // Already a participle: "founded date", "assigned date", "created at", "opened".
    (head.len() > 4 && head.ends_with("ed") && head.chars().all(|c| c.is_ascii_alphabetic())).then(|| head.to_string())
}

/// Whether a column names a place, so that a filter on it reads "in France".
pub fn is_place(column_phrase: &str) -> bool {
    let last = column_phrase.rsplit(' ').next().unwrap_or_default();
    ["country", "nation", "state", "city", "town", "region", "location", "county", "province", "area", "district", "place", "continent"].contains(&last)
}

/// A value as a person writes it in a question: text as is (quoted when it has quotes of its own
/// or looks like a phrase with punctuation), numbers as numbers.
pub fn shown(v: &Value) -> String {
    match v {
        Value::String(s) if s.contains(['\'', '"', ';', ',']) => format!("\"{s}\""),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// "a price", "an amount".
pub fn with_article(phrase: &str) -> String {
    let article = if phrase.starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" };
    format!("{article} {phrase}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dates_event_as_a_participle() {
        let verb = |p: &str| date_verb(p);
        assert_eq!(verb("hire date").as_deref(), Some("hired"));
        assert_eq!(verb("termination date").as_deref(), Some("terminated"));
        assert_eq!(verb("founded date").as_deref(), Some("founded"));
        assert_eq!(verb("created at").as_deref(), Some("created"));
        assert_eq!(verb("Opened").as_deref(), Some("opened"));
        assert_eq!((verb("loan date"), verb("due date"), verb("date")), (None, None, None));
        assert_eq!(verb("department's founded date"), None, "a parent's date");
        assert_eq!((verb("last updated at").as_deref(), verb("construction start at")), (Some("last updated"), None));
    }

    #[test]
    fn names_are_split_and_spelled_out() {
        assert_eq!(human("ReactorType"), "reactor type");
        assert_eq!(human("OperationalFrom"), "operational from");
        assert_eq!(human("average_scale_score"), "average scale score");
        assert_eq!(human("t_fed_rev"), "t federal revenue");
        assert_eq!(human("LSOAName"), "lsoa name");
        assert_eq!(human("CrimeTS"), "crime time");
        assert_eq!(human("dept_id"), "department ID");
        assert_eq!(human("emp_cnt"), "employee count");
        assert_eq!(human("grade8"), "grade 8");
    }

    #[test]
    fn tables_have_a_plural_and_a_singular() {
        assert_eq!(plural("nuclear_power_plants"), "nuclear power plants");
        assert_eq!(singular("nuclear_power_plants"), "nuclear power plant");
        assert_eq!(plural("GreaterManchesterCrime"), "greater manchester crimes");
        assert_eq!(singular("GreaterManchesterCrime"), "greater manchester crime");
        assert_eq!(plural("FINREV_FED_17"), "finrev federals");
        assert_eq!(plural("company"), "companies");
        assert_eq!(singular("addresses"), "address");
        assert_eq!(singular("employees"), "employee");
        assert_eq!(plural("status"), "statuses");
        assert_eq!(singular("statuses"), "status");
        assert_eq!(plural_of("project status"), "project statuses");
        assert_eq!(singular("houses"), "house");
        assert_eq!(plural("buses"), "buses");
        assert_eq!(plural_of("reactor type"), "reactor types");
        assert_eq!(plural_of("country"), "countries");
    }

    #[test]
    fn a_linking_table_names_its_verb_when_it_has_one() {
        assert_eq!(participle("project assignment"), Some(("assigned".into(), "to")));
        assert_eq!(participle("course enrollment"), Some(("enrolled".into(), "in")));
        assert_eq!(participle("loan"), None);
        assert_eq!(participle("ment"), None);
    }

    #[test]
    fn relations_and_places_read_like_words() {
        assert_eq!(relation("department_id"), "department");
        assert_eq!(relation("ManagerID"), "manager");
        assert_eq!(relation("state_code"), "state");
        assert!(is_place("country"));
        assert!(is_place("home city"));
        assert!(!is_place("status"));
        assert_eq!(shown(&Value::from("Under Construction")), "Under Construction");
        assert_eq!(shown(&Value::from("Investigation complete; no suspect identified")), "\"Investigation complete; no suspect identified\"");
        assert_eq!(shown(&Value::from(72)), "72");
    }
}
