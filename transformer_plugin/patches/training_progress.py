"""fairseq-train says how far it is and when it will end, and ends by its TIME: one line after each logged interval.

fairseq logs every ``--log-interval`` updates the losses, the update number and the seconds since it started
(``wall``), but neither ``--max-update`` nor the share done, nor when the run will end: the user of a run of
hours works it out by hand. With this patch the first worker logs after each interval's record

    progress | update 400 of 1,200 (33%) | 27 min elapsed | about 54 min left, ends 14:32 | valid loss 7.87

from fairseq's own logging (its format, its file; fairseq logs only the first worker's INFO). The time left
is the rate of this process (updates since it started or resumed, over the time since) times the updates
left; ``--patience`` or ``--stop-time-hours`` may end the run sooner. The last validation's loss (and BLEU,
with ``--eval-bleu``) is added once there is one. Without ``--max-update`` nothing is added. Only fairseq-train
is changed (``fairseq_cli.train`` loaded before the plugin); fairseq-generate and the others are left as they are.

With ``--stop-time-hours`` (what a recipe's TIME becomes) the line never promises an end past it: where the updates
left would pass the deadline at this run's rate, it says how many fit and that TIME ends it,

    progress | update 500 of about 560 (89%) | 19 min elapsed | about 2 min left, TIME ends it at 02:21

and the run re-plans what remains (:func:`fitting`): from its second logged interval on, at the seconds an update
measured over its last WINDOW intervals (the first, with the start's costs, left out; validations timed apart, each
costing the dearest so far at the machine's speed now, :func:`validation_cost`), where ``--max-update`` would pass
the deadline (fairseq would stop it there, then validate past it) or more than REPLAN times it fit by then,
``--max-update`` becomes those that fit less a MARGIN, and never more than the plan's own: a machine that slows
re-plans down, one that quiets again back up towards the plan. Where the time alone bounds the updates
(``TRANSFORMER_PLUGIN_TIME_FILLS=1``, which the recipes set when no cap of theirs, a fine-tuning's epochs or the
updates a corpus can use, is lower), a run faster than its plan re-plans up past it too, to use the time it was given.
The run then ends at its own last update, validated and saved, rather than cut by the clock; the log says so, with
the figures, and ``time_budget.json`` in ``--save-dir`` records them. On several workers the slowest worker's
figures decide, the same on every worker.

The schedule follows the run's new length (:func:`schedule_for`): checkpoints laid out by the recipes' rule (every
1,000 updates, or 20 in all where that is less: the last five averaged span a quarter of the run) are laid out
again over the updates that now fit (the validations with them, where they came with the checkpoints), and a warm-up
not yet over is shortened or lengthened in proportion (Eq. (3)'s
``vaswani_inverse_sqrt``, fairseq's ``inverse_sqrt``), so that a run cut to a third neither averages checkpoints from
its first half nor ends still warming up. A checkpoint interval given otherwise is left as it is.
"""

import datetime
import json
import logging
import os
import sys
import time
from typing import Dict, List, Optional, Tuple

from fairseq.logging import progress_bar

from . import time_repick
from ._patching import replace
from ._units import duration

UPSTREAM = ""
CHECKED_AGAINST = "fairseq-fixed 0.12.3.1"
logger = logging.getLogger("progress")

_run: Dict = {}  # max_update and the plan's, where this process started, the intervals measured, the validations', ...

# a run re-plans where --max-update would pass --stop-time-hours (fairseq would stop it there and validate past it),
# or where more than this factor (20%) of it fit by then
REPLAN = 1.2
# the share of the updates left that a re-plan leaves unplanned, as the plan's margin does, so that the next interval's
# noise does not re-plan again
MARGIN = 0.05
# set to 1 where the time alone bounds the updates (the recipes' plan: no cap of theirs lower): re-planned up past
# --max-update too
TIME_FILLS = "TRANSFORMER_PLUGIN_TIME_FILLS"


# the logged intervals a run's seconds an update are measured over: a machine loaded partway through a run is seen
# within this many intervals
WINDOW = 5


def when(end: datetime.datetime, now: datetime.datetime) -> str:
    return end.strftime("%H:%M") if end.date() == now.date() else end.strftime("%a %d %b %H:%M")


def line(
    update: int,
    max_update: int,
    started: float,
    start_update: int,
    now: float,
    valid: Optional[Dict] = None,
    clock: Optional[datetime.datetime] = None,
    deadline: Optional[float] = None,
) -> str:
    """The progress line at ``update`` of ``max_update``, this process having started at ``started`` (seconds,
    monotonic) at ``start_update``; ``deadline``: the seconds --stop-time-hours leaves (None: no TIME)."""
    elapsed = now - started
    clock = clock or datetime.datetime.now()
    parts = [f"update {update:,} of {max_update:,} ({100 * update / max_update:.0f}%)", f"{duration(elapsed)} elapsed"]
    done = update - start_update
    if done > 0 and update < max_update:
        left = elapsed / done * (max_update - update)
        if deadline is not None and left > deadline:
            fit = update + int(max(0.0, deadline) * done / elapsed)
            parts[0] = f"update {update:,} of about {fit:,} ({100 * update / max(fit, 1):.0f}%)"
            end = clock + datetime.timedelta(seconds=max(0.0, deadline))
            parts.append(f"about {duration(max(0.0, deadline))} left, TIME ends it at {when(end, clock)}")
        else:
            end = clock + datetime.timedelta(seconds=left)
            parts.append(f"about {duration(left)} left, ends {when(end, clock)}")
    if valid:
        parts.append(" ".join(f"valid {k} {float(valid[k]):.2f}" for k in ("loss", "bleu") if k in valid))
    return " | ".join(parts)


def fitting(
    update: int,
    max_update: int,
    planned: Optional[int],
    seconds_an_update: float,
    deadline: float,
    validation: Tuple[float, int],
) -> Optional[int]:
    """The updates to train now, where ``max_update`` would pass the deadline (``deadline`` seconds from now) or falls
    short of it by more than REPLAN times: those that fit at ``seconds_an_update`` and a validation of
    ``validation[0]`` seconds each ``validation[1]`` updates (0: none timed yet), the last validation, at the end,
    paid first, less MARGIN of the updates left; never more than ``planned`` (None: the time alone bounds them). Else
    None: ``max_update`` holds."""
    seconds, every = validation
    per_update = seconds_an_update + (seconds / every if every > 0 else 0.0)
    left = max(0.0, deadline - seconds) / per_update
    if update + left >= max_update and (update + left) < max_update * REPLAN:
        return None  # it ends by the deadline, and not far before it
    fit = update + int(left * (1 - MARGIN))
    target = max(fit, update + 1) if planned is None else min(planned, max(fit, update + 1))
    return target if target != max_update else None


# the recipes' checkpoints (recipes/planner/decide.py, schedule): every CHECKPOINTS_CAP updates, or CHECKPOINTS in all
CHECKPOINTS, CHECKPOINTS_CAP = 20, 1000


def laid_out(max_update: int) -> int:
    """The recipes' checkpoint interval for a run of ``max_update`` updates."""
    return min(CHECKPOINTS_CAP, max(1, max_update // CHECKPOINTS))


def schedule_for(update: int, before: int, fit: int, interval: int, warmup: int) -> Tuple[int, Optional[int]]:
    """(the checkpoint interval, the warm-up's updates or None where unchanged) of a run re-planned at ``update`` from
    ``before`` updates to ``fit``: an ``interval`` the recipes' rule laid out over ``before`` is laid out over ``fit``
    (another is kept); a ``warmup`` not over yet is scaled by fit / before, never ending before the next update."""
    if interval and interval == laid_out(before):
        interval = laid_out(fit)
    if warmup and update < warmup:
        return interval, max(update + 1, round(warmup * fit / max(1, before)))
    return interval, None


def _warm_up_over(trainer, warmup: int) -> None:
    """The schedule's warm-up set to ``warmup`` updates mid-run: Eq. (3)'s, or fairseq's inverse_sqrt's."""
    scheduler = trainer.lr_scheduler
    config = scheduler.cfg
    config.warmup_updates = warmup
    if hasattr(scheduler, "warmup_steps"):  # Eq. (3) (transformer_plugin/lr_scheduler/inverse_sqrt.py)
        from ..lr_scheduler.inverse_sqrt import effective_multiplier

        scheduler.warmup_steps = warmup
        peak = getattr(config, "peak_warmup_updates", None)
        scheduler.multiplier = effective_multiplier(warmup, config.lr_multiplier, peak)
    elif hasattr(scheduler, "lr_step") and hasattr(scheduler, "decay_factor"):  # fairseq's inverse_sqrt
        peak = config.lr[0] if isinstance(config.lr, (list, tuple)) or hasattr(config.lr, "__len__") else config.lr
        scheduler.lr_step = (peak - config.warmup_init_lr) / warmup
        scheduler.decay_factor = peak * warmup**0.5
    else:
        return
    scheduler.step_update(trainer.get_num_updates())


class _Reporting:
    """fairseq's progress bar, with the progress line after each train_inner record."""

    def __init__(self, bar):
        self._bar = bar

    def __getattr__(self, name):
        return getattr(self._bar, name)

    def __iter__(self):
        return iter(self._bar)

    def __len__(self):
        return len(self._bar)

    def log(self, stats, tag=None, step=None):
        self._bar.log(stats, tag=tag, step=step)
        if tag == "train_inner" and step and _run.get("max_update"):
            started, start_update = _run["start"]
            now, deadline = time.monotonic(), _deadline()
            window = _run.setdefault("window", [])  # the first interval, the start's costs in it, is not measured
            window.append((now, int(step), _run.get("validating", 0.0)))
            del window[: -WINDOW - 1]
            if deadline is not None and len(window) > 1:
                (then, at, validated), (_, _, validating) = window[0], window[-1]
                seconds_an_update = (now - then - (validating - validated)) / max(1, int(step) - at)
                _measured(int(step), seconds_an_update, deadline, float(stats.get("wpb", 0) or 0))
            logger.info(
                line(int(step), _run["max_update"], started, start_update, now, _run.get("valid"), deadline=deadline)
            )

    def print(self, stats, tag=None, step=None):
        self._bar.print(stats, tag=tag, step=step)
        if tag and tag.startswith("valid"):
            _run["valid"] = {k: stats[k] for k in ("loss", "bleu") if k in stats}


def _reporting(original):
    def progress_bar_with_progress(*args, **kwargs):
        return _Reporting(original(*args, **kwargs))

    return progress_bar_with_progress


def _deadline() -> Optional[float]:
    """The seconds --stop-time-hours leaves of the training's time (fairseq's clock: trainer.cumulative_training_time,
    a resumed run's earlier time included), or None without it."""
    cfg, trainer = _run.get("cfg"), _run.get("trainer")
    if cfg is None or not cfg.optimization.stop_time_hours or cfg.optimization.stop_time_hours <= 0:
        return None
    return cfg.optimization.stop_time_hours * 3600 - float(trainer.cumulative_training_time())  # a tensor on workers


def _slowest(seconds_an_update: float, deadline: float, validation: float, spent: float) -> Tuple[float, ...]:
    """The slowest worker's seconds an update, validation and seconds since it started, and the least deadline, the
    same on every worker: each reaches this at the same logged update, so all of them re-plan (and re-pick) alike and
    end at the same update."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return seconds_an_update, deadline, validation, spent
    import torch

    figures = torch.tensor([seconds_an_update, -deadline, validation, spent], dtype=torch.float64)
    if dist.get_backend() == "nccl":
        figures = figures.cuda()
    dist.all_reduce(figures, op=dist.ReduceOp.MAX)
    return float(figures[0]), -float(figures[1]), float(figures[2]), float(figures[3])


def validation_cost(validations: List[Tuple[float, Optional[float]]], seconds_an_update: float) -> float:
    """What the next validation costs: the dearest so far, each of ``validations`` (seconds it took, the seconds an
    update measured when it ran, None: not yet measured) at the machine's speed now (``seconds_an_update``): one timed
    on a quiet core costs twice as much on a core another process shares."""
    return max((took * (seconds_an_update / then if then else 1.0) for took, then in validations), default=0.0)


def _measured(update: int, seconds_an_update: float, deadline: float, tokens_an_update: float) -> None:
    """At a logged interval with TIME: the run stops for a re-pick (time_repick), or re-plans its updates."""
    cfg = _run["cfg"]
    _run["seconds_an_update"] = seconds_an_update
    cost = validation_cost(_run.get("validations", []), seconds_an_update)
    seconds_an_update, deadline, validating, spent = _slowest(seconds_an_update, deadline, cost, time_repick.spent())
    trained = cfg.optimization.stop_time_hours * 3600 - deadline
    if time_repick.check(cfg, update, seconds_an_update, tokens_an_update, trained, spent, _run["is_master"]):
        _run["max_update"] = update  # it ends here
    else:
        _replan(update, seconds_an_update, deadline, validating)


def _replan(update: int, seconds_an_update: float, deadline: float, validating: float) -> None:
    cfg = _run["cfg"]
    validation = (validating, cfg.checkpoint.save_interval_updates or 0)
    cap = None if os.environ.get(TIME_FILLS) == "1" else _run["planned"]
    fit = fitting(update, cfg.optimization.max_update, cap, seconds_an_update, deadline, validation)
    if fit is None:
        return
    was = cfg.optimization.max_update
    interval = cfg.checkpoint.save_interval_updates or 0
    warmup = int(getattr(getattr(cfg, "lr_scheduler", None), "warmup_updates", 0) or 0)
    for _ in range(2):  # the validations the new interval gives change the updates that fit, a little
        interval_now, warmup_now = schedule_for(update, was, fit, interval, warmup)
        fit = min(fit, fitting(update, was, cap, seconds_an_update, deadline, (validating, interval_now)) or fit)
    interval_now, warmup_now = schedule_for(update, was, fit, interval, warmup)
    cfg.optimization.max_update = _run["max_update"] = fit
    cfg.checkpoint.save_interval_updates = interval_now
    dataset = getattr(cfg, "dataset", None)  # the recipes validate where they save: the validations follow
    if dataset is not None and getattr(dataset, "validate_interval_updates", 0) == interval:
        dataset.validate_interval_updates = interval_now
    if warmup_now is not None:
        _warm_up_over(_run["trainer"], warmup_now)
    record = {
        "at_update": update,
        "max_update_planned": _run["planned"],
        "max_update_before": was,
        "max_update_now": fit,
        "seconds_an_update_measured": round(seconds_an_update, 4),
        "seconds_an_update_the_plan_allowed": round(
            (deadline + float(_run["trainer"].cumulative_training_time())) / was, 4
        ),
        "validation_seconds": round(validating, 2),
        "deadline_seconds_left": round(deadline),
        "save_interval_updates": [interval, interval_now],
        "warmup_updates": [warmup, warmup_now if warmup_now is not None else warmup],
    }
    _run.setdefault("replans", []).append(record)
    allowed = record["seconds_an_update_the_plan_allowed"]
    logger.info(
        f"time: re-planned at update {update:,}: {seconds_an_update:.3g} s an update here, where --max-update {was:,} "
        f"needed at most {allowed:.3g} s within --stop-time-hours; {fit:,} updates fit, and --max-update is now that"
        + (f"; checkpoints every {interval_now:,} updates (were {interval:,})" if interval_now != interval else "")
        + (f"; the warm-up ends at update {warmup_now:,} (was {warmup:,})" if warmup_now is not None else "")
    )
    if _run["is_master"] and cfg.checkpoint.save_dir:
        os.makedirs(cfg.checkpoint.save_dir, exist_ok=True)
        with open(os.path.join(cfg.checkpoint.save_dir, "time_budget.json"), "w") as f:
            json.dump({"replans": _run["replans"]}, f, indent=1)


def _knowing_the_run(original):
    def train(cfg, trainer, task, epoch_itr):
        _run["max_update"] = cfg.optimization.max_update
        _run.setdefault("planned", cfg.optimization.max_update)
        _run.update(cfg=cfg, trainer=trainer, is_master=trainer.data_parallel_rank == 0)
        _run.setdefault("start", (time.monotonic(), trainer.get_num_updates()))
        return original(cfg, trainer, task, epoch_itr)

    return train


def _a_run_of_its_own(original):
    def main(cfg, *args, **kwargs):  # a second fairseq-train in one process (the tests, a notebook) starts afresh
        _run.clear()
        return original(cfg, *args, **kwargs)

    return main


def _timing_validations(original):
    def validate(cfg, trainer, task, epoch_itr, subsets):
        began = time.monotonic()
        try:
            return original(cfg, trainer, task, epoch_itr, subsets)
        finally:
            took = time.monotonic() - began
            _run["validating"] = _run.get("validating", 0.0) + took  # kept out of the seconds an update
            _run.setdefault("validations", []).append((took, _run.get("seconds_an_update")))  # validation_cost

    return validate


def apply() -> None:
    """Only inside fairseq-train (its module is loaded before it imports the plugin); other programs unchanged."""
    train_module = sys.modules.get("fairseq_cli.train")
    if train_module is not None:
        replace(progress_bar, "progress_bar", _reporting)
        replace(train_module, "main", _a_run_of_its_own)
        replace(train_module, "train", _knowing_the_run)
        replace(train_module, "validate", _timing_validations)
