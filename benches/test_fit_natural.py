"""Tests of benches/fit_natural.sh: one `fit` a database with its people's questions as the check
set, the pipelines dealt to the GPUs in turn with their share of memory, then the sampled check
as fit's own check (fit.json's `eval` stage) with K episodes a question, no base model and the
context train served; skipped when done, off at 0, and never after a fit that failed.

The real script with a stand-in binary that records its arguments and environment, and for `fit`
writes the fit.json a finished fit writes (its `train` and `eval` commands) and for `eval` an
eval.json in its --out; stand-in databases and questions, not KaggleDBQA's.

    python3 -m pytest benches/test_fit_natural.py
"""
import json
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
out=; server=
args=("$@")
for ((i = 0; i < $#; i++)); do
  case ${args[i]} in --out) out=${args[i+1]} ;; --server) server=${args[i+1]} ;; esac
done
if [[ $1 == fit ]]; then
  [[ $server == *Broken* ]] && exit 3
  python3 - "$out" "$server" <<'EOF'
import json, shlex, sys
out, server = sys.argv[1], sys.argv[2]
stages = [
    {"stage": "train", "command": f"train-agent train --server {shlex.quote(server)} --out {out}/grpo --max-model-len 16384"},
    {"stage": "eval", "command": f"train-agent eval --server {shlex.quote(server)} --tools a,b --isolate none --scenarios q.jsonl "
                                 f"--split all --model {out}/grpo/final --baseline {out}/sft/final --compare-base --max-turns 8 --out {out}/check"},
]
json.dump(stages, open(f"{out}/fit.json", "w"))
EOF
elif [[ $1 == eval ]]; then
  mkdir -p "$out"; echo '{}' > "$out/eval.json"
fi
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

    def test_each_database_is_one_fit_on_its_gpu_then_its_sampled_check(self):
        done, calls = self.bench("Alpha Beta demo")
        self.assertEqual(done.returncode, 0, done.stderr)
        fits = {c[4 + c[3:].index("--out")].rsplit("/", 1)[1]: c for c in calls if c[2] == "fit"}
        self.assertEqual(sorted(fits), ["Alpha", "Beta", "demo"])
        alpha = fits["Alpha"]
        self.assertEqual(alpha[:2], ["0", "0.2"], "dealt in turn: two pipelines on GPU 0, 0.4 between them")
        self.assertEqual(fits["Beta"][0], "1")
        self.assertEqual(fits["demo"][0], "0")
        server = alpha[alpha.index("--server") + 1]
        self.assertEqual(shlex.split(server), [self.bin, "demo-server", "--db", os.path.join(self.data, "Alpha.sqlite")])
        self.assertEqual(alpha[alpha.index("--check-set") + 1], os.path.join(self.data, "Alpha.jsonl"))
        self.assertTrue(fits["demo"][fits["demo"].index("--check-set") + 1].endswith("scenarios/company.jsonl"))
        self.assertIn("--profile", alpha)
        self.assertNotIn("--steps", alpha, "fit's own steps unless TA_STEPS")

        evals = [c for c in calls if c[2] == "eval"]
        self.assertEqual(len(evals), 3)
        alpha_eval = next(c for c in evals if c[c.index("--out") + 1] == os.path.join(self.out, "Alpha", "check-sampled"))
        argv = alpha_eval[2:]
        self.assertEqual(argv[:2], ["eval", "--server"], "the subcommand once, then fit's flags")
        self.assertEqual(argv[argv.index("--server") + 1], server, "one argument, as fit ran it")
        self.assertNotIn("--compare-base", argv)
        self.assertEqual(argv.count("--out"), 1)
        for flag, value in [("--rollouts", "8"), ("--temperature", "1.0"), ("--max-model-len", "16384"),
                            ("--baseline", os.path.join(self.out, "Alpha", "sft", "final")), ("--max-turns", "8"), ("--tools", "a,b")]:
            self.assertEqual(argv[argv.index(flag) + 1], value, flag)
        for name in ("Alpha", "Beta", "demo"):
            self.assertEqual(open(os.path.join(self.out, name, "rc")).read().strip(), "0")

        # Again: fit resumes (it skips its finished stages itself), the sampled checks are done.
        done, calls = self.bench("Alpha Beta demo")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(sorted(c[2] for c in calls), ["fit"] * 3)

    def test_no_sampled_check_at_zero_or_after_a_failed_fit(self):
        done, calls = self.bench("Alpha", sampled="0", TA_STEPS="4", TA_VALIDATION_LIMIT="50")
        self.assertEqual((done.returncode, [c[2] for c in calls]), (0, ["fit"]))
        fit = calls[0]
        self.assertEqual((fit[fit.index("--steps") + 1], fit[fit.index("--validation-limit") + 1]), ("4", "50"))
        done, calls = self.bench("Broken Beta", gpus="0")
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("[Broken] FAILED", done.stderr)
        self.assertEqual(sorted(c[2] for c in calls), ["eval", "fit", "fit"], "Beta's check only")
        self.assertEqual(calls[0][1], "0.2", "two pipelines on one GPU")
        self.assertEqual(open(os.path.join(self.out, "Broken", "rc")).read().strip(), "3")

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
