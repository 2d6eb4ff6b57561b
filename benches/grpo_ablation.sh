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
# TA_EVAL_ROLLOUTS (4 samples per validation scenario), TA_ARMS (space-separated subset),
# TA_EXTRA_TOML (appended to every arm's config, e.g. "[optim]\nlr = 3e-5").
# Re-running continues: finished arms are skipped (`train --resume`, `eval` keeps episodes).
set -euo pipefail

: "${TA_BIN:?the train-agent binary}" "${TA_MODEL:?the base model}" "${TA_SFT_ADAPTER:?the SFT adapter directory}"
: "${TA_SCENARIOS:?the scenarios file (with train and validation splits)}" "${TA_OUT:?the output directory}"
SERVER=${TA_SERVER:-"$TA_BIN demo-server"}
STEPS=${TA_STEPS:-10}
K=${TA_EVAL_ROLLOUTS:-4}
ARMS=${TA_ARMS:-"recipe no-dynamic-sampling uniform-curriculum weighted-sum dr-grpo former-defaults"}
mkdir -p "$TA_OUT"

# The recipe: every #15 feature on. Each other arm flips one setting of it; former-defaults is
# the behaviour before #15 (no dynamic sampling, uniform order, weighted-sum rewards).
arm_toml() {
  local dynamic=true mode=adaptive mix=correctness-first scale=true
  case "$1" in
    recipe) ;;
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
validate_base = false
dynamic_sampling = $dynamic
max_oversample = 3.0
[curriculum]
mode = "$mode"
[loss]
scale_advantages = $scale
[reward]
mix = "$mix"
EOF
  if [[ -n "${TA_EXTRA_TOML:-}" ]]; then printf '%b\n' "$TA_EXTRA_TOML"; fi
}

evaluate() { # label, adapter
  local out="$TA_OUT/eval-$1"
  if [[ ! -f "$out/eval.json" ]]; then
    "$TA_BIN" eval --server "$SERVER" --model "$2" --base-model "$TA_MODEL" --dataset "$TA_SCENARIOS" \
      --split validation --rollouts "$K" --temperature 1.0 --out "$out" >"$TA_OUT/eval-$1.log" 2>&1
  fi
}

for arm in $ARMS; do
  run="$TA_OUT/$arm"
  if [[ ! -d "$run/final" ]]; then
    arm_toml "$arm" >"$TA_OUT/$arm.toml"
    resume=()
    [[ -f "$run/config.toml" ]] && resume=(--resume)
    start=$(date +%s)
    "$TA_BIN" train --server "$SERVER" --dataset "$TA_SCENARIOS" --base-model "$TA_MODEL" \
      --init-adapter "$TA_SFT_ADAPTER" --config "$TA_OUT/$arm.toml" --output-dir "$run" "${resume[@]}" \
      >"$TA_OUT/$arm.log" 2>&1
    echo "$(( $(date +%s) - start ))" >"$run/wall_s"
  fi
  evaluate "$arm" "$run/final"
done
evaluate sft "$TA_SFT_ADAPTER"

# The table: sampled pass@1 with its 95% interval, pass@K, and the training side (mean ground
# truth of the last 3 steps' rollouts, mean flat share before and after dynamic sampling).
python3 - "$TA_OUT" "$K" $ARMS <<'EOF'
import json, sys, pathlib
out, k, arms = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
def ev(label):
    m = json.loads((out / f"eval-{label}" / "eval.json").read_text())["metrics"][0]
    lo, hi = m.get("success_ci95") or (float("nan"), float("nan"))
    return m["success_rate"], lo, hi, m.get("pass_at_k", {}).get(k)
def train(arm):
    rows = [json.loads(l) for l in (out / arm / "metrics.jsonl").read_text().splitlines() if l.strip()]
    steps = [r for r in rows if "reward" in r]
    mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")
    gt = mean([r["ground_truth"] for r in steps[-3:] if r.get("ground_truth") is not None])
    wall = (out / arm / "wall_s").read_text().strip() if (out / arm / "wall_s").exists() else "-"
    return gt, mean([r["flat_share_before"] for r in steps]), mean([r["flat_share_after"] for r in steps]), wall
print(f"| arm | pass@1 (T=1) | 95% CI | pass@{k} | train GT (last 3 steps) | flat before | flat after | wall s |")
print("|---|---|---|---|---|---|---|---|")
p, lo, hi, pk = ev("sft")
print(f"| sft (start) | {p:.3f} | {lo:.3f}-{hi:.3f} | {pk if pk is None else f'{pk:.3f}'} | - | - | - | - |")
for arm in arms:
    p, lo, hi, pk = ev(arm)
    gt, before, after, wall = train(arm)
    print(f"| {arm} | {p:.3f} | {lo:.3f}-{hi:.3f} | {pk if pk is None else f'{pk:.3f}'} | {gt:.3f} | {before:.2f} | {after:.2f} | {wall} |")
EOF
