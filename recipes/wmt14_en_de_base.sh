#!/usr/bin/env bash
# WMT14 English->German, Transformer (base): Table 2, 27.3 BLEU on newstest2014 (tokenized, compound split).
#
#   bash recipes/wmt14_en_de_base.sh                 # every GPU of this machine; downloads the corpora
#   FROM=~/wmt14 bash recipes/wmt14_en_de_base.sh    # archives already on disk (offline)
#   bash recipes/wmt14_en_de_base.sh --dry-run       # print every command, run nothing
#   TOY=1 bash recipes/wmt14_en_de_base.sh           # the same stages at toy size on CPU (minutes)
#
# Any variable below or in recipes/wmt14.sh can be set in the environment. Stages skip when done.
set -euo pipefail

PAIR=en-de                                   # ~4.5M sentence pairs (Section 5.1)
CONFIG=${CONFIG:-base}
ARCH=${ARCH:-vaswani_base}                   # N=6, d_model=512, d_ff=2048, h=8, P_drop=0.1 (65M params)
SPM_TYPE=${SPM_TYPE:-bpe}                    # shared byte-pair encoding ...
VOCAB_SIZE=${VOCAB_SIZE:-37000}              # ... of about 37,000 tokens
MAX_UPDATE=${MAX_UPDATE:-100000}             # 100k steps (12 hours on 8 P100)
SAVE_INTERVAL_UPDATES=${SAVE_INTERVAL_UPDATES:-1500}  # the paper: every 10 min = 1500 steps at 0.4 s/step
AVERAGE_LAST=${AVERAGE_LAST:-5}              # the paper averages the last 5 checkpoints
PAPER_BLEU=27.3
REPRODUCTION_SACREBLEU="no public base figure (fairseq's big: 28.6)"

source "$(dirname "${BASH_SOURCE[0]}")/wmt14.sh"
