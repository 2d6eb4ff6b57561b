#!/usr/bin/env bash
# benches/trl_multiturn.py on a GPU machine without network, in two stages that each fit a
# 10-minute command (the stages' outputs stay in WORK, so `run` reuses what `prepare` made):
#
#   benches/trl_multiturn.sh prepare       # GGUF -> HF directory, synthesized tasks, SFT warm start
#   benches/trl_multiturn.sh run OUT       # train-agent's steps, then TRL's: OUT/trl_multiturn.json,
#                                          # the table on stdout, the logs and metrics in OUT
#   benches/trl_multiturn.sh smoke OUT     # the whole flow on a 2-layer random model: plumbing only
#
# Settings (environment): MODEL (/tmp/qwen.gguf), TRAIN_AGENT_BIN (/tmp/ta/train-agent), WORK
# (/tmp/trl-multiturn), STEPS (3), WARM (64 reference traces for the warm start; 0: the base
# model), TRL_BUDGET (150 s: TRL stops after the step that crosses it, at least 2 steps), and
# BENCH_ARGS for any other flag of the bench. Python packages: trl, datasets, dill and
# multiprocess come as wheels in .whl (installed into /tmp/site unless trl imports already).
set -euo pipefail
cd "$(dirname "$0")/.."
stage=${1:?usage: benches/trl_multiturn.sh prepare|run|smoke [OUT]}
out=${2:-/tmp/trl-multiturn-out}
model=${MODEL:-/tmp/qwen.gguf}
bin=${TRAIN_AGENT_BIN:-/tmp/ta/train-agent}
work=${WORK:-/tmp/trl-multiturn}
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} TRAIN_AGENT_PYTHON=${TRAIN_AGENT_PYTHON:-python3} PYTHONUNBUFFERED=1

if ! python3 -c "import trl, datasets" 2>/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
fi
common=(--model "$model" --train-agent "$bin" --warm-start "${WARM:-64}" --steps "${STEPS:-3}"
        --trl-time-budget "${TRL_BUDGET:-150}")
mkdir -p "$out"
case "$stage" in
    prepare) args=("${common[@]}" --work "$work" --prepare-only) ;;
    run)     args=("${common[@]}" --work "$work" --out "$out/trl_multiturn.json") ;;
    smoke)   work=$work-smoke
             args=(--model "$model" --train-agent "$bin" --tiny --warm-start 8 --warm-start-epochs 1 --steps 2 --turns 3
                   --max-tokens 32 --work "$work" --out "$out/smoke.json") ;;
    *) echo "unknown stage $stage (prepare, run or smoke)" >&2; exit 2 ;;
esac
set +e
# shellcheck disable=SC2086 # BENCH_ARGS is a list of flags
python3 benches/trl_multiturn.py "${args[@]}" ${BENCH_ARGS:-} 2>&1 | tee "$out/$stage.log"
status=${PIPESTATUS[0]}
set -e
# The small files of the run, for the report (the model and checkpoints stay in WORK).
cp "$work"/*.log "$work"/*.toml "$out"/ 2>/dev/null || true
cp "$work"/ta-run/metrics.jsonl "$out"/ta-metrics.jsonl 2>/dev/null || true
cp "$work"/trl-result.json "$out"/ 2>/dev/null || true
exit "$status"
