#!/usr/bin/env bash
# `scenarios generate` seeded with a walk, with a local teacher (issue 32, item 4): how many of a
# local model's tasks survive each stage (schema, dedupe, solving, agreement, the replay on a
# fresh server) on servers without SQL, against 0 kept on the demo server with the 0.5B teacher
# and no walk (benches/RESULTS.md, "`scenarios generate` with a local teacher").
#
# For each server: its seeded fixture (benches/walk/fixtures.py), `scenarios walk` on it, then
# `scenarios generate --walk` with the embedded engine serving the teacher, which also solves.
# Prints one table of the stage counts per server (from each run's summary.json); the kept tasks
# are TA_OUT/NAME/generate/scenarios.jsonl, their agreeing episodes traces.jsonl.
#
#   TA_BIN=target/release/train-agent TA_TEACHER=/path/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \
#   TA_OUT=/tmp/generate-walk bash benches/generate_walk.sh
#
# Knobs (env):
#   TA_TEACHER     the teacher and solver (required): a .gguf, directory, HF id or packaged name
#   TA_OUT         output directory (required), one subdirectory per server: fixture/ walk/ generate/
#   TA_SERVERS     "fs git" (@modelcontextprotocol/server-filesystem, mcp-server-git)
#   TA_N           tasks asked of the teacher per server (60)
#   TA_GPU_UTIL    the engine's share of GPU memory (0.4)
#   TA_SEED        seed of the walk, the teacher, the solver and the split (0)
#   TA_GENERATE_ARGS  more flags for `scenarios generate` (a smoke run on a CPU with a small
#                  model: "--teacher-max-tokens 2048 --attempts 2 --agree 2 --max-turns 4")
#   TA_SOLVER_ADAPTERS  a `benches/natural_check.sh` output directory (TA_OUT there, same
#                  TA_MODEL as TA_TEACHER): each server's SFT adapter (DIR/NAME/sft/final) solves in
#                  the teacher's engine (`--solver-adapter`); unset: the teacher solves
#   TA_FS_SERVER, TA_GIT_SERVER  server commands, given the fixture's path (default: the copies
#                  the tests installed in the cache)
# Re-running continues: a finished walk is kept, and generate reuses its drafts and episodes.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
: "${TA_TEACHER:?the teacher model (.gguf, directory, HF id or packaged name)}" "${TA_OUT:?the output directory}"
TA_BIN=${TA_BIN:-$root/target/release/train-agent}
if [[ $TA_BIN == */* ]]; then TA_BIN=$(realpath "$TA_BIN"); fi
third_party() {
  compgen -G "${TRAIN_AGENT_CACHE:-$HOME/.cache/train-agent}/third-party/$1-*/$2" | head -1 || true
}
TA_FS_SERVER=${TA_FS_SERVER:-$(third_party mcp-server-filesystem node_modules/.bin/mcp-server-filesystem)}
TA_GIT_SERVER=${TA_GIT_SERVER:-$(third_party mcp-server-git venv/bin/mcp-server-git)}
SEED=${TA_SEED:-0}

for name in ${TA_SERVERS:-fs git}; do
  d=$TA_OUT/$name
  mkdir -p "$d"
  [ -d "$d/fixture" ] || python3 "$root/benches/walk/fixtures.py" "$name" "$d/fixture" >/dev/null
  case $name in
    fs) server="$TA_FS_SERVER $d/fixture" ;;
    git) server="$TA_GIT_SERVER --repository $d/fixture" ;;
    *) echo "unknown server $name (fs or git)" >&2; exit 2 ;;
  esac
  solver=()
  if [ -n "${TA_SOLVER_ADAPTERS:-}" ]; then solver=(--solver-adapter "$TA_SOLVER_ADAPTERS/$name/sft/final"); fi
  t0=$(date +%s)
  [ -f "$d/walk/summary.json" ] || "$TA_BIN" scenarios walk --server "$server" --seed "$SEED" --out "$d/walk" >"$d/walk.log" 2>&1
  "$TA_BIN" scenarios generate --server "$server" --walk "$d/walk" --teacher "local/$TA_TEACHER" --n "${TA_N:-60}" \
    --seed "$SEED" --gpu-memory-utilization "${TA_GPU_UTIL:-0.4}" "${solver[@]}" ${TA_GENERATE_ARGS:-} --out "$d/generate" >"$d/generate.log" 2>&1
  echo "[$name] walk and generate: $(( $(date +%s) - t0 )) s"
done

python3 - "$TA_OUT" ${TA_SERVERS:-fs git} <<'EOF'
import json, sys
out, names = sys.argv[1], sys.argv[2:]
rows = ["generated", "schema_valid", "deduped", "solved", "agreed", "replayed", "not_replayed", "kept", "train", "validation", "traces"]
counts = {n: json.load(open(f"{out}/{n}/generate/summary.json"))["counts"] for n in names}
print("| stage | " + " | ".join(names) + " |")
print("|---|" + "---:|" * len(names))
for r in rows:
    print(f"| {r} | " + " | ".join(str(counts[n].get(r, 0)) for n in names) + " |")
for n in names:
    for why, k in sorted(counts[n].get("replay_dropped", {}).items()):
        print(f"{n}: the replay dropped {k}: {why}")
EOF
