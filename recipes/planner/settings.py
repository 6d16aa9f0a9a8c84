"""Every variable recipes/parallel_text.sh and recipes/finetune.sh read, declared once: its default, its kind and
check, its help, and whether it changes the plan. The recipes' tops show the same defaults for people to read
(``NAME=${NAME:-default}``), and tests/unit/recipes/test_settings.py holds them to these; the plan reads its
defaults and checks here (:class:`recipes.planner.variables.Variables`), and each recipe's ``--help`` lists them
(``python -m recipes.planner settings RECIPE``).

A default of ``""`` is the plan's to decide (the budget rule's pick, the parent's, the paper's). ``shell`` is the
recipe's own default where it computes one (this machine's GPUs), ``default`` then what the plan takes without it.
"""

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

BOTH = ("parallel_text", "finetune")


@dataclass(frozen=True)
class Setting:
    name: str
    default: str
    help: str
    recipes: Tuple[str, ...] = BOTH  # the recipes that read it; () the plan's own (TOY_*: toy size's settings)
    whole: bool = False  # a whole number
    least: int = 0  # ... of at least this
    choices: Tuple[str, ...] = ()
    plans: bool = True  # a change decides another plan (the plan's key); else it goes to the stages as set
    shell: Optional[str] = None  # the recipe's default where the shell computes it


def _whole(name: str, default: str, help: str, least: int = 0, **kw) -> Setting:
    return Setting(name, default, help, whole=True, least=least, **kw)


def precision_args(precision: str) -> List[str]:
    """fairseq-train's flags for a PRECISION (docs/precision.md): none for fp32 (the paper), else --fp16, --bf16 or
    --amp."""
    return [] if precision == "fp32" else [f"--{precision}"]


PRECISIONS = ("fp32", "fp16", "bf16", "amp")
FINETUNE = ("finetune",)
FROM_NOTHING = ("parallel_text",)
DECLARED: Tuple[Setting, ...] = (
    # ---- the corpus
    Setting("TRAIN", "", "training corpora, colon-separated (as fairseq's data): PREFIX or a .tsv"),
    Setting("SRC", "", "the source's language code, as in the file names (ISO 639-1 for language id)"),
    Setting("TGT", "", "the target's language code"),
    Setting("VALID", "", "dev sets in the same forms; empty: held out from TRAIN"),
    Setting("TEST", "", "test sets in the same forms; empty: held out from TRAIN"),
    Setting("TOY", "0", "1: toy size on CPU"),
    Setting(
        "WORK",
        "",
        "where the run's files go; unset: runs/parallel_SRC_TGT (_toy at toy size)",
        plans=False,
        shell='runs/parallel_${SRC}_${TGT}$([ "$TOY" != 1 ] || echo _toy)',
    ),
    Setting("ON_BAD_BYTES", "refuse", "refuse | drop: lines that are not UTF-8", plans=False),
    Setting("LANGID", "1", "0: no language identification (py3langid)", plans=False),
    Setting("MAX_WORDS", "250", "the longest side, in words", plans=False),
    Setting("MAX_RATIO", "3", "the longest side over the shortest", plans=False),
    Setting("SEED", "1", "the seed of the split, the replay and the training", plans=False),
    Setting("SHARDS", "1", "N > 1: the training data in N data-bins with one dictionary, one per epoch", plans=False),
    # ---- the budget and the machines
    Setting("TIME", "", "90m, 8h, 2d: as many updates as fit, at this machine's measured speed"),
    _whole("MAX_UPDATE", "", "N updates (with EVAL_BLEU=1 also stopping after PATIENCE validations without gain)", 1),
    Setting("REPROBE", "0", "1: this machine's speed measured again, and the plan decided again", plans=False),
    Setting("SPEED_FILE", "", "vaswani-speed-probe file of the machines that train: TIME at their speed"),
    Setting(
        "GPUS",
        "0",
        "GPUs per machine (0: CPU workers); unset: this machine's, 0 at toy size",
        shell='$([ "$TOY" = 1 ] && echo 0 || gpu_count)',
    ),
    Setting("CPU_WORKERS", "2", "data-parallel processes per machine when GPUS=0"),
    Setting("PRECISION", "fp32", "fp32 (the paper), fp16, bf16 or amp", choices=PRECISIONS),
    Setting("LAUNCH", "local", "local, torchrun or slurm (docs/several-machines.md)"),
    Setting("NNODES", "1", "machines"),
    Setting("NODE_RANK", "0", "this machine's number, with LAUNCH=torchrun", plans=False),
    Setting("MASTER_ADDR", "", "node 0's address"),
    Setting("MASTER_PORT", "", "node 0's port; empty: 29500, or under SLURM one from the job id"),
    Setting("DIST_TIMEOUT", "600", "seconds the machines wait for each other"),
    # ---- the training: empty is the plan's
    Setting("DROPOUT", "", "P_drop"),
    _whole("TOKENS_PER_UPDATE", "", "target tokens an update", 1),
    _whole("MAX_TOKENS_PER_DEVICE", "4096", "a device's micro-batch (fairseq's --max-tokens)", 1),
    Setting("EVAL_BLEU", "", "1: validation BLEU, the best checkpoint and early stopping by it"),
    _whole(
        "PATIENCE", "", "validations without a better dev BLEU that stop training; empty: 10 with EVAL_BLEU=1, else 0"
    ),
    _whole(
        "SAVE_INTERVAL_UPDATES", "", "updates between checkpoints and validations; empty: 1000, or MAX_UPDATE/20", 1
    ),
    _whole("AVERAGE_LAST", "5", "checkpoints averaged", 1),
    _whole("WARMUP", "", "Eq. (3)'s warm-up; empty: the paper's 4000, or MAX_UPDATE/6 if less, at the same peak"),
    Setting("LABEL_SMOOTHING", "", "eps_ls; empty: the paper's 0.1"),
    _whole("BEAM", "", "beam size; empty: the paper's 4", plans=False),
    Setting("LENPEN", "", "length penalty; empty: the paper's 0.6", plans=False),
    Setting("EXPORT", "", "ct2 and/or hf", plans=False),
    # ---- a model from nothing (recipes/parallel_text.sh)
    _whole(
        "MIN_PAIRS",
        "10000",
        "fewer training lines stop the recipe (OPUS-MT does not train below 10k)",
        0,
        recipes=FROM_NOTHING,
    ),
    _whole("VOCAB_SIZE", "", "sentencepiece pieces (per side when not joint)", 1, recipes=FROM_NOTHING),
    Setting("JOINT_VOCAB", "", "1: one vocabulary for both sides (same script); 0: one per side", recipes=FROM_NOTHING),
    Setting("SPM_TYPE", "", "empty: bpe", recipes=FROM_NOTHING, plans=False),
    Setting("SPM_SAMPLE", "2000000", "sentences sentencepiece learns from", recipes=FROM_NOTHING, plans=False),
    Setting("ARCH", "", "the model; empty: the plan's", recipes=FROM_NOTHING),
    Setting("MODEL_FLAGS", "", "the model's flags; MODEL_FLAGS alone: vaswani_base with them", recipes=FROM_NOTHING),
    # ---- a published model fine-tuned (recipes/finetune.sh)
    Setting(
        "INIT",
        "",
        "a MarianMT, NLLB-200 or M2M100 directory (as Hugging Face has them, or EXPORT=hf's), or an import's",
        recipes=FINETUNE,
    ),
    _whole(
        "FINETUNE_MIN_PAIRS",
        "",
        "fewer training pairs, once dev and test are held out, stop it (100)",
        recipes=FINETUNE,
    ),
    Setting(
        "TGT_TOKEN", "", "a multilingual parent's >>xx<< for TGT; empty: found in its vocabulary", recipes=FINETUNE
    ),
    Setting("SRC_CODE", "", "an NLLB or M2M100 parent's code for SRC (eng_Latn); empty: by ISO 639", recipes=FINETUNE),
    Setting("TGT_CODE", "", "an NLLB or M2M100 parent's code for TGT (deu_Latn); empty: by ISO 639", recipes=FINETUNE),
    Setting(
        "PARENT_TEST",
        "",
        "PREFIX of a test set of the parent's domain, scored before and after",
        recipes=FINETUNE,
        plans=False,
    ),
    Setting(
        "REPLAY",
        "",
        "PREFIX of a general corpus replayed against forgetting, or parent (distillation)",
        recipes=FINETUNE,
    ),
    Setting(
        "REPLAY_RATIO",
        "1",
        "replayed pairs an in-domain pair (parent: the share of sources, at most 1)",
        recipes=FINETUNE,
    ),
    Setting(
        "REPLAY_SOURCES",
        "",
        "REPLAY=parent: PREFIX of source text of the parent's domains it translates",
        recipes=FINETUNE,
    ),
    _whole(
        "FINETUNE_WARMUP", "", "the ramp's updates; empty: a tenth of the updates, at most 16,000", recipes=FINETUNE
    ),
    # ---- the toy size's own (TOY=1), the plan's
    Setting("TOY_ARCH", "vaswani_tiny", "the toy model", recipes=()),
    Setting("TOY_MODEL_FLAGS", "", "the toy model's flags", recipes=()),
    _whole("TOY_VOCAB_SIZE", "1000", "the toy vocabulary", 1, recipes=()),
    _whole("TOY_MAX_UPDATE", "300", "the toy training's updates", 1, recipes=()),
    _whole("TOY_WARMUP", "100", "the toy warm-up", recipes=()),
    _whole("TOY_SAVE_INTERVAL_UPDATES", "50", "the toy checkpoints' interval", 1, recipes=()),
    _whole("TOY_TOKENS_PER_UPDATE", "3000", "the toy batch", 1, recipes=()),
    _whole("TOY_AVERAGE_LAST", "3", "the toy checkpoints averaged", 1, recipes=()),
    _whole("TOY_MIN_PAIRS", "1000", "fewer toy training lines stop the recipe", recipes=()),
)
BY_NAME: Dict[str, Setting] = {s.name: s for s in DECLARED}
# the variables whose change decides another plan: the plan's key (recipes/planner/saved.py)
PLANNING = tuple(s.name for s in DECLARED if s.plans)
