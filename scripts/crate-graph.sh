#!/usr/bin/env bash
# The workspace's crate dependencies (normal ones, not dev or build) as a Mermaid graph, from
# `cargo metadata`: the picture in docs/architecture.md is this script's output.
#   scripts/crate-graph.sh           print the graph
#   scripts/crate-graph.sh --check   fail if docs/architecture.md holds another one
set -euo pipefail
cd "$(dirname "$0")/.."
graph=$(cargo metadata --format-version 1 --no-deps | python3 -c '
import json, sys
meta = json.load(sys.stdin)
names = {p["name"] for p in meta["packages"]}
print("```mermaid")
print("graph TD")
for p in sorted(meta["packages"], key=lambda p: p["name"]):
    deps = sorted({d["name"] for d in p["dependencies"] if d["name"] in names and d.get("kind") is None})
    for d in deps:
        print("  " + p["name"] + " --> " + d)
print("```")
')
if [[ "${1:-}" == "--check" ]]; then
  doc=$(sed -n '/<!-- crate-graph:start -->/,/<!-- crate-graph:end -->/p' docs/architecture.md | sed '1d;$d')
  if [[ "$doc" != "$graph" ]]; then
    echo "docs/architecture.md: the crate graph is out of date" >&2
    echo "hint: run scripts/crate-graph.sh and paste its output between the crate-graph markers" >&2
    exit 1
  fi
else
  echo "$graph"
fi
