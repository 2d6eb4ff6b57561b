//! Questions over several calls at once: which file of a folder (or anywhere below it) was
//! modified last, given each file's `get_file_info`, or has the most lines, each read whole; in
//! which month a history too long to show whole has the most commits, given `git_log` a month at
//! a time, and, when the windows around the months come back empty, what the whole history
//! holds ([`Op::History`]). What one call already shows for every item (a listing's sizes, a
//! whole log) is asked of that call instead.
//! People ask these of a folder or a history, never of one result; the walk has already made the
//! calls, one per file or per month, and here they are compared ([`Op::Across`]). Then questions
//! in two steps: the file a comparison picks, asked about as "that file" ([`Op::Then`]), and the
//! folder a tree shows holding the most files, as "that folder". The
//! task's reference makes every one of the calls, so `collect --reference` shows the model each
//! result before the comparison is worked out.

use std::collections::{BTreeMap, HashSet};

use rand::SeedableRng;
use rand::seq::SliceRandom;
use serde_json::Value;
use ta_synth::names::{human, plural};

use crate::ask::{Task, askable, directly, is_person, item_noun, place_of, sentence, thing_of};
use crate::explore::{Call, Kind, MONTH_NAMES, Walked, entry_kind, label_field};
use crate::op::{Measure, Op, Whole, is_date, order_key};
use crate::parse::Parsed;

/// Calls compared in one question at most: each is a step of the episode.
const MAX_SIBLINGS: usize = 8;

/// Calls of one tool that differ in one argument, each named by a label.
struct Group {
    calls: Vec<usize>,
    labels: Vec<String>,
    /// "in the travel/kyoto folder", "in the repository at /srv/app".
    place: String,
    /// The items of each result a month holds ("commits"), for [`Measure::Items`]; `None` for
    /// files of a folder, compared by their fields.
    items: Option<String>,
    /// The calls before the first month and after the last, when the months are every one
    /// between them: the whole history.
    bounds: Option<[usize; 2]>,
    /// The call whose result lists the compared files (the folder's listing, the tree): the
    /// reference reaches them through it, whatever call first showed each file to the walk.
    via: Option<usize>,
    /// Fields a listing of the folder shows for every file (`list_directory_with_sizes`'s
    /// sizes): compared from that one call, not here a call per file, so that the model learns
    /// the short way.
    shown: Vec<String>,
}

/// A call's first absolute path argument: the file or folder it is about.
fn path_arg(c: &Call) -> Option<String> {
    c.args.values().filter_map(Value::as_str).find(|v| v.starts_with('/')).map(String::from)
}

fn usable(c: &Call) -> bool {
    !c.is_error && !c.cut && !c.maybe_cut
}

/// A call's one absolute path argument, and its other arguments as a key: the calls that give
/// the same tool one file after another with nothing else changed share it.
fn single_path(c: &Call) -> Option<(&str, String)> {
    let paths: Vec<(&String, &str)> = c.args.iter().filter_map(|(k, v)| v.as_str().filter(|s| s.starts_with('/')).map(|s| (k, s))).collect();
    let [(name, path)] = paths.as_slice() else { return None };
    let mut rest = c.args.clone();
    rest.remove(*name);
    Some((path, Value::Object(rest).to_string()))
}

/// How a question names a folder the server serves or one below it: "the top folder", "the
/// travel/kyoto folder".
fn folder_phrase(walked: &Walked, folder: &str) -> Option<String> {
    match walked.roots.iter().find_map(|r| folder.strip_prefix(r.as_str()))? {
        "" => Some("the top folder".into()),
        rel => Some(format!("the {} folder", rel.trim_start_matches('/'))),
    }
}

/// Every file of a folder (as a listing of that folder showed them) given one by one to the same
/// tool with the same other arguments.
fn folders(walked: &Walked) -> Vec<Group> {
    let mut by: BTreeMap<(String, String, String), BTreeMap<String, usize>> = BTreeMap::new();
    for c in walked.calls.iter().filter(|c| usable(c)) {
        let Some((path, rest)) = single_path(c) else { continue };
        let Some((folder, leaf)) = path.rsplit_once('/') else { continue };
        by.entry((c.tool.clone(), folder.to_string(), rest)).or_default().entry(leaf.to_string()).or_insert(c.id);
    }
    let mut out = Vec::new();
    for ((tool, folder, _), leaves) in by {
        // The folder's own listing says which files it holds.
        let listing = walked.calls.iter().filter(|c| usable(c) && c.tool != tool).find_map(|c| {
            let records = c.parsed.records("")?;
            (single_path(c).is_some_and(|(p, _)| p == folder) && records.iter().all(|r| entry_kind(r).is_some())).then_some((c.id, records))
        });
        let Some((via, records)) = listing else { continue };
        let files: Vec<&str> = records.iter().filter(|r| entry_kind(r) == Some(Kind::File)).filter_map(|r| r.get("name").and_then(Value::as_str)).collect();
        if files.len() < 2 || files.len() > MAX_SIBLINGS || !files.iter().all(|f| leaves.contains_key(*f)) {
            continue;
        }
        let Some(place) = folder_phrase(walked, &folder).map(|f| directly(&format!("in {f}"), records)) else { continue };
        let shown: Vec<String> = walked
            .calls
            .iter()
            .filter(|c| usable(c) && single_path(c).is_some_and(|(p, _)| p == folder))
            .filter_map(|c| c.parsed.records(""))
            .flat_map(|rs| {
                let files: Vec<_> = rs.iter().filter(|r| entry_kind(r) == Some(Kind::File)).collect();
                let first = files.first().map(|f| f.keys().cloned().collect::<Vec<_>>()).unwrap_or_default();
                first.into_iter().filter(move |k| files.iter().all(|r| r.contains_key(k)))
            })
            .collect();
        out.push(Group {
            calls: files.iter().map(|f| leaves[*f]).collect(),
            labels: files.iter().map(|f| f.to_string()).collect(),
            place,
            items: None,
            bounds: None,
            via: Some(via),
            shown,
        });
    }
    out
}

/// Every file anywhere below a folder (as a tree of that folder showed them, some in folders
/// of their own) given one by one to the same tool: "Which file anywhere in the travel folder
/// was modified most recently?" is answered `kyoto/itinerary.md`.
fn trees(walked: &Walked) -> Vec<Group> {
    let mut by: BTreeMap<(String, String), BTreeMap<&str, usize>> = BTreeMap::new();
    for c in walked.calls.iter().filter(|c| usable(c)) {
        let Some((path, rest)) = single_path(c) else { continue };
        by.entry((c.tool.clone(), rest)).or_default().entry(path).or_insert(c.id);
    }
    let mut out = Vec::new();
    for tree in walked.calls.iter().filter(|c| usable(c)) {
        let Some(records) = tree.parsed.records("") else { continue };
        let folders: Vec<&str> = tree.args.values().filter_map(Value::as_str).filter(|s| s.starts_with('/')).collect();
        let [folder] = folders.as_slice() else { continue };
        // A tree's top-level items have no path of their own: their name is it.
        let files: Vec<&str> =
            records.iter().filter(|r| entry_kind(r) == Some(Kind::File)).filter_map(|r| r.get("path").or_else(|| r.get("name")).and_then(Value::as_str)).collect();
        if files.len() < 2 || files.len() > MAX_SIBLINGS || !files.iter().any(|f| f.contains('/')) {
            continue;
        }
        let Some(place) = folder_phrase(walked, folder).map(|f| format!("anywhere in {f}")) else { continue };
        for ((tool, _), at) in &by {
            if *tool == tree.tool {
                continue;
            }
            let calls: Option<Vec<usize>> = files.iter().map(|f| at.get(format!("{folder}/{f}").as_str()).copied()).collect();
            if let Some(calls) = calls {
                out.push(Group {
                    calls,
                    labels: files.iter().map(|f| f.to_string()).collect(),
                    place: place.clone(),
                    items: None,
                    bounds: None,
                    via: Some(tree.id),
                    shown: Vec::new(),
                });
            }
        }
    }
    out
}

/// The months of a history, each read by the same tool with the same other arguments
/// (`explore::month_window` names them "in January 2024").
fn windows(walked: &Walked) -> Vec<Group> {
    let mut by: BTreeMap<(String, String), Vec<(String, usize)>> = BTreeMap::new();
    for c in walked.calls.iter().filter(|c| usable(c)) {
        let window: Vec<(&String, &str)> = c
            .origins
            .iter()
            .filter(|(name, o)| {
                o.call.is_none()
                    && ["in ", "before ", "after "].iter().any(|p| o.phrase.starts_with(p))
                    && c.args.get(name.as_str()).and_then(Value::as_str) != Some(o.phrase.as_str())
            })
            .map(|(name, o)| (name, o.phrase.as_str()))
            .collect();
        let Some((_, phrase)) = window.first() else { continue };
        let mut rest = c.args.clone();
        for (name, _) in &window {
            rest.remove(name.as_str());
        }
        let months = by.entry((c.tool.clone(), Value::Object(rest).to_string())).or_default();
        if !months.iter().any(|(p, _)| p == phrase) {
            months.push((phrase.to_string(), c.id));
        }
    }
    by.into_iter()
        // A history the tool showed whole in one call (the same arguments without the window)
        // is asked from that call (ask.rs), not a month at a time: the model learns the one
        // call, not eight that leave it no turn to answer.
        .filter(|((tool, rest), _)| !walked.calls.iter().any(|c| usable(c) && c.tool == *tool && serde_json::to_string(&c.args).is_ok_and(|a| a == *rest)))
        .filter_map(|(_, windows)| {
            let months: Vec<(String, usize)> = windows.iter().filter(|(p, _)| p.starts_with("in ")).cloned().collect();
            if !(2..=MAX_SIBLINGS).contains(&months.len()) {
                return None;
            }
            // Read whole: every month between the first and the last, and the windows before the
            // first and after the last.
            let bound = |word: &str, month: &str| windows.iter().find(|(p, _)| *p == month.replacen("in ", word, 1)).map(|(_, id)| *id);
            let bounds = bound("before ", &months[0].0).zip(bound("after ", &months[months.len() - 1].0)).map(|(b, a)| [b, a]).filter(|_| consecutive(&months));
            let first = &walked.calls[months[0].1];
            let listing = first.parsed.listings.iter().find(|l| l.key.is_empty())?;
            let items = plural(&item_noun(first, listing));
            let place = place_of(first, walked).replace(&months[0].0, "").split_whitespace().collect::<Vec<_>>().join(" ");
            Some(Group {
                calls: months.iter().map(|(_, id)| *id).collect(),
                labels: months.iter().map(|(p, _)| p.trim_start_matches("in ").to_string()).collect(),
                place,
                items: Some(items),
                bounds,
                via: None,
                shown: Vec::new(),
            })
        })
        .collect()
}

/// Whether windows named "in January 2024", "in February 2024", … follow one another with no
/// month missing (a window whose call failed leaves a gap no total may skip).
fn consecutive(months: &[(String, usize)]) -> bool {
    let index = |phrase: &str| {
        let (name, year) = phrase.trim_start_matches("in ").split_once(' ')?;
        let m = MONTH_NAMES.iter().position(|n| *n == name)?;
        Some(year.parse::<usize>().ok()? * 12 + m)
    };
    let at: Option<Vec<usize>> = months.iter().map(|(p, _)| index(p)).collect();
    at.is_some_and(|at| at.windows(2).all(|w| w[1] == w[0] + 1))
}

/// The questions the groups offer, appended to `out`.
pub(crate) fn tasks(walked: &Walked, seed: u64, asked: &mut HashSet<String>, out: &mut Vec<Task>) {
    for g in folders(walked).into_iter().chain(trees(walked)).chain(windows(walked)) {
        let results: Vec<&Parsed> = g.calls.iter().map(|id| &walked.calls[*id].parsed).collect();
        let tool = &walked.calls[g.calls[0]].tool;
        let unstable = walked.unstable.get(tool).cloned().unwrap_or_default();
        let place = g.place.as_str();
        let mut ops: Vec<(Op, Vec<String>)> = Vec::new();
        match &g.items {
            Some(items) => {
                if g.bounds.is_some() {
                    history_ops(&results, &g, items, &mut ops);
                }
                for max in [true, false] {
                    let most = if max { "the most" } else { "the fewest" };
                    let frames = vec![sentence(&["Which month had", most, items, place, "?"]), sentence(&["In which month were", most, items, "made", place, "?"])];
                    ops.push((Op::Across { measure: Measure::Items, max, labels: g.labels.clone() }, frames));
                }
            }
            None => {
                // Files read whole: which is the longest ("Which file in the notes/2024 folder has
                // the most lines?"), counted as `wc -l` counts.
                if results.iter().all(|p| Measure::Lines.of(p).is_some()) {
                    for max in [true, false] {
                        let (most, long) = if max { ("the most", "longest") } else { ("the fewest", "shortest") };
                        let frames = vec![sentence(&["Which file", place, "has", most, "lines?"]), sentence(&["Which file", place, "is the", long, "?"])];
                        ops.push((Op::Across { measure: Measure::Lines, max, labels: g.labels.clone() }, frames));
                    }
                }
                let keys: Vec<&String> = results[0].fields.keys().filter(|k| !unstable.contains(*k) && askable(k)).collect();
                for k in keys.into_iter().filter(|k| !g.shown.contains(k)) {
                    let values: Vec<&Value> = results.iter().filter_map(|p| p.fields.get(k)).collect();
                    if values.len() != results.len() || values.iter().any(|v| order_key(v).is_none()) {
                        continue;
                    }
                    let f = human(k);
                    for max in [true, false] {
                        let frames = if values.iter().all(|v| is_date(v)) && f.ends_with("ed") && !f.contains(' ') {
                            // "modified": a participle, asked as when.
                            let (a, b) = if max { ("most recently", "last") } else { ("first", "longest ago") };
                            vec![sentence(&["Which file", place, "was", &f, a, "?"]), sentence(&["Which file", place, "was", &f, b, "?"])]
                        } else if k == "size" {
                            vec![sentence(&["Which file", place, "is the", if max { "biggest" } else { "smallest" }, "?"])]
                        } else {
                            continue;
                        };
                        ops.push((Op::Across { measure: Measure::Field(k.clone()), max, labels: g.labels.clone() }, frames));
                    }
                }
            }
        }
        // A whole history's answer needs the windows around the months too.
        let bounded: Option<(Vec<usize>, Vec<&Parsed>)> = g.bounds.map(|bounds| {
            let calls: Vec<usize> = g.calls.iter().copied().chain(bounds).collect();
            let results = calls.iter().map(|id| &walked.calls[*id].parsed).collect();
            (calls, results)
        });
        for (op, frames) in ops {
            let (calls, results) = match (&op, &bounded) {
                (Op::History { .. }, Some((calls, results))) => (calls, results),
                _ => (&g.calls, &results),
            };
            let Some(expected) = op.answer_all(results) else { continue };
            let mut frames: Vec<String> = frames.into_iter().filter(|f| asked.insert(ta_synth::normalize(f))).collect();
            if frames.is_empty() {
                continue;
            }
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ (g.calls[0] as u64) << 16 ^ out.len() as u64);
            frames[1..].shuffle(&mut rng);
            let explanation = op.explain_all(results);
            let mut task = Task { call: calls[calls.len() - 1], siblings: calls.clone(), via: g.via, op, expected, phrasings: frames, difficulty: 0, explanation };
            task.difficulty = (task.steps(walked).len() + 3).clamp(1, 5) as u8;
            out.push(task);
        }
    }
}

/// Questions about a whole history (`g`'s months, read whole): how many items in all, who has
/// the most and the fewest, and each person's ("Which commits did Chidi Okafor make in the
/// repository at /srv/app?").
fn history_ops(months: &[&Parsed], g: &Group, items: &str, ops: &mut Vec<(Op, Vec<String>)>) {
    let place = g.place.as_str();
    let labels = g.labels.clone();
    let whole = |of: Whole| Op::History { labels: labels.clone(), of };
    ops.push((whole(Whole::Count), vec![sentence(&["How many", items, "are there", place, "in all?"]), sentence(&["How many", items, "have been made", place, "?"])]));
    let records: Vec<crate::parse::Record> = months.iter().flat_map(|p| p.records("").unwrap_or_default()).cloned().collect();
    let Some(first) = records.first() else { return };
    let label = label_field(&records);
    for field in first.keys().filter(|k| is_person(k)) {
        for max in [true, false] {
            let most = if max { "the most" } else { "the fewest" };
            ops.push((whole(Whole::Most { field: field.clone(), max }), vec![sentence(&["Who has made", most, items, place, "?"])]));
        }
        let mut people: Vec<&str> = records.iter().filter_map(|r| r.get(field)).filter_map(Value::as_str).collect();
        people.sort_unstable();
        people.dedup();
        for who in people {
            let value = Value::String(who.to_string());
            let by = |label: Option<String>| whole(Whole::By { field: field.clone(), value: value.clone(), label });
            ops.push((by(None), vec![sentence(&["How many", items, "did", who, "make", place, "?"]), sentence(&["How many", items, place, "are by", who, "?"])]));
            if let Some(label) = &label {
                ops.push((
                    by(Some(label.clone())),
                    vec![sentence(&["Which", items, "did", who, "make", place, "?"]), sentence(&["List the", items, "by", who, place, "."])],
                ));
            }
        }
    }
}

/// Second steps after a comparison, at most this many per comparison.
const THEN_PER_PICK: usize = 2;

/// Questions in two steps, appended to `out`: the file a comparison across a folder's files picks,
/// then a question already asked about that file by name, now about "that file" ("Which file in
/// the notes folder has the most lines? How many bullet points are there in that file?"). The
/// reference makes the comparison's calls, then the winner's own call.
pub(crate) fn chained(walked: &Walked, seed: u64, asked: &mut HashSet<String>, out: &mut Vec<Task>) {
    let path_of = |id: usize| path_arg(&walked.calls[id]);
    let mut added = Vec::new();
    for (i, pick) in out.iter().enumerate() {
        let Op::Across { labels, measure, .. } = &pick.op else { continue };
        let ta_types::Expected::Text(winner) = &pick.expected else { continue };
        let Some(at) = labels.iter().position(|l| l == winner) else { continue };
        // A file picked among files (not a month of a history, whose calls share their path).
        let Some(path) = path_of(pick.siblings[at]).filter(|p| p.ends_with(&format!("/{winner}"))) else { continue };
        let mut seconds: Vec<&Task> = out
            .iter()
            .filter(|t| t.siblings.is_empty() && path_of(t.call).as_deref() == Some(path.as_str()))
            // Not whether it exists, nor the value it was picked by ("… modified first? When was
            // that file modified?").
            .filter(|t| match (&t.op, measure) {
                (Op::Exists { .. }, _) | (Op::Lines, Measure::Lines) => false,
                (Op::Field { field }, Measure::Field(k)) => field != k,
                _ => true,
            })
            .collect();
        seconds.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ (i as u64) << 20));
        for second in seconds.into_iter().take(THEN_PER_PICK) {
            let Some(thing) = thing_of(&walked.calls[second.call], walked) else { continue };
            let Some(text) = second_step(pick, second, &thing, "that file", winner, asked) else { continue };
            let mut siblings = pick.siblings.clone();
            let own = !siblings.contains(&second.call);
            if own {
                siblings.push(second.call);
            }
            added.extend(then_task(walked, pick, second, winner, (siblings, own), pick.via, text));
        }
    }
    out.extend(added);
}

/// Questions in two steps about a folder: the one a tree shows holding the most files, then a
/// question already asked about that folder by name, now about "that folder" ("Which folder in
/// the projects folder holds the most files anywhere in it? How many Python files are there
/// anywhere in that folder?"), as people ask of their own files. The reference makes the tree's
/// call, then the folder's own.
pub(crate) fn in_that_folder(walked: &Walked, seed: u64, asked: &mut HashSet<String>, out: &mut Vec<Task>) {
    let path_of = |id: usize| path_arg(&walked.calls[id]);
    let mut added = Vec::new();
    for (i, pick) in out.iter().enumerate() {
        let Op::Most { listing, .. } = &pick.op else { continue };
        let ta_types::Expected::Text(winner) = &pick.expected else { continue };
        // Folders of a tree (the rows of a file have no path).
        if !listing.is_empty() || !pick.siblings.is_empty() {
            continue;
        }
        let Some(folder) = path_of(pick.call).map(|p| format!("{p}/{winner}")) else { continue };
        let mut seconds: Vec<&Task> = out
            .iter()
            .filter(|t| t.siblings.is_empty() && t.call != pick.call && path_of(t.call).as_deref() == Some(folder.as_str()))
            .filter(|t| !matches!(t.op, Op::Exists { .. } | Op::Most { .. }))
            .collect();
        seconds.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ (i as u64) << 24));
        for second in seconds.into_iter().take(THEN_PER_PICK) {
            let place = place_of(&walked.calls[second.call], walked);
            let Some(text) = second_step(pick, second, &place, "in that folder", winner, asked) else { continue };
            added.extend(then_task(walked, pick, second, winner, (vec![pick.call, second.call], true), Some(pick.call), text));
        }
    }
    out.extend(added);
}

/// The question in two steps: the pick's, then `second`'s with `subject` (how it names the
/// winner) said as `that` ("that file", "in that folder"); `None` when no phrasing names it so,
/// when the winner's own name is still in it, or when it was asked already.
fn second_step(pick: &Task, second: &Task, subject: &str, that: &str, winner: &str, asked: &mut HashSet<String>) -> Option<String> {
    let then = second.phrasings.iter().find(|f| f.contains(subject))?.replace(subject, that);
    let name = winner.rsplit('/').next().unwrap_or(winner);
    if then.contains(name) {
        return None;
    }
    let text = format!("{} {then}", pick.phrasings[0]);
    asked.insert(ta_synth::normalize(&text)).then_some(text)
}

/// The [`Op::Then`] task of `pick` and `second` on the calls `answering` (and whether the last is
/// the winner's own), reached through `via`; `None` when the walked results give it no answer.
fn then_task(walked: &Walked, pick: &Task, second: &Task, winner: &str, answering: (Vec<usize>, bool), via: Option<usize>, text: String) -> Option<Task> {
    let (siblings, own) = answering;
    let op = Op::Then { pick: Box::new(pick.op.clone()), winner: winner.to_string(), then: Box::new(second.op.clone()), own };
    let results: Vec<&Parsed> = siblings.iter().map(|id| &walked.calls[*id].parsed).collect();
    let expected = op.answer_all(&results)?;
    let explanation = op.explain_all(&results);
    Some(Task { call: second.call, siblings, via, op, expected, phrasings: vec![text], difficulty: 5, explanation })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_history_is_whole_only_without_a_missing_month() {
        let months = |names: &[&str]| names.iter().enumerate().map(|(i, n)| (format!("in {n}"), i)).collect::<Vec<_>>();
        assert!(consecutive(&months(&["November 2023", "December 2023", "January 2024"])));
        assert!(!consecutive(&months(&["January 2024", "March 2024"])), "February's call failed");
        assert!(!consecutive(&months(&["January 2024", "Smarch 2024"])));
    }
}
