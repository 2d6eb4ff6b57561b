#!/usr/bin/env python3
"""How GRPO's groups split, template by template, from what a `fit` (or `train`) run leaves.

    python3 benches/template_groups.py FIT_DIR [FIT_DIR ...]

For each FIT_DIR (a `fit --out` directory: `scenarios.jsonl`, and GRPO's step files in
`grpo/trajectories/step-NNNNNN.jsonl`, every sampling round of a step in its file) every group (one
scenario's episodes of one step) is counted under its scenario's template (`extra.template`, "-"
without one) as `split` (its episodes' ground truth differs: the groups dynamic sampling keeps as
signal), `all right` (every episode full credit) or `all wrong` (the rest of the flat ones), over
the run's first half of steps and its second. Groups without ground truth are left out.

Why: the frontier curriculum (`fit --curriculum frontier`) weights a template by its share of
groups that split; in run 30 it trained more groups with signal but the first round's flat share
fell by only 2–7 points (benches/RESULTS.md, "Run 30"). This shows whether the templates differ in
that share at all, and which ones a run learns. Run it where the step files are (a run's step
files are tens of MB) and bring back the table. Standard library only.
"""
import argparse
import collections
import glob
import json
import os


def templates(fit_dir):
    """Scenario id -> template, from FIT_DIR/scenarios.jsonl."""
    out = {}
    with open(os.path.join(fit_dir, "scenarios.jsonl")) as f:
        for line in f:
            if line.strip():
                s = json.loads(line)
                out[s.get("id", "")] = s.get("template") or "-"
    return out


def groups(fit_dir):
    """(step, scenario id, [ground truth of each episode]) for every group of the run's step files."""
    out = []
    for path in sorted(glob.glob(os.path.join(fit_dir, "grpo", "trajectories", "step-*.jsonl"))):
        step = int(os.path.basename(path)[len("step-"):-len(".jsonl")])
        by_scenario = collections.defaultdict(list)
        with open(path) as f:
            for line in f:
                if not line.strip():
                    continue
                t = json.loads(line)
                gt = (t.get("reward_parts") or {}).get("ground_truth")
                by_scenario[t["scenario_id"]].append(gt)
        for sid, gts in by_scenario.items():
            if all(g is not None for g in gts):
                out.append((step, sid, gts))
    return out


def kind(gts):
    if max(gts) - min(gts) > 1e-9:
        return "split"
    return "all right" if min(gts) >= 1.0 - 1e-9 else "all wrong"


def table(fit_dir):
    """Per template: {half: Counter(kind)}, half 0 the first half of the steps, 1 the second."""
    of = templates(fit_dir)
    gs = groups(fit_dir)
    last = max((step for step, _, _ in gs), default=0)
    out = collections.defaultdict(lambda: (collections.Counter(), collections.Counter()))
    for step, sid, gts in gs:
        out[of.get(sid, "-")][int(step > last / 2)][kind(gts)] += 1
    return out


def share(c, k):
    n = sum(c.values())
    return f"{100 * c[k] / n:.0f}%" if n else "-"


def row(name, first, second):
    """One table row: a template's (or all) groups of both halves, then its split share by half."""
    both = first + second
    return (f"| {name} | {sum(both.values())} | {share(both, 'split')} | {share(both, 'all right')} | "
            f"{share(both, 'all wrong')} | {share(first, 'split')} → {share(second, 'split')} |")


def render(fit_dir, rows):
    lines = [f"### {fit_dir}", "",
             "| template | groups | split | all right | all wrong | split, first half → second |",
             "|---|---:|---:|---:|---:|---|"]
    total = (collections.Counter(), collections.Counter())
    for name in sorted(rows, key=lambda n: (-sum(rows[n][0].values()) - sum(rows[n][1].values()), n)):
        first, second = rows[name]
        total[0].update(first)
        total[1].update(second)
        lines.append(row(name, first, second))
    lines.append(row("**all**", *total))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("fit_dirs", nargs="+", metavar="FIT_DIR")
    args = ap.parse_args()
    for d in args.fit_dirs:
        if not os.path.exists(os.path.join(d, "scenarios.jsonl")):
            raise SystemExit(f"{d}: no scenarios.jsonl (give a `fit --out` directory)")
        print(render(d, table(d)))
        print()


if __name__ == "__main__":
    main()
