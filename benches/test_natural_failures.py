"""Tests of benches/natural_failures.py: each failed episode goes to the kind it shows, read from
a check directory laid out as `train-agent eval` writes it, with the demo's own questions.

    python3 -m pytest benches/test_natural_failures.py
"""
import io
import json
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import natural_failures as nf  # noqa: E402


def episode(sid, gt, outcome="completed", results=(), args_key="sql", answer="x"):
    """A trajectory of `sid` whose query calls returned `results` (in order, each its own query),
    judged `gt`; a result given as (query, text) names its query."""
    messages = [{"role": "user", "content": "q"}]
    for i, content in enumerate(results):
        sql, content = content if isinstance(content, tuple) else (f"SELECT {i}", content)
        call = {"id": f"c{i}", "type": "function", "function": {"name": "run_query", "arguments": json.dumps({args_key: sql})}}
        messages += [{"role": "assistant", "content": None, "tool_calls": [call]},
                     {"role": "tool", "content": content, "tool_call_id": f"c{i}", "name": "run_query"}]
    return {"scenario_id": sid, "outcome": outcome, "messages": messages, "final_answer": answer,
            "reward_parts": {"ground_truth": gt}}


class Kinds(unittest.TestCase):
    def test_each_failure_goes_to_the_kind_it_shows(self):
        with tempfile.TemporaryDirectory() as tmp:
            check = os.path.join(tmp, "out", "demo", "check")
            os.makedirs(os.path.join(check, "trajectories"))
            with open(os.path.join(check, "eval.json"), "w") as f:
                json.dump({"models": [{"label": "base", "source": "b"}, {"label": "trained", "source": "t"}]}, f)
            # dept-count expects 9; research-location {"contains": "Boston"}.
            trained = [
                episode("dept-count", 1.0, results=["count(*)\n9\n(1 rows)"]),
                episode("on-leave-count", 0.0, outcome="ran_out_of_turns", results=["count(*)\n3"]),
                episode("research-location", 0.0, results=["Error: SQL error: no such column: city"]),
                episode("employee-42-name", 0.0, results=["id\n42"], args_key="table_name"),  # not a query call
                # the rows had 9, the answer did not: the last successful query counts, not the error after it
                episode("dept-count", 0.0, results=["count(*)\n9\n(1 rows)", "Error: SQL error"]),
                episode("research-location", 0.0, results=["location\nBoston, MA"]),  # contains, not a cell
                # habits: the same failing query to the turn limit; an error handed in as the answer
                episode("on-leave-count", 0.0, outcome="ran_out_of_turns", results=[("SELECT a", "Error: no such column: a")] * 3),
                episode("dept-count", 0.0, results=["Error: SQL error: no such table: dept (hint: …)"], answer="no such table: dept (hint: …)"),
                episode("dept-count", 1.0, results=[("SELECT a", "count(*)\n9")] * 3),  # right: no habit counted
                # one table described three times to the turn limit (a look-up, not a query)
                episode("on-leave-count", 0.0, outcome="ran_out_of_turns", results=[("employees", "Table employees")] * 3, args_key="table_name"),
                # a join the gold SQL (one table) does not make, in the last query; a join before it does not count
                episode("dept-count", 0.0, results=[("SELECT count(*) FROM departments d JOIN employees e ON e.department_id = d.department_id", "count(*)\n241")]),
                episode("dept-count", 0.0, results=[("SELECT 1 FROM a JOIN b", "Error: x"), ("SELECT count(*) FROM departments", "count(*)\n8")]),
            ]
            base = [episode("on-leave-count", 0.0, results=["count(*)\n4"]),
                    episode("sales-head", 1.0, results=["name\nKenji Rossi"]),  # its gold SQL joins once
                    episode("gdpr-team", 0.0, outcome="ran_out_of_turns")]  # twice
            for label, eps in (("trained", trained), ("base", base)):
                with open(os.path.join(check, "trajectories", f"{label}.jsonl"), "w") as f:
                    f.writelines(json.dumps(e) + "\n" for e in eps)
            counts, examples, namings, by_joins = nf.classify(os.path.join(tmp, "out"), nf.questions(tmp))
            self.assertEqual(namings, {}, "the demo's questions come without their SQL")
            self.assertEqual(counts[("demo", "SFT")], {"right": 2, "not completed": 3, "no successful query": 3,
                                                       "rows held the answer": 1, "other rows": 3,
                                                       "error handed in": 1, "same query 3x": 1, "same look-up 3x": 1, "more joins": 1})
            self.assertEqual(counts[("demo", "base")], {"right": 1, "not completed": 1, "other rows": 1})
            self.assertEqual(by_joins[("demo", "SFT")], {"no join": [2, 12], "one join": [0, 0], "two or more": [0, 0]})
            self.assertEqual(by_joins[("demo", "base")], {"no join": [0, 1], "one join": [1, 1], "two or more": [0, 1]})
            self.assertEqual(len(examples[("SFT", "no successful query")]), 3)
            out = io.StringIO()
            with redirect_stdout(out):
                self.assertEqual(nf.main([os.path.join(tmp, "out"), "--data", tmp, "--examples", "1"]), 0)
            self.assertIn("| demo | SFT | 2 | 3 | 3 | 1 | 3 |", out.getvalue())
            self.assertIn("| demo | SFT | 10 | 1 | 1 | 1 | 1 |", out.getvalue())
            self.assertIn("| demo | base | 1 | 1 | 0 | 0 | 1 |", out.getvalue())
            self.assertIn("| demo | base | 2 | 0 | 0 | 0 | 0 |", out.getvalue())
            self.assertIn("| demo | base | 0 / 1 | 1 / 1 | 0 / 1 |", out.getvalue())

    def test_how_a_question_names_the_values_its_sql_compares_with(self):
        q = lambda task, sql: nf.naming({"task": task, "sql": sql})
        self.assertEqual(q("How many plants are there?", "SELECT count(*) FROM p"), "no text filter")
        self.assertEqual(q("Plants in 2001?", "SELECT count(*) FROM p WHERE strftime('%Y', d) = '2001'"), "no text filter")
        self.assertEqual(q("How many Operational plants in France?", 'SELECT count(*) FROM p WHERE Status = "Operational" AND Country = \'France\''), "as stored")
        self.assertEqual(q("How many operational plants?", 'SELECT count(*) FROM p WHERE Status = "Operational"'), "other case")
        self.assertEqual(q("Crimes on a road?", "SELECT count(*) FROM c WHERE Location LIKE '%Road%'"), "other case")
        self.assertEqual(q("How many plants in California?", "SELECT count(*) FROM p WHERE State = 'CA'"), "otherwise")
        self.assertIsNone(nf.naming({"task": "t"}), "the demo's questions come without SQL")
        # a quoted name that no comparison follows is a column, not a value
        self.assertEqual(q("Records of Ohio?", 'SELECT "#_Records" FROM f WHERE State = \'Ohio\''), "as stored")

    def test_values_of_a_matcher(self):
        self.assertEqual(nf.expected_values({"set": ["a", 2]}), ["a", "2"])
        self.assertEqual(nf.expected_values({"number": 1.9, "tolerance": 0.01}), ["1.9"])
        self.assertEqual(nf.expected_values(9), ["9"])
        self.assertEqual(nf.cell(" 9.0 "), nf.cell("9"))
        self.assertEqual(nf.cell("Boston"), nf.cell("boston"))


if __name__ == "__main__":
    unittest.main()
