"""Tests of benches/template_groups.py: groups counted by template and kind, the run's halves.

    python3 -m pytest benches/test_template_groups.py
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import template_groups as tg  # noqa: E402


def group(sid, step, gts):
    return [{"scenario_id": sid, "group": {"step": step, "index": i}, "reward_parts": {"ground_truth": g}} for i, g in enumerate(gts)]


class TemplateGroups(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        with open(os.path.join(self.dir, "scenarios.jsonl"), "w") as f:
            for sid, template in [("a", "count_where"), ("b", "count_where"), ("c", "percentage"), ("d", None)]:
                s = {"id": sid, "task": "t"}
                if template:
                    s["template"] = template
                f.write(json.dumps(s) + "\n")
        steps = os.path.join(self.dir, "grpo", "trajectories")
        os.makedirs(steps)
        # Step 1: a splits, c all right, d all wrong. Step 2: a all right, b splits, c splits; one
        # group without ground truth (left out).
        for step, groups in [(1, [group("a", 1, [1.0, 0.0]), group("c", 1, [1.0, 1.0]), group("d", 1, [0.0, 0.0])]),
                             (2, [group("a", 2, [1.0, 1.0]), group("b", 2, [0.0, 1.0]), group("c", 2, [0.5, 1.0]), group("d", 2, [None, 1.0])])]:
            with open(os.path.join(steps, f"step-{step:06d}.jsonl"), "w") as f:
                for t in sum(groups, []):
                    f.write(json.dumps(t) + "\n")

    def test_groups_are_counted_by_template_kind_and_half(self):
        rows = tg.table(self.dir)
        self.assertEqual(set(rows), {"count_where", "percentage", "-"})
        first, second = rows["count_where"]
        self.assertEqual((first["split"], second["split"], second["all right"]), (1, 1, 1))
        first, second = rows["percentage"]
        self.assertEqual((first["all right"], second["split"]), (1, 1), "a partly right group splits")
        first, second = rows["-"]
        self.assertEqual((first["all wrong"], sum(second.values())), (1, 0), "no ground truth: left out")

    def test_the_table_reads_as_shares(self):
        out = subprocess.run([sys.executable, os.path.join(HERE, "template_groups.py"), self.dir], capture_output=True, text=True, check=True).stdout
        self.assertIn("| count_where | 3 | 67% | 33% | 0% | 100% → 50% |", out)
        self.assertIn("| **all** | 6 | 50% | 33% | 17% | 33% → 67% |", out)

    def test_a_directory_without_scenarios_is_refused(self):
        done = subprocess.run([sys.executable, os.path.join(HERE, "template_groups.py"), tempfile.mkdtemp()], capture_output=True, text=True)
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("no scenarios.jsonl", done.stderr)


if __name__ == "__main__":
    unittest.main()
