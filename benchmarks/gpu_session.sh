#!/usr/bin/env bash
# One short session on a lent CUDA machine, prepared in advance: install, check, measure, each part
# under its own time limit, everything written under OUT as it goes (a part cut short still leaves
# its log). For a machine with no network and a Python that has torch but not fairseq:
#
# (docs/gpu-sessions.md: what to carry, what each part does)
#
#   bash benchmarks/gpu_session.sh OUT                  # every phase: about 10 minutes, more than DEADLINE's 9
#   bash benchmarks/gpu_session.sh OUT profile speed    # install, then the named phases in that order
#   bash benchmarks/gpu_session.sh OUT recipes time speed-big   # the parallel-text recipe on the GPU, TIME's check
#   PROFILES="vaswani vaswani@65536" bash benchmarks/gpu_session.sh OUT profile   # the profile's runs chosen
#
# On an H200 (2026-11-27) install took 40 s, checks 179 s, speed 296 s; on an H100 the same day, install 32-45 s,
# each profile run 37-65 s, torchrun 117 s, speed-big 201 s; on an H200 (2026-11-28) install 35-38 s, the recipes
# phase's GPU tier 172 s and the time check's data 72 s (its toy runs cut at 240 s, and time at 170 and 240 s, by
# cuDNN's attention graphs, since left out: docs/precision.md). A part that the deadline reaches is cut
# (its log kept) or listed in summary.md as not run.
#
# What it needs beside the working tree (ignored by git, carried there):
#   .whl/             wheels for Python 3.12: fairseq-fixed 0.12.3.1 (its cp312 wheel, the sdist as a fallback),
#                     hydra-core, omegaconf, antlr4-python3-runtime, bitarray, sacremoses, tensorboardX, py3langid
#   runs/bench/data-bin   the speed benchmark's data (python -m benchmarks.speed makes it on first use)
#   runs/gpu/de_77k   the learning benchmark's corpus, for recipes and time: the six text files of
#                     runs/budgets/data/de_77k (python -m benchmarks.budgets corpora --out runs/budgets/data, from
#                     Debian's packages; not its debs/, 400 MB): mkdir -p runs/gpu/de_77k &&
#                     cp runs/budgets/data/de_77k/{train,valid,test}.{en,de} runs/gpu/de_77k/
# made here with (antlr4's runtime is an sdist only; fairseq's sdist needs --no-build-isolation to be fetched):
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp -d .whl \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#     fairseq-fixed==0.12.3.1 hydra-core==1.3.2 omegaconf==2.3.0 bitarray==3.12.3 sacremoses==0.2.0 \
#     tensorboardX==2.6.5 py3langid==0.4.0
#   pip wheel --no-deps -w .whl antlr4-python3-runtime==4.9.3
#   pip download --no-deps --no-binary=:all: --no-build-isolation -d .whl fairseq-fixed==0.12.3.1
#
# Phases (in this order):
#   install  a venv over the machine's Python (its torch seen through a .pth file), the wheels
#            without network, this plugin; fairseq's extensions checked against that torch
#   checks   side by side (the GPU is shared, nothing is timed): the GPU tier (tests/gpu), the attention
#            kernel survey at base and big size, and the WMT14 toy recipe on the GPU twice: PRECISION=bf16,
#            then LAUNCH=torchrun PRECISION=fp16 (the nccl launcher's path)
#   torchrun the WMT14 toy recipe with LAUNCH=torchrun PRECISION=fp16 alone (the nccl launcher's path)
#   recipes  side by side (nothing timed): the GPU tier, the parallel-text recipe at toy size on the GPU with
#            PRECISION=bf16 and with PRECISION=amp (its speed probe under autocast), on 20,000 of CORPUS's pairs,
#            and the data stages of the time check
#   time     alone on the GPU: TIME's check (benchmarks.time_check): the speed probe's seconds an update against
#            fairseq-train's, for the short budget's model and the small class's, UPDATES_TIME updates each, bf16
#   speed    alone on the GPU: benchmarks.speed in bfloat16 at big, then base size, against fairseq's transformer
#            (speed-big, speed-base: one of them); after big, the decoding profile of its models (benchmarks.decoding_
#            profile: calls and reads a decoding step, sentences/s, the tensor beam search against fairseq's loop)
#   plan     alone on the GPU: a speed file of every candidate model written on it (vaswani-speed-probe file, bf16, a
#            vocabulary of 8,000), then TIME=PLAN_TIME of the parallel-text recipe on CORPUS planned with that file,
#            and benchmarks.plan_check: the updates and seconds planned beside those trained (SESSION_GPUS=0: no
#            speed file, the recipe's own probe of the CPU)
#   validation  alone on the GPU: a dev token scored and translated at beam 4 against a training token
#            (benchmarks.validation_cost: the plan's VALID_TOKEN_COST and BEAM_TOKEN_COST, measured on CPU only)
#   profile  alone on the GPU: where a training step's time goes at big size (benchmarks.step_profile), a run
#            for each of PROFILES: by default both models, ours with eager layers (--compile-layers off), and ours
#            with every lever off (eager layers and loss, fairseq's per-tensor Adam and master-weight copies)
# OUT gets summary.md (each part: status and seconds), results.md (every table) and logs.tar.gz (three
# files: what such a machine sends back is a few files).
set -uo pipefail

OUT=${1:?usage: bash benchmarks/gpu_session.sh OUT [checks] [torchrun] [recipes] [time] [plan] [speed|speed-big|speed-base] [profile]}
shift
PHASES=("$@")
[ ${#PHASES[@]} -gt 0 ] || PHASES=(checks speed profile)
for phase in "${PHASES[@]}"; do
  case $phase in checks | torchrun | recipes | time | plan | speed | speed-big | speed-base | profile) ;;
    *) echo "unknown phase $phase: checks, torchrun, recipes, time, plan, speed, speed-big, speed-base or profile" >&2; exit 2 ;; esac
done
SYSTEM_PYTHON=${SYSTEM_PYTHON:-python3}   # the machine's Python, with torch
VENV=${VENV:-/tmp/gpu-venv}
WHEELS=${WHEELS:-.whl}
DEADLINE=${DEADLINE:-540}                # seconds for everything: a part gets what is left, if less than its own limit
# the profile's runs, each IMPL[-flat|-eager|-plain][@MAX_TOKENS]: -flat flattens bf16's master weights (a lever),
# -eager runs the layers uncompiled (--compile-layers off), -plain turns off the multi-tensor optimizer
# (TRANSFORMER_PLUGIN_MULTI_TENSOR_OPTIMIZER=0), the compiled layers and the compiled loss
PROFILES=${PROFILES:-vaswani vaswani-eager vaswani-plain fairseq}
CORPUS=${CORPUS:-runs/gpu/de_77k}   # train, valid and test .{en,de}: the recipes and time phases
UPDATES_TIME=${UPDATES_TIME:-300}; TIME_CANDIDATES=${TIME_CANDIDATES:-short class}
PLAN_TIME=${PLAN_TIME:-2m}          # the plan phase's TIME
SESSION_GPUS=${SESSION_GPUS:-1}   # 0: a rehearsal on CPU, the recipes and time phases on CPU workers in fp32
export UPDATES=${UPDATES:-150} LOG_INTERVAL=${LOG_INTERVAL:-25} REPEATS=${REPEATS:-1} GENERATE_REPEATS=${GENERATE_REPEATS:-1}
export PYTHONUNBUFFERED=1

OUT=$(mkdir -p "$OUT" && cd "$OUT" && pwd)
cd "$(dirname "$0")/.."
LOGS=${LOGS:-/tmp/gpu-session-logs}   # every log; they travel back packed in OUT/logs.tar.gz
rm -rf "$LOGS" && mkdir -p "$LOGS"
START=$(date +%s)
printf '| part | status | seconds |\n|---|---|---|\n' > "$OUT/summary.md"
: > "$OUT/results.md"

pack() {  # parts run side by side: each packs into a file of its own, then renames it
  tar -czf "$OUT/.logs.$BASHPID.tar.gz" -C "$(dirname "$LOGS")" "$(basename "$LOGS")" 2>/dev/null &&
    mv -f "$OUT/.logs.$BASHPID.tar.gz" "$OUT/logs.tar.gz"
}
# part NAME LIMIT_SECONDS COMMAND...: run it under `timeout` (a function of this script through `bash -c`),
# its output in LOGS/NAME.log; a row in summary.md
part() {
  local name=$1 limit=$2 t0 rc status
  shift 2
  t0=$(date +%s)
  [ $((DEADLINE - (t0 - START) - 5)) -ge "$limit" ] || limit=$((DEADLINE - (t0 - START) - 5))
  if [ "$limit" -lt 20 ]; then
    printf '| %s | not run: the deadline (%d s) is near | 0 |\n' "$name" "$DEADLINE" >> "$OUT/summary.md"
    return 1
  fi
  echo "== $name (limit ${limit} s, at $((t0 - START)) s)"
  timeout -k 15 "$limit" "$@" > "$LOGS/$name.log" 2>&1
  rc=$?
  case $rc in 0) status=ok ;; 124 | 137) status="cut at ${limit} s" ;; *) status="failed ($rc)" ;; esac
  printf '| %s | %s | %d |\n' "$name" "$status" "$(($(date +%s) - t0))" >> "$OUT/summary.md"
  echo "   $name: $status, $(($(date +%s) - t0)) s"
  [ $rc = 0 ] || tail -25 "$LOGS/$name.log" | cut -c1-400
  pack
  return $rc
}

install() {
  # a venv of our own (fairseq's console scripts beside its python, where the benchmarks and tests look),
  # seeing the machine's packages through a .pth file: that python may itself be a venv's, whose packages
  # --system-site-packages would not show
  # (a Python without ensurepip makes it without pip; the machine's pip then installs into it)
  local pip=("$VENV/bin/python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir)
  if [ -n "${VENV_WITHOUT_PIP:-}" ] || ! "$SYSTEM_PYTHON" -m venv "$VENV"; then
    "$SYSTEM_PYTHON" -m venv --without-pip "$VENV" || return 1
    pip=("$SYSTEM_PYTHON" -m pip --python "$VENV/bin/python" install -q --no-index --no-deps --no-compile --no-cache-dir)
  fi
  "$SYSTEM_PYTHON" -c 'import site, sys; print("\n".join(p for p in sys.path if p.endswith("-packages")))' \
    > "$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/machine-packages.pth"
  "${pip[@]}" "$WHEELS"/*.whl || return 1
  # fairseq's cp312 wheel: the extensions a text task loads are plain C/Cython; libbase is built against
  # some torch, and only a failure to load what translation needs sends us to the sdist
  if ! "$VENV/bin/python" -c "import fairseq, fairseq.data.data_utils_fast, fairseq.data.token_block_utils_fast, fairseq.libbleu"; then
    echo "fairseq's wheel does not load here: building its sdist against this torch"
    MAX_JOBS=16 "${pip[@]}" --force-reinstall --no-build-isolation "$WHEELS"/fairseq_fixed-0.12.3.1.tar.gz || return 1
  fi
  "$VENV/bin/python" -c "import fairseq.libbase" 2>&1 | tail -1 | sed 's/^/fairseq.libbase (not used by text tasks): /' || true
  # --use-pep517: an older pip runs `setup.py develop` for a project without pyproject.toml, and a recent
  # setuptools' develop calls pip again with build isolation, which needs the network
  "${pip[@]}" --no-build-isolation --use-pep517 -e . || return 1
  "$VENV/bin/python" - <<'EOF'
import fairseq, torch, transformer_plugin
print("fairseq", fairseq.__version__, "plugin", transformer_plugin.__version__, "torch", torch.__version__,
      "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())
for i in range(torch.cuda.device_count()):
    p = torch.cuda.get_device_properties(i)
    print(f"cuda:{i} {p.name}, {p.total_memory / 2**30:.0f} GiB, {p.multi_processor_count} SMs, capability {p.major}.{p.minor}")
EOF
}

toy_recipes() {
  # the WMT14 recipe's every stage at toy size, training on the GPU; then the torchrun launcher (nccl) on
  # the same data, in a configuration of its own
  TOY=1 GPUS=1 PRECISION=bf16 WORK=/tmp/toy-wmt14 bash recipes/wmt14_en_de_base.sh || return 1
  toy_torchrun
}
toy_torchrun() {
  TOY=1 GPUS=1 NNODES=1 LAUNCH=torchrun PRECISION=fp16 CONFIG=torchrun_fp16 WORK=/tmp/toy-wmt14 \
    bash recipes/wmt14_en_de_base.sh
}

toy_parallel() {  # TOY=1 on the GPU, PRECISION=$1, on the corpus's first 20,000 pairs (the toy's own data stages)
  local corpus=/tmp/toy-parallel-corpus
  mkdir -p "$corpus"
  for side in en de; do
    head -n 20000 "$CORPUS/train.$side" > "$corpus/train.$side"
    cp "$CORPUS/valid.$side" "$CORPUS/test.$side" "$corpus/"
  done
  TOY=1 GPUS=$SESSION_GPUS PRECISION=$([ "$SESSION_GPUS" = 0 ] && echo fp32 || echo "$1") TRAIN=$corpus/train VALID=$corpus/valid TEST=$corpus/test SRC=en TGT=de \
    WORK=/tmp/toy-parallel-$1 bash recipes/parallel_text.sh
}
time_check() {  # $@: --data-only, or nothing
  python -m benchmarks.time_check --corpus "de_77k=$CORPUS/train:en:de" --gpus "$SESSION_GPUS" \
    --precision "$([ "$SESSION_GPUS" = 0 ] && echo fp32 || echo bf16)" --candidates $TIME_CANDIDATES --updates "$UPDATES_TIME" --work /tmp/time-check --out "$LOGS/time_check.md" "$@"
  local status=$?
  mkdir -p "$LOGS/time-check"  # the recipe's logs and fairseq's, beside the table
  cp /tmp/time-check/*.log /tmp/time-check/*.json "$LOGS/time-check/" 2>/dev/null
  for log in /tmp/time-check/*/train.log; do [ -e "$log" ] && cp "$log" "$LOGS/time-check/$(basename "$(dirname "$log")").train.log"; done
  return $status
}

plan_check() {  # a speed file written here, then TIME=PLAN_TIME planned with it, against what it trained
  local speeds=() precision=fp32 work=/tmp/plan-check
  if [ "$SESSION_GPUS" != 0 ]; then
    precision=bf16
    vaswani-speed-probe file --out "$LOGS/speeds.json" --device cuda --precision bf16 --vocab-size 8000 || return 1
    speeds=(SPEED_FILE="$LOGS/speeds.json")
  fi
  rm -rf "$work"
  env "${speeds[@]}" TIME="$PLAN_TIME" GPUS="$SESSION_GPUS" PRECISION=$precision TRAIN="$CORPUS/train" \
    VALID="$CORPUS/valid" TEST="$CORPUS/test" SRC=en TGT=de WORK="$work" bash recipes/parallel_text.sh || return 1
  cp "$work/plan.json" "$LOGS/plan-check.plan.json"; cp "$work/train.log" "$LOGS/plan-check.train.log"
  python -m benchmarks.plan_check "$work" --out "$LOGS/plan_check.md"
}

results() {  # results.md: every table the parts wrote
  {
    echo "# $(date -u +%F) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
    echo
    cat "$OUT/summary.md"
    for f in "$LOGS"/*.md; do [ -e "$f" ] && { echo; echo "## $(basename "$f" .md)"; echo; cat "$f"; }; done
    for f in "$LOGS"/toy-*.log; do
      [ -e "$f" ] && { echo; echo "## $(basename "$f" .log)"; echo; grep -A8 '^==== results' "$f"; }
    done
    [ -e "$LOGS/tests.log" ] && { echo; echo "## tests/gpu"; echo; tail -25 "$LOGS/tests.log"; }
  } > "$OUT/results.md"
}
trap results EXIT
export -f install toy_recipes toy_torchrun toy_parallel time_check plan_check
export SYSTEM_PYTHON VENV WHEELS CORPUS UPDATES_TIME TIME_CANDIDATES PLAN_TIME SESSION_GPUS LOGS

nvidia-smi > "$LOGS/nvidia-smi.txt" 2>&1 || echo "no nvidia-smi" > "$LOGS/nvidia-smi.txt"
part install 180 bash -c install || { echo "install failed: nothing else can run"; exit 1; }
export PATH=$VENV/bin:$PATH VENV_PYTHON=python

for phase in "${PHASES[@]}"; do
  case $phase in
    checks)
      part tests 300 python -m pytest tests/gpu -p no:cacheprovider -q -rs &
      part kernels 200 bash benchmarks/gpu.sh "$LOGS" kernels &
      part toy-recipes 300 bash -c toy_recipes &
      wait ;;
    torchrun)
      part toy-torchrun 240 bash -c toy_torchrun ;;
    recipes)
      part tests 300 python -m pytest tests/gpu -p no:cacheprovider -q -rs &
      part toy-parallel-bf16 240 bash -c "toy_parallel bf16" &
      part toy-parallel-amp 240 bash -c "toy_parallel amp" &
      part time-data 240 bash -c "time_check --data-only" &
      wait ;;
    time)
      part time 240 bash -c time_check ;;
    validation)  # what a validation costs against training on the GPU, the plan's BEAM_TOKEN_COST (CPU: 1.49)
      part validation-cost 120 python -m benchmarks.validation_cost --device "$([ "${SESSION_GPUS:-1}" = 0 ] && echo cpu || echo cuda)" \
        --model-flags "--encoder-layers 3 --decoder-layers 3 --d-model 256 --d-ff 1024 --attention-heads 4" \
        --rounds 2 --sentences 400 ;;
    plan)
      part plan 330 bash -c plan_check ;;
    speed | speed-big | speed-base)
      [ "$phase" = speed-base ] || part speed-big 240 bash benchmarks/gpu.sh "$LOGS" speed-big
      [ "$phase" = speed-base ] || part decoding 90 bash benchmarks/gpu.sh "$LOGS" decoding
      [ "$phase" = speed-big ] || part speed-base 200 bash benchmarks/gpu.sh "$LOGS" speed-base ;;
    profile)
      for run in $PROFILES; do  # IMPL[-flat|-eager|-plain][@MAX_TOKENS]
        impl=${run%@*} tokens=${MAX_TOKENS:-16384}
        [ "$run" = "${run#*@}" ] || tokens=${run#*@}
        model=${impl%-flat}; model=${model%-eager}; model=${model%-plain}
        layers=""  # fairseq's transformer has no --compile-layers
        [ "$model" = vaswani ] && { [ "$impl" = "$model-eager" ] || [ "$impl" = "$model-plain" ]; } && layers=" --compile-layers off"
        [ "$impl" = vaswani-plain ] && layers="$layers --compile-loss off"
        TRANSFORMER_PLUGIN_MULTI_TENSOR_OPTIMIZER=$([ "$impl" = "${impl%-plain}" ] && echo 1 || echo 0) \
          part "profile-big-${run/@/-}" 150 python -m benchmarks.step_profile --impl "$model" --size big \
          --train-args="--bf16$layers" $([ "$impl" = "${impl%-flat}" ] || echo --flat-bf16-master-weights) \
          --max-tokens "$tokens" --out "$LOGS/profile_big_${run/@/_}.md"
      done ;;
  esac
done
