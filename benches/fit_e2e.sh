#!/usr/bin/env bash
# `train-agent fit` end to end on one GPU (issue 33): three servers side by side, each one `fit`
# with the GPU profile, and a kill in the middle of GRPO:
#   - GeoNuclearData: PyPI's `mcp-server-sqlite` (no readOnlyHint; write_query, create_table) on
#     one KaggleDBQA database, its people's questions as --check-set;
#   - demo: the bundled demo server, the same task source and GRPO shape (the step-time anchor);
#   - fs: @modelcontextprotocol/server-filesystem on benches/walk's seeded workspace (the tool
#     walk), its 40 hand-written questions as --check-set.
# Each writes TA_OUT/NAME (fit's stages; check/ is the check set's eval, so
# `python3 benches/natural_check.py TA_OUT` prints the table), NAME/fit.log, NAME/rc.
#
#   TA_BIN=target/release/train-agent TA_MODEL=/path/qwen2.5-coder-0.5b-instruct.gguf \
#   TA_OUT=/tmp/fit TA_SQLITE_SERVER=mcp-server-sqlite TA_FS_SERVER=mcp-server-filesystem \
#   bash benches/fit_e2e.sh
#
# Then the GRPO step time side by side (TA_STEP_BENCH steps, 5; 0: skip): `train` from each SQL
# fit's SFT adapter on its train split (and 4 validation tasks, no base validation), the
# mcp-server-sqlite run and the demo server's at once, as two runs of the same shape (8 x 8).
#
# Knobs (env): TA_STEPS (8 GRPO steps), TA_VALIDATION (100 validation tasks), TA_GPU_UTIL (0.2:
# each engine's share of the GPU), TA_KILL_AT_STEP (2: the sqlite fit is stopped with SIGINT once
# that GRPO step is saved, then run again with the same flags; 0: no kill), TA_DATA (KaggleDBQA,
# default ../shared/data/kaggledbqa; read where it lies, never copied), TA_DB (GeoNuclearData).
# THE CHECK SETS ARE NEVER TRAINING DATA: they reach only fit's last stage, `eval`.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
: "${TA_BIN:?}" "${TA_MODEL:?}" "${TA_OUT:?}" "${TA_SQLITE_SERVER:?}" "${TA_FS_SERVER:?}"
data=${TA_DATA:-$root/../shared/data/kaggledbqa}; db=${TA_DB:-GeoNuclearData}
export TRAIN_AGENT_GPU_MEMORY_UTILIZATION=${TA_GPU_UTIL:-0.2}
common=(--base-model "$TA_MODEL" --profile gpu --steps "${TA_STEPS:-8}" --validation-limit "${TA_VALIDATION:-100}")
mkdir -p "$TA_OUT/$db" "$TA_OUT/demo" "$TA_OUT/fs"
cp "$data/$db.sqlite" "$TA_OUT/$db/$db.sqlite"
python3 "$root/benches/walk/fixtures.py" fs "$TA_OUT/fs/workspace" >/dev/null
python3 "$root/benches/walk/fixtures.py" check-set fs "$TA_OUT/fs/workspace" "$TA_OUT/fs/check-set.jsonl" >/dev/null

run() { # NAME ARGS...: one fit, its log and exit status
  local name=$1; shift
  local t0; t0=$(date +%s)
  set +e; "$TA_BIN" fit "${common[@]}" --out "$TA_OUT/$name" "$@" >>"$TA_OUT/$name/fit.log" 2>&1; local rc=$?; set -e
  echo "$rc" >"$TA_OUT/$name/rc"; echo "[$name] fit exited $rc after $(( $(date +%s) - t0 )) s" | tee -a "$TA_OUT/$name/fit.log"
}

sqlite_args=(--server "$TA_SQLITE_SERVER --db-path $TA_OUT/$db/$db.sqlite" --check-set "$data/$db.jsonl")
kill_at=${TA_KILL_AT_STEP:-2}
(
  if [ "$kill_at" -gt 0 ]; then
    "$TA_BIN" fit "${common[@]}" --out "$TA_OUT/$db" "${sqlite_args[@]}" >>"$TA_OUT/$db/fit.log" 2>&1 &
    pid=$!
    # Stop it once GRPO step $kill_at is checkpointed, as a Ctrl-C would.
    until [ -f "$TA_OUT/$db/grpo/checkpoints/step-$(printf %06d "$kill_at")/state.json" ] || ! kill -0 "$pid" 2>/dev/null; do sleep 2; done
    kill -INT "$pid" 2>/dev/null && echo "[$db] SIGINT after GRPO step $kill_at" | tee -a "$TA_OUT/$db/fit.log"
    wait "$pid" || true
  fi
  run "$db" "${sqlite_args[@]}"
) &
run demo --server "$TA_BIN demo-server" &
run fs --server "$TA_FS_SERVER $TA_OUT/fs/workspace" --check-set "$TA_OUT/fs/check-set.jsonl" &
wait
# The step-time runs: both servers' `train` at once, the same shape, from their SFT adapters.
bench_steps=${TA_STEP_BENCH:-5}
if [ "$bench_steps" -gt 0 ]; then
  for name in "$db" demo; do
    mkdir -p "$TA_OUT/steps/$name"
    python3 - "$TA_OUT/$name/scenarios.jsonl" >"$TA_OUT/steps/$name/scenarios.jsonl" <<'PY'
import json, sys
seen = 0
for line in open(sys.argv[1]):
    if json.loads(line).get("split") == "validation":
        seen += 1
        if seen > 4:
            continue
    print(line, end="")
PY
    sed 's/validate_base = true/validate_base = false/' "$TA_OUT/$name/grpo.toml" >"$TA_OUT/steps/$name/grpo.toml"
  done
  steps_of() { "$TA_BIN" train --server "$1" --scenarios "$TA_OUT/steps/$2/scenarios.jsonl" --config "$TA_OUT/steps/$2/grpo.toml" \
      --out "$TA_OUT/steps/$2/run" --max-steps "$bench_steps" --eval-rollouts 0 >"$TA_OUT/steps/$2/train.log" 2>&1; }
  steps_of "$TA_SQLITE_SERVER --db-path $TA_OUT/$db/$db.sqlite" "$db" &
  steps_of "$TA_BIN demo-server" demo &
  wait
fi
# GRPO step times (seconds, every step row): the fits' and the side-by-side runs'.
python3 - "$TA_OUT" "$db" <<'PY'
import json, statistics, sys, pathlib
out, db = pathlib.Path(sys.argv[1]), sys.argv[2]
for name in [f"{db}/grpo", "demo/grpo", "fs/grpo", f"steps/{db}/run", "steps/demo/run"]:
    path = out / name / "metrics.jsonl"
    rows = [json.loads(l) for l in path.read_text().splitlines()] if path.exists() else []
    steps = [r["time"]["step_s"] for r in rows if isinstance(r.get("time"), dict) and "step_s" in r["time"]]
    if steps:
        print(f"{name}: {len(steps)} GRPO steps, median {statistics.median(steps):.1f} s, mean {statistics.mean(steps):.1f} s, all {[round(s, 1) for s in steps]}")
PY
