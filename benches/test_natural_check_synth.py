"""Tests of benches/natural_check.sh's TA_VALUE_LOOKUPS: with it, `scenarios synth` runs with
`--value-lookups` and TA_OUT/settings says so (so a TA_SFT_FROM run with other tasks is refused);
without it, neither.

The real script with a stand-in binary that records its arguments; the pipeline stops after synth
(the stand-in writes no tasks), which is all these tests need.

    python3 -m pytest benches/test_natural_check_synth.py
"""
import os
import shutil
import subprocess
import tempfile
import unittest

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "natural_check.sh")
STAND_IN = """#!/usr/bin/env bash
echo "$*" >> "$(dirname "$0")/calls"
"""


class ValueLookups(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.bin = os.path.join(self.tmp, "train-agent")
        with open(self.bin, "w") as f:
            f.write(STAND_IN)
        os.chmod(self.bin, 0o755)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def bench(self, **knobs):
        out = os.path.join(self.tmp, "out")
        env = dict(os.environ, TA_BIN=self.bin, TA_MODEL="m", TA_OUT=out, TA_DBS="demo", **knobs)
        env.pop("TA_SCENARIOS_DIR", None)
        subprocess.run(["bash", BENCH], env=env, capture_output=True, text=True, timeout=120, check=False)
        with open(os.path.join(self.tmp, "calls")) as f:
            synth = [c for c in f.read().splitlines() if c.startswith("scenarios synth ")]
        os.remove(os.path.join(self.tmp, "calls"))
        with open(os.path.join(out, "settings")) as f:
            settings = f.read().splitlines()
        shutil.rmtree(out)
        return synth, settings

    def test_value_lookups_reach_synth_and_the_settings(self):
        synth, settings = self.bench(TA_VALUE_LOOKUPS="1")
        self.assertEqual(len(synth), 1)
        self.assertIn("--value-lookups", synth[0].split())
        self.assertIn("value_lookups=1", settings)

    def test_off_by_default(self):
        synth, settings = self.bench()
        self.assertEqual(len(synth), 1)
        self.assertNotIn("--value-lookups", synth[0].split())
        self.assertFalse(any(s.startswith("value_lookups") for s in settings), settings)
        # An empty value is off too (the device scripts pass TA_VALUE_LOOKUPS= for the other arm).
        synth, _ = self.bench(TA_VALUE_LOOKUPS="")
        self.assertNotIn("--value-lookups", synth[0].split())


if __name__ == "__main__":
    unittest.main()
