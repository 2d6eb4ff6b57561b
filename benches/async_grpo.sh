#!/usr/bin/env bash
# Asynchronous GRPO against the synchronous loop, side by side on two GPUs, and the demo's GPU
# profile end to end (issue 34):
#   GPU 0: `train-agent demo --profile gpu`, whose GRPO runs at the default staleness 1: the
#          whole run's wall time, its stages (fit.json) and phases (grpo/phases.jsonl);
#   GPU 1: as soon as the demo's GRPO stage starts, `train` with the demo's own grpo.toml,
#          scenarios and SFT adapter at staleness 0: the same steps, seed and validation tasks.
# `python3 benches/async_grpo.py TA_OUT` then prints the step times and the paired validation.
#
#   TA_BIN=target/release/train-agent TA_MODEL=/path/qwen2.5-coder-0.5b-instruct.gguf \
#   TA_OUT=/tmp/async bash benches/async_grpo.sh
#
# Knobs (env): TA_STEPS (the profile's 16 GRPO steps), TA_GPUS ("0 1": the demo's GPU and the
# synchronous run's; on a 4-GPU machine a second replica takes "2 3").
#
# TA_SPLIT=1 (a 2-GPU machine): each arm gets both GPUs, the engine one and the trainer the other
# (`train --num-gpus 2`, crates/train/src/placement.rs), so the overlapped rollouts no longer share
# a GPU with the trainer's forward and backward. The demo then only makes the tasks, the SFT
# adapter and grpo.toml and is stopped when its GRPO stage starts; the two arms run one after the
# other from them, asynchronous first, into TA_OUT/async and TA_OUT/sync.
set -euo pipefail
: "${TA_BIN:?}" "${TA_MODEL:?}" "${TA_OUT:?}"
mkdir -p "$TA_OUT"
read -r gpu_demo gpu_sync <<<"${TA_GPUS:-0 1}"
steps=()
[ -n "${TA_STEPS:-}" ] && steps=(--steps "$TA_STEPS")
# `train` from the demo's SFT adapter, tasks and grpo.toml at staleness $2 into TA_OUT/$1, its exit
# code and seconds in TA_OUT/$1.rc; further arguments go to `train`.
arm() {
  local name=$1 staleness=$2 t0
  shift 2
  sed "s/^staleness = 1\$/staleness = $staleness/" "$TA_OUT/demo/grpo.toml" >"$TA_OUT/$name.toml"
  grep -q "^staleness = $staleness\$" "$TA_OUT/$name.toml"
  t0=$(date +%s)
  set +e
  "$TA_BIN" train --server "$TA_BIN demo-server" --scenarios "$TA_OUT/demo/scenarios.jsonl" \
    --config "$TA_OUT/$name.toml" --out "$TA_OUT/$name" "$@" >"$TA_OUT/$name.log" 2>&1
  echo "$? $(( $(date +%s) - t0 ))" >"$TA_OUT/$name.rc"
  set -e
}
set -m  # each background job in a process group of its own, so TA_SPLIT can stop the demo's whole group
(
  t0=$(date +%s)
  set +e
  CUDA_VISIBLE_DEVICES=$gpu_demo "$TA_BIN" demo --profile gpu --model "$TA_MODEL" --out "$TA_OUT/demo" "${steps[@]}" >"$TA_OUT/demo.log" 2>&1
  echo "$? $(( $(date +%s) - t0 ))" >"$TA_OUT/demo.rc"
) &
demo=$!
# grpo.toml is written before SFT; the SFT adapter is there once the demo's fifth stage (GRPO) begins
until grep -q '^\[5/' "$TA_OUT/demo.log" 2>/dev/null || [ -f "$TA_OUT/demo.rc" ]; do sleep 2; done
[ -f "$TA_OUT/demo/sft/final/adapter_config.json" ] || { echo "the demo ended before GRPO: $(cat "$TA_OUT/demo.rc")"; exit 1; }
if [ "${TA_SPLIT:-0}" = 1 ]; then
  kill -- -"$demo"
  wait "$demo" || true
  sleep 5  # its engine's and trainer's GPU memory
  arm async 1 --num-gpus 2
  arm sync 0 --num-gpus 2
  exit 0
fi
CUDA_VISIBLE_DEVICES=$gpu_sync arm sync 0
wait
