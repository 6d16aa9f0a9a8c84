# Helpers shared by the recipes (sourced, not run). The calling recipe sets WORK and `set -euo pipefail`.

banner() { printf '\n==== %s ====\n' "$*"; }

# recipe_options SCRIPT ARGS...: the options every recipe takes. --dry-run sets (and exports) DRY_RUN=1;
# -h/--help prints SCRIPT's header comment.
recipe_options() {
  local script=$1 arg
  shift
  for arg in "$@"; do
    case $arg in
      --dry-run) DRY_RUN=1 ;;
      -h | --help) sed -n '2,/^set -euo/p' "$script" | sed '$d'; exit 0 ;;
      *) echo "unknown argument $arg (try --help)" >&2; exit 2 ;;
    esac
  done
  export DRY_RUN=${DRY_RUN:-0}
  require_environment
  preflight "$script" "$@"
}

# require_environment: the recipes run fairseq's commands and this project's tools from the Python
# environment that `make install` made. Another `python` (no environment activated) stops the recipe
# at once, saying what it lacks and how to go on, before any stage (in a dry run too).
require_environment() {
  local py=${PYTHON:-python} missing
  local how="activate the environment that \`make install\` made (source .venv/bin/activate)"
  if ! command -v "$py" > /dev/null; then
    echo "no $py on PATH: $how or set PYTHON" >&2
    exit 2
  fi
  missing=$("$py" -c 'import importlib.util as u, sys; print(" ".join(m for m in sys.argv[1:] if u.find_spec(m) is None))' \
    fairseq transformer_plugin transformer_plugin_cli sentencepiece sacremoses sacrebleu 2>&1) || missing="anything ($missing)"
  if [ -n "$missing" ]; then
    echo "$py ($(command -v "$py")) cannot import $missing: $how or set PYTHON to its python" >&2
    exit 2
  fi
  if ! command -v fairseq-train > /dev/null; then
    echo "fairseq-train is not on PATH: $how" >&2
    exit 2
  fi
}

# preflight SCRIPT ARGS...: before a real run does any work, SCRIPT runs once as a dry run; if a training
# stage would have to be redone (see stage), the recipe stops now, with nothing changed, saying why.
preflight() {
  [ "$DRY_RUN" = 0 ] && [ -z "${RECIPE_PREFLIGHT:-}" ] || return 0
  local plan
  plan=$(RECIPE_PREFLIGHT=1 DRY_RUN=1 bash "$@" --dry-run 2>&1) || return 0  # the real run reports its own failure
  if grep -q '^(a real run stops here: ' <<< "$plan"; then
    sed -n '/^(a real run stops here: /,/)$/p' <<< "$plan" | sed 's/^(a real run stops here: //; s/)$//' >&2
    FAILED_AT="stopped before any work (nothing was changed): a training stage would have to be redone"
    exit 3
  fi
}

# stage ID TITLE COMMAND...: run COMMAND once. A completed stage leaves a stamp, $WORK/.done/ID, holding
# the command line that made its outputs (every setting that reaches the command is on it) and the
# identity of its external inputs (input_identity). A re-run skips a stage whose stamp holds the same. A stage whose settings changed is redone, and
# so is every stage after it in the recipe (they read its outputs), except training: a training stage
# that would be redone stops the recipe before any work, naming what changed, because fairseq-train
# would continue the old checkpoints under the new settings (see stale_training). What changed is named
# by the recipe's variables where one explains it (VOCAB_SIZE was 500, now 1000: see settings), else by
# the words of the command line that changed. Delete a stamp (or
# $WORK) to redo a stage by hand. A failure stops the recipe, naming the stage. With DRY_RUN=1 nothing
# runs: every stage prints its command line instead, and whether a real run would skip it, redo it (and
# why) or stop there.
#
# No failure goes unsaid: inside a stage the recipe names the stage, elsewhere the file, line and command
# that failed (set -E: failures inside functions and command substitutions are caught too).
CURRENT_STAGE=""
FAILED_AT=""
REDONE=""  # the first stage redone in this run: every later one is redone too
REDONE_WHY=""  # why it is redone, for the stages after it
set -E
trap 'FAILED_AT="${BASH_SOURCE[0]:-$0}"; FAILED_AT="${FAILED_AT#"${REPO:-}"/} line $LINENO: $BASH_COMMAND"' ERR
trap 'status=$?
if [ $status -ne 0 ] && [ -n "$CURRENT_STAGE" ]; then echo "FAILED: stage $CURRENT_STAGE (exit $status)" >&2
elif [ $status -ne 0 ]; then echo "FAILED: ${FAILED_AT:-$0} (exit $status)" >&2; fi' EXIT
stage() {
  local id=$1 title=$2
  shift 2
  local stamp="$WORK/.done/$id" made_by done_by="" why="" recipe=() file
  for file in "${BASH_SOURCE[@]}"; do [ "$file" = "${BASH_SOURCE[0]}" ] || recipe+=("$file"); done  # not lib.sh
  printf -v made_by '%q ' "$@"
  made_by="${made_by% }$(input_identity "$@")"
  [ ! -f "$stamp" ] || done_by=$(cat "$stamp")
  banner "stage $id: $title"
  if [ -n "$done_by" ] && [ "$done_by" != "$made_by" ]; then
    why="$(changed_settings "$stamp.settings" "$done_by" "$made_by" "${recipe[@]}")"
    why=${why:-"its settings or inputs changed since it was done: $(changed_words "$done_by" "$made_by")"}
  elif [ -n "$done_by" ] && [ -n "$REDONE" ]; then
    why="stage $REDONE, whose outputs it reads, is redone${REDONE_WHY:+ ($REDONE_WHY)}"
  fi
  if [ -n "$done_by" ] && [ -z "$why" ]; then
    echo "done already with these settings: $([ "${DRY_RUN:-0}" = 1 ] && echo "a real run skips this stage" || echo "skipping")"
    [ "${DRY_RUN:-0}" = 1 ] || return 0
  else
    [ -n "$REDONE" ] || { REDONE=$id; REDONE_WHY=${why#its settings changed since it was done: }; }
    if [ -n "$why" ] && [ "$1" = train_workers ]; then
      stale_training "$id" "$why" "$@"  # a real run stops there
    elif [ -n "$why" ]; then
      echo "$([ "${DRY_RUN:-0}" = 1 ] && echo "a real run redoes this stage" || echo "redoing it"): $why"
    fi
  fi
  if [ "${DRY_RUN:-0}" = 1 ]; then
    case $1 in
      capture | train_workers) "$@" ;;
      *) show "$@" ;;
    esac
    return 0
  fi
  rm -f "$stamp"
  CURRENT_STAGE="$id: $title"
  "$@"
  mkdir -p "$WORK/.done"
  settings "${recipe[@]}" > "$stamp.settings"
  printf '%s\n' "$made_by" > "$stamp.tmp"
  mv "$stamp.tmp" "$stamp"
  CURRENT_STAGE=""
}

# settings FILE...: "NAME=value" for every variable that the recipe FILEs let the environment set
# (NAME=${NAME:-default}, or NAME=${TOY_NAME:-default} at toy size), with its value now, quoted.
settings() {
  local name
  grep -ohE '\b[A-Z][A-Z0-9_]*=\$\{[A-Z][A-Z0-9_]*:-' "$@" 2> /dev/null | sed 's/=.*//' | sort -u |
    while read -r name; do printf '%s=%q\n' "$name" "${!name-}"; done
}

# changed_settings SETTINGS BEFORE AFTER FILE...: the recipe variables (see settings) whose values differ
# from those saved in SETTINGS when a stage was done, and which explain how its command line changed
# from BEFORE to AFTER: "its settings changed since it was done: VOCAB_SIZE was 500, now 1000". Nothing
# when none does (an input outside WORK changed, or the recipe itself).
changed_settings() {
  local saved=$1 before=$2 after=$3 name old new found=""
  shift 3
  [ -f "$saved" ] || return 0
  local removed added
  removed=" $(words_only_in "$before" "$after" | paste -sd ' ') "
  added=" $(words_only_in "$after" "$before" | paste -sd ' ') "
  while IFS='=' read -r name new; do
    old=$(sed -n "s/^$name=//p" "$saved")
    [ "$old" != "$new" ] || continue
    { [ -n "$old" ] && [[ $removed == *" $old "* ]]; } || { [ -n "$new" ] && [[ $added == *" $new "* ]]; } || continue
    found="$found${found:+, }$name was ${old:-(empty)}, now ${new:-(empty)}"
  done < <(settings "$@")
  [ -z "$found" ] || echo "its settings changed since it was done: $found"
}

# input_identity ARGS...: for every argument that names an existing path outside $WORK and the repository
# (a recipe's external inputs: FROM's archives, TREEBANK), " PATH=" and a digest of the names, sizes and
# modification times of the files below it, so that a stamp also records the identity of its inputs.
input_identity() {
  local arg real work repo
  work=$(realpath -m "$WORK")
  repo=$(realpath -m "${REPO:-$(dirname "${BASH_SOURCE[0]}")/..}")
  for arg in "$@"; do
    [ -e "$arg" ] || continue
    real=$(realpath "$arg")
    case $real/ in "$work"/* | "$repo"/*) continue ;; esac
    printf ' %q=%s' "$arg" "$(find -L "$real" -type f -printf '%P %s %T@\n' 2> /dev/null | sort | md5sum | cut -c1-16)"
  done
}

# words_only_in A B: the words of command line A that B lacks, one per line, sorted.
words_only_in() {
  comm -23 <(tr ' ' '\n' <<< "$1" | sort -u) <(tr ' ' '\n' <<< "$2" | sort -u)
}

# changed_words BEFORE AFTER: the words of one command line that the other lacks, for a message.
changed_words() {
  local before after
  before=$(words_only_in "$1" "$2" | head -8 | paste -sd ' ')
  after=$(words_only_in "$2" "$1" | head -8 | paste -sd ' ')
  echo "was ${before:-(nothing)}, now ${after:-(nothing)}"
}

# stale_training ID WHY COMMAND...: a training stage that would have to be redone. Its checkpoints were made
# under other settings or from other data, and fairseq-train continues from checkpoint_last.pt: stop
# before any work and say how to go on (also in a dry run, which then says so and goes on).
stale_training() {
  local id=$1 why=$2 checkpoints=checkpoints  # fairseq's default --save-dir
  shift 2
  while [ $# -gt 0 ]; do [ "$1" != --save-dir ] || checkpoints=${2:-checkpoints}; shift; done
  local message="stage $id (training) was done, but $why. fairseq-train would continue its checkpoints under the new
settings. To train from scratch, delete $checkpoints and $WORK/.done/$id; to continue those checkpoints
deliberately (a larger MAX_UPDATE, say), delete $WORK/.done/$id only. Or set another WORK."
  if [ "${DRY_RUN:-0}" = 1 ]; then
    echo "(a real run stops here: $message)"
    return 0
  fi
  echo "$message" >&2
  CURRENT_STAGE="$id: done before, but $why"
  exit 3
}

# show COMMAND...: print COMMAND as a shell would read it back (for DRY_RUN)
show() {
  local quoted
  printf -v quoted '%q ' "$@"
  echo "+ ${quoted% }"
}

# capture FILE COMMAND...: COMMAND's standard output into FILE, which appears only when COMMAND succeeded.
capture() {
  local out=$1
  shift
  if [ "${DRY_RUN:-0}" = 1 ]; then
    show "$@"
    echo "  > $out"
    return 0
  fi
  "$@" > "$out.tmp"
  mv "$out.tmp" "$out"
}

free_port() {
  "${PYTHON:-python}" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# train_workers N LOG fairseq-train ARGS...: N data-parallel processes on this machine (gloo over
# TCP on 127.0.0.1, legacy_ddp: fairseq's c10d DDP rejects CPU models), each with an equal share of
# the CPU cores as torch threads. Rank 0 prints progress, also appended to LOG; rank r>0 writes
# LOG.rank<r>. If one worker fails, the others are stopped and the stage fails. N=1 runs COMMAND once
# (e.g. a launcher that starts its own processes: fairseq on GPUs, torchrun, srun), its output tee'd to LOG.
# On GPUs use --distributed-backend nccl, or torchrun (see the WMT recipes).
train_workers() {
  local n=$1 log=$2
  shift 2
  local dry=${DRY_RUN:-0}
  if [ "$n" -le 1 ]; then
    if [ "$dry" = 1 ]; then show "$@"; else "$@" 2>&1 | tee -a "$log"; fi
    return
  fi
  local threads=${OMP_NUM_THREADS:-$(( $(nproc) / n > 0 ? $(nproc) / n : 1 ))}
  local port=PORT r pids=()
  [ "$dry" = 1 ] || port=$(free_port)
  for ((r = 0; r < n; r++)); do
    local dist=(--distributed-world-size "$n" --distributed-rank "$r" --distributed-backend gloo
      --ddp-backend legacy_ddp --distributed-no-spawn --distributed-init-method "tcp://127.0.0.1:$port")
    if [ "$dry" = 1 ]; then
      show env OMP_NUM_THREADS="$threads" "$@" "${dist[@]}"
      continue
    elif [ "$r" -eq 0 ]; then
      OMP_NUM_THREADS=$threads "$@" "${dist[@]}" > >(tee -a "$log") 2>&1 &
    else
      OMP_NUM_THREADS=$threads "$@" "${dist[@]}" > "$log.rank$r" 2>&1 &
    fi
    pids+=($!)
  done
  [ "$dry" = 0 ] || return 0  # dry run: printed only
  local status=0 finished pid left
  while [ ${#pids[@]} -gt 0 ]; do  # the first worker to fail stops the others (bash >= 5.1)
    wait -n -p finished "${pids[@]}" || { status=$?; break; }
    left=()
    for pid in "${pids[@]}"; do [ "$pid" = "$finished" ] || left+=("$pid"); done
    pids=("${left[@]}")
  done
  if [ $status -ne 0 ]; then
    [ ${#pids[@]} -eq 0 ] || kill "${pids[@]}" 2> /dev/null || true  # a worker may have exited already
    wait 2> /dev/null || true
    echo "a training worker failed (exit $status): see $log and $log.rank*" >&2
    return $status
  fi
}

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
  flags=$("${PY:-python}" -m transformer_plugin_cli.paper "${options[@]}")
  mapfile -t flags_into <<< "$flags"
}

# ---- GPU and multi-machine training (the WMT14 and WSJ recipes) ----------------------------------
# Both read GPUS (per machine; 0: CPU workers), NNODES, LAUNCH (local | torchrun | slurm), CPU_WORKERS.

# gpu_count: the GPUs nvidia-smi lists on this machine (0 without one)
gpu_count() { (nvidia-smi -L 2> /dev/null || true) | grep -c '^GPU' || true; }

# precision_args PRECISION: sets PRECISION_ARGS to fairseq-train's flags for fp32 (the paper), fp16, bf16
# or amp (README, "Precision"); anything else stops the recipe before any work is done.
precision_args() {
  case $1 in
    fp32) PRECISION_ARGS=() ;;
    fp16) PRECISION_ARGS=(--fp16) ;;
    bf16) PRECISION_ARGS=(--bf16) ;;
    amp) PRECISION_ARGS=(--amp) ;;
    *) echo "PRECISION=$1: use fp32, fp16, bf16 or amp" >&2; exit 2 ;;
  esac
}

# plan_batch TOKENS_PER_UPDATE MAX_TOKENS_PER_DEVICE: sets DEVICES, UPDATE_FREQ and MAX_TOKENS so that
# MAX_TOKENS x DEVICES x UPDATE_FREQ ~ TOKENS_PER_UPDATE with MAX_TOKENS <= MAX_TOKENS_PER_DEVICE.
plan_batch() {
  local tokens=$1 cap=$2
  if [ "$LAUNCH" = local ] && [ "$NNODES" != 1 ]; then
    echo "NNODES=$NNODES: training on several machines needs LAUNCH=torchrun or LAUNCH=slurm" >&2; exit 2
  fi
  if [ "$GPUS" -gt 0 ]; then DEVICES=$((GPUS * NNODES)); else DEVICES=$CPU_WORKERS; fi
  UPDATE_FREQ=$(( (tokens + DEVICES * cap - 1) / (DEVICES * cap) ))
  MAX_TOKENS=$(( (tokens + DEVICES * UPDATE_FREQ - 1) / (DEVICES * UPDATE_FREQ) ))
  BATCH_SUMMARY="$DEVICES $([ "$GPUS" -gt 0 ] && echo GPUs || echo CPU workers) x --max-tokens $MAX_TOKENS"
  BATCH_SUMMARY+=" x --update-freq $UPDATE_FREQ = $((DEVICES * MAX_TOKENS * UPDATE_FREQ)) tokens per update"
}

# train_stage ID TITLE LOG FAIRSEQ_TRAIN_ARGS...: fairseq-train as a stage, on CPU workers (GPUS=0), on
# every GPU of this machine (LAUNCH=local: fairseq starts one process per GPU), or on NNODES machines:
# LAUNCH=torchrun (run the recipe on every machine with NODE_RANK=0..NNODES-1 and the same
# MASTER_ADDR; machines other than 0 stop after training) or LAUNCH=slurm (inside an allocation with
# --ntasks-per-node=GPUS; srun starts the tasks, fairseq reads SLURM's environment).
train_stage() {
  local id=$1 title=$2 log=$3
  shift 3
  if [ "$GPUS" -eq 0 ]; then
    stage "$id" "$title, $CPU_WORKERS CPU workers" train_workers "$CPU_WORKERS" "$log" fairseq-train "$@"
    return
  fi
  case $LAUNCH in
    local)
      stage "$id" "$title, $GPUS GPUs" train_workers 1 "$log" fairseq-train "$@" --distributed-world-size "$GPUS" ;;
    torchrun)
      stage "$id" "$title, $NNODES machines x $GPUS GPUs (torchrun, node ${NODE_RANK:?set NODE_RANK})" \
        train_workers 1 "$log.node$NODE_RANK" \
        torchrun --nnodes "$NNODES" --nproc-per-node "$GPUS" --node-rank "$NODE_RANK" \
          --master-addr "${MASTER_ADDR:?set MASTER_ADDR}" --master-port "${MASTER_PORT:-29500}" \
          "$(command -v fairseq-train || echo fairseq-train)" "$@" --distributed-world-size "$DEVICES"
      if [ "$NODE_RANK" != 0 ]; then
        echo "node $NODE_RANK: training done; node 0 averages, generates and scores"
        exit 0
      fi ;;
    slurm)
      stage "$id" "$title, $NNODES machines x $GPUS GPUs (srun)" train_workers 1 "$log" \
        srun --ntasks-per-node "$GPUS" fairseq-train "$@" \
          --distributed-world-size "$DEVICES" --distributed-port "${MASTER_PORT:-29500}" ;;
    *) echo "LAUNCH=$LAUNCH: use local, torchrun or slurm" >&2; exit 2 ;;
  esac
}
