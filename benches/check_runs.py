#!/usr/bin/env python3
"""One check set played by several runs of a recipe: how its questions move between them.

    python3 benches/check_runs.py EVAL_DIR [EVAL_DIR ...] [--json FILE]

Each EVAL_DIR is a `train-agent eval --baseline SFT` output (a demo's or `fit`'s `check/`):
`trajectories/baseline.jsonl` (the SFT adapter) and `trajectories/trained.jsonl` (SFT+GRPO), one
greedy episode a question. Printed, for benches/RESULTS.md:
  - per run: SFT and SFT+GRPO right, the discordant questions (+better/-worse), and the answers
    that hand in a server error (the agent's `answered_with_error` rule applied to the episode's
    messages, so runs from before the agent marked them count too);
  - over the runs: how many questions every SFT adapter answered right, none did, and some did
    (the unstable ones); how many GRPO gained in some run, lost in some run, both; and how many
    it gained (lost) in at least two more runs than it lost (gained).
Standard library only.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from natural_check import is_success as is_right  # noqa: E402  (ta_metrics' success rule)

# The agent's rule (crates/rollout/src/agent.rs, `repeats_error`): an answer holds 40 consecutive
# characters of a server error's first line (all of a shorter one); errors shorter than the
# minimum never count.
ERROR_WINDOW_CHARS = 40
MIN_ERROR_CHARS = 12
# How the agent hands a server error back to the model (its tool reply).
ERROR_REPLY = "Error: "


def answered_with_error(t):
    """The trajectory's own mark, or the agent's rule applied to its tool replies."""
    if t.get("answered_with_error"):
        return True
    answer = t.get("final_answer") or ""
    for m in t.get("messages", []):
        text = m.get("content") or ""
        if m.get("role") != "tool" or not text.startswith(ERROR_REPLY):
            continue
        lines = text[len(ERROR_REPLY):].strip().splitlines()
        line = lines[0] if lines else ""
        n = min(ERROR_WINDOW_CHARS, len(line))
        if len(line) >= MIN_ERROR_CHARS and any(line[i:i + n] in answer for i in range(len(line) - n + 1)):
            return True
    return False


def read_run(eval_dir):
    """{model: {scenario id: trajectory}} for `SFT` (baseline) and `SFT+GRPO` (trained)."""
    out = {}
    for label, model in (("baseline", "SFT"), ("trained", "SFT+GRPO")):
        with open(os.path.join(eval_dir, "trajectories", f"{label}.jsonl")) as f:
            out[model] = {t["scenario_id"]: t for t in map(json.loads, filter(str.strip, f))}
    return out


def summarize(runs):
    """Per-run rows and the across-run counts (see the module's doc)."""
    rows = []
    for name, run in runs:
        sft, grpo = run["SFT"], run["SFT+GRPO"]
        keys = sorted(set(sft) & set(grpo))
        rows.append({
            "run": name, "questions": len(keys),
            "SFT": sum(is_right(sft[k]) for k in keys), "SFT+GRPO": sum(is_right(grpo[k]) for k in keys),
            "better": sum(is_right(grpo[k]) and not is_right(sft[k]) for k in keys),
            "worse": sum(is_right(sft[k]) and not is_right(grpo[k]) for k in keys),
            "error_answers": {m: sum(answered_with_error(run[m][k]) for k in keys) for m in ("SFT", "SFT+GRPO")},
        })
    shared = sorted(set.intersection(*(set(r["SFT"]) & set(r["SFT+GRPO"]) for _, r in runs)))
    sft_right = {k: sum(is_right(r["SFT"][k]) for _, r in runs) for k in shared}
    gained = {k: sum(is_right(r["SFT+GRPO"][k]) and not is_right(r["SFT"][k]) for _, r in runs) for k in shared}
    lost = {k: sum(is_right(r["SFT"][k]) and not is_right(r["SFT+GRPO"][k]) for _, r in runs) for k in shared}
    n = len(runs)
    across = {
        "runs": n, "questions": len(shared),
        "sft_always": sum(v == n for v in sft_right.values()), "sft_never": sum(v == 0 for v in sft_right.values()),
        "sft_unstable": sum(0 < v < n for v in sft_right.values()),
        "never_after_grpo": sum(not any(is_right(r["SFT+GRPO"][k]) for _, r in runs) for k in shared),
        "gained_somewhere": sum(v > 0 for v in gained.values()), "lost_somewhere": sum(v > 0 for v in lost.values()),
        "both": sum(gained[k] > 0 and lost[k] > 0 for k in shared),
        "net_gained_2": sum(gained[k] - lost[k] >= 2 for k in shared), "net_lost_2": sum(lost[k] - gained[k] >= 2 for k in shared),
    }
    return rows, across


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("eval_dirs", nargs="+", metavar="EVAL_DIR")
    ap.add_argument("--json", metavar="FILE", help="also write the numbers to FILE")
    args = ap.parse_args(argv)
    runs = [(d, read_run(d)) for d in args.eval_dirs]
    rows, across = summarize(runs)
    print("| run | questions | SFT | SFT+GRPO | +better/-worse | error answers SFT / SFT+GRPO |")
    print("|---|---:|---:|---:|---|---|")
    for r in rows:
        e = r["error_answers"]
        print(f"| {r['run']} | {r['questions']} | {r['SFT']} | {r['SFT+GRPO']} | +{r['better']}/-{r['worse']} | {e['SFT']} / {e['SFT+GRPO']} |")
    a = across
    print(f"\nOver {a['runs']} runs, {a['questions']} questions: SFT right in every run {a['sft_always']}, in none {a['sft_never']}, "
          f"in some {a['sft_unstable']}; after GRPO right in none {a['never_after_grpo']}. GRPO gained {a['gained_somewhere']} "
          f"questions in some run, lost {a['lost_somewhere']} in some run, both {a['both']}; gained in at least two more runs "
          f"than lost {a['net_gained_2']}, lost in at least two more than gained {a['net_lost_2']}.")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": rows, "across": across}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
