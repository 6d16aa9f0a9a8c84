#!/usr/bin/env bash
# A published model fine-tuned on your own parallel text: the parent (INIT=) checked against SRC and TGT and imported,
# the corpus checked and cleaned with a report, dev and test held out when none are given, encoded with the parent's
# own sentencepiece models and dictionaries, the parent scored before fine-tuning, fine-tuning's batch, rate and
# length (recipes/planner/finetuning.py) with the budget sizing the updates, averaging (or, under 10,000 pairs, the
# checkpoint of the best dev BLEU), beam search, sacreBLEU and chrF with the gain's paired bootstrap interval, a
# report, and the exports. Rules and sources: docs/finetune.md.
#
#   INIT=opus-mt-en-de TRAIN=corpus/train SRC=en TGT=de bash recipes/finetune.sh --dry-run   # what it will do
#   INIT=opus-mt-en-de TIME=2h EXPORT=hf TRAIN=corpus/train SRC=en TGT=de bash recipes/finetune.sh
#   INIT=opus-mt-en-de PARENT_TEST=general/test TRAIN=corpus/train SRC=en TGT=de bash recipes/finetune.sh  # forgetting
#   INIT=opus-mt-en-de REPLAY=general/train REPLAY_RATIO=3 TRAIN=corpus/train SRC=en TGT=de bash recipes/finetune.sh
#   INIT=opus-mt-en-de REPLAY=parent TRAIN=corpus/train SRC=en TGT=de bash recipes/finetune.sh   # the parent's own
#
# Stages: 1 check, clean, split (WORK/data/report.md); with REPLAY 1r a general corpus mixed in, or with REPLAY=parent
# 1d-2f the parent's own translations of the training sources (or of REPLAY_SOURCES); 2p the parent imported (no
# sentencepiece trained: the parent's); 2b encode into its pieces; with PARENT_TEST 2c its own test set; 3
# fairseq-preprocess with its dictionaries (3r: PARENT_TEST's); 3p-3q the parent scored on the test set (3s-3t on
# PARENT_TEST); 4 fairseq-train from the parent's weights; 5 average the last checkpoints; 6 fairseq-generate the test
# set; 7 sacreBLEU and chrF against the parent (7p-7q: PARENT_TEST after, what fine-tuning forgot); 8 report; 9
# exports (EXPORT="ct2 hf"). GPUS, CPU_WORKERS, PRECISION and LAUNCH, NNODES, NODE_RANK, MASTER_ADDR, MASTER_PORT,
# DIST_TIMEOUT work as in the WMT14 recipes (docs/several-machines.md).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$REPO/recipes/lib.sh"
RECIPE_SETTINGS=finetune  # its variables, declared once: recipes/planner/settings.py (--help lists them)
recipe_options "$0" "$@"
# the corpus, the budget, the training (recipes/parallel_text_common.sh)
source "$REPO/recipes/parallel_text_common.sh"
# ---- the published model to fine-tune (docs/finetune.md) ---------------------------
INIT=${INIT:-}                             # a MarianMT, NLLB-200 or M2M100 directory (as Hugging Face has them, or EXPORT=hf's), or an import's
NEEDED="INIT, TRAIN, SRC and TGT are needed: INIT=opus-mt-en-de TRAIN=corpus/train SRC=en TGT=de bash $0"
if [ -z "$INIT" ] || [ -z "$TRAIN" ] || [ -z "$SRC" ] || [ -z "$TGT" ]; then
  if [ "$DRY_RUN" = 0 ]; then echo "$NEEDED" >&2; exit 2; fi
  echo "$NEEDED. Without them a dry run can only show what it reads:"
  "$PY" -m recipes.planner settings finetune
  exit 0
fi
corpus_sets
FINETUNE_MIN_PAIRS=${FINETUNE_MIN_PAIRS:-}  # fewer training pairs, once dev and test are held out, stop it (100)
TGT_TOKEN=${TGT_TOKEN:-}                   # a multilingual parent's >>xx<< for TGT; empty: found in its vocabulary
SRC_CODE=${SRC_CODE:-}                     # an NLLB or M2M100 parent's code for SRC (eng_Latn); empty: by ISO 639
TGT_CODE=${TGT_CODE:-}                     # an NLLB or M2M100 parent's code for TGT (deu_Latn); empty: by ISO 639
PARENT_TEST=${PARENT_TEST:-}               # PREFIX (PREFIX.SRC, PREFIX.TGT): a general test set, scored before, after
[ -z "$PARENT_TEST" ] || PARENT_TEST=$(realpath -ms -- "$PARENT_TEST")
REPLAY=${REPLAY:-}                         # PREFIX of a general corpus replayed into the fine-tuning against forgetting,
                                           # or parent: the parent's translations of the training sources (distillation)
REPLAY_RATIO=${REPLAY_RATIO:-1}            # its pairs drawn per in-domain pair (parent: the share of sources, at most 1)
REPLAY_SOURCES=${REPLAY_SOURCES:-}         # REPLAY=parent: PREFIX of source text of the parent's domains (PREFIX.SRC) it
                                           # translates instead, REPLAY_RATIO lines an in-domain pair; empty: the sources
[ -z "$REPLAY" ] || [ "$REPLAY" = parent ] || REPLAY=$(realpath -ms -- "$REPLAY")
[ -z "$REPLAY_SOURCES" ] || REPLAY_SOURCES=$(realpath -ms -- "$REPLAY_SOURCES")
# fine-tuning's batch, rate and length come from the practice of fine-tuning OPUS-MT models
# (recipes/planner/finetuning.py): 64 sentences an update, 3e-4 after a linear ramp of a tenth of the updates then its
# inverse square root (OPUS-MT-train's finetune/), EPOCHS without a budget; a corpus under 10,000 pairs hands over its
# checkpoint of the best dev BLEU (EVAL_BLEU empty: 1 there)
FINETUNE_WARMUP=${FINETUNE_WARMUP:-}       # the ramp's updates; empty: a tenth of the updates, at most 16,000
INIT=$(realpath -ms -- "$INIT")            # as the corpus: a rerun from elsewhere, or with $PWD/, is the same parent
# TOY=1: the same stages at toy size, on CPU, in minutes (TOY_MAX_UPDATE, ... the plan's toy settings)

# ---- the plan: every setting above decided once, from the corpus, the budget and the parent (recipes/planner/) -----
# The parent's model, vocabulary and P_drop, checked before any work (recipes/planner/parent.py); fine-tuning's batch,
# rate and length (recipes/planner/finetuning.py), the budget sizing the updates. TIME: the parent's speed probed here
# (recipes/planner/speed/: a few seconds, once per machine and model). It is written as WORK/plan.json, and a resumed
# run trains as it began. fairseq's --stop-time-hours stops training at TIME in any case.
plan_run
DATA="$WORK/data"; SPM="$WORK/spm"; BIN="$WORK/data-bin"; CKPT="$WORK/checkpoints"; OUT="$WORK/results"

# ---- 1. check, clean, split; REPLAY: REPLAY_RATIO general pairs an in-domain pair, drawn by SEED, none a dev or test
# source ----------------------------------------------------------------------------------------------------------
prepare_stage
TRAIN_TEXT="$DATA/train"
if [ "$REPLAY" = parent ]; then  # distillation: the sources drawn here, translated after stage 2p
  TRAIN_TEXT="$DATA/distilled/train"
  if [ -n "$REPLAY_SOURCES" ]; then
    data_stage --reads "$REPLAY_SOURCES.$SRC" 1d "draw $REPLAY_RATIO lines of $REPLAY_SOURCES.$SRC an in-domain pair for the parent to translate" \
      "$PY" -m preprocess.parallel_text distill-sources --train "$DATA/train" --src "$SRC" --ratio "$REPLAY_RATIO" \
        --seed "$SEED" --out "$DATA/distilled/sources.$SRC" --pool "$REPLAY_SOURCES" --held "$DATA/valid" "$DATA/test"
  else
    data_stage 1d "draw $REPLAY_RATIO of the training sources for the parent to translate (REPLAY=parent)" \
      "$PY" -m preprocess.parallel_text distill-sources --train "$DATA/train" --src "$SRC" --ratio "$REPLAY_RATIO" \
        --seed "$SEED" --out "$DATA/distilled/sources.$SRC"
  fi
elif [ -n "$REPLAY" ]; then
  TRAIN_TEXT="$DATA/replayed/train"
  data_stage --reads "$DATA/train.$SRC" --reads "$DATA/train.$TGT" --reads "$REPLAY.$SRC" --reads "$REPLAY.$TGT" \
    --writes "$TRAIN_TEXT.$SRC" --writes "$TRAIN_TEXT.$TGT" 1r "replay $REPLAY into the training text: $REPLAY_RATIO a pair" \
    "$PY" -m preprocess.parallel_text replay --corpus "$REPLAY" --src "$SRC" --tgt "$TGT" --train "$DATA/train" \
      --held "$DATA/valid" "$DATA/test" --ratio "$REPLAY_RATIO" --seed "$SEED" --out "$TRAIN_TEXT"
fi

# ---- 2. the parent imported, and the text in its sentencepiece pieces -----------------------------------------
if [ "$PLAN_PARENT_KIND" = marian ]; then
  data_stage --writes "$PLAN_PARENT_DIR" 2p "import the parent $INIT (vaswani-import-marian)" \
    "$PY" -m transformer_plugin_cli.serving.import_marian "$INIT" "$PLAN_PARENT_DIR" --source-lang "$SRC" --target-lang "$TGT" --force
elif [ "$PLAN_PARENT_KIND" = m2m100 ]; then
  data_stage --writes "$PLAN_PARENT_DIR" 2p "import the parent $INIT (vaswani-import-m2m100: $PLAN_PARENT_SRC_CODE -> $PLAN_PARENT_TGT_CODE)" \
    "$PY" -m transformer_plugin_cli.serving.import_m2m100 "$INIT" "$PLAN_PARENT_DIR" --source-lang "$SRC" --target-lang "$TGT" \
      --source-code "$PLAN_PARENT_SRC_CODE" --target-code "$PLAN_PARENT_TGT_CODE" --force
fi
SRC_SPM=$PLAN_PARENT_SRC_SPM; TGT_SPM=$PLAN_PARENT_TGT_SPM
# a multilingual parent: its >>xx<< for TGT before every source sentence, one id of its dictionary; an NLLB or M2M100
# parent: its code for SRC before every source sentence and its code for TGT before every target sentence (fairseq-
# generate forces it: --prefix-size 1 in PLAN_DECODING; the scores leave it out: EVALUATE_ARGS)
PREFIX_ARGS=(); [ -z "$PLAN_PARENT_TGT_TOKEN" ] || PREFIX_ARGS=(--prefix "$PLAN_PARENT_TGT_TOKEN")
[ -z "$PLAN_PARENT_SRC_CODE" ] || PREFIX_ARGS=(--prefix "$PLAN_PARENT_SRC_CODE")
TGT_PREFIX_ARGS=(); [ -z "$PLAN_PARENT_TGT_CODE" ] || TGT_PREFIX_ARGS=(--prefix "$PLAN_PARENT_TGT_CODE")
EVALUATE_ARGS=(); [ -z "$PLAN_PARENT_TGT_CODE" ] || EVALUATE_ARGS=(--strip-prefix "$PLAN_PARENT_TGT_CODE")
if [ "$REPLAY" = parent ]; then  # the parent's own translations of those sources, mixed into the training text
  data_stage 2d "encode the sources drawn into the parent's pieces" \
    "$PY" -m preprocess.sentencepiece_vocab encode --model "$SRC_SPM" --inputs "$DATA/distilled/sources.$SRC" \
      --outputs "$DATA/distilled/sources.sp.$SRC" --threads "$(cores)" "${PREFIX_ARGS[@]}"
  data_stage 2e "translate them with the parent (fairseq-interactive: ${PLAN_DECODING[*]})" \
    capture "$DATA/distilled/parent.out" fairseq-interactive "$PLAN_PARENT_DIR" --user-dir "$REPO/transformer_plugin" \
      --path "$PLAN_PARENT_CHECKPOINT" --source-lang "$SRC" --target-lang "$TGT" --input "$DATA/distilled/sources.sp.$SRC" \
      "${PLAN_DECODING[@]}" --post-process sentencepiece --buffer-size 1024 --batch-size 128 --skip-invalid-size-inputs-valid-test
  data_stage --writes "$TRAIN_TEXT.$SRC" --writes "$TRAIN_TEXT.$TGT" 2f "the training text with the parent's translations in it" \
    "$PY" -m preprocess.parallel_text distilled --train "$DATA/train" --src "$SRC" --tgt "$TGT" \
      --sources "$DATA/distilled/sources.$SRC" --translations "$DATA/distilled/parent.out" --out "$TRAIN_TEXT"
fi
# how many pieces the parent's dictionary lacks (fairseq's <unk>), in $SPM/unknown.SIDE.json, and the lines longer than
# the parent's positions, which training and validation leave out
encode_stage "$SRC" "$SRC_SPM" --dictionary "$PLAN_PARENT_SRC_DICT" --unknown-report "$SPM/unknown.$SRC.json" \
  --positions "$PLAN_PARENT_SOURCE_POSITIONS" "${PREFIX_ARGS[@]}"
encode_stage "$TGT" "$TGT_SPM" --dictionary "$PLAN_PARENT_TGT_DICT" --unknown-report "$SPM/unknown.$TGT.json" \
  --positions "$PLAN_PARENT_TARGET_POSITIONS" "${TGT_PREFIX_ARGS[@]}"
# PARENT_TEST: a test set of the parent's own domain, translated by the parent before fine-tuning (3s-3t) and by the
# fine-tuned model after (7p-7q): what fine-tuning forgets, with the paired bootstrap of the change
if [ -n "$PARENT_TEST" ]; then
  data_stage "2c-$SRC" "encode the parent's test set $PARENT_TEST ($SRC) into its pieces" \
    "$PY" -m preprocess.sentencepiece_vocab encode --model "$SRC_SPM" --inputs "$PARENT_TEST.$SRC" \
      --outputs "$SPM/parent_test.sp.$SRC" --threads "$(cores)" "${PREFIX_ARGS[@]}"
  data_stage "2c-$TGT" "encode the parent's test set $PARENT_TEST ($TGT) into its pieces" \
    "$PY" -m preprocess.sentencepiece_vocab encode --model "$TGT_SPM" --inputs "$PARENT_TEST.$TGT" \
      --outputs "$SPM/parent_test.sp.$TGT" --threads "$(cores)" "${TGT_PREFIX_ARGS[@]}"
fi

# ---- 3. binarize with the parent's dictionaries; the parent scored before fine-tuning ----------------------------
binarize_stages 3 "$(cores)" --srcdict "$PLAN_PARENT_SRC_DICT" --tgtdict "$PLAN_PARENT_TGT_DICT"  # SHARDS=N: N data-bins (lib.sh)
PARENT_TEST_BIN="$WORK/parent-test-bin"
if [ -n "$PARENT_TEST" ]; then
  data_stage 3r "fairseq-preprocess the parent's test set with its dictionaries" \
    fairseq-preprocess --source-lang "$SRC" --target-lang "$TGT" --testpref "$SPM/parent_test.sp" \
      --srcdict "$PLAN_PARENT_SRC_DICT" --tgtdict "$PLAN_PARENT_TGT_DICT" --destdir "$PARENT_TEST_BIN" --workers "$(cores)"
fi
if [ "${DATA_ONLY:-0}" = 1 ]; then run_stages; echo "DATA_ONLY=1: the data is ready in $TRAIN_DATA"; exit 0; fi
long_lines
# the parent on this test set, before fine-tuning: what fine-tuning gains
translate_stage 3p "fairseq-generate the test set with the parent, before fine-tuning" \
  "$EVAL_DATA" "$PLAN_PARENT_CHECKPOINT" "$OUT/generate.parent.test.out"
stage 3q "sacreBLEU and chrF of the parent on the test set" \
  "$PY" -m transformer_plugin_cli.tools.evaluate --generate-output "$OUT/generate.parent.test.out" \
    --reference "$DATA/test.$TGT" --hypotheses-out "$OUT/hypotheses.parent.test.txt" --json "$OUT/scores.parent.json" \
    --label "$SRC-$TGT, the parent $INIT before fine-tuning" --paper "no paper figure: your corpus" "${EVALUATE_ARGS[@]}"
if [ -n "$PARENT_TEST" ]; then  # the parent on its own test set, before fine-tuning
  translate_stage 3s "fairseq-generate the parent's test set with the parent, before fine-tuning" \
    "$PARENT_TEST_BIN" "$PLAN_PARENT_CHECKPOINT" "$OUT/generate.parent_test.before.out"
  stage 3t "sacreBLEU and chrF of the parent on its test set" \
    "$PY" -m transformer_plugin_cli.tools.evaluate --generate-output "$OUT/generate.parent_test.before.out" \
      --reference "$PARENT_TEST.$TGT" --hypotheses-out "$OUT/hypotheses.parent_test.before.txt" \
      --json "$OUT/scores.parent_test.before.json" --label "$SRC-$TGT, the parent on PARENT_TEST, before fine-tuning" \
      --paper "no paper figure: your test set" "${EVALUATE_ARGS[@]}"
fi

# ---- 4. fine-tuning: the parent's weights; fairseq starts optimizer, scheduler, meters and data afresh, and resumes
# from checkpoint_last.pt --------------------------------------------------------------------------------------------
train_args
TRAIN_ARGS+=(--finetune-from-model "$PLAN_PARENT_CHECKPOINT" --skip-invalid-size-inputs-valid-test)
train_stage 4 "fairseq-train --arch $PLAN_ARCH, at most $PLAN_MAX_UPDATE updates" "$WORK/train.log" "${TRAIN_ARGS[@]}"

# ---- 5.-8. evaluation: against the parent (the paired bootstrap of the gain, its 95% interval) -------------------
model_stages
score_stage --baseline "$OUT/hypotheses.parent.test.txt" --baseline-label "the parent" "${EVALUATE_ARGS[@]}"
REPORT_ARGS=(--scores "the parent, before fine-tuning=$OUT/scores.parent.json"
             --unknown "$SPM/unknown.$SRC.json" --unknown "$SPM/unknown.$TGT.json")
if [ -n "$PARENT_TEST" ]; then  # what fine-tuning forgets: the parent's test set after it
  translate_stage 7p "fairseq-generate the parent's test set with the fine-tuned model" \
    "$PARENT_TEST_BIN" "$MODEL_PATH" "$OUT/generate.parent_test.out"
  stage 7q "sacreBLEU and chrF on the parent's test set, against the parent" \
    "$PY" -m transformer_plugin_cli.tools.evaluate --generate-output "$OUT/generate.parent_test.out" \
      --reference "$PARENT_TEST.$TGT" --hypotheses-out "$OUT/hypotheses.parent_test.txt" \
      --json "$OUT/scores.parent_test.json" --label "$SRC-$TGT, $MODEL_LABEL on PARENT_TEST" \
      --paper "no paper figure: your test set" --baseline "$OUT/hypotheses.parent_test.before.txt" --baseline-label "the parent" \
      "${EVALUATE_ARGS[@]}"
  REPORT_ARGS+=(--scores "the parent on PARENT_TEST, before=$OUT/scores.parent_test.before.json"
                --scores "$MODEL_LABEL on PARENT_TEST=$OUT/scores.parent_test.json")
fi
report_stage "${REPORT_ARGS[@]}"

# ---- 9. exports: a multilingual parent's >>xx<< token, which the Transformers model card says to put before every
# source sentence ------------------------------------------------------------------------------------------------
HF_TOKEN_ARGS=(); [ -z "${PLAN_PARENT_TGT_TOKEN:-}" ] || HF_TOKEN_ARGS=(--target-token "$PLAN_PARENT_TGT_TOKEN")
# an NLLB or M2M100 parent: the child exported as M2M100ForConditionalGeneration, with the parent's tokenizer
[ -z "$PLAN_PARENT_SRC_CODE" ] || HF_TOKEN_ARGS=(--m2m100-tokenizer "$PLAN_PARENT_DIR/tokenizer")
export_stages "${HF_TOKEN_ARGS[@]}"

run_stages  # every stage above decided before any work, then run in order
[ "$DRY_RUN" = 0 ] || exit 0
banner "results"
test_scores
"$PY" - "$OUT/scores.test.json" "$OUT/scores.parent.json" "$SPM" "$SRC" "$TGT" \
  "$([ -z "$PARENT_TEST" ] || echo "$OUT/scores.parent_test.json")" "$OUT/scores.parent_test.before.json" <<'PY'
import json, os, sys
scores, parent = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
print(f"the parent before fine-tuning: sacreBLEU {parent['sacrebleu']:.2f}  chrF {parent['chrf']:.2f}")
gain = scores["against"]
for name, label in (("sacrebleu", "sacreBLEU"), ("chrf", "chrF")):
    d = gain[name]
    print(f"  fine-tuning gained {label} {d['difference']:+.2f}, 95% interval {d['low']:+.2f} to {d['high']:+.2f}"
          + ("" if d["significant"] else ": not significant") + f" (paired bootstrap, {gain['samples']} resamplings)")
for side in sys.argv[4:6]:  # the pieces the parent's dictionaries lack
    unknown = json.load(open(os.path.join(sys.argv[3], f"unknown.{side}.json")))["inputs"][f"train.{side}"]
    print(f"  train.{side}: {unknown['unknown']:,} of {unknown['pieces']:,} pieces ({unknown['share']:.2%}) not in the parent's dictionary (<unk>)")
for side in sys.argv[4:6]:  # and the lines longer than its positions (the encoding stage named them)
    report = json.load(open(os.path.join(sys.argv[3], f"unknown.{side}.json")))
    for split, what in (("train", "left out of training"), ("valid", "left out of validation"), ("test", "translated")):
        r = report["inputs"].get(f"{split}.{side}", {})
        if r.get("too_long"):
            print(f"  {split}.{side}: {r['too_long']:,} lines longer than the parent's {report['positions']} positions: {what}")
if sys.argv[6]:  # PARENT_TEST: what fine-tuning forgot of the parent's own domain
    after, before = json.load(open(sys.argv[6])), json.load(open(sys.argv[7]))
    d = after["against"]["sacrebleu"]
    print(f"the parent's test set (PARENT_TEST): sacreBLEU {before['sacrebleu']:.2f} before, "
          f"{after['sacrebleu']:.2f} after fine-tuning ({d['difference']:+.2f}, 95% interval {d['low']:+.2f} to "
          f"{d['high']:+.2f}{'' if d['significant'] else ': not significant'})")
PY
where_things_are
