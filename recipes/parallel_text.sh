#!/usr/bin/env bash
# Your own parallel text, from two text files (or a TSV) to an evaluated, exported model trained from nothing: checked
# and cleaned with a report, dev and test held out when none are given, a sentencepiece vocabulary, the paper's
# training with the settings that fit the corpus's size, averaging, beam search, sacreBLEU and chrF, a report with
# learning curves, and CTranslate2 / Hugging Face exports. Rules and sources: docs/parallel-text.md. To fine-tune a
# published model instead: recipes/finetune.sh.
#
#   TRAIN=corpus/train SRC=en TGT=de bash recipes/parallel_text.sh         # corpus/train.en and corpus/train.de
#   TRAIN=pairs.tsv.gz SRC=en TGT=de bash recipes/parallel_text.sh         # source<TAB>target, a pair a line
#   TRAIN=a:b.tsv VALID=dev TEST=test SRC=en TGT=de bash recipes/parallel_text.sh   # several corpora; dev, test
#   TRAIN=corpus/train SRC=en TGT=de bash recipes/parallel_text.sh --dry-run   # the settings it picks, every command
#   TIME=8h TRAIN=corpus/train SRC=en TGT=de bash recipes/parallel_text.sh --dry-run --explain   # and why (WORK/plan.json)
#   TOY=1 TRAIN=corpus/train SRC=en TGT=de bash recipes/parallel_text.sh  # the same stages at toy size on CPU
#   DATA_ONLY=1 TRAIN=corpus/train SRC=en TGT=de bash recipes/parallel_text.sh   # stages 1-3 only: the data-bin
#
# Stages: 1 check, clean, split (preprocess/parallel_text.py; report in WORK/data/report.md); 2 sentencepiece
# (joint, or one per side where the scripts differ), trained on a sample; 3 fairseq-preprocess; 4 fairseq-train,
# stopping at MAX_UPDATE (with EVAL_BLEU=1 also when PATIENCE validations bring no better dev BLEU); 5 average the
# last checkpoints; 6 fairseq-generate the test set; 7 sacreBLEU and chrF; 8 report; 9 exports (EXPORT="ct2 hf").
# GPUS, CPU_WORKERS, PRECISION and LAUNCH, NNODES, NODE_RANK, MASTER_ADDR, MASTER_PORT, DIST_TIMEOUT work as in
# the WMT14 recipes (docs/several-machines.md).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$REPO/recipes/lib.sh"
RECIPE_SETTINGS=parallel_text  # its variables, declared once: recipes/planner/settings.py (--help lists them)
recipe_options "$0" "$@"
if [ -n "${INIT:-}" ]; then  # a published model to fine-tune: the other recipe, with the same variables
  echo "INIT=$INIT: recipes/parallel_text.sh trains from nothing; fine-tuning a published model is recipes/finetune.sh," \
    "which takes the same variables: INIT=$INIT TRAIN=${TRAIN:-} SRC=${SRC:-} TGT=${TGT:-} bash recipes/finetune.sh" >&2
  exit 2
fi
# the corpus, the budget, the training (recipes/parallel_text_common.sh)
source "$REPO/recipes/parallel_text_common.sh"
NEEDED="TRAIN, SRC and TGT are needed: TRAIN=corpus/train SRC=en TGT=de bash $0 (corpus/train.en, corpus/train.de)"
if [ -z "$TRAIN" ] || [ -z "$SRC" ] || [ -z "$TGT" ]; then
  if [ "$DRY_RUN" = 0 ]; then echo "$NEEDED" >&2; exit 2; fi
  echo "$NEEDED. Without them a dry run can only show the settings it picks by the corpus's size:"
  "$PY" -m recipes.planner sizes
  exit 0
fi
corpus_sets
MIN_PAIRS=${MIN_PAIRS:-10000}              # fewer training lines stop the recipe (OPUS-MT does not train below 10k)
# ---- the model: empty is the plan's (by the corpus's size and the budget, docs/parallel-text.md) -------------------
VOCAB_SIZE=${VOCAB_SIZE:-}                 # sentencepiece pieces (per side when not joint)
JOINT_VOCAB=${JOINT_VOCAB:-}               # 1: one vocabulary for both sides (same script); 0: one per side
SPM_TYPE=${SPM_TYPE:-}                     # empty: bpe
SPM_SAMPLE=${SPM_SAMPLE:-2000000}          # sentences sentencepiece learns from (memory bounded by it)
ARCH=${ARCH:-}; MODEL_FLAGS=${MODEL_FLAGS:-}   # the model; MODEL_FLAGS alone: vaswani_base with them
# TOY=1: the same stages at toy size, on CPU, in minutes (TOY_ARCH, TOY_MAX_UPDATE, ... the plan's toy settings)

# ---- the plan: every setting above decided once, from the corpus and the budget (recipes/planner/) -----
# TIME: each candidate's speed probed here (recipes/planner/speed/: a few seconds, once per machine and model). It is
# written as WORK/plan.json, and a resumed run trains as it began; it says itself in two lines (the reasons:
# --explain, and WORK/plan.json). fairseq's --stop-time-hours stops training at TIME in any case.
plan_run
DATA="$WORK/data"; SPM="$WORK/spm"; BIN="$WORK/data-bin"; CKPT="$WORK/checkpoints"; OUT="$WORK/results"

# ---- 1. check, clean, split ------------------------------------------------------------------------------
prepare_stage
TRAIN_TEXT="$DATA/train"

# ---- 2. sentencepiece, on a sample of SPM_SAMPLE sentences --------------------------------------------------
SPM_ARGS=(--vocab-size "$PLAN_VOCAB_SIZE" --model-type "$PLAN_SPM_TYPE" --input-sentence-size "$SPM_SAMPLE"
  --vocab-size-name "$([ "$TOY" != 1 ] || echo TOY_)VOCAB_SIZE" --input-sentence-size-name SPM_SAMPLE)
if [ "$PLAN_JOINT_VOCAB" = 1 ]; then
  data_stage 2a "joint sentencepiece $PLAN_SPM_TYPE vocabulary of $PLAN_VOCAB_SIZE pieces" \
    "$PY" -m preprocess.sentencepiece_vocab train --inputs "$DATA/train.$SRC" "$DATA/train.$TGT" \
      --model-prefix "$SPM/spm" "${SPM_ARGS[@]}"
  SRC_SPM="$SPM/spm.model"; TGT_SPM="$SPM/spm.model"
else
  for side in "$SRC" "$TGT"; do
    data_stage "2a-$side" "sentencepiece $PLAN_SPM_TYPE vocabulary of $PLAN_VOCAB_SIZE pieces for $side" \
      "$PY" -m preprocess.sentencepiece_vocab train --inputs "$DATA/train.$side" --model-prefix "$SPM/spm.$side" "${SPM_ARGS[@]}"
  done
  SRC_SPM="$SPM/spm.$SRC.model"; TGT_SPM="$SPM/spm.$TGT.model"
fi
encode_stage "$SRC" "$SRC_SPM"
encode_stage "$TGT" "$TGT_SPM"

# ---- 3. binarize ---------------------------------------------------------------------------------------------
DICT_ARGS=(); [ "$PLAN_JOINT_VOCAB" != 1 ] || DICT_ARGS=(--joined-dictionary)
binarize_stages 3 "$(cores)" "${DICT_ARGS[@]}"  # SHARDS=N: N data-bins, one dictionary (lib.sh)
if [ "${DATA_ONLY:-0}" = 1 ]; then run_stages; echo "DATA_ONLY=1: the data is ready in $TRAIN_DATA"; exit 0; fi

# ---- 4. training ----------------------------------------------------------------------------------------------
train_args
train_stage 4 "fairseq-train --arch $PLAN_ARCH, at most $PLAN_MAX_UPDATE updates" "$WORK/train.log" "${TRAIN_ARGS[@]}"

# ---- 5.-8. evaluation ------------------------------------------------------------------------------------------
long_lines
model_stages
score_stage
report_stage

# ---- 9. exports ----------------------------------------------------------------------------------------------
export_stages

run_stages  # every stage above decided before any work, then run in order
[ "$DRY_RUN" = 0 ] || exit 0
banner "results"
test_scores
where_things_are
