"""Tests of benches/fit_natural.sh: one `fit` a database with its people's questions as the check
set and K sampled episodes a question (`--check-samples`), the pipelines dealt to the GPUs in
turn with their share of memory, a failed fit reported, bad input refused.

The real script with a stand-in binary that records its arguments and environment (and fails for
a server named Broken); stand-in databases and questions, not KaggleDBQA's. What `fit` does with
them is tested in tests/fit_cli.rs.

    python3 -m pytest benches/test_fit_natural.py
"""
import os
import shlex
import shutil
import subprocess
import tempfile
import unittest

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fit_natural.sh")
STAND_IN = r"""#!/usr/bin/env bash
line=$(printf '%s\x1f' "$CUDA_VISIBLE_DEVICES" "$TRAIN_AGENT_GPU_MEMORY_UTILIZATION" "$@")
echo "$line" >> "$(dirname "$0")/calls"  # one write a call: the pipelines run at once
[[ $* == *Broken* ]] && exit 3
exit 0
"""


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


class FitNatural(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.bin = os.path.join(self.tmp, "train-agent")
        write(self.bin, STAND_IN)
        os.chmod(self.bin, 0o755)
        self.data = os.path.join(self.tmp, "data")
        for db in ("Alpha", "Beta", "Broken"):
            write(os.path.join(self.data, f"{db}.sqlite"), "")
            write(os.path.join(self.data, f"{db}.jsonl"), '{"task": "How many?", "expected": 1}\n')
        self.out = os.path.join(self.tmp, "out")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def bench(self, dbs, gpus="0 1", sampled="8", **knobs):
        env = dict(os.environ, TA_BIN=self.bin, TA_MODEL="m.gguf", TA_OUT=self.out, TA_DATA=self.data, TA_DBS=dbs,
                   TA_GPUS=gpus, TA_CHECK_SAMPLED=sampled, **knobs)
        done = subprocess.run(["bash", BENCH], env=env, capture_output=True, text=True, timeout=120, check=False)
        calls = os.path.join(self.tmp, "calls")
        lines = open(calls).read().splitlines() if os.path.exists(calls) else []
        if os.path.exists(calls):
            os.remove(calls)
        return done, [line.split("\x1f")[:-1] for line in lines]

    def test_each_database_is_one_fit_on_its_gpu_with_its_questions(self):
        done, calls = self.bench("Alpha Beta demo")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual([c[2] for c in calls], ["fit"] * 3, "fit plays the check sets itself")
        fits = {c[c.index("--out") + 1].rsplit("/", 1)[1]: c for c in calls}
        self.assertEqual(sorted(fits), ["Alpha", "Beta", "demo"])
        alpha = fits["Alpha"]
        self.assertEqual(alpha[:2], ["0", "0.2"], "dealt in turn: two pipelines on GPU 0, 0.4 between them")
        self.assertEqual((fits["Beta"][0], fits["demo"][0]), ("1", "0"))
        server = alpha[alpha.index("--server") + 1]
        self.assertEqual(shlex.split(server), [self.bin, "demo-server", "--db", os.path.join(self.data, "Alpha.sqlite")])
        self.assertEqual(alpha[alpha.index("--check-set") + 1], os.path.join(self.data, "Alpha.jsonl"))
        self.assertTrue(fits["demo"][fits["demo"].index("--check-set") + 1].endswith("scenarios/company.jsonl"))
        for flag, value in [("--check-samples", "8"), ("--profile", "gpu"), ("--base-model", "m.gguf")]:
            self.assertEqual(alpha[alpha.index(flag) + 1], value, flag)
        self.assertNotIn("--steps", alpha, "fit's own steps unless TA_STEPS")
        self.assertNotIn("--recovery-share", alpha, "fit's own share unless TA_RECOVERY_SHARE")
        self.assertNotIn("--value-lookups", alpha, "off unless TA_VALUE_LOOKUPS")
        self.assertNotIn("--join-mix", alpha, "the grammar's mix unless TA_JOIN_MIX")
        self.assertNotIn("--seed", alpha, "fit's own seed unless TA_SEED")
        self.assertNotIn("--curriculum", alpha, "fit's own curriculum unless TA_CURRICULUM")
        self.assertNotIn("--sft-share", alpha, "fit's own share unless TA_SFT_SHARE")
        self.assertNotIn("--sft-epochs", alpha, "fit's own epochs unless TA_SFT_EPOCHS")
        self.assertNotIn("--teacher", alpha, "no teacher unless TA_TEACHER")
        for name in ("Alpha", "Beta", "demo"):
            self.assertEqual(open(os.path.join(self.out, name, "rc")).read().strip(), "0")

    def test_knobs_reach_fit_and_a_failed_fit_is_reported(self):
        done, calls = self.bench("Alpha", sampled="0", TA_STEPS="4", TA_VALIDATION_LIMIT="50", TA_RECOVERY_SHARE="0.1", TA_VALUE_LOOKUPS="1", TA_SEED="2", TA_CURRICULUM="frontier",
                                 TA_SFT_SHARE="0.85", TA_SFT_EPOCHS="3", TA_TEACHER="local/t.gguf", TA_JOIN_MIX="4,2,1")
        self.assertEqual(done.returncode, 0, done.stderr)
        fit = calls[0]
        self.assertIn("--value-lookups", fit)
        for flag, value in [("--check-samples", "0"), ("--steps", "4"), ("--validation-limit", "50"), ("--recovery-share", "0.1"), ("--seed", "2"), ("--curriculum", "frontier"),
                             ("--sft-share", "0.85"), ("--sft-epochs", "3"), ("--teacher", "local/t.gguf"), ("--join-mix", "4,2,1")]:
            self.assertEqual(fit[fit.index(flag) + 1], value, flag)
        done, calls = self.bench("Broken Beta", gpus="0")
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("[Broken] FAILED", done.stderr)
        self.assertEqual(len(calls), 2)
        self.assertEqual(calls[0][1], "0.2", "two pipelines on one GPU")
        self.assertEqual(open(os.path.join(self.out, "Broken", "rc")).read().strip(), "3")
        self.assertEqual(open(os.path.join(self.out, "Beta", "rc")).read().strip(), "0", "the others go on")

    def test_no_steps_is_sft_alone_without_a_sampled_check(self):
        done, calls = self.bench("Alpha", sampled="", TA_STEPS="0")
        self.assertEqual(done.returncode, 0, done.stderr)
        fit = calls[0]
        self.assertEqual((fit[fit.index("--steps") + 1], fit[fit.index("--check-samples") + 1]), ("0", "0"))
        done, calls = self.bench("Alpha", sampled="4", TA_STEPS="0")
        self.assertEqual((done.returncode, calls), (2, []), "refused before any fit")
        self.assertIn("leave TA_CHECK_SAMPLED unset or 0", done.stderr)
        done, calls = self.bench("Alpha", sampled="4", TA_STEPS="3")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(calls[0][calls[0].index("--check-samples") + 1], "4", "with GRPO the sampled check stays")

    def test_an_earlier_runs_tasks_are_copied_in_before_the_fit(self):
        earlier = os.path.join(self.tmp, "earlier")
        for stage, text in (("synth", "synthesized\n"), ("paraphrase", "reworded\n")):
            write(os.path.join(earlier, "Alpha", stage, "summary.json"), "{}")
            write(os.path.join(earlier, "Alpha", stage, "scenarios.jsonl"), text)
        write(os.path.join(earlier, "Beta", "synth", "summary.json"), "{}")
        done, calls = self.bench("Alpha Beta", TA_TASKS_FROM=earlier)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(len(calls), 2)
        self.assertEqual(open(os.path.join(self.out, "Alpha", "paraphrase", "scenarios.jsonl")).read(), "reworded\n")
        self.assertEqual(open(os.path.join(self.out, "Alpha", "synth", "scenarios.jsonl")).read(), "synthesized\n")
        self.assertTrue(os.path.isfile(os.path.join(self.out, "Beta", "synth", "summary.json")))
        self.assertFalse(os.path.exists(os.path.join(self.out, "Beta", "paraphrase")), "none to copy")
        # A run continued keeps what it has: its own stages are not overwritten.
        write(os.path.join(self.out, "Alpha", "paraphrase", "scenarios.jsonl"), "its own\n")
        self.bench("Alpha", TA_TASKS_FROM=earlier)
        self.assertEqual(open(os.path.join(self.out, "Alpha", "paraphrase", "scenarios.jsonl")).read(), "its own\n")
        done, calls = self.bench("Alpha Gamma", TA_TASKS_FROM=earlier)
        self.assertEqual((done.returncode, calls), (2, []), "a database without tasks there: nothing runs")
        self.assertIn("no finished synth/ for Gamma", done.stderr)

    def test_bad_input_is_refused_before_anything_runs(self):
        done, calls = self.bench("Alpha", sampled="many")
        self.assertEqual((done.returncode, calls), (2, []))
        self.assertIn("TA_CHECK_SAMPLED=many", done.stderr)
        done, calls = self.bench("Gamma")
        self.assertNotEqual(done.returncode, 0)
        self.assertEqual(calls, [])
        self.assertIn("Gamma.jsonl", open(os.path.join(self.out, "Gamma", "fit.log")).read())


if __name__ == "__main__":
    unittest.main()
