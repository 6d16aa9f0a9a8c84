"""A TIME run that finds its machine much slower than planned, early on, stops for its model to be picked again.

The recipes pick a model for TIME from a probe of the machine (recipes/planner/), and a run re-plans its updates
when the machine turns out slower (training_progress). The model itself was the rule's pick for the probe's speed:
on a machine twice as slow, TIME buys half the training, for which the rule may pick a smaller model. The recipes
hand fairseq-train, in ``TRANSFORMER_PLUGIN_REPICK`` (JSON, recipes/planner/repick.py), the plan's seconds a target
token, TIME's seconds, and the fewest seconds for which the rule still picks this model (``holds_down_to``). At each
logged interval from the second on, while the training has spent less than ``within`` (a quarter) of its time:

    factor = (seconds an update / target tokens an update, measured) / the plan's seconds a target token
    at that speed, TIME is worth  start + (TIME - start) / factor  of the plan's

and where the factor is over REPLAN (20% slower) and that is under ``holds_down_to`` (the rule, had it known this
speed, would have picked another model), and the time left is a TIME of its own, the run stops at this update
(saved, not validated), writes ``repick.json`` with the figures in ``--save-dir``, and fairseq-train exits with
status EXIT. The recipe (recipes/engine/runner.py) sets the checkpoints aside and starts again, and the plan picks
for the time left at the speed measured (recipes/planner/repick.py). Once only: the plan of a re-pick hands no
``TRANSFORMER_PLUGIN_REPICK`` on. Per target token, not per update: fairseq's batches hold fewer tokens than the
probe's (83% on the 77k EN-DE pairs), which the updates' re-plan absorbs and this must not mistake for a slower
machine. On several workers the figures are the slowest worker's (training_progress._slowest), the same on all.
"""

import json
import logging
import os
import sys
import time
from typing import Dict, Optional

from fairseq.distributed import utils as distributed_utils

from ._patching import replace

UPSTREAM = None  # the recipes' own: nothing of fairseq's is wrong
CHECKED_AGAINST = "fairseq-fixed 0.12.3.1"
logger = logging.getLogger("progress")

ENVIRONMENT = "TRANSFORMER_PLUGIN_REPICK"
REQUEST = "repick.json"  # in --save-dir
EXIT = 75  # EX_TEMPFAIL: stopped for a re-pick (recipes/planner/repick.py reads the same figure)
REPLAN = 1.2  # as training_progress's: slower than this factor only
LEAST_SECONDS = 120  # the least TIME a plan takes (recipes/planner/probe_arithmetic.parse_time)

_LOADED = time.monotonic()  # about when fairseq-train started (the plugin loads as it parses its arguments)
_state: Dict = {}  # the request, once made


def asked() -> Optional[Dict]:
    """What the recipe handed over (TRANSFORMER_PLUGIN_REPICK), or None: no re-pick for this run."""
    text = os.environ.get(ENVIRONMENT, "")
    return json.loads(text) if text else None


def worth(given: Dict, seconds_an_update: float, tokens_an_update: float, spent: float) -> Optional[Dict]:
    """The re-pick's figures (module docstring) where the model no longer holds, else None. ``spent``: the seconds
    this training has run (its start included); ``tokens_an_update``: target tokens (fairseq's wpb)."""
    if tokens_an_update <= 0:
        return None
    measured = seconds_an_update / tokens_an_update
    factor = measured / float(given["seconds_a_token"])
    time_seconds, start = float(given["time_seconds"]), float(given["start_seconds"])
    left = time_seconds - spent
    worth_here = start + max(0.0, time_seconds - start) / factor
    if factor <= REPLAN or worth_here >= float(given["holds_down_to"]) or left < LEAST_SECONDS:
        return None
    return {
        "factor": round(factor, 3),
        "seconds_a_token": measured,
        "seconds_a_token_planned": float(given["seconds_a_token"]),
        "seconds_spent": round(spent),
        "time_left_seconds": round(left),
        "worth_at_the_plan_speed": round(worth_here),
        "holds_down_to": int(given["holds_down_to"]),
        "model": given["model"],
    }


def spent() -> float:
    """The seconds since about when this fairseq-train started."""
    return time.monotonic() - _LOADED


def check(
    cfg, update: int, seconds_an_update: float, tokens_an_update: float, trained: float, spent: float, is_master: bool
) -> bool:
    """At a logged interval (``trained``: fairseq's training seconds so far; ``spent``: the seconds since the run
    started, the slowest worker's): where a re-pick is worth it, the run stops at this update, unvalidated, and says
    so; True then."""
    given = asked()
    if given is None or _state or trained > float(given["within"]) * cfg.optimization.stop_time_hours * 3600:
        return False
    found = worth(given, seconds_an_update, tokens_an_update, spent)
    if found is None:
        return False
    found.update(at_update=update, seconds_an_update=round(seconds_an_update, 4), tokens_an_update=tokens_an_update)
    _state.update(found)
    cfg.optimization.max_update = update  # fairseq saves and ends after this interval
    cfg.dataset.disable_validation = True  # a validation of a model set aside would only cost time
    logger.info(
        f"time: re-pick at update {update:,}: {found['factor']:.2f} times the plan's seconds a target token "
        f"({found['seconds_a_token']:.3g} s here against {found['seconds_a_token_planned']:.3g}): at this speed "
        f"TIME is worth {found['worth_at_the_plan_speed']:,} s of the plan's, and {found['model']} needs "
        f"{found['holds_down_to']:,} s: training stops here for the recipe to pick the model again for the "
        f"{found['time_left_seconds']:,} s left"
    )
    if is_master and cfg.checkpoint.save_dir:
        os.makedirs(cfg.checkpoint.save_dir, exist_ok=True)
        with open(os.path.join(cfg.checkpoint.save_dir, REQUEST), "w") as f:
            json.dump(found, f, indent=1)
    return True


def _exiting_for_the_repick(original):
    def call_main(cfg, main, **kwargs):
        result = original(cfg, main, **kwargs)
        request = os.path.join(cfg.checkpoint.save_dir or "", REQUEST)
        # this process's flag, or (fairseq's spawned GPU workers) the request its first worker wrote during this run
        if _state or (asked() and os.path.exists(request) and os.path.getmtime(request) >= time.time() - spent()):
            sys.exit(EXIT)
        return result

    return call_main


def apply() -> None:
    """Only where the recipes ask for it (TRANSFORMER_PLUGIN_REPICK) does fairseq-train's exit status change."""
    if "fairseq_cli.train" in sys.modules:
        replace(distributed_utils, "call_main", _exiting_for_the_repick)
