"""The choice among the candidates at a budget: each one's updates and predicted loss, the pick of the lowest among
the model the smaller budgets settled on (so that a larger budget never picks a smaller model), and the rivals close
enough to it that their speed is measured again."""

import functools
import math
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from recipes.planner.budget.candidates import Candidate, parameters
from recipes.planner.budget.evidence import FEWEST_FITTED_UPDATES, evidence, ranking_error
from recipes.planner.budget.law import FLOOR
from recipes.planner.budget.predictions import lowest_updates, predicted_loss, useful_updates
from recipes.planner.probe_arithmetic import updates_that_fit


@dataclass
class Option:
    """A candidate at a budget: the updates it gets and its predicted loss."""

    candidate: Candidate
    updates: int
    loss: float
    limited: str = ""  # 'repeats': fewer than the budget gives, more would not help; 'not probed': see explain
    seconds_per_update: float = 0.0  # measured here, or from a speed file (TIME)
    training_seconds: float = 0.0  # its updates' time, validations and start included (TIME)
    useful: int = 0  # the updates past which more repeat the corpus to no use (0: no limit)
    evidence: str = ""


@dataclass
class Choice:
    """The pick and every candidate beside it."""

    picked: Option
    options: List[Option] = field(default_factory=list)
    size: float = 0.0  # the parameters (millions, embeddings left out) of the model the pick is of (settled)
    tie: str = ""  # where the pick is not its model's lowest prediction, why (said_tie), for people

    def as_dict(self, vocab_size: int, joint: bool) -> Dict:
        def one(o: Option) -> Dict:
            c = o.candidate
            return {
                "name": c.name,
                "arch": c.arch,
                "model_flags": c.model_flags,
                "dropout": c.dropout,
                "tokens_per_update": c.tokens_per_update,
                "updates": o.updates,
                "useful_updates": o.useful,
                "limited": o.limited,
                "seconds_per_update": round(o.seconds_per_update, 4),
                "training_seconds": round(o.training_seconds),
                "predicted_valid_loss_bits": None if math.isinf(o.loss) else round(o.loss, 3),
                "parameters_millions": round(parameters(c, vocab_size, joint), 2),
                "evidence": o.evidence,
                "picked": o is self.picked,
            }

        return {"unit": "bits per target piece", "options": [one(o) for o in self.options]}


def choose(
    options: Sequence[Candidate],
    updates_of: Callable[[Candidate], int],
    corpus_tokens: float,
    pairs: int,
    given: bool = False,
    floor: float = FLOOR,
    lower_bound: Optional[Callable[[Candidate], Optional[int]]] = None,
    smaller: Sequence[Callable[[Candidate], int]] = (),
) -> Choice:
    """The candidate of the lowest predicted loss at the updates ``updates_of`` gives each (non-decreasing in the
    budget), among those of the model and batch the smaller budgets settled on (:func:`settled`), or of stronger
    evidence within the rule's own error of it (:func:`break_tie`). ``given``: a MAX_UPDATE the
    user gave, trained as given; else (TIME) at most a candidate's useful updates. ``lower_bound``: the most updates a
    candidate could get, had without measuring it (None: measure it); one whose prediction at that many cannot beat
    the best so far is left unmeasured ('not probed'). ``smaller``: the updates each candidate gets at the budgets of
    the grid below this one."""
    found: List[Option] = []
    best = math.inf
    for c in options:
        useful = useful_updates(c, corpus_tokens, floor)
        bound = lower_bound(c) if lower_bound else None
        if bound is not None:
            at_most = min(bound, useful) if useful else bound
            at_best = predicted_loss(c, at_most, corpus_tokens, floor)
            if at_best >= best:
                found.append(Option(c, at_most, at_best, "not probed"))
                continue
        updates, limited = updates_of(c), ""
        if not given and useful and updates > useful:
            turns = useful == lowest_updates(c, corpus_tokens, floor)
            updates, limited = useful, "turns" if turns else "repeats"
        option = Option(c, updates, predicted_loss(c, updates, corpus_tokens, floor), limited, useful=useful)
        option.evidence = evidence(c, updates, pairs)
        best = min(best, option.loss)
        found.append(option)
    measured = [o for o in found if o.limited != "not probed"]
    error = ranking_error(pairs)
    size, batch = settled(measured, smaller, corpus_tokens, pairs, given, floor, error)
    mine = pool = [o for o in measured if parameters(o.candidate) == size]
    if not given:  # TIME: the batch never falls as the budget grows (MAX_UPDATE: more tokens an update cost no time)
        batches = sorted({o.candidate.tokens_per_update for o in mine})
        kept = min((b for b in batches if b >= batch), default=batches[-1])
        pool = [o for o in mine if o.candidate.tokens_per_update == kept]
    picked = break_tie(pool, error)[0]
    return Choice(picked, found, size, said_tie(picked, min(mine, key=lambda o: o.loss), error))


# what a prediction rests on, strongest first (budget/evidence.py)
EVIDENCE = ("measured", "from the paper", "extrapolated")


def break_tie(options: Sequence[Option], error: float) -> Tuple[Option, str]:
    """The pick among ``options``: the lowest predicted loss, unless others lie within the rule's own error of it
    (``error``, bits: evidence.ranking_error); then, of those, the one of the strongest evidence; between equals, one
    that ends before its budget (its lowest, or what the corpus teaches: ``limited``) at the larger batch, then the
    fewer updates, else the lowest. With why, for people ('' where the lowest was picked)."""
    lowest = min(options, key=lambda o: o.loss)
    close = [o for o in options if o.loss <= lowest.loss + error]

    def rank(o: Option):  # between equals, one that ends before the budget: the larger batch, then fewer updates
        strength = EVIDENCE.index(o.evidence) if o.evidence in EVIDENCE else len(EVIDENCE)
        return (strength, -o.candidate.tokens_per_update, o.updates) if o.limited else (strength, 0, 0)

    picked = min(close, key=lambda o: (*rank(o), o.loss))
    if picked is lowest:
        return picked, ""
    if picked.evidence != lowest.evidence:
        return picked, picked.evidence
    if picked.candidate.tokens_per_update != lowest.candidate.tokens_per_update:
        return picked, "the larger batch"
    return picked, "fewer updates"


def said_tie(picked: Option, lowest: Option, error: float) -> str:
    """What the plan says where the pick is not the lowest prediction of its model: a tie within the rule's own error
    broken (break_tie), or the batch of the smaller budgets' picks kept (settled)."""
    if picked is lowest:
        return ""
    c, gap = lowest.candidate, picked.loss - lowest.loss
    other = f"{c.tokens_per_update:,} tokens, P_drop {c.dropout} predicted {gap:.2f} lower"
    winner, why = break_tie([picked, lowest], error)
    if winner is picked:
        why = {"measured": "the measured one", "from the paper": "the paper's"}.get(why, why)
        return f"tie: {other}, within the rule's error ({error:.2f}); picked {why}"
    return f"{other}; kept the smaller budgets' batch, {picked.candidate.tokens_per_update:,}"


def settled(
    measured: Sequence[Option],
    smaller: Sequence[Callable[[Candidate], int]],
    corpus_tokens: float,
    pairs: int,
    given: bool,
    floor: float,
    error: float,
) -> Tuple[float, int]:
    """The size of the model the pick is of, and its least batch: the largest of those of the picks at the budgets of
    the grid below this one (at each, the lowest prediction's model and, among its options, break_tie's pick), or this
    budget's best model at its least batch (0) where the grid has none below. So a larger budget never picks a smaller
    model nor a smaller batch than a smaller budget did, and the lowest prediction of its pick's model never rises: at
    each budget of the grid the set it picks from holds that budget's best, and between them each candidate only
    improves. The cost: between two budgets of the grid (12% apart) a larger model that has just become the best waits
    for the next, and a batch a smaller budget picked is kept where a smaller one has come to be predicted lower (said
    in a note)."""
    if not smaller:
        return parameters(min(measured, key=lambda o: o.loss).candidate), 0

    # at a budget of the grid, the options of at least the fit's fewest updates (fewer: none it saw; there a batch of
    # two updates can be predicted ahead of one of twenty); None where none has them
    def pick_at(updates_of: Callable[[Candidate], int]) -> Optional[Option]:
        at = []
        for o in measured:
            updates, limited = updates_of(o.candidate), ""
            if not given and o.useful and updates > o.useful:
                updates, limited = o.useful, "ends early"
            there = Option(o.candidate, updates, predicted_loss(o.candidate, updates, corpus_tokens, floor), limited)
            there.evidence = evidence(o.candidate, updates, pairs)
            if updates >= FEWEST_FITTED_UPDATES:
                at.append(there)
        if not at:
            return None
        size = parameters(min(at, key=lambda o: o.loss).candidate)
        return break_tie([o for o in at if parameters(o.candidate) == size], error)[0]

    picks = [p for p in map(pick_at, smaller) if p is not None]
    if not picks:  # this budget's best model, at its least batch: none below the budgets above it will pick
        return parameters(min(measured, key=lambda o: o.loss).candidate), 0
    return max(parameters(p.candidate) for p in picks), max(p.candidate.tokens_per_update for p in picks)


# the budgets below a budget that decide the size of its pick's model (settled): 20 a decade, from 2 minutes (the
# shortest TIME) and from 100 updates
GRID_A_DECADE = 20


def grid(start: float, budget: float) -> List[float]:
    """The budgets of the grid from ``start`` up to ``budget`` (``budget`` itself if it is one of them)."""
    found, i = [], 0
    while start * 10 ** (i / GRID_A_DECADE) <= budget * (1 + 1e-12):
        found.append(start * 10 ** (i / GRID_A_DECADE))
        i += 1
    return found


# Predictions this close (bits) rank by the speed figures more than by the fit: the EN-RU budget corpus at 200 minutes,
# where 2 and 3 layers of 256 at 2,048 tokens were predicted 0.04 bits apart and measured within 0.01 (5.37 bits
# each), picked the slower on one probe's figure (docs/benchmarks.md). Their speed is measured again before the pick.
TIE_BITS = 0.1


def close_rivals(choice: Choice) -> List[Candidate]:
    """The best candidate of each other model predicted within TIE_BITS of the pick."""
    picked = choice.picked
    rivals: Dict[float, Option] = {}  # by the model's size
    for o in choice.options:
        if o.limited == "not probed" or math.isinf(o.loss) or abs(o.loss - picked.loss) > TIE_BITS:
            continue
        size = parameters(o.candidate)
        if size != parameters(picked.candidate) and (size not in rivals or o.loss < rivals[size].loss):
            rivals[size] = o
    return [o.candidate for o in rivals.values()]


def updates_at(seconds: float, speeds: Dict[str, float], valid_tokens: int, c: Candidate) -> int:
    """The updates of a candidate measured (``speeds``: seconds an update, by name) that fit in ``seconds``."""
    return _updates_that_fit(int(seconds), speeds[c.name], c.tokens_per_update, valid_tokens)


_updates_that_fit = functools.lru_cache(maxsize=100_000)(updates_that_fit)
