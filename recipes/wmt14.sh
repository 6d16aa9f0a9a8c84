# The WMT14 recipe body, sourced by recipes/wmt14_{en_de,en_fr}_{base,big}.sh after they set their
# configuration (PAIR, CONFIG, ARCH, ...). Read one of those first; this file holds the shared variables
# and the stages:
#   1 fetch, verify, extract, clean and normalise the corpora (preprocess/wmt14.py)
#   2 a joint sentencepiece vocabulary (BPE ~37k for En-De, unigram 32k word pieces for En-Fr), encode
#   3 fairseq-preprocess --joined-dictionary (SHARDS=N: N data-bins with one dictionary, docs/recipes.md)
#   4 fairseq-train, data-parallel over every GPU (or CPU workers), ~25k tokens per update
#   5 average the last 5 (base) / 20 (big) checkpoints (AVERAGE_LAST=1: the last checkpoint, as Table 3)
#   6 fairseq-generate newstest2014 (EVAL_SUBSET=valid: newstest2013): beam 4, lenpen 0.6, max length input+50
#   7 detokenized sacreBLEU and tokenized BLEU (compound splitting for German), beside the paper
#   8 dev perplexity (newstest2013, per word-piece) with fairseq-validate
#
# Options:  --dry-run  print every command instead of running it (also DRY_RUN=1)
# Toy size: TOY=1 runs the same stages on CPU in minutes: vaswani_tiny, a few updates, and, unless
#           FROM is given, small archives in the real WMT14 layouts written by preprocess/wmt14.py.
# Several machines: LAUNCH=torchrun or LAUNCH=slurm, see docs/several-machines.md.
set -euo pipefail
[ "${BASH_SOURCE[0]}" != "$0" ] || { echo "$0 is the body of recipes/wmt14_{en_de,en_fr}_{base,big}.sh: run one of" \
  "them (--help)" >&2; exit 2; }

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$REPO/recipes/lib.sh"
recipe_options "$0" "$@"

# ---- variables shared by every WMT14 configuration (each can be set in the environment) -------
TOY=${TOY:-0}                              # 1: toy size on CPU
SRC=${PAIR%-*}; TGT=${PAIR#*-}
WORK=${WORK:-runs/wmt14_${SRC}_${TGT}$([ "$TOY" != 1 ] || echo _toy)}  # data shared by the configurations of a pair
FROM=${FROM:-}                             # directory holding the archives (offline); empty: download
IGNORE_PINNED_MD5=${IGNORE_PINNED_MD5:-0}  # 1: test sets that differ from sacreBLEU's md5 only warn (toy archives)
PREP_WORKERS=${PREP_WORKERS:-$(cores)}     # processes for normalisation
SPM_SAMPLE=${SPM_SAMPLE:-$([ "$SPM_TYPE" = unigram ] && echo 3000000 || echo 10000000)}  # sentences sentencepiece
                                           # learns from: its memory grows with them (docs/benchmarks.md), not the corpus
TOKENS_PER_UPDATE=${TOKENS_PER_UPDATE:-25000}  # Section 5.1: ~25,000 source + 25,000 target tokens
MAX_TOKENS_PER_DEVICE=${MAX_TOKENS_PER_DEVICE:-4096}  # what one GPU holds; more GPUs -> less accumulation
GPUS=${GPUS:-$([ "$TOY" = 1 ] && echo 0 || gpu_count)}  # GPUs per machine (0: CPU workers; TOY=1: 0 unless set)
CPU_WORKERS=${CPU_WORKERS:-2}              # data-parallel processes per machine when GPUS=0
LAUNCH=${LAUNCH:-local}                    # local | torchrun | slurm (several machines: docs/several-machines.md)
NNODES=${NNODES:-1}                        # machines (LAUNCH=torchrun / slurm)
NODE_RANK=${NODE_RANK:-0}                  # this machine's number, 0 to NNODES-1 (LAUNCH=torchrun)
MASTER_ADDR=${MASTER_ADDR:-}               # node 0's address (LAUNCH=torchrun)
MASTER_PORT=${MASTER_PORT:-}               # empty: 29500 (torchrun), a port from the job id (slurm)
DIST_TIMEOUT=${DIST_TIMEOUT:-600}          # seconds a machine waits for the others: rendezvous, collectives, node 0's data
PRECISION=${PRECISION:-fp32}               # fp32 (the paper) | fp16 | bf16 | amp
WARMUP=${WARMUP:-}                         # Eq. (3) warmup_steps; empty: the paper's (vaswani-paper-flags training)
LABEL_SMOOTHING=${LABEL_SMOOTHING:-}       # eps_ls; empty: the paper's
BEAM=${BEAM:-}; LENPEN=${LENPEN:-}         # Section 6.1; empty: the paper's (vaswani-paper-flags decoding)
EVAL_SUBSET=${EVAL_SUBSET:-test}           # test: newstest2014 (Table 2); valid: newstest2013 (Table 3)
SEED=${SEED:-1}
EXTRA_TRAIN_ARGS=${EXTRA_TRAIN_ARGS:-}     # appended to fairseq-train (word-split)
if [ "$TOY" = 1 ]; then                    # the same recipe at toy size, on CPU, in a few minutes
  ARCH=${TOY_ARCH:-vaswani_tiny}; VOCAB_SIZE=${TOY_VOCAB_SIZE:-500}; MAX_UPDATE=${TOY_MAX_UPDATE:-300}
  WARMUP=${TOY_WARMUP:-150}; SAVE_INTERVAL_UPDATES=${TOY_SAVE_INTERVAL_UPDATES:-50}
  TOKENS_PER_UPDATE=${TOY_TOKENS_PER_UPDATE:-3000}; MAX_TOKENS_PER_DEVICE=1500; AVERAGE_LAST=${TOY_AVERAGE_LAST:-3}
  MAX_PAIRS=${MAX_PAIRS:-20000}            # per corpus, when FROM holds the real archives
fi
MAX_PAIRS=${MAX_PAIRS:-}
SHARDS=${SHARDS:-1}                        # N > 1: the training data in N data-bins with one dictionary, one per epoch
# -----------------------------------------------------------------------------------------------

DATA="$WORK/data"; SPM="$WORK/spm"; BIN="$WORK/data-bin"
RUN="$WORK/$CONFIG"; CKPT="$RUN/checkpoints"; OUT="$RUN/results"

# ---- batch size: --max-tokens x devices x --update-freq ~ TOKENS_PER_UPDATE --------------------
plan_run layout  # the batch of TOKENS_PER_UPDATE on these machines (recipes/planner/layout.py)
echo "$PAIR $CONFIG: $PLAN_BATCH_SUMMARY (paper: ~25,000)"

# ---- 1.-3. data (once: with LAUNCH=torchrun, machines other than NODE_RANK=0 wait for node 0's) -------
prepare_data() {
  local PREPARE_ARGS=(--pair "$PAIR" --out "$DATA" --workers "$PREP_WORKERS")
  [ -z "$MAX_PAIRS" ] || PREPARE_ARGS+=(--max-pairs "$MAX_PAIRS")
  [ "$IGNORE_PINNED_MD5" = 0 ] || PREPARE_ARGS+=(--ignore-pinned-md5)
  if [ -n "$FROM" ]; then
    PREPARE_ARGS+=(--from "$FROM")
  elif [ "$TOY" = 1 ]; then
    data_stage 0 "toy archives in the WMT14 layout (synthetic text)" \
      "$PY" -m preprocess.wmt14 toy-archives --pair "$PAIR" --out "$WORK/toy-archives"
    PREPARE_ARGS+=(--from "$WORK/toy-archives")
    [ "$IGNORE_PINNED_MD5" = 1 ] || PREPARE_ARGS+=(--ignore-pinned-md5)
  fi
  data_stage 1 "WMT14 $PAIR: fetch, verify, extract, clean, normalise" \
    "$PY" -m preprocess.wmt14 prepare "${PREPARE_ARGS[@]}"

  local SAMPLE_ARGS=()  # the module's default, 10M, is not written out: stamps made before SPM_SAMPLE still hold
  [ "$SPM_SAMPLE" = 10000000 ] || SAMPLE_ARGS=(--input-sentence-size "$SPM_SAMPLE")
  data_stage 2a "joint sentencepiece $SPM_TYPE vocabulary of $VOCAB_SIZE pieces" \
    "$PY" -m preprocess.sentencepiece_vocab train --inputs "$DATA/train.$SRC" "$DATA/train.$TGT" \
      --model-prefix "$SPM/spm" --vocab-size "$VOCAB_SIZE" --model-type "$SPM_TYPE" --threads "$PREP_WORKERS" \
      "${SAMPLE_ARGS[@]}" --input-sentence-size-name SPM_SAMPLE --vocab-size-name "$([ "$TOY" != 1 ] || echo TOY_)VOCAB_SIZE"

  data_stage 2b "encode train, valid and test into pieces" \
    "$PY" -m preprocess.sentencepiece_vocab encode --model "$SPM/spm.model" \
      --inputs "$DATA"/{train,valid,test}."$SRC" "$DATA"/{train,valid,test}."$TGT" \
      --outputs "$SPM"/{train,valid,test}.sp."$SRC" "$SPM"/{train,valid,test}.sp."$TGT" --threads "$PREP_WORKERS"

  binarize_stages 3 "$PREP_WORKERS" --joined-dictionary  # SHARDS=N: N data-bins, one dictionary (lib.sh)
}
prepare_data
if [ "${DATA_ONLY:-0}" = 1 ]; then run_stages; echo "DATA_ONLY=1: the data is ready in $TRAIN_DATA"; exit 0; fi

# ---- 4. training -----------------------------------------------------------------------------------
paper_flags TRAINING training --warmup-updates "$WARMUP" --label-smoothing "$LABEL_SMOOTHING"  # Sections 5.3-5.4
# Only the checkpoints averaging reads are kept: the last AVERAGE_LAST saved every SAVE_INTERVAL_UPDATES (the plugin
# names each by its update, at an epoch end too: transformer_plugin/patches/interval_checkpoints.py), the last and the best.
TRAIN_ARGS=("$TRAIN_DATA" --user-dir "$REPO/transformer_plugin"
  --arch "$ARCH" --share-all-embeddings "${TRAINING[@]}"
  --max-tokens "$PLAN_MAX_TOKENS" --update-freq "$PLAN_UPDATE_FREQ" --max-update "$MAX_UPDATE" --seed "$SEED"
  --save-dir "$CKPT" --save-interval-updates "$SAVE_INTERVAL_UPDATES" --keep-interval-updates "$AVERAGE_LAST"
  --validate-interval-updates "$SAVE_INTERVAL_UPDATES" --no-epoch-checkpoints
  --log-format json --log-interval "$(log_interval "$MAX_UPDATE" "$([ "$TOY" = 1 ] && echo 10 || echo 100)")" "${PLAN_PRECISION_ARGS[@]}")
[ "$TOY" = 0 ] || TRAIN_ARGS+=(--num-workers 0)
read -r -a EXTRA <<< "$EXTRA_TRAIN_ARGS"
TRAIN_ARGS+=("${EXTRA[@]}")
train_stage "4-$CONFIG" "fairseq-train --arch $ARCH, $MAX_UPDATE updates" "$RUN/train.log" "${TRAIN_ARGS[@]}"

# ---- 5.-8. evaluation --------------------------------------------------------------------------------
case $EVAL_SUBSET in
  test) SET=newstest2014 ;;
  valid) SET=newstest2013 ;;
  *) echo "EVAL_SUBSET=$EVAL_SUBSET: use test or valid" >&2; exit 2 ;;
esac
if [ "$AVERAGE_LAST" -gt 1 ]; then
  MODEL="$CKPT/average.pt"; MODEL_LABEL="average of the last $AVERAGE_LAST checkpoints"
  stage "5-$CONFIG" "average the last $AVERAGE_LAST checkpoints" \
    "$PY" -m transformer_plugin_cli.tools.average_checkpoints --inputs "$CKPT" \
      --num-update-checkpoints "$AVERAGE_LAST" --output "$MODEL"
else
  MODEL="$CKPT/checkpoint_last.pt"; MODEL_LABEL="last checkpoint, no averaging"
fi

paper_flags DECODING decoding --beam "$BEAM" --lenpen "$LENPEN"  # Section 6.1
stage "6-$CONFIG" "fairseq-generate $SET: ${DECODING[*]}" \
  capture "$OUT/generate.$EVAL_SUBSET.out" \
    fairseq-generate "$EVAL_DATA" --user-dir "$REPO/transformer_plugin" --path "$MODEL" \
      --gen-subset "$EVAL_SUBSET" "${DECODING[@]}" \
      --post-process sentencepiece --batch-size 128

SCORE_ARGS=(--tokenized-bleu --lang "$TGT")
[ "$TGT" = de ] || SCORE_ARGS+=(--no-compound-split)  # tensor2tensor splits compounds for German only
if [ "$EVAL_SUBSET" = test ]; then PAPER="$PAPER_BLEU BLEU, Table 2"; else PAPER="dev BLEU: Table 3"; fi
stage "7-$CONFIG" "sacreBLEU (detokenized) and tokenized BLEU on $SET" \
  "$PY" -m transformer_plugin_cli.tools.evaluate --generate-output "$OUT/generate.$EVAL_SUBSET.out" \
    --reference "$DATA/$EVAL_SUBSET.ref.$TGT" "${SCORE_ARGS[@]}" --hypotheses-out "$OUT/hypotheses.$EVAL_SUBSET.txt" \
    --json "$OUT/scores.$EVAL_SUBSET.json" --label "$PAIR $CONFIG, $MODEL_LABEL, $SET" --paper "$PAPER"

stage "8-$CONFIG" "dev perplexity on newstest2013 (per word-piece)" \
  capture "$OUT/validate.log" \
    fairseq-validate "$EVAL_DATA" --user-dir "$REPO/transformer_plugin" --task translation --path "$MODEL" \
      --valid-subset valid --max-tokens 4096 --log-format json

run_stages  # every stage above decided before any work, then run in order
[ "$DRY_RUN" = 0 ] || exit 0
banner "results: $PAIR $CONFIG ($MODEL_LABEL) beside the paper"
"$PY" - "$OUT" "$EVAL_SUBSET" "$PAPER_BLEU" "$REPRODUCTION_SACREBLEU" "$TOY" <<'EOF'
import json, sys
from transformer_plugin_cli.tools.table3 import read_valid_ppl
out, subset, paper, reproduction, toy = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5] == "1"
scores = json.load(open(f"{out}/scores.{subset}.json"))
tok_key = "tokenized_bleu_compound_split" if "tokenized_bleu_compound_split" in scores else "tokenized_bleu"
tok_label = "tokenized BLEU, compound split" if tok_key.endswith("split") else "tokenized BLEU"
test = subset == "test"
print(f"| {'newstest2014' if test else 'newstest2013 (dev)'} | ours | paper |\n|---|---|---|")
print(f"| {tok_label} (how the paper scored) | {scores[tok_key]:.2f} | {paper + ' (Table 2)' if test else 'Table 3'} |")
print(f"| sacreBLEU, detokenized | {scores['sacrebleu']:.2f} | {'not reported; ' + reproduction if test else '-'} |")
ppl = read_valid_ppl(f"{out}/validate.log")
print(f"| dev perplexity per word-piece (newstest2013) | {ppl:.2f} | base 4.92, big 4.33 (Table 3, not averaged) |")
print(f"sacreBLEU signature: {scores['sacrebleu_signature']}")
if toy:
    print("(toy run: synthetic data or a slice of WMT14, vaswani_tiny, a few updates; not comparable to the paper)")
EOF
