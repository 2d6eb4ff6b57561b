"""Tests of benches/check_runs.py: the per-run counts, the across-run counts, and the agent's
error-answer rule applied to trajectories written before the agent marked them.

    python3 -m pytest benches/test_check_runs.py
"""
import io
import json
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_runs as cr  # noqa: E402

ERROR = "SQL error: no such column: d.terminated in SELECT d.name FROM departments d"


def episode(qid, right, answer="42", error_reply=False, marked=False):
    messages = [{"role": "user", "content": "q"}]
    if error_reply:
        messages.append({"role": "tool", "content": "Error: " + ERROR})
    t = {"scenario_id": qid, "final_answer": answer, "messages": messages,
         "reward_parts": {"ground_truth": 1.0 if right else 0.0}}
    if marked:
        t["answered_with_error"] = True
    return t


def write_run(root, name, sft, grpo):
    d = os.path.join(root, name, "check", "trajectories")
    os.makedirs(d)
    for label, eps in (("baseline", sft), ("trained", grpo)):
        with open(os.path.join(d, f"{label}.jsonl"), "w") as f:
            f.writelines(json.dumps(e) + "\n" for e in eps)
    return os.path.dirname(d)


class CheckRuns(unittest.TestCase):
    def test_the_error_rule_matches_the_agents(self):
        self.assertTrue(cr.answered_with_error(episode("q", False, answer=ERROR, error_reply=True)))
        self.assertFalse(cr.answered_with_error(episode("q", False, answer="SQL error", error_reply=True)), "fewer than 40 of its characters")
        tail = ERROR.split("column: ")[1]
        self.assertTrue(cr.answered_with_error(episode("q", False, answer=tail, error_reply=True)), "its tail, the head dropped")
        self.assertFalse(cr.answered_with_error(episode("q", False, answer=ERROR)), "no such error in the episode")
        self.assertTrue(cr.answered_with_error(episode("q", False, answer="x", marked=True)), "the agent's own mark")

    def test_runs_and_questions(self):
        with tempfile.TemporaryDirectory() as tmp:
            # q0 always right; q1 never; q2 right after SFT in run 1 only, lost by GRPO there and
            # gained in run 2; q3 gained by GRPO in both runs, once as an error answer's opposite.
            r1 = write_run(tmp, "r1",
                           [episode("q0", True), episode("q1", False), episode("q2", True), episode("q3", False)],
                           [episode("q0", True), episode("q1", False, answer=ERROR, error_reply=True), episode("q2", False), episode("q3", True)])
            r2 = write_run(tmp, "r2",
                           [episode("q0", True), episode("q1", False), episode("q2", False), episode("q3", False)],
                           [episode("q0", True), episode("q1", False), episode("q2", True), episode("q3", True)])
            rows, across = cr.summarize([(d, cr.read_run(d)) for d in (r1, r2)])
            self.assertEqual([(r["SFT"], r["SFT+GRPO"], r["better"], r["worse"]) for r in rows], [(2, 2, 1, 1), (1, 3, 2, 0)])
            self.assertEqual(rows[0]["error_answers"], {"SFT": 0, "SFT+GRPO": 1})
            self.assertEqual(across, {"runs": 2, "questions": 4, "sft_always": 1, "sft_never": 2, "sft_unstable": 1,
                                      "never_after_grpo": 1, "gained_somewhere": 2, "lost_somewhere": 1, "both": 1,
                                      "net_gained_2": 1, "net_lost_2": 0})
            out = io.StringIO()
            json_path = os.path.join(tmp, "n.json")
            with redirect_stdout(out):
                self.assertEqual(cr.main([r1, r2, "--json", json_path]), 0)
            self.assertIn(f"| {r1} | 4 | 2 | 2 | +1/-1 | 0 / 1 |", out.getvalue())
            with open(json_path) as f:
                self.assertEqual(json.load(f)["across"], across)


if __name__ == "__main__":
    unittest.main()
