#!/usr/bin/env bash
# WMT14 English->French, Transformer (big): Table 2, 41.8 BLEU on newstest2014 (tokenized).
#
#   bash recipes/wmt14_en_fr_big.sh                 # every GPU of this machine; downloads the corpora
#   FROM=~/wmt14 bash recipes/wmt14_en_fr_big.sh    # archives already on disk (offline)
#   bash recipes/wmt14_en_fr_big.sh --dry-run       # print every command, run nothing
#   TOY=1 bash recipes/wmt14_en_fr_big.sh           # the same stages at toy size on CPU (minutes)
#
# Any variable below or in recipes/wmt14.sh can be set in the environment. Stages skip when done.
set -euo pipefail

PAIR=en-fr                                   # ~36M sentence pairs (Section 5.1)
CONFIG=${CONFIG:-big}
ARCH=${ARCH:-vaswani_big_en_fr}              # the big model with P_drop=0.1 for En-Fr (Section 6.1)
SPM_TYPE=${SPM_TYPE:-unigram}                # shared word-piece style vocabulary ...
VOCAB_SIZE=${VOCAB_SIZE:-32000}              # ... of 32,000 pieces
MAX_UPDATE=${MAX_UPDATE:-300000}             # 300k steps
SAVE_INTERVAL_UPDATES=${SAVE_INTERVAL_UPDATES:-600}   # the paper: every 10 min = 600 steps at 1.0 s/step
AVERAGE_LAST=${AVERAGE_LAST:-20}             # the paper averages the last 20 checkpoints
PAPER_BLEU="41.8 (41.0 in the first arXiv version)"
REPRODUCTION_SACREBLEU="fairseq (Ott et al. 2018): 41.4"

source "$(dirname "${BASH_SOURCE[0]}")/wmt14.sh"
