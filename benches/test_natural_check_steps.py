"""Tests of benches/natural_check.sh's TA_CHECK_STEPS: after check/, the check set is played on
the checkpoint adapters of the steps asked for (`validated`: the steps of metrics.jsonl's
validation rows, step 0 aside), each beside the SFT adapter into check-step-N/, a finished one
skipped on a re-run and a step without a checkpoint said and passed over. And TA_CHECK_SAMPLED:
SFT and SFT+GRPO sampled K episodes a question into check-sampled/, without the base model.

The real script with a stand-in binary that records its arguments (and writes an eval.json for
`eval`), run on a database whose stages up to check/ are done, so the step checks are all it runs.

    python3 -m pytest benches/test_natural_check_steps.py
"""
import os
import shutil
import subprocess
import tempfile
import unittest

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "natural_check.sh")
STAND_IN = """#!/usr/bin/env bash
echo "$*" >> "$(dirname "$0")/calls"
if [[ $1 == eval ]]; then
  while (( $# )); do if [[ $1 == --out ]]; then mkdir -p "$2"; echo '{}' > "$2/eval.json"; fi; shift; done
fi
"""


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


class CheckSteps(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.bin = os.path.join(self.tmp, "train-agent")
        write(self.bin, STAND_IN)
        os.chmod(self.bin, 0o755)
        write(os.path.join(self.tmp, "tasks", "demo.jsonl"), '{"id": "a", "task": "t", "split": "train"}\n')
        self.d = d = os.path.join(self.tmp, "out", "demo")
        for f in ["dataset/train.jsonl", "check-sft/eval.json", "check/eval.json", "check/trajectories/baseline.jsonl", ".train-done"]:
            write(os.path.join(d, f), "{}\n")
        for adapter in ["sft/final", "grpo/final"] + [f"grpo/checkpoints/step-{s:06}/adapter" for s in (2, 3, 4)]:
            write(os.path.join(d, adapter, "adapter_config.json"), "{}")
        # Validated: 0 (the SFT adapter), 2, 4 and 6 (no checkpoint); a torn last line.
        rows = ['{"step":0,"val_success":0.5}', '{"step":1,"reward":0.1}', '{"step":2,"val_success":0.6}',
                '{"step":3,"reward":0.1}', '{"step":4,"val_success":0.4}', '{"step":6,"val_success":0.4}', '{"step":']
        write(os.path.join(d, "grpo", "metrics.jsonl"), "\n".join(rows) + "\n")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def bench(self, steps, sampled="0", grpo_steps="6"):
        env = dict(os.environ, TA_BIN=self.bin, TA_MODEL="m", TA_OUT=os.path.join(self.tmp, "out"), TA_DBS="demo",
                   TA_SCENARIOS_DIR=os.path.join(self.tmp, "tasks"), TA_STEPS=grpo_steps, TA_CHECK_STEPS=steps,
                   TA_CHECK_SAMPLED=sampled, TA_SEED="3")
        subprocess.run(["bash", BENCH], env=env, capture_output=True, text=True, timeout=120, check=False)
        calls = os.path.join(self.tmp, "calls")
        if not os.path.exists(calls):
            return []
        with open(calls) as f:
            lines = f.read().splitlines()
        os.remove(calls)
        return lines

    def test_validated_steps_and_named_ones_are_checked_beside_sft(self):
        calls = self.bench("validated 3")
        self.assertEqual([c.split("--out ")[1] for c in calls], [os.path.join(self.d, f"check-step-{s}") for s in (2, 3, 4)])
        for s, c in zip((2, 3, 4), calls):
            args = c.split()
            self.assertEqual(args[args.index("--model") + 1], os.path.join(self.d, "grpo", "checkpoints", f"step-{s:06}", "adapter"))
            self.assertEqual(args[args.index("--baseline") + 1], os.path.join(self.d, "sft", "final"))
            self.assertIn("--compare-base", args)
            # SFT's episodes are check/'s, handed over: only the step's adapter is played.
            self.assertTrue(os.path.isfile(os.path.join(self.d, f"check-step-{s}", "trajectories", "baseline.jsonl")))
        with open(os.path.join(self.d, "bench.log")) as f:
            log = f.read()
        self.assertIn("step 6: no checkpoint adapter", log)
        self.assertNotIn("step 0", log, "step 0 is the SFT adapter, checked in check/ already")
        self.assertEqual(self.bench("validated"), [], "finished step checks are not played again")

    def test_sampled_check_plays_sft_and_sft_grpo_k_times_without_the_base_model(self):
        calls = self.bench("", sampled="5")
        self.assertEqual(len(calls), 1, calls)
        args = calls[0].split()
        self.assertEqual(args[0], "eval")
        self.assertEqual(args[args.index("--out") + 1], os.path.join(self.d, "check-sampled"))
        self.assertEqual(args[args.index("--model") + 1], os.path.join(self.d, "grpo", "final"))
        self.assertEqual(args[args.index("--baseline") + 1], os.path.join(self.d, "sft", "final"))
        self.assertEqual([args[args.index(o) + 1] for o in ("--rollouts", "--temperature", "--seed")], ["5", "1.0", "3"])
        self.assertNotIn("--compare-base", args)
        self.assertEqual(self.bench("", sampled="5"), [], "a finished sampled check is not played again")
        shutil.rmtree(os.path.join(self.d, "check-sampled"))
        self.assertEqual(self.bench("", sampled="0"), [], "TA_CHECK_SAMPLED=0: none")
        env = dict(os.environ, TA_BIN=self.bin, TA_MODEL="m", TA_OUT=os.path.join(self.tmp, "out"), TA_CHECK_SAMPLED="four")
        out = subprocess.run(["bash", BENCH], env=env, capture_output=True, text=True, timeout=60, check=False)
        self.assertEqual(out.returncode, 2)
        self.assertIn("TA_CHECK_SAMPLED: 'four' is not a number", out.stderr)

    def test_off_by_default_and_a_bad_step_is_refused(self):
        self.assertEqual(self.bench(""), [])
        env = dict(os.environ, TA_BIN=self.bin, TA_MODEL="m", TA_OUT=os.path.join(self.tmp, "out"), TA_CHECK_STEPS="0")
        out = subprocess.run(["bash", BENCH], env=env, capture_output=True, text=True, timeout=60, check=False)
        self.assertEqual(out.returncode, 2)
        self.assertIn("neither a GRPO step", out.stderr)


if __name__ == "__main__":
    unittest.main()
