#!/usr/bin/env bash
# The natural check set (issue 31): accuracy on questions written by people, after training only
# on tasks the product made. For each database: `scenarios synth` on its server -> `collect
# --reference` -> `curate` -> `sft` -> (`train`, GRPO from the SFT adapter, when TA_STEPS > 0) ->
# `eval` on the people's questions, greedy, base / SFT / SFT+GRPO played in one engine. Then
# benches/natural_check.py prints the table (accuracy with 95% Wilson intervals, paired exact
# McNemar tests), pooled over KaggleDBQA's 78 questions and the demo's 88.
#
#   TA_BIN=target/release/train-agent TA_MODEL=/path/qwen2.5-coder-0.5b-instruct.gguf \
#   TA_OUT=/tmp/natural TA_STEPS=16 bash benches/natural_check.sh
#   python3 benches/natural_check.py /tmp/natural [/tmp/natural-new-recipe] [--json FILE]
#
# Databases: KaggleDBQA's GeoNuclearData, GreaterManchesterCrime and StudentMathScore (NAME.sqlite,
# served by `$TA_BIN demo-server --db NAME.sqlite`; questions NAME.jsonl, all `split:
# validation`), and `demo` (the demo server; questions scenarios/company.jsonl, the 88
# hand-written ones). Servers without SQL (issue 32): `fs` (@modelcontextprotocol/server-filesystem
# on benches/walk's seeded workspace) and `git` (mcp-server-git on its seeded repository), whose
# tasks come from `scenarios walk` and whose check sets (40 and 41 hand-written questions) from
# benches/walk/fixtures.py; their server commands are TA_FS_SERVER and TA_GIT_SERVER (default:
# the copies the tests installed in the cache), given the fixture's path. Their check sets are
# asked with the read tools the walked tasks use (`eval --tools`), never the servers' writers.
#
# THE CHECK SET IS NEVER TRAINING DATA. The KaggleDBQA files are read where they lie, in TA_DATA
# (default ../shared/data/kaggledbqa from the repository root), and never copied: training sees
# only tasks `scenarios synth` writes from each database, and the people's questions reach only
# `eval`. TA_OUT must lie outside the repository (eval's trajectories hold the questions).
#
# Knobs (env):
#   TA_BIN         the train-agent binary (default target/release/train-agent)
#   TA_MODEL       the base model (required): HF id, directory, .gguf or packaged name
#   TA_OUT         output directory (required), one subdirectory per database:
#                  synth/ traces/ dataset/ sft/ grpo/ check/, bench.log, rc
#   TA_DATA        the KaggleDBQA directory (default ../shared/data/kaggledbqa)
#   TA_DBS         databases (default "GeoNuclearData GreaterManchesterCrime StudentMathScore demo")
#   TA_SCENARIOS_DIR  use $TA_SCENARIOS_DIR/NAME.jsonl (demo: demo.jsonl) as the training tasks
#                  instead of synthesizing them (tasks an older synthesizer made, so two recipes
#                  can be compared on the same GPU)
#   TA_SYNTH_N     candidate tasks to synthesize (2000: about 1,600 train tasks, room for the traces)
#   TA_VALUE_LOOKUPS  1: synthesize with `--value-lookups` (some questions name a stored value
#                  loosely and their traces look it up before the answer's query); unset: without
#   TA_PARAPHRASE_TEACHER  a teacher for `scenarios paraphrase` (e.g. local/qwen2.5-coder-1.5b-
#                  instruct-q4_k_m.gguf, or openai/MODEL): the first TA_TRACES synthesized tasks
#                  of a SQL database (the traces never reach past them) are reworded by it
#                  (TA_PARAPHRASE_PER_TASK each, 2; kept when they pass `--solve`: the teacher's
#                  SQL for the wording gives the task's rows), each original followed by its kept
#                  rewordings, so the TA_TRACES traces hold fewer distinct questions in more
#                  wordings; with TA_STEPS and TA_FRONTIER the next TA_FRONTIER_TASKS (the
#                  frontier's pool of unseen tasks) are reworded too; the rest follow
#                  unreworded; unset: none
#   TA_TRACES      reference traces of the train split for SFT (1000; 300 until 2026-11-27, see
#                  benches/RESULTS.md "A thousand reference traces")
#   TA_SFT_EPOCHS  SFT epochs (3; lr 2e-4)
#   TA_STEPS       GRPO steps of 8 groups x 8 rollouts (0: no GRPO). With GRPO, the SFT
#                  adapter is checked first (check-sft/: base and SFT), then all three (check/)
#   TA_GRPO_LR     GRPO's learning rate (2e-5; run 18's steps moved an almost deterministic SFT
#                  policy little, benches/RESULTS.md)
#   TA_GRPO_KL     GRPO's KL coefficient (`[loss] beta`, 0: none) against the SFT adapter it starts
#                  from (run 20's lr 1e-4 broke that adapter on two of four databases without one)
#   TA_GRPO_EVAL_EVERY  validate GRPO's adapter every N steps (0: before and after only), so that
#                  the best validated one, which `train` keeps as grpo/final, may be a middle step
#   TA_FRONTIER    K > 0: before GRPO, sample K episodes of the SFT adapter on up to
#                  TA_FRONTIER_TASKS (256) train tasks it had no trace of and train only on those
#                  it solves sometimes but not always (`scenarios frontier`); 0: train on every task
#   TA_GRPO_VALIDATION  validation tasks GRPO validates on before and after its steps (64, the
#                  first of the split; 0: all): the claims are the check set's, and the whole
#                  walked split (~400 tasks) took over 5 minutes with four pipelines on one card
#   TA_SFT_FROM    another TA_OUT of this bench (same model, tasks, traces, seed and frontier
#                  settings, checked against its TA_OUT/settings; a run that differs is refused):
#                  each database starts from its SFT adapter, SFT check and frontier
#                  (copied once they exist; a pipeline still running is waited for) and runs only
#                  GRPO and the check, so a second GRPO setting (TA_GRPO_LR, TA_STEPS) is paired
#                  with the first on one SFT start: `natural_check.py TA_SFT_FROM TA_OUT` compares
#                  their SFT+GRPO question by question (their SFT rows agree by construction). Run
#                  one arm a card: eight GRPO pipelines at 0.16 filled an H200 (benches/RESULTS.md,
#                  "Run 19"), and at 0.08 `train`'s engine held ~5 sequences, so a step played 64
#                  episodes in waves, ten times as slow ("Run 23"; `train` now warns)
#   TA_SEED        seed of synth, SFT and GRPO (0)
#   TA_GPU_UTIL    the engine's share of GPU memory in `eval` (0.9); `train`, whose engine shares
#                  the GPU with the trainer, gets a third of it (0.3, train's own default). Lower
#                  it to run databases side by side (TA_PARALLEL=2: 0.45)
#   TA_PARALLEL    pipelines at once (1: one database after another; N > 1: up to N in the
#                  background, each writing TA_OUT/NAME/bench.log)
#   TA_CHECK_LIMIT only the first N questions of each check set (smoke tests only; default all)
#   TA_CHECK_STEPS GRPO steps whose checkpoint adapters the check set also plays, after check/
#                  (space-separated step numbers, or `validated`: every step `train` validated,
#                  step 0, the SFT adapter, aside; default empty: none), each into check-step-N/
#                  beside SFT as check/ is (the base model's episodes from eval's cache, SFT's
#                  copied from check/, so only the step's adapter is played).
#                  A DIAGNOSTIC of how the people's accuracy moves across GRPO's steps, printed
#                  after the table: choosing a step by it would select on the check set, so the
#                  claims stay on grpo/final, the adapter chosen on the validation tasks
#   TA_CHECK_SAMPLED  K > 0: with GRPO, after check/, the check set again with K episodes a
#                  question at temperature 1.0 by SFT and SFT+GRPO (check-sampled/; no base model):
#                  pass@1 per question, compared by a paired bootstrap, for more power than one
#                  greedy episode a question gives (benches/RESULTS.md, run 25: the greedy SFT
#                  adapters of one recipe differ on a third of the demo's 88); 0: none (default 4)
#
# Every stage prints its elapsed seconds. Re-running continues: a finished stage is skipped
# (synth: summary.json; collect+curate: dataset/train.jsonl; sft: final/; train: .train-done;
# eval: check/eval.json; TA_CHECK_STEPS: check-step-N/eval.json; TA_CHECK_SAMPLED:
# check-sampled/eval.json), an interrupted one resumes
# (`collect` and `eval` keep finished episodes, `sft`/`train --resume`). A database that fails is
# recorded (TA_OUT/NAME/rc, its log) and the others go on; the script exits non-zero at the end if
# any failed.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# The settings and databases this bench shares with fit_natural.sh, and its Ctrl-C handling.
source "$root/benches/pipelines.sh"
SYNTH_N=${TA_SYNTH_N:-2000}
TRACES=${TA_TRACES:-1000}
SFT_EPOCHS=${TA_SFT_EPOCHS:-3}
STEPS=${TA_STEPS:-0}
FRONTIER=${TA_FRONTIER:-0}
FRONTIER_TASKS=${TA_FRONTIER_TASKS:-256}
GRPO_VALIDATION=${TA_GRPO_VALIDATION:-64}
SEED=${TA_SEED:-0}
SFT_FROM=${TA_SFT_FROM:-}
GPU_UTIL=${TA_GPU_UTIL:-0.9}
TRAIN_GPU_UTIL=$(python3 -c "print(round($GPU_UTIL / 3, 3))")
PARALLEL=${TA_PARALLEL:-1}
CHECK_STEPS=${TA_CHECK_STEPS:-}
CHECK_SAMPLED=${TA_CHECK_SAMPLED:-4}
[[ $CHECK_SAMPLED =~ ^[0-9]+$ ]] || { echo "TA_CHECK_SAMPLED: '$CHECK_SAMPLED' is not a number of episodes (0: none)" >&2; exit 2; }
for s in $CHECK_STEPS; do
  [[ $s == validated || $s =~ ^[1-9][0-9]*$ ]] || { echo "TA_CHECK_STEPS: '$s' is neither a GRPO step (1, 2, ...) nor 'validated'" >&2; exit 2; }
done
if [[ -n ${CHECK_STEPS// } ]] && (( STEPS == 0 )); then echo "TA_CHECK_STEPS checks GRPO's steps; set TA_STEPS > 0" >&2; exit 2; fi
# GRPO's group shape, learning rate and episodes at once (the demo's GPU profile: a step's 64
# episodes in one wave; at train's default 32, four pipelines to an H200 took 60-100 s a step).
GROUPS_PER_STEP=8 ROLLOUTS=8 GRPO_LR=${TA_GRPO_LR:-2e-5} GRPO_KL=${TA_GRPO_KL:-0.0} GRPO_EVAL_EVERY=${TA_GRPO_EVAL_EVERY:-0} GRPO_CONCURRENCY=128

TA_OUT=$(realpath -m "$TA_OUT")
case "$TA_OUT/" in
  "$root"/*) echo "TA_OUT ($TA_OUT) lies inside the repository; eval's trajectories hold the check set's questions, which never go there" >&2
    echo "hint: TA_OUT=/tmp/natural" >&2; exit 2 ;;
esac
mkdir -p "$TA_OUT"
if [[ -n ${TA_SCENARIOS_DIR:-} ]]; then TA_SCENARIOS_DIR=$(realpath "$TA_SCENARIOS_DIR"); fi

# What decides a database's SFT adapter and frontier (GRPO's settings are not among them), kept in
# TA_OUT/settings so that a TA_SFT_FROM run can check it starts from the SFT it means to pair with.
sft_settings() {
  local model=$TA_MODEL
  if [[ -e $model ]]; then model=$(realpath "$model"); fi
  printf '%s\n' "model=$model" "data=$TA_DATA" "scenarios_dir=${TA_SCENARIOS_DIR:-}" "synth_n=$SYNTH_N" \
    "paraphrase_teacher=${TA_PARAPHRASE_TEACHER:-}" "paraphrase_per_task=${TA_PARAPHRASE_PER_TASK:-2}" \
    "traces=$TRACES" "sft_epochs=$SFT_EPOCHS" "seed=$SEED" "frontier=$FRONTIER" "frontier_tasks=$FRONTIER_TASKS" \
    ${TA_VALUE_LOOKUPS:+"value_lookups=1"}
}
if [[ -n $SFT_FROM ]]; then
  SFT_FROM=$(realpath -m "$SFT_FROM")
  [[ $SFT_FROM != "$TA_OUT" ]] || { echo "TA_SFT_FROM is TA_OUT ($TA_OUT): give the run whose SFT to start from" >&2; exit 2; }
  [[ -d $SFT_FROM ]] || { echo "TA_SFT_FROM ($SFT_FROM): no such directory; start that run first" >&2; exit 2; }
  (( STEPS > 0 )) || { echo "TA_SFT_FROM starts GRPO from another run's SFT; set TA_STEPS > 0" >&2; exit 2; }
  if [[ -f $SFT_FROM/settings ]]; then
    differ=$(diff "$SFT_FROM/settings" <(sft_settings) | sed -n 's/^> \([a-z_]*\)=.*/\1/p' | tr '\n' ' ' || true)
    if [[ -n $differ ]]; then
      echo "TA_SFT_FROM ($SFT_FROM) made its SFT and frontier with other settings: ${differ% }" >&2
      echo "hint: give this run that run's TA_* settings; only GRPO's (TA_STEPS, TA_GRPO_LR, TA_GRPO_KL, TA_GRPO_EVAL_EVERY, TA_GRPO_VALIDATION) and the card's (TA_GPU_UTIL, TA_PARALLEL) may differ" >&2
      exit 2
    fi
  else
    echo "warning: $SFT_FROM/settings is missing (a run from before it was written): its SFT settings are not compared with this run's" >&2
  fi
fi
sft_settings > "$TA_OUT/settings"

# A server without SQL (fs, git) gets its tasks from `scenarios walk` on a seeded fixture, and
# its check set from benches/walk/fixtures.py (hand-written questions, answers computed from the
# fixture).
is_walked() { [[ $1 == fs || $1 == git ]]; }
third_party() {
  compgen -G "${TRAIN_AGENT_CACHE:-$HOME/.cache/train-agent}/third-party/$1-*/$2" | head -1 || true
}
TA_FS_SERVER=${TA_FS_SERVER:-$(third_party mcp-server-filesystem node_modules/.bin/mcp-server-filesystem)}
TA_GIT_SERVER=${TA_GIT_SERVER:-$(third_party mcp-server-git venv/bin/mcp-server-git)}

# TA_SFT_FROM: copies what run `$1` (one database's directory) made up to GRPO into `$2`, waiting
# for it while that pipeline runs, so the stages below find them done: its tasks (synth/,
# paraphrase/), the curated traces, the SFT adapter, the SFT check and, with TA_FRONTIER, the
# frontier. Copies, not links: this run stays whole when the other is deleted.
sft_from() {
  local src=$1 dst=$2 f need=(sft/final/adapter_config.json check-sft/eval.json)
  if (( FRONTIER > 0 )); then need+=(frontier.jsonl); fi
  if [[ -f $dst/sft/final/adapter_config.json ]]; then return 0; fi
  for f in "${need[@]}"; do
    until [[ -f $src/$f ]]; do
      if [[ -f $src/rc ]]; then echo "$src ended (exit $(cat "$src/rc")) without $f: nothing to start GRPO from" >&2; return 1; fi
      if [[ ! -d $src ]]; then echo "$src: no such directory (TA_SFT_FROM has no pipeline for this database)" >&2; return 1; fi
      stamp "waiting for $src/$f"; sleep 10
    done
  done
  for f in synth paraphrase dataset check-sft frontier.jsonl frontier-train.jsonl; do
    if [[ -e $src/$f ]]; then rm -rf "${dst:?}/$f"; cp -r "$src/$f" "$dst/$f"; fi
  done
  mkdir -p "$dst/sft"; rm -rf "$dst/sft/final"; cp -r "$src/sft/final" "$dst/sft/final"
  stamp "from $src: the SFT adapter, its check$( (( FRONTIER > 0 )) && echo ' and the frontier')"
}

# One database's pipeline; runs in a subshell with `set -e`, so its first failure ends it.
run_db() {
  local name=$1 d=$TA_OUT/$1 server questions scenarios t0
  server=$(server_of "$name"); questions=$(questions_of "$name")
  t0=$(date +%s)
  stamp() { echo "[$name $(( $(date +%s) - t0 )) s] $*"; }
  mkdir -p "$d"
  if is_walked "$name"; then
    if [[ ! -f $questions ]]; then
      stamp "fixture and check set"
      rm -rf "$d/fixture"
      python3 "$root/benches/walk/fixtures.py" "$name" "$d/fixture"
      python3 "$root/benches/walk/fixtures.py" check-set "$name" "$d/fixture" "$questions"
    fi
  elif [[ $name != demo ]]; then
    [[ -f $TA_DATA/$name.sqlite ]] || { echo "$TA_DATA/$name.sqlite: no such file" >&2; return 1; }
  fi
  [[ -f $questions ]] || { echo "$questions: no such file (TA_DATA=$TA_DATA)" >&2; return 1; }
  if [[ -n $SFT_FROM ]]; then sft_from "$SFT_FROM/$name" "$d"; fi

  # 1. The training tasks.
  if [[ -n ${TA_SCENARIOS_DIR:-} ]]; then
    scenarios=$TA_SCENARIOS_DIR/$name.jsonl
    [[ -f $scenarios ]] || { echo "$scenarios: no such file (TA_SCENARIOS_DIR)" >&2; return 1; }
    stamp "synth skipped: tasks from $scenarios"
  else
    scenarios=$d/synth/scenarios.jsonl
    if [[ -f $d/synth/summary.json ]]; then
      stamp "synth done earlier"
    else
      if is_walked "$name"; then
        stamp "walk on: $server"
        "$TA_BIN" scenarios walk --server "$server" --n "$SYNTH_N" --seed "$SEED" --out "$d/synth"
      else
        stamp "synth on: $server"
        "$TA_BIN" scenarios synth --server "$server" --n "$SYNTH_N" --seed "$SEED" ${TA_VALUE_LOOKUPS:+--value-lookups} --out "$d/synth"
      fi
    fi
    # The teacher's rewordings (their answers stay the SQL's), for SQL tasks only: a walked
    # task has no `sql` for the paraphrase's checks.
    if [[ -n ${TA_PARAPHRASE_TEACHER:-} ]] && ! is_walked "$name"; then
      if [[ -f $d/paraphrase/summary.json ]]; then
        stamp "paraphrase done earlier"
      else
        stamp "paraphrase by $TA_PARAPHRASE_TEACHER"
        # With GRPO on the frontier, the frontier's pool (the next TA_FRONTIER_TASKS) is
        # reworded too, so GRPO meets the teacher's wordings SFT never saw.
        local reword=$TRACES
        if (( STEPS > 0 && FRONTIER > 0 )); then reword=$(( TRACES + FRONTIER_TASKS )); fi
        "$TA_BIN" scenarios paraphrase --scenarios "$scenarios" --teacher "$TA_PARAPHRASE_TEACHER" \
          --per-task "${TA_PARAPHRASE_PER_TASK:-2}" --concurrency 128 --gpu-memory-utilization "$GPU_UTIL" \
          --limit "$reword" --solve --server "$server" --out "$d/paraphrase"
      fi
      scenarios=$d/paraphrase/scenarios.jsonl
    fi
  fi
  # The tools the check set is offered come from every walked task, also once GRPO trains on
  # the frontier's subset of them.
  local tasks=$scenarios n_train
  n_train=$(python3 -c 'import json,sys; print(sum(1 for l in open(sys.argv[1]) if l.strip() and json.loads(l).get("split") != "validation"))' "$scenarios")
  stamp "$n_train train tasks"

  # 2. Reference traces of the train split -> SFT.
  if [[ -f $d/dataset/train.jsonl ]]; then
    stamp "collect, curate done earlier"
  else
    stamp "collect"
    "$TA_BIN" collect --server "$server" --scenarios "$scenarios" --reference --split train \
      --limit "$TRACES" --out "$d/traces"
    stamp "curate"
    "$TA_BIN" curate "$d/traces" --dedupe --no-parquet --out "$d/dataset"
  fi
  local sft_final=$d/sft/final
  if [[ -f $sft_final/adapter_config.json ]]; then
    stamp "sft done earlier"
  else
    local resume=()
    if compgen -G "$d/sft/checkpoints/step-*/state.json" >/dev/null; then resume=(--resume); fi
    stamp "sft ${resume[*]}"
    "$TA_BIN" sft --dataset "$d/dataset" --base-model "$TA_MODEL" --out "$d/sft" \
      --epochs "$SFT_EPOCHS" --lr 2e-4 --seed "$SEED" "${resume[@]}"
    [[ -f $sft_final/adapter_config.json ]] || { echo "sft ended without $sft_final" >&2; return 1; }
  fi

  # The people's questions in one engine: `$2` (and the `--baseline`, `--compare-base` and
  # sampling options in the rest), greedy unless the rest says otherwise, into `$1`.
  check_eval() {
    local out=$1 model=$2; shift 2
    local limit=()
    if [[ -n ${TA_CHECK_LIMIT:-} ]]; then limit=(--limit "$TA_CHECK_LIMIT"); fi
    # A walked server's check set names no tools: both models are offered the read tools the
    # training tasks use, as they would be served (the server's writers are never offered).
    local tools=()
    if is_walked "$name"; then
      tools=(--tools "$(python3 -c 'import json,sys; print(",".join(sorted({t for l in open(sys.argv[1]) if l.strip() for t in json.loads(l).get("tools", [])})))' "$tasks")")
    fi
    stamp "eval on $questions ${tools[*]} -> $out"
    "$TA_BIN" eval --server "$server" --scenarios "$questions" --split all --model "$model" \
      --base-model "$TA_MODEL" "$@" --gpu-memory-utilization "$GPU_UTIL" \
      "${tools[@]}" "${limit[@]}" --out "$out"
  }

  # 3. GRPO from the SFT adapter on the same tasks.
  local trained=$sft_final baseline=()
  if (( STEPS > 0 )); then
    # SFT's result first (check-sft/): a lease or a run that ends during GRPO keeps it.
    if [[ -f $d/check-sft/eval.json || -f $d/check/eval.json ]]; then
      stamp "SFT's check done earlier"
    else
      check_eval "$d/check-sft" "$sft_final" --compare-base
    fi
    # The learnable frontier: the train tasks the SFT adapter solves sometimes but not always,
    # measured with TA_FRONTIER sampled episodes each; GRPO trains on those (and validates on
    # the validation split as before).
    if (( FRONTIER > 0 )); then
      if [[ -f $d/frontier.jsonl ]]; then
        stamp "frontier done earlier"
      else
        # Only train tasks SFT never saw (collect took the first $TRACES): a task the adapter was
        # trained on is solved from memory and says nothing about what GRPO could still teach.
        python3 -c 'import json,sys; t=[l for l in open(sys.argv[1]) if l.strip() and json.loads(l).get("split") != "validation"]; print("".join(t[int(sys.argv[2]):]), end="")' \
          "$scenarios" "$TRACES" > "$d/unseen-train.jsonl"
        local pool=$d/unseen-train.jsonl
        if [[ ! -s $pool ]]; then pool=$scenarios; stamp "every train task gave SFT a trace: the frontier is measured on them"; fi
        stamp "frontier: $FRONTIER sampled episodes of the SFT adapter on up to $FRONTIER_TASKS train tasks"
        "$TA_BIN" eval --server "$server" --scenarios "$pool" --split train --limit "$FRONTIER_TASKS" --model "$sft_final" \
          --base-model "$TA_MODEL" --rollouts "$FRONTIER" --temperature 1.0 --seed "$SEED" --gpu-memory-utilization "$GPU_UTIL" --out "$d/frontier-eval"
        "$TA_BIN" scenarios frontier --scenarios "$scenarios" --eval "$d/frontier-eval" --out "$d/frontier-train.jsonl"
        python3 -c 'import json,sys; [print(l, end="") for l in open(sys.argv[1]) if l.strip() and json.loads(l).get("split") == "validation"]' "$scenarios" \
          | cat "$d/frontier-train.jsonl" - > "$d/frontier.jsonl"
      fi
      scenarios=$d/frontier.jsonl
      n_train=$(python3 -c 'import json,sys; print(sum(1 for l in open(sys.argv[1]) if l.strip() and json.loads(l).get("split") != "validation"))' "$scenarios")
      stamp "$n_train frontier tasks"
    fi
    if [[ -f $d/.train-done ]]; then
      stamp "train done earlier"
    elif (( n_train == 0 )); then
      stamp "no train task on the frontier: no GRPO"
    else
      local resume=() epochs
      if [[ -f $d/grpo/config.toml ]]; then resume=(--resume); fi
      # Enough passes over the train split for every step.
      epochs=$(( (STEPS * GROUPS_PER_STEP + n_train - 1) / (n_train > 0 ? n_train : 1) ))
      stamp "train: $STEPS GRPO steps ${resume[*]}"
      # The train tasks, and the first GRPO_VALIDATION of the validation split.
      python3 -c 'import json,sys; n=int(sys.argv[2]); v=0
for l in open(sys.argv[1]):
    if not l.strip(): continue
    val=json.loads(l).get("split") == "validation"; v+=val
    if not val or n == 0 or v <= n: print(l, end="")' "$scenarios" "$GRPO_VALIDATION" > "$d/grpo-tasks.jsonl"
      # The check set plays the base model already; GRPO's validation of it (episodes that run
      # to the turn limit: 113 s of a pipeline in run 15) would only repeat that.
      printf '[rollout]\nvalidate_base = false\n[loss]\nbeta = %s\n' "$GRPO_KL" > "$d/grpo-settings.toml"
      "$TA_BIN" train --server "$server" --scenarios "$d/grpo-tasks.jsonl" --base-model "$TA_MODEL" --config "$d/grpo-settings.toml" \
        --init-adapter "$sft_final" --out "$d/grpo" --max-steps "$STEPS" --epochs "$(( epochs > 0 ? epochs : 1 ))" \
        --scenarios-per-step "$GROUPS_PER_STEP" --rollouts "$ROLLOUTS" --lr "$GRPO_LR" --seed "$SEED" --concurrency "$GRPO_CONCURRENCY" \
        --eval-every "$GRPO_EVAL_EVERY" --eval-rollouts 0 --gpu-memory-utilization "$TRAIN_GPU_UTIL" "${resume[@]}"
      touch "$d/.train-done"
    fi
    # No update (every group flat): GRPO's result is the SFT adapter itself.
    if [[ -f $d/grpo/final/adapter_config.json ]]; then trained=$d/grpo/final; else stamp "GRPO made no update: SFT+GRPO is the SFT adapter"; fi
    # train keeps the best validated adapter as final/ (final.json): say which step's it is.
    if [[ -f $d/grpo/final.json ]]; then
      stamp "$(python3 -c 'import json,sys; k=json.load(open(sys.argv[1])); print("grpo/final: step %s of %s (final_adapter = %s)" % (k["step"], k["last_step"], k["rule"]))' "$d/grpo/final.json")"
    fi
    baseline=(--baseline "$sft_final")
  fi

  # 4. The people's questions: base, SFT (and SFT+GRPO), greedy, in one engine.
  if [[ -f $d/check/eval.json ]]; then
    stamp "eval done earlier"
  else
    check_eval "$d/check" "$trained" --compare-base "${baseline[@]}"
  fi

  # 5. TA_CHECK_STEPS (a diagnostic): the check set on GRPO's step checkpoints, each beside SFT.
  if [[ -n ${CHECK_STEPS// } ]]; then
    local steps step adapter
    # `validated`: the steps of metrics.jsonl's validation rows (a line that is not JSON skipped,
    # as train's own reader does), step 0 (the SFT adapter, in check/ already) aside.
    steps=$(python3 -c 'import json,sys
def row(l):
    try: return json.loads(l)
    except ValueError: return {}
steps = {int(s) for s in sys.argv[2:] if s != "validated"}
if "validated" in sys.argv[2:]:
    try: lines = open(sys.argv[1]).readlines()
    except OSError: lines = []
    steps |= {r["step"] for r in map(row, lines) if "val_success" in r and r.get("step", 0) != 0}
print(" ".join(map(str, sorted(steps))))' "$d/grpo/metrics.jsonl" $CHECK_STEPS)
    [[ -n $steps ]] || stamp "TA_CHECK_STEPS ($CHECK_STEPS): no step to check"
    for step in $steps; do
      # train's checkpoint of a step (ta_trainer::checkpoint::checkpoint_dir), as keep.rs reads it.
      adapter=$d/grpo/checkpoints/step-$(printf '%06d' "$step")/adapter
      if [[ -f $d/check-step-$step/eval.json ]]; then
        stamp "check of step $step done earlier"
      elif [[ ! -f $adapter/adapter_config.json ]]; then
        stamp "step $step: no checkpoint adapter ($adapter): not checked"
      else
        # SFT's episodes are check/'s, handed over (eval keeps episodes it finds): played once,
        # and every step is paired with the same play of the SFT adapter as the main table.
        mkdir -p "$d/check-step-$step/trajectories"
        if [[ ! -f $d/check-step-$step/trajectories/baseline.jsonl && -f $d/check/trajectories/baseline.jsonl ]]; then
          cp "$d/check/trajectories/baseline.jsonl" "$d/check-step-$step/trajectories/"
        fi
        check_eval "$d/check-step-$step" "$adapter" --compare-base --baseline "$sft_final"
      fi
    done
  fi
  # 6. TA_CHECK_SAMPLED: the same questions sampled, SFT and SFT+GRPO, K episodes each.
  if (( STEPS > 0 && CHECK_SAMPLED > 0 )); then
    if [[ -f $d/check-sampled/eval.json ]]; then
      stamp "sampled check done earlier"
    else
      check_eval "$d/check-sampled" "$trained" "${baseline[@]}" --rollouts "$CHECK_SAMPLED" --temperature 1.0 --seed "$SEED"
    fi
  fi
  stamp "done"
}

# Runs one database and records its exit status in TA_OUT/NAME/rc; never fails itself. Both
# shells stop at a signal once their running command has kept what it finished (see on_signal).
run_one() {
  set +e
  trap 'stopped=1' INT TERM
  mkdir -p "$TA_OUT/$1"
  ( trap 'exit 130' INT TERM; set -e; run_db "$1" )
  local rc=$?
  if [[ -n ${stopped:-} ]] && (( rc == 0 )); then rc=130; fi
  echo "$rc" > "$TA_OUT/$1/rc"
  if (( rc != 0 )); then echo "[$1] FAILED (exit $rc); see $TA_OUT/$1/bench.log" >&2; fi
  return 0
}

# Ctrl-C or kill reaches the background pipelines (benches/pipelines.sh).
trap on_signal INT TERM

t_all=$(date +%s)
echo "natural check: $TA_MODEL, databases: $TA_DBS; out: $TA_OUT; synth $SYNTH_N, traces $TRACES, SFT $SFT_EPOCHS epochs, GRPO $STEPS steps, seed $SEED, parallel $PARALLEL"
for name in $TA_DBS; do
  mkdir -p "$TA_OUT/$name"; rm -f "$TA_OUT/$name/rc"
  # Always in the background (a trapped signal interrupts `wait`, not a foreground command).
  if (( PARALLEL > 1 )); then
    while (( $(jobs -rp | wc -l) >= PARALLEL )); do wait -n || true; done
    echo "[$name] started in the background; log: $TA_OUT/$name/bench.log"
    run_one "$name" >> "$TA_OUT/$name/bench.log" 2>&1 &
  else
    # tee ignores Ctrl-C, so the commands' last words reach the log instead of a SIGPIPE.
    run_one "$name" > >(trap '' INT TERM; exec tee -a "$TA_OUT/$name/bench.log") 2>&1 &
    wait $! || true
  fi
done
wait

failed=()
for name in $TA_DBS; do
  rc=$(cat "$TA_OUT/$name/rc" 2>/dev/null || echo missing)
  [[ $rc == 0 ]] || failed+=("$name (exit $rc; log $TA_OUT/$name/bench.log)")
done
echo "[all $(( $(date +%s) - t_all )) s] pipelines finished"
python3 "$root/benches/natural_check.py" "$TA_OUT" --json "$TA_OUT/natural_check.json" --outcomes "$TA_OUT/outcomes.json" || echo "natural_check.py found nothing to tabulate" >&2
if (( ${#failed[@]} > 0 )); then
  printf 'FAILED: %s\n' "${failed[@]}" >&2
  exit 1
fi
