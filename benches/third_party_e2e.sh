#!/usr/bin/env bash
# synth -> collect --reference -> curate -> sft -> train -> eval on third-party SQLite MCP servers
# (issue 14), each on a database of its own (benches/third_party_dbs.py), on one GPU.
#
#   TA_BIN=target/release/train-agent TA_MODEL=/path/qwen2.5-coder-0.5b-instruct.gguf \
#   TA_OUT=/tmp/tp bash benches/third_party_e2e.sh "mcp-server-sqlite --db-path {db}" shop
#
# Arguments: the server command ({db} is replaced by the database file) and the database name
# (shop or clinic). Knobs (env): TA_SYNTH_N (1200), TA_TRACES (300), TA_SFT_EPOCHS (3),
# TA_STEPS (8 GRPO steps of 8 x 8), TA_EVAL_ROLLOUTS (4 sampled episodes per task in `eval`),
# TA_GPU_UTIL (0.9; lower it to run several servers side by side on one GPU).
set -euo pipefail
server_tpl=$1; db_name=$2
: "${TA_BIN:?}" "${TA_MODEL:?}" "${TA_OUT:?}"
out=$TA_OUT/$db_name; mkdir -p "$out"
python3 "$(dirname "$0")/third_party_dbs.py" "$out/db" >/dev/null
server=${server_tpl//\{db\}/$out/db/$db_name.db}
t0=$(date +%s); stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }

stamp "synth on: $server"
"$TA_BIN" scenarios synth --server "$server" --n "${TA_SYNTH_N:-1200}" --seed 0 --out "$out/synth"
stamp "collect"
"$TA_BIN" collect --server "$server" --scenarios "$out/synth/scenarios.jsonl" --reference --split train \
  --limit "${TA_TRACES:-300}" --out "$out/traces"
"$TA_BIN" curate "$out/traces" --dedupe --no-parquet --out "$out/dataset"
stamp "sft"
"$TA_BIN" sft --dataset "$out/dataset" --base-model "$TA_MODEL" --out "$out/sft" \
  --epochs "${TA_SFT_EPOCHS:-3}" --lr 2e-4
stamp "train (validates base, SFT and the result, greedy, on the validation split)"
"$TA_BIN" train --server "$server" --scenarios "$out/synth/scenarios.jsonl" --base-model "$TA_MODEL" \
  --init-adapter "$out/sft/final" --out "$out/grpo" --max-steps "${TA_STEPS:-8}" --lr 2e-5 --eval-every 0 \
  --gpu-memory-utilization "${TA_GPU_UTIL:-0.9}"
stamp "eval (sampled, trained vs base)"
"$TA_BIN" eval --server "$server" --model "$out/grpo/final" --base-model "$TA_MODEL" \
  --scenarios "$out/synth/scenarios.jsonl" --compare-base --rollouts "${TA_EVAL_ROLLOUTS:-4}" --temperature 1.0 --out "$out/eval" \
  --gpu-memory-utilization "${TA_GPU_UTIL:-0.9}"
"$TA_BIN" stats "$out/grpo"
"$TA_BIN" stats "$out/eval"
stamp "done"
