"""fairseq-train says how far it is and when it will end: one line after each logged interval.

fairseq logs every ``--log-interval`` updates the losses, the update number and the seconds since it started
(``wall``), but neither ``--max-update`` nor the share done, nor when the run will end: the user of a run of
hours works it out by hand. With this patch the first worker logs after each interval's record

    progress | update 400 of 1,200 (33%) | 27 min elapsed | about 54 min left, ends 14:32 | valid loss 7.87

from fairseq's own logging (its format, its file; fairseq logs only the first worker's INFO). The time left
is the rate of this process (updates since it started or resumed, over the time since) times the updates
left; ``--patience`` or ``--stop-time-hours`` may end the run sooner. The last validation's loss (and BLEU,
with ``--eval-bleu``) is added once there is one. Without ``--max-update`` nothing is added. Only fairseq-train
is changed (``fairseq_cli.train`` loaded before the plugin); fairseq-generate and the others are left as they are.
"""

import datetime
import logging
import sys
import time
from typing import Dict, Optional

from fairseq.logging import progress_bar

from ._patching import replace
from ._units import duration

UPSTREAM = ""
CHECKED_AGAINST = "fairseq-fixed 0.12.3.1"
logger = logging.getLogger("progress")

_run: Dict = {}  # max_update, and (time, update) where this process started


def line(
    update: int,
    max_update: int,
    started: float,
    start_update: int,
    now: float,
    valid: Optional[Dict] = None,
    clock: Optional[datetime.datetime] = None,
) -> str:
    """The progress line at ``update`` of ``max_update``, this process having started at ``started`` (seconds,
    monotonic) at ``start_update``."""
    elapsed = now - started
    parts = [f"update {update:,} of {max_update:,} ({100 * update / max_update:.0f}%)", f"{duration(elapsed)} elapsed"]
    done = update - start_update
    if done > 0 and update < max_update:
        left = elapsed / done * (max_update - update)
        end = (clock or datetime.datetime.now()) + datetime.timedelta(seconds=left)
        when = (
            end.strftime("%H:%M")
            if end.date() == (clock or datetime.datetime.now()).date()
            else end.strftime("%a %d %b %H:%M")
        )
        parts.append(f"about {duration(left)} left, ends {when}")
    if valid:
        parts.append(" ".join(f"valid {k} {float(valid[k]):.2f}" for k in ("loss", "bleu") if k in valid))
    return " | ".join(parts)


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
            logger.info(line(int(step), _run["max_update"], started, start_update, time.monotonic(), _run.get("valid")))

    def print(self, stats, tag=None, step=None):
        self._bar.print(stats, tag=tag, step=step)
        if tag and tag.startswith("valid"):
            _run["valid"] = {k: stats[k] for k in ("loss", "bleu") if k in stats}


def _reporting(original):
    def progress_bar_with_progress(*args, **kwargs):
        return _Reporting(original(*args, **kwargs))

    return progress_bar_with_progress


def _knowing_the_run(original):
    def train(cfg, trainer, task, epoch_itr):
        _run["max_update"] = cfg.optimization.max_update
        _run.setdefault("start", (time.monotonic(), trainer.get_num_updates()))
        return original(cfg, trainer, task, epoch_itr)

    return train


def apply() -> None:
    """Only inside fairseq-train (its module is loaded before it imports the plugin); other programs unchanged."""
    train_module = sys.modules.get("fairseq_cli.train")
    if train_module is not None:
        replace(progress_bar, "progress_bar", _reporting)
        replace(train_module, "train", _knowing_the_run)
