"""The budget rule, from a corpus and a budget to its settings: every candidate's dev loss predicted at the updates the
budget gives it (MAX_UPDATE, or TIME at the machines' speed), the pick the lowest (:mod:`.choosing`), said for people
(:mod:`.explanation`). Without a budget, the size class's full run (:mod:`.size_classes`).

    settings(train, src, tgt, max_update=..., time_text=..., speed=...)   # corpora read here
    settings_for(pairs, scripts, ...)                                      # a corpus's facts given
"""

import functools
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from preprocess.corpora import CorpusError, count_lines, find_corpus, sides_scripts
from recipes.planner.budget.candidates import Candidate, candidates
from recipes.planner.budget.choosing import TIE_BITS, Choice, choose, close_rivals, grid, updates_at
from recipes.planner.budget.corpus_tokens import PIECES_PER_WORD, dev_tokens, words_a_line
from recipes.planner.budget.evidence import floor_for
from recipes.planner.budget.explanation import explain, picked_line
from recipes.planner.budget.predictions import loss_at, lowest_updates, predicted_loss
from recipes.planner.budget.size_classes import BATCH_FILL, Sized, class_settings, sized
from recipes.planner.probe_arithmetic import BudgetError, parse_time, training_time, updates_that_fit
from transformer_plugin_cli.files import duration


def settings_for(
    pairs: int,
    scripts: Tuple[Optional[str], Optional[str]],
    max_update: Optional[int] = None,
    seconds: int = 0,
    time_text: str = "",
    speed: Optional[Callable[[Candidate, int], float]] = None,
    valid_tokens: int = 0,
    corpus_tokens: float = 0.0,
    devices: int = 1,
    max_tokens_per_device: int = 4096,
    lower_bound: Optional[Callable[[Candidate, int], Optional[float]]] = None,
    remeasure: Optional[Callable[[Sequence[Candidate], int], List[str]]] = None,
    least_share: Optional[Callable[[str, str], int]] = None,
) -> Sized:
    """The settings for ``pairs`` training pairs of ``corpus_tokens`` target tokens (0: unknown, no repetition counted)
    and a budget: ``max_update`` updates, or ``seconds`` of training (``speed``: a candidate's seconds an update on the
    machines that train, with a vocabulary of so many pieces; ``lower_bound``: the fewest seconds it could take, had
    without measuring it, or None), or neither (the size class's full run). The candidates' batches are laid out over
    ``devices`` devices of micro-batches of ``max_tokens_per_device``, none giving a device fewer tokens than
    ``least_share`` (a model's arch and flags: budget/busy_share.py; None: no least). The pick is the candidate of the
    lowest predicted validation loss, or of stronger evidence within the rule's own error of it (choosing.break_tie).
    With TIME, where other models are predicted within TIE_BITS of the pick, ``remeasure`` measures those models' speed
    and the pick's again (the models it measured again, for people), and the pick is made again from its figures."""
    if max_update is None and not seconds:
        return class_settings(pairs, scripts)
    found = sized(pairs, scripts)
    vocab, epoch, floor = found.vocab_size, corpus_tokens / BATCH_FILL if corpus_tokens else 0.0, floor_for(pairs)
    speeds: Dict[str, float] = {}
    updates_of, bound, given, smaller = budget_updates(
        max_update, seconds, time_text, speed, lower_bound, valid_tokens, vocab, speeds
    )

    def chosen() -> Choice:
        return choose(
            candidates(devices, max_tokens_per_device, least_share),
            updates_of,
            epoch,
            pairs,
            given=not seconds,
            floor=floor,
            lower_bound=bound,
            smaller=smaller,
        )

    choice = chosen()
    rivals = close_rivals(choice) if seconds and remeasure else []
    again = remeasure([choice.picked.candidate, *rivals], vocab) if rivals else []
    if again:
        speeds.clear()
        choice = chosen()
    timed(choice, speeds, valid_tokens)
    best = choice.picked
    c = best.candidate
    if again:
        named = "; ".join(again) if len(again) <= 2 else f"{len(again)} models"
        found.notes.append(f"speed measured again: {named} (predictions within {TIE_BITS} bits)")
    found.arch, found.model_flags, found.dropout, found.tokens_per_update, found.max_update = (
        c.arch,
        c.model_flags,
        c.dropout,
        c.tokens_per_update,
        best.updates,
    )
    found.useful_updates = best.useful
    found.budget = picked_line(found, best)
    found.notes += ([choice.tie] if choice.tie else []) + limits(
        choice, max_update if not seconds else None, epoch, floor, f"TIME={time_text}"
    )
    found.explain = explain(given, choice, pairs)
    found.plan = {
        "budget": given,
        **choice.as_dict(vocab, found.joint),
        "corpus_target_tokens": int(corpus_tokens),
        "vocab_size": vocab,
        "joint": found.joint,
        "floor_bits": floor,
        "devices": devices,
    }
    return found


def budget_updates(
    max_update: Optional[int],
    seconds: int,
    time_text: str,
    speed: Optional[Callable[[Candidate, int], float]],
    lower_bound: Optional[Callable[[Candidate, int], Optional[float]]],
    valid_tokens: int,
    vocab: int,
    speeds: Dict[str, float],
) -> Tuple[Callable[[Candidate], int], Optional[Callable[[Candidate], Optional[int]]], str, List[Callable]]:
    """What a budget gives each candidate: (its updates; at most how many it could get, had without measuring it,
    or None; the budget in words; the updates it gets at each budget of the grid below this one). With TIME
    (``seconds``), each candidate's speed is measured into ``speeds`` (seconds an update, by name) as it is asked."""
    if not seconds:
        return (
            lambda c: max_update,
            None,
            f"MAX_UPDATE={max_update:,}",
            [functools.partial(lambda n, c: n, int(g)) for g in grid(100, max_update)],
        )

    def updates_of(c: Candidate) -> int:
        speeds[c.name] = speed(c, vocab)
        return updates_that_fit(seconds, speeds[c.name], c.tokens_per_update, valid_tokens)

    bound = None
    if lower_bound:

        def bound(c: Candidate) -> Optional[int]:
            fastest = lower_bound(c, vocab)
            return None if fastest is None else updates_that_fit(seconds, fastest, c.tokens_per_update, valid_tokens)

    smaller = [functools.partial(updates_at, g, speeds, valid_tokens) for g in grid(120, seconds)]
    return updates_of, bound, f"TIME={time_text}", smaller


def timed(choice: Choice, speeds: Dict[str, float], valid_tokens: int) -> None:
    """Each option's seconds an update, as measured, and what its updates take, validations and start included."""
    for o in choice.options:
        o.seconds_per_update = speeds.get(o.candidate.name, 0.0)
        if o.seconds_per_update:
            o.training_seconds = training_time(
                o.updates, o.seconds_per_update, o.candidate.tokens_per_update, valid_tokens
            )


def limits(choice: Choice, max_update: Optional[int], epoch: float, floor: float, time_text: str = "") -> List[str]:
    """What the plan says of the pick's updates against what the corpus can teach (each under 120 characters with
    "note: " before it): more time (``time_text``, TIME=...) than helps, where the run ends and when, or a MAX_UPDATE
    (``max_update``; None with TIME) past the updates that help or past the lowest dev loss."""
    best, notes = choice.picked, []
    c = best.candidate
    took = f"about {duration(best.training_seconds)} ({best.updates:,} updates)" if best.training_seconds else ""
    if best.limited == "repeats":
        notes.append(f"{time_text}: past {took} the pick repeats the corpus to no use: the run ends there")
    if best.limited == "turns":
        notes.append(f"{time_text}: the best this corpus gives comes after {took}: the run ends there")
    lowest = lowest_updates(c, epoch, floor)
    if max_update is not None and best.useful and max_update > best.useful and best.useful != lowest:
        gain = predicted_loss(c, best.useful, epoch, floor) - best.loss
        notes.append(
            f"MAX_UPDATE={max_update:,} passes the {best.useful:,} updates this corpus can teach: all trained, as "
            f"asked (+{gain:.3f} bits)"
        )
    rise = loss_at(c, best.updates, epoch, floor) - best.loss if lowest else 0.0
    if max_update is not None and lowest and best.updates > lowest and rise >= 0.01:
        notes.append(
            f"MAX_UPDATE={max_update:,}, as asked: the dev loss is predicted to rise past update {lowest:,} "
            f"(+{rise:.2f} bits by the last)"
        )
    return notes


def settings(
    train: Sequence[str],
    src: str,
    tgt: str,
    max_update: Optional[int] = None,
    time_text: str = "",
    speed: Optional[Callable] = None,
    valid: Sequence[str] = (),
    min_pairs: int = 0,
    devices: int = 1,
    max_tokens_per_device: int = 4096,
    lower_bound: Optional[Callable] = None,
    remeasure: Optional[Callable] = None,
    least_share: Optional[Callable] = None,
    holds: bool = False,
) -> Sized:
    """The settings for the corpora ``train`` (and the dev sets ``valid``, if given), and a budget of ``max_update``
    updates or of ``time_text`` (TIME=, turned into updates by ``speed``, a candidate's seconds per update here).
    Fewer than ``min_pairs`` lines are refused before any probe; ``devices``, ``max_tokens_per_device``,
    ``lower_bound``, ``remeasure`` and ``least_share`` as settings_for takes them. ``holds``: with TIME, also the
    fewest seconds at which the rule picks the same model (``holds_down_to``: where a training measures its machine
    slower than that, it re-picks; recipes/planner/repick.py)."""
    corpora = [find_corpus(spec, src, tgt) for spec in train]
    pairs = sum(count_lines(c.tsv or c.source) for c in corpora)
    if pairs < min_pairs:
        raise CorpusError(
            f"TRAIN has {pairs} lines: too few to train a translation model from scratch (MIN_PAIRS={min_pairs}; "
            "OPUS-MT does not train below 10,000). Add text, or set MIN_PAIRS if you mean it"
        )
    scripts = sides_scripts(corpora)
    words = words_a_line(corpora, scripts[1])
    valid_tokens = dev_tokens(corpora, [find_corpus(spec, src, tgt) for spec in valid], pairs, scripts[1], words)
    seconds = 0
    if time_text:
        if max_update is not None:
            raise CorpusError(
                f"TIME={time_text} and MAX_UPDATE={max_update}: give one budget (TIME is turned into updates here)"
            )
        try:
            seconds = parse_time(time_text)
        except BudgetError as e:
            raise CorpusError(str(e)) from None
    # the training set's target tokens, estimated as the dev set's: how many epochs a budget is
    found = settings_for(
        pairs,
        scripts,
        max_update,
        seconds,
        time_text,
        speed,
        valid_tokens,
        int(pairs * words * PIECES_PER_WORD),
        devices,
        max_tokens_per_device,
        lower_bound,
        remeasure,
        least_share,
    )
    found.valid_tokens = valid_tokens
    found.target_tokens = int(pairs * words * PIECES_PER_WORD)
    if holds and seconds:
        args = (valid_tokens, found.target_tokens, devices, max_tokens_per_device, lower_bound, None, least_share)
        found.holds_down_to = holds_down_to(
            lambda s: settings_for(pairs, scripts, None, s, time_text, speed, *args), seconds, found
        )
    return found


# a TIME's least seconds (parse_time's), and how close the bisection of holds_down_to comes (5%)
LEAST_SECONDS, HOLDS_WITHIN = 120, 1.05


def holds_down_to(pick_at: Callable[[int], Sized], seconds: int, found: Sized) -> int:
    """The fewest seconds (within HOLDS_WITHIN) at which ``pick_at`` picks ``found``'s model, as it does at
    ``seconds``: a larger budget never picks a smaller model (choosing.settled), so the model holds from there up.
    LEAST_SECONDS where it holds at the least TIME."""

    def same(s: int) -> bool:
        try:
            at = pick_at(s)
        except BudgetError:  # too short for any model's least updates
            return False
        return (at.arch, at.model_flags) == (found.arch, found.model_flags)

    low, high = LEAST_SECONDS, seconds  # the model holds at high; where it holds at low, it holds all the way down
    if same(low):
        return low
    while high > low * HOLDS_WITHIN:
        middle = int((low * high) ** 0.5)
        low, high = (low, middle) if same(middle) else (middle, high)
    return high
