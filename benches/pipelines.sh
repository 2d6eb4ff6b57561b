# Sourced by the benches that run pipelines in the background (natural_check.sh, fit_natural.sh):
# `trap on_signal INT TERM` hands a Ctrl-C or a kill on to them.

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
