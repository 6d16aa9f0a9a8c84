#!/usr/bin/env bash
# English constituency parsing as translation (Section 6.3, Table 4): vaswani_parsing (N=4, d_model=1024)
# on linearised WSJ trees; WSJ 23 F1 91.3 (WSJ only, 16K vocabulary) / 92.7 (semi-supervised, 32K).
#
#   TREEBANK=/data/treebank_3/parsed/mrg bash recipes/wsj_parsing.sh     # the LDC Penn Treebank (licensed)
#   TREEBANK=... EXTRA_TREES="/data/berkeley/*.trees" bash recipes/wsj_parsing.sh   # semi-supervised
#   bash recipes/wsj_parsing.sh --dry-run                             # print every command, run nothing
#   TOY=1 bash recipes/wsj_parsing.sh     # toy size on CPU, on a small treebank this project writes
#
# Stages: 1 read/clean/split/linearise the trees (preprocess/ptb.py); 2 fairseq-preprocess (source
# vocabulary 16K or 32K words); 3 fairseq-train; 4 average the last checkpoints; 5 fairseq-generate with
# beam 21, lenpen 0.3, max length input+300; 6 trees back from the output (repairs counted) and
# labelled bracketing F1 with EVALB's COLLINS.prm conventions, beside the paper.
# GPUS, CPU_WORKERS, PRECISION, and LAUNCH, NNODES, NODE_RANK, MASTER_ADDR, MASTER_PORT, DIST_TIMEOUT for
# several machines, work as in the WMT14 recipes (recipes/wmt14.sh; docs/several-machines.md).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$REPO/recipes/lib.sh"
recipe_options "$0" "$@"

# ---- variables (each can be set in the environment) ---------------------------------------------
TOY=${TOY:-0}
WORK=${WORK:-runs/wsj_parsing$([ "$TOY" != 1 ] || echo _toy)}
TREEBANK=${TREEBANK:-}                     # directory with wsj/SS/wsj_SSNN.mrg (LDC99T42 parsed/mrg)
EXTRA_TREES=${EXTRA_TREES:-}               # already-parsed trees for the semi-supervised setting (word-split)
if [ -n "$EXTRA_TREES" ]; then VOCAB_SIZE=${VOCAB_SIZE:-32000}; PAPER_F1=92.7; SETTING=semi-supervised
else VOCAB_SIZE=${VOCAB_SIZE:-16000}; PAPER_F1=91.3; SETTING="WSJ only"; fi
ARCH=${ARCH:-vaswani_parsing}              # N=4, d_model=1024, other sizes as the base model
DROPOUT=${DROPOUT:-0.3}                    # residual dropout: tuned on section 22 in the paper (not given)
ATTENTION_DROPOUT=${ATTENTION_DROPOUT:-0.1} # dropout on attention weights: likewise
WARMUP=${WARMUP:-}; LABEL_SMOOTHING=${LABEL_SMOOTHING:-}   # "other settings from the base model"; empty: the paper's
MAX_UPDATE=${MAX_UPDATE:-20000}            # not given in the paper (about 125 passes over WSJ 02-21)
SAVE_INTERVAL_UPDATES=${SAVE_INTERVAL_UPDATES:-1000}
AVERAGE_LAST=${AVERAGE_LAST:-5}            # as the base model
TOKENS_PER_UPDATE=${TOKENS_PER_UPDATE:-25000}; MAX_TOKENS_PER_DEVICE=${MAX_TOKENS_PER_DEVICE:-4096}
BEAM=${BEAM:-}; LENPEN=${LENPEN:-}; MAX_LEN_B=${MAX_LEN_B:-}   # Section 6.3; empty: the paper's (vaswani-paper-flags decoding --parsing)
GPUS=${GPUS:-$([ "$TOY" = 1 ] && echo 0 || gpu_count)}  # GPUs per machine (0: CPU workers; TOY=1: 0 unless set)
CPU_WORKERS=${CPU_WORKERS:-2}; PRECISION=${PRECISION:-fp32}
LAUNCH=${LAUNCH:-local}; NNODES=${NNODES:-1}; NODE_RANK=${NODE_RANK:-0}   # several machines: as the WMT14 recipes
MASTER_ADDR=${MASTER_ADDR:-}; MASTER_PORT=${MASTER_PORT:-}; DIST_TIMEOUT=${DIST_TIMEOUT:-600}
SEED=${SEED:-1}
if [ "$TOY" = 1 ]; then
  ARCH=${TOY_ARCH:-vaswani_tiny}; VOCAB_SIZE=${TOY_VOCAB_SIZE:-1000}; MAX_UPDATE=${TOY_MAX_UPDATE:-300}
  WARMUP=${TOY_WARMUP:-100}; SAVE_INTERVAL_UPDATES=${TOY_SAVE_INTERVAL_UPDATES:-50}; DROPOUT=0.1
  TOKENS_PER_UPDATE=${TOY_TOKENS_PER_UPDATE:-4000}; MAX_TOKENS_PER_DEVICE=2000; AVERAGE_LAST=${TOY_AVERAGE_LAST:-3}
  BEAM=${TOY_BEAM:-$BEAM}
fi
# -------------------------------------------------------------------------------------------------

DATA="$WORK/data"; BIN="$WORK/data-bin"; CKPT="$WORK/checkpoints"; OUT="$WORK/results"
plan_run layout  # the batch of TOKENS_PER_UPDATE on these machines (recipes/planner/layout.py)
echo "WSJ parsing ($SETTING): $PLAN_BATCH_SUMMARY"

if [ -z "$TREEBANK" ]; then
  if [ "$TOY" != 1 ]; then
    echo "TREEBANK is not set: give the Penn Treebank's parsed/mrg directory (LDC99T42), or TOY=1" >&2; exit 2
  fi
  TREEBANK="$WORK/toy-treebank"
  data_stage 0 "a small treebank in the LDC layout (from a grammar)" \
    "$PY" -m preprocess.ptb toy-treebank --out "$TREEBANK"
fi
PREPARE_ARGS=(--treebank "$TREEBANK" --out "$DATA")
EXTRA=()  # EXTRA_TREES: files or patterns ("/data/berkeley/*.trees"), space-separated, each expanded here
read -r -a PATTERNS <<< "$EXTRA_TREES"
for pattern in "${PATTERNS[@]}"; do
  mapfile -t found < <(compgen -G "$pattern" | sort)
  if [ ${#found[@]} = 0 ] && [ "$DRY_RUN" = 1 ]; then echo "note: EXTRA_TREES: no file matches $pattern here"; found=("$pattern"); fi
  [ ${#found[@]} -gt 0 ] || { echo "EXTRA_TREES: no file matches $pattern" >&2; exit 2; }
  EXTRA+=("${found[@]}")
done
READS=(--reads "$TREEBANK"); for file in "${EXTRA[@]}"; do READS+=(--reads "$file"); done  # digested: an edit redoes it
[ ${#EXTRA[@]} = 0 ] || PREPARE_ARGS+=(--extra-trees "${EXTRA[@]}")
data_stage "${READS[@]}" 1 "WSJ: sections 02-21 train, 22 dev, 23 test; clean and linearise" \
  "$PY" -m preprocess.ptb prepare "${PREPARE_ARGS[@]}"

data_stage --clears "$BIN" 2 "fairseq-preprocess: words -> linearised trees, $VOCAB_SIZE source words" \
  fairseq-preprocess --source-lang words --target-lang trees \
    --trainpref "$DATA/train" --validpref "$DATA/valid" --testpref "$DATA/test" \
    --nwordssrc "$VOCAB_SIZE" --destdir "$BIN" --workers 2

paper_flags TRAINING training --warmup-updates "$WARMUP" --label-smoothing "$LABEL_SMOOTHING"  # the base model's
# Only the checkpoints averaging reads are kept: the last AVERAGE_LAST saved every SAVE_INTERVAL_UPDATES (the plugin
# names each by its update, at an epoch end too: transformer_plugin/patches/interval_checkpoints.py), the last and the best.
TRAIN_ARGS=("$BIN" --user-dir "$REPO/transformer_plugin" --task translation
  --arch "$ARCH" --share-decoder-input-output-embed --dropout "$DROPOUT" --attention-dropout "$ATTENTION_DROPOUT"
  "${TRAINING[@]}"
  --max-tokens "$PLAN_MAX_TOKENS" --update-freq "$PLAN_UPDATE_FREQ" --max-update "$MAX_UPDATE" --seed "$SEED"
  --save-dir "$CKPT" --save-interval-updates "$SAVE_INTERVAL_UPDATES" --keep-interval-updates "$AVERAGE_LAST"
  --validate-interval-updates "$SAVE_INTERVAL_UPDATES" --no-epoch-checkpoints
  --log-format json --log-interval "$(log_interval "$MAX_UPDATE" "$([ "$TOY" = 1 ] && echo 10 || echo 100)")" "${PLAN_PRECISION_ARGS[@]}")
[ "$TOY" = 0 ] || TRAIN_ARGS+=(--num-workers 0)
train_stage 3 "fairseq-train --arch $ARCH, $MAX_UPDATE updates" "$WORK/train.log" "${TRAIN_ARGS[@]}"

stage 4 "average the last $AVERAGE_LAST checkpoints" \
  "$PY" -m transformer_plugin_cli.tools.average_checkpoints --inputs "$CKPT" \
    --num-update-checkpoints "$AVERAGE_LAST" --output "$CKPT/average.pt"

paper_flags DECODING decoding --parsing --beam "$BEAM" --lenpen "$LENPEN" --max-len-b "$MAX_LEN_B"  # Section 6.3
stage 5 "fairseq-generate WSJ 23: ${DECODING[*]}" \
  capture "$OUT/generate.test.out" \
    fairseq-generate "$BIN" --user-dir "$REPO/transformer_plugin" --path "$CKPT/average.pt" \
      --gen-subset test "${DECODING[@]}" \
      --batch-size 32

stage 6 "trees from the output, labelled bracketing F1 (EVALB, COLLINS.prm)" \
  "$PY" -m transformer_plugin_cli.parsing.evalb --gold "$DATA/test.gold" --generate-output "$OUT/generate.test.out" \
    --source "$DATA/test.words" --trees-out "$OUT/test.parsed" --per-sentence "$OUT/test.per_sentence.tsv" \
    --json "$OUT/scores.test.json" --paper "$PAPER_F1 ($SETTING)"

run_stages  # every stage above decided before any work, then run in order
