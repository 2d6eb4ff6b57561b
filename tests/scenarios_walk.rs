//! `scenarios walk` on four third-party servers (installed into the cache on first use), each on
//! a seeded fixture (`benches/walk/fixtures.py`), behind a proxy that records every tool the
//! walk calls (`tests/common/mcp_fault_proxy.py log`): only read tools are ever called, fields that change between calls are never asked
//! about, and every scenario's reference, replayed on a fresh server, gives its answer.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use common::bin;
use serde_json::Value;
use ta_rollout::ToolHost;
use ta_testkit::{MCP_SERVER_GIT, SERVER_EVERYTHING, SERVER_FILESYSTEM, SERVER_MEMORY};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// The items in order, for comparing sets.
fn sorted<T: Ord>(items: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut v: Vec<T> = items.into_iter().collect();
    v.sort_unstable();
    v
}

/// Builds a fixture with `benches/walk/fixtures.py KIND PATH`.
fn fixture(kind: &str, path: &Path) {
    let out = Command::new("python3").arg(format!("{ROOT}/benches/walk/fixtures.py")).arg(kind).arg(path).output().unwrap();
    assert!(out.status.success(), "fixtures.py {kind}: {}", String::from_utf8_lossy(&out.stderr));
}

struct Walk {
    out: PathBuf,
    stdout: String,
    scenarios: Vec<Value>,
    summary: Value,
    /// Every tool the walk called, as the proxy saw it.
    called: BTreeSet<String>,
}

/// `scenarios walk` on `server` behind the call-recording proxy.
fn walk(dir: &Path, server: &str, extra: &[&str]) -> Result<Walk, String> {
    let log = dir.join("calls.log");
    std::fs::write(&log, "").unwrap();
    let proxied = format!("python3 {ROOT}/tests/common/mcp_fault_proxy.py log 0 {} {server}", log.display());
    let out_dir = dir.join("walk");
    let out = Command::new(bin()).args(["scenarios", "walk", "--server", &proxied, "--out"]).arg(&out_dir).args(extra).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        return Err(format!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    }
    let called = std::fs::read_to_string(&log).unwrap().lines().map(String::from).collect();
    let summary = serde_json::from_str(&std::fs::read_to_string(out_dir.join("summary.json")).unwrap()).unwrap();
    Ok(Walk { scenarios: jsonl(&out_dir.join("scenarios.jsonl")), out: out_dir, stdout, summary, called })
}

impl Walk {
    /// The tools the summary says may be called.
    fn readable(&self) -> BTreeSet<String> {
        self.summary["tools"].as_array().unwrap().iter().filter(|t| t["read"] == true).map(|t| t["tool"].as_str().unwrap().to_string()).collect()
    }

    /// Only read tools were called (as the proxy saw it), none of `writers`, and every called
    /// tool declares readOnlyHint.
    fn assert_read_only(&self, writers: &[&str]) {
        assert!(!self.called.is_empty(), "the proxy saw no call");
        assert!(self.called.is_subset(&self.readable()), "called {:?}, readable {:?}", self.called, self.readable());
        for w in writers {
            assert!(!self.called.contains(*w), "the walk called the write tool {w}");
            assert!(self.stdout.contains(&format!("{w:<28} never")), "{w} is not listed as never called:\n{}", self.stdout);
        }
    }

    fn levels(&self) -> BTreeSet<u64> {
        self.scenarios.iter().map(|s| s["difficulty"].as_u64().unwrap()).collect()
    }
}

/// Replays every scenario's reference on a fresh server started with `server`, applies the
/// scenario's operation to what a model is shown of the last result and compares with its
/// expected answer. Identical calls are made once.
async fn replay_all(server: &str, scenarios: &[Value]) {
    let spec = ta_mcp::ServerSpec::parse(server).unwrap();
    let client = ta_mcp::McpClient::connect(spec, ta_mcp::ClientOptions::default()).await.unwrap();
    let discovery = client.discover().await.unwrap();
    let tools = ta_rollout::McpTools::new(Arc::new(client), ta_mcp::ToolCatalog::from_discovery(&discovery));
    let mut results: HashMap<String, String> = HashMap::new();
    for s in scenarios {
        let mut texts = Vec::new();
        for step in s["reference"].as_array().unwrap() {
            let key = step.to_string();
            if !results.contains_key(&key) {
                let r = tools.call(step["tool"].as_str().unwrap(), step["arguments"].clone()).await.unwrap();
                assert!(!r.is_error, "{step} failed on a fresh server: {}", r.text);
                results.insert(key.clone(), r.text);
            }
            texts.push(results[&key].clone());
        }
        let op: ta_walk::op::Op = serde_json::from_value(s["op"].clone()).unwrap();
        let expected: ta_types::Expected = serde_json::from_value(s["expected"].clone()).unwrap();
        // The answer is in what the model is shown of the answering results (cut as rollouts
        // cut them): the last step's, one per label of a comparison across calls, and a
        // picked file's own call after them (`Op::results`).
        let answering = op.results();
        let shown: Vec<ta_walk::parse::Parsed> =
            texts[texts.len() - answering..].iter().map(|t| ta_walk::parse::seen(t, ta_rollout::AgentConfig::DEFAULT.tool_result_max_chars).0).collect();
        assert_eq!(op.answer_all(&shown.iter().collect::<Vec<_>>()), Some(expected), "{s}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn walk_on_the_filesystem_server() {
    let Some(exe) = SERVER_FILESYSTEM.path("walk_on_the_filesystem_server") else { return };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("fs");
    fixture("fs", &root);
    let server = format!("{} {}", exe.display(), root.display());
    let mut w = walk(dir.path(), &server, &[]).unwrap();
    w.assert_read_only(&["write_file", "edit_file", "create_directory", "move_file"]);
    assert!(w.scenarios.len() >= 300 && w.summary["questions"].as_u64().unwrap() >= 300, "{}", w.stdout);
    // People ask about their own files: a share of the questions say "in my workspace", "my
    // travel folder". Each is asked once, whoever's folder it names; the checks below read every
    // place as "the".
    let task = |s: &Value| s["task"].as_str().unwrap().to_string();
    let mine: Vec<String> = w.scenarios.iter().map(task).filter(|t| t.contains(" my ")).collect();
    assert!(mine.len() * 20 >= w.scenarios.len() && mine.len() * 2 <= w.scenarios.len(), "{} of {} in the first person", mine.len(), w.scenarios.len());
    assert!(mine.iter().any(|t| t.contains("in my workspace") || t.contains("in my whole workspace")) && mine.iter().any(|t| t.contains("directly in my ")), "{mine:?}");
    assert!(mine.iter().all(|t| !t.contains("my top folder")), "{mine:?}");
    assert!(mine.iter().any(|t| t.starts_with("How many ") && t.contains(" do I have ")), "{mine:?}");
    for s in &mut w.scenarios {
        s["task"] = task(s).replace(" my ", " the ").replace(" do I have ", " are there ").into();
    }
    // A name with an extension is asked about as a file, even in a list of folders.
    let folder_named = |t: &str| t.split_once("a folder named ").map(|(_, rest)| rest.trim_start_matches('"').split([' ', '"']).next().unwrap_or("").to_string());
    let odd: Vec<String> = w.scenarios.iter().map(task).filter(|t| folder_named(t).is_some_and(|n| n.contains('.'))).collect();
    assert!(odd.is_empty(), "{odd:?}");
    let asked: BTreeSet<String> = w.scenarios.iter().map(task).collect();
    assert_eq!(asked.len(), w.scenarios.len(), "a question asked twice, once in the first person");
    assert!(w.levels().len() >= 3, "levels {:?}", w.levels());
    // Folders go to the tools that list folders, files to those that read files: hardly a call
    // fails (445 of 1,244 did when any path went to any `path` argument; the few left are the
    // server's own command-line paths, outside the folder it serves).
    let (failed, calls) = (w.summary["failed_calls"].as_u64().unwrap(), w.summary["calls"].as_u64().unwrap());
    assert!(failed * 20 <= calls, "{failed} of {calls} calls failed\n{}", w.stdout);
    // `accessed` changes when a file is read: never asked about.
    let unstable: Vec<&str> = w.summary["unstable"]["get_file_info"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(unstable.contains(&"accessed"), "{unstable:?}");
    assert!(w.scenarios.iter().all(|s| s["op"]["field"] != "accessed"));
    let templates: BTreeSet<&str> = w.scenarios.iter().map(|s| s["template"].as_str().unwrap()).collect();
    for t in ["count", "count_where", "lookup", "field", "extreme", "exists", "select", "list", "lines"] {
        assert!(templates.contains(t), "no {t} question: {templates:?}");
    }
    // Answers never carry the fixture's absolute path, and questions name files relative to it.
    for s in &w.scenarios {
        assert!(!s["expected"].to_string().contains(&root.display().to_string()), "{s}");
        assert!(!s["task"].as_str().unwrap().contains(&root.display().to_string()), "{s}");
    }
    // A file is found by a word of its name (a glob search from the folder the server shows) and
    // asked about by that word.
    let found = w.scenarios.iter().find(|s| s["task"].as_str().unwrap().contains("the pancakes file")).expect("no file found by a word");
    let steps: Vec<&str> = found["reference"].as_array().unwrap().iter().map(|r| r["tool"].as_str().unwrap()).collect();
    assert_eq!(steps[..2], ["list_allowed_directories", "search_files"], "{found}");
    assert_eq!(found["reference"][1]["arguments"]["pattern"], "**/*pancakes*");
    assert!(w.scenarios.iter().any(|s| s["task"].as_str().unwrap().contains("Markdown files")), "extensions by their name");
    // A file's own lists: the to-do items not ticked off yet, counted from the file itself.
    let todo = std::fs::read_to_string(root.join("todo.md")).unwrap();
    let open = todo.lines().filter(|l| l.starts_with("- [ ]")).count();
    let unticked = w
        .scenarios
        .iter()
        .find(|s| s["task"].as_str().unwrap().contains("not ticked off yet") && s["task"].as_str().unwrap().contains("todo") && s["template"] == "count_where")
        .expect("no count of unticked to-do items");
    assert_eq!(unticked["expected"].as_f64(), Some(open as f64), "{unticked}");
    assert!(w.scenarios.iter().any(|s| s["task"].as_str().unwrap().starts_with("How many bullet points are there in")), "bullet points counted");
    // `read_media_file` returns a file as a blob, which the client summarizes in one line: that
    // line is not the file's text, so no question counts its lines or reads its title.
    let from_blob = |s: &&Value| s["reference"].as_array().unwrap().last().is_some_and(|r| r["tool"] == "read_media_file");
    assert!(!w.scenarios.iter().filter(from_blob).any(|s| s["template"] == "lines" || s["template"] == "heading"), "lines of a blob's summary");
    // Answers checked against the fixture on disk: a file's lines are all its lines, blank
    // ones included; a size asked "in bytes" is the file's size to the byte (the listing's
    // rounded `2.77 KB` is answered as shown); a file's lines read as a list are its entries,
    // and an error about a folder is no entry of anything.
    let mut lines_checked = 0;
    for s in &w.scenarios {
        let last = s["reference"].as_array().unwrap().last().unwrap();
        let task = s["task"].as_str().unwrap();
        if s["template"] == "lines" {
            let text = std::fs::read_to_string(last["arguments"]["path"].as_str().unwrap()).unwrap();
            assert_eq!(s["expected"].as_f64(), Some(text.lines().count() as f64), "{s}");
            lines_checked += 1;
        }
        if task.contains("in bytes") {
            assert!(s["expected"].as_f64().is_some_and(|x| x.fract() == 0.0), "a size in bytes that is no whole number: {s}");
        }
        assert!(!task.contains("multiple file"), "the tool's name as the items' noun: {task}");
        assert!(!s["expected"].to_string().contains("Error"), "{s}");
    }
    assert!(lines_checked >= 10, "{lines_checked} line counts");
    // A program's lines are code: no settings are read from them.
    let read_code = |s: &&Value| {
        let last = s["reference"].as_array().unwrap().last().unwrap();
        last["tool"].as_str().unwrap().starts_with("read_") && last["arguments"]["path"].as_str().is_some_and(|p| p.ends_with(".py"))
    };
    assert!(!w.scenarios.iter().filter(read_code).any(|s| s["template"] == "field"), "a setting read from a script");
    // Which file of a folder was modified last, compared across each file's `get_file_info`
    // and checked against the files' own mtimes.
    let across: Vec<&Value> = w.scenarios.iter().filter(|s| s["template"] == "across" && s["op"]["measure"]["field"] == "modified").collect();
    assert!(across.len() >= 5, "{} questions across a folder's files", across.len());
    assert!(across.iter().any(|s| s["expected"].as_str().is_some_and(|e| e.contains('/'))), "none across the files of a tree");
    for s in across {
        let labels = s["op"]["labels"].as_array().unwrap();
        let steps = s["reference"].as_array().unwrap();
        let compared = &steps[steps.len() - labels.len()..];
        // The files are reached through the listing that shows them (the step just before the
        // compared ones, of their folder or one above it), not through whichever search first
        // came upon each of them.
        let listed = steps[steps.len() - labels.len() - 1]["arguments"]["path"].as_str().unwrap();
        assert!(compared.iter().all(|r| r["arguments"]["path"].as_str().unwrap().starts_with(&format!("{listed}/"))), "{s}");
        assert!(!steps.iter().any(|r| r["tool"] == "search_files"), "a search on the way: {s}");
        // The compared calls need only the listing, not each other: one turn makes them all.
        let together: Vec<bool> = compared.iter().map(|r| r["with_previous"] == true).collect();
        assert!(!together[0] && together[1..].iter().all(|t| *t), "{s}");
        assert!(steps[..steps.len() - labels.len()].iter().all(|r| r.get("with_previous").is_none()), "{s}");
        let mtimes: Vec<std::time::SystemTime> =
            compared.iter().map(|r| std::fs::metadata(r["arguments"]["path"].as_str().unwrap()).unwrap().modified().unwrap()).collect();
        let best = if s["op"]["max"] == true { mtimes.iter().max() } else { mtimes.iter().min() }.unwrap();
        let at = mtimes.iter().position(|m| m == best).unwrap();
        assert_eq!(s["expected"], labels[at], "{s}");
    }
    // Which file of a folder is the longest, from each file read whole, against `lines()` of
    // the files on disk.
    let longest: Vec<&Value> = w.scenarios.iter().filter(|s| s["template"] == "across" && s["op"]["measure"] == "lines").collect();
    assert!(longest.len() >= 4, "{} questions about the longest file", longest.len());
    for s in longest {
        let labels = s["op"]["labels"].as_array().unwrap();
        let steps = s["reference"].as_array().unwrap();
        let lines: Vec<usize> =
            steps[steps.len() - labels.len()..].iter().map(|r| std::fs::read_to_string(r["arguments"]["path"].as_str().unwrap()).unwrap().lines().count()).collect();
        let best = if s["op"]["max"] == true { lines.iter().max() } else { lines.iter().min() }.unwrap();
        assert_eq!(lines.iter().filter(|n| *n == best).count(), 1, "a tie: {s}");
        assert_eq!(s["expected"], labels[lines.iter().position(|n| n == best).unwrap()], "{s}");
    }
    // Two steps: the file a comparison picks, then its size, against the file on disk.
    let chained: Vec<&Value> = w.scenarios.iter().filter(|s| s["template"] == "chained").collect();
    assert!(chained.len() >= 20, "{} questions in two steps", chained.len());
    let mut sizes = 0;
    for s in chained.iter().filter(|s| s["task"].as_str().unwrap().ends_with("How big is that file in bytes?")) {
        let winner = s["op"]["winner"].as_str().unwrap();
        let own = s["reference"].as_array().unwrap().iter().filter_map(|r| r["arguments"]["path"].as_str()).find(|p| p.ends_with(&format!("/{winner}"))).unwrap();
        assert_eq!(s["expected"].as_f64(), Some(std::fs::metadata(own).unwrap().len() as f64), "{s}");
        sizes += 1;
    }
    assert!(sizes >= 2, "{sizes} sizes of a picked file");
    // Two steps about a folder: the one a tree shows holding the most files (checked on disk),
    // then that folder's own call.
    let folders: Vec<&&Value> = chained.iter().filter(|s| s["task"].as_str().unwrap().contains("in that folder")).collect();
    assert!(folders.len() >= 3, "{} questions about the folder with the most files", folders.len());
    for s in folders {
        assert_eq!(s["op"]["pick"]["op"], "most", "{s}");
        let steps = s["reference"].as_array().unwrap();
        let [.., tree, own] = steps.as_slice() else { panic!("{s}") };
        let (tree, own) = (Path::new(tree["arguments"]["path"].as_str().unwrap()), own["arguments"]["path"].as_str().unwrap());
        let winner = s["op"]["winner"].as_str().unwrap();
        assert_eq!(own, tree.join(winner).display().to_string(), "{s}");
        let mut counts: Vec<(String, usize)> = std::fs::read_dir(tree)
            .unwrap()
            .map(Result::unwrap)
            .filter(|e| e.path().is_dir())
            .map(|e| {
                let mut inside = Vec::new();
                below(&e.path(), &mut inside);
                (e.file_name().to_string_lossy().into_owned(), inside.iter().filter(|p| p.is_file()).count())
            })
            .collect();
        counts.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
        assert_eq!(counts[0].0, winner, "{counts:?}: {s}");
    }
    // Another cell of the row with the extreme: the family of the plant that takes longest.
    let plants = std::fs::read_to_string(root.join("projects/garden-planner/data/plants.csv")).unwrap();
    let rows: Vec<Vec<&str>> = plants.lines().skip(1).map(|l| l.split(',').collect()).collect();
    let longest = rows.iter().max_by_key(|r| r[2].parse::<u32>().unwrap()).unwrap();
    let family = w
        .scenarios
        .iter()
        .find(|s| {
            s["task"].as_str().unwrap().starts_with("What is the family of the row with the highest days to harvest")
                && s["reference"].as_array().unwrap().last().unwrap()["arguments"]["path"].as_str().is_some_and(|p| p.ends_with("plants.csv"))
        })
        .expect("no cell of the row with the extreme");
    assert_eq!(family["expected"], longest[1], "{family}");
    // Size thresholds, checked against the files on disk: "Which files in the
    // projects/weather-station/src folder are larger than 500 bytes?"
    let mut thresholds = 0;
    for s in w.scenarios.iter().filter(|s| s["template"].as_str().unwrap().ends_with("_past") && s["op"]["field"] == "size") {
        let last = s["reference"].as_array().unwrap().last().unwrap();
        assert_eq!(last["tool"], "list_directory_with_sizes", "{s}");
        let (bound, above) = (s["op"]["bound"].as_f64().unwrap(), s["op"]["above"] == true);
        let past: Vec<String> = std::fs::read_dir(last["arguments"]["path"].as_str().unwrap())
            .unwrap()
            .map(Result::unwrap)
            .filter(|e| e.file_type().unwrap().is_file())
            .filter(|e| if above { e.metadata().unwrap().len() as f64 > bound } else { (e.metadata().unwrap().len() as f64) < bound })
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        match s["expected"]["set"].as_array() {
            Some(set) => assert_eq!(sorted(set.iter().map(|v| v.as_str().unwrap())), sorted(past.iter().map(String::as_str)), "{s}"),
            None => assert_eq!(s["expected"].as_f64(), Some(past.len() as f64), "{s}"),
        }
        thresholds += 1;
    }
    assert!(thresholds >= 10, "{thresholds} size thresholds");
    // A search's finds listed as paths inside the folder searched, checked against the tree on
    // disk: "List the JSON files anywhere in the top folder."
    fn below(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
            out.push(e.path());
            if e.file_type().unwrap().is_dir() {
                below(&e.path(), out);
            }
        }
    }
    let mut everything = Vec::new();
    below(&root, &mut everything);
    let searched: Vec<&Value> = w.scenarios.iter().filter(|s| s["template"] == "list" && s["op"]["under"].is_string()).collect();
    assert!(searched.len() >= 5, "{} lists of a search's finds", searched.len());
    for s in searched {
        let pattern = s["reference"].as_array().unwrap().last().unwrap()["arguments"]["pattern"].as_str().unwrap();
        let word = pattern.trim_start_matches("**/*").trim_end_matches('*');
        let want = sorted(
            everything.iter().filter(|p| p.file_name().unwrap().to_string_lossy().contains(word)).map(|p| p.strip_prefix(&root).unwrap().to_string_lossy().into_owned()),
        );
        assert_eq!(sorted(s["expected"]["set"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string())), want, "{s}");
    }
    // A tree that starts with a folder still has its files' extensions: "How many Python files
    // are there anywhere in the projects folder?", checked against the tree on disk.
    let python = w.scenarios.iter().find(|s| s["task"] == "How many Python files are there anywhere in the projects folder?").expect("no extension count over a tree");
    let mut projects = Vec::new();
    below(&root.join("projects"), &mut projects);
    assert_eq!(python["expected"].as_f64(), Some(projects.iter().filter(|p| p.extension().is_some_and(|e| e == "py")).count() as f64), "{python}");
    // Empty folders anywhere below a folder, checked against the tree on disk.
    let mut empties = 0;
    for s in w.scenarios.iter().filter(|s| s["template"] == "count_where" && s["op"]["filter"][0] == "children.count") {
        let folder = Path::new(s["reference"].as_array().unwrap().last().unwrap()["arguments"]["path"].as_str().unwrap()).to_path_buf();
        let mut inside = Vec::new();
        below(&folder, &mut inside);
        let empty = inside.iter().filter(|p| p.is_dir() && std::fs::read_dir(p).unwrap().next().is_none()).count();
        assert_eq!(s["expected"].as_f64(), Some(empty as f64), "{s}");
        empties += 1;
    }
    assert!(empties >= 2, "{empties} counts of empty folders");
    // Folders named as people name them on every other call: by their own name, with the
    // parent's where another folder has it ("the src folder of weather-station").
    let by_name = w.scenarios.iter().find(|s| s["task"].as_str().unwrap().contains("the src folder of weather-station")).expect("no folder named by its name");
    let paths: Vec<&str> = by_name["reference"].as_array().unwrap().iter().filter_map(|r| r["arguments"]["path"].as_str()).collect();
    assert!(paths.iter().any(|p| p.ends_with("projects/weather-station/src")), "{by_name}");
    assert!(w.scenarios.iter().any(|s| s["task"].as_str().unwrap().contains("projects/weather-station/src folder")), "and by their path");
    // An empty folder is asked about too: nothing in it, 0 items.
    assert_eq!(std::fs::read_dir(root.join("travel/iceland")).unwrap().count(), 0);
    let empty = w.scenarios.iter().find(|s| s["task"] == "Is there anything in the travel/iceland folder?").expect("no question about the empty folder");
    assert_eq!(empty["expected"]["exact"], "no", "{empty}");
    assert!(w.scenarios.iter().any(|s| s["task"].as_str().unwrap().contains("entries in the shopping file")), "a shopping list's entries");
    // The root's directory_tree is shown whole: counted over, against the files on disk.
    let tree_at_root =
        |s: &Value| s["reference"].as_array().unwrap().last().is_some_and(|r| r["tool"] == "directory_tree" && r["arguments"]["path"] == root.display().to_string());
    let markdown = w
        .scenarios
        .iter()
        .find(|s| {
            tree_at_root(s) && s["task"].as_str().unwrap().starts_with("How many Markdown files are there in the") && s["task"].as_str().unwrap().ends_with("workspace?")
        })
        .expect("no count over the whole tree");
    // Said both ways: "in the whole workspace" and, as people ask it, "in the workspace".
    let said = |how: &str| w.scenarios.iter().filter(|s| tree_at_root(s)).any(|s| s["task"].as_str().unwrap().contains(how));
    assert!(said("in the whole workspace") && said("in the workspace"), "the whole workspace said one way only");
    assert_eq!(markdown["expected"].as_f64(), Some(everything.iter().filter(|f| f.extension().is_some_and(|e| e == "md")).count() as f64), "{markdown}");
    // The folder with the most files, its subfolders counted, against the files on disk.
    let most = w
        .scenarios
        .iter()
        .find(|s| s["task"] == "Which folder in the projects folder has the most files, counting its subfolders?")
        .expect("no folder with the most files");
    let files_below = |d: &Path| {
        let mut all = Vec::new();
        below(d, &mut all);
        all.iter().filter(|p| p.is_file()).count()
    };
    let per_project: Vec<(String, usize)> = std::fs::read_dir(root.join("projects"))
        .unwrap()
        .map(Result::unwrap)
        .filter(|e| e.path().is_dir())
        .map(|e| (e.file_name().to_string_lossy().into_owned(), files_below(&e.path())))
        .collect();
    let top = per_project.iter().map(|(_, n)| *n).max().unwrap();
    assert_eq!(per_project.iter().filter(|(_, n)| *n == top).count(), 1, "a tie: {per_project:?}");
    assert_eq!(most["expected"].as_str(), per_project.iter().find(|(_, n)| *n == top).map(|(p, _)| p.as_str()), "{per_project:?}");
    // An episode's turns hold every reference's turns and the answer; the calls compared across
    // a folder share one turn, so a folder of more files than an episode has turns is asked
    // about ("Which file anywhere in the travel folder was modified most recently?").
    let turns = ta_rollout::AgentConfig::DEFAULT.max_turns as usize;
    let turns_of = |s: &Value| s["reference"].as_array().unwrap().iter().filter(|r| r["with_previous"] != true).count();
    assert!(w.scenarios.iter().all(|s| turns_of(s) < turns), "a reference of {turns} turns or more");
    assert!(w.scenarios.iter().any(|s| s["reference"].as_array().unwrap().len() >= turns), "no reference of {turns} calls or more");
    // "In my workspace" means anywhere in it: what only the top folder's listing shows is asked
    // as what sits at its top.
    let at_top =
        |s: &&Value| s["reference"].as_array().unwrap().last().is_some_and(|r| r["tool"] == "list_directory" && r["arguments"]["path"] == root.display().to_string());
    let top: Vec<&str> = w.scenarios.iter().filter(at_top).map(|s| s["task"].as_str().unwrap()).collect();
    assert!(top.iter().any(|t| t.contains("at the top of the workspace")), "{top:?}");
    assert!(top.iter().all(|t| !t.contains("in the workspace") && !t.contains("in the top folder")), "{top:?}");
    // So is what a listing of a folder holding folders shows: "directly in the travel folder";
    // "in the travel folder" alone is anywhere in it.
    let last_path = |s: &Value| s["reference"].as_array().unwrap().last().and_then(|r| r["arguments"]["path"].as_str().map(String::from));
    let lists = |s: &&Value| s["reference"].as_array().unwrap().last().is_some_and(|r| r["tool"].as_str().unwrap().starts_with("list_directory"));
    let with_folders = |p: &str| p != root.display().to_string() && std::fs::read_dir(p).unwrap().any(|e| e.unwrap().file_type().unwrap().is_dir());
    let direct: Vec<&Value> = w.scenarios.iter().filter(lists).filter(|s| last_path(s).is_some_and(|p| with_folders(&p))).collect();
    assert!(direct.len() >= 20, "{} questions on a listing of a folder with folders", direct.len());
    assert!(direct.iter().all(|s| s["task"].as_str().unwrap().contains("directly in")), "{direct:?}");
    // Files' sizes are compared in the one call that shows them all, the folders among them
    // left out, not a call per file: checked against the files on disk.
    let sized: Vec<&Value> = direct.iter().copied().filter(|s| s["template"] == "extreme" && s["op"]["field"] == "size").collect();
    assert!(!sized.is_empty(), "no file of a folder with folders compared by size");
    for s in &sized {
        let folder = last_path(s).unwrap();
        let files: Vec<(String, u64)> = std::fs::read_dir(&folder)
            .unwrap()
            .map(Result::unwrap)
            .filter(|e| e.file_type().unwrap().is_file())
            .map(|e| (e.file_name().to_string_lossy().into_owned(), e.metadata().unwrap().len()))
            .collect();
        let best = if s["op"]["max"] == true { files.iter().map(|f| f.1).max() } else { files.iter().map(|f| f.1).min() };
        assert_eq!(files.iter().find(|f| Some(f.1) == best).map(|f| f.0.as_str()), s["expected"].as_str(), "{s}");
    }
    let sized_folders: Vec<String> =
        w.scenarios.iter().filter(|s| s["reference"].as_array().unwrap().last().unwrap()["tool"] == "list_directory_with_sizes").filter_map(last_path).collect();
    let per_file = |s: &&Value| {
        let steps = s["reference"].as_array().unwrap();
        // A tree's files (anywhere below) have no listing with all their sizes.
        s["template"] == "across" && s["op"]["measure"]["field"] == "size" && !s["task"].as_str().unwrap().contains("anywhere") && {
            let first = steps[steps.len() - s["op"]["labels"].as_array().unwrap().len()]["arguments"]["path"].as_str().unwrap();
            sized_folders.iter().any(|f| Path::new(first).parent() == Some(Path::new(f)))
        }
    };
    assert!(!w.scenarios.iter().any(|s| per_file(&s)), "sizes compared a call per file where one listing shows them");
    // A file found by a month's name is asked as people write the month, the search keeping
    // the name's case (`**/*april*` finds readings-april.csv, `**/*April*` nothing).
    let april = w.scenarios.iter().find(|s| s["task"].as_str().unwrap().contains("the April file")).expect("no file found by a month's name");
    let patterns: Vec<&str> = april["reference"].as_array().unwrap().iter().filter_map(|r| r["arguments"]["pattern"].as_str()).collect();
    assert_eq!(patterns, ["**/*april*"], "{april}");
    // A tree's files are named by their paths below the folder: two folders hold a budget.csv.
    let csv = w.scenarios.iter().find(|s| s["task"] == "Which CSV files are there anywhere in the travel folder?").expect("no CSV files of the travel tree");
    assert_eq!(sorted(csv["expected"]["set"].as_array().unwrap().iter().map(|v| v.as_str().unwrap())), vec!["kyoto/budget.csv", "lisbon/budget.csv"], "{csv}");
    replay_all(&server, &w.scenarios).await;
    // Shown only its first 4,000 characters, the same tree is cut: said, and nothing is counted
    // over it.
    let narrow_dir = dir.path().join("narrow");
    std::fs::create_dir_all(&narrow_dir).unwrap();
    let narrow = walk(&narrow_dir, &server, &["--tool-result-max-chars", "4000"]).unwrap();
    assert!(narrow.summary["cut_calls"].as_u64().unwrap() >= 1, "{}", narrow.stdout);
    assert!(!narrow.scenarios.iter().any(|s| tree_at_root(s) && s["template"] == "count"), "a count over a cut result");

    // The references are demonstrations: `collect --reference` turns them into traces.
    let traces = dir.path().join("traces");
    let out = Command::new(bin())
        .args(["collect", "--reference", "--server", &server, "--split", "train", "--limit", "120", "--scenarios"])
        .arg(w.out.join("scenarios.jsonl"))
        .arg("--out")
        .arg(&traces)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let traces = jsonl(&traces.join("traces.jsonl"));
    let kept = traces.len();
    // A worked-out answer is worked out in the open before `complete_task`.
    let explained =
        traces.iter().filter(|t| t["messages"].as_array().unwrap().iter().any(|m| m["content"].as_str().is_some_and(|c| c.starts_with("Counting the")))).count();
    assert!(explained > 0, "no reference trace explains a count");
    // A few rows of long files lie beyond what a tool result shows the model: those are skipped.
    assert!(kept >= 110, "{kept} of 120 reference traces\n{}", String::from_utf8_lossy(&out.stdout));
}

#[tokio::test(flavor = "multi_thread")]
async fn walk_on_the_git_server() {
    let Some(exe) = MCP_SERVER_GIT.path("walk_on_the_git_server") else { return };
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    fixture("git", &repo);
    let head = || String::from_utf8(Command::new("git").arg("-C").arg(&repo).args(["rev-parse", "HEAD"]).output().unwrap().stdout).unwrap();
    let before = head();
    let server = format!("{} --repository {}", exe.display(), repo.display());
    let w = walk(dir.path(), &server, &[]).unwrap();
    w.assert_read_only(&["git_commit", "git_add", "git_reset", "git_create_branch", "git_checkout"]);
    assert_eq!(head(), before);
    assert!(w.scenarios.len() >= 300, "{}", w.stdout);
    assert!(w.levels().len() >= 3, "levels {:?}", w.levels());
    // The repository is named by the path the server was started on: the walk's seed.
    assert!(w.scenarios.iter().all(|s| s["task"].as_str().unwrap().contains(&repo.display().to_string())));
    let chained = w.scenarios.iter().filter(|s| s["reference"].as_array().unwrap().len() >= 2).count();
    assert!(chained >= 100, "{chained} scenarios chain two calls or more");
    // The history is also read a month at a time, a branch's tip and a file as a branch has it
    // through `git_show`.
    let asks = |text: &str, arg: &dyn Fn(&Value) -> bool| {
        w.scenarios.iter().any(|s| s["task"].as_str().unwrap().contains(text) && s["reference"].as_array().unwrap().iter().any(|r| arg(&r["arguments"])))
    };
    assert!(asks("in January 2024", &|a| a["start_timestamp"] == "2024-01-01T00:00:00" && a["end_timestamp"] == "2024-01-31T23:59:59"), "no month of history");
    assert!(asks("the latest commit on fix/pager", &|a| a["revision"] == "fix/pager"), "no branch tip");
    assert!(asks("on the fix/pager branch", &|a| a["revision"].as_str().is_some_and(|r| r.starts_with("fix/pager"))), "a branch said one way only");
    assert!(asks("the file setup.cfg on main", &|a| a["revision"] == "main:setup.cfg"), "no file as a branch has it");
    // Whether a branch was merged, asked through `git_branch --contains` and checked against git
    // itself: main contains feature/search's tip, not docs/install's.
    let merged_into_main = |b: &str| {
        let out = Command::new("git").arg("-C").arg(&repo).args(["branch", "--contains", b]).output().unwrap();
        String::from_utf8(out.stdout).unwrap().lines().any(|l| l.trim_start_matches('*').trim() == "main")
    };
    for b in ["feature/search", "docs/install"] {
        // Said "Has fix/pager been …" or "Has the fix/pager branch been …".
        let qs = [format!("Has {b} been merged into main"), format!("Has the {b} branch been merged into main")];
        let s = w.scenarios.iter().find(|s| qs.iter().any(|q| s["task"].as_str().unwrap().starts_with(q.as_str()))).unwrap_or_else(|| panic!("no question: {qs:?}"));
        let yes = if merged_into_main(b) { "yes" } else { "no" };
        assert_eq!(s["expected"]["exact"], yes, "{s}");
        assert_eq!(s["reference"].as_array().unwrap().last().unwrap()["arguments"]["contains"], b, "{s}");
    }
    assert!(asks("containing the commit", &|a| a["contains"].as_str().is_some_and(ta_walk::parse::is_hex_id)), "no branches containing a commit");
    // Shown whole, the history is compared in the one call that shows it, never a month at a
    // time (eight calls that leave an episode no turn to answer).
    let logs = |s: &Value| s["reference"].as_array().unwrap().iter().filter(|r| r["tool"] == "git_log").count();
    assert!(!w.scenarios.iter().any(|s| s["template"] == "history" || logs(s) >= 2), "a whole history compared a month at a time");
    // Shown only its first 4,000 characters, the whole log is cut: then a month is compared with
    // the others across `git_log` a month at a time, checked against `git log`'s own count.
    let narrow_dir = dir.path().join("narrow");
    std::fs::create_dir_all(&narrow_dir).unwrap();
    let narrow = walk(&narrow_dir, &server, &["--tool-result-max-chars", "4000"]).unwrap();
    let busiest = narrow
        .scenarios
        .iter()
        .find(|s| s["template"] == "across" && s["op"]["labels"][0].as_str().is_some_and(|l| l.ends_with(" 2024")))
        .expect("no month compared with the others");
    let per_month: Vec<(String, usize)> = busiest["op"]["labels"]
        .as_array()
        .unwrap()
        .iter()
        .zip(&busiest["reference"].as_array().unwrap()[busiest["reference"].as_array().unwrap().len() - busiest["op"]["labels"].as_array().unwrap().len()..])
        .map(|(l, r)| {
            let a = &r["arguments"];
            let out = Command::new("git")
                .arg("-C")
                .arg(&repo)
                .args(["log", "--oneline", &format!("--since={}", a["start_timestamp"].as_str().unwrap()), &format!("--until={}", a["end_timestamp"].as_str().unwrap())])
                .output()
                .unwrap();
            (l.as_str().unwrap().to_string(), String::from_utf8(out.stdout).unwrap().lines().count())
        })
        .collect();
    let counts = per_month.iter().map(|(_, n)| *n);
    let top = if busiest["op"]["max"] == true { counts.max() } else { counts.min() }.unwrap();
    assert_eq!(busiest["expected"].as_str(), per_month.iter().find(|(_, n)| *n == top).map(|(l, _)| l.as_str()), "{per_month:?}");
    // The whole history, read a month at a time and found empty around the months: checked
    // against `git log` of the checked-out branch (every commit, and each author's).
    let git_lines = |args: &[&str]| String::from_utf8(Command::new("git").arg("-C").arg(&repo).args(args).output().unwrap().stdout).unwrap();
    let history: Vec<&Value> = narrow.scenarios.iter().filter(|s| s["template"] == "history").collect();
    assert!(history.len() >= 4, "{} questions about the whole history", history.len());
    let commits: Vec<String> = git_lines(&["log", "--format=%an\t%s"]).lines().map(String::from).collect();
    for s in history {
        let of = &s["op"]["of"];
        let author = of["by"]["value"].as_str();
        let mine: Vec<&str> = commits.iter().filter(|c| author.is_none_or(|a| c.starts_with(&format!("{a}\t")))).map(|c| c.split_once('\t').unwrap().1).collect();
        if of == "count" || of["by"]["label"].is_null() && author.is_some() {
            assert_eq!(s["expected"].as_f64(), Some(mine.len() as f64), "{s}");
        } else if let Some(set) = s["expected"]["set"].as_array() {
            assert_eq!(sorted(set.iter().map(|v| v.as_str().unwrap())), sorted(mine), "{s}");
        } else {
            let mut per: HashMap<String, usize> = HashMap::new();
            for c in &commits {
                *per.entry(c.split_once('\t').unwrap().0.to_string()).or_default() += 1;
            }
            let best = if of["most"]["max"] == true { per.values().max() } else { per.values().min() }.unwrap();
            assert_eq!(per.get(s["expected"].as_str().unwrap()), Some(best), "{s} {per:?}");
        }
    }
    // The whole log in one call (shown whole): each author's commits, against `git log`.
    let whole_log = |s: &&Value| {
        s["reference"]
            .as_array()
            .unwrap()
            .last()
            .is_some_and(|r| r["tool"] == "git_log" && r["arguments"]["max_count"] == 1000 && r["arguments"]["start_timestamp"].is_null())
    };
    let by_author: Vec<&Value> = w.scenarios.iter().filter(whole_log).filter(|s| s["task"].as_str().unwrap().starts_with("How many commits did ")).collect();
    assert!(by_author.len() >= 3, "{} counts of an author's commits in the whole log", by_author.len());
    // The busiest month, from the whole log in one call, against `git log`'s months.
    let busiest_whole = w.scenarios.iter().filter(whole_log).find(|s| s["template"] == "month").expect("no busiest month from the whole log");
    let mut per_month: HashMap<String, usize> = HashMap::new();
    for ym in git_lines(&["log", "--format=%ad", "--date=format:%Y-%m"]).lines() {
        *per_month.entry(ym.to_string()).or_default() += 1;
    }
    let top = *per_month.values().max().unwrap();
    let ym: Vec<&String> = per_month.iter().filter(|(_, n)| **n == top).map(|(k, _)| k).collect();
    let [ym] = ym.as_slice() else { panic!("a tie: {per_month:?}") };
    let month = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"]
        [ym[5..7].parse::<usize>().unwrap() - 1];
    assert_eq!(busiest_whole["expected"].as_str(), Some(format!("{month} {}", &ym[..4])).as_deref(), "{busiest_whole}");
    // A log read without a revision is the checked-out branch's: the questions say which.
    let branch = git_lines(&["branch", "--show-current"]).trim().to_string();
    let named = |s: &&Value, how: &str| s["task"].as_str().unwrap().contains(&format!(" on {how} in the repository"));
    assert!(by_author.iter().all(|s| named(s, &branch) || named(s, &format!("the {branch} branch"))), "{by_author:?}");
    let whole: Vec<&Value> = w.scenarios.iter().filter(whole_log).collect();
    assert!(whole.iter().any(|s| named(s, &branch)) && whole.iter().any(|s| named(s, &format!("the {branch} branch"))), "the branch said one way only");
    // The author with the fewest commits, from the whole log, against `git log`.
    let fewest = whole.iter().find(|s| s["op"]["op"] == "most" && s["op"]["max"] == false).expect("no fewest from the whole log");
    let mut per: HashMap<&str, usize> = HashMap::new();
    for c in &commits {
        *per.entry(c.split_once('\t').unwrap().0).or_default() += 1;
    }
    assert_eq!(per.get(fewest["expected"].as_str().unwrap()), per.values().min(), "{fewest} {per:?}");
    for s in by_author {
        let who = s["task"].as_str().unwrap().trim_start_matches("How many commits did ").split(" make ").next().unwrap();
        assert_eq!(s["expected"].as_f64(), Some(commits.iter().filter(|c| c.starts_with(&format!("{who}\t"))).count() as f64), "{s}");
    }
    // A Markdown file's sections, as main has it: the changelog's releases.
    let changelog = Command::new("git").arg("-C").arg(&repo).args(["show", "main:CHANGELOG.md"]).output().unwrap();
    let releases: Vec<Value> =
        String::from_utf8(changelog.stdout).unwrap().lines().filter_map(|l| l.strip_prefix("## ")).map(|h| Value::String(h.trim().to_string())).collect();
    let sections = w
        .scenarios
        .iter()
        .find(|s| {
            s["task"].as_str().unwrap().starts_with("List the sections in the file CHANGELOG.md on ")
                && s["reference"].as_array().unwrap().last().unwrap()["arguments"]["revision"] == "main:CHANGELOG.md"
        })
        .expect("no sections");
    assert_eq!(sections["expected"]["set"].as_array(), Some(&releases), "{sections}");
    // The lines a commit added and removed, checked against `git show --numstat`.
    let numstat = |rev: &str| {
        let out = Command::new("git").arg("-C").arg(&repo).args(["show", "--numstat", "--format=", rev]).output().unwrap();
        let cols: Vec<Vec<f64>> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| l.split_whitespace().take(2).filter_map(|x| x.parse().ok()).collect())
            .filter(|c: &Vec<f64>| c.len() == 2)
            .collect();
        (cols.iter().map(|c| c[0]).sum::<f64>(), cols.iter().map(|c| c[1]).sum::<f64>())
    };
    let diff_lines: Vec<&Value> = w.scenarios.iter().filter(|s| s["template"] == "diff_lines").collect();
    assert!(diff_lines.len() >= 20, "{} questions about lines added or removed", diff_lines.len());
    for s in diff_lines {
        let (added, removed) = numstat(s["reference"].as_array().unwrap().last().unwrap()["arguments"]["revision"].as_str().unwrap());
        let want = if s["op"]["added"] == true { added } else { removed };
        assert_eq!(s["expected"].as_f64(), Some(want), "{s}");
    }
    replay_all(&server, &w.scenarios).await;

    // Only the tools the tasks need: with the write tools left out, every tool offered declares
    // readOnlyHint, so episodes share one server; the traces show the model those tools only.
    let collect = |extra: &[&str], out: &str| {
        Command::new(bin())
            .args(["collect", "--reference", "--server", &server, "--split", "train", "--limit", "20", "--scenarios"])
            .arg(w.out.join("scenarios.jsonl"))
            .args(extra)
            .arg("--out")
            .arg(dir.path().join(out))
            .output()
            .unwrap()
    };
    let read = "git_log,git_show,git_branch,git_diff,git_status";
    let out = collect(&["--tools", read], "traces");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.contains("isolation: none (every tool declares readOnlyHint"), "{stderr}");
    assert!(stderr.contains("tools offered: git_status, git_diff, git_log, git_show, git_branch"), "{stderr}");
    let traces = jsonl(&dir.path().join("traces/traces.jsonl"));
    assert!(!traces.is_empty());
    for t in &traces {
        let offered: BTreeSet<&str> = t["tools"].as_array().unwrap().iter().map(|x| x["function"]["name"].as_str().unwrap()).collect();
        assert!(offered.iter().all(|n| read.contains(n) || *n == "complete_task"), "{offered:?}");
    }
    let out = collect(&["--exclude-tools", "git_comit"], "typo");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("`git_comit`") && stderr.contains("git_commit"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn walk_on_the_memory_server_leaves_the_graph_unchanged() {
    let Some(exe) = SERVER_MEMORY.path("walk_on_the_memory_server_leaves_the_graph_unchanged") else { return };
    let dir = tempfile::tempdir().unwrap();
    let graph = dir.path().join("memory.jsonl");
    fixture("memory", &graph);
    let before = std::fs::read(&graph).unwrap();
    let server = format!("env MEMORY_FILE_PATH={} {}", graph.display(), exe.display());
    // Asked to call a tool the server declares as writing, the walk refuses before any call.
    let err = walk(dir.path(), &server, &["--allow-tool", "create_entities"]).err().expect("a declared writer is refused");
    assert!(err.contains("--allow-tool create_entities") && err.contains("readOnlyHint: false"), "{err}");
    let w = walk(dir.path(), &server, &[]).unwrap();
    w.assert_read_only(&["create_entities", "create_relations", "add_observations", "delete_entities", "delete_observations", "delete_relations"]);
    assert_eq!(std::fs::read(&graph).unwrap(), before, "the walk changed the knowledge graph");
    assert!(w.scenarios.len() >= 100, "{}", w.stdout);
    replay_all(&server, &w.scenarios).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn walk_on_server_everything() {
    let Some(exe) = SERVER_EVERYTHING.path("walk_on_server_everything") else { return };
    let dir = tempfile::tempdir().unwrap();
    let server = exe.display().to_string();
    // A tool that only waits is left out by name; one that returns the environment never runs.
    let w = walk(dir.path(), &server, &["--deny-tool", "trigger-long-running-operation"]).unwrap();
    w.assert_read_only(&["toggle-simulated-logging", "get-env", "trigger-long-running-operation"]);
    assert!(!w.scenarios.is_empty(), "{}", w.stdout);
    replay_all(&server, &w.scenarios).await;
}
