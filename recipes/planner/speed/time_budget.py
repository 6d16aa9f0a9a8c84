"""A budget of TIME or MAX_UPDATE at a probe's figure: the updates that fit, how long they take with their validations,
and fairseq's --stop-time-hours, as the recipe's variables."""

from typing import Callable, Dict

from recipes.planner.probe_arithmetic import (
    LEAST_VALIDATIONS,
    TIME_STARTUP_SECONDS,
    BudgetError,
    parse_time,
    training_time,
    updates_that_fit,
    validation_interval,
    validation_seconds,
    validations,
)
from recipes.planner.speed import machine, probe_cache
from recipes.planner.speed.probing import Probe
from transformer_plugin_cli.files import duration


def no_cuda(time_text: str) -> BudgetError:
    """A TIME for GPUs on a machine with none (a login node): nothing to measure their speed on."""
    return BudgetError(
        f"TIME={time_text}: this machine has no CUDA device to measure the GPUs' speed on: run where the "
        "GPUs are (a dry run there prints the MAX_UPDATE it gives), or give MAX_UPDATE"
    )


MIN_UPDATES = 100  # a TIME that fits fewer is refused (a cap given beside it, if lower, is enough)


def check_enough(
    fit: int, least: int, time_text: str, per_update: float, tokens_per_update: int, valid_tokens: int, bleu: bool
) -> None:
    """Refuse a TIME that fits fewer than ``least`` updates where the time is what stops it (a cap given beside TIME
    below that, a fine-tuning's epochs of a few hundred pairs, is what the run needs), naming the validations' cost."""
    if fit >= least:
        return
    one = validation_seconds(per_update, tokens_per_update, valid_tokens, bleu)
    raise BudgetError(
        f"TIME={time_text}: {fit} updates of {per_update:.1f} s fit here, too few to learn anything ({least} at "
        f"least), beside validations of {one:.0f} s each over the dev set's {valid_tokens:,} target tokens"
        f"{' translated for the dev BLEU' if bleu else ''}: a longer TIME, a smaller model or dev set"
    )


def budget(
    probe: Probe,
    time_text: str = "",
    max_update: int = 0,
    tokens_per_update: int = 0,
    valid_tokens: int = 0,
    interval: int = 0,
    speed: Callable[[Probe], Dict[str, object]] = None,
    here: bool = True,
    bleu: bool = False,
    least: int = MIN_UPDATES,
) -> Dict[str, str]:
    """The recipe's variables for a budget of TIME (``time_text``: updates from this machine's speed) or of
    ``max_update`` updates (with TIME: at most that many, the size class's full run): SECONDS_PER_UPDATE, MAX_UPDATE,
    TRAINING_SECONDS, TRAINING_TIME (said for people) and, for TIME, STOP_TIME_HOURS. The validations are counted
    over a dev set of ``valid_tokens`` target tokens, one every ``interval`` updates (0: the recipe's own), against
    updates of ``tokens_per_update`` (in all; 0: the probe's); ``bleu``: each validation translates the dev set too
    (--eval-bleu); ``least``: the fewest updates a TIME may fit (a fine-tuning's: an epoch of its corpus, where that is
    fewer than MIN_UPDATES: the parent has learnt the rest). A run resumed keeps what its plan decided
    (recipes/planner/saved.py: WORK/plan.json). ``speed``: how the probe's figure is had
    (seconds_per_update, by default); ``here`` False: its figures come from another machine's speed file, so this
    one need not have the devices."""
    tokens_per_update = tokens_per_update or probe.tokens_per_update
    if (
        here and probe.device == "cuda" and not machine.cuda_here()
    ):  # a dry run on a login node, say: nothing to measure here
        if time_text:
            raise no_cuda(time_text)
        return {
            "SECONDS_PER_UPDATE": "0",
            "MAX_UPDATE": str(max_update),
            "TRAINING_SECONDS": "0",
            "TRAINING_TIME": f"{max_update:,} updates; how long, the machine with the GPUs says (none here to measure)",
            "TRAINING_SHORT": f"{max_update:,} updates, how long unknown here (no GPU to measure)",
        }
    found = (speed or probe_cache.seconds_per_update)(probe)
    per_update = float(found["seconds"])
    values = {}
    if time_text:
        seconds = parse_time(time_text)
        if not interval:  # validations that would take more than their share of the time come further apart
            interval = validation_interval(seconds, per_update, tokens_per_update, valid_tokens, bleu)
            if interval:
                values["SAVE_INTERVAL_UPDATES"] = str(interval)
        fit = updates_that_fit(seconds, per_update, tokens_per_update, valid_tokens, interval, bleu)
        least = min(least, max_update) if max_update else least
        check_enough(fit, least, time_text, per_update, tokens_per_update, valid_tokens, bleu)
        # TIME_FILLS: the time, not a cap, bounds the updates: a run faster than planned trains more of them
        # (transformer_plugin/patches/training_progress.py)
        values["TIME_FILLS"] = "1" if not max_update or fit < max_update else "0"
        max_update = min(fit, max_update) if max_update else fit  # a cap given beside TIME: the size class's own
        if "SAVE_INTERVAL_UPDATES" in values and max_update // interval < LEAST_VALIDATIONS:  # a cap ends it sooner
            interval = max(1, max_update // LEAST_VALIDATIONS)
            values["SAVE_INTERVAL_UPDATES"] = str(interval)
        values["STOP_TIME_HOURS"] = f"{(seconds - TIME_STARTUP_SECONDS) / 3600:.4f}"
    total = training_time(max_update, per_update, tokens_per_update, valid_tokens, interval, bleu)
    source = (
        found.get("said")
        or f"a probe of this machine, {probe_cache.measured(found)}; kept in {probe_cache.cache_file()}"
    )
    where = "on the speed file's machines" if found.get("said") else "here"
    said = f"{duration(total)} {where}: {max_update:,} updates of {per_update:.2f} s ({source})"
    translated = " (each also translating it for the dev BLEU)" if bleu else ""
    if valid_tokens:
        said += f", and {validations(max_update, interval)} validations of about {valid_tokens:,} target tokens"
        said += translated
    short = f"about {duration(total)} {where} ({max_update:,} updates of {per_update:.2f} s"
    short += (
        f", {validations(max_update, interval)} validations{' with BLEU' if bleu else ''})" if valid_tokens else ")"
    )
    values.update(
        {
            "SECONDS_PER_UPDATE": f"{per_update:.4f}",
            "MAX_UPDATE": str(max_update),
            "TRAINING_SECONDS": str(int(total)),
            "TRAINING_TIME": said,
            "TRAINING_SHORT": short,
        }
    )
    return values
