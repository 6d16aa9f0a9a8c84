# What recipes/parallel_text.sh (a model trained from nothing) and recipes/finetune.sh (a published model fine-tuned)
# share, sourced by both after lib.sh (not run): the corpus's, the budget's and the training's variables, and the
# stages both declare (check, clean and split; encode; binarize; train; average; translate; score; report; export).
# The recipe that sources it sets NEEDED (what it cannot run without) and checks it after.
[ "${BASH_SOURCE[0]}" != "$0" ] || { echo "$0 is part of recipes/parallel_text.sh and recipes/finetune.sh: run one" \
  "of them (--help)" >&2; exit 2; }

# ---- the corpus (each can be set in the environment) --------------------------------------------------
TRAIN=${TRAIN:-}                           # training corpora, colon-separated (as fairseq's data): PREFIX or a .tsv
SRC=${SRC:-}; TGT=${TGT:-}                 # language codes, as in the file names (ISO 639-1 for language id)
VALID=${VALID:-}; TEST=${TEST:-}           # dev and test sets in the same forms; empty: held out from TRAIN
TOY=${TOY:-0}                              # 1: toy size on CPU
ON_BAD_BYTES=${ON_BAD_BYTES:-refuse}       # refuse | drop: lines that are not UTF-8
LANGID=${LANGID:-1}                        # 0: no language identification (py3langid)
MAX_WORDS=${MAX_WORDS:-250}; MAX_RATIO=${MAX_RATIO:-3}   # longest side, longest/shortest side
SEED=${SEED:-1}
SHARDS=${SHARDS:-1}                        # N > 1: the training data in N data-bins with one dictionary, one per epoch
# ---- the budget: one of them, or neither (a full run) ------------------------------------------------------------
TIME=${TIME:-}                             # 90m, 8h, 2d: as many updates as fit, at this machine's measured speed
MAX_UPDATE=${MAX_UPDATE:-}                 # N updates (with EVAL_BLEU=1 also stopping after PATIENCE validations without gain)
REPROBE=${REPROBE:-0}                      # 1: this machine's speed measured again, and the plan decided again
SPEED_FILE=${SPEED_FILE:-}                 # vaswani-speed-probe file of the machines that train: TIME at their speed
# REPROBE=1: figures measured since the recipe started (a start again after a re-pick keeps them)
[ "$REPROBE" = 0 ] || printenv TRANSFORMER_PLUGIN_PROBE_FRESH_SINCE > /dev/null ||
  export TRANSFORMER_PLUGIN_PROBE_FRESH_SINCE=$(date +%s.%N)
GPUS=${GPUS:-$([ "$TOY" = 1 ] && echo 0 || gpu_count)}; CPU_WORKERS=${CPU_WORKERS:-2}; PRECISION=${PRECISION:-fp32}
LAUNCH=${LAUNCH:-local}; NNODES=${NNODES:-1}; NODE_RANK=${NODE_RANK:-0}
MASTER_ADDR=${MASTER_ADDR:-}; MASTER_PORT=${MASTER_PORT:-}; DIST_TIMEOUT=${DIST_TIMEOUT:-600}
# ---- the training: empty is the plan's (docs/parallel-text.md) ------------------------------------------------------
DROPOUT=${DROPOUT:-}                       # P_drop
TOKENS_PER_UPDATE=${TOKENS_PER_UPDATE:-}; MAX_TOKENS_PER_DEVICE=${MAX_TOKENS_PER_DEVICE:-4096}
EVAL_BLEU=${EVAL_BLEU:-}                   # 1: validation BLEU, the best checkpoint and early stopping by it
# fairseq's --patience (0: off). It counts the dev BLEU (EVAL_BLEU=1); by valid loss it stopped runs while BLEU rose
# (benchmarks.early_stopping, docs/parallel-text.md "When training stops"), so without EVAL_BLEU it is off unless set
PATIENCE=${PATIENCE:-}                     # empty: 10 with EVAL_BLEU=1, else 0
SAVE_INTERVAL_UPDATES=${SAVE_INTERVAL_UPDATES:-}   # and validation; empty: 1000, or MAX_UPDATE/20 if less
AVERAGE_LAST=${AVERAGE_LAST:-5}
WARMUP=${WARMUP:-}                         # empty: the paper's 4000, or MAX_UPDATE/6 if less, at the same peak
LABEL_SMOOTHING=${LABEL_SMOOTHING:-}; BEAM=${BEAM:-}; LENPEN=${LENPEN:-}   # empty: the paper's
EXPORT=${EXPORT:-}                         # ct2 and/or hf

# corpus_sets: TRAIN, VALID and TEST as arrays (TRAIN_SETS, ...), each corpus made absolute, and WORK. A corpus named by a
# relative or an absolute path is the same corpus (links kept as named), so that a rerun from elsewhere, or with
# $PWD/, skips what is done rather than redo it and stop before training.
corpus_sets() {
  IFS=: read -r -a TRAIN_SETS <<< "$TRAIN"; IFS=: read -r -a VALID_SETS <<< "$VALID"; IFS=: read -r -a TEST_SETS <<< "$TEST"
  absolute TRAIN_SETS; absolute VALID_SETS; absolute TEST_SETS
  TRAIN=$(IFS=:; echo "${TRAIN_SETS[*]}"); VALID=$(IFS=:; echo "${VALID_SETS[*]}"); TEST=$(IFS=:; echo "${TEST_SETS[*]}")
  WORK=${WORK:-runs/parallel_${SRC}_${TGT}$([ "$TOY" != 1 ] || echo _toy)}
}
absolute() { local -n sets=$1; local i; for i in "${!sets[@]}"; do sets[i]=$(realpath -ms -- "${sets[i]}"); done; }

# prepare_stage: stage 1, the corpora checked, cleaned and split (preprocess/parallel_text.py; report in
# $DATA/report.md), dev and test held out of TRAIN where not given (PLAN_HELD_OUT_ARGS)
prepare_stage() {
  local args=(--train "${TRAIN_SETS[@]}" --src "$SRC" --tgt "$TGT" --out "$DATA" --max-words "$MAX_WORDS"
    --max-ratio "$MAX_RATIO" --on-bad-bytes "$ON_BAD_BYTES" --seed "$SEED") reads=() file
  [ ${#VALID_SETS[@]} = 0 ] || args+=(--valid "${VALID_SETS[@]}")
  [ ${#TEST_SETS[@]} = 0 ] || args+=(--test "${TEST_SETS[@]}")
  args+=("${PLAN_HELD_OUT_ARGS[@]}")
  [ "$LANGID" = 1 ] || args+=(--no-langid)
  for file in "${PLAN_INPUT_FILES[@]}"; do reads+=(--reads "$file"); done  # the corpora's files, digested
  data_stage "${reads[@]}" 1 "check, clean and split $TRAIN" "$PY" -m preprocess.parallel_text prepare "${args[@]}"
}

# encode_stage SIDE MODEL [ARGS...]: stage 2b-SIDE, TRAIN_TEXT, valid and test of SIDE encoded into MODEL's pieces
encode_stage() {
  local side=$1 model=$2
  data_stage "2b-$side" "encode train, valid and test ($side) into pieces" \
    "$PY" -m preprocess.sentencepiece_vocab encode --model "$model" \
      --inputs "$TRAIN_TEXT.$side" "$DATA"/{valid,test}."$side" --outputs "$SPM"/{train,valid,test}.sp."$side" --threads "$(cores)" "${@:3}"
}

# PLAN_DECODING: the paper's beam search, Section 6.1 (BEAM, LENPEN: the plan's)
# every test line is translated, however long: fairseq refuses a sentence longer than the task's and the model's
# positions (1,024), and the model's sinusoids extrapolate (Section 3.5); learned ones stop at theirs
long_lines() {
  LONG_LINES=(--max-source-positions 100000 --max-target-positions 100000)
  [[ $PLAN_MODEL_FLAGS == *learned* ]] || LONG_LINES+=(--model-overrides "{'max_source_positions': 100000, 'max_target_positions': 100000}")
}
# translate_stage ID TITLE DATA_BIN CHECKPOINT OUTPUT: fairseq-generate DATA_BIN's test set with CHECKPOINT, decoded
# by PLAN_DECODING, every line however long, into OUTPUT (the test set, the parent's test set; before and after training)
translate_stage() {
  stage "$1" "$2" capture "$5" \
    fairseq-generate "$3" --user-dir "$REPO/transformer_plugin" --path "$4" --gen-subset test \
      "${PLAN_DECODING[@]}" --post-process sentencepiece --batch-size 128 "${LONG_LINES[@]}"
}

# train_args: TRAIN_ARGS, fairseq-train's arguments for stage 4. Validations and checkpoints every
# SAVE_INTERVAL_UPDATES only: fairseq's defaults add one at every epoch's end, which TIME would not count and PATIENCE
# would (early stopping then spans fewer updates than PATIENCE intervals). PLAN_TRAINING: the paper's Adam, Eq. (3) over
# PLAN_WARMUP updates and label smoothing, Sections 5.3-5.4 (the plan's).
train_args() {
  local no_epoch_ends=1000000
  TRAIN_ARGS=("$TRAIN_DATA" --user-dir "$REPO/transformer_plugin" --arch "$PLAN_ARCH" "${PLAN_MODEL_ARGS[@]}" --dropout "$PLAN_DROPOUT" "${PLAN_SHARE_ARGS[@]}"
    "${PLAN_TRAINING[@]}" "${PLAN_PEAK_WARMUP_ARGS[@]}" --max-tokens "$PLAN_MAX_TOKENS" --update-freq "$PLAN_UPDATE_FREQ" --max-update "$PLAN_MAX_UPDATE" --seed "$SEED"
    --save-dir "$CKPT" --save-interval-updates "$PLAN_SAVE_INTERVAL_UPDATES" --keep-interval-updates "$PLAN_AVERAGE_LAST"
    --validate-interval-updates "$PLAN_SAVE_INTERVAL_UPDATES" --no-epoch-checkpoints --validate-interval "$no_epoch_ends" --save-interval "$no_epoch_ends"
    --log-format json --log-interval "$(log_interval "$PLAN_MAX_UPDATE" "$([ "$TOY" = 1 ] && echo 10 || echo 100)")"
    "${PLAN_PRECISION_ARGS[@]}" "${PLAN_STOP_TIME_ARGS[@]}")
  [ "$PLAN_PATIENCE" = 0 ] || TRAIN_ARGS+=(--patience "$PLAN_PATIENCE")
  # TIME, not a cap, bounds the updates: a run faster than its plan trains more of them by its deadline
  export TRANSFORMER_PLUGIN_TIME_FILLS=$PLAN_TIME_FILLS
  # a machine found much slower early in training: stop for the model to be picked again (recipes/planner/repick.py)
  export TRANSFORMER_PLUGIN_REPICK=$PLAN_REPICK
  if [ "$PLAN_EVAL_BLEU" = 1 ]; then
    TRAIN_ARGS+=(--eval-bleu --eval-bleu-args '{"beam": 4, "lenpen": 0.6, "max_len_a": 1, "max_len_b": 50}'
      --eval-bleu-remove-bpe sentencepiece --best-checkpoint-metric bleu --maximize-best-checkpoint-metric)
  fi
  [ "$TOY" = 0 ] || TRAIN_ARGS+=(--num-workers 0)
}

# model_stages: stage 5, the last PLAN_AVERAGE_LAST checkpoints averaged into MODEL_PATH, or (PLAN_HANDED_OVER=best: a small
# corpus fine-tuned, whose last checkpoints may all have overfitted it) the checkpoint of the best dev BLEU; stage 6,
# the test set translated with it
model_stages() {
  if [ "$PLAN_HANDED_OVER" = best ]; then
    MODEL_PATH="$CKPT/checkpoint_best.pt"; MODEL_LABEL="the checkpoint of the best dev BLEU"
  else
    MODEL_PATH="$CKPT/average.pt"; MODEL_LABEL="average of the last $PLAN_AVERAGE_LAST checkpoints"
    stage 5 "average the last $PLAN_AVERAGE_LAST checkpoints (fewer if training stopped early)" \
      "$PY" -m transformer_plugin_cli.tools.average_checkpoints --inputs "$CKPT" \
        --num-update-checkpoints "$PLAN_AVERAGE_LAST" --or-fewer --output "$MODEL_PATH"
  fi
  translate_stage 6 "fairseq-generate the test set: ${PLAN_DECODING[*]}" "$EVAL_DATA" "$MODEL_PATH" "$OUT/generate.test.out"
}

# score_stage [ARGS...]: stage 7, sacreBLEU and chrF of the test set (ARGS: a baseline to compare with)
score_stage() {
  stage 7 "sacreBLEU and chrF on the test set" \
    "$PY" -m transformer_plugin_cli.tools.evaluate --generate-output "$OUT/generate.test.out" \
      --reference "$DATA/test.$TGT" --hypotheses-out "$OUT/hypotheses.test.txt" --json "$OUT/scores.test.json" \
      --label "$SRC-$TGT, $MODEL_LABEL" --paper "no paper figure: your corpus" "$@"
}

# report_stage [ARGS...]: stage 8, the report with learning curves (ARGS: more scores and reports to show)
report_stage() {
  stage 8 "report with learning curves, Eq. (3) and attention maps" \
    "$PY" -m transformer_plugin_cli.tools.report --train-log "$TRAIN_LOG" --out-dir "$OUT" \
      --scores "$MODEL_LABEL=$OUT/scores.test.json" "$@" --checkpoint "$MODEL_PATH" --data "$EVAL_DATA" \
      --title "$SRC-$TGT: $PLAN_ARCH on $TRAIN" --note "$PLAN_PAIRS lines, $PLAN_SIZE_CLASS, vocabulary $PLAN_VOCAB_SIZE, $PLAN_BATCH_SUMMARY"
}

# export_stages [ARGS...]: stage 9, the exports EXPORT names (ARGS: the Hugging Face export's own)
export_stages() {
  local export
  for export in $EXPORT; do
    case $export in
      ct2) stage 9-ct2 "CTranslate2 model" "$PY" -m transformer_plugin_cli.serving.export_ctranslate2 \
             --model-path "$MODEL_PATH" --data-dir "$EVAL_DATA" --output-dir "$WORK/ct2" --force ;;
      hf) stage 9-hf "Hugging Face Transformers model (MarianMT; M2M100 from an NLLB or M2M100 parent)" "$PY" -m transformer_plugin_cli.serving.export_transformers \
            --model-path "$MODEL_PATH" --data-dir "$EVAL_DATA" --spm "$SRC_SPM" --target-spm "$TGT_SPM" \
            --scores "test=$OUT/scores.test.json" --output-dir "$WORK/hf" --force "$@" ;;
      *) echo "EXPORT=$EXPORT: ct2 and/or hf" >&2; exit 2 ;;
    esac
  done
}

# test_scores: the test set's scores, as the run ends
test_scores() {
  "$PY" - "$OUT/scores.test.json" <<'EOF'
import json, sys
scores = json.load(open(sys.argv[1]))
print(f"sacreBLEU {scores['sacrebleu']:.2f}  chrF {scores['chrf']:.2f}  ({scores['sentences']} test sentences)")
print(f"  {scores['sacrebleu_signature']}\n  {scores['chrf_signature']}")
EOF
}

# where_things_are: the model, the reports and the exports, as the run ends
where_things_are() {
  local export
  echo "model: $MODEL_PATH (data: $EVAL_DATA; sentencepiece: $SRC_SPM$([ "$SRC_SPM" = "$TGT_SPM" ] || echo ", $TGT_SPM"))"
  echo "report: $OUT/report.md; the data's report: $DATA/report.md"
  for export in $EXPORT; do echo "export ($export): $WORK/$export"; done
}
