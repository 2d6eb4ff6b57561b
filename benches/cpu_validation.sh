#!/usr/bin/env bash
# The CPU demo's validation of one adapter, played by the engine of an anchor checkout and of this
# one, alternating, TA_REPEAT times each: each play's wall time (the engine's start-up included)
# and correct answers, and whether both engines wrote the same tokens. Measured with it: exact
# eager decode widths, then the packed prefill and row-wise CPU prefill attention (RESULTS.md,
# "Eager decode widths" and "Packed prefill, and a GGUF file read once"); their steps apart:
# benches/eager_widths_step.py, benches/cpu_engine_steps.py.
#
#   TA_ANCHOR_PY=/tmp/anchor/python TA_MODEL=smollm2-135m-instruct.gguf TA_RUN=runs/demo TA_OUT=/tmp/ew \
#   bash benches/cpu_validation.sh
#
# TA_ANCHOR_PY is the `python/` directory of the anchor (`git archive REV python | tar -x -C DIR`);
# TA_RUN a CPU `train-agent demo` run directory (its scenarios.jsonl and grpo/final). The
# evaluation is the CPU demo profile's validation (TA_LIMIT tasks, 20; five turns of 96 tokens, a
# 240-token episode budget, 16 at once), greedy.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
: "${TA_ANCHOR_PY:?the anchor checkout\'s python/ directory}" "${TA_MODEL:?the base model}" "${TA_RUN:?a CPU demo run directory}" "${TA_OUT:?the output directory}"
TA_BIN=${TA_BIN:-$root/target/release/train-agent}
rm -rf "$TA_OUT" && mkdir -p "$TA_OUT"
play() {
  local name=$1 py=$2
  local t0; t0=$(date +%s.%N)
  TRAIN_AGENT_PYTHONPATH=$py "$TA_BIN" eval --server "$TA_BIN demo-server" --scenarios "$TA_RUN/scenarios.jsonl" --split validation \
    --limit "${TA_LIMIT:-20}" --model "$TA_RUN/grpo/final" --base-model "$TA_MODEL" --max-turns 5 --max-tokens 96 --max-episode-tokens 240 \
    --concurrency 16 --tool-result-max-chars 1500 --max-model-len 4096 --out "$TA_OUT/$name" > "$TA_OUT/$name.log" 2>&1
  echo "$name $t0 $(date +%s.%N)" >> "$TA_OUT/times"
}
for i in $(seq "${TA_REPEAT:-2}"); do
  play "anchor-$i" "$TA_ANCHOR_PY"
  play "this-$i" "$root/python"
done
python3 - "$TA_OUT" <<'PY'
import glob, json, sys
out = sys.argv[1]
print("| play | wall | correct |")
print("|---|---:|---:|")
tokens = {}
for line in open(f"{out}/times"):
    name, t0, t1 = line.split()
    metrics = json.load(open(f"{out}/{name}/eval.json"))["metrics"][0]
    eps = [json.loads(l) for p in sorted(glob.glob(f"{out}/{name}/trajectories/*.jsonl")) for l in open(p)]
    tokens[name] = [[t["completion_token_ids"] for t in e["turns"]] for e in eps]
    print(f"| {name} | {float(t1) - float(t0):.0f} s | {metrics['successes']}/{metrics['trajectories']} |")
names = list(tokens)
same = all(tokens[n] == tokens[names[0]] for n in names)
print(f"every play wrote the same tokens in every episode: {same}")
PY
