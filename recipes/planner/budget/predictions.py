"""The law along one candidate's training: its predicted dev loss after so many updates, the updates at which it is
lowest (past which it rises), and the updates past which more do it no good."""

import functools
import math

from recipes.planner.budget.candidates import Candidate, _parameters, parameters
from recipes.planner.budget.law import FIT, FLOOR, USEFUL_REPEATS, Constants, loss, onset, repeats, rise_rate
from recipes.planner.model import Model


def lowest_updates(candidate: "Candidate", corpus_tokens: float, floor: float, constants: Constants = FIT) -> int:
    """The updates at which a candidate's predicted dev loss is lowest, past which it rises (:func:`overfitting`
    outgrowing what more repeats still teach); 0: it never rises (no corpus size, or no rise at all)."""
    return _lowest_updates(
        constants,
        candidate.arch,
        candidate.model_flags,
        candidate.dropout,
        candidate.tokens_per_update,
        corpus_tokens,
        floor,
    )


@functools.lru_cache(maxsize=10_000)
def _lowest_updates(
    k: Constants, arch: str, flags: str, dropout: float, tokens_per_update: int, corpus_tokens: float, floor: float
) -> int:
    n = _parameters(arch, flags, 0, True)
    if rise_rate(k, n, dropout, corpus_tokens) <= 0:
        return 0
    model = Model.from_flags(arch, flags)
    layers = max(model.encoder_layers, model.decoder_layers)

    def at(updates: float) -> float:
        return loss(k, n, layers, dropout, tokens_per_update, updates, corpus_tokens, floor)

    def rising(updates: float) -> bool:
        return at(updates * 1.001) > at(updates)

    # past the onset the rise is linear in the epochs and what repeats teach falls ever more slowly: one turn
    low = max(1.0, onset(k, n, corpus_tokens) * corpus_tokens / tokens_per_update)
    high = low * 2
    while not rising(high):
        high *= 2
        if high > 1e12:
            return 0
    for _ in range(60):
        middle = math.sqrt(low * high)
        low, high = (low, middle) if rising(middle) else (middle, high)
    return max(1, int(high))


def useful_updates(candidate: Candidate, corpus_tokens: float, floor: float = FLOOR) -> int:
    """The updates past which more do the dev loss no good: its lowest (:func:`lowest_updates`), or earlier, where
    more repeat the corpus to no use (USEFUL_REPEATS R* epochs past the first); 0: no limit."""
    if corpus_tokens <= 0:
        return 0
    epochs = 1 + USEFUL_REPEATS * repeats(FIT, candidate.dropout)
    repeated = max(1, int(corpus_tokens * epochs / candidate.tokens_per_update))
    lowest = lowest_updates(candidate, corpus_tokens, floor)
    return min(repeated, lowest) if lowest else repeated


def predicted_loss(candidate: Candidate, updates: int, corpus_tokens: float, floor: float = FLOOR) -> float:
    """The lowest dev loss a candidate is predicted to reach in ``updates`` updates on a corpus of ``corpus_tokens``
    target tokens (an epoch, in the updates' nominal tokens), in bits per target piece: L at those updates, or at its
    lowest (:func:`lowest_updates`) where they pass it. So more updates never predict worse, and a candidate past its
    turn gains nothing from them while others still learn."""
    if updates <= 0:
        return math.inf
    lowest = lowest_updates(candidate, corpus_tokens, floor)
    return loss_at(candidate, min(updates, lowest) if lowest else updates, corpus_tokens, floor)


def loss_at(
    candidate: Candidate, updates: int, corpus_tokens: float, floor: float = FLOOR, constants: Constants = FIT
) -> float:
    """L for a candidate after ``updates`` updates, past its lowest too (this module's docstring)."""
    layers = max(candidate.model.encoder_layers, candidate.model.decoder_layers)
    return loss(
        constants,
        parameters(candidate),
        layers,
        candidate.dropout,
        candidate.tokens_per_update,
        updates,
        corpus_tokens,
        floor,
    )
