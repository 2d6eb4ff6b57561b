#!/usr/bin/env python3
"""Why the natural check's questions were answered wrong, from what benches/natural_check.sh leaves.

    python3 benches/natural_failures.py OUT_DIR [--data DIR] [--examples N]

For each model of each database's `check/` (as benches/natural_check.py reads it: `base`, `SFT`,
`SFT+GRPO`), every episode not judged right goes to the first of these that holds:
  - `not completed`: the episode ended otherwise (ran out of turns, an error);
  - `no successful query`: no SQL query call returned rows (none made, or every one an error:
    a tool result starting "Error", as the demo server and PyPI's mcp-server-sqlite write them);
  - `rows held the answer`: every value of the question's expected answer is a cell of the last
    successful query's result, yet the final answer was judged wrong;
  - `other rows`: the last successful query's rows do not hold the answer.
A query call is a tool call whose arguments hold `sql` or `query`. The expected answers are the
questions' own: KaggleDBQA's `NAME.jsonl` in `--data` (default ../shared/data/kaggledbqa from the
repository root; read where they lie, never copied) and the demo's scenarios/company.jsonl.
Prints the counts per database group (KaggleDBQA, demo) and model, then up to N examples of each
kind (the question, the last query, the final answer, the expected one).

Across those kinds, three habits of a failed episode are counted (benches/RESULTS.md, runs 27, 28
and 31): `error handed in` (the final answer is a tool's error text, or starts with "error"),
`same query 3x` (its last three query calls are one query, word for word: greedy decoding that
writes a failing query again until the turns run out) and `same look-up 3x` (a call that is not a
query, such as `describe_table` or `list_tables`, made three times or more with the same
arguments: run 31's GRPO adapter described one table again and again until its turns ran out),
and `more joins` (its last query joins more tables than the question's gold SQL: KaggleDBQA's
`sql`, the demo's `reference_sql`; run 33's demo adapters wrote joins its questions do not need:
over a third of the demo's synthesized tasks make two joins or more, a seventh of its people's
questions do).

Then, for the questions that come with their gold SQL (both groups), how many of those that join no
table, one and two or more a model answered (run 34: a synthesized mix with fewer joins won the
demo's one-table questions and lost some of its one-join ones).

Then, for the questions that come with their gold SQL (KaggleDBQA's), how each names the text values
that SQL compares with (`=`, `<>`, `!=`, `LIKE`, a `LIKE` pattern without its `%`), and how many of
each a model answered: `no text filter`, `as stored` (every value as it stands in the question),
`other case` (only the case differs), `otherwise` (a code for a name, other words, part of it). A
question of the last two is answered by looking the value up, which `scenarios synth
--value-lookups` teaches. Standard library only.
"""
import argparse
import collections
import json
import os
import random
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import natural_check as nc  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KINDS = ["right", "not completed", "no successful query", "rows held the answer", "other rows"]
NAMINGS = ["no text filter", "as stored", "other case", "otherwise"]
HABITS = ["error handed in", "same query 3x", "same look-up 3x", "more joins"]
JOINS = ["no join", "one join", "two or more"]
JOIN = re.compile(r"\bjoin\b", re.IGNORECASE)
# A text value a query compares with: after =, <>, != or LIKE, in single or (as SQLite reads a
# string where no column has the name) double quotes.
COMPARED = re.compile(r"""(?:=|<>|!=|\blike)\s*(?:'((?:[^']|'')*)'|"((?:[^"]|"")*)")""", re.IGNORECASE)


def questions(data_dir):
    """{(db, id): question} of the check sets."""
    out = {}
    for db in nc.KAGGLE:
        path = os.path.join(data_dir, f"{db}.jsonl")
        if os.path.isfile(path):
            out.update(((db, q["id"]), q) for q in read_jsonl(path))
    out.update(((nc.DEMO, q["id"]), q) for q in read_jsonl(os.path.join(ROOT, "scenarios", "company.jsonl")))
    return out


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def expected_values(expected):
    """The values an answer must show: a matcher's values, or the plain answer."""
    if isinstance(expected, dict):
        for key in ("set", "list", "contains", "any_of", "all_of", "number", "equals"):
            if key in expected:
                v = expected[key]
                return [str(x) for x in (v if isinstance(v, list) else [v])]
        return [json.dumps(expected)]
    return [str(expected)]


def cell(text):
    """A cell or value as compared: numbers by value, text without case."""
    text = text.strip()
    try:
        return "%g" % float(text)
    except ValueError:
        return text.lower()


def arguments_of(arguments):
    """A call's arguments text as a dict ({} when it is not a JSON object)."""
    try:
        args = json.loads(arguments or "{}")
    except (json.JSONDecodeError, TypeError):
        return {}
    return args if isinstance(args, dict) else {}


def is_query(arguments):
    """Whether a call's arguments text holds SQL (`sql` or `query`)."""
    args = arguments_of(arguments)
    return "sql" in args or "query" in args


def calls_of(messages):
    """[(tool name, arguments text)] of every call, in order."""
    return [(c["function"]["name"], c["function"]["arguments"]) for m in messages if m.get("role") == "assistant"
            for c in m.get("tool_calls") or []]


def query_calls(messages):
    """[(arguments text, result text)] of the query calls, in order."""
    calls, out = {}, []
    for m in messages:
        if m.get("role") == "assistant":
            for c in m.get("tool_calls") or []:
                if is_query(c["function"]["arguments"]):
                    calls[c["id"]] = c["function"]["arguments"]
        elif m.get("role") == "tool" and m.get("tool_call_id") in calls:
            out.append((calls[m["tool_call_id"]], m.get("content") or ""))
    return out


def query_text(arguments):
    """The SQL of a query call's arguments text ("" when there is none)."""
    args = arguments_of(arguments)
    sql = args.get("sql", args.get("query"))
    return sql if isinstance(sql, str) else ""


def habits(t, question):
    """The HABITS a failed episode of `question` shows."""
    out = set()
    answer = (t.get("final_answer") or "").strip()
    errors = [m.get("content") or "" for m in t.get("messages") or [] if m.get("role") == "tool"
              and (m.get("content") or "").lstrip().lower().startswith(("error", "database error"))]
    if answer.lower().startswith("error") or (len(answer) >= 8 and any(answer[:40] in e for e in errors)):
        out.add("error handed in")
    queries = [args for args, _ in query_calls(t.get("messages") or [])]
    if len(queries) >= 3 and len(set(queries[-3:])) == 1:
        out.add("same query 3x")
    look_ups = collections.Counter(c for c in calls_of(t.get("messages") or []) if not is_query(c[1]))
    if look_ups and max(look_ups.values()) >= 3:
        out.add("same look-up 3x")
    gold = gold_sql(question)
    if queries and gold and join_count(query_text(queries[-1])) > join_count(gold):
        out.add("more joins")
    return out


def last_query_rows(messages):
    """The result text of the last query call that did not fail, or None."""
    results = [r for _, r in query_calls(messages) if not r.lstrip().lower().startswith("error")]
    return results[-1] if results else None


def kind(t, question):
    if nc.is_success(t):
        return "right"
    if t.get("outcome") != "completed":
        return "not completed"
    rows = last_query_rows(t.get("messages") or [])
    if rows is None:
        return "no successful query"
    cells = {cell(c) for c in re.split(r"[|\n]", rows)}
    held = all(cell(v) in cells for v in expected_values(question.get("expected")))
    return "rows held the answer" if held else "other rows"


def join_count(sql):
    """The JOINs an SQL text makes, subqueries' included."""
    return len(JOIN.findall(sql))


def gold_sql(question):
    """The question's gold SQL (KaggleDBQA's `sql`, the demo's `reference_sql`), or None."""
    return question.get("sql") or question.get("reference_sql")


def joins(question):
    """How many joins the question's gold SQL makes (one of JOINS), or None without its SQL."""
    sql = gold_sql(question)
    return None if not sql else JOINS[min(join_count(sql), len(JOINS) - 1)]


def naming(question):
    """How `question` names the text values its gold SQL compares with (one of NAMINGS), or None
    for a question without its SQL."""
    sql = question.get("sql")
    if not sql:
        return None
    values = [(a or b).strip("%") for a, b in COMPARED.findall(sql)]
    values = [v for v in values if v and not re.fullmatch(r"[\d.\-: ]*", v)]
    if not values:
        return "no text filter"
    # As words of the question: "CA" is not in "California".
    named = lambda v, flags=0: re.search(rf"(?<!\w){re.escape(v)}(?!\w)", question["task"], flags) is not None
    if all(named(v) for v in values):
        return "as stored"
    if all(named(v, re.IGNORECASE) for v in values):
        return "other case"
    return "otherwise"


def classify(out_dir, qs):
    """{(group, model): Counter of kinds}, {kind: [example]}, {model: {naming: [answered, of]}} and
    {(group, model): {joins: [answered, of]}}."""
    counts, examples = collections.defaultdict(collections.Counter), collections.defaultdict(list)
    namings = collections.defaultdict(lambda: {n: [0, 0] for n in NAMINGS})
    by_joins = collections.defaultdict(lambda: {j: [0, 0] for j in JOINS})
    for db in sorted(os.listdir(out_dir)):
        check = os.path.join(out_dir, db, "check")
        if not os.path.isfile(os.path.join(check, "eval.json")):
            continue
        with open(os.path.join(check, "eval.json")) as f:
            labels = [m["label"] for m in json.load(f)["models"]]
        group = "demo" if db == nc.DEMO else "KaggleDBQA"
        names = nc.model_names(labels)
        for label in labels:
            if label not in names:
                continue  # as natural_check.py: an unknown label is not a model of the table
            model = names[label]
            for t in read_jsonl(os.path.join(check, "trajectories", f"{label}.jsonl")):
                q = qs.get((db, t["scenario_id"]))
                if q is None:
                    sys.exit(f"{db}/{t['scenario_id']}: not in the check set's questions (--data?)")
                k, named, joined = kind(t, q), naming(q), joins(q)
                counts[(group, model)][k] += 1
                if k != "right":
                    counts[(group, model)].update(habits(t, q))
                if named is not None:
                    namings[model][named][0] += k == "right"
                    namings[model][named][1] += 1
                if joined is not None:
                    by_joins[(group, model)][joined][0] += k == "right"
                    by_joins[(group, model)][joined][1] += 1
                if k != "right":
                    examples[(model, k)].append((db, q["task"], t, q.get("expected")))
    return counts, examples, namings, by_joins


def by_group_and_model(item):
    """The order of a `(group, model)`-keyed table's rows: by group, then base, SFT, SFT+GRPO."""
    (group, model), _ = item
    return group, nc.MODELS.index(model)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir", metavar="OUT_DIR", help="natural_check.sh's TA_OUT")
    ap.add_argument("--data", default=os.path.join(ROOT, "..", "shared", "data", "kaggledbqa"), help="the KaggleDBQA directory")
    ap.add_argument("--examples", type=int, default=0, metavar="N", help="examples of each kind and model (seeded draw)")
    args = ap.parse_args(argv)
    counts, examples, namings, by_joins = classify(args.out_dir, questions(args.data))
    if not counts:
        print(f"{args.out_dir}: no database with a finished check/eval.json", file=sys.stderr)
        return 1
    print("| questions | model | " + " | ".join(KINDS) + " |")
    print("|---|---|" + "---:|" * len(KINDS))
    for (group, model), c in sorted(counts.items(), key=by_group_and_model):
        print(f"| {group} | {model} | " + " | ".join(str(c[k]) for k in KINDS) + " |")
    print("\nOf the failed episodes above, those that show a habit:\n")
    print("| questions | model | failed | " + " | ".join(HABITS) + " |")
    print("|---|---|---:|" + "---:|" * len(HABITS))
    for (group, model), c in sorted(counts.items(), key=by_group_and_model):
        print(f"| {group} | {model} | {sum(c[k] for k in KINDS[1:])} | " + " | ".join(str(c[h]) for h in HABITS) + " |")
    if by_joins:
        print("\nQuestions with their gold SQL, by the joins it makes (answered / questions):\n")
        print("| questions | model | " + " | ".join(JOINS) + " |")
        print("|---|---|" + "---:|" * len(JOINS))
        for (group, model), row in sorted(by_joins.items(), key=by_group_and_model):
            print(f"| {group} | {model} | " + " | ".join(f"{a} / {n}" for a, n in (row[j] for j in JOINS)) + " |")
    if namings:
        print("\nQuestions with their gold SQL, by how they name the text values it compares with (answered / questions):\n")
        print("| model | " + " | ".join(NAMINGS) + " |")
        print("|---|" + "---:|" * len(NAMINGS))
        for model in sorted(namings, key=nc.MODELS.index):
            print(f"| {model} | " + " | ".join(f"{a} / {n}" for a, n in (namings[model][x] for x in NAMINGS)) + " |")
    if args.examples > 0:
        rng = random.Random(0)
        for (model, k), items in sorted(examples.items()):
            print(f"\n{model}, {k} ({len(items)}):")
            for db, task, t, expected in rng.sample(items, min(args.examples, len(items))):
                print(f"- {db}: {task}\n    final answer: {(t.get('final_answer') or '')[:160]!r}; expected {json.dumps(expected)[:160]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
