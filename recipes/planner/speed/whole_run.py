"""The whole run's time beside training's: the data stages before it; after it the checkpoints averaged, the test set
translated and scored, and the exports; with INIT the parent's translations too (its test set scored before
fine-tuning, PARENT_TEST before and after, REPLAY=parent's sources). TIME bounds the training only; this is what the
plan says of the rest, at the machine's measured training speed."""

from dataclasses import dataclass
from typing import Dict, List, Optional

from preprocess.corpora import CorpusError, count_lines, find_corpus, held_out_size
from recipes.planner.probe_arithmetic import BEAM_TOKEN_COST
from recipes.planner.variables import Variables
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


def translations(v: Variables, found, tuned, held_out: Dict[str, Optional[int]]) -> List[Translation]:
    """What the run translates besides training's validations, in target tokens: the test set (by the parent too,
    before fine-tuning), PARENT_TEST before and after, REPLAY=parent's sources; a line's tokens as the corpus's."""
    a_line = (tuned.target_tokens / max(1, tuned.pairs)) if tuned else found.target_tokens / max(1, found.pairs)
    src, tgt = v.get("SRC"), v.get("TGT")

    def lines(specs: List[str]) -> int:
        try:
            return sum(count_lines((lambda c: c.tsv or c.target)(find_corpus(s, src, tgt))) for s in specs)
        except CorpusError:  # a missing file is named where the data stage reads it
            return 0

    test = lines(v.words("TEST")) if v.words("TEST") else held_out.get("test") or held_out_size(found.pairs, None)
    done = [Translation("the test set translated", int(test * a_line))]
    if tuned:
        done.append(Translation("the parent scored first", int(test * a_line)))
        if v.get("PARENT_TEST"):
            parent_test = lines([v.get("PARENT_TEST")])
            done.append(Translation("PARENT_TEST translated twice", int(2 * parent_test * a_line)))
        if v.get("REPLAY") == "parent":
            replayed = tuned.pairs - found.pairs
            done.append(Translation("the parent translating REPLAY's sources", int(replayed * a_line)))
    return done


def of_the_plan(
    v: Variables, found, tuned, held_out: Dict[str, Optional[int]], spent: Dict[str, str], tokens: int
) -> dict:
    """The plan's budget fields of whole_run (whole_run_seconds, whole_run; 0 and "" where no speed is known here):
    the corpus's facts (``found``), INIT's (``tuned``), the dev and test sets held out, the training's time and speed
    (``spent``: time_budget.budget's) at ``tokens`` target tokens an update."""
    if not float(spent["SECONDS_PER_UPDATE"]):
        return {"whole_run_seconds": 0, "whole_run": ""}
    run = whole_run(
        float(spent["TRAINING_SECONDS"]),
        found.pairs,
        float(spent["SECONDS_PER_UPDATE"]) / max(1, tokens),
        translations(v, found, tuned, held_out),
        len(v.words("EXPORT")),
        v.number("BEAM", 4),
    )
    return {"whole_run_seconds": run["seconds"], "whole_run": run["said"]}
