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
  local py=${VENV_PYTHON:-python} missing
  local how="activate the environment that \`make install\` made (source .venv/bin/activate)"
  if ! command -v "$py" > /dev/null; then
    echo "no $py on PATH: $how or set VENV_PYTHON" >&2
    exit 2
  fi
  missing=$("$py" -c 'import importlib.util as u, sys; print(" ".join(m for m in sys.argv[1:] if u.find_spec(m) is None))' \
    fairseq transformer_plugin transformer_plugin_cli sentencepiece sacremoses sacrebleu 2>&1) || missing="anything ($missing)"
  if [ -n "$missing" ]; then
    echo "$py ($(command -v "$py")) cannot import $missing: $how or set VENV_PYTHON to its python" >&2
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

# stage [--clears DIR] ID TITLE COMMAND...: run COMMAND once. A completed stage leaves a stamp,
# $WORK/.done/ID (see stamp_dir), holding the command line that made its outputs (every setting that
# reaches the command is on it) and the identity of its external inputs (input_identity). A re-run skips a
# stage whose stamp holds the same, leaving out the options that change only how a stage runs
# (what_it_makes). A stage whose settings changed is redone, and so is every stage after it in the recipe
# (they read its outputs), except training: a training stage that would be redone stops the recipe before
# any work, naming what changed, because fairseq-train would continue the old checkpoints under the new
# settings (see stale_training). What changed is named by the recipe's variables where one explains it
# (VOCAB_SIZE was 500, now 1000: see settings), else by the words of the command line that changed.
# --clears DIR removes DIR before the stage runs: a tool that refuses an existing destination (as
# fairseq-preprocess does) or the leftovers of a failed run never meet it. Delete a stamp (or $WORK) to
# redo a stage by hand. A failure stops the recipe, naming the stage. With DRY_RUN=1 nothing runs: every
# stage prints its command line instead, and whether a real run would skip it, redo it (and why) or stop
# there.
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
  local clears=""
  if [ "$1" = --clears ]; then clears=$2; shift 2; fi
  local id=$1 title=$2
  shift 2
  local stamp made_by makes done_by="" why="" recipe=() file
  stamp="$(stamp_dir)/$id"
  for file in "${BASH_SOURCE[@]}"; do [ "$file" = "${BASH_SOURCE[0]}" ] || recipe+=("$file"); done  # not lib.sh
  printf -v made_by '%q ' "$@"
  made_by="${made_by% }$(input_identity "$@")"
  makes=$(what_it_makes "$made_by")
  [ ! -f "$stamp" ] || done_by=$(what_it_makes "$(cat "$stamp")")
  banner "stage $id: $title"
  if [ -n "$done_by" ] && [ "$done_by" != "$makes" ]; then
    why="$(changed_settings "$stamp.settings" "$done_by" "$makes" "${recipe[@]}")"
    why=${why:-"its settings or inputs changed since it was done: $(changed_words "$done_by" "$makes")"}
  elif [ -n "$done_by" ] && [ -n "$REDONE" ]; then
    why="stage $REDONE, whose outputs it reads, is redone${REDONE_WHY:+ ($REDONE_WHY)}"
  fi
  if [ -n "$done_by" ] && [ -z "$why" ]; then
    echo "done already with these settings: $([ "${DRY_RUN:-0}" = 1 ] && echo "a real run skips this stage" || echo "skipping")"
    [ "${DRY_RUN:-0}" = 1 ] || return 0
  else
    [ -n "$REDONE" ] || { REDONE=$id; REDONE_WHY=${why#its settings changed since it was done: }; }
    if [ -n "$why" ] && { [ "$1" = train_workers ] || [ "$1" = launch_training ]; }; then
      stale_training "$id" "$why" "$@"  # a real run stops there
    elif [ -n "$why" ]; then
      echo "$([ "${DRY_RUN:-0}" = 1 ] && echo "a real run redoes this stage" || echo "redoing it"): $why"
    fi
  fi
  if [ "${DRY_RUN:-0}" = 1 ]; then
    [ -z "$clears" ] || show rm -rf "$clears"
    case $1 in
      capture | train_workers | launch_training) "$@" ;;
      *) show "$@" ;;
    esac
    return 0
  fi
  rm -f "$stamp"
  CURRENT_STAGE="$id: $title"
  [ -z "$clears" ] || rm -rf "$clears"
  "$@"
  mkdir -p "$(dirname "$stamp")"
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
    # a variable explains the change only if the command lost its old value and gained its new one (an
    # empty value puts nothing on it): one whose value changed elsewhere (GPUS on another machine) is not named
    { [ -z "$old" ] || [[ $removed == *" $old "* ]]; } && { [ -z "$new" ] || [[ $added == *" $new "* ]]; } || continue
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

# what_it_makes STAMP: a stage's command line without the values of the options that change only how it
# runs, not what it makes, so that another value redoes nothing: the processes and threads of data
# preparation (PREP_WORKERS; sentencepiece's BPE is the same for any thread count, a unigram model's
# scores differ in the sixth digit and the one made stays, consistent with what was made from it), and
# where and how long the machines of a training wait for each other (MASTER_ADDR, MASTER_PORT, DIST_TIMEOUT).
# A stamp written before the data preparation moved to preprocess/ names its old modules: the same stage.
HOW_ONLY_OPTIONS="workers|threads|heartbeat-timeout|rdzv-conf|master-addr|master-port|distributed-port"
what_it_makes() {
  sed -E "s/ --($HOW_ONLY_OPTIONS) [^ ]+//g; s/transformer_plugin_cli\.(data|parsing)\.(wmt14|sentencepiece_vocab|synthetic_pair|debian_l10n|ptb) /preprocess.\2 /g" <<< "$1"
}

# stamp_dir: where this machine's stamps live. With LAUNCH=torchrun every machine runs the recipe on the
# same WORK: node 0's stamps are $WORK/.done (its data, training and evaluation), another node's
# $WORK/.done/node<NODE_RANK> (its training only), so that no node overwrites another's.
stamp_dir() {
  if [ "${LAUNCH:-local}" = torchrun ] && [ "${NODE_RANK:-0}" != 0 ]; then
    echo "$WORK/.done/node$NODE_RANK"
  else
    echo "$WORK/.done"
  fi
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
  if [ -z "$before$after" ]; then echo "the same words in another order"; else echo "was ${before:-(nothing)}, now ${after:-(nothing)}"; fi
}

# stale_training ID WHY COMMAND...: a training stage that would have to be redone. Its checkpoints were made
# under other settings or from other data, and fairseq-train continues from checkpoint_last.pt: stop
# before any work and say how to go on (also in a dry run, which then says so and goes on).
stale_training() {
  local id=$1 why=$2 checkpoints=checkpoints  # fairseq's default --save-dir
  shift 2
  while [ $# -gt 0 ]; do [ "$1" != --save-dir ] || checkpoints=${2:-checkpoints}; shift; done
  local stamp
  stamp="$(stamp_dir)/$id"
  local message="stage $id (training) was done, but $why. fairseq-train would continue its checkpoints under the new
settings. To train from scratch, delete $checkpoints and $stamp; to continue those checkpoints
deliberately (a larger MAX_UPDATE, say), delete $stamp only. Or set another WORK."
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
  "${VENV_PYTHON:-python}" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
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
# Both read GPUS (per machine; 0: CPU workers), CPU_WORKERS (per machine, when GPUS=0), NNODES, LAUNCH
# (local | torchrun | slurm), NODE_RANK, MASTER_ADDR, MASTER_PORT and DIST_TIMEOUT
# (docs/several-machines.md).

# gpu_count: the GPUs nvidia-smi lists on this machine (0 without one)
gpu_count() { (nvidia-smi -L 2> /dev/null || true) | grep -c '^GPU' || true; }

# cuda_devices: the CUDA devices torch sees here (what fairseq-train will use)
cuda_devices() { "${PY:-python}" -c 'import torch; print(torch.cuda.device_count())' 2> /dev/null || echo 0; }

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

# check_layout: stops the recipe before any work, naming the variables, where LAUNCH, NNODES, NODE_RANK,
# MASTER_ADDR, GPUS, CPU_WORKERS and DIST_TIMEOUT cannot work together; in a real run also where this
# machine has fewer CUDA devices than GPUS, or LAUNCH=slurm runs outside an allocation of NNODES nodes.
# Sets MASTER_PORT when empty: 29500, or under SLURM a port derived from the job id (jobs that share a
# node do not collide).
check_layout() {
  local bad="" seen real=$([ "${DRY_RUN:-0}" = 1 ] || echo 1)
  if [ -z "$MASTER_PORT" ]; then
    MASTER_PORT=29500
    [ "$LAUNCH" != slurm ] || [ -z "${SLURM_JOB_ID:-}" ] || MASTER_PORT=$((10000 + SLURM_JOB_ID % 50000))
  fi
  if ! [[ $LAUNCH =~ ^(local|torchrun|slurm)$ ]]; then bad="LAUNCH=$LAUNCH: use local, torchrun or slurm"
  elif ! [[ $NNODES =~ ^[1-9][0-9]*$ ]]; then bad="NNODES=$NNODES: the number of machines, 1 or more"
  elif ! [[ $GPUS =~ ^[0-9]+$ ]]; then bad="GPUS=$GPUS: GPUs per machine, or 0 for CPU workers"
  elif ! [[ $CPU_WORKERS =~ ^[1-9][0-9]*$ ]]; then bad="CPU_WORKERS=$CPU_WORKERS: processes per machine, 1 or more"
  elif ! [[ $DIST_TIMEOUT =~ ^[1-9][0-9]*$ ]]; then bad="DIST_TIMEOUT=$DIST_TIMEOUT: seconds, 1 or more"
  elif [ "$LAUNCH" = local ] && [ "$NNODES" != 1 ]; then
    bad="NNODES=$NNODES: training on several machines needs LAUNCH=torchrun or LAUNCH=slurm"
  elif [ "$LAUNCH" != torchrun ] && [ "$NODE_RANK" != 0 ]; then
    bad="NODE_RANK=$NODE_RANK with LAUNCH=$LAUNCH: only LAUNCH=torchrun runs the recipe on every machine"
  elif [ "$LAUNCH" = torchrun ] && ! { [[ $NODE_RANK =~ ^[0-9]+$ ]] && [ "$NODE_RANK" -lt "$NNODES" ]; }; then
    bad="NODE_RANK=$NODE_RANK: with NNODES=$NNODES, each machine's number, 0 to $((NNODES - 1))"
  elif [ "$LAUNCH" = torchrun ] && [ "$NNODES" -gt 1 ] && [ -z "$MASTER_ADDR" ]; then
    bad="LAUNCH=torchrun NNODES=$NNODES needs MASTER_ADDR: node 0's address, the same on every machine"
  elif [ -n "$real" ] && [ "$LAUNCH" = slurm ] && [ -z "${SLURM_JOB_ID:-}" ]; then
    bad="LAUNCH=slurm runs inside a SLURM allocation (sbatch or salloc): SLURM_JOB_ID is not set"
  elif [ -n "$real" ] && [ "$LAUNCH" = slurm ] && [ "${SLURM_JOB_NUM_NODES:-$NNODES}" != "$NNODES" ]; then
    bad="NNODES=$NNODES, but this SLURM allocation has $SLURM_JOB_NUM_NODES nodes (sbatch --nodes)"
  elif [ -n "$real" ] && [ "$GPUS" -gt 0 ] && seen=$(cuda_devices) && [ "$seen" -lt "$GPUS" ]; then
    bad="GPUS=$GPUS, but torch sees $seen CUDA devices on $(hostname): GPUS=0 trains on CPU_WORKERS processes"
  fi
  [ -n "$MASTER_ADDR" ] || MASTER_ADDR=127.0.0.1
  [ -z "$bad" ] || { echo "$bad" >&2; exit 2; }
}

# plan_batch TOKENS_PER_UPDATE MAX_TOKENS_PER_DEVICE: checks the layout (check_layout), then sets
# PER_NODE (processes per machine), DEVICES (in all), UPDATE_FREQ and MAX_TOKENS so that
# MAX_TOKENS x DEVICES x UPDATE_FREQ ~ TOKENS_PER_UPDATE with MAX_TOKENS <= MAX_TOKENS_PER_DEVICE.
plan_batch() {
  local tokens=$1 cap=$2
  check_layout
  if [ "$GPUS" -gt 0 ]; then PER_NODE=$GPUS; else PER_NODE=$CPU_WORKERS; fi
  DEVICES=$((PER_NODE * NNODES))
  UPDATE_FREQ=$(( (tokens + DEVICES * cap - 1) / (DEVICES * cap) ))
  MAX_TOKENS=$(( (tokens + DEVICES * UPDATE_FREQ - 1) / (DEVICES * UPDATE_FREQ) ))
  BATCH_SUMMARY="$DEVICES $([ "$GPUS" -gt 0 ] && echo GPUs || echo CPU workers)"
  [ "$NNODES" = 1 ] || BATCH_SUMMARY+=" ($NNODES machines x $PER_NODE)"
  BATCH_SUMMARY+=" x --max-tokens $MAX_TOKENS x --update-freq $UPDATE_FREQ"
  BATCH_SUMMARY+=" = $((DEVICES * MAX_TOKENS * UPDATE_FREQ)) tokens per update"
}

# data_stage [--clears DIR] ID TITLE COMMAND...: a stage whose outputs every machine reads (the data).
# Node 0 runs it (stage). With LAUNCH=torchrun every other node waits until node 0 has done it with the
# same settings (node 0's stamp), saying what it waits for, at most DIST_TIMEOUT seconds from its first
# wait; a stamp made with other settings stops it at once, naming the difference.
data_stage() {
  if [ "${LAUNCH:-local}" != torchrun ] || [ "${NODE_RANK:-0}" = 0 ]; then
    stage "$@"
    return
  fi
  [ "$1" != --clears ] || shift 2
  local id=$1 title=$2 stamp="$WORK/.done/$1" made_by done_by rest said=""
  shift 2
  printf -v made_by '%q ' "$@"
  made_by=$(what_it_makes "${made_by% }")
  banner "stage $id: $title (node 0's)"
  if [ "${DRY_RUN:-0}" = 1 ]; then
    echo "node $NODE_RANK waits until node 0 has done this stage ($stamp), at most DIST_TIMEOUT=$DIST_TIMEOUT s:"
    show "$@"
    return 0
  fi
  CURRENT_STAGE="$id: $title (node 0's)"
  DATA_DEADLINE=${DATA_DEADLINE:-$((SECONDS + DIST_TIMEOUT))}
  until [ -f "$stamp" ]; do
    if [ "$SECONDS" -ge "$DATA_DEADLINE" ]; then
      echo "node $NODE_RANK waited DIST_TIMEOUT=$DIST_TIMEOUT s for node 0's stage $id ($stamp): start node 0" \
        "first, on storage every machine sees, or prepare the data beforehand (DATA_ONLY=1 on node 0)" >&2
      exit 1
    fi
    [ -n "$said" ] || echo "node $NODE_RANK: waiting for node 0 to do this stage ($stamp), at most DIST_TIMEOUT=$DIST_TIMEOUT s"
    said=1
    sleep 2
  done
  done_by=$(what_it_makes "$(cat "$stamp")")
  rest=${done_by#"$made_by"}  # what remains is the identity of node 0's external inputs (input_identity)
  if [ "$rest" = "$done_by" ] || ! [[ -z $rest || $rest =~ ^( [^ ]+=[0-9a-f]{16})+$ ]]; then
    echo "node 0 did stage $id with other settings: $(changed_words "$done_by" "$made_by"). Run every machine" \
      "with the same variables and WORK" >&2
    exit 2
  fi
  echo "node 0 has done it with these settings"
  CURRENT_STAGE=""
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
# timeout) and in every collective (fairseq's --heartbeat-timeout, which the plugin also gives its process
# groups: transformer_plugin/patches/process_group_timeout.py).
train_stage() {
  local id=$1 title=$2 log=$3
  shift 3
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

# launch_training LOG LAUNCHER...: a launcher (torchrun, srun) that starts the training processes, its
# output appended to LOG. CPU workers get their share of the cores as torch threads (OMP_NUM_THREADS if
# set, else SLURM's --cpus-per-task, else this machine's cores over PER_NODE). When training fails, says
# why, from what the launcher printed (training_failure), and how to resume.
launch_training() {
  local log=$1
  shift
  if [ "${DRY_RUN:-0}" = 1 ]; then
    show "$@"
    return 0
  fi
  local from=0 status=0 threads=()
  [ ! -f "$log" ] || from=$(stat -c %s "$log")
  if [ "$GPUS" -eq 0 ]; then
    threads=(OMP_NUM_THREADS="${OMP_NUM_THREADS:-${SLURM_CPUS_PER_TASK:-$(( $(nproc) > PER_NODE ? $(nproc) / PER_NODE : 1 ))}}")
  fi
  env "${threads[@]}" "$@" 2>&1 | tee -a "$log" || status=$?
  if [ $status -ne 0 ]; then
    echo "training stopped: $(training_failure "$log" "$from"). Once the cause is gone, run the same command" \
      "again$([ "$LAUNCH" = torchrun ] && echo " on every machine")$([ "$LAUNCH" = slurm ] && echo " (sbatch)"):" \
      "training resumes from checkpoint_last.pt (full log: $log)" >&2
    return $status
  fi
}

# training_failure LOG OFFSET: what stopped a launcher, read from LOG after byte OFFSET.
training_failure() {
  local out peer tasks died
  out=$(tail -c "+$(($2 + 1))" "$1")
  tasks=$(grep -E '^srun: error: .*task [0-9]+: ' <<< "$out" | sed 's/^srun: error: //' || true)
  # A task that srun saw die by a signal of its own (Killed, Segmentation fault...) is the cause, whatever its
  # peers printed before srun ended them (Terminated): their lost connection is only its consequence.
  died=$(grep -vE 'task [0-9]+: (Terminated|Exited with exit code)' <<< "$tasks" | sed -n 1p || true)
  peer=$(grep -m1 -oE '\[[0-9A-Fa-f.:]+\]:[0-9]+:? Connection (reset|closed) by peer|Connection closed by peer \[[0-9A-Fa-f.:]+\]:[0-9]+' <<< "$out" |
    grep -oE '\[[0-9A-Fa-f.:]+\]' | tr -d '[]' || true)
  if [ -n "$died" ]; then
    echo "a task failed ($died), and srun ended the others"
  elif [ -n "$peer" ]; then
    echo "the connection to the worker at $peer was lost (it died, or its machine did: see that machine's log)"
  elif grep -q 'waiting for clients' <<< "$out"; then
    echo "not every machine joined torchrun's rendezvous at $MASTER_ADDR:$MASTER_PORT within DIST_TIMEOUT=$DIST_TIMEOUT s" \
      "(start the recipe on every machine, NODE_RANK=0 to $((NNODES - 1)))"
  elif grep -qE 'failed to connect to any network address|client socket has timed out' <<< "$out"; then
    echo "node 0's rendezvous at $MASTER_ADDR:$MASTER_PORT did not answer within DIST_TIMEOUT=$DIST_TIMEOUT s" \
      "(is the recipe running there with NODE_RANK=0, and is MASTER_ADDR its address?)"
  elif grep -qE 'Timed out waiting [0-9]+ms|Killing job for not making progress' <<< "$out"; then
    echo "no word from the other machines for DIST_TIMEOUT=$DIST_TIMEOUT s: a machine or the network between" \
      "them was lost (or one worker spent longer than that alone, writing a checkpoint: raise DIST_TIMEOUT)"
  elif [ -n "$tasks" ]; then
    echo "a task failed (${tasks%%$'\n'*}), and srun ended the others"
  elif grep -qE 'exitcode +: -?[0-9]+' <<< "$out"; then
    echo "a training process on this machine failed ($(grep -m1 -oE 'exitcode +: -?[0-9]+( \(pid: [0-9]+\))?( \(SIG[A-Z]+\))?' <<< "$out" | tr -s ' '))"
  else
    echo "fairseq-train failed"
  fi
}
