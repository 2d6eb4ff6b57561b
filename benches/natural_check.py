#!/usr/bin/env python3
"""The natural check set's table (issue 31), from what benches/natural_check.sh leaves.

    python3 benches/natural_check.py OUT_DIR [OUT_DIR2] [--json FILE]
    python3 benches/natural_check.py --seeds OUT_DIR OUT_DIR... [--against OUT_DIR OUT_DIR...]
    python3 benches/natural_check.py OUT_DIR --outcomes FILE.json    (then FILE.json for any OUT_DIR)

Each OUT_DIR holds one subdirectory per database (GeoNuclearData, GreaterManchesterCrime,
StudentMathScore, demo) whose `check/` is a `train-agent eval --split all --compare-base
[--baseline SFT]` output: `eval.json` (its `models` list the labels in table order) and
`trajectories/<label>.jsonl`, one trajectory per question. The labels:
  - `base`: the base model;
  - `baseline`: the SFT adapter, present when GRPO ran (`--baseline sft/final`);
  - `trained`: the SFT+GRPO adapter when a `baseline` is there, else the SFT adapter.
Success is decided as `ta_metrics::is_success` does: the `ground_truth` reward part at full
credit; else a judge score >= 0.5; else the outcome `completed`.

Printed (markdown): per database and pooled (KaggleDBQA's databases, and everything), n and the
greedy accuracy of base / SFT / SFT+GRPO with 95% Wilson intervals, and the paired exact McNemar
p-value (two-sided, exact binomial on the discordant questions) of SFT vs base and SFT+GRPO vs SFT.
With OUT_DIR2 (a second recipe on the same questions): recipe 2 vs recipe 1 for SFT and for
SFT+GRPO, paired by (database, scenario id). Then the issue's "done when" figures, and what the
pooled SFT+GRPO vs SFT comparison could show: the narrowest split of its changed questions that
reaches p < 0.05, and how often a true gain of +5 points would reach it (the power). Where
a sampled check left `check-sampled/` (natural_check.sh's TA_CHECK_SAMPLED, or fit's
`--check-samples` in benches/fit_natural.sh: SFT and SFT+GRPO, k episodes a question at
temperature 1.0), their pass@1 per database and pooled, with a paired bootstrap over questions, and
their pass@k, the questions with at least one right episode of the k: whether GRPO taught
questions or made the answers the model already gives sometimes its usual ones (`sampled`). Where
TA_CHECK_STEPS left `check-step-N/` (the same evaluation with step N's checkpoint as `trained`), a
diagnostic table of each step's accuracy and its McNemar test against the SFT adapter (check/'s
episodes of it, handed to each step's evaluation), also pooled over the databases for the steps
every one checked, grpo/final's step marked (`check_steps` in the JSON): a step chosen by it would
be chosen on the check set, so the claims stay grpo/final's. Where GRPO validated on tasks among
which are the teacher's rewordings (grpo-tasks.jsonl, grpo/eval/), its validation at each validated
step split by wording, rewordings and the grammar's own (`validation_by_wording` in the JSON).
With --seeds the OUT_DIRs are runs of one recipe with different seeds (fit's `--seed`, TA_SEED):
after each run's tables, every model's mean accuracy over the runs and their range, and the steps
SFT vs base and SFT+GRPO vs SFT over all the runs at once: each question's changes summed over the
runs, tested by flipping their signs (exact), so a question counts once however many runs saw it
(`over_seeds`). With --against (recipe 1's runs, as many), recipe 2 vs recipe 1 pooled the same way.
`--json FILE` writes every number for benches/RESULTS.md.

A run's directory does not outlive the machine it ran on, and its trajectories hold the check set's
questions, which stay out of the repository. `--outcomes FILE` (one OUT_DIR) writes what pooling it
with later runs needs and nothing else: per database, each model's greedy result keyed by scenario
id, the sampled check's pass@1 per question and its k, the run's notes (grpo/final's kept step among
them) and its directory's path; no question, answer, query or trajectory. Wherever an OUT_DIR is
asked for (recipe 2, --seeds, --against) such a file, named *.json, stands in for it: its greedy,
sampled, seed and recipe tables print as the directory's do; the check-step and validation-by-wording
tables need the directory and are absent. A run without GRPO (`fit --steps 0`, fit_natural.sh's
TA_STEPS=0) has base and SFT columns alone. Files of one run's different databases (fits of one
recipe and seed in two leases) joined by `+`, `A.json+B.json`, stand in for the run as one file
would. `--lost-run BETTER WORSE` (one OUT_DIR): a second run of
the recipe whose per-question results are gone, known only by its pooled SFT+GRPO vs SFT counts;
prints the two runs' difference and the range the exact test over questions can take as its
changes fall on this run's (`lost_run_bounds`). Standard library only.
"""
import argparse
import json
import math
from fractions import Fraction
import os
import random
import sys

Z95 = 1.959963984540054
KAGGLE = ["GeoNuclearData", "GreaterManchesterCrime", "StudentMathScore"]
DEMO = "demo"
MODELS = ["base", "SFT", "SFT+GRPO"]


# ---- statistics ------------------------------------------------------------------------------

def wilson(successes, n, z=Z95):
    """95% Wilson score interval of successes / n (successes may be fractional); None for n = 0."""
    if n == 0:
        return None
    p = successes / n
    z2 = z * z
    denom = 1 + z2 / n
    center = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    return (max(0.0, center - half), min(1.0, center + half))


def mcnemar_exact(b, c):
    """Two-sided exact McNemar p: min(1, 2 P(X <= min(b, c))), X ~ Binomial(b + c, 1/2); 1 when
    nothing is discordant (as statsmodels' mcnemar(exact=True) and ta_metrics::paired do)."""
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    tail = sum(math.comb(n, i) for i in range(k + 1))
    # Exact integers, then one division: no overflow at any n.
    return min(1.0, 2 * tail / 2 ** n)


def needed_split(discordant, alpha=0.05):
    """The narrowest split (better, worse) of `discordant` changed questions whose exact McNemar p
    is below `alpha`, or None: what a paired comparison with that many changes needed to show a
    gain."""
    for better in range((discordant + 1) // 2, discordant + 1):
        worse = discordant - better
        if better > worse and mcnemar_exact(better, worse) < alpha:
            return better, worse
    return None


def power(discordant, net, alpha=0.05):
    """The chance that `discordant` changed questions split significantly (exact McNemar, two-sided,
    below `alpha`) in favour of the later model when its true gain is `net` questions: each change
    is a gain with probability (discordant + net) / (2 discordant)."""
    if discordant == 0:
        return 0.0
    q = min(1.0, max(0.0, (discordant + net) / (2 * discordant)))
    return sum(math.comb(discordant, b) * q ** b * (1 - q) ** (discordant - b)
               for b in range(discordant + 1) if b > discordant - b and mcnemar_exact(b, discordant - b) < alpha)


def paired(a, b):
    """Model b against model a, each {key: success rate}, over the keys both hold: (tasks, b better,
    b worse, McNemar p, mean difference b - a)."""
    keys = sorted(set(a) & set(b))
    better = sum(1 for k in keys if b[k] > a[k])
    worse = sum(1 for k in keys if b[k] < a[k])
    diff = sum(b[k] - a[k] for k in keys) / len(keys) if keys else None
    return {"tasks": len(keys), "better": better, "worse": worse, "p": mcnemar_exact(better, worse), "diff": diff}


def sign_flip_exact(diffs):
    """Two-sided exact sign-flip (permutation) p of the sum of per-question differences: the share
    of the 2^n sign assignments whose sum is at least as far from 0 as the observed one. Each
    question is one unit whatever its difference is made of (several runs' changes summed), so runs
    of one question are not counted as independent. On differences of -1, 0 and 1 (one run) it is
    the exact McNemar p. Exact: a distribution over the attainable sums, in fractions."""
    diffs = [Fraction(d).limit_denominator(10_000) for d in diffs if d != 0]
    observed = abs(sum(diffs))
    counts = {Fraction(0): 1}
    for d in diffs:
        nxt = {}
        for total, c in counts.items():
            for t in (total + d, total - d):
                nxt[t] = nxt.get(t, 0) + c
        counts = nxt
    return sum(c for t, c in counts.items() if abs(t) >= observed) / 2 ** len(diffs)


def clustered(pairs):
    """Model b against model a over several runs, pairs = [(a, b)] each {key: success rate}, over
    the keys every run holds: (tasks, runs, run-questions b better and worse, mean difference b - a
    over every run's questions, and the exact sign-flip p of each question's differences summed over
    the runs (`sign_flip_exact`)). None without shared keys."""
    keys = sorted(set.intersection(*(set(a) & set(b) for a, b in pairs)))
    if not keys:
        return None
    d = {k: sum(b[k] - a[k] for a, b in pairs) for k in keys}
    better = sum(1 for a, b in pairs for k in keys if b[k] > a[k])
    worse = sum(1 for a, b in pairs for k in keys if b[k] < a[k])
    return {"tasks": len(keys), "runs": len(pairs), "better": better, "worse": worse,
            "diff": sum(d.values()) / (len(keys) * len(pairs)), "p": sign_flip_exact(d.values())}


def lost_run_bounds(known, better, worse):
    """The range of `clustered`'s exact p over one run known by question and one known only by its
    counts (its per-question results lost): `known` is the first run's per-question difference
    (-1, 0 or 1), the lost run had `better` questions up and `worse` down among the same ones.
    Its changes may fall anywhere, so every overlap with the known run's ups, downs and unchanged
    is tried: (lowest p, highest p). The highest is what the pair shows whatever the lost run's
    questions were."""
    up, down = sum(1 for d in known if d > 0), sum(1 for d in known if d < 0)
    same = len(known) - up - down
    lo, hi = 1.0, 0.0
    # a, b: the lost run's ups on the known run's ups and downs; c, e: its downs on them.
    for a in range(min(better, up) + 1):
        for b in range(min(better - a, down) + 1):
            for c in range(min(worse, up - a) + 1):
                for e in range(min(worse - c, down - b) + 1):
                    rest_up, rest_down = better - a - b, worse - c - e
                    if rest_up + rest_down > same:
                        continue
                    diffs = [2] * a + [-2] * e + [1] * (up - a - c + rest_up) + [-1] * (down - b - e + rest_down)
                    p = float(sign_flip_exact(diffs))
                    lo, hi = min(lo, p), max(hi, p)
    return lo, hi


def paired_bootstrap(a, b, resamples=10_000, seed=0):
    """Model b against model a, each {key: success rate}, over the keys both hold: the mean
    per-question difference b - a with a 95% percentile interval and a two-sided p (twice the share
    of resampled means on the far side of 0, capped at 1), questions resampled with replacement,
    seeded; as ta_metrics::paired_bootstrap reports them. None without shared keys."""
    keys = sorted(set(a) & set(b))
    if not keys:
        return None
    d = [b[k] - a[k] for k in keys]
    rng = random.Random(seed)
    means = sorted(sum(rng.choice(d) for _ in d) / len(d) for _ in range(resamples))
    lo, hi = means[int(0.025 * (resamples - 1))], means[int(0.975 * (resamples - 1))]
    below, above = sum(m <= 0 for m in means), sum(m >= 0 for m in means)
    return {"tasks": len(keys), "diff": sum(d) / len(d), "ci95": [lo, hi], "p": min(1.0, 2 * min(below, above) / resamples)}


def accuracy(rates):
    """{key: success rate} -> n, successes, accuracy and its Wilson interval."""
    n = len(rates)
    s = sum(rates.values())
    ci = wilson(s, n)
    return {"n": n, "successes": s, "acc": s / n if n else None, "ci95": list(ci) if ci else None}


# ---- reading eval output ---------------------------------------------------------------------

def is_success(t):
    parts = t.get("reward_parts") or {}
    gt, judge = parts.get("ground_truth"), parts.get("judge")
    if gt is not None:
        return gt >= 1.0 - 1e-9
    if judge is not None:
        return judge >= 0.5
    return t.get("outcome") == "completed"


def read_rates(path, db):
    """{(db, scenario_id): success rate} of one trajectories file, and its errored episodes."""
    per = {}
    errors = 0
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            t = json.loads(line)
            errors += t.get("outcome") == "error"
            per.setdefault((db, t["scenario_id"]), []).append(1.0 if is_success(t) else 0.0)
    return {k: sum(v) / len(v) for k, v in per.items()}, errors, sum(len(v) for v in per.values())


def model_names(labels):
    """{eval label: model} of a check/'s labels: `trained` is SFT+GRPO beside a `baseline`, else SFT."""
    if "baseline" in labels:
        return {"base": "base", "baseline": "SFT", "trained": "SFT+GRPO"}
    return {"base": "base", "trained": "SFT"}


def read_check(check_dir, db):
    """One database's check/: {model: {(db, id): rate}} with `SFT+GRPO` only when GRPO ran, plus notes."""
    with open(os.path.join(check_dir, "eval.json")) as f:
        summary = json.load(f)
    labels = [m["label"] for m in summary["models"]]
    sources = {m["label"]: m["source"] for m in summary["models"]}
    names = model_names(labels)
    out, notes = {}, []
    expected = (summary.get("settings") or {}).get("scenarios")
    for label in labels:
        if label not in names:
            notes.append(f"{db}: unknown model label {label!r} skipped")
            continue
        rates, errors, episodes = read_rates(os.path.join(check_dir, "trajectories", f"{label}.jsonl"), db)
        out[names[label]] = rates
        if errors:
            notes.append(f"{db}: {names[label]} has {errors} errored episodes (counted as wrong)")
        if expected is not None and len(rates) != expected:
            notes.append(f"{db}: {names[label]} answered {len(rates)} of {expected} questions")
        if episodes != len(rates):
            notes.append(f"{db}: {names[label]} has {episodes} episodes for {len(rates)} questions (per-question mean used)")
    if "baseline" in labels and sources.get("baseline") == sources.get("trained"):
        notes.append(f"{db}: GRPO made no update; SFT+GRPO is the SFT adapter played again")
    return out, notes


def read_kept(grpo_dir):
    """grpo/final.json (which step's adapter `train` kept as grpo/final), None when absent."""
    try:
        with open(os.path.join(grpo_dir, "final.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def kept_note(grpo_dir, db):
    """A note when `train` kept another adapter than its last step's as grpo/final (final.json)."""
    kept = read_kept(grpo_dir)
    if kept is None or kept.get("step") == kept.get("last_step"):
        return []
    rate = lambda v: f"{100 * v['success']:.1f}%" if v else "not validated"
    which = "the SFT adapter (step 0)" if kept["step"] == 0 else f"step {kept['step']}'s adapter"
    return [f"{db}: SFT+GRPO is {which}, kept as the best validated ({rate(kept.get('validation'))}); "
            f"the last step, {kept['last_step']}, validated {rate(kept.get('last_validation'))}"]


def table_order(db):
    """Where a database's row goes: KaggleDBQA's first, others, the demo last."""
    return (db == DEMO, db not in KAGGLE, db)


def read_out_dir(out_dir):
    """{db: {model: rates}} of every database with a finished check/ under out_dir, and notes."""
    dbs, notes = {}, []
    names = sorted(os.listdir(out_dir), key=table_order)
    for name in names:
        check = os.path.join(out_dir, name, "check")
        sft_check = os.path.join(out_dir, name, "check-sft")
        if os.path.isfile(os.path.join(check, "eval.json")):
            dbs[name], n = read_check(check, name)
            notes += n + kept_note(os.path.join(out_dir, name, "grpo"), name)
        elif os.path.isfile(os.path.join(sft_check, "eval.json")):
            # GRPO did not finish: SFT's check, made before it, is still a result.
            dbs[name], n = read_check(sft_check, name)
            notes += n + [f"{name}: GRPO unfinished; base and SFT from check-sft/"]
        elif os.path.isdir(os.path.join(out_dir, name)) and (name in KAGGLE or name == DEMO):
            notes.append(f"{name}: no check/eval.json in {out_dir} (pipeline unfinished or failed)")
    return dbs, notes


def numbered(names, prefix, suffix=""):
    """(N, name) for each of `names` that is `prefix` + digits + `suffix` (check-step-4, step-000004.jsonl)."""
    for name in names:
        n = name.removeprefix(prefix).removesuffix(suffix)
        if name.startswith(prefix) and name.endswith(suffix) and n.isdigit():
            yield int(n), name


def read_steps(out_dir, dbs):
    """TA_CHECK_STEPS' check-step-N/ of the databases in `dbs`: {db: {"kept": grpo/final's step or
    None, "steps": {N: {model: rates}}}} (databases without one left out), and notes."""
    out, notes = {}, []
    for name in dbs:
        steps = {}
        for n, entry in numbered(os.listdir(os.path.join(out_dir, name)), "check-step-"):
            check = os.path.join(out_dir, name, entry)
            if os.path.isfile(os.path.join(check, "eval.json")):
                steps[n], step_notes = read_check(check, name)
                notes += [f"{note} ({entry}/)" for note in step_notes]
        if steps:
            kept = read_kept(os.path.join(out_dir, name, "grpo"))
            out[name] = {"kept": kept.get("step") if kept else None, "steps": dict(sorted(steps.items()))}
    return out, notes


def steps_rows(steps):
    """{db: {"kept", "steps": [{"step", "SFT", "SFT+GRPO": accuracy, "vs SFT": paired test}]}}: each
    step's adapter (`trained` in its check-step-N/) against the SFT adapter (check/'s episodes); with
    two databases or more, "**all**" pools the steps every one of them checked (the issue's target
    is pooled), keyed by (database, question)."""
    def row(n, sft, trained):
        return {"step": n, "SFT": accuracy(sft), "SFT+GRPO": accuracy(trained), "vs SFT": paired(sft, trained)}
    rows = {db: {"kept": s["kept"], "steps": [row(n, m["SFT"], m["SFT+GRPO"]) for n, m in s["steps"].items()]}
            for db, s in steps.items()}
    if len(steps) > 1:
        shared = sorted(set.intersection(*(set(s["steps"]) for s in steps.values())))
        merged = lambda n, model: {(db, k): v for db, s in steps.items() for k, v in s["steps"][n][model].items()}
        rows["**all**"] = {"kept": None, "steps": [row(n, merged(n, "SFT"), merged(n, "SFT+GRPO")) for n in shared]}
    return rows


def read_sampled(out_dir, dbs):
    """The sampled checks (check-sampled/) of the databases in `dbs`: {db: {"SFT", "SFT+GRPO": {(db,
    id): pass@1}, "k": episodes a question}} (its labels are `baseline` and `trained`), and notes."""
    out, notes = {}, []
    for name in dbs:
        check = os.path.join(out_dir, name, "check-sampled")
        if not os.path.isfile(os.path.join(check, "eval.json")):
            continue
        with open(os.path.join(check, "eval.json")) as f:
            summary = json.load(f)
        models = {}
        for label, model in {"baseline": "SFT", "trained": "SFT+GRPO"}.items():
            path = os.path.join(check, "trajectories", f"{label}.jsonl")
            if os.path.isfile(path):
                models[model], errors, episodes = read_rates(path, name)
                if errors:
                    notes.append(f"{name}: {errors} of {episodes} sampled {model} episodes errored (counted as failures) (check-sampled/)")
        if len(models) == 2:
            out[name] = {**models, "k": summary.get("rollouts_per_scenario")}
    return out, notes


def sampled_rows(sampled):
    """[(name, row)]: each database, then the pools as rows_of makes them: n, k, pass@1 of SFT and of
    SFT+GRPO, the paired bootstrap over questions of their difference, and each one's pass@k."""
    def row(names):
        sft = {k: v for n in names for k, v in sampled[n]["SFT"].items()}
        grpo = {k: v for n in names for k, v in sampled[n]["SFT+GRPO"].items()}
        ks = {sampled[n]["k"] for n in names}
        any_right = lambda rates: accuracy({q: float(r > 0) for q, r in rates.items()})
        return {"n": len(sft), "k": ks.pop() if len(ks) == 1 else None, "SFT": accuracy(sft), "SFT+GRPO": accuracy(grpo),
                "SFT+GRPO vs SFT": paired_bootstrap(sft, grpo), "SFT pass@k": any_right(sft), "SFT+GRPO pass@k": any_right(grpo)}
    rows = [(name, row([name])) for name in sampled]
    kaggle = [n for n in sampled if n in KAGGLE]
    if len(kaggle) > 1:
        rows.append((f"KaggleDBQA ({len(kaggle)} dbs)", row(kaggle)))
    if len(sampled) > 1:
        rows.append(("**all**", row(list(sampled))))
    return rows


def print_sampled(rows):
    print("\n### people's questions sampled (check-sampled/: k episodes a question at temperature 1.0)\n")
    print("pass@1 (the mean over questions of each one's share of right episodes); SFT+GRPO against SFT by a paired "
          "bootstrap over questions (10,000 resamples, seed 0): the difference in points, its 95% interval and p. "
          "pass@k: the questions with at least one right episode of the k; a pass@1 that rises while pass@k stays "
          "is the model answering as it already could, more often.\n")
    print("| database | n | k | SFT pass@1 | SFT+GRPO pass@1 | difference [95% CI] | p | SFT pass@k | SFT+GRPO pass@k |")
    print("|---|---:|---:|---:|---:|---|---|---:|---:|")
    for name, r in rows:
        t = r["SFT+GRPO vs SFT"]
        cell = lambda a: f"{100 * a['acc']:.1f}%"
        diff = f"{100 * t['diff']:+.1f} [{100 * t['ci95'][0]:+.1f}, {100 * t['ci95'][1]:+.1f}]"
        print(f"| {name} | {r['n']} | {r['k'] or '-'} | {cell(r['SFT'])} | {cell(r['SFT+GRPO'])} | {diff} | {fmt_p(t['p'])} "
              f"| {cell(r['SFT pass@k'])} | {cell(r['SFT+GRPO pass@k'])} |")


def read_wordings(out_dir, dbs):
    """GRPO's own validation (greedy, grpo/eval/step-N.jsonl, on the synthesized tasks of
    grpo-tasks.jsonl) split by wording: the teacher's rewordings (`phrasing` "paraphrase") and the
    grammar's own. {db: {N: {"reworded": accuracy, "grammar": accuracy}}}, for the databases whose
    validation holds rewordings. Beside the per-step check it shows which of the two tracks the
    people's questions, the question behind choosing `grpo/final` on one of them."""
    out = {}
    for name in dbs:
        d = os.path.join(out_dir, name)
        try:
            with open(os.path.join(d, "grpo-tasks.jsonl")) as f:
                wording = {t["id"]: t.get("phrasing") == "paraphrase" for t in map(json.loads, filter(str.strip, f))}
            files = os.listdir(os.path.join(d, "grpo", "eval"))
        except (OSError, ValueError):
            continue
        steps = {}
        for n, entry in numbered(files, "step-", ".jsonl"):
            rates, _, _ = read_rates(os.path.join(d, "grpo", "eval", entry), name)
            split = {"reworded": {k: v for k, v in rates.items() if wording.get(k[1])},
                     "grammar": {k: v for k, v in rates.items() if k[1] in wording and not wording[k[1]]}}
            steps[n] = {w: accuracy(r) for w, r in split.items()}
        if any(s["reworded"]["n"] for s in steps.values()):
            out[name] = dict(sorted(steps.items()))
    return out


def print_wordings(wordings):
    columns = sorted({n for s in wordings.values() for n in s})
    print("\n### GRPO's validation by wording at its validated steps (greedy; the synthesized validation tasks)\n")
    print("The teacher's rewordings beside the grammar's own wordings, each with its 95% Wilson interval and count.\n")
    print("| database | wording | " + " | ".join(f"step {n}" for n in columns) + " |")
    print("|---|---|" + "---|" * len(columns))
    for db, steps in wordings.items():
        for w in ("reworded", "grammar"):
            cells = [f"{pct(steps[n][w])} ({steps[n][w]['n']})" if n in steps else "-" for n in columns]
            print(f"| {db} | {w} | " + " | ".join(cells) + " |")


# ---- outcomes files --------------------------------------------------------------------------

OUTCOMES_VERSION = 1
SAMPLED_MODELS = ["SFT", "SFT+GRPO"]


def is_outcomes(path):
    """Whether a path given for an OUT_DIR is an outcomes file (`--outcomes`) instead."""
    return path.endswith(".json") and os.path.isfile(path)


def write_outcomes(path, source, run):
    """One run's per-question results, keyed by database and scenario id, and its notes: what pools
    it with later runs by question once its directory is gone. Nothing else goes in (no question,
    answer, query or trajectory): the file may be kept in the repository, the check set's texts not.
    `run` is read_run's."""
    ids = lambda rates: {i: v for (_, i), v in rates.items()}
    databases = {}
    for db, models in run["dbs"].items():
        databases[db] = {"greedy": {m: ids(r) for m, r in models.items()}}
        if db in run["sampled"]:
            sampled = run["sampled"][db]
            databases[db]["sampled"] = {"k": sampled["k"], **{m: ids(sampled[m]) for m in SAMPLED_MODELS}}
    with open(path, "w") as f:
        json.dump({"version": OUTCOMES_VERSION, "source": source, "notes": run["notes"],
                   "sampled_notes": run["sampled_notes"], "databases": databases}, f, indent=1)


def read_outcomes(path):
    """An outcomes file as read_out_dir and read_sampled return its run's directory: (dbs, notes,
    sampled, sampled_notes), so every table made from those prints the same from either."""
    with open(path) as f:
        data = json.load(f)
    if not isinstance(data, dict) or data.get("version") != OUTCOMES_VERSION:
        raise SystemExit(f"{path}: not a natural_check.py outcomes file (version {OUTCOMES_VERSION})")
    keyed = lambda db, rates: {(db, i): v for i, v in rates.items()}
    dbs, sampled = {}, {}
    for db, entry in data["databases"].items():
        dbs[db] = {m: keyed(db, r) for m, r in entry["greedy"].items()}
        if "sampled" in entry:
            sampled[db] = {**{m: keyed(db, entry["sampled"][m]) for m in SAMPLED_MODELS}, "k": entry["sampled"]["k"]}
    return dbs, data["notes"], sampled, data["sampled_notes"]


def joined_outcomes(path):
    """The outcomes files that `A.json+B.json` names (one run whose databases were fit in separate
    leases), or None when `path` is not such a join."""
    parts = path.split("+")
    return parts if len(parts) > 1 and all(is_outcomes(p) for p in parts) else None


def read_joined(paths):
    """read_outcomes over one file, or files that hold different databases of one run, as one
    run's. A database in two of them is refused: which of its results would be the run's is not
    this script's choice."""
    dbs, notes, sampled, sampled_notes = {}, [], {}, []
    for path in paths:
        d, n, s, sn = read_outcomes(path)
        twice = sorted(set(d) & set(dbs))
        if twice:
            raise SystemExit(f"{path}: {', '.join(twice)} already in an earlier file of the join: join files of different databases")
        dbs.update(d)
        sampled.update(s)
        notes += n
        sampled_notes += sn
    in_order = lambda by_db: {db: by_db[db] for db in sorted(by_db, key=table_order)}
    return in_order(dbs), notes, in_order(sampled), sampled_notes


def read_run(path):
    """One run from its OUT_DIR, its outcomes file, or outcomes files of its databases joined by
    `+`: {"dbs", "notes", "steps", "step_notes", "sampled", "sampled_notes", "wordings"}; a file
    holds no check-step-N/ nor GRPO's validation, so those come back empty from it."""
    files = joined_outcomes(path) or ([path] if is_outcomes(path) else None)
    if files:
        dbs, notes, sampled, sampled_notes = read_joined(files)
        return {"dbs": dbs, "notes": notes, "steps": {}, "step_notes": [], "sampled": sampled,
                "sampled_notes": sampled_notes, "wordings": {}}
    dbs, notes = read_out_dir(path)
    steps, step_notes = read_steps(path, dbs)
    sampled, sampled_notes = read_sampled(path, dbs)
    return {"dbs": dbs, "notes": notes, "steps": steps, "step_notes": step_notes, "sampled": sampled,
            "sampled_notes": sampled_notes, "wordings": read_wordings(path, dbs)}


# ---- tables ----------------------------------------------------------------------------------

def pool(dbs, names):
    """{model: rates} merged over the databases `names`; a model counts only where every one has it."""
    out = {}
    for m in MODELS:
        if names and all(m in dbs[n] for n in names):
            out[m] = {k: v for n in names for k, v in dbs[n][m].items()}
    return out


def summarize(models):
    row = {m: accuracy(models[m]) for m in MODELS if m in models}
    row["n"] = max((len(r) for r in models.values()), default=0)
    if "base" in models and "SFT" in models:
        row["SFT vs base"] = paired(models["base"], models["SFT"])
    if "SFT" in models and "SFT+GRPO" in models:
        row["SFT+GRPO vs SFT"] = paired(models["SFT"], models["SFT+GRPO"])
    return row


def rows_of(dbs):
    """[(name, summary)]: each database, then the pools."""
    return [(scope, summarize(pool(dbs, names))) for scope, names in scopes_of([dbs])]


def pct(a):
    if not a or a["acc"] is None:
        return "-"
    lo, hi = a["ci95"]
    return f"{100 * a['acc']:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]"


def ptest(t):
    if not t:
        return "-"
    return f"{fmt_p(t['p'])} (+{t['better']}/-{t['worse']})"


def fmt_p(p):
    return f"{p:.2g}" if p < 0.001 else f"{p:.3f}"


def print_table(title, rows):
    print(f"\n### {title}\n")
    print("| database | n | base | SFT | SFT+GRPO | p SFT vs base | p SFT+GRPO vs SFT |")
    print("|---|---:|---|---|---|---|---|")
    for name, r in rows:
        print(f"| {name} | {r['n']} | {pct(r.get('base'))} | {pct(r.get('SFT'))} | {pct(r.get('SFT+GRPO'))} "
              f"| {ptest(r.get('SFT vs base'))} | {ptest(r.get('SFT+GRPO vs SFT'))} |")


def print_steps(rows, dbs):
    """The per-step table: a column per step any database checked, SFT's (check/'s) first."""
    columns = sorted({e["step"] for r in rows.values() for e in r["steps"]})
    print("\n### people's questions at GRPO's validated steps (diagnostic; selecting a step by it would select on "
          "the check set)\n")
    print("Greedy accuracy with 95% Wilson intervals; each step's exact McNemar p (+better/-worse) against SFT (check/'s "
          "episodes, handed to each step's evaluation). (grpo/final) marks the adapter `train` kept on its validation "
          "tasks: the claims are its.\n")
    print("| database | SFT | " + " | ".join(f"step {n}" for n in columns) + " |")
    print("|---|---|" + "---|" * len(columns))
    for db, r in rows.items():
        marks = {r["kept"]: " (grpo/final)"}
        by_step = {e["step"]: e for e in r["steps"]}
        cells = [f"{pct(by_step[n]['SFT+GRPO'])}, {ptest(by_step[n]['vs SFT'])}{marks.get(n, '')}" if n in by_step else "-" for n in columns]
        # check/'s SFT; the pooled row's from the steps' own SFT plays (every step has the same).
        sft = accuracy(dbs[db]["SFT"]) if db in dbs and "SFT" in dbs[db] else r["steps"][0]["SFT"] if r["steps"] else None
        print(f"| {db} | {pct(sft)}{marks.get(0, '')} | " + " | ".join(cells) + " |")


def compare_recipes(dbs1, dbs2):
    """Recipe 2 against recipe 1, per model, pooled over the databases both finished and per database."""
    shared = finished_by_all([dbs1, dbs2])
    out = {"databases": shared, "pooled": {}, "per_db": {}}
    for m in ["base", "SFT", "SFT+GRPO"]:
        for scope, names in [("pooled", shared)] + [(n, [n]) for n in shared]:
            a, b = pool(dbs1, names).get(m), pool(dbs2, names).get(m)
            if a is None or b is None:
                continue
            keys = set(a) & set(b)
            a, b = {k: a[k] for k in keys}, {k: b[k] for k in keys}
            entry = {"recipe1": accuracy(a), "recipe2": accuracy(b), "test": paired(a, b)}
            if scope == "pooled":
                out["pooled"][m] = entry
            else:
                out["per_db"].setdefault(scope, {})[m] = entry
    return out


def print_recipes(cmp):
    print("\n### recipe 2 vs recipe 1 (same questions, paired by database and scenario id)\n")
    print("| scope | model | n | recipe 1 | recipe 2 | diff (points) | exact McNemar p (+better/-worse) |")
    print("|---|---|---:|---|---|---:|---|")
    scopes = [("**pooled**", cmp["pooled"])] + list(cmp["per_db"].items())
    for scope, models in scopes:
        for m, e in models.items():
            t = e["test"]
            diff = "-" if t["diff"] is None else f"{100 * t['diff']:+.1f}"
            print(f"| {scope} | {m} | {t['tasks']} | {pct(e['recipe1'])} | {pct(e['recipe2'])} | {diff} | {ptest(t)} |")


def finished_by_all(runs):
    """The databases every run of `runs` finished, in the first run's order."""
    return [n for n in runs[0] if all(n in r for r in runs)]


def scopes_of(runs):
    """[(scope, database names)]: each database every run finished, then the pools (KaggleDBQA's
    databases, and all of them)."""
    shared = finished_by_all(runs)
    out = [(n, [n]) for n in shared]
    kaggle = [n for n in shared if n in KAGGLE]
    if len(kaggle) > 1:
        out.append((f"KaggleDBQA ({len(kaggle)} dbs)", kaggle))
    if len(shared) > 1:
        out.append(("**all**", shared))
    return out


def over_seeds(runs):
    """One recipe's runs (seeds) on the same questions, per scope: each model's accuracy in every
    run, and SFT vs base and SFT+GRPO vs SFT over the runs (`clustered`) beside each run's own."""
    out = []
    for scope, names in scopes_of(runs):
        pooled = [pool(r, names) for r in runs]
        row = {"n": len(pooled[0].get("SFT", {})), "runs": len(runs)}
        for m in MODELS:
            if all(m in p for p in pooled):
                row[m] = [accuracy(p[m]) for p in pooled]
        for later, earlier in [("SFT", "base"), ("SFT+GRPO", "SFT")]:
            if later in row and earlier in row:
                pairs = [(p[earlier], p[later]) for p in pooled]
                row[f"{later} vs {earlier}"] = {"per_run": [paired(a, b) for a, b in pairs], "over_runs": clustered(pairs)}
        out.append((scope, row))
    return out


def spread(accs):
    """'47.6% (47.6 to 51.2)': the runs' mean accuracy and their range, in percent."""
    vals = [100 * a["acc"] for a in accs]
    return f"{sum(vals) / len(vals):.1f}% ({min(vals):.1f} to {max(vals):.1f})"


def print_seeds(rows):
    print("\n### over seeds (one recipe, its runs on the same questions)\n")
    print("Greedy accuracy: the runs' mean (their range). A step's test over the runs sums each question's changes "
          "over them and flips their signs (exact, two-sided), so a question is one unit however many runs it is in; "
          "each run's own difference and +better/-worse beside it.\n")
    print("| scope | n | runs | base | SFT | SFT+GRPO | SFT vs base over runs | SFT+GRPO vs SFT: each run | over runs |")
    print("|---|---:|---:|---|---|---|---|---|---|")
    for scope, r in rows:
        cells = [spread(r[m]) if m in r else "-" for m in MODELS]
        tests = []
        for key in ("SFT vs base", "SFT+GRPO vs SFT"):
            t = r.get(key)
            if key == "SFT+GRPO vs SFT":
                tests.append(", ".join(f"{100 * e['diff']:+.1f} (+{e['better']}/-{e['worse']})" for e in t["per_run"]) if t else "-")
            tests.append(f"{100 * t['over_runs']['diff']:+.1f}, {ptest(t['over_runs'])}" if t else "-")
        print(f"| {scope} | {r['n']} | {r['runs']} | " + " | ".join(cells + tests) + " |")


def compare_over_seeds(runs1, runs2):
    """Recipe 2's runs against recipe 1's on the same questions, per model, pooled over the databases
    all of them finished (`clustered`, run i of one beside run i of the other)."""
    names = finished_by_all(runs1 + runs2)
    if not names:
        return None
    out = {"databases": names}
    for m in ["SFT", "SFT+GRPO"]:
        a, b = [pool(r, names).get(m) for r in runs1], [pool(r, names).get(m) for r in runs2]
        if all(x is not None for x in a + b):
            out[m] = {"recipe1": [accuracy(x) for x in a], "recipe2": [accuracy(x) for x in b], "test": clustered(list(zip(a, b)))}
    return out


def print_over_seeds(cmp):
    print("\n### recipe 2 vs recipe 1 over seeds (pooled over the databases every run finished)\n")
    print("| model | n | runs each | recipe 1 | recipe 2 | diff (points) | sign-flip p over questions (+better/-worse run-questions) |")
    print("|---|---:|---:|---|---|---:|---|")
    for m in ["SFT", "SFT+GRPO"]:
        if m in cmp:
            e, t = cmp[m], cmp[m]["test"]
            print(f"| {m} | {t['tasks']} | {t['runs']} | {spread(e['recipe1'])} | {spread(e['recipe2'])} | {100 * t['diff']:+.1f} | {ptest(t)} |")


def print_lost_run(dbs, better, worse):
    """With a lost run of +better/-worse (SFT+GRPO vs SFT, pooled): both runs' difference and the
    range of the exact test over them (`lost_run_bounds`); its numbers, or None without SFT+GRPO."""
    pooled = pool(dbs, list(dbs))
    if "SFT+GRPO" not in pooled:
        print("\n--lost-run: this run has no SFT+GRPO to pool with", file=sys.stderr)
        return None
    sft, grpo = pooled["SFT"], pooled["SFT+GRPO"]
    known = [round(grpo[k] - sft[k]) for k in sorted(set(sft) & set(grpo))]
    lo, hi = lost_run_bounds(known, better, worse)
    diff = (sum(known) + better - worse) / (2 * len(known))
    up, down = sum(d > 0 for d in known) + better, sum(d < 0 for d in known) + worse
    print(f"\nWith a lost run of +{better}/-{worse} on the same {len(known)} questions: SFT+GRPO vs SFT over both "
          f"{100 * diff:+.1f} points (+{up}/-{down} run-questions); the exact test over questions between "
          f"p = {fmt_p(lo)} and p = {fmt_p(hi)}, as the lost run's changes fall on this run's (the highest: "
          f"what the pair shows whatever they were)")
    return {"better": better, "worse": worse, "diff": diff, "p_low": lo, "p_high": hi}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dirs", nargs="+", metavar="OUT_DIR",
                    help="natural_check.sh's TA_OUT, or its outcomes file (*.json, --outcomes), or files of its "
                         "databases joined by + (A.json+B.json); a second one: another recipe")
    ap.add_argument("--seeds", action="store_true",
                    help="the OUT_DIRs are runs (seeds) of one recipe: their ranges and tests over the runs")
    ap.add_argument("--against", nargs="+", metavar="OUT_DIR",
                    help="another recipe's runs on the same questions (recipe 1; implies --seeds), as many as the OUT_DIRs")
    ap.add_argument("--json", metavar="FILE", help="also write the numbers to FILE")
    ap.add_argument("--lost-run", nargs=2, type=int, metavar=("BETTER", "WORSE"),
                    help="a second run of this recipe known only by its pooled SFT+GRPO vs SFT counts (its "
                         "per-question results lost): the range of the exact test over both runs")
    ap.add_argument("--outcomes", metavar="FILE",
                    help="also write the one OUT_DIR's per-question results to FILE (*.json), to stand in for it later")
    args = ap.parse_args(argv)
    seeds = args.seeds or bool(args.against)
    if len(args.out_dirs) > 2 and not seeds:
        ap.error("at most two OUT_DIRs (recipe 1 and recipe 2), or --seeds")
    if seeds and len(args.out_dirs) < 2:
        ap.error("--seeds and --against need two OUT_DIRs or more (one recipe's runs)")
    if args.against and len(args.against) != len(args.out_dirs):
        ap.error(f"--against has {len(args.against)} runs, the OUT_DIRs {len(args.out_dirs)}: one a seed")
    if args.lost_run and (len(args.out_dirs) != 1 or seeds or min(args.lost_run) < 0):
        ap.error("--lost-run BETTER WORSE goes with one OUT_DIR (the run known by question), counts of 0 or more")
    if args.outcomes and (len(args.out_dirs) != 1 or seeds or not args.outcomes.endswith(".json")):
        ap.error("--outcomes writes one OUT_DIR's results to a file named *.json")

    result = {"recipes": []}
    all_dbs = []
    for i, out_dir in enumerate(args.out_dirs, 1):
        run = read_run(out_dir)
        dbs, notes = run["dbs"], run["notes"]
        all_dbs.append(dbs)
        if not dbs:
            print(f"{out_dir}: no database with a finished check/eval.json", file=sys.stderr)
            return 1
        rows = rows_of(dbs)
        kind = "seed" if seeds else "recipe"
        title = f"{kind} {i}: {out_dir}" if len(args.out_dirs) > 1 else f"natural questions: {out_dir}"
        print_table(title + " (greedy; 95% Wilson intervals; paired exact McNemar)", rows)
        for n in notes:
            print(f"- note: {n}")
        demo = None
        if DEMO in dbs:
            r = dict(rows)[DEMO]
            m = "SFT+GRPO" if "SFT+GRPO" in r else "SFT"
            demo = {"model": m, **r[m]}
            print(f"\nThe demo's {r['n']} hand-written questions after {m}: {pct(r[m])} (target >= 60% after SFT+GRPO)")
        allrow = dict(rows).get("**all**")
        if allrow and "SFT+GRPO vs SFT" in allrow:
            t = allrow["SFT+GRPO vs SFT"]
            print(f"Pooled SFT+GRPO vs SFT: {100 * t['diff']:+.1f} points, p = {fmt_p(t['p'])} (target >= +5, p < 0.05)")
            changed = t["better"] + t["worse"]
            need = needed_split(changed)
            if need:
                print(f"With {changed} questions changed either way, p < 0.05 needed +{need[0]}/-{need[1]}: "
                      f"{100 * (need[0] - need[1]) / t['tasks']:+.1f} points; a true +5 points would reach it "
                      f"in {100 * power(changed, 0.05 * t['tasks']):.0f}% of such runs")
        step_notes, sampled_notes = run["step_notes"], run["sampled_notes"]
        check_steps = steps_rows(run["steps"])
        if check_steps:
            print_steps(check_steps, dbs)
            for n in step_notes:
                print(f"- note: {n}")
        sampled = sampled_rows(run["sampled"]) if run["sampled"] else []
        if sampled:
            print_sampled(sampled)
            for n in sampled_notes:
                print(f"- note: {n}")
        wordings = run["wordings"]
        if wordings:
            print_wordings(wordings)
        result["recipes"].append({"out_dir": os.path.abspath(out_dir), "rows": [{"name": n.strip("*"), **r} for n, r in rows],
                                  "demo": demo, "notes": notes + step_notes + sampled_notes, "check_steps": check_steps,
                                  "sampled": [{"name": n.strip("*"), **r} for n, r in sampled],
                                  "validation_by_wording": {db: {str(n): v for n, v in s.items()} for db, s in wordings.items()}})
        if args.lost_run:
            result["lost_run"] = print_lost_run(dbs, *args.lost_run)
        if args.outcomes:
            write_outcomes(args.outcomes, os.path.abspath(out_dir), run)
            print(f"\noutcomes: {args.outcomes}")

    if seeds:
        rows = over_seeds(all_dbs)
        print_seeds(rows)
        result["over_seeds"] = [{"name": n.strip("*"), **r} for n, r in rows]
        allrow = dict(rows).get("**all**", {}).get("SFT+GRPO vs SFT")
        if allrow:
            t = allrow["over_runs"]
            print(f"\nPooled SFT+GRPO vs SFT over {t['runs']} runs: {100 * t['diff']:+.1f} points, p = {fmt_p(t['p'])} "
                  f"(target >= +5, p < 0.05)")
    if args.against:
        cmp = compare_over_seeds([read_run(out_dir)["dbs"] for out_dir in args.against], all_dbs)
        if cmp is None:
            print("no database every run of both recipes finished", file=sys.stderr)
            return 1
        print_over_seeds(cmp)
        result["recipe2_vs_recipe1_over_seeds"] = cmp
    elif len(all_dbs) == 2 and not seeds:
        cmp = compare_recipes(*all_dbs)
        print_recipes(cmp)
        s = cmp["pooled"].get("SFT")
        if s and s["test"]["diff"] is not None:
            print(f"\nPooled SFT, recipe 2 vs 1: {100 * s['test']['diff']:+.1f} points, p = {fmt_p(s['test']['p'])} (target >= +15, p < 0.05)")
        result["recipe2_vs_recipe1"] = cmp

    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
        print(f"\nnumbers: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
