#!/usr/bin/env bash
# WMT14 English->German, Transformer (big): Table 2, 28.4 BLEU on newstest2014 (tokenized, compound split).
#
#   bash recipes/wmt14_en_de_big.sh                 # every GPU of this machine; downloads the corpora
#   FROM=~/wmt14 bash recipes/wmt14_en_de_big.sh    # archives already on disk (offline)
#   bash recipes/wmt14_en_de_big.sh --dry-run       # print every command, run nothing
#   TOY=1 bash recipes/wmt14_en_de_big.sh           # the same stages at toy size on CPU (minutes)
#
# Any variable below or in recipes/wmt14.sh can be set in the environment. Stages skip when done.
set -euo pipefail

PAIR=en-de                                   # ~4.5M sentence pairs (Section 5.1)
CONFIG=${CONFIG:-big}
ARCH=${ARCH:-vaswani_big}                    # N=6, d_model=1024, d_ff=4096, h=16, P_drop=0.3 (213M params)
SPM_TYPE=${SPM_TYPE:-bpe}                    # shared byte-pair encoding ...
VOCAB_SIZE=${VOCAB_SIZE:-37000}              # ... of about 37,000 tokens
MAX_UPDATE=${MAX_UPDATE:-300000}             # 300k steps (3.5 days on 8 P100)
SAVE_INTERVAL_UPDATES=${SAVE_INTERVAL_UPDATES:-600}   # the paper: every 10 min = 600 steps at 1.0 s/step
AVERAGE_LAST=${AVERAGE_LAST:-20}             # the paper averages the last 20 checkpoints
PAPER_BLEU=28.4
REPRODUCTION_SACREBLEU="fairseq (Ott et al. 2018): 28.6"

source "$(dirname "${BASH_SOURCE[0]}")/wmt14.sh"
