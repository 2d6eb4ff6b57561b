"""Tests of benches/natural_check.py: its statistics on known values, and its reading of an eval
directory laid out as `train-agent eval` writes it (eval.json, trajectories/<label>.jsonl).

    python3 -m pytest benches/test_natural_check.py    or    python3 benches/test_natural_check.py
"""
import io
import json
import math
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import natural_check as nc  # noqa: E402


class Statistics(unittest.TestCase):
    def test_mcnemar_exact_on_known_counts(self):
        # 2 * P(X <= 2), X ~ Bin(12, 1/2) = 2 * 79 / 4096
        self.assertAlmostEqual(nc.mcnemar_exact(10, 2), 2 * 79 / 4096, places=12)
        self.assertAlmostEqual(nc.mcnemar_exact(10, 2), 0.0386, places=4)
        self.assertEqual(nc.mcnemar_exact(2, 10), nc.mcnemar_exact(10, 2), "two-sided: symmetric")
        self.assertEqual(nc.mcnemar_exact(0, 0), 1.0)
        self.assertEqual(nc.mcnemar_exact(5, 5), 1.0, "capped at 1")
        self.assertAlmostEqual(nc.mcnemar_exact(6, 0), 2 / 64, places=12)
        # Large counts neither overflow nor lose the tail: 2 * P(X <= 400), X ~ Bin(1000, 1/2) ~ 2.7e-10.
        p = nc.mcnemar_exact(600, 400)
        self.assertTrue(0 < p < 1e-9, p)

    def test_needed_split_is_the_narrowest_significant_one(self):
        self.assertEqual(nc.needed_split(27), (20, 7))  # 19/8 gives p = 0.052
        self.assertGreaterEqual(nc.mcnemar_exact(19, 8), 0.05)
        self.assertLess(nc.mcnemar_exact(20, 7), 0.05)
        self.assertEqual(nc.needed_split(6), (6, 0), "p = 2/64")
        self.assertIsNone(nc.needed_split(5), "five changes cannot reach p < 0.05: 2/32")
        self.assertIsNone(nc.needed_split(0))

    def test_power_of_the_paired_test(self):
        # 6 changes, all gains: only 6/0 is significant (p = 2/64), so power is q ** 6
        self.assertAlmostEqual(nc.power(6, 6), 1.0)
        self.assertAlmostEqual(nc.power(6, 0), 0.5 ** 6)
        self.assertAlmostEqual(nc.power(6, 3), 0.75 ** 6)
        self.assertEqual(nc.power(5, 5), 0.0, "five changes never reach p < 0.05")
        self.assertEqual(nc.power(0, 0), 0.0)
        self.assertLess(nc.power(27, 8.3), nc.power(27, 11.6), "a larger gain is found more often")

    def test_sign_flip_exact(self):
        # One run's -1/0/1 differences: the exact McNemar p.
        for b, c in [(10, 2), (6, 0), (5, 5), (17, 10)]:
            self.assertAlmostEqual(nc.sign_flip_exact([1] * b + [-1] * c + [0] * 7), nc.mcnemar_exact(b, c), places=12)
        # Two runs summed: of the 8 sign assignments of (2, 2, 1) only all-plus and all-minus reach |5|.
        self.assertEqual(nc.sign_flip_exact([2, 2, 1, 0]), 2 / 8)
        self.assertEqual(nc.sign_flip_exact([2, -1]), 1.0, "|2 - 1| = 1: every assignment reaches it")
        self.assertEqual(nc.sign_flip_exact([0, 0]), 1.0)
        # Fractional differences (a question's mean over episodes) are exact too: (1/2, 1/4) -> 2 of 4.
        self.assertEqual(nc.sign_flip_exact([0.5, 0.25]), 0.5)

    def test_lost_run_bounds_match_every_placement(self):
        # A lost run of +2/-1 among 6 questions, every placement of its changes tried by brute force.
        import itertools
        known = [1, 1, -1, 0, 0, 0]
        ps = set()
        for ups in itertools.combinations(range(6), 2):
            for down in set(range(6)) - set(ups):
                lost = [1 if i in ups else -1 if i == down else 0 for i in range(6)]
                ps.add(float(nc.sign_flip_exact([a + b for a, b in zip(known, lost)])))
        self.assertEqual(nc.lost_run_bounds(known, 2, 1), (min(ps), max(ps)))
        # No changes in the lost run: the known run's own exact McNemar p, both ends.
        self.assertEqual(nc.lost_run_bounds([1, 1, 1, 0, 0, 0], 0, 0), (0.25, 0.25))

    def test_clustered_counts_questions_once(self):
        a1, b1 = {"q1": 0, "q2": 1, "q3": 0}, {"q1": 1, "q2": 1, "q3": 1}
        a2, b2 = {"q1": 0, "q2": 1, "q3": 0, "q4": 0}, {"q1": 1, "q2": 0, "q3": 0, "q4": 1}
        t = nc.clustered([(a1, b1), (a2, b2)])
        self.assertEqual((t["tasks"], t["runs"], t["better"], t["worse"]), (3, 2, 3, 1), "q4 is not in run 1")
        self.assertAlmostEqual(t["diff"], (1 + 1 - 1 + 1 + 0 + 0) / 6)  # summed per question: q1 +2, q2 -1, q3 +1
        self.assertEqual(t["p"], nc.sign_flip_exact([2, -1, 1]))
        self.assertEqual(t["p"], 6 / 8, "+-2 +-1 +-1: |sum| >= 2 in 6 of the 8 sign assignments (not the two 0s)")
        self.assertIsNone(nc.clustered([({"x": 1}, {"y": 1})]))

    def test_wilson_interval(self):
        lo, hi = nc.wilson(50, 100)
        self.assertAlmostEqual(lo, 0.404, places=3)
        self.assertAlmostEqual(hi, 0.596, places=3)
        lo, hi = nc.wilson(0, 10)
        self.assertEqual(lo, 0.0)
        self.assertAlmostEqual(hi, 0.2775, places=4)
        lo, hi = nc.wilson(10, 10)
        self.assertAlmostEqual(lo, 1 - 0.2775, places=4)
        self.assertAlmostEqual(hi, 1.0, places=12)
        self.assertIsNone(nc.wilson(0, 0))

    def test_paired_counts_discordant_questions_only(self):
        a = {("db", str(i)): float(i < 5) for i in range(10)}  # right on 0-4
        b = {("db", str(i)): float(i < 2 or i >= 7) for i in range(10)}  # right on 0, 1, 7, 8, 9
        t = nc.paired(a, b)
        self.assertEqual((t["tasks"], t["better"], t["worse"]), (10, 3, 3))
        self.assertEqual(t["p"], 1.0)
        self.assertAlmostEqual(t["diff"], 0.0)

    def test_paired_bootstrap_on_known_differences(self):
        t = nc.paired_bootstrap({i: 0.0 for i in range(5)}, {i: 1.0 for i in range(5)})
        self.assertEqual((t["tasks"], t["diff"], t["ci95"], t["p"]), (5, 1.0, [1.0, 1.0], 0.0), "every resample above 0")
        t = nc.paired_bootstrap({0: 0.0, 1: 1.0}, {0: 1.0, 1: 0.0})
        self.assertEqual((t["diff"], t["p"]), (0.0, 1.0))
        self.assertLessEqual(t["ci95"][0], 0.0)
        self.assertGreaterEqual(t["ci95"][1], 0.0)
        # pass@1 rates: a quarter gained on each of four questions, one of them lost back in full.
        a = {0: 0.25, 1: 0.5, 2: 0.0, 3: 1.0}
        b = {0: 0.5, 1: 0.75, 2: 0.25, 3: 0.0}
        t = nc.paired_bootstrap(a, b)
        self.assertAlmostEqual(t["diff"], (0.25 + 0.25 + 0.25 - 1.0) / 4)
        self.assertEqual(t, nc.paired_bootstrap(a, b), "seeded: the same numbers twice")
        self.assertTrue(t["ci95"][0] <= t["diff"] <= t["ci95"][1])
        self.assertIsNone(nc.paired_bootstrap({0: 1.0}, {1: 1.0}), "no shared question")

    def test_success_rule_matches_ta_metrics(self):
        self.assertTrue(nc.is_success({"reward_parts": {"ground_truth": 1.0}, "outcome": "completed"}))
        self.assertFalse(nc.is_success({"reward_parts": {"ground_truth": 0.5, "judge": 1.0}, "outcome": "completed"}))
        self.assertTrue(nc.is_success({"reward_parts": {"judge": 0.5}, "outcome": "ran_out_of_turns"}))
        self.assertTrue(nc.is_success({"reward_parts": {}, "outcome": "completed"}))
        self.assertFalse(nc.is_success({"reward_parts": {}, "outcome": "error"}))


def write_check(out, db, results, grpo=True, name="check"):
    """An eval directory as `train-agent eval` writes it: results = {label: [success, ...]}."""
    check = os.path.join(out, db, name)
    os.makedirs(os.path.join(check, "trajectories"))
    labels = ["base", "baseline", "trained"] if grpo else ["base", "trained"]
    models = [{"label": label, "source": f"/x/{label}"} for label in labels]
    n = len(results["base"])
    with open(os.path.join(check, "eval.json"), "w") as f:
        json.dump({"models": models, "server": "s", "dataset": "d", "split": "all", "rollouts_per_scenario": 1,
                   "settings": {"scenarios": n}, "wall_s": 1.0, "metrics": []}, f)
    for label in labels:
        with open(os.path.join(check, "trajectories", f"{label}.jsonl"), "w") as f:
            for i, ok in enumerate(results[label]):
                t = {"scenario_id": f"{db}-{i:02d}", "outcome": "completed", "num_turns": 3,
                     "reward_parts": {"ground_truth": 1.0 if ok else 0.0}, "reward": 1.0 if ok else 0.0}
                f.write(json.dumps(t) + "\n")


def write_sampled(out, db, results, k):
    """A TA_CHECK_SAMPLED check-sampled/: results = {label: [right episodes of k, ...]} for
    `baseline` (SFT) and `trained` (SFT+GRPO), k episodes a question."""
    check = os.path.join(out, db, "check-sampled")
    os.makedirs(os.path.join(check, "trajectories"))
    with open(os.path.join(check, "eval.json"), "w") as f:
        json.dump({"models": [{"label": "baseline", "source": "/x/sft"}, {"label": "trained", "source": "/x/grpo"}],
                   "rollouts_per_scenario": k, "metrics": []}, f)
    for label, rights in results.items():
        with open(os.path.join(check, "trajectories", f"{label}.jsonl"), "w") as f:
            for i, right in enumerate(rights):
                for e in range(k):
                    f.write(json.dumps({"scenario_id": f"{db}-{i:02d}", "outcome": "completed",
                                        "reward_parts": {"ground_truth": 1.0 if e < right else 0.0}}) + "\n")


def run_main(out_dirs, tmp):
    """natural_check.py's main on `out_dirs`: what it printed, and the numbers it wrote with --json."""
    text = io.StringIO()
    json_path = os.path.join(tmp, "n.json")
    with redirect_stdout(text):
        assert nc.main([*out_dirs, "--json", json_path]) == 0
    with open(json_path) as f:
        return text.getvalue(), json.load(f)


class Layout(unittest.TestCase):
    def test_sampled_check_table(self):
        with tempfile.TemporaryDirectory() as tmp:
            for db in ("demo", "GeoNuclearData"):
                write_check(tmp, db, {"base": [0] * 4, "baseline": [1, 0, 0, 0], "trained": [1, 1, 0, 0]})
            write_sampled(tmp, "demo", {"baseline": [4, 2, 0, 1], "trained": [4, 3, 1, 1]}, k=4)
            write_sampled(tmp, "GeoNuclearData", {"baseline": [0, 0, 4, 4], "trained": [0, 0, 4, 0]}, k=4)
            dbs, _ = nc.read_out_dir(tmp)
            sampled, notes = nc.read_sampled(tmp, dbs)
            self.assertEqual(notes, [])
            rows = dict(nc.sampled_rows(sampled))
            demo = rows["demo"]
            self.assertEqual((demo["n"], demo["k"]), (4, 4))
            self.assertAlmostEqual(demo["SFT"]["acc"], 7 / 16)
            self.assertAlmostEqual(demo["SFT+GRPO"]["acc"], 9 / 16)
            self.assertAlmostEqual(demo["SFT+GRPO vs SFT"]["diff"], 2 / 16)
            pooled = rows["**all**"]
            self.assertEqual(pooled["n"], 8)
            self.assertAlmostEqual(pooled["SFT+GRPO vs SFT"]["diff"], (2 / 4 - 4 / 4) / 8)
            # pass@k: a question with any right episode of its k
            self.assertEqual((demo["SFT pass@k"]["successes"], demo["SFT+GRPO pass@k"]["successes"]), (3, 4))
            self.assertEqual((rows["GeoNuclearData"]["SFT pass@k"]["acc"], rows["GeoNuclearData"]["SFT+GRPO pass@k"]["acc"]), (0.5, 0.25))
            self.assertEqual((pooled["SFT pass@k"]["acc"], pooled["SFT+GRPO pass@k"]["acc"]), (5 / 8, 5 / 8))
            text, numbers = run_main([tmp], tmp)
            self.assertIn("| demo | 4 | 4 | 43.8% | 56.2% | +12.5 [", text)
            self.assertRegex(text, r"\| demo \|.*\| 75\.0% \| 100\.0% \|\n")
            self.assertEqual([r["name"] for r in numbers["recipes"][0]["sampled"]], ["GeoNuclearData", "demo", "all"])


    def test_tables_from_eval_directories(self):
        with tempfile.TemporaryDirectory() as tmp:
            r1, r2 = os.path.join(tmp, "r1"), os.path.join(tmp, "r2")
            # Recipe 1: demo with GRPO; one KaggleDBQA database with SFT only (TA_STEPS=0).
            write_check(r1, "demo", {"base": [0] * 10, "baseline": [1] * 4 + [0] * 6, "trained": [1] * 6 + [0] * 4})
            write_check(r1, "GeoNuclearData", {"base": [0, 0, 0, 0], "trained": [1, 0, 0, 0]}, grpo=False)
            write_check(r2, "demo", {"base": [0] * 10, "baseline": [1] * 10, "trained": [1] * 10})
            # train kept its start adapter: its last step validated lower (final.json).
            os.makedirs(os.path.join(r2, "demo", "grpo"))
            with open(os.path.join(r2, "demo", "grpo", "final.json"), "w") as f:
                json.dump({"rule": "best", "step": 0, "last_step": 12, "validation": {"step": 0, "success": 0.9375},
                           "last_validation": {"step": 12, "success": 0.0}}, f)
            os.makedirs(os.path.join(r1, "StudentMathScore"))  # failed: no check/
            # GRPO cut short: SFT's check, made before it, stands.
            write_check(r1, "fs", {"base": [0, 0], "trained": [1, 0]}, grpo=False, name="check-sft")
            dbs, notes = nc.read_out_dir(r1)
            self.assertEqual(list(dbs), ["GeoNuclearData", "fs", "demo"])
            self.assertEqual(set(dbs["fs"]), {"base", "SFT"})
            self.assertTrue(any("fs: GRPO unfinished" in n for n in notes), notes)
            self.assertEqual(set(dbs["demo"]), {"base", "SFT", "SFT+GRPO"})
            self.assertEqual(set(dbs["GeoNuclearData"]), {"base", "SFT"})
            self.assertTrue(any("StudentMathScore" in n for n in notes), notes)
            rows = dict(nc.rows_of(dbs))
            demo = rows["demo"]
            self.assertEqual(demo["n"], 10)
            self.assertAlmostEqual(demo["SFT"]["acc"], 0.4)
            self.assertAlmostEqual(demo["SFT+GRPO"]["acc"], 0.6)
            self.assertEqual((demo["SFT+GRPO vs SFT"]["better"], demo["SFT+GRPO vs SFT"]["worse"]), (2, 0))
            pooled = rows["**all**"]
            self.assertEqual(pooled["n"], 16)
            self.assertAlmostEqual(pooled["SFT"]["acc"], 6 / 16)
            self.assertNotIn("SFT+GRPO", pooled, "GRPO did not run on every database")
            self.assertAlmostEqual(pooled["SFT vs base"]["p"], nc.mcnemar_exact(6, 0))

            self.assertFalse(any("kept" in n for n in notes), "r1 has no final.json: nothing to say")
            dbs2, notes2 = nc.read_out_dir(r2)
            self.assertIn("demo: SFT+GRPO is the SFT adapter (step 0), kept as the best validated (93.8%); "
                          "the last step, 12, validated 0.0%", notes2)
            cmp = nc.compare_recipes(dbs, dbs2)
            self.assertEqual(cmp["databases"], ["demo"])
            sft = cmp["pooled"]["SFT"]["test"]
            self.assertEqual((sft["tasks"], sft["better"], sft["worse"]), (10, 6, 0))
            self.assertAlmostEqual(sft["diff"], 0.6)

            out = io.StringIO()
            json_path = os.path.join(tmp, "n.json")
            with redirect_stdout(out):
                self.assertEqual(nc.main([r1, r2, "--json", json_path]), 0)
            text = out.getvalue()
            self.assertIn("| demo | 10 |", text)
            self.assertIn("recipe 2 vs recipe 1", text)
            self.assertIn("hand-written questions after SFT+GRPO: 60.0%", text)
            with open(json_path) as f:
                numbers = json.load(f)
            self.assertEqual(len(numbers["recipes"]), 2)
            self.assertTrue(math.isclose(numbers["recipe2_vs_recipe1"]["pooled"]["SFT+GRPO"]["test"]["diff"], 0.4))

    def test_runs_of_one_recipe_over_seeds(self):
        with tempfile.TemporaryDirectory() as tmp:
            runs = [os.path.join(tmp, f"s{i}") for i in (1, 2)]
            other = [os.path.join(tmp, f"o{i}") for i in (1, 2)]
            # Seed 1: GRPO +2 questions on the demo; seed 2: +1/-1 on the demo, +1 on one KaggleDBQA db.
            write_check(runs[0], "demo", {"base": [0] * 6, "baseline": [1, 1, 0, 0, 0, 0], "trained": [1, 1, 1, 1, 0, 0]})
            write_check(runs[0], "GeoNuclearData", {"base": [0] * 4, "baseline": [1, 0, 0, 0], "trained": [1, 0, 0, 0]})
            write_check(runs[1], "demo", {"base": [0] * 6, "baseline": [1, 1, 1, 0, 0, 0], "trained": [0, 1, 1, 1, 0, 0]})
            write_check(runs[1], "GeoNuclearData", {"base": [0] * 4, "baseline": [0, 0, 0, 0], "trained": [0, 1, 0, 0]})
            for o in other:  # another recipe: SFT right on one demo question only, GRPO the same
                write_check(o, "demo", {"base": [0] * 6, "baseline": [1] + [0] * 5, "trained": [1] + [0] * 5})
                write_check(o, "GeoNuclearData", {"base": [0] * 4, "baseline": [0] * 4, "trained": [0] * 4})
            rows = dict(nc.over_seeds([nc.read_out_dir(r)[0] for r in runs]))
            self.assertEqual(list(rows), ["GeoNuclearData", "demo", "**all**"])
            demo = rows["demo"]
            self.assertEqual([a["successes"] for a in demo["SFT+GRPO"]], [4, 3])
            step = demo["SFT+GRPO vs SFT"]
            self.assertEqual([(e["better"], e["worse"]) for e in step["per_run"]], [(2, 0), (1, 1)])
            # Per question over both runs: q0 -1, q2 +1, q3 +2: 6 of the 8 sign assignments reach |2|.
            self.assertEqual((step["over_runs"]["better"], step["over_runs"]["worse"]), (3, 1))
            self.assertEqual(step["over_runs"]["p"], 0.75)
            pooled = rows["**all**"]["SFT+GRPO vs SFT"]["over_runs"]
            self.assertEqual((pooled["tasks"], pooled["better"], pooled["worse"]), (10, 4, 1))
            self.assertAlmostEqual(pooled["diff"], 3 / 20)

            text, numbers = run_main(["--seeds", *runs, "--against", *other], tmp)
            self.assertIn("| demo | 6 | 2 | 0.0% (0.0 to 0.0) | 41.7% (33.3 to 50.0) | 58.3% (50.0 to 66.7) |", text)
            self.assertIn("Pooled SFT+GRPO vs SFT over 2 runs: +15.0 points", text)
            cmp = numbers["recipe2_vs_recipe1_over_seeds"]
            self.assertEqual(cmp["databases"], ["GeoNuclearData", "demo"])
            sft = cmp["SFT"]["test"]
            # SFT over the other recipe's: seed 1 right on one more demo and one more GeoNuclearData
            # question, seed 2 on two more demo questions.
            self.assertEqual((sft["better"], sft["worse"]), (4, 0))
            self.assertAlmostEqual(sft["diff"], 4 / 20)
            self.assertEqual([r["name"] for r in numbers["over_seeds"]], ["GeoNuclearData", "demo", "all"])
            with redirect_stdout(io.StringIO()), self.assertRaises(SystemExit):
                nc.main(["--seeds", *runs, "--against", other[0]])

    def test_a_lost_run_pooled_by_its_counts(self):
        with tempfile.TemporaryDirectory() as tmp:
            run = os.path.join(tmp, "run")
            write_check(run, "demo", {"base": [0] * 6, "baseline": [1, 1, 0, 0, 0, 0], "trained": [1, 1, 1, 1, 0, 0]})
            text, numbers = run_main([run, "--lost-run", "1", "0"], tmp)
            # This run +2/-0; the lost one's +1 on one of the two (p 0.5) or on another question (0.25).
            self.assertEqual((numbers["lost_run"]["p_low"], numbers["lost_run"]["p_high"]), (0.25, 0.5))
            self.assertAlmostEqual(numbers["lost_run"]["diff"], 3 / 12)
            self.assertIn("+25.0 points (+3/-0 run-questions)", text)
            with redirect_stdout(io.StringIO()), self.assertRaises(SystemExit):
                nc.main(["--seeds", run, run, "--lost-run", "1", "0"])

    def test_check_steps_table_marks_the_kept_step(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "out")
            sft = [1] * 4 + [0] * 6  # 4 of 10
            write_check(out, "demo", {"base": [0] * 10, "baseline": sft, "trained": [1] * 5 + [0] * 5})
            # Step 4 gains 3 questions and loses 1 (6 of 10); step 8, kept, gains 1 (5 of 10).
            write_check(out, "demo", {"base": [0] * 10, "baseline": sft, "trained": [0] + [1] * 6 + [0] * 3}, name="check-step-4")
            write_check(out, "demo", {"base": [0] * 10, "baseline": sft, "trained": [1] * 5 + [0] * 5}, name="check-step-8")
            write_check(out, "GeoNuclearData", {"base": [0, 0], "baseline": [1, 0], "trained": [1, 1]})
            write_check(out, "GeoNuclearData", {"base": [0, 0], "baseline": [1, 0], "trained": [0, 0]}, name="check-step-4")
            for db, step in [("demo", 8), ("GeoNuclearData", 0)]:
                os.makedirs(os.path.join(out, db, "grpo"))
                with open(os.path.join(out, db, "grpo", "final.json"), "w") as f:
                    json.dump({"rule": "best", "step": step, "last_step": 8}, f)

            dbs, _ = nc.read_out_dir(out)
            steps, notes = nc.read_steps(out, dbs)
            self.assertEqual(notes, [])
            rows = nc.steps_rows(steps)
            demo = {e["step"]: e for e in rows["demo"]["steps"]}
            self.assertEqual((rows["demo"]["kept"], list(demo)), (8, [4, 8]))
            self.assertAlmostEqual(demo[4]["SFT+GRPO"]["acc"], 0.6)
            self.assertEqual((demo[4]["vs SFT"]["better"], demo[4]["vs SFT"]["worse"]), (3, 1))
            self.assertAlmostEqual(demo[4]["vs SFT"]["p"], nc.mcnemar_exact(3, 1))
            self.assertAlmostEqual(demo[8]["SFT+GRPO"]["acc"], 0.5)
            self.assertEqual((demo[8]["vs SFT"]["better"], demo[8]["vs SFT"]["worse"]), (1, 0))
            self.assertEqual(rows["GeoNuclearData"]["kept"], 0)
            # Pooled over the databases, only the steps both checked (4): 6 of 12 against SFT's 5 of 12.
            pooled = rows["**all**"]["steps"]
            self.assertEqual([e["step"] for e in pooled], [4])
            self.assertEqual((pooled[0]["SFT+GRPO"]["successes"], pooled[0]["SFT+GRPO"]["n"], pooled[0]["SFT"]["successes"]), (6, 12, 5))
            self.assertEqual((pooled[0]["vs SFT"]["better"], pooled[0]["vs SFT"]["worse"]), (3, 2))

            text = io.StringIO()
            json_path = os.path.join(tmp, "n.json")
            with redirect_stdout(text):
                self.assertEqual(nc.main([out, "--json", json_path]), 0)
            text = text.getvalue()
            self.assertIn("people's questions at GRPO's validated steps (diagnostic; selecting a step by it would select on the check set)", text)
            self.assertIn("| database | SFT | step 4 | step 8 |", text)
            self.assertIn(f"| demo | {nc.pct(nc.accuracy({i: float(v) for i, v in enumerate(sft)}))} | "
                          f"{nc.pct(demo[4]['SFT+GRPO'])}, 0.625 (+3/-1) | {nc.pct(demo[8]['SFT+GRPO'])}, 1.000 (+1/-0) (grpo/final) |", text)
            # GRPO kept the SFT adapter; step 8 was not checked there.
            self.assertIn("| GeoNuclearData | 50.0% [9.5, 90.5] (grpo/final) | 0.0% [0.0, 65.8], 1.000 (+0/-1) | - |", text)
            self.assertIn(f"| **all** | {nc.pct(pooled[0]['SFT'])} | {nc.pct(pooled[0]['SFT+GRPO'])}, 1.000 (+3/-2) | - |", text)
            with open(json_path) as f:
                numbers = json.load(f)["recipes"][0]["check_steps"]
            self.assertEqual([e["step"] for e in numbers["demo"]["steps"]], [4, 8])
            self.assertEqual(numbers["demo"]["kept"], 8)

    def test_no_check_steps_table_without_check_step_dirs(self):
        with tempfile.TemporaryDirectory() as tmp:
            write_check(tmp, "demo", {"base": [0] * 4, "baseline": [1, 0, 0, 0], "trained": [1, 1, 0, 0]})
            # An unfinished step check (no eval.json yet) is not a result.
            os.makedirs(os.path.join(tmp, "demo", "check-step-4", "trajectories"))
            text, numbers = run_main([tmp], tmp)
            self.assertNotIn("validated steps", text)
            self.assertEqual(numbers["recipes"][0]["check_steps"], {})
            self.assertEqual(numbers["recipes"][0]["sampled"], [], "no check-sampled/: no sampled rows")

    def test_grpo_validation_split_by_wording(self):
        with tempfile.TemporaryDirectory() as tmp:
            write_check(tmp, "demo", {"base": [0] * 2, "baseline": [1, 0], "trained": [1, 1]})
            d = os.path.join(tmp, "demo")
            tasks = [{"id": "r1", "phrasing": "paraphrase"}, {"id": "r2", "phrasing": "paraphrase"},
                     {"id": "g1", "phrasing": "natural"}, {"id": "g2", "phrasing": "technical"}]
            with open(os.path.join(d, "grpo-tasks.jsonl"), "w") as f:
                f.writelines(json.dumps(t) + "\n" for t in tasks)
            os.makedirs(os.path.join(d, "grpo", "eval"))

            def episodes(name, right):
                with open(os.path.join(d, "grpo", "eval", name), "w") as f:
                    for t in tasks:
                        f.write(json.dumps({"scenario_id": t["id"], "outcome": "completed",
                                            "reward_parts": {"ground_truth": 1.0 if t["id"] in right else 0.0}}) + "\n")
            episodes("step-000000.jsonl", {"r1", "g1", "g2"})  # rewordings 1 of 2, the grammar's 2 of 2
            episodes("step-000004.jsonl", {"r1", "r2", "g1"})  # 2 of 2, 1 of 2
            episodes("step-000004.sampled.jsonl", set())       # sampled episodes are not the greedy validation
            dbs, _ = nc.read_out_dir(tmp)
            w = nc.read_wordings(tmp, dbs)["demo"]
            self.assertEqual(list(w), [0, 4])
            self.assertEqual((w[0]["reworded"]["successes"], w[0]["reworded"]["n"], w[0]["grammar"]["successes"]), (1, 2, 2))
            self.assertEqual((w[4]["reworded"]["successes"], w[4]["grammar"]["successes"], w[4]["grammar"]["n"]), (2, 1, 2))
            text = io.StringIO()
            with redirect_stdout(text):
                self.assertEqual(nc.main([tmp]), 0)
            self.assertIn("| database | wording | step 0 | step 4 |", text.getvalue())
            self.assertIn(f"| demo | reworded | {nc.pct(w[0]['reworded'])} (2) | {nc.pct(w[4]['reworded'])} (2) |", text.getvalue())
            # Without rewordings among the validation tasks there is nothing to split.
            with open(os.path.join(d, "grpo-tasks.jsonl"), "w") as f:
                f.writelines(json.dumps({**t, "phrasing": "natural"}) + "\n" for t in tasks)
            self.assertEqual(nc.read_wordings(tmp, dbs), {})


def add_texts(out, db, name="check"):
    """Put into each trajectory of out/db/name/ what a real one holds beside its result: the question
    (`task` and the user's message), a query, the final answer and the expected one, each spelled
    with SECRET so that a test can look for them."""
    folder = os.path.join(out, db, name, "trajectories")
    for entry in os.listdir(folder):
        path = os.path.join(folder, entry)
        with open(path) as f:
            episodes = [json.loads(line) for line in f]
        with open(path, "w") as f:
            for t in episodes:
                sid = t["scenario_id"]
                t.update({"task": f"SECRET question {sid}?", "expected": f"SECRET expected {sid}",
                          "final_answer": f"SECRET answer {sid}",
                          "messages": [{"role": "user", "content": f"SECRET question {sid}?"},
                                       {"role": "assistant", "content": "", "tool_calls": [
                                           {"name": "query", "arguments": {"sql": f"SELECT 'SECRET' AS {db}"}}]}]})
                f.write(json.dumps(t) + "\n")


def write_outcomes(out_dir, path):
    """natural_check.py --outcomes: out_dir's per-question results into path."""
    with redirect_stdout(io.StringIO()):
        assert nc.main([out_dir, "--outcomes", path]) == 0


class Outcomes(unittest.TestCase):
    """An outcomes file (--outcomes) holds a run's per-question results and no text of the check set,
    and stands in for the run's directory wherever one is asked for."""

    def assert_same(self, tmp, argv, files):
        """main on argv (OUT_DIRs) prints and numbers the same as on argv with `files` = {OUT_DIR:
        its outcomes file} in their places, but for the paths themselves."""
        text, numbers = run_main(argv, tmp)
        text2, numbers2 = run_main([files.get(a, a) for a in argv], tmp)
        for d, f in files.items():
            text = text.replace(f": {d} (greedy", f": {f} (greedy")
        self.assertEqual(text, text2)
        for n in (numbers, numbers2):
            for r in n["recipes"]:
                r["out_dir"] = None
        self.assertEqual(numbers, numbers2)

    def test_one_run_from_its_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            run = os.path.join(tmp, "run")
            write_check(run, "demo", {"base": [0] * 6, "baseline": [1, 1, 0, 0, 0, 0], "trained": [1, 1, 1, 0, 0, 1]})
            write_check(run, "GeoNuclearData", {"base": [0, 1, 0], "trained": [1, 1, 0]}, grpo=False)
            write_check(run, "StudentMathScore", {"base": [0, 0], "trained": [1, 0]}, grpo=False, name="check-sft")
            write_sampled(run, "demo", {"baseline": [4, 2, 0, 1, 0, 0], "trained": [4, 3, 1, 1, 0, 2]}, k=4)
            os.makedirs(os.path.join(run, "demo", "grpo"))
            with open(os.path.join(run, "demo", "grpo", "final.json"), "w") as f:
                json.dump({"rule": "best", "step": 4, "last_step": 8, "validation": {"step": 4, "success": 0.5},
                           "last_validation": {"step": 8, "success": 0.25}}, f)
            for db, name in [("demo", "check"), ("demo", "check-sampled"), ("GeoNuclearData", "check"),
                             ("StudentMathScore", "check-sft")]:
                add_texts(run, db, name)
            path = os.path.join(tmp, "run.json")
            write_outcomes(run, path)

            with open(path) as f:
                stored = f.read()
            self.assertNotIn("SECRET", stored, "no question, query or answer of the check set")
            data = json.loads(stored)
            self.assertEqual(data["databases"]["demo"]["greedy"]["SFT+GRPO"]["demo-02"], 1.0)
            self.assertEqual(data["databases"]["demo"]["sampled"]["k"], 4)
            self.assertEqual(data["databases"]["demo"]["sampled"]["SFT"]["demo-01"], 0.5)
            self.assertTrue(any("step 4's adapter" in n for n in data["notes"]), "grpo/final's kept step")
            self.assertEqual(nc.read_outcomes(path)[0], nc.read_out_dir(run)[0])
            self.assert_same(tmp, [run], {run: path})

    def test_runs_over_seeds_and_recipes_from_files(self):
        with tempfile.TemporaryDirectory() as tmp:
            runs = [os.path.join(tmp, f"s{i}") for i in (1, 2)]
            other = [os.path.join(tmp, f"o{i}") for i in (1, 2)]
            write_check(runs[0], "demo", {"base": [0] * 6, "baseline": [1, 1, 0, 0, 0, 0], "trained": [1, 1, 1, 1, 0, 0]})
            write_check(runs[1], "demo", {"base": [0] * 6, "baseline": [1, 1, 1, 0, 0, 0], "trained": [0, 1, 1, 1, 0, 0]})
            write_sampled(runs[1], "demo", {"baseline": [2, 2, 0, 1, 0, 0], "trained": [1, 2, 2, 2, 0, 0]}, k=2)
            for run, right in zip(runs + other, [[1, 0, 0, 0], [0, 1, 0, 0], [0] * 4, [1, 1, 0, 0]]):
                write_check(run, "GeoNuclearData", {"base": [0] * 4, "baseline": [0] * 4, "trained": right})
            for o in other:
                write_check(o, "demo", {"base": [0] * 6, "baseline": [1] + [0] * 5, "trained": [1, 0, 1, 0, 0, 0]})
            files = {d: os.path.join(tmp, f"{os.path.basename(d)}.json") for d in runs + other}
            for d, f in files.items():
                write_outcomes(d, f)
            self.assert_same(tmp, ["--seeds", *runs, "--against", *other], files)
            self.assert_same(tmp, ["--seeds", *runs, "--against", *other], {runs[1]: files[runs[1]], other[0]: files[other[0]]})
            self.assert_same(tmp, [other[0], runs[0]], files)

    def test_one_run_from_the_files_of_its_databases(self):
        with tempfile.TemporaryDirectory() as tmp:
            run, a, b = (os.path.join(tmp, n) for n in ("run", "a", "b"))
            demo = {"base": [0] * 6, "baseline": [1, 1, 0, 0, 0, 0], "trained": [1, 1, 1, 0, 0, 1]}
            geo = {"base": [0] * 4, "baseline": [1, 0, 0, 0], "trained": [1, 1, 0, 0]}
            for out, checks in ((run, {"demo": demo, "GeoNuclearData": geo}), (a, {"demo": demo}), (b, {"GeoNuclearData": geo})):
                for db, c in checks.items():
                    write_check(out, db, c)
            write_sampled(run, "demo", {"baseline": [4, 2, 0, 1, 0, 0], "trained": [4, 3, 1, 1, 0, 2]}, k=4)
            write_sampled(a, "demo", {"baseline": [4, 2, 0, 1, 0, 0], "trained": [4, 3, 1, 1, 0, 2]}, k=4)
            files = {d: f"{d}.json" for d in (run, a, b)}
            for d, f in files.items():
                write_outcomes(d, f)
            joined = f"{files[a]}+{files[b]}"
            self.assertEqual(nc.read_run(joined)["dbs"], nc.read_run(files[run])["dbs"])
            text, numbers = run_main([files[run]], tmp)
            text2, numbers2 = run_main([joined], tmp)
            self.assertEqual(text.replace(files[run], "RUN"), text2.replace(joined, "RUN"))
            self.assertIn("| **all** | 10 |", text2)
            other = os.path.join(tmp, "other")
            write_check(other, "demo", {"base": [0] * 6, "baseline": [0] * 6, "trained": [1] + [0] * 5})
            write_check(other, "GeoNuclearData", {"base": [0] * 4, "baseline": [0] * 4, "trained": [0] * 4})
            self.assertEqual(run_main([other, joined], tmp)[1]["recipe2_vs_recipe1"],
                             run_main([other, files[run]], tmp)[1]["recipe2_vs_recipe1"])
            with self.assertRaises(SystemExit):
                nc.read_run(f"{files[a]}+{files[run]}")

    def test_a_run_without_grpo_has_base_and_sft(self):
        # `fit --steps 0` (fit_natural.sh's TA_STEPS=0): the check set's eval plays the base model
        # and the SFT adapter (its label `trained`, with no `baseline` beside it).
        with tempfile.TemporaryDirectory() as tmp:
            run = os.path.join(tmp, "run")
            write_check(run, "demo", {"base": [0] * 4, "trained": [1, 0, 0, 0]}, grpo=False)
            path = os.path.join(tmp, "run.json")
            text = io.StringIO()
            with redirect_stdout(text):
                assert nc.main([run, "--outcomes", path]) == 0
            self.assertIn("| demo | 4 | 0.0% [0.0, 49.0] | 25.0% [4.6, 69.9] | - |", text.getvalue())
            self.assertIn("hand-written questions after SFT: 25.0%", text.getvalue())
            self.assertNotIn("Pooled SFT+GRPO vs SFT", text.getvalue())
            with open(path) as f:
                data = json.load(f)
            self.assertEqual(sorted(data["databases"]["demo"]["greedy"]), ["SFT", "base"])
            self.assertEqual(data["notes"], [])

    def test_tables_that_need_the_directory_are_absent(self):
        with tempfile.TemporaryDirectory() as tmp:
            sft = [1, 0, 0, 0]
            write_check(tmp, "demo", {"base": [0] * 4, "baseline": sft, "trained": [1, 1, 0, 0]})
            write_check(tmp, "demo", {"base": [0] * 4, "baseline": sft, "trained": [0, 1, 0, 0]}, name="check-step-4")
            path = os.path.join(tmp, "demo.json")
            write_outcomes(tmp, path)
            text, numbers = run_main([tmp], tmp)
            self.assertIn("validated steps", text)
            text, numbers = run_main([path], tmp)
            self.assertNotIn("validated steps", text)
            self.assertEqual(numbers["recipes"][0]["check_steps"], {})
            self.assertIn("| demo | 4 |", text)

    def test_outcomes_wants_one_run_and_a_json_name(self):
        with tempfile.TemporaryDirectory() as tmp:
            write_check(tmp, "demo", {"base": [0] * 2, "baseline": [1, 0], "trained": [1, 1]})
            for argv in ([tmp, tmp, "--outcomes", os.path.join(tmp, "o.json")], [tmp, "--outcomes", os.path.join(tmp, "o.txt")]):
                with redirect_stdout(io.StringIO()), self.assertRaises(SystemExit):
                    nc.main(argv)
            with open(os.path.join(tmp, "n.json"), "w") as f:
                json.dump({"recipes": []}, f)
            with self.assertRaises(SystemExit):
                nc.read_outcomes(os.path.join(tmp, "n.json"))


if __name__ == "__main__":
    unittest.main()
