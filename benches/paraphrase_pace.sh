#!/usr/bin/env bash
# `scenarios paraphrase`'s pace with a local teacher on one GPU, as `fit --teacher` runs it (the
# demo's synthesized tasks, `--solve`, the GPU profile's requests in flight), two binaries side by
# side in one run: TA_BIN, then the anchor TA_ANCHOR_BIN, then each again (the first run also
# converts the teacher's GGUF file into the cache, so the second pair is the like-for-like one).
# Prints each run's wall time and what it kept; each engine's log (TA_OUT/NAME/logs/engine.log)
# ends with its scheduler's line: the decode's mean width and the time it took.
#
#   TA_BIN=target/release/train-agent TA_ANCHOR_BIN=/tmp/anchor/train-agent \
#   TA_TEACHER=local/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf TA_OUT=/tmp/pace \
#   bash benches/paraphrase_pace.sh
#
# TA_TASKS synthesized tasks (1500, fit's default on the demo), TA_CONCURRENCY tasks in flight
# (128, the GPU profile's). Run from the directory that holds the teacher's GGUF file.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
: "${TA_ANCHOR_BIN:?the anchor binary}" "${TA_TEACHER:?the teacher, e.g. local/NAME.gguf}" "${TA_OUT:?the output directory}"
TA_BIN=$(realpath "${TA_BIN:-$root/target/release/train-agent}")
TA_ANCHOR_BIN=$(realpath "$TA_ANCHOR_BIN")
rm -rf "$TA_OUT" && mkdir -p "$TA_OUT"
"$TA_BIN" scenarios synth --server "$TA_BIN demo-server" --seed 1 --n "${TA_TASKS:-1500}" --out "$TA_OUT/synth" > "$TA_OUT/synth.log" 2>&1
for run in head anchor head2 anchor2; do
  bin=$TA_BIN
  if [[ $run == anchor* ]]; then bin=$TA_ANCHOR_BIN; fi
  start=$(date +%s.%N)
  "$bin" scenarios paraphrase --server "$bin demo-server" --scenarios "$TA_OUT/synth/scenarios.jsonl" --teacher "$TA_TEACHER" \
    --solve --concurrency "${TA_CONCURRENCY:-128}" --out "$TA_OUT/$run" > "$TA_OUT/$run.log" 2>&1
  end=$(date +%s.%N)
  kept=$(python3 -c "import json, sys; d = json.load(open(sys.argv[1])); print(d['returned'], 'returned,', d['kept'], 'kept')" "$TA_OUT/$run/summary.json")
  echo "$run: $(python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 1))" "$start" "$end") s, $kept; $(grep 'scheduler:' "$TA_OUT/$run/logs/engine.log" | tail -n 1 | sed 's/.*scheduler: //')"
done
