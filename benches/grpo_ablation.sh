#!/usr/bin/env bash
# GRPO ablation on one GPU (issue #15): from one SFT adapter, equal-step `train` runs that each
# change one thing from the recipe (dynamic sampling, adaptive curriculum, correctness-first
# rewards, std-scaled advantages), plus the former defaults, then `eval` of every final adapter
# and of the SFT adapter itself on the same validation scenarios at temperature 1, and a table.
#
# Sized for Qwen2.5-Coder-0.5B on one H100: 10 steps of 8 groups x 8 rollouts per arm, about 3 to
# 4 GPU-minutes each with dynamic sampling (at most 3x the groups), 7 arms, ~30 minutes in all.
#
#   TA_BIN=target/release/train-agent TA_MODEL=Qwen/Qwen2.5-Coder-0.5B-Instruct \
#   TA_SFT_ADAPTER=runs/sft/final TA_SCENARIOS=scenarios.jsonl TA_OUT=runs/ablation \
#   benches/grpo_ablation.sh
#
# Optional: TA_SERVER (the MCP server command, default "$TA_BIN demo-server"), TA_STEPS (10),
# TA_EVAL_ROLLOUTS (4 samples per validation scenario), TA_ARMS (space-separated subset; also
# `sized-first-round`, the recipe with `size_first_round`, not among the defaults: compare it
# with TA_ARMS="recipe sized-first-round" on its rounds and rollout seconds a step),
# TA_EXTRA_TOML (appended to every arm's config, e.g. "[optim]\nlr = 3e-5"), TA_PARALLEL (arms
# run side by side, default 1), TA_GPU_UTIL (each engine's share of GPU memory; lower it with
# TA_PARALLEL > 1).
# Every arm is compared with the SFT adapter by `eval --baseline`'s paired test on the same
# validation episodes: the SFT adapter's are played once (eval-sft/) and handed to each arm's
# eval as its baseline episodes, which `eval` keeps instead of playing them again.
# Re-running continues: finished arms are skipped (`train --resume`, `eval` keeps episodes).
set -euo pipefail

: "${TA_BIN:?the train-agent binary}" "${TA_MODEL:?the base model}" "${TA_SFT_ADAPTER:?the SFT adapter directory}"
: "${TA_SCENARIOS:?the scenarios file (with train and validation splits)}" "${TA_OUT:?the output directory}"
SERVER=${TA_SERVER:-"$TA_BIN demo-server"}
STEPS=${TA_STEPS:-10}
K=${TA_EVAL_ROLLOUTS:-4}
ARMS=${TA_ARMS:-"recipe no-dynamic-sampling uniform-curriculum weighted-sum dr-grpo former-defaults"}
PARALLEL=${TA_PARALLEL:-1}
if [[ -n "${TA_GPU_UTIL:-}" ]]; then export TRAIN_AGENT_GPU_MEMORY_UTILIZATION=$TA_GPU_UTIL; fi
mkdir -p "$TA_OUT"

# The recipe: every #15 feature on. Each other arm flips one setting of it; former-defaults is
# the behaviour before #15 (no dynamic sampling, uniform order, weighted-sum rewards).
arm_toml() {
  local dynamic=true mode=adaptive mix=correctness-first scale=true sized=false
  case "$1" in
    recipe) ;;
    sized-first-round) sized=true ;;
    no-dynamic-sampling) dynamic=false ;;
    uniform-curriculum) mode=uniform ;;
    weighted-sum) mix=weighted-sum ;;
    dr-grpo) scale=false ;;
    former-defaults) dynamic=false mode=uniform mix=weighted-sum ;;
    *) echo "unknown arm $1" >&2; exit 2 ;;
  esac
  cat <<EOF
seed = 1
[rollout]
rollouts_per_scenario = 8
scenarios_per_step = 8
max_steps = $STEPS
epochs = 100
eval_every = 0
eval_rollouts = 0
validate_base = false
dynamic_sampling = $dynamic
max_oversample = 3.0
size_first_round = $sized
[curriculum]
mode = "$mode"
[loss]
scale_advantages = $scale
[reward]
mix = "$mix"
EOF
  if [[ -n "${TA_EXTRA_TOML:-}" ]]; then printf '%b\n' "$TA_EXTRA_TOML"; fi
}

evaluate() { # label, adapter, [baseline adapter]
  local out="$TA_OUT/eval-$1" baseline=()
  if [[ -n "${3:-}" ]]; then
    baseline=(--baseline "$3")
    mkdir -p "$out/trajectories"
    [[ -f "$out/trajectories/baseline.jsonl" ]] || cp "$TA_OUT/eval-sft/trajectories/trained.jsonl" "$out/trajectories/baseline.jsonl"
  fi
  if [[ ! -f "$out/eval.json" ]]; then
    "$TA_BIN" eval --server "$SERVER" --model "$2" "${baseline[@]}" --base-model "$TA_MODEL" --scenarios "$TA_SCENARIOS" \
      --split validation --rollouts "$K" --temperature 1.0 --out "$out" >"$TA_OUT/eval-$1.log" 2>&1
  fi
}

train_arm() { # arm
  local arm=$1 run="$TA_OUT/$1"
  if [[ ! -d "$run/final" ]]; then
    arm_toml "$arm" >"$TA_OUT/$arm.toml"
    local resume=() start
    [[ -f "$run/config.toml" ]] && resume=(--resume)
    start=$(date +%s)
    "$TA_BIN" train --server "$SERVER" --scenarios "$TA_SCENARIOS" --base-model "$TA_MODEL" \
      --init-adapter "$TA_SFT_ADAPTER" --config "$TA_OUT/$arm.toml" --out "$run" "${resume[@]}" \
      >"$TA_OUT/$arm.log" 2>&1
    echo "$(( $(date +%s) - start ))" >"$run/wall_s"
  fi
}

# The SFT adapter's episodes first (beside the first arms' training when they run in parallel):
# every arm's paired test reuses them.
rm -f "$TA_OUT/eval-sft.failed"
( evaluate sft "$TA_SFT_ADAPTER" || touch "$TA_OUT/eval-sft.failed" ) &
sft_done() { # waits for the SFT adapter's evaluation; fails if it failed
  while [[ ! -f "$TA_OUT/eval-sft/eval.json" ]]; do
    [[ -f "$TA_OUT/eval-sft.failed" ]] && { echo "the SFT adapter's eval failed: $TA_OUT/eval-sft.log" >&2; return 1; }
    sleep 5
  done
}
pids=()
for arm in $ARMS; do
  while (( $(for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && echo; done | wc -l) >= PARALLEL )); do sleep 5; done
  ( train_arm "$arm" && sft_done && evaluate "$arm" "$TA_OUT/$arm/final" "$TA_SFT_ADAPTER" ) &
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
wait
sft_done
(( status == 0 )) || { echo "an arm failed; its log is $TA_OUT/<arm>.log or eval-<arm>.log" >&2; exit 1; }

# The table: sampled pass@1 with its 95% interval, pass@K, the paired test against the SFT
# adapter (tasks better / worse, McNemar p, mean difference with its paired bootstrap interval),
# and the training side (mean ground truth of the last 3 steps' rollouts, mean flat share before
# and after dynamic sampling), and the greedy validation `train` ran before and after (one
# episode per task; the sampled evaluation above is the finer measure).
python3 - "$TA_OUT" "$K" $ARMS <<'EOF' | tee "$TA_OUT/table.md"
import json, sys, pathlib
out, k, arms = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
def ev(label):
    e = json.loads((out / f"eval-{label}" / "eval.json").read_text())
    m = e["metrics"][-1]
    lo, hi = m.get("success_ci95") or (float("nan"), float("nan"))
    pk = m.get("pass_at_k", {}).get(k)
    paired = (e.get("comparison") or {}).get("paired")
    return f"{m['success_rate']:.3f} [{lo:.3f}, {hi:.3f}]", "-" if pk is None else f"{pk:.3f}", paired
def train(arm):
    rows = [json.loads(l) for l in (out / arm / "metrics.jsonl").read_text().splitlines() if l.strip()]
    steps = [r for r in rows if "reward" in r]
    mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")
    gt = mean([r["ground_truth"] for r in steps[-3:] if r.get("ground_truth") is not None])
    flat = lambda key: mean([r[key] for r in steps if r.get(key) is not None])
    wall = (out / arm / "wall_s").read_text().strip() if (out / arm / "wall_s").exists() else "-"
    val = [r for r in rows if r.get("val_success") is not None]
    greedy = f"{val[0]['val_success']:.3f} -> {val[-1]['val_success']:.3f}" if len(val) >= 2 else "-"
    # Sampling rounds and rollout seconds a step, median over steps 2 on (step 1 has no previous
    # step to size its first round by).
    median = lambda xs: sorted(xs)[len(xs) // 2] if xs else float("nan")
    rounds = median([r["sampling_rounds"] for r in steps[1:] if r.get("sampling_rounds") is not None])
    rollout = median([r["time"]["rollout_s"] for r in steps[1:] if r.get("time", {}).get("rollout_s") is not None])
    return f"{gt:.3f} | {flat('flat_share_before'):.2f} | {flat('flat_share_after'):.2f} | {rounds} | {rollout:.2f} | {greedy} | {wall}"
print(f"| arm | pass@1 (T=1) [95% CI] | pass@{k} | vs SFT: better / worse tasks | McNemar p | diff [95% CI] | train GT (last 3 steps) | flat before | flat after | rounds a step | rollout s a step | greedy SFT -> arm | wall s |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
p1, pk, _ = ev("sft")
print(f"| sft (start) | {p1} | {pk} | - | - | - | - | - | - | - | - | - | - |")
for arm in arms:
    p1, pk, pr = ev(arm)
    test = "- | - | -" if pr is None else f"{pr['better']} / {pr['worse']} | {pr['mcnemar_p']:.2g} | {100*pr['diff']:+.1f} pts [{100*pr['diff_ci95'][0]:+.1f}, {100*pr['diff_ci95'][1]:+.1f}]"
    print(f"| {arm} | {p1} | {pk} | {test} | {train(arm)} |")
EOF
