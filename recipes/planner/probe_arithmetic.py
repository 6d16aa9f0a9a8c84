"""The speed probe's arithmetic, apart from its timing (recipes/planner/speed/ times; this counts): a TIME in seconds,
the updates that fit in it with their validations and the start, and an update's seconds from a timed micro-batch and
step (a CPU's micro-batch counted per token, a CUDA device's as fairseq runs it, in micro-batches of --max-tokens)."""

import math
import re
import statistics
from typing import Callable, Protocol, Tuple


class Probe(Protocol):
    """What the arithmetic reads of a speed.probing.Probe."""

    tokens_per_update: int
    workers: int
    device: str
    max_tokens: int
    length: int
    repeats: int


# the most target tokens a micro-batch of the probe holds: a larger batch is timed per token (its cost grows with
# its tokens), so that a probe of a large model takes seconds
MICRO_TOKENS = 2048


class BudgetError(ValueError):
    pass


# Of a TIME budget, what training's updates get: the rest goes to starting (fairseq's imports, the data), to the
# validations (one at each checkpoint: 1,000 updates apart, or a twentieth of the run when that is less), and a
# margin for what is not counted (data loading, logging, checkpoints of under a second); fairseq's --stop-time-hours
# stops training at TIME in any case. A validation's target token (forward and loss, no backward, over the dev set)
# costs VALID_TOKEN_COST of a training token's time, measured on 2026-11-27 with the short budget's model on the 77k
# EN-DE pairs: 0.55 on one core (19,306 target tokens in 14 s against 5.33 s for 4,096), 0.43 on 2 CPU workers.
# With --eval-bleu (EVAL_BLEU=1, a small corpus fine-tuned) each validation also translates the dev set at beam 4: a dev
# target token translated costs BEAM_TOKEN_COST of a training token's time more (benchmarks/validation_cost.py, the
# hypotheses at the references' lengths, one core, 2026-12-06: 1.29 for 2+2 layers of 256, 1.13 for 3+3 of 512, 1.49
# with the core shared). Measured on CPU only; a
# GPU's beam search is further from its training's speed (issue 87's session measures it), and the run re-plans at
# the validations' measured seconds in any case (transformer_plugin/patches/training_progress.py).
TIME_STARTUP_SECONDS = 60
TIME_TRAINING_SHARE = 0.95
VALID_TOKEN_COST = 0.5
BEAM_TOKEN_COST = 1.3
TIME_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_time(text: str) -> int:
    """TIME=90m, 8h, 1h30m, 2d, 600s: seconds; BudgetError for anything else."""
    given = text.strip().replace(" ", "")
    parts = re.findall(r"(\d+(?:\.\d+)?)([smhd])", given)
    if not given or "".join(n + u for n, u in parts) != given:
        raise BudgetError(f"TIME={text}: a duration such as 90m, 8h, 1h30m or 2d (s, m, h, d)")
    seconds = int(sum(float(n) * TIME_UNITS[u] for n, u in parts))
    if seconds < 120:
        raise BudgetError(f"TIME={text}: under two minutes, too short to train anything")
    return seconds


def validations(updates: int, interval: int = 0) -> int:
    """The validations of a run of ``updates`` updates in the recipes: one every SAVE_INTERVAL_UPDATES (``interval``;
    0: the recipe's own, 1,000, or a twentieth of the run when that is less)."""
    return updates // (interval or min(1000, max(1, updates // 20)))


def validation_seconds(per_update: float, tokens_per_update: int, valid_tokens: int, bleu: bool = False) -> float:
    """One validation over a dev set of ``valid_tokens`` target tokens, for updates of ``tokens_per_update`` taking
    ``per_update`` seconds; ``bleu``: the dev set translated too (--eval-bleu)."""
    cost = VALID_TOKEN_COST + (BEAM_TOKEN_COST if bleu else 0.0)
    return valid_tokens / max(1, tokens_per_update) * per_update * cost


def training_time(
    updates: int,
    per_update: float,
    tokens_per_update: int = 1,
    valid_tokens: int = 0,
    interval: int = 0,
    bleu: bool = False,
) -> float:
    """The time ``updates`` updates of ``tokens_per_update`` target tokens take at ``per_update`` seconds each, with
    a validation over a dev set of ``valid_tokens`` target tokens every ``interval`` updates (``bleu``: translated
    too), the margin and the start."""
    validation = validation_seconds(per_update, tokens_per_update, valid_tokens, bleu)
    return (
        updates * per_update + validations(updates, interval) * validation
    ) / TIME_TRAINING_SHARE + TIME_STARTUP_SECONDS


def updates_that_fit(
    seconds: int,
    per_update: float,
    tokens_per_update: int = 1,
    valid_tokens: int = 0,
    interval: int = 0,
    bleu: bool = False,
) -> int:
    """The most updates whose training_time is within ``seconds`` (0 when none fit): training_time grows with the
    updates, so the most is found by halving."""
    room = max(0.0, seconds - TIME_STARTUP_SECONDS) * TIME_TRAINING_SHARE
    low, high = (
        0,
        int(room / per_update) + 1,
    )  # training_time(high) is past seconds: no more fit than without validations
    while high - low > 1:
        middle = (low + high) // 2
        if training_time(middle, per_update, tokens_per_update, valid_tokens, interval, bleu) <= seconds:
            low = middle
        else:
            high = middle
    return low


# Of a TIME's room, the validations take at most this share: where the recipe's 20 (a large dev set translated for
# the dev BLEU at each) would take more, fewer come, further apart, and at least LEAST_VALIDATIONS
VALIDATION_SHARE, LEAST_VALIDATIONS = 0.25, 5


def validation_interval(
    seconds: int, per_update: float, tokens_per_update: int, valid_tokens: int, bleu: bool = False
) -> int:
    """The updates between validations for a TIME of ``seconds``: 0 (the recipe's own, 20 in all) where those take at
    most VALIDATION_SHARE of the room, else as many updates apart as keep them to that share (0 where even
    LEAST_VALIDATIONS take more than the room: none fit)."""
    room = max(0.0, seconds - TIME_STARTUP_SECONDS) * TIME_TRAINING_SHARE
    validation = validation_seconds(per_update, tokens_per_update, valid_tokens, bleu)
    updates = int(room / per_update)  # the recipe's 20 validations are a twentieth of these apart, or fewer
    if validation <= 0 or validations(max(1, updates)) * validation <= VALIDATION_SHARE * room:
        return 0
    count = max(LEAST_VALIDATIONS, int(VALIDATION_SHARE * room / validation))
    if count * validation >= room:
        return 0
    return max(1, int((room - count * validation) / per_update) // count)


def micro_batches(probe: Probe) -> Tuple[int, float]:
    """(target tokens of the micro-batch timed, micro-batches an update) for a worker's share of an update. On a CUDA
    device, fairseq's own: micro-batches of ``max_tokens``, ceil(tokens / max_tokens) of them (its --update-freq),
    each timed as it runs, since a device's time is far from proportional to its tokens (updates of 2,048 and 4,096
    tokens once timed the same micro-batch, so 2,048 always looked twice as fast). On CPU, at most MICRO_TOKENS timed
    and counted per token (a CPU's time grows with its tokens), so that a probe of a large model takes seconds."""
    tokens = max(1, probe.tokens_per_update // probe.workers)
    if probe.device == "cuda" and probe.max_tokens:
        micro = min(tokens, probe.max_tokens)
        return micro, float(math.ceil(tokens / micro))
    micro = min(tokens, MICRO_TOKENS)
    return micro, tokens / micro


def seconds_an_update(probe: Probe, micro_batch: Callable[[int], float], step: Callable[[], float]) -> float:
    """An update's seconds from what is timed: ``micro_batch(sentences)``, the seconds of one micro-batch (forward,
    loss, backward) of so many sentences of ``probe.length``, and ``step()``, the seconds of the gradients' sum and
    the optimizer's step; each the median of ``probe.repeats``, after one not counted (memory, kernels)."""
    micro, batches = micro_batches(probe)
    sentences = max(1, micro // probe.length)
    # on CPU, per token: the sentences' tokens scaled to the micro-batch's exactly; a device's time is not per token
    scale = 1.0 if probe.device == "cuda" and probe.max_tokens else micro / (sentences * probe.length)
    timed, stepped = [], []
    for _ in range(probe.repeats + 1):
        timed.append(micro_batch(sentences) * scale)
        stepped.append(step())
    return batches * statistics.median(timed[1:]) + statistics.median(stepped[1:])
