"""Tests of benches/natural_check_resplit.py: the held-out groups land where the bench's traces
never reach and its frontier pool begins, whole and in order, and nothing is lost or added.

    python3 -m pytest benches/test_natural_check_resplit.py
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import natural_check_resplit as rs  # noqa: E402


def task(i, split="train"):
    return {"id": f"synth-{i:05}", "task": f"q{i}", "split": split, "phrasing": "natural"}


def rewording(original, k):
    return dict(original, id=f"{original['id']}-p{k}", phrasing="paraphrase", paraphrase_of=original["id"])


def fixture():
    """12 synthesized tasks (the 4th validation), the first 8 reworded: tasks 1, 5 and 6 with kept
    rewordings (two for 5)."""
    synthesized = [task(i, "validation" if i == 3 else "train") for i in range(12)]
    paraphrased = []
    for t in synthesized[:8]:
        paraphrased.append(t)
        n = {1: 1, 5: 2, 6: 1}.get(int(t["id"][-2:]), 0)
        paraphrased += [rewording(t, k) for k in range(n)]
    return paraphrased, synthesized


def train_ids(tasks):
    return [t["id"] for t in tasks if t["split"] == "train"]


class Resplit(unittest.TestCase):
    def test_held_out_groups_follow_the_traced_tasks(self):
        paraphrased, synthesized = fixture()
        out, counts = rs.resplit(paraphrased, synthesized, traces=6, pool=4)
        # From the end of the reworded part: task 6 (2 tasks) fits, then task 5 (3) would not,
        # then task 1 (2) does.
        held = ["synth-00001", "synth-00001-p0", "synth-00006", "synth-00006-p0"]
        self.assertEqual(train_ids(out)[6:10], held, "right after the 6th train task, in order")
        self.assertTrue(set(held).isdisjoint(train_ids(out)[:6]), "the traces never reach them")
        self.assertEqual(counts["held_out_groups"], 2)
        self.assertEqual(counts["held_out_tasks"], 4)
        self.assertEqual(counts["held_out_rewordings"], 2)
        self.assertEqual(counts["traced_rewordings"], 2, "task 5's two rewordings stay traced")
        self.assertEqual(sorted(t["id"] for t in out), sorted(t["id"] for t in paraphrased + synthesized[8:]),
                         "every task once, none added")

    def test_the_pool_never_takes_traces_away(self):
        paraphrased, synthesized = fixture()
        # 15 train tasks in all: with 12 traces 3 can be spared, and only task 6's group (2) fits.
        out, counts = rs.resplit(paraphrased, synthesized, traces=12, pool=100)
        self.assertEqual(counts["held_out_tasks"], 2)
        self.assertEqual(train_ids(out)[12:], ["synth-00006", "synth-00006-p0", "synth-00011"], "then the rest")

    def test_refuses_another_synthesis(self):
        paraphrased, synthesized = fixture()
        with self.assertRaises(SystemExit):
            rs.resplit(paraphrased, synthesized[1:], traces=6, pool=4)


if __name__ == "__main__":
    unittest.main()
