#!/usr/bin/env bash
# The paper's whole method, end to end, on a synthetic language pair this project generates itself
# (no download): joint BPE vocabulary, binarization, data-parallel training with the paper's
# criterion and schedule, averaging of the last checkpoints, beam search, sacreBLEU/chrF, a report.
#
#   bash recipes/demo.sh                 # about 9 minutes on 2 CPU cores
#   WORK=/tmp/d MAX_UPDATE=200 bash recipes/demo.sh   # variables below can be overridden
#   bash recipes/demo.sh --dry-run       # print every command, run nothing
#
# Every stage prints a header and is skipped when it already completed (a stamp in $WORK/.done);
# re-running after a failure redoes only what is incomplete. Training resumes from its last checkpoint.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$REPO/recipes/lib.sh"
recipe_options "$0" "$@"

# ---- variables --------------------------------------------------------------------------------
WORK=${WORK:-runs/demo}                 # everything this recipe writes
TRAIN_PAIRS=${TRAIN_PAIRS:-30000}       # synthetic sentence pairs (the paper: 4.5M for WMT14 En-De)
VALID_PAIRS=${VALID_PAIRS:-300}
TEST_PAIRS=${TEST_PAIRS:-1000}
VOCAB_SIZE=${VOCAB_SIZE:-2000}          # joint BPE (the paper: ~37,000 for En-De)
ARCH=${ARCH:-vaswani_tiny}              # N=2, d_model=64, d_ff=256, h=4 (the paper: vaswani_base/big)
WORKERS=${WORKERS:-2}                   # data-parallel CPU processes (gloo); the paper: 8 GPUs
MAX_TOKENS=${MAX_TOKENS:-2500}          # tokens per worker and batch (the paper: ~25,000 per update)
MAX_UPDATE=${MAX_UPDATE:-2000}          # the paper: 100k (base) / 300k (big)
WARMUP=${WARMUP:-400}                   # the paper: 4000
SAVE_INTERVAL_UPDATES=${SAVE_INTERVAL_UPDATES:-50}  # and validate; the paper: every 10 minutes
LOG_INTERVAL=${LOG_INTERVAL:-50}        # updates between progress lines
AVERAGE_LAST=${AVERAGE_LAST:-5}         # the paper: last 5 (base) / 20 (big)
BEAM=${BEAM:-}                          # empty: the paper's (vaswani-paper-flags decoding)
LENPEN=${LENPEN:-}                      # length penalty alpha; empty: the paper's
BLEU_BAR=${BLEU_BAR:-65}                # the demo's bar for the averaged model (docs/recipes.md)
SEED=${SEED:-1}
# -----------------------------------------------------------------------------------------------

DATA="$WORK/data"; BIN="$WORK/data-bin"; CKPT="$WORK/checkpoints"; OUT="$WORK/results"
paper_flags TRAINING training --warmup-updates "$WARMUP"              # Section 5.3, Eq. (3), Section 5.4
paper_flags DECODING decoding --beam "$BEAM" --lenpen "$LENPEN"   # Section 6.1

stage 1 "synthetic corpus: $TRAIN_PAIRS/$VALID_PAIRS/$TEST_PAIRS pairs" \
  "$PY" -m preprocess.synthetic_pair --out-dir "$DATA" --train "$TRAIN_PAIRS" --valid "$VALID_PAIRS" \
    --test "$TEST_PAIRS" --seed "$SEED"

stage --writes "$DATA/spm" --writes "$DATA/train.sp" --writes "$DATA/valid.sp" --writes "$DATA/test.sp" \
  2 "joint sentencepiece BPE vocabulary of $VOCAB_SIZE pieces" bash -c 'set -euo pipefail
  "$0" -m preprocess.sentencepiece_vocab train --inputs "$1/train.src" "$1/train.tgt" \
    --model-prefix "$1/spm" --vocab-size "$2" --model-type bpe --vocab-size-name VOCAB_SIZE
  "$0" -m preprocess.sentencepiece_vocab encode --model "$1/spm.model" \
    --inputs "$1"/{train,valid,test}.src "$1"/{train,valid,test}.tgt \
    --outputs "$1"/{train,valid,test}.sp.src "$1"/{train,valid,test}.sp.tgt' "$PY" "$DATA" "$VOCAB_SIZE"

stage --clears "$BIN" 3 "fairseq-preprocess with a joined dictionary" \
  fairseq-preprocess --source-lang src --target-lang tgt \
    --trainpref "$DATA/train.sp" --validpref "$DATA/valid.sp" --testpref "$DATA/test.sp" \
    --joined-dictionary --destdir "$BIN" --workers 2

# Only the checkpoints averaging reads are kept: the last AVERAGE_LAST saved every SAVE_INTERVAL_UPDATES (the plugin
# names each by its update, at an epoch end too: transformer_plugin/patches/interval_checkpoints.py), the last and the best.
stage 4 "fairseq-train --arch $ARCH, $WORKERS CPU workers, $MAX_UPDATE updates" \
  train_workers "$WORKERS" "$WORK/train.log" \
    fairseq-train "$BIN" --user-dir "$REPO/transformer_plugin" \
      --arch "$ARCH" --share-all-embeddings "${TRAINING[@]}" \
      --max-tokens "$MAX_TOKENS" --max-update "$MAX_UPDATE" --seed "$SEED" \
      --save-dir "$CKPT" --save-interval-updates "$SAVE_INTERVAL_UPDATES" \
      --keep-interval-updates "$AVERAGE_LAST" --no-epoch-checkpoints \
      --validate-interval-updates "$SAVE_INTERVAL_UPDATES" \
      --log-format json --log-interval "$LOG_INTERVAL" --num-workers 0

stage 5 "average the last $AVERAGE_LAST checkpoints" \
  "$PY" -m transformer_plugin_cli.tools.average_checkpoints --inputs "$CKPT" \
    --num-update-checkpoints "$AVERAGE_LAST" --output "$CKPT/average.pt"

for model in last average; do
  ckpt="$CKPT/checkpoint_last.pt"; [ "$model" = average ] && ckpt="$CKPT/average.pt"
  stage "6-$model" "fairseq-generate, $model checkpoint: ${DECODING[*]}" \
    capture "$OUT/generate.$model.out" \
      fairseq-generate "$BIN" --user-dir "$REPO/transformer_plugin" --path "$ckpt" --gen-subset test \
        "${DECODING[@]}" --post-process sentencepiece --batch-size 128
  stage "7-$model" "detokenized sacreBLEU and chrF, $model checkpoint" \
    "$PY" -m transformer_plugin_cli.tools.evaluate --generate-output "$OUT/generate.$model.out" \
      --reference "$DATA/test.tgt" --hypotheses-out "$OUT/hypotheses.$model.txt" \
      --json "$OUT/scores.$model.json" --label "$model checkpoint" --paper "no paper figure; demo bar $BLEU_BAR"
done

stage 8 "report with learning curves, Eq. (3) and attention maps" \
  "$PY" -m transformer_plugin_cli.tools.report --train-log "$WORK/train.log" --out-dir "$OUT" \
    --scores "last checkpoint=$OUT/scores.last.json" --scores "average of last $AVERAGE_LAST=$OUT/scores.average.json" \
    --checkpoint "$CKPT/average.pt" --data "$BIN" \
    --title "Demo: $ARCH on the synthetic pair" \
    --note "$TRAIN_PAIRS training pairs, joint BPE $VOCAB_SIZE, $WORKERS workers x $MAX_TOKENS tokens, $MAX_UPDATE updates"

run_stages  # every stage above decided before any work, then run in order
[ "$DRY_RUN" = 0 ] || exit 0
banner "results"
"$PY" - "$OUT" "$BLEU_BAR" <<'EOF'
import json, sys
out, bar = sys.argv[1], float(sys.argv[2])
last, avg = (json.load(open(f"{out}/scores.{m}.json")) for m in ("last", "average"))
print(f"sacreBLEU  last checkpoint {last['sacrebleu']:.2f}  average {avg['sacrebleu']:.2f}  (bar {bar:g})")
print(f"chrF       last checkpoint {last['chrf']:.2f}  average {avg['chrf']:.2f}")
print(f"  {avg['sacrebleu_signature']}")
print(f"report: {out}/report.md")
if avg["sacrebleu"] < bar:
    sys.exit(f"the averaged model's sacreBLEU {avg['sacrebleu']:.2f} is below the bar {bar:g}")
EOF
