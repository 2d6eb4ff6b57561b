#!/usr/bin/env bash
# Sizes the demo's GPU profile (issues 14 and 15) on one GPU: runs `train-agent demo --profile gpu`
# for each SFT share at STEPS GRPO steps (the demo validates before and after only: run again with
# other STEPS to see where the gain levels off), and prints what the profile's defaults must be
# chosen from:
#   - seconds of synth + collect + SFT, and of each validation (from the logs' timestamps);
#   - seconds per GRPO step (grpo/metrics.jsonl, time.step_s), and flat groups per step;
#   - the SFT adapter's and the trained adapter's greedy and sampled pass@1 on the validation
#     split, with the paired tests, and the check set's table (the demo's own output).
# The GRPO budget is then: steps = (20 min - SFT - validations) / seconds per step.
#
# Usage: benches/demo_gpu_budget.sh [OUT_DIR]     (SHARES="0.05 0.1 0.25" STEPS=40 by default)
set -euo pipefail
bin=${TRAIN_AGENT_BIN:-target/release/train-agent}
out=${1:-runs/demo-gpu-budget}
shares=${SHARES:-"0.05 0.1 0.25"}
steps=${STEPS:-40}
mkdir -p "$out"
for share in $shares; do
    dir="$out/share-$share"
    start=$(date +%s)
    "$bin" demo --profile gpu --sft-share "$share" --steps "$steps" --out "$dir" 2>&1 | tee "$dir.log"
    echo "share $share: demo wall time $(( $(date +%s) - start )) s" | tee -a "$out/summary.txt"
    python3 - "$dir" <<'EOF' | tee -a "$out/summary.txt"
import json, sys
rows = [json.loads(l) for l in open(f"{sys.argv[1]}/grpo/metrics.jsonl")]
steps = [r for r in rows if "reward" in r]
val = [r for r in rows if "val_completion_rate" in r]
t = [r["time"]["step_s"] for r in steps]
print(f"  GRPO: {len(steps)} steps, {sum(t)/max(len(t),1):.1f} s per step, flat groups per step {[r['groups_zero_variance'] for r in steps]}")
for r in val:
    print(f"  validation step {r['step']:>3}: greedy {r.get('val_success')}, sampled pass@1 {r.get('val_pass1')} [{r.get('val_pass1_low')}, {r.get('val_pass1_high')}]")
EOF
done
