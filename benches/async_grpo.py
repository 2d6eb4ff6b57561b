"""The table of benches/async_grpo.sh: the demo's wall time and stages, then its GRPO (staleness 1)
against the synchronous run (staleness 0) from the same SFT adapter (or, after TA_SPLIT=1, the two
arms' own runs): step times (median of steps 2..N: step 1 has nothing to overlap) and the final
validation, paired by task.

    python3 benches/async_grpo.py /tmp/async
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from natural_check import mcnemar_exact, wilson  # noqa: E402


def rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def phases(run: Path) -> dict[str, float]:
    totals: dict[str, float] = {}
    for line in (run / "phases.jsonl").read_text().splitlines():
        p = json.loads(line)
        totals[p["phase"]] = totals.get(p["phase"], 0.0) + p["seconds"]
    return totals


def greedy(run: Path, step: int) -> dict[str, bool]:
    """Scenario -> success of the greedy validation at `step` (ground truth 1, as ta_metrics)."""
    out = {}
    for line in (run / "eval" / f"step-{step:06d}.jsonl").read_text().splitlines():
        t = json.loads(line)
        out[t["scenario_id"]] = (t.get("reward_parts") or {}).get("ground_truth", 0) >= 1 - 1e-9
    return out


def main(out: Path) -> None:
    split = (out / "async").is_dir()  # TA_SPLIT=1: both arms by `train --num-gpus 2`, the demo stopped
    if split:
        for arm in ("async", "sync"):
            rc, wall = (out / f"{arm}.rc").read_text().split()
            print(f"{arm}: `train --num-gpus 2`, exit {rc}, {int(wall) / 60:.1f} min")
    else:
        rc, wall = (out / "demo.rc").read_text().split()
        print(f"demo (GPU profile, staleness 1): exit {rc}, {int(wall) / 60:.1f} min end to end")
        fit = json.loads((out / "demo" / "fit.json").read_text())
        for stage in fit:
            print(f"  {stage['stage']:<12} {stage['seconds'] or 0:7.1f} s (estimate {stage['estimate_s'] or 0:.0f} s)")
    runs = {"async (staleness 1)": out / ("async" if split else "demo/grpo"), "sync (staleness 0)": out / "sync"}
    finals, medians, sums = {}, [], []
    for name, run in runs.items():
        steps = [r for r in rows(run) if "reward" in r]
        s = [r["time"]["step_s"] for r in steps[1:]]
        medians.append(statistics.median(s))
        sums.append(sum(s))
        last = steps[-1]["step"]
        finals[name] = greedy(run, last)
        val = next(r for r in rows(run) if r.get("step") == last and "val_success" in r)
        ok = sum(finals[name].values())
        lo, hi = wilson(ok, len(finals[name]))
        print(f"\n{name}: {len(steps)} steps, step median {statistics.median(s):.2f} s (steps 2-{last}: {', '.join(f'{x:.1f}' for x in s)})")
        episodes = sum(r["samples"] for r in steps[1:])
        print(f"  steps 2-{last} in all {sum(s):.1f} s, {episodes} episodes trained")
        print(f"  rollout {statistics.median(r['time']['rollout_s'] for r in steps[1:]):.2f} s, train {statistics.median(r['time']['train_s'] for r in steps[1:]):.2f} s (medians)")
        print(f"  final greedy {ok}/{len(finals[name])} = {100 * ok / len(finals[name]):.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]; sampled pass@1 {val.get('val_pass1')}")
        print("  phases: " + ", ".join(f"{k} {v:.0f} s" for k, v in phases(run).items()))
    print(f"\nspeed-up, sync over async: {medians[1] / medians[0]:.2f}x by the median step, {sums[1] / sums[0]:.2f}x over steps 2-N")
    (a, b) = finals.values()
    common = sorted(set(a) & set(b))
    better = sum(a[k] and not b[k] for k in common)
    worse = sum(b[k] and not a[k] for k in common)
    print(f"\nasync vs sync, {len(common)} paired tasks: +{better} / -{worse}, exact McNemar p = {mcnemar_exact(better, worse):.3g}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
