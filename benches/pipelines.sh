# Sourced by the benches that run the natural check set's databases as background pipelines
# (natural_check.sh, fit_natural.sh), after `set -euo pipefail` and `root=` (the repository):
# their common settings, each database's server and questions, and `on_signal`, which a bench
# traps (`trap on_signal INT TERM`) to hand a Ctrl-C or a kill on to its pipelines.

# The settings every such bench takes: the binary (the server commands run from here; an absolute
# binary works from any directory), the model, the output, KaggleDBQA's directory (read where it
# lies, never copied) and the databases.
: "${TA_MODEL:?the base model (HF id, directory, .gguf or packaged name)}" "${TA_OUT:?the output directory}"
TA_BIN=${TA_BIN:-$root/target/release/train-agent}
if [[ $TA_BIN == */* ]]; then TA_BIN=$(realpath "$TA_BIN"); fi
TA_DATA=$(realpath -m "${TA_DATA:-$root/../shared/data/kaggledbqa}")
TA_DBS=${TA_DBS:-"GeoNuclearData GreaterManchesterCrime StudentMathScore demo"}

# A database's server and its people's questions: KaggleDBQA's NAME.sqlite served by the demo
# server, the demo server itself with its 88 hand-written questions, and natural_check.sh's
# walked servers (TA_FS_SERVER, TA_GIT_SERVER, their fixtures and check sets under TA_OUT).
server_of() {
  case $1 in
    demo) echo "$TA_BIN demo-server" ;;
    fs) echo "$TA_FS_SERVER $TA_OUT/fs/fixture" ;;
    git) echo "$TA_GIT_SERVER --repository $TA_OUT/git/fixture" ;;
    *) echo "$TA_BIN demo-server --db $TA_DATA/$1.sqlite" ;;
  esac
}
questions_of() {
  case $1 in
    demo) echo "$root/scenarios/company.jsonl" ;;
    fs | git) echo "$TA_OUT/$1/check-set.jsonl" ;;
    *) echo "$TA_DATA/$1.jsonl" ;;
  esac
}
# Every process under $1, deepest last.
descendants() {
  local kid
  for kid in $(ps -o pid= --ppid "$1" 2>/dev/null); do echo "$kid"; descendants "$kid"; done
}
# Ctrl-C or kill: the pipelines run in the background, where SIGINT is ignored, so hand it on:
# INT to the commands (train-agent stops cleanly at it, keeping its finished episodes and
# checkpoints), TERM to the pipeline shells, which then stop instead of starting the next stage
# (and never mark the interrupted one done).
on_signal() {
  trap '' INT TERM
  echo "interrupted: stopping the pipelines; run the same command again to continue" >&2
  local job p
  for job in $(jobs -p); do
    for p in $job $(descendants "$job"); do
      if [[ $(ps -o comm= -p "$p" 2>/dev/null) == bash ]]; then kill -TERM "$p" 2>/dev/null; else kill -INT "$p" 2>/dev/null; fi
    done
  done
  wait
  exit 130
}
