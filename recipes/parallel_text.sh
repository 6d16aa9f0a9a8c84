#!/usr/bin/env bash
# Your own parallel text, from two text files (or a TSV) to an evaluated, exported model: checked and
# cleaned with a report, dev and test held out when none are given, a sentencepiece vocabulary, the
# paper's training with the settings that fit the corpus's size, averaging, beam search, sacreBLEU and chrF,
# a report with learning curves, and CTranslate2 / Hugging Face exports. Rules and sources: docs/parallel-text.md.
#
#   TRAIN=corpus/train SRC=en TGT=de bash recipes/parallel_text.sh         # corpus/train.en and corpus/train.de
#   TRAIN=pairs.tsv.gz SRC=en TGT=de bash recipes/parallel_text.sh         # source<TAB>target, a pair a line
#   TRAIN=a:b.tsv VALID=dev TEST=test SRC=en TGT=de bash recipes/parallel_text.sh   # several corpora; dev, test
#   TRAIN=corpus/train SRC=en TGT=de bash recipes/parallel_text.sh --dry-run   # the settings it picks, every command
#   TIME=8h TRAIN=corpus/train SRC=en TGT=de bash recipes/parallel_text.sh --dry-run --explain   # and why (WORK/plan.json)
#   TOY=1 TRAIN=corpus/train SRC=en TGT=de bash recipes/parallel_text.sh  # the same stages at toy size on CPU
#   DATA_ONLY=1 TRAIN=corpus/train SRC=en TGT=de bash recipes/parallel_text.sh   # stages 1-3 only: the data-bin
#   INIT=opus-mt-en-de TRAIN=corpus/train SRC=en TGT=de bash recipes/parallel_text.sh  # fine-tune a MarianMT model
#
# Stages: 1 check, clean, split (preprocess/parallel_text.py; report in WORK/data/report.md); 2 sentencepiece
# (joint, or one per side where the scripts differ), trained on a sample; 3 fairseq-preprocess; 4 fairseq-train,
# stopping at MAX_UPDATE (with EVAL_BLEU=1 also when PATIENCE validations bring no better dev BLEU); 5 average the
# last checkpoints; 6 fairseq-generate the test set; 7 sacreBLEU and chrF; 8 report; 9 exports (EXPORT="ct2 hf").
# INIT: 2p the parent imported, no sentencepiece trained (the parent's), 3p-3q the parent scored before fine-tuning;
# with PARENT_TEST 2c-3t and 7p-7q its own test set before and after; with REPLAY 1r a general corpus mixed in, or
# with REPLAY=parent 1d-2f the parent's own translations of the training sources (or of REPLAY_SOURCES); a corpus
# under 10k pairs hands over its best.
# GPUS, CPU_WORKERS, PRECISION and LAUNCH, NNODES, NODE_RANK, MASTER_ADDR, MASTER_PORT, DIST_TIMEOUT work as in
# the WMT14 recipes (docs/several-machines.md).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$REPO/recipes/lib.sh"
recipe_options "$0" "$@"

# ---- the corpus (each can be set in the environment) --------------------------------------------------
TRAIN=${TRAIN:-}                           # training corpora, colon-separated (as fairseq's data): PREFIX or a .tsv
SRC=${SRC:-}; TGT=${TGT:-}                 # language codes, as in the file names (ISO 639-1 for language id)
VALID=${VALID:-}; TEST=${TEST:-}           # dev and test sets in the same forms; empty: held out from TRAIN
TOY=${TOY:-0}                              # 1: toy size on CPU
NEEDED="TRAIN, SRC and TGT are needed: TRAIN=corpus/train SRC=en TGT=de bash $0 (corpus/train.en, corpus/train.de)"
if [ -z "$TRAIN" ] || [ -z "$SRC" ] || [ -z "$TGT" ]; then
  if [ "$DRY_RUN" = 0 ]; then echo "$NEEDED" >&2; exit 2; fi
  echo "$NEEDED. Without them a dry run can only show the settings it picks by the corpus's size:"
  "$PY" -m recipes.planner sizes
  exit 0
fi
IFS=: read -r -a TRAIN_SETS <<< "$TRAIN"; IFS=: read -r -a VALID_SETS <<< "$VALID"; IFS=: read -r -a TEST_SETS <<< "$TEST"
# a corpus named by a relative or an absolute path is the same corpus: each made absolute (links kept as named), so
# that a rerun from elsewhere, or with $PWD/, skips what is done rather than redo it and stop before training
absolute() { local -n sets=$1; local i; for i in "${!sets[@]}"; do sets[i]=$(realpath -ms -- "${sets[i]}"); done; }
absolute TRAIN_SETS; absolute VALID_SETS; absolute TEST_SETS
TRAIN=$(IFS=:; echo "${TRAIN_SETS[*]}"); VALID=$(IFS=:; echo "${VALID_SETS[*]}"); TEST=$(IFS=:; echo "${TEST_SETS[*]}")
WORK=${WORK:-runs/parallel_${SRC}_${TGT}$([ "$TOY" != 1 ] || echo _toy)}
ON_BAD_BYTES=${ON_BAD_BYTES:-refuse}       # refuse | drop: lines that are not UTF-8
LANGID=${LANGID:-1}                        # 0: no language identification (py3langid)
MAX_WORDS=${MAX_WORDS:-250}; MAX_RATIO=${MAX_RATIO:-3}   # longest side, longest/shortest side
MIN_PAIRS=${MIN_PAIRS:-10000}              # fewer training lines stop the recipe (OPUS-MT does not train below 10k)
FINETUNE_MIN_PAIRS=${FINETUNE_MIN_PAIRS:-}  # INIT: fewer training pairs, once dev and test are held out, stop it (100)
SEED=${SEED:-1}
SHARDS=${SHARDS:-1}                        # N > 1: the training data in N data-bins with one dictionary, one per epoch
# ---- a published model to fine-tune (docs/parallel-text.md "From a published model") ---------------------------
INIT=${INIT:-}                             # a MarianMT directory (OPUS-MT's, or EXPORT=hf's), or vaswani-import-marian's
TGT_TOKEN=${TGT_TOKEN:-}                   # a multilingual parent's >>xx<< for TGT; empty: found in its vocabulary
PARENT_TEST=${PARENT_TEST:-}               # PREFIX (PREFIX.SRC, PREFIX.TGT): a general test set, scored before, after
[ -z "$PARENT_TEST" ] || PARENT_TEST=$(realpath -ms -- "$PARENT_TEST")
REPLAY=${REPLAY:-}                         # PREFIX of a general corpus replayed into the fine-tuning against forgetting,
                                           # or parent: the parent's translations of the training sources (distillation)
REPLAY_RATIO=${REPLAY_RATIO:-1}            # its pairs drawn per in-domain pair (parent: the share of sources, at most 1)
REPLAY_SOURCES=${REPLAY_SOURCES:-}         # REPLAY=parent: PREFIX of source text of the parent's domains (PREFIX.SRC) it
                                           # translates instead, REPLAY_RATIO lines an in-domain pair; empty: the sources
[ -z "$REPLAY" ] || [ "$REPLAY" = parent ] || REPLAY=$(realpath -ms -- "$REPLAY")
[ -z "$REPLAY_SOURCES" ] || REPLAY_SOURCES=$(realpath -ms -- "$REPLAY_SOURCES")
# INIT's batch, rate and length come from the practice of fine-tuning OPUS-MT models (recipes/planner/finetuning.py): 64
# sentences an update, 3e-4 after a linear ramp of a tenth of the updates then its inverse square root (OPUS-MT-train's
# finetune/), EPOCHS without a budget; a corpus under 10,000 pairs hands over its checkpoint of the best dev BLEU
FINETUNE_WARMUP=${FINETUNE_WARMUP:-}       # the ramp's updates; empty: a tenth of the updates, at most 16,000
[ -z "$INIT" ] || INIT=$(realpath -ms -- "$INIT")  # as the corpus: a rerun from elsewhere, or with $PWD/, is the same parent
# ---- the budget: one of them, or neither (a full run of the corpus's size class) -----------------------------
TIME=${TIME:-}                             # 90m, 8h, 2d: as many updates as fit, at this machine's measured speed
MAX_UPDATE=${MAX_UPDATE:-}                 # N updates (with EVAL_BLEU=1 also stopping after PATIENCE validations without gain)
REPROBE=${REPROBE:-0}                      # 1: this machine's speed measured again, and the plan decided again
SPEED_FILE=${SPEED_FILE:-}                 # vaswani-speed-probe file of the machines that train: TIME at their speed
[ "$REPROBE" = 0 ] || export TRANSFORMER_PLUGIN_PROBE_FRESH_SINCE=$(date +%s.%N)
GPUS=${GPUS:-$([ "$TOY" = 1 ] && echo 0 || gpu_count)}; CPU_WORKERS=${CPU_WORKERS:-2}; PRECISION=${PRECISION:-fp32}
LAUNCH=${LAUNCH:-local}; NNODES=${NNODES:-1}; NODE_RANK=${NODE_RANK:-0}
MASTER_ADDR=${MASTER_ADDR:-}; MASTER_PORT=${MASTER_PORT:-}; DIST_TIMEOUT=${DIST_TIMEOUT:-600}
# ---- the model and its training: empty is the plan's (by the corpus's size and the budget, docs/parallel-text.md) -
VOCAB_SIZE=${VOCAB_SIZE:-}                 # sentencepiece pieces (per side when not joint)
JOINT_VOCAB=${JOINT_VOCAB:-}               # 1: one vocabulary for both sides (same script); 0: one per side
SPM_TYPE=${SPM_TYPE:-}                     # empty: bpe
SPM_SAMPLE=${SPM_SAMPLE:-2000000}          # sentences sentencepiece learns from (memory bounded by it)
ARCH=${ARCH:-}; MODEL_FLAGS=${MODEL_FLAGS:-}   # the model; MODEL_FLAGS alone: vaswani_base with them
DROPOUT=${DROPOUT:-}                       # P_drop
TOKENS_PER_UPDATE=${TOKENS_PER_UPDATE:-}; MAX_TOKENS_PER_DEVICE=${MAX_TOKENS_PER_DEVICE:-4096}
EVAL_BLEU=${EVAL_BLEU:-}                   # 1: validation BLEU, the best checkpoint and early stopping by it
                                           # empty: 0, or 1 when INIT fine-tunes a corpus under 10,000 pairs
# fairseq's --patience (0: off). It counts the dev BLEU (EVAL_BLEU=1); by valid loss it stopped runs while BLEU rose
# (benchmarks.early_stopping, docs/parallel-text.md "When training stops"), so without EVAL_BLEU it is off unless set
PATIENCE=${PATIENCE:-}                     # empty: 10 with EVAL_BLEU=1, else 0
SAVE_INTERVAL_UPDATES=${SAVE_INTERVAL_UPDATES:-}   # and validation; empty: 1000, or MAX_UPDATE/20 if less
AVERAGE_LAST=${AVERAGE_LAST:-5}
WARMUP=${WARMUP:-}                         # empty: the paper's 4000, or MAX_UPDATE/6 if less, at the same peak
LABEL_SMOOTHING=${LABEL_SMOOTHING:-}; BEAM=${BEAM:-}; LENPEN=${LENPEN:-}   # empty: the paper's
EXPORT=${EXPORT:-}                         # ct2 and/or hf
# TOY=1: the same stages at toy size, on CPU, in minutes (TOY_ARCH, TOY_MAX_UPDATE, ... the plan's toy settings)

# ---- the plan: every setting above decided once, from the corpus, the budget and the parent (recipes/planner/) -----
# INIT: the parent's model, vocabulary and P_drop, checked before any work (recipes/planner/parent.py); fine-tuning's batch,
# rate and length (recipes/planner/finetuning.py), the budget sizing the updates. TIME: each candidate's speed probed here
# (recipes/planner/speed/: a few seconds, once per machine and model). It is written as WORK/plan.json, and a resumed
# run trains as it began; it says itself in two lines (the reasons: --explain, and WORK/plan.json). fairseq's
# --stop-time-hours stops training at TIME in any case.
plan_run
DATA="$WORK/data"; SPM="$WORK/spm"; BIN="$WORK/data-bin"; CKPT="$WORK/checkpoints"; OUT="$WORK/results"
precision_args "$PRECISION"

# ---- 1. check, clean, split ------------------------------------------------------------------------------
PREPARE_ARGS=(--train "${TRAIN_SETS[@]}" --src "$SRC" --tgt "$TGT" --out "$DATA" --max-words "$MAX_WORDS"
  --max-ratio "$MAX_RATIO" --on-bad-bytes "$ON_BAD_BYTES" --seed "$SEED")
[ ${#VALID_SETS[@]} = 0 ] || PREPARE_ARGS+=(--valid "${VALID_SETS[@]}")
[ ${#TEST_SETS[@]} = 0 ] || PREPARE_ARGS+=(--test "${TEST_SETS[@]}")
PREPARE_ARGS+=("${HELD_OUT_ARGS[@]}")  # INIT: at least 200 dev and 200 test lines held out of TRAIN where not given
[ "$LANGID" = 1 ] || PREPARE_ARGS+=(--no-langid)
READS=(); for file in "${INPUT_FILES[@]}"; do READS+=(--reads "$file"); done  # the corpora's files, digested
data_stage "${READS[@]}" 1 "check, clean and split $TRAIN" "$PY" -m preprocess.parallel_text prepare "${PREPARE_ARGS[@]}"
# INIT with REPLAY: REPLAY_RATIO general pairs an in-domain pair, drawn by SEED, none a dev or test source
TRAIN_TEXT="$DATA/train"
if [ -n "$INIT" ] && [ "$REPLAY" = parent ]; then  # distillation: the sources drawn here, translated after stage 2p
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
elif [ -n "$INIT" ] && [ -n "$REPLAY" ]; then
  TRAIN_TEXT="$DATA/replayed/train"
  data_stage --reads "$DATA/train.$SRC" --reads "$DATA/train.$TGT" --reads "$REPLAY.$SRC" --reads "$REPLAY.$TGT" \
    --writes "$TRAIN_TEXT.$SRC" --writes "$TRAIN_TEXT.$TGT" 1r "replay $REPLAY into the training text: $REPLAY_RATIO a pair" \
    "$PY" -m preprocess.parallel_text replay --corpus "$REPLAY" --src "$SRC" --tgt "$TGT" --train "$DATA/train" \
      --held "$DATA/valid" "$DATA/test" --ratio "$REPLAY_RATIO" --seed "$SEED" --out "$TRAIN_TEXT"
fi

# ---- 2. sentencepiece, on a sample of SPM_SAMPLE sentences (INIT: the parent's, imported) -------------------------
SPM_ARGS=(--vocab-size "$VOCAB_SIZE" --model-type "$SPM_TYPE" --input-sentence-size "$SPM_SAMPLE"
  --vocab-size-name "$([ "$TOY" != 1 ] || echo TOY_)VOCAB_SIZE" --input-sentence-size-name SPM_SAMPLE)
ENCODE_ARGS=()
if [ -n "$INIT" ]; then
  if [ "$PARENT_KIND" = marian ]; then
    data_stage --writes "$PARENT_DIR" 2p "import the parent $INIT (vaswani-import-marian)" \
      "$PY" -m transformer_plugin_cli.serving.import_marian "$INIT" "$PARENT_DIR" --source-lang "$SRC" --target-lang "$TGT" --force
  fi
  SRC_SPM=$PARENT_SRC_SPM; TGT_SPM=$PARENT_TGT_SPM
  if [ "$REPLAY" = parent ]; then  # the parent's own translations of those sources, mixed into the training text
    PREFIX_ARGS=(); [ -z "$PARENT_TGT_TOKEN" ] || PREFIX_ARGS=(--prefix "$PARENT_TGT_TOKEN")
    data_stage 2d "encode the sources drawn into the parent's pieces" \
      "$PY" -m preprocess.sentencepiece_vocab encode --model "$SRC_SPM" --inputs "$DATA/distilled/sources.$SRC" \
        --outputs "$DATA/distilled/sources.sp.$SRC" --threads "$(cores)" "${PREFIX_ARGS[@]}"
    data_stage 2e "translate them with the parent (fairseq-interactive: ${DECODING[*]})" \
      capture "$DATA/distilled/parent.out" fairseq-interactive "$PARENT_DIR" --user-dir "$REPO/transformer_plugin" \
        --path "$PARENT_CHECKPOINT" --source-lang "$SRC" --target-lang "$TGT" --input "$DATA/distilled/sources.sp.$SRC" \
        "${DECODING[@]}" --post-process sentencepiece --buffer-size 1024 --batch-size 128 --skip-invalid-size-inputs-valid-test
    data_stage --writes "$TRAIN_TEXT.$SRC" --writes "$TRAIN_TEXT.$TGT" 2f "the training text with the parent's translations in it" \
      "$PY" -m preprocess.parallel_text distilled --train "$DATA/train" --src "$SRC" --tgt "$TGT" \
        --sources "$DATA/distilled/sources.$SRC" --translations "$DATA/distilled/parent.out" --out "$TRAIN_TEXT"
  fi
elif [ "$JOINT_VOCAB" = 1 ]; then
  data_stage 2a "joint sentencepiece $SPM_TYPE vocabulary of $VOCAB_SIZE pieces" \
    "$PY" -m preprocess.sentencepiece_vocab train --inputs "$DATA/train.$SRC" "$DATA/train.$TGT" \
      --model-prefix "$SPM/spm" "${SPM_ARGS[@]}"
  SRC_SPM="$SPM/spm.model"; TGT_SPM="$SPM/spm.model"
else
  for side in "$SRC" "$TGT"; do
    data_stage "2a-$side" "sentencepiece $SPM_TYPE vocabulary of $VOCAB_SIZE pieces for $side" \
      "$PY" -m preprocess.sentencepiece_vocab train --inputs "$DATA/train.$side" --model-prefix "$SPM/spm.$side" "${SPM_ARGS[@]}"
  done
  SRC_SPM="$SPM/spm.$SRC.model"; TGT_SPM="$SPM/spm.$TGT.model"
fi
for side in "$SRC" "$TGT"; do
  model=$([ "$side" = "$SRC" ] && echo "$SRC_SPM" || echo "$TGT_SPM")
  # INIT: how many pieces the parent's dictionary lacks (fairseq's <unk>), in $SPM/unknown.$side.json
  # and the lines longer than the parent's positions, which training and validation leave out
  [ -z "$INIT" ] || ENCODE_ARGS=(--dictionary "$([ "$side" = "$SRC" ] && echo "$PARENT_SRC_DICT" || echo "$PARENT_TGT_DICT")"
                                  --unknown-report "$SPM/unknown.$side.json"
                                  --positions "$([ "$side" = "$SRC" ] && echo "$PARENT_SOURCE_POSITIONS" || echo "$PARENT_TARGET_POSITIONS")")
  # a multilingual parent: its >>xx<< for TGT before every source sentence, one id of its dictionary
  [ -z "$INIT" ] || [ -z "$PARENT_TGT_TOKEN" ] || [ "$side" != "$SRC" ] || ENCODE_ARGS+=(--prefix "$PARENT_TGT_TOKEN")
  data_stage "2b-$side" "encode train, valid and test ($side) into pieces" \
    "$PY" -m preprocess.sentencepiece_vocab encode --model "$model" \
      --inputs "$TRAIN_TEXT.$side" "$DATA"/{valid,test}."$side" --outputs "$SPM"/{train,valid,test}.sp."$side" --threads "$(cores)" "${ENCODE_ARGS[@]}"
done

# INIT with PARENT_TEST: a test set of the parent's own domain, translated by the parent before fine-tuning (3s-3t)
# and by the fine-tuned model after (7p-7q): what fine-tuning forgets, with the paired bootstrap of the change
if [ -n "$INIT" ] && [ -n "$PARENT_TEST" ]; then
  for side in "$SRC" "$TGT"; do
    model=$([ "$side" = "$SRC" ] && echo "$SRC_SPM" || echo "$TGT_SPM"); PREFIX_ARGS=()
    [ -z "$PARENT_TGT_TOKEN" ] || [ "$side" != "$SRC" ] || PREFIX_ARGS=(--prefix "$PARENT_TGT_TOKEN")
    data_stage "2c-$side" "encode the parent's test set $PARENT_TEST ($side) into its pieces" \
      "$PY" -m preprocess.sentencepiece_vocab encode --model "$model" --inputs "$PARENT_TEST.$side" \
        --outputs "$SPM/parent_test.sp.$side" --threads "$(cores)" "${PREFIX_ARGS[@]}"
  done
fi

# ---- 3. binarize ---------------------------------------------------------------------------------------------
DICT_ARGS=()
if [ -n "$INIT" ]; then DICT_ARGS=(--srcdict "$PARENT_SRC_DICT" --tgtdict "$PARENT_TGT_DICT")
elif [ "$JOINT_VOCAB" = 1 ]; then DICT_ARGS=(--joined-dictionary); fi
binarize_stages 3 "$(cores)" "${DICT_ARGS[@]}"  # SHARDS=N: N data-bins, one dictionary (lib.sh)
PARENT_TEST_BIN="$WORK/parent-test-bin"
if [ -n "$INIT" ] && [ -n "$PARENT_TEST" ]; then
  data_stage 3r "fairseq-preprocess the parent's test set with its dictionaries" \
    fairseq-preprocess --source-lang "$SRC" --target-lang "$TGT" --testpref "$SPM/parent_test.sp" \
      --srcdict "$PARENT_SRC_DICT" --tgtdict "$PARENT_TGT_DICT" --destdir "$PARENT_TEST_BIN" --workers "$(cores)"
fi
if [ "${DATA_ONLY:-0}" = 1 ]; then run_stages; echo "DATA_ONLY=1: the data is ready in $TRAIN_DATA"; exit 0; fi

# DECODING: the paper's beam search, Section 6.1 (BEAM, LENPEN: the plan's)
# every test line is translated, however long: fairseq refuses a sentence longer than the task's and the model's
# positions (1,024), and the model's sinusoids extrapolate (Section 3.5); learned ones stop at theirs
LONG_LINES=(--max-source-positions 100000 --max-target-positions 100000)
[[ $MODEL_FLAGS == *learned* ]] || LONG_LINES+=(--model-overrides "{'max_source_positions': 100000, 'max_target_positions': 100000}")
# translate_stage ID TITLE DATA_BIN CHECKPOINT OUTPUT: fairseq-generate DATA_BIN's test set with CHECKPOINT, decoded
# by DECODING, every line however long, into OUTPUT (the test set, the parent's test set; before and after training)
translate_stage() {
  stage "$1" "$2" capture "$5" \
    fairseq-generate "$3" --user-dir "$REPO/transformer_plugin" --path "$4" --gen-subset test \
      "${DECODING[@]}" --post-process sentencepiece --batch-size 128 "${LONG_LINES[@]}"
}
if [ -n "$INIT" ]; then  # the parent on this test set, before fine-tuning: what fine-tuning gains
  translate_stage 3p "fairseq-generate the test set with the parent, before fine-tuning" \
    "$EVAL_DATA" "$PARENT_CHECKPOINT" "$OUT/generate.parent.test.out"
  stage 3q "sacreBLEU and chrF of the parent on the test set" \
    "$PY" -m transformer_plugin_cli.tools.evaluate --generate-output "$OUT/generate.parent.test.out" \
      --reference "$DATA/test.$TGT" --hypotheses-out "$OUT/hypotheses.parent.test.txt" --json "$OUT/scores.parent.json" \
      --label "$SRC-$TGT, the parent $INIT before fine-tuning" --paper "no paper figure: your corpus"
fi

if [ -n "$INIT" ] && [ -n "$PARENT_TEST" ]; then  # the parent on its own test set, before fine-tuning
  translate_stage 3s "fairseq-generate the parent's test set with the parent, before fine-tuning" \
    "$PARENT_TEST_BIN" "$PARENT_CHECKPOINT" "$OUT/generate.parent_test.before.out"
  stage 3t "sacreBLEU and chrF of the parent on its test set" \
    "$PY" -m transformer_plugin_cli.tools.evaluate --generate-output "$OUT/generate.parent_test.before.out" \
      --reference "$PARENT_TEST.$TGT" --hypotheses-out "$OUT/hypotheses.parent_test.before.txt" \
      --json "$OUT/scores.parent_test.before.json" --label "$SRC-$TGT, the parent on PARENT_TEST, before fine-tuning" \
      --paper "no paper figure: your test set"
fi

# ---- 4. training ----------------------------------------------------------------------------------------------
# Validations and checkpoints every SAVE_INTERVAL_UPDATES only: fairseq's defaults add one at every epoch's end, which
# TIME would not count and PATIENCE would (early stopping then spans fewer updates than PATIENCE intervals)
NO_EPOCH_ENDS=1000000
# TRAINING: the paper's Adam, Eq. (3) over WARMUP updates and label smoothing, Sections 5.3-5.4 (the plan's)
TRAIN_ARGS=("$TRAIN_DATA" --user-dir "$REPO/transformer_plugin" --arch "$ARCH" "${MODEL_ARGS[@]}" --dropout "$DROPOUT" "${SHARE_ARGS[@]}"
  "${TRAINING[@]}" "${PEAK_WARMUP_ARGS[@]}" --max-tokens "$MAX_TOKENS" --update-freq "$UPDATE_FREQ" --max-update "$MAX_UPDATE" --seed "$SEED"
  --save-dir "$CKPT" --save-interval-updates "$SAVE_INTERVAL_UPDATES" --keep-interval-updates "$AVERAGE_LAST"
  --validate-interval-updates "$SAVE_INTERVAL_UPDATES" --no-epoch-checkpoints --validate-interval "$NO_EPOCH_ENDS" --save-interval "$NO_EPOCH_ENDS"
  --log-format json --log-interval "$(log_interval "$MAX_UPDATE" "$([ "$TOY" = 1 ] && echo 10 || echo 100)")"
  "${PRECISION_ARGS[@]}" "${STOP_TIME_ARGS[@]}")
[ "$PATIENCE" = 0 ] || TRAIN_ARGS+=(--patience "$PATIENCE")
if [ "$EVAL_BLEU" = 1 ]; then
  TRAIN_ARGS+=(--eval-bleu --eval-bleu-args '{"beam": 4, "lenpen": 0.6, "max_len_a": 1, "max_len_b": 50}'
    --eval-bleu-remove-bpe sentencepiece --best-checkpoint-metric bleu --maximize-best-checkpoint-metric)
fi
[ "$TOY" = 0 ] || TRAIN_ARGS+=(--num-workers 0)
# the parent's weights; fairseq starts optimizer, scheduler, meters and data afresh, and resumes from checkpoint_last.pt
[ -z "$INIT" ] || TRAIN_ARGS+=(--finetune-from-model "$PARENT_CHECKPOINT" --skip-invalid-size-inputs-valid-test)
train_stage 4 "fairseq-train --arch $ARCH, at most $MAX_UPDATE updates" "$WORK/train.log" "${TRAIN_ARGS[@]}"

# ---- 5.-8. evaluation ------------------------------------------------------------------------------------------
if [ "$HANDED_OVER" = best ]; then  # INIT on a small corpus: the last checkpoints may all have overfitted it
  MODEL_PATH="$CKPT/checkpoint_best.pt"; MODEL_LABEL="the checkpoint of the best dev BLEU"
else
  MODEL_PATH="$CKPT/average.pt"; MODEL_LABEL="average of the last $AVERAGE_LAST checkpoints"
  stage 5 "average the last $AVERAGE_LAST checkpoints (fewer if training stopped early)" \
    "$PY" -m transformer_plugin_cli.tools.average_checkpoints --inputs "$CKPT" \
      --num-update-checkpoints "$AVERAGE_LAST" --or-fewer --output "$MODEL_PATH"
fi
translate_stage 6 "fairseq-generate the test set: ${DECODING[*]}" "$EVAL_DATA" "$MODEL_PATH" "$OUT/generate.test.out"
# INIT: the paired bootstrap of the fine-tuned model against the parent on the same test set (its 95% interval)
BASELINE_ARGS=(); [ -z "$INIT" ] || BASELINE_ARGS=(--baseline "$OUT/hypotheses.parent.test.txt" --baseline-label "the parent")
stage 7 "sacreBLEU and chrF on the test set" \
  "$PY" -m transformer_plugin_cli.tools.evaluate --generate-output "$OUT/generate.test.out" \
    --reference "$DATA/test.$TGT" --hypotheses-out "$OUT/hypotheses.test.txt" --json "$OUT/scores.test.json" \
    --label "$SRC-$TGT, $MODEL_LABEL" --paper "no paper figure: your corpus" "${BASELINE_ARGS[@]}"
REPORT_ARGS=(); [ -z "$INIT" ] || REPORT_ARGS=(--scores "the parent, before fine-tuning=$OUT/scores.parent.json"
                                               --unknown "$SPM/unknown.$SRC.json" --unknown "$SPM/unknown.$TGT.json")
if [ -n "$INIT" ] && [ -n "$PARENT_TEST" ]; then  # what fine-tuning forgets: the parent's test set after it
  translate_stage 7p "fairseq-generate the parent's test set with the fine-tuned model" \
    "$PARENT_TEST_BIN" "$MODEL_PATH" "$OUT/generate.parent_test.out"
  stage 7q "sacreBLEU and chrF on the parent's test set, against the parent" \
    "$PY" -m transformer_plugin_cli.tools.evaluate --generate-output "$OUT/generate.parent_test.out" \
      --reference "$PARENT_TEST.$TGT" --hypotheses-out "$OUT/hypotheses.parent_test.txt" \
      --json "$OUT/scores.parent_test.json" --label "$SRC-$TGT, $MODEL_LABEL on PARENT_TEST" \
      --paper "no paper figure: your test set" --baseline "$OUT/hypotheses.parent_test.before.txt" --baseline-label "the parent"
  REPORT_ARGS+=(--scores "the parent on PARENT_TEST, before=$OUT/scores.parent_test.before.json"
                --scores "$MODEL_LABEL on PARENT_TEST=$OUT/scores.parent_test.json")
fi
stage 8 "report with learning curves, Eq. (3) and attention maps" \
  "$PY" -m transformer_plugin_cli.tools.report --train-log "$TRAIN_LOG" --out-dir "$OUT" \
    --scores "$MODEL_LABEL=$OUT/scores.test.json" "${REPORT_ARGS[@]}" --checkpoint "$MODEL_PATH" --data "$EVAL_DATA" \
    --title "$SRC-$TGT: $ARCH on $TRAIN" --note "$PAIRS lines, $SIZE_CLASS, vocabulary $VOCAB_SIZE, $BATCH_SUMMARY"

# ---- 9. exports ----------------------------------------------------------------------------------------------
# a multilingual parent's >>xx<< token: the Transformers model card says to put it before every source sentence
HF_TOKEN_ARGS=(); [ -z "${PARENT_TGT_TOKEN:-}" ] || HF_TOKEN_ARGS=(--target-token "$PARENT_TGT_TOKEN")
for export in $EXPORT; do
  case $export in
    ct2) stage 9-ct2 "CTranslate2 model" "$PY" -m transformer_plugin_cli.serving.export_ctranslate2 \
           --model-path "$MODEL_PATH" --data-dir "$EVAL_DATA" --output-dir "$WORK/ct2" --force ;;
    hf) stage 9-hf "Hugging Face Transformers model (MarianMT)" "$PY" -m transformer_plugin_cli.serving.export_transformers \
          --model-path "$MODEL_PATH" --data-dir "$EVAL_DATA" --spm "$SRC_SPM" --target-spm "$TGT_SPM" \
          --scores "test=$OUT/scores.test.json" --output-dir "$WORK/hf" --force "${HF_TOKEN_ARGS[@]}" ;;
    *) echo "EXPORT=$EXPORT: ct2 and/or hf" >&2; exit 2 ;;
  esac
done

run_stages  # every stage above decided before any work, then run in order
[ "$DRY_RUN" = 0 ] || exit 0
banner "results"
"$PY" - "$OUT/scores.test.json" "$([ -z "$INIT" ] || echo "$OUT/scores.parent.json")" "$SPM" "$SRC" "$TGT" \
  "$([ -z "$INIT" ] || [ -z "$PARENT_TEST" ] || echo "$OUT/scores.parent_test.json")" "$OUT/scores.parent_test.before.json" <<'EOF'
import json, os, sys
scores = json.load(open(sys.argv[1]))
print(f"sacreBLEU {scores['sacrebleu']:.2f}  chrF {scores['chrf']:.2f}  ({scores['sentences']} test sentences)")
print(f"  {scores['sacrebleu_signature']}\n  {scores['chrf_signature']}")
if sys.argv[2]:  # INIT: the parent before fine-tuning, and the pieces its dictionaries lack
    parent = json.load(open(sys.argv[2]))
    print(f"the parent before fine-tuning: sacreBLEU {parent['sacrebleu']:.2f}  chrF {parent['chrf']:.2f}")
    gain = scores["against"]
    for name, label in (("sacrebleu", "sacreBLEU"), ("chrf", "chrF")):
        d = gain[name]
        print(f"  fine-tuning gained {label} {d['difference']:+.2f}, 95% interval {d['low']:+.2f} to {d['high']:+.2f}"
              + ("" if d["significant"] else ": not significant") + f" (paired bootstrap, {gain['samples']} resamplings)")
    for side in sys.argv[4:6]:
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
EOF
echo "model: $MODEL_PATH (data: $EVAL_DATA; sentencepiece: $SRC_SPM$([ "$SRC_SPM" = "$TGT_SPM" ] || echo ", $TGT_SPM"))"
echo "report: $OUT/report.md; the data's report: $DATA/report.md"
for export in $EXPORT; do echo "export ($export): $WORK/$export"; done
