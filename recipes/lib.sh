# Helpers shared by the recipes (sourced, not run). The calling recipe sets WORK and `set -euo pipefail`.
#
# A recipe declares its stages (stage, data_stage, train_stage), then runs them (run_stages): the engine,
# transformer_plugin_cli/tools/recipe.py, decides every stage before any work (skip what is done with these
# settings, redo what changed and what reads it, stop before any work where a training stage would have to be
# redone), then runs them in order, each in a process group of its own that Ctrl-C or a `kill` of the recipe
# ends. With --dry-run it prints every stage's command and what a real run would do with it.

PY=${VENV_PYTHON:-python}
REPO=${REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
RECIPE_PLAN=()  # the stages declared since the last run_stages, as the engine reads them (NUL-separated)

banner() { printf '\n==== %s ====\n' "$*"; }

# recipe_options SCRIPT ARGS...: the options every recipe takes. --dry-run sets (and exports) DRY_RUN=1;
# --check decides every stage, runs none and exits 3 if a real run would stop (wmt14_table3.sh asks it of
# every row before any work); -h/--help prints SCRIPT's header comment.
recipe_options() {
  local script=$1 arg
  shift
  CHECK_ONLY=0
  for arg in "$@"; do
    case $arg in
      --dry-run) DRY_RUN=1 ;;
      --check) DRY_RUN=1; CHECK_ONLY=1 ;;
      -h | --help) sed -n '2,/^set -euo/p' "$script" | sed '$d'; exit 0 ;;
      *) echo "unknown argument $arg (try --help)" >&2; exit 2 ;;
    esac
  done
  export DRY_RUN=${DRY_RUN:-0}
  require_environment
}

# require_environment: the recipes run fairseq's commands and this project's tools from the Python
# environment that `make install` made. Another `python` (no environment activated) stops the recipe
# at once, saying what it lacks and how to go on, before any stage (in a dry run too).
require_environment() {
  local missing how="activate the environment that \`make install\` made (source .venv/bin/activate)"
  if ! command -v "$PY" > /dev/null; then
    echo "no $PY on PATH: $how or set VENV_PYTHON" >&2
    exit 2
  fi
  missing=$("$PY" -c 'import importlib.util as u, sys; print(" ".join(m for m in sys.argv[1:] if u.find_spec(m) is None))' \
    fairseq transformer_plugin transformer_plugin_cli sentencepiece sacremoses sacrebleu 2>&1) || missing="anything ($missing)"
  if [ -n "$missing" ]; then
    echo "$PY ($(command -v "$PY")) cannot import $missing: $how or set VENV_PYTHON to its python" >&2
    exit 2
  fi
  if ! command -v fairseq-train > /dev/null; then
    echo "fairseq-train is not on PATH: $how" >&2
    exit 2
  fi
}

# stage [--clears DIR] ID TITLE COMMAND...: COMMAND makes this stage's outputs, once. A completed stage
# leaves a stamp, $WORK/.done/ID (JSON): the command, the recipe's settings and the digests of its inputs
# outside WORK and the checkout. A later run skips a stage whose stamp says it was made by what it would
# make now: where the checkout, the environment and WORK lie, and the options that change only how a stage
# runs (processes, threads, addresses, timeouts), do not count. A stage whose settings or inputs changed is
# redone, and so is every stage after it (they read its outputs), except training: a training stage that
# would be redone stops the recipe before any work, naming what changed, because fairseq-train would
# continue the old checkpoints under the new settings. --clears DIR removes DIR before the stage runs: a
# tool that refuses an existing destination (as fairseq-preprocess does) or the leftovers of a failed run
# never meet it. Delete a stamp (or $WORK) to redo a stage by hand. COMMAND may start with one of the
# engine's own:
#   capture FILE COMMAND...           COMMAND's standard output into FILE, which appears only when it succeeded
#   train_workers N LOG fairseq-train ARGS...   N data-parallel CPU processes on this machine (gloo on
#                                     127.0.0.1), each with an equal share of the cores; rank 0's output also
#                                     appended to LOG, rank r's in LOG.rank<r>; the first that fails stops the
#                                     others. N=1 runs the command once (fairseq on GPUs), its output tee'd to LOG.
#   launch_training LOG LAUNCHER...   a launcher that starts the training processes (torchrun, srun), its output
#                                     appended to LOG; when it fails, the recipe says why, from what it printed
stage() { plan_stage run "$@"; }

# data_stage [--clears DIR] ID TITLE COMMAND...: a stage whose outputs every machine reads (the data). Node 0
# runs it (stage). With LAUNCH=torchrun every other node waits until node 0 has done it with the same settings
# (node 0's stamp), at most DIST_TIMEOUT seconds from its first wait; a stamp made with other settings stops
# it at once, naming the difference.
data_stage() { plan_stage data "$@"; }

plan_stage() {
  local kind=$1 clears=""
  shift
  if [ "$1" = --clears ]; then clears=$2; shift 2; fi
  RECIPE_PLAN+=(stage "$1" "$2" "$kind" "$clears" $(($# - 2)) "${@:3}")
}

# run_stages: the stages declared so far, decided and run (or, with --dry-run, shown) by the engine. A
# failure stops the recipe, the engine having said which stage failed, why, and how to resume.
run_stages() {
  local file name sources=() status=0
  for file in "${BASH_SOURCE[@]}"; do  # the recipe's files, not this one: its settings' names
    [ "$file" = "${BASH_SOURCE[0]}" ] || sources+=(source "$file")
  done
  "$PY" -m transformer_plugin_cli.tools.recipe run --work "$WORK" --repo "$REPO" --python "$PY" \
    --launch "${LAUNCH:-local}" --node-rank "${NODE_RANK:-0}" --dist-timeout "${DIST_TIMEOUT:-600}" --parent-pid $$ \
    $([ "${DRY_RUN:-0}" = 0 ] || echo --dry-run) $([ "${CHECK_ONLY:-0}" = 0 ] || echo --check) < <(
      printf '%s\0' "${RECIPE_PLAN[@]}" "${sources[@]}"
      for name in $(compgen -v); do
        [[ ! $name =~ ^[A-Z][A-Z0-9_]*$ ]] || printf 'var\0%s\0%s\0' "$name" "${!name-}"
      done) || status=$?
  RECIPE_PLAN=()
  if [ $status -ne 0 ]; then ENGINE_SAID=1; exit $status; fi
  [ "${CHECK_ONLY:-0}" = 0 ] || exit 0
}

# No failure goes unsaid: the engine names a stage that failed; elsewhere the file, line and command that
# failed are named (set -E: failures inside functions and command substitutions are caught too).
FAILED_AT=""
ENGINE_SAID=""
set -E
trap 'FAILED_AT="${BASH_SOURCE[0]:-$0}"; FAILED_AT="${FAILED_AT#"${REPO:-}"/} line $LINENO: $BASH_COMMAND"' ERR
trap 'status=$?
[ $status -eq 0 ] || [ -n "$ENGINE_SAID" ] || echo "FAILED: ${FAILED_AT:-$0} (exit $status)" >&2' EXIT

# ---- the paper's settings --------------------------------------------------------------------------
# paper_flags ARRAY training|decoding [OPTIONS]: sets ARRAY to the paper's fairseq flags, from their
# homes (transformer_plugin/config.py for Eq. (3) and label smoothing, transformer_plugin_cli/paper.py for
# Adam and beam search). An option given an empty value is left out: the paper's value then applies, so a
# recipe variable left empty (WARMUP=${WARMUP:-}) means "the paper's" without restating it.
#   paper_flags TRAINING training --warmup-updates "$WARMUP" --label-smoothing "$LABEL_SMOOTHING"
#   paper_flags DECODING decoding --beam "$BEAM" --lenpen "$LENPEN"
#   paper_flags DECODING decoding --parsing     # Section 6.3
paper_flags() {
  local -n flags_into=$1
  local flags options=()
  set -- "${@:2}"
  while [ $# -gt 0 ]; do
    if [[ $1 == --* ]] && [ $# -gt 1 ] && [ -z "$2" ]; then shift 2; else options+=("$1"); shift; fi
  done
  flags=$("$PY" -m transformer_plugin_cli.paper "${options[@]}")
  mapfile -t flags_into <<< "$flags"
}

# ---- binarizing and logging ------------------------------------------------------------------------
# binarize_stages ID WORKERS [--joined-dictionary]: fairseq-preprocess of $SPM/{train,valid,test}.sp.{$SRC,$TGT}
# into $BIN, as stage ID. With SHARDS=N > 1, for corpora too large for one binarization: the training text in N
# round-robin shards (preprocess/shards.py), one dictionary from all of it (--dict-only, in $BIN/dict), and
# each shard binarized with it into $BIN/shard<i>, valid and test into the first. Sets TRAIN_DATA (what
# fairseq-train reads: $BIN, or the shards colon-joined, one per epoch in turn) and EVAL_DATA (the directory
# holding the dictionaries, valid and test).
binarize_stages() {
  local id=$1 workers=$2 dict_args=("${@:3}") shards=${SHARDS:-1} i paths=() what
  what="fairseq-preprocess$([ ${#dict_args[@]} = 0 ] || echo " with a joined dictionary")"
  if ! [[ $shards =~ ^[1-9][0-9]*$ ]]; then echo "SHARDS=$shards: a number of shards, 1 or more" >&2; exit 2; fi
  if [ "$shards" = 1 ]; then
    data_stage --clears "$BIN" "$id" "$what" \
      fairseq-preprocess --source-lang "$SRC" --target-lang "$TGT" \
        --trainpref "$SPM/train.sp" --validpref "$SPM/valid.sp" --testpref "$SPM/test.sp" \
        "${dict_args[@]}" --destdir "$BIN" --workers "$workers"
    TRAIN_DATA=$BIN; EVAL_DATA=$BIN
    return
  fi
  data_stage --clears "$SPM/shards" "${id}a" "the training text in $shards shards (SHARDS), pair i in shard i mod $shards" \
    "$PY" -m preprocess.shards split --prefix "$SPM/train.sp" --langs "$SRC" "$TGT" --shards "$shards" --out "$SPM/shards"
  data_stage --clears "$BIN/dict" "${id}b" "one dictionary from all the training text, for every shard" \
    fairseq-preprocess --source-lang "$SRC" --target-lang "$TGT" --trainpref "$SPM/train.sp" "${dict_args[@]}" \
      --dict-only --destdir "$BIN/dict" --workers "$workers"
  for ((i = 0; i < shards; i++)); do
    local eval_sets=()
    [ $i != 0 ] || eval_sets=(--validpref "$SPM/valid.sp" --testpref "$SPM/test.sp")
    data_stage --clears "$BIN/shard$i" "${id}c-shard$i" "$what: shard $i of $shards$([ $i != 0 ] || echo ", valid and test")" \
      fairseq-preprocess --source-lang "$SRC" --target-lang "$TGT" --trainpref "$SPM/shards/train.sp.shard$i" \
        "${eval_sets[@]}" --srcdict "$BIN/dict/dict.$SRC.txt" --tgtdict "$BIN/dict/dict.$TGT.txt" --destdir "$BIN/shard$i" --workers "$workers"
    paths+=("$BIN/shard$i")
  done
  TRAIN_DATA=$(IFS=:; echo "${paths[*]}"); EVAL_DATA=$BIN/shard0
}

# log_interval MAX_UPDATE EVERY: fairseq-train's --log-interval, EVERY or less, so that even a short run
# logs its training loss (the report plots it) at least 10 times
log_interval() { local every=$(($1 / 10)); echo $((every < 1 ? 1 : every < $2 ? every : $2)); }

# ---- GPU and multi-machine training (the WMT14 and WSJ recipes) ----------------------------------
# Both read GPUS (per machine; 0: CPU workers), CPU_WORKERS (per machine, when GPUS=0), NNODES, LAUNCH
# (local | torchrun | slurm), NODE_RANK, MASTER_ADDR, MASTER_PORT and DIST_TIMEOUT
# (docs/several-machines.md).

# gpu_count: the GPUs nvidia-smi lists on this machine (0 without one)
gpu_count() { (nvidia-smi -L 2> /dev/null || true) | grep -c '^GPU' || true; }

# precision_args PRECISION: sets PRECISION_ARGS to fairseq-train's flags for fp32 (the paper), fp16, bf16
# or amp (docs/precision.md); anything else stops the recipe before any work is done.
precision_args() {
  case $1 in
    fp32) PRECISION_ARGS=() ;;
    fp16) PRECISION_ARGS=(--fp16) ;;
    bf16) PRECISION_ARGS=(--bf16) ;;
    amp) PRECISION_ARGS=(--amp) ;;
    *) echo "PRECISION=$1: use fp32, fp16, bf16 or amp" >&2; exit 2 ;;
  esac
}

# plan_batch TOKENS_PER_UPDATE MAX_TOKENS_PER_DEVICE: stops the recipe before any work, naming the variables,
# where LAUNCH, NNODES, NODE_RANK, MASTER_ADDR, GPUS, CPU_WORKERS and DIST_TIMEOUT cannot work together (in a
# real run also where this machine has fewer CUDA devices than GPUS, or LAUNCH=slurm runs outside an
# allocation of NNODES nodes); else sets PER_NODE (processes per machine), DEVICES (in all), UPDATE_FREQ and
# MAX_TOKENS so that MAX_TOKENS x DEVICES x UPDATE_FREQ ~ TOKENS_PER_UPDATE with MAX_TOKENS <=
# MAX_TOKENS_PER_DEVICE, BATCH_SUMMARY, and MASTER_ADDR and MASTER_PORT where empty (127.0.0.1; 29500, or
# under SLURM a port from the job id, so that jobs sharing a node do not collide).
plan_batch() {
  local assignments
  assignments=$("$PY" -m transformer_plugin_cli.tools.recipe layout --tokens "$1" --cap "$2" --launch "$LAUNCH" \
    --nnodes "$NNODES" --node-rank "$NODE_RANK" --master-addr "$MASTER_ADDR" --master-port "$MASTER_PORT" \
    --gpus "$GPUS" --cpu-workers "$CPU_WORKERS" --dist-timeout "$DIST_TIMEOUT" \
    $([ "${DRY_RUN:-0}" = 1 ] || echo --real)) || exit 2
  eval "$assignments"
}

# train_stage ID TITLE LOG FAIRSEQ_TRAIN_ARGS...: fairseq-train as a stage, with PER_NODE processes on each
# of NNODES machines: GPUS GPUs (nccl), or, with GPUS=0, CPU_WORKERS CPU workers (gloo; legacy_ddp, as
# fairseq's c10d DDP rejects CPU models).
#   LAUNCH=local     this machine: fairseq starts one process per GPU; CPU workers are started by train_workers
#   LAUNCH=torchrun  the recipe runs on every machine with its NODE_RANK and node 0's MASTER_ADDR; torchrun
#                    starts each machine's processes; machines other than node 0 stop after training
#   LAUNCH=slurm     the recipe runs once, as the job's batch script; srun starts PER_NODE tasks on each of
#                    the NNODES nodes, and ends them all when one fails (--kill-on-bad-exit)
# The machines wait for each other at most DIST_TIMEOUT seconds: in torchrun's rendezvous (--rdzv-conf
# timeout), in every collective (TRANSFORMER_PLUGIN_PROCESS_GROUP_TIMEOUT, which the plugin gives fairseq's
# process groups: transformer_plugin/patches/process_group_timeout.py) and between forward passes
# (fairseq's own --heartbeat-timeout).
train_stage() {
  local id=$1 title=$2 log=$3
  shift 3
  export TRANSFORMER_PLUGIN_PROCESS_GROUP_TIMEOUT=$DIST_TIMEOUT
  local kind="GPUs" worker_args=() wait_args=(--heartbeat-timeout "$DIST_TIMEOUT")
  if [ "$GPUS" -eq 0 ]; then
    kind="CPU workers"
    worker_args=(--cpu --distributed-backend gloo --ddp-backend legacy_ddp)
  fi
  case $LAUNCH in
    local)
      if [ "$GPUS" -eq 0 ]; then
        stage "$id" "$title, $CPU_WORKERS CPU workers" train_workers "$CPU_WORKERS" "$log" fairseq-train "$@"
      else
        stage "$id" "$title, $GPUS GPUs" train_workers 1 "$log" fairseq-train "$@" --distributed-world-size "$GPUS"
      fi ;;
    torchrun)
      stage "$id" "$title, $NNODES machines x $PER_NODE $kind (torchrun, node $NODE_RANK)" \
        launch_training "$log.node$NODE_RANK" \
          torchrun --nnodes "$NNODES" --nproc-per-node "$PER_NODE" --node-rank "$NODE_RANK" \
            --master-addr "$MASTER_ADDR" --master-port "$MASTER_PORT" --rdzv-conf "timeout=$DIST_TIMEOUT" \
            "$(command -v fairseq-train || echo fairseq-train)" "$@" --distributed-world-size "$DEVICES" \
            "${worker_args[@]}" "${wait_args[@]}"
      if [ "$NODE_RANK" != 0 ]; then
        run_stages
        echo "node $NODE_RANK: training done; node 0 averages, generates and scores"
        exit 0
      fi ;;
    slurm)
      stage "$id" "$title, $NNODES machines x $PER_NODE $kind (srun)" launch_training "$log" \
        srun --nodes "$NNODES" --ntasks-per-node "$PER_NODE" --kill-on-bad-exit=1 \
          fairseq-train "$@" --distributed-world-size "$DEVICES" --distributed-port "$MASTER_PORT" \
          "${worker_args[@]}" "${wait_args[@]}" ;;
  esac
}
