# Helpers shared by the recipes (sourced, not run). The calling recipe sets WORK and `set -euo pipefail`.
# A recipe declares its stages (stage, data_stage, train_stage), then runs them (run_stages): the engine,
# recipes/engine/, decides every stage before any work, then runs them in order, each in a
# process group of its own that Ctrl-C or a `kill` of the recipe ends. --dry-run prints every stage's command.

PY=${VENV_PYTHON:-python}
REPO=${REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
RECIPE_PLAN=()  # the stages declared since the last run_stages, as the engine reads them (NUL-separated)

banner() { printf '\n==== %s ====\n' "$*"; }

# recipe_options SCRIPT ARGS...: --dry-run (exports DRY_RUN=1); --check decides every stage, runs none, and exits 3
# if a real run would stop (wmt14_table3.sh asks it of every row); --explain (EXPLAIN=1): a recipe that picks settings
# says why, beside its short account; -h/--help prints SCRIPT's header comment, and where its variables are declared
# (recipes/planner/settings.py and paper_settings.py, under RECIPE_SETTINGS or SCRIPT's name) each with its default.
recipe_options() {
  local script=$1 arg
  shift
  RECIPE_COMMAND=("$script" "$@")  # what run_stages starts again after a re-pick
  CHECK_ONLY=0
  for arg in "$@"; do
    case $arg in
      --dry-run) DRY_RUN=1 ;;
      --check) DRY_RUN=1; CHECK_ONLY=1 ;;
      --explain) EXPLAIN=1 ;;
      -h | --help) sed -n '2,/^set -euo/p' "$script" | sed '$d'
        local table && table=$("$PY" -m recipes.planner settings "$(recipe_name)" 2> /dev/null) &&
          printf '\n%s\n' "$table"
        exit 0 ;;
      *) echo "unknown argument $arg (try --help)" >&2; exit 2 ;;
    esac
  done
  export DRY_RUN=${DRY_RUN:-0}
  EXPLAIN=${EXPLAIN:-0}
  require_environment
}

# recipe_name: the name the running recipe's variables are declared under (recipes/planner/declarations.py):
# RECIPE_SETTINGS, or the script's (wmt14_en_de_base).
recipe_name() { echo "${RECIPE_SETTINGS:-$(basename "$0" .sh)}"; }

# require_environment: the Python environment that `make install` made, or the recipe stops before any stage,
# saying what it lacks and how to go on (in a dry run too).
require_environment() {
  local missing how="activate the environment that \`make install\` made (source .venv/bin/activate)"
  command -v "$PY" > /dev/null || { echo "no $PY on PATH: $how or set VENV_PYTHON" >&2; exit 2; }
  missing=$("$PY" -c 'import importlib.util as u, sys; print(" ".join(m for m in sys.argv[1:] if u.find_spec(m) is None))' \
    fairseq transformer_plugin transformer_plugin_cli sentencepiece sacremoses sacrebleu 2>&1) || missing="anything ($missing)"
  [ -z "$missing" ] || { echo "$PY ($(command -v "$PY")) cannot import $missing: $how or set VENV_PYTHON to its python" >&2; exit 2; }
  command -v fairseq-train > /dev/null || { echo "fairseq-train is not on PATH: $how" >&2; exit 2; }
}

# stage [--clears DIR] [--reads PATH]... [--writes PATH]... ID TITLE COMMAND...: COMMAND makes this stage's
# outputs, once; a completed stage leaves a stamp, $WORK/.done/ID. A later run skips a stage made by what it would
# make now (its command, less where the checkout, the environment and WORK lie and how it runs, and the content
# of the files it reads from outside WORK), and redoes a stage whose command or inputs changed, with every stage
# that reads its outputs; a training stage that would be redone stops the recipe before any work, naming what
# changed. A stage reads the paths its command names and those given with --reads (a corpus given as a prefix,
# say); it writes what its command names with an output option (--out, --destdir, --save-dir, ...), --clears DIR
# (removed before it runs) and what --writes declares. COMMAND may start with one of the engine's verbs (capture
# FILE, train_workers N LOG, launch_training LOG): recipes/engine/verbs.py.
stage() { plan_stage run "$@"; }

# data_stage ...: as stage, for the data every machine reads. With LAUNCH=torchrun every node other than 0 waits
# until node 0 has done it with the same settings, at most DIST_TIMEOUT seconds from its first wait.
data_stage() { plan_stage data "$@"; }

plan_stage() {
  local kind=$1 clears="" reads=() writes=()
  shift
  while true; do
    case $1 in
      --clears) clears=$2; shift 2 ;;
      --reads) reads+=("$2"); shift 2 ;;
      --writes) writes+=("$2"); shift 2 ;;
      *) break ;;
    esac
  done
  RECIPE_PLAN+=(stage "$1" "$2" "$kind" "$clears" ${#reads[@]} "${reads[@]}" ${#writes[@]} "${writes[@]}" $(($# - 2)) "${@:3}")
}

# recipe_variables: every variable whose name is in capitals, as NUL-separated records (var NAME VALUE): how the
# recipe's settings reach the engine and the plan, as data.
recipe_variables() {
  local name
  for name in $(compgen -v); do
    [[ ! $name =~ ^[A-Z][A-Z0-9_]*$ ]] || printf 'var\0%s\0%s\0' "$name" "${!name-}"
  done
}

# run_stages: the stages declared so far, decided and run (or shown) by the engine, which says what failed.
run_stages() {
  local file sources=() status=0
  for file in "${BASH_SOURCE[@]}"; do  # the recipe's files, not this one: a recipe not declared, its settings' names
    [ "$file" = "${BASH_SOURCE[0]}" ] || sources+=(source "$file")
  done
  "$PY" -m recipes.engine run --recipe "$(recipe_name)" --work "$WORK" --repo "$REPO" --python "$PY" \
    --launch "${LAUNCH:-local}" --node-rank "${NODE_RANK:-0}" --dist-timeout "${DIST_TIMEOUT:-600}" --parent-pid $$ \
    $([ "${DRY_RUN:-0}" = 0 ] || echo --dry-run) $([ "${CHECK_ONLY:-0}" = 0 ] || echo --check) < <(
      printf '%s\0' "${RECIPE_PLAN[@]}" "${sources[@]}"
      recipe_variables) || status=$?
  RECIPE_PLAN=()
  # 75: a training stopped for its model to be picked again (recipes/planner/repick.py): the recipe starts again,
  # once, with the same variables (REPROBE=1's probes are those of the first start)
  if [ $status -eq 75 ] && [ -z "${RECIPE_REPICKED:-}" ]; then
    banner "the model picked again for the time left"
    exec env RECIPE_REPICKED=1 bash "${RECIPE_COMMAND[@]}"
  fi
  if [ $status -ne 0 ]; then ENGINE_SAID=1; exit $status; fi
  [ "${CHECK_ONLY:-0}" = 0 ] || exit 0
}

# No failure goes unsaid: the engine names a stage that failed; elsewhere the file, line and command are named.
FAILED_AT="" ENGINE_SAID=""
set -E
trap 'FAILED_AT="${BASH_SOURCE[0]:-$0}"; FAILED_AT="${FAILED_AT#"${REPO:-}"/} line $LINENO: $BASH_COMMAND"' ERR
trap 'status=$?
[ $status -eq 0 ] || [ -n "$ENGINE_SAID" ] || echo "FAILED: ${FAILED_AT:-$0} (exit $status)" >&2' EXIT

# ---- the paper's settings --------------------------------------------------------------------------
# paper_flags ARRAY training|decoding [OPTIONS]: ARRAY set to the paper's fairseq flags (transformer_plugin_cli/
# paper.py). An option given an empty value is left out, so a variable left empty means "the paper's":
#   paper_flags TRAINING training --warmup-updates "$WARMUP"; paper_flags DECODING decoding --parsing  # Section 6.3
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
# into $BIN. SHARDS=N > 1: the training text in N round-robin shards, one dictionary from all of it ($BIN/dict),
# each shard into $BIN/shard<i>, valid and test into the first. Sets TRAIN_DATA (fairseq-train's: $BIN, or the
# shards colon-joined, one per epoch in turn) and EVAL_DATA (dictionaries, valid and test).
binarize_stages() {
  local id=$1 workers=$2 dict_args=("${@:3}") shards=${SHARDS:-1} i paths=() what
  what="fairseq-preprocess$(case " ${dict_args[*]} " in *" --srcdict "*) echo " with the given dictionaries" ;; *" --joined-dictionary "*) echo " with a joined dictionary" ;; esac)"
  if ! [[ $shards =~ ^[1-9][0-9]*$ ]]; then echo "SHARDS=$shards: a number of shards, 1 or more" >&2; exit 2; fi
  if [ "$shards" = 1 ]; then
    data_stage --clears "$BIN" "$id" "$what" fairseq-preprocess --source-lang "$SRC" --target-lang "$TGT" \
      --trainpref "$SPM/train.sp" --validpref "$SPM/valid.sp" --testpref "$SPM/test.sp" "${dict_args[@]}" --destdir "$BIN" --workers "$workers"
    TRAIN_DATA=$BIN EVAL_DATA=$BIN
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

# log_interval MAX_UPDATE EVERY: --log-interval, EVERY or less: even a short run logs its loss 10 times or more
log_interval() { local every=$(($1 / 10)); echo $((every < 1 ? 1 : every < $2 ? every : $2)); }

# ---- GPU and multi-machine training: GPUS, CPU_WORKERS, LAUNCH, NNODES, ... (docs/several-machines.md) -----

# cores: the cores this recipe may use (its affinity), for the data stages' processes and threads. Not plain nproc,
# which answers OMP_NUM_THREADS where it is set: OMP_NUM_THREADS=1 (meant for torch) gave every stage one process.
cores() { env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc; }

# gpu_count: the GPUs nvidia-smi lists on this machine (0 without one)
gpu_count() { (nvidia-smi -L 2> /dev/null || true) | grep -c '^GPU' || true; }

# plan_read FILE: the fields a plan wrote to FILE (NUL-separated records: s NAME VALUE, or a NAME COUNT WORD...) set
# as PLAN_* variables, scalars and arrays: read as data, never evaluated as code, and never one of the user's.
plan_read() {
  local kind name count value words
  while IFS= read -r -d '' kind && IFS= read -r -d '' name; do
    [[ $name =~ ^PLAN_[A-Z0-9_]+$ ]] || { echo "$1: '$name' is not a field of the plan (PLAN_*)" >&2; exit 2; }
    if [ "$kind" = s ]; then
      IFS= read -r -d '' value && printf -v "$name" '%s' "$value"
    else
      IFS= read -r -d '' count && words=()
      for ((; count > 0; count--)); do IFS= read -r -d '' value && words+=("$value"); done
      local -n into=$name && into=("${words[@]}") && unset -n into
    fi
  done < "$1"
}

# plan_run [COMMAND ARGS...]: the recipe's plan (recipes/planner/), decided once in Python from the recipe's variables
# (every name in capitals, handed over as data), its fields then set as PLAN_* variables (plan_read: PLAN_MAX_UPDATE,
# PLAN_ARCH, ...), the user's own left as given; it stops the recipe before any work, naming what cannot work.
# COMMAND: decide (parallel_text.sh and finetune.sh, the default) or layout (the batch's layout alone: PLAN_PER_NODE,
# PLAN_DEVICES, PLAN_UPDATE_FREQ, PLAN_MAX_TOKENS, PLAN_BATCH_SUMMARY, PLAN_MASTER_ADDR, PLAN_MASTER_PORT, and
# PLAN_PRECISION_ARGS, fairseq-train's flags for PRECISION). Both check the choices declared for the recipe (PRECISION).
plan_run() {
  local fields status=0
  fields=$(mktemp)
  "$PY" -m recipes.planner "${@:-decide}" --recipe "$(recipe_name)" --work "$WORK" --fields "$fields" \
    $([ "${DRY_RUN:-0}" = 0 ] || echo --dry-run) \
    < <(recipe_variables) || status=$?
  [ $status -eq 0 ] || { rm -f "$fields"; exit $status; }
  plan_read "$fields"
  rm -f "$fields"
}

# train_stage ID TITLE LOG FAIRSEQ_TRAIN_ARGS...: fairseq-train with PLAN_PER_NODE processes on each of NNODES machines
# (GPUS GPUs; GPUS=0: CPU_WORKERS processes, gloo). LAUNCH=local: fairseq's own processes, or the engine's CPU
# workers; torchrun: the recipe on every machine, nodes other than 0 stop after training; slurm: the recipe is the
# batch script, srun starts the tasks. The machines wait for each other at most DIST_TIMEOUT seconds (rendezvous,
# collectives, heartbeat). Sets TRAIN_LOG: LOG, or with torchrun LOG.node<NODE_RANK>. torchrun runs as the recipe's
# python (`$PY -m torch.distributed.run`): a torchrun of another environment on PATH would start its workers with
# a python that has no fairseq (seen on a GPU machine whose torch came from the system's environment).
train_stage() {
  local id=$1 title=$2 log=$3 && shift 3
  TRAIN_LOG=$log && [ "$LAUNCH" != torchrun ] || TRAIN_LOG=$log.node$NODE_RANK
  export TRANSFORMER_PLUGIN_PROCESS_GROUP_TIMEOUT=$DIST_TIMEOUT
  local kind="GPUs" worker_args=() wait_args=(--heartbeat-timeout "$DIST_TIMEOUT")
  [ "$GPUS" -ne 0 ] || { kind="CPU workers"; worker_args=(--cpu --distributed-backend gloo --ddp-backend legacy_ddp); }
  case $LAUNCH in
    local) if [ "$GPUS" -eq 0 ]; then stage "$id" "$title, $CPU_WORKERS CPU workers" train_workers "$CPU_WORKERS" "$log" fairseq-train "$@"
      else stage "$id" "$title, $GPUS GPUs" train_workers 1 "$log" fairseq-train "$@" --distributed-world-size "$GPUS"; fi ;;
    torchrun)
      stage "$id" "$title, $NNODES machines x $PLAN_PER_NODE $kind (torchrun, node $NODE_RANK)" \
        launch_training "$TRAIN_LOG" \
          "$PY" -m torch.distributed.run --nnodes "$NNODES" --nproc-per-node "$PLAN_PER_NODE" --node-rank "$NODE_RANK" \
            --master-addr "$PLAN_MASTER_ADDR" --master-port "$PLAN_MASTER_PORT" --rdzv-conf "timeout=$DIST_TIMEOUT" \
            "$(command -v fairseq-train || echo fairseq-train)" "$@" --distributed-world-size "$PLAN_DEVICES" \
            "${worker_args[@]}" "${wait_args[@]}"
      [ "$NODE_RANK" = 0 ] || { run_stages; echo "node $NODE_RANK: training done; node 0 averages, generates and scores"; exit 0; } ;;
    slurm)
      stage "$id" "$title, $NNODES machines x $PLAN_PER_NODE $kind (srun)" launch_training "$log" \
        srun --nodes "$NNODES" --ntasks-per-node "$PLAN_PER_NODE" --kill-on-bad-exit=1 \
          fairseq-train "$@" --distributed-world-size "$PLAN_DEVICES" --distributed-port "$PLAN_MASTER_PORT" \
          "${worker_args[@]}" "${wait_args[@]}" ;;
  esac
}
