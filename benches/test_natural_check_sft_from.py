"""Tests of benches/natural_check.sh's TA_SFT_FROM: a second run starts GRPO from a first run's SFT
adapter, SFT check and frontier (copied, the first run untouched), waits for them while the first
run's pipeline goes, and refuses what cannot work (a first run with other SFT settings among it)
with a message that says why.

The real script and the real binary (TRAIN_AGENT_BIN, which `cargo test` builds); the base model
does not exist, so each pipeline ends at GRPO's `train`: what runs before it is what is tested.

    TRAIN_AGENT_BIN=target/debug/train-agent python3 -m pytest benches/test_natural_check_sft_from.py
"""
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
import unittest

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "natural_check.sh")


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def task(i, split):
    return json.dumps({"id": f"synth-{i:05}", "task": f"How many rows does table {i} have?", "expected": i, "split": split})


class SftFrom(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.tasks = os.path.join(self.tmp, "tasks")
        write(os.path.join(self.tasks, "demo.jsonl"), "\n".join([task(i, "train") for i in range(6)] + [task(9, "validation")]) + "\n")
        self.first = os.path.join(self.tmp, "first")
        self.second = os.path.join(self.tmp, "second")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def bench(self, **env):
        full = dict(os.environ, TA_BIN=os.environ.get("TRAIN_AGENT_BIN", "train-agent"), TA_MODEL=os.path.join(self.tmp, "no-model.gguf"),
                    TA_OUT=self.second, TA_DBS="demo", TA_SCENARIOS_DIR=self.tasks, TA_STEPS="1", TA_FRONTIER="2", TA_SFT_FROM=self.first)
        full.update(env)
        return subprocess.run(["bash", BENCH], env=full, capture_output=True, text=True, timeout=300)

    def first_settings(self, **env):
        """The first run's TA_OUT/settings, as the script writes them (a run over no database)."""
        out = self.bench(TA_OUT=self.first, TA_DBS=" ", TA_SFT_FROM="", **env)
        self.assertTrue(os.path.isfile(os.path.join(self.first, "settings")), out.stderr)

    def first_run(self):
        """What the first run leaves of the demo database by its frontier."""
        d = os.path.join(self.first, "demo")
        write(os.path.join(d, "dataset", "train.jsonl"), "{}\n")
        write(os.path.join(d, "check-sft", "eval.json"), '{"models": ["base", "trained"]}')
        write(os.path.join(d, "frontier.jsonl"), task(2, "train") + "\n" + task(9, "validation") + "\n")
        write(os.path.join(d, "frontier-train.jsonl"), task(2, "train") + "\n")
        # the adapter last: the first run writes it before its check and frontier, but the second
        # must copy only once all three are there
        write(os.path.join(d, "sft", "final", "adapter_config.json"), '{"r": 8}')

    def log(self):
        with open(os.path.join(self.second, "demo", "bench.log")) as f:
            return f.read()

    def test_grpo_starts_from_the_first_runs_sft_and_frontier(self):
        self.first_settings(TA_GRPO_LR="2e-5")
        self.first_run()
        before = sorted(os.path.relpath(os.path.join(r, f), self.first) for r, _, fs in os.walk(self.first) for f in fs)
        out = self.bench(TA_GRPO_LR="1e-4", TA_GPU_UTIL="0.08")
        self.assertNotIn("other settings", out.stderr)
        self.assertNotIn("warning", out.stderr)
        log = self.log()
        for stage in ["collect, curate done earlier", "sft done earlier", "SFT's check done earlier", "frontier done earlier", "1 frontier tasks", "train: 1 GRPO steps"]:
            self.assertIn(stage, log)
        self.assertNotIn("] sft \n", log)
        with open(os.path.join(self.second, "demo", "sft", "final", "adapter_config.json")) as f:
            self.assertEqual(json.load(f), {"r": 8})
        # GRPO trains on the first run's frontier (and the validation split)
        with open(os.path.join(self.second, "demo", "grpo-tasks.jsonl")) as f:
            self.assertEqual([json.loads(l)["id"] for l in f], ["synth-00002", "synth-00009"])
        after = sorted(os.path.relpath(os.path.join(r, f), self.first) for r, _, fs in os.walk(self.first) for f in fs)
        self.assertEqual(before, after, "the first run is left as it was")

    def test_it_waits_for_a_first_run_still_going(self):
        os.makedirs(os.path.join(self.first, "demo"))
        later = threading.Timer(2.0, self.first_run)
        later.start()
        t0 = time.monotonic()
        out = self.bench()
        later.join()
        log = self.log()
        self.assertIn("warning: " + os.path.join(self.first, "settings") + " is missing", out.stderr)
        self.assertIn("waiting for " + os.path.join(self.first, "demo", "sft", "final", "adapter_config.json"), log)
        self.assertIn("sft done earlier", log)
        self.assertGreater(time.monotonic() - t0, 2.0)

    def test_a_first_run_that_ended_without_sft_fails_the_database_and_says_so(self):
        write(os.path.join(self.first, "demo", "rc"), "1\n")
        out = self.bench()
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("ended (exit 1) without sft/final/adapter_config.json", self.log())
        self.assertFalse(os.path.exists(os.path.join(self.second, "demo", "sft")))

    def test_a_first_run_with_other_sft_settings_is_refused(self):
        self.first_settings(TA_TRACES="300")
        self.first_run()
        out = self.bench(TA_SEED="1")
        self.assertEqual(out.returncode, 2, out.stderr)
        self.assertIn("made its SFT and frontier with other settings: traces seed", out.stderr)
        self.assertIn("hint:", out.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.second, "demo")))

    def test_settings_that_cannot_work_are_refused_before_anything_runs(self):
        os.makedirs(os.path.join(self.first, "demo"))
        for env, message in [
            ({"TA_STEPS": "0"}, "set TA_STEPS > 0"),
            ({"TA_SFT_FROM": self.second}, "TA_SFT_FROM is TA_OUT"),
            ({"TA_SFT_FROM": os.path.join(self.tmp, "nowhere")}, "no such directory; start that run first"),
        ]:
            out = self.bench(**env)
            self.assertEqual(out.returncode, 2, out.stderr)
            self.assertIn(message, out.stderr)
            self.assertFalse(os.path.exists(os.path.join(self.second, "demo")), env)


if __name__ == "__main__":
    unittest.main()
