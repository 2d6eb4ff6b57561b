#!/usr/bin/env python3
"""Reuses an earlier natural-check run's rewordings for GRPO on their frontier (run 18).

    python3 benches/natural_check_resplit.py PARAPHRASED SYNTHESIZED OUT [--traces 1000] [--pool 192]

PARAPHRASED is a `scenarios paraphrase` output that reworded only the first tasks of
SYNTHESIZED (each original followed by its kept rewordings; run 17's `paraphrase/scenarios.jsonl`)
and SYNTHESIZED the `scenarios synth` output it reworded (the same `--n` and `--seed`). Rewording
again costs a GPU the teacher's minutes; this gives benches/natural_check.sh
(`TA_SCENARIOS_DIR=DIR`, OUT as `DIR/NAME.jsonl`) what it makes itself with a teacher and a
frontier: traces whose first `--traces` train tasks hold rewordings, then a frontier pool of
tasks SFT never saw, in the teacher's wordings.

OUT: the paraphrased tasks, then SYNTHESIZED's tasks past those it reworded, with whole groups
(a train original and its kept rewordings; only groups with at least one) taken from the end of
the reworded part, up to `--pool` train tasks (fewer when the train split has fewer to spare),
moved to just after the `--traces`-th train task. The bench's `collect --limit TRACES --split
train` never reaches them and its frontier pool (train tasks past the first TRACES) begins with
them. Prints what moved. Standard library only.
"""
import argparse
import json
import sys


def read(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def is_rewording(task):
    return task.get("phrasing") == "paraphrase"


def groups_of(tasks):
    """The paraphrased file as [original, its rewordings...] groups, in order."""
    groups = []
    for task in tasks:
        if is_rewording(task):
            if not groups or task.get("paraphrase_of") != groups[-1][0]["id"]:
                sys.exit(f"rewording {task['id']} does not follow its original")
            groups[-1].append(task)
        else:
            groups.append([task])
    return groups


def resplit(paraphrased, synthesized, traces, pool):
    groups = groups_of(paraphrased)
    originals = [g[0] for g in groups]
    if synthesized[: len(originals)] != originals:
        sys.exit("the paraphrased originals are not the synthesized file's first tasks (another --n or --seed?)")
    tail = synthesized[len(originals):]
    train = sum(t["split"] == "train" for t in paraphrased + tail)
    budget = min(pool, train - traces)
    held, size = set(), 0
    for i in range(len(groups) - 1, -1, -1):
        g = groups[i]
        if g[0]["split"] == "train" and len(g) > 1 and size + len(g) <= budget:
            held.add(i)
            size += len(g)
    kept = [t for i, g in enumerate(groups) if i not in held for t in g] + tail
    moved = [t for i in sorted(held) for t in groups[i]]
    out, seen = [], 0
    for task in kept:
        out.append(task)
        if task["split"] == "train":
            seen += 1
            if seen == traces:
                out += moved
    if seen < traces:
        sys.exit(f"only {seen} train tasks besides the held-out groups; fewer than --traces {traces}")
    sft = [t for t in out if t["split"] == "train"][:traces]
    return out, {
        "held_out_groups": len(held),
        "held_out_tasks": size,
        "held_out_rewordings": sum(map(is_rewording, moved)),
        "traced_rewordings": sum(map(is_rewording, sft)),
        "traced_distinct": len({t.get("paraphrase_of", t["id"]) for t in sft}),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paraphrased")
    ap.add_argument("synthesized")
    ap.add_argument("out")
    ap.add_argument("--traces", type=int, default=1000)
    ap.add_argument("--pool", type=int, default=192)
    args = ap.parse_args()
    out, counts = resplit(read(args.paraphrased), read(args.synthesized), args.traces, args.pool)
    with open(args.out, "w") as f:
        for task in out:
            f.write(json.dumps(task) + "\n")
    print(args.out, json.dumps(counts))


if __name__ == "__main__":
    main()
