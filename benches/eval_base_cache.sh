#!/usr/bin/env bash
# What `eval`'s kept base-model episodes save (issue 34, "validation that costs what it must"): a
# check of an adapter with the base model beside it, then of a second adapter on the same
# scenarios, the base model played again (`--replay-base`, the anchor: every evaluation before
# the cache) and reused, one after the other in one run. Prints each evaluation's wall time and
# whether it played the base model, checks that the reused episodes are the ones kept last, and
# counts how many of the base model's episodes two plays of it wrote token for token alike.
#
#   TA_BIN=target/release/train-agent TA_MODEL=smollm2-135m.gguf TA_RUN=runs/demo TA_OUT=/tmp/ebc \
#   bash benches/eval_base_cache.sh
#
# TA_RUN is a `train-agent demo` (or `fit`) run directory: its scenarios.jsonl, sft/final and
# grpo/final. The evaluation's settings are the CPU demo profile's validation (TA_LIMIT tasks of
# the validation split, 20; five turns of 96 tokens, a 240-token episode budget, 16 at once) and
# TA_EVAL_ARGS adds to them. The cache is TA_OUT/validation-cache, empty at the start.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
: "${TA_MODEL:?the base model}" "${TA_RUN:?a demo or fit run directory}" "${TA_OUT:?the output directory}"
TA_BIN=${TA_BIN:-$root/target/release/train-agent}
rm -rf "$TA_OUT" && mkdir -p "$TA_OUT"
export TRAIN_AGENT_VALIDATION_CACHE=$TA_OUT/validation-cache
# shellcheck disable=SC2206
extra=(${TA_EVAL_ARGS:-})
check() {
  local name=$1 adapter=$2; shift 2
  local t0; t0=$(date +%s.%N)
  "$TA_BIN" eval --server "$TA_BIN demo-server" --scenarios "$TA_RUN/scenarios.jsonl" --split validation --limit "${TA_LIMIT:-20}" \
    --model "$adapter" --base-model "$TA_MODEL" --compare-base --max-turns 5 --max-tokens 96 --max-episode-tokens 240 --concurrency 16 \
    --tool-result-max-chars 1500 --max-model-len 4096 "${extra[@]}" "$@" --out "$TA_OUT/$name" > "$TA_OUT/$name.log" 2>&1
  python3 - "$name" "$t0" "$(date +%s.%N)" "$TA_OUT/$name.log" <<'PY'
import sys
name, t0, t1, log = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), open(sys.argv[4]).read()
reused = "episodes reused from an earlier evaluation" in log
print(f"| {name} | {t1 - t0:.0f} s | {'reused' if reused else 'played'} |")
PY
}
echo "| evaluation | wall time | base model |"
echo "|---|---:|---|"
check first-sft "$TA_RUN/sft/final"
check anchor-grpo "$TA_RUN/grpo/final" --replay-base
check cached-grpo "$TA_RUN/grpo/final"
# The cache holds the last played base episodes (--replay-base keeps its own): the anchor's.
python3 - "$TA_OUT" <<'PY'
import json, sys
out = sys.argv[1]
read = lambda name: [json.loads(l) for l in open(f"{out}/{name}/trajectories/base.jsonl")]
first, anchor, cached = read("first-sft"), read("anchor-grpo"), read("cached-grpo")
assert cached == anchor, "the reused base episodes differ from the ones kept last (the anchor's)"
tokens = lambda t: [(x["prompt_token_ids"], x["completion_token_ids"]) for x in t["turns"]]
same = sum(tokens(a) == tokens(b) for a, b in zip(first, anchor))
rewards = sum(a["reward"] == b["reward"] for a, b in zip(first, anchor))
print(f"reused: the anchor's {len(cached)} base episodes, as kept; the base model played twice (first, anchor): "
      f"the same tokens in {same} of {len(first)} episodes, the same reward in {rewards}")
PY
