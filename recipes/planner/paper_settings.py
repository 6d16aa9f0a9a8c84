"""Every variable the paper's recipes read, declared once for each recipe that reads it: recipes/wmt14_*.sh (Table 2,
their shared stages in recipes/wmt14.sh) and recipes/wsj_parsing.sh (Table 4). A name whose default differs between
configurations (ARCH: vaswani_base, vaswani_big, ...) is declared once for each default, naming the recipes that have
it. The recipes' tops show the same defaults for people to read (``NAME=${NAME:-default}``, at toy size
``NAME=${TOY_NAME:-default}``), and tests/unit/recipes/test_settings.py holds them to these; each recipe's ``--help``
lists them (``python -m recipes.planner settings RECIPE``). These recipes plan only their batch's layout
(recipes/planner/layout.py): what is declared here goes to their stages as set."""

from typing import Optional, Tuple

from recipes.planner.settings import PRECISIONS, Setting

DE_BASE, DE_BIG, FR_BASE, FR_BIG = "wmt14_en_de_base", "wmt14_en_de_big", "wmt14_en_fr_base", "wmt14_en_fr_big"
WMT14 = (DE_BASE, DE_BIG, FR_BASE, FR_BIG)
WSJ = ("wsj_parsing",)
BOTH = WMT14 + WSJ
TOY_SIZE = '$([ "$TOY" = 1 ] && echo 0 || gpu_count)'


def _set(name: str, default: str, help: str, recipes: Tuple[str, ...], shell: Optional[str] = None, **kw) -> Setting:
    return Setting(name, default, help, recipes=recipes, plans=False, shell=shell, **kw)


PAPER_DECLARED: Tuple[Setting, ...] = (
    # ---- the data
    _set("TOY", "0", "1: the same stages at toy size, on CPU, in minutes", BOTH),
    _set(
        "WORK",
        "",
        "where the run's files go; unset: runs/wmt14_SRC_TGT (the data shared by a pair's configurations)",
        WMT14,
        shell='runs/wmt14_${SRC}_${TGT}$([ "$TOY" != 1 ] || echo _toy)',
    ),
    _set(
        "WORK",
        "",
        "where the run's files go; unset: runs/wsj_parsing",
        WSJ,
        shell='runs/wsj_parsing$([ "$TOY" != 1 ] || echo _toy)',
    ),
    _set("FROM", "", "the directory holding the archives (offline); empty: download", WMT14),
    _set("IGNORE_PINNED_MD5", "0", "1: test sets that differ from sacreBLEU's md5 only warn (toy archives)", WMT14),
    _set("PREP_WORKERS", "", "processes for the normalisation; unset: this machine's cores", WMT14, shell="$(cores)"),
    _set("MAX_PAIRS", "", "pairs per corpus; empty: all (TOY=1: 20000, where FROM holds the real archives)", WMT14),
    _set("SHARDS", "1", "N > 1: the training data in N data-bins with one dictionary, one per epoch", WMT14),
    _set("TREEBANK", "", "the directory with wsj/SS/wsj_SSNN.mrg (LDC99T42 parsed/mrg)", WSJ),
    _set("EXTRA_TREES", "", "already-parsed trees for the semi-supervised setting (word-split)", WSJ),
    # ---- the vocabulary
    _set("CONFIG", "base", "the configuration's name: its folder in WORK", (DE_BASE, FR_BASE)),
    _set("CONFIG", "big", "the configuration's name: its folder in WORK", (DE_BIG, FR_BIG)),
    _set("SPM_TYPE", "bpe", "a shared byte-pair encoding (Section 5.1)", (DE_BASE, DE_BIG)),
    _set("SPM_TYPE", "unigram", "a shared word-piece style vocabulary (Section 5.1)", (FR_BASE, FR_BIG)),
    _set("VOCAB_SIZE", "37000", "about 37,000 tokens (Section 5.1)", (DE_BASE, DE_BIG)),
    _set("VOCAB_SIZE", "32000", "32,000 word pieces (Section 5.1)", (FR_BASE, FR_BIG)),
    _set("VOCAB_SIZE", "16000", "source words: 16K for WSJ only, 32K with EXTRA_TREES (Section 6.3)", WSJ),
    _set(
        "SPM_SAMPLE",
        "",
        "sentences sentencepiece learns from; unset: 10M (bpe) or 3M (unigram), its memory grows with them",
        WMT14,
        shell='$([ "$SPM_TYPE" = unigram ] && echo 3000000 || echo 10000000)',
    ),
    # ---- the model and its training
    _set("ARCH", "vaswani_base", "N=6, d_model=512, d_ff=2048, h=8, P_drop=0.1 (65M parameters)", (DE_BASE, FR_BASE)),
    _set("ARCH", "vaswani_big", "N=6, d_model=1024, d_ff=4096, h=16, P_drop=0.3 (213M parameters)", (DE_BIG,)),
    _set("ARCH", "vaswani_big_en_fr", "the big model with P_drop=0.1 for En-Fr (Section 6.1)", (FR_BIG,)),
    _set("ARCH", "vaswani_parsing", "N=4, d_model=1024, other sizes as the base model (Section 6.3)", WSJ),
    _set("DROPOUT", "0.3", "residual dropout: tuned on section 22 in the paper (not given)", WSJ),
    _set("ATTENTION_DROPOUT", "0.1", "dropout on the attention weights: likewise", WSJ),
    _set("MAX_UPDATE", "100000", "100k steps (12 hours on 8 P100)", (DE_BASE, FR_BASE)),
    _set("MAX_UPDATE", "300000", "300k steps (3.5 days on 8 P100)", (DE_BIG, FR_BIG)),
    _set("MAX_UPDATE", "20000", "not given in the paper (about 125 passes over WSJ 02-21)", WSJ),
    _set("SAVE_INTERVAL_UPDATES", "1500", "the paper's every 10 minutes: 1500 steps at 0.4 s", (DE_BASE, FR_BASE)),
    _set("SAVE_INTERVAL_UPDATES", "600", "the paper's every 10 minutes: 600 steps at 1.0 s", (DE_BIG, FR_BIG)),
    _set("SAVE_INTERVAL_UPDATES", "1000", "updates between checkpoints", WSJ),
    _set(
        "AVERAGE_LAST",
        "5",
        "the paper averages the last 5 checkpoints (1: the last, as Table 3)",
        (DE_BASE, FR_BASE) + WSJ,
    ),
    _set("AVERAGE_LAST", "20", "the paper averages the last 20 checkpoints", (DE_BIG, FR_BIG)),
    _set("TOKENS_PER_UPDATE", "25000", "Section 5.1: about 25,000 source and 25,000 target tokens an update", BOTH),
    _set("MAX_TOKENS_PER_DEVICE", "4096", "what one GPU holds; more GPUs, less accumulation", BOTH),
    _set("WARMUP", "", "Eq. (3)'s warmup_steps; empty: the paper's (vaswani-paper-flags training)", BOTH),
    _set("LABEL_SMOOTHING", "", "eps_ls; empty: the paper's", BOTH),
    _set("SEED", "1", "the training's seed", BOTH),
    _set("EXTRA_TRAIN_ARGS", "", "appended to fairseq-train (word-split)", WMT14),
    # ---- decoding and scoring
    _set("BEAM", "", "beam size; empty: the paper's (vaswani-paper-flags decoding)", BOTH),
    _set("LENPEN", "", "length penalty; empty: the paper's", BOTH),
    _set("MAX_LEN_B", "", "the output's length past the input's; empty: the paper's 300 (Section 6.3)", WSJ),
    _set("EVAL_SUBSET", "test", "test: newstest2014 (Table 2); valid: newstest2013 (Table 3)", WMT14),
    # ---- the machines
    _set("GPUS", "0", "GPUs per machine (0: CPU workers); unset: this machine's, 0 at toy size", BOTH, shell=TOY_SIZE),
    _set("CPU_WORKERS", "2", "data-parallel processes per machine when GPUS=0", BOTH),
    _set("PRECISION", "fp32", "fp32 (the paper), fp16, bf16 or amp", BOTH, choices=PRECISIONS),
    _set("LAUNCH", "local", "local, torchrun or slurm (docs/several-machines.md)", BOTH),
    _set("NNODES", "1", "machines", BOTH),
    _set("NODE_RANK", "0", "this machine's number, with LAUNCH=torchrun", BOTH),
    _set("MASTER_ADDR", "", "node 0's address", BOTH),
    _set("MASTER_PORT", "", "node 0's port; empty: 29500, or under SLURM one from the job id", BOTH),
    _set("DIST_TIMEOUT", "600", "seconds the machines wait for each other, node 0's data too", BOTH),
    # ---- the toy size's own (TOY=1)
    _set("TOY_ARCH", "vaswani_tiny", "the toy model", BOTH),
    _set("TOY_VOCAB_SIZE", "500", "the toy vocabulary", WMT14),
    _set("TOY_VOCAB_SIZE", "1000", "the toy vocabulary", WSJ),
    _set("TOY_MAX_UPDATE", "300", "the toy training's updates", BOTH),
    _set("TOY_WARMUP", "150", "the toy warm-up", WMT14),
    _set("TOY_WARMUP", "100", "the toy warm-up", WSJ),
    _set("TOY_SAVE_INTERVAL_UPDATES", "50", "the toy checkpoints' interval", BOTH),
    _set("TOY_TOKENS_PER_UPDATE", "3000", "the toy batch", WMT14),
    _set("TOY_TOKENS_PER_UPDATE", "4000", "the toy batch", WSJ),
    _set("TOY_AVERAGE_LAST", "3", "the toy checkpoints averaged", BOTH),
    _set("TOY_BEAM", "", "the toy beam; unset: BEAM", WSJ, shell="$BEAM"),
)
