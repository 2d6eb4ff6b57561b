#!/usr/bin/env bash
# `fit`'s GPU profile on the natural check set (issue 31): `train-agent fit` with its defaults
# (SFT on a tenth of the train split, 48 GRPO steps: benches/RESULTS.md, "Run 26") on each SQL
# database of benches/natural_check.sh, the database's questions written by people as
# `--check-set`, played greedy by base, SFT and SFT+GRPO (`check/`) and sampled, K episodes a
# question, by SFT and SFT+GRPO (`--check-samples K`: `check-sampled/`). `natural_check.py
# TA_OUT` then prints the table, pooled over KaggleDBQA's 78 questions and the demo's 88, greedy
# and sampled, with paired tests of SFT+GRPO against SFT.
#
#   TA_BIN=target/release/train-agent TA_MODEL=/path/qwen2.5-coder-0.5b-instruct.gguf \
#   TA_OUT=/tmp/fit-natural TA_GPUS="0 1" bash benches/fit_natural.sh
#   python3 benches/natural_check.py /tmp/fit-natural
#
# THE CHECK SET IS NEVER TRAINING DATA: the KaggleDBQA files are read where they lie (TA_DATA,
# default ../shared/data/kaggledbqa) and reach only fit's last stages, the check set's `eval`s.
# TA_OUT must lie outside the repository.
#
# Knobs (env):
#   TA_BIN, TA_MODEL (required), TA_OUT (required), TA_DATA as in benches/natural_check.sh
#   TA_DBS         databases (default "GeoNuclearData GreaterManchesterCrime StudentMathScore demo")
#   TA_GPUS        GPU ids the pipelines are dealt to in turn, all at once (default "0")
#   TA_GPU_UTIL    each pipeline's share of its GPU's memory (default 0.4 over the pipelines a GPU
#                  gets: one demo at the GPU profile used ~56 GB of an H200's 140)
#   TA_STEPS       fit's `--steps` (default: fit's own). 0: SFT alone, checked against the base
#                  model, no GRPO and no sampled check (a TA_CHECK_SAMPLED above 0 is refused)
#   TA_VALIDATION_LIMIT  fit's `--validation-limit` (default: all; the base model's validation of
#                  ~290 tasks took ~2 minutes of a demo: benches/RESULTS.md, "Run 26")
#   TA_RECOVERY_SHARE  fit's `--recovery-share`: SFT traces that show a slip and its repair
#                  (default: fit's own, none)
#   TA_VALUE_LOOKUPS  non-empty: fit's `--value-lookups` (values named as people name them, a
#                  state by its value alone, the stored value looked up; default off)
#   TA_JOIN_MIX    fit's `--join-mix` (weights of tasks whose SQL joins no table, one, two or
#                  more, e.g. 4,2,1; default: the grammar's own mix)
#   TA_SEED        fit's `--seed`: a second seed is an independent run of the same recipe (other
#                  tasks, split and draws; default: fit's own)
#   TA_SFT_SHARE   fit's `--sft-share` (the share of the train split SFT's traces come from;
#                  default: fit's own)
#   TA_SFT_EPOCHS  fit's `--sft-epochs` (SFT's passes over its traces; default: fit's own)
#   TA_TEACHER     fit's `--teacher` (rewordings of the synthesized tasks, checked by the teacher's
#                  own SQL; e.g. local/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf; default: none)
#   TA_CURRICULUM  fit's `--curriculum` (how GRPO draws its tasks: uniform, adaptive, frontier;
#                  default: fit's own, uniform)
#   TA_CHECK_SAMPLED  K episodes a question in the sampled check (fit's `--check-samples`: 8; 0:
#                  none)
#   TA_TASKS_FROM  an earlier run's TA_OUT: each database's synth/ and paraphrase/ are copied from
#                  it before its fit, which then skips those stages, so two recipes train on the
#                  same tasks and rewordings (give the earlier run's TA_SEED and TA_TEACHER: the
#                  split and SFT's order follow the seed, and without a teacher fit uses synth/
#                  alone). The teacher is not called, but fit still checks its file.
#
# Each pipeline writes TA_OUT/NAME: fit's stages (check/ and check-sampled/ among them), fit.log,
# rc; TA_OUT/outcomes.json keeps the run's per-question results without the questions
# (`natural_check.py --outcomes`: copy it to benches/outcomes/ to pool later seeds with it).
# Running again continues where each fit stopped.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# The settings and databases this bench shares with natural_check.sh, and its Ctrl-C handling.
source "$root/benches/pipelines.sh"
read -r -a dbs <<< "$TA_DBS"
read -r -a gpus <<< "${TA_GPUS:-0}"
SAMPLED=${TA_CHECK_SAMPLED:-8}
[[ $SAMPLED =~ ^[0-9]+$ ]] || { echo "TA_CHECK_SAMPLED=$SAMPLED: a number of episodes (0: none)" >&2; exit 2; }
if [[ ${TA_STEPS:-} == 0 ]]; then
  # SFT alone: the sampled check compares SFT+GRPO with SFT, so there is none to play.
  [[ ${TA_CHECK_SAMPLED:-0} == 0 ]] || { echo "TA_STEPS=0 checks SFT alone, and the sampled check compares SFT+GRPO with it: leave TA_CHECK_SAMPLED unset or 0" >&2; exit 2; }
  SAMPLED=0
fi
if [[ -n ${TA_TASKS_FROM:-} ]]; then
  for name in "${dbs[@]}"; do
    [[ -f $TA_TASKS_FROM/$name/synth/summary.json ]] || { echo "TA_TASKS_FROM=$TA_TASKS_FROM has no finished synth/ for $name" >&2; exit 2; }
  done
fi
per_gpu=$(( (${#dbs[@]} + ${#gpus[@]} - 1) / ${#gpus[@]} ))
UTIL=${TA_GPU_UTIL:-$(python3 -c "print(round(0.4 / $per_gpu, 3))")}
knobs=()
if [[ -n ${TA_STEPS:-} ]]; then knobs+=(--steps "$TA_STEPS"); fi
if [[ -n ${TA_VALIDATION_LIMIT:-} ]]; then knobs+=(--validation-limit "$TA_VALIDATION_LIMIT"); fi
if [[ -n ${TA_RECOVERY_SHARE:-} ]]; then knobs+=(--recovery-share "$TA_RECOVERY_SHARE"); fi
if [[ -n ${TA_VALUE_LOOKUPS:-} ]]; then knobs+=(--value-lookups); fi
if [[ -n ${TA_JOIN_MIX:-} ]]; then knobs+=(--join-mix "$TA_JOIN_MIX"); fi
if [[ -n ${TA_SEED:-} ]]; then knobs+=(--seed "$TA_SEED"); fi
if [[ -n ${TA_SFT_SHARE:-} ]]; then knobs+=(--sft-share "$TA_SFT_SHARE"); fi
if [[ -n ${TA_SFT_EPOCHS:-} ]]; then knobs+=(--sft-epochs "$TA_SFT_EPOCHS"); fi
if [[ -n ${TA_TEACHER:-} ]]; then knobs+=(--teacher "$TA_TEACHER"); fi
if [[ -n ${TA_CURRICULUM:-} ]]; then knobs+=(--curriculum "$TA_CURRICULUM"); fi
mkdir -p "$TA_OUT"

# One database's fit; records its exit status in TA_OUT/NAME/rc.
run_db() {
  local name=$1 gpu=$2 d=$TA_OUT/$1 t0 rc=0
  mkdir -p "$d"
  t0=$(date +%s)
  stamp() { echo "[$name $(( $(date +%s) - t0 )) s] $*" | tee -a "$d/fit.log"; }
  local questions; questions=$(questions_of "$name")
  if [[ ! -f $questions ]] || { [[ $name != demo ]] && [[ ! -f $TA_DATA/$name.sqlite ]]; }; then
    stamp "$questions or its database: no such file (TA_DATA=$TA_DATA)"; echo 1 > "$d/rc"; return 0
  fi
  local stage
  for stage in synth paraphrase; do
    if [[ -n ${TA_TASKS_FROM:-} && -f $TA_TASKS_FROM/$name/$stage/summary.json && ! -e $d/$stage ]]; then
      cp -r "$TA_TASKS_FROM/$name/$stage" "$d/$stage"
      stamp "$stage/ from $TA_TASKS_FROM/$name"
    fi
  done
  export CUDA_VISIBLE_DEVICES=$gpu TRAIN_AGENT_GPU_MEMORY_UTILIZATION=$UTIL
  stamp "fit on GPU $gpu"
  "$TA_BIN" fit --server "$(server_of "$name")" --check-set "$questions" --base-model "$TA_MODEL" \
    --check-samples "$SAMPLED" --profile gpu "${knobs[@]}" --out "$d" >> "$d/fit.log" 2>&1 || rc=$?
  stamp "exit $rc"
  echo "$rc" > "$d/rc"
}

# Ctrl-C or kill reaches the pipelines: each fit stops cleanly, keeping what it finished.
trap on_signal INT TERM

i=0
for name in "${dbs[@]}"; do
  run_db "$name" "${gpus[i % ${#gpus[@]}]}" &
  i=$(( i + 1 ))
done
wait
failed=0
for name in "${dbs[@]}"; do
  if [[ $(cat "$TA_OUT/$name/rc" 2>/dev/null) != 0 ]]; then echo "[$name] FAILED; see $TA_OUT/$name/fit.log" >&2; failed=1; fi
done
python3 "$root/benches/natural_check.py" "$TA_OUT" --outcomes "$TA_OUT/outcomes.json" || true
exit "$failed"
