"""What a prediction rests on: measurements (the budget runs), the paper (Table 3), or an extrapolation; and the floor
of a corpus the fit never saw."""

from recipes.planner.budget.candidates import Candidate
from recipes.planner.budget.law import FLOOR, FLOOR_LARGE, RANKING_ERROR

# what the budget runs span (benchmarks/records/budgets/*.json) and what Table 3 spans (100K and 300K updates of
# 25,000 tokens on WMT14 EN-DE's 4.5M pairs): a prediction inside them is "measured" or "from the paper"
MEASURED_TOKENS = 2 * 7080 * 2048  # twice the longest budget run's


MEASURED_PAIRS = 2 * 76_798


FEWEST_FITTED_UPDATES = 142  # the budget runs' shortest: below it the fit has seen no run


PAPER_TOKENS = (0.3 * 100_000 * 25_000, 3 * 300_000 * 25_000)


PAPER_PAIRS = 1_000_000


def floor_for(pairs: int) -> float:
    """The floor of a corpus the fit never saw: WMT14's at 1M pairs or more, else the small corpora's mean."""
    return FLOOR_LARGE if pairs >= PAPER_PAIRS else FLOOR


def ranking_error(pairs: int) -> float:
    """The rule's own error in ranking two candidates on a corpus of ``pairs`` (bits): Table 3's scale at 1M pairs or
    more, else the budget runs' (law.RANKING_ERROR)."""
    return RANKING_ERROR["Table 3" if pairs >= PAPER_PAIRS else "budget runs"]


def evidence(candidate: Candidate, updates: int, pairs: int) -> str:
    """Whether a candidate's prediction rests on measurements (the budget runs), on the paper (Table 3), or is
    extrapolated, and from what."""
    tokens = updates * candidate.tokens_per_update
    if (
        candidate.source == "measured"
        and candidate.dropout == 0.1
        and candidate.tokens_per_update <= 4096
        and tokens <= MEASURED_TOKENS
        and pairs <= MEASURED_PAIRS
    ):
        return "measured"
    if (
        candidate.source == "the paper"
        and pairs >= PAPER_PAIRS
        and PAPER_TOKENS[0] <= tokens <= PAPER_TOKENS[1]
        and candidate.tokens_per_update >= 12500
    ):
        return "from the paper"
    return "extrapolated"
