"""The settings of a corpus by its size alone: its vocabulary, and the size class's full run (what a run without
MAX_UPDATE or TIME trains: docs/parallel-text.md, "The settings by corpus size")."""

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from recipes.planner.budget.candidates import SHORT_FLAGS, Candidate, model_words

# The vocabulary, by the corpus alone (every candidate shares it): 8,000 pieces from 10k to 500k pairs, measured here
# (the learning benchmark's 77k EN-DE pairs: 8,000 beat OPUS-MT's 1,000 by 3.8 BLEU at 1,200 updates,
# docs/benchmarks.md), then OPUS-MT-train's sizes (Tiedemann & Thottingal 2020); 500 under 10k (below MIN_PAIRS,
# where one sets it).
VOCABULARY = [(1_000_000, 32000), (500_000, 12000), (10_000, 8000), (0, 500)]


# what fairseq's batches hold of an update's nominal tokens (padding, --max-tokens on the longer side): 0.83, measured
# (recipes/planner/speed/probing.py); an epoch of a corpus in nominal tokens is its tokens over it
BATCH_FILL = 0.83


@dataclass
class Sized:
    """The settings for a corpus of ``pairs`` pairs and a budget (docs/parallel-text.md)."""

    pairs: int
    vocab_size: int
    joint: bool
    arch: str
    model_flags: str
    dropout: float
    tokens_per_update: int
    max_update: int
    size_class: str
    budget: str = ""  # the pick in one line, for people
    explain: str = ""  # why: the candidates beside it, their predicted losses, and the sources
    source: str = ""  # where a size class's settings come from
    valid_tokens: int = 0  # the dev set's target tokens, estimated: what a validation costs
    plan: Dict = field(default_factory=dict)  # the rule's choice as WORK/plan.json holds it
    useful_updates: int = 0  # the pick's: past these, more updates repeat the corpus to no use (0: no limit)
    notes: List[str] = field(default_factory=list)  # what the plan must say beside the pick, one a line
    target_tokens: int = 0  # the training set's target pieces, estimated as the dev set's
    holds_down_to: int = 0  # TIME: the fewest seconds at which the rule still picks this model (0: not asked)


# the settings measured best at 1,200 updates on 77k EN-DE pairs (docs/benchmarks.md, "Learning"): the budgets
# benchmark's reference (benchmarks/budgets.py)
SHORT_BUDGET = dict(vocab_size=8000, model_flags=SHORT_FLAGS.format(n=3), dropout=0.1, tokens_per_update=4096)


def sized(pairs: int, scripts: Tuple[Optional[str], Optional[str]]) -> Sized:
    """The settings of a corpus of ``pairs`` pairs in ``scripts`` (source's, target's) by its size alone: its
    vocabulary (joint where both sides share a script) and its size class's full run, before any budget."""
    vocab = next(v for at_least, v in VOCABULARY if pairs >= at_least)
    joint = scripts[0] == scripts[1] or None in scripts
    name, arch, flags, dropout, tokens, updates, source = size_class(pairs)
    return Sized(pairs, vocab, joint, arch, flags, dropout, tokens, updates, name, source=source)


def class_settings(pairs: int, scripts: Tuple[Optional[str], Optional[str]]) -> Sized:
    """The settings of a full run by the corpus's size (its class): what a run without MAX_UPDATE or TIME gets, said
    for people."""
    found = sized(pairs, scripts)
    name, vocab, updates = found.size_class, found.vocab_size, found.max_update
    c = Candidate(name, found.arch, found.model_flags, found.dropout, found.tokens_per_update)
    found.budget = (
        f"full run ({name.split(' ')[0]}): {model_words(c)}, P_drop {found.dropout}, BPE {vocab:,} "
        f"{'joint' if found.joint else 'a side'}, {found.tokens_per_update:,} tokens x {updates:,} updates"
    )
    found.explain = f"no MAX_UPDATE or TIME: a full run of the {name} class, {updates:,} updates (from {found.source})"
    found.plan = {"budget": "none", "picked": "the size class's full run"}
    return found


def size_class(pairs: int) -> Tuple[str, str, str, float, int, int, str]:
    """(name, arch, flags, P_drop, tokens an update, updates, source) of a full run by the corpus's size (its class):
    what a run without a budget gets."""
    if pairs >= 1_000_000:  # the paper's base model and batch (Sections 5.1, 6.1)
        return (
            "large (1M pairs or more)",
            "vaswani_base",
            "",
            0.1,
            25000,
            100000,
            "the paper's base model and batch, Sections 5.1 and 6.1",
        )
    if pairs >= 100_000:  # the base model, more regularised (the big model's 0.3 of Table 3; Araabi & Monz 2020)
        return (
            "medium (100k to 1M pairs)",
            "vaswani_base",
            "",
            0.3,
            12500,
            50000,
            "the paper's base model with Table 3's P_drop 0.3 as Araabi & Monz 2020",
        )
    # fairseq's transformer_iwslt_de_en (IWSLT'14 De-En, 160k pairs): d_ff 1024, 4 heads; dropout 0.3
    return (
        "small (under 100k pairs)",
        "vaswani_base",
        "--d-ff 1024 --attention-heads 4",
        0.3,
        4096,
        30000,
        "fairseq's transformer_iwslt_de_en, examples/translation",
    )


def sizes_table() -> str:
    """The settings of each size class for a full run (one script on both sides), and what a budget does."""
    lines = [
        "| lines of TRAIN | VOCAB_SIZE | ARCH MODEL_FLAGS | DROPOUT | TOKENS_PER_UPDATE | MAX_UPDATE |",
        "|---|---|---|---|---|---|",
    ]
    spans = (
        (1_000_000, "1,000,000 or more"),
        (500_000, "500,000 to 1,000,000"),
        (100_000, "100,000 to 500,000"),
        (10_000, "10,000 to 100,000"),
    )
    for pairs, span in spans:
        found = class_settings(pairs, ("LATIN", "LATIN"))
        model = " ".join(filter(None, (found.arch, found.model_flags)))
        lines.append(
            f"| {span} | {found.vocab_size:,} | {model} | {found.dropout} | {found.tokens_per_update:,} | "
            f"{found.max_update:,} |"
        )
    lines.append("| under 10,000 | refused (MIN_PAIRS) | | | | |")
    lines.append(
        "| with TIME or MAX_UPDATE | the class's | the lowest predicted validation loss: N=2 or 3 of d_model 256, "
        "fairseq's IWSLT model, base or big | 0.1 or 0.3 | 2,048 to 25,000, more on several devices | "
        "TIME's, at most the useful; or MAX_UPDATE |"
    )
    return "\n".join(lines)
