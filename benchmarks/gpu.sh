#!/usr/bin/env bash
# What to run and measure on one CUDA GPU, each part writing its table and log under OUT.
#
#   bash benchmarks/gpu.sh OUT                 # every part, in this order (about 25 minutes on an H100)
#   bash benchmarks/gpu.sh OUT speed-big       # one part
#
# Parts:
#   tests        the GPU tier (tests/gpu): fp16/bf16/amp training and generation, fused attention
#   kernels      which attention kernel torch picks for each attention, base and big sizes, bfloat16
#   speed-base   benchmarks.speed in bfloat16 at the base model's size, against fairseq's transformer, and the
#                plugin with its speed levers off (compiled layers, multi-tensor optimizer; PLAIN=0 leaves it out)
#   speed-big    the same at the big model's size
#   decoding     benchmarks.decoding_profile in bfloat16 on the last speed part's models (run it after speed-big):
#                operator calls and reads from the device a decoding step, and sentences/s, for the plugin's
#                tensor beam search, the plugin with fairseq's loop, and fairseq's transformer
# fairseq and the plugin's requirements must be installed (make install TORCH= keeps the GPU's torch).
set -euo pipefail

OUT=${1:?usage: bash benchmarks/gpu.sh OUT [tests|kernels|speed-base|speed-big|decoding]...}
shift
PARTS=("$@")
[ ${#PARTS[@]} -gt 0 ] || PARTS=(tests kernels speed-base speed-big)
VENV_PYTHON=${VENV_PYTHON:-python}
WORK=${WORK:-runs/bench}          # the speed benchmark's data (made on first use, then reused)
MAX_TOKENS=${MAX_TOKENS:-16384}   # per update, one GPU
UPDATES=${UPDATES:-300}
LOG_INTERVAL=${LOG_INTERVAL:-50}
REPEATS=${REPEATS:-3}             # training rounds, each trains both models
GENERATE_REPEATS=${GENERATE_REPEATS:-4}
GEN_LENGTH=${GEN_LENGTH:-30}      # pieces every hypothesis is decoded to: the same work for both (0: up to source + 50)
PLAIN=${PLAIN:-1}                 # 1: each round also trains the plugin with its speed levers off (speed.py --plain)

OUT=$(mkdir -p "$OUT" && cd "$OUT" && pwd)
cd "$(dirname "$0")/.."
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || true

for part in "${PARTS[@]}"; do
  echo "== $part ($(date -u +%H:%M:%S))"
  case $part in
    tests)
      "$VENV_PYTHON" -m pytest tests/gpu -p no:cacheprovider -q -rs 2>&1 | tee "$OUT/tests.log" ;;
    kernels)
      for size in base big; do
        "$VENV_PYTHON" -m benchmarks.attention_kernels --device cuda --dtype bfloat16 --arch "vaswani_$size" \
          --out "$OUT/kernels_$size.md" > "$OUT/kernels_$size.log" 2>&1
        cat "$OUT/kernels_$size.md"
      done ;;
    speed-base | speed-big)
      size=${part#speed-}
      "$VENV_PYTHON" -m benchmarks.speed --work "$WORK" --size "$size" --train-args=--bf16 --generate-args=--bf16 \
        --max-tokens "$MAX_TOKENS" --updates "$UPDATES" --log-interval "$LOG_INTERVAL" --repeats "$REPEATS" \
        --generate-repeats "$GENERATE_REPEATS" --gen-batch-size 256 --gen-length "$GEN_LENGTH" --out "$OUT/speed_$size.md" \
        $([ "$PLAIN" = 0 ] || echo --plain) \
        > "$OUT/speed_$size.log" 2>&1
      # each training's and generation's own log (the hypotheses too), beside the table that they made
      mkdir -p "$OUT/speed_${size}_runs" && cp "$WORK"/train_*.log "$WORK"/generate_*.log "$OUT/speed_${size}_runs/"
      cat "$OUT/speed_$size.md" ;;
    decoding)
      "$VENV_PYTHON" -m benchmarks.decoding_profile --data "$WORK/data-bin" --path "$WORK/ckpt_builtin/as_vaswani.pt" \
        --builtin "$WORK/ckpt_builtin/checkpoint_last.pt" --device auto --bf16 --batch-size 256 --rounds 2 \
        --out "$OUT/decoding.md" > "$OUT/decoding.log" 2>&1
      cat "$OUT/decoding.md" ;;
    *) echo "unknown part $part: tests, kernels, speed-base, speed-big or decoding" >&2; exit 2 ;;
  esac
done
