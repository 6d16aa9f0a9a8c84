"""The whole run's time beside training's: the data stages before it; after it the checkpoints averaged, the test set
translated and scored, and the exports; with INIT the parent's translations too (its test set scored before
fine-tuning, PARENT_TEST before and after, REPLAY=parent's sources). TIME bounds the training only; this is what the
plan says of the rest, at the machine's measured training speed."""

from dataclasses import dataclass
from typing import List

from recipes.planner.probe_arithmetic import BEAM_TOKEN_COST
from transformer_plugin_cli.files import duration

# stages 1-3 (clean, sentencepiece, encode, fairseq-preprocess) a training pair, two processes: 31.8 s for 100k pairs
# and 1,097 s for 4M on this machine's 2 cores (docs/benchmarks-sizes.md, "The data stages")
DATA_SECONDS_A_PAIR = 0.3e-3
# a fairseq program's start (imports, the model and the dictionaries read): each translation, the averaging, an export
PROGRAM_START_SECONDS = 15
# an export (CTranslate2's converter, or the Hugging Face directory written and loaded back to check it)
EXPORT_SECONDS = 30
# the paper's beam (Section 6.1), at which BEAM_TOKEN_COST was measured: a wider beam costs about in proportion
PAPER_BEAM = 4


@dataclass(frozen=True)
class Translation:
    """Target tokens translated after (or before) training: the test set, the parent's, a replay's sources."""

    what: str
    tokens: int


def seconds_translating(tokens: int, seconds_a_token: float, beam: int) -> float:
    """``tokens`` target tokens translated at ``beam``, for a model whose training token takes ``seconds_a_token``."""
    return PROGRAM_START_SECONDS + tokens * seconds_a_token * BEAM_TOKEN_COST * max(1, beam) / PAPER_BEAM


def whole_run(
    training_seconds: float,
    pairs: int,
    seconds_a_token: float,
    translations: List[Translation],
    exports: int,
    beam: int,
    data: bool = True,
) -> dict:
    """{"seconds": the whole run's, "said": its parts for people}; ``data`` False where the data stages are done."""
    parts = [("data", pairs * DATA_SECONDS_A_PAIR + PROGRAM_START_SECONDS if data else 0.0)]
    parts.append(("training", float(training_seconds)))
    parts.append(("averaging", float(PROGRAM_START_SECONDS)))
    for t in translations:
        parts.append((t.what, seconds_translating(t.tokens, seconds_a_token, beam)))
    if exports:
        parts.append(
            (f"{exports} export{'s' if exports > 1 else ''}", exports * (EXPORT_SECONDS + PROGRAM_START_SECONDS))
        )
    seconds = sum(s for _, s in parts)
    said = ", ".join(f"{what} {duration(s)}" for what, s in parts if s > 0 and what != "training")
    return {"seconds": int(seconds), "said": f"the whole run about {duration(seconds)} ({said} beside training)"}
